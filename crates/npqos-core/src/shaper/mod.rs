//! Rate limiting of many queues with token buckets (paper `kim`).
//!
//! * [`EventShaper`]: the paper's event-driven fill (Algorithm 1): a bucket is updated lazily
//!   when a packet is sent; when it goes negative the queue is disabled and its reschedule time
//!   goes into the [`heap::ReschedHeap`] of the core that processed the packet; at the end of
//!   each packet a core re-enables every queue whose time has come. Optional adaptive reschedule
//!   threshold (eq 14).
//! * [`PeriodicShaper`]: the baseline: every fill period each bucket receives `CIR x period`
//!   tokens up to its cap.
//!
//! Both are sans-IO: the caller says what was sent and when, and asks which queues are eligible
//! again; neither reads a clock.
//!
//! **Token units.** Tokens are integers in units of 1/(8·10⁹) byte (a bit-nanosecond per
//! second), so the tokens a bucket of `CIR` bit/s earns in `Δ` ns are exactly `CIR × Δ`, with no
//! rounding and no drift. This bounds a bucket's cap at about 1.15 GB.

pub mod heap;

use crate::rate::Rate;
use crate::time::{Duration, Instant};
use heap::{HeapCounters, Observe, ReschedHeap};

/// Token units per byte (see the module documentation).
pub const UNITS_PER_BYTE: i64 = 8_000_000_000;

fn units(bytes: u64) -> i64 {
    (bytes as i64).saturating_mul(UNITS_PER_BYTE)
}

/// What the shaper says about a queue after a send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The queue may keep sending.
    Eligible,
    /// The queue is disabled until `until` (its reschedule time).
    Throttled { until: Instant },
}

/// Parameters of one queue's bucket.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BucketParams {
    /// Committed information rate (BW_i in the paper).
    pub cir: Rate,
    /// Bucket cap in bytes (the committed burst, CBE; the paper's TB-bar).
    pub cap_bytes: u64,
    /// Reschedule threshold alpha_i in bytes (event-driven shaper only).
    pub alpha_bytes: u64,
}

/// Why a shaper could not be built.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ShaperError {
    #[error("queue {queue}: CIR must be positive")]
    ZeroRate { queue: usize },
    #[error("queue {queue}: cap and threshold must be at most {max} bytes")]
    TooLarge { queue: usize, max: u64 },
    #[error("queue {queue}: the reschedule threshold ({alpha} B) must not exceed the cap ({cap} B)")]
    AlphaAboveCap { queue: usize, alpha: u64, cap: u64 },
    #[error("at least one core and one queue, and at most 2^32 - 1 queues, are needed")]
    Empty,
    #[error("adaptive threshold: gamma must be > 1 and the sampling interval positive")]
    BadAdaptive,
}

/// Largest cap or threshold in bytes.
pub const MAX_BUCKET_BYTES: u64 = (i64::MAX / UNITS_PER_BYTE) as u64;

/// Adaptive reschedule threshold (kim eq 14): per sampling interval, a queue with more than
/// `delta_th` reschedules has alpha multiplied by `gamma`; otherwise alpha is divided by `gamma`,
/// but not below `alpha_min`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Adaptive {
    pub gamma: f64,
    pub delta_th: u32,
    pub alpha_min_bytes: u64,
    pub interval: Duration,
}

/// Which core's heap a send goes to, when the caller does not say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoreAssignment {
    /// `queue mod cores` (deterministic; the paper assigns packets to cores at random, which the
    /// simulator does by calling [`EventShaper::on_send_on`] with a random core).
    ByQueue,
}

/// Counters of an [`EventShaper`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventCounters {
    pub sends: u64,
    /// Reschedules: sends that made a bucket negative (one heap insert each).
    pub reschedules: u64,
    /// Queues re-enabled by heap deletions.
    pub reenabled: u64,
    /// Popped queues whose 64-bit reschedule time was still ahead (tick saturation, or a send
    /// on a disabled queue): re-inserted.
    pub deferred: u64,
    /// Token-bucket state accesses (one read and one write per send, one write per reschedule).
    pub bucket_accesses: u64,
}

