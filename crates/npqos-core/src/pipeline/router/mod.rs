//! The composed router as one pipeline without a clock (docs/router.md, docs/pipeline.md):
//! stages 3 to 7 over the pipeline's elements (ingress, processing, queue memory, egress, link),
//! told `now` by whoever drives it and never reading a clock or scheduling anything itself.
//! Two drivers run it: `npqos-sim`'s router model on its discrete-event engine (simulated
//! time) and `npqos live`'s forwarder (CLOCK_MONOTONIC, real frames, processing none or virtual processors, the
//! transmit ring as the link: [`Pipeline::with_ring_link`], [`Pipeline::receive_frame`],
//! [`Pipeline::transmit`]).
//!
//! Its interface, the shape of quinn-proto's `Connection`:
//!
//! * [`Pipeline::receive`]: a batch of classified arrivals (stages 1 and 2 are the driver's
//!   stream), each at its own time, in time order;
//! * [`Pipeline::next_wakeup`] / [`Pipeline::wake`]: the pipeline's own deadlines (the link's
//!   next transmission start, the allocator's timer, the event shaper's wake-up), each with the
//!   class that orders it among events at one instant;
//! * timed effects: whatever takes time (a processor's completion or context switch, a queue
//!   memory operation, a periodic fill, the next sample) goes into the caller's [`Effects`] as
//!   a [`Timed`], and the caller hands it back to [`Pipeline::handle`] at its time.
//!
//! Events at one instant run in this order (the classes): processor events (0), queue-memory
//! completions (1), transmission starts (2), periodic-fill re-enables (3), the allocator's timer
//! (4), the event shaper's wake-up (5), the next arrival (6); samples (7) last.
//!
//! A mechanism's refusal stops the pipeline: [`Pipeline::error`] says which stage refused what,
//! and the driver ends the run with it.

use crate::alloc::{Action, AllocConfig, Allocator, ServiceSpec};
use crate::classify::Classifier;
use crate::flow::FlowKey;
use crate::pipeline::{
    Admit, ConservationError, Counts, Egress, FlowBuckets, FlowIndex, Ingress, IngressDrop, IngressKind, Ports, Qmem,
    Shaping, Taken,
};
use crate::queues::timing::Op;
use crate::rate::Serializer;
use crate::sched::drr::Drr;
use crate::sched::fq::{FairQueue, FqPacket};
use crate::sched::lap::{LapPacket, LapScheduler, Policy as LapPolicy};
use crate::shaper::Conformance;
use crate::shaper::{BucketParams, EventShaper, PeriodicShaper};
use crate::{AppId, CoreId, Duration, FlowId, Instant, ProcessorId, QueueId, ServiceId};
pub use outcome::{per_interval, ClassRow, Line, Outcome, Tables};
pub use params::{
    bucket_key, wire_len, Allocation, Host, ProcessingParams, RouterParams, Scheduler, ServiceParams, ShaperKind,
    ShapingParams,
};
use std::collections::VecDeque;
use std::sync::Arc;

mod aqm;
pub use aqm::{ect as frame_ect, set_ce};
use aqm::{Aqm, D_CODEL};
mod bucket_rule;
mod build;
mod hints;
pub use build::classifier;
mod link;
use link::Link;
mod outcome;
mod params;
mod processing;
mod state;
mod tap;
pub use processing::{Found, MAX_DETECTIONS};
use processing::{Processing, Step};
pub use tap::{Port, Tapped};

/// No service matched the packet ([`Arrival::service`]).
pub const UNCLASSIFIED: u32 = u32::MAX;
/// No bucket hint ([`Arrival::hint`]).
pub const NO_HINT: u32 = u32::MAX;
/// No ingress slot worked out ([`Arrival::slot`]).
pub const NO_SLOT: u32 = u32::MAX;

