//! dqs simulation: packets (a trace corpus overlay or synthetic heavy-tailed flows) enter a
//! [`Dqs`] flow table and leave through one output link served by DRR over the active physical
//! queues, at a capacity set so the offered load is `load` (0.95 in dqs section 6). The AFM
//! table is measured at every arrival; the mapping requests can be recorded and replayed into
//! the SPSQ / MPSQ / MPMQ processing models of dqs section 5 ([`process()`], on the engine).
//!
//! Timing: a packet leaves its queue when its transmission starts; the link is a
//! [`Serializer`] (drift-free). Departures that start at an arrival's instant go first.

pub mod process;
pub mod scenario;

pub use crate::workload::flows::{synthetic_key, Arrival, FlowGen, SyntheticFlows};
pub use process::{process, ProcModel, ProcResult, REQUEST_BYTES};

use crate::engine::{Engine, Model, RunLimits, StopReason};
use npqos_core::flowmap::{theory, Dqs, DqsConfig, Enqueue};
use npqos_core::rate::Serializer;
use npqos_core::{Instant, Rate};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Parameters of one dqs link run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DqsLinkParams {
    pub table: DqsConfig,
    /// Offered load: link capacity = mean offered rate / load.
    pub load: f64,
    /// Record every mapping request for [`process`].
    pub record_requests: bool,
    /// Record every transmission start (time, length), for equivalence tests.
    pub record_departures: bool,
}

/// A mapping request as seen by the processing models: its sub-table, the nodes compared,
/// and whether it created a new mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub slot: u32,
    pub compares: u16,
    pub new_flow: bool,
}

/// Running sums of a theory quantity beside a measurement.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Beside {
    pub count: u64,
    pub measured: f64,
    /// The paper's formula (Theorem 1 or 2) at the `l` of each lookup.
    pub paper: f64,
    /// The exact expectation for random BSTs under uniform hashing.
    pub exact: f64,
}

impl Beside {
    pub fn mean_measured(&self) -> f64 {
        self.measured / self.count.max(1) as f64
    }
    pub fn mean_paper(&self) -> f64 {
        self.paper / self.count.max(1) as f64
    }
    pub fn mean_exact(&self) -> f64 {
        self.exact / self.count.max(1) as f64
    }
}

/// What a dqs link run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DqsLinkResult {
    pub packets: u64,
    pub bytes: u64,
    pub capacity_bps: f64,
    pub offered_bps: f64,
    pub span_ns: u64,
    pub dropped_buffer_full: u64,
    pub dropped_no_queue: u64,
    pub flows_activated: u64,
    /// Searches for flows already active (dqs Fig. 5 / Theorem 1).
    pub search: Beside,
    /// Searches that identified a new active flow (dqs Fig. 6 / Theorem 2).
    pub update: Beside,
    /// Packets by cycles to find their queue (1 for the hash + nodes compared), dqs Figs 7-8.
    pub cycles_hist: Vec<u64>,
    /// Table 2 sums over arrival samples: active flows, non-empty slots, slots with > 1 flow.
    pub samples: u64,
    pub sum_active: f64,
    pub sum_nonempty: f64,
    pub sum_multi: f64,
    pub worst_slot: u32,
    pub max_active: u64,
    /// Table 3: physical queues in use, maximum and time average.
    pub max_queues: u32,
    pub mean_queues: f64,
    /// Peak bytes held by the AFM table's data structure.
    pub afm_memory_bytes: usize,
    /// Highest offered rate over a 10 ms window (fixed windows from time 0), bits/s.
    pub peak_10ms_bps: f64,
    pub requests: Vec<Request>,
    /// Transmission starts (ns, bytes) in order, when recorded.
    pub departures: Vec<(u64, u32)>,
}

impl DqsLinkResult {
    pub fn mean_cycles(&self) -> f64 {
        let n: u64 = self.cycles_hist.iter().sum();
        self.cycles_hist.iter().enumerate().map(|(c, &k)| c as f64 * k as f64).sum::<f64>() / n.max(1) as f64
    }
}

/// Theorem values per `l`, computed on first use.
struct TheoryMemo {
    m: u64,
    memo: Vec<Option<[f64; 4]>>,
}

impl TheoryMemo {
    fn get(&mut self, l: usize) -> [f64; 4] {
        if self.memo.len() <= l {
            self.memo.resize(l + 1, None);
        }
        *self.memo[l].get_or_insert_with(|| {
            let (l, m) = (l as u64, self.m);
            [
                theory::theorem1(l, m),
                theory::successful_search_flow_weighted(l, m),
                theory::theorem2(l, m),
                theory::unsuccessful_search_exact(l, m),
            ]
        })
    }
}

