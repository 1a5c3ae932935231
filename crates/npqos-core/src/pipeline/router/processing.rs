//! Stage 4: processing. A packet visible in its ingress queue is offered to its service's
//! scheduler (FCFS, DRR over the service's ingress queues, or a fair queue on predicted costs)
//! and the processors' allocator (an everest policy), or to LAP; a processor served takes the
//! scheduler's pick, runs it for its actual time and hands it on to the queue memory and the
//! egress. With processing none (live's pipeline) nothing here runs.

use super::*;

pub(super) enum Within {
    Fifo(Vec<VecDeque<u32>>),
    Fair(Vec<FairQueue>),
    /// Per service a DRR over the ingress queues; per ingress queue its packets.
    Drr(Vec<Drr>, Vec<VecDeque<u32>>),
}

/// LAP over the services (`Allocation::Lap`).
pub(super) struct Lap {
    pub(super) sched: LapScheduler,
    pub(super) idle: Vec<bool>,
    /// Enqueue order (LAP's packet ids increase with it): id = seq << 32 | packet slot.
    pub(super) seq: u64,
    /// Dispatches to a processor whose cache held another service (each paid t_sw).
    pub(super) cold: u64,
}

impl Pipeline {
    pub(super) fn visible(&mut self, now: u64, id: u32, fx: &mut Effects) {
        self.proc_ports.input += 1;
        let pk = self.pkts[id as usize];
        let s = pk.service as usize;
        if let Some(l) = &mut self.lap {
            l.seq += 1;
            let est = self.p.services[s].est_ns(pk.len);
            let x = LapPacket { id: (l.seq << 32) | id as u64, app: AppId(s as u32), est };
            if let Err(e) = l.sched.enqueue(x) {
                return self.fail(now, "processing (lap)", e);
            }
            // An idle processor, one whose cache holds the service first.
            let idle = |p: &usize| l.idle[*p];
            let warm =
                (0..l.idle.len()).filter(idle).find(|&p| l.sched.cache(ProcessorId(p as u32)) == Some(AppId(s as u32)));
            if let Some(p) = warm.or_else(|| (0..l.idle.len()).find(idle)) {
                self.lap_dispatch(now, p as u32, fx);
            }
            return;
        }
        match &mut self.within {
            Within::Fifo(q) => q[s].push_back(id),
            Within::Drr(d, q) => {
                q[pk.iq as usize].push_back(id);
                if let Err(e) = d[s].enqueued(QueueId(pk.iq)) {
                    return self.fail(now, "processing (drr)", e);
                }
            }
            Within::Fair(f) => {
                if let Err(e) =
                    f[s].enqueue(Instant::from_nanos(now), fq_packet(id, &pk, self.p.services[s].est_ns(pk.len)))
                {
                    return self.fail(now, "processing (fair queue)", e);
                }
            }
        }
        match self.alloc.arrival(Instant::from_nanos(now), ServiceId(s as u32), &mut self.actions) {
            Ok(_) => self.apply(now, fx),
            Err(e) => self.fail(now, "processing (allocator)", e),
        }
    }

    pub(super) fn apply(&mut self, now: u64, fx: &mut Effects) {
        let mut actions = std::mem::take(&mut self.actions);
        for a in actions.drain(..) {
            match a {
                Action::Serve { proc, service } => {
                    let s = service.index();
                    let id = match &mut self.within {
                        Within::Fifo(q) => q[s].pop_front(),
                        Within::Drr(d, q) => match d[s].select(|x| self.pkts[q[x.index()][0] as usize].len as u64) {
                            None => None,
                            Some(x) => {
                                let id = q[x.index()].pop_front().expect("a queue in the round holds packets");
                                if let Err(e) = d[s].dequeued(x, q[x.index()].is_empty()) {
                                    return self.fail(now, "processing (DRR)", e);
                                }
                                Some(id)
                            }
                        },
                        Within::Fair(f) => match f[s].dequeue(Instant::from_nanos(now)) {
                            Ok(d) => d.map(|d| d.packet.id as u32),
                            Err(e) => return self.fail(now, "processing (fair queue)", e),
                        },
                    };
                    let Some(id) = id else {
                        return self.fail(now, "processing", "the allocator served an empty service");
                    };
                    self.start(now, proc.0, id, 0, fx);
                }
                Action::Switch { proc, .. } => {
                    fx.at(Instant::from_nanos(now) + self.p.processing.t_sw, C_PROC, Ev::SwitchDone(proc.0));
                }
            }
        }
        self.actions = actions;
    }

    /// Processor `proc` takes packet `id` (the head of its ingress queue) at `now`: the
    /// descriptor dequeue, then the packet's actual time plus `extra_ns`.
    fn start(&mut self, now: u64, proc: u32, id: u32, extra_ns: u64, fx: &mut Effects) {
        let pk = &mut self.pkts[id as usize];
        pk.dispatch = now;
        pk.core = (proc % u16::MAX as u32) as u16;
        let (iq, len, actual) = (pk.iq, pk.len, pk.actual);
        match self.ingress.dequeue(QueueId(iq)) {
            Ok(Some(l)) if l == len => {}
            Ok(_) => return self.fail(now, "ingress", "the served packet is not its queue's head"),
            Err(e) => return self.fail(now, "ingress", e),
        }
        let Some(t0) = self.qmem_op(now, iq, Op::Dequeue) else { return };
        self.current[proc as usize] = id;
        fx.at(Instant::from_nanos(t0 + actual.ceil() as u64 + extra_ns), C_PROC, Ev::ProcDone(proc));
        // Its output queue's state is needed when it is done: start loading it now.
        let eq = self.pkts[id as usize].eq;
        self.prefetch_egress(eq);
    }

