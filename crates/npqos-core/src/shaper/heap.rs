//! The reschedule heap of one core (kim section 3.1.2, Fig. 3): an array-backed binary
//! min-heap of `(reschedule time, queue)` nodes.
//!
//! Geometry, as in the paper: the array is 1-indexed; index 0 is a special element holding the
//! current size; the children of index `i` are `2i` and `2i + 1`, its parent `i / 2`. A node is
//! **8 bytes**: a 32-bit reschedule time and a 32-bit queue number.
//!
//! Time encoding: the 32-bit field counts ticks of `2^tick_shift` ns (default 64 ns) after the
//! heap's epoch, rounded **up** (a queue is never re-enabled early; at most one tick late). The
//! epoch never passes `now` (so every future time has a non-negative offset): it is set to `now`
//! when an insert finds the heap empty, and if a time does not fit in 32 bits after it, the heap
//! is rebased (the epoch moves forward by the smaller of the root's offset and `now`'s, every
//! node shifted; O(n), rare) and a time that still does not fit is stored as the largest offset. The authoritative reschedule time is the
//! queue's 64-bit `T_lu` kept by the shaper, which re-inserts a queue popped before it (see
//! `EventShaper::poll_core`), so rounding and saturation never make a queue eligible early.
//! With 64 ns ticks the 32-bit range is 274 s.
//!
//! Memory accounting (kim section 3.1.3, Fig. 4): every read or write of an array index is
//! counted, on chip when the index lies in the locked cache region (the first
//! `locked_bytes / 8` indices, index 0 included) and off chip otherwise. An [`Observe`]r sees
//! every access too (a cache model, a memory-trace writer); the default `()` observer compiles
//! to nothing.
//!
//! On the mechanism contract (ARCHITECTURE.md): [`ReschedHeap::insert`] and
//! [`ReschedHeap::pop_due`] refuse a `now` before one they were already given
//! ([`Error::TimeWentBackwards`], no effect), one comparison against the last `now` kept in
//! the heap. [`super::EventShaper`] drives its heaps after its own clock has checked `now`,
//! through crate-private entry points that skip the second check.

use crate::error::{Clock, Error};
use crate::time::Instant;

/// Largest heap tick exponent: ticks of at most 2^20 ns (about 1 ms).
pub const MAX_TICK_SHIFT: u32 = 20;

/// A heap node: 8 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Node {
    /// Reschedule time in ticks after the heap's epoch (in index 0: unused).
    pub ticks: u32,
    /// Queue number (in index 0: the heap's size).
    pub queue: u32,
}

/// Bytes per heap node.
pub const NODE_BYTES: u64 = 8;

/// What the accesses that follow belong to (see [`Observe::begin`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Insert,
    /// A root deletion, including the root read that found it due.
    Delete,
    /// A root read that found nothing due.
    Peek,
}

/// Sees every array access of a heap (index, and whether it is a write), and the start of each
/// operation.
pub trait Observe {
    fn access(&mut self, index: usize, write: bool);
    /// Called before the accesses of an operation.
    #[inline(always)]
    fn begin(&mut self, _op: OpKind) {}
}
impl Observe for () {
    #[inline(always)]
    fn access(&mut self, _: usize, _: bool) {}
}

/// Access and operation counts of one heap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeapCounters {
    pub inserts: u64,
    pub deletes: u64,
    pub reads_on_chip: u64,
    pub writes_on_chip: u64,
    pub reads_off_chip: u64,
    pub writes_off_chip: u64,
    /// Key comparisons.
    pub compares: u64,
    /// Nodes moved one level (the paper's "swaps").
    pub moves: u64,
    /// Rebases of the time epoch.
    pub rebases: u64,
}

impl HeapCounters {
    pub fn off_chip(&self) -> u64 {
        self.reads_off_chip + self.writes_off_chip
    }
    pub fn add(&mut self, o: &HeapCounters) {
        self.inserts += o.inserts;
        self.deletes += o.deletes;
        self.reads_on_chip += o.reads_on_chip;
        self.writes_on_chip += o.writes_on_chip;
        self.reads_off_chip += o.reads_off_chip;
        self.writes_off_chip += o.writes_off_chip;
        self.compares += o.compares;
        self.moves += o.moves;
        self.rebases += o.rebases;
    }
}

