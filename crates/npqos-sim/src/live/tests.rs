//! The forwarder on a simulated clock: what `npqos live` does on real frames, without the
//! rings. The namespace test (npqos-cli tests/live.rs) runs the same code on veth pairs.

use super::*;
use crate::scenario::stats;
use npqos_core::{Duration, Rate};

fn spec(text: &str) -> LiveSpec {
    let root: toml::Table = toml::from_str(text).unwrap();
    spec::read(&root, "test.toml").unwrap_or_else(|p| panic!("{p}"))
}

const MINIMAL: &str =
    "[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"2s\"\n[shaper]\nflow_rate = \"10Mbps\"\n";

/// A UDP frame of flow `f` carrying sequence number `seq`, `payload` bytes of UDP payload.
fn frame(f: u16, seq: u32, payload: usize) -> Vec<u8> {
    frame_from(1, f, seq, payload)
}

/// [`frame`] from source address 198.18.0.`src`.
fn frame_from(src: u8, f: u16, seq: u32, payload: usize) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([198, 18, 0, src], [198, 18, 0, 2], 64)
        .udp(5000 + f, 6000);
    let mut data = vec![0u8; payload];
    data[..4].copy_from_slice(&seq.to_be_bytes());
    let mut out = Vec::with_capacity(b.size(payload));
    b.write(&mut out, &data).unwrap();
    out
}

fn seq_and_flow(frame: &[u8]) -> (u16, u32) {
    let f = u16::from_be_bytes([frame[34], frame[35]]) - 5000;
    let s = u32::from_be_bytes(frame[42..46].try_into().unwrap());
    (f, s)
}

/// Drives `fw` with `flows` flows each offered `offered_bps` of `payload`-byte datagrams for
/// `secs` seconds, on an ideal output (room for every eligible frame), waking the shaper at
/// exactly `next_wakeup()`. Returns the frames sent per flow, and the received sequence
/// numbers per flow in output order.
fn drive(fw: &mut Forwarder, flows: u16, offered_bps: f64, payload: usize, secs: f64) -> (Vec<u32>, Vec<Vec<u32>>) {
    drive_from(fw, flows, offered_bps, payload, secs, |_| 1)
}

/// [`drive`] with flow `f` from source address 198.18.0.`src_of(f)`.
fn drive_from(
    fw: &mut Forwarder,
    flows: u16,
    offered_bps: f64,
    payload: usize,
    secs: f64,
    src_of: impl Fn(u16) -> u8,
) -> (Vec<u32>, Vec<Vec<u32>>) {
    let len = frame(0, 0, payload).len() as f64;
    let gap = (len * 8e9 / offered_bps) as u64;
    let end = (secs * 1e9) as u64;
    let mut sent = vec![0u32; flows as usize];
    let mut got = vec![Vec::new(); flows as usize];
    // Flows start staggered by gap / flows.
    let mut next_arrival: Vec<u64> = (0..flows as u64).map(|i| 1_000 + i * gap / flows as u64).collect();
    let emit = |now: Instant, fw: &mut Forwarder, got: &mut Vec<Vec<u32>>| {
        fw.transmit(now, usize::MAX, |fr| {
            let (f, s) = seq_and_flow(fr);
            got[f as usize].push(s);
        })
        .unwrap();
    };
    loop {
        let (i, &ta) = next_arrival.iter().enumerate().min_by_key(|(_, &t)| t).unwrap();
        let tw = fw.next_wakeup().map_or(u64::MAX, |w| w.as_nanos());
        if ta.min(tw) > end + 2_000_000_000 {
            break;
        }
        if tw < ta {
            let now = Instant::from_nanos(tw);
            fw.wake(now).unwrap();
            emit(now, fw, &mut got);
            continue;
        }
        let now = Instant::from_nanos(ta);
        fw.wake(now).unwrap();
        if ta <= end {
            fw.receive(&frame_from(src_of(i as u16), i as u16, sent[i], payload), now);
            sent[i] += 1;
            next_arrival[i] += gap;
        } else {
            next_arrival[i] = u64::MAX;
        }
        emit(now, fw, &mut got);
    }
    (sent, got)
}

fn check_shaped(conformance: &str) {
    let sp = spec(&format!(
        "{MINIMAL}conformance = \"{conformance}\"\ncap = \"3000B\"\nalpha = \"1500B\"\n[table]\nblocks = 16384\nqueue_limit = \"32KiB\"\n"
    ));
    let mut fw = Forwarder::new(&sp, 9000).unwrap();
    let (sent, got) = drive(&mut fw, 8, 20e6, 1000, 2.0);
    let t = fw.totals();
    let dropped: u64 = t.drops.iter().sum();
    assert_eq!(t.frames_in, sent.iter().map(|&s| s as u64).sum::<u64>());
    assert_eq!(t.frames_in, t.frames_out + dropped + fw.queued(), "conservation");
    assert!(t.dropped(Reason::QueueFull) > 0, "offered twice the rate, the queues fill");
    assert_eq!(t.dropped(Reason::BufferFull), 0);
    for (f, g) in got.iter().enumerate() {
        assert!(g.windows(2).all(|w| w[0] < w[1]), "flow {f} reordered");
        let st = fw.flows().into_iter().find(|s| s.key.src_port == 5000 + f as u16).unwrap();
        let c = &st.counts;
        assert_eq!(c.offered_packets, sent[f] as u64);
        assert_eq!(c.sent_packets + st.dropped(), c.offered_packets, "flow {f} accounted (drained)");
        assert_eq!(c.backlog_packets(), 0);
        // The token bucket's bound: over any interval a flow sends at most the cap, plus (send-
        // then-pay) the one frame that overdraws, beyond rate x time; and a backlogged flow no
        // less than rate x time less the cap. The flow keeps its bucket when it loses its
        // physical queue and is given one again, so the bound holds across activations.
        let span = (st.last_out_ns - st.first_out_ns) as f64 / 1e9;
        let after_first = (c.sent_bytes - 1042) as f64;
        let ideal = 10e6 / 8.0 * span;
        assert!(st.activations < 20, "flow {f}: {} activations", st.activations);
        assert!(
            after_first <= ideal + 3000.0 + 1042.0,
            "{conformance}: flow {f} sent {after_first} B, rate allows {ideal}"
        );
        assert!(after_first >= ideal - 3000.0, "{conformance}: flow {f} sent {after_first} B, rate allows {ideal}");
    }
    let r = fw.result(3_000_000_000, true, "duration", &[]);
    assert_eq!(r.get("backlogged_flows"), Some(8.0));
    assert!(r.get("backlogged_rate_error_max").unwrap() < 0.5, "within 0.5% over 2 s");
    assert!(r.get("reschedules").unwrap() > 1000.0);
    assert!(r.get("heap_max").unwrap() >= 1.0);
    assert_eq!(r.get("bucket_evictions"), Some(0.0));
    fw.shaper().check_invariants().unwrap();
}

#[test]
fn a_flow_that_comes_back_keeps_its_bucket() {
    // Two physical queues, 10 Mbps, cap 3000 B, alpha 1500 B, frames of 1042 B. Flow 0 spends
    // its bucket and empties its queue; flow 1 takes the queue flow 0 left; flow 0 comes back
    // 20 us later, long before its bucket could refill (2.4 ms), and gets the other queue.
    let sp = spec(&format!("{MINIMAL}cap = \"3000B\"\nalpha = \"1500B\"\n[table]\nqueues = 2\n"));
    let mut fw = Forwarder::new(&sp, 9000).unwrap();
    let t = |us: u64| Instant::from_nanos(1_000 + us * 1_000);
    for s in 0..3 {
        fw.receive(&frame(0, s, 1000), t(0));
    }
    assert_eq!(fw.transmit(t(0), usize::MAX, |_| {}).unwrap(), 3, "two frames and the one that overdraws");
    for s in 0..5 {
        fw.receive(&frame(1, s, 1000), t(10));
    }
    // Flow 1 starts with a full bucket of its own, not flow 0's debt.
    assert_eq!(fw.transmit(t(10), usize::MAX, |_| {}).unwrap(), 3);
    for s in 3..6 {
        fw.receive(&frame(0, s, 1000), t(20));
    }
    // Flow 0 still owes: with a new bucket it would send three frames here.
    assert_eq!(fw.transmit(t(20), usize::MAX, |_| {}).unwrap(), 0);
    assert_eq!(fw.flows()[0].activations, 2);
    // It goes again when its own bucket holds alpha: 1500 B plus the 126 B it owes, at 10 Mbps
    // (800 ns per byte) after t(0), rounded up to the heap's 64 ns tick.
    let w = fw.next_wakeup().unwrap();
    let expect = t(0).as_nanos() + (1500 + 3 * 1042 - 3000) * 800;
    assert!((expect..expect + 64).contains(&w.as_nanos()), "{w:?}, expected {expect} ns");
    fw.wake(w).unwrap();
    let mut out = Vec::new();
    fw.transmit(w, usize::MAX, |fr| out.push(seq_and_flow(fr))).unwrap();
    assert_eq!(out, vec![(0, 3), (0, 4)], "alpha's worth and the frame that overdraws");
    let r = fw.result(3_000_000, true, "test", &[]);
    assert_eq!(r.get("parked_buckets_max"), Some(1.0));
    assert_eq!(r.get("bucket_evictions"), Some(0.0));
    fw.shaper().check_invariants().unwrap();
}

