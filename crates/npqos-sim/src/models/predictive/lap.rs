//! The predictive paper's best-effort setting (section 5.2.2): a backlogged packet stream of the
//! three payload applications (encryption, compression, FEC), replicated under new application
//! ids for more than three, served by `n` processors whose instruction cache holds one
//! application, under LAP, FCFS or T-Opt ([`npqos_core::sched::lap`]).
//!
//! * Queue memory holds `q` packets: the scheduler sees the `q` oldest packets not yet
//!   dispatched, and the next packet of the stream enters as one leaves (the system is
//!   backlogged, so `|Q_t| = q` throughout). T-Opt sees the whole stream.
//! * Processing time: `t_e(a, l)` from Table 1 on the 2 GHz processor (Table 1 / 10), times
//!   `1 + U(-v_a, v_a)` (the section 4.2 variation), plus the cold-cache penalty `pi_a / 10`
//!   when the processor last ran another application. The scheduler's estimates are `t_e`.
//! * Packet sizes: simple IMIX (64 B : 576 B : 1,500 B = 7 : 4 : 1). The paper's traces came
//!   from its measurement runs and are not available; see docs/predictive.md.

use crate::engine::{Engine, Model, RunLimits, StopReason};
use crate::rng::RngStreams;
use npqos_core::sched::estimate::{AppParams, SPC_TO_2GHZ, TABLE1};
use npqos_core::sched::lap::{LapPacket, LapScheduler, Policy};
use npqos_core::{AppId, Instant, ProcessorId};
use rand::Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::VARIATION;

/// Table 1 rows of the payload applications (encryption, compression, FEC).
pub const PAYLOAD: [usize; 3] = [1, 2, 3];

/// Simple IMIX: (size in bytes, weight).
pub const IMIX: [(u32, f64); 3] = [(64, 7.0 / 12.0), (576, 4.0 / 12.0), (1500, 1.0 / 12.0)];

/// Table 1 row of application `app` (ids beyond 3 replicate the payload applications).
pub fn base(app: usize) -> usize {
    PAYLOAD[app % PAYLOAD.len()]
}

/// Table 1 on the 2 GHz processor, for application `app`.
pub fn params(app: usize) -> AppParams {
    TABLE1[base(app)].scaled(SPC_TO_2GHZ)
}

/// Mean `t_e` of an application over IMIX sizes, ns.
pub fn mean_te_ns(app: usize) -> f64 {
    let p = params(app);
    IMIX.iter().map(|&(l, w)| w * p.estimate_us(l) * 1e3).sum()
}

/// One packet of the stream.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StreamPacket {
    pub app: u32,
    pub len: u32,
    /// Estimate t_e, ns.
    pub est_ns: f64,
    /// Warm processing time, ns.
    pub warm_ns: f64,
}

/// How packets are spread over applications.
#[derive(Clone, Debug, PartialEq)]
pub enum Mix {
    /// Equal bandwidth per application (section 5.2.2): applications equally likely.
    EqualBandwidth,
    /// Processing shares per application, each from a packet index on (Figure 9: equal, then
    /// 80/10/10 from packet 10,000). An application is drawn with probability proportional to
    /// `share / mean t_e`.
    Processing(Vec<(usize, Vec<f64>)>),
}

/// A seeded stream of `packets` packets over `apps` applications.
pub fn stream(apps: usize, packets: usize, mix: &Mix, seed: u64) -> Vec<StreamPacket> {
    let mut rng = RngStreams::new(seed).stream("predictive-lap-stream", 0);
    let cum = |w: &[f64]| {
        let t: f64 = w.iter().sum();
        w.iter()
            .scan(0.0, |acc, x| {
                *acc += x / t;
                Some(*acc)
            })
            .collect::<Vec<f64>>()
    };
    let pick = |c: &[f64], u: f64| c.iter().position(|&x| u < x).unwrap_or(c.len() - 1);
    let sizes = cum(&IMIX.map(|x| x.1));
    let mut phase_cum: Vec<(usize, Vec<f64>)> = match mix {
        Mix::EqualBandwidth => vec![(0, cum(&vec![1.0; apps]))],
        Mix::Processing(ph) => ph
            .iter()
            .map(|(from, s)| {
                assert_eq!(s.len(), apps, "one share per application");
                let w: Vec<f64> = s.iter().enumerate().map(|(a, x)| x / mean_te_ns(a)).collect();
                (*from, cum(&w))
            })
            .collect(),
    };
    phase_cum.sort_by_key(|p| p.0);
    (0..packets)
        .map(|i| {
            let c = &phase_cum.iter().rev().find(|p| p.0 <= i).unwrap_or(&phase_cum[0]).1;
            let app = pick(c, rng.random::<f64>());
            let len = IMIX[pick(&sizes, rng.random::<f64>())].0;
            let est_ns = params(app).estimate_us(len) * 1e3;
            let v = VARIATION[base(app)];
            let warm_ns = est_ns * (1.0 + rng.random_range(-v..=v));
            StreamPacket { app: app as u32, len, est_ns, warm_ns }
        })
        .collect()
}

/// Parameters of one run.
#[derive(Clone, Debug)]
pub struct LapParams {
    pub policy: Policy,
    pub processors: u32,
    pub apps: usize,
    /// Packets visible to the scheduler; `None` is the whole stream (T-Opt).
    pub visible: Option<usize>,
    /// Dispatch indices whose group sizes are recorded (Figure 9).
    pub record: std::ops::Range<usize>,
}