/// One core's reschedule heap. See the module documentation.
#[derive(Clone, Debug)]
pub struct ReschedHeap {
    nodes: Vec<Node>,
    epoch_ns: u64,
    /// The last `now` the public calls accepted: one comparison per call, in the struct every
    /// call reads anyway.
    clock: Clock,
    tick_shift: u32,
    locked_nodes: usize,
    counters: HeapCounters,
}

impl ReschedHeap {
    /// A heap whose first `locked_bytes / 8` array indices are in locked cache; ticks of
    /// `2^tick_shift` ns (`tick_shift` at most [`MAX_TICK_SHIFT`]).
    pub fn new(locked_bytes: u64, tick_shift: u32) -> Result<Self, Error> {
        if tick_shift > MAX_TICK_SHIFT {
            return Err(Error::BadParameter {
                parameter: "heap tick shift",
                value: tick_shift.to_string(),
                expected: "at most 20 (ticks of at most 2^20 ns)",
            });
        }
        Ok(ReschedHeap {
            nodes: vec![Node::default()],
            epoch_ns: 0,
            clock: Clock::default(),
            tick_shift,
            locked_nodes: usize::try_from(locked_bytes / NODE_BYTES).unwrap_or(usize::MAX),
            counters: HeapCounters::default(),
        })
    }
    /// Number of queues in the heap.
    pub fn len(&self) -> usize {
        self.nodes.len() - 1
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn counters(&self) -> &HeapCounters {
        &self.counters
    }
    pub fn reset_counters(&mut self) {
        self.counters = HeapCounters::default();
    }
    /// The queues in the heap, in array order.
    pub fn queues(&self) -> impl Iterator<Item = u32> + '_ {
        self.nodes[1..].iter().map(|n| n.queue)
    }
    /// Checks the heap: index 0 holds the size and no node is earlier than its parent.
    pub fn check(&self) -> Result<(), String> {
        if self.nodes[0].queue as usize != self.len() {
            return Err(format!("index 0 says {} nodes, the array holds {}", self.nodes[0].queue, self.len()));
        }
        for i in 2..self.nodes.len() {
            if self.nodes[i].ticks < self.nodes[i / 2].ticks {
                return Err(format!("node {i} is earlier than its parent"));
            }
        }
        Ok(())
    }
    /// Bytes the array occupies now (index 0 included).
    pub fn bytes(&self) -> u64 {
        self.nodes.len() as u64 * NODE_BYTES
    }

    #[inline(always)]
    fn touch<O: Observe>(&mut self, obs: &mut O, index: usize, write: bool) {
        obs.access(index, write);
        let c = &mut self.counters;
        match (index < self.locked_nodes, write) {
            (true, false) => c.reads_on_chip += 1,
            (true, true) => c.writes_on_chip += 1,
            (false, false) => c.reads_off_chip += 1,
            (false, true) => c.writes_off_chip += 1,
        }
    }

    #[inline]
    fn ticks_for(&mut self, time: Instant, now: Instant) -> u32 {
        let (t, now) = (time.as_nanos(), now.as_nanos());
        if self.is_empty() {
            self.epoch_ns = now >> self.tick_shift << self.tick_shift;
        }
        let mut off = t.saturating_sub(self.epoch_ns).div_ceil(1 << self.tick_shift);
        if off > u32::MAX as u64 {
            self.rebase(now);
            off = t.saturating_sub(self.epoch_ns).div_ceil(1 << self.tick_shift);
        }
        off.min(u32::MAX as u64) as u32
    }

