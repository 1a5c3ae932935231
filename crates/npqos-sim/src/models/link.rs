//! The `link` model: `N` queues, each with a tail-drop buffer, share one output link of rate
//! `C` under deficit round robin (Shreedhar & Varghese 1996).
//!
//! Input is either synthetic (per queue: sizes from a [`SizeDist`], gaps from a [`GapDist`]
//! whose mean gives the configured overload factor against the queue's fair share `C / N`,
//! kim eqs 15-16), a flow population (one aggregate stream at the overload factor times `C`;
//! each packet belongs to a flow of a [`FlowPopulation`] and goes to the queue its flow id
//! hashes to: flows share queues as in a router with fewer queues than flows, and weighted
//! flows load the queues unequally) or a trace (packets mapped to queues by 5-tuple digest
//! modulo `N`).
//!
//! State layout (flat arrays indexed by queue id, no allocation per packet once warm):
//! * the packets in a [`PacketPool`] (16 B per queue: head, tail, bytes; 16 B per node: next
//!   index, size, arrival time; a free list);
//! * the link scheduler, the core [`Drr`] (per queue 8 B: its deficit with an active flag; and
//!   its round, a ring of queue ids whose length is the queue count rounded up to a power of
//!   two: 4 to 8 B per queue);
//! * with synthetic input, each stream's next arrival (16 B) in a [`Calendar`] on the input's
//!   side, not in the engine (and one arrival process per queue only when it has state:
//!   on-off).
//!
//! Measured: offered / delivered / dropped packets and bytes, throughput and utilisation,
//! sojourn time (arrival to last bit on the wire) as an HDR histogram, Jain's fairness index of
//! delivered bytes, and time series of backlog and throughput.

use crate::engine::calendar::Calendar;
use crate::engine::feed::Feed;
use crate::engine::{Engine, Model, RunLimits, StopReason};
use crate::results::{Histogram, RunResult, Series};
use crate::rng::{RngStreams, StreamRng};
use crate::scenario::{
    LinkSpec, MemoryEstimate, ModelError, ModelSpec, Problem, Progress, Scenario, ScenarioModel, Traffic,
};
use crate::trace::{TraceError, TraceOptions, TraceSource};
use crate::workload::{mean_gap_for_overload, Arrivals, FlowPopulation, FlowWeights, SizeDist};
use hdrhistogram::Histogram as Hdr;
use npqos_core::pipeline::{latency, Latency};
use npqos_core::queues::pool::{Packet, PacketPool};
use npqos_core::rate::Serializer;
use npqos_core::sched::drr::Drr;
use npqos_core::QueueId;
use npqos_core::{Duration, Instant};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// A trace packet whose arrival event is scheduled: (time ns, queue, bytes).
type PendingPacket = (u64, u32, u64);

/// The link model's CoDel: its parameters, a state per queue, its drops (packets, bytes).
struct LinkAqm {
    p: npqos_core::pipeline::codel::CodelParams,
    states: Vec<npqos_core::pipeline::codel::Codel>,
    dropped: (u64, u64),
}

/// One queue of the pool as CoDel sees it: its head's time since its arrival, the bytes
/// behind it, and dropping it (counted, out of the backlog).
struct PoolQueue<'a> {
    pool: &'a mut PacketPool,
    q: QueueId,
    dropped: &'a mut (u64, u64),
    backlog: &'a mut u64,
}

impl npqos_core::pipeline::codel::CodelQueue for PoolQueue<'_> {
    fn head(&self, now: u64) -> Option<(u64, bool)> {
        self.pool.head(self.q).map(|p| (now.saturating_sub(p.arrival.as_nanos()), false))
    }
    fn bytes(&self) -> u64 {
        self.pool.bytes(self.q) - self.pool.head(self.q).map_or(0, |p| p.size as u64)
    }
    fn drop_head(&mut self, _now: u64) {
        if let Some(p) = self.pool.pop(self.q) {
            *self.dropped = (self.dropped.0 + 1, self.dropped.1 + p.size as u64);
            *self.backlog -= p.size as u64;
        }
    }
    fn mark_head(&mut self, _now: u64) {}
}

/// Events of the link model (synthetic arrivals are not events: they come from a [`Feed`]).
#[derive(Clone, Copy, Debug)]
pub enum Ev {
    /// The next trace packet is due.
    TraceNext,
    /// The link finished sending a packet.
    Departure,
    /// Record a time-series sample.
    Sample,
}

/// One synthetic arrival.
#[derive(Clone, Copy, Debug)]
pub struct Arrival {
    t: u64,
    queue: u32,
    size: u32,
    /// Flows the population has started so far (0 without one).
    started: u64,
}

/// The synthetic input in time order: per stream (queue, or the one aggregate stream of a
/// population) its next arrival, in a [`Calendar`] keyed by (time, the order the arrival was
/// drawn in), so that at equal times arrivals leave in the order they were drawn, as from the
/// event queue the calendar replaced. Each arrival draws its size, then the stream's next gap,
/// then (with a population) its flow, as the model did when arrivals were its own events: the
/// same draws in the same order.
pub struct Synthetic {
    src: Source,
    next: Pending,
    /// Arrivals drawn so far, each stream's first included: the next one's sequence.
    drawn: u64,
    queues: u32,
}

