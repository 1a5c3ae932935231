//! The deterministic discrete-event engine.
//!
//! A model implements [`Model`]; the [`Engine`] pops events in `(time, class, insertion
//! sequence)` order and hands each to the model together with the engine itself, through which
//! the model schedules and cancels further events. The class (0 unless the model gives one with
//! [`Engine::schedule_class`]) is how a model states that at one instant some event kinds run
//! before others (completions before arrivals); each model's doc page lists its classes. A model
//! may also have a *source* of lazily produced events ([`Model::next_source`]) that the engine
//! merges by `(time, class)` without queueing them, or, when the source takes a ticket
//! ([`Engine::ticket`]) as it makes each event, exactly where a queued event would have run
//! ([`Model::next_source_key`]; kim's per-queue arrivals in a [`calendar::Calendar`]). A model
//! may have its source events that follow one another run in a row without a new look at the
//! queue, as long as no event is pushed ([`Model::SOURCE_ROWS`], [`EventQueue::pushes`]): the
//! same order as one event at a time.
//! A run stops when the queue and the source are drained, at an end time, after an event budget, when an interrupt flag (Ctrl-C) is raised,
//! or when the model halts it; the [`StopReason`] says which.
//!
//! **Invariant:** nothing in the engine depends on wall-clock time or thread scheduling, so a
//! model that draws randomness only from [`crate::rng::RngStreams`] replays byte for byte.

pub mod calendar;
pub mod feed;
pub mod queue;

use npqos_core::{Duration, Instant};
pub use queue::{EventKey, EventQueue};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A simulation model driven by the engine.
///
/// Besides the events it schedules, a model may have one **source**: events it produces
/// lazily, such as the next packet of a time-ordered arrival stream or a mechanism's
/// `next_wakeup()`, which need not pass through the event queue. The engine asks for the next
/// source event's time and class before every step and runs whichever comes first by
/// `(time, class)`; at an equal time and class the queued event runs first, unless the source
/// gives each event the ticket it took when making it ([`Model::next_source_key`]): then the
/// order is the one the events would have had in the queue.
pub trait Model {
    /// Events are small plain values (stored inline in the event queue).
    type Event: Copy;
    /// Handles one event at `engine.now()`.
    fn handle(&mut self, event: Self::Event, engine: &mut Engine<Self::Event>);
    /// Time and class of the next source event, if any (default: no source).
    #[inline]
    fn next_source(&mut self) -> Option<(Instant, u8)> {
        None
    }
    /// The next source event's place in the engine's order. By default the time and class
    /// [`next_source`](Self::next_source) gives, after every queued event of that time and
    /// class; a source that takes a ticket ([`Engine::ticket`]) when it makes an event gives
    /// that, and runs exactly where the event would have run had it been scheduled then.
    #[inline]
    fn next_source_key(&mut self) -> Option<EventKey> {
        self.next_source().map(|(t, c)| EventKey::after_queued(t, c))
    }
    /// Runs the source event [`next_source_key`](Self::next_source_key) placed, at
    /// `engine.now()`.
    #[inline]
    fn source(&mut self, _engine: &mut Engine<Self::Event>) {}
    /// Whether the engine runs this model's source events in a row while they come first and
    /// push nothing (see [`Engine::run`]): the same order and counts either way. Worth it for a
    /// source whose events seldom push (kim's arrivals: about 16 instructions fewer an arrival;
    /// the link model's arrivals and departures, two source events a packet: about 47 fewer a
    /// packet); a source that pushes at nearly every event (the router's) keeps the plain
    /// loop, which the row's checks made 1% slower.
    const SOURCE_ROWS: bool = false;
}

/// Why [`Engine::run`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// No events are left.
    Drained,
    /// The next event lies after the end time; `now` was advanced to the end time.
    EndTime,
    /// The event budget was used up.
    Budget,
    /// The interrupt flag was raised (e.g. Ctrl-C); results are partial.
    Interrupted,
    /// The model called [`Engine::halt`] (it found an error it reports itself).
    Halted,
}

/// Limits of one [`Engine::run`] call.
#[derive(Clone, Copy, Debug)]
pub struct RunLimits {
    /// Events strictly after this instant are not executed.
    pub until: Instant,
    /// At most this many events are executed by this call.
    pub max_events: u64,
}

impl RunLimits {
    pub fn until(until: Instant) -> Self {
        RunLimits { until, max_events: u64::MAX }
    }
}