/// One packet as it reaches the ingress: classified (stages 1 and 2 are the driver's).
#[derive(Clone, Copy, Debug)]
pub struct Arrival {
    /// Its time, ns.
    pub t: u64,
    pub len: u32,
    /// Its service, or [`UNCLASSIFIED`].
    pub service: u32,
    /// Its output queue (0 when unclassified): the service's own, or for a per-flow-shaped
    /// service the queue of bucket `hint` (the service's first flow queue past the hints; the
    /// pipeline's bucket rule decides the bucket).
    pub eq: u32,
    /// Per-flow-shaped: the flow's first-seen index while there are no more flows than
    /// `shaping.flow_queues`, the bucket it gets while that bucket is unused or its own
    /// ([`FlowBuckets`]); [`NO_HINT`] past them.
    pub hint: u32,
    /// Actual processing time, ns (the predicted one is the service's `est_ns(len)`).
    pub actual: f64,
    pub key: FlowKey,
    /// Its flow's row of the flow counters (the driver's [`FlowIndex`]).
    pub row: u32,
    /// Its TCP flags (`None`: not TCP, or not captured), for a service's packet function.
    pub tcp_flags: Option<u8>,
    /// Its flow's ingress slot (dqs's AFM slot) if the driver worked it out
    /// ([`Pipeline::ingress_slot_hash`]: the router's arrival thread, live's look at the next
    /// frames), else [`NO_SLOT`]: the pipeline hashes the key itself. Any other slot
    /// corrupts the ingress's table.
    pub slot: u32,
}

/// Why the pipeline could not be built, or stopped.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PipelineError {
    #[error("router configuration: {0}")]
    Config(String),
    /// A mechanism refused a call: a defect in the pipeline, reported rather than hidden.
    #[error("at {at} ns, {stage}: {msg}")]
    Mechanism { at: u64, stage: &'static str, msg: String },
}

/// The classes of events at one instant ([`Timed::class`], [`Pipeline::next_wakeup`]).
pub const C_PROC: u8 = 0;
pub const C_QMEM: u8 = 1;
pub const C_LINK: u8 = 2;
pub const C_REENABLE: u8 = 3;
pub const C_TIMER: u8 = 4;
pub const C_SHAPER: u8 = 5;
pub const C_ARRIVAL: u8 = 6;
pub const C_SAMPLE: u8 = 7;

/// What a timed effect is ([`Timed`]).
#[derive(Clone, Copy, Debug)]
pub enum Ev {
    ProcDone(u32),
    SwitchDone(u32),
    /// The packet's ingress enqueue completed: its service's scheduler sees it.
    Visible(u32),
    /// The packet's egress enqueue completed: it is in its output queue.
    EgressVisible(u32),
    /// A periodically filled bucket's fill has come (the bucket: with processing none the
    /// queue it shapes is found from it).
    Reenable(u32),
    Sample,
}

/// An effect that takes time: the caller hands `ev` back to [`Pipeline::handle`] at `at`,
/// after the events of lower classes at that instant and after the effects of its class
/// given before it.
#[derive(Clone, Copy, Debug)]
pub struct Timed {
    pub at: Instant,
    pub class: u8,
    pub ev: Ev,
}

/// The caller's buffer of timed effects.
#[derive(Debug, Default)]
pub struct Effects(pub Vec<Timed>);

impl Effects {
    #[inline]
    pub fn at(&mut self, at: Instant, class: u8, ev: Ev) {
        self.0.push(Timed { at, class, ev });
    }
}

/// Drop reasons, in the order of their scalars: one vocabulary for both drivers. A run writes
/// the ones its configuration can give ([`Pipeline::reasons`]).
pub const DROPS: [&str; 9] = [
    "unclassified",
    "ingress_buffer_full",
    "ingress_no_queue",
    "late",
    "exceeds_bucket",
    "egress_buffer_full",
    "ingress_queue_full",
    "oversize",
    "codel",
];
const D_UNCLASSIFIED: usize = 0;
const D_BUFFER: usize = 1;
const D_NO_QUEUE: usize = 2;
const D_LATE: usize = 3;
const D_BUCKET: usize = 4;
const D_EGRESS: usize = 5;
/// The flow's ingress queue holds `table.queue_limit` bytes.
const D_QUEUE_FULL: usize = 6;
/// The caller's transmit ring (the link) has no slot that large.
const D_OVERSIZE: usize = 7;

