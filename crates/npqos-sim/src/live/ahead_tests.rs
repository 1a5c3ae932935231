//! [`Forwarder::look_ahead`] is a hint: a forwarder given the next two frames before each one
//! (as `npqos live`'s worker does from a ring block) forwards, drops and counts exactly what
//! one given the frames alone does, and what it read of one frame is never used for another.

use super::*;

/// 64 frames of a block laid out one after another, as in a ring block: UDP and TCP frames of
/// 40 flows (IPv4, IPv6, one VLAN-tagged), some ARP frames (no IP: not read ahead) and some
/// IPv4 fragments (read by the full parse).
fn block(b: u32) -> (Vec<u8>, Vec<(usize, usize)>) {
    let (mut bytes, mut at) = (Vec::new(), Vec::new());
    for i in 0..64u32 {
        let f = (b * 7 + i * 13) % 40;
        let eth = || etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let data = [i as u8; 200];
        let mut v = Vec::new();
        match f % 5 {
            0 => eth()
                .ipv6([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], [0xfe; 16], 64)
                .tcp(f as u16, 80, i, 1000)
                .write(&mut v, &data)
                .unwrap(),
            1 => eth()
                .single_vlan(5.try_into().unwrap())
                .ipv4([198, 18, 0, 1], [198, 19, 0, f as u8], 64)
                .udp(5000, 6000)
                .write(&mut v, &data)
                .unwrap(),
            _ => eth().ipv4([198, 18, 0, 1], [198, 19, 0, f as u8], 64).udp(5000, 6000).write(&mut v, &data).unwrap(),
        }
        if i % 11 == 0 {
            // An ARP request's Ethertype and bytes.
            v.truncate(42);
            v[12..14].copy_from_slice(&[0x08, 0x06]);
        } else if i % 17 == 0 {
            v[14 + 6] = 0x20; // more fragments
        }
        at.push((bytes.len(), v.len()));
        bytes.extend_from_slice(&v);
        bytes.extend_from_slice(&[0; 22]); // the next frame's ring header
    }
    (bytes, at)
}

fn forwarder() -> Forwarder {
    let text = "[live]\ninput = \"in0\"\noutput = \"out0\"\nnon_ip = \"pass\"\n\
                [shaper]\nflow_rate = \"2Mbps\"\n[table]\nqueues = 16\nqueue_limit = \"3KiB\"\n";
    let root: toml::Table = toml::from_str(text).unwrap();
    Forwarder::new(&spec::read(&root, "test.toml").unwrap_or_else(|p| panic!("{p}")), 9000).unwrap()
}

#[test]
fn reading_ahead_changes_nothing() {
    let (mut plain, mut ahead) = (forwarder(), forwarder());
    let (mut out_plain, mut out_ahead) = (Vec::new(), Vec::new());
    let mut t = 1_000u64;
    for b in 0..300 {
        let (bytes, at) = block(b);
        let frame = |i: usize| at.get(i).map_or(&[][..], |&(o, l)| &bytes[o..o + l]);
        let mut carry = [None, None];
        for i in 0..at.len() {
            let now = Instant::from_nanos(t);
            let a = plain.receive(frame(i), now);
            let mine = carry[0];
            carry = ahead.look_ahead(frame(i + 1), frame(i + 2), carry[1]);
            // What was read of the frame after is not this frame's: ignored.
            assert_eq!(ahead.receive_ahead(frame(i), now, carry[0].filter(|_| i % 9 == 0).or(mine)), a);
            t += 20_000;
        }
        let now = Instant::from_nanos(t);
        for (fw, out) in [(&mut plain, &mut out_plain), (&mut ahead, &mut out_ahead)] {
            fw.wake(now).unwrap();
            fw.transmit(now, 40, |f| out.push(f.to_vec())).unwrap();
        }
    }
    assert!(out_plain.len() > 1000, "{} frames forwarded", out_plain.len());
    assert!(plain.totals().frames_in > plain.totals().frames_out, "some frames dropped");
    assert_eq!(out_plain, out_ahead);
    assert_eq!(plain.totals(), ahead.totals());
    assert_eq!(plain.flows(), ahead.flows());
    assert_eq!(plain.check(), Ok(()));
    assert_eq!(ahead.check(), Ok(()));
}
