//! `npqos live` on every core (docs/live.md, "Every core"): the namespace bed with 1 and 2
//! forwarding threads, each flow's rate and a class's rate whose flows the kernel spreads over
//! both threads, every frame accounted per thread and in total, none reordered. Skipped, with
//! the reason printed, when not root or when namespaces cannot be made.

#![cfg(target_os = "linux")]

mod common;

use npqos_cli::live::netns::{self, Bed, Received};

const PAYLOAD: usize = 1000;

/// One bed at a time: the tests' rates are held within 2%, on 2 cores.
static ONE_BED: std::sync::Mutex<()> = std::sync::Mutex::new(());
const SEND_NS: u64 = 3_000_000_000;

/// One run on a fresh bed: npqos live on `io`'s sockets with `threads` threads and `shaping`
/// (its `[shaper]` or `[[services]]`), `flows` UDP flows each offered `offered_bps`. What was
/// sent, what arrived, and the run's scalars. With AF_XDP each veth has a queue per thread.
fn run(io: &str, threads: u32, shaping: &str, flows: u32, offered_bps: u64) -> (u64, Received, serde_json::Value) {
    let tag = format!("{}{}{threads}{}", &io[..1], &shaping[3..4], std::process::id() % 10_000);
    let bed = if io == "xdp" { Bed::with_queues(&tag, threads) } else { Bed::new(&tag) }.unwrap();
    let cfg = format!(
        "[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"5s\"\nthreads = {threads}\nio = \"{io}\"\n\
         [table]\nblocks = 65536\nqueue_limit = \"32KiB\"\n{shaping}"
    );
    let (dir, mut child) = common::live_in_bed(&bed, &cfg);
    let (off, got) = netns::offer_udp(&bed, flows, offered_bps, PAYLOAD, SEND_NS);
    let status = child.wait().unwrap();
    assert!(status.success(), "npqos live exited with {status}");
    let text = std::fs::read_to_string(dir.path().join("out/summary.json")).unwrap();
    let summary: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(off.send_errors, 0, "the sender's sends");
    (off.sent.iter().sum(), got, summary["runs"][0]["scalars"].clone())
}

/// Every frame the sender sent is received or dropped by a named reason, in total and per
/// thread: the threads' receive rings took every frame, and each frame a ring took went into a
/// pipeline (its thread's, or the one its bucket's owner runs) or was dropped at a full lane.
fn accounted(threads: u32, sent: u64, got: &Received, sc: &serde_json::Value) -> String {
    let g = |k: &str| sc[k].as_f64().unwrap_or_else(|| panic!("no scalar {k}")) as u64;
    let dropped: u64 = ["unclassified", "ingress_buffer_full", "ingress_no_queue", "ingress_queue_full", "oversize"]
        .iter()
        .map(|k| g(&format!("dropped_{k}")))
        .sum::<u64>()
        + g("dropped_exceeds_bucket");
    let received: u64 = got.flows.values().map(|f| f.frames).sum();
    let (rx, ring) = (g("rx_frames"), g("dropped_rx_ring"));
    assert_eq!(g("threads"), threads as u64);
    let f = |k: &str| sc[k].as_f64().unwrap_or_else(|| panic!("no scalar {k}"));
    let (cpu, user) = (f("forwarding_cpu"), f("forwarding_cpu_user"));
    // Not `user > 0`: without CONFIG_VIRT_CPU_ACCOUNTING_GEN (this bed's kernel) `ru_utime` is
    // the thread's run time split by which mode 250 Hz ticks found it in, and a run of 44 ms
    // of CPU, mostly in the kernel's send and poll, had every tick in the kernel (CI at 83b3e47).
    assert!(user <= cpu + 1e-3, "user-space CPU {user} s within the threads' CPU {cpu} s");
    assert!(cpu > 0.0, "the threads' CPU time {cpu} s");
    assert!(g("forwarding_sleeps") > 0, "the threads slept between the sender's frames");
    let (turns, empty) = (g("forwarding_turns"), g("forwarding_empty_turns"));
    assert!(turns > empty && empty > 0, "{empty} of {turns} turns found nothing to do");
    if threads > 1 {
        let sum = |k: &str| (0..threads).map(|i| f(&format!("{k}.{i}"))).sum::<f64>();
        assert!((sum("thread_cpu_user") - user).abs() < 1e-6, "the threads' user-space CPU together");
        assert_eq!(sum("thread_sleeps") as u64, g("forwarding_sleeps"), "the threads' sleeps together");
        assert_eq!(sum("thread_turns") as u64, turns, "the threads' turns together");
        assert_eq!(sum("thread_empty_turns") as u64, empty, "the threads' empty turns together");
    }
    let handoff_full = if threads > 1 { g("dropped_handoff_full") } else { 0 };
    assert_eq!(sent, received + dropped + ring + handoff_full, "every frame accounted: sent = received + dropped");
    assert_eq!(rx + ring, sent, "the receive rings took every frame the sender sent, or dropped it");
    if threads == 1 {
        assert_eq!(g("frames_in"), rx, "the one thread's pipeline took every frame");
        return format!("{rx} frames in one thread");
    }
    let per = |k: &str| (0..threads).map(|i| g(&format!("{k}.{i}"))).collect::<Vec<u64>>();
    let (rings, ins, handed, taken) =
        (per("thread_rx_frames"), per("thread_frames_in"), per("thread_handed_over"), per("thread_taken_over"));
    assert_eq!(rings.iter().sum::<u64>(), rx, "the threads' rings together");
    assert_eq!(ins.iter().sum::<u64>(), g("frames_in"), "the threads' pipelines together");
    assert_eq!(g("frames_in") + handoff_full, rx, "every frame a ring took went into a pipeline");
    assert_eq!(handoff_full, 0, "no lane between the threads filled at these rates");
    assert_eq!(handed.iter().sum::<u64>(), taken.iter().sum::<u64>(), "frames handed over are frames taken over");
    for i in 0..threads as usize {
        assert_eq!(ins[i], rings[i] - handed[i] + taken[i], "thread {i}: its ring's frames, less handed, plus taken");
    }
    format!("rings {rings:?}, pipelines {ins:?}, handed over {handed:?}")
}