/// Runs `arrivals` (time-ordered) through a dqs flow table and a DRR link. `offered_bps` is the
/// workload's mean rate (sets the capacity); `expected` packets scale `progress` (0..1).
pub fn run_link(
    p: &DqsLinkParams,
    arrivals: impl Iterator<Item = Arrival>,
    offered_bps: f64,
    expected: u64,
    progress: &mut dyn FnMut(f64),
) -> DqsLinkResult {
    run_link_limited(p, arrivals, offered_bps, expected, RunLimits::until(Instant::MAX), None, progress).0
}

/// [`run_link`] on the engine within `limits`, stopping early when `interrupt` is raised (the
/// result then covers the packets offered so far).
///
/// Events (docs/dqs.md): a transmission start (class 0: the head the DRR picks leaves its
/// queue) and an arrival (class 1), both from the model's source; at one instant departures
/// go first, so a packet arriving as the link frees up finds its queue already served. The run
/// ends with the last arrival (packets still queued then are not sent).
pub fn run_link_limited<I: Iterator<Item = Arrival>>(
    p: &DqsLinkParams,
    arrivals: I,
    offered_bps: f64,
    expected: u64,
    limits: RunLimits,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(f64),
) -> (DqsLinkResult, StopReason) {
    let capacity = Rate::from_bits_per_sec((offered_bps / p.load).round().max(1.0) as u64);
    let mut m = LinkModel {
        p,
        dqs: Dqs::new(p.table).expect("the scenario reader and the experiments build valid tables"),
        link: Serializer::new(capacity).expect("the load gives a positive capacity"),
        r: DqsLinkResult { capacity_bps: capacity.bits_per_sec() as f64, offered_bps, ..Default::default() },
        memo: TheoryMemo { m: p.table.slots as u64, memo: Vec::new() },
        arrivals: arrivals.peekable(),
        q_area: 0.0,
        q_last_t: 0,
        first_t: None,
        last_ts: 0,
        win: 0,
        win_bytes: 0,
        win_max: 0,
        expected,
        progress,
        departure_next: false,
    };
    let mut engine = Engine::<()>::new();
    if let Some(f) = interrupt {
        engine = engine.with_interrupt(f);
    }
    let stop = engine.run(&mut m, limits, &mut |_| {});
    (m.finish(), stop)
}

/// The dqs link model: the flow table, the link, and what is measured.
struct LinkModel<'a, I: Iterator<Item = Arrival>> {
    p: &'a DqsLinkParams,
    dqs: Dqs,
    link: Serializer,
    r: DqsLinkResult,
    memo: TheoryMemo,
    arrivals: std::iter::Peekable<I>,
    /// Integral of the queues in use over time, and the time it was last advanced.
    q_area: f64,
    q_last_t: u64,
    first_t: Option<u64>,
    last_ts: u64,
    /// The current 10 ms window, its bytes, and the largest finished window's bytes.
    win: u64,
    win_bytes: u64,
    win_max: u64,
    expected: u64,
    progress: &'a mut dyn FnMut(f64),
    departure_next: bool,
}

impl<I: Iterator<Item = Arrival>> LinkModel<'_, I> {
    /// The head the DRR picks starts transmission (at the later of the link's free time and
    /// the last event: an idle link starts as soon as something waits).
    fn depart(&mut self, start: u64) {
        let in_use = self.dqs.buffer().queues_in_use() as f64;
        self.q_area += in_use * (start - self.q_last_t) as f64;
        self.q_last_t = start;
        let d = self.dqs.dequeue(None).expect("announced with packets waiting");
        self.link.send(Instant::from_nanos(start), d.len as u64);
        if self.p.record_departures {
            self.r.departures.push((start, d.len));
        }
    }

    fn arrive(&mut self) {
        let a = self.arrivals.next().expect("announced");
        let (r, dqs) = (&mut self.r, &mut self.dqs);
        let t = a.ts;
        self.first_t.get_or_insert(t);
        self.q_area += dqs.buffer().queues_in_use() as f64 * (t - self.q_last_t) as f64;
        self.q_last_t = t;
        // Table 2 sample, then the mapping.
        let l = dqs.active_flows();
        let st = dqs.afm().stats();
        r.samples += 1;
        r.sum_active += l as f64;
        r.sum_nonempty += st.nonempty as f64;
        r.sum_multi += st.multi as f64;
        r.max_active = r.max_active.max(l as u64);
        let e = dqs.enqueue(&a.flow, a.len, None);
        let (compares, new_flow, slot) = match e {
            Enqueue::Queued(q) => (q.compares, q.new_flow, q.slot),
            Enqueue::Dropped { compares, slot, new_flow, .. } => (compares, new_flow, slot),
        };
        let th = self.memo.get(l);
        if new_flow {
            r.update.count += 1;
            r.update.measured += compares as f64;
            r.update.paper += th[2];
            r.update.exact += th[3];
        } else {
            r.search.count += 1;
            r.search.measured += compares as f64;
            r.search.paper += th[0];
            r.search.exact += th[1];
        }
        let cyc = 1 + compares as usize;
        if r.cycles_hist.len() <= cyc {
            r.cycles_hist.resize(cyc + 1, 0);
        }
        r.cycles_hist[cyc] += 1;
        if self.p.record_requests {
            r.requests.push(Request { slot, compares: compares.min(u16::MAX as u32) as u16, new_flow });
        }
        r.packets += 1;
        r.bytes += a.len as u64;
        if t / 10_000_000 != self.win {
            self.win_max = self.win_max.max(self.win_bytes);
            (self.win, self.win_bytes) = (t / 10_000_000, 0);
        }
        self.win_bytes += a.len as u64;
        r.afm_memory_bytes = r.afm_memory_bytes.max(dqs.afm().memory_bytes());
        self.last_ts = t;
        if r.packets.is_multiple_of(1 << 16) {
            (self.progress)((r.packets as f64 / self.expected.max(1) as f64).min(1.0));
        }
    }

    fn finish(self) -> DqsLinkResult {
        let mut r = self.r;
        r.peak_10ms_bps = self.win_max.max(self.win_bytes) as f64 * 8.0 / 0.01;
        let c = self.dqs.counters();
        r.dropped_buffer_full = c.dropped_buffer_full;
        r.dropped_no_queue = c.dropped_no_queue;
        r.flows_activated = c.flows_activated;
        r.worst_slot = self.dqs.afm().stats().worst;
        r.max_queues = self.dqs.buffer().max_queues_in_use();
        let span = self.last_ts.saturating_sub(self.first_t.unwrap_or(0));
        r.span_ns = span;
        r.mean_queues = if span > 0 { self.q_area / span as f64 } else { 0.0 };
        r
    }
}

