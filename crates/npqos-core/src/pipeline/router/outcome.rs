//! What the pipeline reports: its time series ([`Pipeline::sample`]), its flow and class
//! counters ([`Pipeline::tables`]) and, at the end, its measurements and the stages' state
//! ([`Pipeline::into_outcome`]), as plain values the driver writes in its own formats.

use super::*;
use crate::pipeline::ConservationError;

/// A time series: (time s, value) points.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub name: String,
    pub unit: &'static str,
    pub points: Vec<(f64, f64)>,
}

/// One class (service) with its counters and its end-to-end delay percentiles, ns.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassRow {
    pub name: String,
    pub counts: RowCounts,
    pub delay_p50_ns: f64,
    pub delay_p99_ns: f64,
}

/// The flow and class counters (docs/pipeline.md, "Flow and class counters"): the rows of the
/// driver's [`FlowIndex`] (an exact row for each flow of its table, in the order first seen;
/// a row for every flow past it), the classes, and the drop reasons the configuration can give
/// (indices of [`DROPS`], [`Pipeline::reasons`]), the ones a driver writes.
#[derive(Clone, Debug, PartialEq)]
pub struct Tables {
    pub flows: Vec<RowCounts>,
    pub other: RowCounts,
    pub classes: Vec<ClassRow>,
    pub reasons: Vec<usize>,
    /// The service names, by index (a flow row's class).
    pub services: Vec<String>,
}

/// Everything a finished run reports (docs/router.md, "Outputs").
pub struct Outcome {
    pub names: Vec<String>,
    pub offered: Vec<u64>,
    pub delivered: Vec<u64>,
    pub delivered_bytes: u64,
    pub last_delivery_ns: u64,
    pub late: Vec<u64>,
    pub drops: [u64; DROPS.len()],
    /// The reasons of [`DROPS`] this run writes (the ones its configuration can give).
    pub reasons: Vec<usize>,
    pub drops_by_service: Vec<u64>,
    pub unclassified: u64,
    pub in_flight: u64,
    /// Per service: ingress, processing, egress and end-to-end latency ([`STAGES`]), ns.
    pub hist: Vec<[hdrhistogram::Histogram<u64>; 4]>,
    pub sim_ns: u64,
    pub events: u64,
    pub link_bps: f64,
    pub processors: u32,
    /// (name, value, unit) of the stages' own counters and state.
    pub stage_scalars: Vec<(String, f64, &'static str)>,
    pub series: Vec<Line>,
    pub tables: Tables,
    /// Conservation at every element's ports ([`Pipeline::check_elements`]).
    pub elements: Result<(), ConservationError>,
    pub trace: Option<Vec<Trace>>,
    /// The packet functions' reports (the first [`MAX_DETECTIONS`]), in the order found.
    pub detections: Vec<Found>,
}

/// Counts so far at sample times `t` (s) as the count over each sample's interval (the first:
/// since 0), divided by the interval's length with `rate`.
pub fn per_interval(t: &[f64], cum: &[f64], rate: bool) -> Vec<f64> {
    let mut prev = (0.0, 0.0);
    (t.iter().zip(cum))
        .map(|(&t, &c)| {
            let (d, dt) = (c - prev.1, t - prev.0);
            prev = (t, c);
            match rate {
                true if dt > 0.0 => d / dt,
                true => 0.0,
                false => d,
            }
        })
        .collect()
}

impl Pipeline {
    pub(super) fn sample(&mut self, now: u64, fx: &mut Effects) {
        let sm = &mut self.samples;
        sm.t.push(now as f64 * 1e-9);
        sm.ingress_in_use.push(self.ingress.in_use().0 as f64);
        for s in 0..sm.processors.len() {
            let pr = self.processing.as_ref();
            sm.processors[s].push(pr.map_or(0, |pr| pr.allocated(s)) as f64);
            sm.offered[s].push(self.offered[s] as f64);
            sm.late[s].push(pr.map_or(0, |pr| pr.late()[s]) as f64);
        }
        let (mut total, mut max) = (0u64, 0u64);
        if let Shaping::Event(e) = self.egress.shaping() {
            for c in 0..e.cores() {
                let n = e.waiting(CoreId(c as u32)) as u64;
                total += n;
                max = max.max(n);
            }
        }
        sm.heap_total.push(total as f64);
        sm.heap_max_core = sm.heap_max_core.max(max);
        sm.egress_backlog.push(self.egress_backlog as f64);
        let next = now + self.p.sample_every.as_nanos();
        if next <= self.end + self.p.drain.as_nanos() {
            fx.at(Instant::from_nanos(next), C_SAMPLE, Ev::Sample);
        }
    }