#[test]
fn a_flow_that_keeps_coming_back_leaves_no_trail_of_parked_entries() {
    // One flow, one 142 B frame every 400 us (2.8 Mbps, under its 10 Mbps): each frame empties
    // the queue, which dqs takes back, and the next one brings the flow back to its own bucket
    // (parked, not full for 114 us). 10,000 rounds take that one bucket back every time.
    let mut fw = Forwarder::new(&spec(MINIMAL), 9000).unwrap();
    for i in 0..10_000u32 {
        let now = Instant::from_nanos(1_000 + i as u64 * 400_000);
        fw.receive(&frame(0, i, 100), now);
        assert_eq!(fw.transmit(now, usize::MAX, |_| {}).unwrap(), 1);
    }
    assert_eq!(fw.flows()[0].activations, 10_000);
    let c = fw.buckets().counters();
    assert_eq!((c.fresh, c.parked, c.parked_max), (1, 1, 1), "one bucket, its own every time");
    fw.buckets().check().unwrap();
}

#[test]
fn idle_flows_beyond_the_spare_buckets_give_up_the_nearest_to_full() {
    // One physical queue, so two buckets. Three flows in turn each spend theirs and go idle:
    // the third finds both buckets filling and takes the one nearest to full (the first
    // flow's), which is counted.
    let sp = spec(&format!("{MINIMAL}cap = \"3000B\"\nalpha = \"1500B\"\n[table]\nqueues = 1\n"));
    let mut fw = Forwarder::new(&sp, 9000).unwrap();
    let mut now = Instant::from_nanos(1_000);
    for f in 0..3u16 {
        for s in 0..3 {
            fw.receive(&frame(f, s, 1000), now);
        }
        // Each flow's three frames leave at once (a full bucket, or for the third flow the
        // first flow's, which has refilled to alpha and more by then), then it goes idle.
        while fw.queued() > 0 {
            let w = fw.next_wakeup().filter(|&w| w > now).unwrap_or(now);
            fw.wake(w).unwrap();
            fw.transmit(w, usize::MAX, |_| {}).unwrap();
            now = w;
        }
        now = Instant::from_nanos(now.as_nanos() + 1_000_000);
    }
    assert_eq!(fw.buckets().counters().evicted, 1);
    assert_eq!(fw.buckets().counters().parked_max, 2);
    fw.buckets().check().unwrap();
    assert_eq!(fw.totals().frames_out, 9);
    fw.shaper().check_invariants().unwrap();
}

#[test]
fn send_then_pay_holds_every_flow_to_its_rate() {
    check_shaped("send-then-pay");
}

#[test]
fn wait_for_tokens_holds_every_flow_to_its_rate() {
    check_shaped("wait-for-tokens");
}

/// `afm_slot_flows_max` is the most active flows one AFM slot held: all 8 backlogged flows in
/// the one slot of a table with `slots = 1`, at most a few of them with 4096 slots.
#[test]
fn afm_slot_flows_max_is_the_largest_tree_a_flow_is_searched_in() {
    for (slots, lo, hi) in [(1, 8.0, 8.0), (4096, 1.0, 3.0)] {
        let sp = spec(&format!("{MINIMAL}[table]\nslots = {slots}\nblocks = 16384\nqueue_limit = \"32KiB\"\n"));
        let mut fw = Forwarder::new(&sp, 9000).unwrap();
        drive(&mut fw, 8, 20e6, 1000, 0.5);
        let got = fw.result(1_000_000_000, true, "duration", &[]).get("afm_slot_flows_max").unwrap();
        assert!((lo..=hi).contains(&got), "slots = {slots}: {got} flows in one slot");
    }
}

#[test]
fn flows_below_the_rate_pass_unshaped_and_uncounted_as_backlogged() {
    let mut fw = Forwarder::new(&spec(MINIMAL), 9000).unwrap();
    let (sent, got) = drive(&mut fw, 4, 5e6, 500, 1.0);
    let t = fw.totals();
    assert_eq!(t.frames_out, t.frames_in);
    assert_eq!(got.iter().map(Vec::len).sum::<usize>() as u32, sent.iter().sum::<u32>());
    assert_eq!(fw.backlogged().len(), 0);
}

#[test]
fn every_drop_has_its_reason() {
    // Two physical queues: the third flow finds none.
    let mut fw = Forwarder::new(&spec(&format!("{MINIMAL}[table]\nqueues = 2\n")), 1200).unwrap();
    let now = Instant::from_nanos(1);
    assert_eq!(fw.receive(&frame(0, 0, 100), now), Arrival::Queued);
    assert_eq!(fw.receive(&frame(1, 0, 100), now), Arrival::Queued);
    assert_eq!(fw.receive(&frame(2, 0, 100), now), Arrival::Dropped(Reason::NoQueue));
    assert_eq!(fw.receive(&frame(0, 1, 1400), now), Arrival::Dropped(Reason::Oversize));
    // A non-IP frame (ARP) is its own flow.
    let mut arp = vec![0xffu8; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[0u8; 28]);
    assert_eq!(fw.receive(&arp, now), Arrival::Dropped(Reason::NoQueue));
    assert!(fw.flows().iter().any(|f| f.non_ip && f.counts.dropped[Reason::NoQueue.index()] == 1));
    assert_eq!(fw.transmit(now, 1, |_| {}).unwrap(), 1);
    // The frame still queued is the backlog (tc's word), counted as neither sent nor dropped.
    let t = fw.totals();
    assert_eq!(fw.queued(), 1);
    assert_eq!(t.frames_in, t.frames_out + t.drops.iter().sum::<u64>() + 1);
    let r = fw.result(1, true, "duration", &[]);
    assert_eq!(r.classes[0].counts.backlog_packets, 1);
    fw.check().unwrap();

    // The bucket's cap is 1,000 B raised to alpha plus 1 ms at 10 Mbps (`wake_tolerance`):
    // 1,750 B. A frame of 1,742 B fits it, one of 1,842 B never will.
    let mut fw = Forwarder::new(
        &spec(&format!("{MINIMAL}conformance = \"wait-for-tokens\"\ncap = \"1000B\"\nalpha = \"500B\"\n")),
        9000,
    )
    .unwrap();
    assert_eq!(fw.receive(&frame(0, 0, 1700), now), Arrival::Queued);
    assert_eq!(fw.receive(&frame(0, 1, 1800), now), Arrival::Dropped(Reason::AboveCap));
}

#[test]
fn the_shaper_asks_to_be_woken_and_the_wake_sends() {
    // One flow, a full 3000 B bucket: two 1042 B frames go at once, the third throttles the
    // queue (send-then-pay) and leaves; the rest wait for wake().
    // (No wake tolerance: the cap is 3000 B, not alpha + 1 ms at the rate.)
    let mut fw = Forwarder::new(&spec(&format!("{MINIMAL}cap = \"3000B\"\nwake_tolerance = \"0s\"\n")), 9000).unwrap();
    let t0 = Instant::from_nanos(1_000);
    for s in 0..5 {
        fw.receive(&frame(0, s, 1000), t0);
    }
    assert_eq!(fw.transmit(t0, usize::MAX, |_| {}).unwrap(), 3);
    let w = fw.next_wakeup().expect("throttled");
    // alpha (3000 B) plus the debt of 3 x 1042 - 3000 B, at 10 Mbps.
    let expect = (3000 + 3 * 1042 - 3000) as u64 * 800;
    // (Rounded up to the heap's 64 ns tick.)
    assert!((expect..expect + 64).contains(&(w.as_nanos() - t0.as_nanos())), "{w:?}");
    assert_eq!(fw.transmit(t0, usize::MAX, |_| {}).unwrap(), 0, "nothing before the wake-up");
    fw.wake(w).unwrap();
    assert_eq!(fw.transmit(w, usize::MAX, |_| {}).unwrap(), 2);
    assert_eq!(fw.queued(), 0);
}

