//! Fair queuing of processing time (predictive section 4): `m` processors seen as one resource
//! shared by flows with reserved rates; SFQ, WF2Q+ (given the true processing times: the
//! oracle) and EFQ (eqs 8-12: ordered by the estimated finish tag, charged the actual time).
//!
//! Units: tags are in nanoseconds of *aggregate* virtual time. The `m` processors together do
//! one nanosecond of aggregate work per real nanosecond, so a packet needing `t` ns of one
//! processor costs `t / m` aggregate ns, and `t / (m r_i)` of flow `i`'s virtual time at its
//! reserved share `r_i` (the shares sum to at most 1).
//!
//! * System virtual time (eq 8): `V(t + tau) = max(V(t) + tau, min S_i over backlogged i)`,
//!   the same for all three disciplines (the paper's "SFQ with a modified system virtual time"),
//!   so that they differ only in the order they serve.
//! * Start tag (eqs 9-10): when a packet reaches the head of its flow's queue,
//!   `S = max(F, V(a))` if it arrived to an empty queue, else `S = F`, with `F` the flow's finish
//!   tag so far.
//! * SFQ serves the smallest `S`. WF2Q+ serves, among eligible heads (`S <= V`), the smallest
//!   true finish tag `S + A / (m r)`. EFQ serves, among eligible heads, the smallest estimated
//!   finish tag `EF = S + t_e / (m r)` (eq 11).
//! * Charging (eq 12): a dispatched packet advances `F` by its estimate until it completes; at
//!   completion `F` is corrected by `(A - t_e) / (m r)`, so every flow pays for what it used.
//!   (SFQ does not know processing times either: it is charged the same way. With one
//!   processor the next packet is picked after the previous one completed, so the estimate
//!   never shows in SFQ's order.) If the flow's head already took its start tag from the
//!   provisional `F`, the head's tags are recomputed.
//!
//! Cost: O(log n) per enqueue, dequeue and completion in the number of backlogged flows (two
//! binary heaps with lazy deletion: eligible heads by finish tag, ineligible ones by start
//! tag); no per-packet allocation once the queues have grown.

use crate::error::{Clock, Error};
use crate::id::{check, AppId, FlowId};
use crate::ord::TotalF64;
use crate::time::Instant;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// The order in which heads are served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Discipline {
    /// Start-time fair queuing: smallest start tag.
    Sfq,
    /// WF2Q+ with the true processing times known in advance (the oracle).
    Wf2qPlus,
    /// Estimation-based fair queuing: smallest estimated finish tag among eligible heads.
    Efq,
}

crate::named!(Discipline, "discipline", { Sfq => "sfq", Wf2qPlus => "wf2q+", Efq => "efq" });

/// The worst-case misordering delay of flow `a` (reserved `share` of the processors) against
/// the WF2Q+ oracle, as we read predictive eq 13 (SFQ) and eq 18 (EFQ), from every flow's
/// largest processing time `a_max` (A_n) and largest estimation error `v_max` (V_n), in any one
/// time unit: SFQ `sum_n A_n - A_a / share`, EFQ `sum_(n != a) V_n + V_a / share`. docs/predictive.md
/// compares them with the simulated worst cases. `None` if `a` is not a flow or `share` is not
/// in (0, 1].
pub fn misordering_bounds(a_max: &[f64], v_max: &[f64], a: usize, share: f64) -> Option<(f64, f64)> {
    if a >= a_max.len() || a >= v_max.len() || !(share > 0.0 && share <= 1.0) {
        return None;
    }
    let sum_a: f64 = a_max.iter().sum();
    let sum_v_other: f64 = v_max.iter().enumerate().filter(|&(i, _)| i != a).map(|(_, v)| v).sum();
    Some((sum_a - a_max[a] / share, sum_v_other + v_max[a] / share))
}

impl Discipline {
    /// Short name used in results.
    /// Its name in configuration files and results: [`crate::names::Named::name`].
    pub fn label(&self) -> &'static str {
        crate::names::Named::name(*self)
    }
}