/// Outcome of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LapResult {
    pub packets: u64,
    pub bytes: u64,
    /// Time the last packet completed, ns.
    pub makespan_ns: f64,
    pub cold: u64,
    /// Standard deviation of (dispatch position - arrival position), packets.
    pub order_std: f64,
    /// Largest |dispatch position - arrival position|.
    pub order_max: u64,
    /// Processor time spent on cold-cache penalties, ns.
    pub penalty_ns: f64,
    /// (dispatch index, processors per application) for the recorded range.
    pub groups: Vec<(usize, Vec<u32>)>,
    /// Engine events executed.
    pub events: u64,
}

impl LapResult {
    /// Processed data per time, Gbit/s.
    pub fn throughput_gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.makespan_ns.max(1.0)
    }

    pub fn cold_fraction(&self) -> f64 {
        self.cold as f64 / self.packets.max(1) as f64
    }
}

/// Runs the stream through the scheduler until every packet completed.
pub fn run(p: &LapParams, stream: &[StreamPacket]) -> LapResult {
    run_limited(p, stream, RunLimits::until(Instant::MAX), None, &mut |_| {}).0
}

/// Runs the stream on the engine within `limits`, stopping early when `interrupt` is raised
/// (the result then covers the packets dispatched so far).
///
/// Events (docs/predictive.md): the model's source announces the next instant a processor
/// completes; that one event frees every processor completing then and runs one dispatch
/// round over the free processors in processor order (the first round, at time 0, has them
/// all). Completions at one instant therefore all land before any dispatch, whatever their
/// order.
pub fn run_limited(
    p: &LapParams,
    stream: &[StreamPacket],
    limits: RunLimits,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> (LapResult, StopReason) {
    let mut m = LapModel {
        pen: (0..p.apps).map(|a| params(a).cold_penalty_us * 1e3).collect(),
        s: LapScheduler::new(p.policy, p.apps, p.processors).expect("valid configuration"),
        q: p.visible.unwrap_or(usize::MAX),
        p,
        stream,
        next: 0,
        res: LapResult::default(),
        sum: 0.0,
        sum2: 0.0,
        k: 0,
        free: (0..p.processors).collect(),
        running: BinaryHeap::new(),
        started: false,
    };
    let mut engine = Engine::<()>::new();
    if let Some(f) = interrupt {
        engine = engine.with_interrupt(f);
    }
    let stop = engine.run(&mut m, limits, progress);
    let mut res = m.res;
    res.makespan_ns = engine.now().as_nanos() as f64;
    res.events = engine.executed();
    let n = res.packets.max(1) as f64;
    res.order_std = (m.sum2 / n - (m.sum / n).powi(2)).max(0.0).sqrt();
    (res, stop)
}

struct LapModel<'a> {
    p: &'a LapParams,
    stream: &'a [StreamPacket],
    pen: Vec<f64>,
    s: LapScheduler,
    /// Packets visible to the scheduler.
    q: usize,
    next: usize,
    res: LapResult,
    /// Sums of (dispatch position - arrival position) and its square.
    sum: f64,
    sum2: f64,
    /// Dispatches so far.
    k: usize,
    free: Vec<u32>,
    /// Processors busy: (completion time, processor).
    running: BinaryHeap<Reverse<(u64, u32)>>,
    /// The round at time 0 has run.
    started: bool,
}

impl LapModel<'_> {
    /// Serves the free processors in processor order.
    fn round(&mut self, now: u64) {
        self.free.sort_unstable();
        for i in 0..self.free.len() {
            let proc = self.free[i];
            while self.s.len() < self.q && self.next < self.stream.len() {
                let sp = &self.stream[self.next];
                self.s
                    .enqueue(LapPacket { id: self.next as u64, app: AppId(sp.app), est: sp.est_ns })
                    .expect("valid packet");
                self.next += 1;
            }
            let Some(pick) = self.s.dispatch(ProcessorId(proc)).expect("processor exists") else { continue };
            let sp = &self.stream[pick.packet.id as usize];
            let mut t = sp.warm_ns;
            if pick.cold {
                self.res.cold += 1;
                self.res.penalty_ns += self.pen[sp.app as usize];
                t += self.pen[sp.app as usize];
            }
            let disp_i = self.k as i64 - pick.packet.id as i64;
            let disp = disp_i as f64;
            self.sum += disp;
            self.sum2 += disp * disp;
            self.res.order_max = self.res.order_max.max(disp_i.unsigned_abs());
            if self.p.record.contains(&self.k) {
                let groups = (0..self.p.apps as u32).map(|a| self.s.group(AppId(a))).collect();
                self.res.groups.push((self.k, groups));
            }
            self.k += 1;
            self.res.packets += 1;
            self.res.bytes += sp.len as u64;
            self.running.push(Reverse((now + t.round() as u64, proc)));
        }
        // A processor that found nothing to run stays idle: the stream is over.
        self.free.clear();
    }
}

impl Model for LapModel<'_> {
    type Event = ();
    fn handle(&mut self, _: (), _: &mut Engine<()>) {}
    fn next_source(&mut self) -> Option<(Instant, u8)> {
        if !self.started {
            return Some((Instant::ZERO, 0));
        }
        self.running.peek().map(|Reverse((t, _))| (Instant::from_nanos(*t), 0))
    }
    fn source(&mut self, engine: &mut Engine<()>) {
        let now = engine.now().as_nanos();
        if self.started {
            // Every processor completing now is free before the round.
            while let Some(&Reverse((t, proc))) = self.running.peek() {
                if t != now {
                    break;
                }
                self.running.pop();
                self.free.push(proc);
            }
        }
        self.started = true;
        self.round(now);
    }
}
