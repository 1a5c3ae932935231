//! What the pipeline shows its drivers beyond its interface: its elements' state and
//! counters (what live's forwarder reports while it runs and at the end), and conservation at
//! every element's ports ([`Pipeline::check_elements`]; docs/pipeline.md, "Conservation at the
//! ports").

use super::*;

impl Pipeline {
    /// Swaps the link's DRR round for `drr`: a test's way of making a mechanism refuse (the
    /// drivers' tests that a refusal ends a run). Nothing else calls it.
    #[doc(hidden)]
    pub fn set_link_round(&mut self, drr: Drr) {
        self.egress = Egress::new(self.egress.shaping().clone(), self.p.shaping.conformance, drr);
    }
    /// Every packet's fate, in arrival order, when built with `trace` (the equivalence tests).
    pub fn take_trace(&mut self) -> Option<Vec<Trace>> {
        self.trace.take()
    }
    /// Gives the ingress's buffer storage back (`Ingress::release_storage`): the pipeline then
    /// takes no packet; its counters stay.
    ///
    /// Errors (no effect): packets still held.
    pub fn release_storage(&mut self) -> Result<(), crate::error::Error> {
        self.ingress.release_storage()
    }
    /// The ingress's dqs table, if it is dqs (its counters and buffer).
    pub fn dqs(&self) -> Option<&crate::flowmap::Dqs> {
        self.ingress.dqs()
    }
    /// Packets held by the ingress (with processing none: every packet in the pipeline).
    pub fn ingress_held(&self) -> u64 {
        self.ingress.held()
    }
    /// The egress element's shaper.
    pub fn shaping(&self) -> &Shaping {
        self.egress.shaping()
    }
    /// The per-flow buckets' owners, if a service is shaped per flow.
    pub fn flow_buckets(&self) -> Option<&FlowBuckets> {
        self.buckets.as_ref()
    }
    /// Whether the pipeline has processors (processing is not none).
    pub fn has_processors(&self) -> bool {
        self.processing.is_some()
    }
    /// Service `s` now: packets offered, packets done over its tolerance, and processors
    /// allocated to it (what both drivers' time series sample).
    pub fn service_now(&self, s: usize) -> (u64, u64, u32) {
        let pr = self.processing.as_ref();
        (self.offered[s], pr.map_or(0, |p| p.late()[s]), pr.map_or(0, |p| p.allocated(s)))
    }
    /// The packet functions' reports so far (the first [`MAX_DETECTIONS`]), in the order found,
    /// and per service how many there were.
    pub fn detections(&self) -> (&[Found], &[u64]) {
        match self.processing.as_ref().map(Processing::functions) {
            Some(f) => (&f.kept, &f.found),
            None => (&[], &[]),
        }
    }
    /// Per service the packets its function could not examine (`None`: it has none).
    pub fn function_untracked(&self, s: usize) -> Option<u64> {
        self.processing.as_ref().and_then(|p| p.functions().untracked(s))
    }
    /// Shaper wake-ups that re-enabled at least one queue.
    pub fn wakeups(&self) -> u64 {
        self.wakeups
    }
    /// Packets CoDel marked CE, on the shaped queues and FQ-CoDel's ingress queues together
    /// (`None` with neither `shaping.aqm` nor `ingress.kind = "fq-codel"`).
    pub fn ecn_marked(&self) -> Option<u64> {
        let fq = self.processing.as_ref().and_then(|p| p.fq_counters()).map(|c| c.marked);
        match (self.aqm.as_ref().map(|a| a.marked), fq) {
            (None, None) => None,
            (a, f) => Some(a.unwrap_or(0) + f.unwrap_or(0)),
        }
    }
    /// Packets dropped, by reason of [`DROPS`].
    pub fn drops(&self) -> &[u64; DROPS.len()] {
        &self.drops
    }
    /// The counters of flow row `row` (the rows of the caller's [`FlowIndex`]).
    pub fn flow_row(&self, row: u32) -> RowCounts {
        match row {
            FlowIndex::OTHER => self.other_flows,
            r => self.flows.get(r as usize).copied().unwrap_or_default(),
        }
    }
    /// Service `s`'s name (`""` for an unknown one).
    pub fn service_name(&self, s: usize) -> &str {
        self.p.services.get(s).map_or("", |x| x.name.as_str())
    }
    /// The counters of service `s` (its class).
    pub fn class_row(&self, s: usize) -> Option<&RowCounts> {
        self.classes.get(s)
    }
    /// Packets in the pipeline (arrived, neither delivered nor dropped).
    pub fn in_flight(&self) -> u64 {
        (self.pkts.len() - self.free.len()) as u64
    }
    /// Conservation at every element's ports (in = out + dropped by reason + held, each
    /// element's holdings from its own state): the ingress, processing, the flow buckets, the
    /// egress and the link. The egress's FIFOs are walked, so this costs a pass over them.
    pub fn check_elements(&self) -> Result<(), ConservationError> {
        self.check_ports(true)
    }

    /// [`Self::check_elements`]; without `walk`, the FIFOs' and DRR queues' holdings are their
    /// counters (the cheap check debug builds make after every call).
    pub(super) fn check_ports(&self, walk: bool) -> Result<(), ConservationError> {
        self.ingress.check()?;
        if let Some(b) = &self.buckets {
            b.conservation()?;
        }
        if let Some(pr) = &self.processing {
            pr.check(walk)?;
        }
        let fifo = match walk {
            true => self.fifo.iter().map(|f| self.fifo_len(f)).sum(),
            false => self.egress_backlog,
        };
        self.egress_ports.check("egress", fifo + self.egress_pending)?;
        self.link.check()
    }

    /// In debug builds, [`Self::check_ports`] after a call; a broken element is the run's error.
    #[inline]
    pub(super) fn debug_check(&mut self, at: u64) {
        if cfg!(debug_assertions) && self.error.is_none() {
            if let Err(e) = self.check_ports(false) {
                self.error = Some(PipelineError::Mechanism { at, stage: "conservation", msg: e.to_string() });
            }
        }
    }

    /// The packets of one FIFO, counted along its links.
    pub(super) fn fifo_len(&self, f: &Fifo) -> u64 {
        let (mut n, mut at) = (0, f.head);
        while at != NIL {
            n += 1;
            at = self.pkts[at as usize].next;
        }
        n
    }
}
