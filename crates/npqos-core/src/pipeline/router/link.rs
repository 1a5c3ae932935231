//! Stages 6 and 7 of the simulated pipeline: the egress FIFOs behind their buckets, and the link
//! that serializes the packets. Which packet goes next (the shaper and the link's DRR round) is
//! the pipeline's egress element ([`Egress`]); the FIFOs, the packets and the serializer are
//! here, and [`RouterQueues`] shows the FIFOs to the element.

use super::*;
use crate::pipeline::{EgressQueues, Pick};

/// The output FIFOs as the egress element sees them, with what a throttled queue changes here:
/// its head packet's flow and class count an overlimit, and under the periodic shaper the
/// queue's fill is scheduled as an event.
struct RouterQueues<'s, 'e> {
    pkts: &'s [Pkt],
    fifo: &'s mut [Fifo],
    /// CoDel over the FIFOs (`shaping.aqm`), and whether they are the ingress queues.
    aqm: Option<&'s mut Aqm>,
    direct: bool,
    shaped: &'s [bool],
    flow_queues_shaped: bool,
    flows: &'s mut Vec<RowCounts>,
    other_flows: &'s mut RowCounts,
    classes: &'s mut [RowCounts],
    fx: &'e mut Effects,
    now: Instant,
    periodic: bool,
    /// A queue joined the event-driven shaper's heaps: its wake-up time may have moved.
    event_throttled: bool,
}

impl RouterQueues<'_, '_> {
    #[inline]
    fn head(&self, q: QueueId) -> &Pkt {
        &self.pkts[self.fifo[q.index()].head as usize]
    }
}

impl EgressQueues for RouterQueues<'_, '_> {
    #[inline]
    fn head_len(&self, q: QueueId) -> u64 {
        self.head(q).len as u64
    }
    /// The head packet's bucket: its output queue's number (the output queues are the
    /// buckets), or with processing none its flow's (an ingress queue holds one flow).
    #[inline]
    fn bucket(&self, q: QueueId) -> Option<QueueId> {
        let b = self.head(q).eq;
        shaped(self.shaped, self.flow_queues_shaped, b).then_some(QueueId(b))
    }
    #[inline]
    fn core(&self, q: QueueId) -> CoreId {
        CoreId(self.head(q).core as u32)
    }
    #[inline]
    fn has_aqm(&self) -> bool {
        self.aqm.is_some()
    }
    /// CoDel's dequeue on `q`'s FIFO first (docs/codel.md): the packets it drops leave the
    /// FIFO here and are accounted after the pick.
    #[inline]
    fn aqm_head_len(&mut self, q: QueueId, now: Instant) -> Option<u64> {
        match self.aqm.as_deref_mut() {
            Some(a) => a.head_len(self.pkts, self.fifo, q, now.as_nanos(), self.direct),
            None => Some(self.head_len(q)),
        }
    }
    fn throttled(&mut self, q: QueueId, until: Instant, _sent: bool) {
        let (row, service) = (self.head(q).row, self.head(q).service as usize);
        row_counts(self.flows, self.other_flows, row).overlimits += 1;
        self.classes[service].overlimits += 1;
        if self.periodic {
            self.fx.at(until.max(self.now), C_REENABLE, Ev::Reenable(self.head(q).eq));
        } else {
            self.event_throttled = true;
        }
    }
}

/// Whether output queue `q` is shaped: a service's own queue as its rate says, every per-flow
/// bucket (the queues after them) unless `shaper = "none"`.
#[inline]
fn shaped(own: &[bool], flow_queues_shaped: bool, q: u32) -> bool {
    match own.get(q as usize) {
        Some(&s) => s,
        None => flow_queues_shaped,
    }
}

impl Pipeline {
    pub(super) fn shaped(&self, q: u32) -> bool {
        shaped(&self.shaped, self.flow_queues_shaped, q)
    }

