//! Stage 4: the processing element. A packet visible in its ingress queue is offered to its
//! service's scheduler (FCFS, DRR over the service's ingress queues, or a fair queue on
//! predicted costs) and the processors' allocator (an everest policy), or to LAP; a processor
//! served takes the scheduler's pick. The element decides and the pipeline carries out: each
//! call leaves its decisions, in order, in the caller's [`Step`]s (a processor takes a packet,
//! a processor switches service), and the pipeline does what they take (the packet's ingress
//! dequeue and queue-memory operation, the processor's time as a timed effect). With
//! processing none (live's pipeline) the element is not built.

use super::*;
use crate::detect::{Detection, Function};
use crate::pipeline::codel::{Codel, CodelParams, CodelQueue, Dequeued};
use crate::pipeline::fq_codel::FqQueues;
use crate::pipeline::FqCodel;

pub(super) enum Within {
    Fifo(Vec<VecDeque<u32>>),
    Fair(Vec<FairQueue>),
    /// Per service a DRR over the ingress queues; per ingress queue its packets.
    Drr(Vec<Drr>, Vec<VecDeque<u32>>),
    /// `ingress.kind = "fq-codel"`: per service FQ-CoDel's round over the ingress queues; per
    /// ingress queue its packets (docs/codel.md, "fq_codel").
    FqCodel(Vec<FqCodel>, Vec<VecDeque<u32>>),
}

/// Drop reasons at the element's ports, in order.
const P_LATE: usize = 0;
/// FQ-CoDel: CoDel dropped the packet at its queue's head when a processor dequeued.
const P_CODEL: usize = 1;
/// FQ-CoDel: the buffer was full and the packet was at the head of the fattest queue.
const P_OVERFLOW: usize = 2;

/// LAP over the services (`Allocation::Lap`).
pub(super) struct Lap {
    sched: LapScheduler,
    idle: Vec<bool>,
    /// Enqueue order (LAP's packet ids increase with it): id = seq << 32 | packet slot.
    seq: u64,
    /// Dispatches to a processor whose cache held another service (each paid t_sw).
    cold: u64,
}

/// One decision of the processing element, for the pipeline to carry out in order.
#[derive(Clone, Copy, Debug)]
pub(super) enum Step {
    /// Processor `proc` takes packet `id` (the head of its ingress queue), for the packet's
    /// actual time plus `extra_ns` (LAP's t_sw on a cold cache).
    Start { proc: u32, id: u32, extra_ns: u64 },
    /// Processor `proc` switches service: it is free again after `t_sw`.
    Switch { proc: u32 },
    /// Packet `id` (the head of its ingress queue) is dropped for the reason of [`DROPS`] at
    /// `reason` (FQ-CoDel: CoDel at the dequeue, or the fattest queue on overflow).
    Drop { id: u32, reason: usize },
}

/// A mechanism of the element refused a call: the stage and what it said.
pub(super) type Refused = (&'static str, String);

fn refused<E: std::fmt::Display>(stage: &'static str) -> impl Fn(E) -> Refused {
    move |e| (stage, e.to_string())
}

/// What a processor's completion decided ([`Processing::completed`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Done {
    pub id: u32,
    /// Over its service's tolerance, and `late_drop` drops it.
    pub drop_late: bool,
}

/// The processing element: the allocator among the services (or LAP) and the scheduler within
/// each service, with conservation at its ports (in: packets offered; out: packets done and
/// kept; dropped: late).
pub(super) struct Processing {
    p: Arc<RouterParams>,
    alloc: Allocator,
    /// `policy = "lap"`: LAP allocates the processors (the allocator then stays idle).
    lap: Option<Lap>,
    within: Within,
    /// Per processor the packet on it (NIL: none).
    current: Vec<u32>,
    actions: Vec<Action>,
    /// Per service the packets done over its tolerance.
    late: Vec<u64>,
    /// The services' packet functions, which a processor runs on each packet it finishes.
    functions: Functions,
    /// FQ-CoDel: per service the packets CoDel dropped during the serves of one batch of the
    /// allocator's actions, and the processors that found nothing to take.
    fq_dropped: Vec<i64>,
    fq_idle: Vec<u32>,
    ports: Ports<3>,
}

