//! Baselines and workloads for the criterion benchmarks in `benches/` (results in
//! docs/PERFORMANCE.md).
//!
//! The shaper benchmark compares four ways to rate-limit N queues, all running kim's token
//! bucket with a reschedule threshold (Algorithm 1's arithmetic) and differing only in how
//! throttled queues wait for their tokens:
//!
//! * [`Event`]: npqos's `EventShaper` with one core's timer: the paper's reschedule heap
//!   ([`Event::heap`]) or the bucketed find-first-set wheel ([`Event::wheel`], Eiffel style);
//! * on one shared bucket path ([`Buckets`], the same record layout as `EventShaper`), the timer
//!   structures alone:
//! * [`Heap`]: npqos-core's reschedule heap (`shaper::heap::ReschedHeap`, the paper's);
//! * [`OrderedMap`]: throttled queues in a `BTreeMap` keyed by release time, as Linux `fq`
//!   keeps throttled flows in an rbtree and HTB its wait queue;
//! * [`FfsWheel`]: npqos-core's bucketed find-first-set timer (`shaper::wheel::TimerWheel`,
//!   Eiffel style);
//! * [`TimingWheel`]: a single-level timing wheel of release slots, as in Carousel
//!   (Saeed et al., SIGCOMM 2017): O(1) insert, one slot per tick, queues beyond the horizon
//!   parked in the last slot and re-filed;
//! * [`PeriodicSweep`]: the periodic-fill baseline as a data plane runs it, sweeping every
//!   bucket each fill period (npqos-core's `PeriodicShaper` computes fills lazily, which is
//!   right for simulation but not the baseline's real cost).
//!
//! A packet whose queue is throttled is dropped (kim's stochastic-model setting), so every
//! shaper sees the same offered stream.
//!
//! The stream can run a few packets ahead ([`Stream::with_lookahead`]): [`drive`] then hints
//! each shaper to start loading the bucket of the packet `k` places ahead
//! ([`BenchShaper::prefetch`]), as a data plane working on bursts of packets does. Without it,
//! at 1e6 queues every shaper waits on its bucket's cache miss for most of each packet and the
//! timers are hidden behind it.

pub mod frames;

use npqos_core::id::{CoreId, QueueId};
use npqos_core::shaper::heap::ReschedHeap;
use npqos_core::shaper::wheel::TimerWheel;
use npqos_core::shaper::{BucketParams, Decision, EventShaper, Timer};
use npqos_core::{Duration, Instant, Rate};
use std::collections::BTreeMap;

/// One data-plane shaper under benchmark.
pub trait BenchShaper {
    /// A packet of `bytes` for `queue` at `now`: sent (true) or dropped because the queue is
    /// throttled (false).
    fn packet(&mut self, queue: usize, bytes: u64, now: Instant) -> bool;
    /// End-of-packet housekeeping: release every queue whose time has come.
    fn poll(&mut self, now: Instant);
    /// A hint that a packet for `queue` comes soon: start loading its state (no effect on
    /// decisions).
    fn prefetch(&self, queue: usize);
}

/// Token units per byte (as npqos-core: 1 byte = 8e9 units, so a rate in bit/s earns exactly
/// `rate` units per ns).
const UNITS: i64 = 8_000_000_000;

/// What every send changes: 16 bytes, as `EventShaper` keeps it.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(16))]
struct Hot {
    tokens: i64,
    t_lu: u64,
}

/// Lazily updated token buckets with kim's reschedule threshold (eqs 1-7), laid out as
/// `EventShaper` lays them out: a throttled flag per queue in a byte array, and tokens and
/// `T_lu` together in one 16-byte record.
#[derive(Clone, Debug)]
pub struct Buckets {
    hot: Vec<Hot>,
    throttled: Vec<bool>,
    cir: i64,
    cap: i64,
    alpha: i64,
}