    pub(super) fn fifo_push(&mut self, q: u32, id: u32) {
        self.pkts[id as usize].next = NIL;
        let f = &mut self.fifo[q as usize];
        if f.head == NIL {
            f.head = id;
        } else {
            self.pkts[f.tail as usize].next = id;
        }
        f.tail = id;
        self.egress_backlog += 1;
    }

    pub(super) fn fifo_pop(&mut self, q: u32) {
        let f = &mut self.fifo[q as usize];
        f.head = self.pkts[f.head as usize].next;
        if f.head == NIL {
            f.tail = NIL;
        }
        self.egress_backlog -= 1;
        self.egress_ports.output += 1;
    }

    /// Processing none: packet `id` joined its ingress queue at `now`, which is the queue its
    /// bucket shapes.
    pub(super) fn direct_arrived(&mut self, now: u64, id: u32, fx: &mut Effects) {
        let pk = self.pkts[id as usize];
        self.egress_ports.input += 1;
        self.egress_bytes += pk.len as u64;
        if let Some(q) = self.bucket_queue.get_mut(pk.eq as usize) {
            *q = pk.iq;
        }
        self.fifo_push(pk.iq, id);
        if let Err(e) = self.egress.arrived(QueueId(pk.iq), Some(QueueId(pk.eq))) {
            return self.fail(now, EGRESS, e);
        }
        self.link_try(now, fx);
    }

    pub(super) fn egress_visible(&mut self, now: u64, id: u32, fx: &mut Effects) {
        let q = self.pkts[id as usize].eq;
        self.egress_pending -= 1;
        self.fifo_push(q, id);
        if let Err(e) = self.egress.arrived(QueueId(q), Some(QueueId(q))) {
            return self.fail(now, EGRESS, e);
        }
        self.link_try(now, fx);
    }

    /// The next packet for the link at `now`: the egress element's pick over the shaped
    /// queues (the output queues, or with processing none the ingress queues). `None`: nothing
    /// may go, or the element refused (the run failed).
    #[inline]
    fn pick(&mut self, now: Instant, fx: &mut Effects) -> Option<Pick> {
        let mut queues = RouterQueues {
            pkts: &self.pkts,
            fifo: &mut self.fifo,
            aqm: self.aqm.as_deref_mut(),
            direct: self.direct,
            shaped: &self.shaped,
            flow_queues_shaped: self.flow_queues_shaped,
            flows: &mut self.flows,
            other_flows: &mut self.other_flows,
            classes: &mut self.classes,
            fx,
            now,
            periodic: matches!(self.egress.shaping(), Shaping::Periodic(_)),
            event_throttled: false,
        };
        let pick = self.egress.pick(now, &mut queues);
        if queues.event_throttled {
            // A throttle moved the heaps; an eligible send leaves them as they were.
            self.shaper_wake = self.egress.next_wakeup();
        }
        self.aqm_dropped(now.as_nanos());
        match pick {
            Ok(p) => p,
            Err(e) => {
                self.fail(now.as_nanos(), EGRESS, e);
                None
            }
        }
    }

