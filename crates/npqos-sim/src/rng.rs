//! Per-component random-number streams derived from one scenario seed.
//!
//! Every component asks for its stream by a stable name and an index (`"arrivals", queue_id`).
//! The stream's 256-bit ChaCha key is derived from `(seed, name, index)` only, so adding or
//! removing a component never changes the draws of the others, and the order in which
//! components are built does not matter.

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha12Rng;

/// The generator type used for every stream.
pub type StreamRng = ChaCha12Rng;

/// Derives independent RNG streams from a scenario seed.
#[derive(Clone, Copy, Debug)]
pub struct RngStreams {
    seed: u64,
}

impl RngStreams {
    pub fn new(seed: u64) -> Self {
        RngStreams { seed }
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The stream for component `name`, instance `index`.
    pub fn stream(&self, name: &str, index: u64) -> StreamRng {
        // SplitMix64 absorbs the seed, every byte of the name and the index; four more
        // SplitMix outputs form the ChaCha key.
        let mut h = splitmix(self.seed ^ 0x6e70_716f_735f_7267); // "npqos_rg"
        for &b in name.as_bytes() {
            h = splitmix(h ^ b as u64);
        }
        h = splitmix(h ^ 0xff ^ (name.len() as u64) << 8);
        h = splitmix(h ^ index);
        let mut key = [0u8; 32];
        for chunk in key.chunks_exact_mut(8) {
            h = splitmix(h);
            chunk.copy_from_slice(&h.to_le_bytes());
        }
        ChaCha12Rng::from_seed(key)
    }
}

/// rand_distr's `Exp1` (the 256-layer ziggurat of Doornik's ZIGNOR), the same value from the
/// same draws, with its common case written out so that it inlines: one 64-bit draw whose low 8
/// bits pick a layer and whose top 52 bits place the sample in it, taken when it falls inside the
/// layer below (about 98% of draws). Any other draw is handed to rand_distr itself as the first
/// it makes, and rand_distr takes its own slower way from the same bits and the stream. The
/// layers' edges are rand_distr's, read through its public sampler once ([`Exp1Fast::new`]):
/// a draw whose 52 fraction bits are zero places the sample at exactly 2^-53 times its layer's
/// edge. kim's row drew an exponential gap in about 85 instructions through rand_distr's call.
#[derive(Clone, Copy, Debug)]
pub struct Exp1Fast {
    /// Layer `i`'s outer edge, and 0 for the 257th: the sample `u x[i]` (u in (0, 1)) is taken
    /// when it is below `x[i + 1]`.
    x: &'static [f64; 257],
}

impl Exp1Fast {
    /// The layers of rand_distr's table, or `None` if what its sampler gave does not look like
    /// them (a rand_distr that samples otherwise: then use `Exp1` itself).
    pub fn new() -> Option<Self> {
        static X: std::sync::OnceLock<Option<[f64; 257]>> = std::sync::OnceLock::new();
        X.get_or_init(read_exp1_layers).as_ref().map(|x| Exp1Fast { x })
    }

    /// A draw of `Exp1` from `rng`: exactly `rng.sample(rand_distr::Exp1)`.
    #[inline(always)]
    pub fn sample<R: RngCore + ?Sized>(&self, rng: &mut R) -> f64 {
        let bits = rng.next_u64();
        let i = (bits & 0xff) as usize;
        // rand's `into_float_with_exponent(0)` of the top 52 bits, in [1, 2), less 1 - 2^-53.
        let u = f64::from_bits((bits >> 12) | (1023u64 << 52)) - (1.0 - f64::EPSILON / 2.0);
        let x = u * self.x[i];
        if x < self.x[i + 1] {
            return x;
        }
        exp1_again(bits, rng)
    }
}

/// rand_distr's `Exp1` from the stream `rng` as it was before [`Exp1Fast::sample`] drew `bits`.
#[cold]
#[inline(never)]
fn exp1_again<R: RngCore + ?Sized>(bits: u64, rng: &mut R) -> f64 {
    use rand::Rng;
    /// The stream with `first` put back in front (rand_distr's first draw is a `next_u64`).
    struct Replay<'a, R: ?Sized> {
        first: Option<u64>,
        rng: &'a mut R,
    }
    impl<R: RngCore + ?Sized> RngCore for Replay<'_, R> {
        fn next_u32(&mut self) -> u32 {
            assert!(self.first.is_none(), "Exp1 draws 64 bits first");
            self.rng.next_u32()
        }
        fn next_u64(&mut self) -> u64 {
            self.first.take().unwrap_or_else(|| self.rng.next_u64())
        }
        fn fill_bytes(&mut self, dest: &mut [u8]) {
            assert!(self.first.is_none(), "Exp1 draws 64 bits first");
            self.rng.fill_bytes(dest)
        }
    }
    let mut r = Replay { first: Some(bits), rng };
    let x = r.sample(rand_distr::Exp1);
    debug_assert!(r.first.is_none());
    x
}

