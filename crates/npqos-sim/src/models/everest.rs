//! The everest model: `N_p` processors shared by the six NAT-PT services of everest Table 2,
//! each with a FIFO packet queue, run by an [`npqos_core::alloc::Allocator`] on a timeline.
//!
//! A packet of service `i` takes `t_pkt^i` on a processor; a context switch takes `t_sw`
//! (the processor serves nothing meanwhile). The runtime here does what a data plane would:
//! it keeps the packets, starts them where the allocator says, and reports completions and
//! finished switches back. Events at the same instant: processor events (completions, switch
//! ends, in the order they were scheduled) before the quantum timer, before an arrival, so a
//! processor that frees up at `t` can take a packet arriving at `t`.
//!
//! Traffic ([`Traffic`]): a synthetic bursty generator (superposed ON/OFF Pareto sources per
//! service), or a capture corpus classified into the six services (see [`classify_corpus`]);
//! [`run`] takes any time-ordered stream, such as a [`PhasedTraffic`] schedule (Figure 6's
//! changing mix). A run can record a [`Timeline`] by window (what it did over time).

use crate::engine::{Engine, Model, RunLimits, StopReason};
use crate::merge::{KMerge, Source};
use crate::rng::RngStreams;
use crate::trace::corpus::{Corpus, Overlay};
use crate::workload::{Arrivals, GapDist};
use npqos_core::alloc::guarantee::NmaxEstimator;
use npqos_core::alloc::{Action, AllocConfig, AllocStats, Allocator, Policy, ServiceSpec, Trigger};
use npqos_core::flow::{FlowKey, PROTO_TCP, PROTO_UDP};
use npqos_core::{Duration, Instant, ProcessorId, ServiceId};
use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;

/// The six NAT-PT services and their t_pkt in nanoseconds (everest Table 2).
pub const NATPT_SERVICES: [(&str, u64); 6] = [
    ("v4->v6/TCP", 18_220),
    ("v4->v6/UDP", 13_270),
    ("v4->v6/ICMP", 4_640),
    ("v6->v4/TCP", 10_090),
    ("v6->v4/UDP", 9_720),
    ("v6->v4/ICMP", 1_780),
];

/// UNC-2.5's mean packet rate (everest Table 3: 30 million packets in 42.4 s).
pub const UNC25_PPS: f64 = 30e6 / 42.4;

/// Service index of a packet: direction (incoming = v4->v6, outgoing = v6->v4, everest
/// section 5.1) times transport (TCP, UDP, anything else -> the ICMP service).
pub fn natpt_service(proto: u8, incoming: bool) -> u8 {
    let t = match proto {
        PROTO_TCP => 0,
        PROTO_UDP => 1,
        _ => 2,
    };
    if incoming {
        t
    } else {
        3 + t
    }
}

fn reverse(k: &FlowKey) -> FlowKey {
    FlowKey { src: k.dst, dst: k.src, src_port: k.dst_port, dst_port: k.src_port, ..*k }
}

/// Classifies every unidirectional flow of a corpus into a NAT-PT service. The paper treats the
/// UNC incoming link as IPv4 and the outgoing link as IPv6; a capture has no links, so the
/// direction of a flow's **first** packet (the conversation's initiator) plays "incoming" and
/// the reverse direction "outgoing". The packet's own IP version is not used, as in the paper.
pub fn classify_corpus(corpus: &Corpus) -> HashMap<FlowKey, u8> {
    let mut map: HashMap<FlowKey, u8> = HashMap::new();
    for p in &corpus.packets {
        let mut k = p.flow;
        k.zone = 0;
        if map.contains_key(&k) {
            continue;
        }
        let incoming = !map.contains_key(&reverse(&k));
        map.insert(k, natpt_service(k.proto, incoming));
    }
    map
}

/// Synthetic sources run this long before the stream starts, so it starts in the stationary
/// regime: every source begins with an OFF period, and without a warm-up the sources switch ON
/// together in the first few hundred milliseconds (in a 10 s run that burst held every late
/// packet of Static and Everest).
pub const SYNTHETIC_WARMUP: Duration = Duration::from_secs(2);

