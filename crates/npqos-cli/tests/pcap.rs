//! Packet captures of simulated ports read by Wireshark's tools (docs/router.md, "Packet
//! captures"): `npqos run scenarios/router-pcap.toml` (a router scenario with `[output] pcap`), then `capinfos` counts
//! each file and `tshark` reads the drops' reasons and the ingress records' times and flows.
//! Skipped, with the reason printed, without tshark.

mod common;
use common::*;
use std::process::Command;

fn tool(name: &str, args: &[&str], file: &std::path::Path) -> String {
    let o = Command::new(name).args(args).arg(file).output().unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(o.status.success(), "{name} {}: {}", file.display(), String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// capinfos counts as many packets in each file as the summary's offered, delivered and
/// dropped; tshark finds each drop's reason in its comment, as many of each as the summary's
/// `dropped_<reason>`, and reads the ingress records' flows (IPv4, TCP or UDP) at nanosecond
/// times from the run's 0.
#[test]
fn wireshark_reads_the_captures_of_a_run() {
    if Command::new("tshark").arg("-v").output().is_err() || Command::new("capinfos").arg("-h").output().is_err() {
        skip("wireshark_reads_the_captures_of_a_run", "tshark / capinfos are not installed (apt-get install tshark)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let sc = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/router-pcap.toml");
    let out = d.path().join("out");
    let o = run(&["run", sc.to_str().unwrap(), "--out", out.to_str().unwrap(), "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let get = |k: &str| summary["runs"][0]["scalars"][k].as_f64().unwrap_or_else(|| panic!("{k} in {summary}"));
    for (port, key) in [("ingress", "offered_packets"), ("egress", "delivered_packets"), ("drops", "dropped_packets")] {
        let text = tool("capinfos", &["-c", "-M", "-T", "-r"], &out.join(format!("pcap/{port}.pcapng")));
        let n: f64 = text.lines().last().unwrap().split('\t').nth(1).unwrap().trim().parse().unwrap();
        assert_eq!(n, get(key), "{port}: capinfos {n}, summary {key}");
    }
    let comments = tool("tshark", &["-T", "fields", "-e", "frame.comment", "-r"], &out.join("pcap/drops.pcapng"));
    let mut reasons = std::collections::BTreeMap::<String, f64>::new();
    for c in comments.lines().filter(|l| !l.is_empty()) {
        *reasons.entry(c.to_string()).or_default() += 1.0;
    }
    assert!(reasons.len() >= 2, "drops for more than one reason: {reasons:?}");
    for (reason, n) in &reasons {
        assert_eq!(*n, get(&format!("dropped_{reason}")), "{reason}");
    }
    let first = tool(
        "tshark",
        &["-c", "5", "-T", "fields", "-e", "frame.time_epoch", "-e", "ip.proto", "-e", "frame.len", "-r"],
        &out.join("pcap/ingress.pcapng"),
    );
    for line in first.lines() {
        let v: Vec<&str> = line.split('\t').collect();
        assert!(v[0].starts_with("0.0000"), "the run's first microseconds, to the ns: {line}");
        assert_eq!(v[0].len(), "0.000000000".len(), "nanosecond digits: {line}");
        assert!(v[1] == "6" || v[1] == "17", "TCP or UDP: {line}");
    }
}