/// Reads the 256 layer edges of rand_distr's `Exp1` from its sampler: a first draw of `i` (the
/// layer, zero fraction bits) gives `2^-53 x[i]`; the draws after it are all ones, which the
/// 256th layer (the only one that draws again) accepts. Checked: positive, finite, decreasing,
/// and read with at most two draws each; a sampler that draws on and on (some other version of
/// rand_distr) is cut off and the table refused, and `Exp1` itself is used.
fn read_exp1_layers() -> Option<[f64; 257]> {
    use rand::Rng;
    /// The layer first, then all ones; `draws` counts them, and past a few the draws are
    /// refused by ending the sample in the base layer's tail, which returns at once.
    struct Probe {
        layer: u64,
        draws: u32,
    }
    impl RngCore for Probe {
        fn next_u32(&mut self) -> u32 {
            self.next_u64() as u32
        }
        fn next_u64(&mut self) -> u64 {
            self.draws += 1;
            match self.draws {
                1 => self.layer,
                2..=8 => u64::MAX,
                // Layer 0, fraction bits all ones: outside the base layer's box only if its
                // edge test fails; the tail's draw then ends the sample.
                _ => 0xffff_ffff_ffff_f000,
            }
        }
        fn fill_bytes(&mut self, dest: &mut [u8]) {
            dest.fill(0xff)
        }
    }
    let mut x = [0.0f64; 257];
    let mut ok = true;
    for (i, edge) in x.iter_mut().enumerate().take(256) {
        let mut probe = Probe { layer: i as u64, draws: 0 };
        let v: f64 = probe.sample(rand_distr::Exp1);
        ok &= probe.draws <= 2;
        *edge = v * 2f64.powi(53);
    }
    ok &= x[..256].iter().all(|v| v.is_finite() && *v > 0.0) && x[..256].windows(2).all(|w| w[0] > w[1]);
    ok.then_some(x)
}

/// Canon's method as rand 0.9 samples `random_range(low..=high)` for one integer type: one draw
/// of the type's width times the range, the high half the value; a second draw only when the
/// low half lands in the biased zone, its high half carried in.
macro_rules! canon_range {
    ($(#[$doc:meta])* $name:ident, $t:ty, $wide:ty, $next:ident) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name<R: RngCore + ?Sized>(rng: &mut R, low: $t, high: $t) -> $t {
            debug_assert!(low <= high);
            let range = high.wrapping_sub(low).wrapping_add(1);
            if range == 0 {
                return rng.$next();
            }
            let m = rng.$next() as $wide * range as $wide;
            let (mut hi, lo) = ((m >> <$t>::BITS) as $t, m as $t);
            if lo > range.wrapping_neg() {
                let again = ((rng.$next() as $wide * range as $wide) >> <$t>::BITS) as $t;
                hi += lo.checked_add(again).is_none() as $t;
            }
            low.wrapping_add(hi)
        }
    };
}

canon_range!(
    /// `rng.random_range(low..=high)` for `u32` (`low <= high`), the same value from the same
    /// draws as rand 0.9 gives it (Canon's method, its default), written out so that it
    /// inlines: rand's generic call was about 35 instructions a draw on kim's row, where a core
    /// is drawn for every send. The test `ranges_draw_as_rand_does` holds it to rand's over
    /// ranges of every size.
    range_u32, u32, u64, next_u32
);
canon_range!(
    /// [`range_u32`] for `u64`: `rng.random_range(low..=high)` as rand 0.9 draws it.
    range_u64, u64, u128, next_u64
);

