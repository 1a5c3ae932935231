//! A frame's flow, DSCP and TCP flags, exactly as the trace decoder
//! ([`crate::trace::decode::decode`]) reads them, with the frames a data plane mostly sees read
//! at fixed offsets instead: Ethernet II with up to two VLAN tags, then IPv4 (not a fragment,
//! its total length inside the frame) or IPv6 (no extension header), then TCP or UDP. Anything
//! else goes to the decoder's full parse (etherparse). The fixed-offset reading is a handful
//! of loads and compares, cheap enough for the forwarder to read the frames of a ring block
//! before their turn ([`super::Forwarder::look_ahead`]) and start loading their flows' state.

use crate::trace::decode::decode;
use crate::trace::reader::{linktype, Record};
use npqos_core::flow::{FlowKey, PROTO_TCP, PROTO_UDP};

/// What a frame is keyed and classified by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameMeta {
    pub key: FlowKey,
    /// The frame carries no IP packet (its key is then `non_ip`).
    pub non_ip: bool,
    pub dscp: u8,
    pub tcp_flags: Option<u8>,
}

/// The frame's meta: the quick reading where it answers, else the full parse; `non_ip` is the
/// key of a frame that carries no IP packet.
#[inline]
pub fn meta(frame: &[u8], non_ip: FlowKey) -> FrameMeta {
    quick(frame).unwrap_or_else(|| parsed(frame, non_ip))
}

/// The full parse (the trace decoder's).
pub fn parsed(frame: &[u8], non_ip: FlowKey) -> FrameMeta {
    let rec = Record { ts_ns: 0, orig_len: frame.len() as u32, link: linktype::ETHERNET, data: frame, offset: 0 };
    match decode(&rec) {
        Ok(m) => FrameMeta { key: m.flow, non_ip: false, dscp: m.dscp, tcp_flags: m.tcp_flags },
        Err(_) => FrameMeta { key: non_ip, non_ip: true, dscp: 0, tcp_flags: None },
    }
}

/// Where the IP packet of a frame read at fixed offsets is: Ethernet II with at most two VLAN
/// tags, then IPv4 (options allowed, not a fragment, a total length from its header's to the
/// frame's) or IPv6 (a payload length within the frame, not 0). The transport segment is
/// `start..end` (Ethernet padding left out) and is `proto`'s only when IPv6 has no extension
/// header. `None`: not such a frame (the full parse decides). Checksum completion
/// ([`super::csum`]) and the flow reading ([`quick`]) both start here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FixedIp {
    pub ip: usize,
    pub is_v6: bool,
    pub proto: u8,
    pub start: usize,
    pub end: usize,
}