/// The event-driven token-bucket shaper with parallel per-core heaps (kim Algorithm 1).
///
/// Per-queue state is laid out for the packet path (measured in docs/PERFORMANCE.md): the
/// disabled flags in a byte array (1 MB for 1e6 queues: a throttled queue's packet is refused
/// without leaving the L2 cache), the fields every send reads and writes in one 32-byte record
/// (tokens, last update `T_lu`, CIR, cap: one cache miss per send at 1e6 queues), and alpha and
/// the adaptive-threshold counters, needed only at a reschedule, apart.
#[derive(Clone, Debug)]
pub struct EventShaper {
    disabled: Vec<bool>,
    hot: Vec<Hot>,
    cold: Vec<Cold>,
    heaps: Vec<ReschedHeap>,
    adaptive: Option<Adaptive>,
    counters: EventCounters,
}

/// What every send touches, two per cache line.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(32))]
struct Hot {
    tokens: i64,
    t_lu: u64,
    cir: u64,
    cap: i64,
}

/// What only a reschedule touches.
#[derive(Clone, Copy, Debug, Default)]
struct Cold {
    alpha: i64,
    /// Sampling interval index of `resch_count`, and the count (adaptive only).
    interval_of: u32,
    resch_count: u32,
}

impl EventShaper {
    /// A shaper for `params.len()` queues over `cores` heaps, each with `locked_bytes` of
    /// locked cache and `2^tick_shift` ns heap ticks. Buckets start full.
    pub fn new(params: &[BucketParams], cores: usize, locked_bytes: u64, tick_shift: u32) -> Result<Self, ShaperError> {
        if params.is_empty() || cores == 0 || params.len() >= u32::MAX as usize {
            return Err(ShaperError::Empty);
        }
        for (i, p) in params.iter().enumerate() {
            if p.cir.is_zero() {
                return Err(ShaperError::ZeroRate { queue: i });
            }
            if p.cap_bytes > MAX_BUCKET_BYTES || p.alpha_bytes > MAX_BUCKET_BYTES {
                return Err(ShaperError::TooLarge { queue: i, max: MAX_BUCKET_BYTES });
            }
            if p.alpha_bytes > p.cap_bytes {
                return Err(ShaperError::AlphaAboveCap { queue: i, alpha: p.alpha_bytes, cap: p.cap_bytes });
            }
        }
        Ok(EventShaper {
            disabled: vec![false; params.len()],
            hot: params
                .iter()
                .map(|p| Hot {
                    tokens: units(p.cap_bytes),
                    t_lu: 0,
                    cir: p.cir.bits_per_sec(),
                    cap: units(p.cap_bytes),
                })
                .collect(),
            cold: params.iter().map(|p| Cold { alpha: units(p.alpha_bytes), ..Default::default() }).collect(),
            heaps: (0..cores).map(|_| ReschedHeap::new(locked_bytes, tick_shift)).collect(),
            adaptive: None,
            counters: EventCounters::default(),
        })
    }

    /// Enables the adaptive reschedule threshold (eq 14).
    pub fn with_adaptive(mut self, a: Adaptive) -> Result<Self, ShaperError> {
        if !(a.gamma > 1.0 && a.gamma.is_finite()) || a.interval.is_zero() {
            return Err(ShaperError::BadAdaptive);
        }
        self.adaptive = Some(a);
        Ok(self)
    }

    pub fn queues(&self) -> usize {
        self.hot.len()
    }
    pub fn cores(&self) -> usize {
        self.heaps.len()
    }
    pub fn is_disabled(&self, queue: usize) -> bool {
        self.disabled[queue]
    }
    /// Current reschedule threshold of `queue` in bytes.
    pub fn alpha_bytes(&self, queue: usize) -> f64 {
        self.cold[queue].alpha as f64 / UNITS_PER_BYTE as f64
    }
    /// Tokens of `queue` at its last update, in bytes (negative while it owes).
    pub fn tokens_bytes(&self, queue: usize) -> f64 {
        self.hot[queue].tokens as f64 / UNITS_PER_BYTE as f64
    }
    pub fn heap(&self, core: usize) -> &ReschedHeap {
        &self.heaps[core]
    }
    pub fn counters(&self) -> &EventCounters {
        &self.counters
    }
    /// Heap counters summed over cores.
    pub fn heap_counters(&self) -> HeapCounters {
        let mut c = HeapCounters::default();
        for h in &self.heaps {
            c.add(h.counters());
        }
        c
    }

