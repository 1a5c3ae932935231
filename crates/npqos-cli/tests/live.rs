//! `npqos live` on real frames: three network namespaces joined by veth pairs (a sender, the
//! middle box, a receiver), 8 UDP flows offered at twice their shaped rate. The same bed with
//! the kernel's htb in the middle gives the comparison. Skipped, with the reason printed, when
//! not root or when namespaces cannot be made.

#![cfg(target_os = "linux")]

use npqos_cli::live::netns::{self, Bed, Received};
use npqos_cli::live::notify;
use std::collections::HashMap;
use std::io::Write;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The namespace tests run one at a time: the rate test measures to 2%, and another test's
/// traffic on the same two cores would be in its measurement.
static ONE_BED: std::sync::Mutex<()> = std::sync::Mutex::new(());

const FLOWS: u32 = 8;
const RATE: f64 = 10e6;
const OFFERED: u64 = 20_000_000;
const PAYLOAD: usize = 1000;
const SEND_NS: u64 = 3_000_000_000;
/// Bytes each flow may queue: in npqos live `[table] queue_limit`, in htb each class's bfifo.
const LIMIT: u64 = 32 * 1024;
/// [`LIMIT`] of the rate test, which measures first frame to last: 128 KiB, 105 ms at 10 Mbps.
/// Its sender is a thread of this test on the two cores the forwarder uses; a stall of the
/// sender longer than the queue holds leaves the queue empty and the shaper idle for no fault
/// of its own. CI at 48d1916 lost 55-60 ms per flow that way or by a stall of the forwarder
/// (32 KiB held 26 ms); the table now prints the sender's lateness to tell which.
const RATE_LIMIT: u64 = 128 * 1024;
/// A sender this far behind its schedule is taken as a stall of the machine. In the local runs
/// of the rate test (2026-11-28) it kept within 0.1-2.7 ms, once 17.6 ms with every flow still
/// on its rate (the queue covered it). CI at 201bda7 and in the fifteenth session had it 33.5
/// and 33.0 ms late, each time with a gap of 37.4 and 35.1 ms in a flow and that flow short of
/// the rate first to last (9.767 Mbps at 201bda7): frames stopped reaching the receiver too,
/// and a bucket cannot send afterwards what it could not send then.
const STALLED_NS: u64 = 10_000_000;

struct Outcome {
    sent: Vec<u64>,
    send_errors: u64,
    /// The sender's most lateness behind its schedule, ns.
    late_ns: u64,
    got: Received,
    /// Per flow, dropped by reason (npqos live) or in total (htb: per qdisc, summed).
    dropped: Vec<u64>,
    drop_text: String,
}

/// Starts `npqos live` in the bed's middle namespace with the configuration `cfg`, its results
/// in the returned directory's `out`, and gives it half a second to open its rings.
fn start_live(bed: &Bed, cfg: &str) -> (tempfile::TempDir, std::process::Child) {
    start_live_with(bed, cfg, false)
}

/// [`start_live`], its standard error piped to the test when `piped` (it logs a few lines).
fn start_live_with(bed: &Bed, cfg: &str, piped: bool) -> (tempfile::TempDir, std::process::Child) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.toml");
    std::fs::write(&path, cfg).unwrap();
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &bed.mid, env!("CARGO_BIN_EXE_npqos"), "live"])
        .arg(&path)
        .arg("--out")
        .arg(dir.path().join("out"))
        .arg("--quiet");
    // A test may stop it with Ctrl-C (SIGINT): give it SIGINT's default disposition, which a
    // test run started in the background (a non-interactive shell's `&`) would otherwise hand
    // down as "ignored", and npqos live leaves an ignored SIGINT ignored.
    // SAFETY: signal(2) with SIG_DFL is async-signal-safe, called between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    if piped {
        cmd.stderr(std::process::Stdio::piped());
    }
    // Its traffic starts once npqos live says its rings are open (`READY=1`); a start that fails
    // is returned as it is, for the tests that expect one.
    let listener = notify::Listener::bind(&dir.path().join("notify.sock")).unwrap();
    let child = listener.spawn_started(&mut cmd, std::time::Duration::from_secs(30)).unwrap();
    (dir, child)
}

/// [`ping_arp_and_tcp_work_both_ways_without_static_neighbours`]'s first part on `io`'s
/// sockets; the partial checksums the sender's offload leaves are completed on the way.
fn both_ways(bed: &Bed, io: &str) {
    let (s, r) = (bed.snd.clone(), bed.rcv.clone());
    netns::sh(&["ip", "-n", &r, "addr", "add", "198.18.0.2/24", "dev", "r0"]).unwrap();
    netns::sh(&["ip", "-n", &s, "neigh", "del", "198.18.0.2", "dev", "s0"]).unwrap();
    let (dir, mut child) = start_live(
        bed,
        &format!("[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"4s\"\nio = \"{io}\"\n[shaper]\nflow_rate = \"200Mbps\"\n"),
    );
    let out = dir.path().join("out");
    let ping = netns::sh(&["ip", "netns", "exec", &s, "ping", "-c", "5", "-i", "0.2", "-W", "1", "198.18.0.2"]);
    let neigh = netns::sh(&["ip", "-n", &s, "neigh", "show", "198.18.0.2"]).unwrap_or_default();
    const BYTES: usize = 4 << 20;
    let addr = std::net::SocketAddr::from((netns::RECEIVER_IP, netns::DST_BASE));
    let (sent, got) = tcp_transfer(&s, &r, addr, BYTES);
    assert!(child.wait().unwrap().success());
    let summary = summary_of(&out);
    let sc = &summary["runs"][0]["scalars"];
    let get = |k: &str| sc[k].as_f64().unwrap_or(f64::NAN);
    println!(
        "{io}, both ways: ping {:?}; neighbour {neigh:?}; TCP sent {sent:?}, received {got:?} of {BYTES} B intact; forward {} frames out, reverse {} in / {} out (dropped {} full, {} oversize), {} super-frames back",
        ping.as_ref().map(|p| p.lines().find(|l| l.contains("received")).unwrap_or("").to_string()),
        get("frames_out"),
        get("reverse_frames_in"),
        get("reverse_frames_out"),
        get("reverse_dropped_tx_full"),
        get("reverse_dropped_oversize"),
        get("reverse_super_frames"),
    );
    assert!(ping.as_deref().is_ok_and(|p| p.contains("5 received")), "ping through the bridge: {ping:?}");
    assert!(neigh.contains("lladdr") && !neigh.contains("PERMANENT"), "learnt by ARP through the bridge: {neigh}");
    assert_eq!(sent, Ok(()));
    assert_eq!(got, Ok(BYTES), "every byte, intact");
    assert!(get("reverse_frames_out") > 0.0 && get("reverse_dropped_tx_full") == 0.0);
    let dropped =
        get("reverse_dropped_tx_full") + get("reverse_dropped_oversize") + get("reverse_dropped_unclassified");
    assert_eq!(get("reverse_frames_in"), get("reverse_frames_out") + dropped, "the way back: in = out + dropped");
    let csum = get("rx_checksums_completed") + get("reverse_checksums_completed");
    println!("{io}: checksums completed {csum}, receiver TCP InCsumErrors {}", in_csum_errors(&r, "Tcp"));
    assert!(csum > 0.0, "the sender's offload left partial checksums, completed on the way");
    assert_eq!(in_csum_errors(&r, "Tcp"), "0");
    assert_eq!(in_csum_errors(&s, "Tcp"), "0");
}

/// The same on AF_XDP sockets (`io = "xdp"`): the frames leave the kernel's stack at the XDP
/// hook, and nothing marks a partial checksum there; each is completed all the same.
#[test]
fn on_af_xdp_ping_arp_and_tcp_work_both_ways() {
    if no_ping("AF_XDP both-ways") {
        return;
    }
    let Some((_one_bed, bed)) = one_bed("AF_XDP both-ways", "x") else { return };
    if let Some(why) = netns::xdp_unavailable() {
        println!("SKIPPED npqos live AF_XDP both-ways test: {why}");
        return;
    }
    both_ways(&bed, "xdp");
}

/// Whether `ping` is missing (SKIPPED and the reason printed): the tests of neighbour
/// resolution through the bridge need it (`.ci/run` installs it).
fn no_ping(what: &str) -> bool {
    let missing = std::process::Command::new("ping").arg("-V").output().is_err();
    if missing {
        println!("SKIPPED npqos live {what} test: no ping (apt-get install iputils-ping)");
    }
    missing
}

/// The bed of one namespace test, which has it alone (`ONE_BED`), its namespaces named with
/// `tag`; `None`, with SKIPPED and the reason printed, where namespaces cannot be made.
fn one_bed(what: &str, tag: &str) -> Option<(std::sync::MutexGuard<'static, ()>, Bed)> {
    let guard = ONE_BED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = netns::unavailable() {
        println!("SKIPPED npqos live {what} test: {why}");
        return None;
    }
    Some((guard, Bed::new(&format!("{tag}{}", std::process::id() % 100_000)).unwrap()))
}

/// `bytes` bytes (0, 1, 2, ... 255, 0, ...) over one TCP connection from namespace `snd` to
/// a listener at `addr` in namespace `rcv`: what the client's write said, and how many bytes
/// the server received intact (each where it belongs).
fn tcp_transfer(
    snd: &str,
    rcv: &str,
    addr: std::net::SocketAddr,
    bytes: usize,
) -> (Result<(), String>, Result<usize, String>) {
    let server = netns::in_ns(rcv, move || -> Result<usize, String> {
        use std::io::Read;
        let l = std::net::TcpListener::bind(addr).map_err(|e| e.to_string())?;
        let mut c = accept_within(&l, std::time::Duration::from_secs(3))?;
        c.set_read_timeout(Some(std::time::Duration::from_secs(3))).map_err(|e| e.to_string())?;
        let mut v = Vec::new();
        c.read_to_end(&mut v).map_err(|e| format!("after {} B: {e}", v.len()))?;
        Ok(v.iter().enumerate().filter(|&(i, &b)| b == i as u8).count())
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    let client = netns::in_ns(snd, move || -> Result<(), String> {
        use std::io::Write;
        let mut c = std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2))
            .map_err(|e| e.to_string())?;
        c.set_write_timeout(Some(std::time::Duration::from_secs(3))).map_err(|e| e.to_string())?;
        c.write_all(&(0..bytes).map(|i| i as u8).collect::<Vec<u8>>()).map_err(|e| e.to_string())
    });
    (client.join().unwrap().unwrap(), server.join().unwrap().unwrap())
}