    /// Picks packets for the link while fewer than `link.ahead` wait to start (their
    /// descriptor dequeues overlap the current transmission; with one, a dequeue's latency
    /// bounds the packet rate).
    pub(super) fn link_try(&mut self, now: u64, fx: &mut Effects) {
        if self.link.is_ring() {
            return; // the caller's ring takes packets when it asks (transmit)
        }
        let nowi = Instant::from_nanos(now);
        loop {
            if !self.link.has_room() {
                return;
            }
            let Some(pick) = self.pick(nowi, fx) else { return };
            let q = pick.queue;
            let id = self.fifo[q.index()].head;
            // The next queues of the round: start loading their state (the queue after next)
            // and their head packet (next, whose FIFO was loaded one pick ago).
            let drr = self.egress.drr();
            if let Some(q2) = drr.upcoming(2) {
                self.prefetch_egress(q2.0);
            }
            if let Some(q1) = drr.upcoming(1) {
                crate::hint::prefetch(&self.pkts, self.fifo[q1.index()].head as usize);
            }
            let pk = self.pkts[id as usize];
            self.fifo_pop(q.0);
            if self.direct && !self.left_ingress(now, id) {
                return;
            }
            let empty = self.fifo[q.index()].head == NIL;
            // With processing none a flow holds its bucket while its ingress queue holds packets.
            if !self.direct || empty {
                self.release_bucket(now, id);
            }
            if let Err(e) = self.egress.sent(pick, empty) {
                return self.fail(now, EGRESS, e);
            }
            if empty {
                self.egress.emptied(q, QueueId(pk.eq));
            }
            // Offered to the link when its descriptor is dequeued; it starts when the link is
            // free (the serializer places finish times from the busy period's cumulative bits).
            let t = match self.direct {
                true => now,
                false => match self.qmem_op(now, self.nqi + q.0, Op::Dequeue) {
                    Some(t) => t,
                    None => return,
                },
            };
            self.pkts[id as usize].left = self.link.send(t, id, pk.len);
        }
    }

    /// The link as the caller's transmit ring: up to `room` frames at `now`, each handed to
    /// `emit` as it leaves its queue, by the same pick as the serializer's link (the shaper
    /// and the DRR round over the ingress queues, or with processors the output queues); a frame is delivered when it is
    /// handed over, with its flow's row of the flow counters. Returns how many. Nothing when
    /// the pipeline has stopped.
    pub fn transmit(&mut self, now: Instant, room: usize, fx: &mut Effects, mut emit: impl FnMut(&[u8], u32)) -> usize {
        let t = now.as_nanos();
        let mut sent = 0;
        while sent < room && self.error.is_none() {
            let Some(pick) = self.pick(now, fx) else { break };
            let q = pick.queue;
            let id = self.fifo[q.index()].head;
            let pk = self.pkts[id as usize];
            self.fifo_pop(q.0);
            if !self.direct {
                self.ring_processed(t, pick, id, &mut emit);
                sent += 1;
                continue;
            }
            let mut frame = self.link.take_frame();
            match self.ingress.dequeue_with(q, Some(&mut frame)) {
                Ok(Some(l)) if l.len == pk.len => {}
                Ok(_) => self.fail(t, "ingress", "the packet picked is not its queue's head"),
                Err(e) => self.fail(t, "ingress", e),
            }
            if self.error.is_some() {
                self.link.put_frame(frame);
                break;
            }
            let p = &mut self.pkts[id as usize];
            (p.dispatch, p.done) = (t, t);
            // Its ingress and end-to-end times are one, its egress time none: only the
            // end-to-end histogram is recorded per frame (`delivered`), and the outcome fills
            // the other two from it (`Pipeline::ring_stages`).
            let empty = self.fifo[q.index()].head == NIL;
            // A flow holds its bucket while its ingress queue holds packets.
            if empty {
                self.release_bucket(t, id);
            }
            if let Err(e) = self.egress.sent(pick, empty) {
                self.fail(t, EGRESS, e);
            }
            if empty {
                self.egress.emptied(q, QueueId(pk.eq));
            }
            self.egress_bytes -= pk.len as u64;
            if self.aqm_marked(id) {
                set_ce(&mut frame);
            }
            self.tap_egress(t, id);
            self.delivered(t, id);
            self.link.handed();
            emit(&frame, pk.row);
            self.link.put_frame(frame);
            sent += 1;
        }
        self.debug_check(t);
        sent
    }

