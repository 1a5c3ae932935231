//! Locality-aware processor scheduling (predictive section 5): LAP, FCFS and T-Opt over `n`
//! distinct processors, each with an instruction cache that holds one application.
//!
//! A processor's cache is *cold* for a packet when the last application it ran is another one
//! (or none); the caller adds the penalty `pi_a` to such a packet's processing time.
//!
//! * **FCFS**: a free processor takes the oldest packet the scheduler knows of.
//! * **LAP** (eq 19): the processors are partitioned into application groups in proportion to
//!   the estimated work `W_a = sum t_e` of each application's packets in `Q_t`, recomputed at
//!   every decision: application `a`'s target is `f_a n` rounded to the nearest integer, as the
//!   paper says (each share rounded on its own, so the targets may sum to more or less than
//!   `n`). `c_a` counts the processors whose cache holds `a`. A free processor keeps its
//!   application (warm) unless that application has no packet in `Q_t`, or its group is over
//!   target (`c_w > round(f_w n)`) while another application is under target; it then joins the
//!   application with the largest `W_b / (c_b + 1/2)` (cold). Both tests are read off that one
//!   quantity: `round(f_b n) > c_b` exactly when `W_b / (c_b + 1/2) >= W / n`, and
//!   `c_w > round(f_w n)` exactly when `W_w / (c_w - 1/2) < W / n`. Within an application,
//!   packets go oldest first.
//! * **T-Opt**: the caller shows the scheduler the whole stream; a processor never leaves an
//!   application while it has packets, so the only cold caches are the first packet of a
//!   processor and a processor whose application ran out (section 5.1.1: "executes all
//!   packets of one application before it switches").
//!
//! Data structures (section 5.2.7): per application a FIFO of its packets in age order, its
//! estimated work `W_a` and its warm-processor count `c_a`, all updated in O(1) per packet;
//! FCFS adds one FIFO of all packets. Choosing the application with the largest
//! `W_b / (c_b + 1/2)` is a max-heap with lazy deletion over applications: O(log A) per packet,
//! compacted when stale entries outnumber applications (the paper leaves this choice open; a
//! linear scan would make the cost grow with the number of applications).
//!
//! Packets may also be removed by id ([`LapScheduler::remove`]) when another scheduler (EFQ in
//! the section 6 combination) served them; ids must increase with enqueue order.

use crate::error::Error;
use crate::id::{check, AppId, ProcessorId};
use crate::ord::TotalF64;
use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

/// Which packet a free processor gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Policy {
    /// First come, first served: the oldest packet.
    Fcfs,
    /// Locality-aware predictive scheduling (eq 19).
    Lap,
    /// Throughput-optimal: never leave an application that still has packets (the caller
    /// enqueues the whole stream).
    TOpt,
}

impl Policy {
    /// Short name used in results.
    pub fn label(&self) -> &'static str {
        match self {
            Policy::Fcfs => "fcfs",
            Policy::Lap => "lap",
            Policy::TOpt => "t-opt",
        }
    }
}

/// A packet waiting for a processor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LapPacket {
    /// Caller's identifier; must increase with enqueue order.
    pub id: u64,
    /// Its application.
    pub app: AppId,
    /// Estimated processing time t_e (any unit, the same for every packet; warm).
    pub est: f64,
}

/// A scheduling decision.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pick {
    pub packet: LapPacket,
    /// The processor's cache was cold for the packet's application.
    pub cold: bool,
}

#[derive(Clone, Debug, Default)]
struct App {
    queue: VecDeque<LapPacket>,
    /// Estimated work of the queued packets (removed ones excluded).
    work: f64,
    /// Live packets (removed ones excluded).
    live: usize,
    /// Processors whose cache holds this application.
    warm: u32,
    version: u64,
}