/// The results' summary.json in `out`.
fn summary_of(out: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

/// Frames a run of npqos live dropped, every reason together (its scalars `sc`).
fn dropped_all(sc: &serde_json::Value) -> f64 {
    ["unclassified", "ingress_buffer_full", "ingress_no_queue", "ingress_queue_full", "exceeds_bucket", "oversize"]
        .iter()
        .map(|k| sc[format!("dropped_{k}")].as_f64().unwrap_or(f64::NAN))
        .sum()
}

/// The `InCsumErrors` count of `proto` ("Udp", "Tcp") in namespace `ns`'s /proc/net/snmp.
fn in_csum_errors(ns: &str, proto: &str) -> String {
    let snmp = netns::sh(&["ip", "netns", "exec", ns, "cat", "/proc/net/snmp"]).unwrap();
    let rows: Vec<Vec<&str>> =
        snmp.lines().filter(|l| l.starts_with(&format!("{proto}:"))).map(|l| l.split_whitespace().collect()).collect();
    rows[0].iter().position(|h| *h == "InCsumErrors").map_or("?".into(), |i| rows[1][i].to_string())
}

/// Runs the sender and the receiver around whatever forwards in the middle.
fn offer(bed: &Bed) -> (netns::Offered, Received) {
    netns::offer_udp(bed, FLOWS, OFFERED, PAYLOAD, SEND_NS)
}

fn run_npqos(tag: &str, conformance: &str) -> Outcome {
    let bed = Bed::new(tag).unwrap();
    let (dir, mut child) = start_live(&bed, &format!(
            "[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"5s\"\n[shaper]\nflow_rate = \"10Mbps\"\nconformance = \"{conformance}\"\n[table]\nblocks = 65536\nqueue_limit = \"{RATE_LIMIT}B\"\n"
        ));
    let out = dir.path().join("out");
    let (off, got) = offer(&bed);
    let status = child.wait().unwrap();
    assert!(status.success(), "npqos live exited with {status}");
    // flows.csv, the pipeline's rows: run,label,flow,class,kind,offered_packets,...,dropped_<reason>...
    let csv = std::fs::read_to_string(out.join("flows.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no {name} in {header:?}"));
    let (flow_col, kind_col) = (col("flow"), col("kind"));
    let drop_cols: Vec<usize> =
        (0..header.len()).filter(|&i| header[i].starts_with("dropped_") && header[i] != "dropped_packets").collect();
    let mut dropped = vec![0u64; FLOWS as usize];
    let mut reasons: HashMap<String, u64> = HashMap::new();
    for l in lines {
        let c: Vec<&str> = l.split(',').collect();
        assert_eq!(c[kind_col], "exact", "8 flows, all in the exact table: {l}");
        // "198.18.0.1:5000 -> 198.18.2.2:6000 proto 17"
        let ends: Vec<u16> = c[flow_col]
            .split_whitespace()
            .filter_map(|w| w.rsplit_once(':').and_then(|(_, p)| p.parse().ok()))
            .collect();
        let [sp, dp] = ends[..] else { panic!("a flow with two ports: {l}") };
        assert_eq!(sp, netns::FIRST_PORT, "only the test's flows: {l}");
        let i = (dp - netns::DST_BASE) as usize;
        for &k in &drop_cols {
            let n: u64 = c[k].parse().unwrap();
            dropped[i] += n;
            *reasons.entry(header[k].to_string()).or_default() += n;
        }
    }
    // The same rows in results.sqlite, and the one class in classes.csv with every frame.
    let db = rusqlite::Connection::open(out.join("results.sqlite")).unwrap();
    let rows: i64 = db.query_row("SELECT count(*) FROM flows WHERE kind = 'exact'", [], |r| r.get(0)).unwrap();
    assert_eq!(rows, FLOWS as i64, "flows table");
    let classes = std::fs::read_to_string(out.join("classes.csv")).unwrap();
    assert_eq!(classes.lines().count(), 2, "header and the class all: {classes}");
    assert!(classes.lines().nth(1).unwrap().contains(",all,"), "{classes}");
    let summary = summary_of(&out);
    let ring = summary["runs"][0]["scalars"]["dropped_rx_ring"].as_f64().unwrap();
    assert_eq!(ring, 0.0, "the receive ring kept up");
    let mut r: Vec<_> = reasons.into_iter().filter(|(_, n)| *n > 0).collect();
    r.sort();
    let drop_text = r.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ");
    Outcome { sent: off.sent, send_errors: off.send_errors, late_ns: off.max_late_ns, got, dropped, drop_text }
}

fn run_htb(tag: &str) -> Outcome {
    let bed = Bed::new(tag).unwrap();
    bed.kernel_htb(FLOWS, RATE as u64, RATE_LIMIT).unwrap();
    let (off, got) = offer(&bed);
    let total = bed.htb_drops();
    // htb's drops are per class; the test's total accounting uses their sum.
    let mut dropped = vec![0u64; FLOWS as usize];
    dropped[0] = total;
    let (sent, send_errors, late_ns) = (off.sent, off.send_errors, off.max_late_ns);
    Outcome { sent, send_errors, late_ns, got, dropped, drop_text: format!("bfifo {total}") }
}

/// Whether flow `i` of `o` is within 2% of [`RATE`], first to last and over 300 ms periods.
fn flow_on_rate(o: &Outcome, i: u32) -> bool {
    (rate(o, i) / RATE - 1.0).abs() < 0.02 && (span_rate(o, i) / RATE - 1.0).abs() < 0.02
}

/// `run(tag)`; if a flow missed the rate while the sender was more than [`STALLED_NS`] late (a
/// stall of the machine, see there), says so on standard error (past the test harness's
/// capture, so that CI's log shows every rerun) and returns a second run, on a new bed. The
/// caller asserts on what this returns with the same bounds: a shaper that misses the rate
/// without a stall, or again on the rerun, fails.
fn unless_stalled(name: &str, tag: &str, run: impl Fn(&str) -> Outcome) -> Outcome {
    let o = run(tag);
    let missed: Vec<String> = (0..FLOWS)
        .filter(|&i| !flow_on_rate(&o, i))
        .map(|i| format!("flow {i} {:.3}; {:.3}", rate(&o, i) / 1e6, span_rate(&o, i) / 1e6))
        .collect();
    if missed.is_empty() || o.late_ns <= STALLED_NS {
        return o;
    }
    let longest = o.got.flows.values().map(|f| f.max_gap_ns).max().unwrap_or(0);
    // (Not println: the harness keeps a passing test's output to itself.)
    let _ = writeln!(
        std::io::stderr(),
        "{name}: the sender was {:.1} ms late (taken as a stall of the machine; on a quiet bed it is \
         within a few ms), the longest gap in a flow {:.1} ms, and {} Mbps (median of 300 ms \
         periods; first to last): run once more",
        o.late_ns as f64 / 1e6,
        longest as f64 / 1e6,
        missed.join(", ")
    );
    run(&format!("{tag}r"))
}

/// Flow `i`'s rate from its first frame to its last.
fn span_rate(o: &Outcome, i: u32) -> f64 {
    o.got.flows.get(&i).and_then(|f| f.rate_bps()).unwrap_or(0.0)
}

/// Flow `i`'s rate as the median over 300 ms periods ([`netns::Received::steady_rate_bps`]).
fn rate(o: &Outcome, i: u32) -> f64 {
    o.got.steady_rate_bps(i, 3).unwrap_or(0.0)
}

/// Each flow's rate within 2% of the shaped rate, both from first frame to last and as the
/// median over 300 ms periods. CI at 886b1ff once had every send-then-pay flow at 9.761 Mbps
/// first to last (the same bytes short in each, a stall of the machine suspected, not shown),
/// where three local runs the same hour gave 10.007-10.015; CI at 48d1916 had 9.728-9.825
/// (local runs 10.007-10.010). The bound stays; the queue is deeper ([`RATE_LIMIT`]), a
/// failure says how late the sender was and the flow's longest gap, and a run that missed the
/// rate while the sender saw the machine stop is run once more ([`unless_stalled`]).
#[test]
fn npqos_live_shapes_8_flows_to_their_rate_beside_htb() {
    let _one_bed = ONE_BED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = netns::unavailable() {
        println!("SKIPPED npqos live namespace test: {why}");
        return;
    }
    let tag = format!("t{}", std::process::id() % 100_000);
    let stp = unless_stalled("npqos live send-then-pay", &format!("{tag}a"), |t| run_npqos(t, "send-then-pay"));
    let wft = unless_stalled("npqos live wait-for-tokens", &format!("{tag}b"), |t| run_npqos(t, "wait-for-tokens"));
    let htb = unless_stalled("htb", &format!("{tag}c"), run_htb);

    println!(
        "8 UDP flows of {PAYLOAD} B datagrams ({} B frames), each offered {} Mbps for {} s, shaped to {} Mbps",
        PAYLOAD + 42,
        OFFERED / 1_000_000,
        SEND_NS / 1_000_000_000,
        RATE / 1e6
    );
    println!("flow  npqos send-then-pay Mbps  npqos wait-for-tokens Mbps  htb Mbps  (median of 300 ms periods; first to last frame)");
    for i in 0..FLOWS {
        let both = |o: &Outcome| format!("{:.3}; {:.3}", rate(o, i) / 1e6, span_rate(o, i) / 1e6);
        println!("{i:>4}  {:>24}  {:>26}  {:>8}", both(&stp), both(&wft), both(&htb));
    }
    for (name, o) in [("npqos live send-then-pay", &stp), ("npqos live wait-for-tokens", &wft), ("htb", &htb)] {
        let sent: u64 = o.sent.iter().sum();
        let got: u64 = o.got.flows.values().map(|f| f.frames).sum();
        let dropped: u64 = o.dropped.iter().sum();
        let longest = o.got.flows.values().max_by_key(|f| f.max_gap_ns).copied().unwrap_or_default();
        let (gap, gap_at) = (longest.max_gap_ns, longest.max_gap_at_ns);
        println!(
            "{name}: sent {sent} (send errors {}), received {got}, dropped {dropped} ({}), other frames {}; \
             sender at most {:.1} ms late, longest gap in a flow {:.1} ms ({:.3} s after its first frame)",
            o.send_errors,
            o.drop_text,
            o.got.other_frames,
            o.late_ns as f64 / 1e6,
            gap as f64 / 1e6,
            gap_at as f64 / 1e9
        );
        assert_eq!(o.got.ring_drops, 0, "{name}: the receiver's ring kept up");
        assert_eq!(sent, got + dropped, "{name}: every frame accounted for");
        for i in 0..FLOWS {
            let (r, span) = (rate(o, i), span_rate(o, i));
            assert!((r / RATE - 1.0).abs() < 0.02, "{name}: flow {i} at {:.3} Mbps, not within 2% of 10", r / 1e6);
            let gap = o.got.flows.get(&i).map_or(0, |f| f.max_gap_ns) as f64 / 1e6;
            assert!(
                (span / RATE - 1.0).abs() < 0.02,
                "{name}: flow {i} at {:.3} Mbps first to last (sender at most {:.1} ms late, longest gap {gap:.1} ms)",
                span / 1e6,
                o.late_ns as f64 / 1e6
            );
        }
    }
    // Order is asserted for npqos only. The kernel's htb, the reference here, can reorder a
    // flow now and then on this bed: its queue is run on whichever CPU sends or whose watchdog
    // fires, and veth hands each frame to that CPU's backlog, so two frames dequeued on two
    // CPUs may reach the receiver swapped (seen once in CI: htb flow 0, one frame).
    let htb_reordered: u64 = htb.got.flows.values().map(|f| f.reordered).sum();
    println!("reordered frames: htb {htb_reordered} (printed, not asserted: see above)");
    for (name, o) in [("npqos live send-then-pay", &stp), ("npqos live wait-for-tokens", &wft)] {
        for i in 0..FLOWS {
            assert_eq!(o.got.flows[&i].reordered, 0, "{name}: flow {i} reordered");
        }
    }
    // npqos accounts per flow.
    for o in [&stp, &wft] {
        for i in 0..FLOWS {
            assert_eq!(o.sent[i as usize], o.got.flows[&i].frames + o.dropped[i as usize], "flow {i}");
        }
    }
}

/// npqos live on `bed` for 5 s with the 32 KiB queue limit and `services` (`[[services]]`
/// tables), the bed's 8 UDP flows through it: frames sent, what arrived, the results'
/// summary.json and classes.csv.
fn with_services(bed: &Bed, services: &str) -> (u64, Received, serde_json::Value, String) {
    let (dir, mut child) = start_live(
        bed,
        &format!(
            "[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"5s\"\n[table]\nblocks = 65536\nqueue_limit = \"{LIMIT}B\"\n{services}"
        ),
    );
    let out = dir.path().join("out");
    let (off, got) = offer(bed);
    let status = child.wait().unwrap();
    assert!(status.success(), "npqos live exited with {status}");
    let classes = std::fs::read_to_string(out.join("classes.csv")).unwrap();
    (off.sent.iter().sum(), got, summary_of(&out), classes)
}

/// The router's `[[services]]` on the wire: flows 0-3 (destination ports 10000-10003) in
/// `gold` at 10 Mbps each, flows 4-7 in `bronze` at 5 Mbps each, every flow offered 20 Mbps;
/// each flow within 2% of its service's rate, none reordered, every frame accounted, a class
/// row per service (and `unmatched`, which takes the frames no service matches).
#[test]
fn services_shape_each_flow_to_its_services_rate() {
    let Some((_one_bed, bed)) = one_bed("npqos live services namespace test", "sv") else { return };
    let (total, got, summary, classes) = with_services(
        &bed,
        "[[services]]\nname = \"gold\"\nprotocols = [\"udp\"]\ndst_ports = [\"10000-10003\"]\nrate = \"10Mbps\"\n\
         [[services]]\nname = \"bronze\"\nprotocols = [\"udp\"]\nrate = \"5Mbps\"\n",
    );
    let sc = &summary["runs"][0]["scalars"];
    let dropped = dropped_all(sc);
    let received: u64 = got.flows.values().map(|f| f.frames).sum();
    println!("services: sent {total}, received {received}, dropped {dropped}, other frames {}", got.other_frames);
    for i in 0..FLOWS {
        let want = if i < 4 { 10e6 } else { 5e6 };
        let r = got.flows.get(&i).and_then(|f| f.rate_bps()).unwrap_or(0.0);
        println!("flow {i}: {:.3} Mbps (its service's rate {:.0})", r / 1e6, want / 1e6);
        assert!((r / want - 1.0).abs() < 0.02, "flow {i} at {:.3} Mbps, not within 2% of {}", r / 1e6, want / 1e6);
        assert_eq!(got.flows[&i].reordered, 0, "flow {i} reordered");
    }
    assert_eq!(total, received + dropped as u64, "every frame accounted for");
    assert_eq!(sc["flow_rate_configured.gold"].as_f64(), Some(10.0));
    assert_eq!(sc["flow_rate_configured.bronze"].as_f64(), Some(5.0));
    for name in ["gold", "bronze", "unmatched"] {
        assert!(classes.contains(&format!(",{name},")), "{name} in {classes}");
    }
}

/// A subscriber's rate on the wire (`rate_per = "src"`): the bed's 8 UDP flows come from one
/// address, one subscriber shaped to 8 Mbps, every flow offered 20 Mbps: the subscriber within
/// 2% of 8 Mbps and each flow within 5% of its equal share (1 Mbps), none reordered, every
/// frame accounted.
#[test]
fn a_subscribers_flows_share_its_rate_equally() {
    let Some((_one_bed, bed)) = one_bed("npqos live subscriber namespace test", "sb") else { return };
    let (total, got, summary, _) = with_services(
        &bed,
        "[[services]]\nname = \"subscribers\"\nprotocols = [\"udp\"]\nrate = \"8Mbps\"\nrate_per = \"src\"\n",
    );
    let dropped = dropped_all(&summary["runs"][0]["scalars"]);
    let received: u64 = got.flows.values().map(|f| f.frames).sum();
    let rates: Vec<f64> = (0..FLOWS).map(|i| got.flows.get(&i).and_then(|f| f.rate_bps()).unwrap_or(0.0)).collect();
    let sum: f64 = rates.iter().sum();
    println!(
        "one subscriber at 8 Mbps: {:.3} Mbps in all, flows {} Mbps; sent {total}, received {received}, dropped {dropped}",
        sum / 1e6,
        rates.iter().map(|r| format!("{:.3}", r / 1e6)).collect::<Vec<_>>().join(" ")
    );
    assert!((sum / 8e6 - 1.0).abs() < 0.02, "the subscriber at {:.3} Mbps", sum / 1e6);
    for (i, r) in rates.iter().enumerate() {
        assert!((r / 1e6 - 1.0).abs() < 0.05, "flow {i} at {:.3} Mbps, not within 5% of its share 1", r / 1e6);
        assert_eq!(got.flows[&(i as u32)].reordered, 0, "flow {i} reordered");
    }
    assert_eq!(total, received + dropped as u64, "every frame accounted for");
}

/// Two subscribers on the wire (`rate_per = "src"`, 6 Mbps each): subscriber A (198.18.0.1)
/// sends flows 0-5, subscriber B (198.18.0.3, a second address on the sender) flows 6-7, every
/// flow offered 20 Mbps. Each subscriber within 2% of 6 Mbps, whatever its number of flows (host
/// isolation, as cake's and LibreQoS's): A's flows within 5% of 1 Mbps each, B's within 5% of 3;
/// none reordered, every frame accounted.
#[test]
fn two_subscribers_each_get_their_rate_whatever_their_flows() {
    let Some((_one_bed, bed)) = one_bed("npqos live two-subscriber namespace test", "s2") else { return };
    let b = std::net::Ipv4Addr::new(198, 18, 0, 3);
    netns::sh(&["ip", "-n", &bed.snd, "addr", "add", "198.18.0.3/24", "dev", "s0"]).unwrap();
    let (dir, mut child) = start_live(
        &bed,
        &format!(
            "[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"5s\"\n[table]\nblocks = 65536\nqueue_limit = \"{LIMIT}B\"\n\
             [[services]]\nname = \"subscribers\"\nprotocols = [\"udp\"]\nrate = \"6Mbps\"\nrate_per = \"src\"\n"
        ),
    );
    let out = dir.path().join("out");
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let rcv = netns::in_ns(&bed.rcv, move || netns::receive("r0", &s2));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let srcs: Vec<std::net::Ipv4Addr> = (0..FLOWS).map(|i| if i < 6 { netns::SENDER_IP } else { b }).collect();
    let snd =
        netns::in_ns(&bed.snd, move || netns::send_udp_from(&srcs, netns::RECEIVER_IP, OFFERED, PAYLOAD, SEND_NS));
    let off = snd.join().unwrap().unwrap().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(600));
    stop.store(true, Ordering::Relaxed);
    let got = rcv.join().unwrap().unwrap().unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "npqos live exited with {status}");
    let summary = summary_of(&out);
    let dropped = dropped_all(&summary["runs"][0]["scalars"]);
    let received: u64 = got.flows.values().map(|f| f.frames).sum();
    let total: u64 = off.sent.iter().sum();
    let rates: Vec<f64> =
        (0..FLOWS).map(|i| got.flows.get(&i).and_then(|f| f.rate_bps()).unwrap_or(0.0) / 1e6).collect();
    let (a, bb) = (rates[..6].iter().sum::<f64>(), rates[6..].iter().sum::<f64>());
    println!(
        "two subscribers at 6 Mbps: A (6 flows) {a:.3} Mbps, B (2 flows) {bb:.3} Mbps; flows {}; sent {total}, received {received}, dropped {dropped}",
        rates.iter().map(|r| format!("{r:.3}")).collect::<Vec<_>>().join(" ")
    );
    for (name, sum) in [("A", a), ("B", bb)] {
        assert!((sum / 6.0 - 1.0).abs() < 0.02, "subscriber {name} at {sum:.3} Mbps, not within 2% of 6");
    }
    for (i, r) in rates.iter().enumerate() {
        let share = if i < 6 { 1.0 } else { 3.0 };
        assert!((r / share - 1.0).abs() < 0.05, "flow {i} at {r:.3} Mbps, not within 5% of its share {share}");
        assert_eq!(got.flows[&(i as u32)].reordered, 0, "flow {i} reordered");
    }
    assert_eq!(total, received + dropped as u64, "every frame accounted for");
}

