//! The engine's pending-event set: a radix heap over the key `(time, class, insertion
//! sequence)`, with 64-way digits.
//!
//! A discrete-event simulation never schedules before the event it is running, so the keys it
//! pops never decrease. A radix heap (Ahuja, Mehlhorn, Orlin, Tarjan 1990) exploits exactly
//! that. Geometry and cost:
//!
//! * the key is the pair `(time_ns, seq)`, unique because `seq` holds a counter incremented at
//!   every `push`; its top 8 bits hold the event's **class** (0 unless the model gives one), so
//!   at equal times a lower class pops first and equal classes pop first-in first-out. A model
//!   whose event kinds must run in a given order at one instant (completions before arrivals)
//!   says so through the class, not through the order it happens to schedule them in;
//! * the earliest entries (key and payload inline, 24 B for a 4-byte event) are in the short
//!   `current` run, sorted; any later one lives at level `l`, the highest 6-bit digit in which
//!   its time differs from a base time `B` (the earliest time of the slot last taken), in slot
//!   `s`, its value of that digit: 11 levels of 64 slots (each a `Vec`), a 64-bit mask of
//!   occupied slots per level and one of non-empty levels;
//! * `push` appends to a slot: O(1) (or, for a time not after the current run's latest, a
//!   binary-search insert into that short run);
//! * `pop` takes from `current`, or else empties the first occupied slot of the lowest
//!   non-empty level (two `trailing_zeros`): a slot of at most [`SORT_MAX`] entries, or of
//!   level 0, is sorted and becomes the current run; a larger one gives its earliest time to
//!   `B` and its entries go to `current` (those at that time) or to lower levels. Every other
//!   slot keeps its place, so an entry moves at most once per level (at most 10 times, in
//!   practice two or three), always as sequential appends: no root-to-leaf pointer chasing as
//!   in a binary heap, which is what keeps it fast with a million pending events. (The first
//!   version used binary digits, 129 buckets: an entry moved about log2 of the pending count
//!   times. kim's 1e6-queue row went from 22.2 to 14.8 s with 64-way digits, and in 20
//!   shards from 10.2 to 8.0 s with the sorted runs; docs/PERFORMANCE.md.) A slot emptied
//!   with more than [`KEEP`] entries of capacity gives its allocation back, so memory follows
//!   the pending set;
//! * cancellation needs no per-event state: keys pop in strictly increasing order, so a key at
//!   or below the last popped key has already run; a later one is recorded in a set of cancelled
//!   keys and skipped when it surfaces (one branch per pop while the set is empty). When
//!   cancelled entries outnumber live ones the slots are compacted;
//! * the reference key follows the radix part's pops and can run ahead of the last *returned*
//!   event (after `peek_time`, or when the minimum found was cancelled); an event pushed below
//!   it (an earlier time, or a lower class at the current instant) goes to a small 4-ary heap
//!   (`dary_heap`: half a binary heap's depth, 10% faster on the router's ~100 pending
//!   events) of "early" events, which all precede every radix entry and so are popped first. In the engine
//!   this happens only when a run stops at an end time and the model is driven on.
//!
//! * small sets: until more than [`SMALL_MAX`] events are pending at once, every entry lives in
//!   the 4-ary heap of early events (the reference key is the largest possible, so every push
//!   is "early"); a model with a handful of pending events (processors, one arrival) pays a
//!   4-ary heap's few comparisons instead of radix redistributions. When the set first grows
//!   past that, the entries move to the radix levels once, for good. Both keep the exact order.
//!
//! Ordering is exact: events with equal times pop by class, then in insertion (FIFO) order. An
//! event pushed at the current time with a class below the one running pops next (it goes to
//! the early heap), which is what "completions before arrivals" means when a completion is
//! scheduled for the very instant being processed.
//!
//! **Precondition:** a pushed time must not be earlier than the last popped time (asserted; the
//! engine checks the same in [`super::Engine::schedule`]).

use dary_heap::QuaternaryHeap;
use npqos_core::radix::{Levels, SLOTS};
use npqos_core::Instant;
use std::cmp::{Ordering, Reverse};
use std::collections::HashSet;

