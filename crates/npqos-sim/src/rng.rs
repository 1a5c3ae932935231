//! Per-component random-number streams derived from one scenario seed.
//!
//! Every component asks for its stream by a stable name and an index (`"arrivals", queue_id`).
//! The stream's 256-bit ChaCha key is derived from `(seed, name, index)` only, so adding or
//! removing a component never changes the draws of the others, and the order in which
//! components are built does not matter.

use rand::SeedableRng;
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
    const PINNED: u64 = 4_302_492_572_158_584_309;
}
