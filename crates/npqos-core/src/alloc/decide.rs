//! The allocator's decisions: which processor serves which service next, marking and
//! releasing processors, granting (with overload control) and quantum expiries. The policies
//! these implement are described in the module documentation of [`super`]; the public calls
//! that lead here are in `mod.rs`.

use super::*;

impl Allocator {
    /// Serves waiting packets of `s` on its idle processors.
    pub(super) fn dispatch(&mut self, s: usize, now: u64, out: &mut Vec<Action>) {
        let eager = self.eager(s);
        let quantum = matches!(self.policy, Policy::Quantum { .. });
        while self.svcs[s].q > 0 {
            let Some(p) = self.svcs[s].idle.pop() else { break };
            self.svcs[s].q -= 1;
            self.svcs[s].waiting.pop_front();
            let pr = &mut self.procs[p as usize];
            pr.state = PState::Busy;
            pr.serving = s as u32;
            out.push(Action::Serve { proc: ProcessorId(p), service: ServiceId(s as u32) });
            if eager && pr.avail_since != NONE {
                // A released processor taken back by its own service (locality, no switch).
                pr.avail_since = NONE;
                pr.granted_at = now;
                self.svcs[s].avail -= 1;
                if quantum {
                    self.start_quantum(p as usize, now);
                }
            }
            if self.svcs[s].q == 0 && self.policy.marks() && !eager {
                self.mark(s, now);
                self.beneficiaries(now, out);
            }
        }
    }

    /// Does service `s` release a processor as soon as it has nothing to serve (Quantum,
    /// Cohort-E, Everest-AE; Adaptive while `t_sw <= D / ADAPTIVE_EAGER_RATIO`)?
    pub(super) fn eager(&self, s: usize) -> bool {
        self.policy.eager_release()
            || (self.policy == Policy::Adaptive
                && self.t_sw_estimate().saturating_mul(ADAPTIVE_EAGER_RATIO) <= self.svcs[s].tolerance)
    }

    /// Low-priority eligibility: eager `q_len > incoming` (Cohort-E, Quantum, Everest-AE), or
    /// Adaptive's "the backlog outlasts a switch".
    pub(super) fn lo_eligible(&self, s: usize) -> bool {
        let svc = &self.svcs[s];
        match self.policy {
            // (Always eager for the first three; Adaptive only while switches are short.)
            Policy::CohortE | Policy::Quantum { .. } | Policy::EverestAe | Policy::Adaptive if self.eager(s) => {
                svc.q > svc.incoming as u64
            }
            Policy::Adaptive => {
                let per = self.t_sw_estimate() / svc.t_pkt;
                svc.q > svc.incoming as u64 && svc.q > svc.committed() as u64 * per
            }
            _ => false,
        }
    }

    /// Everest's marking on an empty queue (eq 6, Algorithm 1 line 7).
    pub(super) fn mark(&mut self, s: usize, now: u64) {
        let svc = &self.svcs[s];
        let j = svc.owned as f64;
        let need = svc.rate_need(now, self.delta);
        let k = (j - need).floor().clamp(0.0, j) as u32;
        let avail = svc.avail;
        if avail == k {
            return;
        }
        // Every candidate's key is unique and marking (or unmarking) one changes no other
        // key, so taking the best one at a time is taking the best `n` at once (in any order: they
        // all change alike).
        let mut picks = std::mem::take(&mut self.picks);
        picks.clear();
        let n = avail.abs_diff(k) as usize;
        if avail > k {
            // Unmark the most recently marked first.
            for (p, pr) in self.procs.iter().enumerate() {
                if pr.owner as usize == s && pr.avail_since != NONE {
                    picks.push((u64::MAX - pr.avail_since, 0, usize::MAX - p));
                }
            }
            debug_assert!(picks.len() >= n, "avail counts the marked processors");
            best_first(&mut picks, n);
            for &(_, _, p) in &picks[..n] {
                self.procs[usize::MAX - p].avail_since = NONE;
            }
            self.svcs[s].avail -= n as u32;
        } else {
            // Mark idle ones first, then busy, then incoming; latest grant first.
            for (p, pr) in self.procs.iter().enumerate() {
                if pr.owner as usize == s && pr.avail_since == NONE {
                    let class = match (pr.state, pr.leave) {
                        (PState::Idle, _) => 0,
                        (PState::Busy, false) => 1,
                        _ => 2,
                    };
                    picks.push((class, u64::MAX - pr.granted_at, p));
                }
            }
            debug_assert!(picks.len() >= n, "owned - avail counts the unmarked processors");
            best_first(&mut picks, n);
            for &(_, _, p) in &picks[..n] {
                self.procs[p].avail_since = now;
            }
            self.svcs[s].avail += n as u32;
        }
        self.picks = picks;
    }