/// What became of one arrival given with [`Pipeline::receive_frame`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received {
    /// In its ingress queue; `new_flow`: the flow was given the queue by this frame.
    Queued { new_flow: bool },
    /// Dropped, for the reason of [`DROPS`] at this index.
    Dropped(usize),
    /// The pipeline had stopped, or stopped on it ([`Pipeline::error`]).
    Refused,
}

/// The flow and class counters, one drop count per reason of [`DROPS`].
pub type RowCounts = Counts<{ DROPS.len() }>;

/// Stages of a packet's latency, in the order of their scalars.
pub const STAGES: [&str; 4] = ["ingress", "processing", "egress", "e2e"];

/// 64 bytes on a 64-byte boundary: a packet's state is one cache line, so one miss (or one
/// prefetch) brings all of it.
#[derive(Clone, Copy, Debug, Default)]
#[repr(align(64))]
struct Pkt {
    arrival: u64,
    len: u32,
    service: u16,
    core: u16,
    iq: u32,
    eq: u32,
    dispatch: u64,
    done: u64,
    /// When its last bit leaves the link.
    left: u64,
    actual: f64,
    /// The next packet of its egress FIFO ([`Fifo`]); NIL: none.
    next: u32,
    /// Its flow's row of the flow counters (`FlowIndex::OTHER`: past the exact table).
    row: u32,
}

const _: () = assert!(std::mem::size_of::<Pkt>() == 64);

/// No packet.
const NIL: u32 = u32::MAX;

/// The stage a refusal of the egress element (shaper or link round) is reported under.
const EGRESS: &str = "egress (shaper, link DRR)";

/// An egress queue's FIFO: its first and last packets, linked by `Pkt::next`.
#[derive(Clone, Copy, Debug)]
struct Fifo {
    head: u32,
    tail: u32,
}

impl Fifo {
    const EMPTY: Fifo = Fifo { head: NIL, tail: NIL };
}

/// One packet's fate, for the equivalence tests (built with `trace`), in arrival order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Trace {
    pub arrival: u64,
    pub len: u32,
    /// Its ingress queue.
    pub iq: u32,
    pub service: u16,
    pub dispatch: u64,
    pub done: u64,
    pub delivered: Option<u64>,
    pub drop: Option<&'static str>,
}

