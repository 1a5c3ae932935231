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
//! Both are sans-IO and follow the mechanism contract (ARCHITECTURE.md): the caller says what
//! was sent and when (`now` never goes backwards), asks `next_wakeup()` when it must come back,
//! and hands that moment to `on_wakeup`, which names the queues eligible again in a caller-owned
//! buffer; neither reads a clock. Queues are [`QueueId`]s, cores [`CoreId`]s; an unknown id or
//! a `now` before one already given is a [`crate::Error`] and changes nothing. Queries never
//! fail (an unknown queue reads as enabled, with no tokens).
//!
//! **Token units.** Tokens are integers in units of 1/(8·10⁹) byte (a bit-nanosecond per
//! second), so the tokens a bucket of `CIR` bit/s earns in `Δ` ns are exactly `CIR × Δ`, with no
//! rounding and no drift. This bounds a bucket's cap at about 1.15 GB.

pub mod heap;
mod periodic;
pub mod wheel;

pub use periodic::{PeriodicCounters, PeriodicShaper};

use crate::error::{Clock, Error};
use crate::id::{self, CoreId, QueueId};
use crate::rate::Rate;
use crate::time::{Duration, Instant};
use heap::{HeapCounters, Observe, ReschedHeap};
use wheel::{TimerWheel, WheelCounters};

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

/// How a shaped queue's packet conforms to its bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Conformance {
    /// kim Algorithm 1: send, then pay (the bucket may go negative and the queue is throttled):
    /// `on_send` / `on_send_on`.
    #[default]
    SendThenPay,
    /// Linux tbf, ns-3 TbfQueueDisc: the packet waits until the bucket holds its size
    /// (`try_send` / `try_send_on`); the bucket never goes negative.
    WaitForTokens,
}

crate::named!(Conformance, "conformance", { SendThenPay => "send-then-pay", WaitForTokens => "wait-for-tokens" });
crate::named!(Timer, "timer", { Heap => "heap", Wheel => "wheel" });

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
    #[error("{queue}: CIR must be positive")]
    ZeroRate { queue: QueueId },
    #[error("{queue}: cap and threshold must be at most {max} bytes")]
    TooLarge { queue: QueueId, max: u64 },
    #[error("{queue}: the reschedule threshold ({alpha} B) must not exceed the cap ({cap} B)")]
    AlphaAboveCap { queue: QueueId, alpha: u64, cap: u64 },
    #[error("at least one core and one queue, and at most 2^32 - 1 queues, are needed")]
    Empty,
    #[error("adaptive threshold: gamma must be > 1 and the sampling interval positive")]
    BadAdaptive,
    #[error("heap tick shift {shift}: at most {max} (ticks of at most 2^{max} ns)")]
    BadTick { shift: u32, max: u32 },
    /// `with_timer` after queues were throttled (their timers would be lost).
    #[error("the timer can only be chosen before any queue is throttled")]
    TimerAfterThrottle,
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

impl EventCounters {
    /// Adds another shaper's counts (for results combined over shards).
    pub fn add(&mut self, o: &EventCounters) {
        self.sends += o.sends;
        self.reschedules += o.reschedules;
        self.reenabled += o.reenabled;
        self.deferred += o.deferred;
        self.bucket_accesses += o.bucket_accesses;
    }
}