impl Synthetic {
    /// The streams' first arrivals at `first` (ns), keyed in stream order; `mean_gap` is a
    /// stream's.
    fn new(src: Source, first: Vec<u64>, mean_gap: Duration, queues: u32) -> Self {
        let drawn = first.len() as u64;
        let next = match first[..] {
            [t] => Pending::One(Instant::from_nanos(t)),
            _ => {
                let keys = first.iter().enumerate().map(|(j, &t)| ((t as u128) << 64) | j as u128).collect();
                Pending::Many(Calendar::for_gaps(keys, mean_gap.as_nanos()))
            }
        };
        Synthetic { src, next, drawn, queues }
    }
}

/// The streams' next arrivals: one stream's needs no order (a population's aggregate stream, or
/// a single queue).
/// There is one of these a run; boxing the calendar made link-1m's arrival thread about 50%
/// slower (l2.toml, 2 rounds: 8.8-9.1 s against 5.5-6.5 s).
#[allow(clippy::large_enum_variant)]
enum Pending {
    One(Instant),
    Many(Calendar),
}

impl Iterator for Synthetic {
    type Item = Arrival;
    #[inline]
    fn next(&mut self) -> Option<Arrival> {
        let (t, stream) = match &self.next {
            Pending::One(t) => (*t, 0),
            Pending::Many(c) => (Instant::from_nanos((c.top_key() >> 64) as u64), c.top()),
        };
        let src = &mut self.src;
        let size = src.sizes.sample(&mut src.rng_size);
        let a = if src.arrivals.len() == 1 { 0 } else { stream as usize };
        let g = src.arrivals[a].next_gap(&mut src.rng_gap).max(Duration::NANOSECOND);
        match &mut self.next {
            Pending::One(next) => *next = t + g,
            Pending::Many(c) => c.replace_top((((t + g).as_nanos() as u128) << 64) | self.drawn as u128),
        }
        self.drawn += 1;
        let (queue, started) = match &mut src.population {
            None => (stream, 0),
            Some((pop, rng)) => (flow_queue(pop.next_flow(rng), self.queues), pop.started()),
        };
        Some(Arrival { t: t.as_nanos(), queue, size, started })
    }
}

/// Arrivals ahead of the one taken whose queue state is prefetched.
const AHEAD: usize = 4;

struct Source {
    sizes: SizeDist,
    /// One process per queue, or one for all when the process keeps no state between gaps
    /// (constant, exponential) or with a population (one aggregate stream).
    arrivals: Vec<Arrivals>,
    rng_size: StreamRng,
    rng_gap: StreamRng,
    /// The flow population and its RNG stream (`link.flows`).
    population: Option<(FlowPopulation, StreamRng)>,
}

/// The queue a population flow's packets go to: a fixed 64-bit mix (splitmix64's finalizer) of
/// its id, modulo the queues: flows spread evenly whatever their ids.
fn flow_queue(flow: u64, queues: u32) -> u32 {
    let mut z = flow.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((z ^ (z >> 31)) % queues as u64) as u32
}

/// The delays (ns): counts in hdrhistogram's bins, 3 digits ([`Latency`]), and past their top
/// ([`latency::TOP`], about 73 minutes) the values themselves in an auto-resizing histogram of
/// the same bins, so that the report is what recording every delay into one auto-resizing
/// histogram gives (as the model did before the counts).
#[derive(Default)]
struct Delays {
    bins: Latency,
    far: Option<Box<Hdr<u64>>>,
}

impl Delays {
    #[inline(always)]
    fn record(&mut self, v: u64) {
        if v <= latency::TOP {
            self.bins.record(v);
        } else {
            self.record_far(v);
        }
    }
    #[cold]
    fn record_far(&mut self, v: u64) {
        let far = self.far.get_or_insert_with(|| Box::new(Hdr::new(3).expect("3 significant figures is valid")));
        // (As before: a value no histogram can hold is left out.)
        let _ = far.record(v);
    }
    fn histogram(&self) -> Hdr<u64> {
        let mut h = self.bins.histogram();
        if let Some(far) = &self.far {
            h.auto(true);
            h.add(far.as_ref()).expect("an auto-resizing histogram takes what another holds");
        }
        h
    }
}

/// The model state. Build with [`LinkModel::new`], drive with [`run`].
pub struct LinkModel {
    pool: PacketPool,
    drr: Drr,
    link: Serializer,
    busy: bool,
    buffer: u64,
    warmup: u64,
    end: u64,
    sample_every: Duration,
    /// The synthetic input.
    feed: Option<Feed<Synthetic, Arrival>>,
    /// With the synthetic input, the link's departure is the model's own (time ns, stamp),
    /// not an engine event: the model gives the engine the earlier of it and the next
    /// arrival (`next_source`). Stamps count the departures and samples scheduled, so that
    /// a departure and a sample at one instant keep the order of their scheduling, as two
    /// queued events would (the samples stay queued, in class 1; arrivals are class 2).
    departure: Option<(u64, u64)>,
    stamps: u64,
    sample_stamp: u64,
    /// A flow population feeds the queues; flows it started up to the last arrival taken.
    population: bool,
    flows_started: u64,
    /// The trace and its next packet (time ns, queue, bytes) already scheduled.
    trace: Option<(TraceSource, Option<PendingPacket>)>,
    trace_error: Option<TraceError>,
    // measurements
    offered_pkts: u64,
    offered_bytes: u64,
    dropped_pkts: u64,
    dropped_bytes: u64,
    /// `queues.aqm = "codel"`: CoDel's state per queue and its drops (boxed: one word on the
    /// path without it).
    aqm: Option<Box<LinkAqm>>,
    delivered_pkts: u64,
    delivered_bytes: u64,
    delivered_per_queue: Vec<u64>,
    non_ip: u64,
    delay: Delays,
    backlog_bytes: u64,
    last_sample_bytes: u64,
    series_backlog: Vec<(f64, f64)>,
    series_tput: Vec<(f64, f64)>,
}