/// Synthetic bursty traffic: each service is the superposition of `sources` ON/OFF sources
/// with Pareto ON and OFF periods; packets inside an ON period are Poisson.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticTraffic {
    /// Mean packet rate of all services together, packets/s.
    pub rate_pps: f64,
    /// Share of the packets of each service (sums to 1).
    pub mix: Vec<f64>,
    /// t_pkt of each service in ns (for the offered work).
    pub t_pkt_ns: Vec<u64>,
    pub sources_per_service: u32,
    pub on_mean: Duration,
    pub off_mean: Duration,
    pub shape: f64,
    pub duration: Duration,
}

impl SyntheticTraffic {
    /// Our default: UNC-2.5's packet rate, half the packets each direction, TCP 85%, UDP 13%,
    /// ICMP 2% of each direction; `sources` per service, ON 50 ms / OFF 100 ms mean, shape 1.5
    /// (a service's rate over 50-100 ms then varies with a coefficient of variation of about
    /// sqrt(2 / sources)). The offered work averages about 9.5 of 16 processors.
    pub fn unc25_like(duration: Duration, sources: u32) -> Self {
        let per_dir = [0.85, 0.13, 0.02];
        let mix = (0..6).map(|i| 0.5 * per_dir[i % 3]).collect();
        SyntheticTraffic {
            rate_pps: UNC25_PPS,
            mix,
            t_pkt_ns: NATPT_SERVICES.iter().map(|s| s.1).collect(),
            sources_per_service: sources,
            on_mean: Duration::from_millis(50),
            off_mean: Duration::from_millis(100),
            shape: 1.5,
            duration,
        }
    }

    /// Mean offered work in processors: sum over services of rate x t_pkt.
    pub fn mean_processors(&self) -> f64 {
        self.mix.iter().zip(&self.t_pkt_ns).map(|(m, &t)| self.rate_pps * m * t as f64 * 1e-9).sum()
    }
}

/// Where packets come from.
#[derive(Clone)]
pub enum Traffic {
    Synthetic(SyntheticTraffic),
    /// `copies` overlaid copies of a corpus sped up `time_scale` times, classified by `classes`,
    /// up to `end` (the overlay may be much longer: flow multiplication without compressing time
    /// uses a window of it).
    Corpus {
        corpus: Arc<Corpus>,
        classes: Arc<HashMap<FlowKey, u8>>,
        copies: u32,
        time_scale: f64,
        end: Duration,
    },
}

impl Traffic {
    /// The arrival stream (time in ns, service), in time order; the same for the same seed.
    pub fn stream(&self, seed: u64) -> ArrivalStream<'_> {
        let streams = RngStreams::new(seed);
        match self {
            Traffic::Synthetic(s) => {
                let n = s.sources_per_service;
                let mut sources = Vec::new();
                for svc in 0..s.mix.len() as u8 {
                    if s.mix[svc as usize] <= 0.0 {
                        continue;
                    }
                    let per_source = s.rate_pps * s.mix[svc as usize] / n as f64;
                    let mean_gap = Duration::from_nanos((1e9 / per_source).round().max(1.0) as u64);
                    let dist = GapDist::OnOff { on_mean: s.on_mean, off_mean: s.off_mean, shape: s.shape };
                    for _ in 0..n {
                        let rng = streams.stream("everest.synthetic", sources.len() as u64);
                        let arrivals = Arrivals::new(&dist, mean_gap).expect("valid ON/OFF parameters");
                        sources.push(OnOffSource { arrivals, rng, service: svc, t: 0 });
                    }
                }
                ArrivalStream::Synthetic {
                    sources: KMerge::new(sources).unwrap_or_else(|e: Infallible| match e {}),
                    warmup: SYNTHETIC_WARMUP.as_nanos(),
                    end: s.duration.as_nanos(),
                }
            }
            Traffic::Corpus { corpus, classes, copies, time_scale, end } => {
                let mut rng = streams.stream("everest.overlay", 0);
                ArrivalStream::Corpus {
                    overlay: corpus.overlay(*copies, *time_scale, &mut rng),
                    classes,
                    end: end.as_nanos(),
                }
            }
        }
    }
}

