//! kim's baseline: the periodic-fill shaper (section 2.2, Fig. 7), beside the event-driven
//! [`super::EventShaper`] it is compared with.

use super::{units, BucketParams, Decision, ShaperError, MAX_BUCKET_BYTES};
use crate::error::{Clock, Error};
use crate::id::{self, QueueId};
use crate::time::{Duration, Instant};

/// Counters of a [`PeriodicShaper`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeriodicCounters {
    pub sends: u64,
    /// Sends that made a bucket negative.
    pub throttles: u64,
}

/// The periodic-fill baseline: every `period` (at `k x period`, k = 1, 2, ...) every bucket
/// receives `CIR x period` tokens up to its cap; a disabled queue is re-enabled at the fill
/// that makes its bucket non-negative.
///
/// A data plane sweeps all buckets at each fill (one read-modify-write, two memory accesses,
/// per queue per fill: [`PeriodicShaper::fill_accesses`]). This implementation computes the same
/// bucket levels lazily, per queue, when the queue is next touched: the level after `k` fills
/// from `x <= cap` is `min(cap, x + k f)` because every fill adds the same `f`. Results are
/// identical; only the simulation is cheaper.
///
/// Two ways to learn that a disabled queue is eligible again: a simulator schedules each
/// queue's [`Self::eligible_at`] and calls [`Self::poll_queue`] then; a data plane wakes at every
/// fill while any queue is disabled ([`Self::next_wakeup`]) and calls [`Self::on_wakeup`], the
/// sweep.
#[derive(Clone, Debug)]
pub struct PeriodicShaper {
    tokens: Vec<i64>,
    /// Index of the last fill applied to the bucket.
    fill_of: Vec<u64>,
    per_fill: Vec<i64>,
    cap: Vec<i64>,
    /// Fill index at which a disabled queue becomes eligible again (u64::MAX when enabled).
    until_fill: Vec<u64>,
    /// Queues disabled now.
    disabled: usize,
    period_ns: u64,
    counters: PeriodicCounters,
    clock: Clock,
}

impl PeriodicShaper {
    /// Buckets start full. `alpha_bytes` of the params is ignored.
    pub fn new(params: &[BucketParams], period: Duration) -> Result<Self, ShaperError> {
        if params.is_empty() || period.is_zero() || params.len() >= u32::MAX as usize {
            return Err(ShaperError::Empty);
        }
        for (i, p) in params.iter().enumerate() {
            let queue = QueueId::from_index(i);
            if p.cir.is_zero() {
                return Err(ShaperError::ZeroRate { queue });
            }
            if p.cap_bytes > MAX_BUCKET_BYTES {
                return Err(ShaperError::TooLarge { queue, max: MAX_BUCKET_BYTES });
            }
        }
        let pn = period.as_nanos();
        Ok(PeriodicShaper {
            tokens: params.iter().map(|p| units(p.cap_bytes)).collect(),
            fill_of: vec![0; params.len()],
            per_fill: params
                .iter()
                .map(|p| (p.cir.bits_per_sec() as i128 * pn as i128).min(i64::MAX as i128) as i64)
                .collect(),
            cap: params.iter().map(|p| units(p.cap_bytes)).collect(),
            until_fill: vec![u64::MAX; params.len()],
            disabled: 0,
            period_ns: pn,
            counters: PeriodicCounters::default(),
            clock: Clock::default(),
        })
    }

    pub fn queues(&self) -> usize {
        self.tokens.len()
    }
    /// Bytes of the buckets' state: per queue its tokens, last fill, tokens per fill, cap and
    /// the fill it waits for (5 x 8 B).
    pub fn bucket_state_bytes(&self) -> u64 {
        (self.queues() * 5 * size_of::<i64>()) as u64
    }
    pub fn counters(&self) -> &PeriodicCounters {
        &self.counters
    }
    /// Memory accesses of the fills up to `now`: one read-modify-write (2 accesses) per queue
    /// per fill (kim section 2.2, Fig. 7).
    pub fn fill_accesses(&self, now: Instant) -> u64 {
        2 * self.tokens.len() as u64 * (now.as_nanos() / self.period_ns)
    }
    fn catch_up(&mut self, q: usize, now_ns: u64) {
        let k = now_ns / self.period_ns;
        let n = k - self.fill_of[q].min(k);
        if n > 0 {
            let add = (self.per_fill[q] as i128 * n as i128).min(i64::MAX as i128);
            self.tokens[q] = (self.tokens[q] as i128 + add).min(self.cap[q] as i128) as i64;
            self.fill_of[q] = k;
        }
    }

    /// A packet of `bytes` from `queue` was sent at `now`.
    ///
    /// Errors (no effect): an unknown queue, `now` before a time already given.
    pub fn on_send(&mut self, queue: QueueId, bytes: u64, now: Instant) -> Result<Decision, Error> {
        let q = id::check(QueueId::KIND, queue.0, self.tokens.len())?;
        self.clock.advance(now)?;
        self.counters.sends += 1;
        self.catch_up(q, now.as_nanos());
        self.tokens[q] = self.tokens[q].saturating_sub(units(bytes));
        if self.tokens[q] >= 0 {
            return Ok(Decision::Eligible);
        }
        self.counters.throttles += 1;
        // The fill that makes the bucket non-negative: ceil(-tokens / f) fills after the last.
        let need = ((-(self.tokens[q] as i128)) as u128).div_ceil(self.per_fill[q] as u128);
        let fill = self.fill_of[q].saturating_add(u64::try_from(need).unwrap_or(u64::MAX));
        if self.until_fill[q] == u64::MAX {
            self.disabled += 1;
        }
        self.until_fill[q] = fill;
        Ok(Decision::Throttled { until: Instant::from_nanos(fill.saturating_mul(self.period_ns)) })
    }

