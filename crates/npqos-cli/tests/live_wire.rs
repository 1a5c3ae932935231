//! The simulator checked against the wire (docs/live.md, "The simulator against the wire"): a
//! synthetic capture sent by tcpreplay through `npqos live` on the namespace bed, and `npqos
//! run` of the router scenario of the same configuration over the same capture. Needs root
//! (namespaces) and tcpreplay; skips with the reason without them.

#![cfg(target_os = "linux")]

use npqos_cli::live::{netns, wire};
use std::path::Path;

/// Two services by destination port, each of 8 flows offering 1.5 Mbps for 3 s and shaped to
/// 1.2 or 0.8 Mbps with a 16 KiB queue each: both drivers run the same router (the resolved
/// configurations are the same scenario), see every packet of the capture, and agree on what
/// each service delivered (within 5%: tcpreplay stretches the capture by about 2%, and every
/// millisecond more lets the shaper send 1.2 or 0.8 kbit more), dropped and its delay
/// percentiles (within 10%, or 2 ms).
#[test]
fn the_simulator_and_the_wire_agree_on_a_capture() {
    if let Some(why) = wire::unavailable() {
        println!("SKIPPED the simulator against the wire: {why}");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let cap = d.path().join("synthetic.pcap");
    let packets = wire::synthetic_capture(&cap, 16, 3.0, 1.5e6, 7).unwrap();
    let shaping = "[[services]]\nname = \"gold\"\ndst_ports = [10000]\nrate = \"1.2Mbps\"\n\
                   [[services]]\nname = \"silver\"\nrate = \"800kbps\"\n[table]\nqueue_limit = \"16KiB\"\n";
    let bed = netns::Bed::new(&format!("sw{}", std::process::id() % 100_000)).unwrap();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let npqos = Path::new(env!("CARGO_BIN_EXE_npqos"));
    // A full queue leaves in at most 16 KiB / 0.8 Mbps = 164 ms: 1 s of drain empties both.
    let drain = std::time::Duration::from_secs(1);
    let c = wire::compare(npqos, &bed, &cap, shaping, &d.path().join("cmp"), usize::from(cpus > 1), drain).unwrap();
    println!("{packets} packets; tcpreplay: {}\n{}", c.replay, c.table());
    assert!(c.diff.is_empty(), "the two resolved configurations differ:\n{}", c.diff);
    let mut offered = 0.0;
    for class in ["gold", "silver"] {
        let both = |k: &str| (c.get(false, class, k).unwrap(), c.get(true, class, k).unwrap());
        let (o_sim, o_wire) = both("offered_packets");
        assert_eq!(o_sim, o_wire, "{class}: offered");
        offered += o_sim;
        let (s, w) = both("sent_bytes");
        assert!((w - s).abs() <= 0.05 * s, "{class}: sent {s} B simulated, {w} B on the wire");
        let (s, w) = both("sent_packets");
        let (ds, dw) = both("dropped_packets");
        assert!(s + ds == o_sim && w + dw == o_wire, "{class}: every packet sent or dropped");
        assert!(ds > 0.0, "{class}: the shaping bites (drops at the queue limit)");
        for k in ["delay_p50_ns", "delay_p99_ns"] {
            let (s, w) = both(k);
            assert!((w - s).abs() <= (0.1 * s).max(2e6), "{class}: {k} {s} simulated, {w} on the wire");
        }
    }
    assert_eq!(offered, packets as f64, "every packet of the capture in a service");
}
