//! Completing the checksum a sender's offload left partial (docs/live.md, "Offloads").
//!
//! A Linux sender on a device with transmit checksum offload (veth's default) hands its TCP and
//! UDP segments down with only the pseudo-header's sum in the checksum field, for the device to
//! finish; a packet socket that receives such a frame is told so (`TP_STATUS_CSUMNOTREADY`).
//! Forwarded as it is, the frame reaches the next stack with a wrong checksum and is dropped
//! there. [`complete_checksum`] does what the device would have done (the kernel's
//! `skb_checksum_help`): the ones'-complement sum of the transport header and payload, with the
//! partial sum in the field, folded and complemented into the field.

use etherparse::{IpNumber, NetSlice, SlicedPacket};

/// Completes the TCP or UDP checksum of `frame` (Ethernet, optional VLAN tags, IPv4 or IPv6 with
/// extension headers) in place, taking the checksum field's content as the pseudo-header's
/// partial sum. Returns whether it did: a frame it cannot parse, or that carries neither TCP
/// nor UDP, or a fragment, is left as it is.
pub fn complete_checksum(frame: &mut [u8]) -> bool {
    let Some((start, len, field)) = transport(frame) else { return false };
    complete_at(frame, start, len, field);
    true
}

/// The checksum at `field` of the segment `start..start + len` completed, the field's content
/// taken as the pseudo-header's partial sum.
fn complete_at(frame: &mut [u8], start: usize, len: usize, field: usize) {
    let seg = &mut frame[start..start + len];
    let mut c = !fold(sum16(seg, 0));
    // UDP: a computed 0 is sent as all ones (0 means "no checksum").
    if c == 0 && field == 6 {
        c = 0xffff;
    }
    seg[field..field + 2].copy_from_slice(&c.to_be_bytes());
}

/// For a receive path that does not say which checksums a sender's offload left partial
/// (AF_XDP has no `TP_STATUS_CSUMNOTREADY`): a TCP or UDP segment read at fixed offsets whose
/// checksum field holds the pseudo-header's folded sum, as an offloading stack leaves it, is
/// completed ([`complete_checksum`]); returns whether it was. A correct checksum equals that
/// sum by chance in about 1 of 65,536 segments, and completing such a frame writes the same
/// correct checksum: the complement of the segment's sum with the field holding the
/// pseudo-header's sum is the correct checksum whatever the field held. A frame the fixed
/// reading does not answer for (IPv6 extension headers, for one) is left as it is.
pub fn complete_if_partial(frame: &mut [u8]) -> bool {
    let Some(super::key::FixedIp { ip, is_v6, proto, start, end }) = super::key::fixed_ip(frame) else {
        return false;
    };
    let len = end - start;
    let field = match proto {
        17 if len >= 8 => 6,
        6 if len >= 20 => 16,
        _ => return false,
    };
    let addrs = if is_v6 { ip + 8..ip + 40 } else { ip + 12..ip + 20 };
    let pseudo = fold(sum16(&frame[addrs], proto as u64 + len as u64));
    let at = start + field;
    let partial = u16::from_be_bytes([frame[at], frame[at + 1]]) == pseudo;
    if partial {
        complete_at(frame, start, len, field);
    }
    partial
}

/// The ones'-complement sum of `bytes` as 16-bit big-endian words (an odd last byte padded
/// with zero), added to `init`, not folded to 16 bits. Eight bytes at a time into a 128-bit
/// accumulator, folded end-around to 64 bits: the same sum modulo 0xffff (RFC 1071, 2(B)), as
/// [`fold`] takes it, at an eighth of the additions.
pub(crate) fn sum16(bytes: &[u8], init: u64) -> u64 {
    let mut acc = init as u128;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        acc += u64::from_be_bytes(w.try_into().expect("8 bytes")) as u128;
    }
    let mut rest = words.remainder().chunks_exact(2);
    for w in &mut rest {
        acc += u16::from_be_bytes([w[0], w[1]]) as u128;
    }
    if let [last] = rest.remainder() {
        acc += (*last as u128) << 8;
    }
    // End-around to 64 bits: 2^64 = 1 modulo 2^64 - 1, a multiple of 0xffff.
    while acc >> 64 != 0 {
        acc = (acc & u64::MAX as u128) + (acc >> 64);
    }
    acc as u64
}