/// Events between two checks of the interrupt flag and calls of the progress hook.
const CHECK_EVERY: u64 = 1 << 14;

/// The event loop. See the module documentation.
pub struct Engine<E: Copy> {
    queue: EventQueue<E>,
    now: Instant,
    executed: u64,
    interrupt: Option<Arc<AtomicBool>>,
    halted: bool,
}

impl<E: Copy> Default for Engine<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Copy> Engine<E> {
    pub fn new() -> Self {
        Engine { queue: EventQueue::new(), now: Instant::ZERO, executed: 0, interrupt: None, halted: false }
    }
    /// Raising `flag` makes [`run`](Self::run) return [`StopReason::Interrupted`] within a few
    /// thousand events.
    pub fn with_interrupt(mut self, flag: Arc<AtomicBool>) -> Self {
        self.interrupt = Some(flag);
        self
    }
    pub fn now(&self) -> Instant {
        self.now
    }
    /// Events executed so far.
    pub fn executed(&self) -> u64 {
        self.executed
    }
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// The queued event that runs next, when the queue knows it without work (see
    /// [`EventQueue::peek_cheap`]; a model's source may still run first): a prefetch hint only.
    #[inline(always)]
    pub fn peek_cheap(&self) -> Option<&E> {
        self.queue.peek_cheap()
    }

    /// Schedules `event` at `at`, which must not be in the past.
    #[inline(always)]
    pub fn schedule(&mut self, at: Instant, event: E) -> EventKey {
        assert!(at >= self.now, "event scheduled in the past: {at} < now {}", self.now);
        self.queue.push(at, event)
    }
    /// Schedules `event` at `at` in `class`: at equal times lower classes run first.
    #[inline(always)]
    pub fn schedule_class(&mut self, at: Instant, class: u8, event: E) -> EventKey {
        assert!(at >= self.now, "event scheduled in the past: {at} < now {}", self.now);
        self.queue.push_class(at, class, event)
    }
    /// The place an event scheduled now at `at` in `class` would take, for a source event the
    /// model keeps itself ([`Model::next_source_key`]); `at` must not be in the past. No event
    /// is stored under it: never give it to [`cancel`](Self::cancel), which would count a
    /// cancellation of nothing.
    #[inline(always)]
    pub fn ticket(&mut self, at: Instant, class: u8) -> EventKey {
        assert!(at >= self.now, "event scheduled in the past: {at} < now {}", self.now);
        self.queue.ticket(at, class)
    }
    /// Schedules `event` after `delay`.
    pub fn schedule_in(&mut self, delay: Duration, event: E) -> EventKey {
        self.queue.push(self.now + delay, event)
    }
    /// Stops the run after the current event: [`run`](Self::run) returns
    /// [`StopReason::Halted`].
    pub fn halt(&mut self) {
        self.halted = true;
    }
    /// Cancels a pending event; false if it already ran or was cancelled.
    pub fn cancel(&mut self, key: EventKey) -> bool {
        self.queue.cancel(key)
    }

