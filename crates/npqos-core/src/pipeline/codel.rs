//! CoDel, Controlled Delay (RFC 8289), as the pipeline's active queue management at the
//! egress (docs/codel.md): per queue, a packet's sojourn time (from joining the queue to
//! leaving it) is compared with `target`; once it has stayed above for `interval`, the queue
//! enters its dropping state and drops (or, for an ECN-capable packet with `ecn` on, marks)
//! packets at times `interval / sqrt(count)` apart, `count` growing by one each time, until the
//! sojourn time falls below `target` again.
//!
//! The state machine is RFC 8289's pseudocode (section 5), dequeue side only, with the Linux
//! restart rule it gives: on entering the dropping state shortly (within 16 intervals) after
//! leaving it, `count` resumes from the drops of the last cycle. Times are nanoseconds and the
//! control law is computed in floating point (`interval / sqrt(count)`, no reciprocal square
//! root table: Linux's and ns-3's Newton iterations differ from it by at most a fraction of a
//! percent after the first drops).
//!
//! The caller's queue is asked through [`CodelQueue`]: the head packet's sojourn time and
//! ECN capability, the bytes the queue holds, and to drop or mark its head. [`Codel::dequeue`]
//! is what RFC 8289 calls `dequeue`, except that it leaves the packet it would return at the
//! head of the queue (the caller takes it when its shaper and its round let it go).

/// CoDel's parameters (RFC 8289 section 4.2 and 4.3).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CodelParams {
    /// The acceptable standing queue delay, ns (RFC: 5 ms).
    pub target_ns: u64,
    /// The sliding window over which the minimum sojourn time is judged, ns (RFC: 100 ms).
    pub interval_ns: u64,
    /// A queue holding no more than this many bytes is never dropped from (RFC's
    /// `maxpacket`: one MTU-sized packet).
    pub mtu: u64,
    /// Mark ECN-capable packets (ECT(0) or ECT(1)) with CE instead of dropping them.
    pub ecn: bool,
}

impl Default for CodelParams {
    fn default() -> Self {
        CodelParams { target_ns: 5_000_000, interval_ns: 100_000_000, mtu: 1514, ecn: false }
    }
}

/// What CoDel needs of one queue.
pub trait CodelQueue {
    /// The head packet's sojourn time at `now`, ns, and whether it is ECN-capable; `None`
    /// when the queue is empty.
    fn head(&self, now: u64) -> Option<(u64, bool)>;
    /// Bytes in the queue behind the head packet (RFC 8289's `bytes()`, asked after the head
    /// is dequeued).
    fn bytes(&self) -> u64;
    /// Drop the head packet.
    fn drop_head(&mut self, now: u64);
    /// Mark the head packet's ECN field Congestion Experienced (it stays the head).
    fn mark_head(&mut self, now: u64);
}

/// One queue's CoDel state (RFC 8289's `codel_queue_t`, 24 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Codel {
    /// When the sojourn time will have been above target for an interval (0: it is below).
    first_above: u64,
    /// The time of the next drop while dropping.
    drop_next: u64,
    /// Drops (and marks) since entering the dropping state.
    count: u32,
    /// `count` when the dropping state was last entered.
    lastcount: u32,
    dropping: bool,
}

/// What [`Codel::dequeue`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dequeued {
    /// Packets dropped from the head.
    pub dropped: u32,
    /// The head packet now was marked CE.
    pub marked: bool,
    /// A packet is left at the head to send (false: the queue is empty).
    pub head: bool,
}

impl Codel {
    /// The control law: the next drop `interval / sqrt(count)` after `t`.
    #[inline]
    pub fn control_law(t: u64, count: u32, interval_ns: u64) -> u64 {
        t + (interval_ns as f64 / (count.max(1) as f64).sqrt()) as u64
    }

    /// Whether the dropping state is on.
    pub fn dropping(&self) -> bool {
        self.dropping
    }
    /// Drops and marks since the dropping state was entered.
    pub fn count(&self) -> u32 {
        self.count
    }
    /// The time of the next drop (meaningful while dropping).
    pub fn drop_next(&self) -> u64 {
        self.drop_next
    }

    /// RFC 8289's `dodequeue` on the head: whether it is OK to drop it (its sojourn time has
    /// been above target for an interval); `None` with an empty queue.
    fn ok_to_drop(&mut self, p: &CodelParams, now: u64, q: &impl CodelQueue) -> Option<(bool, bool)> {
        let Some((sojourn, ect)) = q.head(now) else {
            self.first_above = 0;
            return None;
        };
        if sojourn < p.target_ns || q.bytes() <= p.mtu {
            // Went (or stayed) below: it must stay above for an interval before a drop.
            self.first_above = 0;
            return Some((false, ect));
        }
        if self.first_above == 0 {
            self.first_above = now + p.interval_ns;
            return Some((false, ect));
        }
        Some((now >= self.first_above, ect))
    }

    /// Drops (or marks) the head, as the control law says it is time to.
    fn signal(p: &CodelParams, now: u64, q: &mut impl CodelQueue, ect: bool, d: &mut Dequeued) -> bool {
        if p.ecn && ect {
            q.mark_head(now);
            d.marked = true;
            return true;
        }
        q.drop_head(now);
        d.dropped += 1;
        false
    }

    /// RFC 8289's `dequeue` at `now` on queue `q`: drops (or marks) head packets as the state
    /// says, and leaves the packet to send at the head. A marked packet is the one to send
    /// (marking replaces one drop and ends this dequeue, as in Linux).
    pub fn dequeue(&mut self, p: &CodelParams, now: u64, q: &mut impl CodelQueue) -> Dequeued {
        let mut d = Dequeued::default();
        let Some((ok, mut ect)) = self.ok_to_drop(p, now, q) else {
            // An empty queue takes us out of the dropping state.
            self.dropping = false;
            return d;
        };
        if self.dropping {
            if !ok {
                // The sojourn time went below target: leave the dropping state.
                self.dropping = false;
            }
            // Time for the next drop: drop the head and look at the next one; if that one
            // does not take us out of the dropping state, the next drop is scheduled (a large
            // backlog may make it due at once, hence the loop).
            while self.dropping && now >= self.drop_next {
                self.count += 1;
                if Self::signal(p, now, q, ect, &mut d) {
                    self.drop_next = Self::control_law(self.drop_next, self.count, p.interval_ns);
                    d.head = true;
                    return d;
                }
                match self.ok_to_drop(p, now, q) {
                    Some((true, e)) => {
                        ect = e;
                        self.drop_next = Self::control_law(self.drop_next, self.count, p.interval_ns);
                    }
                    _ => self.dropping = false,
                }
            }
        } else if ok {
            // Above target for an interval: drop (or mark) and enter the dropping state.
            if !Self::signal(p, now, q, ect, &mut d) {
                // The next head is looked at (its time above target noted), not dropped.
                let _ = self.ok_to_drop(p, now, q);
            }
            self.dropping = true;
            // Shortly after a dropping cycle, resume from its rate (RFC 8289, Linux's rule).
            let delta = self.count.wrapping_sub(self.lastcount);
            self.count = 1;
            if delta > 1 && now.saturating_sub(self.drop_next) < 16 * p.interval_ns {
                self.count = delta;
            }
            self.drop_next = Self::control_law(now, self.count, p.interval_ns);
            self.lastcount = self.count;
        }
        d.head = q.head(now).is_some();
        d
    }
}

#[cfg(test)]
mod tests;
