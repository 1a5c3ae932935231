//! Hashing a flow to one of `M` AFM slots (dqs section 4.1).
//!
//! * [`H3`]: the hardware hash the paper uses (Ramakrishna et al., dqs ref. [29]). A seeded random
//!   binary matrix `Q` (one 32-bit row per input bit); output bit `j` is the parity of
//!   `key AND column j`, i.e. the output is the XOR of the rows of the key's set bits. We evaluate
//!   it a byte at a time from precomputed tables (`T_b[v]` = XOR of the rows of byte `b`'s set
//!   bits), which is the same function.
//! * [`SlotHash::Fast`]: foldhash with a fixed seed, for software data planes.
//!
//! The 32-bit hash is reduced to `0..M` by multiply-shift (`(h * M) >> 32`), so for `M = 2^b`
//! the slot is the top `b` bits of an H3 output, itself an H3 function with `b` output bits.

use crate::flow::FlowKey;
use core::hash::BuildHasher;
use rand::{Rng, SeedableRng};

/// The bytes of a flow key that identify it: for IPv4 the 13 bytes of the 5-tuple (dqs
/// section 4: "the five-tuple in the packet header has 13 bytes") plus the 2-byte zone; for
/// IPv6 the 37 bytes of the 5-tuple plus the zone. Returns the buffer and the used length.
pub fn key_bytes(k: &FlowKey) -> ([u8; MAX_KEY_BYTES], usize) {
    let mut b = [0u8; MAX_KEY_BYTES];
    let mut n = 0;
    let mut put = |s: &[u8]| {
        b[n..n + s.len()].copy_from_slice(s);
        n += s.len();
    };
    if k.is_v6 {
        put(&k.src);
        put(&k.dst);
    } else {
        put(&k.src[12..]);
        put(&k.dst[12..]);
    }
    put(&k.src_port.to_be_bytes());
    put(&k.dst_port.to_be_bytes());
    put(&[k.proto]);
    put(&k.zone.to_be_bytes());
    (b, n)
}

/// Longest [`key_bytes`] output (IPv6).
pub const MAX_KEY_BYTES: usize = 39;

/// The H3 class of universal hash functions with 32 output bits over [`key_bytes`].
#[derive(Clone)]
pub struct H3 {
    /// `tables[b][v]`: XOR of the matrix rows of the set bits of value `v` at byte `b`.
    tables: Box<[[u32; 256]; MAX_KEY_BYTES]>,
}

impl H3 {
    /// Draws the matrix from a ChaCha stream seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(seed);
        let mut tables = Box::new([[0u32; 256]; MAX_KEY_BYTES]);
        for t in tables.iter_mut() {
            let rows: [u32; 8] = core::array::from_fn(|_| rng.random());
            for v in 1..256usize {
                // Gray-code style build: v's table entry = entry without its lowest bit XOR that bit's row.
                let low = v.trailing_zeros() as usize;
                t[v] = t[v & (v - 1)] ^ rows[low];
            }
        }
        H3 { tables }
    }

    /// The 32-bit H3 value of `bytes` (at most [`MAX_KEY_BYTES`]).
    #[inline]
    pub fn hash_bytes(&self, bytes: &[u8]) -> u32 {
        let mut h = 0;
        for (t, &v) in self.tables.iter().zip(bytes) {
            h ^= t[v as usize];
        }
        h
    }

    #[inline]
    pub fn hash(&self, k: &FlowKey) -> u32 {
        let (b, n) = key_bytes(k);
        self.hash_bytes(&b[..n])
    }
}

/// Which hash maps flows to slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashKind {
    /// H3 with a matrix drawn from the seed (the paper's hardware hash).
    H3 { seed: u64 },
    /// foldhash with a fixed seed (fast in software).
    Fast { seed: u64 },
}

/// A flow -> slot hash for a table of `slots` slots.
#[derive(Clone)]
pub enum SlotHash {
    H3 { h3: H3, slots: u32 },
    Fast { state: foldhash::fast::FixedState, slots: u32 },
}

