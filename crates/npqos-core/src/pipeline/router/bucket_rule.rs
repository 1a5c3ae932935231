//! The pipeline's bucket-lifetime rule at its two ends (docs/pipeline.md): a per-flow-shaped
//! packet takes its flow's bucket when it arrives and gives it back when it leaves
//! ([`crate::pipeline::FlowBuckets`]).

use super::*;

impl Pipeline {
    /// Packet `id` leaves the router at `now` (its transmission starts, or it is dropped): its
    /// flow's bucket, if a per-flow one, has one packet less, and is parked with the time it is
    /// full again when that was the last.
    pub(super) fn release_bucket(&mut self, now: u64, id: u32) {
        let pk = &self.pkts[id as usize];
        self.release_bucket_of(now, pk.service as usize, pk.eq);
    }

    /// A packet of service `s` in output queue `eq` leaves at `now`: [`Self::release_bucket`]
    /// without its record.
    pub(super) fn release_bucket_of(&mut self, now: u64, s: usize, eq: u32) {
        let base = self.eq_base[s];
        let Some(fb) = self.buckets.as_mut().filter(|_| base != 0) else { return };
        // No bucket yet (processing none, dropped at ingress), or the shared queue's own.
        if eq == NIL || eq - base >= fb.buckets() {
            return;
        }
        let q = QueueId(eq);
        let full = self.egress.shaping().full_at(q);
        let nowi = Instant::from_nanos(now);
        if let Err(e) = fb.release(eq - base, full.unwrap_or(nowi), nowi) {
            self.error.get_or_insert(PipelineError::Mechanism {
                at: now,
                stage: "egress (flow buckets)",
                msg: e.to_string(),
            });
        }
    }

    /// The output queue of the bucket the per-flow-shaped service `s`'s flow of `a` holds from
    /// `now` (the pipeline's bucket rule); `None`: the rule refused, the run failed.
    pub(super) fn take_bucket(&mut self, now: u64, s: usize, a: &Arrival, hash: Option<u64>) -> Option<u32> {
        let fb = self.buckets.as_mut()?;
        let hint = (a.hint != NO_HINT).then_some(a.hint);
        let host = self.p.services[s].host;
        // The flow's hash is its bucket key's only when the bucket is the flow's own.
        let hashed = hash.filter(|_| host.is_none());
        match fb.acquire_hashed(&bucket_key(&a.key, host), hint, Instant::from_nanos(now), hashed) {
            Ok((b, how)) => {
                self.flow_queue_shared += (how == Taken::Shared) as u64;
                Some(self.eq_base[s] + b)
            }
            Err(e) => {
                self.fail(now, "egress (flow buckets)", e);
                None
            }
        }
    }
}