    /// With the caller's ring as the link, a frame's ingress time is its end-to-end time and
    /// its egress time none, so only the end-to-end histogram is recorded per frame: the
    /// ingress and egress histograms are made from it here (the egress one as 1 ns per frame,
    /// the histograms' least value, as the serializer's link records a transmission starting
    /// at once).
    fn ring_stages(&mut self) {
        if !self.link.is_ring() || !self.direct {
            return;
        }
        for h in &mut self.hist {
            h[0] = h[3].clone();
            h[2].reset();
            h[2].record_n(1, h[3].len());
        }
    }

    /// The flow and class counters (docs/pipeline.md, "Flow and class counters").
    pub fn tables(&self) -> Tables {
        let classes = (self.p.services.iter().zip(&self.classes).zip(&self.hist))
            .map(|((s, c), h)| {
                let e2e = h[3].histogram();
                let q = |x: f64| if e2e.is_empty() { 0.0 } else { e2e.value_at_quantile(x) as f64 };
                ClassRow { name: s.name.clone(), counts: *c, delay_p50_ns: q(0.5), delay_p99_ns: q(0.99) }
            })
            .collect();
        Tables {
            flows: self.flows.clone(),
            other: self.other_flows,
            classes,
            reasons: self.reasons(),
            services: self.p.services.iter().map(|s| s.name.clone()).collect(),
        }
    }

    /// The classes of several pipelines of one configuration together (`npqos live` on several
    /// threads, each with a pipeline of its own): counters summed, delay percentiles of the
    /// union of their delays (the histograms added, so exact to the histograms' 3 digits).
    pub fn classes_of(parts: &[&Pipeline]) -> Vec<ClassRow> {
        let Some(first) = parts.first() else { return Vec::new() };
        let mut rows = first.tables().classes;
        for (s, row) in rows.iter_mut().enumerate() {
            let mut e2e = first.hist[s][3].histogram();
            for p in &parts[1..] {
                if let (Some(c), Some(h)) = (p.classes.get(s), p.hist.get(s)) {
                    row.counts.add(c);
                    let _ = e2e.add(h[3].histogram());
                }
            }
            let q = |x: f64| if e2e.is_empty() { 0.0 } else { e2e.value_at_quantile(x) as f64 };
            (row.delay_p50_ns, row.delay_p99_ns) = (q(0.5), q(0.99));
        }
        rows
    }

    /// The drop reasons this configuration can give, as indices of [`DROPS`], in the order its
    /// results list them: the router's six (and `ingress_queue_full` with a queue limit); with
    /// the caller's ring as the link (live's forwarder), the ingress's, the bucket's and the
    /// ring's.
    pub fn reasons(&self) -> Vec<usize> {
        let mut r = if self.link.is_ring() && self.direct {
            vec![D_UNCLASSIFIED, D_BUFFER, D_NO_QUEUE, D_QUEUE_FULL, D_BUCKET, D_OVERSIZE]
        } else if self.link.is_ring() {
            // With processors: late packets and a full egress buffer too.
            vec![D_UNCLASSIFIED, D_BUFFER, D_NO_QUEUE, D_QUEUE_FULL, D_LATE, D_BUCKET, D_EGRESS, D_OVERSIZE]
        } else {
            let mut r: Vec<usize> = (0..=D_EGRESS).collect();
            if self.p.table.queue_limit.is_some() {
                r.push(D_QUEUE_FULL);
            }
            r
        };
        if self.aqm.is_some() || self.p.ingress == IngressKind::FqCodel {
            r.push(D_CODEL);
        }
        r
    }