/// One ON/OFF source of a service: its arrival process and random stream, at time `t`.
pub struct OnOffSource {
    arrivals: Arrivals,
    rng: crate::rng::StreamRng,
    service: u8,
    t: u64,
}

impl Source for OnOffSource {
    type Item = u8;
    type Error = Infallible;
    #[inline]
    fn next(&mut self) -> Result<Option<(u64, u8)>, Infallible> {
        self.t += self.arrivals.next_gap(&mut self.rng).as_nanos();
        Ok(Some((self.t, self.service)))
    }
}

/// Iterator over (arrival time in ns, service).
pub enum ArrivalStream<'a> {
    Synthetic {
        /// Every service's ON/OFF sources, merged.
        sources: KMerge<OnOffSource>,
        /// Generated and discarded before time 0 of the stream.
        warmup: u64,
        /// End, counted from the end of the warm-up.
        end: u64,
    },
    Corpus {
        overlay: Overlay<'a>,
        classes: &'a HashMap<FlowKey, u8>,
        end: u64,
    },
}

impl Iterator for ArrivalStream<'_> {
    type Item = (u64, u8);
    #[inline]
    fn next(&mut self) -> Option<(u64, u8)> {
        match self {
            ArrivalStream::Synthetic { sources, warmup, end } => loop {
                let (t, _, svc) = sources.next()?;
                if t >= *end + *warmup {
                    sources.clear();
                    return None;
                }
                if t >= *warmup {
                    return Some((t - *warmup, svc));
                }
            },
            ArrivalStream::Corpus { overlay, classes, end } => {
                let p = overlay.next()?;
                if p.ts >= *end {
                    return None;
                }
                let mut k = p.flow;
                k.zone = 0;
                Some((p.ts, *classes.get(&k).expect("every corpus flow is classified")))
            }
        }
    }
}

/// N_max^i of every service (everest section 5.1, our reading in
/// [`npqos_core::alloc::guarantee`]) for processing times `t_pkt` and delay tolerances `d`: passes over `make()` streams,
/// 8 candidates per service per pass, until every service's answer is found or exceeds
/// `max_j`. Returns (N_max, saturated at `max_j`, packets) per service.
pub fn n_max<I: Iterator<Item = (u64, u8)>>(
    mut make: impl FnMut() -> I,
    t_pkt: &[Duration],
    d: &[Duration],
    max_j: u32,
) -> Vec<(u32, bool, u64)> {
    const WIDTH: u32 = 8;
    let n = t_pkt.len();
    let mut start = vec![1u32; n];
    let mut done: Vec<Option<(u32, bool, u64)>> = vec![None; n];
    while done.iter().any(|x| x.is_none()) {
        let mut est: Vec<NmaxEstimator> = (0..n).map(|i| NmaxEstimator::new(t_pkt[i], d[i], start[i], WIDTH)).collect();
        for (t, s) in make() {
            if done[s as usize].is_none() {
                est[s as usize].push(Instant::from_nanos(t));
            }
        }
        for i in 0..n {
            if done[i].is_some() {
                continue;
            }
            let e = &est[i];
            if !e.exhausted() {
                done[i] = Some((e.n_max(), false, e.packets()));
            } else if e.n_max() > max_j {
                done[i] = Some((max_j, true, e.packets()));
            } else {
                start[i] = e.n_max();
            }
        }
    }
    done.iter().map(|x| x.expect("every service done")).collect()
}