    /// A packet of `bytes` from `queue` was sent at `now`; the core is chosen by `assign`.
    pub fn on_send(&mut self, queue: usize, bytes: u64, now: Instant, assign: CoreAssignment) -> Decision {
        let core = match assign {
            CoreAssignment::ByQueue => queue % self.heaps.len(),
        };
        self.on_send_on(core, queue, bytes, now, &mut ())
    }

    /// A packet of `bytes` from `queue` was sent at `now`, processed by `core` (Algorithm 1
    /// lines 6-13). `obs` sees the heap's array accesses. `now` must not decrease between calls.
    pub fn on_send_on<O: Observe>(
        &mut self,
        core: usize,
        queue: usize,
        bytes: u64,
        now: Instant,
        obs: &mut O,
    ) -> Decision {
        let q = queue;
        let now_ns = now.as_nanos();
        self.counters.sends += 1;
        self.counters.bucket_accesses += 2;
        // Line 6 / eqs 1-3: earn (T_now - T_lu) x BW, cap, then deduct the packet. (The paper
        // writes min(TB - Psize + dTB, cap), capping after the deduction; taken literally that
        // makes a packet meeting a full bucket free. We cap first: the standard token bucket;
        // see docs/kim.md, Deviations.) While disabled, T_lu is in the future and the negative
        // elapsed time gives the bucket's true level now.
        let elapsed = now_ns as i128 - self.hot[q].t_lu as i128;
        let earned = (self.hot[q].tokens as i128 + elapsed * self.hot[q].cir as i128).min(self.hot[q].cap as i128);
        let tb = earned - units(bytes) as i128;
        if tb >= 0 {
            self.hot[q].tokens = tb as i64;
            self.hot[q].t_lu = now_ns;
            return Decision::Eligible;
        }
        // Lines 7-13.
        let alpha = self.adapt_alpha(q, now_ns);
        let delay_ns = ((alpha as i128 - tb) as u128).div_ceil(self.hot[q].cir as u128); // eq 4
        let t_resch = now_ns.saturating_add(u64::try_from(delay_ns).unwrap_or(u64::MAX)); // eq 5
        self.hot[q].t_lu = t_resch; // eq 6
        self.hot[q].tokens = alpha; // eq 7
        self.counters.reschedules += 1;
        self.counters.bucket_accesses += 1;
        if !self.disabled[q] {
            self.disabled[q] = true;
            self.heaps[core].insert(q as u32, Instant::from_nanos(t_resch), now, obs);
        }
        // (A send on a queue that was already disabled only moves T_lu later; its node is
        // deferred when it pops.)
        Decision::Throttled { until: Instant::from_nanos(t_resch) }
    }

    /// Eq 14, applied lazily at a reschedule: closes the intervals that ended since the queue's
    /// last reschedule (the last with its count, the empty ones with a count of 0), then counts
    /// this reschedule. Returns the alpha to use.
    fn adapt_alpha(&mut self, q: usize, now_ns: u64) -> i64 {
        let Some(a) = self.adaptive else { return self.cold[q].alpha };
        let k = (now_ns / a.interval.as_nanos()).min(u32::MAX as u64) as u32;
        let last = self.cold[q].interval_of;
        if k != last {
            let min = units(a.alpha_min_bytes) as f64;
            let cap = self.hot[q].cap as f64;
            let mut alpha = self.cold[q].alpha as f64;
            alpha = if self.cold[q].resch_count > a.delta_th {
                (alpha * a.gamma).min(cap)
            } else {
                (alpha / a.gamma).max(min)
            };
            let empty = k - last - 1; // intervals with no reschedule
            if empty > 0 {
                alpha = (alpha / a.gamma.powi(empty.min(4096) as i32)).max(min);
            }
            self.cold[q].alpha = alpha as i64;
            self.cold[q].interval_of = k;
            self.cold[q].resch_count = 0;
        }
        self.cold[q].resch_count += 1;
        self.cold[q].alpha
    }

