//! The predictive paper's fair-queuing setting (section 4.2.1): flows with reserved processing
//! shares, each sending at just its share, served by `m` processors through
//! [`npqos_core::sched::fq::FairQueue`] (SFQ, WF2Q+ or EFQ).
//!
//! Processing times: `t_e(a, l)` from Table 1 scaled to the 2 GHz processor of section 4.2.1
//! (Table 1 / 10), times `1 + U(-v_a, +v_a)` per packet (the paper's uniform model of section
//! 4.1.4; `v_a` is our reading of Figure 2's spread, see docs/predictive.md). No cold-cache
//! penalty here: section 4.2 studies ordering, and section 5 the caches.

pub mod efq_lap;
pub mod lap;
pub mod scenario;

use crate::engine::{Engine, Model, RunLimits, StopReason};
use crate::rng::RngStreams;
use npqos_core::sched::estimate::{AppParams, Estimator, SPC_TO_2GHZ, TABLE1};
use npqos_core::sched::fq::{Discipline, FairQueue, FqPacket};
use npqos_core::{AppId, FlowId, Instant};
use rand::Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Relative half-width `v_a` of the uniform processing-time variation per application (Table 1
/// order: forwarding, encryption, compression, FEC). Compression is data dependent (Figure 2:
/// "the variations are slightly higher").
pub const VARIATION: [f64; 4] = [0.10, 0.05, 0.20, 0.05];

/// Packet sizes of the 8 flows of each application in the 32-flow setting.
pub const FLOW_SIZES: [u32; 8] = [64, 128, 200, 300, 512, 800, 1024, 1500];

/// One flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowSpec {
    pub app: usize,
    pub len: u32,
    /// Reserved share of all processors.
    pub share: f64,
}

/// The 32 flows of section 4.2.1: 4 applications x [`FLOW_SIZES`], equal reservations.
pub fn paper_flows() -> Vec<FlowSpec> {
    let n = (TABLE1.len() * FLOW_SIZES.len()) as f64;
    (0..TABLE1.len()).flat_map(|app| FLOW_SIZES.iter().map(move |&len| FlowSpec { app, len, share: 1.0 / n })).collect()
}

/// Table 1 on the 2 GHz processor.
pub fn apps_2ghz() -> Vec<AppParams> {
    TABLE1.iter().map(|a| a.scaled(SPC_TO_2GHZ)).collect()
}

/// Parameters of one run.
#[derive(Clone, Debug)]
pub struct FqParams {
    pub discipline: Discipline,
    pub processors: u32,
    pub flows: Vec<FlowSpec>,
    /// Offered load as a fraction of each flow's share (1 = "just saturate").
    pub load: f64,
    pub duration_ns: u64,
    /// Flows whose per-packet delays are kept as a series.
    pub record: Vec<usize>,
    pub seed: u64,
}

/// Per-flow outcome.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowStats {
    pub packets: u64,
    pub delay_sum_ns: f64,
    pub max_delay_ns: f64,
    /// Interarrival time of the flow's periodic arrivals.
    pub interarrival_ns: f64,
    /// Mean estimate t_e (ns) and its largest actual time and variation bound (ns).
    pub t_e_ns: f64,
    pub a_max_ns: f64,
    pub v_max_ns: f64,
}

impl FlowStats {
    pub fn mean_delay_ns(&self) -> f64 {
        self.delay_sum_ns / self.packets.max(1) as f64
    }
}

/// Outcome of a run.
#[derive(Clone, Debug, Default)]
pub struct FqResult {
    pub flows: Vec<FlowStats>,
    /// (flow, [(arrival ms, delay us)]) for the recorded flows.
    pub series: Vec<(usize, Vec<(f64, f64)>)>,
    pub packets: u64,
    pub events: u64,
    pub busy_ns: f64,
    /// Delay (ns) of every packet by id (ids follow arrival order, which is the same for every
    /// discipline at one seed: runs can be compared packet by packet).
    pub delays: Vec<f64>,
    /// Flow of every packet by id.
    pub flow_of: Vec<u32>,
}