/// The six NAT-PT services of everest Table 2, all with delay tolerance `tolerance`, with the
/// guarantees `g`.
pub fn natpt_services(tolerance: Duration, g: &[f64]) -> Vec<ServiceSpec> {
    NATPT_SERVICES
        .iter()
        .zip(g)
        .map(|(&(name, t), &g)| ServiceSpec {
            name: name.into(),
            t_pkt: Duration::from_nanos(t),
            tolerance,
            guarantee: g,
        })
        .collect()
}

/// One run's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct EverestParams {
    pub processors: u32,
    pub t_sw: Duration,
    /// Delta of R_arr(Delta).
    pub delta: Duration,
    pub policy: Policy,
    /// The services: t_pkt^i, D^i and G^i (eq 7) each; [`natpt_services`] gives Table 2's six.
    pub services: Vec<ServiceSpec>,
    /// Queue lengths are sampled every this often (Fig. 3b).
    pub sample_every: Duration,
    /// Check the allocator's bookkeeping after every event (tests; slow).
    pub check_invariants: bool,
    /// Record a [`Timeline`] by windows of this width (everest Figure 6); `None`: no series.
    pub timeline: Option<Duration>,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum EverestError {
    #[error(transparent)]
    Config(#[from] npqos_core::alloc::AllocError),
    #[error("allocator invariant broken at {at} ns: {msg}")]
    Invariant { at: u64, msg: String },
    /// The scenario given to [`scenario::run_scenario`] is another model's.
    #[error("not a model = \"everest\" scenario")]
    NotEverest,
    /// The scenario's trace could not be read.
    #[error(transparent)]
    Trace(#[from] crate::trace::TraceError),
    /// The services' match rules cannot classify the trace (a spec built without the scenario
    /// reader's checks: a bad rule, or a flow no rule matches).
    #[error("classification rules: {0}")]
    Rules(String),
}

/// What a run measured.
#[derive(Clone, Debug, Default)]
pub struct EverestResult {
    pub packets: u64,
    pub late: u64,
    pub delay_sum_ns: u128,
    pub max_delay_ns: u64,
    /// (packets, late packets) per service.
    pub per_service: Vec<(u64, u64)>,
    pub stats: AllocStats,
    /// Context switches actually performed (switch ends reported).
    pub switches_done: u64,
    /// Samples of every service's queue length: histogram over `QUEUE_BINS` upper edges.
    pub queue_hist: Vec<u64>,
    pub queue_samples: u64,
    pub max_queue: u64,
    /// Allocation triggers where eq 4-5's derivation applies, and how many of those packets
    /// were late anyway.
    pub clean_triggers: u64,
    pub clean_triggers_late: u64,
    pub all_triggers_late: u64,
    pub hi_triggers: u64,
    /// Busy time of all processors / (N_p x simulated time).
    pub busy_ns: u128,
    pub switching_ns: u128,
    pub sim_end_ns: u64,
    pub events: u64,
    /// Delay quantiles (ns): p50, p99, p99.9.
    pub delay_quantiles: [u64; 3],
    /// The series by window, when [`EverestParams::timeline`] asked for it.
    pub timeline: Option<Timeline>,
}

impl EverestResult {
    /// The scalars every everest run reports (and its simulated time and event count), for a
    /// run on `processors` processors.
    pub fn write_scalars(&self, processors: u32, run: &mut crate::results::RunResult) {
        let r = self;
        let span = r.sim_end_ns.max(1) as f64;
        run.scalar("packets", r.packets as f64, "packets");
        run.scalar("late_percent", r.late_percent(), "%");
        run.scalar("late_packets", r.late as f64, "packets");
        run.scalar("mean_delay", r.mean_delay_us(), "us");
        run.scalar("p50_delay", r.delay_quantiles[0] as f64 / 1e3, "us");
        run.scalar("p99_delay", r.delay_quantiles[1] as f64 / 1e3, "us");
        run.scalar("p999_delay", r.delay_quantiles[2] as f64 / 1e3, "us");
        run.scalar("max_delay", r.max_delay_ns as f64 / 1e3, "us");
        run.scalar("context_switches", r.stats.switches as f64, "switches");
        run.scalar("context_switches_per_s", r.stats.switches as f64 / (span * 1e-9), "switches/s");
        run.scalar("forced_releases", r.stats.forced as f64, "switches");
        run.scalar("unmarked", r.stats.unmarked as f64, "grants");
        run.scalar("hi_grants", r.stats.hi_grants as f64, "grants");
        run.scalar("hi_refused", r.stats.hi_refused as f64, "requests");
        run.scalar("lo_grants", r.stats.lo_grants as f64, "grants");
        run.scalar("late_triggers", r.stats.late_triggers as f64, "triggers");
        run.scalar("quantum_expiries", r.stats.quantum_expiries as f64, "expiries");
        run.scalar("utilization", r.busy_ns as f64 / (processors as f64 * span), "fraction");
        run.scalar("switching_fraction", r.switching_ns as f64 / (processors as f64 * span), "fraction");
        run.scalar("max_queue", r.max_queue as f64, "packets");
        run.scalar("clean_triggers", r.clean_triggers as f64, "packets");
        run.scalar("clean_triggers_late", r.clean_triggers_late as f64, "packets");
        run.scalar("hi_triggers", r.hi_triggers as f64, "packets");
        run.scalar("hi_triggers_late", r.all_triggers_late as f64, "packets");
        run.sim_time_ns = r.sim_end_ns;
        run.events = r.events;
    }

    pub fn late_percent(&self) -> f64 {
        100.0 * self.late as f64 / self.packets.max(1) as f64
    }
    pub fn mean_delay_us(&self) -> f64 {
        self.delay_sum_ns as f64 / self.packets.max(1) as f64 / 1e3
    }
}

/// Upper edges (inclusive) of the queue-length histogram bins: 0, 1, 2-3, 4-7, ... 2^20.
pub fn queue_bins() -> Vec<u64> {
    let mut v = vec![0u64];
    let mut e = 1u64;
    while e <= 1 << 20 {
        v.push(e);
        e = e * 2 + 1;
    }
    v.push(u64::MAX);
    v
}

/// Tags on a queued arrival time: the packet set off a clean / any high-priority allocation.
const TRIGGER_BIT: u64 = 1 << 63;
const ANY_TRIGGER_BIT: u64 = 1 << 62;
const TAGS: u64 = TRIGGER_BIT | ANY_TRIGGER_BIT;

/// Events of the everest model in the event queue: processor events (engine class 0, among
/// themselves in the order scheduled). The allocator's timer (class 1, at its `next_wakeup()`)
/// and the next arrival (class 2) are the model's source ([`Model::next_source`]), so at one
/// instant processor events run first, then the timer, then the arrival: a processor that
/// frees up at `t` can take a packet arriving at `t`.
#[derive(Clone, Copy, Debug)]
pub enum Ev {
    /// Processor `0` finished its packet.
    Done(u32),
    /// Processor `0` finished its context switch.
    SwitchDone(u32),
}

/// Engine classes of the everest events (see [`Ev`]).
const CLASS_PROCESSOR: u8 = 0;
const CLASS_TIMER: u8 = 1;
const CLASS_ARRIVAL: u8 = 2;

/// What one step of the model handles.
#[derive(Clone, Copy, Debug)]
enum Step {
    Queued(Ev),
    Timer,
    Arrival(u8),
}

/// The model state on the engine (see [`run`]).
struct EverestSim<'a, I: Iterator<Item = (u64, u8)>> {
    alloc: Allocator,
    arrivals: I,
    t_pkt: Vec<u64>,
    /// D^i per service, ns.
    d: Vec<u64>,
    t_sw: u64,
    queues: Vec<VecDeque<u64>>,
    /// Per processor: arrival time (with the trigger tags) of the packet in service, its
    /// service, when it started (for busy time).
    current: Vec<(u64, u8, u64)>,
    out: Vec<Action>,
    bins: Vec<u64>,
    sample: u64,
    next_sample: u64,
    /// The next packet of the stream, pulled ahead.
    next: Option<(u64, u8)>,
    r: EverestResult,
    timeline: Option<Timeline>,
    hist: hdrhistogram::Histogram<u64>,
    check_invariants: bool,
    error: Option<EverestError>,
    expected_packets: u64,
    progress_every: u64,
    progress: &'a mut dyn FnMut(f64),
}

impl<I: Iterator<Item = (u64, u8)>> EverestSim<'_, I> {
    fn apply(&mut self, now: u64, engine: &mut Engine<Ev>) {
        for a in self.out.drain(..) {
            match a {
                Action::Serve { proc, service } => {
                    let at = self.queues[service.index()].pop_front().expect("allocator serves a waiting packet");
                    self.current[proc.index()] = (at, service.0 as u8, now);
                    engine.schedule_class(
                        Instant::from_nanos(now + self.t_pkt[service.index()]),
                        CLASS_PROCESSOR,
                        Ev::Done(proc.0),
                    );
                }
                Action::Switch { proc, to, .. } => {
                    if let Some(tl) = &mut self.timeline {
                        tl.switch(now, to.index());
                    }
                    engine.schedule_class(
                        Instant::from_nanos(now + self.t_sw),
                        CLASS_PROCESSOR,
                        Ev::SwitchDone(proc.0),
                    );
                    self.r.switching_ns += self.t_sw as u128;
                }
            }
        }
    }

    fn completed(&mut self, now: u64, pr: usize) {
        let r = &mut self.r;
        let (at, svc, started) = self.current[pr];
        let arrived = at & !TAGS;
        let delay = now - arrived;
        r.busy_ns += (now - started) as u128;
        r.packets += 1;
        r.delay_sum_ns += delay as u128;
        r.max_delay_ns = r.max_delay_ns.max(delay);
        self.hist.saturating_record(delay.max(1));
        let late = delay > self.d[svc as usize];
        r.late += late as u64;
        if let Some(tl) = &mut self.timeline {
            tl.completed(arrived, svc as usize, late);
        }
        let ps = &mut r.per_service[svc as usize];
        ps.0 += 1;
        ps.1 += late as u64;
        if at & TRIGGER_BIT != 0 {
            r.clean_triggers += 1;
            r.clean_triggers_late += late as u64;
        }
        if at & ANY_TRIGGER_BIT != 0 {
            r.all_triggers_late += late as u64;
        }
        if r.packets.is_multiple_of(self.progress_every) {
            (self.progress)(r.packets as f64 / self.expected_packets.max(1) as f64);
        }
        let r = self.alloc.completed(
            Instant::from_nanos(now),
            ProcessorId::from_index(pr),
            Duration::from_nanos(delay),
            &mut self.out,
        );
        self.contract(now, r);
    }

    /// Records a refused call (a runtime bug: the model reports only what the allocator
    /// started); the step then halts the run.
    fn contract<T>(&mut self, now: u64, r: Result<T, npqos_core::Error>) -> Option<T> {
        match r {
            Ok(x) => Some(x),
            Err(e) => {
                self.error.get_or_insert(EverestError::Invariant { at: now, msg: e.to_string() });
                None
            }
        }
    }

    fn arrival(&mut self, now: u64, svc: u8) {
        self.queues[svc as usize].push_back(now);
        if let Some(tl) = &mut self.timeline {
            tl.arrival(now, svc as usize);
        }
        let r = self.alloc.arrival(Instant::from_nanos(now), ServiceId(svc as u32), &mut self.out);
        match self.contract(now, r).unwrap_or(Trigger::None) {
            Trigger::Hi { clean } => {
                self.r.hi_triggers += 1;
                // The packet that triggered is the last one queued (q > Q_lim >= 0).
                if let Some(last) = self.queues[svc as usize].back_mut() {
                    *last |= ANY_TRIGGER_BIT | if clean { TRIGGER_BIT } else { 0 };
                }
            }
            Trigger::HiRefused => self.r.hi_triggers += 1,
            _ => {}
        }
    }

    fn check(&self, now: u64) -> Result<(), EverestError> {
        self.alloc.check_invariants().map_err(|msg| EverestError::Invariant { at: now, msg })?;
        for (s, q) in self.queues.iter().enumerate() {
            if self.alloc.queue_len(ServiceId::from_index(s)) != q.len() as u64 {
                return Err(EverestError::Invariant {
                    at: now,
                    msg: format!(
                        "service {s}: allocator counts {} waiting, runtime holds {}",
                        self.alloc.queue_len(ServiceId::from_index(s)),
                        q.len()
                    ),
                });
            }
        }
        Ok(())
    }
}

