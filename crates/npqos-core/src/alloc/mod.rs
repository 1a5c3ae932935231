//! Processor allocation among services (paper `everest`, Kokku, Shevade, Shah, Mahimkar, Cho
//! and Vin, *Processor Scheduler for Multi-service Routers*): which processors run which
//! service, when a context switch costing `t_sw` is worth paying.
//!
//! The system model of everest Table 1: `N_p` identical processors, `S_A` services, each with
//! one FIFO packet queue, a per-packet processing time `t_pkt^i`, a delay tolerance `D^i` and a
//! guaranteed share `G^i`. A processor runs one service at a time; switching it to another
//! service makes it serve nothing for `t_sw`.
//!
//! [`Allocator`] is sans-IO: the runtime (a simulator or a real data plane) tells it that a
//! packet arrived ([`Allocator::arrival`]), that a processor finished a packet
//! ([`Allocator::completed`]) or a context switch ([`Allocator::switch_done`]), and calls
//! [`Allocator::timer`] at [`Allocator::next_wakeup`]. It answers with [`Action`]s: start the
//! head packet of a queue on a processor, or begin switching a processor to another service.
//! It keeps the queue lengths (as counts; the packets stay with the runtime) and the state of
//! every processor, so every policy decides from the same facts.
//!
//! A reassigned processor that is busy finishes its current packet first (at most one `t_pkt`,
//! microseconds against a switch of milliseconds), then switches. Processors in the middle of
//! a switch, or about to switch, are never taken again until the switch is done.
//!
//! ## Policies ([`Policy`], everest Table 4 and sections 4, 5.1)
//!
//! * **Everest** (Algorithm 1): service `i` with `j` committed processors is eligible iff its
//!   queue `q_len > Q_lim^j = j * (floor(D / t_pkt) - 1)` (eq 3); with `j = 0` that is
//!   `q_len > 0` (a service without a committed processor cannot promise any packet). When the
//!   queue empties it marks processors so that `k^j = floor(j - R_arr(Delta) * t_pkt)` are
//!   marked (eq 6), unmarking if fewer are due (line 7). Marked processors keep serving their
//!   service. An eligible service first unmarks one of its own marked processors (no switch),
//!   else takes the processor marked longest (LRA), else (overload, section 4.5), if it is
//!   below `N_newalloc = min(N_req, G N_p)`, takes one by force from a service holding more
//!   than its guaranteed `G N_p`. Free (marked) processors go to the eligible service with the
//!   largest residual queue `q_len - Q_lim` (beneficiary selection, step 2 of overload control).
//! * **Everest-LD**: allocation only once a packet of the service has been delayed more than
//!   `D` (observed at the first instant its delay exceeds `D`: while it waits, or when it
//!   finishes late), and at least `t_sw` between two allocation attempts for a service;
//!   release as Everest.
//! * **Everest-AE**: high priority `q_len > Q_lim^j` (with forced release), low priority
//!   `q_len > 0` (free processors only); processors released as soon as the queue is empty.
//! * **Cohort-E**: eligible when `q_len > 0`, released when empty, never forced; a released
//!   processor goes to the eligible service furthest below a share proportional to its queue.
//! * **Quantum**: as Cohort-E, and a processor's allocation ends after the quantum `Q`; it then
//!   goes to the eligible service furthest below its share `G^i` (itself, without a switch, if
//!   that is its own).
//! * **Static**: `G^i x N_p` processors per service, never changed.
//! * **Adaptive** (ours, the scheduler everest section 7 leaves open): per service, from the
//!   measured switch time: Everest-AE while `t_sw <= D / 10` ([`ADAPTIVE_EAGER_RATIO`], the
//!   paper's crossover); otherwise Everest plus a low-priority trigger that takes only free
//!   (marked) processors when the backlog would outlast a switch: `q_len > j * floor(t_sw /
//!   t_pkt)`. For `t_sw >= D - t_pkt`, `Q_lim` fires first and it is Everest.
//!
//! "`q_len > 0`" of the eager policies is read as "packets are waiting beyond the processors
//! already switching to the service" (`q_len > incoming`): otherwise every packet that arrives
//! during a 2 ms switch would claim yet another processor. This is the generous reading for the
//! baselines; docs/everest.md lists it with the other assumptions.
//!
//! Cost: O(1) per packet on the arrival / completion path; an allocation decision scans the
//! processors (O(N_p)), overload control O(S_A x N_p). No allocation per packet (the arrival
//! window of each service grows to its peak once).

