//! Link-layer decoding of a captured record into [`PacketMeta`]: timestamp, wire length and the
//! unidirectional 5-tuple.
//!
//! Link types: Ethernet (with 802.1Q / QinQ tags, via etherparse), raw IP (LINKTYPE_RAW, and the
//! IPv4 / IPv6 link types), BSD null and loopback (4-byte address family, then IP), Linux cooked
//! capture SLL and SLL2. IPv6 extension headers are skipped by etherparse to find the transport
//! protocol. Ports are read from the first four bytes of the TCP or UDP header, so a capture
//! truncated inside the transport header still yields ports when they were captured.
//!
//! Assumptions (also in docs/traces.md): fragments of a fragmented IPv4 / IPv6 packet get ports
//! 0 (only the first fragment carries them, and a flow must not change key mid-packet);
//! tunnelled packets (4in4, 6in6, GRE) are keyed by their outer header.

use super::reader::{linktype, Record};
use etherparse::{EtherType, LaxNetSlice, LaxSlicedPacket};
use npqos_core::flow::{FlowKey, PROTO_TCP, PROTO_UDP};
use npqos_core::Instant;

/// What the simulator needs of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketMeta {
    pub ts: Instant,
    /// Bytes on the wire (the record's original length).
    pub wire_len: u32,
    pub flow: FlowKey,
    /// The IP header's DSCP (0-63).
    pub dscp: u8,
    /// A TCP segment's flags (its header's 14th byte), if the header was captured that far.
    pub tcp_flags: Option<u8>,
}

/// Why a record carried no IP packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NonIp {
    /// A frame of a non-IP protocol (ARP, LLDP, STP...), or an IP header too short to read.
    NotIp,
    /// A link type we do not decode.
    UnsupportedLink,
}

/// Decodes one record. Timestamps are taken as they are (nanoseconds since the Unix epoch).
pub fn decode(rec: &Record<'_>) -> Result<PacketMeta, NonIp> {
    let d = rec.data;
    let sliced = match rec.link {
        linktype::ETHERNET => LaxSlicedPacket::from_ethernet(d).ok(),
        linktype::RAW | 12 | 14 | linktype::IPV4 | linktype::IPV6 => LaxSlicedPacket::from_ip(d).ok(),
        linktype::NULL | linktype::LOOP => d.get(4..).and_then(|p| LaxSlicedPacket::from_ip(p).ok()),
        linktype::LINUX_SLL => ether_after(d, 14, 16),
        linktype::LINUX_SLL2 => ether_after(d, 0, 20),
        _ => return Err(NonIp::UnsupportedLink),
    };
    let Some(p) = sliced else {
        return Err(NonIp::NotIp);
    };
    let (src, dst, payload, dscp) = match &p.net {
        Some(LaxNetSlice::Ipv4(v4)) => {
            let h = v4.header();
            (to16_v4(h.source()), to16_v4(h.destination()), v4.payload(), h.dcp().value())
        }
        Some(LaxNetSlice::Ipv6(v6)) => {
            let h = v6.header();
            (h.source(), h.destination(), v6.payload(), h.traffic_class() >> 2)
        }
        None => return Err(NonIp::NotIp),
    };
    let proto = payload.ip_number.0;
    let (sp, dp) = if (proto == PROTO_TCP || proto == PROTO_UDP) && !payload.fragmented && payload.payload.len() >= 4 {
        let b = payload.payload;
        (u16::from_be_bytes([b[0], b[1]]), u16::from_be_bytes([b[2], b[3]]))
    } else {
        (0, 0)
    };
    let tcp_flags = (proto == PROTO_TCP && !payload.fragmented).then(|| payload.payload.get(13).copied()).flatten();
    let is_v6 = matches!(p.net, Some(LaxNetSlice::Ipv6(_)));
    Ok(PacketMeta {
        ts: Instant::from_nanos(rec.ts_ns),
        wire_len: rec.orig_len,
        flow: FlowKey { src, dst, src_port: sp, dst_port: dp, proto, is_v6, zone: 0 },
        dscp,
        tcp_flags,
    })
}

/// What follows a record's link-layer header when it is not Ethernet: the EtherType of the
/// packet (from SLL's protocol field, or from the IP version of a raw-IP or BSD null record)
/// and the packet's bytes; `None` for Ethernet records (already frames), records too short to
/// hold their header, and link types we do not decode. What `npqos trace ethernet` puts an
/// Ethernet header in front of.
pub fn link_payload<'a>(rec: &Record<'a>) -> Option<(u16, &'a [u8])> {
    let d = rec.data;
    let by_version = |p: &'a [u8]| match p.first()? >> 4 {
        4 => Some((0x0800, p)),
        6 => Some((0x86dd, p)),
        _ => None,
    };
    let sll = |proto_at: usize, hdr: usize| {
        Some((u16::from_be_bytes([*d.get(proto_at)?, *d.get(proto_at + 1)?]), d.get(hdr..)?))
    };
    match rec.link {
        linktype::RAW | 12 | 14 | linktype::IPV4 | linktype::IPV6 => by_version(d),
        linktype::NULL | linktype::LOOP => by_version(d.get(4..)?),
        linktype::LINUX_SLL => sll(14, 16),
        linktype::LINUX_SLL2 => sll(0, 20),
        _ => None,
    }
}

/// SLL / SLL2: the protocol (an EtherType) at `proto_at`, the payload after `hdr_len` bytes.
fn ether_after(d: &[u8], proto_at: usize, hdr_len: usize) -> Option<LaxSlicedPacket<'_>> {
    let et = u16::from_be_bytes([*d.get(proto_at)?, *d.get(proto_at + 1)?]);
    let payload = d.get(hdr_len..)?;
    Some(LaxSlicedPacket::from_ether_type(EtherType(et), payload))
}

fn to16_v4(a: [u8; 4]) -> [u8; 16] {
    let mut o = [0u8; 16];
    o[10] = 0xff;
    o[11] = 0xff;
    o[12..].copy_from_slice(&a);
    o
}