impl<I: Iterator<Item = (u64, u8)>> EverestSim<'_, I> {
    fn step(&mut self, step: Step, engine: &mut Engine<Ev>) {
        let now = engine.now().as_nanos();
        while self.next_sample <= now {
            for queue in &self.queues {
                let q = queue.len() as u64;
                let b = self.bins.partition_point(|&e| e < q);
                self.r.queue_hist[b] += 1;
                self.r.max_queue = self.r.max_queue.max(q);
            }
            self.r.queue_samples += self.queues.len() as u64;
            self.next_sample += self.sample;
        }
        self.r.events += 1;
        if let Some(tl) = &mut self.timeline {
            tl.advance(now);
        }
        match step {
            Step::Queued(Ev::Done(p)) => self.completed(now, p as usize),
            Step::Queued(Ev::SwitchDone(p)) => {
                self.r.switches_done += 1;
                let r = self.alloc.switch_done(Instant::from_nanos(now), ProcessorId(p), &mut self.out);
                self.contract(now, r);
            }
            Step::Timer => {
                let r = self.alloc.timer(Instant::from_nanos(now), &mut self.out);
                self.contract(now, r);
            }
            Step::Arrival(svc) => {
                self.next = self.arrivals.next();
                self.arrival(now, svc);
            }
        }
        self.apply(now, engine);
        if let Some(tl) = &mut self.timeline {
            tl.hold(&self.alloc);
        }
        if self.error.is_some() {
            engine.halt();
            return;
        }
        if self.check_invariants {
            if let Err(e) = self.check(now) {
                self.error = Some(e);
                engine.halt();
                return;
            }
        }
        self.r.sim_end_ns = now;
    }
}