impl LinkModel {
    /// Builds the model and schedules its first events. Fails only on trace input errors.
    ///
    /// # Panics
    /// If `sc` is not a `link` or `kim` scenario (the caller dispatches on [`Scenario::spec`]).
    pub fn new(sc: &Scenario, streams: &RngStreams, engine: &mut Engine<Ev>) -> Result<Self, TraceError> {
        let l = sc.link().expect("a link or kim scenario");
        let n = l.queues as usize;
        let mut m = LinkModel {
            pool: PacketPool::new(l.queues),
            drr: Drr::new(l.queues, l.quantum).expect("the scenario reader refuses a zero quantum"),
            link: Serializer::new(l.link_rate).expect("the scenario reader refuses a zero link rate"),
            busy: false,
            buffer: l.buffer,
            warmup: sc.warmup.as_nanos(),
            end: sc.duration.as_nanos(),
            sample_every: sc.sample_every(),
            feed: None,
            departure: None,
            stamps: 0,
            sample_stamp: 0,
            population: false,
            flows_started: 0,
            trace: None,
            trace_error: None,
            offered_pkts: 0,
            offered_bytes: 0,
            dropped_pkts: 0,
            dropped_bytes: 0,
            aqm: l.aqm.map(|p| Box::new(LinkAqm { p, states: vec![Default::default(); n], dropped: (0, 0) })),
            delivered_pkts: 0,
            delivered_bytes: 0,
            delivered_per_queue: vec![0; n],
            non_ip: 0,
            delay: Delays::default(),
            backlog_bytes: 0,
            last_sample_bytes: 0,
            series_backlog: Vec::new(),
            series_tput: Vec::new(),
        };
        match &l.traffic {
            Traffic::Synthetic { overload, sizes, arrivals, population } => {
                let sizes = &sizes.build()?;
                // Per queue, its fair share; with a population, one stream at the link rate.
                let (share, streams_n) = match population {
                    None => (l.link_rate.share(l.queues as u64), n),
                    Some(_) => (l.link_rate, 1),
                };
                let gap = mean_gap_for_overload(sizes.mean(), share, *overload)
                    .filter(|g| !g.is_zero())
                    .unwrap_or(Duration::NANOSECOND);
                let proc = Arrivals::new(arrivals, gap).expect("validated scenario");
                let population = population.as_ref().map(|p| {
                    let w = p.decay_ratio.map_or(FlowWeights::Equal, |ratio| FlowWeights::ExpDecay { ratio });
                    let pop = FlowPopulation::new(p.flows as usize, &w, p.flow_packets).expect("validated scenario");
                    (pop, streams.stream("link.flows", 0))
                });
                m.population = population.is_some();
                let mut src = Source {
                    sizes: sizes.clone(),
                    arrivals: if proc.is_stateless() { vec![proc] } else { vec![proc; streams_n] },
                    rng_size: streams.stream("link.sizes", 0),
                    rng_gap: streams.stream("link.arrivals", 0),
                    population,
                };
                let first = (0..streams_n)
                    .map(|q| {
                        // First arrival: one gap after time zero, so queues are not synchronised.
                        let a = if src.arrivals.len() == 1 { 0 } else { q };
                        (Instant::ZERO + src.arrivals[a].next_gap(&mut src.rng_gap)).as_nanos()
                    })
                    .collect();
                m.feed = Some(Feed::new(Synthetic::new(src, first, gap, l.queues)));
            }
            Traffic::Trace { files, time_scale, flow_multiply, lenient, align } => {
                let opts = TraceOptions {
                    files: files.clone(),
                    lenient: *lenient,
                    time_scale: *time_scale,
                    flow_multiply: *flow_multiply,
                    align: *align,
                };
                let src = TraceSource::open(opts, &mut streams.stream("link.trace", 0))?;
                m.trace = Some((src, None));
                m.pull_trace(engine);
            }
        }
        m.schedule_sample(Instant::ZERO + m.sample_every, engine);
        Ok(m)
    }

    /// Schedules the next sample: a queued event, in class 1 with the synthetic input (after
    /// a departure scheduled before it, before one scheduled after it and before arrivals).
    fn schedule_sample(&mut self, at: Instant, engine: &mut Engine<Ev>) {
        match self.feed.is_some() {
            true => {
                engine.schedule_class(at, 1, Ev::Sample);
                self.sample_stamp = self.stamps;
                self.stamps += 1;
            }
            false => {
                engine.schedule(at, Ev::Sample);
            }
        }
    }

    /// Reads the next IP packet of the trace and schedules its arrival.
    fn pull_trace(&mut self, engine: &mut Engine<Ev>) {
        let Some((src, pending)) = &mut self.trace else {
            return;
        };
        loop {
            match src.next() {
                Ok(Some(p)) => match p.flow {
                    Ok(f) => {
                        let q = (f.digest() % self.pool.queues() as u64) as u32;
                        let t = p.ts.max(engine.now());
                        *pending = Some((t.as_nanos(), q, p.wire_len as u64));
                        engine.schedule(t, Ev::TraceNext);
                        return;
                    }
                    Err(_) => self.non_ip += 1,
                },
                Ok(None) => {
                    *pending = None;
                    return;
                }
                Err(e) => {
                    self.trace_error = Some(e);
                    *pending = None;
                    return;
                }
            }
        }
    }