#[test]
fn the_config_reader_reports_every_problem_with_its_key() {
    let root: toml::Table = toml::from_str(
        "[live]\ninput = \"in0\"\noutput = \"in0\"\nduration = \"soon\"\n[shaper]\nalpha = \"5000B\"\ncap = \"3000B\"\nconformance = \"later\"\n[table]\nqueues = 0\n[stats]\nflows = -1\nheavy = 3\n[extra]\nx = 1\n",
    )
    .unwrap();
    let p = spec::read(&root, "bad.toml").unwrap_err();
    let text = p.to_string();
    for key in [
        "live.output",
        "live.duration",
        "shaper.flow_rate",
        "shaper.alpha",
        "shaper.conformance",
        "table.queues",
        "stats.flows",
        "stats.heavy",
        "`extra`",
    ] {
        assert!(text.contains(key), "{key} missing from:\n{text}");
    }
    let root: toml::Table = toml::from_str("[shaper]\nflow_rate = \"1Mbps\"\n").unwrap();
    let text = spec::read(&root, "x.toml").unwrap_err().to_string();
    assert!(text.contains("live.input") && text.contains("live.output"), "{text}");
    // The minimal file resolves to every default, and reads back the same.
    let sp = spec(MINIMAL);
    assert_eq!(sp.duration, Some(Duration::from_secs(2)));
    assert_eq!(spec::read(&sp.to_toml(), "resolved").unwrap(), sp);
}

/// `live.threads` (docs/live.md, "Every core") and the CoDel keys of `[shaper]`: "auto" or 1 to
/// 64 threads, one with processors or captures; the problems name their keys; the resolved file
/// reads back the same; every thread's share of the flow rows is rounded up.
#[test]
fn threads_and_codel_keys_are_read_and_checked() {
    let bad = |extra: &str, shaper: &str| {
        let text =
            format!("[live]\ninput = \"in0\"\noutput = \"out0\"\n{extra}\n[shaper]\nflow_rate = \"1Mbps\"\n{shaper}\n");
        match spec::read(&toml::from_str(&text).unwrap(), "t.toml") {
            Ok(_) => String::new(),
            Err(p) => p.to_string(),
        }
    };
    for v in ["0", "65", "\"many\"", "1.5"] {
        let text = bad(&format!("threads = {v}"), "");
        assert!(text.contains("live.threads") && text.contains("\"auto\" or an integer from 1 to 64"), "{v}: {text}");
    }
    let text = bad("threads = 2\n[processing]\npolicy = \"everest\"\nprocessors = 2", "");
    assert!(text.contains("live.threads") && text.contains("[processing]"), "{text}");
    let text = bad("threads = 2\n[output]\npcap = [\"ingress\"]", "");
    assert!(text.contains("live.threads") && text.contains("[output] pcap"), "{text}");
    let text = bad("", "codel_target = \"2ms\"");
    assert!(text.contains("shaper.codel_target") && text.contains("aqm = \"codel\""), "{text}");
    let text = bad("", "aqm = \"codel\"\ncodel_target = \"1s\"");
    assert!(text.contains("shaper.codel_target") && text.contains("less than codel_interval"), "{text}");
    assert_eq!(bad("threads = \"auto\"", "aqm = \"codel\"\necn = true"), "");
    let sp = spec(&format!("{MINIMAL}aqm = \"codel\"\necn = true\n[stats]\nflows = 5\n"));
    assert_eq!((sp.threads, sp.aqm.map(|a| a.ecn)), (None, Some(true)));
    assert_eq!(spec::read(&sp.to_toml(), "resolved").unwrap(), sp);
    let two = spec("[live]\ninput = \"in0\"\noutput = \"out0\"\nthreads = 2\n[shaper]\nflow_rate = \"1Mbps\"\n[stats]\nflows = 5\n");
    assert_eq!((two.forwarding_threads(), two.for_thread(2).stats.flows, two.for_thread(3).stats.flows), (2, 3, 2));
    // The flow table's queues and buffer are the forwarder's, shared among the threads too.
    let (one, half) = (&two.table, &two.for_thread(2).table);
    assert_eq!((half.queues, half.blocks), (one.queues.div_ceil(2), one.blocks.div_ceil(2)));
    assert_eq!((half.slots, half.queue_limit, half.block_size), (one.slots, one.queue_limit, one.block_size));
    assert_eq!(spec::read(&two.to_toml(), "resolved").unwrap(), two);
}

/// `live.io` (docs/live.md, "AF_XDP"): packet rings by default, AF_XDP with `rx_wait = "auto"`
/// unless set (a duration, 0 allowed: take each frame as it comes); `rx_wait` with packet rings,
/// a word other than "auto" and an unknown `io` are refused by key; the resolved file reads
/// back the same.
#[test]
fn the_io_keys_are_read_and_checked() {
    let read = |extra: &str| {
        let text = format!("[live]\ninput = \"in0\"\noutput = \"out0\"\n{extra}\n[shaper]\nflow_rate = \"1Mbps\"\n");
        spec::read(&toml::from_str(&text).unwrap(), "t.toml")
    };
    assert_eq!(read("").unwrap().io, spec::Io::Ring);
    for (extra, want) in [
        ("io = \"xdp\"", spec::RxWait::Auto),
        ("io = \"xdp\"\nrx_wait = \"auto\"", spec::RxWait::Auto),
        ("io = \"xdp\"\nrx_wait = \"0s\"", spec::RxWait::Fixed(npqos_core::Duration::ZERO)),
        ("io = \"xdp\"\nrx_wait = \"200us\"", spec::RxWait::Fixed(npqos_core::Duration::from_micros(200))),
    ] {
        let x = read(extra).unwrap();
        assert_eq!(x.io, spec::Io::Xdp { rx_wait: want }, "{extra}");
        assert_eq!(spec::read(&x.to_toml(), "resolved").unwrap(), x, "{extra}");
    }
    let text = read("rx_wait = \"200us\"").unwrap_err().to_string();
    assert!(text.contains("live.rx_wait") && text.contains("io = \"ring\""), "{text}");
    let text = read("io = \"xdp\"\nrx_wait = \"soon\"").unwrap_err().to_string();
    assert!(text.contains("live.rx_wait"), "{text}");
    let text = read("io = \"dpdk\"").unwrap_err().to_string();
    assert!(text.contains("live.io") && text.contains("\"ring\", \"xdp\""), "{text}");
}

/// live's AFM slots follow its queues unless set (at most 2^20), where the dqs model and the
/// router keep the paper's 256; the resolved file says so and reads back the same.
#[test]
fn live_afm_slots_default_to_its_queues() {
    let table = |t: &str| spec(&format!("{MINIMAL}[table]\n{t}")).table;
    assert_eq!(spec(MINIMAL).table.slots, 65_536, "the default queues' count");
    assert_eq!(table("queues = 1000\n").slots, 1000);
    assert_eq!(table("queues = 4194304\n").slots, 1 << 20);
    assert_eq!(table("queues = 131072\nslots = 256\n").slots, 256, "set, it is kept");
    let sp = spec(&format!("{MINIMAL}[table]\nqueues = 5000\n"));
    assert!(sp.to_toml()["table"]["slots"].as_integer() == Some(5000), "written back");
    assert_eq!(spec::read(&sp.to_toml(), "resolved").unwrap(), sp);
    let root: toml::Table = toml::from_str("[table]\nqueues = 5000\n").unwrap();
    let dqs = crate::models::dqs::scenario::read(&root, std::path::Path::new("."), &mut Vec::new());
    assert_eq!(dqs.table.slots, 256, "the dqs model keeps the paper's default");
}

