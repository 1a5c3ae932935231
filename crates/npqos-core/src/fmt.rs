//! Exact decimal formatting of integer quantities in the largest fitting unit.

use core::fmt;

/// Writes `v` in the first unit of `units` (largest scale first) that `v` reaches, with as many
/// decimals as needed to be exact (`1.5ms`, `874329.097444444375Tbps`); values below the
/// smallest scale use `base`. Every scale must be a power of ten.
pub(crate) fn exact(v: u64, units: &[(u64, &str)], base: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    for &(scale, unit) in units {
        if v >= scale {
            let (whole, frac) = (v / scale, v % scale);
            if frac == 0 {
                return write!(f, "{whole}{unit}");
            }
            let width = scale.ilog10() as usize;
            let digits = format!("{frac:0width$}");
            return write!(f, "{whole}.{}{unit}", digits.trim_end_matches('0'));
        }
    }
    write!(f, "{v}{base}")
}