    fn enqueue(&mut self, q: u32, size: u64, engine: &mut Engine<Ev>) {
        let now = engine.now();
        self.offered_pkts += 1;
        self.offered_bytes += size;
        let q = QueueId(q);
        if self.pool.bytes(q) + size > self.buffer {
            self.dropped_pkts += 1;
            self.dropped_bytes += size;
            return;
        }
        self.pool.push(q, Packet { size: size as u32, arrival: now }).expect("queue ids come from 0..queues");
        self.drr.enqueued(q).expect("queue ids come from 0..queues");
        self.backlog_bytes += size;
        if !self.busy {
            self.start_next(engine);
        }
    }

    /// DRR: picks the next packet and starts sending it.
    fn start_next(&mut self, engine: &mut Engine<Ev>) {
        let q = match self.aqm.is_none() {
            true => {
                let pool = &self.pool;
                self.drr.select(|q| pool.head(q).map_or(0, |p| p.size as u64))
            }
            false => self.codel_select(engine.now().as_nanos()),
        };
        let Some(q) = q else {
            return;
        };
        let p = self.pool.pop(q).expect("DRR names only non-empty queues");
        self.drr.dequeued(q, self.pool.is_empty(q)).expect("the queue select() named");
        let size = p.size as u64;
        self.backlog_bytes -= size;
        // The queues served next: load their records now, so their misses overlap this
        // packet's work (two ahead: the DRR word, queue record and byte counter; one ahead:
        // the head packet, whose index the record gives).
        if let Some(q2) = self.drr.upcoming(2) {
            self.drr.prefetch(q2);
            self.pool.prefetch(q2);
            npqos_core::hint::prefetch(&self.delivered_per_queue, q2.index());
        }
        if let Some(q1) = self.drr.upcoming(1) {
            self.pool.prefetch_head(q1);
        }
        let done = self.link.send(engine.now(), size);
        self.busy = true;
        match self.feed.is_some() {
            true => {
                self.departure = Some((done.as_nanos(), self.stamps));
                self.stamps += 1;
            }
            false => {
                engine.schedule(done, Ev::Departure);
            }
        }
        let (done_ns, arrival) = (done.as_nanos(), p.arrival.as_nanos());
        if arrival >= self.warmup && done_ns <= self.end {
            self.delay.record(done_ns - arrival);
        }
        if done_ns <= self.end {
            self.delivered_pkts += 1;
            self.delivered_bytes += size;
            self.delivered_per_queue[q.index()] += size;
        }
    }

    /// The round's pick with CoDel on each queue's head first (docs/codel.md); a queue it
    /// empties leaves the round.
    #[cold]
    #[inline(never)]
    fn codel_select(&mut self, now: u64) -> Option<QueueId> {
        let a = self.aqm.as_deref_mut()?;
        let (pool, backlog) = (&mut self.pool, &mut self.backlog_bytes);
        self.drr.select_or_leave(|q| {
            let mut h = PoolQueue { pool: &mut *pool, q, dropped: &mut a.dropped, backlog: &mut *backlog };
            a.states[q.index()].dequeue(&a.p, now, &mut h).head.then(|| pool.head(q).map_or(0, |p| p.size as u64))
        })
    }

    fn sample(&mut self, now: Instant) {
        let t = now.as_secs_f64();
        self.series_backlog.push((t, self.backlog_bytes as f64));
        let dt = self.sample_every.as_secs_f64();
        let bits = (self.delivered_bytes - self.last_sample_bytes) as f64 * 8.0;
        self.series_tput.push((t, bits / dt / 1e9));
        self.last_sample_bytes = self.delivered_bytes;
    }

