//! A second timer for throttled queues: a hierarchical bucketed priority queue over integer
//! ticks, found by find-first-set over occupancy bitmaps, in the style of Eiffel (Saeed et
//! al., "Eiffel: Efficient and Flexible Software Packet Scheduling", NSDI 2019). Not in the
//! kim paper; [`super::EventShaper`] uses it instead of the per-core [`super::heap::ReschedHeap`]
//! when built with [`super::Timer::Wheel`].
//!
//! Geometry:
//!
//! * **Bucket width**: one tick of `2^tick_shift` ns, as the heap's (default 64 ns). A time is
//!   rounded **up** to its tick, exactly as the heap rounds it, so a queue comes due at the same
//!   tick under either timer: the wheel adds no error of its own. (Within one tick the order of
//!   release is unspecified under both.)
//! * **Levels**: [`LEVELS`] = 10 levels of 64 buckets, each with a 64-bit occupancy word. Ticks
//!   are 64-bit; a cursor tick `c` (never above any stored tick, never above `now`) anchors
//!   them: a tick `t` goes to the level of the highest 6-bit digit in which `t` and `c` differ
//!   (level 0 if none), into the bucket named by `t`'s digit at that level. Level 0's buckets
//!   are single ticks; level `k`'s span `64^k` ticks. Ten levels cover all 60 bits a tick can
//!   have: **no range limit and no overflow list** (the heap's 32-bit offsets saturate after
//!   274 s at 64 ns; the shaper re-inserts such queues).
//! * **Insert**: O(1): one XOR, one leading-zero count, a push onto the bucket, a bit set, and
//!   the bucket's minimum tick updated.
//! * **Earliest time**: kept in one field, updated by every insert and by a pop that empties a
//!   bucket or takes from the run (below), so "is anything due?" is one comparison.
//! * **Pop due**: when level 0 is empty, the earliest bucket of the lowest non-empty level is
//!   emptied into lower levels with the cursor moved to its minimum (a cascade; each entry
//!   moves down at most nine times in its life); then level 0's first bucket holds exactly the
//!   earliest tick. A bucket of at most [`RUN_MAX`] entries is not cascaded but sorted into the
//!   **run**, a short vector served from its end, and the cursor moves to its largest tick
//!   (every other entry lies beyond the bucket, so keeps its place). An insert at or before
//!   that tick joins the run at its sorted place. With the kim row's reschedules (about 2,200
//!   per core spread over 0.36 s), an entry moves once instead of two or three times.
//!
//! The levels, their occupancy words and the filing rule are [`crate::radix::Levels`], which
//! the simulator's event queue uses too.
//!
//! Memory: 16 B per queued entry (tick and queue) in per-bucket vectors, plus 640 bucket
//! headers per timer.
//!
//! On the mechanism contract (ARCHITECTURE.md): [`TimerWheel::insert`] and
//! [`TimerWheel::pop_due`] refuse a `now` before one they were already given
//! ([`Error::TimeWentBackwards`], no effect), one comparison against the last `now`, declared
//! beside the earliest tick that every call reads. [`super::EventShaper`] drives its wheels
//! after its own clock has checked `now`, through crate-private entry points that skip the
//! second check.

use crate::error::{Clock, Error};
use crate::radix::{Levels, SLOTS};
use crate::time::Instant;

/// Levels of 64 buckets (6 bits of tick each: 60 bits).
pub const LEVELS: usize = 10;

/// The largest bucket sorted into the run rather than cascaded.
pub const RUN_MAX: usize = 32;

/// Operation counts of one [`TimerWheel`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WheelCounters {
    pub inserts: u64,
    pub deletes: u64,
    /// Entries moved to a lower level by a cascade.
    pub cascaded: u64,
    /// Entries sorted into the run (see the module documentation).
    pub sorted: u64,
}