/// A packet waiting for a processor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FqPacket {
    /// Caller's identifier.
    pub id: u64,
    /// The flow it belongs to.
    pub flow: FlowId,
    /// Application (for the caller; not used by the ordering).
    pub app: AppId,
    /// Estimated processing time t_e, ns of one processor.
    pub est_ns: f64,
    /// True processing time, ns of one processor: read only by WF2Q+ (the oracle); SFQ and EFQ
    /// learn it at [`FairQueue::completed`].
    pub actual_ns: f64,
    /// Arrival instant (for the caller; not used by the ordering).
    pub arrival: Instant,
}

/// A packet handed to a processor, with the tags it was served by.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dispatched {
    pub packet: FqPacket,
    /// Start tag S.
    pub start: f64,
    /// The key it was ordered by (S, true F, or EF).
    pub key: f64,
    /// System virtual time at dispatch.
    pub v: f64,
}

#[derive(Clone, Debug)]
struct Queued {
    p: FqPacket,
    /// Arrived to an empty queue: S = max(F, V(a)).
    to_empty: bool,
    v_arrival: f64,
}

#[derive(Clone, Debug, Default)]
struct Flow {
    /// r_i * m: the flow's share of one aggregate ns, times m (divides processor-ns).
    scale: f64,
    queue: VecDeque<Queued>,
    /// Finish tag of the last dispatched packet (provisional for in-flight ones).
    f: f64,
    /// Packets dispatched and not yet reported completed.
    inflight: u32,
    /// Head's tags, valid when the queue is not empty.
    head_s: f64,
    head_key: f64,
    version: u64,
}

/// The smallest reserved share [`FairQueue::new`] accepts, and the largest processing time (ns,
/// about 11.6 days) a packet may carry: together they keep every tag finite.
pub const MIN_SHARE: f64 = 1e-9;
pub const MAX_TIME_NS: f64 = 1e15;

/// Both times within `0..=MAX_TIME_NS` (NaN and infinities are not): two comparisons each on
/// every packet, the error built off that path.
#[inline]
fn check_times(p: &FqPacket) -> Result<(), Error> {
    let ok = |v: f64| (0.0..=MAX_TIME_NS).contains(&v);
    if ok(p.est_ns) && ok(p.actual_ns) {
        return Ok(());
    }
    times_refused(p)
}

#[cold]
fn times_refused(p: &FqPacket) -> Result<(), Error> {
    let (parameter, v) =
        if !(0.0..=MAX_TIME_NS).contains(&p.est_ns) { ("est_ns", p.est_ns) } else { ("actual_ns", p.actual_ns) };
    Err(Error::BadParameter { parameter, value: v.to_string(), expected: "from 0 to 1e15 ns" })
}

/// Heap entry: (tag, insertion seq, flow, version), ascending in that order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key(TotalF64, u64, u32, u64);

/// Fair queue of processing time over `m` processors.
#[derive(Clone, Debug)]
pub struct FairQueue {
    disc: Discipline,
    flows: Vec<Flow>,
    /// Eligible heads by their key (finish tag or S for SFQ): Key(key, seq, flow, version).
    elig: BinaryHeap<Reverse<Key>>,
    /// Ineligible heads by start tag (WF2Q+ and EFQ only).
    inelig: BinaryHeap<Reverse<Key>>,
    v: f64,
    last: u64,
    clock: Clock,
    backlog: usize,
    seq: u64,
}