/// The value of the Prometheus sample `name{labels}` (labels as written, in order) in `text`.
fn metric(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name_and_labels)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The statistics while it runs (`live.stats` on a UNIX socket): read while the bed's 8 UDP
/// flows go through (offered 20 Mbps each, shaped to 10), the class's rate is within 5% of
/// 80 Mbps and its counters are no more than the run's results; read again after the sender
/// stopped and the queues drained, every counter equals the results' (frames in and out per
/// direction, the class's sent bytes and frames, its drops by reason); `npqos live --stats`
/// prints them as tc would. The socket is its owner's alone and gone after the run.
#[test]
fn statistics_while_it_runs_match_the_results() {
    let Some((_one_bed, bed)) = one_bed("statistics", "st") else { return };
    let sock = tempfile::tempdir().unwrap();
    let at = sock.path().join("npqos.sock");
    let cfg = format!(
        "[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"5s\"\nstats = \"unix:{}\"\n\
         [shaper]\nflow_rate = \"10Mbps\"\n[table]\nblocks = 65536\nqueue_limit = \"{LIMIT}B\"\n",
        at.display()
    );
    let (dir, mut child) = start_live(&bed, &cfg);
    let get = |path: &str| -> String {
        let mut s = std::os::unix::net::UnixStream::connect(&at).expect("the statistics socket");
        std::io::Write::write_all(&mut s, format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes()).unwrap();
        let mut t = String::new();
        std::io::Read::read_to_string(&mut s, &mut t).unwrap();
        assert!(t.starts_with("HTTP/1.0 200"), "{t}");
        t
    };
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&at).unwrap().permissions());
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let rcv = netns::in_ns(&bed.rcv, move || netns::receive("r0", &s2));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let snd = netns::in_ns(&bed.snd, || netns::send_udp(FLOWS, OFFERED, PAYLOAD, SEND_NS));
    std::thread::sleep(std::time::Duration::from_millis(2000));
    let during = get("/metrics");
    let cfg_path = dir.path().join("live.toml");
    let tc = Command::new(env!("CARGO_BIN_EXE_npqos")).arg("live").arg(&cfg_path).arg("--stats").output().unwrap();
    let tc = String::from_utf8_lossy(&tc.stdout).to_string();
    snd.join().unwrap().unwrap().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(900));
    let after = get("/metrics");
    let bad = {
        let mut s = std::os::unix::net::UnixStream::connect(&at).unwrap();
        std::io::Write::write_all(&mut s, b"POST /config HTTP/1.0\r\n\r\n").unwrap();
        let mut t = String::new();
        std::io::Read::read_to_string(&mut s, &mut t).unwrap();
        t
    };
    stop.store(true, Ordering::Relaxed);
    let _ = rcv.join();
    assert!(child.wait().unwrap().success());
    let summary = summary_of(&dir.path().join("out"));
    let sc = &summary["runs"][0]["scalars"];
    let res = |k: &str| sc[k].as_f64().unwrap_or(f64::NAN);
    let m = |t: &str, k: &str| metric(t, k).unwrap_or_else(|| panic!("{k} missing from:\n{}", &t[..t.len().min(3000)]));
    let rate = m(&during, "npqos_class_rate_bits_per_second{direction=\"in\",class=\"all\"}");
    println!(
        "statistics: during the run class rate {:.3} Mbps, frames out {}; after the sender stopped frames in {} out {} (results {} / {}); socket mode {mode:o}\n{tc}",
        rate / 1e6,
        m(&during, "npqos_frames_out_total{direction=\"in\"}"),
        m(&after, "npqos_frames_in_total{direction=\"in\"}"),
        m(&after, "npqos_frames_out_total{direction=\"in\"}"),
        res("frames_in"),
        res("frames_out")
    );
    assert_eq!(mode & 0o777, 0o600, "the owner's alone");
    assert!(!at.exists(), "the socket is removed at the end");
    assert!((rate / 80e6 - 1.0).abs() < 0.05, "class rate {rate} while 8 flows are shaped to 10 Mbps");
    assert!(m(&during, "npqos_frames_out_total{direction=\"in\"}") < res("frames_out"));
    for (k, r) in [
        ("npqos_frames_in_total{direction=\"in\"}", "frames_in"),
        ("npqos_frames_out_total{direction=\"in\"}", "frames_out"),
        ("npqos_class_sent_bytes_total{direction=\"in\",class=\"all\"}", "bytes_out"),
        (
            "npqos_class_dropped_packets_total{direction=\"in\",class=\"all\",reason=\"ingress_queue_full\"}",
            "dropped_ingress_queue_full",
        ),
        ("npqos_frames_in_total{direction=\"back\"}", "no such result"),
    ] {
        if r == "no such result" {
            assert_eq!(metric(&after, k), None, "the way back is passed, not shaped: no counters of its own");
            continue;
        }
        assert_eq!(m(&after, k), res(r), "{k} against the results' {r}");
    }
    let flows = after.lines().filter(|l| l.starts_with("npqos_flow_sent_packets_total{")).count();
    assert!(flows > FLOWS as usize, "a row per flow (and the row past the table): {flows}");
    assert!(tc.contains("class all rate 10.000Mbit per flow") && tc.contains(" Sent "), "{tc}");
    assert!(bad.starts_with("HTTP/1.0 400"), "read-only: {bad}");
}