impl WheelCounters {
    pub fn add(&mut self, o: &WheelCounters) {
        self.inserts += o.inserts;
        self.deletes += o.deletes;
        self.cascaded += o.cascaded;
        self.sorted += o.sorted;
    }
}

/// One core's bucketed timer. See the module documentation.
#[derive(Clone, Debug)]
pub struct TimerWheel {
    /// `LEVELS x SLOTS` buckets of `(tick, queue)`, filed against the cursor.
    buckets: Levels<(u64, u32), LEVELS>,
    /// Per bucket, the smallest tick in it (meaningless while it is empty).
    min: Vec<u64>,
    /// The smallest tick filed (`u64::MAX` when empty): the answer to "anything due?" without
    /// looking at the levels.
    earliest: u64,
    /// The last `now` the public calls accepted: one comparison per call, declared beside
    /// `earliest`, which every call reads.
    clock: Clock,
    /// Entries taken from a small first bucket, by tick from last to first: the earliest is
    /// at the end. All at or before the cursor; every entry of the levels at or after it.
    run: Vec<(u64, u32)>,
    cursor: u64,
    len: usize,
    tick_shift: u32,
    counters: WheelCounters,
}

impl TimerWheel {
    /// An empty timer with ticks of `2^tick_shift` ns (`tick_shift` at most 20, checked by the
    /// shaper).
    pub fn new(tick_shift: u32) -> Self {
        TimerWheel {
            buckets: Levels::new(),
            min: vec![u64::MAX; LEVELS * SLOTS],
            earliest: u64::MAX,
            clock: Clock::default(),
            run: Vec::with_capacity(RUN_MAX),
            cursor: 0,
            len: 0,
            tick_shift,
            counters: WheelCounters::default(),
        }
    }