mod decide;
pub mod guarantee;

use crate::error::{Clock, Error};
use crate::id::{self, ProcessorId, ServiceId};
use crate::time::{Duration, Instant};
use std::collections::VecDeque;

/// A service (everest Table 1).
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceSpec {
    pub name: String,
    /// t_pkt^i: processing time per packet.
    pub t_pkt: Duration,
    /// D^i: delay tolerance (arrival to end of processing).
    pub tolerance: Duration,
    /// G^i: guaranteed fraction of the processors in overload (eq 1, 7).
    pub guarantee: f64,
}

/// The allocation policy (everest Table 4).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Policy {
    Static,
    Quantum { quantum: Duration },
    CohortE,
    Everest,
    EverestLd,
    EverestAe,
    Adaptive,
}

/// A [`Policy`] without its parameter: what configuration files name (`processors.policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyKind {
    Static,
    Quantum,
    CohortE,
    Everest,
    EverestLd,
    EverestAe,
    Adaptive,
}

crate::named!(PolicyKind, "policy", {
    Static => "static",
    Quantum => "quantum",
    CohortE => "cohort-e",
    Everest => "everest",
    EverestLd => "everest-ld",
    EverestAe => "everest-ae",
    Adaptive => "everest-adaptive",
});

impl PolicyKind {
    /// The policy, with `quantum` for [`PolicyKind::Quantum`] (ignored by the others).
    pub fn with_quantum(self, quantum: Duration) -> Policy {
        match self {
            PolicyKind::Static => Policy::Static,
            PolicyKind::Quantum => Policy::Quantum { quantum },
            PolicyKind::CohortE => Policy::CohortE,
            PolicyKind::Everest => Policy::Everest,
            PolicyKind::EverestLd => Policy::EverestLd,
            PolicyKind::EverestAe => Policy::EverestAe,
            PolicyKind::Adaptive => Policy::Adaptive,
        }
    }
}

impl Policy {
    /// The policy without its parameter.
    pub fn kind(&self) -> PolicyKind {
        match self {
            Policy::Static => PolicyKind::Static,
            Policy::Quantum { .. } => PolicyKind::Quantum,
            Policy::CohortE => PolicyKind::CohortE,
            Policy::Everest => PolicyKind::Everest,
            Policy::EverestLd => PolicyKind::EverestLd,
            Policy::EverestAe => PolicyKind::EverestAe,
            Policy::Adaptive => PolicyKind::Adaptive,
        }
    }
    /// Short name used in configuration files and results (`quantum` carries its size in the
    /// experiment labels): [`PolicyKind`]'s.
    pub fn name(&self) -> &'static str {
        crate::names::Named::name(self.kind())
    }
    /// Policies that release processors as soon as their queue is empty (work-conserving).
    fn eager_release(&self) -> bool {
        matches!(self, Policy::Quantum { .. } | Policy::CohortE | Policy::EverestAe)
    }
    /// Policies that mark k^j processors when the queue empties (eq 6).
    fn marks(&self) -> bool {
        matches!(self, Policy::Everest | Policy::EverestLd | Policy::Adaptive)
    }
}

/// Adaptive behaves as Everest-AE (eager trigger, release on empty) for a service whose
/// tolerance is at least this many (measured) switch times: `t_sw / D <= 0.1`, where the
/// paper's Fig. 4 puts the crossover between Everest-AE and Everest.
pub const ADAPTIVE_EAGER_RATIO: u64 = 10;

/// Configuration of an [`Allocator`].
#[derive(Clone, Debug, PartialEq)]
pub struct AllocConfig {
    /// N_p.
    pub processors: u32,
    /// t_sw: the configured context-switch time (Adaptive starts from it, then uses the
    /// measured one).
    pub t_sw: Duration,
    /// Delta: window of the arrival-rate estimate R_arr(Delta) (everest section 5.2: t_sw).
    pub delta: Duration,
    pub services: Vec<ServiceSpec>,
    pub policy: Policy,
}

/// Why a configuration was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AllocError {
    #[error("at least one processor and one service are needed (got {processors} processors, {services} services)")]
    Empty { processors: u32, services: usize },
    #[error("service {service}: t_pkt must be positive")]
    ZeroTpkt { service: usize },
    #[error("service {service}: guarantee must be a finite share >= 0, got {value}")]
    BadGuarantee { service: usize, value: f64 },
    #[error("the rate window Delta must be positive")]
    ZeroDelta,
    #[error("the quantum must be positive")]
    ZeroQuantum,
    #[error("more than 65535 services or 2^31 processors")]
    TooLarge,
}