/// The most detections a run keeps (each one's service, what, who, when and count); past it
/// they are counted ([`Functions::found`]) and not kept.
pub const MAX_DETECTIONS: usize = 100_000;

/// One packet function's report: the service whose processor found it, and what it found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub service: u16,
    pub detection: Detection,
}

/// The services' packet functions (`[services.function]`: Everest's prototype's detectors).
#[derive(Default)]
pub(super) struct Functions {
    /// Per service its function, if it has one.
    each: Vec<Option<Function>>,
    /// The first [`MAX_DETECTIONS`] reports, in the order found.
    pub kept: Vec<Found>,
    /// Per service its reports.
    pub found: Vec<u64>,
}

impl Functions {
    fn new(p: &RouterParams) -> Self {
        let each: Vec<Option<Function>> = p.services.iter().map(|s| s.function.as_ref().map(Function::new)).collect();
        Functions { found: vec![0; each.len()], each, ..Default::default() }
    }

    /// Whether a service has one.
    #[inline]
    pub fn any(&self) -> bool {
        self.each.iter().any(Option::is_some)
    }

    /// Service `s`'s processor finished a packet of flow `key` with TCP flags `flags` at `now`:
    /// its function looks at it.
    #[inline]
    fn run(&mut self, now: u64, s: usize, key: &FlowKey, flags: Option<u8>) {
        let Some(f) = self.each[s].as_mut() else { return };
        if let Some(d) = f.packet(now, key, flags) {
            self.found[s] += 1;
            if self.kept.len() < MAX_DETECTIONS {
                self.kept.push(Found { service: s as u16, detection: d });
            }
        }
    }

    /// Per service the packets its function could not examine (its table was full).
    pub fn untracked(&self, s: usize) -> Option<u64> {
        self.each[s].as_ref().map(Function::untracked)
    }
}

impl Processing {
    /// The processors' allocation among the services (an everest policy, or LAP) and the
    /// scheduler within each service over its `nqi` ingress queues; `mean_len` (bytes) sets
    /// each service's predicted time per packet.
    pub(super) fn new(p: &Arc<RouterParams>, nqi: u32, mean_len: f64) -> Result<Self, PipelineError> {
        fn cfg(e: impl std::fmt::Display) -> PipelineError {
            PipelineError::Config(e.to_string())
        }
        let s_count = p.services.len();
        let alloc_services = p
            .services
            .iter()
            .map(|s| ServiceSpec {
                name: s.name.clone(),
                t_pkt: Duration::from_nanos((s.cost_alpha_ns + s.cost_beta_ns * mean_len).round().max(1.0) as u64),
                tolerance: s.tolerance,
                guarantee: s.guarantee,
            })
            .collect();
        let alloc = Allocator::new(&AllocConfig {
            processors: p.processing.processors,
            t_sw: p.processing.t_sw,
            delta: p.processing.delta,
            services: alloc_services,
            policy: match p.processing.policy {
                Allocation::Policy(x) => x,
                Allocation::Lap | Allocation::None => crate::alloc::Policy::Static,
            },
        })
        .map_err(cfg)?;
        let lap = match p.processing.policy {
            Allocation::Lap => Some(Lap {
                sched: LapScheduler::new(LapPolicy::Lap, s_count, p.processing.processors).map_err(cfg)?,
                idle: vec![true; p.processing.processors as usize],
                seq: 0,
                cold: 0,
            }),
            Allocation::Policy(_) | Allocation::None => None,
        };
        // Under LAP the scheduler holds the packets (oldest first within a service).
        let scheduler = if lap.is_some() { Scheduler::Fcfs } else { p.processing.scheduler };
        let fq = p.ingress == IngressKind::FqCodel;
        if fq && lap.is_some() {
            return Err(cfg(
                "ingress.kind = \"fq-codel\" schedules within a service, and processing.policy = \"lap\" \
                            schedules the packets itself: choose one",
            ));
        }
        let within = match scheduler {
            _ if fq => {
                // A service's K queues are `s * K .. (s + 1) * K` (hashed per service).
                let round = FqCodel::new(p.fq_codel, p.table.queues).map_err(cfg)?;
                Within::FqCodel(vec![round; s_count], vec![VecDeque::new(); nqi as usize])
            }
            Scheduler::Fcfs => Within::Fifo(vec![VecDeque::new(); s_count]),
            Scheduler::Drr => {
                let drr = Drr::new(nqi, p.quantum as u64).map_err(cfg)?;
                Within::Drr(vec![drr; s_count], vec![VecDeque::new(); nqi as usize])
            }
            Scheduler::Fair(d) => {
                let shares = vec![1.0 / nqi as f64; nqi as usize];
                let fq = FairQueue::new(d, p.processing.processors, &shares).map_err(cfg)?;
                Within::Fair(vec![fq; s_count])
            }
        };
        Ok(Processing {
            p: p.clone(),
            alloc,
            lap,
            within,
            current: vec![NIL; p.processing.processors as usize],
            actions: Vec::new(),
            late: vec![0; s_count],
            functions: Functions::new(p),
            // Empty without FQ-CoDel, so that `apply`'s look at it costs nothing per call.
            fq_dropped: if fq { vec![0; s_count] } else { Vec::new() },
            fq_idle: Vec::new(),
            ports: Ports::default(),
        })
    }