    /// Moves the epoch forward by the root's offset, but not past `now` (uncounted bookkeeping;
    /// the paper's heap has no epoch).
    fn rebase(&mut self, now: u64) {
        if self.is_empty() {
            return; // the epoch is already `now`
        }
        let now_ticks = (now.saturating_sub(self.epoch_ns) >> self.tick_shift).min(u32::MAX as u64) as u32;
        let shift = self.nodes[1].ticks.min(now_ticks);
        if shift == 0 {
            return;
        }
        for n in &mut self.nodes[1..] {
            n.ticks -= shift;
        }
        self.epoch_ns += (shift as u64) << self.tick_shift;
        self.counters.rebases += 1;
    }

    /// The reschedule time a node stands for.
    #[inline]
    pub fn time_of(&self, n: &Node) -> Instant {
        Instant::from_nanos(self.epoch_ns + ((n.ticks as u64) << self.tick_shift))
    }

    /// The root's (earliest) reschedule time, without counting an access.
    pub fn peek_time(&self) -> Option<Instant> {
        self.nodes.get(1).map(|n| self.time_of(n))
    }

    /// Inserts `queue` with reschedule time `time` (Algorithm 1 line 13; the sift-up of
    /// section 3.1.2). `time` is normally at or after `now`; an earlier one is not refused and
    /// comes due at its tick (the epoch's at the earliest).
    ///
    /// Errors (no effect): `now` before a time already given to `insert` or `pop_due`.
    #[inline]
    pub fn insert<O: Observe>(&mut self, queue: u32, time: Instant, now: Instant, obs: &mut O) -> Result<(), Error> {
        self.clock.advance(now)?;
        self.insert_unclocked(queue, time, now, obs);
        Ok(())
    }

    /// [`Self::insert`] for a caller whose own clock has checked `now` (the shaper): no check,
    /// and the heap's clock is left as it was.
    #[inline]
    pub(crate) fn insert_unclocked<O: Observe>(&mut self, queue: u32, time: Instant, now: Instant, obs: &mut O) {
        let ticks = self.ticks_for(time, now);
        self.counters.inserts += 1;
        obs.begin(OpKind::Insert);
        self.touch(obs, 0, false); // read size
        let mut i = self.nodes.len();
        self.nodes.push(Node::default());
        self.nodes[0].queue = i as u32;
        self.touch(obs, 0, true); // write size
        while i > 1 {
            let p = i / 2;
            self.touch(obs, p, false);
            self.counters.compares += 1;
            let parent = self.nodes[p];
            if parent.ticks <= ticks {
                break;
            }
            self.nodes[i] = parent;
            self.touch(obs, i, true);
            self.counters.moves += 1;
            i = p;
        }
        self.nodes[i] = Node { ticks, queue };
        self.touch(obs, i, true);
    }

    /// Removes the root if its reschedule time is at or before `now` (Algorithm 1 lines 16-17,
    /// one iteration) and returns `(queue, reschedule time)`.
    ///
    /// Errors (no effect): `now` before a time already given to `insert` or `pop_due`.
    #[inline]
    pub fn pop_due<O: Observe>(&mut self, now: Instant, obs: &mut O) -> Result<Option<(u32, Instant)>, Error> {
        self.clock.advance(now)?;
        Ok(self.pop_due_unclocked(now, obs))
    }

    /// [`Self::pop_due`] for a caller whose own clock has checked `now` (the shaper).
    #[inline]
    pub(crate) fn pop_due_unclocked<O: Observe>(&mut self, now: Instant, obs: &mut O) -> Option<(u32, Instant)> {
        if self.is_empty() {
            return None;
        }
        let t = self.time_of(&self.nodes[1]);
        if t > now {
            obs.begin(OpKind::Peek);
            self.touch(obs, 1, false); // read root
            return None;
        }
        obs.begin(OpKind::Delete);
        self.touch(obs, 1, false); // read root
        Some((self.delete_root(obs), t))
    }

    /// [`Self::pop_due_unclocked`] when it would pop nothing: true, having done what that does
    /// (an empty heap: nothing; else the root's read, observed as a peek). False, doing nothing,
    /// when the root is due.
    #[inline]
    pub(crate) fn peek_not_due<O: Observe>(&mut self, now: Instant, obs: &mut O) -> bool {
        if self.is_empty() {
            return true;
        }
        if self.time_of(&self.nodes[1]) <= now {
            return false;
        }
        obs.begin(OpKind::Peek);
        self.touch(obs, 1, false); // read root
        true
    }

