//! A forwarder's results (docs/live.md, "Outputs"): its run as scalars, series, the flow and
//! class tables and the report's notes, of one forwarder or of several of one configuration
//! (one per forwarding thread, docs/live.md "Every core").

use super::{FlowStats, Forwarder, Reason, Totals, DROPS};
use crate::results::{ClassRecord, FlowRecord, Histogram, Note, RunResult, Series, Table};
use npqos_core::pipeline::router::Pipeline;

impl Forwarder {
    /// The run's results: totals, drops by reason, the shaper's counters, per-flow rates (a
    /// histogram and a table of the largest flows), the time series. `extra` are the I/O
    /// layer's own counts (ring drops, send errors), added as scalars.
    pub fn result(&self, elapsed_ns: u64, complete: bool, stop_reason: &str, extra: &[(&str, f64, &str)]) -> RunResult {
        Self::result_of(&[self], elapsed_ns, complete, stop_reason, extra)
    }

    /// The totals of several forwarders of one configuration (`npqos live` on several threads):
    /// counts summed; the largest heap the largest of any thread's (a heap is a thread's); the
    /// other maxima (active flows, blocks in use) the sum of each thread's own.
    pub fn totals_of(parts: &[&Forwarder]) -> Totals {
        parts.iter().map(|p| p.totals()).fold(Totals::default(), Self::add_totals)
    }

    /// Two threads' totals together, as [`Self::totals_of`] adds them.
    pub fn add_totals(mut t: Totals, p: Totals) -> Totals {
        t.frames_in += p.frames_in;
        t.bytes_in += p.bytes_in;
        t.frames_out += p.frames_out;
        t.bytes_out += p.bytes_out;
        for (a, b) in t.drops.iter_mut().zip(p.drops) {
            *a += b;
        }
        t.wakeups += p.wakeups;
        t.heap_max = t.heap_max.max(p.heap_max);
        t.active_flows_max += p.active_flows_max;
        t.blocks_in_use_max += p.blocks_in_use_max;
        t.overlimits += p.overlimits;
        t
    }

