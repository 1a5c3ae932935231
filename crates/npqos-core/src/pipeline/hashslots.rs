//! An index from a key's 64-bit hash to a small number (a row, a bucket), kept by the caller
//! beside its own records, so that a driver can load a key's slot ahead of its packet
//! ([`HashSlots::prefetch`]) and then, its slot loaded, the record it names
//! ([`HashSlots::peek`]): a `HashMap` lets it do neither, and its two dependent misses (the
//! control bytes, then the entry) were a third of `npqos live`'s forwarder at 1e5 flows
//! (docs/PERFORMANCE.md).
//!
//! Open addressing with linear probing at a load of at most one half, each slot the hash and
//! the value plus one in 16 B, removal by shifting the entries after back (no tombstones). The
//! caller keeps the keys: two keys with one hash are both in the table, and
//! [`HashSlots::find`] asks the caller which value is its key's.

/// A flow key's 64-bit hash, the one the flow counters ([`super::FlowIndex::hash`]) and the
/// per-flow buckets ([`super::FlowBuckets::hash`]) both index by: a driver that hashed a key
/// once for one of them (`npqos live`'s look-ahead) has it for the other.
#[inline]
pub fn flow_hash(key: &crate::flow::FlowKey) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0).hash_one(key)
}

/// See the module documentation.
#[derive(Clone, Debug)]
pub(crate) struct HashSlots {
    /// (hash, value + 1); a value field of 0 is an empty slot.
    slots: Vec<(u64, u32)>,
    len: usize,
    /// The table never grows past this many slots (a power of two).
    max: usize,
}

impl HashSlots {
    /// Slots for `n` entries: twice as many, rounded up to a power of two.
    pub(crate) fn max_slots(n: usize) -> usize {
        (2 * n).max(8).next_power_of_two()
    }

    /// A table for up to `n` entries; it starts with room for `min(n, 65,536)` and doubles as
    /// entries come.
    pub(crate) fn new(n: usize) -> Self {
        let max = Self::max_slots(n);
        let first = Self::max_slots(n.min(1 << 16)).min(max);
        HashSlots { slots: vec![(0, 0); first], len: 0, max }
    }

    /// Entries in the table.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Slots allocated (16 B each).
    pub(crate) fn capacity(&self) -> usize {
        self.slots.capacity()
    }

    #[inline]
    fn home(&self, h: u64) -> usize {
        // foldhash's high bits are its best mixed.
        (h >> 32 ^ h) as usize & (self.slots.len() - 1)
    }

    /// The first value entered with hash `h`, whatever its key.
    #[inline]
    pub(crate) fn peek(&self, h: u64) -> Option<u32> {
        self.find(h, |_| true)
    }

    /// The first value entered with hash `h` for which `is` holds (the caller compares its
    /// key).
    #[inline]
    pub(crate) fn find(&self, h: u64, mut is: impl FnMut(u32) -> bool) -> Option<u32> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(h);
        loop {
            match self.slots[i] {
                (_, 0) => return None,
                (k, v) if k == h && is(v - 1) => return Some(v - 1),
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Adds value `v` (below `u32::MAX`) with hash `h`; at most [`Self::max_slots`]`(n) / 2`
    /// entries.
    pub(crate) fn insert(&mut self, h: u64, v: u32) {
        debug_assert!(v < u32::MAX);
        if 2 * (self.len + 1) > self.slots.len() {
            let n = self.slots.len() * 2;
            debug_assert!(n <= self.max, "more entries than the table is for");
            let old = std::mem::replace(&mut self.slots, vec![(0, 0); n]);
            for (k, v1) in old.into_iter().filter(|e| e.1 != 0) {
                self.put(k, v1);
            }
        }
        self.put(h, v + 1);
        self.len += 1;
    }

    fn put(&mut self, h: u64, v1: u32) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(h);
        while self.slots[i].1 != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = (h, v1);
    }

    /// Removes the entry of value `v` with hash `h`; whether it was there.
    pub(crate) fn remove(&mut self, h: u64, v: u32) -> bool {
        let mask = self.slots.len() - 1;
        let mut i = self.home(h);
        loop {
            match self.slots[i] {
                (_, 0) => return false,
                (k, v1) if k == h && v1 == v + 1 => break,
                _ => i = (i + 1) & mask,
            }
        }
        // Shift back every entry after the hole that may move into it: one whose home is not
        // cyclically in (hole, j].
        let mut hole = i;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let (k, v1) = self.slots[j];
            if v1 == 0 {
                break;
            }
            let home = self.home(k);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = (k, v1);
                hole = j;
            }
        }
        self.slots[hole] = (0, 0);
        self.len -= 1;
        true
    }

    /// A hint: the slot of hash `h` is looked at soon, so it is loaded now (no effect on
    /// results).
    #[inline]
    pub(crate) fn prefetch(&self, h: u64) {
        crate::hint::prefetch(&self.slots, self.home(h));
    }
}