    /// Deletes the root: the last node moves to the root and sifts down.
    fn delete_root<O: Observe>(&mut self, obs: &mut O) -> u32 {
        self.counters.deletes += 1;
        let root_queue = self.nodes[1].queue;
        self.touch(obs, 0, false); // read size
        let n = self.nodes.len() - 1;
        self.touch(obs, n, false); // read last
        let last = self.nodes.pop().expect("non-empty");
        self.nodes[0].queue = (n - 1) as u32;
        self.touch(obs, 0, true); // write size
        let n = n - 1;
        if n == 0 {
            return root_queue;
        }
        let mut i = 1;
        loop {
            let l = 2 * i;
            if l > n {
                break;
            }
            self.touch(obs, l, false);
            let mut c = l;
            if l < n {
                self.touch(obs, l + 1, false);
                self.counters.compares += 1;
                if self.nodes[l + 1].ticks < self.nodes[l].ticks {
                    c = l + 1;
                }
            }
            self.counters.compares += 1;
            if self.nodes[c].ticks >= last.ticks {
                break;
            }
            self.nodes[i] = self.nodes[c];
            self.touch(obs, i, true);
            self.counters.moves += 1;
            i = c;
        }
        self.nodes[i] = last;
        self.touch(obs, i, true);
        if self.is_empty() {
            self.epoch_ns = 0;
        }
        root_queue
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::collections::BTreeMap;

    #[test]
    fn layout_is_the_papers() {
        assert_eq!(std::mem::size_of::<Node>(), 8);
        let mut h = ReschedHeap::new(16, 0).unwrap(); // two locked nodes: indices 0 and 1
        for (q, t) in [(7u32, 30u64), (8, 10), (9, 20)] {
            h.insert(q, Instant::from_nanos(t), Instant::ZERO, &mut ()).unwrap();
        }
        assert_eq!(h.nodes[0].queue, 3, "index 0 holds the size");
        assert_eq!(h.nodes[1].queue, 8, "root is the earliest");
        assert_eq!(h.pop_due(Instant::from_nanos(9), &mut ()).unwrap(), None);
        assert_eq!(h.pop_due(Instant::from_nanos(10), &mut ()).unwrap(), Some((8, Instant::from_nanos(10))));
        let c = *h.counters();
        assert!(c.reads_off_chip + c.writes_off_chip > 0, "indices >= 2 are off chip");
        assert!(c.reads_on_chip > 0 && c.writes_on_chip > 0);
    }

    #[test]
    fn ticks_round_up_and_rebase_keeps_order() {
        let now = Instant::from_nanos(970);
        // An earlier time inserted after a later one is not delayed to the later one's.
        let mut h = ReschedHeap::new(0, 0).unwrap();
        h.insert(1, Instant::from_nanos(1000), now, &mut ()).unwrap();
        h.insert(4, Instant::from_nanos(980), now, &mut ()).unwrap();
        assert_eq!(h.pop_due(Instant::from_nanos(980), &mut ()).unwrap(), Some((4, Instant::from_nanos(980))));
        // 64 ns ticks: epoch 960, 1000 ns is 40 ns later -> one tick -> 1024 (rounded up).
        let mut h = ReschedHeap::new(0, 6).unwrap();
        h.insert(1, Instant::from_nanos(1000), now, &mut ()).unwrap();
        assert_eq!(h.peek_time(), Some(Instant::from_nanos(1024)));
        assert_eq!(h.pop_due(Instant::from_nanos(1023), &mut ()).unwrap(), None, "never early");
        // Far beyond 2^32 ticks of 64 ns (274 s): the epoch moves (not past now), order is kept.
        let later = Instant::from_nanos(100_000_000_000);
        h.insert(2, Instant::from_nanos(400_000_000_000), later, &mut ()).unwrap();
        h.insert(3, Instant::from_nanos(100_000_002_000), later, &mut ()).unwrap();
        assert!(h.counters().rebases >= 1);
        assert_eq!(h.pop_due(Instant::MAX, &mut ()).unwrap().map(|x| x.0), Some(1));
        assert_eq!(h.pop_due(Instant::MAX, &mut ()).unwrap().map(|x| x.0), Some(3));
        let (q, t) = h.pop_due(Instant::MAX, &mut ()).unwrap().unwrap();
        assert_eq!(q, 2);
        // The due root (queue 1, never popped) pinned the epoch, so 400 s did not fit and was
        // saturated: the node fires at epoch + 2^32 ticks, before the real time. The shaper
        // re-inserts such a queue (its 64-bit T_lu is authoritative).
        assert!(t.as_nanos() > 274_000_000_000 && t.as_nanos() < 400_000_000_000, "{t}");
    }

    /// A `now` before one already given is refused by both calls and changes nothing (the
    /// heap used to take it: an insert filed the queue, a pop looked at the root).
    #[test]
    fn time_going_backwards_is_refused() {
        let mut h = ReschedHeap::new(0, 0).unwrap();
        h.insert(1, Instant::from_nanos(300), Instant::from_nanos(100), &mut ()).unwrap();
        let (before, counters) = (h.clone(), *h.counters());
        let back = Error::TimeWentBackwards { now: Instant::from_nanos(99), last: Instant::from_nanos(100) };
        assert_eq!(h.insert(2, Instant::from_nanos(200), Instant::from_nanos(99), &mut ()), Err(back.clone()));
        assert_eq!(h.pop_due(Instant::from_nanos(99), &mut ()), Err(back));
        assert_eq!(
            (h.nodes.as_slice(), h.epoch_ns, *h.counters()),
            (before.nodes.as_slice(), before.epoch_ns, counters)
        );
        // The same instant again is fine, and the heap goes on.
        assert_eq!(h.pop_due(Instant::from_nanos(100), &mut ()), Ok(None));
        assert_eq!(h.pop_due(Instant::from_nanos(300), &mut ()), Ok(Some((1, Instant::from_nanos(300)))));
        let e = h.insert(3, Instant::from_nanos(400), Instant::from_nanos(299), &mut ()).unwrap_err();
        assert_eq!(e, Error::TimeWentBackwards { now: Instant::from_nanos(299), last: Instant::from_nanos(300) });
        assert!(h.is_empty());
        h.check().unwrap();
    }

    /// Millions of random inserts and due-pops against a BTreeMap of (ticks-rounded time,
    /// insertion order). Ties may pop in any order in a binary heap, so equal times are compared
    /// as multisets of queues.
    #[test]
    fn differential_against_btreemap() {
        let mut rng = ChaCha8Rng::seed_from_u64(0xbeef);
        let mut h = ReschedHeap::new(2048, 0).unwrap();
        let mut model: BTreeMap<(u64, u32), ()> = BTreeMap::new();
        let mut now = 0u64;
        let mut q = 0u32;
        for step in 0..2_000_000u32 {
            if rng.random_range(0..10) < 5 {
                let t = now + rng.random_range(0..100_000);
                h.insert(q, Instant::from_nanos(t), Instant::from_nanos(now), &mut ()).unwrap();
                model.insert((t, q), ());
                q = q.wrapping_add(1);
            } else {
                now += rng.random_range(0..20_000);
                let mut got = vec![];
                while let Some((qq, t)) = h.pop_due(Instant::from_nanos(now), &mut ()).unwrap() {
                    got.push((t.as_nanos(), qq));
                }
                let mut want = vec![];
                while let Some((&(t, qq), _)) = model.first_key_value() {
                    if t > now {
                        break;
                    }
                    model.pop_first();
                    want.push((t, qq));
                }
                got.sort_unstable();
                assert_eq!(got, want, "step {step}");
            }
            assert_eq!(h.len(), model.len());
        }
    }
}