impl Buckets {
    pub fn new(n: usize, cir: Rate, cap_bytes: u64, alpha_bytes: u64) -> Self {
        let cap = cap_bytes as i64 * UNITS;
        Buckets {
            hot: vec![Hot { tokens: cap, t_lu: 0 }; n],
            throttled: vec![false; n],
            cir: cir.bits_per_sec() as i64,
            cap,
            alpha: alpha_bytes as i64 * UNITS,
        }
    }
    /// Charges a send; `Some(release time)` when it throttles the queue.
    #[inline]
    fn charge(&mut self, q: usize, bytes: u64, now: u64) -> Option<u64> {
        let h = self.hot[q];
        let earned = (h.tokens as i128 + (now as i128 - h.t_lu as i128) * self.cir as i128).min(self.cap as i128);
        let tb = earned - bytes as i128 * UNITS as i128;
        if tb >= 0 {
            self.hot[q] = Hot { tokens: tb as i64, t_lu: now };
            return None;
        }
        let delay = ((self.alpha as i128 - tb) as u128).div_ceil(self.cir as u128) as u64;
        let t = now + delay;
        self.hot[q] = Hot { tokens: self.alpha, t_lu: t };
        self.throttled[q] = true;
        Some(t)
    }
    #[inline]
    fn prefetch(&self, q: usize) {
        npqos_core::hint::prefetch(&self.throttled, q);
        npqos_core::hint::prefetch(&self.hot, q);
    }
}

/// npqos's event-driven shaper with one core's timer (64 ns ticks).
pub struct Event(pub EventShaper);

impl Event {
    /// With the paper's reschedule heap (8 KB locked).
    pub fn heap(n: usize, cir: Rate, cap: u64, alpha: u64) -> Self {
        Self::new(n, cir, cap, alpha, Timer::Heap)
    }
    /// With the bucketed wheel.
    pub fn wheel(n: usize, cir: Rate, cap: u64, alpha: u64) -> Self {
        Self::new(n, cir, cap, alpha, Timer::Wheel)
    }
    fn new(n: usize, cir: Rate, cap: u64, alpha: u64, timer: Timer) -> Self {
        let p = vec![BucketParams { cir, cap_bytes: cap, alpha_bytes: alpha }; n];
        Event(
            EventShaper::new(&p, 1, 8192, 6)
                .expect("valid parameters")
                .with_timer(timer)
                .expect("no queue throttled yet"),
        )
    }
}

impl BenchShaper for Event {
    #[inline]
    fn packet(&mut self, queue: usize, bytes: u64, now: Instant) -> bool {
        let q = QueueId::from_index(queue);
        if self.0.is_disabled(q) {
            return false;
        }
        let _: Decision = self.0.on_send_on(CoreId(0), q, bytes, now, &mut ()).expect("valid queue, time in order");
        true
    }
    #[inline]
    fn poll(&mut self, now: Instant) {
        self.0.poll_core(CoreId(0), now, &mut (), |_| {}).expect("time in order");
    }
    #[inline]
    fn prefetch(&self, queue: usize) {
        self.0.prefetch(QueueId::from_index(queue));
    }
}

/// Where throttled queues wait on the shared bucket path: the timer structure under test.
pub trait Waiting {
    fn empty() -> Self;
    /// Files `queue`, released at `release` ns (at or after `now`).
    fn file(&mut self, queue: u32, release: u64, now: Instant);
    /// Takes out one queue due at `now`, if any.
    fn pop_due(&mut self, now: Instant) -> Option<u32>;
}

/// npqos-core's reschedule heap (the paper's; 64 ns ticks, no locked region).
impl Waiting for ReschedHeap {
    fn empty() -> Self {
        ReschedHeap::new(0, 6).expect("valid tick")
    }
    #[inline]
    fn file(&mut self, queue: u32, release: u64, now: Instant) {
        self.insert(queue, Instant::from_nanos(release), now, &mut ()).expect("the stream never goes back");
    }
    #[inline]
    fn pop_due(&mut self, now: Instant) -> Option<u32> {
        ReschedHeap::pop_due(self, now, &mut ()).expect("the stream never goes back").map(|(q, _)| q)
    }
}

/// An ordered map keyed by (release time, queue), as Linux `fq` keeps throttled flows in an
/// rbtree and HTB its wait queue.
impl Waiting for BTreeMap<(u64, u32), ()> {
    fn empty() -> Self {
        BTreeMap::new()
    }
    #[inline]
    fn file(&mut self, queue: u32, release: u64, _now: Instant) {
        self.insert((release, queue), ());
    }
    #[inline]
    fn pop_due(&mut self, now: Instant) -> Option<u32> {
        let e = self.first_entry()?;
        (e.key().0 <= now.as_nanos()).then(|| e.remove_entry().0 .1)
    }
}

