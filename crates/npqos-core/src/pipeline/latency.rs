//! A latency histogram recorded at the cost of an increment: the counts of an
//! `hdrhistogram::Histogram<u64>` of 1 ns to one hour at 3 significant digits, the one the
//! pipeline reports, kept in the same bins (the same index for every value) without the
//! library's per-record work (a bounds check and resize test, the saturating add of the total,
//! the minimum and maximum). [`Latency::histogram`] gives the library's histogram with exactly
//! those counts, so every quantile, mean, count between two values, minimum and maximum it
//! reports is the one recording each value into it would have given (its minimum and maximum
//! are a bin's lowest and highest equivalent values, which is what the library reports).
//!
//! The router records four latencies a packet; the library's record took about 67 instructions
//! each (docs/PERFORMANCE.md).

/// Lowest and highest value the histogram tells apart, ns.
pub const LOW: u64 = 1;
pub const HIGH: u64 = 3_600_000_000_000;
/// Significant decimal digits.
pub const DIGITS: u8 = 3;

/// hdrhistogram's geometry for `LOW`, `HIGH` and `DIGITS`: 2 x 10^3 needs 11 bits of sub-bucket
/// (2,048 sub-buckets, the upper half of each used past the first), unit magnitude 0.
const SUB_BUCKET_BITS: u32 = 11;
const HALF_BITS: u32 = SUB_BUCKET_BITS - 1;
const HALF: usize = 1 << HALF_BITS;
const SUB_BUCKET_MASK: u64 = (1 << SUB_BUCKET_BITS) - 1;
/// 64 - unit magnitude - sub-bucket bits.
const LEADING_ZERO_BASE: u32 = 64 - SUB_BUCKET_BITS;
/// Buckets that cover `HIGH`: 2,048 x 2^31 > 3.6e12.
const BUCKETS: usize = 32;
/// Bins: the buckets' upper halves and bucket 0's lower half.
const BINS: usize = (BUCKETS + 1) * HALF;

/// The counts. See the module documentation.
#[derive(Clone, Debug)]
pub struct Latency {
    counts: Vec<u64>,
    total: u64,
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

/// The highest value the bins hold (the last bucket's top, above `HIGH`; 2^42 - 1 ns, about 73
/// minutes). Past it a value counts as `HIGH`.
pub const TOP: u64 = (1 << (SUB_BUCKET_BITS as usize + BUCKETS - 1)) - 1;

/// The bin of `v`. As in `saturating_record`, a value past the last bin counts as `HIGH`, and 0
/// has bin 0 of its own.
#[inline(always)]
fn bin(v: u64) -> usize {
    let v = if v > TOP { HIGH } else { v };
    let bucket = LEADING_ZERO_BASE - (v | SUB_BUCKET_MASK).leading_zeros();
    let sub = (v >> bucket) as usize;
    ((bucket as usize + 1) << HALF_BITS) + sub - HALF
}

/// The lowest value of bin `i`.
fn value_of(i: usize) -> u64 {
    let (bucket, sub) = match (i >> HALF_BITS).checked_sub(1) {
        Some(b) => (b, (i & (HALF - 1)) + HALF),
        None => (0, i & (HALF - 1)),
    };
    (sub as u64) << bucket
}

impl Latency {
    pub fn new() -> Self {
        Latency { counts: vec![0; BINS], total: 0 }
    }
    /// Records `v` ns (past the last bin, `HIGH`).
    #[inline(always)]
    pub fn record(&mut self, v: u64) {
        self.record_n(v, 1);
    }
    /// Records `v` ns `n` times.
    #[inline(always)]
    pub fn record_n(&mut self, v: u64, n: u64) {
        self.counts[bin(v)] += n;
        self.total += n;
    }
    /// Values recorded.
    pub fn len(&self) -> u64 {
        self.total
    }
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }
    pub fn reset(&mut self) {
        self.counts.fill(0);
        self.total = 0;
    }
    /// The library's histogram of these counts.
    pub fn histogram(&self) -> hdrhistogram::Histogram<u64> {
        let mut h = hdrhistogram::Histogram::new_with_bounds(LOW, HIGH, DIGITS).expect("valid bounds");
        for (i, &c) in self.counts.iter().enumerate().filter(|(_, &c)| c > 0) {
            h.record_n(value_of(i), c).expect("a bin's value is in range");
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every bin's lowest value is the library's lowest equivalent of each value in it, and the
    /// bins follow one another: the same bins as the library's.
    #[test]
    fn the_bins_are_the_librarys() {
        let h = hdrhistogram::Histogram::<u64>::new_with_bounds(LOW, HIGH, DIGITS).unwrap();
        assert_eq!(h.distinct_values(), BINS, "the library's counts array");
        let mut v = 0;
        let mut last = bin(v);
        while v <= TOP {
            assert_eq!(value_of(bin(v)), h.lowest_equivalent(v), "{v}");
            assert!(bin(v) == last || bin(v) == last + 1, "{v}");
            last = bin(v);
            // Every value up to 5,000, then a few in each bin and its edges.
            v = if v < 5_000 { v + 1 } else { (h.next_non_equivalent(v) - 1).max(v + 1) };
        }
        assert_eq!((bin(TOP), bin(TOP + 1)), (BINS - 1, bin(HIGH)), "past the last bin, HIGH");
        assert_eq!((bin(0), bin(1)), (0, 1), "0 has a bin of its own");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, rng_seed: proptest::test_runner::RngSeed::Fixed(0x6c6174), ..ProptestConfig::default() })]

        /// Values of every magnitude, recorded here and straight into the library's histogram
        /// (with `saturating_record`, the pipeline's call): the same quantiles, mean, minimum,
        /// maximum, length and counts between values.
        #[test]
        fn the_histogram_is_the_one_recording_would_give(
            vals in prop::collection::vec((0u32..44, any::<u64>()), 1..400),
        ) {
            let mut lat = Latency::new();
            let mut lib = hdrhistogram::Histogram::<u64>::new_with_bounds(LOW, HIGH, DIGITS).unwrap();
            for (bits, r) in vals {
                let v = r >> (63 - bits.min(43));
                lat.record(v);
                lib.saturating_record(v);
            }
            let h = lat.histogram();
            prop_assert_eq!(h.len(), lib.len());
            prop_assert_eq!(lat.len(), lib.len());
            prop_assert_eq!((h.min(), h.max(), h.min_nz()), (lib.min(), lib.max(), lib.min_nz()));
            prop_assert_eq!(h.mean().to_bits(), lib.mean().to_bits());
            for q in [0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0] {
                prop_assert_eq!(h.value_at_quantile(q), lib.value_at_quantile(q), "{}", q);
            }
            let mut lo = 0u64;
            while lo <= lib.max() {
                prop_assert_eq!(h.count_between(lo, lo * 2 + 999), lib.count_between(lo, lo * 2 + 999));
                lo = lo * 2 + 1000;
            }
        }
    }
}