/// The way back's own shaping: a `[reverse]` table with the way in's keys under `reverse.`,
/// shaping by default once it is there; its problems name `reverse.` keys; the way back as a
/// spec of its own swaps the interfaces; the resolved file reads back the same.
#[test]
fn the_way_back_has_its_own_shaping() {
    let sp = spec(&format!("{MINIMAL}[reverse.shaper]\nflow_rate = \"5Mbps\"\n[reverse.table]\nqueues = 128\n"));
    let Reverse::Shape(d) = &sp.reverse else { panic!("not shaped: {:?}", sp.reverse) };
    assert_eq!((d.flow_rate, d.table.queues), (Rate::from_bits_per_sec(5_000_000), 128));
    let back = sp.reversed().expect("shaped");
    assert_eq!((back.input.as_str(), back.output.as_str()), ("out0", "in0"));
    assert_eq!((back.flow_rate, back.table.queues, back.reverse.clone()), (d.flow_rate, 128, Reverse::Off));
    assert!(back.table.store_payload, "the way back keeps its frames too");
    assert_eq!(spec::read(&sp.to_toml(), "resolved").unwrap(), sp);
    assert_eq!(spec(MINIMAL).reversed(), None);
    for (extra, key) in [
        ("[reverse.shaper]\nflow_rate = \"0Mbps\"\n", "reverse.shaper.flow_rate"),
        ("[reverse.table]\nqueues = 0\n", "reverse.shaper.flow_rate"),
        ("[reverse.table]\nqueues = 0\n", "reverse.table.queues"),
        ("[reverse.shaper]\nflow_rate = \"1Mbps\"\n[reverse.other]\nx = 1\n", "reverse.other"),
    ] {
        let root: toml::Table = toml::from_str(&format!("{MINIMAL}{extra}")).unwrap();
        let text = spec::read(&root, "t.toml").unwrap_err().to_string();
        assert!(text.contains(key), "{key} missing from:\n{text}");
    }
    let pass = MINIMAL.replace("duration = \"2s\"", "duration = \"2s\"\nreverse = \"pass\"");
    let root: toml::Table = toml::from_str(&format!("{pass}[reverse.shaper]\nflow_rate = \"1Mbps\"\n")).unwrap();
    let text = spec::read(&root, "t.toml").unwrap_err().to_string();
    assert!(text.contains("live.reverse"), "{text}");
    // The do-nothing baseline: mode = "pass" reads back, and refuses a shaped way back.
    let pass_mode = MINIMAL.replace("duration = \"2s\"", "duration = \"2s\"\nmode = \"pass\"");
    let sp = spec(&pass_mode);
    assert_eq!(sp.mode, Mode::Pass);
    assert_eq!(spec::read(&sp.to_toml(), "resolved").unwrap(), sp);
    let root: toml::Table = toml::from_str(&format!("{pass_mode}[reverse.shaper]\nflow_rate = \"1Mbps\"\n")).unwrap();
    let text = spec::read(&root, "t.toml").unwrap_err().to_string();
    assert!(text.contains("live.mode"), "{text}");
    let shape = MINIMAL.replace("duration = \"2s\"", "duration = \"2s\"\nreverse = \"shape\"");
    let root: toml::Table = toml::from_str(&shape).unwrap();
    let text = spec::read(&root, "t.toml").unwrap_err().to_string();
    assert!(text.contains("reverse.shaper.flow_rate"), "{text}");
}

#[test]
fn without_a_queue_limit_every_flow_still_gets_its_rate() {
    // The same offered load with no per-queue limit, so tail drop on the shared block buffer
    // decides which flow's frame gets freed blocks. While a flow's bucket lived with its
    // physical queue this locked flows out (more than 3x between flows); each flow holding its
    // own bucket, it does not (docs/live.md).
    let sp = spec(&format!("{MINIMAL}conformance = \"wait-for-tokens\"\n[table]\nblocks = 16384\n"));
    let mut fw = Forwarder::new(&sp, 9000).unwrap();
    drive(&mut fw, 8, 20e6, 1000, 2.0);
    assert!(fw.totals().dropped(Reason::BufferFull) > 0, "the shared buffer filled");
    let out: Vec<u64> = fw.flows().iter().map(|f| f.counts.sent_packets).collect();
    let (lo, hi) = (*out.iter().min().unwrap(), *out.iter().max().unwrap());
    assert!(hi - lo <= hi / 100, "frames out per flow {out:?}: expected within 1%");
}

/// The flow counters in the pipeline's vocabulary, with the memory bound of `[stats]`: the
/// first `flows` flows each a row, every later one in the row `other`; the rows and the one
/// class add up to the totals, overlimits and delays included.
#[test]
fn flow_rows_are_bounded_and_add_up() {
    let sp = spec(&format!(
        "{MINIMAL}cap = \"3000B\"\nalpha = \"1500B\"\n[table]\nqueue_limit = \"32KiB\"\n[stats]\nflows = 5\n"
    ));
    assert_eq!(sp.stats.flows, 5);
    let mut fw = Forwarder::new(&sp, 9000).unwrap();
    drive(&mut fw, 8, 20e6, 1000, 0.5);
    assert_eq!(fw.flows().len(), 5, "the table stops at its bound");
    let r = fw.result(1_000_000_000, true, "duration", &[]);
    let kinds: Vec<&str> = r.flows.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, ["exact", "exact", "exact", "exact", "exact", "other"]);
    let t = fw.totals();
    let sum = |f: &dyn Fn(&crate::results::CountRow) -> u64| r.flows.iter().map(|x| f(&x.counts)).sum::<u64>();
    assert_eq!(sum(&|c| c.offered_packets), t.frames_in);
    assert_eq!(sum(&|c| c.sent_packets), t.frames_out);
    assert_eq!(sum(&|c| c.dropped_packets), t.drops.iter().sum::<u64>());
    assert_eq!(sum(&|c| c.overlimits), t.overlimits, "no shared queue: every overlimit has its flow");
    assert!(t.overlimits > 0, "offered twice the rate");
    let class = &r.classes[0];
    assert_eq!(
        (class.class.as_str(), class.counts.offered_packets, class.counts.sent_packets),
        ("all", t.frames_in, t.frames_out)
    );
    // Delays: frames wait in their queue for their rate (32 KiB at 10 Mbps is 26 ms).
    assert!(class.delay_p99_ns > 1e6 && class.delay_p99_ns < 40e6, "p99 {} ns", class.delay_p99_ns);
    assert!(r.flows.iter().all(|f| f.counts.delay_max_ns < 40e6));
    // Every reason but CoDel's, which only `aqm = "codel"` can give.
    assert_eq!(r.drop_reasons.len(), Reason::ALL.len() - 1);
    assert!(!r.drop_reasons.iter().any(|d| d == "codel"));
    assert_eq!(r.get("frames_past_flow_table"), Some(r.flows[5].counts.offered_packets as f64));
}

/// A million flows through the forwarder: the flow counters keep their `[stats]` rows (4,096
/// and the row of the rest), the buckets stay within their pool, the per-queue arrival times
/// hold nothing once the frames are gone, and every frame is counted.
#[test]
fn a_million_flows_stay_within_the_bound() {
    let mut fw = Forwarder::new(&spec(MINIMAL), 9000).unwrap();
    let mut f = frame(0, 0, 18);
    let mut bucket_bytes = 0;
    for i in 0..1_000_000u32 {
        // Flow i: its source address and port from i (checksums do not matter here).
        f[26..30].copy_from_slice(&(0xc612_0000u32 | (i >> 8)).to_be_bytes());
        f[34..36].copy_from_slice(&((i & 0xff) as u16 + 1024).to_be_bytes());
        let now = Instant::from_nanos(1_000 + i as u64 * 1_000);
        assert_eq!(fw.receive(&f, now), Arrival::Queued);
        assert_eq!(fw.transmit(now, usize::MAX, |_| {}).unwrap(), 1);
        if i == 200_000 {
            bucket_bytes = fw.buckets().memory_bytes();
        }
    }
    assert_eq!(fw.flows().len(), stats::DEFAULT_FLOWS as usize);
    assert_eq!(fw.other_flows().counts.offered_packets, 1_000_000 - stats::DEFAULT_FLOWS as u64);
    assert!(fw.buckets().memory_bytes() <= bucket_bytes, "{} B, was {bucket_bytes} B", fw.buckets().memory_bytes());
    assert_eq!(fw.pipe.in_flight(), fw.queued(), "no packet left behind in the pipeline");
    let r = fw.result(1_000_000_000, true, "duration", &[]);
    assert_eq!(r.flows.len(), stats::DEFAULT_FLOWS as usize + 1);
    assert_eq!(r.classes[0].counts.sent_packets, 1_000_000);
    fw.buckets().check().unwrap();
}

/// A flood of new flows (issue #41): 1e6 new flows per second for 10 s of simulated time
/// (1e7 frames, each of a flow never seen before) into an output that takes half of them. The
/// memory stays within the configured bound: the flow rows at `[stats] flows` and the row of
/// the rest, the bucket pool's memory no more at the end than after 1 s, dqs within its pool and
/// buffer, no arrival stamp left behind; every frame is accounted (in = out + dropped by
/// reason + queued) at every second and at the end.
#[test]
fn a_flood_of_new_flows_stays_within_the_bound() {
    let sp = spec(&format!("{MINIMAL}[table]\nqueues = 4096\nblocks = 65536\nqueue_limit = \"4KiB\"\n"));
    let mut fw = Forwarder::new(&sp, 9000).unwrap();
    let mut f = frame(0, 0, 18);
    let mut bucket_bytes = 0;
    let accounted = |fw: &Forwarder| {
        let t = fw.totals();
        assert_eq!(t.frames_in, t.frames_out + t.drops.iter().sum::<u64>() + fw.queued(), "every frame accounted");
    };
    for i in 0..10_000_000u32 {
        f[26..30].copy_from_slice(&(0xc612_0000u32 | (i >> 8)).to_be_bytes());
        f[34..36].copy_from_slice(&((i & 0xff) as u16 + 1024).to_be_bytes());
        let now = Instant::from_nanos(1_000 + i as u64 * 1_000);
        fw.receive(&f, now);
        if fw.next_wakeup().is_some_and(|w| w <= now) {
            fw.wake(now).unwrap();
        }
        // The output takes one frame every 2 us: half the flood.
        if i % 2 == 0 {
            fw.transmit(now, 1, |_| {}).unwrap();
        }
        if i == 1_000_000 {
            bucket_bytes = fw.buckets().memory_bytes();
        }
        if i % 1_000_000 == 0 {
            accounted(&fw);
        }
    }
    accounted(&fw);
    let t = fw.totals();
    let d = fw.dqs();
    println!(
        "flood: in {} out {} dropped {:?} queued {}; rows {} + other {}; bucket pool {} B; dqs active flows max {}, blocks in use max {}",
        t.frames_in,
        t.frames_out,
        t.drops,
        fw.queued(),
        fw.flows().len(),
        fw.other_flows().counts.offered_packets,
        fw.buckets().memory_bytes(),
        t.active_flows_max,
        t.blocks_in_use_max
    );
    assert_eq!(t.frames_in, 10_000_000);
    assert!(t.frames_out >= 4_900_000, "the output took its half");
    assert!(t.drops.iter().sum::<u64>() > 4_000_000, "the rest was dropped, by reason");
    assert_eq!(fw.flows().len(), stats::DEFAULT_FLOWS as usize, "the exact table stays at [stats] flows");
    assert!(fw.buckets().memory_bytes() <= bucket_bytes, "the bucket pool did not grow after 1 s");
    assert!(t.active_flows_max <= 4_096 && t.blocks_in_use_max <= 65_536, "dqs within its pool and buffer");
    assert!(d.active_flows() <= 4_096);
    assert_eq!(fw.pipe.in_flight(), fw.queued(), "no packet left behind in the pipeline");
    fw.check().unwrap();
    fw.buckets().check().unwrap();
}

