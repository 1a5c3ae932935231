//! The pipeline's prefetch hints: a driver that knows its next packets (the simulator's
//! arrival stream, live's next frames in a ring block) asks for their state to be loaded while
//! it works on the packet before them. No hint changes a result.

use super::{Arrival, Pipeline, NO_HINT, NO_SLOT, UNCLASSIFIED};
use crate::flow::FlowKey;
use crate::flowmap::SlotHash;

impl Pipeline {
    /// A hint: `ahead` arrives soon, so its flow's bucket record and its ingress slot are
    /// loaded now (no effect on results).
    #[inline]
    pub fn prefetch_arrival(&self, ahead: &Arrival) {
        if let Some(fb) = self.buckets.as_ref().filter(|_| ahead.hint != NO_HINT) {
            fb.prefetch(ahead.hint);
        }
        if ahead.slot != NO_SLOT {
            self.ingress.prefetch_slot(ahead.slot, false);
        } else if ahead.service != UNCLASSIFIED {
            self.ingress.prefetch(&ahead.key);
        }
    }

    /// The second hint for an arrival given [`Self::prefetch_arrival`] some packets before:
    /// what its ingress slot, loaded by then, leads to (dqs's tree root). Needs
    /// [`Arrival::slot`]; no effect on results.
    #[inline]
    pub fn prefetch_arrival_deeper(&self, ahead: &Arrival) {
        if ahead.slot != NO_SLOT {
            self.ingress.prefetch_slot(ahead.slot, true);
        }
    }

    /// The hash that gives a flow its ingress slot ([`Arrival::slot`]; dqs's; `None` for the
    /// other tables), for a driver that works slots out before the pipeline's thread does.
    pub fn ingress_slot_hash(&self) -> Option<SlotHash> {
        self.dqs().map(|d| d.slot_hash().clone())
    }

    /// The ingress's slot of flow `key` (dqs's AFM slot; `None` for the other tables), for a
    /// driver that knows a flow's key before its [`Arrival`] (live's next frames in a ring
    /// block): for [`Self::prefetch_slot`] and [`Arrival::slot`].
    #[inline]
    pub fn ingress_slot(&self, key: &FlowKey) -> Option<u32> {
        self.ingress.slot_of(key)
    }

    /// A hint: a packet whose [`Self::ingress_slot`] is `slot` arrives soon, so the slot is
    /// loaded now; `deeper`, the second of two such hints some work later: what the slot
    /// leads to (dqs's tree root). No effect on results.
    #[inline]
    pub fn prefetch_slot(&self, slot: u32, deeper: bool) {
        self.ingress.prefetch_slot(slot, deeper);
    }

    /// Whether there are per-flow buckets: then a key's [`crate::pipeline::flow_hash`] is its
    /// [`Self::bucket_hash`].
    #[inline]
    pub fn has_flow_buckets(&self) -> bool {
        self.buckets.is_some()
    }

    /// The hash the per-flow buckets know flow `key` by when its service shapes each flow
    /// ([`FlowBuckets::hash`](crate::pipeline::buckets::FlowBuckets::hash)), for
    /// [`Self::prefetch_bucket`]; `None` without per-flow buckets. A driver without the
    /// router model's hints (live) looks its flows' buckets up by key.
    #[inline]
    pub fn bucket_hash(&self, key: &FlowKey) -> Option<u64> {
        self.buckets.as_ref().map(|fb| fb.hash(key))
    }

    /// A hint: a packet whose [`Self::bucket_hash`] is `h` comes soon, so the buckets' index
    /// slot is loaded now; `deeper`, the second of two such hints some work later: the bucket
    /// record and key the slot names. No effect on results (a service that shapes per
    /// subscriber or class looks up another key, and the hint is only wasted).
    #[inline]
    pub fn prefetch_bucket(&self, h: u64, deeper: bool) {
        if let Some(fb) = &self.buckets {
            match deeper {
                false => fb.prefetch_index(h),
                true => fb.prefetch_flow(h),
            }
        }
    }

    /// A hint: a packet of flow row `row` (the driver's [`FlowIndex`]) arrives soon, so its
    /// flow counters are loaded now (no effect on results).
    #[inline]
    pub fn prefetch_row(&self, row: u32) {
        crate::hint::prefetch_whole(&self.flows, row as usize);
    }
}