impl SlotHash {
    /// A hash onto `slots` slots; zero slots are refused.
    pub fn new(kind: HashKind, slots: u32) -> Result<Self, crate::Error> {
        if slots == 0 {
            return Err(crate::Error::BadParameter {
                parameter: "AFM slots",
                value: "0".into(),
                expected: "at least 1",
            });
        }
        Ok(match kind {
            HashKind::H3 { seed } => SlotHash::H3 { h3: H3::new(seed), slots },
            HashKind::Fast { seed } => SlotHash::Fast { state: foldhash::fast::FixedState::with_seed(seed), slots },
        })
    }

    pub fn slots(&self) -> u32 {
        match self {
            SlotHash::H3 { slots, .. } | SlotHash::Fast { slots, .. } => *slots,
        }
    }

    /// The slot of `k`, in `0..slots`.
    #[inline]
    pub fn slot(&self, k: &FlowKey) -> u32 {
        let (h, m) = match self {
            SlotHash::H3 { h3, slots } => (h3.hash(k), *slots),
            SlotHash::Fast { state, slots } => ((state.hash_one(k) >> 32) as u32, *slots),
        };
        ((h as u64 * m as u64) >> 32) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::PROTO_TCP;

    fn key(i: u32) -> FlowKey {
        FlowKey::new(
            std::net::Ipv4Addr::from(0x0a00_0000 + i).into(),
            std::net::Ipv4Addr::from(0xc0a8_0001).into(),
            PROTO_TCP,
            (1024 + i % 5000) as u16,
            80,
        )
    }

    #[test]
    fn h3_is_linear_over_xor() {
        // H3(a ^ b) = H3(a) ^ H3(b): the defining property of a matrix hash over GF(2).
        let h = H3::new(7);
        let a: Vec<u8> = (0..13).map(|i| (i * 37 + 5) as u8).collect();
        let b: Vec<u8> = (0..13).map(|i| (i * 91 + 201) as u8).collect();
        let x: Vec<u8> = a.iter().zip(&b).map(|(p, q)| p ^ q).collect();
        assert_eq!(h.hash_bytes(&x), h.hash_bytes(&a) ^ h.hash_bytes(&b));
        assert_eq!(h.hash_bytes(&[0; 13]), 0);
        // A single set bit gives one row; rows differ between bits.
        let r1 = h.hash_bytes(&[1]);
        let r2 = h.hash_bytes(&[2]);
        assert_ne!(r1, 0);
        assert_ne!(r1, r2);
        assert_eq!(h.hash_bytes(&[3]), r1 ^ r2);
    }

    #[test]
    fn key_bytes_are_13_for_v4_plus_zone() {
        let (_, n) = key_bytes(&key(1));
        assert_eq!(n, 15);
        let v6 = FlowKey::new("2001:db8::1".parse().unwrap(), "2001:db8::2".parse().unwrap(), PROTO_TCP, 1, 2);
        assert_eq!(key_bytes(&v6).1, MAX_KEY_BYTES);
    }

    #[test]
    fn slots_are_even_for_both_hashes() {
        // 64 slots, 64,000 distinct flows: every slot within 25% of the mean 1000
        // (binomial sd ~31, so 250 is 8 sd).
        for kind in [HashKind::H3 { seed: 1 }, HashKind::Fast { seed: 1 }] {
            let h = SlotHash::new(kind, 64).unwrap();
            let mut counts = [0u32; 64];
            for i in 0..64_000 {
                counts[h.slot(&key(i)) as usize] += 1;
            }
            let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            assert!(*lo > 750 && *hi < 1250, "{kind:?}: {lo}..{hi}");
        }
    }

    #[test]
    fn seeds_change_the_function_and_non_power_of_two_slots_work() {
        let a = SlotHash::new(HashKind::H3 { seed: 1 }, 1000).unwrap();
        let b = SlotHash::new(HashKind::H3 { seed: 2 }, 1000).unwrap();
        assert!(SlotHash::new(HashKind::H3 { seed: 1 }, 0).is_err(), "zero slots are refused, not a panic");
        assert!(crate::flowmap::afm::AfmTable::new(0, 8, Default::default()).is_err());
        let differ = (0..1000).filter(|&i| a.slot(&key(i)) != b.slot(&key(i))).count();
        assert!(differ > 900);
        assert!((0..10_000).all(|i| a.slot(&key(i)) < 1000));
    }
}