    /// End of a packet on `core` (Algorithm 1 lines 16-19): re-enables every queue of that
    /// core's heap whose reschedule time is at or before `now`, calling `enabled` for each.
    pub fn poll_core<O: Observe>(&mut self, core: usize, now: Instant, obs: &mut O, mut enabled: impl FnMut(usize)) {
        while let Some((q, _)) = self.heaps[core].pop_due(now, obs) {
            let q = q as usize;
            if self.hot[q].t_lu > now.as_nanos() {
                // Popped before its exact time: put it back.
                self.counters.deferred += 1;
                self.heaps[core].insert(q as u32, Instant::from_nanos(self.hot[q].t_lu), now, obs);
                continue;
            }
            self.disabled[q] = false;
            self.counters.reenabled += 1;
            enabled(q);
        }
    }

    /// Re-enables due queues on every core (for a data plane driven by a timer).
    pub fn poll(&mut self, now: Instant, mut enabled: impl FnMut(usize)) {
        for c in 0..self.heaps.len() {
            self.poll_core(c, now, &mut (), &mut enabled);
        }
    }

    /// The earliest reschedule time over all heaps (O(cores)).
    pub fn next_wakeup(&self) -> Option<Instant> {
        self.heaps.iter().filter_map(|h| h.peek_time()).min()
    }
}

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
#[derive(Clone, Debug)]
pub struct PeriodicShaper {
    tokens: Vec<i64>,
    /// Index of the last fill applied to the bucket.
    fill_of: Vec<u64>,
    per_fill: Vec<i64>,
    cap: Vec<i64>,
    /// Fill index at which a disabled queue becomes eligible again (u64::MAX when enabled).
    until_fill: Vec<u64>,
    period_ns: u64,
    counters: PeriodicCounters,
}

impl PeriodicShaper {
    /// Buckets start full. `alpha_bytes` of the params is ignored.
    pub fn new(params: &[BucketParams], period: Duration) -> Result<Self, ShaperError> {
        if params.is_empty() || period.is_zero() {
            return Err(ShaperError::Empty);
        }
        for (i, p) in params.iter().enumerate() {
            if p.cir.is_zero() {
                return Err(ShaperError::ZeroRate { queue: i });
            }
            if p.cap_bytes > MAX_BUCKET_BYTES {
                return Err(ShaperError::TooLarge { queue: i, max: MAX_BUCKET_BYTES });
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
            period_ns: pn,
            counters: PeriodicCounters::default(),
        })
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
    pub fn on_send(&mut self, queue: usize, bytes: u64, now: Instant) -> Decision {
        let q = queue;
        self.counters.sends += 1;
        self.catch_up(q, now.as_nanos());
        self.tokens[q] -= units(bytes);
        if self.tokens[q] >= 0 {
            return Decision::Eligible;
        }
        self.counters.throttles += 1;
        // The fill that makes the bucket non-negative: ceil(-tokens / f) fills after the last.
        let need = ((-self.tokens[q]) as u128).div_ceil(self.per_fill[q] as u128) as u64;
        let fill = self.fill_of[q] + need;
        self.until_fill[q] = fill;
        Decision::Throttled { until: Instant::from_nanos(fill.saturating_mul(self.period_ns)) }
    }

    /// When a disabled queue is eligible again (the fill time), or `None` if it is enabled.
    pub fn eligible_at(&self, queue: usize) -> Option<Instant> {
        let f = self.until_fill[queue];
        (f != u64::MAX).then(|| Instant::from_nanos(f.saturating_mul(self.period_ns)))
    }

    /// Marks `queue` enabled if its fill has come (the caller schedules [`Self::eligible_at`]).
    pub fn poll_queue(&mut self, queue: usize, now: Instant) -> bool {
        if self.until_fill[queue] != u64::MAX && now.as_nanos() / self.period_ns >= self.until_fill[queue] {
            self.until_fill[queue] = u64::MAX;
            self.catch_up(queue, now.as_nanos());
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests;