/// Runs one fair-queuing simulation to the end.
pub fn run(p: &FqParams) -> FqResult {
    run_limited(p, RunLimits::until(Instant::MAX), None, &mut |_| {}).0
}

/// Runs one fair-queuing simulation on the engine within `limits` (an event budget), stopping
/// early when `interrupt` is raised; the result then holds what completed so far.
///
/// Events (docs/predictive.md): a processor's completion (class 0) and a flow's next arrival
/// (class 1), both from the model's source; at one instant completions run first, in
/// processor order, then arrivals in flow order. After every event the free processors take
/// packets from the fair queue, the last one freed first.
pub fn run_limited(
    p: &FqParams,
    limits: RunLimits,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> (FqResult, StopReason) {
    let mut m = FqModel::new(p);
    let mut engine = Engine::<()>::new();
    if let Some(f) = interrupt {
        engine = engine.with_interrupt(f);
    }
    let stop = engine.run(&mut m, limits, progress);
    (m.res, stop)
}

/// The fair-queuing model: flows, the fair queue, the estimator and `m` processors.
struct FqModel<'a> {
    p: &'a FqParams,
    q: FairQueue,
    est: Estimator,
    rngs: Vec<crate::rng::StreamRng>,
    res: FqResult,
    /// Next arrival of each flow: (time, flow, index k of the arrival).
    arrivals: BinaryHeap<Reverse<(u64, u32, u64)>>,
    phases: Vec<f64>,
    rec: Vec<Option<usize>>,
    /// Processors busy: (completion time, processor, packet id).
    running: BinaryHeap<Reverse<(u64, u32, u64)>>,
    inflight: Vec<Option<FqPacket>>,
    free: Vec<u32>,
    next_id: u64,
    /// The source event announced by `next_source`: a completion (else an arrival).
    completion_next: bool,
}

impl<'a> FqModel<'a> {
    fn new(p: &'a FqParams) -> Self {
        let apps = apps_2ghz();
        let m = p.processors;
        let shares: Vec<f64> = p.flows.iter().map(|f| f.share).collect();
        let q = FairQueue::new(p.discipline, m, &shares).expect("valid shares");
        // The estimator learns from warm processing times; its prior is Table 1.
        let est = Estimator::new(&apps, 64);
        let streams = RngStreams::new(p.seed);
        let mut rngs: Vec<_> = (0..p.flows.len()).map(|i| streams.stream("predictive-flow", i as u64)).collect();
        let mut res = FqResult { flows: vec![FlowStats::default(); p.flows.len()], ..Default::default() };
        let mut arrivals = BinaryHeap::new();
        let mut phases = Vec::with_capacity(p.flows.len());
        for (i, f) in p.flows.iter().enumerate() {
            let te = apps[f.app].estimate_us(f.len) * 1e3;
            let gap = te / (f.share * m as f64) / p.load;
            let st = &mut res.flows[i];
            st.interarrival_ns = gap;
            st.t_e_ns = te;
            st.v_max_ns = te * VARIATION[f.app];
            st.a_max_ns = te + st.v_max_ns;
            let phase = rngs[i].random_range(0.0..gap);
            phases.push(phase);
            arrivals.push(Reverse((phase as u64, i as u32, 0u64)));
        }
        let mut rec: Vec<Option<usize>> = vec![None; p.flows.len()];
        for (k, &f) in p.record.iter().enumerate() {
            rec[f] = Some(k);
            res.series.push((f, Vec::new()));
        }
        FqModel {
            p,
            q,
            est,
            rngs,
            res,
            arrivals,
            phases,
            rec,
            running: BinaryHeap::new(),
            inflight: vec![None; m as usize],
            free: (0..m).rev().collect(),
            next_id: 0,
            completion_next: false,
        }
    }