/// A reload on the wire (SIGHUP): the bed's 8 UDP flows offered 20 Mbps each, shaped to
/// 5 Mbps; at 2 s the file says 10 Mbps and npqos live gets SIGHUP; at 4 s a bad file and
/// SIGHUP again. Before: each flow within 2% of 5 Mbps at the receiver; from a second after
/// the reload: within 2% of 10 Mbps, also after the bad file (refused, the running
/// configuration stays); none reordered; nothing lost because of the change
/// (`reload_dropped_waiting` 0); every frame npqos live took accounted over both
/// configurations' runs. The shaped way back changes with it (2 then 3 Mbps per flow: a run of
/// its own per configuration). A flow's rate is the median of its rates over 300 ms periods
/// ([`netns::Received::steady_rate_bps`]), not over first to last frame: the receiver opens
/// its ring while the flows run, and every flow's first frames then show one gap (12-25 ms
/// here, after the first 2-5 frames; printed: the longest gap per flow), which took 1% off
/// the span's rate here and 2.6% once in CI, every flow by the same bytes.
#[test]
fn a_reload_changes_the_rates_on_the_wire_without_loss() {
    let Some((_one_bed, bed)) = one_bed("reload", "rl") else { return };
    // The way back shaped too: 2 Mbps per flow, then 3 (it changes with the way in).
    let cfg = |rate: &str| {
        let back = if rate == "5Mbps" { "2Mbps" } else { "3Mbps" };
        format!(
            "[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"7s\"\n\
             [shaper]\nflow_rate = \"{rate}\"\n[table]\nblocks = 65536\nqueue_limit = \"{LIMIT}B\"\n\
             [reverse.shaper]\nflow_rate = \"{back}\"\n"
        )
    };
    let (dir, mut child) = start_live_with(&bed, &cfg("5Mbps"), true);
    let path = dir.path().join("live.toml");
    let hup = |pid: u32| {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGHUP) };
    };
    let window = |from_ms: u64, to_ms: u64| {
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let rcv = bed.rcv.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(from_ms));
            let h = netns::in_ns(&rcv, move || netns::receive("r0", &s2));
            std::thread::sleep(std::time::Duration::from_millis(to_ms - from_ms));
            stop.store(true, Ordering::Relaxed);
            h.join().unwrap().unwrap().unwrap()
        })
    };
    let t0 = std::time::Instant::now();
    let (before, after) = (window(300, 1800), window(3000, 5500));
    let snd = netns::in_ns(&bed.snd, || netns::send_udp(FLOWS, OFFERED, PAYLOAD, 6_000_000_000));
    let at = |ms: u64| std::thread::sleep(std::time::Duration::from_millis(ms).saturating_sub(t0.elapsed()));
    at(2000);
    std::fs::write(&path, cfg("10Mbps")).unwrap();
    hup(child.id());
    at(4000);
    std::fs::write(&path, cfg("fast")).unwrap();
    hup(child.id());
    let (before, after) = (before.join().unwrap(), after.join().unwrap());
    snd.join().unwrap().unwrap().unwrap();
    let status = child.wait().unwrap();
    let mut log = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut log).unwrap();
    let out = (status, log);
    assert!(out.0.success(), "npqos live exited with {}: {}", out.0, out.1);
    let summary = summary_of(&dir.path().join("out"));
    let runs = summary["runs"].as_array().unwrap();
    let sc = &runs[0]["scalars"];
    let get = |r: &serde_json::Value, k: &str| r["scalars"][k].as_f64().unwrap_or(f64::NAN);
    let rate = |g: &Received, i: u32| g.steady_rate_bps(i, 3).unwrap_or(0.0) / 1e6;
    let span = |g: &Received, i: u32| g.flows.get(&i).and_then(|f| f.rate_bps()).unwrap_or(0.0) / 1e6;
    let gap = |g: &Received, i: u32| g.flows.get(&i).map_or(0, |f| f.max_gap_ns / 100_000) as f64 / 10.0;
    println!(
        "reload: first to last frame before {:?} Mbps, after {:?} Mbps; longest gaps before {:?} ms, after {:?} ms",
        (0..FLOWS).map(|i| (span(&before, i) * 1e3).round() / 1e3).collect::<Vec<_>>(),
        (0..FLOWS).map(|i| (span(&after, i) * 1e3).round() / 1e3).collect::<Vec<_>>(),
        (0..FLOWS).map(|i| gap(&before, i)).collect::<Vec<_>>(),
        (0..FLOWS).map(|i| gap(&after, i)).collect::<Vec<_>>(),
    );
    println!(
        "reload: median of 300 ms before {:?} Mbps, after {:?} Mbps; reloads {} refused {} in {:.0} us, waited {}, dropped by the change {}, by the queue limit while switching {}; runs {:?}; log: {}",
        (0..FLOWS).map(|i| (rate(&before, i) * 1e3).round() / 1e3).collect::<Vec<_>>(),
        (0..FLOWS).map(|i| (rate(&after, i) * 1e3).round() / 1e3).collect::<Vec<_>>(),
        sc["reloads"], sc["reloads_refused"], get(&runs[0], "reload_time_max"), sc["reload_waited"], sc["reload_dropped_waiting"],
        sc["reload_dropped_queue_full"],
        runs.iter().map(|r| r["label"].as_str().unwrap_or("").to_string()).collect::<Vec<_>>(),
        out.1.lines().filter(|l| l.contains("reload")).collect::<Vec<_>>().join(" | ")
    );
    // Which side a shortfall is on: what each configuration forwarded, and what each window of
    // the receiver saw (CI once saw nothing after the reload, 2026-11-28).
    println!(
        "reload: frames in / out by run {:?}; the receiver's windows saw {} and {} flows, {} and {} other frames, {} and {} frames its ring dropped",
        runs.iter()
            .map(|r| format!(
                "{}: {} / {}",
                r["label"].as_str().unwrap_or(""),
                get(r, "frames_in"),
                get(r, "frames_out")
            ))
            .collect::<Vec<_>>(),
        before.flows.len(),
        after.flows.len(),
        before.other_frames,
        after.other_frames,
        before.ring_drops,
        after.ring_drops
    );
    for i in 0..FLOWS {
        assert!((rate(&before, i) / 5.0 - 1.0).abs() < 0.02, "flow {i} before: {}", rate(&before, i));
        assert!((rate(&after, i) / 10.0 - 1.0).abs() < 0.02, "flow {i} after: {}", rate(&after, i));
        assert_eq!(before.flows[&i].reordered + after.flows[&i].reordered, 0, "flow {i} reordered");
    }
    assert_eq!((get(&runs[0], "reloads"), get(&runs[0], "reloads_refused")), (1.0, 1.0));
    let labels: Vec<&str> = runs.iter().map(|r| r["label"].as_str().unwrap_or("")).collect();
    assert_eq!(labels, ["live", "reverse", "reverse-reload-1", "live-reload-1"]);
    assert_eq!((get(&runs[1], "flow_rate_configured"), get(&runs[2], "flow_rate_configured")), (2.0, 3.0));
    assert_eq!(get(&runs[0], "reload_dropped_waiting"), 0.0, "nothing lost because of the change");
    // Building the new pipeline (its buffer's pages, the shaper's queues) took 6-12 ms here;
    // the goal of 10 ms is met at this table size, not at larger ones (docs/live.md, "Reload").
    // The bound asserted leaves room for a loaded machine.
    assert!(get(&runs[0], "reload_time_max") < 100_000.0, "the new configuration took frames within 100 ms");
    assert!(out.1.contains("shaper.flow_rate"), "the refusal names the key: {}", out.1);
    let ins: f64 = runs.iter().map(|r| get(r, "frames_in")).sum();
    let accounted: f64 =
        runs.iter().map(|r| get(r, "frames_out") + dropped_all(&r["scalars"]) + get(r, "queued_at_end")).sum();
    assert_eq!(ins, accounted, "each configuration accounts for its frames");
    let here = get(&runs[0], "reload_dropped_queue_full") + get(&runs[0], "reload_dropped_waiting");
    assert_eq!(ins + here, get(&runs[0], "rx_frames"), "every frame npqos live took");
}

fn live_cmd(cfg: &str) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.toml");
    std::fs::write(&p, cfg).unwrap();
    Command::new(env!("CARGO_BIN_EXE_npqos")).arg("live").arg(&p).arg("--quiet").output().unwrap()
}

#[test]
fn a_missing_interface_and_a_bad_key_are_bad_input() {
    let o = live_cmd("[live]\ninput = \"npqos-none0\"\noutput = \"npqos-none1\"\nduration = \"1s\"\n[shaper]\nflow_rate = \"10Mbps\"\n");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no network interface named \"npqos-none0\""), "{err}");

    let o = live_cmd(
        "[live]\ninput = \"a\"\noutput = \"b\"\n[shaper]\nflow_rate = \"fast\"\nconformance = \"eventually\"\n",
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for k in ["shaper.flow_rate", "\"fast\"", "shaper.conformance", "\"eventually\"", "send-then-pay"] {
        assert!(err.contains(k), "{k} missing from: {err}");
    }
}

/// `npqos live FILE --stats` with no endpoint to ask: bad input (exit 2) that says why, whether
/// the file serves no statistics or nothing serves them where it says.
#[test]
fn live_stats_without_an_endpoint_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let base = "[live]\ninput = \"a\"\noutput = \"b\"\n[shaper]\nflow_rate = \"1Mbps\"\n";
    let sock = dir.path().join("none.sock");
    for (extra, says) in [
        ("", "live.stats is \"off\""),
        (&*format!("stats = \"unix:{}\"\n", sock.display()), "no npqos live statistics at unix:"),
    ] {
        let p = dir.path().join("c.toml");
        std::fs::write(&p, base.replace("[shaper]", &format!("{extra}[shaper]"))).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_npqos")).arg("live").arg(&p).arg("--stats").output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(says), "{says} missing from: {err}");
    }
}

#[test]
fn without_cap_net_raw_the_error_says_what_is_needed() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root || Command::new("setpriv").arg("--version").output().is_err() {
        println!("SKIPPED capability test: needs root and setpriv to drop to an unprivileged user");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.toml");
    std::fs::write(
        &p,
        "[live]\ninput = \"lo\"\noutput = \"lo2\"\nduration = \"1s\"\n[shaper]\nflow_rate = \"1Mbps\"\n",
    )
    .unwrap();
    let _ = std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755));
    let _ = std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o644));
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"])
        .arg(env!("CARGO_BIN_EXE_npqos"))
        .arg("live")
        .arg(&p)
        .arg("--quiet")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("needs CAP_NET_RAW"), "{err}");
}

