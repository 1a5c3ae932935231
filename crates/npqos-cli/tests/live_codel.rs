//! CoDel in `npqos live` on real frames (docs/codel.md): the namespace bed, 8 UDP flows offered
//! 20 Mbps each and shaped to 10 Mbps with `aqm = "codel"`. ECN-capable datagrams (the
//! sender's TOS ECT(0)) with `ecn = true` arrive marked CE, as many as npqos live counted, none
//! dropped by CoDel; Not-ECT ones are dropped at the queues' heads instead. Skipped, with the
//! reason printed, when not root or when namespaces cannot be made.

#![cfg(target_os = "linux")]

mod common;

use npqos_cli::live::netns::{self, Bed, FlowSeen};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One run on a fresh bed with datagrams of TOS `tos`: sent, what the receiver saw of each
/// flow (frames, CE frames, rate, reordering), and npqos live's scalars.
fn run(tag: &str, tos: u8) -> (u64, Vec<FlowSeen>, serde_json::Value) {
    let bed = Bed::new(&format!("{tag}{}", std::process::id() % 10_000)).unwrap();
    let cfg = "[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"5s\"\n\
               [shaper]\nflow_rate = \"10Mbps\"\naqm = \"codel\"\necn = true\n\
               [table]\nblocks = 262144\nqueue_limit = \"256KiB\"\n";
    let (dir, mut child) = common::live_in_bed(&bed, cfg);
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let rcv = netns::in_ns(&bed.rcv, move || netns::receive("r0", &s2));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let srcs = vec![netns::SENDER_IP; 8];
    let snd = netns::in_ns(&bed.snd, move || {
        netns::send_udp_tos(&srcs, netns::RECEIVER_IP, 20_000_000, 1000, 3_000_000_000, tos)
    });
    let off = snd.join().unwrap().unwrap().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(600));
    stop.store(true, Ordering::Relaxed);
    let got = rcv.join().unwrap().unwrap().unwrap();
    assert!(child.wait().unwrap().success());
    let text = std::fs::read_to_string(dir.path().join("out/summary.json")).unwrap();
    let summary: serde_json::Value = serde_json::from_str(&text).unwrap();
    let flows = (0..8u32).map(|i| got.flows.get(&i).copied().unwrap_or_default()).collect();
    (off.sent.iter().sum(), flows, summary["runs"][0]["scalars"].clone())
}

#[test]
fn ecn_capable_frames_arrive_marked_and_others_are_dropped_at_the_head() {
    if let Some(why) = netns::unavailable() {
        println!("SKIPPED npqos live CoDel namespace test: {why}");
        return;
    }
    for (tos, name) in [(0x02u8, "ECT(0)"), (0x00, "Not-ECT")] {
        let (sent, flows, sc) = run("cd", tos);
        let g = |k: &str| sc[k].as_f64().unwrap_or_else(|| panic!("no scalar {k}"));
        let received: u64 = flows.iter().map(|f| f.frames).sum();
        let ce: u64 = flows.iter().map(|f| f.ce).sum();
        let dropped: f64 = ["unclassified", "ingress_buffer_full", "ingress_no_queue", "ingress_queue_full"]
            .iter()
            .chain(&["exceeds_bucket", "oversize", "codel"])
            .map(|k| g(&format!("dropped_{k}")))
            .sum();
        println!(
            "{name}: sent {sent}, received {received} ({ce} CE), npqos live marked {} and dropped {} at the heads \
             ({} at the queue limit); flows {} Mbps",
            g("ecn_marked"),
            g("dropped_codel"),
            g("dropped_ingress_queue_full"),
            flows.iter().map(|f| format!("{:.3}", f.rate_bps().unwrap_or(0.0) / 1e6)).collect::<Vec<_>>().join(" ")
        );
        assert_eq!(sent, received + dropped as u64 + g("dropped_rx_ring") as u64, "every frame accounted");
        for (i, f) in flows.iter().enumerate() {
            let r = f.rate_bps().unwrap_or(0.0);
            assert!((r / 10e6 - 1.0).abs() < 0.02, "{name}: flow {i} at {:.3} Mbps", r / 1e6);
            assert_eq!(f.reordered, 0, "{name}: flow {i} reordered");
        }
        if tos == 0x02 {
            assert!(ce > 50, "CoDel marked frames on the wire: {ce}");
            assert_eq!(ce as f64, g("ecn_marked"), "every mark counted reached the receiver");
            assert_eq!(g("dropped_codel"), 0.0);
        } else {
            assert_eq!((ce, g("ecn_marked")), (0, 0.0));
            assert!(g("dropped_codel") > 50.0, "CoDel dropped at the heads");
        }
    }
}