#[inline]
pub(super) fn fixed_ip(f: &[u8]) -> Option<FixedIp> {
    let be = |i: usize| f.get(i..i + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let mut at = 12;
    let mut ty = be(at)?;
    for _ in 0..2 {
        if !matches!(ty, 0x8100 | 0x88a8) {
            break;
        }
        at += 4;
        ty = be(at)?;
    }
    let ip = at + 2;
    let b0 = *f.get(ip)?;
    let (is_v6, proto, start, end) = match ty {
        0x0800 if b0 >> 4 == 4 && b0 & 0xf >= 5 => {
            let (ihl, total) = ((b0 & 0xf) as usize * 4, be(ip + 2)? as usize);
            // More fragments or an offset (a fragment: ports 0), a total length shorter than
            // the header: the full parse's cases.
            if be(ip + 6)? & 0x3fff != 0 || total < ihl {
                return None;
            }
            (false, *f.get(ip + 9)?, ip + ihl, ip + total)
        }
        0x86dd if b0 >> 4 == 6 => {
            let len = be(ip + 4)? as usize;
            // A jumbogram's length 0 (a hop-by-hop option): the full parse.
            if len == 0 {
                return None;
            }
            (true, *f.get(ip + 6)?, ip + 40, ip + 40 + len)
        }
        _ => return None,
    };
    (end <= f.len()).then_some(FixedIp { ip, is_v6, proto, start, end })
}

/// The fixed-offset reading (see the module documentation); `None` where it does not answer.
#[inline]
pub fn quick(f: &[u8]) -> Option<FrameMeta> {
    let FixedIp { ip, is_v6, proto, start, end } = fixed_ip(f)?;
    let (src, dst, dscp) = if is_v6 {
        let tc = (f[ip] & 0xf) << 4 | f[ip + 1] >> 4;
        (f[ip + 8..ip + 24].try_into().ok()?, f[ip + 24..ip + 40].try_into().ok()?, tc >> 2)
    } else {
        let mapped = |a: &[u8]| {
            let mut m = [0u8; 16];
            (m[10], m[11]) = (0xff, 0xff);
            m[12..].copy_from_slice(a);
            m
        };
        (mapped(&f[ip + 12..ip + 16]), mapped(&f[ip + 16..ip + 20]), f[ip + 1] >> 2)
    };
    // Other protocols (ICMP, extension headers the parse walks past, ...): the full parse.
    if proto != PROTO_TCP && proto != PROTO_UDP {
        return None;
    }
    let seg = &f[start..end];
    let (src_port, dst_port) = match seg {
        [a, b, c, d, ..] => (u16::from_be_bytes([*a, *b]), u16::from_be_bytes([*c, *d])),
        _ => (0, 0),
    };
    let tcp_flags = if proto == PROTO_TCP { seg.get(13).copied() } else { None };
    let key = FlowKey { src, dst, src_port, dst_port, proto, is_v6, zone: 0 };
    Some(FrameMeta { key, non_ip: false, dscp, tcp_flags })
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;
    use proptest::prelude::*;

    const NON_IP: FlowKey =
        FlowKey { src: [0; 16], dst: [0; 16], src_port: 0, dst_port: 0, proto: 0, is_v6: false, zone: u16::MAX };

    /// Frames of every kind the quick reading answers for (UDP and TCP, IPv4 and IPv6, zero,
    /// one and two VLAN tags, with and without Ethernet padding) and some it leaves alone.
    fn templates() -> Vec<Vec<u8>> {
        let (s4, d4) = ([198, 18, 0, 1], [198, 18, 0, 2]);
        let s6 = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let eth = || PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let vlan = || eth().single_vlan(7.try_into().unwrap());
        let two = || eth().double_vlan(7.try_into().unwrap(), 9.try_into().unwrap());
        let mut out = Vec::new();
        for payload in [0usize, 3, 64] {
            let d: Vec<u8> = (0..payload).map(|i| (i * 7 + 3) as u8).collect();
            let mut v = [Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new()];
            eth().ipv4(s4, d4, 64).udp(1, 2).write(&mut v[0], &d).unwrap();
            vlan().ipv4(s4, d4, 64).tcp(1, 2, 3, 4).syn().write(&mut v[1], &d).unwrap();
            eth().ipv6(s6, [0xfe; 16], 64).tcp(5, 6, 7, 8).ack(9).write(&mut v[2], &d).unwrap();
            two().ipv6(s6, [0xfe; 16], 64).udp(1, 2).write(&mut v[3], &d).unwrap();
            eth().ipv4(s4, d4, 64).icmpv4_echo_request(1, 2).write(&mut v[4], &d).unwrap();
            for f in v {
                let mut padded = f.clone();
                padded.extend_from_slice(&[0; 6]); // Ethernet padding
                out.extend([f, padded]);
            }
        }
        out
    }

    /// Every template the quick reading should answer for, it does, with the full parse's
    /// answer; ICMP it leaves to the full parse.
    #[test]
    fn the_quick_reading_answers_for_the_common_frames_as_the_parse_does() {
        let mut answered = 0;
        for f in templates() {
            let icmp = parsed(&f, NON_IP).key.proto == 1;
            match quick(&f) {
                Some(m) => {
                    assert!(!icmp);
                    assert_eq!(m, parsed(&f, NON_IP), "{f:?}");
                    answered += 1;
                }
                None => assert!(icmp, "no quick reading for {f:?}"),
            }
        }
        assert_eq!(answered, 3 * 2 * 4);
    }

    proptest! {
        /// Cut and scribbled-on frames: wherever the quick reading answers, the full parse
        /// gives the same meta (fragments, odd lengths, other protocols, cut headers).
        #[test]
        fn wherever_the_quick_reading_answers_the_parse_agrees(
            which in 0usize..30,
            cut in 0usize..200,
            edits in proptest::collection::vec((0usize..80, any::<u8>()), 0..4),
        ) {
            let t = templates();
            let mut f = t[which % t.len()].clone();
            for (at, b) in edits {
                if at < f.len() {
                    f[at] = b;
                }
            }
            f.truncate(cut.max(1));
            if let Some(m) = quick(&f) {
                prop_assert_eq!(m, parsed(&f, NON_IP));
            }
        }
    }
}