/// The event-driven token-bucket shaper with parallel per-core heaps (kim Algorithm 1).
///
/// Per-queue state is laid out for the packet path (measured in docs/PERFORMANCE.md): the
/// disabled flags in a byte array (1 MB for 1e6 queues: a throttled queue's packet is refused
/// without leaving the L2 cache), what every send changes in one 16-byte record (tokens and last
/// update `T_lu`: 16 MB for 1e6 queues, one cache miss per send), the fixed CIR and cap once per
/// distinct pair (a profile; with one profile, no per-queue index at all), and alpha and the
/// adaptive-threshold counters, needed only at a reschedule, apart.
#[derive(Clone, Debug)]
pub struct EventShaper {
    disabled: Vec<bool>,
    hot: Vec<Hot>,
    /// Per queue, its index in `profiles`; empty when there is one profile.
    profile_of: Vec<u32>,
    profiles: Vec<Profile>,
    /// Per profile, the configured alpha (a queue's alpha is this plus its `alpha_change`).
    alphas: Vec<i64>,
    cold: Vec<Cold>,
    timers: Vec<CoreTimer>,
    tick_shift: u32,
    adaptive: Option<Adaptive>,
    counters: EventCounters,
    clock: Clock,
}

/// Which structure holds a core's throttled queues until their reschedule time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Timer {
    /// The paper's per-core binary heap ([`heap::ReschedHeap`]), with its memory accounting.
    #[default]
    Heap,
    /// A bucketed timer found by find-first-set over bitmaps ([`wheel::TimerWheel`], Eiffel
    /// style; beyond the paper): the same release times, O(1) filing, no heap accounting.
    Wheel,
}

/// One core's timer (see [`Timer`]). The shaper's clock checks every `now` before it reaches
/// a timer, so the timers are driven without their own check.
#[derive(Clone, Debug)]
enum CoreTimer {
    Heap(ReschedHeap),
    Wheel(TimerWheel),
}

impl CoreTimer {
    #[inline(always)]
    fn insert<O: Observe>(&mut self, queue: u32, time: Instant, now: Instant, obs: &mut O) {
        match self {
            CoreTimer::Heap(h) => h.insert_unclocked(queue, time, now, obs),
            CoreTimer::Wheel(w) => w.insert_unclocked(queue, time, now),
        }
    }
    #[inline(always)]
    fn pop_due<O: Observe>(&mut self, now: Instant, obs: &mut O) -> Option<(u32, Instant)> {
        match self {
            CoreTimer::Heap(h) => h.pop_due_unclocked(now, obs),
            CoreTimer::Wheel(w) => w.pop_due_unclocked(now),
        }
    }
    #[inline]
    fn peek_time(&self) -> Option<Instant> {
        match self {
            CoreTimer::Heap(h) => h.peek_time(),
            CoreTimer::Wheel(w) => w.peek_time(),
        }
    }
    #[inline]
    fn len(&self) -> usize {
        match self {
            CoreTimer::Heap(h) => h.len(),
            CoreTimer::Wheel(w) => w.len(),
        }
    }
}

/// What every send changes: 16 bytes, four per cache line. The level is kept as what the
/// bucket lacks of its cap (the cap less the tokens), so that a full bucket at time 0 is all
/// zeros: a million new buckets are the kernel's zeroed pages, not written at build (a live
/// reload builds them while frames wait).
#[derive(Clone, Copy, Debug, Default, bytemuck::Zeroable)]
#[repr(C, align(16))]
struct Hot {
    missing: i64,
    t_lu: u64,
}

/// A bucket's fixed parameters, shared by every queue configured alike (kim's queues all are).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Profile {
    cir: u64,
    cap: i64,
}

/// What only a reschedule touches. Zeros for a new queue (see [`Hot`]): alpha is kept as its
/// difference from the queue's configured alpha.
#[derive(Clone, Copy, Debug, Default, bytemuck::Zeroable)]
#[repr(C)]
struct Cold {
    alpha_change: i64,
    /// Sampling interval index of `resch_count`, and the count (adaptive only).
    interval_of: u32,
    resch_count: u32,
}

impl EventShaper {
    /// A shaper for `params.len()` queues over `cores` heaps, each with `locked_bytes` of
    /// locked cache and `2^tick_shift` ns heap ticks. Buckets start full.
    pub fn new(params: &[BucketParams], cores: usize, locked_bytes: u64, tick_shift: u32) -> Result<Self, ShaperError> {
        // Queues configured alike come in runs (a million alike queues are one run).
        let mut runs: Vec<(BucketParams, u32)> = Vec::new();
        for p in params {
            match runs.last_mut() {
                Some((last, n)) if last == p && *n < u32::MAX => *n += 1,
                _ => runs.push((*p, 1)),
            }
        }
        Self::from_runs(&runs, cores, locked_bytes, tick_shift)
    }