/// npqos-core's bucketed FFS timer (64 ns buckets, exact to the tick).
impl Waiting for TimerWheel {
    fn empty() -> Self {
        TimerWheel::new(6)
    }
    #[inline]
    fn file(&mut self, queue: u32, release: u64, now: Instant) {
        self.insert(queue, Instant::from_nanos(release), now).expect("the stream never goes back");
    }
    #[inline]
    fn pop_due(&mut self, now: Instant) -> Option<u32> {
        TimerWheel::pop_due(self, now).expect("the stream never goes back").map(|(q, _)| q)
    }
}

/// The shared bucket path with throttled queues waiting in `W`.
pub struct OnBuckets<W> {
    b: Buckets,
    w: W,
}

impl<W: Waiting> OnBuckets<W> {
    pub fn new(n: usize, cir: Rate, cap: u64, alpha: u64) -> Self {
        OnBuckets { b: Buckets::new(n, cir, cap, alpha), w: W::empty() }
    }
}

impl<W: Waiting> BenchShaper for OnBuckets<W> {
    #[inline]
    fn packet(&mut self, queue: usize, bytes: u64, now: Instant) -> bool {
        if self.b.throttled[queue] {
            return false;
        }
        if let Some(t) = self.b.charge(queue, bytes, now.as_nanos()) {
            self.w.file(queue as u32, t, now);
        }
        true
    }
    #[inline]
    fn poll(&mut self, now: Instant) {
        while let Some(q) = self.w.pop_due(now) {
            self.b.throttled[q as usize] = false;
        }
    }
    #[inline]
    fn prefetch(&self, queue: usize) {
        self.b.prefetch(queue);
    }
}

/// The paper's heap on the shared path.
pub type Heap = OnBuckets<ReschedHeap>;
/// An ordered map on the shared path.
pub type OrderedMap = OnBuckets<BTreeMap<(u64, u32), ()>>;
/// The FFS wheel on the shared path.
pub type FfsWheel = OnBuckets<TimerWheel>;

const NIL: u32 = u32::MAX;

/// A single-level timing wheel (Carousel): `slots` lists of queues, slot `i` covering
/// `[i, i + 1) x tick`; a queue is released at the end of its slot's tick (at most one tick
/// late), and one beyond the horizon is parked in the farthest slot and re-filed when reached.
pub struct TimingWheel {
    b: Buckets,
    tick_shift: u32,
    mask: u64,
    head: Vec<u32>,
    next: Vec<u32>,
    release: Vec<u64>,
    /// The tick up to which slots have been processed.
    cursor: u64,
}

impl TimingWheel {
    /// `2^slot_bits` slots of `2^tick_shift` ns each.
    pub fn new(n: usize, cir: Rate, cap: u64, alpha: u64, tick_shift: u32, slot_bits: u32) -> Self {
        TimingWheel {
            b: Buckets::new(n, cir, cap, alpha),
            tick_shift,
            mask: (1u64 << slot_bits) - 1,
            head: vec![NIL; 1 << slot_bits],
            next: vec![NIL; n],
            release: vec![0; n],
            cursor: 0,
        }
    }
    #[inline]
    fn file(&mut self, q: u32) {
        let tick = (self.release[q as usize] >> self.tick_shift).max(self.cursor + 1);
        let tick = tick.min(self.cursor + self.mask); // beyond the horizon: the farthest slot
        let slot = (tick & self.mask) as usize;
        self.next[q as usize] = self.head[slot];
        self.head[slot] = q;
    }
}

