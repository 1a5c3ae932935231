//! Classification of packets into services: the first stage of the composed router.
//!
//! A [`Classifier`] holds an ordered list of [`Rule`]s, each naming a [`ServiceId`]; a packet's
//! 5-tuple gets the service of the first rule it matches, or the default service, or none (the
//! router then drops it with the reason "unclassified"). A rule matches on the IP protocol, on
//! port ranges (source, destination, or either end) and on the packet's direction relative to a
//! set of inside prefixes (inbound: from outside to an inside address; outbound: from an inside
//! address to outside; a packet between two inside or two outside addresses is neither). Every
//! criterion left empty matches anything. Rules are checked in order, so a later rule never
//! overrides an earlier one, as in an ACL.
//!
//! Sans-IO and time-independent: classification depends only on the 5-tuple, so no call takes
//! `now`. Construction checks everything (service ids, port ranges, prefix lengths, direction
//! rules without inside prefixes) and returns [`Error`]; classifying never fails.

use crate::error::Error;
use crate::flow::FlowKey;
use crate::id::ServiceId;
use core::net::IpAddr;

/// An inclusive range of ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

impl PortRange {
    /// One port.
    pub const fn one(p: u16) -> Self {
        PortRange { lo: p, hi: p }
    }
    fn contains(&self, p: u16) -> bool {
        self.lo <= p && p <= self.hi
    }
}

/// An address prefix (`10.0.0.0/8`, `2001:db8::/32`). IPv4 prefixes are held in their
/// IPv4-mapped form, as [`FlowKey`] holds IPv4 addresses, so they never match IPv6 traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    addr: [u8; 16],
    /// Length over the 128-bit form (an IPv4 /8 is 104).
    len: u8,
}

impl Prefix {
    /// The prefix of `addr` with `len` leading bits (at most 32 for IPv4, 128 for IPv6).
    pub fn new(addr: IpAddr, len: u8) -> Result<Self, Error> {
        let (bytes, max, offset) = match addr {
            IpAddr::V4(a) => (a.to_ipv6_mapped().octets(), 32, 96),
            IpAddr::V6(a) => (a.octets(), 128, 0),
        };
        if len > max {
            return Err(Error::BadParameter {
                parameter: "prefix length",
                value: format!("{addr}/{len}"),
                expected: "at most 32 for IPv4 and 128 for IPv6",
            });
        }
        let len = len + offset;
        let mut masked = bytes;
        for (i, b) in masked.iter_mut().enumerate() {
            let bits = (len as usize).saturating_sub(8 * i).min(8);
            *b &= if bits == 0 { 0 } else { 0xffu8 << (8 - bits) };
        }
        Ok(Prefix { addr: masked, len })
    }

    /// Parses `ADDR/LEN` (or a bare address: a host prefix).
    pub fn parse(s: &str) -> Result<Self, Error> {
        let bad = || Error::BadParameter {
            parameter: "prefix",
            value: s.to_string(),
            expected: "an address and a length, as 10.0.0.0/8 or 2001:db8::/32",
        };
        let (a, l) = s.split_once('/').map_or((s, None), |(a, l)| (a, Some(l)));
        let addr: IpAddr = a.trim().parse().map_err(|_| bad())?;
        let len = match l {
            Some(l) => l.trim().parse::<u8>().map_err(|_| bad())?,
            None => {
                if addr.is_ipv4() {
                    32
                } else {
                    128
                }
            }
        };
        Prefix::new(addr, len)
    }

    /// Whether a 16-byte address (IPv4-mapped for IPv4) lies in the prefix.
    pub fn contains(&self, addr: &[u8; 16]) -> bool {
        let full = (self.len / 8) as usize;
        if addr[..full] != self.addr[..full] {
            return false;
        }
        let rest = self.len % 8;
        rest == 0 || (addr[full] ^ self.addr[full]) >> (8 - rest) == 0
    }
}

impl core::fmt::Display for Prefix {
    /// `10.0.0.0/8` for an IPv4 prefix (held IPv4-mapped), `2001:db8::/32` otherwise.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let v6 = core::net::Ipv6Addr::from(self.addr);
        match v6.to_ipv4_mapped() {
            Some(v4) if self.len >= 96 => write!(f, "{v4}/{}", self.len - 96),
            _ => write!(f, "{v6}/{}", self.len),
        }
    }
}