/// The pipeline. See the module documentation.
pub struct Pipeline {
    /// The configuration (shared: the router's driver keeps reading it, live's forwarder owns
    /// it through this).
    p: Arc<RouterParams>,
    end: u64,
    /// The end of the run: the end of arrivals plus the drain.
    until: u64,
    ingress: Ingress,
    qmem: Qmem,
    /// Ingress queues (the queue memory's egress ids start here).
    nqi: u32,
    /// Stage 4, the processing element; `None`: processing none.
    processing: Option<Processing>,
    /// The processing element's decisions, for [`Pipeline::carry_out`].
    steps: Vec<Step>,
    /// Stages 6 and 7's scheduling: the shaper over the output queues and the link's DRR
    /// round (the pipeline's egress element; the FIFOs and the serializer are here).
    egress: Egress,
    /// The event-driven shaper's next wake-up, as the egress element last said.
    shaper_wake: Option<Instant>,
    /// Whether each service's own output queue is shaped; every per-flow bucket (the queues
    /// after them) is shaped unless `shaper = "none"` ([`Pipeline::shaped`]).
    shaped: Vec<bool>,
    /// Per service the cap of its buckets (bytes): `shaping.cap_bytes`, raised for a rate by
    /// `shaping.cap_wake_ns` (live's `wake_tolerance`). Under wait-for-tokens a packet larger
    /// than its bucket's cap could never conform.
    cap: Vec<u64>,
    flow_queues_shaped: bool,
    /// Per shaped queue its FIFO, a list through the packets' `next` ([`Fifo`]): 8 B per
    /// queue and no allocation per queue, so a packet's enqueue touches one line of it. The
    /// shaped queues are the output queues, or with processing none the ingress queues.
    fifo: Vec<Fifo>,
    /// Processing none (`Allocation::None`): a packet waits in its ingress queue, shaped by its
    /// flow's bucket, and goes from there to the link.
    direct: bool,
    /// dqs's shared queue (`on_exhausted = "shared"`), NIL without one: with processing none
    /// it is shaped by one bucket of its own, the one after the flows'.
    shared_iq: u32,
    /// Shaper wake-ups that re-enabled at least one queue.
    wakeups: u64,
    /// With processing none, per bucket the ingress queue that last held it (whether it still
    /// does is the queue's head packet's to say).
    bucket_queue: Vec<u32>,
    /// Packets in the egress FIFOs.
    egress_backlog: u64,
    /// Packets admitted to the egress whose queue-memory enqueue has not completed.
    egress_pending: u64,
    /// Conservation at the ports of the egress (dropped: exceeds_bucket, egress_buffer_full, codel)
    /// (docs/pipeline.md, "Conservation at the ports"); the ingress, processing, the flow
    /// buckets and the link count their own.
    egress_ports: Ports<3>,
    /// `shaping.aqm = "codel"`: CoDel's state per shaped queue (docs/codel.md); `None`: tail
    /// drop only.
    aqm: Option<Box<Aqm>>,
    /// Each service's first flow queue (0: it has none, one queue for the service).
    eq_base: Vec<u32>,
    /// The per-flow buckets' owners (`shaping.flow_queues` buckets, one index space for every
    /// per-flow-shaped service, service s's bucket b being output queue `eq_base[s] + b`): the
    /// pipeline's bucket-lifetime rule. A flow holds its bucket while it has a packet between
    /// its arrival and the start of its transmission (or its drop).
    buckets: Option<FlowBuckets>,
    /// Packets whose flow found every bucket held and shared one by hash ([`Taken::Shared`]).
    flow_queue_shared: u64,
    egress_bytes: u64,
    /// Stage 7, the link element: the serializer, or the caller's transmit ring.
    link: Link,
    pkts: Vec<Pkt>,
    /// Per packet slot its flow and TCP flags (the packet's record holds neither), kept when
    /// a packet function or a tap needs them after the arrival ([`Self::keep_flows`]).
    slot_flows: Vec<(FlowKey, Option<u8>)>,
    keep_flows: bool,
    /// With the caller's ring as the link and processors: per packet slot its frame's bytes,
    /// from the moment a processor takes it out of its ingress queue (the allocations kept).
    held: Vec<Vec<u8>>,
    free: Vec<u32>,
    // Measurements.
    offered: Vec<u64>,
    delivered: Vec<u64>,
    delivered_bytes: u64,
    last_delivery: u64,
    drops: [u64; DROPS.len()],
    drops_by_service: Vec<u64>,
    /// Per-flow counters by row of the arrivals' `FlowIndex`, the flows past its exact table
    /// together, and per-service counters (docs/pipeline.md, "Flow and class counters").
    flows: Vec<RowCounts>,
    other_flows: RowCounts,
    classes: Vec<RowCounts>,
    /// Per service: ingress, processing, egress and end-to-end latency ([`STAGES`]), ns.
    hist: Vec<[crate::pipeline::Latency; 4]>,
    samples: Samples,
    error: Option<PipelineError>,
    trace: Option<Vec<Trace>>,
    trace_of: Vec<u32>,
    /// The taps on its ports ([`Pipeline::set_taps`]); `None`: none (boxed: one pointer
    /// when off).
    taps: Option<Box<tap::Taps>>,
}

#[derive(Default)]
struct Samples {
    t: Vec<f64>,
    ingress_in_use: Vec<f64>,
    processors: Vec<Vec<f64>>,
    /// Per service, packets offered and packets done late so far, at each sample.
    offered: Vec<Vec<f64>>,
    late: Vec<Vec<f64>>,
    heap_total: Vec<f64>,
    heap_max_core: u64,
    egress_backlog: Vec<f64>,
}