    /// [`Self::result`] of several forwarders of one configuration, one per forwarding thread
    /// (docs/live.md, "Every core"), as one run: counts summed, the flows of every thread
    /// (each flow is one thread's), the classes summed with their delay percentiles over every
    /// thread's frames, the series summed point by point (the threads sample at the same
    /// ticks from the run's start). `parts` is not empty.
    pub fn result_of(
        parts: &[&Forwarder],
        elapsed_ns: u64,
        complete: bool,
        stop_reason: &str,
        extra: &[(&str, f64, &str)],
    ) -> RunResult {
        let mut r = RunResult {
            label: "live".into(),
            complete,
            stop_reason: stop_reason.into(),
            sim_time_ns: elapsed_ns,
            ..Default::default()
        };
        let first = parts[0];
        let t = Self::totals_of(parts);
        let (reschedules, reenabled) = (parts.iter().map(|p| p.shaper().counters()))
            .fold((0, 0), |(a, b), c| (a + c.reschedules, b + c.reenabled));
        let flows: Vec<FlowStats> = parts.iter().flat_map(|p| p.flows()).collect();
        let past: u64 = parts.iter().map(|p| p.other_flows().counts.offered_packets).sum();
        r.scalar("flows", flows.len() as f64, "flows");
        r.scalar("frames_past_flow_table", past as f64, "frames");
        r.scalar("overlimits", t.overlimits as f64, "frames");
        r.scalar("frames_in", t.frames_in as f64, "frames");
        r.scalar("bytes_in", t.bytes_in as f64, "B");
        r.scalar("frames_out", t.frames_out as f64, "frames");
        r.scalar("bytes_out", t.bytes_out as f64, "B");
        for reason in Reason::ALL {
            r.scalar(&format!("dropped_{}", reason.name()), t.dropped(reason) as f64, "frames");
        }
        r.scalar("queued_at_end", parts.iter().map(|p| p.queued()).sum::<u64>() as f64, "frames");
        if first.pipe.ecn_marked().is_some() {
            let marked: u64 = parts.iter().filter_map(|p| p.pipe.ecn_marked()).sum();
            r.scalar("ecn_marked", marked as f64, "frames");
        }
        for (name, v, unit) in extra {
            r.scalar(name, *v, unit);
        }
        for (s, rate) in first.rates.iter().enumerate() {
            if let Some(rate) = rate {
                r.scalar(
                    &format!("flow_rate_configured{}", first.suffix(s as u32)),
                    rate.bits_per_sec() as f64 / 1e6,
                    "Mbps",
                );
            }
        }
        // Backlogged flows' output rates (bits/s) and their rates, by service.
        let back: Vec<(u32, f64, f64)> = (parts.iter().flat_map(|p| p.backlogged()))
            .filter_map(|f| Some((f.class, f.rate_out_bps()?, f.rate?.bits_per_sec() as f64)))
            .collect();
        r.scalar("backlogged_flows", back.len() as f64, "flows");
        if !back.is_empty() {
            let mut classes: Vec<u32> = back.iter().map(|b| b.0).collect();
            classes.sort_unstable();
            classes.dedup();
            for c in classes {
                let v: Vec<f64> = back.iter().filter(|b| b.0 == c).map(|b| b.1).collect();
                let mean = v.iter().sum::<f64>() / v.len() as f64;
                let min = v.iter().copied().fold(f64::INFINITY, f64::min);
                let max = v.iter().copied().fold(0.0, f64::max);
                let sfx = first.suffix(c);
                r.scalar(&format!("backlogged_rate_mean{sfx}"), mean / 1e6, "Mbps");
                r.scalar(&format!("backlogged_rate_min{sfx}"), min / 1e6, "Mbps");
                r.scalar(&format!("backlogged_rate_max{sfx}"), max / 1e6, "Mbps");
            }
            let err = back.iter().map(|&(_, b, rate)| (b / rate - 1.0).abs()).fold(0.0, f64::max);
            r.scalar("backlogged_rate_error_max", 100.0 * err, "%");
        }
        r.scalar("reschedules", reschedules as f64, "reschedules");
        r.scalar("reenabled", reenabled as f64, "queues");
        r.scalar("timer_wakeups", t.wakeups as f64, "wake-ups");
        r.scalar("heap_max", t.heap_max as f64, "queues");
        // Services that all share their buckets (rate_per = "class") lend no flow buckets.
        let (mut parked_max, mut evicted) = (0u64, 0u64);
        for bc in parts.iter().filter_map(|p| p.pipe.flow_buckets()).map(|b| *b.counters()) {
            (parked_max, evicted) = (parked_max + bc.parked_max as u64, evicted + bc.evicted);
        }
        r.scalar("parked_buckets_max", parked_max as f64, "buckets");
        r.scalar("bucket_evictions", evicted as f64, "buckets");
        let (heap_sum, samples) = parts.iter().fold((0.0, 0), |(s, n), p| (s + p.heap_sum, n + p.samples));
        r.scalar("heap_mean", if samples > 0 { heap_sum / samples as f64 } else { 0.0 }, "queues");
        r.scalar("active_flows_max", t.active_flows_max as f64, "flows");
        let in_use: u64 = parts.iter().map(|p| p.dqs().buffer().max_queues_in_use() as u64).sum();
        r.scalar("queues_in_use_max", in_use as f64, "queues");
        // The most active flows one AFM slot held (any thread's): its search tree's size.
        let deepest = parts.iter().map(|p| p.dqs().afm().stats().worst).max().unwrap_or(0);
        r.scalar("afm_slot_flows_max", deepest as f64, "flows");
        r.scalar("buffer_blocks_in_use_max", t.blocks_in_use_max as f64, "blocks");
        for (i, (name, unit)) in [
            ("output_rate", "Mbps"),
            ("heap_size", "queues"),
            ("active_flows", "flows"),
            ("buffer_blocks_in_use", "blocks"),
        ]
        .into_iter()
        .enumerate()
        {
            let mut points = first.series[i].clone();
            for p in &parts[1..] {
                for (at, v) in points.iter_mut().zip(&p.series[i]) {
                    at.1 += v.1;
                }
            }
            r.series.push(Series { name: name.into(), x_unit: "s".into(), unit: unit.into(), points });
        }
        // The flow and class counters (docs/pipeline.md): flows.csv and classes.csv in the
        // router's vocabulary, a class per service (`all` without [[services]]).
        r.drop_reasons = first.pipe.reasons().iter().map(|&i| DROPS[i].to_string()).collect();
        (r.flows, r.classes) = Self::records_of(parts);
        if parts.len() == 1 {
            first.processing_result(&mut r);
        }
        // Per-flow achieved rates relative to each flow's configured rate, 1% bins.
        let rates: Vec<f64> =
            flows.iter().filter_map(|f| Some(100.0 * f.rate_out_bps()? / f.rate?.bits_per_sec() as f64)).collect();
        if !rates.is_empty() {
            let hi = rates.iter().copied().fold(0.0, f64::max).ceil().max(1.0) as usize;
            let mut bins = vec![0u64; hi + 1];
            for x in &rates {
                bins[(*x as usize).min(hi)] += 1;
            }
            r.histograms.push(Histogram {
                name: "flow_rate_out".into(),
                unit: if first.spec.services.is_empty() { "% of flow_rate" } else { "% of its service's rate" }.into(),
                bins: bins
                    .iter()
                    .enumerate()
                    .filter(|(_, &n)| n > 0)
                    .map(|(i, &n)| (i as f64, i as f64 + 1.0, n))
                    .collect(),
            });
        }
        r
    }