/// Identifies a scheduled event for cancellation. Stale keys (event already popped or
/// cancelled) are harmless: cancelling them does nothing and returns `false`.
///
/// Ordered by time, then sequence (class above counter), compared as one 128-bit integer
/// ([`EventKey::packed`]): the same order as the two fields in turn, without a branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EventKey {
    time: u64,
    seq: u64,
}

impl Ord for EventKey {
    #[inline(always)]
    fn cmp(&self, o: &Self) -> Ordering {
        self.packed().cmp(&o.packed())
    }
}
impl PartialOrd for EventKey {
    #[inline(always)]
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
    #[inline(always)]
    fn lt(&self, o: &Self) -> bool {
        self.packed() < o.packed()
    }
    #[inline(always)]
    fn le(&self, o: &Self) -> bool {
        self.packed() <= o.packed()
    }
    #[inline(always)]
    fn gt(&self, o: &Self) -> bool {
        self.packed() > o.packed()
    }
    #[inline(always)]
    fn ge(&self, o: &Self) -> bool {
        self.packed() >= o.packed()
    }
}

impl EventKey {
    /// The place of an event at `time` in `class` after every event of that time and class
    /// pushed before or after it (an engine source's event without a ticket).
    pub fn after_queued(time: Instant, class: u8) -> Self {
        EventKey { time: time.as_nanos(), seq: ((class as u64) << CLASS_SHIFT) | COUNTER_MASK }
    }
    /// The event's time.
    pub fn time(&self) -> Instant {
        Instant::from_nanos(self.time)
    }
    /// The event's class.
    pub fn class(&self) -> u8 {
        (self.seq >> CLASS_SHIFT) as u8
    }
    /// The key as one integer, in the same order: time above, class and sequence below.
    #[inline(always)]
    pub fn packed(&self) -> u128 {
        ((self.time as u128) << 64) | self.seq as u128
    }
    /// The key [`packed`](Self::packed) gave.
    #[inline(always)]
    pub fn from_packed(k: u128) -> Self {
        EventKey { time: (k >> 64) as u64, seq: k as u64 }
    }
}

#[derive(Clone, Copy, Debug)]
struct Entry<E> {
    time: u64,
    seq: u64,
    event: E,
}

impl<E> Entry<E> {
    #[inline(always)]
    fn key(&self) -> EventKey {
        EventKey { time: self.time, seq: self.seq }
    }
}

/// Orders by key only (for the early heap).
struct ByKey<E>(Entry<E>);
impl<E> PartialEq for ByKey<E> {
    fn eq(&self, o: &Self) -> bool {
        self.0.key() == o.0.key()
    }
}
impl<E> Eq for ByKey<E> {}
// The order of the keys (`EventKey`'s: one 128-bit comparison), `<=` and `<` included, which
// the binary heap uses and which would otherwise go through `partial_cmp`.
impl<E> PartialOrd for ByKey<E> {
    #[inline(always)]
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
    #[inline(always)]
    fn lt(&self, o: &Self) -> bool {
        self.0.key() < o.0.key()
    }
    #[inline(always)]
    fn le(&self, o: &Self) -> bool {
        self.0.key() <= o.0.key()
    }
    #[inline(always)]
    fn gt(&self, o: &Self) -> bool {
        self.0.key() > o.0.key()
    }
    #[inline(always)]
    fn ge(&self, o: &Self) -> bool {
        self.0.key() >= o.0.key()
    }
}
impl<E> Ord for ByKey<E> {
    #[inline(always)]
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.key().cmp(&o.0.key())
    }
}

/// Levels of the radix part ([`npqos_core::radix::Levels`]): level `l` holds entries whose
/// time first differs from the base time in its 6-bit digit `l` (level 10 has the top 4 bits).
const LEVELS: usize = 11;
/// A slot of at most this many entries is sorted whole when taken, rather than spread over
/// lower levels.
pub const SORT_MAX: usize = 32;
/// Slot capacity (entries) kept for reuse when a slot is emptied: 24 KiB of 24-byte entries
/// (a 4-byte event), at most about 17 MB over all 704 slots. A slot one level below a large
/// one is filled in one redistribution and would otherwise regrow by doubling, an allocation
/// and a copy each time (kim's 1e6 row: its level-3 slots hold about 315 entries each; at 256
/// they were freed every time, at 1024 they are kept: 10% less wall time, docs/PERFORMANCE.md).
pub const KEEP: usize = 1024;
/// The class occupies the top 8 bits of `seq`; the counter the rest.
const CLASS_SHIFT: u32 = 56;
/// Pending events kept in the 4-ary heap before the queue turns into a radix heap.
pub const SMALL_MAX: usize = 512;
const COUNTER_MASK: u64 = (1 << CLASS_SHIFT) - 1;

