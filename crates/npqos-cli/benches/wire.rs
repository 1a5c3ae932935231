//! The simulator checked against the wire (docs/live.md, "The simulator against the wire"): one
//! live configuration and one capture, run twice (`npqos_cli::live::wire::compare`): `npqos run`
//! of the router scenario that `npqos live CONFIG --as-scenario CAPTURE` writes, and `npqos live
//! CONFIG` on the namespace bed with tcpreplay sending the capture through it at the capture's
//! timing. Prints, per service, what each delivered and dropped and the delay percentiles side
//! by side, and whether the two resolved configurations are the same router. Needs root and
//! tcpreplay.
//!
//! `cargo bench -p npqos-cli --bench wire`: a synthetic capture made here (16 UDP flows for 10
//! s, two services) and `wa_video.pcap` and `KakaoTalk_talk.pcap` (Linux SLL framing, rewritten
//! to Ethernet) of `../shared/traces/ndpi` (skipped without them); `NPQOS_WIRE_CAPTURE=path`
//! and `NPQOS_WIRE_CONFIG=path` (its [shaper] / [[services]] / [table]) run another capture and
//! configuration instead.

#[cfg(target_os = "linux")]
fn main() {
    use npqos_cli::live::{netns, wire};
    use std::path::{Path, PathBuf};
    if let Some(why) = wire::unavailable() {
        println!("SKIPPED the wire benchmark: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut cases: Vec<(String, PathBuf, String)> = Vec::new();
    if let Ok(cap) = std::env::var("NPQOS_WIRE_CAPTURE") {
        let cfg = std::env::var("NPQOS_WIRE_CONFIG").map(|p| std::fs::read_to_string(p).unwrap());
        cases.push((cap.clone(), cap.into(), cfg.unwrap_or_else(|_| "[shaper]\nflow_rate = \"1Mbps\"\n".into())));
    } else {
        let synthetic = dir.path().join("synthetic.pcap");
        wire::synthetic_capture(&synthetic, 16, 10.0, 1.5e6, 42).unwrap();
        cases.push(("synthetic: 16 UDP flows of 1.5 Mbps for 10 s".into(), synthetic, SYNTHETIC.into()));
        let ndpi = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/ndpi");
        for (file, cfg) in [("wa_video.pcap", NDPI), ("KakaoTalk_talk.pcap", NDPI_SLOW)] {
            match ndpi.join(file).exists() {
                true => cases.push((format!("nDPI {file}"), ndpi.join(file), cfg.into())),
                false => println!("SKIPPED {file}: {} is absent", ndpi.join(file).display()),
            }
        }
    }
    let mid_cpu = if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 { 1 } else { 0 };
    let npqos = PathBuf::from(std::env::var_os("NPQOS_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_npqos").into()));
    for (i, (name, cap, cfg)) in cases.iter().enumerate() {
        let bed = netns::Bed::new(&format!("w{}", std::process::id() % 100_000)).unwrap();
        // 10 s: longer than the slowest full queue takes to leave (16 KiB at 16 kbps: 8.2 s).
        let drain = std::time::Duration::from_secs(10);
        let c = wire::compare(&npqos, &bed, cap, cfg, &dir.path().join(format!("case{i}")), mid_cpu, drain).unwrap();
        println!("\n### {name}: {} packets over {:.2} s\n", c.packets, c.span.as_secs_f64());
        println!("tcpreplay: {}", c.replay);
        match c.diff.is_empty() {
            true => {
                println!("resolved configurations (the live run's as a router scenario, the simulator's): identical\n")
            }
            false => println!("resolved configurations differ:\n```\n{}```\n", c.diff),
        }
        print!("{}", c.table());
    }
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("SKIPPED the wire benchmark: npqos live is Linux only");
}

/// Two services by destination port, every flow shaped below what it offers (1.5 Mbps).
#[cfg(target_os = "linux")]
const SYNTHETIC: &str = "[[services]]\nname = \"gold\"\ndst_ports = [10000]\nrate = \"1.2Mbps\"\n\
[[services]]\nname = \"silver\"\nrate = \"800kbps\"\n[table]\nqueue_limit = \"16KiB\"\n";

/// wa_video.pcap: UDP flows at 48 kbps each, the rest at 32 kbps each.
#[cfg(target_os = "linux")]
const NDPI: &str = "[[services]]\nname = \"udp\"\nprotocols = [\"udp\"]\nrate = \"48kbps\"\n\
[[services]]\nname = \"rest\"\nrate = \"32kbps\"\n[table]\nqueue_limit = \"16KiB\"\n";

/// KakaoTalk_talk.pcap (45 kbps in all over 76 s): UDP flows at 16 kbps each, the rest at 8.
#[cfg(target_os = "linux")]
const NDPI_SLOW: &str = "[[services]]\nname = \"udp\"\nprotocols = [\"udp\"]\nrate = \"16kbps\"\n\
[[services]]\nname = \"rest\"\nrate = \"8kbps\"\n[table]\nqueue_limit = \"16KiB\"\n";