    /// flows.csv's and classes.csv's rows of several forwarders of one configuration: each
    /// one's exact and heavy flows, the flows past every table in one row, the classes summed.
    fn records_of(parts: &[&Forwarder]) -> (Vec<FlowRecord>, Vec<ClassRecord>) {
        let first = parts[0];
        let mut tables = first.pipe.tables();
        if parts.len() > 1 {
            tables.classes = Pipeline::classes_of(&parts.iter().map(|p| &p.pipe).collect::<Vec<_>>());
        }
        let (mut flows, classes) = crate::models::router::records(&tables, &first.index);
        let mut other: Option<FlowRecord> = None;
        flows.extend(parts[1..].iter().flat_map(|p| crate::models::router::records(&p.pipe.tables(), &p.index).0));
        flows.retain(|f| {
            if f.kind != "other" {
                return true;
            }
            match &mut other {
                None => other = Some(f.clone()),
                Some(o) => o.counts.add(&f.counts),
            }
            false
        });
        flows.extend(other);
        (flows, classes)
    }

    /// The report's notes: a table of the flows with the most bytes in (at most `max_rows`).
    pub fn notes(&self, max_rows: usize) -> Vec<Note> {
        Self::notes_of(&[self], max_rows)
    }

    /// [`Self::notes`] of several forwarders of one configuration (one per thread).
    pub fn notes_of(parts: &[&Forwarder], max_rows: usize) -> Vec<Note> {
        let first = parts[0];
        let flows: Vec<FlowStats> = parts.iter().flat_map(|p| p.flows()).collect();
        let mut idx: Vec<usize> = (0..flows.len()).collect();
        idx.sort_by_key(|&i| (std::cmp::Reverse(flows[i].counts.offered_bytes), i));
        let one = first.spec.services.is_empty();
        let rates = match one {
            true => format!("flow_rate is {}", first.spec.flow_rate),
            false => "each flow's rate is its service's".to_string(),
        };
        let head = if one { "vs flow_rate" } else { "vs its rate" };
        let mut t =
            Table::new(["flow", "frames in", "frames out", "dropped", "Mbps in", "Mbps out", head]).captioned(format!(
            "The {} flows with the most bytes in, of the {} counted exactly (flows.csv). Rates are measured from each \
                 flow's first to its last frame; {rates}.",
            idx.len().min(max_rows),
            idx.len(),
        ));
        for &i in idx.iter().take(max_rows) {
            let s = &flows[i];
            let mbps = |v: Option<f64>| v.map_or("-".to_string(), |b| format!("{:.3}", b / 1e6));
            let rel = match (s.rate_out_bps(), s.rate) {
                (Some(b), Some(r)) => format!("{:+.2}%", 100.0 * (b / r.bits_per_sec() as f64 - 1.0)),
                _ => "-".to_string(),
            };
            t.row([
                s.label(),
                s.counts.offered_packets.to_string(),
                s.counts.sent_packets.to_string(),
                s.dropped().to_string(),
                mbps(s.rate_in_bps()),
                mbps(s.rate_out_bps()),
                rel,
            ]);
        }
        vec![Note::Table(t)]
    }
}