    /// Packet `id` is visible in its ingress queue at `now`: its service's scheduler has it,
    /// and a free processor may take it.
    pub(super) fn offer(&mut self, now: u64, id: u32, pkts: &[Pkt], steps: &mut Vec<Step>) -> Result<(), Refused> {
        self.ports.input += 1;
        let pk = &pkts[id as usize];
        let s = pk.service as usize;
        if let Some(l) = &mut self.lap {
            l.seq += 1;
            let est = self.p.services[s].est_ns(pk.len);
            let x = LapPacket { id: (l.seq << 32) | id as u64, app: AppId(s as u32), est };
            l.sched.enqueue(x).map_err(refused("processing (lap)"))?;
            // An idle processor, one whose cache holds the service first.
            let idle = |p: &usize| l.idle[*p];
            let warm =
                (0..l.idle.len()).filter(idle).find(|&p| l.sched.cache(ProcessorId(p as u32)) == Some(AppId(s as u32)));
            if let Some(p) = warm.or_else(|| (0..l.idle.len()).find(idle)) {
                self.lap_dispatch(p as u32, steps)?;
            }
            return Ok(());
        }
        match &mut self.within {
            Within::Fifo(q) => q[s].push_back(id),
            Within::Drr(d, q) => {
                q[pk.iq as usize].push_back(id);
                d[s].enqueued(QueueId(pk.iq)).map_err(refused("processing (drr)"))?;
            }
            Within::FqCodel(f, q) => {
                q[pk.iq as usize].push_back(id);
                f[s].enqueued(pk.iq - s as u32 * self.p.table.queues).map_err(refused("processing (fq-codel)"))?;
            }
            Within::Fair(f) => f[s]
                .enqueue(Instant::from_nanos(now), fq_packet(id, pk, self.p.services[s].est_ns(pk.len)))
                .map_err(refused("processing (fair queue)"))?,
        }
        self.alloc
            .arrival(Instant::from_nanos(now), ServiceId(s as u32), &mut self.actions)
            .map_err(refused("processing (allocator)"))?;
        self.apply(now, pkts, steps)
    }