/// Heap entry: (W / (c + 1/2), oldest live id, app, version); larger key first, then older.
/// The version is not part of the order: a stale claim is recognised when it surfaces.
#[derive(Clone, Copy, Debug)]
struct Claim(f64, u64, u32, u64);
impl Claim {
    fn key(&self) -> (TotalF64, Reverse<u64>, Reverse<u32>) {
        (TotalF64(self.0), Reverse(self.1), Reverse(self.2))
    }
}
impl PartialEq for Claim {
    fn eq(&self, o: &Self) -> bool {
        self.key() == o.key()
    }
}
impl Eq for Claim {}
impl PartialOrd for Claim {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Claim {
    fn cmp(&self, o: &Self) -> Ordering {
        self.key().cmp(&o.key())
    }
}

/// The LAP / FCFS / T-Opt scheduler.
#[derive(Clone, Debug)]
pub struct LapScheduler {
    policy: Policy,
    apps: Vec<App>,
    /// Application in each processor's cache.
    cache: Vec<Option<u32>>,
    /// FCFS only: every packet by age, as (id, app); entries of removed packets are skipped.
    order: VecDeque<(u64, u32)>,
    /// Ids removed from the middle of an application's queue, dropped when they reach its front.
    removed: std::collections::HashSet<u64, foldhash::fast::FixedState>,
    claims: BinaryHeap<Claim>,
    /// W: estimated work of every waiting packet.
    total: f64,
    len: usize,
    last_id: Option<u64>,
}

impl LapScheduler {
    /// A scheduler for `apps` applications on `processors` processors, all caches empty.
    pub fn new(policy: Policy, apps: usize, processors: u32) -> Result<Self, Error> {
        if processors == 0 {
            return Err(Error::BadParameter { parameter: "processors", value: "0".into(), expected: "at least 1" });
        }
        if apps == 0 || apps > u32::MAX as usize {
            return Err(Error::BadParameter {
                parameter: "applications",
                value: apps.to_string(),
                expected: "from 1 to 2^32 - 1",
            });
        }
        Ok(LapScheduler {
            policy,
            apps: vec![App::default(); apps],
            cache: vec![None; processors as usize],
            order: VecDeque::new(),
            removed: Default::default(),
            claims: BinaryHeap::new(),
            total: 0.0,
            len: 0,
            last_id: None,
        })
    }

    /// The policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Estimated work of every waiting packet (the denominator of eq 19).
    pub fn total_work(&self) -> f64 {
        self.total
    }

    /// Packets waiting (`|Q_t|`).
    pub fn len(&self) -> usize {
        self.len
    }

    /// No packet waiting.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Applications it was built for.
    pub fn apps(&self) -> usize {
        self.apps.len()
    }

    /// Estimated work of application `a`'s waiting packets (the numerator of eq 19); 0 for an
    /// unknown application.
    pub fn work(&self, a: AppId) -> f64 {
        self.apps.get(a.index()).map_or(0.0, |x| x.work)
    }

    /// Processors whose cache holds application `a` (its group size); 0 for an unknown one.
    pub fn group(&self, a: AppId) -> u32 {
        self.apps.get(a.index()).map_or(0, |x| x.warm)
    }

    /// Application in processor `p`'s cache (`None` also for an unknown processor).
    pub fn cache(&self, p: ProcessorId) -> Option<AppId> {
        self.cache.get(p.index()).copied().flatten().map(AppId)
    }

    /// A packet entered `Q_t`. Refused (no effect): an unknown application, an estimate that is
    /// negative or not finite (or above 1e15), an id not larger than the previous packet's.
    pub fn enqueue(&mut self, p: LapPacket) -> Result<(), Error> {
        let ai = check(AppId::KIND, p.app.0, self.apps.len())?;
        if !(p.est.is_finite() && (0.0..=1e15).contains(&p.est)) {
            return Err(Error::BadParameter { parameter: "est", value: p.est.to_string(), expected: "from 0 to 1e15" });
        }
        if self.last_id.is_some_and(|last| p.id <= last) {
            return Err(Error::NotAllowed("enqueue: packet ids must increase with enqueue order"));
        }
        self.last_id = Some(p.id);
        let a = &mut self.apps[ai];
        a.queue.push_back(p);
        a.work += p.est;
        a.live += 1;
        self.total += p.est;
        self.len += 1;
        if self.policy == Policy::Fcfs {
            self.order.push_back((p.id, p.app.0));
        }
        self.refile(p.app.0);
        Ok(())
    }

    /// Processor `proc` is free: the packet it runs next, if any waits. The processor's cache
    /// then holds the packet's application.
    pub fn dispatch(&mut self, proc: ProcessorId) -> Result<Option<Pick>, Error> {
        let proc = check(ProcessorId::KIND, proc.0, self.cache.len())? as u32;
        if self.len == 0 {
            return Ok(None);
        }
        let app = match self.policy {
            Policy::Fcfs => self.oldest_app(),
            Policy::Lap | Policy::TOpt => self.choose(proc),
        };
        let packet = self.pop_front(app);
        let cold = self.set_cache(proc, app);
        Ok(Some(Pick { packet, cold }))
    }

    /// Removes waiting packet `id` of application `app`, served elsewhere (the EFQ side of the
    /// section 6 combination). Returns whether it was waiting.
    pub fn remove(&mut self, app: AppId, id: u64) -> Result<bool, Error> {
        let app = check(AppId::KIND, app.0, self.apps.len())? as u32;
        self.clean_front(app);
        let q = &mut self.apps[app as usize].queue;
        let est;
        if q.front().map(|p| p.id) == Some(id) {
            est = q.pop_front().map_or(0.0, |p| p.est);
        } else {
            // The queue is in id order: a binary search tells whether the packet waits; it is
            // marked and skipped when it reaches the front.
            match q.binary_search_by_key(&id, |p| p.id) {
                Ok(i) if !self.removed.contains(&id) => est = q[i].est,
                _ => return Ok(false),
            }
            self.removed.insert(id);
        }
        let a = &mut self.apps[app as usize];
        a.work = (a.work - est).max(0.0);
        a.live -= 1;
        if a.live == 0 {
            a.work = 0.0;
        }
        self.take_total(est);
        self.clean_front(app);
        self.refile(app);
        Ok(true)
    }