impl FairQueue {
    /// A queue for flows with reserved shares `shares` (fractions of all `processors`; flow
    /// `i` is `FlowId(i)`).
    pub fn new(disc: Discipline, processors: u32, shares: &[f64]) -> Result<Self, Error> {
        if processors == 0 {
            return Err(Error::BadParameter { parameter: "processors", value: "0".into(), expected: "at least 1" });
        }
        let mut sum = 0.0;
        for &s in shares {
            if !(s.is_finite() && s >= MIN_SHARE) {
                return Err(Error::BadParameter {
                    parameter: "share",
                    value: s.to_string(),
                    expected: "a fraction of at least 1e-9",
                });
            }
            sum += s;
        }
        if sum > 1.0 + 1e-9 {
            return Err(Error::BadParameter {
                parameter: "sum of shares",
                value: sum.to_string(),
                expected: "at most 1",
            });
        }
        if shares.len() > u32::MAX as usize {
            return Err(Error::BadParameter {
                parameter: "flows",
                value: shares.len().to_string(),
                expected: "fewer than 2^32",
            });
        }
        let flows =
            shares.iter().map(|&s| Flow { scale: s * processors as f64, ..Default::default() }).collect::<Vec<_>>();
        Ok(FairQueue {
            disc,
            flows,
            elig: BinaryHeap::new(),
            inelig: BinaryHeap::new(),
            v: 0.0,
            last: 0,
            clock: Clock::default(),
            backlog: 0,
            seq: 0,
        })
    }

    /// The discipline.
    pub fn discipline(&self) -> Discipline {
        self.disc
    }

    /// Packets waiting.
    pub fn len(&self) -> usize {
        self.backlog
    }

    /// No packet waiting.
    pub fn is_empty(&self) -> bool {
        self.backlog == 0
    }

    /// System virtual time as of the last call.
    pub fn virtual_time(&self) -> f64 {
        self.v
    }

    /// Flows it was built for.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// A packet arrived at `now`. Refused (no effect): an unknown flow, an estimate or actual
    /// time that is negative or not finite, `now` before an earlier call's.
    pub fn enqueue(&mut self, now: Instant, p: FqPacket) -> Result<(), Error> {
        let fi = check(FlowId::KIND, p.flow.0, self.flows.len())?;
        check_times(&p)?;
        self.clock.advance(now)?;
        self.advance(now.as_nanos());
        let was_empty = self.flows[fi].queue.is_empty();
        self.flows[fi].queue.push_back(Queued { p, to_empty: was_empty, v_arrival: self.v });
        self.backlog += 1;
        if was_empty {
            self.new_head(fi);
        }
        Ok(())
    }

    /// The next packet for a free processor at `now`, if any waits. The caller reports its
    /// completion with [`completed`](Self::completed).
    pub fn dequeue(&mut self, now: Instant) -> Result<Option<Dispatched>, Error> {
        self.clock.advance(now)?;
        self.advance(now.as_nanos());
        if self.backlog == 0 {
            return Ok(None);
        }
        self.promote();
        let fi = loop {
            // Eq 8 makes some backlogged head eligible: V is at least the smallest start tag.
            let Some(Reverse(Key(_, _, f, ver))) = self.elig.pop() else {
                debug_assert!(false, "a backlogged head is eligible after eq 8");
                return Ok(None);
            };
            if self.flows[f as usize].version == ver && !self.flows[f as usize].queue.is_empty() {
                break f as usize;
            }
        };
        Ok(Some(self.serve(fi)))
    }

    /// Serves flow `flow`'s head now, whatever the order says: another scheduler (LAP in the
    /// section 6 combination) picked it. The flow is charged as if this queue had served it, so
    /// its tags stay consistent when this queue takes over again. `None` if the flow is empty.
    pub fn take_head(&mut self, now: Instant, flow: FlowId) -> Result<Option<Dispatched>, Error> {
        let fi = check(FlowId::KIND, flow.0, self.flows.len())?;
        self.clock.advance(now)?;
        if self.flows[fi].queue.is_empty() {
            return Ok(None);
        }
        self.advance(now.as_nanos());
        Ok(Some(self.serve(fi)))
    }

    /// Pops flow `fi`'s head and charges it (its heap entries become stale).
    fn serve(&mut self, fi: usize) -> Dispatched {
        let fl = &mut self.flows[fi];
        let q = fl.queue.pop_front().expect("head exists");
        let (start, key) = (fl.head_s, fl.head_key);
        let charge = match self.disc {
            Discipline::Wf2qPlus => q.p.actual_ns,
            _ => q.p.est_ns,
        };
        fl.f = start + charge / fl.scale;
        fl.inflight += 1;
        fl.version += 1;
        self.backlog -= 1;
        if !self.flows[fi].queue.is_empty() {
            self.new_head(fi);
        }
        Dispatched { packet: q.p, start, key, v: self.v }
    }

