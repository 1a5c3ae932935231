//! Fuzzes `npqos live`'s receive path on arbitrary frames: the checksum completion the receive
//! ring applies, the TCP super-frame segmentation, and the pipeline (classification by the
//! frame's headers and DSCP, `live.non_ip`, dqs with its frames, the shaper with per-flow,
//! per-class and per-subscriber buckets, DRR) on a simulated clock. Any input must
//! be forwarded, dropped with a reason or queued, never panic, and every frame accounted
//! (frames in = out + dropped + queued) after every step.
#![no_main]

use libfuzzer_sys::fuzz_target;
use npqos_core::Instant;
use npqos_sim::live::{csum::complete_checksum, gso::segment_tcp, spec, Forwarder};

fuzz_target!(|data: &[u8]| {
    let Some((&cfg, rest)) = data.split_first() else { return };
    let Some((&cfg2, mut rest)) = rest.split_first() else { return };
    let conformance = if cfg & 1 == 0 { "send-then-pay" } else { "wait-for-tokens" };
    let shared = if cfg & 2 == 0 { "drop" } else { "shared" };
    let mtu = [576usize, 1500, 9000][(cfg as usize >> 2) % 3];
    // The second byte: which non-IP frames pass, and how the flows are shaped (one rate; the
    // services with DSCP, prefixes and a subscriber rate; a class rate and a per-destination
    // rate; one rate in wire terms).
    let non_ip = ["\"pass\"", "[\"arp\", \"llc\"]", "\"drop\""][cfg2 as usize % 3];
    let (rate, services) = match (cfg2 as usize / 3) % 4 {
        0 => ("flow_rate = \"10Mbps\"\n", ""),
        1 => (
            "",
            "[[services]]\nname = \"ef\"\ndscp = [\"ef\"]\nrate = \"1Mbps\"\n\
             [[services]]\nname = \"net\"\nsrc_prefixes = [\"10.0.0.0/8\", \"2001:db8::/32\"]\nrate = \"5Mbps\"\nrate_per = \"src\"\n",
        ),
        2 => (
            "",
            "[[services]]\nname = \"udp\"\nprotocols = [\"udp\"]\nrate = \"2Mbps\"\nrate_per = \"class\"\n\
             [[services]]\nname = \"rest\"\nrate = \"10Mbps\"\nrate_per = \"dst\"\n",
        ),
        _ => ("flow_rate = \"10Mbps\"\noverhead = 24\nmpu = \"64B\"\n", ""),
    };
    let text = format!(
        "[live]\ninput = \"in0\"\noutput = \"out0\"\nnon_ip = {non_ip}\n[shaper]\n{rate}conformance = \"{conformance}\"\n\
         [table]\nqueues = 8\nblocks = 512\non_exhausted = \"{shared}\"\nqueue_limit = \"4KiB\"\n[stats]\nflows = 16\n{services}"
    );
    let root: toml::Table = toml::from_str(&text).expect("a valid file");
    let sp = spec::read(&root, "fuzz.toml").expect("a valid spec");
    let mut fw = Forwarder::new(&sp, mtu as u32 + 18).expect("a forwarder");
    let (mut now, mut scratch, mut frame) = (1_000u64, Vec::new(), Vec::new());
    // Each step: a 2-byte header (length of the frame, 0-2047 B; the top bits: time to advance
    // and how much room the transmit side has), then the frame's bytes.
    while rest.len() >= 2 {
        let h = u16::from_le_bytes([rest[0], rest[1]]);
        let len = (h & 0x7ff) as usize;
        rest = &rest[2..];
        let take = len.min(rest.len());
        frame.clear();
        frame.extend_from_slice(&rest[..take]);
        rest = &rest[take..];
        now += ((h >> 11) as u64) * 37_000;
        let t = Instant::from_nanos(now);
        complete_checksum(&mut frame);
        if frame.len() > mtu + 18 {
            let cut = segment_tcp(&frame, mtu, &mut scratch, |seg| {
                fw.receive(seg, t);
            });
            if !cut {
                fw.receive(&frame, t);
            }
        } else {
            fw.receive(&frame, t);
        }
        if fw.next_wakeup().is_some_and(|w| w <= t) {
            fw.wake(t).expect("a wake-up in time order");
        }
        let room = (h >> 13) as usize * 3;
        fw.transmit(t, room, |f| assert!(f.len() <= mtu + 18, "a frame larger than a slot")).expect("transmit");
        let tot = fw.totals();
        let dropped: u64 = tot.drops.iter().sum();
        assert_eq!(tot.frames_in, tot.frames_out + dropped + fw.queued(), "every frame accounted");
    }
    // The end: time runs on to each wake-up the shaper asks for until every queue is empty
    // (the frames wait for their tokens, none is left behind).
    for _ in 0..100_000 {
        if fw.queued() == 0 {
            break;
        }
        now = fw.next_wakeup().map_or(now, |w| w.as_nanos().max(now));
        let t = Instant::from_nanos(now);
        fw.wake(t).expect("a wake-up in time order");
        fw.transmit(t, usize::MAX, |f| assert!(f.len() <= mtu + 18, "a frame larger than a slot")).expect("transmit");
        now += 1;
    }
    let tot = fw.totals();
    let dropped: u64 = tot.drops.iter().sum();
    assert_eq!(tot.frames_in, tot.frames_out + dropped, "drained: nothing is left queued");
});