    /// Processor `proc` runs a packet of application `app` (chosen by someone else, e.g. EFQ):
    /// updates the group sizes. Returns whether the cache was cold.
    pub fn assign(&mut self, proc: ProcessorId, app: AppId) -> Result<bool, Error> {
        let proc = check(ProcessorId::KIND, proc.0, self.cache.len())? as u32;
        let app = check(AppId::KIND, app.0, self.apps.len())? as u32;
        Ok(self.set_cache(proc, app))
    }

    fn set_cache(&mut self, proc: u32, app: u32) -> bool {
        let prev = self.cache[proc as usize].replace(app);
        if prev == Some(app) {
            return false;
        }
        if let Some(w) = prev {
            self.apps[w as usize].warm -= 1;
            self.refile(w);
        }
        self.apps[app as usize].warm += 1;
        self.refile(app);
        true
    }

    /// The application of the oldest waiting packet (FCFS).
    fn oldest_app(&mut self) -> u32 {
        loop {
            let &(id, app) = self.order.front().expect("a packet waits");
            self.clean_front(app);
            if self.apps[app as usize].queue.front().map(|p| p.id) == Some(id) {
                return app;
            }
            self.order.pop_front();
        }
    }

    /// LAP / T-Opt: the application processor `proc` serves next.
    fn choose(&mut self, proc: u32) -> u32 {
        let w = self.cache[proc as usize];
        if let Some(w) = w {
            let aw = &self.apps[w as usize];
            if aw.live > 0 {
                if self.policy == Policy::TOpt {
                    return w;
                }
                // One processor's worth of the queued work: W / n.
                let unit = self.total / self.cache.len() as f64;
                // This processor counts in c_w, so c_w >= 1.
                let over_target = aw.work / (aw.warm as f64 - 0.5) < unit;
                if over_target {
                    if let Some((b, claim)) = self.best_excluding(Some(w)) {
                        if claim >= unit {
                            return b;
                        }
                    }
                }
                return w;
            }
        }
        self.best_excluding(w).map(|(b, _)| b).expect("a packet waits, so some application has work")
    }

    /// The application with the largest claim `W / (c + 1/2)` other than `skip`, with work.
    fn best_excluding(&mut self, skip: Option<u32>) -> Option<(u32, f64)> {
        let mut held = None;
        let found = loop {
            let Some(&c) = self.claims.peek() else { break None };
            if !self.valid(&c) {
                self.claims.pop();
                continue;
            }
            if Some(c.2) == skip && held.is_none() {
                held = self.claims.pop();
                continue;
            }
            break Some((c.2, c.0));
        };
        if let Some(h) = held {
            self.claims.push(h);
        }
        found
    }

    fn valid(&self, c: &Claim) -> bool {
        let a = &self.apps[c.2 as usize];
        a.version == c.3 && a.live > 0
    }

    /// Files application `a`'s current claim (its old entries become stale).
    fn refile(&mut self, a: u32) {
        if self.policy == Policy::Fcfs {
            return;
        }
        let app = &mut self.apps[a as usize];
        app.version += 1;
        if app.live > 0 {
            let oldest = app.queue.front().map(|p| p.id).unwrap_or(u64::MAX);
            let claim = app.work / (app.warm as f64 + 0.5);
            self.claims.push(Claim(claim, oldest, a, app.version));
        }
        if self.claims.len() > 4 * self.apps.len() + 64 {
            self.compact();
        }
    }

    /// Rebuilds the heap from the live claims.
    fn compact(&mut self) {
        let mut v = std::mem::take(&mut self.claims).into_vec();
        v.retain(|c| self.valid(c));
        self.claims = BinaryHeap::from(v);
    }

    /// Drops removed packets from the front of application `a`'s queue.
    fn clean_front(&mut self, a: u32) {
        if self.removed.is_empty() {
            return;
        }
        let q = &mut self.apps[a as usize].queue;
        while let Some(p) = q.front() {
            if !self.removed.remove(&p.id) {
                break;
            }
            q.pop_front();
        }
    }

    fn pop_front(&mut self, app: u32) -> LapPacket {
        self.clean_front(app);
        let a = &mut self.apps[app as usize];
        let p = a.queue.pop_front().expect("application has a live packet");
        a.work -= p.est;
        a.live -= 1;
        if a.live == 0 {
            // No drift: an empty application owes no work.
            a.work = 0.0;
        }
        self.take_total(p.est);
        self.clean_front(app);
        self.refile(app);
        p
    }

    fn take_total(&mut self, est: f64) {
        self.len -= 1;
        self.total = if self.len == 0 { 0.0 } else { (self.total - est).max(0.0) };
    }
}
