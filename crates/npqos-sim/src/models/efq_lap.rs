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

use super::predictive::{FlowSpec, VARIATION};
use crate::rng::RngStreams;
use npqos_core::sched::estimate::{AppParams, SPC_TO_2GHZ, TABLE1};
use npqos_core::sched::fq::{Discipline, FairQueue, FqPacket};
use npqos_core::sched::lap::{LapPacket, LapScheduler, Policy};
use rand::Rng;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

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

/// Runs one simulation.
pub fn run(p: &SwitchParams) -> SwitchResult {
    let apps = apps();
    let m = p.processors;
    let shares: Vec<f64> = p.flows.iter().map(|f| f.share).collect();
    let mut fq = FairQueue::new(Discipline::Efq, m, &shares).expect("valid shares");
    let mut lap = LapScheduler::new(Policy::Lap, apps.len(), m).expect("valid configuration");
    let streams = RngStreams::new(p.seed);
    let mut rngs: Vec<_> = (0..p.flows.len()).map(|i| streams.stream("predictive-switch-flow", i as u64)).collect();
    let te: Vec<f64> = p.flows.iter().map(|f| apps[f.app].estimate_us(f.len) * 1e3).collect();
    let gap = |i: usize, t: u64| {
        let f = &p.flows[i];
        let load = if p.bursts.apps.contains(&f.app) && p.bursts.on(t) { p.bursts.factor } else { p.calm_load };
        te[i] / (f.share * m as f64) / load
    };
    let mut arrivals = BinaryHeap::new();
    for (i, r) in rngs.iter_mut().enumerate() {
        let g = gap(i, 0);
        arrivals.push(Reverse((r.random_range(0.0..g) as u64, i as u32)));
    }
    let mut res = SwitchResult::default();
    let mut meta: Vec<Meta> = Vec::new();
    let mut running: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
    let mut inflight: Vec<Option<FqPacket>> = vec![None; m as usize];
    let mut idle: VecDeque<u32> = (0..m).collect();
    let mut lap_mode = matches!(p.mode, Mode::Lap);
    let warm_pref = matches!(p.mode, Mode::EfqWarm | Mode::Combined { .. });
    let (mut now, mut last, mut last_sample) = (0u64, 0u64, None::<u64>);
    loop {
        let t_arr = arrivals.peek().map(|Reverse((t, _))| *t).filter(|&t| t < p.duration_ns);
        let t_done = running.peek().map(|Reverse((t, _))| *t);
        let (t, is_arrival) = match (t_arr, t_done) {
            (None, None) => break,
            (Some(a), Some(d)) if d <= a => (d, false),
            (Some(a), _) => (a, true),
            (None, Some(d)) => (d, false),
        };
        now = t;
        let work = lap.total_work();
        let dt = (now - last) as f64;
        if work >= p.calm_below_ns {
            res.overloaded_ns += dt;
        }
        if lap_mode {
            res.lap_ns += dt;
        }
        last = now;
        if is_arrival {
            let Reverse((_, fi)) = arrivals.pop().expect("peeked");
            let i = fi as usize;
            let f = p.flows[i];
            let v = VARIATION[f.app];
            let warm = te[i] * (1.0 + rngs[i].random_range(-v..=v));
            let id = meta.len() as u64;
            meta.push(Meta {
                flow: fi,
                app: f.app as u16,
                est: te[i],
                warm,
                arrival: now,
                calm: work < p.calm_below_ns,
            });
            let pk = FqPacket { id, flow: fi, app: f.app as u16, est_ns: te[i], actual_ns: warm, arrival_ns: now };
            fq.enqueue(now, pk).expect("flow exists");
            lap.enqueue(LapPacket { id, app: f.app as u32, est: te[i] }).expect("valid packet");
            arrivals.push(Reverse((now + gap(i, now).round() as u64, fi)));
        } else {
            let Reverse((_, proc)) = running.pop().expect("peeked");
            let pk = inflight[proc as usize].take().expect("running");
            fq.completed(&pk);
            let mt = &meta[pk.id as usize];
            let d = (now - mt.arrival) as f64;
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
            idle.push_back(proc);
        }
        let work = lap.total_work();
        res.max_backlog_ns = res.max_backlog_ns.max(work);
        if last_sample.is_none_or(|s| now >= s + 1_000_000) {
            res.backlog.push((now as f64 * 1e-6, work * 1e-6));
            last_sample = Some(now);
        }
        if let Mode::Combined { hi_ns, lo_ns } = p.mode {
            if !lap_mode && work >= hi_ns {
                lap_mode = true;
                res.switches += 1;
            } else if lap_mode && work < lo_ns {
                lap_mode = false;
            }
        }
        while !idle.is_empty() && !fq.is_empty() {
            let (proc, pk, cold) = if lap_mode {
                let proc = idle.pop_front().expect("idle processor");
                let pick = lap.dispatch(proc).expect("processor exists").expect("a packet waits");
                let flow = meta[pick.packet.id as usize].flow;
                let d = fq.take_head(now, flow).expect("LAP's choice is its flow's head");
                debug_assert_eq!(d.packet.id, pick.packet.id);
                (proc, d.packet, pick.cold)
            } else {
                let d = fq.dequeue(now).expect("a packet waits");
                let app = d.packet.app as u32;
                let at = if warm_pref { idle.iter().position(|&q| lap.cache(q) == Some(app)).unwrap_or(0) } else { 0 };
                let proc = idle.remove(at).expect("idle processor");
                let mt = &meta[d.packet.id as usize];
                lap.remove(app, d.packet.id, mt.est);
                let cold = lap.assign(proc, app);
                (proc, d.packet, cold)
            };
            let mt = &meta[pk.id as usize];
            let mut actual = mt.warm;
            if cold {
                let pen = apps[mt.app as usize].cold_penalty_us * 1e3;
                actual += pen;
                res.penalty_ns += pen;
                res.cold += 1;
            }
            res.busy_ns += actual;
            let pk = FqPacket { actual_ns: actual, ..pk };
            inflight[proc as usize] = Some(pk);
            running.push(Reverse((now + actual.round() as u64, proc)));
        }
    }
    res.end_ns = now;
    for d in [&mut res.conforming_calm, &mut res.conforming_overloaded, &mut res.bursting] {
        d.finish();
    }
    res
}