/// The monotone priority queue of future events. See the module documentation.
pub struct EventQueue<E> {
    /// The earliest radix entries, in key order, largest first (pop from the back): a slot
    /// taken whole (at most [`SORT_MAX`] entries, or level 0) plus later pushes not after its
    /// latest time. Usually a few.
    current: Vec<Entry<E>>,
    /// The time the levels' digits are taken against: the earliest time of the slot last taken
    /// when it was sorted whole, else the start of its range (the earliest time it could hold).
    base: u64,
    /// Entries later than the current run, filed against `base`.
    levels: Levels<Entry<E>, LEVELS>,
    /// The radix reference key: the smallest key stored in the radix part when it was last
    /// settled; every radix entry is at or above it.
    reference: EventKey,
    /// The largest popped key; pushes must not go below its time, and keys at or below it have
    /// run, except early entries of a lower class still pending.
    floor: EventKey,
    /// Whether anything was popped yet (before that, `floor` means nothing).
    popped: bool,
    /// Events pushed below the reference key; all precede every radix entry.
    early: QuaternaryHeap<Reverse<ByKey<E>>>,
    /// Keys cancelled while still pending (their entries are still stored).
    cancelled: HashSet<EventKey>,
    /// Entries stored (live + cancelled).
    entries: usize,
    next_seq: u64,
    /// Events pushed so far ([`EventQueue::pushes`]).
    pushes: u64,
    /// Still a 4-ary heap (everything in `early`); see the module documentation.
    small: bool,
}