    /// Collects the measurements into a [`RunResult`].
    pub fn finish(self, sc: &Scenario, reason: StopReason, engine: &Engine<Ev>) -> Result<RunResult, TraceError> {
        let link_rate = sc.link().expect("a link or kim scenario").link_rate;
        if let Some(e) = self.trace_error {
            return Err(e);
        }
        let mut r = RunResult {
            complete: matches!(reason, StopReason::EndTime | StopReason::Drained),
            stop_reason: format!("{reason:?}").to_lowercase(),
            events: engine.executed(),
            sim_time_ns: engine.now().as_nanos(),
            ..Default::default()
        };
        let secs = engine.now().as_secs_f64().max(1e-12);
        r.scalar("offered_packets", self.offered_pkts as f64, "packets");
        r.scalar("offered_bytes", self.offered_bytes as f64, "B");
        r.scalar("delivered_packets", self.delivered_pkts as f64, "packets");
        r.scalar("delivered_bytes", self.delivered_bytes as f64, "B");
        // Tail drops and CoDel's together.
        let codel = self.aqm.as_ref().map_or((0, 0), |a| a.dropped);
        let (dropped_pkts, dropped_bytes) = (self.dropped_pkts + codel.0, self.dropped_bytes + codel.1);
        r.scalar("dropped_packets", dropped_pkts as f64, "packets");
        r.scalar("dropped_bytes", dropped_bytes as f64, "B");
        if self.aqm.is_some() {
            r.scalar("dropped_codel", codel.0 as f64, "packets");
            r.scalar("dropped_codel_bytes", codel.1 as f64, "B");
        }
        if self.population {
            r.scalar("flows_started", self.flows_started as f64, "flows");
        }
        r.scalar(
            "drop_fraction",
            if self.offered_pkts == 0 { 0.0 } else { dropped_pkts as f64 / self.offered_pkts as f64 },
            "1",
        );
        r.scalar(
            "drop_fraction_bytes",
            if self.offered_bytes == 0 { 0.0 } else { dropped_bytes as f64 / self.offered_bytes as f64 },
            "1",
        );
        r.scalar("offered_load", self.offered_bytes as f64 * 8.0 / secs / link_rate.bits_per_sec() as f64, "1");
        r.scalar("throughput", self.delivered_bytes as f64 * 8.0 / secs / 1e9, "Gbps");
        r.scalar("utilization", self.delivered_bytes as f64 * 8.0 / secs / link_rate.bits_per_sec() as f64, "1");
        let d = &self.delay.histogram();
        let empty = d.is_empty();
        r.scalar("delay_mean", if empty { 0.0 } else { d.mean() }, "ns");
        r.scalar("delay_p50", d.value_at_quantile(0.5) as f64, "ns");
        r.scalar("delay_p99", d.value_at_quantile(0.99) as f64, "ns");
        r.scalar("delay_max", d.max() as f64, "ns");
        let (s, s2) =
            self.delivered_per_queue.iter().fold((0.0, 0.0), |(a, b), &x| (a + x as f64, b + (x as f64).powi(2)));
        let jain = if s2 > 0.0 { s * s / (self.delivered_per_queue.len() as f64 * s2) } else { 0.0 };
        r.scalar("jain_fairness", jain, "1");
        if self.trace.is_some() {
            r.scalar("non_ip_skipped", self.non_ip as f64, "packets");
        }
        r.series.push(Series {
            name: "backlog".into(),
            x_unit: "s".into(),
            unit: "B".into(),
            points: self.series_backlog,
        });
        r.series.push(Series {
            name: "throughput".into(),
            x_unit: "s".into(),
            unit: "Gbps".into(),
            points: self.series_tput,
        });
        // Delay histogram: logarithmic bins from the HDR histogram (base 2 from 64 ns).
        let mut bins = Vec::new();
        if !empty {
            for v in d.iter_log(64, 2.0) {
                let hi = v.value_iterated_to() as f64;
                bins.push((hi / 2.0, hi, v.count_since_last_iteration()));
            }
            if let Some(first) = bins.first_mut() {
                first.0 = 0.0;
            }
        }
        r.histograms.push(Histogram { name: "delay".into(), unit: "ns".into(), bins });
        Ok(r)
    }
}

impl Model for LinkModel {
    type Event = Ev;
    /// Synthetic arrivals and the departure push no event: they run in a row.
    const SOURCE_ROWS: bool = true;
    fn handle(&mut self, ev: Ev, engine: &mut Engine<Ev>) {
        match ev {
            Ev::TraceNext => {
                if let Some((_, Some((_, q, size)))) = self.trace {
                    self.enqueue(q, size, engine);
                }
                self.pull_trace(engine);
            }
            Ev::Departure => {
                self.busy = false;
                self.start_next(engine);
            }
            Ev::Sample => {
                self.sample(engine.now());
                self.schedule_sample(engine.now() + self.sample_every, engine);
            }
        }
    }

    /// The link's departure or the next synthetic arrival, whichever is earlier (the
    /// departure at a tie). Arrivals are class 2: at one instant the departure and the
    /// sample (class 1, queued) come first. The departure is class 0 when it was scheduled
    /// before the pending sample, else 2 (after it).
    #[inline]
    fn next_source(&mut self) -> Option<(Instant, u8)> {
        let a = self.feed.as_mut()?.peek().map(|a| a.t);
        match (self.departure, a) {
            (Some((d, stamp)), a) if a.is_none_or(|a| d <= a) => {
                Some((Instant::from_nanos(d), if stamp < self.sample_stamp { 0 } else { 2 }))
            }
            (_, Some(a)) => Some((Instant::from_nanos(a), 2)),
            _ => None,
        }
    }

    #[inline]
    fn source(&mut self, engine: &mut Engine<Ev>) {
        if self.departure.is_some_and(|(d, _)| d == engine.now().as_nanos()) {
            self.departure = None;
            self.busy = false;
            self.start_next(engine);
            return;
        }
        let feed = self.feed.as_mut().expect("next_source announced an arrival");
        let a = feed.next_item().expect("next_source announced an arrival");
        // The queue a few arrivals ahead: start loading its record and DRR word.
        if let Some(b) = feed.ahead(AHEAD) {
            self.pool.prefetch(QueueId(b.queue));
            self.drr.prefetch(QueueId(b.queue));
        }
        self.flows_started = a.started;
        self.enqueue(a.queue, a.size as u64, engine);
    }
}

