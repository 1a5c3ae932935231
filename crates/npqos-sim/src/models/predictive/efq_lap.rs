//! The predictive paper's section 6: EFQ and LAP in one system. The 32 reserved flows of
//! section 4.2.1 run on `m` processors whose instruction caches hold one application (the
//! cold-cache penalty of section 5 applies), while the flows of some applications burst above
//! their reservation from time to time, so the system swings in and out of overload.
//!
//! Every packet is filed in both data structures (section 6: "a packet has to be enqueued and
//! dequeued in two data structures"): EFQ's per-flow queues
//! ([`npqos_core::sched::fq::FairQueue`]) and LAP's per-application queues
//! ([`npqos_core::sched::lap::LapScheduler`], which also tracks what each cache holds). The
//! scheduler that serves a packet removes it from the other one: LAP's choice is always the
//! head of its flow, so EFQ takes it with `take_head` and charges the flow as if it had served
//! it.
//!
//! Modes:
//! * [`Mode::Efq`]: EFQ picks the packet; the processor idle longest runs it (no locality).
//! * [`Mode::EfqWarm`]: EFQ picks the packet; among idle processors one whose cache holds the
//!   packet's application is preferred ("LAP inside EFQ", section 6 last paragraph).
//! * [`Mode::Lap`]: LAP over every queued packet, all the time.
//! * [`Mode::Combined`]: `EfqWarm` until the total estimated queued processing time reaches
//!   `hi_ns`, then LAP until it falls below `lo_ns` (hysteresis).

use super::{FlowSpec, VARIATION};
use crate::engine::{Engine, Model, RunLimits, StopReason};
use crate::merge::{KMerge, Source};
use crate::rng::RngStreams;
use npqos_core::sched::estimate::{AppParams, SPC_TO_2GHZ, TABLE1};
use npqos_core::sched::fq::{Discipline, FairQueue, FqPacket};
use npqos_core::sched::lap::{LapPacket, LapScheduler, Policy};
use npqos_core::{AppId, FlowId, Instant, ProcessorId};
use rand::Rng;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::convert::Infallible;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// How packets and processors are chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    Efq,
    EfqWarm,
    Lap,
    Combined { hi_ns: f64, lo_ns: f64 },
}

impl Mode {
    pub fn label(&self) -> &'static str {
        match self {
            Mode::Efq => "efq",
            Mode::EfqWarm => "efq-warm",
            Mode::Lap => "lap",
            Mode::Combined { .. } => "efq+lap",
        }
    }
}

/// Periodic bursts: the flows of `apps` send at `factor` times their share for `len_ns` out of
/// every `every_ns` (starting at `every_ns - len_ns`).
#[derive(Clone, Debug, PartialEq)]
pub struct Bursts {
    pub apps: Vec<usize>,
    pub factor: f64,
    pub every_ns: u64,
    pub len_ns: u64,
}

impl Bursts {
    fn on(&self, t: u64) -> bool {
        t % self.every_ns >= self.every_ns - self.len_ns
    }
}

/// Parameters of one run.
#[derive(Clone, Debug)]
pub struct SwitchParams {
    pub mode: Mode,
    pub processors: u32,
    pub flows: Vec<FlowSpec>,
    /// Every flow's rate outside bursts, as a fraction of its share.
    pub calm_load: f64,
    pub bursts: Bursts,
    /// Arrivals stop here; the run ends when every packet completed.
    pub duration_ns: u64,
    /// A packet is "calm" if the estimated queued work at its arrival is below this, else
    /// "overloaded" (the same test for every mode).
    pub calm_below_ns: f64,
    pub seed: u64,
}

/// Delays of one class of packets.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Delays {
    pub ns: Vec<f64>,
}

impl Delays {
    /// Sorts once; then [`Delays::quantile`] is valid.
    fn finish(&mut self) {
        self.ns.sort_by(f64::total_cmp);
    }
    pub fn count(&self) -> usize {
        self.ns.len()
    }
    pub fn quantile(&self, q: f64) -> f64 {
        if self.ns.is_empty() {
            return 0.0;
        }
        self.ns[((self.ns.len() - 1) as f64 * q).round() as usize]
    }
    pub fn max(&self) -> f64 {
        self.ns.last().copied().unwrap_or(0.0)
    }
}