    /// The measurements and the stages' state (docs/router.md, "Outputs") at `end_ns`, after
    /// `events` events.
    pub fn into_outcome(mut self, events: u64, end_ns: u64) -> Outcome {
        self.ring_stages();
        let tables = self.tables();
        let reasons = self.reasons();
        let elements = self.check_elements();
        let span = end_ns.max(1) as f64 * 1e-9;
        let mut st: Vec<(String, f64, &'static str)> = Vec::new();
        let mut put = |n: &str, v: f64, u: &'static str| st.push((n.to_string(), v, u));
        // Stage 3.
        let (_, max_in_use) = self.ingress.in_use();
        put("ingress_queues_max", max_in_use as f64, "queues");
        put("ingress_state_bytes", self.ingress.state_bytes() as f64, "B");
        put("ingress_table_accesses_per_s", self.ingress.table_accesses() as f64 / span, "accesses/s");
        // Stage 4.
        let pr = self.processing.as_ref();
        put("context_switches", pr.map_or(0, Processing::switches) as f64, "switches");
        put("processing_state_bytes", pr.map_or(0, |pr| pr.state_bytes(self.nqi)) as f64, "B");
        // The packet functions (scalars only for the services that have one).
        if let Some(f) = pr.map(Processing::functions).filter(|f| f.any()) {
            for (s, svc) in self.p.services.iter().enumerate() {
                if let Some(u) = f.untracked(s) {
                    put(&format!("detections.{}", svc.name), f.found[s] as f64, "detections");
                    put(&format!("function_untracked.{}", svc.name), u as f64, "packets");
                }
            }
        }
        // Stage 5.
        let c = self.qmem.counters;
        put("qmem_ops", c.ops as f64, "ops");
        put("qmem_hit_rate", c.hits as f64 / c.ops.max(1) as f64, "fraction");
        put("qmem_wait_mean", c.wait_ns as f64 / c.ops.max(1) as f64 / 1e3, "us");
        put("qmem_state_bytes", self.qmem.state_bytes() as f64, "B");
        put("qmem_offchip_per_s", c.memory_refs as f64 / span, "accesses/s");
        // Stage 6.
        let (reschedules, offchip, bytes) = match self.egress.shaping() {
            Shaping::None => (0.0, 0.0, 0.0),
            Shaping::Event(e) => {
                let h = e.heap_counters();
                let heap_peak = self.samples.heap_max_core as f64 * e.cores() as f64;
                (
                    e.counters().reschedules as f64,
                    (e.counters().bucket_accesses + h.off_chip()) as f64,
                    e.bucket_state_bytes() as f64 + heap_peak * crate::shaper::heap::NODE_BYTES as f64,
                )
            }
            Shaping::Periodic(p) => (
                p.counters().throttles as f64,
                (p.fill_accesses(Instant::from_nanos(end_ns)) + 2 * p.counters().sends) as f64,
                p.bucket_state_bytes() as f64,
            ),
        };
        put("shaper_reschedules", reschedules, "reschedules");
        put("shaper_heap_max_per_core", self.samples.heap_max_core as f64, "nodes");
        put("shaping_state_bytes", bytes, "B");
        put("shaping_offchip_per_s", offchip / span, "accesses/s");
        put("flow_queue_shared_packets", self.flow_queue_shared as f64, "packets");
        if let Some(m) = self.ecn_marked() {
            put("ecn_marked", m as f64, "packets");
        }
        if let Some(c) = self.processing.as_ref().and_then(|p| p.fq_counters()) {
            put("fq_codel_dropped", c.codel_dropped as f64, "packets");
            put("fq_codel_new_flows", c.new_flows as f64, "queues");
        }
        let bc = self.buckets.as_ref().map(|b| *b.counters()).unwrap_or_default();
        put("flow_buckets_reused", bc.reused as f64, "buckets");
        put("flow_buckets_evicted", bc.evicted as f64, "buckets");
        // Stage 7.
        put("link_state_bytes", self.egress.drr().state_bytes() as f64, "B");
        let sm = &self.samples;
        let line = |name: String, unit: &'static str, v: &[f64]| Line {
            name,
            unit,
            points: sm.t.iter().copied().zip(v.iter().copied()).collect(),
        };
        let mut series = vec![
            line("ingress_queues_in_use".into(), "queues", &sm.ingress_in_use),
            line("heap_nodes".into(), "nodes", &sm.heap_total),
            line("egress_backlog".into(), "packets", &sm.egress_backlog),
        ];
        // Processing none has no processors to plot.
        for (s, v) in sm.processors.iter().enumerate().filter(|_| !self.direct) {
            let name = &self.p.services[s].name;
            series.push(line(format!("processors.{name}"), "processors", v));
            // Offered packets/s and late packets over each sample's interval (late when done).
            let (offered, late) = (per_interval(&sm.t, &sm.offered[s], true), per_interval(&sm.t, &sm.late[s], false));
            series.push(line(format!("offered_rate.{name}"), "packets/s", &offered));
            series.push(line(format!("late_packets.{name}"), "packets", &late));
        }
        Outcome {
            names: self.p.services.iter().map(|s| s.name.clone()).collect(),
            offered: self.offered,
            delivered: self.delivered,
            delivered_bytes: self.delivered_bytes,
            last_delivery_ns: self.last_delivery,
            late: self.processing.as_ref().map_or_else(|| vec![0; self.p.services.len()], |pr| pr.late().to_vec()),
            drops: self.drops,
            reasons,
            drops_by_service: self.drops_by_service,
            unclassified: self.drops[D_UNCLASSIFIED],
            in_flight: (self.pkts.len() - self.free.len()) as u64,
            hist: self.hist.iter().map(|h| h.each_ref().map(|l| l.histogram())).collect(),
            sim_ns: end_ns,
            events,
            link_bps: self.p.link_rate.bits_per_sec() as f64,
            processors: self.p.processing.processors,
            stage_scalars: st,
            series,
            elements,
            tables,
            trace: self.trace,
            detections: self
                .processing
                .as_mut()
                .map_or_else(Vec::new, |pr| std::mem::take(&mut pr.functions_mut().kept)),
        }
    }
}