/// Counts, per flow, the datagrams a UDP socket application receives on the receiver's
/// address (one socket per destination port), until `stop`; checks their order and that each
/// is `payload` bytes.
/// Datagrams received per flow, how many came out of order, how many had the wrong size, and
/// per flow the highest sequence number seen plus one.
type Got = (Vec<u64>, u64, u64, Vec<u32>);

fn receive_sockets(flows: u32, payload: usize, stop: &AtomicBool) -> Result<Got, String> {
    let at = (0..flows).map(|i| std::net::SocketAddr::from((netns::RECEIVER_IP, netns::flow_ports(i).1))).collect();
    let got = socket_sink(at, payload, stop)?;
    Ok((
        got.iter().map(|f| f.datagrams).collect(),
        got.iter().map(|f| f.reordered).sum(),
        got.iter().map(|f| f.wrong_size).sum(),
        got.iter().map(|f| f.next).collect(),
    ))
}

/// `flows` UDP socket flows of `payload`-byte datagrams at 5 Mbps for 1.5 s through npqos
/// live with the `[shaper]` keys `shaper` (a rate above 5 Mbps, so nothing is held back), every
/// veth at `mtu`, default offloads; asserts that the application gets every datagram whole and
/// in order, that its stack saw no checksum error, and that npqos live completed the partial
/// checksums.
fn udp_application(tag: &str, mtu: u32, payload: usize, shaper: &str) {
    let bed = Bed::new(tag).unwrap();
    netns::sh(&["ip", "-n", &bed.rcv, "addr", "add", "198.18.0.2/24", "dev", "r0"]).unwrap();
    for (ns, i) in [(&bed.snd, "s0"), (&bed.mid, "in0"), (&bed.mid, "out0"), (&bed.rcv, "r0")] {
        netns::sh(&["ip", "-n", ns, "link", "set", i, "mtu", &mtu.to_string()]).unwrap();
    }
    let offloads = netns::sh(&["ip", "netns", "exec", &bed.snd, "ethtool", "-k", "s0"]).unwrap_or_default();
    if !offloads.is_empty() {
        assert!(offloads.contains("tx-checksumming: on"), "the sender offloads its checksums:\n{offloads}");
    }
    let (dir, mut child) = start_live(
        &bed,
        &format!("[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"3s\"\n[shaper]\n{shaper}\n"),
    );
    let out = dir.path().join("out");
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let rcv = netns::in_ns(&bed.rcv, move || receive_sockets(FLOWS, payload, &s2));
    std::thread::sleep(std::time::Duration::from_millis(200));
    let snd = netns::in_ns(&bed.snd, move || netns::send_udp(FLOWS, 5_000_000, payload, 1_500_000_000));
    let off = snd.join().unwrap().unwrap().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let (got, reordered, wrong_size, _) = rcv.join().unwrap().unwrap().unwrap();
    assert!(child.wait().unwrap().success());
    let csum_errors = in_csum_errors(&bed.rcv, "Udp");
    let summary = summary_of(&out);
    let completed = summary["runs"][0]["scalars"]["rx_checksums_completed"].as_f64().unwrap();
    let oversize = summary["runs"][0]["scalars"]["dropped_oversize"].as_f64().unwrap();
    let above_cap = summary["runs"][0]["scalars"]["dropped_exceeds_bucket"].as_f64().unwrap();
    println!(
        "UDP application, MTU {mtu}, {payload} B datagrams, {shaper:?}: sent {:?}, received {got:?}, reordered {reordered}, wrong size {wrong_size}, receiver InCsumErrors {csum_errors}, checksums completed by npqos live {completed}, oversize {oversize}, exceeds_bucket {above_cap}",
        off.sent
    );
    assert_eq!(off.send_errors, 0);
    assert_eq!(got, off.sent, "every datagram reaches the application");
    assert_eq!((reordered, wrong_size, oversize, above_cap), (0, 0, 0.0, 0.0));
    assert_eq!(csum_errors, "0");
    assert!(completed >= off.sent.iter().sum::<u64>() as f64, "the partial checksums were completed here");
}

/// A UDP socket application behind npqos live, default offloads on every veth: the sender's
/// stack leaves its checksums partial (veth's transmit checksum offload), npqos live completes
/// them, and the receiving application gets every datagram, in order, with no checksum error in
/// its stack (issue #41's first defect: before, it received none).
#[test]
fn a_udp_socket_application_receives_every_datagram() {
    let _one_bed = ONE_BED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = netns::unavailable() {
        println!("SKIPPED npqos live UDP application test: {why}");
        return;
    }
    udp_application(&format!("u{}", std::process::id() % 100_000), 1500, PAYLOAD, "flow_rate = \"10Mbps\"");
}

/// The same with jumbo frames: every veth at MTU 9,000, datagrams of 8,972 B (9,014 B frames),
/// which the transmit ring's slots (16 KiB at this MTU) now hold.
#[test]
fn jumbo_frames_of_9000_bytes_are_forwarded() {
    let _one_bed = ONE_BED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = netns::unavailable() {
        println!("SKIPPED npqos live jumbo test: {why}");
        return;
    }
    udp_application(&format!("j{}", std::process::id() % 100_000), 9000, 8972, "flow_rate = \"10Mbps\"");
}

/// Jumbo frames under wait-for-tokens at 1 Gbps a flow: a 9,014 B frame is larger than the
/// configured cap (2 x alpha, 6,000 B) but not than its bucket's (raised by `wake_tolerance` to
/// 128,000 B), so every datagram arrives. (Until e6d67d2 the configured cap was compared and
/// every one was dropped as `exceeds_bucket`.)
#[test]
fn jumbo_frames_pass_a_fast_bucket_under_wait_for_tokens() {
    let _one_bed = ONE_BED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = netns::unavailable() {
        println!("SKIPPED npqos live jumbo wait-for-tokens test: {why}");
        return;
    }
    let shaper = "flow_rate = \"1Gbps\"\nconformance = \"wait-for-tokens\"";
    udp_application(&format!("w{}", std::process::id() % 100_000), 9000, 8972, shaper);
}

/// The first connection to `l` within `limit` (so a test whose client never gets through fails
/// instead of hanging), in blocking mode.
fn accept_within(l: &std::net::TcpListener, limit: std::time::Duration) -> Result<std::net::TcpStream, String> {
    l.set_nonblocking(true).map_err(|e| e.to_string())?;
    let end = std::time::Instant::now() + limit;
    loop {
        match l.accept() {
            Ok((c, _)) => {
                c.set_nonblocking(false).map_err(|e| e.to_string())?;
                return Ok(c);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && std::time::Instant::now() < end => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) => return Err(format!("no connection: {e}")),
        }
    }
}

/// TCP through npqos live with default offloads: the sender's stack hands down offload
/// super-frames (up to 64 KB on veth), npqos live cuts them into MTU-sized segments with
/// whole checksums and shapes each; the server receives every byte intact with no checksum
/// error. The return path (ACKs) is a second veth pair from the receiver straight to the
/// sender, since live forwards one way (issue #41: both directions is still to come).
#[test]
fn tcp_super_frames_are_segmented_and_every_byte_arrives() {
    let Some((_one_bed, bed)) = one_bed("TCP", "t") else { return };
    let (s, r) = (bed.snd.clone(), bed.rcv.clone());
    let sh = |a: &[&str]| netns::sh(a).unwrap();
    sh(&["ip", "-n", &r, "addr", "add", "198.18.0.2/24", "dev", "r0"]);
    sh(&["ip", "link", "add", "s1", "netns", &s, "type", "veth", "peer", "name", "r1", "netns", &r]);
    for (ns, i) in [(&s, "s1"), (&r, "r1")] {
        sh(&["ip", "-n", ns, "link", "set", i, "up"]);
        for k in ["all", "default", i] {
            sh(&["ip", "netns", "exec", ns, "sysctl", "-qw", &format!("net.ipv4.conf.{k}.rp_filter=0")]);
        }
    }
    let link = sh(&["ip", "-n", &s, "-o", "link", "show", "s1"]);
    let mac = link.split("link/ether ").nth(1).and_then(|t| t.split_whitespace().next()).unwrap().to_string();
    sh(&["ip", "-n", &r, "route", "add", "198.18.0.1/32", "dev", "r1"]);
    sh(&["ip", "-n", &r, "neigh", "replace", "198.18.0.1", "lladdr", &mac, "dev", "r1", "nud", "permanent"]);
    let offloads = netns::sh(&["ip", "netns", "exec", &s, "ethtool", "-k", "s0"]).unwrap_or_default();
    if !offloads.is_empty() {
        assert!(offloads.contains("tcp-segmentation-offload: on"), "the sender offloads segmentation:\n{offloads}");
    }
    let (dir, mut child) = start_live(
        &bed,
        "[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"3s\"\n[shaper]\nflow_rate = \"200Mbps\"\n",
    );
    let out = dir.path().join("out");
    const BYTES: usize = 8 << 20;
    let byte = |i: usize| (i * 31 + i / 4093) as u8;
    let server = netns::in_ns(&r, move || -> Result<(usize, usize), String> {
        use std::io::Read;
        let l = std::net::TcpListener::bind((netns::RECEIVER_IP, netns::DST_BASE)).map_err(|e| e.to_string())?;
        let mut c = accept_within(&l, std::time::Duration::from_secs(3))?;
        c.set_read_timeout(Some(std::time::Duration::from_secs(5))).map_err(|e| e.to_string())?;
        let (mut n, mut bad, mut buf) = (0usize, 0usize, vec![0u8; 1 << 16]);
        loop {
            let k = c.read(&mut buf).map_err(|e| format!("after {n} B: {e}"))?;
            if k == 0 {
                return Ok((n, bad));
            }
            bad += buf[..k].iter().enumerate().filter(|&(j, &b)| b != byte(n + j)).count();
            n += k;
        }
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    let client = netns::in_ns(&s, move || -> Result<(), String> {
        use std::io::Write;
        let addr = std::net::SocketAddr::from((netns::RECEIVER_IP, netns::DST_BASE));
        let mut c = std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2))
            .map_err(|e| e.to_string())?;
        // Without ACKs coming back the send buffer fills: fail, do not hang.
        c.set_write_timeout(Some(std::time::Duration::from_secs(5))).map_err(|e| e.to_string())?;
        let data: Vec<u8> = (0..BYTES).map(byte).collect();
        c.write_all(&data).map_err(|e| e.to_string())
    });
    client.join().unwrap().unwrap().unwrap();
    let (n, bad) = server.join().unwrap().unwrap().unwrap();
    assert!(child.wait().unwrap().success());
    let csum_errors = in_csum_errors(&r, "Tcp");
    let summary = summary_of(&out);
    let sc = &summary["runs"][0]["scalars"];
    let get = |k: &str| sc[k].as_f64().unwrap_or(f64::NAN);
    println!(
        "TCP: {n} of {BYTES} B received, {bad} wrong; receiver InCsumErrors {csum_errors}; npqos live: {} super-frames cut into {} segments, {} frames out, {} oversize",
        get("rx_super_frames"),
        get("rx_super_frame_segments"),
        get("frames_out"),
        get("dropped_oversize")
    );
    assert_eq!((n, bad), (BYTES, 0), "every byte, intact");
    assert_eq!(csum_errors, "0");
    assert_eq!(get("dropped_oversize"), 0.0);
    assert!(get("rx_super_frames") > 0.0, "the sender's offload made super-frames");
    assert!(get("rx_super_frame_segments") > get("rx_super_frames"));
}