/// Outcome of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SwitchResult {
    pub packets: u64,
    /// Conforming flows (not bursting), packets that arrived calm / overloaded.
    pub conforming_calm: Delays,
    pub conforming_overloaded: Delays,
    /// Bursting flows, all packets.
    pub bursting: Delays,
    pub cold: u64,
    /// Time with the queued estimated work at or above `calm_below_ns`, ns.
    pub overloaded_ns: f64,
    /// Packets completed during that time, and their estimated (warm) work, ns: the useful
    /// processing done while overloaded.
    pub overloaded_packets: u64,
    pub overloaded_work_ns: f64,
    /// Processor time spent on cold-cache penalties and in total, ns.
    pub penalty_ns: f64,
    pub busy_ns: f64,
    /// Largest estimated queued work, ns.
    pub max_backlog_ns: f64,
    /// Switches to LAP (combined mode) and time spent in LAP mode.
    pub switches: u64,
    pub lap_ns: f64,
    /// Time the last packet completed.
    pub end_ns: u64,
    /// (time ms, queued estimated work ms) at most every millisecond.
    pub backlog: Vec<(f64, f64)>,
    /// Engine events executed.
    pub events: u64,
}

impl SwitchResult {
    /// Useful work done per unit of overloaded time, in processors' worth (at most `m`).
    pub fn overloaded_goodput(&self) -> f64 {
        self.overloaded_work_ns / self.overloaded_ns.max(1.0)
    }

    pub fn cold_fraction(&self) -> f64 {
        self.cold as f64 / self.packets.max(1) as f64
    }
}

struct Meta {
    flow: u32,
    app: u16,
    est: f64,
    warm: f64,
    arrival: u64,
    calm: bool,
}

/// Table 1 on the 2 GHz processor.
fn apps() -> Vec<AppParams> {
    TABLE1.iter().map(|a| a.scaled(SPC_TO_2GHZ)).collect()
}

/// Runs one simulation to the end.
pub fn run(p: &SwitchParams) -> SwitchResult {
    run_limited(p, RunLimits::until(Instant::MAX), None, &mut |_| {}).0
}

/// Runs one simulation on the engine within `limits`, stopping early when `interrupt` is
/// raised (the result then covers the packets completed so far).
///
/// Events (docs/predictive.md): a processor's completion (class 0) and a flow's next arrival
/// (class 1), both from the model's source; at one instant completions run first, in
/// processor order, then arrivals in flow order. After every event the idle processors take
/// packets (EFQ's choice or LAP's, by mode), the one idle longest first.
pub fn run_limited(
    p: &SwitchParams,
    limits: RunLimits,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> (SwitchResult, StopReason) {
    let mut m = SwitchModel::new(p);
    let mut engine = Engine::<()>::new();
    if let Some(f) = interrupt {
        engine = engine.with_interrupt(f);
    }
    let stop = engine.run(&mut m, limits, progress);
    let mut res = m.res;
    res.end_ns = m.now;
    res.events = engine.executed();
    for d in [&mut res.conforming_calm, &mut res.conforming_overloaded, &mut res.bursting] {
        d.finish();
    }
    (res, stop)
}

struct SwitchModel<'a> {
    p: &'a SwitchParams,
    apps: Vec<AppParams>,
    fq: FairQueue,
    lap: LapScheduler,
    rngs: Vec<crate::rng::StreamRng>,
    te: Vec<f64>,
    /// Next arrival of each flow, merged by (time, flow).
    arrivals: KMerge<FlowArrivals<'a>>,
    res: SwitchResult,
    meta: Vec<Meta>,
    /// Processors busy: (completion time, processor).
    running: BinaryHeap<Reverse<(u64, u32)>>,
    inflight: Vec<Option<FqPacket>>,
    idle: VecDeque<u32>,
    lap_mode: bool,
    warm_pref: bool,
    now: u64,
    last: u64,
    last_sample: Option<u64>,
    /// The source event announced by `next_source` is an arrival.
    arrival_next: bool,
}