/// `sum` folded to 16 bits (the end-around carries added back).
pub(crate) fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Where the transport segment starts in `frame`, its length (the IP payload's, without the
/// Ethernet padding), and the checksum field's offset in it.
fn transport(frame: &[u8]) -> Option<(usize, usize, usize)> {
    match quick(frame) {
        Quick::Segment(start, len, field) => Some((start, len, field)),
        Quick::Parse => parsed(frame),
    }
}

/// What [`quick`] found.
#[derive(Debug, PartialEq)]
enum Quick {
    Segment(usize, usize, usize),
    /// Not a frame it reads: the full parse decides.
    Parse,
}

/// The frames a sender's offload hands over almost always, read from a few fixed offsets
/// without a full parse: Ethernet II with at most two VLAN tags, then an
/// IPv4 header (options allowed) that is not a fragment, or an IPv6 header with TCP or UDP as
/// its next header (no extension header), a total length within the frame, and a TCP header
/// whose data offset fits the segment or a UDP header. Anything else goes to [`parsed`]. It
/// checks less than the full parse does (a TCP header's options, for one), so a malformed
/// frame the full parse would refuse may have its checksum completed: the next stack drops
/// such a frame either way.
fn quick(f: &[u8]) -> Quick {
    let Some(super::key::FixedIp { proto, start, end, .. }) = super::key::fixed_ip(f) else {
        return Quick::Parse;
    };
    let len = end - start;
    // A TCP header's length, from its data offset (read only when the segment holds 20 B).
    let tcp_header = || (f[start + 12] >> 4) as usize * 4;
    match proto {
        17 if len >= 8 => Quick::Segment(start, len, 6),
        6 if len >= 20 && (20..=len).contains(&tcp_header()) => Quick::Segment(start, len, 16),
        _ => Quick::Parse,
    }
}

/// [`transport`] by etherparse's full parse (extension headers, odd encapsulations, checks).
fn parsed(frame: &[u8]) -> Option<(usize, usize, usize)> {
    let p = SlicedPacket::from_ethernet(frame).ok()?;
    let ip = match p.net? {
        NetSlice::Ipv4(v4) => v4.payload().clone(),
        NetSlice::Ipv6(v6) => v6.payload().clone(),
    };
    if ip.fragmented {
        return None;
    }
    let field = match ip.ip_number {
        IpNumber::UDP => 6,
        IpNumber::TCP => 16,
        _ => return None,
    };
    let start = ip.payload.as_ptr() as usize - frame.as_ptr() as usize;
    (ip.payload.len() >= field + 2).then_some((start, ip.payload.len(), field))
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    /// The pseudo-header's sum, folded, not complemented: what a stack with checksum offload
    /// leaves in the field.
    fn pseudo(src: &[u8], dst: &[u8], proto: u8, len: usize) -> u16 {
        let mut sum: u64 = 0;
        for a in [src, dst] {
            for w in a.chunks(2) {
                sum += u16::from_be_bytes([w[0], w[1]]) as u64;
            }
        }
        sum += proto as u64 + len as u64;
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum as u16
    }

    /// Frames built with their correct checksum by etherparse, the field then replaced by the
    /// partial sum as the offloading stack leaves it: completed, each is the correct frame
    /// again, for UDP and TCP over IPv4 and IPv6, odd and even lengths, with Ethernet padding.
    #[test]
    fn a_partial_checksum_is_completed_to_the_correct_one() {
        let (s4, d4) = ([198, 18, 0, 1], [198, 18, 0, 2]);
        let (s6, d6) = ([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], [0xfe; 16]);
        for payload in [0usize, 1, 5, 100, 1401, 8000] {
            let data: Vec<u8> = (0..payload).map(|i| (i * 7 + 3) as u8).collect();
            let eth = || PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
            let cases = [
                (eth().ipv4(s4, d4, 64).udp(5000, 6000), 14 + 20, 6, 17, &s4[..], &d4[..]),
                (eth().ipv6(s6, d6, 64).udp(5000, 6000), 14 + 40, 6, 17, &s6[..], &d6[..]),
            ];
            for (b, l4, field, proto, src, dst) in cases {
                let mut good = Vec::new();
                b.write(&mut good, &data).unwrap();
                check(&good, l4, field, proto, src, dst);
            }
            let tcp4 = eth().ipv4(s4, d4, 64).tcp(5000, 80, 1, 1000).ack(7);
            let mut good = Vec::new();
            tcp4.write(&mut good, &data).unwrap();
            check(&good, 34, 16, 6, &s4, &d4);
            let tcp6 = eth().ipv6(s6, d6, 64).tcp(5000, 80, 1, 1000).ack(7);
            let mut good = Vec::new();
            tcp6.write(&mut good, &data).unwrap();
            check(&good, 54, 16, 6, &s6, &d6);
        }
    }

    fn check(good: &[u8], l4: usize, field: usize, proto: u8, src: &[u8], dst: &[u8]) {
        let len = good.len() - l4;
        let mut f = good.to_vec();
        f[l4 + field..l4 + field + 2].copy_from_slice(&pseudo(src, dst, proto, len).to_be_bytes());
        // Padding beyond the IP packet is not summed.
        f.extend_from_slice(&[0xab; 3]);
        assert!(complete_checksum(&mut f));
        assert_eq!(&f[..good.len()], good, "proto {proto}, {len} B segment");
    }

    /// [`complete_if_partial`] completes what an offloading stack left partial and leaves a
    /// correct checksum, and a wrong one that is not the pseudo-header's sum, as they are.
    #[test]
    fn only_a_partial_checksum_is_completed_when_unmarked() {
        let (s4, d4) = ([198, 18, 0, 1], [198, 18, 0, 2]);
        let (s6, d6) = ([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], [0xfe; 16]);
        for payload in [0usize, 1, 64, 1401] {
            let data: Vec<u8> = (0..payload).map(|i| (i * 13 + 1) as u8).collect();
            let eth = || PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
            let mut frames = Vec::new();
            for (b, l4, field, proto, src, dst) in [
                (eth().ipv4(s4, d4, 64).udp(5000, 6000), 34, 6, 17, &s4[..], &d4[..]),
                (eth().ipv6(s6, d6, 64).udp(5000, 6000), 54, 6, 17, &s6[..], &d6[..]),
            ] {
                let mut v = Vec::new();
                b.write(&mut v, &data).unwrap();
                frames.push((v, l4, field, proto, src, dst));
            }
            let mut v = Vec::new();
            eth().ipv4(s4, d4, 64).tcp(5000, 80, 1, 1000).write(&mut v, &data).unwrap();
            frames.push((v, 34, 16, 6, &s4[..], &d4[..]));
            for (good, l4, field, proto, src, dst) in frames {
                let mut f = good.clone();
                assert!(!complete_if_partial(&mut f), "a correct checksum is left alone");
                assert_eq!(f, good);
                let p = pseudo(src, dst, proto, good.len() - l4);
                f[l4 + field..l4 + field + 2].copy_from_slice(&p.to_be_bytes());
                assert!(complete_if_partial(&mut f), "proto {proto}, payload {payload}");
                assert_eq!(f, good);
                f[l4 + field..l4 + field + 2].copy_from_slice(&p.wrapping_add(1).to_be_bytes());
                let wrong = f.clone();
                assert!(!complete_if_partial(&mut f), "a wrong checksum is not a partial one");
                assert_eq!(f, wrong);
            }
        }
    }

    /// The quick reading gives what the full parse gives wherever it answers: every frame of
    /// the test above (UDP and TCP, IPv4 and IPv6, with padding) and VLAN-tagged ones, and it
    /// answers for all of them; fragments, ICMP and cut frames it leaves to the full parse.
    #[test]
    fn the_quick_reading_agrees_with_the_full_parse() {
        let (s4, d4) = ([198, 18, 0, 1], [198, 18, 0, 2]);
        let s6 = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let mut frames: Vec<Vec<u8>> = Vec::new();
        for payload in [0usize, 1, 5, 100, 1401] {
            let data: Vec<u8> = (0..payload).map(|i| (i * 7 + 3) as u8).collect();
            let eth = || PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
            let vlan = || eth().single_vlan(7.try_into().unwrap());
            let two = || eth().double_vlan(7.try_into().unwrap(), 9.try_into().unwrap());
            for mut f in [
                {
                    let mut v = Vec::new();
                    eth().ipv4(s4, d4, 64).udp(1, 2).write(&mut v, &data).unwrap();
                    v
                },
                {
                    let mut v = Vec::new();
                    eth().ipv6(s6, [0xfe; 16], 64).tcp(1, 2, 3, 4).write(&mut v, &data).unwrap();
                    v
                },
                {
                    let mut v = Vec::new();
                    vlan().ipv4(s4, d4, 64).tcp(1, 2, 3, 4).write(&mut v, &data).unwrap();
                    v
                },
                {
                    let mut v = Vec::new();
                    two().ipv6(s6, [0xfe; 16], 64).udp(1, 2).write(&mut v, &data).unwrap();
                    v
                },
            ] {
                f.extend_from_slice(&[0; 4]); // Ethernet padding
                frames.push(f);
            }
        }
        for f in &frames {
            let Quick::Segment(a, b, c) = quick(f) else { panic!("the quick reading answers for {f:?}") };
            assert_eq!(Some((a, b, c)), parsed(f));
        }
        let mut frag = frames[0].clone();
        frag[14 + 6] = 0x20; // more fragments
        assert_eq!(quick(&frag), Quick::Parse);
        let mut icmp = Vec::new();
        PacketBuilder::ethernet2([2; 6], [3; 6])
            .ipv4(s4, d4, 9)
            .icmpv4_echo_request(1, 1)
            .write(&mut icmp, &[1, 2, 3])
            .unwrap();
        assert_eq!(quick(&icmp), Quick::Parse);
        for n in [0, 13, 14, 20, 33, 40] {
            assert_eq!(quick(&frames[0][..n]), Quick::Parse, "{n} B");
        }
    }

    #[test]
    fn other_frames_are_left_alone() {
        let mut arp = vec![0xffu8; 6];
        arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
        arp.extend_from_slice(&[0u8; 28]);
        let before = arp.clone();
        assert!(!complete_checksum(&mut arp));
        assert_eq!(arp, before);
        let mut icmp = Vec::new();
        PacketBuilder::ethernet2([2; 6], [3; 6])
            .ipv4([1, 1, 1, 1], [2, 2, 2, 2], 9)
            .icmpv4_echo_request(1, 1)
            .write(&mut icmp, &[1, 2, 3])
            .unwrap();
        let before = icmp.clone();
        assert!(!complete_checksum(&mut icmp));
        assert_eq!(icmp, before);
        for n in [0, 10, 20, 40] {
            let mut short = before[..n].to_vec();
            assert!(!complete_checksum(&mut short));
        }
    }
}