impl<I: Iterator<Item = (u64, u8)>> Model for EverestSim<'_, I> {
    type Event = Ev;
    fn handle(&mut self, ev: Ev, engine: &mut Engine<Ev>) {
        self.step(Step::Queued(ev), engine);
    }
    #[inline]
    fn next_source(&mut self) -> Option<(Instant, u8)> {
        let timer = self.alloc.next_wakeup().map(|t| (t, CLASS_TIMER));
        let arrival = self.next.map(|(t, _)| (Instant::from_nanos(t), CLASS_ARRIVAL));
        match (timer, arrival) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
    fn source(&mut self, engine: &mut Engine<Ev>) {
        let now = engine.now();
        let step = match self.next {
            Some((t, svc)) if self.alloc.next_wakeup().is_none_or(|w| w > Instant::from_nanos(t)) => {
                debug_assert_eq!(t, now.as_nanos());
                Step::Arrival(svc)
            }
            _ => Step::Timer,
        };
        self.step(step, engine);
    }
}

/// Runs one simulation over `arrivals` (time-ordered `(ns, service)`) until every packet is
/// processed, on the [`Engine`] (event classes: see [`Ev`]).
pub fn run(
    p: &EverestParams,
    arrivals: impl Iterator<Item = (u64, u8)>,
    expected_packets: u64,
    progress: &mut dyn FnMut(f64),
) -> Result<EverestResult, EverestError> {
    run_limited(p, arrivals, expected_packets, progress, RunLimits::until(Instant::MAX), None).map(|x| x.0)
}

