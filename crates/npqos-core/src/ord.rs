//! One total order for floating-point keys of priority queues.
//!
//! Virtual-time tags (predictive eqs 8-12) and LAP's work claims (eq 19) are `f64` keys of
//! binary heaps. [`TotalF64`] orders them by IEEE 754 `totalOrder` (`f64::total_cmp`): a
//! total order, so heaps stay consistent even if a NaN appeared, and equality agrees with the
//! order (`-0.0 < 0.0`, NaNs equal themselves), which a derived `PartialEq` over `f64` would not.

use std::cmp::Ordering;

/// An `f64` ordered by `f64::total_cmp`.
#[derive(Clone, Copy, Debug, Default)]
pub struct TotalF64(pub f64);

impl PartialEq for TotalF64 {
    #[inline]
    fn eq(&self, o: &Self) -> bool {
        self.0.total_cmp(&o.0) == Ordering::Equal
    }
}
impl Eq for TotalF64 {}
impl PartialOrd for TotalF64 {
    #[inline]
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for TotalF64 {
    #[inline]
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn total_order_agrees_with_equality() {
        let mut v = [TotalF64(1.0), TotalF64(f64::NAN), TotalF64(-0.0), TotalF64(0.0), TotalF64(-1.0)];
        v.sort();
        assert_eq!(v[0], TotalF64(-1.0));
        assert!(v[1] < v[2], "-0.0 before 0.0");
        assert!(v[4].0.is_nan());
        assert_eq!(TotalF64(f64::NAN), TotalF64(f64::NAN));
        assert_ne!(TotalF64(-0.0), TotalF64(0.0));
    }
}