/// A decision for the runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Processor `proc` starts the head packet of `service`'s queue now.
    Serve { proc: ProcessorId, service: ServiceId },
    /// Processor `proc` starts switching from `from` to `to` now; the runtime calls
    /// [`Allocator::switch_done`] when it is ready (after `t_sw`).
    Switch { proc: ProcessorId, from: ServiceId, to: ServiceId },
}

/// What an arrival set off (for the eq 5 check and for statistics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    None,
    /// The arrival made the queue exceed Q_lim^j and a processor was granted. `clean` when the
    /// paper's derivation applies: the service had no processor still on its way and the
    /// granted one is serving now or started its switch now (eq 4-5).
    Hi {
        clean: bool,
    },
    /// The arrival made the queue exceed Q_lim^j but nothing could be granted (overload and
    /// the service is at its target).
    HiRefused,
    /// A low-priority (eager) grant.
    Lo,
}

/// Counters of an [`Allocator`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocStats {
    /// Context switches started (every [`Action::Switch`]).
    pub switches: u64,
    /// Switches of processors taken by force (overload control, section 4.5).
    pub forced: u64,
    /// Grants satisfied by unmarking / reclaiming a processor of the service itself.
    pub unmarked: u64,
    pub hi_grants: u64,
    pub hi_refused: u64,
    pub lo_grants: u64,
    /// Everest-LD triggers (late packet observed, t_sw since the last allocation).
    pub late_triggers: u64,
    pub quantum_expiries: u64,
}

const NONE: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PState {
    Idle,
    Busy,
    Switching,
}

#[derive(Clone, Debug)]
struct Proc {
    owner: u32,
    state: PState,
    /// Busy with a packet of `serving`; `leave` when it must switch to `owner` afterwards.
    serving: u32,
    leave: bool,
    /// Marked (Everest) / released (eager policies) since this time, or NONE.
    avail_since: u64,
    /// When the current allocation began (LRA among committed processors, quantum start).
    granted_at: u64,
    switch_start: u64,
    /// Generation of the quantum timer.
    qgen: u32,
}

#[derive(Clone, Debug)]
struct Svc {
    t_pkt: u64,
    tolerance: u64,
    /// floor(D / t_pkt) - 1, at least 0: Q_lim^j = j * lim_unit (eq 3).
    lim_unit: u64,
    /// G^i x N_p rounded (the guaranteed processors of overload control).
    guaranteed: u32,
    guarantee: f64,
    /// Waiting packets (not yet on a processor).
    q: u64,
    /// Processors allocated to the service (including marked and incoming ones).
    owned: u32,
    /// Of those, marked / released.
    avail: u32,
    /// Of those, still switching to it (or finishing a packet of the previous owner).
    incoming: u32,
    /// Idle, ready processors owned by the service.
    idle: Vec<u32>,
    /// Arrival times within the last Delta.
    window: VecDeque<u64>,
    /// Everest-LD only: arrival times of the waiting packets (to observe the moment the oldest
    /// one's delay passes D).
    waiting: VecDeque<u64>,
    last_grant: u64,
}

impl Svc {
    /// R_arr(Delta) x t_pkt: processors the current arrival rate needs (eq 6), counting the
    /// arrivals in (now - Delta, now].
    fn rate_need(&self, now: u64, delta: u64) -> f64 {
        // Usually nothing has left the window since the last arrival pruned it.
        let old = match self.window.front() {
            Some(&t) if t + delta <= now => self.window.partition_point(|&t| t + delta <= now),
            _ => 0,
        };
        (self.window.len() - old) as f64 * self.t_pkt as f64 / delta as f64
    }
    fn committed(&self) -> u32 {
        self.owned - self.avail
    }
    /// Q_lim^j for j committed processors (eq 3).
    fn q_lim(&self) -> u64 {
        self.committed() as u64 * self.lim_unit
    }
}