/// `[[services]]` as in a router scenario: flows 0-3 (source ports 5000-5003) in `slow` at
/// 2 Mbps each, the rest in `fast` at 5 Mbps each; each flow held to its service's rate, a
/// class row per service, the per-service scalars, and the file written back reads the same.
#[test]
fn services_shape_their_flows_to_their_own_rates() {
    let text = "[live]\ninput = \"in0\"\noutput = \"out0\"\n[[services]]\nname = \"slow\"\nprotocols = [\"udp\"]\nsrc_ports = [\"5000-5003\"]\nrate = \"2Mbps\"\n[[services]]\nname = \"fast\"\nrate = \"5Mbps\"\n";
    let sp = spec(text);
    assert_eq!(sp.services.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["slow", "fast"]);
    assert_eq!(sp.router_params().services.len(), 2, "the last service takes the rest: nothing added");
    let back = spec::read(&sp.to_toml(), "resolved.toml").unwrap();
    assert_eq!(back, sp, "written back, read the same");
    let mut fw = Forwarder::new(&sp, 9000).unwrap();
    let (_, got) = drive(&mut fw, 8, 8e6, 1000, 2.0);
    for (f, g) in got.iter().enumerate() {
        assert!(g.windows(2).all(|w| w[0] < w[1]), "flow {f} reordered");
        let st = fw.flows().into_iter().find(|s| s.key.src_port == 5000 + f as u16).unwrap();
        let want = if f < 4 { 2e6 } else { 5e6 };
        assert_eq!(st.rate.map(|r| r.bits_per_sec() as f64), Some(want), "flow {f}'s rate");
        let out = st.rate_out_bps().unwrap();
        assert!((out / want - 1.0).abs() < 0.02, "flow {f}: {out} bps, its service's rate {want}");
    }
    let r = fw.result(3_000_000_000, true, "duration", &[]);
    assert_eq!(r.get("flow_rate_configured.slow"), Some(2.0));
    assert_eq!(r.get("flow_rate_configured.fast"), Some(5.0));
    assert_eq!(r.get("backlogged_flows"), Some(8.0));
    assert!((r.get("backlogged_rate_mean.slow").unwrap() - 2.0).abs() < 0.04);
    assert!((r.get("backlogged_rate_mean.fast").unwrap() - 5.0).abs() < 0.1);
    assert!(r.get("backlogged_rate_error_max").unwrap() < 2.0);
    let names: Vec<&str> = r.classes.iter().map(|c| c.class.as_str()).collect();
    assert_eq!(names, ["slow", "fast"]);
    fw.check().unwrap();
}

/// The way back takes `[[reverse.services]]` with the way in's keys: each service's flows
/// shaped to its own rate on the way back (a spec of its own, as the CLI runs it), the
/// resolved file reads back the same, and problems name `reverse.` keys; `direction` is
/// refused in a live file with why (it has no inside prefixes).
#[test]
fn the_way_back_has_its_own_services() {
    let base = "[live]\ninput = \"in0\"\noutput = \"out0\"\n[shaper]\nflow_rate = \"1Mbps\"\n";
    let back = "[[reverse.services]]\nname = \"slow\"\nsrc_ports = [\"5000-5003\"]\nrate = \"2Mbps\"\n\
                [[reverse.services]]\nname = \"fast\"\nrate = \"5Mbps\"\n";
    let sp = spec(&format!("{base}{back}"));
    assert!(sp.services.is_empty(), "the way in keeps its one rate");
    assert_eq!(spec::read(&sp.to_toml(), "resolved.toml").unwrap(), sp, "written back, read the same");
    let rev = sp.reversed().expect("a [reverse] table shapes the way back");
    assert_eq!(rev.services.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["slow", "fast"]);
    let mut fw = Forwarder::new(&rev, 9000).unwrap();
    let (_, got) = drive(&mut fw, 8, 8e6, 1000, 2.0);
    for (f, g) in got.iter().enumerate() {
        assert!(g.windows(2).all(|w| w[0] < w[1]), "flow {f} reordered");
        let st = fw.flows().into_iter().find(|s| s.key.src_port == 5000 + f as u16).unwrap();
        let want = if f < 4 { 2e6 } else { 5e6 };
        let out = st.rate_out_bps().unwrap();
        assert!((out / want - 1.0).abs() < 0.02, "flow {f}: {out} bps, its service's rate {want}");
    }
    fw.check().unwrap();
    for (extra, key) in [
        ("[[reverse.services]]\nname = \"a\"\nrate = \"0bps\"\n", "reverse.services[0].rate"),
        ("[reverse.shaper]\nflow_rate = \"1Mbps\"\n[[reverse.services]]\nname = \"a\"\n", "reverse.shaper.flow_rate"),
        (
            "[[reverse.services]]\nname = \"a\"\nsrc_ports = [1]\n[[reverse.services]]\nname = \"a\"\n",
            "reverse.services[1].name",
        ),
        ("[[services]]\nname = \"a\"\ndirection = \"inbound\"\n", "services[0].direction"),
    ] {
        let text = if extra.starts_with("[[services]]") {
            format!("[live]\ninput = \"in0\"\noutput = \"out0\"\n{extra}")
        } else {
            format!("{base}{extra}")
        };
        let root: toml::Table = toml::from_str(&text).unwrap();
        let err = spec::read(&root, "bad.toml").unwrap_err().to_string();
        assert!(err.contains(key), "{key} missing from:\n{err}");
        if key.ends_with("direction") {
            assert!(err.contains("src_prefixes") && !err.contains("router.inside"), "{err}");
        }
    }
}

/// Services whose last one has match keys get an unshaped `unmatched` service after them, so
/// that frames no service matches (ARP here) pass rather than being dropped; `flow_rate`
/// beside `[[services]]` and a bad prefix are refused under their keys.
#[test]
fn frames_no_service_matches_pass_unshaped() {
    let base = "[live]\ninput = \"in0\"\noutput = \"out0\"\n";
    let sp = spec(&format!("{base}[[services]]\nname = \"udp\"\nprotocols = [\"udp\"]\nrate = \"1Mbps\"\n"));
    let p = sp.router_params();
    assert_eq!(
        p.services.iter().map(|s| (s.name.as_str(), s.rate.is_some())).collect::<Vec<_>>(),
        [("udp", true), ("unmatched", false)]
    );
    let mut fw = Forwarder::new(&sp, 9000).unwrap();
    let mut arp = vec![0xffu8; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x08, 0x06]);
    arp.extend_from_slice(&[0u8; 28]);
    let t = Instant::from_nanos(1_000);
    for _ in 0..50 {
        assert_eq!(fw.receive(&arp, t), Arrival::Queued);
    }
    assert_eq!(fw.transmit(t, usize::MAX, |_| {}).unwrap(), 50, "unshaped: all of them at once");
    let other = fw.flows().into_iter().find(|f| f.non_ip).unwrap();
    assert_eq!((other.class, other.rate), (1, None));
    for (text, key) in [
        (format!("{base}[shaper]\nflow_rate = \"1Mbps\"\n[[services]]\nname = \"a\"\n"), "shaper.flow_rate"),
        (format!("{base}[[services]]\nname = \"a\"\nsrc_prefixes = [\"x\"]\n"), "services[0].src_prefixes[0]"),
    ] {
        let root: toml::Table = toml::from_str(&text).unwrap();
        let e = spec::read(&root, "t.toml").unwrap_err();
        assert!(e.list.iter().any(|p| p.key == key), "{key} in {e}");
    }
}

