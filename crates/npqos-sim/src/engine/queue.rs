//! The pending-event set: a 4-ary min-heap ordered by `(time, insertion sequence)`.
//!
//! Geometry and cost:
//! * heap entries are 24 bytes (`time: u64`, `seq: u64`, `slot: u32`) in one `Vec`, children of
//!   index `i` at `4i+1 ..= 4i+4`; a 4-ary heap halves the depth of a binary heap and keeps the
//!   four children of a node in one or two cache lines;
//! * event payloads live in a slab of slots indexed by `slot`, recycled through a free list, so
//!   steady-state operation allocates nothing;
//! * `push` is O(log4 n), `pop` O(log4 n), `cancel` O(1): cancellation is lazy, the slot is
//!   freed at once and the stale heap entry is recognised (its `seq` no longer matches the
//!   slot's) and discarded when it reaches the top. When stale entries outnumber live ones the
//!   heap is rebuilt in O(n), so memory stays within twice the live size.
//!
//! Ordering: the sequence number is taken from a counter at `push`, so events with equal times
//! pop in insertion (FIFO) order, which makes a run independent of heap internals.

use npqos_core::Instant;

/// Identifies a scheduled event for [`EventQueue::cancel`]. Stale keys (event already popped
/// or cancelled) are harmless: cancelling them does nothing and returns `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EventKey {
    slot: u32,
    seq: u64,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    time: u64,
    seq: u64,
    slot: u32,
}

impl Entry {
    #[inline(always)]
    fn before(&self, o: &Entry) -> bool {
        (self.time, self.seq) < (o.time, o.seq)
    }
}

struct Slot<E> {
    /// `seq` of the live event in this slot; `u64::MAX` when free.
    seq: u64,
    event: Option<E>,
}

/// A priority queue of future events. See the module documentation for its geometry.
pub struct EventQueue<E> {
    heap: Vec<Entry>,
    slots: Vec<Slot<E>>,
    free: Vec<u32>,
    next_seq: u64,
    live: usize,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> Self {
        Self::with_capacity(0)
    }
    pub fn with_capacity(n: usize) -> Self {
        EventQueue { heap: Vec::with_capacity(n), slots: Vec::with_capacity(n), free: Vec::new(), next_seq: 0, live: 0 }
    }
    /// Number of live (not cancelled) pending events.
    pub fn len(&self) -> usize {
        self.live
    }
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Schedules `event` at `time`. Events at equal times pop in the order they were pushed.
    pub fn push(&mut self, time: Instant, event: E) -> EventKey {
        let seq = self.next_seq;
        self.next_seq += 1;
        let slot = match self.free.pop() {
            Some(s) => {
                let sl = &mut self.slots[s as usize];
                sl.seq = seq;
                sl.event = Some(event);
                s
            }
            None => {
                let s = u32::try_from(self.slots.len()).expect("more than 2^32 pending events");
                self.slots.push(Slot { seq, event: Some(event) });
                s
            }
        };
        self.live += 1;
        self.heap.push(Entry { time: time.as_nanos(), seq, slot });
        self.sift_up(self.heap.len() - 1);
        EventKey { slot, seq }
    }

    /// Removes the event `key` if it is still pending and returns it.
    pub fn cancel(&mut self, key: EventKey) -> Option<E> {
        let sl = self.slots.get_mut(key.slot as usize)?;
        if sl.seq != key.seq {
            return None;
        }
        sl.seq = u64::MAX;
        let ev = sl.event.take();
        self.free.push(key.slot);
        self.live -= 1;
        if self.heap.len() > 1024 && self.heap.len() > 2 * self.live {
            self.compact();
        }
        ev
    }

    /// Time of the earliest live event.
    pub fn peek_time(&mut self) -> Option<Instant> {
        self.drop_stale_top();
        self.heap.first().map(|e| Instant::from_nanos(e.time))
    }

    /// Removes and returns the earliest live event.
    pub fn pop(&mut self) -> Option<(Instant, E)> {
        loop {
            let top = *self.heap.first()?;
            self.remove_top();
            let sl = &mut self.slots[top.slot as usize];
            if sl.seq != top.seq {
                continue; // cancelled
            }
            sl.seq = u64::MAX;
            let ev = sl.event.take().expect("live slot holds an event");
            self.free.push(top.slot);
            self.live -= 1;
            return Some((Instant::from_nanos(top.time), ev));
        }
    }