    /// The allocator's actions as steps: a processor served takes its service scheduler's pick.
    /// Under FQ-CoDel a serve may drop packets first (CoDel at their queues' heads) and may find
    /// nothing left: the allocator is then told of the packets gone ([`Allocator::withdrawn`])
    /// and the processor is free again at once, which may bring more actions.
    fn apply(&mut self, now: u64, pkts: &[Pkt], steps: &mut Vec<Step>) -> Result<(), Refused> {
        loop {
            let mut actions = std::mem::take(&mut self.actions);
            for a in actions.drain(..) {
                match a {
                    Action::Serve { proc, service } => self.serve(now, proc.0, service.index(), pkts, steps)?,
                    Action::Switch { proc, .. } => steps.push(Step::Switch { proc: proc.0 }),
                }
            }
            self.actions = actions;
            if self.fq_idle.is_empty() && self.fq_dropped.iter().all(|&d| d == 0) {
                return Ok(());
            }
            // Per service, the packets the allocator still counts that are gone: those CoDel
            // dropped, less the serves that found nothing (each counted one packet served).
            let at = Instant::from_nanos(now);
            for (s, d) in self.fq_dropped.iter_mut().enumerate() {
                let n = u64::try_from(std::mem::take(d)).map_err(|_| {
                    ("processing (fq-codel)", "more serves found nothing than CoDel dropped".to_string())
                })?;
                self.alloc
                    .withdrawn(at, ServiceId(s as u32), n, &mut self.actions)
                    .map_err(refused("processing (allocator)"))?;
            }
            for p in std::mem::take(&mut self.fq_idle) {
                self.alloc
                    .completed(at, ProcessorId(p), Duration::ZERO, &mut self.actions)
                    .map_err(refused("processing (allocator)"))?;
            }
            if self.actions.is_empty() {
                return Ok(());
            }
        }
    }

    /// Processor `proc` serves service `s`: its scheduler's pick.
    fn serve(&mut self, now: u64, proc: u32, s: usize, pkts: &[Pkt], steps: &mut Vec<Step>) -> Result<(), Refused> {
        let id = match &mut self.within {
            Within::Fifo(q) => q[s].pop_front(),
            Within::Drr(d, q) => match d[s].select(|x| pkts[q[x.index()][0] as usize].len as u64) {
                None => None,
                Some(x) => {
                    let id = q[x.index()].pop_front().expect("a queue in the round holds packets");
                    d[s].dequeued(x, q[x.index()].is_empty()).map_err(refused("processing (DRR)"))?;
                    Some(id)
                }
            },
            Within::Fair(f) => f[s]
                .dequeue(Instant::from_nanos(now))
                .map_err(refused("processing (fair queue)"))?
                .map(|d| d.packet.id as u32),
            Within::FqCodel(f, q) => {
                let ect = self.p.services[s].ecn;
                let base = s * self.p.table.queues as usize;
                let mtu = f[s].params().codel.mtu;
                let mut lists = Lists { q: &mut q[base..], pkts, ect, mtu, dropped: Vec::new() };
                let pick = f[s].dequeue(now, &mut lists);
                let dropped = lists.dropped;
                self.ports.dropped[P_CODEL] += dropped.len() as u64;
                self.fq_dropped[s] += dropped.len() as i64;
                steps.extend(dropped.into_iter().map(|id| Step::Drop { id, reason: D_CODEL }));
                match pick.queue {
                    Some(x) => Some(q[base + x as usize].pop_front().expect("the picked queue has a head")),
                    None => {
                        // The serve counted one packet that CoDel dropped instead.
                        self.fq_dropped[s] -= 1;
                        self.fq_idle.push(proc);
                        return Ok(());
                    }
                }
            }
        };
        let Some(id) = id else {
            return Err(("processing", "the allocator served an empty service".into()));
        };
        self.current[proc as usize] = id;
        steps.push(Step::Start { proc, id, extra_ns: 0 });
        Ok(())
    }

