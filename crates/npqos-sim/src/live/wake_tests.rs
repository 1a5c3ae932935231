//! A forwarding thread that wakes late, on a simulated clock (docs/live.md, "cap defaults"): a
//! real thread takes frames a block at a time and its timer fires late, so the shaper is asked
//! only now and then. Every bucket's cap is at least alpha plus its rate for `wake_tolerance`
//! (1 ms by default), so that a thread waking up to that late loses no rate. Without it (the
//! cap alone, 2 x alpha = 6,000 B) a 1 Gbps flow holds 48 us of lateness, and on the namespace
//! bed it got 605 Mbps (docs/PERFORMANCE.md).

use super::*;

/// A UDP frame of 1,000 B of payload (1,042 B on the wire).
fn frame() -> Vec<u8> {
    frame_of(1000)
}

/// A UDP frame of `payload` bytes of payload (42 B more on the wire).
fn frame_of(payload: usize) -> Vec<u8> {
    let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .udp(5000, 6000);
    let mut out = Vec::new();
    b.write(&mut out, &vec![0u8; payload]).unwrap();
    out
}

/// One flow offered 1.5 Gbps for 1 s into a forwarder shaping it to `rate` (`extra` shaper
/// keys), driven as a thread that wakes only every `every_ns` (taking the frames that came
/// meanwhile, then sending what the shaper lets go): the rate it sent at in the last 500 ms,
/// bits/s (the first burst, up to a cap, left out).
fn sent_rate(rate: &str, extra: &str, every_ns: u64) -> f64 {
    let text = format!(
        "[live]\ninput = \"in0\"\noutput = \"out0\"\n[shaper]\nflow_rate = \"{rate}\"\n{extra}\n\
         [table]\nqueue_limit = \"4MiB\"\n"
    );
    let sp = spec::read(&toml::from_str(&text).unwrap(), "t.toml").unwrap_or_else(|p| panic!("{p}"));
    let mut fw = Forwarder::new(&sp, 2048).unwrap();
    let fr = frame();
    let gap = fr.len() as u64 * 8 * 1_000_000_000 / 1_500_000_000;
    let (half, end) = (500_000_000u64, 1_000_000_000u64);
    let (mut next_arrival, mut now) = (1_000u64, 0u64);
    let mut sent_bytes = 0u64;
    while now < end {
        now += every_ns;
        while next_arrival <= now {
            fw.receive(&fr, Instant::from_nanos(next_arrival));
            next_arrival += gap;
        }
        let at = Instant::from_nanos(now);
        fw.wake(at).unwrap();
        let counted = now > half;
        fw.transmit(at, usize::MAX, |f| sent_bytes += counted as u64 * f.len() as u64).unwrap();
    }
    sent_bytes as f64 * 8e9 / (now - half) as f64
}

/// 1 Gbps and 300 Mbps flows, the thread waking every 250 us: within 1% of their rate with
/// the default tolerance; with `wake_tolerance = "0s"` (every cap 6,000 B, the default before
/// it) about 200 Mbps, what 6,000 B and a frame every 250 us make. A 10 Mbps flow, whose cap stays 2 x alpha, keeps its rate either way.
#[test]
fn a_thread_that_wakes_late_keeps_the_rate_within_its_tolerance() {
    for (rate, bps) in [("1Gbps", 1e9), ("300Mbps", 3e8)] {
        let with = sent_rate(rate, "", 250_000);
        let without = sent_rate(rate, "wake_tolerance = \"0s\"", 250_000);
        println!(
            "{rate}, waking every 250 us: {:.1} Mbps; without the tolerance {:.1} Mbps",
            with / 1e6,
            without / 1e6
        );
        assert!((with / bps - 1.0).abs() < 0.01, "{rate}: {with} bps with the default tolerance");
        // 6,000 B and a frame per wake-up: about 200 Mbps whatever the rate.
        assert!(without < 0.75 * bps, "{rate}: {without} bps with every cap at 6,000 B");
    }
    // A 10 Mbps flow's cap is 2 x alpha (more than alpha + 1 ms at its rate): the tolerance
    // changes nothing there, and 250 us of lateness is within what 6,000 B holds (2.4 ms).
    let (with, without) = (sent_rate("10Mbps", "", 250_000), sent_rate("10Mbps", "wake_tolerance = \"0s\"", 250_000));
    assert_eq!(with, without, "10 Mbps: the same sends");
    assert!((with / 1e7 - 1.0).abs() < 0.01, "10 Mbps: {with} bps");
    // Waking later than the tolerance loses rate again: every 3 ms against 1 ms.
    let late = sent_rate("1Gbps", "", 3_000_000);
    assert!(late < 0.5e9, "1 Gbps waking every 3 ms: {late} bps");
}

/// Under wait-for-tokens a frame larger than its bucket's cap could never conform and is
/// dropped (as tbf drops it). The cap that counts is the bucket's own, raised by the wake
/// tolerance: a 9,000 B jumbo frame at 1 Gbps (cap 6,000 B raised to 128,000 B) is shaped and
/// sent; with `wake_tolerance = "0s"` the cap is 6,000 B and it is dropped. (Before, the
/// configured cap was compared, and jumbo frames were dropped however large the bucket.)
#[test]
fn wait_for_tokens_holds_a_frame_to_its_buckets_raised_cap() {
    let jumbo = frame_of(8958);
    assert_eq!(jumbo.len(), 9000);
    for (extra, fits) in [("", true), ("wake_tolerance = \"0s\"", false)] {
        let text = format!(
            "[live]\ninput = \"in0\"\noutput = \"out0\"\n[shaper]\nflow_rate = \"1Gbps\"\n\
             conformance = \"wait-for-tokens\"\n{extra}\n"
        );
        let sp = spec::read(&toml::from_str(&text).unwrap(), "t.toml").unwrap_or_else(|p| panic!("{p}"));
        let mut fw = Forwarder::new(&sp, 9000).unwrap();
        let at = Instant::from_nanos(1_000);
        let got = fw.receive(&jumbo, at);
        let mut sent = Vec::new();
        fw.transmit(at, usize::MAX, |f| sent.push(f.len())).unwrap();
        if fits {
            assert_eq!((got, sent), (Arrival::Queued, vec![9000]), "{extra:?}");
        } else {
            assert_eq!((got, sent), (Arrival::Dropped(Reason::AboveCap), vec![]), "{extra:?}");
        }
        assert_eq!(fw.totals().dropped(Reason::AboveCap), !fits as u64, "{extra:?}");
    }
}