/// [`run`] within `limits` (an event budget) and with an interrupt flag; also says why it
/// stopped (results are partial unless the queue drained).
pub fn run_limited(
    p: &EverestParams,
    arrivals: impl Iterator<Item = (u64, u8)>,
    expected_packets: u64,
    progress: &mut dyn FnMut(f64),
    limits: RunLimits,
    interrupt: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
) -> Result<(EverestResult, StopReason), EverestError> {
    let alloc = Allocator::new(&AllocConfig {
        processors: p.processors,
        t_sw: p.t_sw,
        delta: p.delta,
        services: p.services.clone(),
        policy: p.policy,
    })?;
    let ns = p.services.len();
    let np = p.processors as usize;
    let bins = queue_bins();
    let timeline = p.timeline.map(|w| Timeline::new(w, &alloc));
    let mut m = EverestSim {
        alloc,
        arrivals,
        t_pkt: p.services.iter().map(|s| s.t_pkt.as_nanos()).collect(),
        d: p.services.iter().map(|s| s.tolerance.as_nanos()).collect(),
        t_sw: p.t_sw.as_nanos(),
        queues: (0..ns).map(|_| VecDeque::new()).collect(),
        current: vec![(0, 0, 0); np],
        out: Vec::with_capacity(np * 2),
        r: EverestResult { queue_hist: vec![0; bins.len()], per_service: vec![(0, 0); ns], ..Default::default() },
        timeline,
        bins,
        sample: p.sample_every.as_nanos().max(1),
        next_sample: 0,
        next: None,
        hist: hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds"),
        check_invariants: p.check_invariants,
        error: None,
        expected_packets,
        progress_every: (expected_packets / 200).max(1 << 16),
        progress,
    };
    let mut engine = Engine::new();
    if let Some(f) = interrupt {
        engine = engine.with_interrupt(f);
    }
    m.next = m.arrivals.next();
    let stop = engine.run(&mut m, limits, &mut |_| {});
    if let Some(e) = m.error {
        return Err(e);
    }
    let mut r = m.r;
    r.timeline = m.timeline;
    r.stats = m.alloc.stats();
    r.delay_quantiles =
        [m.hist.value_at_quantile(0.5), m.hist.value_at_quantile(0.99), m.hist.value_at_quantile(0.999)];
    (m.progress)(1.0);
    Ok((r, stop))
}