/// Runs one replication of a `link` scenario with the given seed, on up to `threads` threads:
/// with two or more, a synthetic input is made ahead on a second one (the same arrivals in the
/// same order: the result does not depend on `threads`).
pub fn run(
    sc: &Scenario,
    seed: u64,
    threads: usize,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> Result<RunResult, TraceError> {
    let streams = RngStreams::new(seed);
    let mut engine = Engine::new();
    if let Some(f) = interrupt {
        engine = engine.with_interrupt(f);
    }
    let mut model = LinkModel::new(sc, &streams, &mut engine)?;
    let limits = RunLimits {
        until: Instant::ZERO + sc.duration,
        max_events: if sc.max_events == 0 { u64::MAX } else { sc.max_events },
    };
    let reason = match model.feed.as_mut() {
        Some(_) if threads >= 2 => std::thread::scope(|s| {
            model.feed.as_mut().expect("checked").spawn(s);
            let r = engine.run(&mut model, limits, progress);
            // Dropping the receiver stops the helper, which runs ahead of the end time.
            model.feed.as_mut().expect("checked").stop();
            r
        }),
        _ => engine.run(&mut model, limits, progress),
    };
    model.feed = None;
    model.finish(sc, reason, &engine)
}

/// `model = "link"`: N tail-drop queues sharing one link under DRR.
pub struct LinkScenario;

impl ScenarioModel for LinkScenario {
    fn name(&self) -> &'static str {
        "link"
    }
    fn description(&self) -> &'static str {
        "N tail-drop queues sharing one link under deficit round robin; synthetic or trace traffic (docs/link.md)"
    }
    fn tables(&self) -> &'static [&'static str] {
        &["model", "run", "link", "queues", "traffic"]
    }
    fn read(&self, root: &toml::Table, base_dir: &std::path::Path, probs: &mut Vec<Problem>) -> Box<dyn ModelSpec> {
        Box::new(crate::scenario::read_link(root, "link", base_dir, probs).0)
    }
}

impl ModelSpec for LinkSpec {
    fn resolved(&self, root: &mut toml::Table) {
        crate::scenario::link_to_toml(self, None, root)
    }
    fn memory(&self, duration: Duration, sample: Duration) -> MemoryEstimate {
        self.memory_estimate(None, duration, sample)
    }
    fn run(
        &self,
        sc: &Scenario,
        seed: u64,
        threads: usize,
        interrupt: Option<Arc<AtomicBool>>,
        progress: Progress<'_>,
    ) -> Result<RunResult, ModelError> {
        run(sc, seed, threads, interrupt, progress).map_err(ModelError::from)
    }
}