impl BenchShaper for TimingWheel {
    #[inline]
    fn packet(&mut self, queue: usize, bytes: u64, now: Instant) -> bool {
        if self.b.throttled[queue] {
            return false;
        }
        if self.cursor == 0 && now.as_nanos() >> self.tick_shift > 0 {
            self.cursor = now.as_nanos() >> self.tick_shift;
        }
        if let Some(t) = self.b.charge(queue, bytes, now.as_nanos()) {
            self.release[queue] = t;
            self.file(queue as u32);
        }
        true
    }
    #[inline]
    fn poll(&mut self, now: Instant) {
        // Only ticks that have completely passed: every release time in them is <= now.
        let target = (now.as_nanos() >> self.tick_shift).saturating_sub(1);
        while self.cursor < target {
            self.cursor += 1;
            let slot = (self.cursor & self.mask) as usize;
            let mut q = std::mem::replace(&mut self.head[slot], NIL);
            while q != NIL {
                let nq = self.next[q as usize];
                // Released at the end of its tick; a parked queue whose time is later is re-filed.
                if self.release[q as usize] >> self.tick_shift <= self.cursor {
                    self.b.throttled[q as usize] = false;
                } else {
                    self.file(q);
                }
                q = nq;
            }
        }
    }
    #[inline]
    fn prefetch(&self, queue: usize) {
        self.b.prefetch(queue);
    }
}

/// The periodic-fill baseline with a real sweep: every `period`, every bucket gains
/// `CIR x period` up to the cap (one read-modify-write each) and a throttled queue whose
/// bucket is non-negative is released.
pub struct PeriodicSweep {
    tokens: Vec<i64>,
    throttled: Vec<bool>,
    fill: i64,
    cap: i64,
    period: u64,
    next_fill: u64,
}

impl PeriodicSweep {
    pub fn new(n: usize, cir: Rate, cap: u64, period: Duration) -> Self {
        PeriodicSweep {
            tokens: vec![cap as i64 * UNITS; n],
            throttled: vec![false; n],
            fill: cir.bits_per_sec() as i64 * period.as_nanos() as i64,
            cap: cap as i64 * UNITS,
            period: period.as_nanos(),
            next_fill: period.as_nanos(),
        }
    }
}

impl BenchShaper for PeriodicSweep {
    #[inline]
    fn packet(&mut self, queue: usize, bytes: u64, _now: Instant) -> bool {
        if self.throttled[queue] {
            return false;
        }
        self.tokens[queue] -= bytes as i64 * UNITS;
        if self.tokens[queue] < 0 {
            self.throttled[queue] = true;
        }
        true
    }
    #[inline]
    fn poll(&mut self, now: Instant) {
        while now.as_nanos() >= self.next_fill {
            self.next_fill += self.period;
            for (t, th) in self.tokens.iter_mut().zip(self.throttled.iter_mut()) {
                *t = (*t + self.fill).min(self.cap);
                if *th && *t >= 0 {
                    *th = false;
                }
            }
        }
    }
    #[inline]
    fn prefetch(&self, queue: usize) {
        npqos_core::hint::prefetch(&self.throttled, queue);
        npqos_core::hint::prefetch(&self.tokens, queue);
    }
}

/// The offered stream: packets to uniformly random queues, IMIX sizes (kim Table I), Poisson
/// arrivals whose mean rate is `overload` x the link rate. A small xorshift generator, so its
/// cost is a few ns per packet (measured alone as the `generator` baseline). With a lookahead
/// of `k`, the packets are generated `k` ahead of the one handed out (the same packets).
pub struct Stream {
    state: u64,
    queues: u64,
    /// Mean inter-packet time in ns x 2^16 (fixed point).
    mean_gap_fp: u64,
    /// Time of the last packet generated.
    pub now: u64,
    /// The packets generated and not yet handed out (a ring of `lookahead` slots).
    ahead: Vec<(usize, u64, Instant)>,
    next: usize,
}