/// Both ways through one npqos live (`live.reverse = "pass"`, the default) with default
/// offloads and no static neighbour entries: ARP resolves through the bridge, ping gets its
/// replies, and a TCP connection (its ACKs coming back through npqos live) moves 4 MiB intact.
#[test]
fn ping_arp_and_tcp_work_both_ways_without_static_neighbours() {
    if no_ping("both-ways") {
        return;
    }
    let Some((_one_bed, bed)) = one_bed("both-ways", "b") else { return };
    both_ways(&bed, "ring");
    let s = bed.snd.clone();

    // `live.non_ip = "drop"`: no ARP through the bridge, so no neighbour and no ping; the
    // requests are counted as dropped (unclassified), every frame accounted.
    netns::sh(&["ip", "-n", &s, "neigh", "flush", "dev", "s0"]).unwrap();
    let (dir, mut child) = start_live(
        &bed,
        "[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"3s\"\nnon_ip = \"drop\"\n\
         [shaper]\nflow_rate = \"200Mbps\"\n",
    );
    let ping = netns::sh(&["ip", "netns", "exec", &s, "ping", "-c", "2", "-i", "0.2", "-W", "1", "198.18.0.2"]);
    let neigh = netns::sh(&["ip", "-n", &s, "neigh", "show", "198.18.0.2"]).unwrap_or_default();
    assert!(child.wait().unwrap().success());
    let summary = summary_of(&dir.path().join("out"));
    let sc = &summary["runs"][0]["scalars"];
    let get = |k: &str| sc[k].as_f64().unwrap_or(f64::NAN);
    println!(
        "non_ip = \"drop\": ping {:?}; neighbour {neigh:?}; ARP requests dropped {}",
        ping.as_ref().map_or_else(|e| e.lines().last().unwrap_or("").to_string(), |p| p.clone()),
        get("dropped_unclassified")
    );
    assert!(!neigh.contains("lladdr"), "no ARP through the bridge: {neigh}");
    assert!(get("dropped_unclassified") >= 1.0, "the ARP requests counted");
    assert_eq!(get("frames_in"), get("frames_out") + dropped_all(sc) + get("queued_at_end"));
}

/// The input and then the output go down for 400 ms and come up again while 2 UDP flows of
/// 2 Mbps go through npqos live: it forwards again without a restart (each flow's last
/// datagram arrives, in order), what came while the output was down waited and went after
/// (nothing is lost then: the transmit ring and the queues hold 0.4 s of 4 Mbps), it does not
/// spin while an interface is down (the socket's ENETDOWN is taken, not polled again and
/// again), and the run ends normally.
#[test]
fn an_interface_that_goes_down_and_up_comes_back_without_a_restart() {
    let Some((_one_bed, bed)) = one_bed("interface down/up", "d") else { return };
    down_and_up(&bed, "ring");
}

/// The same on AF_XDP sockets: the receive socket is told nothing when its interface goes
/// down (it just receives nothing), the transmit side's refused sends are counted.
#[test]
fn on_af_xdp_an_interface_that_goes_down_and_up_comes_back() {
    let Some((_one_bed, bed)) = one_bed("AF_XDP interface down/up", "e") else { return };
    if let Some(why) = netns::xdp_unavailable() {
        println!("SKIPPED npqos live AF_XDP interface down/up test: {why}");
        return;
    }
    down_and_up(&bed, "xdp");
}

fn down_and_up(bed: &Bed, io: &str) {
    netns::sh(&["ip", "-n", &bed.rcv, "addr", "add", "198.18.0.2/24", "dev", "r0"]).unwrap();
    let cfg = format!("[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"4s\"\nio = \"{io}\"\n");
    let (dir, mut child) = start_live(bed, &format!("{cfg}[shaper]\nflow_rate = \"10Mbps\"\n"));
    let out = dir.path().join("out");
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let rcv = netns::in_ns(&bed.rcv, move || receive_sockets(2, PAYLOAD, &s2));
    std::thread::sleep(std::time::Duration::from_millis(200));
    let snd = netns::in_ns(&bed.snd, move || netns::send_udp(2, 2_000_000, PAYLOAD, 3_000_000_000));
    let link = |i: &str, state: &str| netns::sh(&["ip", "-n", &bed.mid, "link", "set", i, state]).unwrap();
    let ms = |n| std::thread::sleep(std::time::Duration::from_millis(n));
    ms(600);
    link("in0", "down");
    ms(400);
    link("in0", "up");
    ms(400);
    link("out0", "down");
    ms(400);
    link("out0", "up");
    let off = snd.join().unwrap().unwrap().unwrap();
    ms(500);
    stop.store(true, Ordering::Relaxed);
    let (got, reordered, _, next) = rcv.join().unwrap().unwrap().unwrap();
    let status = child.wait().unwrap();
    let summary = summary_of(&out);
    let run: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    let sc = &summary["runs"][0]["scalars"];
    let get = |k: &str| sc[k].as_f64().unwrap_or(f64::NAN);
    let (cpu, elapsed) = (run["cpu_s"].as_f64().unwrap(), run["elapsed_s"].as_f64().unwrap());
    println!(
        "{io}, down/up: sent {:?}, received {got:?} (last seq + 1 {next:?}), reordered {reordered}; npqos live: in {} out {}, socket errors {}, flushes refused while down {}, cpu {cpu:.2} s of {elapsed:.2} s",
        off.sent,
        get("frames_in"),
        get("frames_out"),
        get("rx_socket_errors"),
        get("tx_down_flushes"),
    );
    assert!(status.success(), "npqos live ran to its end: {status:?}");
    for i in 0..2 {
        assert_eq!(next[i] as u64, off.sent[i], "flow {i}: its last datagram arrived (forwarding resumed)");
        // The input was down for 0.4 s of 3 (what the sender sent then is lost before npqos);
        // nothing else is.
        assert!(got[i] as f64 >= 0.8 * off.sent[i] as f64, "flow {i}: {} of {}", got[i], off.sent[i]);
    }
    assert_eq!(reordered, 0);
    if io == "ring" {
        assert!(get("rx_socket_errors") >= 1.0, "the input's ENETDOWN was seen (and taken)");
    }
    assert!(get("tx_down_flushes") >= 1.0, "sends refused while the output was down, counted");
    assert_eq!(get("frames_in"), get("frames_out") + get("queued_at_end"));
    assert!(cpu < 0.5 * elapsed, "no spinning while an interface is down: {cpu:.2} s of CPU in {elapsed:.2} s");
}