    /// A dispatched packet completed: charge its flow the actual time (eq 12). `p` is a packet
    /// this queue handed out ([`dequeue`](Self::dequeue), [`take_head`](Self::take_head)),
    /// reported once, with its true `actual_ns` (which the caller may have learnt only now).
    /// Refused (no effect): an unknown flow, a flow with no packet in service, a negative or
    /// non-finite time.
    pub fn completed(&mut self, p: &FqPacket) -> Result<(), Error> {
        let fi = check(FlowId::KIND, p.flow.0, self.flows.len())?;
        if self.flows[fi].inflight == 0 {
            return Err(Error::NotAllowed("completed: the flow has no packet in service"));
        }
        check_times(p)?;
        let fl = &mut self.flows[fi];
        fl.inflight -= 1;
        if self.disc == Discipline::Wf2qPlus {
            return Ok(());
        }
        let delta = (p.actual_ns - p.est_ns) / fl.scale;
        if delta == 0.0 {
            return Ok(());
        }
        fl.f += delta;
        if !fl.queue.is_empty() {
            self.new_head(fi);
        }
        Ok(())
    }

    /// Eq 8, and the linear part at rate 1 per real ns.
    fn advance(&mut self, now_ns: u64) {
        let tau = now_ns.saturating_sub(self.last) as f64;
        self.last = self.last.max(now_ns);
        let mut v = self.v + tau;
        if self.backlog > 0 {
            if let Some(min_s) = self.min_start() {
                v = v.max(min_s);
            }
        }
        self.v = v;
    }

    /// Smallest start tag among backlogged heads.
    fn min_start(&mut self) -> Option<f64> {
        self.clean(true);
        if self.disc == Discipline::Sfq {
            // SFQ files every head in `elig`, keyed by S.
            return self.elig.peek().map(|Reverse(k)| k.0 .0);
        }
        if !self.elig.is_empty() {
            // An eligible head has S <= V already.
            return None;
        }
        self.clean(false);
        self.inelig.peek().map(|Reverse(k)| k.0 .0)
    }

    /// Drops stale entries from the top of a heap.
    fn clean(&mut self, eligible: bool) {
        let heap = if eligible { &mut self.elig } else { &mut self.inelig };
        while let Some(Reverse(Key(_, _, f, ver))) = heap.peek() {
            let fl = &self.flows[*f as usize];
            if fl.version == *ver && !fl.queue.is_empty() {
                break;
            }
            heap.pop();
        }
    }

    /// Moves heads whose start tag reached V to the eligible heap.
    fn promote(&mut self) {
        if self.disc == Discipline::Sfq {
            return;
        }
        loop {
            self.clean(false);
            match self.inelig.peek() {
                Some(Reverse(k)) if k.0 .0 <= self.v => {
                    let Reverse(Key(_, seq, f, ver)) = self.inelig.pop().expect("peeked");
                    let key = self.flows[f as usize].head_key;
                    self.elig.push(Reverse(Key(TotalF64(key), seq, f, ver)));
                }
                _ => break,
            }
        }
    }

    /// Computes the head's tags (eqs 9-11) and files it.
    fn new_head(&mut self, fi: usize) {
        let disc = self.disc;
        let fl = &mut self.flows[fi];
        let h = fl.queue.front().expect("head");
        let s = if h.to_empty { fl.f.max(h.v_arrival) } else { fl.f };
        let key = match disc {
            Discipline::Sfq => s,
            Discipline::Wf2qPlus => s + h.p.actual_ns / fl.scale,
            Discipline::Efq => s + h.p.est_ns / fl.scale,
        };
        fl.head_s = s;
        fl.head_key = key;
        fl.version += 1;
        let ver = fl.version;
        self.seq += 1;
        let seq = self.seq;
        if disc == Discipline::Sfq || s <= self.v {
            self.elig.push(Reverse(Key(TotalF64(key), seq, fi as u32, ver)));
        } else {
            self.inelig.push(Reverse(Key(TotalF64(s), seq, fi as u32, ver)));
        }
    }
}
