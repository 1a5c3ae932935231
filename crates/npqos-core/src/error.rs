//! The error of the mechanism contract: what a caller can get wrong.
//!
//! Every mechanism's public API answers bad caller input with an [`Error`] rather than a panic:
//! an id outside the range it was built for, a `now` earlier than one it was already told, a
//! construction argument out of range, or a call its state does not allow. Mechanisms with
//! failures of their own (a refused configuration with several fields, a trace) keep their own
//! `thiserror` enums and convert into this one where they meet the contract. Debug assertions
//! inside a mechanism check its own invariants; they never fire on caller input.

use crate::time::Instant;

/// A caller error at the mechanism contract. None of them is fatal to the mechanism: the call
/// had no effect and the mechanism can be used further.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An id outside `0..count`.
    #[error("{kind} {id} does not exist (there are {count})")]
    UnknownId { kind: &'static str, id: u32, count: usize },
    /// Time went backwards: the mechanism was already told `last`.
    #[error("now = {now} is before the last time given, {last}")]
    TimeWentBackwards { now: Instant, last: Instant },
    /// A construction argument out of range.
    #[error("{parameter} = {value}: expected {expected}")]
    BadParameter { parameter: &'static str, value: String, expected: &'static str },
    /// A call the mechanism's state does not allow (for example dequeueing from an empty queue).
    #[error("{0}")]
    NotAllowed(&'static str),
}

/// Tracks the last `now` a mechanism was told, refusing one that goes backwards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Clock {
    last: Instant,
}

impl Clock {
    /// Accepts `now` if it is not before the last accepted time.
    #[inline]
    pub fn advance(&mut self, now: Instant) -> Result<(), Error> {
        if now < self.last {
            return Err(Error::TimeWentBackwards { now, last: self.last });
        }
        self.last = now;
        Ok(())
    }
    /// The last accepted time.
    pub fn last(&self) -> Instant {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_refuses_time_going_backwards() {
        let mut c = Clock::default();
        assert!(c.advance(Instant::from_nanos(5)).is_ok());
        assert!(c.advance(Instant::from_nanos(5)).is_ok());
        let e = c.advance(Instant::from_nanos(4)).unwrap_err();
        assert_eq!(e, Error::TimeWentBackwards { now: Instant::from_nanos(4), last: Instant::from_nanos(5) });
        assert_eq!(c.last(), Instant::from_nanos(5));
    }
}