/// 1 and 2 threads: 8 flows offered 20 Mbps each, shaped per flow to 10 Mbps (each within 2%),
/// then 16 flows offered 1 Mbps each in one class of 8 Mbps (`rate_per = "class"`, one bucket
/// for all of them: with 2 threads the kernel spreads the flows over both, and the frames of
/// the thread that does not own the bucket are handed to the one that does) within 2% in all;
/// no flow reordered, every frame accounted per thread and in total.
#[test]
fn one_and_two_threads_hold_each_flows_rate_and_a_class_rate_across_threads() {
    let _one_bed = ONE_BED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = netns::unavailable() {
        println!("SKIPPED npqos live threads namespace test: {why}");
        return;
    }
    for threads in [1u32, 2] {
        flows_and_class("ring", threads);
    }
}

/// The same on AF_XDP sockets (`io = "xdp"`) with 2 threads: the sender's veth spreads the
/// flows over its 2 queues, the XDP program each queue's frames to its thread's socket. (One
/// thread on AF_XDP: live.rs's `on_af_xdp_ping_arp_and_tcp_work_both_ways`; both cost 5.5 s
/// a run of CI's time.)
#[test]
fn on_af_xdp_one_and_two_threads_hold_each_flows_rate_and_a_class_rate() {
    let _one_bed = ONE_BED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = netns::unavailable().or_else(netns::xdp_unavailable) {
        println!("SKIPPED npqos live AF_XDP threads namespace test: {why}");
        return;
    }
    flows_and_class("xdp", 2);
    // More receive queues than threads is refused (exit 2): a queue no thread binds would pass
    // its frames to the kernel's stack, unforwarded.
    let bed = Bed::with_queues(&format!("xq{}", std::process::id() % 10_000), 2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = "[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"1s\"\nthreads = 1\nio = \"xdp\"\n\
               [shaper]\nflow_rate = \"1Mbps\"\n";
    std::fs::write(dir.path().join("live.toml"), cfg).unwrap();
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &bed.mid, env!("CARGO_BIN_EXE_npqos"), "live"])
        .arg(dir.path().join("live.toml"))
        .args(["--out", &dir.path().join("out").display().to_string(), "--quiet"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    println!("2 queues, 1 thread: {:?}, {}", out.status.code(), err.trim());
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("in0 has 2 receive queues") && err.contains("ethtool -L in0 combined 1"), "{err}");
}

fn flows_and_class(io: &str, threads: u32) {
    let (sent, got, sc) = run(io, threads, "[shaper]\nflow_rate = \"10Mbps\"\n", 8, 20_000_000);
    let how = accounted(threads, sent, &got, &sc);
    let rates: Vec<f64> = (0..8).map(|i| got.flows.get(&i).and_then(|f| f.rate_bps()).unwrap_or(0.0)).collect();
    println!(
        "{io}, {threads} thread(s), per flow: {} Mbps; {how}",
        rates.iter().map(|r| format!("{:.3}", r / 1e6)).collect::<Vec<_>>().join(" ")
    );
    for (i, r) in rates.iter().enumerate() {
        assert!((r / 10e6 - 1.0).abs() < 0.02, "{io}, {threads} threads: flow {i} at {:.3} Mbps", r / 1e6);
        assert_eq!(got.flows[&(i as u32)].reordered, 0, "{io}, {threads} threads: flow {i} reordered");
    }

    let class = "[[services]]\nname = \"class\"\nprotocols = [\"udp\"]\nrate = \"8Mbps\"\nrate_per = \"class\"\n";
    let (sent, got, sc) = run(io, threads, class, 16, 1_000_000);
    let how = accounted(threads, sent, &got, &sc);
    let sum: f64 = got.flows.values().filter_map(|f| f.rate_bps()).sum();
    println!("{io}, {threads} thread(s), a class of 16 flows at 8 Mbps: {:.3} Mbps; {how}", sum / 1e6);
    assert!((sum / 8e6 - 1.0).abs() < 0.02, "{io}, {threads} threads: the class at {:.3} Mbps", sum / 1e6);
    assert_eq!(got.flows.len(), 16, "every flow got through");
    assert!(got.flows.values().all(|f| f.reordered == 0), "{io}, {threads} threads: a flow reordered");
    if threads == 2 {
        let g = |k: &str| sc[k].as_f64().unwrap_or(0.0);
        assert!(g("thread_rx_frames.0") > 0.0 && g("thread_rx_frames.1") > 0.0, "the class's flows on both threads");
        assert!(g("handed_over") > 0.0, "frames handed to the bucket's owner");
    }
}
