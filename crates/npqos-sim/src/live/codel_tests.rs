//! CoDel in npqos live's forwarder on a simulated clock (docs/codel.md): a flow offered twice
//! its shaped rate builds a standing queue that CoDel drops from, or, for ECN-capable frames
//! with `ecn = true`, marks: the marks are on the frames handed to the ring (CE in the IPv4
//! header, its checksum right), as many as the results count.

use super::*;
use crate::results::RunResult;

/// A UDP frame of one flow with sequence number `seq` and the IPv4 TOS byte `tos`.
fn frame(seq: u32, tos: u8) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .udp(5000, 6000);
    let mut data = vec![0u8; 1000];
    data[..4].copy_from_slice(&seq.to_be_bytes());
    let mut out = Vec::new();
    b.write(&mut out, &data).unwrap();
    // The TOS byte, and the header checksum again.
    out[15] = tos;
    out[24..26].fill(0);
    let sum = header_sum(&out[14..34]);
    out[24..26].copy_from_slice(&(!sum).to_be_bytes());
    out
}

/// The ones'-complement sum of an IPv4 header (0xffff when its checksum is right).
fn header_sum(h: &[u8]) -> u16 {
    let mut s: u32 = h.chunks(2).map(|w| u16::from_be_bytes([w[0], w[1]]) as u32).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// One flow of 1,042 B frames with TOS `tos` at 20 Mbps for 3 s into a forwarder shaping it to
/// 10 Mbps with CoDel (`ecn` on or off): the frames sent with CE, whether every sent header's
/// checksum is right, and the run's scalars.
fn run(tos: u8, ecn: bool) -> (u64, u64, bool, RunResult) {
    let text = format!(
        "[live]\ninput = \"in0\"\noutput = \"out0\"\n[shaper]\nflow_rate = \"10Mbps\"\naqm = \"codel\"\necn = {ecn}\n\
         [table]\nqueue_limit = \"4MiB\"\n"
    );
    let sp = spec::read(&toml::from_str(&text).unwrap(), "t.toml").unwrap_or_else(|p| panic!("{p}"));
    let mut fw = Forwarder::new(&sp, 2048).unwrap();
    let gap = 1042 * 8 * 1_000_000_000 / 20_000_000;
    let (mut ce, mut sent, mut sums_right) = (0u64, 0u64, true);
    let mut out = |fw: &mut Forwarder, now: Instant| {
        fw.transmit(now, usize::MAX, |f| {
            sent += 1;
            ce += (f[15] & 3 == 3) as u64;
            sums_right &= header_sum(&f[14..34]) == 0xffff;
        })
        .unwrap();
    };
    let mut t = 1_000u64;
    for seq in 0..(3_000_000_000 / gap) as u32 {
        while let Some(w) = fw.next_wakeup().filter(|w| w.as_nanos() < t) {
            fw.wake(w).unwrap();
            out(&mut fw, w);
        }
        let now = Instant::from_nanos(t);
        fw.receive(&frame(seq, tos), now);
        out(&mut fw, now);
        t += gap;
    }
    let r = fw.result(t, true, "duration", &[]);
    (ce, sent, sums_right, r)
}

#[test]
fn ecn_capable_frames_are_marked_on_the_wire_and_others_dropped() {
    // ECT(0) with ecn on: marked, none dropped by CoDel.
    let (ce, sent, sums_right, r) = run(0x02, true);
    let marked = r.get("ecn_marked").unwrap();
    println!(
        "ECT(0), ecn on: {sent} sent, {ce} with CE, ecn_marked {marked}, dropped_codel {:?}",
        r.get("dropped_codel")
    );
    assert!(ce > 10, "CoDel marked frames: {ce}");
    assert_eq!(ce as f64, marked, "every mark is on the wire and counted");
    assert!(sums_right, "every IPv4 header's checksum still right");
    assert_eq!(r.get("dropped_codel"), Some(0.0));
    // Not-ECT with ecn on, and ECT(0) with ecn off: dropped, none marked.
    for (tos, ecn) in [(0x00, true), (0x02, false)] {
        let (ce, _, _, r) = run(tos, ecn);
        println!("TOS {tos:#x}, ecn {ecn}: dropped_codel {:?}, {ce} with CE", r.get("dropped_codel"));
        assert_eq!((ce, r.get("ecn_marked")), (0, Some(0.0)));
        assert!(r.get("dropped_codel").unwrap() > 10.0);
    }
}