    /// FQ-CoDel with a full buffer at `now`: up to `n` packets from the head of ingress queue
    /// `iq` (the fattest) of service `s` are dropped, as far as they are in the element (a
    /// packet whose ingress enqueue is still in flight is not yet); their drops are in `steps`.
    pub(super) fn overflow(
        &mut self,
        now: u64,
        s: usize,
        iq: u32,
        n: u32,
        pkts: &[Pkt],
        steps: &mut Vec<Step>,
    ) -> Result<u32, Refused> {
        let Within::FqCodel(_, q) = &mut self.within else { return Ok(0) };
        let k = (n as usize).min(q[iq as usize].len());
        for id in q[iq as usize].drain(..k) {
            steps.push(Step::Drop { id, reason: D_BUFFER });
        }
        self.ports.dropped[P_OVERFLOW] += k as u64;
        let at = Instant::from_nanos(now);
        self.alloc
            .withdrawn(at, ServiceId(s as u32), k as u64, &mut self.actions)
            .map_err(refused("processing (allocator)"))?;
        self.apply(now, pkts, steps)?;
        Ok(k as u32)
    }

    /// LAP: free processor `p` takes the packet LAP picks, paying t_sw on a cold cache; it
    /// stays idle when nothing waits.
    fn lap_dispatch(&mut self, p: u32, steps: &mut Vec<Step>) -> Result<(), Refused> {
        let t_sw = self.p.processing.t_sw.as_nanos();
        let Some(l) = &mut self.lap else { return Ok(()) };
        match l.sched.dispatch(ProcessorId(p)).map_err(refused("processing (lap)"))? {
            Some(pick) => {
                l.idle[p as usize] = false;
                l.cold += pick.cold as u64;
                let id = pick.packet.id as u32;
                self.current[p as usize] = id;
                steps.push(Step::Start { proc: p, id, extra_ns: if pick.cold { t_sw } else { 0 } });
            }
            None => l.idle[p as usize] = true,
        }
        Ok(())
    }

    /// Processor `proc` finished its packet at `now`: which packet, and whether it is dropped
    /// as late; the processor's next packet is in `steps`. `flows` holds each packet slot's
    /// flow and TCP flags when a service has a packet function.
    pub(super) fn completed(
        &mut self,
        now: u64,
        proc: u32,
        pkts: &[Pkt],
        flows: &[(FlowKey, Option<u8>)],
        steps: &mut Vec<Step>,
    ) -> Result<Done, Refused> {
        let id = std::mem::replace(&mut self.current[proc as usize], NIL);
        let pk = &pkts[id as usize];
        let s = pk.service as usize;
        if let Some((key, flags)) = flows.get(id as usize) {
            self.functions.run(now, s, key, *flags);
        }
        if let (None, Within::Fair(f)) = (&self.lap, &mut self.within) {
            f[s].completed(&fq_packet(id, pk, self.p.services[s].est_ns(pk.len)))
                .map_err(refused("processing (fair queue)"))?;
        }
        let delay = now - pk.arrival;
        if self.lap.is_some() {
            self.lap_dispatch(proc, steps)?;
        } else {
            let at = Instant::from_nanos(now);
            self.alloc
                .completed(at, ProcessorId(proc), Duration::from_nanos(delay), &mut self.actions)
                .map_err(refused("processing (allocator)"))?;
            self.apply(now, pkts, steps)?;
        }
        let late = delay > self.p.services[s].tolerance.as_nanos();
        self.late[s] += late as u64;
        let drop_late = late && self.p.processing.late_drop;
        match drop_late {
            true => self.ports.dropped[P_LATE] += 1,
            false => self.ports.output += 1,
        }
        Ok(Done { id, drop_late })
    }