impl LinkSpec {
    /// [`LinkSpec::estimate_memory`] with the problem to report over the budget (the link and
    /// kim models).
    pub(crate) fn memory_estimate(
        &self,
        shaper: Option<&crate::scenario::ShaperSpec>,
        duration: Duration,
        sample: Duration,
    ) -> MemoryEstimate {
        MemoryEstimate {
            bytes: self.estimate_memory(shaper, duration, sample),
            key: "queues.count",
            value: self.queues.to_string(),
            what: "queues x per-queue state + worst-case buffered packets",
            remedy: "lower queues.count or queues.buffer",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn scenario(text: &str) -> Scenario {
        Scenario::parse(text, "test", Path::new(".")).unwrap()
    }

    /// The synthetic input leaves in the order of the event queue it replaced, ties included:
    /// 50 streams whose first arrivals fall in 20 ns and whose gaps are exponential with a mean
    /// of 3 ns (whole nanoseconds), so that many arrivals share a nanosecond and many are drawn
    /// into the slot the calendar is taking, where the order drawn decides (keys whose sequence
    /// stood still, or were the stream's, fail this).
    #[test]
    fn synthetic_arrivals_leave_in_the_event_queues_order_ties_included() {
        use crate::engine::EventQueue;
        use crate::workload::GapDist;
        use rand::Rng;
        let (n, mean) = (50usize, Duration::from_nanos(3));
        let streams = RngStreams::new(7);
        let proc = Arrivals::new(&GapDist::Exponential, mean).unwrap();
        let first: Vec<u64> = {
            let mut r = streams.stream("first", 0);
            (0..n).map(|_| r.random_range(0..20)).collect()
        };
        let src = Source {
            sizes: SizeDist::Constant(100),
            arrivals: vec![proc.clone()],
            rng_size: streams.stream("link.sizes", 0),
            rng_gap: streams.stream("link.arrivals", 0),
            population: None,
        };
        let mut ours = Synthetic::new(src, first.clone(), mean, n as u32);
        let (mut queue, mut gaps, mut proc) = (EventQueue::new(), streams.stream("link.arrivals", 0), proc);
        for (q, &t) in first.iter().enumerate() {
            queue.push(Instant::from_nanos(t), q as u32);
        }
        let mut ties = 0;
        let mut last = u64::MAX;
        for step in 0..20_000 {
            let (t, q) = queue.pop().unwrap();
            queue.push(t + proc.next_gap(&mut gaps).max(Duration::NANOSECOND), q);
            let a = ours.next().unwrap();
            assert_eq!((a.t, a.queue), (t.as_nanos(), q), "step {step}");
            ties += (a.t == last) as u32;
            last = a.t;
        }
        assert!(ties > 5_000, "{ties} arrivals shared a nanosecond with the one before");
    }

    /// The delays' report is the auto-resizing histogram's, the values past the bins' top
    /// (73 minutes) included: mean, extremes, quantiles and the report's logarithmic bins.
    #[test]
    fn delays_report_as_one_auto_resizing_histogram() {
        let t = latency::TOP;
        let sets: [&[u64]; 3] = [
            &[0, 1, 700, 2047, 2048, 1_000_000, 123_456_789],
            &[5, 64, 1_000_000_000, t, t + 1, 1 << 45, 3_u64.pow(30)],
            &[t + 7, 1 << 50],
        ];
        for values in sets {
            let (mut ours, mut lib) = (Delays::default(), Hdr::<u64>::new(3).unwrap());
            for (i, &v) in values.iter().enumerate() {
                for _ in 0..=i {
                    ours.record(v);
                    lib.record(v).unwrap();
                }
            }
            let h = ours.histogram();
            assert_eq!((h.len(), h.min(), h.max()), (lib.len(), lib.min(), lib.max()), "{values:?}");
            assert_eq!(h.mean().to_bits(), lib.mean().to_bits());
            for q in [0.0, 0.1, 0.5, 0.9, 0.99, 1.0] {
                assert_eq!(h.value_at_quantile(q), lib.value_at_quantile(q), "q {q}, {values:?}");
            }
            let bins = |h: &Hdr<u64>| {
                h.iter_log(64, 2.0).map(|v| (v.value_iterated_to(), v.count_since_last_iteration())).collect::<Vec<_>>()
            };
            assert_eq!(bins(&h), bins(&lib), "{values:?}");
        }
    }

    /// One queue, Poisson arrivals, IMIX sizes: an M/G/1 queue. The mean sojourn time must
    /// match Pollaczek-Khinchine: E[T] = E[S] + lambda E[S^2] / (2 (1 - rho)).
    #[test]
    fn single_queue_matches_pollaczek_khinchine() {
        let sc = scenario(
            "[run]\nduration = \"2s\"\n[link]\nrate = \"1Gbps\"\n[queues]\ncount = 1\nbuffer = \"1GiB\"\n[traffic]\noverload = 0.8\nsizes = \"imix\"\narrivals = \"exponential\"\n",
        );
        let r = run(&sc, 7, 1, None, &mut |_| {}).unwrap();
        let sizes = SizeDist::kim_imix();
        let c = 1e9; // bits/s
        let es = sizes.mean() * 8.0 / c;
        let es2 = sizes.second_moment() * 64.0 / (c * c);
        let rho = 0.8;
        let lambda = rho / es;
        let expect = (es + lambda * es2 / (2.0 * (1.0 - rho))) * 1e9;
        let got = r.get("delay_mean").unwrap();
        assert!((got / expect - 1.0).abs() < 0.03, "mean sojourn {got:.1} ns vs P-K {expect:.1} ns");
        assert!((r.get("utilization").unwrap() - 0.8).abs() < 0.01);
        assert_eq!(r.get("dropped_packets"), Some(0.0));
    }

    /// CoDel on every queue (`queues.aqm`, docs/codel.md): under 1.2 times the link in a deep
    /// buffer, tail drop lets the queue grow and CoDel drops at the heads, shortening it; the
    /// drops are in the totals; kim and ECN refuse the keys.
    #[test]
    fn codel_drops_at_the_heads_and_shortens_the_queues() {
        let text = |aqm: &str| {
            format!("[run]\nduration = \"3s\"\n[link]\nrate = \"10Mbps\"\n[queues]\ncount = 2\nbuffer = \"4MiB\"\n{aqm}\n[traffic]\noverload = 1.2\nsizes = \"imix\"\narrivals = \"exponential\"\n")
        };
        let tail = run(&scenario(&text("")), 1, 1, None, &mut |_| {}).unwrap();
        let codel = run(&scenario(&text("aqm = \"codel\"")), 1, 1, None, &mut |_| {}).unwrap();
        let g = |r: &RunResult, k: &str| r.get(k).unwrap_or(f64::NAN);
        println!(
            "tail drop: dropped {}, p50 {:.1} ms; CoDel: dropped {} (CoDel {}), p50 {:.1} ms",
            g(&tail, "dropped_packets"),
            g(&tail, "delay_p50") / 1e6,
            g(&codel, "dropped_packets"),
            g(&codel, "dropped_codel"),
            g(&codel, "delay_p50") / 1e6
        );
        assert_eq!(tail.get("dropped_codel"), None);
        assert!(g(&codel, "dropped_codel") > 100.0);
        assert!(g(&codel, "dropped_packets") >= g(&codel, "dropped_codel"));
        assert!(g(&codel, "delay_p50") < g(&tail, "delay_p50"));
        let err = |t: &str| Scenario::parse(t, "t", Path::new(".")).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err(&text("aqm = \"codel\"\necn = true")).contains("queues.ecn"));
        assert!(err(&format!("model = \"kim\"\n{}", text("aqm = \"codel\""))).contains("queues.aqm"));
    }

    /// Overloaded queues under DRR share the link equally and drop the excess.
    #[test]
    fn drr_is_fair_under_overload() {
        let sc = scenario("[run]\nduration = \"200ms\"\n[link]\nrate = \"1Gbps\"\n[queues]\ncount = 8\nbuffer = \"32KiB\"\n[traffic]\noverload = 2.0\n");
        let r = run(&sc, 1, 1, None, &mut |_| {}).unwrap();
        assert!(r.get("utilization").unwrap() > 0.99);
        assert!(r.get("jain_fairness").unwrap() > 0.999, "{:?}", r.get("jain_fairness"));
        // Half the offered bytes must be dropped. (Not half the packets: tail drop refuses a
        // large packet where a small one still fits, so more large packets are lost.)
        let df = r.get("drop_fraction_bytes").unwrap();
        assert!((df - 0.5).abs() < 0.02, "half the offered bytes must be dropped, got {df}");
        assert!(r.get("drop_fraction").unwrap() < df);
    }

    /// Arrivals made on a helper thread: the same result as made inline, with and without a
    /// flow population (its started-flow count is the one at the last arrival taken, not where
    /// the helper had got to).
    #[test]
    fn a_second_thread_gives_the_same_result() {
        for text in [
            "[run]\nduration = \"30ms\"\n[queues]\ncount = 5000\n[traffic]\noverload = 1.1\n",
            "[run]\nduration = \"30ms\"\n[queues]\ncount = 16\n[traffic]\nflows = 300\nflow_packets_min = 5\n",
        ] {
            let sc = scenario(text);
            let one = run(&sc, 5, 1, None, &mut |_| {}).unwrap();
            assert!(one.get("offered_packets").unwrap() > 10_000.0);
            assert_eq!(run(&sc, 5, 2, None, &mut |_| {}).unwrap(), one, "{text}");
        }
    }

    /// At one instant a departure and a sample keep the order in which they were scheduled
    /// (the departure is the model's own, the sample an engine event), and arrivals come
    /// after both. 1000 B frames on a link that sends one in `tx`, every queue's arrivals at
    /// whole multiples of 500 us (constant gaps), samples on the same instants; the bytes a
    /// sample counts are those of the packets started since the last one. The values are those
    /// of 3eb7c0c, whose departures were engine events.
    #[test]
    fn departures_and_samples_at_one_instant_keep_their_order() {
        let series = |text: &str| -> Vec<f64> {
            let r = run(&scenario(text), 3, 1, None, &mut |_| {}).unwrap();
            let s = r.series.iter().find(|s| s.name == "throughput").unwrap();
            s.points.iter().map(|p| (p.1 * 1e3).round() / 1e3).collect()
        };
        let text = |rate: &str, queues: u32, every: &str| {
            format!("[run]\nduration = \"6ms\"\nsample_interval = \"{every}\"\n[link]\nrate = \"{rate}\"\n[queues]\ncount = {queues}\nbuffer = \"16KiB\"\n[traffic]\noverload = 2.0\nsizes = \"constant\"\nsize = \"1000B\"\narrivals = \"constant\"\n")
        };
        // tx = 0.5 ms, samples every 1 ms: the departure at 2 ms was scheduled at 1.5 ms, the
        // sample at 1 ms, so the sample counts the 2 packets started at 1 and 1.5 ms, not the
        // one the departure starts (16 Mbps x 1 ms = 2000 B).
        assert_eq!(series(&text("16Mbps", 4, "1ms")), [0.0, 0.016, 0.016, 0.016, 0.016, 0.016]);
        // tx = 1 ms, samples every 0.5 ms: the departure at 1.5 ms was scheduled at 0.5 ms,
        // the sample at 1 ms, so the departure goes first and its packet counts at 1.5 ms.
        assert_eq!(
            series(&text("8Mbps", 1, "500us")),
            [0.0, 0.016, 0.016, 0.0, 0.016, 0.0, 0.016, 0.0, 0.016, 0.0, 0.0, 0.0]
        );
    }

    #[test]
    fn same_seed_same_result_other_seed_differs() {
        let sc = scenario("[run]\nduration = \"20ms\"\n[queues]\ncount = 64\n");
        let a = run(&sc, 3, 1, None, &mut |_| {}).unwrap();
        let b = run(&sc, 3, 1, None, &mut |_| {}).unwrap();
        let c = run(&sc, 4, 1, None, &mut |_| {}).unwrap();
        assert_eq!(a, b);
        assert_ne!(a.scalars, c.scalars);
    }

    /// A flow population: the aggregate offered rate is the overload times the link rate
    /// (whatever the queue count), every packet counts one flow, and skewed weights load the
    /// queues unequally (lower fairness of delivered bytes) where equal weights do not. The
    /// example parses back from its resolved form; population keys without `flows`, or on
    /// `model = "kim"`, are refused.
    #[test]
    fn flow_population_offers_the_aggregate_rate_and_skews_the_queues() {
        let base = "[run]\nduration = \"200ms\"\n[link]\nrate = \"1Gbps\"\n[queues]\ncount = 16\nbuffer = \"1GiB\"\n[traffic]\noverload = 0.5\nsizes = \"constant\"\nsize = \"1000B\"\nflows = 200\nflow_packets_min = 1000\n";
        let equal = run(&scenario(base), 1, 1, None, &mut |_| {}).unwrap();
        let offered = equal.get("offered_bytes").unwrap() * 8.0 / 0.2;
        assert!((offered / 0.5e9 - 1.0).abs() < 0.03, "offered {offered} bit/s");
        assert!(equal.get("flows_started").unwrap() >= 200.0);
        let skewed = run(
            &scenario(&format!("{base}flow_weights = \"exp-decay\"\ndecay_ratio = 0.9\n")),
            1,
            1,
            None,
            &mut |_| {},
        )
        .unwrap();
        let (je, js) = (equal.get("jain_fairness").unwrap(), skewed.get("jain_fairness").unwrap());
        assert!(je > 0.9 && js < 0.75, "equal {je} skewed {js}");
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/link-flows.toml")).unwrap();
        let sc = scenario(&text);
        assert_eq!(Scenario::from_table(&sc.to_toml(), "resolved", Path::new(".")).unwrap(), sc);
        for bad in ["[traffic]\ndecay_ratio = 0.9\n", "model = \"kim\"\n[traffic]\nflows = 10\n"] {
            let e = Scenario::parse(bad, "t", Path::new(".")).unwrap_err().to_string();
            assert!(e.contains("traffic."), "{e}");
        }
    }
}