/// Flow `i`'s interarrival time at `t`, ns (its burst factor or the calm load); `te` its
/// packets' estimated time, ns.
fn gap(p: &SwitchParams, i: usize, te: f64, t: u64) -> f64 {
    let f = &p.flows[i];
    let load = if p.bursts.apps.contains(&f.app) && p.bursts.on(t) { p.bursts.factor } else { p.calm_load };
    te / (f.share * p.processors as f64) / load
}

/// One flow's arrival times: each the previous one plus the flow's gap at that time (no draw:
/// the flow's random stream stays with the model, which draws each packet's warm time).
struct FlowArrivals<'a> {
    p: &'a SwitchParams,
    i: usize,
    te: f64,
    next: u64,
}

impl Source for FlowArrivals<'_> {
    type Item = ();
    type Error = Infallible;
    fn next(&mut self) -> Result<Option<(u64, ())>, Infallible> {
        let t = self.next;
        self.next = t + gap(self.p, self.i, self.te, t).round() as u64;
        Ok(Some((t, ())))
    }
}

impl<'a> SwitchModel<'a> {
    fn new(p: &'a SwitchParams) -> Self {
        let apps = apps();
        let m = p.processors;
        let shares: Vec<f64> = p.flows.iter().map(|f| f.share).collect();
        let fq = FairQueue::new(Discipline::Efq, m, &shares).expect("valid shares");
        let lap = LapScheduler::new(Policy::Lap, apps.len(), m).expect("valid configuration");
        let streams = RngStreams::new(p.seed);
        let mut rngs: Vec<_> = (0..p.flows.len()).map(|i| streams.stream("predictive-switch-flow", i as u64)).collect();
        let te: Vec<f64> = p.flows.iter().map(|f| apps[f.app].estimate_us(f.len) * 1e3).collect();
        let mut model = SwitchModel {
            p,
            apps,
            fq,
            lap,
            rngs: Vec::new(),
            te,
            arrivals: KMerge::new(Vec::new()).unwrap_or_else(|e: Infallible| match e {}),
            res: SwitchResult::default(),
            meta: Vec::new(),
            running: BinaryHeap::new(),
            inflight: vec![None; m as usize],
            idle: (0..m).collect(),
            lap_mode: matches!(p.mode, Mode::Lap),
            warm_pref: matches!(p.mode, Mode::EfqWarm | Mode::Combined { .. }),
            now: 0,
            last: 0,
            last_sample: None,
            arrival_next: false,
        };
        let flows = rngs
            .iter_mut()
            .enumerate()
            .map(|(i, r)| {
                let te = model.te[i];
                FlowArrivals { p, i, te, next: r.random_range(0.0..gap(p, i, te, 0)) as u64 }
            })
            .collect();
        model.arrivals = KMerge::new(flows).unwrap_or_else(|e: Infallible| match e {});
        model.rngs = rngs;
        model
    }

    fn arrive(&mut self, work: f64) {
        let p = self.p;
        let now = self.now;
        let (_, i, ()) = self.arrivals.next_from().unwrap_or_else(|e: Infallible| match e {}).expect("announced");
        let fi = i as u32;
        let f = p.flows[i];
        let v = VARIATION[f.app];
        let te = self.te[i];
        let warm = te * (1.0 + self.rngs[i].random_range(-v..=v));
        let id = self.meta.len() as u64;
        self.meta.push(Meta { flow: fi, app: f.app as u16, est: te, warm, arrival: now, calm: work < p.calm_below_ns });
        let app = AppId(f.app as u32);
        let at = Instant::from_nanos(now);
        let pk = FqPacket { id, flow: FlowId(fi), app, est_ns: te, actual_ns: warm, arrival: at };
        self.fq.enqueue(at, pk).expect("flow exists");
        self.lap.enqueue(LapPacket { id, app, est: te }).expect("valid packet");
    }

    fn complete(&mut self, work: f64) {
        let p = self.p;
        let now = self.now;
        let Reverse((_, proc)) = self.running.pop().expect("announced");
        let pk = self.inflight[proc as usize].take().expect("running");
        self.fq.completed(&pk).expect("a packet EFQ served");
        let mt = &self.meta[pk.id as usize];
        let d = (now - mt.arrival) as f64;
        let res = &mut self.res;
        if p.bursts.apps.contains(&(mt.app as usize)) {
            res.bursting.ns.push(d);
        } else if mt.calm {
            res.conforming_calm.ns.push(d);
        } else {
            res.conforming_overloaded.ns.push(d);
        }
        if work >= p.calm_below_ns {
            res.overloaded_packets += 1;
            res.overloaded_work_ns += mt.est;
        }
        res.packets += 1;
        self.idle.push_back(proc);
    }