    /// Processor `proc`'s context switch is done at `now`.
    pub(super) fn switch_done(
        &mut self,
        now: Instant,
        proc: u32,
        pkts: &[Pkt],
        steps: &mut Vec<Step>,
    ) -> Result<(), Refused> {
        self.alloc.switch_done(now, ProcessorId(proc), &mut self.actions).map_err(refused("processing (allocator)"))?;
        self.apply(now.as_nanos(), pkts, steps)
    }

    /// The allocator's timer, due at `now`.
    pub(super) fn timer(&mut self, now: Instant, pkts: &[Pkt], steps: &mut Vec<Step>) -> Result<(), Refused> {
        self.alloc.timer(now, &mut self.actions).map_err(refused("processing (allocator)"))?;
        self.apply(now.as_nanos(), pkts, steps)
    }

    /// The allocator's next timer.
    #[inline]
    pub(super) fn next_wakeup(&self) -> Option<Instant> {
        self.alloc.next_wakeup()
    }

    /// Processors serving service `s` now.
    pub(super) fn allocated(&self, s: usize) -> u32 {
        match &self.lap {
            Some(l) => l.sched.group(AppId(s as u32)),
            None => self.alloc.allocated(ServiceId(s as u32)),
        }
    }

    /// Context switches (under LAP, dispatches to a cold cache).
    pub(super) fn switches(&self) -> u64 {
        self.lap.as_ref().map_or(self.alloc.stats().switches, |l| l.cold)
    }

    /// The schedulers' state, B: under LAP per service its work, count and queue ends (32 B)
    /// and per processor its cache; per service and ingress queue a DRR deficit and flag (12
    /// B) and the ring's id (4 B), or a fair queue's 24 B; FQ-CoDel per service and each of its
    /// own K queues its credit, list and CoDel state (36 B).
    pub(super) fn state_bytes(&self, nqi: u32) -> u64 {
        match &self.within {
            Within::Fifo(_) if self.lap.is_some() => self.p.services.len() as u64 * 32 + self.current.len() as u64 * 4,
            Within::Fifo(_) => 0,
            Within::Drr(d, _) => d.len() as u64 * nqi as u64 * 16,
            Within::Fair(f) => f.len() as u64 * nqi as u64 * 24,
            Within::FqCodel(f, _) => f.iter().map(FqCodel::state_bytes).sum(),
        }
    }

    /// FQ-CoDel's counters over the services (`None` without it).
    pub(super) fn fq_counters(&self) -> Option<crate::pipeline::fq_codel::FqCounters> {
        let Within::FqCodel(f, _) = &self.within else { return None };
        Some(f.iter().fold(Default::default(), |mut a, r| {
            let c = r.counters();
            a.codel_dropped += c.codel_dropped;
            a.marked += c.marked;
            a.new_flows += c.new_flows;
            a
        }))
    }

    /// The services' packet functions.
    pub(super) fn functions(&self) -> &Functions {
        &self.functions
    }
    pub(super) fn functions_mut(&mut self) -> &mut Functions {
        &mut self.functions
    }

    /// Per service the packets done over its tolerance.
    pub(super) fn late(&self) -> &[u64] {
        &self.late
    }

    /// Conservation at the element's ports, its holdings from its own state: waiting in a
    /// service's scheduler (or LAP's) or on a processor. Skipped without `walk` when that needs
    /// a pass over every ingress queue (DRR within a service).
    pub(super) fn check(&self, walk: bool) -> Result<(), ConservationError> {
        let waiting = match (&self.lap, &self.within) {
            (Some(l), _) => l.sched.len() as u64,
            (None, Within::Fifo(q)) => q.iter().map(|x| x.len() as u64).sum(),
            (None, Within::Drr(_, q)) if walk => q.iter().map(|x| x.len() as u64).sum(),
            (None, Within::Drr(..)) => return Ok(()),
            (None, Within::FqCodel(_, q)) if walk => q.iter().map(|x| x.len() as u64).sum(),
            (None, Within::FqCodel(..)) => return Ok(()),
            (None, Within::Fair(f)) => f.iter().map(|x| x.len() as u64).sum(),
        };
        let busy = self.current.iter().filter(|&&c| c != NIL).count() as u64;
        self.ports.check("processing", waiting + busy)
    }
}

