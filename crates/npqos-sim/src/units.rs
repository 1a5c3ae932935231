//! Parsing of quantities with units, as written in scenario files and on the command line:
//! durations (`"2ms"`, `"500us"`, `"1.5s"`, `"250ns"`), rates (`"100Gbps"`, `"12.5MB/s"`,
//! `"1Mbit/s"`) and sizes (`"1500B"`, `"8KiB"`, `"2GB"`).
//!
//! Numbers are parsed as exact decimals (no binary floating point on the way), then rounded to
//! the nearest nanosecond, bit/s or byte. A missing unit, an unknown unit, a negative value or
//! an out-of-range value is an error that says what was expected.

use npqos_core::{Duration, Rate};

/// A unit-parsing failure; the message says what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnitError(pub String);

const DURATION_HELP: &str =
    "a duration with a unit, such as \"2ms\", \"500us\", \"1.5s\" or \"250ns\" (units: ns, us, ms, s)";
const RATE_HELP: &str = "a rate with a unit, such as \"100Gbps\", \"400Mbps\" or \"12.5MB/s\" (bits: bps, kbps, Mbps, Gbps, Tbps; bytes: B/s, kB/s, MB/s, GB/s, KiB/s, MiB/s, GiB/s)";
const SIZE_HELP: &str =
    "a size with a unit, such as \"1500B\", \"8KiB\" or \"2GB\" (units: B, kB, MB, GB, KiB, MiB, GiB)";

/// Splits `"12.5MB/s"` into (`"12.5"`, `"MB/s"`).
fn split(s: &str) -> (&str, &str) {
    let s = s.trim();
    let i = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == '_')).unwrap_or(s.len());
    (&s[..i], s[i..].trim())
}

/// Parses a non-negative decimal and multiplies it by `scale_num / scale_den`, rounding to the
/// nearest integer. Exact for any input with up to 18 fractional digits.
fn scaled(num: &str, scale_num: u128, scale_den: u128) -> Option<u64> {
    let num = num.replace('_', "");
    if num.starts_with('-') || num.is_empty() {
        return None;
    }
    let num = num.trim_start_matches('+');
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if (int.is_empty() && frac.is_empty())
        || frac.len() > 18
        || !int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit())
    {
        return None;
    }
    let digits: u128 = format!("{int}{frac}").parse().ok()?;
    let den = 10u128.pow(frac.len() as u32) * scale_den;
    let v = digits.checked_mul(scale_num)?;
    let r = (v + den / 2) / den;
    u64::try_from(r).ok()
}

fn is_negative(num: &str) -> bool {
    num.trim().starts_with('-')
}

pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    let (num, unit) = split(s);
    let scale: u128 = match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "" => return Err(UnitError(format!("missing unit: expected {DURATION_HELP}"))),
        _ => return Err(UnitError(format!("unknown unit {unit:?}: expected {DURATION_HELP}"))),
    };
    if is_negative(num) {
        return Err(UnitError(format!("negative duration: expected {DURATION_HELP}")));
    }
    scaled(num, scale, 1)
        .map(Duration::from_nanos)
        .ok_or_else(|| UnitError(format!("not a number or out of range: expected {DURATION_HELP}")))
}

/// A duration below a nanosecond's precision, as hardware timing parameters need (`"2.5ns"`):
/// rounded to the picosecond, returned in nanoseconds.
pub fn parse_fine_duration(s: &str) -> Result<f64, UnitError> {
    let (num, unit) = split(s);
    let ps: u128 = match unit {
        "ps" => 1,
        "ns" => 1_000,
        "us" | "µs" => 1_000_000,
        "ms" => 1_000_000_000,
        "s" => 1_000_000_000_000,
        "" => return Err(UnitError(format!("missing unit: expected {DURATION_HELP}"))),
        _ => return Err(UnitError(format!("unknown unit {unit:?}: expected {DURATION_HELP}"))),
    };
    if is_negative(num) {
        return Err(UnitError(format!("negative duration: expected {DURATION_HELP}")));
    }
    scaled(num, ps, 1)
        .map(|v| v as f64 / 1e3)
        .ok_or_else(|| UnitError(format!("not a number or out of range: expected {DURATION_HELP}")))
}