    /// Runs `model` within `limits`. `progress` is called every few thousand events with the
    /// current time (for progress bars); it must not influence the model.
    ///
    /// With [`Model::SOURCE_ROWS`], source events that follow one another run in a row: after
    /// a source event that pushed nothing (and did not halt), the next one runs at once if its
    /// key is below the queued key looked at before the first and its time not after the end,
    /// until the budget or the next check of the interrupt flag; anything else goes back to
    /// the full step. The order and the counts are those of one event at a time.
    pub fn run<M: Model<Event = E>>(
        &mut self,
        model: &mut M,
        limits: RunLimits,
        progress: &mut dyn FnMut(Instant),
    ) -> StopReason {
        let mut budget = limits.max_events;
        loop {
            if budget == 0 {
                return StopReason::Budget;
            }
            if self.halted {
                return StopReason::Halted;
            }
            if self.executed.is_multiple_of(CHECK_EVERY) {
                progress(self.now);
                if self.interrupt.as_ref().is_some_and(|f| f.load(Ordering::Relaxed)) {
                    return StopReason::Interrupted;
                }
            }
            let queued = self.queue.peek_key();
            let source = model.next_source_key();
            let from_source = match (queued, source) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(q), Some(s)) => s < q,
            };
            let t = match (from_source, queued, source) {
                (true, _, Some(s)) => s.time(),
                (false, Some(q), _) => q.time(),
                _ => return StopReason::Drained,
            };
            if t > limits.until {
                self.now = self.now.max(limits.until);
                return StopReason::EndTime;
            }
            self.executed += 1;
            budget -= 1;
            if from_source && M::SOURCE_ROWS {
                // Source events in a row: while nothing was pushed, the queued key peeked above
                // still bounds the queue, and the next source event runs without a new peek if
                // it comes before that key and the end time. Stopping at the next multiple of
                // CHECK_EVERY and at the budget keeps the checks above on the same counts.
                let pushes = self.queue.pushes();
                // Before the queued key and not after the end time, as one integer (breaking
                // early is always safe: the full step above decides).
                let end = EventKey::after_queued(limits.until, u8::MAX).packed().saturating_add(1);
                let bound = queued.map_or(end, |q| q.packed().min(end));
                let mut row = budget.min((CHECK_EVERY - self.executed % CHECK_EVERY) % CHECK_EVERY);
                let mut t = t;
                loop {
                    assert!(t >= self.now, "source event in the past: {t} < now {}", self.now);
                    self.now = t;
                    model.source(self);
                    if row == 0 || self.halted || self.queue.pushes() != pushes {
                        break;
                    }
                    let Some(s) = model.next_source_key() else { break };
                    if s.packed() >= bound {
                        break;
                    }
                    t = s.time();
                    row -= 1;
                    self.executed += 1;
                    budget -= 1;
                }
            } else if from_source {
                assert!(t >= self.now, "source event in the past: {t} < now {}", self.now);
                self.now = t;
                model.source(self);
            } else {
                let (t, ev) = self.queue.pop().expect("peeked");
                self.now = t;
                model.handle(ev, self);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ping-pong model: each event reschedules itself `period` later and records its time.
    struct Ticker {
        period: Duration,
        seen: Vec<(u64, u32)>,
    }
    impl Model for Ticker {
        type Event = u32;
        fn handle(&mut self, id: u32, eng: &mut Engine<u32>) {
            self.seen.push((eng.now().as_nanos(), id));
            eng.schedule_in(self.period, id);
        }
    }

    #[test]
    fn run_stops_at_end_time_budget_and_interrupt() {
        let mut m = Ticker { period: Duration::from_nanos(10), seen: vec![] };
        let mut e = Engine::new();
        e.schedule(Instant::ZERO, 1);
        e.schedule(Instant::ZERO, 2);
        let r = e.run(&mut m, RunLimits::until(Instant::from_nanos(25)), &mut |_| {});
        assert_eq!(r, StopReason::EndTime);
        assert_eq!(m.seen, vec![(0, 1), (0, 2), (10, 1), (10, 2), (20, 1), (20, 2)]);
        assert_eq!(e.now(), Instant::from_nanos(25));
        let r = e.run(&mut m, RunLimits { until: Instant::MAX, max_events: 3 }, &mut |_| {});
        assert_eq!(r, StopReason::Budget);
        assert_eq!(m.seen.len(), 9);
        let flag = Arc::new(AtomicBool::new(true));
        let mut e2 = Engine::new().with_interrupt(flag);
        e2.schedule(Instant::ZERO, 1);
        assert_eq!(e2.run(&mut m, RunLimits::until(Instant::MAX), &mut |_| {}), StopReason::Interrupted);
    }

    /// A source (a sorted list of (time, class) arrivals) merged with queued events: by time,
    /// then class, a queued event first at an equal time and class; halt stops the run.
    #[test]
    fn sources_merge_by_time_and_class_and_halt_stops() {
        struct M {
            arrivals: Vec<(u64, u8)>,
            next: usize,
            seen: Vec<(u64, &'static str)>,
            halt_at: u64,
        }
        impl Model for M {
            type Event = u8;
            const SOURCE_ROWS: bool = true;
            fn handle(&mut self, class: u8, eng: &mut Engine<u8>) {
                self.seen.push((eng.now().as_nanos(), if class == 0 { "queued0" } else { "queued1" }));
                if eng.now().as_nanos() == self.halt_at {
                    eng.halt();
                }
            }
            fn next_source(&mut self) -> Option<(Instant, u8)> {
                self.arrivals.get(self.next).map(|&(t, c)| (Instant::from_nanos(t), c))
            }
            fn source(&mut self, eng: &mut Engine<u8>) {
                self.next += 1;
                self.seen.push((eng.now().as_nanos(), "source"));
                // A completion at this very instant, class 0, runs before the next source event
                // (each of the two source events at 10 ns schedules one).
                if eng.now().as_nanos() == 10 {
                    eng.schedule_class(eng.now(), 0, 0);
                }
            }
        }
        let mut m = M { arrivals: vec![(5, 1), (10, 1), (10, 1), (20, 1)], next: 0, seen: vec![], halt_at: 20 };
        let mut e = Engine::new();
        e.schedule_class(Instant::from_nanos(5), 1, 1);
        e.schedule_class(Instant::from_nanos(5), 0, 0);
        e.schedule_class(Instant::from_nanos(20), 1, 1);
        e.schedule_class(Instant::from_nanos(30), 0, 0);
        assert_eq!(e.run(&mut m, RunLimits::until(Instant::MAX), &mut |_| {}), StopReason::Halted);
        assert_eq!(
            m.seen,
            vec![
                (5, "queued0"),
                (5, "queued1"),
                (5, "source"),
                (10, "source"),
                (10, "queued0"),
                (10, "source"),
                (10, "queued0"),
                (20, "queued1"),
            ]
        );
    }

    /// Streams of arrivals, each rescheduling itself a few ns later (ties galore), beside
    /// timers they schedule at the same instants: run once with every arrival a queued event and
    /// once with the arrivals as a ticketed source in a calendar, the same events run in the
    /// same order. With `next_source` alone (no tickets) the order differs, so the test can tell.
    #[test]
    fn a_ticketed_source_runs_where_its_events_would_have_run_queued() {
        use super::calendar::Calendar;
        #[derive(Clone, Copy, Debug)]
        enum Ev {
            Arrival(u32),
            Timer(u32),
        }
        struct M<const ROWS: bool> {
            streams: Option<Calendar>,
            ticketed: bool,
            step: u64,
            seen: Vec<(u64, &'static str, u32)>,
        }
        impl<const ROWS: bool> M<ROWS> {
            fn arrival(&mut self, q: u32, eng: &mut Engine<Ev>) {
                self.seen.push((eng.now().as_nanos(), "arrival", q));
                self.step += 1;
                // 0 to 4 ns; 0 (the same instant again) about one time in twenty.
                let g = (self.step * 7 + q as u64 * 3) % 5;
                let gap = Duration::from_nanos(if g == 0 && !self.step.is_multiple_of(4) { 1 } else { g });
                if let Some(t) = &mut self.streams {
                    t.replace_top(eng.ticket(eng.now() + gap, 0).packed());
                } else {
                    eng.schedule_in(gap, Ev::Arrival(q));
                }
                if self.step.is_multiple_of(3) {
                    eng.schedule_in(Duration::from_nanos(self.step % 4), Ev::Timer(q));
                }
            }
        }
        impl<const ROWS: bool> Model for M<ROWS> {
            type Event = Ev;
            const SOURCE_ROWS: bool = ROWS;
            fn handle(&mut self, ev: Ev, eng: &mut Engine<Ev>) {
                match ev {
                    Ev::Arrival(q) => self.arrival(q, eng),
                    Ev::Timer(q) => self.seen.push((eng.now().as_nanos(), "timer", q)),
                }
            }
            fn next_source(&mut self) -> Option<(Instant, u8)> {
                self.streams.as_ref().map(|t| {
                    let k = EventKey::from_packed(t.top_key());
                    (k.time(), k.class())
                })
            }
            fn next_source_key(&mut self) -> Option<EventKey> {
                match (&self.streams, self.ticketed) {
                    (Some(t), true) => Some(EventKey::from_packed(t.top_key())),
                    _ => self.next_source().map(|(t, c)| EventKey::after_queued(t, c)),
                }
            }
            fn source(&mut self, eng: &mut Engine<Ev>) {
                let q = self.streams.as_ref().expect("a source").top();
                self.arrival(q, eng);
            }
        }
        // The run in chunks of `chunk` events (the budget), with or without rows.
        fn go<const ROWS: bool>(source: bool, ticketed: bool, chunk: u64) -> Vec<(u64, &'static str, u32)> {
            let mut e = Engine::new();
            let mut first = Vec::new();
            for q in 0..9u32 {
                let at = Instant::from_nanos(q as u64 % 2);
                if source {
                    first.push(e.ticket(at, 0).packed());
                } else {
                    e.schedule(at, Ev::Arrival(q));
                }
            }
            e.schedule(Instant::from_nanos(1), Ev::Timer(99));
            // More pending than the queue keeps in its 4-ary heap: its radix levels hold these
            // (and the arrivals' timers pushed among them) in both runs.
            for i in 0..600u32 {
                e.schedule(Instant::from_nanos(20 + (i as u64 * 7) % 40), Ev::Timer(1000 + i));
            }
            // Slots of 2 ns, 64 of them: ties, and the current slot's late members.
            let streams = source.then(|| Calendar::new(first, 1, 64));
            let mut m = M::<ROWS> { streams, ticketed, step: 0, seen: vec![] };
            let limits = RunLimits { until: Instant::from_nanos(60), max_events: chunk };
            while e.run(&mut m, limits, &mut |_| {}) == StopReason::Budget {}
            m.seen
        }
        let run = |source: bool, ticketed: bool| go::<true>(source, ticketed, u64::MAX);
        let queued = run(false, false);
        assert!(queued.len() > 900, "{} events", queued.len());
        assert!(queued.iter().filter(|s| s.1 == "timer" && s.2 < 1000).count() > 50);
        assert_eq!(run(true, true), queued);
        assert_ne!(run(true, false), queued, "without tickets a timer at an arrival's instant goes first");
        // Rows or not, whole or in chunks of 37 events (a budget that stops rows midway): the
        // same events in the same order.
        for (source, ticketed) in [(true, true), (true, false)] {
            let rows = run(source, ticketed);
            assert_eq!(go::<false>(source, ticketed, u64::MAX), rows);
            assert_eq!(go::<true>(source, ticketed, 37), rows);
            assert_eq!(go::<false>(source, ticketed, 37), rows);
        }
    }

    /// Source events in a row (the engine runs them without peeking at the queue again) stop
    /// exactly at the budget, at the end time, before a queued event and at a halt, and the
    /// progress hook sees the same counts as one event at a time would give.
    #[test]
    fn a_row_of_source_events_keeps_budget_end_time_and_queued_order() {
        struct M {
            next: u64,
            seen: Vec<(u64, bool)>,
            halt_at: u64,
        }
        impl Model for M {
            type Event = ();
            const SOURCE_ROWS: bool = true;
            fn handle(&mut self, _: (), eng: &mut Engine<()>) {
                self.seen.push((eng.now().as_nanos(), false));
            }
            fn next_source(&mut self) -> Option<(Instant, u8)> {
                (self.next < 100_000).then(|| (Instant::from_nanos(self.next), 0))
            }
            fn source(&mut self, eng: &mut Engine<()>) {
                self.seen.push((eng.now().as_nanos(), true));
                self.next += 1;
                if eng.now().as_nanos() == self.halt_at {
                    eng.halt();
                }
            }
        }
        let mut m = M { next: 0, seen: vec![], halt_at: 60_000 };
        let mut e = Engine::new();
        e.schedule(Instant::from_nanos(16_382), ());
        let mut calls = Vec::new();
        let r = e.run(&mut m, RunLimits { until: Instant::MAX, max_events: 40_000 }, &mut |t| calls.push(t.as_nanos()));
        assert_eq!((r, e.executed(), m.seen.len()), (StopReason::Budget, 40_000, 40_000));
        // Before events 0, 16384 and 32768, at the time of the event before: event 16383 is
        // the first source event after the queued one (which runs at 16,382 ns, before the
        // source event of that time).
        assert_eq!(calls, vec![0, 16_382, 32_766]);
        let r = e.run(&mut m, RunLimits::until(Instant::from_nanos(45_000)), &mut |_| {});
        assert_eq!((r, m.seen.len(), m.seen.last()), (StopReason::EndTime, 45_002, Some(&(45_000, true))));
        // A halt in a source event stops the row there.
        let r = e.run(&mut m, RunLimits::until(Instant::MAX), &mut |_| {});
        assert_eq!((r, m.seen.len(), m.seen.last()), (StopReason::Halted, 60_002, Some(&(60_000, true))));
        // At 16,382 ns the queued event runs first (a source without tickets comes after it).
        assert_eq!(m.seen[16_382..16_384], [(16_382, false), (16_382, true)]);
        assert!(m.seen.windows(2).all(|w| w[0].0 <= w[1].0));
    }

    #[test]
    fn drained_when_no_events() {
        struct Nop;
        impl Model for Nop {
            type Event = ();
            fn handle(&mut self, _: (), _: &mut Engine<()>) {}
        }
        let mut e = Engine::new();
        e.schedule(Instant::from_nanos(5), ());
        assert_eq!(e.run(&mut Nop, RunLimits::until(Instant::MAX), &mut |_| {}), StopReason::Drained);
        assert_eq!(e.executed(), 1);
    }
}