impl Pipeline {
    /// A mechanism refused a call at `now`: the first refusal is the run's error.
    fn fail(&mut self, now: u64, stage: &'static str, e: impl std::fmt::Display) {
        if self.error.is_none() {
            self.error = Some(PipelineError::Mechanism { at: now, stage, msg: e.to_string() });
        }
    }

    /// A queue-memory operation; `None` (the run failed) if the memory refused it.
    #[inline]
    fn qmem_op(&mut self, now: u64, q: u32, op: Op) -> Option<u64> {
        match self.qmem.op(now, q, op) {
            Ok(t) => Some(t),
            Err(e) => {
                self.fail(now, "queue memory", e);
                None
            }
        }
    }

    fn new_pkt(&mut self, p: Pkt) -> u32 {
        if let Some(i) = self.free.pop() {
            self.pkts[i as usize] = p;
            i
        } else {
            self.pkts.push(p);
            self.pkts.len() as u32 - 1
        }
    }

    /// The flow counters of `row`.
    #[inline]
    fn flow_counts(&mut self, row: u32) -> &mut RowCounts {
        row_counts(&mut self.flows, &mut self.other_flows, row)
    }

    /// Drops a packet of `len` bytes of flow row `row` (and service `service`, packet `id`) at
    /// `now`.
    fn drop_pkt(&mut self, now: u64, id: Option<u32>, service: Option<usize>, reason: usize, row: u32, len: u32) {
        self.drops[reason] += 1;
        self.tap_drop(now, id, reason, len);
        // The router's reasons are the indices of DROPS, which RowCounts is sized by.
        self.flow_counts(row).drop(reason, len).expect("a reason of DROPS");
        if let Some(s) = service {
            self.drops_by_service[s] += 1;
            self.classes[s].drop(reason, len).expect("a reason of DROPS");
        }
        if let Some(id) = id {
            self.release_bucket(now, id);
            self.free.push(id);
            if let Some(t) = &mut self.trace {
                t[self.trace_of[id as usize] as usize].drop = Some(DROPS[reason]);
            }
        }
    }