/// The allocator (see the module documentation).
#[derive(Clone, Debug)]
pub struct Allocator {
    policy: Policy,
    t_sw: u64,
    /// Measured switch time (mean of completed switches; the configured one before any).
    t_sw_sum: u64,
    t_sw_n: u64,
    delta: u64,
    procs: Vec<Proc>,
    svcs: Vec<Svc>,
    /// Quantum expiries (time, processor, generation), in time order (constant quantum).
    expiries: VecDeque<(u64, u32, u32)>,
    /// Everest-LD: when a waiting packet next becomes late (or the t_sw spacing ends).
    ld_wakeup: u64,
    stats: AllocStats,
    /// The last `now` given; an earlier one is refused.
    clock: Clock,
    /// Scratch for [`Allocator::mark`]: candidate processors with their sort keys.
    picks: Vec<(u64, u64, usize)>,
}

impl Allocator {
    /// An allocator with the processors spread over the services by [`guarantee::round_shares`]
    /// of the guarantees, every processor loaded and idle; for every policy but Static they
    /// start marked / released (nothing is committed before traffic arrives).
    pub fn new(cfg: &AllocConfig) -> Result<Self, AllocError> {
        let (np, ns) = (cfg.processors, cfg.services.len());
        if np == 0 || ns == 0 {
            return Err(AllocError::Empty { processors: np, services: ns });
        }
        if ns > u16::MAX as usize || np > i32::MAX as u32 {
            return Err(AllocError::TooLarge);
        }
        if cfg.delta.is_zero() {
            return Err(AllocError::ZeroDelta);
        }
        if let Policy::Quantum { quantum } = cfg.policy {
            if quantum.is_zero() {
                return Err(AllocError::ZeroQuantum);
            }
        }
        for (i, s) in cfg.services.iter().enumerate() {
            if s.t_pkt.is_zero() {
                return Err(AllocError::ZeroTpkt { service: i });
            }
            if !s.guarantee.is_finite() || s.guarantee < 0.0 {
                return Err(AllocError::BadGuarantee { service: i, value: s.guarantee });
            }
        }
        let shares: Vec<f64> = cfg.services.iter().map(|s| s.guarantee).collect();
        let counts = guarantee::round_shares(&shares, np);
        let marked = cfg.policy != Policy::Static;
        let mut procs = Vec::with_capacity(np as usize);
        let mut svcs: Vec<Svc> = cfg
            .services
            .iter()
            .zip(&counts)
            .map(|(s, &c)| {
                let t = s.t_pkt.as_nanos();
                Svc {
                    t_pkt: t,
                    tolerance: s.tolerance.as_nanos(),
                    lim_unit: (s.tolerance.as_nanos() / t).saturating_sub(1),
                    guaranteed: c,
                    guarantee: s.guarantee,
                    q: 0,
                    owned: 0,
                    avail: 0,
                    incoming: 0,
                    idle: Vec::with_capacity(np as usize),
                    window: VecDeque::new(),
                    waiting: VecDeque::new(),
                    last_grant: NONE,
                }
            })
            .collect();
        for (i, &c) in counts.iter().enumerate() {
            for _ in 0..c {
                let p = procs.len() as u32;
                procs.push(Proc {
                    owner: i as u32,
                    state: PState::Idle,
                    serving: i as u32,
                    leave: false,
                    avail_since: if marked { 0 } else { NONE },
                    granted_at: 0,
                    switch_start: 0,
                    qgen: 0,
                });
                let s = &mut svcs[i];
                s.owned += 1;
                s.avail += marked as u32;
                s.idle.push(p);
            }
        }
        Ok(Allocator {
            policy: cfg.policy,
            t_sw: cfg.t_sw.as_nanos(),
            t_sw_sum: 0,
            t_sw_n: 0,
            delta: cfg.delta.as_nanos(),
            procs,
            svcs,
            expiries: VecDeque::new(),
            ld_wakeup: NONE,
            stats: AllocStats::default(),
            clock: Clock::default(),
            picks: Vec::new(),
        })
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }
    pub fn stats(&self) -> AllocStats {
        self.stats
    }
    pub fn processors(&self) -> usize {
        self.procs.len()
    }
    pub fn services(&self) -> usize {
        self.svcs.len()
    }
    /// Waiting packets of service `s` (0 for an unknown service: queries never fail).
    pub fn queue_len(&self, s: ServiceId) -> u64 {
        self.svcs.get(s.index()).map_or(0, |v| v.q)
    }
    /// Processors allocated to `s` (N_alloc^i, marked and incoming included).
    pub fn allocated(&self, s: ServiceId) -> u32 {
        self.svcs.get(s.index()).map_or(0, |v| v.owned)
    }
    /// Committed (unmarked, not released) processors of `s`: the `j` of Q_lim^j.
    pub fn committed(&self, s: ServiceId) -> u32 {
        self.svcs.get(s.index()).map_or(0, |v| v.committed())
    }
    /// Guaranteed processors of `s` (G^i x N_p rounded).
    pub fn guaranteed(&self, s: ServiceId) -> u32 {
        self.svcs.get(s.index()).map_or(0, |v| v.guaranteed)
    }
    /// Q_lim^j of `s` at its current committed allocation (eq 3).
    pub fn q_lim(&self, s: ServiceId) -> u64 {
        self.svcs.get(s.index()).map_or(0, |v| v.q_lim())
    }
    /// The service processor `p` is allocated to (`None` for an unknown processor).
    pub fn owner(&self, p: ProcessorId) -> Option<ServiceId> {
        self.procs.get(p.index()).map(|x| ServiceId(x.owner))
    }
    /// The switch time the allocator currently assumes (measured mean once a switch has been
    /// reported done).
    pub fn t_sw_estimate(&self) -> u64 {
        self.t_sw_sum.checked_div(self.t_sw_n).unwrap_or(self.t_sw)
    }

