//! The predictive paper's fair-queuing setting (section 4.2.1): flows with reserved processing
//! shares, each sending at just its share, served by `m` processors through
//! [`npqos_core::sched::fq::FairQueue`] (SFQ, WF2Q+ or EFQ).
//!
//! Processing times: `t_e(a, l)` from Table 1 scaled to the 2 GHz processor of section 4.2.1
//! (Table 1 / 10), times `1 + U(-v_a, +v_a)` per packet (the paper's uniform model of section
//! 4.1.4; `v_a` is our reading of Figure 2's spread, see docs/predictive.md). No cold-cache
//! penalty here: section 4.2 studies ordering, and section 5 the caches.

use crate::rng::RngStreams;
use npqos_core::sched::estimate::{AppParams, Estimator, SPC_TO_2GHZ, TABLE1};
use npqos_core::sched::fq::{Discipline, FairQueue, FqPacket};
use rand::Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

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

/// Runs one fair-queuing simulation.
pub fn run(p: &FqParams) -> FqResult {
    let apps = apps_2ghz();
    let m = p.processors;
    let shares: Vec<f64> = p.flows.iter().map(|f| f.share).collect();
    let mut q = FairQueue::new(p.discipline, m, &shares).expect("valid shares");
    // The estimator learns from warm processing times; its prior is Table 1.
    let mut est = Estimator::new(&apps, 64);
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
    // Processors: completion heap of (end, proc, packet).
    let mut running: BinaryHeap<Reverse<(u64, u32, u64)>> = BinaryHeap::new();
    let mut inflight: Vec<Option<FqPacket>> = vec![None; m as usize];
    let mut free: Vec<u32> = (0..m).rev().collect();
    let mut next_id = 0u64;
    loop {
        let t_arr = arrivals.peek().map(|Reverse((t, _, _))| *t).unwrap_or(u64::MAX);
        let t_done = running.peek().map(|Reverse((t, _, _))| *t).unwrap_or(u64::MAX);
        if t_arr >= p.duration_ns && t_done == u64::MAX {
            break;
        }
        res.events += 1;
        let now;
        if t_done <= t_arr {
            let Reverse((t, proc, _)) = running.pop().expect("peeked");
            now = t;
            let pk = inflight[proc as usize].take().expect("running");
            q.completed(&pk);
            let f = pk.flow as usize;
            let d = (t - pk.arrival_ns) as f64;
            let st = &mut res.flows[f];
            st.packets += 1;
            st.delay_sum_ns += d;
            st.max_delay_ns = st.max_delay_ns.max(d);
            if let Some(k) = rec[f] {
                res.series[k].1.push((pk.arrival_ns as f64 * 1e-6, d * 1e-3));
            }
            est.observe(pk.app as usize, p.flows[f].len, pk.actual_ns * 1e-3);
            res.packets += 1;
            res.delays[pk.id as usize] = d;
            free.push(proc);
        } else {
            let Reverse((t, fi, k)) = arrivals.pop().expect("peeked");
            now = t;
            let f = p.flows[fi as usize];
            let te = res.flows[fi as usize].t_e_ns;
            let actual = te * (1.0 + rngs[fi as usize].random_range(-VARIATION[f.app]..=VARIATION[f.app]));
            let est_ns = est.estimate_us(f.app, f.len) * 1e3;
            q.enqueue(
                t,
                FqPacket { id: next_id, flow: fi, app: f.app as u16, est_ns, actual_ns: actual, arrival_ns: t },
            )
            .expect("flow exists");
            next_id += 1;
            res.delays.push(f64::NAN);
            res.flow_of.push(fi);
            // Periodic from the flow's phase (no accumulated rounding).
            let nt = (phases[fi as usize] + (k + 1) as f64 * res.flows[fi as usize].interarrival_ns) as u64;
            if nt < p.duration_ns {
                arrivals.push(Reverse((nt, fi, k + 1)));
            }
        }
        while let Some(&proc) = free.last() {
            let Some(d) = q.dequeue(now) else { break };
            free.pop();
            let end = now + d.packet.actual_ns.round() as u64;
            res.busy_ns += d.packet.actual_ns;
            inflight[proc as usize] = Some(d.packet);
            running.push(Reverse((end, proc, d.packet.id)));
        }
    }
    res
}