    /// [`Self::new`] with the queues' parameters given as runs of alike queues, `(params,
    /// count)` in queue order: what a million alike queues cost to build is then their pages,
    /// which start as the kernel's zeros and are touched as queues are used (a live reload
    /// builds a shaper while frames wait).
    ///
    /// Errors: as [`Self::new`] (a run's fault is reported at its first queue).
    pub fn from_runs(
        runs: &[(BucketParams, u32)],
        cores: usize,
        locked_bytes: u64,
        tick_shift: u32,
    ) -> Result<Self, ShaperError> {
        let n: u64 = runs.iter().map(|r| r.1 as u64).sum();
        if n == 0 || cores == 0 || n >= u32::MAX as u64 {
            return Err(ShaperError::Empty);
        }
        if cores > u32::MAX as usize {
            return Err(ShaperError::Empty);
        }
        if tick_shift > heap::MAX_TICK_SHIFT {
            return Err(ShaperError::BadTick { shift: tick_shift, max: heap::MAX_TICK_SHIFT });
        }
        let mut start = 0usize;
        for (p, count) in runs {
            let queue = QueueId::from_index(start);
            start += *count as usize;
            if *count == 0 {
                continue;
            }
            if p.cir.is_zero() {
                return Err(ShaperError::ZeroRate { queue });
            }
            if p.cap_bytes > MAX_BUCKET_BYTES || p.alpha_bytes > MAX_BUCKET_BYTES {
                return Err(ShaperError::TooLarge { queue, max: MAX_BUCKET_BYTES });
            }
            if p.alpha_bytes > p.cap_bytes {
                return Err(ShaperError::AlphaAboveCap { queue, alpha: p.alpha_bytes, cap: p.cap_bytes });
            }
        }
        // The distinct (CIR, cap, alpha), in order of first use, and the queues each covers.
        let mut index = std::collections::HashMap::new();
        let (mut profiles, mut alphas, mut covers) = (Vec::new(), Vec::new(), Vec::<u64>::new());
        let run_profile: Vec<u32> = runs
            .iter()
            .map(|(p, count)| {
                let key = (Profile { cir: p.cir.bits_per_sec(), cap: units(p.cap_bytes) }, units(p.alpha_bytes));
                let i = *index.entry(key).or_insert_with(|| {
                    profiles.push(key.0);
                    alphas.push(key.1);
                    covers.push(0);
                    profiles.len() as u32 - 1
                });
                covers[i as usize] += *count as u64;
                i
            })
            .collect();
        // The profile of most queues is number 0, so that their index needs no writing.
        let top = (0..covers.len()).max_by_key(|&i| (covers[i], std::cmp::Reverse(i))).expect("n > 0");
        profiles.swap(0, top);
        alphas.swap(0, top);
        let renumber = |i: u32| match i as usize {
            0 => top as u32,
            t if t == top => 0,
            _ => i,
        };
        let mut profile_of = Vec::new();
        if profiles.len() > 1 {
            profile_of = vec![0u32; n as usize];
            let mut at = 0usize;
            for ((_, count), &i) in runs.iter().zip(&run_profile) {
                let end = at + *count as usize;
                let i = renumber(i);
                if i != 0 {
                    profile_of[at..end].fill(i);
                }
                at = end;
            }
        }
        let n = n as usize;
        Ok(EventShaper {
            disabled: vec![false; n],
            // Every bucket full at time 0, at its configured alpha.
            hot: bytemuck::zeroed_vec(n),
            profile_of,
            profiles,
            alphas,
            cold: bytemuck::zeroed_vec(n),
            timers: (0..cores)
                .map(|_| {
                    CoreTimer::Heap(ReschedHeap::new(locked_bytes, tick_shift).expect("the tick shift was checked"))
                })
                .collect(),
            tick_shift,
            adaptive: None,
            counters: EventCounters::default(),
            clock: Clock::default(),
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

    /// Files throttled queues in `timer` instead of the paper's heaps (call before any send;
    /// after a queue was throttled it is refused).
    pub fn with_timer(mut self, timer: Timer) -> Result<Self, ShaperError> {
        if self.timers.iter().any(|t| t.len() > 0) {
            return Err(ShaperError::TimerAfterThrottle);
        }
        if timer == Timer::Wheel {
            self.timers = (0..self.timers.len()).map(|_| CoreTimer::Wheel(TimerWheel::new(self.tick_shift))).collect();
        }
        Ok(self)
    }

    /// The timer the cores use.
    pub fn timer(&self) -> Timer {
        match self.timers.first() {
            Some(CoreTimer::Wheel(_)) => Timer::Wheel,
            _ => Timer::Heap,
        }
    }

    pub fn queues(&self) -> usize {
        self.hot.len()
    }
    pub fn cores(&self) -> usize {
        self.timers.len()
    }
    /// Bytes of the buckets' state: per queue its disabled flag (1 B), hot record (16 B), cold
    /// record (16 B) and, with more than one profile, its profile index (4 B); plus 24 B per
    /// distinct (CIR, cap, alpha) profile. The timers' nodes are apart (their number changes as queues
    /// are throttled: [`Self::waiting`]).
    pub fn bucket_state_bytes(&self) -> u64 {
        let per_queue = size_of::<bool>() + size_of::<Hot>() + size_of::<Cold>();
        (self.queues() * per_queue
            + self.profile_of.len() * size_of::<u32>()
            + self.profiles.len() * (size_of::<Profile>() + size_of::<i64>())) as u64
    }
    /// Whether `queue` is disabled (waiting in a heap for its reschedule time).
    #[inline]
    pub fn is_disabled(&self, queue: QueueId) -> bool {
        self.disabled.get(queue.index()).copied().unwrap_or(false)
    }
    /// A hint that `queue` is about to be sent on or checked: starts loading its bucket
    /// ([`crate::hint::prefetch`]; no effect on results).
    #[inline]
    pub fn prefetch(&self, queue: QueueId) {
        crate::hint::prefetch(&self.disabled, queue.index());
        crate::hint::prefetch(&self.hot, queue.index());
        crate::hint::prefetch(&self.profile_of, queue.index());
    }

    /// Queue `q`'s fixed parameters (`q` checked).
    #[inline(always)]
    fn prof(&self, q: usize) -> Profile {
        self.profiles[self.profile_index(q)]
    }
    fn profile_index(&self, q: usize) -> usize {
        self.profile_of.get(q).map_or(0, |&i| i as usize)
    }
    /// Queue `q`'s tokens at its last update (`q` checked; `pr` its profile).
    #[inline(always)]
    fn tokens(&self, q: usize, pr: Profile) -> i64 {
        pr.cap - self.hot[q].missing
    }
    /// Queue `q`'s current alpha (`q` checked).
    fn alpha(&self, q: usize) -> i64 {
        self.alphas[self.profile_index(q)] + self.cold[q].alpha_change
    }
    /// Current reschedule threshold of `queue` in bytes.
    pub fn alpha_bytes(&self, queue: QueueId) -> f64 {
        if queue.index() >= self.cold.len() {
            return 0.0;
        }
        self.alpha(queue.index()) as f64 / UNITS_PER_BYTE as f64
    }
    /// Tokens of `queue` at its last update, in bytes (negative while it owes).
    pub fn tokens_bytes(&self, queue: QueueId) -> f64 {
        if queue.index() >= self.hot.len() {
            return 0.0;
        }
        self.tokens(queue.index(), self.prof(queue.index())) as f64 / UNITS_PER_BYTE as f64
    }
    /// When `queue`'s bucket holds its cap again if nothing more is sent on it (`None` for an
    /// unknown queue). From then on the bucket is the same as a new one, so a caller that maps
    /// buckets to flows may hand it to another flow (`npqos live` does). While the queue is
    /// disabled this lies after its reschedule time.
    pub fn full_at(&self, queue: QueueId) -> Option<Instant> {
        let h = self.hot.get(queue.index())?;
        let pr = self.prof(queue.index());
        let missing = h.missing.max(0) as u128;
        let ns = u64::try_from(missing.div_ceil(pr.cir as u128)).unwrap_or(u64::MAX);
        Some(Instant::from_nanos(h.t_lu.saturating_add(ns)))
    }
    /// The reschedule heap of `core` (`None` for an unknown core, or under [`Timer::Wheel`]).
    pub fn heap(&self, core: CoreId) -> Option<&ReschedHeap> {
        match self.timers.get(core.index()) {
            Some(CoreTimer::Heap(h)) => Some(h),
            _ => None,
        }
    }
    /// Queues waiting in `core`'s timer (0 for an unknown core).
    #[inline]
    pub fn waiting(&self, core: CoreId) -> usize {
        self.timers.get(core.index()).map_or(0, CoreTimer::len)
    }
    /// The earliest reschedule time in `core`'s timer, rounded up to its tick.
    #[inline]
    pub fn earliest(&self, core: CoreId) -> Option<Instant> {
        self.timers.get(core.index()).and_then(CoreTimer::peek_time)
    }
    pub fn counters(&self) -> &EventCounters {
        &self.counters
    }
    /// Heap counters summed over cores.
    pub fn heap_counters(&self) -> HeapCounters {
        let mut c = HeapCounters::default();
        for t in &self.timers {
            if let CoreTimer::Heap(h) = t {
                c.add(h.counters());
            }
        }
        c
    }
    /// Timer-wheel counters summed over cores (zero under [`Timer::Heap`]).
    pub fn wheel_counters(&self) -> WheelCounters {
        let mut c = WheelCounters::default();
        for t in &self.timers {
            if let CoreTimer::Wheel(w) = t {
                c.add(w.counters());
            }
        }
        c
    }

    /// A packet of `bytes` from `queue` was sent at `now`, on the core `queue mod cores`
    /// (deterministic; the paper assigns packets to cores at random, which the simulator does
    /// with [`Self::on_send_on`]).
    pub fn on_send(&mut self, queue: QueueId, bytes: u64, now: Instant) -> Result<Decision, Error> {
        let core = CoreId::from_index(queue.index() % self.timers.len());
        self.on_send_on(core, queue, bytes, now, &mut ())
    }

    /// A packet of `bytes` from `queue` was sent at `now`, processed by `core` (Algorithm 1
    /// lines 6-13). `obs` sees the heap's array accesses.
    ///
    /// Errors (no effect): an unknown queue or core, `now` before a time already given.
    #[inline]
    pub fn on_send_on<O: Observe>(
        &mut self,
        core: CoreId,
        queue: QueueId,
        bytes: u64,
        now: Instant,
        obs: &mut O,
    ) -> Result<Decision, Error> {
        let q = id::check(QueueId::KIND, queue.0, self.hot.len())?;
        let core = id::check(CoreId::KIND, core.0, self.timers.len())?;
        self.clock.advance(now)?;
        Ok(self.send(core, q, bytes, now, obs))
    }

    /// [`Self::on_send_on`] (or [`Self::try_send_on`] when `wait`), then, when the packet goes
    /// and `idle_poll` is set, [`Self::poll_core_idle`] on the same core at the same time,
    /// without checking the arguments and the time a second time. Returns the decision and
    /// whether that idle poll was done (false: not asked, not eligible, something due, or a
    /// timing wheel; then call [`Self::poll_core`] if a poll is wanted).
    ///
    /// Errors (no effect): those of the send.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn send_and_poll_idle<O: Observe>(
        &mut self,
        core: CoreId,
        queue: QueueId,
        bytes: u64,
        now: Instant,
        wait: bool,
        idle_poll: bool,
        obs: &mut O,
    ) -> Result<(Decision, bool), Error> {
        let d = if wait {
            self.try_send_on(core, queue, bytes, now, obs)?
        } else {
            self.on_send_on(core, queue, bytes, now, obs)?
        };
        if !idle_poll || d != Decision::Eligible {
            return Ok((d, false));
        }
        // The send checked the core and advanced the clock to `now`.
        Ok((d, self.poll_idle_checked(core.index(), now, obs)))
    }

    /// Algorithm 1 lines 6-13 on checked arguments.
    #[inline]
    fn send<O: Observe>(&mut self, core: usize, q: usize, bytes: u64, now: Instant, obs: &mut O) -> Decision {
        let now_ns = now.as_nanos();
        self.counters.sends += 1;
        self.counters.bucket_accesses += 2;
        // Line 6 / eqs 1-3: earn (T_now - T_lu) x BW, cap, then deduct the packet. (The paper
        // writes min(TB - Psize + dTB, cap), capping after the deduction; taken literally that
        // makes a packet meeting a full bucket free. We cap first: the standard token bucket;
        // see docs/kim.md, Deviations.) While disabled, T_lu is in the future and the negative
        // elapsed time gives the bucket's true level now.
        let pr = self.prof(q);
        let elapsed = now_ns as i128 - self.hot[q].t_lu as i128;
        let earned = (self.tokens(q, pr) as i128 + elapsed * pr.cir as i128).min(pr.cap as i128);
        let tb = earned - units(bytes) as i128;
        if tb >= 0 {
            self.hot[q].missing = (pr.cap as i128 - tb) as i64;
            self.hot[q].t_lu = now_ns;
            return Decision::Eligible;
        }
        // Lines 7-13.
        let alpha = self.adapt_alpha(q, now_ns);
        let delay_ns = ((alpha as i128 - tb) as u128).div_ceil(pr.cir as u128); // eq 4
        let t_resch = now_ns.saturating_add(u64::try_from(delay_ns).unwrap_or(u64::MAX)); // eq 5
        self.hot[q].t_lu = t_resch; // eq 6
        self.hot[q].missing = pr.cap - alpha; // eq 7: TB = alpha
        self.counters.reschedules += 1;
        self.counters.bucket_accesses += 1;
        if !self.disabled[q] {
            self.disabled[q] = true;
            self.timers[core].insert(q as u32, Instant::from_nanos(t_resch), now, obs);
        }
        // (A send on a queue that was already disabled only moves T_lu later; its node is
        // deferred when it pops.)
        Decision::Throttled { until: Instant::from_nanos(t_resch) }
    }

    /// Wait-for-tokens conformance, as Linux tbf and ns-3's TbfQueueDisc shape: the packet of
    /// `bytes` at the head of `queue` is sent at `now` only if the bucket holds its size, and
    /// then paid for (the bucket never goes negative). Otherwise it is not sent: the queue is
    /// disabled until the bucket will hold it and goes into `core`'s heap, as a reschedule;
    /// the caller keeps the packet and offers it again once [`Self::on_wakeup`] or
    /// [`Self::poll_core`] names the queue. The reschedule threshold (alpha) plays no part.
    /// A disabled queue is refused without a change.
    ///
    /// Errors (no effect): an unknown queue or core, `now` before a time already given, or a
    /// packet larger than the bucket's cap (it could never conform; tbf drops such packets).
    pub fn try_send_on<O: Observe>(
        &mut self,
        core: CoreId,
        queue: QueueId,
        bytes: u64,
        now: Instant,
        obs: &mut O,
    ) -> Result<Decision, Error> {
        let q = id::check(QueueId::KIND, queue.0, self.hot.len())?;
        let core = id::check(CoreId::KIND, core.0, self.timers.len())?;
        let pr = self.prof(q);
        if units(bytes) > pr.cap {
            return Err(Error::BadParameter {
                parameter: "packet size",
                value: format!("{bytes} B"),
                expected: "at most the bucket's cap",
            });
        }
        self.clock.advance(now)?;
        if self.disabled[q] {
            return Ok(Decision::Throttled { until: Instant::from_nanos(self.hot[q].t_lu) });
        }
        let now_ns = now.as_nanos();
        self.counters.bucket_accesses += 2;
        let h = self.hot[q];
        let earned =
            (self.tokens(q, pr) as i128 + (now_ns as i128 - h.t_lu as i128) * pr.cir as i128).min(pr.cap as i128);
        let need = units(bytes) as i128;
        if earned >= need {
            self.counters.sends += 1;
            self.hot[q].missing = (pr.cap as i128 - (earned - need)) as i64;
            self.hot[q].t_lu = now_ns;
            return Ok(Decision::Eligible);
        }
        // The first nanosecond at which the bucket holds the packet; the level then is kept as
        // (tokens, T_lu) in the future, as Algorithm 1 keeps a disabled queue's.
        let wait_ns = ((need - earned) as u128).div_ceil(pr.cir as u128) as u64;
        let t_wake = now_ns.saturating_add(wait_ns);
        let level = (earned + wait_ns as i128 * pr.cir as i128).min(pr.cap as i128);
        self.hot[q].missing = (pr.cap as i128 - level) as i64;
        self.hot[q].t_lu = t_wake;
        self.counters.reschedules += 1;
        self.disabled[q] = true;
        self.timers[core].insert(q as u32, Instant::from_nanos(t_wake), now, obs);
        Ok(Decision::Throttled { until: Instant::from_nanos(t_wake) })
    }

    /// Eq 14, applied lazily at a reschedule: closes the intervals that ended since the queue's
    /// last reschedule (the last with its count, the empty ones with a count of 0), then counts
    /// this reschedule. Returns the alpha to use.
    fn adapt_alpha(&mut self, q: usize, now_ns: u64) -> i64 {
        // Without adaptation a queue's alpha_change stays 0, and its cold record (not loaded
        // ahead, as its bucket is) is not read.
        let Some(a) = self.adaptive else { return self.alphas[self.profile_index(q)] };
        let k = (now_ns / a.interval.as_nanos()).min(u32::MAX as u64) as u32;
        let last = self.cold[q].interval_of;
        if k != last {
            let min = units(a.alpha_min_bytes) as f64;
            let cap = self.prof(q).cap as f64;
            let mut alpha = self.alpha(q) as f64;
            alpha = if self.cold[q].resch_count > a.delta_th {
                (alpha * a.gamma).min(cap)
            } else {
                (alpha / a.gamma).max(min)
            };
            let empty = k - last - 1; // intervals with no reschedule
            if empty > 0 {
                alpha = (alpha / a.gamma.powi(empty.min(4096) as i32)).max(min);
            }
            self.cold[q].alpha_change = alpha as i64 - self.alphas[self.profile_index(q)];
            self.cold[q].interval_of = k;
            self.cold[q].resch_count = 0;
        }
        self.cold[q].resch_count += 1;
        self.alpha(q)
    }

    /// End of a packet on `core` (Algorithm 1 lines 16-19): re-enables every queue of that
    /// core's heap whose reschedule time is at or before `now`, calling `enabled` for each.
    ///
    /// Errors (no effect): an unknown core, `now` before a time already given.
    #[inline]
    pub fn poll_core<O: Observe>(
        &mut self,
        core: CoreId,
        now: Instant,
        obs: &mut O,
        enabled: impl FnMut(QueueId),
    ) -> Result<(), Error> {
        let core = id::check(CoreId::KIND, core.0, self.timers.len())?;
        self.clock.advance(now)?;
        self.poll_checked(core, now, obs, enabled);
        Ok(())
    }

    /// [`Self::poll_core`] when core `core`'s heap has nothing due at `now`: true, having done
    /// what that poll does (the root's read, observed), so that a caller that knows the heap
    /// did not change since it last looked has nothing else to do. False, doing nothing, when
    /// something is due or the core has a timing wheel (whose poll moves its cursor): call
    /// [`Self::poll_core`].
    ///
    /// Errors (no effect): an unknown core, `now` before a time already given.
    #[inline]
    pub fn poll_core_idle<O: Observe>(&mut self, core: CoreId, now: Instant, obs: &mut O) -> Result<bool, Error> {
        let core = id::check(CoreId::KIND, core.0, self.timers.len())?;
        self.clock.advance(now)?;
        Ok(self.poll_idle_checked(core, now, obs))
    }

    /// [`Self::poll_core_idle`] on checked arguments, the clock at `now`.
    #[inline]
    fn poll_idle_checked<O: Observe>(&mut self, core: usize, now: Instant, obs: &mut O) -> bool {
        match &mut self.timers[core] {
            CoreTimer::Heap(h) => h.peek_not_due(now, obs),
            CoreTimer::Wheel(_) => false,
        }
    }

    fn poll_checked<O: Observe>(&mut self, core: usize, now: Instant, obs: &mut O, mut enabled: impl FnMut(QueueId)) {
        while let Some((q, _)) = self.timers[core].pop_due(now, obs) {
            let q = q as usize;
            if self.hot[q].t_lu > now.as_nanos() {
                // Popped before its exact time: put it back.
                self.counters.deferred += 1;
                self.timers[core].insert(q as u32, Instant::from_nanos(self.hot[q].t_lu), now, obs);
                continue;
            }
            self.disabled[q] = false;
            self.counters.reenabled += 1;
            enabled(QueueId::from_index(q));
        }
    }

    /// The timer call of the contract, for a data plane driven by a clock rather than by
    /// packet ends: re-enables the due queues of every core and appends them to `out`.
    ///
    /// Errors (no effect): `now` before a time already given. Calling it early is harmless.
    pub fn on_wakeup(&mut self, now: Instant, out: &mut Vec<QueueId>) -> Result<(), Error> {
        self.clock.advance(now)?;
        for c in 0..self.timers.len() {
            self.poll_checked(c, now, &mut (), |q| out.push(q));
        }
        Ok(())
    }

    /// When [`Self::on_wakeup`] must next be called: the earliest reschedule time over all
    /// heaps (O(cores); rounded up to the heap's tick), if any queue is disabled.
    pub fn next_wakeup(&self) -> Option<Instant> {
        self.timers.iter().filter_map(CoreTimer::peek_time).min()
    }

    /// Checks the invariants: a queue is disabled iff exactly one heap holds it, and every heap
    /// is ordered. O(queues + nodes). For tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut held = vec![0u32; self.hot.len()];
        for (c, t) in self.timers.iter().enumerate() {
            let queues: Vec<u32> = match t {
                CoreTimer::Heap(h) => {
                    h.check().map_err(|e| format!("core {c}: {e}"))?;
                    h.queues().collect()
                }
                CoreTimer::Wheel(w) => {
                    w.check().map_err(|e| format!("core {c}: {e}"))?;
                    w.queues().collect()
                }
            };
            for q in queues {
                *held.get_mut(q as usize).ok_or_else(|| format!("core {c} holds unknown queue {q}"))? += 1;
            }
        }
        for (q, (&d, &n)) in self.disabled.iter().zip(&held).enumerate() {
            if n > 1 || d != (n == 1) {
                return Err(format!("queue {q}: disabled = {d} but {n} heap nodes"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
