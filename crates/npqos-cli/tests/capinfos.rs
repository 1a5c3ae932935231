//! `npqos trace stats` against an independent oracle: Wireshark's `capinfos`, on every capture
//! in ../shared/traces/ndpi. Skipped, with the reason printed, when either is absent.
//!
//! Files capinfos reads cleanly: our packet count must equal its count exactly. Files capinfos
//! reports as damaged (non-zero exit, e.g. "cut short in the middle of a packet"): our strict
//! mode must fail with exit code 2 naming the file, and in lenient mode our packets plus the
//! corrupt records we skipped must equal capinfos' count (capinfos counts the partial record).

mod common;
use common::*;
use std::process::Command;

fn capinfos_count(path: &std::path::Path) -> (u64, bool) {
    let o = Command::new("capinfos").args(["-c", "-M", "-T", "-r"]).arg(path).output().expect("capinfos runs");
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text.lines().last().unwrap_or_default();
    let n = line
        .split('\t')
        .nth(1)
        .and_then(|x| x.trim().parse().ok())
        .unwrap_or_else(|| panic!("capinfos output for {}: {text}", path.display()));
    (n, o.status.success())
}

#[test]
fn packet_counts_agree_with_capinfos_on_every_ndpi_capture() {
    let Some(dir) = ndpi_dir() else {
        skip("packet_counts_agree_with_capinfos", "../shared/traces/ndpi is absent");
        return;
    };
    if Command::new("capinfos").arg("-h").output().is_err() {
        skip("packet_counts_agree_with_capinfos", "capinfos is not installed (apt-get install tshark)");
        return;
    }
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let (mut clean, mut damaged) = (0, 0);
    for f in &files {
        let (want, ok) = capinfos_count(f);
        let p = f.to_str().unwrap();
        if ok {
            let o = run(&["trace", "stats", "--json", p]);
            assert!(o.status.success(), "{p}: {}", stderr(&o));
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(v[0]["packets"].as_u64(), Some(want), "{p}");
            assert_eq!(
                v[0]["packets"].as_u64(),
                Some(v[0]["ip_packets"].as_u64().unwrap() + v[0]["non_ip_packets"].as_u64().unwrap())
            );
            clean += 1;
        } else {
            let o = run(&["trace", "stats", p]);
            assert_eq!(o.status.code(), Some(2), "{p}: strict mode must refuse a damaged file");
            assert!(stderr(&o).contains(p) && stderr(&o).contains("byte "), "{}", stderr(&o));
            let o = run(&["trace", "stats", "--lenient", "--json", p]);
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(v[0]["packets"].as_u64().unwrap() + v[0]["corrupt_skipped"].as_u64().unwrap(), want, "{p}");
            damaged += 1;
        }
    }
    eprintln!("capinfos agreement: {clean} clean files equal, {damaged} damaged files accounted for");
    assert!(clean > 100);
}