/// The direction of a packet relative to the inside prefixes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Direction {
    /// Any packet (the criterion is off).
    #[default]
    Any,
    /// From outside to an inside address.
    Inbound,
    /// From an inside address to outside.
    Outbound,
}

/// One classification rule: the service, then the criteria (each empty list matches anything).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rule {
    pub service: ServiceId,
    /// IP protocol numbers (6 TCP, 17 UDP, ...).
    pub protocols: Vec<u8>,
    pub src_ports: Vec<PortRange>,
    pub dst_ports: Vec<PortRange>,
    /// Ports either end may have (a server port, whichever way the packet goes).
    pub ports: Vec<PortRange>,
    pub direction: Direction,
    /// Prefixes the source address lies in (a subscriber's network, an ISP's customers).
    pub src_prefixes: Vec<Prefix>,
    /// Prefixes the destination address lies in.
    pub dst_prefixes: Vec<Prefix>,
    /// DSCP values (0-63) of the packet (per packet, not per flow: the IP header's).
    pub dscp: Vec<u8>,
}

impl Rule {
    fn matches(&self, k: &FlowKey, dscp: u8, dir: Option<Direction>) -> bool {
        let any = |v: &[PortRange], p: u16| v.is_empty() || v.iter().any(|r| r.contains(p));
        let within = |v: &[Prefix], a: &[u8; 16]| v.is_empty() || v.iter().any(|p| p.contains(a));
        (self.protocols.is_empty() || self.protocols.contains(&k.proto))
            && any(&self.src_ports, k.src_port)
            && any(&self.dst_ports, k.dst_port)
            && (self.ports.is_empty() || any(&self.ports, k.src_port) || any(&self.ports, k.dst_port))
            && (self.direction == Direction::Any || dir == Some(self.direction))
            && within(&self.src_prefixes, &k.src)
            && within(&self.dst_prefixes, &k.dst)
            && (self.dscp.is_empty() || self.dscp.contains(&dscp))
    }
}

/// Ordered rules, the inside prefixes and a default service.
#[derive(Clone, Debug)]
pub struct Classifier {
    rules: Vec<Rule>,
    inside: Vec<Prefix>,
    default: Option<ServiceId>,
    services: usize,
}

impl Classifier {
    /// A classifier for `services` services. Refuses a rule or default naming a service outside
    /// `0..services`, a port range with `lo > hi`, and a direction rule without inside prefixes.
    pub fn new(
        services: usize,
        rules: Vec<Rule>,
        inside: Vec<Prefix>,
        default: Option<ServiceId>,
    ) -> Result<Self, Error> {
        let known = |s: ServiceId| {
            if s.index() < services {
                Ok(())
            } else {
                Err(Error::UnknownId { kind: ServiceId::KIND, id: s.0, count: services })
            }
        };
        for r in &rules {
            known(r.service)?;
            for p in r.src_ports.iter().chain(&r.dst_ports).chain(&r.ports) {
                if p.lo > p.hi {
                    return Err(Error::BadParameter {
                        parameter: "port range",
                        value: format!("{}-{}", p.lo, p.hi),
                        expected: "the first port at most the last",
                    });
                }
            }
            if let Some(&d) = r.dscp.iter().find(|&&d| d > 63) {
                return Err(Error::BadParameter {
                    parameter: "dscp",
                    value: d.to_string(),
                    expected: "a DSCP value from 0 to 63",
                });
            }
            if r.direction != Direction::Any && inside.is_empty() {
                return Err(Error::BadParameter {
                    parameter: "direction",
                    value: format!("{:?}", r.direction),
                    expected: "inside prefixes to say what inbound and outbound mean",
                });
            }
        }
        if let Some(d) = default {
            known(d)?;
        }
        Ok(Classifier { rules, inside, default, services })
    }

    /// The number of services.
    pub fn services(&self) -> usize {
        self.services
    }

