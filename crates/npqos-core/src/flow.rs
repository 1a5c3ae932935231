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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
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
}