    /// An eager policy's processor went idle with an empty queue: released (stays loaded).
    pub(super) fn release(&mut self, p: usize, now: u64) {
        if self.procs[p].avail_since == NONE {
            self.procs[p].avail_since = now;
            let o = self.procs[p].owner as usize;
            self.svcs[o].avail += 1;
        }
    }

    /// Whether a processor can be taken now (not switching or about to).
    pub(super) fn movable(&self, p: usize) -> bool {
        let pr = &self.procs[p];
        pr.state != PState::Switching && !pr.leave
    }

    /// Gives one processor to `s`: its own marked one, else the marked / released one held
    /// longest (LRA), else (if `forced`) overload control. Returns whether the grant was
    /// clean (see [`Trigger::Hi`]), or `None` if nothing was granted.
    pub(super) fn grant(&mut self, s: usize, now: u64, forced: bool, out: &mut Vec<Action>) -> Option<bool> {
        let no_incoming = self.svcs[s].incoming == 0;
        // 1. Own marked processor: unmark (no switch).
        if self.svcs[s].avail > 0 {
            let p = (0..self.procs.len())
                .filter(|&p| self.procs[p].owner as usize == s && self.procs[p].avail_since != NONE)
                .max_by_key(|&p| {
                    (self.procs[p].state != PState::Switching && !self.procs[p].leave, self.procs[p].avail_since, p)
                })
                .expect("avail counts marked processors");
            let clean = no_incoming && self.movable(p);
            self.procs[p].avail_since = NONE;
            self.procs[p].granted_at = now;
            self.svcs[s].avail -= 1;
            self.stats.unmarked += 1;
            if matches!(self.policy, Policy::Quantum { .. }) {
                self.start_quantum(p, now);
            }
            return Some(clean);
        }
        // 2. The processor marked longest (LRA), among the movable ones of other services.
        let lra = (0..self.procs.len())
            .filter(|&p| self.procs[p].owner as usize != s && self.procs[p].avail_since != NONE && self.movable(p))
            .min_by_key(|&p| (self.procs[p].avail_since, p));
        if let Some(p) = lra {
            let clean = no_incoming && self.procs[p].state == PState::Idle;
            self.reassign(p, s, now, out);
            return Some(clean);
        }
        if !forced || self.policy == Policy::CohortE {
            return None;
        }
        // 3. Overload control (section 4.5).
        let victim = self.overload_victim(s, now)?;
        let p = (0..self.procs.len())
            .filter(|&p| self.procs[p].owner as usize == victim && self.movable(p))
            .min_by_key(|&p| (self.procs[p].state != PState::Idle, self.procs[p].granted_at, p))?;
        let clean = no_incoming && self.procs[p].state == PState::Idle;
        self.stats.forced += 1;
        self.reassign(p, s, now, out);
        Some(clean)
    }

    /// Overload control (everest section 4.5) for eligible service `s`: the service to take a
    /// processor from by force, if any.
    ///
    /// Step 1: every service is entitled to `N_newalloc^i = min(N_req^i, G^i N_p)` (whole
    /// processors, [`guarantee::round_shares`]), with `N_req^i = max(ceil(q / L), ceil(R_arr
    /// t_pkt))` and `L = floor(D / t_pkt) - 1`. A service below its entitlement takes a processor by force
    /// (interrupt) from a service holding more than its guaranteed allocation `G^i N_p`
    /// (section 4.2, forced release: "if a service is allocated processors beyond its
    /// guaranteed allocation, Everest can reclaim the extra processors ... to satisfy the
    /// guaranteed allocation of a different service"), the one furthest above it first, then
    /// the one with the smaller residual queue.
    ///
    /// Step 2, the extra processors to the largest residual queue `q - Q_lim^j`, hands out free
    /// (marked) processors only ("we allocate each free processor"): that is the beneficiary
    /// selection of [`Allocator::beneficiaries`], never a forced release. (Forcing extras too
    /// makes two backlogged services, or a backlogged and an occasional one, trade a processor
    /// back and forth at every arrival, paying `t_sw` each time.)
    pub(super) fn overload_victim(&self, s: usize, now: u64) -> Option<usize> {
        let np = self.procs.len() as u64;
        let me = &self.svcs[s];
        let by_queue = if me.lim_unit == 0 { me.q } else { me.q.div_ceil(me.lim_unit) };
        let by_rate = crate::time::ceil_u64(me.rate_need(now, self.delta));
        let entitled = (by_queue.max(by_rate).min(np) as u32).min(me.guaranteed);
        if me.owned >= entitled {
            return None;
        }
        let has_movable =
            |v: usize| (0..self.procs.len()).any(|p| self.procs[p].owner as usize == v && self.movable(p));
        let residual = |v: &Svc| v.q as i128 - (v.committed() as u64 * v.lim_unit) as i128;
        (0..self.svcs.len())
            .filter(|&v| v != s && self.svcs[v].owned > self.svcs[v].guaranteed && has_movable(v))
            .max_by_key(|&v| {
                let sv = &self.svcs[v];
                (sv.owned - sv.guaranteed, std::cmp::Reverse(residual(sv)), std::cmp::Reverse(v))
            })
    }