impl<E: Copy> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Copy> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue {
            current: Vec::new(),
            base: 0,
            levels: Levels::new(),
            reference: EventKey { time: u64::MAX, seq: u64::MAX },
            floor: EventKey { time: 0, seq: 0 },
            popped: false,
            early: QuaternaryHeap::new(),
            cancelled: HashSet::new(),
            entries: 0,
            next_seq: 0,
            pushes: 0,
            small: true,
        }
    }
    /// Number of live (not cancelled) pending events.
    pub fn len(&self) -> usize {
        self.entries - self.cancelled.len()
    }
    /// Events pushed so far: while it stays the same, nothing came before the earliest pending
    /// event (pops and cancellations only take events away), so a key peeked before is still a
    /// bound on what comes next.
    #[inline(always)]
    pub fn pushes(&self) -> u64 {
        self.pushes
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stores an entry at or above the reference key in the radix part.
    #[inline(always)]
    fn place(&mut self, e: Entry<E>) {
        match self.current.first() {
            // Not after the latest current entry: among them, in key order (usually at the end).
            Some(last) if e.time <= last.time => {
                let k = e.key();
                let at = self.current.partition_point(|c| c.key() > k);
                self.current.insert(at, e);
            }
            _ if e.time == self.base => self.current.push(e),
            _ => self.place_level(e),
        }
    }

    /// Files an entry later than every current one by its highest digit differing from `base`.
    #[inline(always)]
    fn place_level(&mut self, e: Entry<E>) {
        self.levels.push(Levels::<Entry<E>, LEVELS>::index(self.base, e.time), e);
    }

    /// The key a push of an event at `time` in `class` would get now, without storing one:
    /// for an event kept outside the queue (an engine source's), to be ordered exactly as if it
    /// had been pushed here. `time` must not be earlier than the last popped time.
    #[inline(always)]
    pub fn ticket(&mut self, time: Instant, class: u8) -> EventKey {
        let time = time.as_nanos();
        assert!(
            time >= self.floor.time,
            "EventQueue is monotone: ticket at {time} ns is before the last popped time {} ns",
            self.floor.time
        );
        let seq = ((class as u64) << CLASS_SHIFT) | self.next_seq;
        self.next_seq += 1;
        debug_assert!(self.next_seq <= COUNTER_MASK, "2^56 events");
        EventKey { time, seq }
    }

    /// Schedules `event` at `time`, which must not be earlier than the last popped time.
    /// Events at equal times (and class 0) pop in the order they were pushed.
    #[inline(always)]
    pub fn push(&mut self, time: Instant, event: E) -> EventKey {
        self.push_class(time, 0, event)
    }

    /// Schedules `event` at `time` in `class`: at equal times lower classes pop first, equal
    /// classes in push order.
    #[inline(always)]
    pub fn push_class(&mut self, time: Instant, class: u8, event: E) -> EventKey {
        let time = time.as_nanos();
        // The floor's time, or 0 before the first pop.
        // The floor's time (0 before the first pop).
        let floor_time = self.floor.time;
        assert!(
            time >= floor_time,
            "EventQueue is monotone: push at {time} ns is before the last popped time {floor_time} ns"
        );
        let seq = ((class as u64) << CLASS_SHIFT) | self.next_seq;
        self.next_seq += 1;
        debug_assert!(self.next_seq <= COUNTER_MASK, "2^56 events");
        self.entries += 1;
        self.pushes += 1;
        let e = Entry { time, seq, event };
        // Small sets: everything is early (the reference key is the largest possible).
        if self.small || e.key() < self.reference {
            self.early.push(Reverse(ByKey(e)));
            if self.small && self.early.len() > SMALL_MAX {
                self.grow();
            }
        } else {
            self.place(e);
        }
        EventKey { time, seq }
    }

    /// Moves every entry from the 4-ary heap to the radix buckets (once, when the pending set
    /// first outgrows [`SMALL_MAX`]).
    #[cold]
    fn grow(&mut self) {
        self.small = false;
        let entries = std::mem::take(&mut self.early).into_vec();
        self.reference = entries.iter().map(|Reverse(ByKey(e))| e.key()).min().expect("non-empty");
        self.base = self.reference.time;
        for Reverse(ByKey(e)) in entries {
            self.place(e);
        }
    }

    /// Cancels the event `key`; true if it was pending.
    pub fn cancel(&mut self, key: EventKey) -> bool {
        if key.seq & COUNTER_MASK >= self.next_seq {
            return false;
        }
        // At or below the last popped key, only an early entry of a lower class can be pending.
        if self.popped && key <= self.floor && !self.early.iter().any(|Reverse(ByKey(e))| e.key() == key) {
            return false;
        }
        if !self.cancelled.insert(key) {
            return false;
        }
        if self.entries > 1024 && self.cancelled.len() * 2 > self.entries {
            self.compact();
        }
        true
    }

    /// Makes `current` hold the minimum radix entry (live or cancelled); false when none is
    /// left.
    #[inline]
    fn settle(&mut self) -> bool {
        if !self.current.is_empty() {
            return true;
        }
        if self.levels.first().is_none() {
            return false;
        }
        self.redistribute();
        true
    }

    /// Empties the first non-empty slot of the lowest non-empty level. A slot of at most
    /// [`SORT_MAX`] entries (or of level 0) becomes `current`, sorted; a larger one gives the
    /// start of its range to `base`, its entries at that time to `current` and the others to
    /// lower levels, and the first slot is taken again until `current` holds one. Slots of
    /// higher digits keep their places (the new base shares every digit above
    /// this level with the old one), so an entry moves at most once per level: a handful of
    /// times in its life.
    #[inline(never)]
    fn redistribute(&mut self) {
        debug_assert!(self.current.is_empty());
        loop {
            let i = self.levels.first().expect("settle checked");
            let mut b = self.levels.take(i);
            if i < SLOTS || b.len() <= SORT_MAX {
                b.sort_unstable_by_key(|e| Reverse(ByKey(*e)));
                self.base = b.last().expect("slot marked non-empty").time;
                // The slot's vector becomes `current`; the empty one takes its place.
                std::mem::swap(&mut self.current, &mut b);
            } else {
                // The slot's start, the earliest time it can hold, is the new base: at or
                // below every entry, and sharing every digit above this level with the old
                // base. Its entries at that time go to `current` and the others one level
                // down or more, in one pass (no pass before it for their minimum).
                let t = Levels::<Entry<E>, LEVELS>::slot_start(self.base, i);
                debug_assert!(t >= self.base);
                self.base = t;
                for e in b.drain(..) {
                    if e.time == t {
                        self.current.push(e);
                    } else {
                        self.place_level(e);
                    }
                }
                if self.current.len() > 1 {
                    self.current.sort_unstable_by_key(|e| Reverse(e.seq));
                }
            }
            // Keep a small allocation for reuse; a large one goes (every slot keeping its
            // largest size would hold several times the pending set at a million events).
            self.levels.give_back(i, b, KEEP);
            if !self.current.is_empty() {
                break;
            }
        }
        self.reference = self.current.last().expect("the minimum").key();
    }

    /// The event that pops next, when that is known without work (it is at the head of the
    /// early heap or of the current run; it may be cancelled): a hint for prefetching the
    /// state it will touch, never for deciding anything.
    #[inline]
    pub fn peek_cheap(&self) -> Option<&E> {
        match self.early.peek() {
            Some(Reverse(ByKey(e))) => Some(&e.event),
            None => self.current.last().map(|e| &e.event),
        }
    }

    /// Removes the earliest stored entry, live or cancelled.
    #[inline]
    fn take_min(&mut self) -> Option<Entry<E>> {
        let e = if let Some(Reverse(ByKey(e))) = self.early.pop() {
            e
        } else if self.settle() {
            let e = self.current.pop().expect("settled");
            // The reference follows the radix part's pops, so that a later push between two
            // keys of one instant (a lower class) goes to the early heap and pops first.
            self.reference = e.key();
            e
        } else {
            return None;
        };
        self.entries -= 1;
        Some(e)
    }

    /// Time of the earliest live event.
    #[inline]
    pub fn peek_time(&mut self) -> Option<Instant> {
        self.peek_key().map(|k| k.time())
    }

    /// The key of the earliest live event.
    #[inline]
    pub fn peek_key(&mut self) -> Option<EventKey> {
        loop {
            let e = if let Some(Reverse(ByKey(e))) = self.early.peek() {
                *e
            } else if self.settle() {
                *self.current.last().expect("settled")
            } else {
                return None;
            };
            if self.cancelled.is_empty() || !self.cancelled.contains(&e.key()) {
                return Some(e.key());
            }
            let e = self.take_min().expect("peeked");
            self.cancelled.remove(&e.key());
        }
    }

    /// Removes and returns the earliest live event.
    #[inline]
    pub fn pop(&mut self) -> Option<(Instant, E)> {
        loop {
            let e = self.take_min()?;
            if !self.cancelled.is_empty() && self.cancelled.remove(&e.key()) {
                continue;
            }
            // The largest key popped so far: an early entry of a lower class can pop after a
            // larger key of the same time, and must not lower the floor.
            let k = e.key();
            if !self.popped || k > self.floor {
                self.floor = k;
                self.popped = true;
            }
            return Some((Instant::from_nanos(e.time), e.event));
        }
    }

    fn compact(&mut self) {
        let c = std::mem::take(&mut self.cancelled);
        let early = std::mem::take(&mut self.early);
        self.early = early.into_iter().filter(|Reverse(ByKey(e))| !c.contains(&e.key())).collect();
        let mut n = self.early.len();
        self.current.retain(|e| !c.contains(&e.key()));
        n += self.current.len();
        self.levels.retain(|e| !c.contains(&e.key()));
        n += self.levels.iter().count();
        self.entries = n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::collections::BTreeMap;

    proptest::proptest! {
        /// Keys compare as their time, then their sequence (class above counter): the order of
        /// the two fields in turn, which the packed comparison replaces.
        #[test]
        fn keys_order_by_time_then_sequence(a in (0u64..4, 0u64..4), b in (0u64..4, 0u64..4), big in proptest::prelude::any::<(u64, u64, u64, u64)>()) {
            for ((t1, s1), (t2, s2)) in [(a, b), ((big.0, big.1), (big.2, big.3)), ((big.0, big.1), (big.0, big.3))] {
                let (x, y) = (EventKey { time: t1, seq: s1 }, EventKey { time: t2, seq: s2 });
                let want = (t1, s1).cmp(&(t2, s2));
                proptest::prop_assert_eq!(x.cmp(&y), want);
                proptest::prop_assert_eq!(x.partial_cmp(&y), Some(want));
                proptest::prop_assert_eq!((x < y, x <= y, x > y, x >= y, x == y), (want.is_lt(), want.is_le(), want.is_gt(), want.is_ge(), want.is_eq()));
            }
        }
    }

    #[test]
    fn equal_times_pop_fifo() {
        let mut q = EventQueue::new();
        for i in 0..100 {
            q.push(Instant::from_nanos(7), i);
        }
        q.push(Instant::from_nanos(3), -1);
        assert_eq!(q.pop(), Some((Instant::from_nanos(3), -1)));
        for i in 0..100 {
            assert_eq!(q.pop(), Some((Instant::from_nanos(7), i)));
            q.push(Instant::from_nanos(7), 1000 + i); // same time, pushed while popping
        }
        for i in 0..100 {
            assert_eq!(q.pop(), Some((Instant::from_nanos(7), 1000 + i)));
        }
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn classes_order_equal_times() {
        let mut q = EventQueue::new();
        q.push_class(Instant::from_nanos(5), 2, "arrival");
        q.push_class(Instant::from_nanos(5), 1, "timer");
        q.push_class(Instant::from_nanos(5), 0, "done-a");
        q.push_class(Instant::from_nanos(5), 0, "done-b");
        q.push_class(Instant::from_nanos(4), 9, "earlier");
        assert_eq!(q.pop(), Some((Instant::from_nanos(4), "earlier")));
        assert_eq!(q.pop(), Some((Instant::from_nanos(5), "done-a")));
        assert_eq!(q.pop(), Some((Instant::from_nanos(5), "done-b")));
        assert_eq!(q.pop(), Some((Instant::from_nanos(5), "timer")));
        // A completion scheduled for the current instant while the timer runs pops next, and it
        // can be cancelled although its key is below the last popped one.
        let a = q.push_class(Instant::from_nanos(5), 0, "done-c");
        let b = q.push_class(Instant::from_nanos(5), 0, "done-d");
        assert!(q.cancel(a));
        assert!(!q.cancel(a));
        assert_eq!(q.pop(), Some((Instant::from_nanos(5), "done-d")));
        assert!(!q.cancel(b), "already ran");
        assert_eq!(q.pop(), Some((Instant::from_nanos(5), "arrival")));
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn cancel_and_stale_keys() {
        let mut q = EventQueue::new();
        let a = q.push(Instant::from_nanos(1), 'a');
        let b = q.push(Instant::from_nanos(2), 'b');
        assert!(q.cancel(a));
        assert!(!q.cancel(a), "twice");
        assert_eq!(q.len(), 1);
        let c = q.push(Instant::from_nanos(1), 'c');
        assert_eq!(q.peek_time(), Some(Instant::from_nanos(1)));
        assert_eq!(q.pop(), Some((Instant::from_nanos(1), 'c')));
        assert!(!q.cancel(c), "already ran");
        assert_eq!(q.pop(), Some((Instant::from_nanos(2), 'b')));
        assert!(!q.cancel(b));
        assert!(q.is_empty());
        assert!(!q.cancel(EventKey { time: 5, seq: 99 }), "never issued");
    }

    /// After a peek (or a cancelled minimum) moved the reference ahead, a push between the last
    /// popped time and that reference must still come out first.
    #[test]
    fn push_below_the_reference_after_peek() {
        let mut q = EventQueue::new();
        q.push(Instant::from_nanos(10), 'a');
        let b = q.push(Instant::from_nanos(50), 'b');
        q.push(Instant::from_nanos(90), 'c');
        assert_eq!(q.pop(), Some((Instant::from_nanos(10), 'a')));
        assert_eq!(q.peek_time(), Some(Instant::from_nanos(50)));
        q.push(Instant::from_nanos(20), 'd');
        q.push(Instant::from_nanos(20), 'e');
        assert!(q.cancel(b));
        assert_eq!(q.peek_time(), Some(Instant::from_nanos(20)));
        q.push(Instant::from_nanos(30), 'f');
        let got: Vec<char> = std::iter::from_fn(|| q.pop().map(|x| x.1)).collect();
        assert_eq!(got, vec!['d', 'e', 'f', 'c']);
    }

    /// The hold model at several spreads (every pop pushes one event a random increment
    /// later), so slots of every size are taken, sorted whole or spread over lower levels, and
    /// pushes land inside the current sorted run: the order equals a binary heap's on
    /// (time, seq).
    #[test]
    fn hold_model_matches_a_binary_heap() {
        use std::collections::BinaryHeap;
        let mut rng = ChaCha8Rng::seed_from_u64(0x5eed_0002);
        for (pending, spread) in [(600u64, 64u64), (5_000, 1 << 12), (20_000, 1 << 25), (3_000, 1 << 40)] {
            let mut q = EventQueue::new();
            let mut model = BinaryHeap::new();
            let mut seq = 0u64;
            for _ in 0..pending {
                let t = rng.random_range(0..spread);
                q.push(Instant::from_nanos(t), seq);
                model.push(Reverse((t, seq)));
                seq += 1;
            }
            for _ in 0..200_000 {
                let (t, e) = q.pop().unwrap();
                let Reverse((mt, me)) = model.pop().unwrap();
                assert_eq!((t.as_nanos(), e), (mt, me), "spread {spread}");
                // Sometimes a burst at the current instant, sometimes far ahead.
                let n = if rng.random_range(0..8) == 0 { 3 } else { 1 };
                for _ in 0..n {
                    let dt = if rng.random_range(0..4) == 0 { 0 } else { rng.random_range(0..spread) };
                    q.push(Instant::from_nanos(mt + dt), seq);
                    model.push(Reverse((mt + dt, seq)));
                    seq += 1;
                }
                if model.len() as u64 > pending && rng.random_range(0..3) == 0 {
                    let (t, e) = q.pop().unwrap();
                    let Reverse((mt, me)) = model.pop().unwrap();
                    assert_eq!((t.as_nanos(), e), (mt, me));
                }
            }
            assert_eq!(q.len(), model.len());
        }
    }

    #[test]
    #[should_panic(expected = "EventQueue is monotone")]
    fn refuses_a_push_into_the_past() {
        let mut q = EventQueue::new();
        q.push(Instant::from_nanos(10), ());
        q.pop();
        q.push(Instant::from_nanos(9), ());
    }

    /// Millions of random push / pop / peek / cancel against a BTreeMap keyed by (time, class, seq),
    /// fixed seed. Times are mostly close to `now` (equal times are common) and sometimes far
    /// away (high buckets); cancellations hit live, popped and already-cancelled keys.
    #[test]
    fn differential_against_btreemap() {
        let mut rng = ChaCha8Rng::seed_from_u64(0x5eed_0001);
        let mut q = EventQueue::new();
        let mut model: BTreeMap<(u64, u8, u64), u64> = BTreeMap::new();
        let mut keys: Vec<(EventKey, (u64, u8, u64))> = Vec::new();
        let mut seq = 0u64;
        let mut now = 0u64;
        for step in 0..3_000_000u64 {
            match rng.random_range(0..20) {
                0..=9 => {
                    let t = now
                        + if rng.random_range(0..50) == 0 {
                            rng.random_range(0..1 << 40)
                        } else {
                            rng.random_range(0..64)
                        };
                    // Classes 0..3, so equal times (frequent: gaps of 0..64 ns) mix classes and
                    // lower-class pushes at the current time land below the last popped key.
                    let class = rng.random_range(0..4u8);
                    let k = q.push_class(Instant::from_nanos(t), class, step);
                    model.insert((t, class, seq), step);
                    keys.push((k, (t, class, seq)));
                    seq += 1;
                }
                10..=15 => {
                    let got = q.pop();
                    let want = model.pop_first();
                    assert_eq!(got.map(|(t, e)| (t.as_nanos(), e)), want.map(|((t, _, _), e)| (t, e)), "step {step}");
                    if let Some(((t, _, _), _)) = want {
                        now = t;
                    }
                }
                16 => assert_eq!(q.peek_time().map(|t| t.as_nanos()), model.first_key_value().map(|(k, _)| k.0)),
                _ => {
                    if !keys.is_empty() {
                        let i = rng.random_range(0..keys.len());
                        let (k, mk) = if rng.random_range(0..4) == 0 { keys[i] } else { keys.swap_remove(i) };
                        assert_eq!(q.cancel(k), model.remove(&mk).is_some(), "step {step}");
                    }
                }
            }
            assert_eq!(q.len(), model.len(), "step {step}");
            if keys.len() > 4096 {
                keys.drain(..2048);
            }
        }
        while let Some(w) = model.pop_first() {
            assert_eq!(q.pop().map(|(t, e)| (t.as_nanos(), e)), Some((w.0 .0, w.1)));
        }
        assert_eq!(q.pop(), None);
    }
}
