//! Link and shaping rates with explicit units, and drift-free transmission times.
//!
//! A [`Rate`] is stored as an integer number of **bits per second**; constructors exist for
//! bits/s and bytes/s so that a caller always says which it means. Transmission times are
//! computed in 128-bit integer arithmetic:
//!
//! * [`Rate::tx_time`] rounds a single packet's serialisation time **up** to the next
//!   nanosecond (a packet is never considered sent before its last bit left);
//! * [`Serializer`] tracks a link's cumulative bits and places every packet's finish time at
//!   `ceil(total_bits * 1e9 / rate)` since the link's epoch, so rounding never accumulates:
//!   after any number of packets the finish time is within 1 ns of the exact real-valued one,
//!   where summing rounded per-packet durations would drift by up to 1 ns per packet.

use crate::time::{Duration, Instant};
use core::fmt;

/// A data rate in bits per second. Zero is representable (a stopped link) but most users
/// reject it at validation time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct Rate {
    bits_per_sec: u64,
}

impl Rate {
    pub const fn from_bits_per_sec(bps: u64) -> Self {
        Rate { bits_per_sec: bps }
    }
    /// `None` if `bytes_per_sec * 8` overflows.
    pub const fn from_bytes_per_sec(bytes: u64) -> Option<Self> {
        match bytes.checked_mul(8) {
            Some(b) => Some(Rate { bits_per_sec: b }),
            None => None,
        }
    }
    pub const fn gbps(g: u64) -> Self {
        Rate { bits_per_sec: g * 1_000_000_000 }
    }
    pub const fn bits_per_sec(self) -> u64 {
        self.bits_per_sec
    }
    pub fn bytes_per_sec_f64(self) -> f64 {
        self.bits_per_sec as f64 / 8.0
    }
    pub fn is_zero(self) -> bool {
        self.bits_per_sec == 0
    }

    /// Time to serialise `bytes` at this rate, rounded up to whole nanoseconds.
    /// `None` for a zero rate or a result beyond `u64` nanoseconds.
    pub fn tx_time(self, bytes: u64) -> Option<Duration> {
        if self.bits_per_sec == 0 {
            return None;
        }
        let num = bytes as u128 * 8 * 1_000_000_000;
        let ns = num.div_ceil(self.bits_per_sec as u128);
        u64::try_from(ns).ok().map(Duration::from_nanos)
    }

    /// Bytes this rate carries in `d`, rounded down (the tokens a bucket earns in `d`).
    pub fn bytes_in(self, d: Duration) -> u64 {
        let b = self.bits_per_sec as u128 * d.as_nanos() as u128 / 8 / 1_000_000_000;
        u64::try_from(b).unwrap_or(u64::MAX)
    }

    /// This rate divided evenly `n` ways (rounded down), e.g. a link's fair share among `n`
    /// queues; zero for `n == 0`.
    pub fn share(self, n: u64) -> Rate {
        Rate { bits_per_sec: self.bits_per_sec.checked_div(n).unwrap_or(0) }
    }

    /// This rate scaled by a non-negative factor, rounded to the nearest bit/s.
    pub fn scale(self, k: f64) -> Option<Rate> {
        let v = (self.bits_per_sec as f64 * k).round();
        (v.is_finite() && v >= 0.0 && v <= u64::MAX as f64).then_some(Rate { bits_per_sec: v as u64 })
    }
}

/// Prints exactly, in the largest decimal unit the value reaches (`100Gbps`, `1.5kbps`), so the
/// text parses back to the same rate.
impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let units = [(1_000_000_000_000u64, "Tbps"), (1_000_000_000, "Gbps"), (1_000_000, "Mbps"), (1_000, "kbps")];
        crate::fmt::exact(self.bits_per_sec, &units, "bps", f)
    }
}

/// A link that serialises packets back to back at a fixed rate, without rounding drift.
///
/// Finish times are computed from the cumulative bit count since the last idle period began
/// (`busy_start`), so the error against exact arithmetic is below 1 ns for every packet no
/// matter how long the busy period. When the link goes idle the next packet starts a new
/// busy period at its own arrival time.
#[derive(Clone, Debug)]
pub struct Serializer {
    rate: Rate,
    busy_start: Instant,
    busy_bits: u128,
    free_at: Instant,
    /// 1e9 / rate in lowest terms (`ns_num / ns_den` ns per bit): at 100 Gbps 1 / 100, so
    /// that a busy period's bits times `ns_num` usually fit 64 bits and one 64-bit division
    /// places the packet, where 1e9 / rate in 128 bits took a library call per packet.
    ns_num: u64,
    ns_den: u64,
}