    /// Idle processors take packets while any wait.
    fn dispatch(&mut self) {
        let now = self.now;
        let at = Instant::from_nanos(now);
        while !self.idle.is_empty() && !self.fq.is_empty() {
            let (proc, pk, cold) = if self.lap_mode {
                let proc = self.idle.pop_front().expect("idle processor");
                let pick = self.lap.dispatch(ProcessorId(proc)).expect("processor exists").expect("a packet waits");
                let flow = FlowId(self.meta[pick.packet.id as usize].flow);
                let d = self.fq.take_head(at, flow).expect("time does not go back").expect("a head");
                debug_assert_eq!(d.packet.id, pick.packet.id, "LAP's choice is its flow's head");
                (proc, d.packet, pick.cold)
            } else {
                let d = self.fq.dequeue(at).expect("time does not go back").expect("a packet waits");
                let app = d.packet.app;
                let lap = &self.lap;
                let pos = if self.warm_pref {
                    self.idle.iter().position(|&q| lap.cache(ProcessorId(q)) == Some(app)).unwrap_or(0)
                } else {
                    0
                };
                let proc = self.idle.remove(pos).expect("idle processor");
                self.lap.remove(app, d.packet.id).expect("application exists");
                let cold = self.lap.assign(ProcessorId(proc), app).expect("processor and application exist");
                (proc, d.packet, cold)
            };
            let mt = &self.meta[pk.id as usize];
            let mut actual = mt.warm;
            if cold {
                let pen = self.apps[mt.app as usize].cold_penalty_us * 1e3;
                actual += pen;
                self.res.penalty_ns += pen;
                self.res.cold += 1;
            }
            self.res.busy_ns += actual;
            self.inflight[proc as usize] = Some(FqPacket { actual_ns: actual, ..pk });
            self.running.push(Reverse((now + actual.round() as u64, proc)));
        }
    }
}

impl Model for SwitchModel<'_> {
    type Event = ();
    fn handle(&mut self, _: (), _: &mut Engine<()>) {}
    fn next_source(&mut self) -> Option<(Instant, u8)> {
        let t_arr = self.arrivals.peek().map(|(t, _)| t).filter(|&t| t < self.p.duration_ns);
        let t_done = self.running.peek().map(|Reverse((t, _))| *t);
        let (t, arrival) = match (t_arr, t_done) {
            (None, None) => return None,
            (Some(a), Some(d)) if d <= a => (d, false),
            (Some(a), _) => (a, true),
            (None, Some(d)) => (d, false),
        };
        self.arrival_next = arrival;
        Some((Instant::from_nanos(t), if arrival { 1 } else { 0 }))
    }
    fn source(&mut self, engine: &mut Engine<()>) {
        let p = self.p;
        self.now = engine.now().as_nanos();
        let work = self.lap.total_work();
        let dt = (self.now - self.last) as f64;
        if work >= p.calm_below_ns {
            self.res.overloaded_ns += dt;
        }
        if self.lap_mode {
            self.res.lap_ns += dt;
        }
        self.last = self.now;
        if self.arrival_next {
            self.arrive(work);
        } else {
            self.complete(work);
        }
        let work = self.lap.total_work();
        self.res.max_backlog_ns = self.res.max_backlog_ns.max(work);
        if self.last_sample.is_none_or(|s| self.now >= s + 1_000_000) {
            self.res.backlog.push((self.now as f64 * 1e-6, work * 1e-6));
            self.last_sample = Some(self.now);
        }
        if let Mode::Combined { hi_ns, lo_ns } = p.mode {
            if !self.lap_mode && work >= hi_ns {
                self.lap_mode = true;
                self.res.switches += 1;
            } else if self.lap_mode && work < lo_ns {
                self.lap_mode = false;
            }
        }
        self.dispatch();
    }
}
