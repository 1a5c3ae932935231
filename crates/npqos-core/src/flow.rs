//! Flow identity: the unidirectional IP 5-tuple.
//!
//! Addresses are stored as 16 bytes; an IPv4 address is kept in its IPv4-mapped IPv6 form
//! (`::ffff:a.b.c.d`) with `is_v6 = false`, so IPv4 and IPv6 flows never collide and the key
//! is a fixed 40 bytes (`Copy`, no allocation) usable directly as a hash-table key.
//!
//! A `zone` discriminator (0 for ordinary traffic) separates otherwise identical 5-tuples that
//! belong to different address spaces, the way a VLAN or VRF id does in a router's flow table;
//! trace flow multiplication gives each copy of a trace its own zone.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Transport protocol numbers that have ports in a [`FlowKey`].
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;

/// A unidirectional 5-tuple. Ports are zero for protocols other than TCP and UDP.
///
/// Equality and order are field by field in declaration order, as derived (addresses byte by
/// byte), but compare each address as one 128-bit word (big-endian for the order, which is
/// the bytes' lexicographic order): the derived comparison of two `[u8; 16]` is a call to
/// `memcmp`, which was 10% of the router's arrival thread on router-100g (its flow index is a
/// map by key) and a sixth of dqs's flow-table search (a tree ordered by key).
#[allow(clippy::derived_hash_with_manual_eq)] // equal keys are equal field by field: one hash
#[derive(Clone, Copy, Debug, Eq, Hash, Default, bytemuck::Zeroable)]
pub struct FlowKey {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub src_port: u16,
    pub dst_port: u16,
    /// IP protocol number (IPv4) or final next-header value (IPv6).
    pub proto: u8,
    pub is_v6: bool,
    /// Address-space discriminator (VLAN / VRF / trace copy); 0 for ordinary traffic.
    pub zone: u16,
}

impl PartialEq for FlowKey {
    #[inline]
    fn eq(&self, o: &Self) -> bool {
        u128::from_ne_bytes(self.src) == u128::from_ne_bytes(o.src)
            && u128::from_ne_bytes(self.dst) == u128::from_ne_bytes(o.dst)
            && (self.src_port, self.dst_port, self.proto, self.is_v6, self.zone)
                == (o.src_port, o.dst_port, o.proto, o.is_v6, o.zone)
    }
}

impl Ord for FlowKey {
    #[inline]
    fn cmp(&self, o: &Self) -> core::cmp::Ordering {
        let w = |a: &[u8; 16]| u128::from_be_bytes(*a);
        (w(&self.src), w(&self.dst), self.src_port, self.dst_port, self.proto, self.is_v6, self.zone).cmp(&(
            w(&o.src),
            w(&o.dst),
            o.src_port,
            o.dst_port,
            o.proto,
            o.is_v6,
            o.zone,
        ))
    }
}

impl PartialOrd for FlowKey {
    #[inline]
    fn partial_cmp(&self, o: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl FlowKey {
    pub fn new(src: IpAddr, dst: IpAddr, proto: u8, src_port: u16, dst_port: u16) -> Self {
        let is_v6 = src.is_ipv6();
        FlowKey { src: to16(src), dst: to16(dst), src_port, dst_port, proto, is_v6, zone: 0 }
    }
    pub fn src_ip(&self) -> IpAddr {
        from16(self.src, self.is_v6)
    }
    pub fn dst_ip(&self) -> IpAddr {
        from16(self.dst, self.is_v6)
    }
    /// A 64-bit digest (FNV-1a over the fields). Stable across runs and platforms; for
    /// bucketing and reports, not for adversarial inputs.
    pub fn digest(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |b: u8| {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        };
        self.src.iter().chain(self.dst.iter()).for_each(|&b| eat(b));
        self.src_port.to_be_bytes().into_iter().chain(self.dst_port.to_be_bytes()).for_each(&mut eat);
        eat(self.proto);
        eat(self.is_v6 as u8);
        self.zone.to_be_bytes().into_iter().for_each(&mut eat);
        h
    }
}

fn to16(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

fn from16(b: [u8; 16], is_v6: bool) -> IpAddr {
    let v6 = Ipv6Addr::from(b);
    if is_v6 {
        IpAddr::V6(v6)
    } else {
        IpAddr::V4(v6.to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED))
    }
}

impl fmt::Display for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (s, d) = (self.src_ip(), self.dst_ip());
        if self.is_v6 {
            write!(f, "[{s}]:{} -> [{d}]:{} proto {}", self.src_port, self.dst_port, self.proto)?;
        } else {
            write!(f, "{s}:{} -> {d}:{} proto {}", self.src_port, self.dst_port, self.proto)?;
        }
        if self.zone != 0 {
            write!(f, " zone {}", self.zone)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v4_and_v6_round_trip_and_differ() {
        let a = FlowKey::new("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), PROTO_TCP, 1, 2);
        assert_eq!(a.src_ip().to_string(), "10.0.0.1");
        let b = FlowKey::new("::ffff:10.0.0.1".parse().unwrap(), "::ffff:10.0.0.2".parse().unwrap(), PROTO_TCP, 1, 2);
        assert_ne!(a, b);
        assert_ne!(a.digest(), b.digest());
        assert_eq!(a.to_string(), "10.0.0.1:1 -> 10.0.0.2:2 proto 6");
        let z = FlowKey { zone: 3, ..a };
        assert_ne!(z, a);
        assert_ne!(z.digest(), a.digest());
        assert_eq!(z.to_string(), "10.0.0.1:1 -> 10.0.0.2:2 proto 6 zone 3");
    }

    proptest::proptest! {
        /// Equality and order are the fields' (as derived), whichever field differs.
        #[test]
        fn equality_is_field_by_field(a in proptest::prelude::any::<([u8; 16], [u8; 16], u16, u16, u8, bool, u16)>(),
                                      field in 0usize..8, byte in 0usize..16, x in 1u8..=255) {
            let k = FlowKey { src: a.0, dst: a.1, src_port: a.2, dst_port: a.3, proto: a.4, is_v6: a.5, zone: a.6 };
            let mut o = k;
            match field {
                0 => o.src[byte] ^= x,
                1 => o.dst[byte] ^= x,
                2 => o.src_port ^= x as u16,
                3 => o.dst_port ^= x as u16,
                4 => o.proto ^= x,
                5 => o.is_v6 = !o.is_v6,
                6 => o.zone ^= x as u16,
                _ => {}
            }
            let fields = |k: &FlowKey| (k.src, k.dst, k.src_port, k.dst_port, k.proto, k.is_v6, k.zone);
            proptest::prop_assert_eq!(k == o, fields(&k) == fields(&o));
            proptest::prop_assert_eq!(k == o, field == 7);
            proptest::prop_assert_eq!(k == o, k.cmp(&o) == std::cmp::Ordering::Equal);
            proptest::prop_assert_eq!(k.cmp(&o), fields(&k).cmp(&fields(&o)));
            proptest::prop_assert_eq!(o.cmp(&k), fields(&o).cmp(&fields(&k)));
        }
    }
}