impl Serializer {
    /// `rate` must be non-zero.
    /// A link of `rate`, idle; a zero rate is refused.
    pub fn new(rate: Rate) -> Result<Self, crate::Error> {
        if rate.is_zero() {
            return Err(crate::Error::BadParameter {
                parameter: "Serializer rate",
                value: "0bps".into(),
                expected: "a positive rate",
            });
        }
        let (mut a, mut b) = (1_000_000_000u64, rate.bits_per_sec);
        while b != 0 {
            (a, b) = (b, a % b);
        }
        Ok(Serializer {
            rate,
            busy_start: Instant::ZERO,
            busy_bits: 0,
            free_at: Instant::ZERO,
            ns_num: 1_000_000_000 / a,
            ns_den: rate.bits_per_sec / a,
        })
    }
    pub fn rate(&self) -> Rate {
        self.rate
    }
    /// When the last accepted packet's last bit leaves.
    pub fn free_at(&self) -> Instant {
        self.free_at
    }
    /// Accepts a packet of `bytes` offered at `now`; returns when its last bit leaves.
    pub fn send(&mut self, now: Instant, bytes: u64) -> Instant {
        if now >= self.free_at {
            self.busy_start = now;
            self.busy_bits = 0;
        }
        self.busy_bits += bytes as u128 * 8;
        // ceil(bits x 1e9 / rate) = ceil(bits x ns_num / ns_den), exactly; in 64 bits when the
        // product fits.
        let ns = match u64::try_from(self.busy_bits).ok().and_then(|b| b.checked_mul(self.ns_num)) {
            Some(x) => x.div_ceil(self.ns_den),
            None => {
                u64::try_from((self.busy_bits * self.ns_num as u128).div_ceil(self.ns_den as u128)).unwrap_or(u64::MAX)
            }
        };
        self.free_at = self.busy_start + Duration::from_nanos(ns);
        self.free_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_time_rounds_up() {
        // 1500 B at 100 Gbps = 120 ns exactly; 1 B at 3 bps = 2.666..s -> 2666666667 ns.
        assert_eq!(Rate::gbps(100).tx_time(1500), Some(Duration::from_nanos(120)));
        assert_eq!(Rate::from_bits_per_sec(3).tx_time(1), Some(Duration::from_nanos(2_666_666_667)));
        assert_eq!(Rate::from_bits_per_sec(0).tx_time(1), None);
        assert_eq!(Rate::from_bits_per_sec(1).tx_time(u64::MAX), None);
    }

    proptest::proptest! {
        /// Every finish time equals ceil(bits x 1e9 / rate) over the busy period, computed in
        /// 128 bits: at any rate (those that divide 1e9 and those prime to it), for packets
        /// back to back and after idle gaps, and in busy periods long enough that bits x
        /// 1e9 / gcd leaves 64 bits (the 128-bit path).
        #[test]
        fn serializer_finish_times_are_exact(
            rate in proptest::prop_oneof![1u64..1_000, 1_000u64..10_000_000_000, proptest::strategy::Just(100_000_000_000), proptest::strategy::Just(7_000_000_000), proptest::strategy::Just(999_999_937)],
            sizes in proptest::collection::vec((1u64..=9_000, 0u64..3), 1..200),
            big in 0u64..3,
        ) {
            let mut s = Serializer::new(Rate::from_bits_per_sec(rate)).unwrap();
            let (mut start, mut bits, mut now) = (0u64, 0u128, 0u64);
            for (i, &(size, idle)) in sizes.iter().enumerate() {
                // Sometimes a packet far larger than any frame, so the bits overflow 64 bits
                // times the numerator; sometimes an idle gap that ends the busy period.
                let size = if big == 2 && i == 0 { u64::MAX / 16 } else { size };
                if idle == 0 {
                    now = now.max(s.free_at().as_nanos()) + 1 + size % 97;
                }
                if now >= s.free_at().as_nanos() {
                    (start, bits) = (now, 0);
                }
                bits += size as u128 * 8;
                let want = u64::try_from((bits * 1_000_000_000).div_ceil(rate as u128)).unwrap_or(u64::MAX);
                let got = s.send(Instant::from_nanos(now), size);
                proptest::prop_assert_eq!(got, Instant::ZERO + Duration::from_nanos(start) + Duration::from_nanos(want));
            }
        }
    }

    #[test]
    fn serializer_does_not_drift() {
        // 41-byte packets at 7 Gbps: 328 bits -> 46.857142... ns each. Summing per-packet
        // rounded-up times drifts by ~0.14 ns per packet; the serializer stays exact.
        let rate = Rate::from_bits_per_sec(7_000_000_000);
        let mut s = Serializer::new(rate).unwrap();
        let n = 10_000_000u64;
        let mut last = Instant::ZERO;
        for _ in 0..n {
            last = s.send(Instant::ZERO, 41);
        }
        let exact = (n as f64 * 328.0) / 7.0; // ns
        assert!((last.as_nanos() as f64 - exact).abs() <= 1.0, "{} vs {exact}", last.as_nanos());
        let naive = rate.tx_time(41).unwrap().as_nanos() * n;
        assert!(naive as f64 - exact > 1_000_000.0, "the naive sum does drift");
    }

    #[test]
    fn serializer_restarts_after_idle() {
        let mut s = Serializer::new(Rate::gbps(1)).unwrap();
        assert!(Serializer::new(Rate::from_bits_per_sec(0)).is_err(), "a zero rate is refused, not a panic");
        assert_eq!(s.send(Instant::ZERO, 125).as_nanos(), 1000);
        assert_eq!(s.send(Instant::from_nanos(5000), 125).as_nanos(), 6000);
        assert_eq!(s.send(Instant::from_nanos(5500), 125).as_nanos(), 7000);
    }

    #[test]
    fn display() {
        assert_eq!(Rate::gbps(100).to_string(), "100Gbps");
        assert_eq!(Rate::from_bits_per_sec(12_500_000 * 8).to_string(), "100Mbps");
        assert_eq!(Rate::from_bits_per_sec(1_500).to_string(), "1.5kbps");
        assert_eq!(Rate::from_bits_per_sec(7).to_string(), "7bps");
        // Found by fuzzing: the text must keep every digit.
        assert_eq!(Rate::from_bits_per_sec(874_329_097_444_444_375).to_string(), "874329.097444444375Tbps");
    }
}