/// SplitMix64 finaliser (Steele, Lea, Flood 2014).
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn streams_are_stable_and_independent() {
        let s = RngStreams::new(42);
        let a1: u64 = s.stream("arrivals", 0).random();
        let a2: u64 = s.stream("arrivals", 0).random();
        assert_eq!(a1, a2, "same name and index, same draws");
        assert_ne!(a1, s.stream("arrivals", 1).random::<u64>());
        assert_ne!(a1, s.stream("sizes", 0).random::<u64>());
        assert_ne!(a1, RngStreams::new(43).stream("arrivals", 0).random::<u64>());
        // name/index boundaries do not alias: ("ab", 0) vs ("a", ...)
        assert_ne!(s.stream("ab", 0).random::<u64>(), s.stream("a", 0x62).random::<u64>());
    }

    /// Pinned value: a change here changes every run's results and needs a changelog entry.
    #[test]
    fn stream_derivation_is_pinned() {
        let v: u64 = RngStreams::new(1).stream("pin", 7).random();
        assert_eq!(v, PINNED);
    }

    /// The written-out ranges draw what rand's `random_range` draws, value for value, and leave
    /// the stream where rand leaves it: small ranges, ranges just past a power of two, and
    /// ranges near the type's size, where Canon's method often takes its second draw (it fails
    /// if that draw is skipped or its carry dropped: both mutants tried).
    #[test]
    fn ranges_draw_as_rand_does() {
        let s = RngStreams::new(9);
        let mut pick = s.stream("pick", 0);
        let mut second = 0u64;
        for case in 0..400u64 {
            let (mut a, mut b) = (s.stream("range", case), s.stream("range", case));
            let bits = pick.random_range(1..=64u32);
            let span64: u64 = if bits == 64 { pick.random() } else { pick.random::<u64>() >> (64 - bits) };
            let low64: u64 = pick.random::<u64>() >> pick.random_range(0..64u32);
            let high64 = low64.saturating_add(span64);
            let (low32, high32) = (low64 as u32, (low64 as u32).saturating_add(span64 as u32));
            for _ in 0..200 {
                let at = a.get_word_pos();
                assert_eq!(range_u64(&mut a, low64, high64), b.random_range(low64..=high64), "u64 case {case}");
                // Canon's second draw taken: four words rather than two.
                second += (a.get_word_pos() - at == 4) as u64;
                assert_eq!(range_u32(&mut a, low32, high32), b.random_range(low32..=high32), "u32 case {case}");
            }
            assert_eq!(a.random::<u64>(), b.random::<u64>(), "the streams stand at the same place");
        }
        for n in [1u32, 2, 5, 12, 100, u32::MAX] {
            let (mut a, mut b) = (s.stream("small", n as u64), s.stream("small", n as u64));
            for _ in 0..1000 {
                assert_eq!(range_u32(&mut a, 0, n - 1), b.random_range(0..n));
                assert_eq!(range_u64(&mut a, 0, n as u64 - 1), b.random_range(0..n as u64));
            }
        }
        assert!(second > 1000, "second draws taken: {second}");
    }

    /// The written-out `Exp1` draws what rand_distr's draws, bit for bit, over two million draws
    /// of one stream (the slower ways included: the base layer's tail, the 256th layer, and
    /// the wedges' second draw), leaves the stream where rand_distr leaves it, and so does the
    /// exponential gap built on it, `Arrivals::next_gap`. Fails if the taken case tests a layer
    /// against its own edge rather than the next one's, or if the draw handed back is dropped
    /// (both mutants tried).
    #[test]
    fn exp1_draws_as_rand_distr_does() {
        use rand_distr::{Distribution, Exp, Exp1};
        let fast = Exp1Fast::new().expect("rand_distr's layers read");
        let s = RngStreams::new(3);
        let (mut a, mut b) = (s.stream("exp", 0), s.stream("exp", 0));
        let (mut tail, mut again) = (0u64, 0u64);
        for k in 0..2_000_000u32 {
            let mut peek = a.clone();
            let bits = peek.next_u64();
            let x = fast.sample(&mut a);
            let y: f64 = b.sample(Exp1);
            assert_eq!(x.to_bits(), y.to_bits(), "draw {k}");
            // Where the taken case did not hold: rand_distr drew more.
            if a.get_word_pos() > peek.get_word_pos() {
                again += 1;
                tail += (bits & 0xff == 0) as u64;
            }
        }
        assert_eq!(a.random::<u64>(), b.random::<u64>(), "the streams stand at the same place");
        assert!(again > 30_000 && tail > 500, "the slower ways were taken ({again} draws, {tail} in the tail)");
        eprintln!("{again} of 2,000,000 draws by the slower ways, {tail} of them in the base layer");
        for mean_ns in [1u64, 3, 29_700_000, 1_000_000_000_000] {
            let mean = npqos_core::Duration::from_nanos(mean_ns);
            let mut gaps = crate::workload::Arrivals::new(&crate::workload::GapDist::Exponential, mean).unwrap();
            let exp = Exp::new(1.0 / mean_ns as f64).unwrap();
            let (mut a, mut b) = (s.stream("next_gap", mean_ns), s.stream("next_gap", mean_ns));
            for _ in 0..100_000 {
                let want = crate::workload::round_ns(exp.sample(&mut b));
                assert_eq!(gaps.next_gap(&mut a).as_nanos(), want, "mean {mean_ns} ns");
            }
        }
        for mean in [1.0, 3.0, 29.7e6, 0.1, 1e12] {
            let (mut a, mut b) = (s.stream("gap", mean as u64), s.stream("gap", mean as u64));
            let exp = Exp::new(1.0 / mean).unwrap();
            let scale = 1.0 / (1.0 / mean);
            for _ in 0..100_000 {
                assert_eq!((fast.sample(&mut a) * scale).to_bits(), exp.sample(&mut b).to_bits(), "mean {mean}");
            }
        }
    }
    const PINNED: u64 = 4_302_492_572_158_584_309;
}