impl<I: Iterator<Item = Arrival>> Model for LinkModel<'_, I> {
    type Event = ();
    fn handle(&mut self, _: (), _: &mut Engine<()>) {}
    fn next_source(&mut self) -> Option<(Instant, u8)> {
        // Nothing after the last arrival: the run ends there.
        let t_arr = self.arrivals.peek()?.ts;
        let t_dep = (!self.dqs.is_empty()).then(|| self.link.free_at().as_nanos().max(self.q_last_t));
        self.departure_next = t_dep.is_some_and(|d| d <= t_arr);
        Some(match t_dep {
            Some(d) if d <= t_arr => (Instant::from_nanos(d), 0),
            _ => (Instant::from_nanos(t_arr), 1),
        })
    }
    fn source(&mut self, engine: &mut Engine<()>) {
        if self.departure_next {
            self.depart(engine.now().as_nanos());
        } else {
            self.arrive();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::RngStreams;
    use crate::workload::SizeDist;
    use npqos_core::flow::FlowKey;
    use npqos_core::Duration;

    #[test]
    fn synthetic_keys_are_distinct_and_rate_is_as_specified() {
        let mut keys: Vec<FlowKey> = (0..200_000).map(synthetic_key).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), 200_000);
        let w = SyntheticFlows {
            in_progress: 1000,
            mean_packets: 10.0,
            pareto_shape: 1.5,
            mean_gap: Duration::from_millis(10),
            sizes: SizeDist::Constant(500),
            duration: Duration::from_secs(20),
        };
        let g = w.generator(RngStreams::new(1).stream("t", 0));
        let mut n = 0u64;
        let mut last = 0;
        for a in g {
            assert!(a.ts >= last);
            last = a.ts;
            n += 1;
        }
        let expect = w.expected_packets() as f64;
        assert!((n as f64 / expect - 1.0).abs() < 0.02, "{n} vs {expect}");
    }

    #[test]
    fn constant_sizes_give_the_md1_queue() {
        // Poisson arrivals (superposed exponential-gap flows), constant sizes: the mean number
        // of packets waiting is Pollaczek-Khinchine's rho^2 / (2 (1 - rho)); every waiting
        // packet here belongs to a distinct flow almost surely, so active flows ~ waiting packets.
        let w = SyntheticFlows {
            in_progress: 5000,
            mean_packets: 10.0,
            pareto_shape: 1.2,
            mean_gap: Duration::from_millis(10),
            sizes: SizeDist::Constant(500),
            duration: Duration::from_secs(2),
        };
        let p = DqsLinkParams {
            table: DqsConfig { queues: 1 << 16, blocks: 1 << 20, ..Default::default() },
            load: 0.9,
            record_requests: false,
            record_departures: false,
        };
        let r = run_link(&p, w.generator(RngStreams::new(1).stream("x", 0)), w.mean_rate_bps(), 0, &mut |_| {});
        let rho = r.bytes as f64 * 8.0 / (r.span_ns as f64 * 1e-9) / r.capacity_bps;
        let lq = rho * rho / (2.0 * (1.0 - rho));
        let got = r.sum_active / r.samples as f64;
        assert!((got / lq - 1.0).abs() < 0.1, "rho {rho}: {got} flows waiting vs P-K {lq}");
        assert!((r.mean_queues / lq - 1.0).abs() < 0.1);
    }
}
