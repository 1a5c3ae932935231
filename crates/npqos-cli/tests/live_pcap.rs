//! Packet captures of `npqos live`'s ports (docs/live.md, "Packet captures"): the same writer
//! as the simulator's, on the namespace bed with tcpreplay sending a capture through it, and
//! the router simulation of the same configuration writing its own. Needs root (namespaces)
//! and tcpreplay; skips with the reason without them.

#![cfg(target_os = "linux")]

use npqos_cli::live::{netns, wire};
use npqos_sim::trace::reader::TraceReader;
use std::path::Path;

fn count(path: &Path) -> (u64, u64) {
    let mut r = TraceReader::open(path, false).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (mut n, mut last) = (0, 0);
    while let Some(rec) = r.next().unwrap() {
        n += 1;
        last = rec.ts_ns;
    }
    (n, last)
}

/// On the wire and in the simulation of the same frames, each port's file holds as many
/// packets as that side's classes.csv counts offered, sent and dropped; the ingress files
/// hold every frame of the capture, their times from the first frame within the capture's span
/// (plus tcpreplay's stretch on the wire).
#[test]
fn npqos_live_captures_its_ports_as_the_simulator_does() {
    if let Some(why) = wire::unavailable() {
        println!("SKIPPED npqos live's packet captures: {why}");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let cap = d.path().join("synthetic.pcap");
    let packets = wire::synthetic_capture(&cap, 8, 1.0, 1.5e6, 11).unwrap();
    let shaping = "[[services]]\nname = \"gold\"\ndst_ports = [10000]\nrate = \"1.2Mbps\"\n\
                   [[services]]\nname = \"silver\"\nrate = \"800kbps\"\n[table]\nqueue_limit = \"8KiB\"\n\
                   [output]\npcap = [\"ingress\", \"egress\", \"drops\"]\n";
    let bed = netns::Bed::new(&format!("pc{}", std::process::id() % 100_000)).unwrap();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let npqos = Path::new(env!("CARGO_BIN_EXE_npqos"));
    let dir = d.path().join("cmp");
    let c = wire::compare(npqos, &bed, &cap, shaping, &dir, usize::from(cpus > 1), std::time::Duration::from_secs(1))
        .unwrap();
    assert!(c.diff.is_empty(), "{}", c.diff);
    for (wire, side) in [(false, "sim"), (true, "live")] {
        let sum = |k: &str| -> f64 { ["gold", "silver"].iter().map(|s| c.get(wire, s, k).unwrap()).sum() };
        let p = dir.join(side).join("pcap");
        let (ing, last) = count(&p.join("ingress.pcapng"));
        assert_eq!(ing, packets, "{side}: every frame of the capture in the ingress file");
        assert_eq!(ing as f64, sum("offered_packets"), "{side}: ingress");
        assert_eq!(count(&p.join("egress.pcapng")).0 as f64, sum("sent_packets"), "{side}: egress");
        let drops = count(&p.join("drops.pcapng")).0 as f64;
        assert_eq!(drops, sum("dropped_packets"), "{side}: drops");
        assert!(drops > 0.0, "{side}: the queue limit drops");
        assert!(last < 1_100_000_000, "{side}: the last arrival {last} ns after the first");
    }
}
