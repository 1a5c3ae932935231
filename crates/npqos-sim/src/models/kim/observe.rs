//! The kim model's observers of the reschedule heaps: heap array accesses counted by index
//! (off-chip counts for any locked size from one run), and per-core set-associative cache
//! models that attribute every miss to the heap operation it belongs to (Tables VI-VII).

use npqos_core::cache::SetAssocCache;
use npqos_core::shaper::heap::{Observe, OpKind, NODE_BYTES};

/// Counts heap array accesses by index (shared by all cores' heaps: off-chip accesses for a
/// locked size L are the accesses at index >= L / 8).
#[derive(Default)]
pub(super) struct IndexCounts(pub(super) Vec<u64>);
impl Observe for IndexCounts {
    #[inline(always)]
    fn access(&mut self, index: usize, _write: bool) {
        if index >= self.0.len() {
            self.0.resize(index + 1, 0);
        }
        self.0[index] += 1;
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