/// The output interface disappears while npqos live runs: it stops within half a second with
/// exit code 2 and a message naming the interface, and writes its results up to then.
#[test]
fn an_interface_that_disappears_ends_the_run_with_exit_2() {
    let Some((_one_bed, bed)) = one_bed("interface removed", "g") else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.toml");
    std::fs::write(
        &path,
        "[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"10s\"\n[shaper]\nflow_rate = \"10Mbps\"\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let child = Command::new("ip")
        .args(["netns", "exec", &bed.mid, env!("CARGO_BIN_EXE_npqos"), "live"])
        .arg(&path)
        .arg("--out")
        .arg(&out)
        .arg("--quiet")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    let t = std::time::Instant::now();
    netns::sh(&["ip", "-n", &bed.mid, "link", "del", "out0"]).unwrap();
    let o = child.wait_with_output().unwrap();
    let took = t.elapsed();
    let stderr = String::from_utf8_lossy(&o.stderr);
    println!("interface removed: exit {:?} after {took:?}; stderr: {}", o.status.code(), stderr.trim());
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(took < std::time::Duration::from_millis(1500), "stopped soon after: {took:?}");
    assert!(stderr.contains("out0") && stderr.contains("disappeared"), "{stderr}");
    let summary = summary_of(&out);
    assert_eq!(summary["runs"][0]["stop_reason"], "interface out0 removed", "{summary}");
}

/// IPv6 through npqos live, default offloads, no static neighbours: the endpoints find each
/// other by neighbour discovery through the bridge (ping -6), 4 UDP socket flows get every
/// datagram in order with no checksum error in the receiving stack, and 4 MiB of TCP arrive
/// intact (the sender's IPv6 checksums completed and its TSO super-frames cut here).
/// Addresses from 2001:2::/48, the IPv6 benchmarking range (RFC 5180).
#[test]
fn ipv6_neighbour_discovery_udp_and_tcp_through_the_bridge() {
    if no_ping("IPv6") {
        return;
    }
    let Some((_one_bed, bed)) = one_bed("IPv6", "v") else { return };
    let (s, r) = (bed.snd.clone(), bed.rcv.clone());
    enable_ipv6(&s, "s0", "2001:2::1/64");
    enable_ipv6(&r, "r0", "2001:2::2/64");
    let (dir, mut child) = start_live(
        &bed,
        "[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"4s\"\n[shaper]\nflow_rate = \"200Mbps\"\n",
    );
    let out = dir.path().join("out");
    let ping = netns::sh(&["ip", "netns", "exec", &s, "ping", "-6", "-c", "5", "-i", "0.2", "-W", "1", "2001:2::2"]);
    let neigh = netns::sh(&["ip", "-n", &s, "-6", "neigh", "show", "2001:2::2"]).unwrap_or_default();
    const FLOWS6: u16 = 4;
    const DATAGRAMS: u32 = 400;
    let (dst, src): (std::net::Ipv6Addr, std::net::Ipv6Addr) =
        ("2001:2::2".parse().unwrap(), "2001:2::1".parse().unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let udp_rcv = netns::in_ns(&r, move || -> Result<(Vec<u32>, u32), String> {
        let socks: Vec<std::net::UdpSocket> = (0..FLOWS6)
            .map(|i| {
                let u = std::net::UdpSocket::bind((dst, 20_000 + i)).map_err(|e| e.to_string())?;
                u.set_nonblocking(true).map_err(|e| e.to_string())?;
                Ok(u)
            })
            .collect::<Result<_, String>>()?;
        let (mut got, mut reordered, mut buf) = (vec![0u32; FLOWS6 as usize], 0, vec![0u8; 2048]);
        while !s2.load(Ordering::Relaxed) {
            for (i, u) in socks.iter().enumerate() {
                while let Ok(n) = u.recv(&mut buf) {
                    let seq = u32::from_be_bytes(buf[..4].try_into().unwrap());
                    reordered += (seq != got[i] || n != PAYLOAD) as u32;
                    got[i] += 1;
                }
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        Ok((got, reordered))
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    let udp_snd = netns::in_ns(&s, move || -> Result<(), String> {
        let u = std::net::UdpSocket::bind((src, 0)).map_err(|e| e.to_string())?;
        let mut d = vec![0u8; PAYLOAD];
        for seq in 0..DATAGRAMS {
            for i in 0..FLOWS6 {
                d[..4].copy_from_slice(&seq.to_be_bytes());
                u.send_to(&d, (dst, 20_000 + i)).map_err(|e| e.to_string())?;
            }
            std::thread::sleep(std::time::Duration::from_micros(500));
        }
        Ok(())
    });
    udp_snd.join().unwrap().unwrap().expect("the IPv6 UDP sender");
    std::thread::sleep(std::time::Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let (udp_got, udp_bad) = udp_rcv.join().unwrap().unwrap().unwrap();
    const BYTES: usize = 4 << 20;
    let (tcp_sent, tcp_got) = tcp_transfer(&s, &r, std::net::SocketAddr::from((dst, 20_100)), BYTES);
    assert!(child.wait().unwrap().success());
    let snmp6 = netns::sh(&["ip", "netns", "exec", &r, "cat", "/proc/net/snmp6"]).unwrap();
    let csum6 = snmp6.lines().find(|l| l.starts_with("Udp6InCsumErrors")).unwrap_or("?").to_string();
    let summary = summary_of(&out);
    let sc = &summary["runs"][0]["scalars"];
    let get = |k: &str| sc[k].as_f64().unwrap_or(f64::NAN);
    println!(
        "IPv6: ping {:?}; neighbour {neigh:?}; UDP received {udp_got:?} of {DATAGRAMS} each, {udp_bad} out of order or wrong size, {csum6}; TCP {tcp_sent:?}, {tcp_got:?} of {BYTES} B intact; checksums completed {}, super-frames {}",
        ping.as_ref().map(|p| p.lines().find(|l| l.contains("received")).unwrap_or("").to_string()),
        get("rx_checksums_completed"),
        get("rx_super_frames"),
    );
    assert!(ping.as_deref().is_ok_and(|p| p.contains("5 received")), "ping -6 through the bridge: {ping:?}");
    assert!(neigh.contains("lladdr") && !neigh.contains("PERMANENT"), "learnt by neighbour discovery: {neigh}");
    assert_eq!(udp_got, vec![DATAGRAMS; FLOWS6 as usize], "every datagram");
    assert_eq!(udp_bad, 0);
    assert!(csum6.ends_with(" 0") || csum6.ends_with("\t0"), "no checksum error at the receiver: {csum6}");
    assert_eq!(tcp_sent, Ok(()));
    assert_eq!(tcp_got, Ok(BYTES), "every byte, intact");
    assert!(get("rx_checksums_completed") > 0.0);
    assert_eq!(get("frames_in"), get("frames_out") + get("queued_at_end"));
}

/// The bed's endpoints on IPv4 and IPv6 with no static neighbour (they find each other
/// through the bridge): the receiver at 198.18.0.2 and 2001:2::2, the sender at 2001:2::1 too.
/// Returns the sender's and the receiver's namespaces.
fn dual_stack(bed: &Bed) -> (String, String) {
    let (s, r) = (bed.snd.clone(), bed.rcv.clone());
    netns::sh(&["ip", "-n", &r, "addr", "add", "198.18.0.2/24", "dev", "r0"]).unwrap();
    netns::sh(&["ip", "-n", &s, "neigh", "del", "198.18.0.2", "dev", "s0"]).unwrap();
    enable_ipv6(&s, "s0", "2001:2::1/64");
    enable_ipv6(&r, "r0", "2001:2::2/64");
    (s, r)
}

/// Enables IPv6 on `dev` in `ns` (the bed turns it off) with `addr`, no duplicate detection.
fn enable_ipv6(ns: &str, dev: &str, addr: &str) {
    for k in ["all", "default", dev] {
        netns::sh(&["ip", "netns", "exec", ns, "sysctl", "-qw", &format!("net.ipv6.conf.{k}.disable_ipv6=0")]).unwrap();
    }
    netns::sh(&["ip", "-n", ns, "-6", "addr", "add", addr, "dev", dev, "nodad"]).unwrap();
}

/// What a UDP socket application received of one flow: frame bytes (the datagram plus its
/// UDP, IP and Ethernet headers), the first datagram's, the times of the first and the last,
/// and datagrams that came after a later one of their flow.
#[derive(Clone, Copy, Debug, Default)]
struct SocketFlow {
    datagrams: u64,
    /// Datagrams not of the size expected.
    wrong_size: u64,
    bytes: u64,
    first_len: u64,
    first_ns: u64,
    last_ns: u64,
    next: u32,
    reordered: u64,
}

impl SocketFlow {
    fn rate_mbps(&self) -> f64 {
        (self.bytes - self.first_len) as f64 * 8e3 / (self.last_ns.saturating_sub(self.first_ns)).max(1) as f64
    }
}

/// A UDP socket application's receive side: a socket per address in `at`, counted until
/// `stop` (each datagram starts with its flow's sequence number and should be `payload` bytes).
fn socket_sink(at: Vec<std::net::SocketAddr>, payload: usize, stop: &AtomicBool) -> Result<Vec<SocketFlow>, String> {
    let socks: Vec<std::net::UdpSocket> = at
        .iter()
        .map(|a| {
            let u = std::net::UdpSocket::bind(a).map_err(|e| format!("{a}: {e}"))?;
            u.set_nonblocking(true).map_err(|e| e.to_string())?;
            Ok(u)
        })
        .collect::<Result<_, String>>()?;
    let t0 = std::time::Instant::now();
    let mut flows = vec![SocketFlow::default(); at.len()];
    let mut buf = vec![0u8; 65536];
    while !stop.load(Ordering::Relaxed) {
        let mut any = false;
        for (i, u) in socks.iter().enumerate() {
            while let Ok(n) = u.recv(&mut buf) {
                any = true;
                let now = t0.elapsed().as_nanos() as u64;
                let frame = (n + 8 + if at[i].is_ipv4() { 20 } else { 40 } + 14) as u64;
                let seq = u32::from_be_bytes(buf[..4].try_into().unwrap());
                let f = &mut flows[i];
                if f.bytes == 0 {
                    (f.first_len, f.first_ns) = (frame, now);
                }
                f.reordered += (seq < f.next) as u64;
                f.datagrams += 1;
                f.wrong_size += (n != payload) as u64;
                f.next = f.next.max(seq + 1);
                f.bytes += frame;
                f.last_ns = now;
            }
        }
        if !any {
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }
    Ok(flows)
}

/// A UDP socket application's send side: from `from` to each address of `to`, datagrams of
/// `payload` bytes starting with their flow's sequence number, each flow at `frame_bps` of
/// frame bytes, round robin, for `secs`.
fn socket_source(
    from: std::net::IpAddr,
    to: Vec<std::net::SocketAddr>,
    frame_bps: f64,
    payload: usize,
    secs: f64,
) -> Result<(), String> {
    let u = std::net::UdpSocket::bind((from, 0)).map_err(|e| format!("{from}: {e}"))?;
    let frame = (payload + 8 + if from.is_ipv4() { 20 } else { 40 } + 14) as f64;
    let round = std::time::Duration::from_secs_f64(frame * 8.0 / frame_bps);
    let mut d = vec![0u8; payload];
    let t0 = std::time::Instant::now();
    let mut seq = 0u32;
    while t0.elapsed().as_secs_f64() < secs {
        for a in &to {
            d[..4].copy_from_slice(&seq.to_be_bytes());
            // A full socket buffer (ENOBUFS) loses that datagram, as for any application.
            let _ = u.send_to(&d, a);
        }
        seq += 1;
        let due = round * seq;
        if let Some(wait) = due.checked_sub(t0.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    Ok(())
}

/// UDP socket applications through npqos live both ways at once, over IPv4 and IPv6 at once,
/// default offloads, neighbours found through the bridge (ARP, neighbour discovery): from the
/// sender 4 IPv4 and 4 IPv6 flows offered 20 Mbps each and shaped to 10 Mbps (`[shaper]`),
/// from the receiver back 4 + 4 offered 10 Mbps and shaped to 5 Mbps (`[reverse.shaper]`).
/// Each flow reaches its application within 2% of its direction's rate in frame bytes, in
/// order; each direction accounts for every frame.
#[test]
fn udp_socket_applications_get_their_rate_both_ways_over_ipv4_and_ipv6() {
    use std::net::{IpAddr, SocketAddr};
    if no_ping("UDP both ways") {
        return;
    }
    let Some((_one_bed, bed)) = one_bed("UDP both ways, IPv4 and IPv6", "u") else { return };
    let (s, r) = dual_stack(&bed);
    let (dir, mut child) = start_live(
        &bed,
        "[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"30s\"\n\
         [shaper]\nflow_rate = \"10Mbps\"\n[table]\nqueue_limit = \"32KiB\"\n\
         [reverse.shaper]\nflow_rate = \"5Mbps\"\n[reverse.table]\nqueue_limit = \"32KiB\"\n",
    );
    // Neighbours first, so that no flow's first datagrams wait on ARP or discovery.
    for (ns, to) in [(&s, "198.18.0.2"), (&s, "2001:2::2"), (&r, "198.18.0.1"), (&r, "2001:2::1")] {
        let p = netns::sh(&["ip", "netns", "exec", ns, "ping", "-c", "1", "-W", "2", to]);
        assert!(p.is_ok(), "ping {to} through the bridge: {p:?}");
    }
    let addrs = |v4: &str, v6: &str, port: u16| -> Vec<SocketAddr> {
        let (a4, a6): (IpAddr, IpAddr) = (v4.parse().unwrap(), v6.parse().unwrap());
        (0..4)
            .map(|i| SocketAddr::new(a4, port + i))
            .chain((0..4).map(|i| SocketAddr::new(a6, port + 100 + i)))
            .collect()
    };
    let (way_in, way_back) = (addrs("198.18.0.2", "2001:2::2", 21_000), addrs("198.18.0.1", "2001:2::1", 22_000));
    let stop = Arc::new(AtomicBool::new(false));
    let (st1, st2) = (stop.clone(), stop.clone());
    let (wi, wb) = (way_in.clone(), way_back.clone());
    let sink_in = netns::in_ns(&r, move || socket_sink(wi, PAYLOAD, &st1));
    let sink_back = netns::in_ns(&s, move || socket_sink(wb, PAYLOAD, &st2));
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut sources = Vec::new();
    for (ns, from, to, bps) in [
        (&s, "198.18.0.1", &way_in[..4], 20e6),
        (&s, "2001:2::1", &way_in[4..], 20e6),
        (&r, "198.18.0.2", &way_back[..4], 10e6),
        (&r, "2001:2::2", &way_back[4..], 10e6),
    ] {
        let (from, to): (IpAddr, Vec<SocketAddr>) = (from.parse().unwrap(), to.to_vec());
        sources.push(netns::in_ns(ns, move || socket_source(from, to, bps, PAYLOAD, 3.0)));
    }
    for h in sources {
        h.join().unwrap().unwrap().expect("a UDP sender");
    }
    std::thread::sleep(std::time::Duration::from_millis(400));
    stop.store(true, Ordering::Relaxed);
    let got_in = sink_in.join().unwrap().unwrap().unwrap();
    let got_back = sink_back.join().unwrap().unwrap().unwrap();
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let summary = summary_of(&dir.path().join("out"));
    for run in summary["runs"].as_array().unwrap() {
        let sc = &run["scalars"];
        let get = |k: &str| sc[k].as_f64().unwrap_or(f64::NAN);
        assert_eq!(
            get("frames_in"),
            get("frames_out") + dropped_all(sc) + get("queued_at_end"),
            "{}: every frame accounted",
            run["label"]
        );
    }
    for (name, got, want) in [("way in", &got_in, 10.0), ("way back", &got_back, 5.0)] {
        let rates: Vec<f64> = got.iter().map(SocketFlow::rate_mbps).collect();
        println!(
            "UDP sockets {name}: IPv4 flows {:.3?} Mbps, IPv6 flows {:.3?} Mbps (shaped to {want})",
            &rates[..4],
            &rates[4..]
        );
        for (i, (f, r)) in got.iter().zip(&rates).enumerate() {
            let v = if i < 4 { "IPv4" } else { "IPv6" };
            assert!((r / want - 1.0).abs() < 0.02, "{name} {v} flow {i}: {r:.3} Mbps, not within 2% of {want}");
            assert_eq!(f.reordered, 0, "{name} {v} flow {i} reordered");
        }
    }
}

/// Both ways shaped, each by its own configuration: 4 UDP flows from the sender offered
/// 20 Mbps each and shaped to 10 Mbps (`[shaper]`), 4 from the receiver back to the sender
/// offered 10 Mbps each and shaped to 5 Mbps (`[reverse.shaper]`), at the same time. Each
/// flow arrives within 2% of its direction's rate (frame bytes, measured at the receiving
/// end's packet ring), in order, and each direction accounts for every frame (a run of its own
/// in the results: `live` and `reverse`).
#[test]
fn both_directions_are_shaped_each_to_its_own_rate() {
    let Some((_one_bed, bed)) = one_bed("two-way shaping", "w") else { return };
    let (s, r) = (bed.snd.clone(), bed.rcv.clone());
    netns::sh(&["ip", "-n", &r, "addr", "add", "198.18.0.2/24", "dev", "r0"]).unwrap();
    let link = netns::sh(&["ip", "-n", &s, "-o", "link", "show", "s0"]).unwrap();
    let mac = link.split("link/ether ").nth(1).and_then(|t| t.split_whitespace().next()).unwrap().to_string();
    netns::sh(&["ip", "-n", &r, "neigh", "replace", "198.18.0.1", "lladdr", &mac, "dev", "r0", "nud", "permanent"])
        .unwrap();
    let (dir, mut child) = start_live(
        &bed,
        "[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"4500ms\"\n\
         [shaper]\nflow_rate = \"10Mbps\"\n[table]\nqueue_limit = \"32KiB\"\n\
         [reverse.shaper]\nflow_rate = \"5Mbps\"\n[reverse.table]\nqueue_limit = \"32KiB\"\n",
    );
    let out = dir.path().join("out");
    const N: u32 = 4;
    let stop = Arc::new(AtomicBool::new(false));
    let (s1, s2) = (stop.clone(), stop.clone());
    let fwd_rcv = netns::in_ns(&r, move || netns::receive_for("r0", netns::RECEIVER_IP, &s1));
    let back_rcv = netns::in_ns(&s, move || netns::receive_for("s0", netns::SENDER_IP, &s2));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (ip_s, ip_r) = (netns::SENDER_IP, netns::RECEIVER_IP);
    let fwd = netns::in_ns(&s, move || netns::send_udp_between(ip_s, ip_r, N, 20_000_000, PAYLOAD, SEND_NS));
    let back = netns::in_ns(&r, move || netns::send_udp_between(ip_r, ip_s, N, 10_000_000, PAYLOAD, SEND_NS));
    let (fwd, back) = (fwd.join().unwrap().unwrap().unwrap(), back.join().unwrap().unwrap().unwrap());
    std::thread::sleep(std::time::Duration::from_millis(600));
    stop.store(true, Ordering::Relaxed);
    let (fwd_got, back_got) = (fwd_rcv.join().unwrap().unwrap().unwrap(), back_rcv.join().unwrap().unwrap().unwrap());
    assert!(child.wait().unwrap().success());
    let summary = summary_of(&out);
    let runs = summary["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "a run per direction");
    assert_eq!(runs[1]["label"], "reverse");
    for (name, off, got, run, rate) in
        [("way in", &fwd, &fwd_got, &runs[0], 10e6), ("way back", &back, &back_got, &runs[1], 5e6)]
    {
        let sc = &run["scalars"];
        let get = |k: &str| sc[k].as_f64().unwrap_or(f64::NAN);
        let rates: Vec<f64> =
            (0..N).map(|i| got.flows.get(&i).and_then(|f| f.rate_bps()).unwrap_or(0.0) / 1e6).collect();
        println!(
            "{name}: sent {:?} (errors {}), received {:?} frames, rates {rates:.3?} Mbps (shaped to {} Mbps); npqos in {} out {} dropped queue_full {}, queued {}",
            off.sent,
            off.send_errors,
            (0..N).map(|i| got.flows.get(&i).map_or(0, |f| f.frames)).collect::<Vec<_>>(),
            rate / 1e6,
            get("frames_in"),
            get("frames_out"),
            get("dropped_ingress_queue_full"),
            get("queued_at_end"),
        );
        assert_eq!(got.ring_drops, 0, "{name}: the receiver kept up");
        for i in 0..N {
            let r = rates[i as usize] * 1e6;
            assert!(
                (r / rate - 1.0).abs() < 0.02,
                "{name}: flow {i} at {:.3} Mbps, not within 2% of {}",
                r / 1e6,
                rate / 1e6
            );
            assert_eq!(got.flows[&i].reordered, 0, "{name}: flow {i} reordered");
        }
        let dropped = dropped_all(sc);
        assert_eq!(
            get("frames_in"),
            get("frames_out") + dropped + get("queued_at_end"),
            "{name}: every frame accounted"
        );
        let received: u64 = got.flows.values().map(|f| f.frames).sum();
        assert!(received as f64 <= get("frames_out"), "{name}: no frame from nowhere");
    }
}

/// The first `iperf3` on this machine, or why not.
fn iperf3() -> Result<(), String> {
    match Command::new("iperf3").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err("no iperf3 (apt-get install iperf3)".into()),
    }
}

/// iperf3 over TCP through npqos live, default offloads, every flow shaped to 10 Mbps each
/// way, over IPv4 and over IPv6 (the endpoints find each other through the bridge, by ARP and
/// by neighbour discovery): 8 parallel flows from the client to the server (the way in), then
/// 8 from the server to the client (`-R`, the way back). Each flow's goodput at the receiver,
/// turned into frame bytes (with TCP timestamps a 1,448 B segment is a 1,514 B frame over
/// IPv4, a 1,428 B one over IPv6), is within 2% of 10 Mbps over the seconds after the first
/// (`-O 1` leaves out slow start).
#[test]
fn iperf3_tcp_flows_get_their_rate_both_ways() {
    let _one_bed = ONE_BED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = netns::unavailable().or_else(|| iperf3().err()) {
        println!("SKIPPED npqos live iperf3 test: {why}");
        return;
    }
    let bed = Bed::new(&format!("i{}", std::process::id() % 100_000)).unwrap();
    let (s, r) = dual_stack(&bed);
    let (dir, mut child) = start_live(
        &bed,
        // The test ends the run with Ctrl-C once the clients are done (about 18 s, more on a
        // loaded machine): the duration only bounds a run the test lost track of.
        "[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"90s\"\n\
         [shaper]\nflow_rate = \"10Mbps\"\n[table]\nqueue_limit = \"64KiB\"\n\
         [reverse.shaper]\nflow_rate = \"10Mbps\"\n[reverse.table]\nqueue_limit = \"64KiB\"\n",
    );
    let out = dir.path().join("out");
    // Not bound to an address: the server takes IPv4 and IPv6 clients.
    let mut server = Command::new("ip")
        .args(["netns", "exec", &r, "iperf3", "-s", "-p", "5201"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let client = |to: &str, reverse: bool| -> serde_json::Value {
        let mut args =
            vec!["netns", "exec", &s, "iperf3", "-c", to, "-p", "5201", "-P", "8", "-t", "3", "-O", "1", "-J"];
        if reverse {
            args.push("-R");
        }
        let o = Command::new("ip").args(&args).output().unwrap();
        serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("iperf3 -J: {e}: {}", String::from_utf8_lossy(&o.stderr)))
    };
    let results = [
        ("IPv4 way in", 1448.0, client("198.18.0.2", false)),
        ("IPv4 way back (-R)", 1448.0, client("198.18.0.2", true)),
        ("IPv6 way in", 1428.0, client("2001:2::2", false)),
        ("IPv6 way back (-R)", 1428.0, client("2001:2::2", true)),
    ];
    let _ = server.kill();
    let _ = server.wait();
    // Ctrl-C: npqos live writes its results and exits with 130.
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let summary = summary_of(&out);
    for run in summary["runs"].as_array().unwrap() {
        let sc = &run["scalars"];
        let get = |k: &str| sc[k].as_f64().unwrap_or(f64::NAN);
        let dropped = dropped_all(sc);
        println!(
            "npqos live {}: frames in {} out {} dropped {dropped} (queue_full {}); backlogged flows {}",
            run["label"],
            get("frames_in"),
            get("frames_out"),
            get("dropped_ingress_queue_full"),
            get("backlogged_flows")
        );
        assert_eq!(get("frames_in"), get("frames_out") + dropped + get("queued_at_end"), "every frame accounted");
    }
    let io = &summary["runs"][0]["scalars"];
    assert!(io["rx_super_frames"].as_f64().unwrap() > 0.0, "the client's TSO super-frames were cut here");
    for (name, mss, j) in &results {
        let streams = j["end"]["streams"].as_array().unwrap_or_else(|| panic!("{name}: {j}"));
        let goodput: Vec<f64> =
            streams.iter().map(|st| st["receiver"]["bits_per_second"].as_f64().unwrap_or(0.0)).collect();
        let frames: Vec<f64> = goodput.iter().map(|g| g * 1514.0 / mss / 1e6).collect();
        let retrans: Vec<i64> = streams.iter().map(|st| st["sender"]["retransmits"].as_i64().unwrap_or(-1)).collect();
        println!(
            "iperf3 {name}: 8 flows, goodput {:.3?} Mbps, in frame bytes {frames:.3?} Mbps, retransmits {retrans:?}",
            goodput.iter().map(|g| g / 1e6).collect::<Vec<_>>()
        );
        assert_eq!(streams.len(), 8, "{name}");
        for (i, f) in frames.iter().enumerate() {
            assert!(
                (f / 10.0 - 1.0).abs() < 0.02,
                "{name}: flow {i} at {f:.3} Mbps in frame bytes, not within 2% of 10"
            );
        }
    }
}

/// A flood of new flows on the namespace bed at whatever rate the sender reaches: 300,000
/// UDP flows, one 64 B datagram each, as fast as one socket sender goes (about 120,000 new
/// flows per second here). npqos live's memory stays within its bound (peak RSS asserted
/// below 400 MiB: its buffer, rings and tables; the flow rows at 4,096 and the row of the
/// rest) and every frame is accounted: in npqos live (in = out + dropped + queued) or in the
/// kernel's count of the receive ring's drops.
#[test]
fn a_flood_of_new_flows_on_the_bed_stays_within_the_bound() {
    let Some((_one_bed, bed)) = one_bed("flood", "f") else { return };
    let (dir, child) = start_live(
        &bed,
        "[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"4s\"\n[shaper]\nflow_rate = \"1Mbps\"\n",
    );
    let out = dir.path().join("out");
    const FLOWS: u32 = 300_000;
    // One round of the sender is one datagram of each flow: a rate per flow that makes the
    // round last longer than the run sends each flow once.
    let off = netns::in_ns(&bed.snd, || netns::send_udp(FLOWS, 1, 64, 2_500_000_000)).join().unwrap().unwrap().unwrap();
    let pid = child.id();
    let hwm = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(|l| l.to_string()))
        .unwrap_or_default();
    let mut child = child;
    assert!(child.wait().unwrap().success());
    let summary = summary_of(&out);
    let sc = &summary["runs"][0]["scalars"];
    let get = |k: &str| sc[k].as_f64().unwrap_or(f64::NAN);
    let sent: u64 = off.sent.iter().sum();
    let new_flows = off.sent.iter().filter(|&&n| n > 0).count();
    let dropped = dropped_all(sc);
    let rows = std::fs::read_to_string(out.join("flows.csv")).unwrap().lines().count() - 1;
    let hwm_kib: f64 = hwm.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
    println!(
        "flood on the bed: {sent} datagrams of {new_flows} new flows in {:.2} s ({:.0} new flows/s); npqos live: in {} out {} dropped {dropped} (rx ring {}), rows in flows.csv {rows}, peak RSS {:.0} MiB",
        off.elapsed_ns as f64 / 1e9,
        new_flows as f64 / (off.elapsed_ns as f64 / 1e9),
        get("frames_in"),
        get("frames_out"),
        get("dropped_rx_ring"),
        hwm_kib / 1024.0,
    );
    assert!(new_flows > 50_000, "the sender made a flood: {new_flows} new flows");
    assert_eq!(get("frames_in"), get("frames_out") + dropped + get("queued_at_end"), "every frame accounted");
    assert!(rows <= 4_096 + 1, "flows.csv within [stats]: {rows} rows");
    // Every datagram reached npqos live or the kernel's count of its receive ring's drops (a
    // frame or two of the kernel's own may come too).
    let seen = get("frames_in") + get("dropped_rx_ring");
    assert!(seen >= sent as f64 && seen <= sent as f64 + 16.0, "{seen} frames seen of {sent} sent");
    assert!(hwm_kib < 400.0 * 1024.0, "peak RSS {hwm_kib} KiB");
}