    /// With processors: packet `id`, picked for the ring at `now` from output queue
    /// `pick.queue` (popped), leaves with the frame a processor took out of its ingress queue.
    fn ring_processed(&mut self, now: u64, pick: Pick, id: u32, emit: &mut impl FnMut(&[u8], u32)) {
        let q = pick.queue;
        let pk = self.pkts[id as usize];
        let empty = self.fifo[q.index()].head == NIL;
        self.release_bucket(now, id);
        if let Err(e) = self.egress.sent(pick, empty) {
            return self.fail(now, EGRESS, e);
        }
        if empty {
            self.egress.emptied(q, QueueId(pk.eq));
        }
        self.egress_bytes -= pk.len as u64;
        self.hist[pk.service as usize][2].record((now - pk.done).max(1));
        self.tap_egress(now, id);
        self.delivered(now, id);
        self.link.handed();
        if self.aqm_marked(id) {
            set_ce(&mut self.held[id as usize]);
        }
        emit(&self.held[id as usize], pk.row);
    }

    /// Processing none: packet `id`, picked for the link at `now`, leaves its ingress queue
    /// (its time there is the ingress stage's; it has no processing stage). `false`: the
    /// ingress refused, the run failed.
    fn left_ingress(&mut self, now: u64, id: u32) -> bool {
        let pk = &mut self.pkts[id as usize];
        (pk.dispatch, pk.done) = (now, now);
        let (iq, len, arrival, s) = (pk.iq, pk.len, pk.arrival, pk.service as usize);
        match self.ingress.dequeue(QueueId(iq)) {
            Ok(Some(l)) if l == len => {}
            Ok(_) => {
                self.fail(now, "ingress", "the packet picked is not its queue's head");
                return false;
            }
            Err(e) => {
                self.fail(now, "ingress", e);
                return false;
            }
        }
        self.hist[s][0].record((now - arrival).max(1));
        if let Some(t) = &mut self.trace {
            let x = &mut t[self.trace_of[id as usize] as usize];
            (x.dispatch, x.done) = (now, now);
        }
        true
    }

    /// A hint: output queue `q`'s FIFO, bucket, DRR word, descriptor and bucket owner are
    /// needed soon.
    #[inline]
    pub(super) fn prefetch_egress(&self, q: u32) {
        crate::hint::prefetch(&self.fifo, q as usize);
        self.egress.prefetch(QueueId(q), QueueId(q));
        self.qmem.prefetch(self.nqi + q);
        // Per-flow queues follow the services' own, `flow_queues` per per-flow service.
        if let Some(fb) = &self.buckets {
            let first = self.eq_base.len() as u32;
            if q >= first {
                fb.prefetch((q - first) % fb.buckets());
            }
        }
    }

    pub(super) fn tx_start(&mut self, now: u64, id: u32, fx: &mut Effects) {
        let pk = self.pkts[id as usize];
        self.egress_bytes -= pk.len as u64;
        self.hist[pk.service as usize][2].record((now - pk.done).max(1));
        // Delivered when its last bit leaves, if that is within the run; otherwise it stays
        // in flight. (An interrupted run counts the packet on the wire as delivered.)
        if pk.left <= self.until {
            self.tap_egress(now, id);
            self.delivered(pk.left, id);
        }
        self.link_try(now, fx);
    }

    /// Packet `id`'s last bit leaves the link at `at`.
    pub(super) fn delivered(&mut self, at: u64, id: u32) {
        let now = at;
        let pk = self.pkts[id as usize];
        let s = pk.service as usize;
        self.delivered[s] += 1;
        self.delivered_bytes += pk.len as u64;
        self.last_delivery = self.last_delivery.max(now);
        self.hist[s][3].record((now - pk.arrival).max(1));
        self.flow_counts(pk.row).send(pk.len, now - pk.arrival);
        self.classes[s].send(pk.len, now - pk.arrival);
        if let Some(t) = &mut self.trace {
            t[self.trace_of[id as usize] as usize].delivered = Some(now);
        }
        self.free.push(id);
    }
}