    fn complete(&mut self, now: Instant) {
        let Reverse((t, proc, _)) = self.running.pop().expect("announced");
        debug_assert_eq!(t, now.as_nanos());
        let pk = self.inflight[proc as usize].take().expect("running");
        self.q.completed(&pk).expect("a packet this queue served");
        let f = pk.flow.index();
        let d = (now - pk.arrival).as_nanos() as f64;
        let st = &mut self.res.flows[f];
        st.packets += 1;
        st.delay_sum_ns += d;
        st.max_delay_ns = st.max_delay_ns.max(d);
        if let Some(k) = self.rec[f] {
            self.res.series[k].1.push((pk.arrival.as_nanos() as f64 * 1e-6, d * 1e-3));
        }
        self.est.observe(pk.app.index(), self.p.flows[f].len, pk.actual_ns * 1e-3);
        self.res.packets += 1;
        self.res.delays[pk.id as usize] = d;
        self.free.push(proc);
    }

    fn arrive(&mut self, now: Instant) {
        let Reverse((t, fi, k)) = self.arrivals.pop().expect("announced");
        debug_assert_eq!(t, now.as_nanos());
        let i = fi as usize;
        let f = self.p.flows[i];
        let te = self.res.flows[i].t_e_ns;
        let actual = te * (1.0 + self.rngs[i].random_range(-VARIATION[f.app]..=VARIATION[f.app]));
        let est_ns = self.est.estimate_us(f.app, f.len) * 1e3;
        let pk = FqPacket {
            id: self.next_id,
            flow: FlowId(fi),
            app: AppId(f.app as u32),
            est_ns,
            actual_ns: actual,
            arrival: now,
        };
        self.q.enqueue(now, pk).expect("flow exists");
        self.next_id += 1;
        self.res.delays.push(f64::NAN);
        self.res.flow_of.push(fi);
        // Periodic from the flow's phase (no accumulated rounding).
        let nt = (self.phases[i] + (k + 1) as f64 * self.res.flows[i].interarrival_ns) as u64;
        if nt < self.p.duration_ns {
            self.arrivals.push(Reverse((nt, fi, k + 1)));
        }
    }

    /// Free processors take packets, the last one freed first.
    fn dispatch(&mut self, now: Instant) {
        while let Some(&proc) = self.free.last() {
            let Some(d) = self.q.dequeue(now).expect("time does not go back") else { break };
            self.free.pop();
            let end = now.as_nanos() + d.packet.actual_ns.round() as u64;
            self.res.busy_ns += d.packet.actual_ns;
            self.inflight[proc as usize] = Some(d.packet);
            self.running.push(Reverse((end, proc, d.packet.id)));
        }
    }
}

impl Model for FqModel<'_> {
    type Event = ();
    fn handle(&mut self, _: (), _: &mut Engine<()>) {}
    fn next_source(&mut self) -> Option<(Instant, u8)> {
        let t_arr = self.arrivals.peek().map(|Reverse((t, _, _))| *t);
        let t_done = self.running.peek().map(|Reverse((t, _, _))| *t);
        // An arrival at or after the end of arrivals still runs if a completion is pending
        // after it (the first arrival of a flow whose phase lies past a short run).
        let (t, completion) = match (t_done, t_arr) {
            (None, None) => return None,
            (None, Some(a)) if a >= self.p.duration_ns => return None,
            (Some(d), Some(a)) if a < d => (a, false),
            (Some(d), _) => (d, true),
            (None, Some(a)) => (a, false),
        };
        self.completion_next = completion;
        Some((Instant::from_nanos(t), if completion { 0 } else { 1 }))
    }
    fn source(&mut self, engine: &mut Engine<()>) {
        let now = engine.now();
        self.res.events += 1;
        if self.completion_next {
            self.complete(now);
        } else {
            self.arrive(now);
        }
        self.dispatch(now);
    }
}
