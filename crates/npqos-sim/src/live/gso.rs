//! Segmenting a TCP sender's offload super-frames (docs/live.md, "Offloads").
//!
//! A Linux TCP sender on a device with segmentation offload (veth's default) hands down frames
//! of up to 64 KB for the device to cut into segments of its MTU; a packet socket receives them
//! whole. [`segment_tcp`] cuts one into the segments the device would have sent (the kernel's
//! software GSO, `tcp_gso_segment`): the headers copied into each, the IP length and (IPv4) the
//! identification and header checksum set, the TCP sequence number advanced, FIN and PSH kept
//! on the last segment only and CWR on the first only, and each TCP checksum computed whole.
//! npqos live then shapes and counts each segment as a frame of its own, as htb does.

use super::csum::{fold, sum16};
use etherparse::{IpNumber, NetSlice, SlicedPacket};

/// Cuts `frame` (Ethernet, optional VLAN tags, IPv4 or IPv6, TCP) into segments whose IP
/// packets are at most `mtu` bytes, each handed to `emit` (the slice is reused between calls).
/// Returns `false`, emitting nothing, when there is nothing to cut: a frame whose IP packet
/// fits the MTU, that carries no TCP, that is a fragment, or that cannot be parsed. `scratch`
/// holds one segment at a time.
pub fn segment_tcp(frame: &[u8], mtu: usize, scratch: &mut Vec<u8>, mut emit: impl FnMut(&[u8])) -> bool {
    let Some(at) = layout(frame) else { return false };
    let Layout { ip, ip_len, tcp_len, v4 } = at;
    let tcp = ip + ip_len;
    let payload = &frame[tcp + tcp_len..ip + ip_len + at_l4_len(frame, ip, v4, ip_len)];
    if ip_len + tcp_len + payload.len() <= mtu || mtu <= ip_len + tcp_len {
        return false;
    }
    let mss = mtu - ip_len - tcp_len;
    let seq0 = u32::from_be_bytes(frame[tcp + 4..tcp + 8].try_into().expect("4 bytes"));
    let id0 = u16::from_be_bytes([frame[ip + 4], frame[ip + 5]]);
    let n = payload.len().div_ceil(mss);
    for (i, chunk) in payload.chunks(mss).enumerate() {
        scratch.clear();
        scratch.extend_from_slice(&frame[..tcp + tcp_len]);
        scratch.extend_from_slice(chunk);
        let seg_l4 = tcp_len + chunk.len();
        if v4 {
            let h = &mut scratch[ip..ip + ip_len];
            h[2..4].copy_from_slice(&((ip_len + seg_l4) as u16).to_be_bytes());
            h[4..6].copy_from_slice(&id0.wrapping_add(i as u16).to_be_bytes());
            h[10..12].copy_from_slice(&[0, 0]);
            let c = !fold(sum16(h, 0));
            h[10..12].copy_from_slice(&c.to_be_bytes());
        } else {
            let h = &mut scratch[ip..ip + ip_len];
            h[4..6].copy_from_slice(&((ip_len - 40 + seg_l4) as u16).to_be_bytes());
        }
        let (src, dst) = if v4 { (ip + 12..ip + 16, ip + 16..ip + 20) } else { (ip + 8..ip + 24, ip + 24..ip + 40) };
        let pseudo = sum16(&scratch[dst], sum16(&scratch[src], IpNumber::TCP.0 as u64 + seg_l4 as u64));
        let t = &mut scratch[tcp..];
        t[4..8].copy_from_slice(&seq0.wrapping_add((i * mss) as u32).to_be_bytes());
        if i + 1 < n {
            t[13] &= !(0x01 | 0x08); // FIN, PSH: the last segment's
        }
        if i > 0 {
            t[13] &= !0x80; // CWR: the first segment's
        }
        t[16..18].copy_from_slice(&[0, 0]);
        let c = !fold(sum16(t, pseudo));
        t[16..18].copy_from_slice(&c.to_be_bytes());
        emit(scratch);
    }
    true
}

/// Where the IP header starts, its length (IPv6: with extension headers), the TCP header's
/// length, and whether it is IPv4.
struct Layout {
    ip: usize,
    ip_len: usize,
    tcp_len: usize,
    v4: bool,
}

