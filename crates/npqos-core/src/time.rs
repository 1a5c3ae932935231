//! Simulated time: integer nanoseconds, never the OS clock.
//!
//! [`Instant`] is a point on the simulation (or data-plane) time line, counted in nanoseconds
//! from an arbitrary epoch chosen by the caller; [`Duration`] is a non-negative span. Both are
//! `u64`, which covers about 584 years, so overflow is only reachable through bad input:
//! arithmetic that could overflow has `checked_*` forms, and the operators saturate rather than
//! wrap (a saturated instant is "never", [`Instant::MAX`]).

use core::fmt;
use core::ops::{Add, AddAssign, Sub};

/// A point in simulated time, in nanoseconds since the run's epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct Instant(u64);

/// A non-negative span of simulated time, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct Duration(u64);

impl Instant {
    /// The epoch of the run.
    pub const ZERO: Instant = Instant(0);
    /// The latest representable instant; used as "never".
    pub const MAX: Instant = Instant(u64::MAX);

    pub const fn from_nanos(ns: u64) -> Self {
        Instant(ns)
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Seconds since the epoch as a float (for reports only, never for ordering).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }
    pub fn checked_add(self, d: Duration) -> Option<Instant> {
        self.0.checked_add(d.0).map(Instant)
    }
    /// Time elapsed from `earlier` to `self`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
    pub fn checked_since(self, earlier: Instant) -> Option<Duration> {
        self.0.checked_sub(earlier.0).map(Duration)
    }
}

impl Duration {
    pub const ZERO: Duration = Duration(0);
    pub const MAX: Duration = Duration(u64::MAX);
    pub const NANOSECOND: Duration = Duration(1);
    pub const MICROSECOND: Duration = Duration(1_000);
    pub const MILLISECOND: Duration = Duration(1_000_000);
    pub const SECOND: Duration = Duration(1_000_000_000);

    pub const fn from_nanos(ns: u64) -> Self {
        Duration(ns)
    }
    pub const fn from_micros(us: u64) -> Self {
        Duration(us.saturating_mul(1_000))
    }
    pub const fn from_millis(ms: u64) -> Self {
        Duration(ms.saturating_mul(1_000_000))
    }
    pub const fn from_secs(s: u64) -> Self {
        Duration(s.saturating_mul(1_000_000_000))
    }
    /// Nearest nanosecond to `secs`; `None` for negative, NaN or out-of-range values.
    pub fn try_from_secs_f64(secs: f64) -> Option<Self> {
        let ns = (secs * 1e9).round();
        if ns.is_finite() && (0.0..=u64::MAX as f64).contains(&ns) {
            Some(Duration(ns as u64))
        } else {
            None
        }
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }
    pub fn checked_add(self, o: Duration) -> Option<Duration> {
        self.0.checked_add(o.0).map(Duration)
    }
    pub fn checked_mul(self, k: u64) -> Option<Duration> {
        self.0.checked_mul(k).map(Duration)
    }
    pub fn saturating_mul(self, k: u64) -> Duration {
        Duration(self.0.saturating_mul(k))
    }
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// Saturates at [`Instant::MAX`] ("never").
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
}
impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}
impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturates at zero when `rhs` is later than `self`.
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_since(rhs)
    }
}
impl Add for Duration {
    type Output = Duration;
    fn add(self, o: Duration) -> Duration {
        Duration(self.0.saturating_add(o.0))
    }
}
impl AddAssign for Duration {
    fn add_assign(&mut self, o: Duration) {
        *self = *self + o;
    }
}

/// Prints with the largest unit that keeps the value exact (`1.5ms`, `250ns`, `10s`).
impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_ns(self.0, f)
    }
}
impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_ns(self.0, f)
    }
}

fn fmt_ns(ns: u64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    if ns == 0 {
        return write!(f, "0s");
    }
    crate::fmt::exact(ns, &[(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")], "ns", f)
}

/// `x.ceil() as u64`, the same value for every `x` (NaN and negatives give 0, above
/// `u64::MAX` saturates), without a call to libm's `ceil`: baseline x86-64 has no rounding
/// instruction, and the router rounds three times per packet (a nanosecond-exact time from a
/// fractional cost).
#[inline(always)]
pub fn ceil_u64(x: f64) -> u64 {
    // Truncation is the floor for x >= 0; a fractional x needs one more.
    let t = x as u64;
    t.saturating_add(((t as f64) < x) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the value: integers, halves, values near 2^53 and 2^64, any bit pattern.
        #[test]
        fn ceil_u64_is_ceil_as_u64(bits in any::<u64>(), n in 0u64..1 << 60, k in 0u64..8) {
            for x in [f64::from_bits(bits), n as f64, n as f64 + k as f64 / 8.0, (n >> 8) as f64 + 0.5, -(n as f64)] {
                prop_assert_eq!(ceil_u64(x), x.ceil() as u64, "{}", x);
            }
        }
    }

    #[test]
    fn ceil_u64_edges() {
        for x in [
            0.0,
            -0.0,
            -0.5,
            0.5,
            1.0,
            1e-300,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            9007199254740993.0,
            1.8446744073709552e19,
            1e30,
        ] {
            assert_eq!(ceil_u64(x), x.ceil() as u64, "{x}");
        }
    }

    #[test]
    fn display_is_exact() {
        assert_eq!(Duration::from_nanos(1_500_000).to_string(), "1.5ms");
        assert_eq!(Duration::from_nanos(250).to_string(), "250ns");
        assert_eq!(Duration::from_secs(10).to_string(), "10s");
        assert_eq!(Duration::from_nanos(1_000_000_001).to_string(), "1.000000001s");
        assert_eq!(Duration::ZERO.to_string(), "0s");
    }

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        assert_eq!(Instant::MAX + Duration::SECOND, Instant::MAX);
        assert_eq!(Instant::from_nanos(5) - Instant::from_nanos(9), Duration::ZERO);
        assert_eq!(Instant::from_nanos(5).checked_add(Duration::MAX), None);
        assert_eq!(Duration::try_from_secs_f64(-1.0), None);
        assert_eq!(Duration::try_from_secs_f64(f64::NAN), None);
        assert_eq!(Duration::try_from_secs_f64(2.5e-6), Some(Duration::from_nanos(2500)));
    }
}