/// An Ethernet frame of EtherType `t` (after `tags` 802.1Q tags) with 46 bytes of zeros.
fn frame_of_type(t: u16, tags: usize) -> Vec<u8> {
    let mut f = vec![0xffu8; 6];
    f.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
    for _ in 0..tags {
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
    }
    f.extend_from_slice(&t.to_be_bytes());
    f.extend_from_slice(&[0u8; 46]);
    f
}

/// `live.non_ip` restricts the frames without an IP packet: by default all pass; with a list
/// only those EtherTypes (VLAN tags looked through; "llc" for 802.3 frames), with "drop"
/// none; the others are dropped as `unclassified`, in a flow row of their own, counted and
/// accounted; IP frames are not affected. The resolved file reads back the same; a bad entry
/// is named.
#[test]
fn live_non_ip_says_which_frames_without_ip_pass() {
    let t = Instant::from_nanos(1_000);
    let (arp, lldp, tagged_arp, stp) =
        (frame_of_type(0x0806, 0), frame_of_type(0x88cc, 0), frame_of_type(0x0806, 2), frame_of_type(0x0026, 0));
    let mut fw = Forwarder::new(&spec(MINIMAL), 9000).unwrap();
    for f in [&arp, &lldp, &tagged_arp, &stp] {
        assert_eq!(fw.receive(f, t), Arrival::Queued, "by default every non-IP frame passes");
    }
    let sp = spec(&MINIMAL.replace("[shaper]", "non_ip = [\"arp\", \"llc\", 0x88f7]\n[shaper]"));
    assert_eq!(sp.non_ip, Some(vec![0x0806, 0, 0x88f7]));
    assert_eq!(spec::read(&sp.to_toml(), "resolved.toml").unwrap(), sp, "written back, read the same");
    let mut fw = Forwarder::new(&sp, 9000).unwrap();
    let got: Vec<Arrival> =
        [&arp, &lldp, &tagged_arp, &stp, &frame(0, 0, 100)].iter().map(|f| fw.receive(f, t)).collect();
    assert_eq!(
        got,
        [Arrival::Queued, Arrival::Dropped(Reason::NotLetThrough), Arrival::Queued, Arrival::Queued, Arrival::Queued]
    );
    let refused = fw.flows().into_iter().find(|f| f.non_ip && f.dropped() > 0).expect("a row of the refused");
    assert_eq!((refused.counts.offered_packets, refused.dropped()), (1, 1));
    assert_eq!(fw.totals().dropped(Reason::NotLetThrough), 1);
    let r = fw.result(2_000, true, "duration", &[]);
    assert_eq!(r.get("dropped_unclassified"), Some(1.0));
    fw.check().unwrap();
    let sp = spec(&MINIMAL.replace("[shaper]", "non_ip = \"drop\"\n[shaper]"));
    let mut fw = Forwarder::new(&sp, 9000).unwrap();
    assert_eq!(fw.receive(&arp, t), Arrival::Dropped(Reason::NotLetThrough));
    assert_eq!(fw.receive(&frame(0, 0, 100), t), Arrival::Queued);
    for (v, key) in
        [("[\"arp\", \"ipx\"]", "live.non_ip[1]"), ("[0x0100]", "live.non_ip[0]"), ("\"some\"", "live.non_ip")]
    {
        let root: toml::Table =
            toml::from_str(&MINIMAL.replace("[shaper]", &format!("non_ip = {v}\n[shaper]"))).unwrap();
        let e = spec::read(&root, "t.toml").unwrap_err();
        assert!(e.list.iter().any(|p| p.key == key), "{key} in {e}");
    }
}

/// A class's rate (`rate_per = "class"`): one bucket over the queues of all its flows. 4 flows
/// offered 4 Mbps each share 8 Mbps: the class within 1% of 8 Mbps and each flow within 5% of
/// its equal share (the queues of a throttled bucket take turns), in order; a flow of another
/// service beside it keeps its own per-flow rate.
#[test]
fn a_class_rate_is_shared_by_its_flows() {
    for conformance in ["send-then-pay", "wait-for-tokens"] {
        let text = format!("[live]\ninput = \"in0\"\noutput = \"out0\"\n[shaper]\nconformance = \"{conformance}\"\n[[services]]\nname = \"sub\"\nsrc_ports = [\"5000-5003\"]\nrate = \"8Mbps\"\nrate_per = \"class\"\n[[services]]\nname = \"rest\"\nrate = \"3Mbps\"\n");
        let sp = spec(&text);
        let mut fw = Forwarder::new(&sp, 9000).unwrap();
        let (_, got) = drive(&mut fw, 5, 4e6, 1000, 3.0);
        let flows = fw.flows();
        let st = |f: u16| flows.iter().find(|s| s.key.src_port == 5000 + f).unwrap();
        let mut class = 0.0;
        for f in 0..4u16 {
            assert!(got[f as usize].windows(2).all(|w| w[0] < w[1]), "{conformance}: flow {f} reordered");
            let out = st(f).rate_out_bps().unwrap();
            class += out;
            assert!((out / 2e6 - 1.0).abs() < 0.05, "{conformance}: flow {f} at {out} bps, its share 2e6");
        }
        let shares: Vec<String> = (0..4).map(|f| format!("{:.4}", st(f).rate_out_bps().unwrap() / 1e6)).collect();
        println!("{conformance}: class {:.4} Mbps, flows {} Mbps", class / 1e6, shares.join(" "));
        assert!((class / 8e6 - 1.0).abs() < 0.01, "{conformance}: the class at {class} bps");
        let rest = st(4).rate_out_bps().unwrap();
        assert!((rest / 3e6 - 1.0).abs() < 0.02, "{conformance}: the other service's flow at {rest}");
        fw.check().unwrap();
    }
}

/// A subscriber's rate (`rate_per = "src"`): one bucket per source address over all its flows,
/// which share it equally. Subscriber .1 has 3 flows, subscriber .2 one, each subscriber 6 Mbps,
/// every flow offered 4 Mbps: .1's flows 2 Mbps each (within 5%), .2's flow its 4 Mbps (under
/// its subscriber's rate), both conformances, in order.
#[test]
fn a_subscribers_rate_is_shared_by_its_flows() {
    for conformance in ["send-then-pay", "wait-for-tokens"] {
        let text = format!("[live]\ninput = \"in0\"\noutput = \"out0\"\n[shaper]\nconformance = \"{conformance}\"\n[[services]]\nname = \"subscribers\"\nrate = \"6Mbps\"\nrate_per = \"src\"\n");
        let sp = spec(&text);
        assert_eq!(sp.services[0].host, Some(crate::models::router::Host::Src));
        assert_eq!(spec::read(&sp.to_toml(), "resolved.toml").unwrap(), sp, "written back, read the same");
        let mut fw = Forwarder::new(&sp, 9000).unwrap();
        let (_, got) = drive_from(&mut fw, 4, 4e6, 1000, 3.0, |f| if f < 3 { 1 } else { 2 });
        let flows = fw.flows();
        let out = |f: u16| flows.iter().find(|s| s.key.src_port == 5000 + f).unwrap().rate_out_bps().unwrap();
        let rates: Vec<String> = (0..4).map(|f| format!("{:.4}", out(f) / 1e6)).collect();
        println!(
            "{conformance}: subscriber .1's flows {} Mbps, subscriber .2's flow {} Mbps",
            rates[..3].join(" "),
            rates[3]
        );
        for f in 0..4u16 {
            assert!(got[f as usize].windows(2).all(|w| w[0] < w[1]), "{conformance}: flow {f} reordered");
            let want = if f < 3 { 2e6 } else { 4e6 };
            assert!((out(f) / want - 1.0).abs() < 0.05, "{conformance}: flow {f} at {} bps, want {want}", out(f));
        }
        fw.check().unwrap();
    }
}

/// A file whose only rate is a class's (no per-flow buckets at all: the latency benchmark's
/// "one class" middle) shapes the class and writes its results (it panicked there before).
#[test]
fn a_class_rate_alone_shapes_and_reports() {
    let sp = spec("[live]\ninput = \"in0\"\noutput = \"out0\"\n[[services]]\nname = \"all\"\nrate = \"4Mbps\"\nrate_per = \"class\"\n");
    let mut fw = Forwarder::new(&sp, 9000).unwrap();
    drive(&mut fw, 4, 2e6, 1000, 2.0);
    let r = fw.result(4_000_000_000, true, "duration", &[]);
    assert_eq!((r.get("parked_buckets_max"), r.get("bucket_evictions")), (Some(0.0), Some(0.0)));
    let class: f64 = fw.flows().iter().filter_map(|f| f.rate_out_bps()).sum();
    assert!((class / 4e6 - 1.0).abs() < 0.02, "the class at {class} bps, not within 2% of its 4 Mbps");
    fw.check().unwrap();
}

