//! Stages 6 and 7 of the simulated pipeline: the egress FIFOs behind their buckets, and the link
//! that picks among the eligible queues by DRR and serializes the packets.

use super::*;

impl Sim<'_> {
    pub(super) fn disabled(&self, q: u32) -> bool {
        match &self.shaper {
            Shaper::None => false,
            Shaper::Event(e) => e.is_disabled(QueueId(q)),
            Shaper::Periodic(p) => p.is_disabled(QueueId(q)),
        }
    }

    pub(super) fn shaped(&self, q: u32) -> bool {
        match self.shaped.get(q as usize) {
            Some(&s) => s,
            None => self.flow_queues_shaped,
        }
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
    }

    pub(super) fn egress_visible(&mut self, now: u64, id: u32, engine: &mut Engine<Ev>) {
        let q = self.pkts[id as usize].eq;
        self.fifo_push(q, id);
        if !self.disabled(q) {
            if let Err(e) = self.drr.enqueued(QueueId(q)) {
                return self.fail(now, "link (DRR)", e, engine);
            }
        }
        self.link_try(now, engine);
    }

    /// Picks packets for the link while fewer than `link.ahead` wait to start (their
    /// descriptor dequeues overlap the current transmission; with one, a dequeue's latency
    /// bounds the packet rate).
    pub(super) fn link_try(&mut self, now: u64, engine: &mut Engine<Ev>) {
        let nowi = Instant::from_nanos(now);
        loop {
            if self.tx.len() as u32 >= self.p.link_ahead {
                return;
            }
            let (pkts, fifo) = (&self.pkts, &self.fifo);
            let Some(q) = self.drr.select(|q| pkts[fifo[q.index()].head as usize].len as u64) else { return };
            let id = self.fifo[q.index()].head;
            // The next queues of the round: start loading their state (the queue after next)
            // and their head packet (next, whose FIFO was loaded one pick ago).
            if let Some(q2) = self.drr.upcoming(2) {
                self.prefetch_egress(q2.0);
            }
            if let Some(q1) = self.drr.upcoming(1) {
                npqos_core::hint::prefetch(&self.pkts, self.fifo[q1.index()].head as usize);
            }
            let pk = self.pkts[id as usize];
            let mut leave = false;
            if self.shaped(q.0) {
                let core = CoreId(pk.core as u32);
                let wait = self.p.shaping.conformance == Conformance::WaitForTokens;
                let d = match &mut self.shaper {
                    Shaper::None => Ok(Decision::Eligible),
                    Shaper::Event(e) if wait => e.try_send_on(core, q, pk.len as u64, nowi, &mut ()),
                    Shaper::Event(e) => e.on_send_on(core, q, pk.len as u64, nowi, &mut ()),
                    Shaper::Periodic(p) if wait => p.try_send(q, pk.len as u64, nowi),
                    Shaper::Periodic(p) => p.on_send(q, pk.len as u64, nowi),
                };
                let d = match d {
                    Ok(d) => d,
                    Err(e) => return self.fail(now, "egress shaping", e, engine),
                };
                if let Decision::Throttled { until } = d {
                    leave = true;
                    self.flow_counts(pk.row).overlimits += 1;
                    self.classes[pk.service as usize].overlimits += 1;
                    match &self.shaper {
                        Shaper::Periodic(_) => {
                            engine.schedule_class(until.max(nowi), C_REENABLE, Ev::Reenable(q.0));
                        }
                        _ => self.shaper_wake = self.shaper_next(),
                    }
                    if wait {
                        if let Err(e) = self.drr.dequeued(q, true) {
                            return self.fail(now, "link (DRR)", e, engine);
                        }
                        continue;
                    }
                }
                // An eligible send leaves the heaps as they were: the wake-up time stands.
            }
            self.fifo_pop(q.0);
            self.release_bucket(now, id);
            let empty = self.fifo[q.index()].head == NIL;
            if let Err(e) = self.drr.dequeued(q, empty || leave) {
                return self.fail(now, "link (DRR)", e, engine);
            }
            // Offered to the link when its descriptor is dequeued; it starts when the link is
            // free (the serializer places finish times from the busy period's cumulative bits).
            let Some(t) = self.qmem_op(now, self.nqi + q.0, Op::Dequeue, engine) else { return };
            let start = t.max(self.link.free_at().as_nanos());
            self.pkts[id as usize].left = self.link.send(Instant::from_nanos(t), pk.len as u64).as_nanos();
            debug_assert!(self.tx.back().is_none_or(|&(b, _)| b < start), "starts increase");
            self.tx.push_back((start, id));
        }
    }

    /// A hint: output queue `q`'s FIFO, bucket, DRR word and descriptor are needed soon.
    #[inline]
    pub(super) fn prefetch_egress(&self, q: u32) {
        npqos_core::hint::prefetch(&self.fifo, q as usize);
        self.drr.prefetch(QueueId(q));
        self.qmem.prefetch(self.nqi + q);
        if let Shaper::Event(e) = &self.shaper {
            e.prefetch(QueueId(q));
        }
        // Per-flow queues follow the services' own, `flow_queues` per per-flow service.
        if let Some(fb) = &self.buckets {
            let first = self.eq_base.len() as u32;
            if q >= first {
                fb.prefetch((q - first) % fb.buckets());
            }
        }
    }

    pub(super) fn shaper_next(&self) -> Option<Instant> {
        match &self.shaper {
            Shaper::Event(e) => e.next_wakeup(),
            _ => None,
        }
    }

    /// Output queue `q` may send again: back in the link's round if it holds packets.
    pub(super) fn reenabled(&mut self, now: u64, q: QueueId, engine: &mut Engine<Ev>) {
        if self.fifo[q.index()].head != NIL {
            if let Err(e) = self.drr.enqueued(q) {
                self.fail(now, "link (DRR)", e, engine);
            }
        }
    }

    pub(super) fn tx_start(&mut self, now: u64, id: u32, engine: &mut Engine<Ev>) {
        let pk = self.pkts[id as usize];
        self.egress_bytes -= pk.len as u64;
        self.hist[pk.service as usize][2].saturating_record((now - pk.done).max(1));
        // Delivered when its last bit leaves, if that is within the run; otherwise it stays
        // in flight. (An interrupted run counts the packet on the wire as delivered.)
        if pk.left <= self.until {
            self.delivered(pk.left, id);
        }
        self.link_try(now, engine);
    }

    /// Packet `id`'s last bit leaves the link at `at`.
    pub(super) fn delivered(&mut self, at: u64, id: u32) {
        let now = at;
        let pk = self.pkts[id as usize];
        let s = pk.service as usize;
        self.delivered[s] += 1;
        self.delivered_bytes += pk.len as u64;
        self.last_delivery = self.last_delivery.max(now);
        self.hist[s][3].saturating_record((now - pk.arrival).max(1));
        self.flow_counts(pk.row).send(pk.len, now - pk.arrival);
        self.classes[s].send(pk.len, now - pk.arrival);
        if let Some(t) = &mut self.trace {
            t[self.trace_of[id as usize] as usize].delivered = Some(now);
        }
        self.free.push(id);
    }
}
