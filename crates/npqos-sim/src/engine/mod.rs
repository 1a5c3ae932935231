//! The deterministic discrete-event engine.
//!
//! A model implements [`Model`]; the [`Engine`] pops events in `(time, class, insertion
//! sequence)` order and hands each to the model together with the engine itself, through which
//! the model schedules and cancels further events. The class (0 unless the model gives one with
//! [`Engine::schedule_class`]) is how a model states that at one instant some event kinds run
//! before others (completions before arrivals); each model's doc page lists its classes. A model
//! may also have a *source* of lazily produced events ([`Model::next_source`]) that the engine
//! merges by `(time, class)` without queueing them. A run stops when the queue and the source
//! are drained, at an end time, after an event budget, when an interrupt flag (Ctrl-C) is raised,
//! or when the model halts it; the [`StopReason`] says which.
//!
//! **Invariant:** nothing in the engine depends on wall-clock time or thread scheduling, so a
//! model that draws randomness only from [`crate::rng::RngStreams`] replays byte for byte.

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
/// `(time, class)`; at an equal time and class the queued event runs first.
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
    /// Runs the source event [`next_source`](Self::next_source) announced, at `engine.now()`.
    #[inline]
    fn source(&mut self, _engine: &mut Engine<Self::Event>) {}
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
            let source = model.next_source();
            let from_source = match (queued, source) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(q), Some(s)) => s < q,
            };
            let t = match (from_source, queued, source) {
                (true, _, Some(s)) => s.0,
                (false, Some(q), _) => q.0,
                _ => return StopReason::Drained,
            };
            if t > limits.until {
                self.now = self.now.max(limits.until);
                return StopReason::EndTime;
            }
            self.executed += 1;
            budget -= 1;
            if from_source {
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