impl Stream {
    pub fn new(queues: usize, link: Rate, overload: f64, seed: u64) -> Self {
        let mean_bytes = 514.9;
        let gap_ns = mean_bytes * 8.0 / (link.bits_per_sec() as f64 * overload) * 1e9;
        Stream {
            state: seed | 1,
            queues: queues as u64,
            mean_gap_fp: (gap_ns * 65536.0) as u64,
            now: 0,
            ahead: Vec::new(),
            next: 0,
        }
    }
    /// Generates packets `k` ahead of the one [`Self::next_packet`] hands out, so that
    /// [`Self::newest`] names a queue `k` packets before its turn.
    pub fn with_lookahead(mut self, k: usize) -> Self {
        self.ahead = (0..k).map(|_| self.generate()).collect();
        self
    }
    #[inline]
    fn rand(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        x
    }
    #[inline]
    fn generate(&mut self) -> (usize, u64, Instant) {
        let r = self.rand();
        let q = ((r >> 32) * self.queues) >> 32;
        // IMIX: 7 x 40 B, 4 x 576 B, 1 x 1500 B out of 12.
        let k = (r & 0xffff) % 12;
        let bytes = if k < 7 {
            40
        } else if k < 11 {
            576
        } else {
            1500
        };
        // Exponential gap by inversion: -ln(U) x mean.
        let u = ((self.rand() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        self.now += ((-u.ln()) * self.mean_gap_fp as f64) as u64 >> 16;
        (q as usize, bytes, Instant::from_nanos(self.now))
    }
    /// The next packet: (queue, bytes, time).
    #[inline]
    pub fn next_packet(&mut self) -> (usize, u64, Instant) {
        if self.ahead.is_empty() {
            return self.generate();
        }
        let p = self.generate();
        let out = std::mem::replace(&mut self.ahead[self.next], p);
        self.next = if self.next + 1 == self.ahead.len() { 0 } else { self.next + 1 };
        out
    }
    /// The queue of the packet generated last (the lookahead's farthest), if there is a
    /// lookahead.
    #[inline]
    pub fn newest(&self) -> Option<usize> {
        if self.ahead.is_empty() {
            return None;
        }
        let last = if self.next == 0 { self.ahead.len() - 1 } else { self.next - 1 };
        Some(self.ahead[last].0)
    }
}

/// Runs `packets` packets of `stream` through `s` (send, then end-of-packet poll); returns the
/// number sent. With a lookahead, each packet first hints the shaper about the packet `k`
/// places behind it.
#[inline]
pub fn drive<S: BenchShaper>(s: &mut S, stream: &mut Stream, packets: u64) -> u64 {
    let mut sent = 0;
    for _ in 0..packets {
        let (q, b, now) = stream.next_packet();
        if let Some(a) = stream.newest() {
            s.prefetch(a);
        }
        sent += s.packet(q, b, now) as u64;
        s.poll(now);
    }
    sent
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: usize = 2000;

    fn rate() -> Rate {
        Rate::gbps(1).share(N as u64)
    }

    /// The ordered-map shaper is the same algorithm as npqos's heap shaper with another
    /// container: identical send/drop decisions, packet for packet.
    #[test]
    fn ordered_map_decides_exactly_like_the_event_heap() {
        let (mut a, mut b) = (Event::heap(N, rate(), 3000, 3000), OrderedMap::new(N, rate(), 3000, 3000));
        let mut s = Stream::new(N, Rate::gbps(1), 1.3, 7);
        let mut throttled = 0;
        for i in 0..500_000 {
            let (q, bytes, now) = s.next_packet();
            let (x, y) = (a.packet(q, bytes, now), b.packet(q, bytes, now));
            assert_eq!(x, y, "packet {i}");
            throttled += (!x) as u32;
            a.poll(now);
            b.poll(now);
        }
        assert!(throttled > 10_000, "the workload throttles ({throttled})");
    }

    /// A lookahead hands out the same packets, and `newest` names the packet `k` ahead.
    #[test]
    fn the_lookahead_hands_out_the_same_packets() {
        let mut a = Stream::new(N, Rate::gbps(1), 1.3, 5);
        let mut b = Stream::new(N, Rate::gbps(1), 1.3, 5).with_lookahead(8);
        let mut hinted = std::collections::VecDeque::new();
        for i in 0..10_000 {
            let p = b.next_packet();
            assert_eq!(a.next_packet(), p, "packet {i}");
            if i >= 8 {
                assert_eq!(hinted.pop_front(), Some(p.0), "packet {i} was named 8 ahead");
            }
            hinted.push_back(b.newest().unwrap());
        }
    }

    /// Every shaper on the shared bucket path that runs kim's arithmetic decides exactly as
    /// npqos's `EventShaper`, with and without the lookahead's hints.
    #[test]
    fn the_shared_path_decides_exactly_like_the_event_shaper() {
        let mut e = Event::heap(N, rate(), 3000, 3000);
        let mut h = Heap::new(N, rate(), 3000, 3000);
        let mut f = FfsWheel::new(N, rate(), 3000, 3000);
        let mut s = Stream::new(N, Rate::gbps(1), 1.3, 11).with_lookahead(8);
        let mut throttled = 0;
        for i in 0..500_000 {
            let (q, bytes, now) = s.next_packet();
            let a = s.newest().unwrap();
            e.prefetch(a);
            h.prefetch(a);
            f.prefetch(a);
            let x = e.packet(q, bytes, now);
            assert_eq!((h.packet(q, bytes, now), f.packet(q, bytes, now)), (x, x), "packet {i}");
            throttled += (!x) as u32;
            e.poll(now);
            h.poll(now);
            f.poll(now);
        }
        assert!(throttled > 10_000, "the workload throttles ({throttled})");
    }

    /// The FFS wheel releases queues at the same ticks as the heap: identical decisions.
    #[test]
    fn the_ffs_wheel_decides_exactly_like_the_heap() {
        let (mut a, mut b) = (Event::heap(N, rate(), 3000, 3000), Event::wheel(N, rate(), 3000, 3000));
        let mut s = Stream::new(N, Rate::gbps(1), 1.3, 9);
        for i in 0..500_000 {
            let (q, bytes, now) = s.next_packet();
            assert_eq!(a.packet(q, bytes, now), b.packet(q, bytes, now), "packet {i}");
            a.poll(now);
            b.poll(now);
        }
        assert_eq!(a.0.counters(), b.0.counters());
    }

    /// None sends more than its configured rate over a long run at overload 1.3 (plus the
    /// initial full buckets), and all send a good part of it. (Dropping while throttled, tokens
    /// earned while a bucket is full are lost, so the sent rate is below the CIR.)
    #[test]
    fn every_shaper_holds_the_rate() {
        let secs = 20.0;
        let pkts = (1e9 * 1.3 * secs / (514.9 * 8.0)) as u64;
        let cir_bytes = rate().bits_per_sec() as f64 / 8.0 * N as f64 * secs;
        let check = |name: &str, s: &mut dyn FnMut(usize, u64, Instant) -> bool| {
            let mut st = Stream::new(N, Rate::gbps(1), 1.3, 3);
            let mut bytes = 0u64;
            for _ in 0..pkts {
                let (q, b, now) = st.next_packet();
                if s(q, b, now) {
                    bytes += b;
                }
            }
            let ratio = bytes as f64 / cir_bytes;
            assert!(ratio > 0.6 && ratio < 1.01, "{name}: sent / CIR = {ratio}");
        };
        let mut e = Event::heap(N, rate(), 3000, 3000);
        check("heap", &mut |q, b, t| {
            let x = e.packet(q, b, t);
            e.poll(t);
            x
        });
        let mut w = TimingWheel::new(N, rate(), 3000, 3000, 10, 16);
        check("wheel", &mut |q, b, t| {
            let x = w.packet(q, b, t);
            w.poll(t);
            x
        });
        let mut p = PeriodicSweep::new(N, rate(), 3000, Duration::from_millis(1));
        check("sweep", &mut |q, b, t| {
            let x = p.packet(q, b, t);
            p.poll(t);
            x
        });
    }

    /// The wheel never releases a queue before its time (a parked queue beyond the horizon is
    /// re-filed, not released).
    #[test]
    fn wheel_never_releases_early() {
        let mut w = TimingWheel::new(4, Rate::from_bits_per_sec(8_000), 1000, 1000, 10, 4); // 16 ticks of 1024 ns
        assert!(w.packet(0, 1500, Instant::from_nanos(5000)));
        let due = w.release[0];
        assert!(due > 16 * 1024 * 10, "far beyond the horizon: {due}");
        let mut t = 5000;
        while w.b.throttled[0] {
            t += 700;
            w.poll(Instant::from_nanos(t));
        }
        assert!(t >= due && t < due + 3 * 1024 + 700, "released at {t}, due {due}");
    }
}