/// Drives a [`Reloading`] with `flows` flows each offered `offered_bps` of 1000 B datagrams
/// for `secs` seconds (then drains), taking `next` at `at_s`: every frame out as (time ns,
/// flow, sequence number, length).
fn drive_reload(
    r: &mut super::reload::Reloading,
    flows: u16,
    offered_bps: f64,
    secs: f64,
    at_s: f64,
    next: &LiveSpec,
) -> Vec<(u64, u16, u32, usize)> {
    let len = frame(0, 0, 1000).len() as f64;
    let gap = (len * 8e9 / offered_bps) as u64;
    let (end, at) = ((secs * 1e9) as u64, (at_s * 1e9) as u64);
    let mut sent = vec![0u32; flows as usize];
    let mut out = Vec::new();
    let mut next_arrival: Vec<u64> = (0..flows as u64).map(|i| 1_000 + i * gap / flows as u64).collect();
    let mut reloaded = false;
    loop {
        let (i, &ta) = next_arrival.iter().enumerate().min_by_key(|(_, &t)| t).unwrap();
        let tw = r.next_wakeup().map_or(u64::MAX, |w| w.as_nanos());
        let t = ta.min(tw);
        if t > end + 2_000_000_000 {
            break;
        }
        if !reloaded && t >= at {
            r.reload(next).unwrap();
            reloaded = true;
        }
        let now = Instant::from_nanos(t);
        r.wake(now).unwrap();
        if ta <= tw {
            if ta <= end {
                r.receive(&frame(i as u16, sent[i], 1000), now);
                sent[i] += 1;
                next_arrival[i] += gap;
            } else {
                next_arrival[i] = u64::MAX;
            }
        }
        r.transmit(now, usize::MAX, |fr| {
            let (f, s) = seq_and_flow(fr);
            out.push((t, f, s, fr.len()));
        })
        .unwrap();
    }
    out
}

/// Flow `f`'s rate in `out` from `from_s` to `to_s`, bits/s of frame bytes.
fn window_rate(out: &[(u64, u16, u32, usize)], f: u16, from_s: f64, to_s: f64) -> f64 {
    let (a, b) = ((from_s * 1e9) as u64, (to_s * 1e9) as u64);
    let bytes: usize = out.iter().filter(|x| x.1 == f && x.0 >= a && x.0 < b).map(|x| x.3).sum();
    bytes as f64 * 8.0 / (to_s - from_s)
}

/// A reload (issue #42): 4 flows offered 2 Mbps each, shaped to 1 Mbps, then from 1 s to
/// 1.5 Mbps. No frame is dropped because of the change (`dropped_waiting` 0; the queue limit
/// still drops what overloads a flow, its frames in both configurations counted together),
/// none is reordered, every frame is accounted; the flows backlogged at the change wait behind
/// their old frames, and from 1.5 s each flow holds its new rate within 2%.
#[test]
fn a_reload_changes_rates_without_loss_or_reordering() {
    let a = spec(&format!("{MINIMAL}[table]\nqueue_limit = \"16KiB\"\n").replace("10Mbps", "1Mbps"));
    let b = spec(&format!("{MINIMAL}[table]\nqueue_limit = \"16KiB\"\n").replace("10Mbps", "1.5Mbps"));
    let mut r = super::reload::Reloading::new(&a, 9000).unwrap();
    let out = drive_reload(&mut r, 4, 2e6, 3.0, 1.0, &b);
    let c = r.counts();
    println!("reload: {c:?}; {} frames out", out.len());
    for f in 0..4u16 {
        let seqs: Vec<u32> = out.iter().filter(|x| x.1 == f).map(|x| x.2).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "flow {f} reordered");
        let (before, after) = (window_rate(&out, f, 0.3, 1.0), window_rate(&out, f, 1.5, 3.0));
        println!("flow {f}: {:.4} Mbps before, {:.4} Mbps from 1.5 s", before / 1e6, after / 1e6);
        assert!((before / 1e6 - 1.0).abs() < 0.02, "flow {f} before: {before}");
        assert!((after / 1.5e6 - 1.0).abs() < 0.02, "flow {f} after: {after}");
    }
    assert_eq!((c.reloads, c.dropped_waiting), (1, 0), "nothing lost to the change");
    assert!(c.waited > 0, "the backlogged flows waited behind their old frames");
    assert!(c.dropped_queue_full > 0, "offered twice the rate: the queue limit drops, as without a change");
    assert!(!r.switching() && r.waiting() == 0, "the old configuration retired");
    r.check().unwrap();
    // The retired configuration gave its buffer's storage back (a run with many reloads does
    // not keep every old buffer), its counts kept for the results; the current one has its own.
    let all = r.into_all();
    let (old, new) = (&all[0], &all[1]);
    assert_eq!(old.dqs().buffer().total_blocks(), 0, "the old buffer's blocks given back");
    assert!(new.dqs().buffer().total_blocks() > 0);
    assert!(
        old.totals().frames_out > 0
            && old.totals().frames_in == old.totals().frames_out + old.totals().drops.iter().sum::<u64>()
    );
    old.check().unwrap();
}

/// A flow the new rules move to another class keeps its order: flows 0 and 1 in `slow`
/// (1 Mbps each), 2 and 3 in `fast` (4 Mbps each), all offered 2 Mbps; at 1 s the new rules
/// leave flow 0 alone in `slow`. Flow 1's frames queued in `slow` go first, then its later
/// ones under `fast`: in order, none dropped by the change, and from 1.5 s it gets its offered
/// 2 Mbps while flow 0 keeps 1.
#[test]
fn a_flow_moved_to_another_class_keeps_its_order() {
    let rules = |slow: &str| {
        spec(&format!(
            "[live]\ninput = \"in0\"\noutput = \"out0\"\n[table]\nqueue_limit = \"16KiB\"\n\
             [[services]]\nname = \"slow\"\nsrc_ports = [{slow}]\nrate = \"1Mbps\"\n\
             [[services]]\nname = \"fast\"\nrate = \"4Mbps\"\n"
        ))
    };
    let mut r = super::reload::Reloading::new(&rules("\"5000-5001\""), 9000).unwrap();
    let out = drive_reload(&mut r, 4, 2e6, 3.0, 1.0, &rules("5000"));
    for f in 0..4u16 {
        let seqs: Vec<u32> = out.iter().filter(|x| x.1 == f).map(|x| x.2).collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "flow {f} reordered");
    }
    let (f0, f1) = (window_rate(&out, 0, 1.5, 3.0), window_rate(&out, 1, 1.5, 3.0));
    println!("moved: flow 0 {:.4} Mbps, flow 1 {:.4} Mbps from 1.5 s; {:?}", f0 / 1e6, f1 / 1e6, r.counts());
    assert!((f0 / 1e6 - 1.0).abs() < 0.02, "flow 0 stays at 1 Mbps: {f0}");
    assert!((f1 / 2e6 - 1.0).abs() < 0.02, "flow 1 gets its offered 2 Mbps: {f1}");
    assert_eq!(r.counts().dropped_waiting, 0);
    r.check().unwrap();
}

/// A frame that waited behind its flow's old frames leaves in the same call that sends the
/// old configuration's last one (the caller would otherwise not come back for it until its
/// next event): 8 frames of one flow under 1 Mbps (what the 6,000 B cap allows goes at once),
/// a reload to 100 Mbps, a ninth frame waits; when the old configuration's last frame may go,
/// one transmit sends it and the ninth, in order.
#[test]
fn a_waiting_frame_leaves_with_its_flows_last_old_frame() {
    let a = spec(&MINIMAL.replace("10Mbps", "1Mbps"));
    let b = spec(&MINIMAL.replace("10Mbps", "100Mbps"));
    let mut r = super::reload::Reloading::new(&a, 9000).unwrap();
    let t0 = Instant::from_nanos(1_000);
    let mut out = Vec::new();
    for seq in 0..8 {
        assert_eq!(r.receive(&frame(0, seq, 1000), t0), Arrival::Queued);
    }
    r.transmit(t0, usize::MAX, |f| out.push(seq_and_flow(f).1)).unwrap();
    r.reload(&b).unwrap();
    assert_eq!(r.receive(&frame(0, 8, 1000), t0), Arrival::Queued);
    assert_eq!(r.waiting(), 1, "behind the flow's frames in the old configuration");
    let mut calls = Vec::new();
    while let Some(w) = r.next_wakeup() {
        r.wake(w).unwrap();
        let before = out.len();
        r.transmit(w, usize::MAX, |f| out.push(seq_and_flow(f).1)).unwrap();
        calls.push(out.len() - before);
    }
    assert_eq!(out, (0..9).collect::<Vec<u32>>(), "every frame, in order (before the fix the ninth never left)");
    assert!(calls.last().is_some_and(|&n| n >= 2), "the last old frames and the waiting one in one call: {calls:?}");
    assert_eq!((r.waiting(), r.switching()), (0, false));
    r.check().unwrap();
}