    /// Queues waiting.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn counters(&self) -> &WheelCounters {
        &self.counters
    }

    /// The queues waiting, in bucket order.
    pub fn queues(&self) -> impl Iterator<Item = u32> + '_ {
        self.run.iter().rev().chain(self.buckets.iter()).map(|&(_, q)| q)
    }

    /// Checks the structure: every entry in the bucket its tick names, every bucket's minimum
    /// and occupancy bit right, the count right. For tests.
    pub fn check(&self) -> Result<(), String> {
        self.buckets.check()?;
        let mut n = 0;
        for b in 0..LEVELS * SLOTS {
            let v = self.buckets.slot(b);
            n += v.len();
            if let Some(&(t, q)) = v.iter().find(|&&(t, _)| t < self.cursor || self.bucket_of(t) != b) {
                return Err(format!("bucket {b}: queue {q} at tick {t} belongs elsewhere (cursor {})", self.cursor));
            }
            if !v.is_empty() && v.iter().map(|x| x.0).min() != Some(self.min[b]) {
                return Err(format!("bucket {b}: wrong minimum"));
            }
        }
        if !self.run.is_sorted_by(|a, b| a.0 >= b.0) {
            return Err("run out of order".into());
        }
        if let Some(&(t, q)) = self.run.iter().find(|x| x.0 > self.cursor) {
            return Err(format!("run: queue {q} at tick {t} after the cursor {}", self.cursor));
        }
        n += self.run.len();
        if n != self.len {
            return Err(format!("{} entries counted as {}", n, self.len));
        }
        let least = self.buckets.iter().chain(&self.run).map(|x| x.0).min().unwrap_or(u64::MAX);
        if least != self.earliest {
            return Err(format!("earliest tick kept as {} but is {least}", self.earliest));
        }
        Ok(())
    }

    /// The tick of `t` ns, rounded up (as the heap rounds).
    #[inline]
    fn tick_of(&self, t: Instant) -> u64 {
        t.as_nanos().div_ceil(1 << self.tick_shift)
    }

    #[inline]
    fn time_of(&self, tick: u64) -> Instant {
        Instant::from_nanos(tick.saturating_mul(1 << self.tick_shift))
    }

    /// Where `tick` (at least the cursor) goes: its bucket's index.
    #[inline(always)]
    fn bucket_of(&self, tick: u64) -> usize {
        Levels::<(u64, u32), LEVELS>::index(self.cursor, tick)
    }

    #[inline(always)]
    fn put(&mut self, tick: u64, queue: u32) {
        let b = self.bucket_of(tick);
        self.buckets.push(b, (tick, queue));
        if tick < self.min[b] {
            self.min[b] = tick;
        }
    }

    /// Files `queue` for `time`: normally at or after `now`; an earlier one is not refused and
    /// comes due at its tick (`now`'s, rounded down, at the earliest).
    ///
    /// Errors (no effect): `now` before a time already given to `insert` or `pop_due`.
    #[inline]
    pub fn insert(&mut self, queue: u32, time: Instant, now: Instant) -> Result<(), Error> {
        self.clock.advance(now)?;
        self.insert_unclocked(queue, time, now);
        Ok(())
    }

    /// [`Self::insert`] for a caller whose own clock has checked `now` (the shaper): no check,
    /// and the wheel's clock is left as it was.
    #[inline]
    pub(crate) fn insert_unclocked(&mut self, queue: u32, time: Instant, now: Instant) {
        if self.len == 0 {
            // Nothing anchors the cursor: bring it up to now (fewer levels, fewer cascades).
            self.cursor = now.as_nanos() >> self.tick_shift;
        }
        // (A time already past is due at once, as in the heap.)
        let tick = self.tick_of(time).max(now.as_nanos() >> self.tick_shift);
        self.counters.inserts += 1;
        self.len += 1;
        self.earliest = self.earliest.min(tick);
        if tick < self.cursor {
            // Only while a run holds the ticks up to the cursor: join it in order.
            let at = self.run.partition_point(|x| x.0 > tick);
            self.run.insert(at, (tick, queue));
        } else {
            self.put(tick, queue);
        }
    }

    /// The earliest time filed, rounded up to its tick (as [`super::heap::ReschedHeap::peek_time`]).
    #[inline]
    pub fn peek_time(&self) -> Option<Instant> {
        (self.earliest != u64::MAX).then(|| self.time_of(self.earliest))
    }

    /// Removes one queue whose tick is at or before `now` and returns it with its time.
    ///
    /// Errors (no effect): `now` before a time already given to `insert` or `pop_due`.
    #[inline]
    pub fn pop_due(&mut self, now: Instant) -> Result<Option<(u32, Instant)>, Error> {
        self.clock.advance(now)?;
        Ok(self.pop_due_unclocked(now))
    }

    /// [`Self::pop_due`] for a caller whose own clock has checked `now` (the shaper).
    #[inline]
    pub(crate) fn pop_due_unclocked(&mut self, now: Instant) -> Option<(u32, Instant)> {
        if self.earliest > now.as_nanos() >> self.tick_shift {
            return None; // (also when empty)
        }
        let (tick, queue) = match self.run.last() {
            Some(&(t, _)) if t == self.earliest => self.pop_run(),
            _ => self.pop_levels(),
        };
        self.len -= 1;
        self.counters.deletes += 1;
        Some((queue, self.time_of(tick)))
    }

    /// Takes the earliest entry of the levels (the earliest of all).
    #[inline]
    fn pop_levels(&mut self) -> (u64, u32) {
        let mut b = self.buckets.first().expect("an earliest tick is filed");
        while b >= SLOTS {
            if self.buckets.slot(b).len() <= RUN_MAX && self.run.is_empty() {
                self.sort_into_run(b);
                return self.pop_run();
            }
            self.cascade(b);
            b = self.buckets.first().expect("a cascade keeps its entries");
        }
        let e = self.buckets.pop(b).expect("an occupied bucket has entries");
        if self.buckets.slot(b).is_empty() {
            self.min[b] = u64::MAX;
            self.refresh_earliest();
        }
        e
    }

    #[inline]
    fn pop_run(&mut self) -> (u64, u32) {
        let e = self.run.pop().expect("the run holds the earliest");
        self.refresh_earliest();
        e
    }

    /// The earliest tick again, after the entry holding it left: the run's last or the first
    /// bucket's minimum (exact: a level-0 bucket is one tick, a higher one keeps its minimum).
    #[inline]
    fn refresh_earliest(&mut self) {
        let levels = self.buckets.first().map_or(u64::MAX, |f| self.min[f]);
        self.earliest = self.run.last().map_or(levels, |r| r.0.min(levels));
    }

    /// Empties bucket `b` (above level 0) into lower levels, the cursor moved to its minimum:
    /// every entry of the bucket shares the digits above its level with the new cursor, and
    /// every other entry keeps its place (see the module documentation).
    #[cold]
    fn cascade(&mut self, b: usize) {
        let entries = self.buckets.take(b);
        self.cursor = self.min[b];
        self.min[b] = u64::MAX;
        self.counters.cascaded += entries.len() as u64;
        for &(tick, queue) in &entries {
            self.put(tick, queue);
        }
        // Keep the bucket's allocation for its next use.
        self.buckets.give_back(b, entries, usize::MAX);
    }

    /// Sorts bucket `b` (above level 0, the first, the run empty) into the run and moves the
    /// cursor to its last tick: the levels keep every other entry where it is, since all lie
    /// beyond the bucket. Leaves `earliest` as it was (the bucket's minimum) for the caller's
    /// pop to refresh.
    fn sort_into_run(&mut self, b: usize) {
        let mut entries = self.buckets.take(b);
        self.min[b] = u64::MAX;
        self.counters.sorted += entries.len() as u64;
        entries.sort_unstable_by(|x, y| y.cmp(x));
        self.cursor = entries[0].0;
        self.run.extend_from_slice(&entries);
        self.buckets.give_back(b, entries, usize::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shaper::heap::ReschedHeap;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// The heap and the wheel, fed the same inserts and polls, release the same queues at the
    /// same polls with the same (tick-rounded) times, and agree on the earliest time throughout.
    #[test]
    fn releases_what_the_heap_releases() {
        for (seed, shift, span) in [(1u64, 6u32, 4_000_000u64), (2, 0, 100_000), (3, 0, 1 << 31), (4, 10, 50_000)] {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut h = ReschedHeap::new(0, shift).unwrap();
            let mut w = TimerWheel::new(shift);
            let mut now = 0u64;
            let mut q = 0u32;
            for step in 0..300_000u32 {
                if rng.random_range(0..10) < 5 {
                    // Some times far ahead (beyond the heap's 32-bit range with shift 0).
                    let t = now + rng.random_range(0..span);
                    let (n, t) = (Instant::from_nanos(now), Instant::from_nanos(t));
                    h.insert(q, t, n, &mut ()).unwrap();
                    w.insert(q, t, n).unwrap();
                    q += 1;
                } else {
                    now += rng.random_range(0..span / 8);
                    let n = Instant::from_nanos(now);
                    let mut a = vec![];
                    while let Some(x) = h.pop_due(n, &mut ()).unwrap() {
                        a.push(x);
                    }
                    let mut b = vec![];
                    while let Some(x) = w.pop_due(n).unwrap() {
                        b.push(x);
                    }
                    a.sort_unstable();
                    b.sort_unstable();
                    assert_eq!(a, b, "seed {seed} step {step}");
                }
                assert_eq!(h.len(), w.len());
                assert_eq!(h.peek_time(), w.peek_time(), "seed {seed} step {step}");
                if step % 997 == 0 {
                    w.check().unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
                }
            }
        }
    }

    /// A small bucket becomes the run; inserts at or before its last tick join it in order,
    /// later ones go to the levels; everything comes out by tick.
    #[test]
    fn the_run_takes_inserts_in_order() {
        let mut w = TimerWheel::new(0);
        let now = Instant::from_nanos(0);
        for (q, t) in [(1u32, 5000u64), (2, 4100), (3, 4500), (4, 900_000)] {
            w.insert(q, Instant::from_nanos(t), now).unwrap();
        }
        // 4100, 4500 and 5000 share a level-2 bucket: sorted into the run at the first pop.
        assert_eq!(w.pop_due(Instant::from_nanos(4100)).unwrap(), Some((2, Instant::from_nanos(4100))));
        assert_eq!(w.counters().sorted, 3);
        let now = Instant::from_nanos(4200);
        w.insert(5, Instant::from_nanos(4300), now).unwrap(); // joins the run, before 4500
        w.insert(6, Instant::from_nanos(4999), now).unwrap(); // joins the run, before 5000
        w.insert(7, Instant::from_nanos(6000), now).unwrap(); // beyond the run: the levels
        w.check().unwrap();
        assert_eq!(w.peek_time(), Some(Instant::from_nanos(4300)));
        let mut out = vec![];
        while let Some((q, t)) = w.pop_due(Instant::from_nanos(10_000_000)).unwrap() {
            out.push((t.as_nanos(), q));
            w.check().unwrap();
        }
        assert_eq!(out, [(4300, 5), (4500, 3), (4999, 6), (5000, 1), (6000, 7), (900_000, 4)]);
    }

    /// A `now` before one already given is refused by both calls and changes nothing (the
    /// wheel used to take it: an insert filed the queue, possibly behind the cursor).
    #[test]
    fn time_going_backwards_is_refused() {
        let mut w = TimerWheel::new(0);
        w.insert(1, Instant::from_nanos(5000), Instant::from_nanos(4000)).unwrap();
        let before = (w.len(), w.peek_time(), *w.counters(), w.cursor, w.earliest);
        let back = Error::TimeWentBackwards { now: Instant::from_nanos(3999), last: Instant::from_nanos(4000) };
        assert_eq!(w.insert(2, Instant::from_nanos(4500), Instant::from_nanos(3999)), Err(back.clone()));
        assert_eq!(w.pop_due(Instant::from_nanos(3999)), Err(back));
        assert_eq!(before, (w.len(), w.peek_time(), *w.counters(), w.cursor, w.earliest));
        w.check().unwrap();
        assert_eq!(w.pop_due(Instant::from_nanos(4000)), Ok(None));
        assert_eq!(w.pop_due(Instant::from_nanos(5000)), Ok(Some((1, Instant::from_nanos(5000)))));
        assert!(w.insert(3, Instant::from_nanos(6000), Instant::from_nanos(4999)).is_err());
        assert!(w.is_empty());
        w.check().unwrap();
    }

    #[test]
    fn never_early_and_exact_at_the_tick() {
        let mut w = TimerWheel::new(6);
        let now = Instant::from_nanos(970);
        w.insert(1, Instant::from_nanos(1000), now).unwrap();
        w.insert(2, Instant::from_nanos(5_000_000_000), now).unwrap();
        assert_eq!(w.peek_time(), Some(Instant::from_nanos(1024)), "rounded up to the 64 ns tick");
        assert_eq!(w.pop_due(Instant::from_nanos(1023)).unwrap(), None);
        assert_eq!(w.pop_due(Instant::from_nanos(1024)).unwrap(), Some((1, Instant::from_nanos(1024))));
        assert_eq!(w.pop_due(Instant::from_nanos(4_999_999_999)).unwrap(), None);
        let far = Instant::from_nanos(5_000_000_000u64.div_ceil(64) * 64);
        assert_eq!(w.peek_time(), Some(far));
        assert_eq!(w.pop_due(far).unwrap(), Some((2, far)));
        assert!(w.is_empty() && w.pop_due(Instant::MAX).unwrap().is_none());
        let c = *w.counters();
        assert_eq!((c.inserts, c.deletes), (2, 2));
        assert!(c.cascaded + c.sorted >= 1, "the far entry started above level 0");
    }
}