fn layout(frame: &[u8]) -> Option<Layout> {
    let p = SlicedPacket::from_ethernet(frame).ok()?;
    let base = frame.as_ptr() as usize;
    let (ip, payload, v4) = match p.net? {
        NetSlice::Ipv4(s) => (s.header().slice().as_ptr() as usize - base, s.payload().clone(), true),
        NetSlice::Ipv6(s) => (s.header().slice().as_ptr() as usize - base, s.payload().clone(), false),
    };
    if payload.fragmented || payload.ip_number != IpNumber::TCP || payload.payload.len() < 20 {
        return None;
    }
    let l4 = payload.payload.as_ptr() as usize - base;
    let tcp_len = ((payload.payload[12] >> 4) as usize) * 4;
    (tcp_len >= 20 && tcp_len <= payload.payload.len()).then_some(Layout { ip, ip_len: l4 - ip, tcp_len, v4 })
}

/// The transport segment's length as the IP header says (without Ethernet padding).
fn at_l4_len(frame: &[u8], ip: usize, v4: bool, ip_len: usize) -> usize {
    if v4 {
        u16::from_be_bytes([frame[ip + 2], frame[ip + 3]]) as usize - ip_len
    } else {
        u16::from_be_bytes([frame[ip + 4], frame[ip + 5]]) as usize - (ip_len - 40)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{PacketBuilder, TransportSlice};

    /// A 10,000 B TCP payload in one super-frame, over IPv4 and IPv6, with FIN, PSH and CWR
    /// set: the segments fit the MTU, parse, carry the payload in order with contiguous
    /// sequence numbers, have valid IP and TCP checksums, and keep FIN and PSH on the last
    /// segment only and CWR on the first only.
    #[test]
    fn a_super_frame_becomes_valid_segments() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 13 + 5) as u8).collect();
        for v6 in [false, true] {
            for mtu in [1500usize, 9000, 576] {
                let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
                let b = if v6 {
                    b.ipv6([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], [0xfe; 16], 64)
                } else {
                    b.ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
                };
                let b = b.tcp(5000, 80, 4_000_000_000, 64_000).ack(9).psh().fin().cwr();
                let mut big = Vec::new();
                b.write(&mut big, &data).unwrap();
                let (mut got, mut segs, mut scratch) = (Vec::new(), Vec::new(), Vec::new());
                assert!(segment_tcp(&big, mtu, &mut scratch, |s| segs.push(s.to_vec())));
                let mut next_seq = 4_000_000_000u32;
                for (i, s) in segs.iter().enumerate() {
                    assert!(s.len() - 14 <= mtu, "v6 {v6}, MTU {mtu}: segment {i} of {} B", s.len());
                    let p = SlicedPacket::from_ethernet(s).unwrap();
                    let Some(TransportSlice::Tcp(t)) = p.transport else { panic!("TCP") };
                    let h = t.to_header();
                    assert_eq!(h.sequence_number, next_seq);
                    let last = i + 1 == segs.len();
                    assert_eq!((h.fin, h.psh, h.cwr), (last, last, i == 0), "flags of segment {i}");
                    let want = match p.net.unwrap() {
                        NetSlice::Ipv4(ip) => {
                            let ih = ip.header().to_header();
                            assert_eq!(ih.header_checksum, ih.calc_header_checksum());
                            h.calc_checksum_ipv4(&ih, t.payload()).unwrap()
                        }
                        NetSlice::Ipv6(ip) => h.calc_checksum_ipv6(&ip.header().to_header(), t.payload()).unwrap(),
                    };
                    assert_eq!(h.checksum, want, "TCP checksum of segment {i}");
                    next_seq = next_seq.wrapping_add(t.payload().len() as u32);
                    got.extend_from_slice(t.payload());
                }
                assert_eq!(got, data, "v6 {v6}, MTU {mtu}");
                assert!(segs.len() >= data.len().div_ceil(mtu));
            }
        }
    }

    #[test]
    fn frames_that_fit_or_are_not_tcp_are_not_cut() {
        let mut f = Vec::new();
        PacketBuilder::ethernet2([2; 6], [3; 6])
            .ipv4([1; 4], [2; 4], 9)
            .tcp(1, 2, 3, 4)
            .write(&mut f, &[7; 1000])
            .unwrap();
        let mut scratch = Vec::new();
        assert!(!segment_tcp(&f, 1500, &mut scratch, |_| panic!("nothing to cut")));
        let mut u = Vec::new();
        PacketBuilder::ethernet2([2; 6], [3; 6]).ipv4([1; 4], [2; 4], 9).udp(1, 2).write(&mut u, &[7; 4000]).unwrap();
        assert!(!segment_tcp(&u, 1500, &mut scratch, |_| panic!("UDP is not cut")));
        assert!(!segment_tcp(&f[..30], 1500, &mut scratch, |_| panic!("truncated")));
    }
}