/// Stage 7, the link element: the serializer and the packets picked for it whose transmission
/// has not started, or the caller's transmit ring ([`Pipeline::transmit`]); conservation at its
/// ports (in: packets picked; out: transmissions started, or frames handed over).
pub(super) struct Link {
    serializer: Serializer,
    /// Packets picked for the link whose transmission has not started, with their start
    /// times: a source, since the link starts packets in the order it picks them, each after
    /// the previous one's last bit (times that never decrease). Their delivery, when the last
    /// bit leaves, is counted at the start: nothing after it depends on the packet.
    tx: VecDeque<(u64, u32)>,
    /// Picks that may wait to start (`link.ahead`): their descriptor dequeues overlap the
    /// current transmission.
    ahead: u32,
    /// The link is the caller's transmit ring, whose slots hold frames of at most this many
    /// bytes: nothing is picked until the caller asks, and a frame leaves when it is handed
    /// over.
    ring: Option<u32>,
    /// The frame [`Pipeline::transmit`] hands over.
    frame: Vec<u8>,
    ports: Ports<0>,
}

impl Link {
    pub(super) fn new(rate: crate::rate::Rate, ahead: u32) -> Result<Self, PipelineError> {
        Ok(Link {
            serializer: Serializer::new(rate).map_err(|e| PipelineError::Config(e.to_string()))?,
            tx: VecDeque::new(),
            ahead,
            ring: None,
            frame: Vec::new(),
            ports: Ports::default(),
        })
    }

    /// The caller's transmit ring as the link, its slots `max_frame` bytes.
    pub(super) fn use_ring(&mut self, max_frame: u32) {
        self.ring = Some(max_frame);
    }
    #[inline]
    pub(super) fn is_ring(&self) -> bool {
        self.ring.is_some()
    }
    /// A frame of `len` bytes could never be handed over (larger than the ring's slots).
    #[inline]
    pub(super) fn oversize(&self, len: u32) -> bool {
        self.ring.is_some_and(|m| len > m)
    }
    /// Fewer than `ahead` picks wait to start.
    #[inline]
    pub(super) fn has_room(&self) -> bool {
        (self.tx.len() as u32) < self.ahead
    }

    /// Packet `id` of `len` bytes, its descriptor dequeued at `t`: it starts when the link is
    /// free (the serializer places finish times from the busy period's cumulative bits).
    /// Returns when its last bit leaves.
    #[inline]
    pub(super) fn send(&mut self, t: u64, id: u32, len: u32) -> u64 {
        let start = t.max(self.serializer.free_at().as_nanos());
        let left = self.serializer.send(Instant::from_nanos(t), len as u64).as_nanos();
        self.ports.input += 1;
        // Starts never decrease; two may be equal when a link so fast that a packet takes
        // under a nanosecond rounds its transmission to none.
        debug_assert!(self.tx.back().is_none_or(|&(b, _)| b <= start), "starts never decrease");
        self.tx.push_back((start, id));
        left
    }

    /// The next transmission start, ns.
    #[inline]
    pub(super) fn next_start(&self) -> Option<u64> {
        self.tx.front().map(|x| x.0)
    }

    /// The transmission due at `now`, if any: its start and its packet.
    #[inline]
    pub(super) fn start_due(&mut self, now: u64) -> Option<(u64, u32)> {
        let x = self.tx.front().filter(|x| x.0 <= now).copied()?;
        self.tx.pop_front();
        self.ports.output += 1;
        Some(x)
    }

    /// The ring is the link: a frame is in and out of it when it is handed over.
    #[inline]
    pub(super) fn handed(&mut self) {
        self.ports.input += 1;
        self.ports.output += 1;
    }

    #[inline]
    pub(super) fn take_frame(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.frame)
    }
    #[inline]
    pub(super) fn put_frame(&mut self, frame: Vec<u8>) {
        self.frame = frame;
    }

    /// Conservation at the link's ports: what it holds is the picks not started.
    pub(super) fn check(&self) -> Result<(), ConservationError> {
        self.ports.check("link", self.tx.len() as u64)
    }
}
