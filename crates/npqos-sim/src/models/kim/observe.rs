//! The kim model's observers of the reschedule heaps: heap array accesses counted by index
//! (off-chip counts for any locked size from one run), and per-core set-associative cache
//! models that attribute every miss to the heap operation it belongs to (Tables VI-VII).

use npqos_core::cache::SetAssocCache;
use npqos_core::shaper::heap::{Observe, OpKind, NODE_BYTES};

/// Counts heap array accesses by where their index falls among the locked sizes' first
/// off-chip indices (shared by all cores' heaps: off-chip accesses for a locked size L are the
/// accesses at index >= L / 8). Bin `k` counts the indices in `[bounds[k - 1], bounds[k])`
/// (from 0, and to the end for the last); the heap's root, index 1, falls in the first bin.
/// Counts by bin rather than by index: the few bins stay in the first-level cache, where a
/// count per index of a deep heap did not.
pub(super) struct IndexCounts {
    bounds: Vec<usize>,
    pub(super) bins: Vec<u64>,
}
impl IndexCounts {
    /// Bins for the first off-chip index of each of `locked_sizes` (bytes).
    pub(super) fn new(locked_sizes: &[u64]) -> Self {
        let mut bounds: Vec<usize> = locked_sizes.iter().map(|&l| first_off_chip(l)).collect();
        bounds.sort_unstable();
        bounds.dedup();
        let bins = vec![0; bounds.len() + 1];
        IndexCounts { bounds, bins }
    }
    /// Accesses at index `first_off_chip(locked)` or later, of the bins `bins` (added up over
    /// shards built with the same sizes).
    pub(super) fn at_or_after(&self, bins: &[u64], locked: u64) -> u64 {
        let first = first_off_chip(locked);
        assert!(self.bounds.contains(&first), "locked size {locked} B was not one of the bins' sizes");
        // Every bin from the one that starts at `first` on.
        let k = self.bounds.partition_point(|&b| b <= first);
        bins.iter().skip(k).sum()
    }
}
/// The first heap index of a locked size of `locked` bytes that is off chip.
pub(super) fn first_off_chip(locked: u64) -> usize {
    (locked / NODE_BYTES) as usize
}
impl Observe for IndexCounts {
    #[inline(always)]
    fn access(&mut self, index: usize, _write: bool) {
        let mut k = 0;
        while k < self.bounds.len() && index >= self.bounds[k] {
            k += 1;
        }
        self.bins[k] += 1;
    }
}

/// The observer of one heap operation: index counts plus the core's caches (one per locked
/// size; empty when no cache is simulated).
pub(super) struct CoreObs<'a> {
    pub(super) counts: &'a mut IndexCounts,
    pub(super) caches: &'a mut [SetAssocCache],
    pub(super) misses: &'a mut MissCounts,
}
impl Observe for CoreObs<'_> {
    #[inline(always)]
    fn access(&mut self, index: usize, write: bool) {
        self.counts.access(index, write);
        if self.caches.is_empty() {
            return;
        }
        let m = &mut *self.misses;
        match m.phase {
            OpKind::Insert => m.insert_accesses += 1,
            OpKind::Delete => m.delete_accesses += 1,
            OpKind::Peek => m.peek_accesses += 1,
        }
        for (k, c) in self.caches.iter_mut().enumerate() {
            if !c.access(index as u64 * NODE_BYTES, write) {
                match m.phase {
                    OpKind::Insert => m.insert_misses[k] += 1,
                    OpKind::Delete => m.delete_misses[k] += 1,
                    OpKind::Peek => m.peek_misses[k] += 1,
                }
            }
        }
    }
    #[inline(always)]
    fn begin(&mut self, op: OpKind) {
        let m = &mut *self.misses;
        m.phase = op;
        match op {
            OpKind::Insert => m.insert_ops += 1,
            OpKind::Delete => m.delete_ops += 1,
            OpKind::Peek => {}
        }
    }
}

/// Accesses and cache misses per heap operation kind, per locked size.
#[derive(Clone)]
pub(super) struct MissCounts {
    pub(super) phase: OpKind,
    pub(super) peek_accesses: u64,
    pub(super) peek_misses: Vec<u64>,
    pub(super) insert_ops: u64,
    pub(super) insert_accesses: u64,
    pub(super) delete_ops: u64,
    pub(super) delete_accesses: u64,
    pub(super) insert_misses: Vec<u64>,
    pub(super) delete_misses: Vec<u64>,
}

impl MissCounts {
    pub(super) fn new(sizes: usize) -> Self {
        MissCounts {
            phase: OpKind::Peek,
            peek_accesses: 0,
            peek_misses: vec![0; sizes],
            insert_ops: 0,
            insert_accesses: 0,
            delete_ops: 0,
            delete_accesses: 0,
            insert_misses: vec![0; sizes],
            delete_misses: vec![0; sizes],
        }
    }
    /// Adds another shard's counts (same locked sizes).
    pub(super) fn add(&mut self, o: &MissCounts) {
        self.peek_accesses += o.peek_accesses;
        self.insert_ops += o.insert_ops;
        self.insert_accesses += o.insert_accesses;
        self.delete_ops += o.delete_ops;
        self.delete_accesses += o.delete_accesses;
        for (a, b) in [
            (&mut self.peek_misses, &o.peek_misses),
            (&mut self.insert_misses, &o.insert_misses),
            (&mut self.delete_misses, &o.delete_misses),
        ] {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Counting by bins gives, for every locked size, the sum a count per index gives: sizes
    /// given in any order, repeated, 0, and indices on either side of every bound.
    #[test]
    fn bins_give_the_off_chip_sums_of_a_count_per_index() {
        // A locked size of L bytes keeps the heap's first L / 8 nodes (8 B each) on chip.
        assert_eq!((first_off_chip(2048), first_off_chip(8192), first_off_chip(24)), (256, 1024, 3));
        for sizes in [vec![2048, 4096, 8192], vec![8192, 2048, 2048, 0], vec![24], vec![]] {
            let mut bins = IndexCounts::new(&sizes);
            let mut per_index = vec![0u64; 3000];
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
            for k in 0..100_000usize {
                // Every index at and around the bounds, then random ones.
                let i = if k < 3000 { k } else { rng.random_range(0..3000) };
                bins.access(i, k % 2 == 0);
                per_index[i] += 1;
            }
            assert_eq!(bins.bins.iter().sum::<u64>(), 100_000);
            for &l in &sizes {
                let want: u64 = per_index.iter().skip(first_off_chip(l)).sum();
                assert_eq!(bins.at_or_after(&bins.bins, l), want, "sizes {sizes:?}, locked {l}");
            }
        }
    }
}