    /// Wait-for-tokens conformance (Linux tbf, ns-3's TbfQueueDisc) with periodic fill: the
    /// packet of `bytes` at the head of `queue` is sent at `now` only if the bucket holds its
    /// size; otherwise it is not sent and the queue waits for the fill that makes the bucket
    /// hold it ([`Self::eligible_at`], [`Self::poll_queue`]). A queue still waiting is refused
    /// without a change.
    ///
    /// Errors (no effect): an unknown queue, `now` before a time already given, or a packet
    /// larger than the bucket's cap.
    pub fn try_send(&mut self, queue: QueueId, bytes: u64, now: Instant) -> Result<Decision, Error> {
        let q = id::check(QueueId::KIND, queue.0, self.tokens.len())?;
        if units(bytes) > self.cap[q] {
            return Err(Error::BadParameter {
                parameter: "packet size",
                value: format!("{bytes} B"),
                expected: "at most the bucket's cap",
            });
        }
        self.clock.advance(now)?;
        self.poll_checked(q, now);
        if self.until_fill[q] != u64::MAX {
            return Ok(Decision::Throttled {
                until: Instant::from_nanos(self.until_fill[q].saturating_mul(self.period_ns)),
            });
        }
        self.catch_up(q, now.as_nanos());
        let need = units(bytes);
        if self.tokens[q] >= need {
            self.counters.sends += 1;
            self.tokens[q] -= need;
            return Ok(Decision::Eligible);
        }
        self.counters.throttles += 1;
        let fills = ((need - self.tokens[q]) as u128).div_ceil(self.per_fill[q] as u128);
        let fill = self.fill_of[q].saturating_add(u64::try_from(fills).unwrap_or(u64::MAX));
        self.until_fill[q] = fill;
        self.disabled += 1;
        Ok(Decision::Throttled { until: Instant::from_nanos(fill.saturating_mul(self.period_ns)) })
    }

    /// When a disabled queue is eligible again (the fill time); `None` if it is enabled (or
    /// unknown).
    pub fn eligible_at(&self, queue: QueueId) -> Option<Instant> {
        let f = *self.until_fill.get(queue.index())?;
        (f != u64::MAX).then(|| Instant::from_nanos(f.saturating_mul(self.period_ns)))
    }

    /// The fill at which `queue`'s bucket holds its cap again if nothing more is sent on it
    /// (`None` for an unknown queue): from then on it is the same as a new one
    /// ([`super::EventShaper::full_at`] for the event-driven shaper).
    pub fn full_at(&self, queue: QueueId) -> Option<Instant> {
        let q = queue.index();
        let tokens = *self.tokens.get(q)?;
        let missing = (self.cap[q] as i128 - tokens as i128).max(0) as u128;
        let fills = u64::try_from(missing.div_ceil(self.per_fill[q] as u128)).unwrap_or(u64::MAX);
        Some(Instant::from_nanos(self.fill_of[q].saturating_add(fills).saturating_mul(self.period_ns)))
    }

    /// Whether `queue` is disabled (waiting for a fill).
    #[inline]
    pub fn is_disabled(&self, queue: QueueId) -> bool {
        self.until_fill.get(queue.index()).is_some_and(|&f| f != u64::MAX)
    }

    /// Marks `queue` enabled if its fill has come (the caller schedules [`Self::eligible_at`]);
    /// returns whether it was re-enabled.
    ///
    /// Errors (no effect): an unknown queue, `now` before a time already given.
    pub fn poll_queue(&mut self, queue: QueueId, now: Instant) -> Result<bool, Error> {
        let q = id::check(QueueId::KIND, queue.0, self.tokens.len())?;
        self.clock.advance(now)?;
        Ok(self.poll_checked(q, now))
    }

    fn poll_checked(&mut self, q: usize, now: Instant) -> bool {
        if self.until_fill[q] != u64::MAX && now.as_nanos() / self.period_ns >= self.until_fill[q] {
            self.until_fill[q] = u64::MAX;
            self.disabled -= 1;
            self.catch_up(q, now.as_nanos());
            return true;
        }
        false
    }

    /// The next fill after the last time given, while any queue is disabled.
    pub fn next_wakeup(&self) -> Option<Instant> {
        (self.disabled > 0).then(|| {
            let next = (self.clock.last().as_nanos() / self.period_ns).saturating_add(1);
            Instant::from_nanos(next.saturating_mul(self.period_ns))
        })
    }

    /// The fill sweep: re-enables every queue whose fill has come and appends it to `out`
    /// (O(queues), as a data plane's sweep is).
    ///
    /// Errors (no effect): `now` before a time already given. Calling it early is harmless.
    pub fn on_wakeup(&mut self, now: Instant, out: &mut Vec<QueueId>) -> Result<(), Error> {
        self.clock.advance(now)?;
        if self.disabled == 0 {
            return Ok(());
        }
        for q in 0..self.tokens.len() {
            if self.poll_checked(q, now) {
                out.push(QueueId::from_index(q));
            }
        }
        Ok(())
    }

    /// Checks the invariants: the disabled count matches, and no bucket exceeds its cap.
    pub fn check_invariants(&self) -> Result<(), String> {
        let n = self.until_fill.iter().filter(|&&f| f != u64::MAX).count();
        if n != self.disabled {
            return Err(format!("{n} queues wait for a fill, the count says {}", self.disabled));
        }
        if let Some(q) = (0..self.tokens.len()).find(|&q| self.tokens[q] > self.cap[q]) {
            return Err(format!("queue {q} holds more than its cap"));
        }
        Ok(())
    }
}