/// A nanosecond count as [`parse_fine_duration`] reads it back (`2.5` -> `"2.5ns"`).
pub fn fmt_fine_duration(ns: f64) -> String {
    format!("{}ns", (ns * 1e3).round() / 1e3)
}

const FREQUENCY_HELP: &str = "a frequency with a unit, such as \"200MHz\" or \"1.5GHz\" (units: Hz, kHz, MHz, GHz)";

/// A clock frequency (`"200MHz"`), returned in MHz (to the Hz).
pub fn parse_frequency(s: &str) -> Result<f64, UnitError> {
    let (num, unit) = split(s);
    let hz: u128 = match unit {
        "Hz" => 1,
        "kHz" => 1_000,
        "MHz" => 1_000_000,
        "GHz" => 1_000_000_000,
        "" => return Err(UnitError(format!("missing unit: expected {FREQUENCY_HELP}"))),
        _ => return Err(UnitError(format!("unknown unit {unit:?}: expected {FREQUENCY_HELP}"))),
    };
    if is_negative(num) {
        return Err(UnitError(format!("negative frequency: expected {FREQUENCY_HELP}")));
    }
    scaled(num, hz, 1)
        .map(|v| v as f64 / 1e6)
        .ok_or_else(|| UnitError(format!("not a number or out of range: expected {FREQUENCY_HELP}")))
}

/// MHz as [`parse_frequency`] reads it back (`200.0` -> `"200MHz"`).
pub fn fmt_frequency(mhz: f64) -> String {
    format!("{}MHz", (mhz * 1e6).round() / 1e6)
}

pub fn parse_rate(s: &str) -> Result<Rate, UnitError> {
    let (num, unit) = split(s);
    // (bits per unit)
    let scale: u128 = match unit {
        "bps" | "bit/s" | "b/s" => 1,
        "kbps" | "Kbps" | "kbit/s" | "kb/s" => 1_000,
        "Mbps" | "mbps" | "Mbit/s" | "Mb/s" => 1_000_000,
        "Gbps" | "gbps" | "Gbit/s" | "Gb/s" => 1_000_000_000,
        "Tbps" | "tbps" | "Tbit/s" | "Tb/s" => 1_000_000_000_000,
        "B/s" | "Bps" => 8,
        "kB/s" | "KB/s" => 8_000,
        "MB/s" => 8_000_000,
        "GB/s" => 8_000_000_000,
        "KiB/s" => 8 * 1024,
        "MiB/s" => 8 * 1024 * 1024,
        "GiB/s" => 8 * 1024 * 1024 * 1024,
        "" => return Err(UnitError(format!("missing unit: expected {RATE_HELP}"))),
        _ => return Err(UnitError(format!("unknown unit {unit:?}: expected {RATE_HELP}"))),
    };
    if is_negative(num) {
        return Err(UnitError(format!("negative rate: expected {RATE_HELP}")));
    }
    scaled(num, scale, 1)
        .map(Rate::from_bits_per_sec)
        .ok_or_else(|| UnitError(format!("not a number or out of range: expected {RATE_HELP}")))
}

pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let (num, unit) = split(s);
    let scale: u128 = match unit {
        "B" => 1,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "" => return Err(UnitError(format!("missing unit: expected {SIZE_HELP}"))),
        _ => return Err(UnitError(format!("unknown unit {unit:?}: expected {SIZE_HELP}"))),
    };
    if is_negative(num) {
        return Err(UnitError(format!("negative size: expected {SIZE_HELP}")));
    }
    scaled(num, scale, 1).ok_or_else(|| UnitError(format!("not a number or out of range: expected {SIZE_HELP}")))
}

/// Parses a count written as an integer (`"1000000"`, `"1_000_000"`) or in exact scientific
/// notation (`"1e6"`, `"2.5e3"`); the value must be a whole number.
pub fn parse_count(s: &str) -> Result<u64, UnitError> {
    let err = || UnitError(format!("{s:?}: expected a whole number such as \"1000000\", \"1_000_000\" or \"1e6\""));
    let t = s.trim();
    let (mant, exp) = match t.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<u32>().map_err(|_| err())?),
        None => (t, 0),
    };
    if exp > 19 {
        return Err(err());
    }
    // Exact: mantissa x 10^exp, rejected unless whole.
    let scale = 10u128.pow(exp);
    let mant = mant.replace('_', "");
    let (int, frac) = mant.split_once('.').unwrap_or((&mant, ""));
    if int.is_empty() && frac.is_empty() || !int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit()) {
        return Err(err());
    }
    let den = 10u128.pow(frac.len().min(30) as u32);
    let digits: u128 = format!("{int}{frac}").parse().map_err(|_| err())?;
    let v = digits.checked_mul(scale).ok_or_else(err)?;
    if v % den != 0 {
        return Err(err());
    }
    u64::try_from(v / den).map_err(|_| err())
}