    /// The packet's direction: `None` when it is neither inbound nor outbound (both ends inside,
    /// or both outside, or no inside prefixes).
    pub fn direction(&self, k: &FlowKey) -> Option<Direction> {
        let inside = |a: &[u8; 16]| self.inside.iter().any(|p| p.contains(a));
        match (inside(&k.src), inside(&k.dst)) {
            (false, true) => Some(Direction::Inbound),
            (true, false) => Some(Direction::Outbound),
            _ => None,
        }
    }

    /// The service of the first rule the packet matches, else the default, else `None`.
    pub fn classify(&self, k: &FlowKey) -> Option<ServiceId> {
        self.classify_packet(k, 0)
    }

    /// [`Self::classify`] for a packet whose IP header carries `dscp` (0-63), for rules with
    /// `dscp` criteria ([`Self::classify`] is a packet of DSCP 0, default forwarding).
    pub fn classify_packet(&self, k: &FlowKey, dscp: u8) -> Option<ServiceId> {
        let dir = if self.inside.is_empty() { None } else { self.direction(k) };
        self.rules.iter().find(|r| r.matches(k, dscp, dir)).map(|r| r.service).or(self.default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(src: &str, dst: &str, proto: u8, sp: u16, dp: u16) -> FlowKey {
        FlowKey::new(src.parse().unwrap(), dst.parse().unwrap(), proto, sp, dp)
    }

    #[test]
    fn prefixes_contain_what_they_say() {
        let p = Prefix::parse("10.1.0.0/16").unwrap();
        assert!(p.contains(&key("10.1.200.3", "1.1.1.1", 6, 1, 1).src));
        assert!(!p.contains(&key("10.2.0.1", "1.1.1.1", 6, 1, 1).src));
        let odd = Prefix::parse("192.168.4.0/22").unwrap();
        assert!(odd.contains(&key("192.168.7.255", "1.1.1.1", 6, 1, 1).src));
        assert!(!odd.contains(&key("192.168.8.0", "1.1.1.1", 6, 1, 1).src));
        let v6 = Prefix::parse("2001:db8::/32").unwrap();
        assert!(v6.contains(&key("2001:db8:1::5", "::1", 6, 1, 1).src));
        assert!(!v6.contains(&key("10.0.0.1", "1.1.1.1", 6, 1, 1).src), "IPv6 prefixes never match IPv4");
        assert!(Prefix::parse("0.0.0.0/0").unwrap().contains(&key("8.8.8.8", "1.1.1.1", 6, 1, 1).src));
        assert!(!Prefix::parse("0.0.0.0/0").unwrap().contains(&key("::2", "::1", 6, 1, 1).src));
        assert!(Prefix::parse("10.0.0.1").unwrap().contains(&key("10.0.0.1", "1.1.1.1", 6, 1, 1).src));
        for s in ["10.1.0.0/16", "0.0.0.0/0", "2001:db8::/32", "::/0", "192.168.4.0/22"] {
            assert_eq!(Prefix::parse(s).unwrap().to_string(), s, "written back as read");
            assert_eq!(Prefix::parse(&Prefix::parse(s).unwrap().to_string()).unwrap(), Prefix::parse(s).unwrap());
        }
        assert_eq!(Prefix::parse("10.1.2.3/16").unwrap().to_string(), "10.1.0.0/16", "host bits cleared");
        for bad in ["10.0.0.0/33", "::/129", "10.0.0/8", "x/8", "10.0.0.0/-1"] {
            assert!(Prefix::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn first_matching_rule_wins_then_the_default() {
        let web = Rule {
            service: ServiceId(0),
            protocols: vec![6],
            ports: vec![PortRange::one(80), PortRange::one(443)],
            ..Default::default()
        };
        let dns = Rule {
            service: ServiceId(1),
            protocols: vec![17],
            dst_ports: vec![PortRange::one(53)],
            ..Default::default()
        };
        let inbound = Rule { service: ServiceId(2), direction: Direction::Inbound, ..Default::default() };
        let c =
            Classifier::new(4, vec![web, dns, inbound], vec![Prefix::parse("10.0.0.0/8").unwrap()], Some(ServiceId(3)))
                .unwrap();
        assert_eq!(c.classify(&key("10.0.0.1", "8.8.8.8", 6, 5000, 443)), Some(ServiceId(0)));
        assert_eq!(c.classify(&key("8.8.8.8", "10.0.0.1", 6, 443, 5000)), Some(ServiceId(0)), "either end's port");
        assert_eq!(c.classify(&key("10.0.0.1", "8.8.8.8", 17, 5000, 53)), Some(ServiceId(1)));
        assert_eq!(
            c.classify(&key("8.8.8.8", "10.0.0.1", 17, 53, 5000)),
            Some(ServiceId(2)),
            "a DNS answer is inbound"
        );
        assert_eq!(c.classify(&key("10.0.0.1", "8.8.8.8", 17, 53, 5000)), Some(ServiceId(3)), "outbound: the default");
        assert_eq!(c.direction(&key("10.0.0.1", "10.0.0.2", 6, 1, 1)), None);
        let none = Classifier::new(1, vec![], vec![], None).unwrap();
        assert_eq!(none.classify(&key("1.1.1.1", "2.2.2.2", 6, 1, 1)), None);
    }

    /// A DSCP rule matches the packet's DSCP, not its flow's: expedited forwarding (46) of a
    /// flow goes to the voice service, its other packets on; out-of-range values are refused.
    #[test]
    fn dscp_matches_per_packet() {
        let voice = Rule { service: ServiceId(0), dscp: vec![46, 34], ..Default::default() };
        let c = Classifier::new(2, vec![voice], vec![], Some(ServiceId(1))).unwrap();
        let k = key("198.18.0.1", "198.18.0.2", 17, 5000, 6000);
        assert_eq!(c.classify_packet(&k, 46), Some(ServiceId(0)));
        assert_eq!(c.classify_packet(&k, 34), Some(ServiceId(0)));
        assert_eq!(c.classify_packet(&k, 0), Some(ServiceId(1)));
        assert_eq!(c.classify(&k), Some(ServiceId(1)), "classify is DSCP 0");
        let bad = Rule { service: ServiceId(0), dscp: vec![64], ..Default::default() };
        assert!(Classifier::new(1, vec![bad], vec![], None).is_err());
    }

    /// A subscriber's prefix matches its addresses only, IPv4 and IPv6 apart.
    #[test]
    fn prefixes_match_source_and_destination() {
        let p = |s: &str| Prefix::parse(s).unwrap();
        let up = Rule {
            service: ServiceId(0),
            src_prefixes: vec![p("198.18.1.0/24"), p("2001:db8:1::/48")],
            ..Default::default()
        };
        let down = Rule { service: ServiceId(1), dst_prefixes: vec![p("198.18.1.0/24")], ..Default::default() };
        let c = Classifier::new(2, vec![up, down], vec![], None).unwrap();
        assert_eq!(c.classify(&key("198.18.1.7", "198.19.0.1", 17, 1, 2)), Some(ServiceId(0)));
        assert_eq!(c.classify(&key("198.19.0.1", "198.18.1.7", 17, 2, 1)), Some(ServiceId(1)));
        assert_eq!(c.classify(&key("198.18.2.7", "198.19.0.1", 17, 1, 2)), None);
        assert_eq!(c.classify(&key("2001:db8:1::5", "2001:db8:2::5", 6, 1, 2)), Some(ServiceId(0)));
        assert_eq!(c.classify(&key("2001:db8:3::5", "2001:db8:2::5", 6, 1, 2)), None);
        assert_eq!(c.classify(&key("::ffff:198.18.1.7", "2001:db8:2::5", 6, 1, 2)), Some(ServiceId(0)), "IPv4-mapped");
    }

    #[test]
    fn bad_rules_are_refused() {
        let r = |service, direction, ports: Vec<PortRange>| Rule {
            service: ServiceId(service),
            direction,
            ports,
            ..Default::default()
        };
        assert!(matches!(
            Classifier::new(2, vec![r(2, Direction::Any, vec![])], vec![], None),
            Err(Error::UnknownId { kind: "service", id: 2, count: 2 })
        ));
        assert!(Classifier::new(2, vec![], vec![], Some(ServiceId(5))).is_err());
        assert!(Classifier::new(2, vec![r(0, Direction::Any, vec![PortRange { lo: 9, hi: 8 }])], vec![], None).is_err());
        assert!(Classifier::new(2, vec![r(0, Direction::Outbound, vec![])], vec![], None).is_err());
    }

    /// Prefixes of the property test's rules, and which of its addresses each holds (the
    /// reference, written by hand).
    const PREFIXES: [&str; 4] = ["10.0.0.0/8", "10.9.0.0/16", "8.8.8.8/32", "0.0.0.0/0"];
    const HOLDS: [[bool; 4]; 4] =
        [[true, true, false, false], [false, true, false, false], [false, false, true, false], [true; 4]];

    fn arb_range() -> impl Strategy<Value = PortRange> {
        (0u16..200, 0u16..50).prop_map(|(lo, w)| PortRange { lo, hi: lo + w })
    }

    fn arb_rule(services: u32) -> impl Strategy<Value = Rule> {
        (
            0..services,
            proptest::collection::vec(prop_oneof![Just(6u8), Just(17u8), Just(1u8)], 0..2),
            proptest::collection::vec(arb_range(), 0..2),
            proptest::collection::vec(arb_range(), 0..2),
            proptest::collection::vec(arb_range(), 0..2),
            prop_oneof![Just(Direction::Any), Just(Direction::Inbound), Just(Direction::Outbound)],
            proptest::collection::vec(0usize..PREFIXES.len(), 0..2),
            proptest::collection::vec(0usize..PREFIXES.len(), 0..2),
        )
            .prop_map(|(s, protocols, src_ports, dst_ports, ports, direction, sp, dp)| Rule {
                service: ServiceId(s),
                protocols,
                src_ports,
                dst_ports,
                ports,
                direction,
                src_prefixes: sp.into_iter().map(|i| Prefix::parse(PREFIXES[i]).unwrap()).collect(),
                dst_prefixes: dp.into_iter().map(|i| Prefix::parse(PREFIXES[i]).unwrap()).collect(),
                dscp: Vec::new(),
            })
    }

    proptest! {
        /// Against a reference written from the rule text: the service is the first rule whose
        /// every criterion holds, else the default; every criterion is checked independently.
        #[test]
        fn classify_is_the_first_rule_every_criterion_of_which_holds(
            rules in proptest::collection::vec(arb_rule(4), 0..6),
            default in proptest::option::of(0u32..4),
            packets in proptest::collection::vec((0u8..4, 0u8..4, prop_oneof![Just(6u8), Just(17u8), Just(1u8)], 0u16..260, 0u16..260), 1..40),
        ) {
            let inside = vec![Prefix::parse("10.0.0.0/8").unwrap()];
            let c = Classifier::new(4, rules.clone(), inside, default.map(ServiceId)).unwrap();
            let addrs = ["10.0.0.1", "10.9.9.9", "8.8.8.8", "1.2.3.4"];
            for (s, d, proto, sp, dp) in packets {
                let k = key(addrs[s as usize], addrs[d as usize], proto, sp, dp);
                let (src_in, dst_in) = (s < 2, d < 2);
                let holds = |r: &Rule| {
                    let port_in = |v: &[PortRange], p: u16| v.iter().any(|x| x.lo <= p && p <= x.hi);
                    let proto_ok = r.protocols.is_empty() || r.protocols.contains(&proto);
                    let sp_ok = r.src_ports.is_empty() || port_in(&r.src_ports, sp);
                    let dp_ok = r.dst_ports.is_empty() || port_in(&r.dst_ports, dp);
                    let either_ok = r.ports.is_empty() || port_in(&r.ports, sp) || port_in(&r.ports, dp);
                    let dir_ok = match r.direction {
                        Direction::Any => true,
                        Direction::Inbound => !src_in && dst_in,
                        Direction::Outbound => src_in && !dst_in,
                    };
                    let net_ok = |v: &[Prefix], a: u8| {
                        v.is_empty() || v.iter().any(|p| (0..4).any(|i| HOLDS[i][a as usize] && *p == Prefix::parse(PREFIXES[i]).unwrap()))
                    };
                    proto_ok && sp_ok && dp_ok && either_ok && dir_ok && net_ok(&r.src_prefixes, s) && net_ok(&r.dst_prefixes, d)
                };
                let want = rules.iter().find(|r| holds(r)).map(|r| r.service).or(default.map(ServiceId));
                prop_assert_eq!(c.classify(&k), want, "{}", k);
            }
        }
    }
}