    /// When [`Allocator::timer`] must next be called (quantum expiries; for Everest-LD the
    /// moment the oldest waiting packet of a service passes its tolerance), if ever.
    pub fn next_wakeup(&self) -> Option<Instant> {
        let q = self.expiries.front().map_or(NONE, |e| e.0);
        let t = q.min(self.ld_wakeup);
        (t != NONE).then(|| Instant::from_nanos(t))
    }

    /// Everest-LD: the earliest instant a waiting packet is observed late (its delay exceeds
    /// D) and the service may receive a processor (t_sw since its last one).
    fn ld_refresh(&mut self) {
        if self.policy != Policy::EverestLd {
            return;
        }
        let mut t = NONE;
        for v in &self.svcs {
            if let Some(&head) = v.waiting.front() {
                let late_at = head + v.tolerance + 1;
                let allowed = if v.last_grant == NONE { 0 } else { v.last_grant + self.t_sw };
                t = t.min(late_at.max(allowed));
            }
        }
        self.ld_wakeup = t;
    }

    /// Everest-LD's observation-based trigger for service `s` (a packet of it is late now).
    fn ld_trigger(&mut self, s: usize, now: u64, out: &mut Vec<Action>) {
        let last = self.svcs[s].last_grant;
        if last != NONE && now - last < self.t_sw {
            return;
        }
        self.stats.late_triggers += 1;
        if self.grant(s, now, true, out).is_some() {
            self.stats.hi_grants += 1;
        } else {
            self.stats.hi_refused += 1;
        }
        // Spaced by t_sw whether or not a processor could be found (a refused request is retried
        // after t_sw, not at every event).
        self.svcs[s].last_grant = now;
    }

    /// A packet of service `s` arrived at `now`.
    ///
    /// Errors (the call then has no effect): an unknown service, `now` before a time already
    /// given.
    pub fn arrival(&mut self, now: Instant, s: ServiceId, out: &mut Vec<Action>) -> Result<Trigger, Error> {
        let s = id::check(ServiceId::KIND, s.0, self.svcs.len())?;
        self.clock.advance(now)?;
        Ok(self.arrival_at(now, s, out))
    }

    fn arrival_at(&mut self, now: Instant, s: usize, out: &mut Vec<Action>) -> Trigger {
        let now = now.as_nanos();
        let delta = self.delta;
        let svc = &mut self.svcs[s];
        svc.q += 1;
        svc.window.push_back(now);
        while svc.window.front().is_some_and(|&t| t + delta <= now) {
            svc.window.pop_front();
        }
        if self.policy == Policy::EverestLd {
            svc.waiting.push_back(now);
        }
        self.dispatch(s, now, out);
        self.ld_refresh();
        match self.policy {
            Policy::Static | Policy::EverestLd => Trigger::None,
            Policy::Everest | Policy::EverestAe | Policy::Adaptive => {
                let mut trig = Trigger::None;
                while self.svcs[s].q > self.svcs[s].q_lim() {
                    match self.grant(s, now, true, out) {
                        Some(clean) => {
                            self.stats.hi_grants += 1;
                            if trig == Trigger::None {
                                trig = Trigger::Hi { clean };
                            }
                        }
                        None => {
                            if trig == Trigger::None {
                                self.stats.hi_refused += 1;
                                trig = Trigger::HiRefused;
                            }
                            break;
                        }
                    }
                }
                if trig == Trigger::None && self.lo_eligible(s) && self.grant(s, now, false, out).is_some() {
                    self.stats.lo_grants += 1;
                    trig = Trigger::Lo;
                }
                trig
            }
            Policy::CohortE | Policy::Quantum { .. } => {
                if self.lo_eligible(s) && self.grant(s, now, false, out).is_some() {
                    self.stats.lo_grants += 1;
                    Trigger::Lo
                } else {
                    Trigger::None
                }
            }
        }
    }