    /// After processors became free: give marked / released ones to eligible services, largest
    /// residual (or, for Cohort-E, largest deficit against a queue-proportional share) first.
    pub(super) fn beneficiaries(&mut self, now: u64, out: &mut Vec<Action>) {
        if self.policy == Policy::Static {
            return;
        }
        let hi_policy = matches!(self.policy, Policy::Everest | Policy::EverestAe | Policy::Adaptive);
        loop {
            let total_q: u64 = self.svcs.iter().map(|v| v.q).sum();
            if total_q == 0 {
                return;
            }
            if !self.procs.iter().enumerate().any(|(p, pr)| pr.avail_since != NONE && self.movable(p)) {
                return;
            }
            let np = self.procs.len() as f64;
            let mut best: Option<(usize, f64, bool)> = None;
            for k in 0..self.svcs.len() {
                let v = &self.svcs[k];
                let hi = hi_policy && v.q > v.q_lim();
                let lo = self.lo_eligible(k);
                if !hi && !lo {
                    continue;
                }
                let score = if self.policy == Policy::CohortE {
                    v.q as f64 * np / total_q as f64 - v.owned as f64
                } else if matches!(self.policy, Policy::Quantum { .. }) {
                    -(v.owned as f64 / v.guarantee.max(1e-9))
                } else {
                    v.q as f64 - v.q_lim() as f64
                };
                let better = match best {
                    None => true,
                    Some((_, bs, bhi)) => (hi, score) > (bhi, bs),
                };
                if better {
                    best = Some((k, score, hi));
                }
            }
            let Some((k, _, hi)) = best else { return };
            if self.grant(k, now, false, out).is_none() {
                return;
            }
            if hi {
                self.stats.hi_grants += 1;
            } else {
                self.stats.lo_grants += 1;
            }
        }
    }

    /// Moves processor `p` to service `to`: it switches now if idle, after its packet if busy.
    pub(super) fn reassign(&mut self, p: usize, to: usize, now: u64, out: &mut Vec<Action>) {
        let from = self.procs[p].owner as usize;
        debug_assert_ne!(from, to);
        debug_assert!(self.movable(p));
        let pr = &mut self.procs[p];
        let fs = &mut self.svcs[from];
        fs.owned -= 1;
        if pr.avail_since != NONE {
            fs.avail -= 1;
            pr.avail_since = NONE;
        }
        pr.owner = to as u32;
        pr.granted_at = now;
        pr.qgen = pr.qgen.wrapping_add(1);
        match pr.state {
            PState::Idle => {
                let i = fs.idle.iter().position(|&x| x as usize == p).expect("idle processor is listed");
                fs.idle.swap_remove(i);
                pr.state = PState::Switching;
                pr.switch_start = now;
                out.push(Action::Switch {
                    proc: ProcessorId(p as u32),
                    from: ServiceId(from as u32),
                    to: ServiceId(to as u32),
                });
            }
            PState::Busy => pr.leave = true,
            PState::Switching => unreachable!("switching processors are not movable"),
        }
        let ts = &mut self.svcs[to];
        ts.owned += 1;
        ts.incoming += 1;
        self.stats.switches += 1;
    }

    pub(super) fn start_quantum(&mut self, p: usize, now: u64) {
        if let Policy::Quantum { quantum } = self.policy {
            let pr = &mut self.procs[p];
            pr.qgen = pr.qgen.wrapping_add(1);
            self.expiries.push_back((now + quantum.as_nanos(), p as u32, pr.qgen));
        }
    }
}

/// Moves the `n` smallest of `v` (unique keys) to its front, in any order.
fn best_first<T: Ord>(v: &mut [T], n: usize) {
    if n == 1 {
        // The common case: one linear pass.
        let (i, _) = v.iter().enumerate().min_by(|a, b| a.1.cmp(b.1)).expect("n <= len");
        v.swap(0, i);
    } else if n < v.len() {
        v.select_nth_unstable(n);
    }
}