pub mod phased;
pub mod scenario;
#[cfg(test)]
mod tests;
mod timeline;
pub use phased::{Phase, PhasedTraffic};
pub use timeline::Timeline;

/// Offered work of a stream over fixed windows, in processors (work in the window / window).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OfferedProfile {
    pub window_ns: u64,
    pub windows: u64,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    /// Fraction of windows needing more than `processors`.
    pub over: f64,
    pub processors: u32,
}

/// Measures the offered work of `stream` over windows of `window` (the last partial window is
/// dropped).
pub fn offered_profile(stream: impl Iterator<Item = (u64, u8)>, window: Duration, processors: u32) -> OfferedProfile {
    let w = window.as_nanos().max(1);
    let mut per: Vec<f64> = Vec::new();
    let mut cur = 0u64;
    let mut work = 0u64;
    for (t, s) in stream {
        while t >= (cur + 1) * w {
            per.push(work as f64 / w as f64);
            work = 0;
            cur += 1;
        }
        work += NATPT_SERVICES[s as usize].1;
    }
    if per.is_empty() {
        return OfferedProfile { window_ns: w, processors, ..Default::default() };
    }
    let n = per.len();
    let mean = per.iter().sum::<f64>() / n as f64;
    let over = per.iter().filter(|&&x| x > processors as f64).count() as f64 / n as f64;
    per.sort_by(|a, b| a.total_cmp(b));
    let q = |f: f64| per[((n as f64 * f) as usize).min(n - 1)];
    OfferedProfile {
        window_ns: w,
        windows: n as u64,
        mean,
        p50: q(0.5),
        p99: q(0.99),
        max: per[n - 1],
        over,
        processors,
    }
}
