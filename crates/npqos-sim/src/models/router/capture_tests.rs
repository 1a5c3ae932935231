//! Packet captures of the router's ports (docs/router.md, "Packet captures"): the files hold
//! one record per packet at the model's time, as many as the summary counts, and stop at the
//! limit saying where.

use super::driver::run_traced;
use super::scenario::{run_scenario, RouterSpec};
use crate::scenario::testing::{assert_round_trips, example, parse};
use crate::scenario::Scenario;
use crate::trace::reader::TraceReader;
use std::path::Path;

/// `scenarios/router-pcap.toml` (synthetic flows through a small buffer and a tight shaper, so
/// that every port sees packets: arrivals, deliveries, drops for more than one reason; its last
/// table is `[output]`) with `extra` keys of `[output]`, or another `pcap` list, and the
/// capture directory `dir`.
fn scenario(dir: &Path, pcap: &str, extra: &str) -> Scenario {
    let text = example("router-pcap");
    let all = "pcap = [\"ingress\", \"egress\", \"drops\"]";
    assert!(text.trim_end().ends_with(all), "router-pcap.toml ends with its [output] table");
    let mut sc = parse(&format!("{}{pcap}\n{extra}", text.trim_end().strip_suffix(all).unwrap())).unwrap();
    sc.capture_dir = Some(dir.to_path_buf());
    sc
}

/// (time ns, length) of every record of `path`.
fn records(path: &Path) -> Vec<(u64, u32)> {
    let mut r = TraceReader::open(path, false).unwrap();
    let mut out = Vec::new();
    while let Some(rec) = r.next().unwrap() {
        out.push((rec.ts_ns, rec.orig_len));
    }
    out
}

/// Each file has as many packets as the summary offered, delivered and dropped; the ingress
/// records are the model's arrivals (time and length, in order, to the nanosecond), the egress
/// records its deliveries in the order they started, at their start, and the drops its drops.
#[test]
fn captures_hold_every_packet_at_the_models_time() {
    let d = tempfile::tempdir().unwrap();
    let sc = scenario(d.path(), "pcap = [\"ingress\", \"egress\", \"drops\"]", "");
    let r = run_scenario(&sc, 3, 1, None, &mut |_| {}).unwrap();
    let (ing, eg, dr) = (
        records(&d.path().join("ingress.pcapng")),
        records(&d.path().join("egress.pcapng")),
        records(&d.path().join("drops.pcapng")),
    );
    assert_eq!(ing.len() as f64, r.get("offered_packets").unwrap());
    assert_eq!(eg.len() as f64, r.get("delivered_packets").unwrap());
    assert_eq!(dr.len() as f64, r.get("dropped_packets").unwrap());
    assert!(dr.len() > 10 && eg.len() > 100, "the scenario drops and delivers: {} {}", dr.len(), eg.len());
    assert_eq!(r.get("pcap_packets.ingress"), Some(ing.len() as f64));
    assert_eq!(r.get("pcap_not_written.drops"), Some(0.0));
    // The model's own account of each packet, from the traced run of the same seed.
    let rs = sc.spec_as::<RouterSpec>().unwrap();
    let mut p = rs.params.clone();
    (p.duration, p.sample_every) = (sc.duration, sc.sample_every());
    let (_, trace) = run_traced(&p, &rs.traffic(sc.duration).unwrap(), 3).unwrap();
    let arrivals: Vec<(u64, u32)> = trace.iter().map(|t| (t.arrival, t.len)).collect();
    assert_eq!(ing, arrivals, "ingress: the model's arrivals");
    let mut delivered: Vec<u64> = trace.iter().filter_map(|t| t.delivered).collect();
    delivered.sort_unstable();
    // A delivery's last bit leaves after its start, by its serialization at 1 Gbps.
    let mut ends: Vec<u64> = eg.iter().map(|&(t, len)| t + len as u64 * 8).collect();
    ends.sort_unstable();
    assert_eq!(ends.len(), delivered.len());
    for (e, d) in ends.iter().zip(&delivered) {
        assert!(e.abs_diff(*d) <= 1, "a delivery ends {d} ns, its record starts it {e} ns before the end");
    }
}

/// The limit: each file stops at `pcap_limit` packets, counts the rest and says when it was
/// cut (the first packet not written); a port not asked for has no file.
#[test]
fn captures_stop_at_the_limit_and_say_where() {
    let d = tempfile::tempdir().unwrap();
    let sc = scenario(d.path(), "pcap = [\"ingress\"]", "pcap_limit = 100\npcap_snaplen = \"64B\"\n");
    let r = run_scenario(&sc, 3, 1, None, &mut |_| {}).unwrap();
    let ing = records(&d.path().join("ingress.pcapng"));
    assert_eq!(ing.len(), 100);
    let offered = r.get("offered_packets").unwrap();
    assert_eq!(r.get("pcap_not_written.ingress"), Some(offered - 100.0));
    let full = tempfile::tempdir().unwrap();
    let all = records(&{
        let sc = scenario(full.path(), "pcap = [\"ingress\"]", "");
        run_scenario(&sc, 3, 1, None, &mut |_| {}).unwrap();
        full.path().join("ingress.pcapng")
    });
    assert_eq!(r.get("pcap_cut_at.ingress"), Some(all[100].0 as f64 * 1e-9), "cut at the 101st packet");
    assert!(!d.path().join("egress.pcapng").exists());
}

/// `[output]`'s keys: defaults, written back, and refused with what was wrong.
#[test]
fn output_keys_round_trip_and_are_checked() {
    let sc = parse("model = \"router\"\n").unwrap();
    let o = &sc.spec_as::<RouterSpec>().unwrap().output;
    assert_eq!((o.pcap.len(), o.pcap_limit, o.pcap_snaplen), (0, 1_000_000, 128));
    assert_round_trips(["model = \"router\"\n[output]\npcap = [\"drops\", \"ingress\"]\npcap_limit = 5\n".to_string()]);
    for (text, says) in [
        ("pcap = [\"wire\"]", "output.pcap"),
        ("pcap = \"ingress\"", "output.pcap"),
        ("pcap_limit = 0", "output.pcap_limit"),
        ("pcap_snaplen = \"10B\"", "output.pcap_snaplen"),
        ("pcap_snaplen = \"1MB\"", "output.pcap_snaplen"),
        ("snaplen = 100", "output.snaplen"),
    ] {
        let e = parse(&format!("model = \"router\"\n[output]\n{text}\n")).unwrap_err();
        assert!(e.contains(says), "{text}: {e}");
    }
    // Without a results directory (the Python API, a test), a capture is refused.
    let sc = parse("model = \"router\"\n[run]\nduration = \"1ms\"\n[output]\npcap = [\"ingress\"]\n").unwrap();
    let e = run_scenario(&sc, 1, 1, None, &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("results directory"), "{e}");
}