    /// `n` waiting packets of service `s` left its queue at `now` without a processor (an
    /// active queue manager dropped them, FQ-CoDel's round in the router): the service's queue
    /// shrinks as if they had been served, and a queue left empty is marked as a serve that
    /// empties it is (the everest policies' bookkeeping of idle processors).
    ///
    /// Errors (no effect): an unknown service, more packets than wait, `now` before a time
    /// already given.
    pub fn withdrawn(&mut self, now: Instant, s: ServiceId, n: u64, out: &mut Vec<Action>) -> Result<(), Error> {
        let s = id::check(ServiceId::KIND, s.0, self.svcs.len())?;
        if n > self.svcs[s].q {
            return Err(Error::NotAllowed("withdrawn(): more packets than the service has waiting"));
        }
        self.clock.advance(now)?;
        if n == 0 {
            return Ok(());
        }
        let now = now.as_nanos();
        let svc = &mut self.svcs[s];
        svc.q -= n;
        for _ in 0..n {
            svc.waiting.pop_front();
        }
        if svc.q == 0 && self.policy.marks() && !self.eager(s) {
            self.mark(s, now);
            self.beneficiaries(now, out);
        }
        self.ld_refresh();
        Ok(())
    }

    /// Processor `p` finished a packet at `now` that had arrived `delay` earlier.
    ///
    /// Errors (no effect): an unknown processor, one that is not busy with a packet, `now`
    /// before a time already given.
    pub fn completed(
        &mut self,
        now: Instant,
        p: ProcessorId,
        delay: Duration,
        out: &mut Vec<Action>,
    ) -> Result<(), Error> {
        let p = id::check(ProcessorId::KIND, p.0, self.procs.len())?;
        if self.procs[p].state != PState::Busy {
            return Err(Error::NotAllowed("completed(): the processor is not busy with a packet"));
        }
        self.clock.advance(now)?;
        self.completed_at(now, p, delay, out);
        Ok(())
    }

    fn completed_at(&mut self, now: Instant, p: usize, delay: Duration, out: &mut Vec<Action>) {
        let now = now.as_nanos();
        let pr = &mut self.procs[p];
        debug_assert_eq!(pr.state, PState::Busy);
        let served = pr.serving as usize;
        if pr.leave {
            pr.leave = false;
            pr.state = PState::Switching;
            pr.switch_start = now;
            out.push(Action::Switch {
                proc: ProcessorId(p as u32),
                from: ServiceId(served as u32),
                to: ServiceId(pr.owner),
            });
        } else {
            pr.state = PState::Idle;
            let owner = pr.owner as usize;
            self.svcs[owner].idle.push(p as u32);
            self.dispatch(owner, now, out);
            if self.eager(owner) && self.procs[p].state == PState::Idle {
                self.release(p, now);
                self.beneficiaries(now, out);
            }
        }
        if self.policy == Policy::EverestLd {
            if delay.as_nanos() > self.svcs[served].tolerance {
                self.ld_trigger(served, now, out);
            }
            self.ld_refresh();
        }
    }

    /// Processor `p` finished its context switch at `now` and serves its new service.
    ///
    /// Errors (no effect): an unknown processor, one that is not switching, `now` before a
    /// time already given.
    pub fn switch_done(&mut self, now: Instant, p: ProcessorId, out: &mut Vec<Action>) -> Result<(), Error> {
        let p = id::check(ProcessorId::KIND, p.0, self.procs.len())?;
        if self.procs[p].state != PState::Switching {
            return Err(Error::NotAllowed("switch_done(): the processor is not switching"));
        }
        self.clock.advance(now)?;
        self.switch_done_at(now, p, out);
        Ok(())
    }