    fn drop_stale_top(&mut self) {
        while let Some(top) = self.heap.first() {
            if self.slots[top.slot as usize].seq == top.seq {
                return;
            }
            self.remove_top();
        }
    }

    #[inline]
    fn remove_top(&mut self) {
        let last = self.heap.pop().expect("non-empty");
        if !self.heap.is_empty() {
            self.heap[0] = last;
            self.sift_down(0);
        }
    }

    fn compact(&mut self) {
        let slots = &self.slots;
        self.heap.retain(|e| slots[e.slot as usize].seq == e.seq);
        let n = self.heap.len();
        if n > 1 {
            for i in (0..=(n - 2) / 4).rev() {
                self.sift_down(i);
            }
        }
    }

    #[inline]
    fn sift_up(&mut self, mut i: usize) {
        let item = self.heap[i];
        while i > 0 {
            let p = (i - 1) / 4;
            if item.before(&self.heap[p]) {
                self.heap[i] = self.heap[p];
                i = p;
            } else {
                break;
            }
        }
        self.heap[i] = item;
    }

    #[inline]
    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        let item = self.heap[i];
        loop {
            let c0 = 4 * i + 1;
            if c0 >= n {
                break;
            }
            let mut best = c0;
            let end = (c0 + 4).min(n);
            for c in c0 + 1..end {
                if self.heap[c].before(&self.heap[best]) {
                    best = c;
                }
            }
            if self.heap[best].before(&item) {
                self.heap[i] = self.heap[best];
                i = best;
            } else {
                break;
            }
        }
        self.heap[i] = item;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::collections::BTreeMap;

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
        }
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn cancel_removes_and_stale_keys_are_harmless() {
        let mut q = EventQueue::new();
        let a = q.push(Instant::from_nanos(1), 'a');
        let b = q.push(Instant::from_nanos(2), 'b');
        assert_eq!(q.cancel(a), Some('a'));
        assert_eq!(q.cancel(a), None);
        assert_eq!(q.len(), 1);
        let c = q.push(Instant::from_nanos(0), 'c'); // reuses a's slot
        assert_eq!(q.cancel(a), None, "an old key must not cancel the slot's new event");
        assert_eq!(q.peek_time(), Some(Instant::from_nanos(0)));
        assert_eq!(q.pop(), Some((Instant::from_nanos(0), 'c')));
        assert_eq!(q.cancel(c), None);
        assert_eq!(q.pop(), Some((Instant::from_nanos(2), 'b')));
        assert_eq!(q.cancel(b), None);
        assert!(q.is_empty());
    }

    /// Differential test: millions of random push / pop / cancel against a BTreeMap keyed by
    /// (time, seq), fixed seed. Times are drawn from a small range so equal times are common.
    #[test]
    fn differential_against_btreemap() {
        let mut rng = ChaCha8Rng::seed_from_u64(0x5eed_0001);
        let mut q = EventQueue::new();
        let mut model: BTreeMap<(u64, u64), u64> = BTreeMap::new();
        let mut keys: Vec<(EventKey, (u64, u64))> = Vec::new();
        let mut seq = 0u64;
        let mut now = 0u64;
        for step in 0..3_000_000u64 {
            match rng.random_range(0..10) {
                0..=4 => {
                    let t = now + rng.random_range(0..64);
                    let k = q.push(Instant::from_nanos(t), step);
                    model.insert((t, seq), step);
                    keys.push((k, (t, seq)));
                    seq += 1;
                }
                5..=7 => {
                    let got = q.pop();
                    let want = model.pop_first();
                    assert_eq!(got.map(|(t, e)| (t.as_nanos(), e)), want.map(|((t, _), e)| (t, e)), "step {step}");
                    if let Some(((t, _), _)) = want {
                        now = t;
                    }
                }
                _ => {
                    if !keys.is_empty() {
                        let i = rng.random_range(0..keys.len());
                        let (k, mk) = keys.swap_remove(i);
                        assert_eq!(q.cancel(k), model.remove(&mk), "step {step}");
                    }
                }
            }
            assert_eq!(q.len(), model.len());
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