    /// `hash`: the key's [`crate::pipeline::flow_hash`] if the driver has it
    /// ([`Self::receive_frame_hashed`]).
    fn arrival(&mut self, a: Arrival, frame: Option<&[u8]>, hash: Option<u64>, fx: &mut Effects) -> Received {
        let (now, len) = (a.t, a.len);
        self.tap_arrival(&a);
        if a.service == UNCLASSIFIED {
            if let Some(t) = &mut self.trace {
                t.push(Trace {
                    arrival: now,
                    len,
                    iq: u32::MAX,
                    service: u16::MAX,
                    dispatch: 0,
                    done: 0,
                    delivered: None,
                    drop: Some(DROPS[0]),
                });
            }
            self.flow_counts(a.row).offer(len);
            self.drop_pkt(now, None, None, D_UNCLASSIFIED, a.row, len);
            return Received::Dropped(D_UNCLASSIFIED);
        }
        let s = a.service as usize;
        self.offered[s] += 1;
        let (mut eq, actual) = (a.eq, a.actual);
        let per_flow = self.buckets.is_some() && self.eq_base[s] != 0;
        // With processing, a flow holds its bucket from its packet's arrival; without, from the
        // packet's admission to its ingress queue (the queue its bucket shapes), below.
        if per_flow && !self.direct {
            match self.take_bucket(now, s, &a, hash) {
                Some(b) => eq = b,
                None => return Received::Refused,
            }
        }
        // Processing none: a packet larger than its bucket's cap could never conform under
        // wait-for-tokens (tbf drops it), and it is dropped before it takes ingress space; one
        // larger than the caller's ring's slots could never be handed over.
        let above_cap = self.direct
            && self.p.shaping.conformance == Conformance::WaitForTokens
            && self.shaped(eq)
            && self.p.shaping.wire_len(len) > self.cap[s];
        let oversize = self.link.oversize(len);
        if self.p.ingress == IngressKind::FqCodel && !above_cap && !oversize && !self.ingress.fits(len) {
            self.fq_overflow(now, fx);
        }
        let slot = (a.slot != NO_SLOT).then_some(a.slot);
        let iq = (!above_cap && !oversize).then(|| self.ingress.enqueue_with(&a.key, s, len, frame, slot)).transpose();
        self.flow_counts(a.row).offer(len);
        self.classes[s].offer(len);
        // Without processing, the packet has no bucket until it is admitted.
        let held = if per_flow && self.direct { NIL } else { eq };
        // A packet dropped here needs no record of its own unless it is traced.
        let early = match &iq {
            Ok(None) if oversize => Some(D_OVERSIZE),
            Ok(None) => Some(D_BUCKET),
            Ok(Some((Admit::Dropped(why), _))) => Some(ingress_drop(*why)),
            _ => None,
        };
        if let (Some(reason), None) = (early, &self.trace) {
            if held != NIL {
                self.release_bucket_of(now, s, held);
            }
            self.drop_pkt(now, None, Some(s), reason, a.row, len);
            return Received::Dropped(reason);
        }
        let pkt =
            Pkt { arrival: now, len, service: s as u16, eq: held, actual, next: NIL, row: a.row, ..Default::default() };
        let id = self.new_pkt(pkt);
        if let Some(aq) = &mut self.aqm {
            // A real frame's own ECN field says; a simulated packet's service.
            aq.arrived(id, frame.map_or(self.p.services[s].ecn, frame_ect));
        }
        if self.keep_flows {
            let i = id as usize;
            if self.slot_flows.len() <= i {
                self.slot_flows.resize(i + 1, (FlowKey::default(), None));
            }
            self.slot_flows[i] = (a.key, a.tcp_flags);
        }
        if let Some(t) = &mut self.trace {
            if self.trace_of.len() <= id as usize {
                self.trace_of.resize(id as usize + 1, 0);
            }
            self.trace_of[id as usize] = t.len() as u32;
            t.push(Trace {
                arrival: now,
                len,
                iq: u32::MAX,
                service: s as u16,
                dispatch: 0,
                done: 0,
                delivered: None,
                drop: None,
            });
        }
        let drop = |pipe: &mut Self, reason: usize| {
            pipe.drop_pkt(now, Some(id), Some(s), reason, a.row, len);
            Received::Dropped(reason)
        };
        let (iq, new_flow) = match iq {
            Err(e) => {
                self.fail(now, "ingress", e);
                return Received::Refused;
            }
            Ok(None) if oversize => return drop(self, D_OVERSIZE),
            Ok(None) => return drop(self, D_BUCKET),
            Ok(Some((Admit::Queued(q), new_flow))) => (q, new_flow),
            Ok(Some((Admit::Dropped(why), _))) => return drop(self, ingress_drop(why)),
        };
        self.pkts[id as usize].iq = iq.0;
        if let Some(t) = &mut self.trace {
            t[self.trace_of[id as usize] as usize].iq = iq.0;
        }
        if self.direct {
            if per_flow {
                // The shared queue (dqs's overflow, many flows) has one bucket of its own, past
                // the flows'; a flow's own queue is shaped by the flow's bucket, which the flow
                // holds while its queue holds packets: taken when the queue gets its first
                // packet, the same as its head's while it has one (released when it empties).
                let head = self.fifo[iq.index()].head;
                let b = if iq.0 == self.shared_iq {
                    self.eq_base[s] + self.p.shaping.flow_queues
                } else if head != NIL {
                    self.pkts[head as usize].eq
                } else {
                    match self.take_bucket(now, s, &a, hash) {
                        Some(b) => b,
                        None => return Received::Refused,
                    }
                };
                self.pkts[id as usize].eq = b;
            }
            self.direct_arrived(now, id, fx);
            return Received::Queued { new_flow };
        }
        let Some(t) = self.qmem_op(now, iq.0, Op::Enqueue) else { return Received::Refused };
        if t == now {
            self.visible(now, id, fx);
        } else {
            fx.at(Instant::from_nanos(t), C_QMEM, Ev::Visible(id));
        }
        Received::Queued { new_flow }
    }
}