/// Formats a byte count with a binary unit when exact (`"64KiB"`), else in bytes.
pub fn fmt_size(b: u64) -> String {
    for (s, u) in [(1u64 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
        if b >= s && b.is_multiple_of(s) {
            return format!("{}{u}", b / s);
        }
    }
    format!("{b}B")
}

#[cfg(test)]
mod tests {
    #[test]
    fn fine_durations_and_frequencies() {
        use super::*;
        assert_eq!(parse_fine_duration("2.5ns").unwrap(), 2.5);
        assert_eq!(parse_fine_duration("40ns").unwrap(), 40.0);
        assert_eq!(parse_fine_duration("1.25us").unwrap(), 1250.0);
        assert_eq!(parse_fine_duration("500ps").unwrap(), 0.5);
        assert!(parse_fine_duration("2.5").unwrap_err().0.contains("missing unit"));
        assert!(parse_fine_duration("-1ns").is_err());
        assert_eq!(parse_fine_duration(&fmt_fine_duration(2.5)).unwrap(), 2.5);
        assert_eq!(parse_frequency("200MHz").unwrap(), 200.0);
        assert_eq!(parse_frequency("1.5GHz").unwrap(), 1500.0);
        assert!(parse_frequency("200").unwrap_err().0.contains("missing unit"));
        assert_eq!(parse_frequency(&fmt_frequency(400.0)).unwrap(), 400.0);
    }

    use super::*;

    #[test]
    fn counts() {
        assert_eq!(parse_count("1e6"), Ok(1_000_000));
        assert_eq!(parse_count("2.5e3"), Ok(2500));
        assert_eq!(parse_count("1_000"), Ok(1000));
        assert_eq!(parse_count("42"), Ok(42));
        for bad in ["1.5", "1e-3", "-5", "", "e6", "1e30", "abc"] {
            assert!(parse_count(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2ms").unwrap(), Duration::from_millis(2));
        assert_eq!(parse_duration("500us").unwrap(), Duration::from_micros(500));
        assert_eq!(parse_duration(" 1.5s ").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("0.1ns").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("1_000ns").unwrap(), Duration::from_micros(1));
        assert!(parse_duration("2").unwrap_err().0.starts_with("missing unit"));
        assert!(parse_duration("2min").unwrap_err().0.starts_with("unknown unit"));
        assert!(parse_duration("-1ms").unwrap_err().0.starts_with("negative"));
        assert!(parse_duration("99999999999999999999s").is_err());
        assert!(parse_duration("ms").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("100Gbps").unwrap(), Rate::gbps(100));
        assert_eq!(parse_rate("12.5MB/s").unwrap(), Rate::from_bits_per_sec(100_000_000));
        assert_eq!(parse_rate("1KiB/s").unwrap(), Rate::from_bits_per_sec(8192));
        assert!(parse_rate("100").is_err());
        assert!(parse_rate("-1Gbps").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1500B").unwrap(), 1500);
        assert_eq!(parse_size("8KiB").unwrap(), 8192);
        assert_eq!(parse_size("2GB").unwrap(), 2_000_000_000);
        assert!(parse_size("1500").is_err());
        assert_eq!(fmt_size(65536), "64KiB");
        assert_eq!(fmt_size(1500), "1500B");
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever we print, we parse back to the same value (resolved scenarios depend on it).
        #[test]
        fn display_parses_back(v in any::<u64>()) {
            let r = Rate::from_bits_per_sec(v);
            prop_assert_eq!(parse_rate(&r.to_string()).unwrap(), r);
            let d = Duration::from_nanos(v);
            prop_assert_eq!(parse_duration(&d.to_string()).unwrap(), d);
            prop_assert_eq!(parse_size(&fmt_size(v)).unwrap(), v);
        }
    }
}