    /// LAP: free processor `p` takes the packet LAP picks, paying t_sw on a cold cache; it
    /// stays idle when nothing waits.
    pub(super) fn lap_dispatch(&mut self, now: u64, p: u32, fx: &mut Effects) {
        let t_sw = self.p.processing.t_sw.as_nanos();
        let Some(l) = &mut self.lap else { return };
        match l.sched.dispatch(ProcessorId(p)) {
            Ok(Some(pick)) => {
                l.idle[p as usize] = false;
                l.cold += pick.cold as u64;
                let extra = if pick.cold { t_sw } else { 0 };
                self.start(now, p, pick.packet.id as u32, extra, fx);
            }
            Ok(None) => l.idle[p as usize] = true,
            Err(e) => self.fail(now, "processing (lap)", e),
        }
    }

    pub(super) fn proc_done(&mut self, now: u64, pr: u32, fx: &mut Effects) {
        let id = std::mem::replace(&mut self.current[pr as usize], u32::MAX);
        let pk = self.pkts[id as usize];
        self.pkts[id as usize].done = now;
        let s = pk.service as usize;
        if let (None, Within::Fair(f)) = (&self.lap, &mut self.within) {
            if let Err(e) = f[s].completed(&fq_packet(id, &pk, self.p.services[s].est_ns(pk.len))) {
                return self.fail(now, "processing (fair queue)", e);
            }
        }
        let delay = now - pk.arrival;
        if self.lap.is_some() {
            self.lap_dispatch(now, pr, fx);
        } else {
            if let Err(e) = self.alloc.completed(
                Instant::from_nanos(now),
                ProcessorId(pr),
                Duration::from_nanos(delay),
                &mut self.actions,
            ) {
                return self.fail(now, "processing (allocator)", e);
            }
            self.apply(now, fx);
        }
        if let Some(t) = &mut self.trace {
            let x = &mut t[self.trace_of[id as usize] as usize];
            (x.dispatch, x.done) = (pk.dispatch, now);
        }
        let h = &mut self.hist[s];
        h[0].saturating_record((pk.dispatch - pk.arrival).max(1));
        h[1].saturating_record((now - pk.dispatch).max(1));
        let late = delay > self.p.services[s].tolerance.as_nanos();
        self.late[s] += late as u64;
        if late && self.p.processing.late_drop {
            self.proc_ports.dropped[0] += 1;
            return self.drop_pkt(now, Some(id), Some(s), D_LATE, pk.row, pk.len);
        }
        self.proc_ports.output += 1;
        self.egress_ports.input += 1;
        if self.shaped(pk.eq)
            && self.p.shaping.conformance == Conformance::WaitForTokens
            && pk.len as u64 > self.p.shaping.cap_bytes
        {
            self.egress_ports.dropped[0] += 1;
            return self.drop_pkt(now, Some(id), Some(s), D_BUCKET, pk.row, pk.len);
        }
        if self.egress_bytes + pk.len as u64 > self.p.shaping.buffer_bytes {
            self.egress_ports.dropped[1] += 1;
            return self.drop_pkt(now, Some(id), Some(s), D_EGRESS, pk.row, pk.len);
        }
        self.egress_bytes += pk.len as u64;
        self.egress_pending += 1;
        let Some(t) = self.qmem_op(now, self.nqi + pk.eq, Op::Enqueue) else { return };
        fx.at(Instant::from_nanos(t), C_QMEM, Ev::EgressVisible(id));
        // The packet will be linked behind its queue's tail (usually a packet from long ago):
        // start loading it (the FIFO's record was loaded when the processor took the packet).
        crate::hint::prefetch(&self.pkts, self.fifo[pk.eq as usize].tail as usize);
    }
}

fn fq_packet(id: u32, pk: &Pkt, est: f64) -> FqPacket {
    FqPacket {
        id: id as u64,
        flow: FlowId(pk.iq),
        app: AppId(pk.service as u32),
        est_ns: est,
        actual_ns: pk.actual,
        arrival: Instant::from_nanos(pk.arrival),
    }
}

impl Pipeline {
    /// Packets processing holds, from its own state: waiting in a service's scheduler (or
    /// LAP's) or on a processor. `None` without `walk` when that needs a pass over every ingress
    /// queue (DRR within a service).
    pub(super) fn processing_held(&self, walk: bool) -> Option<u64> {
        let waiting = match (&self.lap, &self.within) {
            (Some(l), _) => l.sched.len() as u64,
            (None, Within::Fifo(q)) => q.iter().map(|x| x.len() as u64).sum(),
            (None, Within::Drr(_, q)) if walk => q.iter().map(|x| x.len() as u64).sum(),
            (None, Within::Drr(..)) => return None,
            (None, Within::Fair(f)) => f.iter().map(|x| x.len() as u64).sum(),
        };
        Some(waiting + self.current.iter().filter(|&&c| c != u32::MAX).count() as u64)
    }
}