/// `live.stats` says where the statistics are served: "on" is loopback's 127.0.0.1:9464, an
/// address and port, a UNIX socket's path, or "off" (the default); written back and read the
/// same; anything else refused under its key.
#[test]
fn live_stats_says_where_the_statistics_are_served() {
    for (v, want) in [
        ("\"on\"", Some("127.0.0.1:9464")),
        ("\"[::1]:9000\"", Some("[::1]:9000")),
        ("\"unix:/run/npqos.sock\"", Some("unix:/run/npqos.sock")),
        ("\"off\"", None),
    ] {
        let sp = spec(&MINIMAL.replace("[shaper]", &format!("stats = {v}\n[shaper]")));
        assert_eq!(sp.stats_listen.as_ref().map(|a| a.to_string()).as_deref(), want, "{v}");
        assert_eq!(spec::read(&sp.to_toml(), "resolved.toml").unwrap(), sp);
    }
    assert_eq!(spec(MINIMAL).stats_listen, None);
    let root: toml::Table = toml::from_str(&MINIMAL.replace("[shaper]", "stats = \"everywhere\"\n[shaper]")).unwrap();
    let e = spec::read(&root, "t.toml").unwrap_err();
    assert!(e.list.iter().any(|p| p.key == "live.stats"), "{e}");
}

/// The statistics a running live publishes: a snapshot's class, subscriber and flow rows
/// add up (the subscriber's row is its flows' sum), its rates are over the time since the
/// last snapshot, and the Prometheus and tc renderings carry them under their names.
#[test]
fn snapshots_give_class_subscriber_and_flow_rows_with_rates() {
    use super::snapshot::{prometheus, tc_style, RateMemory, Snapshot, Way};
    let text = "[live]\ninput = \"in0\"\noutput = \"out0\"\n[[services]]\nname = \"subs\"\nrate = \"6Mbps\"\nrate_per = \"src\"\n";
    let sp = spec(text);
    let mut fw = Forwarder::new(&sp, 9000).unwrap();
    let (mut snap, mut mem) = (Snapshot::default(), RateMemory::default());
    drive_from(&mut fw, 4, 4e6, 1000, 2.0, |f| if f < 3 { 1 } else { 2 });
    fw.snapshot(Instant::from_nanos(3_000_000_000), &mut snap, &mut mem);
    let sent_before = snap.classes[0].counts.sent_bytes;
    assert_eq!(snap.seq, 1);
    assert_eq!(snap.flows.len(), 4);
    let flows_sent: u64 = snap.flows.iter().map(|f| f.row.counts.sent_bytes).sum();
    assert_eq!(flows_sent, sent_before, "the class's row is its flows' sum");
    assert_eq!(snap.totals.frames_out, snap.classes[0].counts.sent_packets);
    let info = sp.service_info();
    assert_eq!((info[0].name.as_str(), info[0].per), ("subs", "src"));
    let ways = [Way { name: "in", snapshot: &snap, services: &info }];
    let mut prom = String::new();
    prometheus(&ways, &mut prom);
    let value = |k: &str| -> f64 {
        prom.lines()
            .find_map(|l| l.strip_prefix(k)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("{k} in\n{prom}"))
    };
    let sub = |a: &str| {
        value(&format!(
            "npqos_subscriber_sent_bytes_total{{direction=\"in\",class=\"subs\",subscriber=\"198.18.0.{a}\"}}"
        ))
    };
    let one: u64 = snap.flows.iter().filter(|f| f.key.src_port < 5003).map(|f| f.row.counts.sent_bytes).sum();
    assert_eq!(sub("1"), one as f64, "subscriber .1 is its 3 flows");
    assert_eq!(sub("1") + sub("2"), sent_before as f64);
    assert_eq!(value("npqos_class_rate_configured_bits_per_second{direction=\"in\",class=\"subs\",per=\"src\"}"), 6e6);
    // Rates: over the 3 s since the start, the class sent 6 + 4 Mbps for about 2 s.
    let class_rate = value("npqos_class_rate_bits_per_second{direction=\"in\",class=\"subs\"}");
    assert!((class_rate / (sent_before as f64 * 8.0 / 3.0) - 1.0).abs() < 1e-6, "{class_rate}");
    let mut again = snap.clone();
    fw.snapshot(Instant::from_nanos(4_000_000_000), &mut again, &mut mem);
    assert_eq!((again.seq, again.classes[0].rate_bps), (2, 0.0), "nothing sent in the last second");
    let mut tc = String::new();
    tc_style(&ways, 2, &mut tc);
    assert!(
        tc.contains("class subs rate 6.000Mbit per src") && tc.contains("subscriber 198.18.0.1 of class subs"),
        "{tc}"
    );
    assert_eq!(tc.matches("\nflow udp").count(), 2, "the 2 busiest flows: {tc}");
}

/// Rates in wire terms (tc's `overhead` and `mpu`): with `overhead = 24` (preamble, start
/// delimiter, FCS and gap on Ethernet) a 10 Mbps flow of 1042 B frames gets 10 x 1042 / 1066
/// Mbps of frame bytes; with `mpu = 2084` each frame is charged 2084 B, half the rate. Both
/// written back and read the same; a bad value is refused under its key.
#[test]
fn overhead_and_mpu_charge_frames_in_wire_terms() {
    for (keys, factor) in [("overhead = 24\n", 1042.0 / 1066.0), ("mpu = \"2084B\"\n", 0.5), ("", 1.0)] {
        let sp = spec(&format!("{MINIMAL}{keys}"));
        assert_eq!(spec::read(&sp.to_toml(), "resolved.toml").unwrap(), sp);
        let mut fw = Forwarder::new(&sp, 9000).unwrap();
        drive(&mut fw, 2, 20e6, 1000, 2.0);
        for st in fw.flows() {
            let out = st.rate_out_bps().unwrap();
            let want = 10e6 * factor;
            assert!((out / want - 1.0).abs() < 0.01, "{keys:?}: {out} bps, want {want}");
        }
    }
    for (keys, key) in [("overhead = 5000\n", "shaper.overhead"), ("mpu = \"100KB\"\n", "shaper.mpu")] {
        let root: toml::Table = toml::from_str(&format!("{MINIMAL}{keys}")).unwrap();
        let e = spec::read(&root, "t.toml").unwrap_err();
        assert!(e.list.iter().any(|p| p.key == key), "{key} in {e}");
    }
}

/// DSCP as a match key, per frame: flow 0's frames marked EF (46) go to `voice` (1 Mbps per
/// flow), flow 1's unmarked frames to `rest` (3 Mbps); each flow at its service's rate.
#[test]
fn dscp_sends_marked_frames_to_their_service() {
    let text = "[live]\ninput = \"in0\"\noutput = \"out0\"\n[[services]]\nname = \"voice\"\ndscp = [\"ef\"]\nrate = \"1Mbps\"\n[[services]]\nname = \"rest\"\nrate = \"3Mbps\"\n";
    let sp = spec(text);
    assert_eq!(sp.services[0].rule.dscp, [46]);
    assert_eq!(spec::read(&sp.to_toml(), "resolved.toml").unwrap(), sp);
    let mut fw = Forwarder::new(&sp, 9000).unwrap();
    let t = |i: u64| Instant::from_nanos(1_000 + i * 400_000);
    let mut out = [0u64; 2];
    for i in 0..10_000u64 {
        for f in 0..2u16 {
            let mut fr = frame(f, i as u32, 1000);
            if f == 0 {
                fr[15] = 46 << 2; // the IPv4 header's DS field (the decoder checks no checksum)
            }
            fw.receive(&fr, t(i));
        }
        fw.wake(t(i)).unwrap();
        fw.transmit(t(i), usize::MAX, |fr| out[seq_and_flow(fr).0 as usize] += fr.len() as u64).unwrap();
    }
    let secs = 10_000.0 * 400e-6;
    let rates = out.map(|b| b as f64 * 8.0 / secs);
    println!("voice {:.4} Mbps, rest {:.4} Mbps", rates[0] / 1e6, rates[1] / 1e6);
    assert!((rates[0] / 1e6 - 1.0).abs() < 0.02, "voice at {}", rates[0]);
    assert!((rates[1] / 3e6 - 1.0).abs() < 0.02, "rest at {}", rates[1]);
    let flows = fw.flows();
    assert_eq!(flows.iter().find(|s| s.key.src_port == 5000).unwrap().class, 0);
    assert_eq!(flows.iter().find(|s| s.key.src_port == 5001).unwrap().class, 1);
}