    fn switch_done_at(&mut self, now: Instant, p: usize, out: &mut Vec<Action>) {
        let now = now.as_nanos();
        let pr = &mut self.procs[p];
        debug_assert_eq!(pr.state, PState::Switching);
        self.t_sw_sum += now - pr.switch_start;
        self.t_sw_n += 1;
        pr.state = PState::Idle;
        pr.serving = pr.owner;
        let s = pr.owner as usize;
        self.svcs[s].incoming -= 1;
        self.svcs[s].idle.push(p as u32);
        self.start_quantum(p, now);
        self.dispatch(s, now, out);
        if self.procs[p].state == PState::Idle {
            if self.eager(s) {
                self.release(p, now);
            }
            self.beneficiaries(now, out);
        }
        self.ld_refresh();
    }

    /// Timer work due at `now`: quantum expiries (Quantum) and late observations (Everest-LD).
    ///
    /// Errors (no effect): `now` before a time already given. Calling it early is harmless.
    pub fn timer(&mut self, now: Instant, out: &mut Vec<Action>) -> Result<(), Error> {
        self.clock.advance(now)?;
        self.timer_at(now, out);
        Ok(())
    }

    fn timer_at(&mut self, now: Instant, out: &mut Vec<Action>) {
        let now = now.as_nanos();
        if self.policy == Policy::EverestLd && self.ld_wakeup <= now {
            for s in 0..self.svcs.len() {
                let v = &self.svcs[s];
                if v.waiting.front().is_some_and(|&h| now - h > v.tolerance) {
                    self.ld_trigger(s, now, out);
                }
            }
            self.ld_refresh();
        }
        while let Some(&(t, p, g)) = self.expiries.front() {
            if t > now {
                break;
            }
            self.expiries.pop_front();
            let pr = &self.procs[p as usize];
            if pr.qgen != g || pr.avail_since != NONE || pr.state == PState::Switching || pr.leave {
                continue; // stale: reassigned, released or moving since
            }
            self.stats.quantum_expiries += 1;
            let own = pr.owner as usize;
            // Beneficiary: eligible service furthest below its share G^i, counting p as free.
            let mut best: Option<(usize, f64)> = None;
            for k in 0..self.svcs.len() {
                if !self.lo_eligible(k) && k != own {
                    continue;
                }
                if k == own && self.svcs[k].q == 0 {
                    continue;
                }
                let held = self.svcs[k].owned as f64 - (k == own) as u8 as f64;
                let score = held / self.svcs[k].guarantee.max(1e-9);
                if best.is_none_or(|(_, b)| score < b) {
                    best = Some((k, score));
                }
            }
            match best {
                Some((k, _)) if k != own => {
                    self.reassign(p as usize, k, now, out);
                }
                _ => self.start_quantum(p as usize, now),
            }
        }
    }

    /// Checks the bookkeeping (counts match the processors). For tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        let ns = self.svcs.len();
        let (mut owned, mut avail, mut incoming, mut idle) =
            (vec![0u32; ns], vec![0u32; ns], vec![0u32; ns], vec![0u32; ns]);
        for (i, p) in self.procs.iter().enumerate() {
            let o = p.owner as usize;
            owned[o] += 1;
            avail[o] += (p.avail_since != NONE) as u32;
            incoming[o] += (p.state == PState::Switching || p.leave) as u32;
            if p.state == PState::Idle {
                idle[o] += 1;
                if !self.svcs[o].idle.contains(&(i as u32)) {
                    return Err(format!("processor {i} idle but not in the idle list of {o}"));
                }
                if self.svcs[o].q > 0 {
                    return Err(format!("processor {i} idle while service {o} has {} waiting", self.svcs[o].q));
                }
            }
            if p.leave && p.state != PState::Busy {
                return Err(format!("processor {i} leaving but not busy"));
            }
            if self.policy == Policy::Static && p.avail_since != NONE {
                return Err(format!("static processor {i} marked"));
            }
        }
        for (k, s) in self.svcs.iter().enumerate() {
            if s.owned != owned[k] || s.avail != avail[k] || s.incoming != incoming[k] || s.idle.len() as u32 != idle[k]
            {
                return Err(format!(
                    "service {k}: owned {}/{} avail {}/{} incoming {}/{} idle {}/{}",
                    s.owned,
                    owned[k],
                    s.avail,
                    avail[k],
                    s.incoming,
                    incoming[k],
                    s.idle.len(),
                    idle[k]
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