/// The ingress queues' packet lists of one service as FQ-CoDel's round sees them (its own
/// queues first: the round's queue ids are the service's).
struct Lists<'a> {
    q: &'a mut [VecDeque<u32>],
    pkts: &'a [Pkt],
    /// The service's packets are ECN-capable (`services.ecn`).
    ect: bool,
    mtu: u64,
    /// The packets CoDel dropped, in order.
    dropped: Vec<u32>,
}

/// One ingress queue as CoDel sees it: a packet's sojourn time runs from its arrival.
struct Head<'a, 'b>(&'b mut Lists<'a>, usize);

impl CodelQueue for Head<'_, '_> {
    #[inline]
    fn head(&self, now: u64) -> Option<(u64, bool)> {
        let id = *self.0.q[self.1].front()?;
        Some((now.saturating_sub(self.0.pkts[id as usize].arrival), self.0.ect))
    }
    /// The bytes behind the head, counted only as far as CoDel looks (past one MTU).
    fn bytes(&self) -> u64 {
        let mut b = 0;
        for &id in self.0.q[self.1].iter().skip(1) {
            if b > self.0.mtu {
                break;
            }
            b += self.0.pkts[id as usize].len as u64;
        }
        b
    }
    fn drop_head(&mut self, _now: u64) {
        let id = self.0.q[self.1].pop_front().expect("CoDel drops a head it was shown");
        self.0.dropped.push(id);
    }
    /// A simulated packet's mark is counted (the round's `marked`); it carries no bytes.
    fn mark_head(&mut self, _now: u64) {}
}