#[cfg(test)]
mod tests {
    use super::HashSlots;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// A hash of 24 whose home slot in a table of 128 slots is one of the last 12 (`hsel` below
    /// 12) or of the first 12, so that entries collide and probe runs wrap around the end.
    fn hash(hsel: u64) -> u64 {
        match hsel {
            0..12 => 127 - hsel,
            _ => (hsel - 12) << 40 | (hsel - 12),
        }
    }

    proptest! {
        /// Against a map of values to their hashes, through inserts and removes.
        #[test]
        fn the_slots_hold_what_a_map_holds(ops in prop::collection::vec((any::<bool>(), 0u64..24, 0u32..40), 1..400)) {
            let mut t = HashSlots::new(64);
            assert_eq!(t.capacity(), 128);
            let mut m: HashMap<u32, u64> = HashMap::new();
            for (add, hsel, v) in ops {
                let h = hash(hsel);
                if add && !m.contains_key(&v) && m.len() < 64 {
                    t.insert(h, v);
                    m.insert(v, h);
                } else if !add {
                    let had = m.get(&v) == Some(&h);
                    prop_assert_eq!(t.remove(h, v), had);
                    if had {
                        m.remove(&v);
                    }
                }
                prop_assert_eq!(t.len(), m.len());
                for (&v, &h) in &m {
                    prop_assert_eq!(t.find(h, |x| x == v), Some(v));
                }
                for v in (0..40u32).filter(|v| !m.contains_key(v)) {
                    for hsel in 0..24 {
                        prop_assert_eq!(t.find(hash(hsel), |x| x == v), None);
                    }
                }
            }
        }
    }

    #[test]
    fn a_table_for_many_entries_grows_and_keeps_them() {
        let mut t = HashSlots::new(100_000);
        let first = t.capacity();
        let h = |v: u32| (v as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for v in 0..100_000 {
            t.insert(h(v), v);
        }
        assert!(t.capacity() > first, "{} slots, {first} at first", t.capacity());
        assert_eq!(t.capacity(), HashSlots::max_slots(100_000));
        assert!((0..100_000).all(|v| t.find(h(v), |x| x == v) == Some(v)));
        assert!((0..100_000).step_by(2).all(|v| t.remove(h(v), v)));
        assert!((0..100_000).all(|v| t.find(h(v), |x| x == v) == (v % 2 == 1).then_some(v)));
    }

    #[test]
    fn peek_names_the_first_entry_of_a_hash() {
        let mut t = HashSlots::new(8);
        assert_eq!(t.peek(5), None);
        t.insert(5, 3);
        t.insert(5, 4);
        assert_eq!(t.peek(5), Some(3));
        assert_eq!(t.find(5, |v| v == 4), Some(4));
        assert!(t.remove(5, 3));
        assert_eq!(t.peek(5), Some(4));
        assert!(!t.remove(5, 3));
    }
}