/// The pipeline's drop reason for the ingress's.
#[inline]
fn ingress_drop(why: IngressDrop) -> usize {
    match why {
        IngressDrop::BufferFull => D_BUFFER,
        IngressDrop::QueueFull => D_QUEUE_FULL,
        IngressDrop::NoQueue => D_NO_QUEUE,
    }
}

/// The counters of flow row `row`: an exact row (made when first counted: rows are handed
/// out in order, a new one is the next) or, for [`FlowIndex::OTHER`], the flows past the table.
#[inline]
fn row_counts<'c>(flows: &'c mut Vec<RowCounts>, other: &'c mut RowCounts, row: u32) -> &'c mut RowCounts {
    if row == FlowIndex::OTHER {
        return other;
    }
    if row as usize >= flows.len() {
        flows.resize(row as usize + 1, Counts::default());
    }
    &mut flows[row as usize]
}

/// The pipeline's interface (see the module documentation).
impl Pipeline {
    /// A batch of classified arrivals, each at its own time (`Arrival::t`), in time order and
    /// not before any `now` given before.
    pub fn receive(&mut self, batch: &[Arrival], fx: &mut Effects) {
        for &a in batch {
            if self.error.is_some() {
                return;
            }
            self.arrival(a, None, None, fx);
        }
        if let Some(a) = batch.last() {
            self.debug_check(a.t);
        }
    }

    /// One arrival with its frame's bytes, kept by the ingress until [`Self::transmit`] hands
    /// them to the caller's ring (a table with `store_payload`): live's
    /// forwarder. Says what became of it.
    pub fn receive_frame(&mut self, a: Arrival, frame: &[u8], fx: &mut Effects) -> Received {
        self.receive_frame_with(a, frame, None, fx)
    }

    /// [`Self::receive_frame`] of an arrival whose key's [`crate::pipeline::flow_hash`] the
    /// driver has (`npqos live`'s look-ahead hashed it for the flow counters): the per-flow
    /// buckets do not hash the key again. Any other hash corrupts the buckets' index (checked
    /// in debug builds).
    pub fn receive_frame_hashed(&mut self, a: Arrival, frame: &[u8], hash: u64, fx: &mut Effects) -> Received {
        self.receive_frame_with(a, frame, Some(hash), fx)
    }

    #[inline]
    fn receive_frame_with(&mut self, a: Arrival, frame: &[u8], hash: Option<u64>, fx: &mut Effects) -> Received {
        if self.error.is_some() {
            return Received::Refused;
        }
        let got = self.arrival(a, Some(frame), hash, fx);
        self.debug_check(a.t);
        got
    }

    /// A timed effect given earlier has come: its time is `now`.
    pub fn handle(&mut self, now: Instant, ev: Ev, fx: &mut Effects) {
        let t = now.as_nanos();
        match ev {
            Ev::ProcDone(p) => self.proc_done(t, p, fx),
            Ev::SwitchDone(p) => {
                if let Some(pr) = self.processing.as_mut() {
                    let r = pr.switch_done(now, p, &self.pkts, &mut self.steps);
                    self.carry_out(t, r, fx);
                }
            }
            Ev::Visible(id) => self.visible(t, id, fx),
            Ev::EgressVisible(id) => self.egress_visible(t, id, fx),
            Ev::Reenable(b) => {
                let q = if self.direct { self.bucket_queue[b as usize] } else { b };
                let head = self.fifo.get(q as usize).map_or(NIL, |f| f.head);
                // The queue holds packets of this bucket (without processing, the queue may have
                // passed to another flow since).
                let held = head != NIL && self.pkts[head as usize].eq == b;
                match self.egress.poll_queue(now, QueueId(q), QueueId(b), held) {
                    Ok(true) => self.link_try(t, fx),
                    Ok(false) => {}
                    Err(e) => self.fail(t, EGRESS, e),
                }
            }
            Ev::Sample => self.sample(t, fx),
        }
        self.debug_check(t);
    }