impl FqQueues for Lists<'_> {
    #[inline]
    fn codel(&mut self, q: u32, codel: &mut Codel, p: &CodelParams, now: u64) -> Dequeued {
        codel.dequeue(p, now, &mut Head(self, q as usize))
    }
    #[inline]
    fn head_len(&self, q: u32) -> u32 {
        self.pkts[self.q[q as usize][0] as usize].len
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

/// The pipeline's side of processing: carrying out the element's steps, and a packet done.
impl Pipeline {
    /// FQ-CoDel's buffer is full at `now`: one batch of packets goes from the head of the
    /// fattest queue (half its bytes, at most `drop_batch`), reason `ingress_buffer_full`.
    pub(super) fn fq_overflow(&mut self, now: u64, fx: &mut Effects) {
        let (Some((q, backlog)), Some(pr)) = (self.ingress.fattest(), self.processing.as_mut()) else { return };
        let n = self.p.fq_codel.fattest_drop(backlog, self.ingress.lens(q));
        let s = (q.0 / self.p.table.queues) as usize;
        let r = pr.overflow(now, s, q.0, n, &self.pkts, &mut self.steps);
        self.carry_out(now, r.map(|_| ()), fx);
    }

    /// Packet `id`, the head of its ingress queue, dropped at `now` by FQ-CoDel (reason
    /// `reason`): out of the ingress (its descriptor read, as a dequeue reads it) and gone.
    pub(super) fn drop_head(&mut self, now: u64, id: u32, reason: usize) {
        let pk = self.pkts[id as usize];
        match self.ingress.dequeue(QueueId(pk.iq)) {
            Ok(Some(l)) if l == pk.len => {}
            Ok(_) => return self.fail(now, "ingress", "the packet FQ-CoDel dropped is not its queue's head"),
            Err(e) => return self.fail(now, "ingress", e),
        }
        if self.qmem_op(now, pk.iq, Op::Dequeue).is_none() {
            return;
        }
        self.drop_pkt(now, Some(id), Some(pk.service as usize), reason, pk.row, pk.len);
    }

    pub(super) fn visible(&mut self, now: u64, id: u32, fx: &mut Effects) {
        let Some(pr) = self.processing.as_mut() else { return };
        let r = pr.offer(now, id, &self.pkts, &mut self.steps);
        self.carry_out(now, r, fx);
    }

    /// The processing element's steps at `now` (after its call returned `r`), in order.
    pub(super) fn carry_out(&mut self, now: u64, r: Result<(), Refused>, fx: &mut Effects) {
        if let Err((stage, msg)) = r {
            self.steps.clear();
            return self.fail(now, stage, msg);
        }
        let mut steps = std::mem::take(&mut self.steps);
        for st in steps.drain(..) {
            if self.error.is_some() {
                break;
            }
            match st {
                Step::Start { proc, id, extra_ns } => self.start(now, proc, id, extra_ns, fx),
                Step::Switch { proc } => {
                    fx.at(Instant::from_nanos(now) + self.p.processing.t_sw, C_PROC, Ev::SwitchDone(proc))
                }
                Step::Drop { id, reason } => self.drop_head(now, id, reason),
            }
        }
        self.steps = steps;
    }

    /// Processor `proc` takes packet `id` (the head of its ingress queue) at `now`: the
    /// descriptor dequeue, then the packet's actual time plus `extra_ns`.
    fn start(&mut self, now: u64, proc: u32, id: u32, extra_ns: u64, fx: &mut Effects) {
        let pk = &mut self.pkts[id as usize];
        pk.dispatch = now;
        pk.core = (proc % u16::MAX as u32) as u16;
        let (iq, len, actual) = (pk.iq, pk.len, pk.actual);
        // With the caller's ring as the link, the frame leaves the ingress buffer with the packet.
        let mut frame = self.link.is_ring().then(|| {
            if self.held.len() <= id as usize {
                self.held.resize_with(id as usize + 1, Vec::new);
            }
            std::mem::take(&mut self.held[id as usize])
        });
        let got = self.ingress.dequeue_with(QueueId(iq), frame.as_mut());
        if let Some(f) = frame {
            self.held[id as usize] = f;
        }
        match got {
            Ok(Some(l)) if l.len == len => {}
            Ok(_) => return self.fail(now, "ingress", "the served packet is not its queue's head"),
            Err(e) => return self.fail(now, "ingress", e),
        }
        let Some(t0) = self.qmem_op(now, iq, Op::Dequeue) else { return };
        fx.at(Instant::from_nanos(t0 + crate::time::ceil_u64(actual) + extra_ns), C_PROC, Ev::ProcDone(proc));
        // Its output queue's state is needed when it is done: start loading it now.
        let eq = self.pkts[id as usize].eq;
        self.prefetch_egress(eq);
    }

    pub(super) fn proc_done(&mut self, now: u64, pr: u32, fx: &mut Effects) {
        let Some(proc) = self.processing.as_mut() else { return };
        let done = proc.completed(now, pr, &self.pkts, &self.slot_flows, &mut self.steps);
        let Done { id, drop_late } = match done {
            Ok(d) => d,
            Err(r) => return self.carry_out(now, Err(r), fx),
        };
        self.pkts[id as usize].done = now;
        let pk = self.pkts[id as usize];
        self.carry_out(now, Ok(()), fx);
        let s = pk.service as usize;
        if let Some(t) = &mut self.trace {
            let x = &mut t[self.trace_of[id as usize] as usize];
            (x.dispatch, x.done) = (pk.dispatch, now);
        }
        let h = &mut self.hist[s];
        h[0].record((pk.dispatch - pk.arrival).max(1));
        h[1].record((now - pk.dispatch).max(1));
        if drop_late {
            return self.drop_pkt(now, Some(id), Some(s), D_LATE, pk.row, pk.len);
        }
        self.egress_ports.input += 1;
        if self.shaped(pk.eq)
            && self.p.shaping.conformance == Conformance::WaitForTokens
            && self.p.shaping.wire_len(pk.len) > self.cap[s]
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