    /// The pipeline's next deadline and its class: the earliest of the link's next
    /// transmission start ([`C_LINK`]), the allocator's timer ([`C_TIMER`]) and the event
    /// shaper's wake-up ([`C_SHAPER`]); at one instant the lowest class. It changes only in
    /// [`Self::receive`], [`Self::handle`] and [`Self::wake`] (a packet picked for the link, a
    /// queue throttled or re-enabled, a processor served).
    #[inline]
    pub fn next_wakeup(&self) -> Option<(Instant, u8)> {
        let mut best = (u64::MAX, u8::MAX);
        if let Some(t) = self.link.next_start() {
            best = best.min((t, C_LINK));
        }
        if let Some(t) = self.shaper_wake {
            best = best.min((t.as_nanos(), C_SHAPER));
        }
        if let Some(t) = self.processing.as_ref().and_then(Processing::next_wakeup) {
            best = best.min((t.as_nanos(), C_TIMER));
        }
        (best.1 != u8::MAX).then(|| (Instant::from_nanos(best.0), best.1))
    }

    /// The deadline [`Self::next_wakeup`] gave, at `now`: the lowest class due runs (one of
    /// them; the caller asks again). Calling it before a deadline does nothing.
    pub fn wake(&mut self, now: Instant, fx: &mut Effects) {
        self.wake_due(now, fx);
        self.debug_check(now.as_nanos());
    }

    fn wake_due(&mut self, now: Instant, fx: &mut Effects) {
        let at = |x: Option<Instant>| x.is_some_and(|t| t <= now);
        if let Some((t, id)) = self.link.start_due(now.as_nanos()) {
            return self.tx_start(t, id, fx);
        }
        if let Some(pr) = self.processing.as_mut().filter(|pr| at(pr.next_wakeup())) {
            let r = pr.timer(now, &self.pkts, &mut self.steps);
            return self.carry_out(now.as_nanos(), r, fx);
        }
        if at(self.shaper_wake) {
            let (fifo, pkts, bucket_queue, direct) = (&self.fifo, &self.pkts, &self.bucket_queue, self.direct);
            // The queue a re-enabled bucket shapes: the output queue of its number, or with
            // processing none the ingress queue that holds its flow's packets, if one does.
            let queue_of = |b: QueueId| {
                if !direct {
                    return Some(b);
                }
                let q = bucket_queue[b.index()];
                let head = fifo.get(q as usize).map_or(NIL, |f| f.head);
                (head != NIL && pkts[head as usize].eq == b.0).then_some(QueueId(q))
            };
            let woken = match self.egress.shared_buckets() {
                // Every queue waiting on a re-enabled bucket whose head it shapes.
                true => self.egress.wake_shared(now, |q, b| {
                    let head = fifo[q.index()].head;
                    head != NIL && pkts[head as usize].eq == b.0
                }),
                // A queue re-enabled with a packet is about to be picked: start loading its head
                // packet now, so that the heads of the queues one wake-up re-enables load together.
                false => self.egress.wake(now, queue_of, |q| {
                    let head = fifo[q.index()].head;
                    crate::hint::prefetch(pkts, head as usize);
                    head != NIL
                }),
            };
            match woken {
                Ok(woken) => self.wakeups += (woken > 0) as u64,
                Err(e) => return self.fail(now.as_nanos(), EGRESS, e),
            }
            self.shaper_wake = self.egress.next_wakeup();
            self.link_try(now.as_nanos(), fx);
        }
    }

    /// The first mechanism's refusal, if any: the pipeline has stopped.
    #[inline]
    pub fn error(&self) -> Option<&PipelineError> {
        self.error.as_ref()
    }
    pub fn take_error(&mut self) -> Option<PipelineError> {
        self.error.take()
    }

    /// When the run ends: the end of arrivals plus the drain, ns.
    pub fn until(&self) -> u64 {
        self.until
    }
    /// When the last delivered packet's last bit left the link, ns.
    pub fn last_delivery(&self) -> u64 {
        self.last_delivery
    }
    /// The interval of the time series, ns (0: none); the first sample is the caller's to
    /// give ([`Ev::Sample`] at this time, class [`C_SAMPLE`]), each one gives the next.
    pub fn sample_every(&self) -> u64 {
        self.p.sample_every.as_nanos()
    }
}

#[cfg(test)]
mod tests;
