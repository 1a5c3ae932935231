//! `npqos live` beside the kernel's htb on the namespace bed (docs/PERFORMANCE.md, "npqos
//! live"): rate error per flow, CPU time per forwarded frame, and forwarding with 1e3 and 1e5
//! active shaped flows, npqos live pinned to one core. Needs root; prints a Markdown table.
//!
//! `cargo bench -p npqos-cli --bench live`; `NPQOS_BIN=path` runs another `npqos` binary as the
//! middle box (to time two builds against each other on one machine); `NPQOS_LIVE_BENCH` =
//! `rates`, `flows`, `latency`, `tcp` (iperf3 with 8 and 64 TCP flows beside htb),
//! `reload` (SIGHUP with 1e3 and 1e5 flows beside `tc` changing htb's classes) or `threads`
//! (1 and 2 forwarding threads fed by a transmit-ring sender, beside the do-nothing forwarder
//! and htb) runs one part (default: all), `NPQOS_FLOWS_ONLY` some rows of `flows`;
//! `NPQOS_LIVE_EXTRA` adds keys to every configuration's `[live]` (`reverse = "off"`: no way
//! back, as before issue #41).

#[cfg(target_os = "linux")]
use npqos_cli::live::netns::{self, Bed};
#[cfg(target_os = "linux")]
use std::{path::Path, process::Child, process::Command, sync::atomic::AtomicBool, sync::atomic::Ordering, sync::Arc};

/// The `[live]` section every configuration starts with, and `NPQOS_LIVE_EXTRA`'s keys (for
/// example `reverse = "off"`, to time a build against one that had no way back).
#[cfg(target_os = "linux")]
fn base() -> String {
    let extra = std::env::var("NPQOS_LIVE_EXTRA").unwrap_or_default();
    format!("[live]\ninput = \"in0\"\noutput = \"out0\"\n{extra}\n")
}

#[cfg(target_os = "linux")]
fn main() {
    if let Some(why) = netns::unavailable() {
        println!("SKIPPED live benchmark: {why}");
        return;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mid_cpu = if cpus > 1 { 1 } else { 0 };
    let mut rows = Vec::new();
    let tag = format!("b{}", std::process::id() % 100_000);
    let part = std::env::var("NPQOS_LIVE_BENCH").unwrap_or_default();
    let on = |p: &str| part.is_empty() || part == p;
    if on("rates") {
        rate_error(&mut rows, &tag, mid_cpu);
    }
    if on("flows") {
        many_flows(&mut rows, &tag, mid_cpu);
    }
    if !rows.is_empty() {
        print_table(&rows);
    }
    if on("latency") {
        latency(&tag, mid_cpu);
    }
    if on("tcp") {
        tcp_flows(&tag, mid_cpu);
    }
    if on("reload") {
        reload(&tag, mid_cpu);
    }
    if on("threads") {
        threads(&tag);
    }
}

/// The threads part (issue #44): `live/threads.rs`.
#[cfg(target_os = "linux")]
#[path = "live/threads.rs"]
mod threads;
#[cfg(target_os = "linux")]
use threads::threads;

/// A reload beside tc (issue #42): npqos live forwarding 1e3 or 1e5 throttled flows (the
/// many-flows part's setup: 64 B datagrams as fast as one sender goes, 3 s) gets SIGHUP at 1.5 s
/// with every flow's rate doubled: the reload's time (from the signal to the new
/// configuration taking frames), the frames lost because of the change, dropped by the queue
/// limit while the two configurations switched, and that waited behind their flow's old frames.
/// htb with 1e3 classes: `tc -batch` changing every class's rate at 1.5 s, its wall time (htb's
/// 16-bit class ids cannot hold 1e5 classes).
#[cfg(target_os = "linux")]
fn reload(tag: &str, mid_cpu: usize) {
    println!("\n| middle | flows | rate change | reload time | of it, reading and building | forwarding thread's swap | frames lost to the change | dropped by the queue limit while switching | waited |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let table = "[table]\nqueues = 131072\nblocks = 1048576\nqueue_limit = \"4KiB\"\n";
    for (flows, label, slow, fast) in [
        (1_000u32, "1e3", "20kbps\"", "40kbps\""),
        (100_000, "1e5", "500bps\"\ncap = \"128B\"\nalpha = \"64B\"", "1000bps\"\ncap = \"128B\"\nalpha = \"64B\""),
    ] {
        let bed = Bed::new(&format!("{tag}r{}", label.replace('e', ""))).unwrap();
        let d = tempfile::tempdir().unwrap();
        let cfg = |rate: &str| format!("{}[shaper]\nflow_rate = \"{rate}\n{table}", base());
        let mut c = npqos(&bed, mid_cpu, d.path(), &cfg(slow), 3);
        std::thread::sleep(std::time::Duration::from_millis(500));
        let snd = netns::in_ns(&bed.snd, move || {
            netns::pin(0);
            netns::send_udp(flows, 0, 64, 3_000_000_000)
        });
        std::thread::sleep(std::time::Duration::from_millis(1500));
        std::fs::write(d.path().join("live.toml"), cfg(fast)).unwrap();
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGHUP) };
        let _ = snd.join();
        let _ = c.wait();
        let text = std::fs::read_to_string(d.path().join("out/summary.json")).unwrap_or_default();
        let j: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let sc = &j["runs"][0]["scalars"];
        let g = |k: &str| sc[k].as_f64().map_or("-".to_string(), |v| format!("{v:.0}"));
        let r = |x: &str| x.split('"').next().unwrap_or(x).to_string();
        println!(
            "| npqos live | {label} | {} to {} | {} us | {} us | {} us | {} | {} | {} |",
            r(slow),
            r(fast),
            g("reload_time_max"),
            g("reload_build_time_max"),
            g("reload_swap_time_max"),
            g("reload_dropped_waiting"),
            g("reload_dropped_queue_full"),
            g("reload_waited")
        );
    }
    let bed = Bed::new(&format!("{tag}rh")).unwrap();
    bed.kernel_htb(1000, 20_000, 4096).unwrap();
    let snd = netns::in_ns(&bed.snd, move || {
        netns::pin(0);
        netns::send_udp(1000, 0, 64, 3_000_000_000)
    });
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let batch: String = (1..=1000u32)
        .map(|c| format!("class change dev out0 parent 1: classid 1:{c:x} htb rate 40000bit ceil 40000bit\n"))
        .collect();
    let path = std::env::temp_dir().join(format!("{}-reload.batch", bed.mid));
    std::fs::write(&path, batch).unwrap();
    let t = std::time::Instant::now();
    let done = netns::sh(&["tc", "-n", &bed.mid, "-batch", &path.display().to_string()]);
    let took = t.elapsed();
    let _ = std::fs::remove_file(&path);
    let _ = snd.join();
    println!(
        "| htb (`tc -batch`, 1,000 class changes) | 1e3 | 20 kbps to 40 kbps | {} us{} | n/a | n/a | n/a (a class change keeps the class's queue) | | |",
        took.as_micros(),
        if done.is_ok() { "" } else { " (tc failed)" }
    );
    println!("| htb | 1e5 | | n/a: htb's class ids are 16 bits | | | | | |");
}

/// Round-trip times of `count` pings 10 ms apart from the sender to the receiver, us, sorted.
#[cfg(target_os = "linux")]
fn pings(bed: &Bed, count: u32) -> Vec<f64> {
    let out = netns::sh(&[
        "ip",
        "netns",
        "exec",
        &bed.snd,
        "ping",
        "-c",
        &count.to_string(),
        "-i",
        "0.01",
        "-W",
        "1",
        "198.18.0.2",
    ])
    .unwrap_or_else(|e| e);
    let mut v: Vec<f64> = out
        .lines()
        .filter_map(|l| l.split("time=").nth(1)?.split_whitespace().next()?.parse::<f64>().ok())
        .map(|ms| ms * 1e3)
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// Latency under load (issue #41): ping's round trip through the middle while 8 UDP flows
/// offered 20 Mbps each are shaped to 10 Mbps (npqos live: ping is a flow of its own, with its
/// own bucket; htb: ping in the unshaped default class), beside the do-nothing forwarder on the
/// same rings (`live.mode = "pass"`, the load passed on unshaped) and the kernel's bridge alone;
/// then the same without the load. Prints a Markdown table of RTT p50 and p99.
#[cfg(target_os = "linux")]
fn latency(tag: &str, mid_cpu: usize) {
    println!("| middle | load | pings answered | RTT p50 | RTT p99 |");
    println!("|---|---|---|---|---|");
    for loaded in [true, false] {
        for (i, middle) in [
            "npqos live, 10 Mbps per flow",
            "npqos live, mode = \"pass\"",
            "htb, 8 classes at 10 Mbps",
            "bridge",
            "npqos live, one class of 40 Mbps (ping in it)",
            "htb, one class of 40 Mbps (ping in it)",
        ]
        .iter()
        .enumerate()
        {
            let bed = Bed::new(&format!("{tag}l{i}{}", loaded as u8)).unwrap();
            netns::sh(&["ip", "-n", &bed.rcv, "addr", "add", "198.18.0.2/24", "dev", "r0"]).unwrap();
            let d = tempfile::tempdir().unwrap();
            let mut child = None;
            match i {
                0 => {
                    let cfg = format!(
                        "{}[shaper]\nflow_rate = \"10Mbps\"\n[table]\nblocks = 65536\nqueue_limit = \"32KiB\"\n",
                        base()
                    );
                    child = Some(npqos(&bed, mid_cpu, d.path(), &cfg, 4));
                }
                1 => {
                    child = Some(npqos(
                        &bed,
                        mid_cpu,
                        d.path(),
                        &format!("{}mode = \"pass\"\n[shaper]\nflow_rate = \"10Mbps\"\n", base()),
                        4,
                    ))
                }
                2 => bed.kernel_htb(8, 10_000_000, 32768).unwrap(),
                // Every flow and ping in one class that the load (160 Mbps) saturates: npqos
                // live keeps a queue per flow under the class's bucket (32 KiB each), htb one
                // bfifo for the class (256 KiB: what the 8 loaded queues may hold in npqos).
                4 => {
                    let cfg = format!(
                        "{}[table]\nblocks = 65536\nqueue_limit = \"32KiB\"\n\
                         [[services]]\nname = \"all\"\nrate = \"40Mbps\"\nrate_per = \"class\"\n",
                        base()
                    );
                    child = Some(npqos(&bed, mid_cpu, d.path(), &cfg, 4));
                }
                5 => bed.kernel_htb_one_class(40_000_000, 8 * 32768).unwrap(),
                3 => bed.bridge().unwrap(),
                _ => unreachable!("six middles"),
            }
            std::thread::sleep(std::time::Duration::from_millis(700));
            let load = loaded.then(|| {
                netns::in_ns(&bed.snd, || {
                    netns::pin(0);
                    netns::send_udp(8, 20_000_000, 1000, 3_000_000_000)
                })
            });
            std::thread::sleep(std::time::Duration::from_millis(300));
            let rtt = pings(&bed, 200);
            if let Some(l) = load {
                let _ = l.join();
            }
            if let Some(mut c) = child {
                let _ = c.wait();
            }
            let q = |x: f64| {
                rtt.get(((rtt.len() as f64 - 1.0) * x).round() as usize).map_or("-".into(), |v| format!("{v:.0} us"))
            };
            println!(
                "| {middle} | {} | {} of 200 | {} | {} |",
                if loaded { "8 x 20 Mbps" } else { "none" },
                rtt.len(),
                q(0.5),
                q(0.99)
            );
        }
    }
}

/// One line of the table: a setup and what it measured.
#[cfg(target_os = "linux")]
struct Row {
    what: String,
    offered_pps: f64,
    forwarded_pps: f64,
    rate_err: Option<f64>,
    own_cpu_ns: Option<f64>,
    machine_cpu_ns: f64,
}

/// What the sender offers: flows, bits/s per flow (0: as fast as it can), UDP payload, seconds.
#[cfg(target_os = "linux")]
struct Load(u32, u64, usize, u64);

/// One run with the middle set up: `npqos` is the live process and its results directory.
#[cfg(target_os = "linux")]
fn run(
    bed: &Bed,
    Load(flows, offered_bps, payload, secs): Load,
    shaped_bps: Option<f64>,
    npqos: Option<(Child, &Path)>,
    what: &str,
) -> Row {
    std::thread::sleep(std::time::Duration::from_millis(500));
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let rcv = netns::in_ns(&bed.rcv, move || netns::receive("r0", &s2));
    std::thread::sleep(std::time::Duration::from_millis(200));
    let busy0 = netns::machine_busy_ns();
    let snd = netns::in_ns(&bed.snd, move || {
        netns::pin(0);
        netns::send_udp(flows, offered_bps, payload, secs * 1_000_000_000)
    });
    let off = snd.join().unwrap().unwrap().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let busy = netns::machine_busy_ns() - busy0;
    stop.store(true, Ordering::Relaxed);
    let got = rcv.join().unwrap().unwrap().unwrap();
    let mut own = None;
    if let Some((mut c, out)) = npqos {
        let _ = c.wait();
        let info: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
        own = info["cpu_ns_per_forwarded_frame"].as_f64();
    }
    let sent: u64 = off.sent.iter().sum();
    let recv: u64 = got.flows.values().map(|f| f.frames).sum();
    let rate_err = shaped_bps.map(|r| {
        got.flows.values().filter_map(|f| f.rate_bps()).map(|b| (b / r - 1.0).abs() * 100.0).fold(0.0, f64::max)
    });
    Row {
        what: what.into(),
        offered_pps: sent as f64 / (off.elapsed_ns as f64 / 1e9),
        forwarded_pps: recv as f64 / (off.elapsed_ns as f64 / 1e9),
        rate_err,
        own_cpu_ns: own,
        machine_cpu_ns: busy as f64 / recv.max(1) as f64,
    }
}

/// Starts `npqos live` in the bed's middle namespace on core `mid_cpu`, its config `cfg` in `dir`.
#[cfg(target_os = "linux")]
fn npqos(bed: &Bed, mid_cpu: usize, dir: &Path, cfg: &str, secs: u64) -> Child {
    npqos_on(bed, Some(mid_cpu), dir, cfg, secs)
}

/// [`npqos`] on core `cpu`, or on every core with `None`.
#[cfg(target_os = "linux")]
fn npqos_on(bed: &Bed, cpu: Option<usize>, dir: &Path, cfg: &str, secs: u64) -> Child {
    let p = dir.join("live.toml");
    std::fs::write(&p, cfg).unwrap();
    let cpus = cpu.map_or_else(
        || format!("0-{}", std::thread::available_parallelism().map_or(1, |n| n.get()) - 1),
        |c| c.to_string(),
    );
    Command::new("ip")
        .args(["netns", "exec", &bed.mid, "taskset", "-c", &cpus])
        .arg(std::env::var_os("NPQOS_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_npqos").into()))
        .arg("live")
        .arg(&p)
        .arg("--out")
        .arg(dir.join("out"))
        .arg("--quiet")
        .arg("--duration")
        .arg(format!("{}s", secs + 2))
        .spawn()
        .unwrap()
}

/// iperf3 over TCP with 8 and 64 parallel flows, default offloads on the sender, each flow
/// shaped to 10 Mbps: through npqos live (its per-flow rate) and through htb (a class per
/// client port, `--cport`, a bfifo of 64 KiB under each; the bridge's work on its CPU, the
/// endpoints' processes and stacks on the other: [`Bed::steer`]), with CUBIC (most distributions'
/// default) and with BBR (this VM's), `NPQOS_LIVE_TCP_RUNS` runs of each (default 3). Per flow,
/// the goodput at the receiver in frame bytes (x 1514 / 1448: a 1,448 B segment with TCP
/// timestamps is a 1,514 B frame), over 8 s after the first 2 (`-O 2` leaves out slow start);
/// the spread and the retransmissions; for npqos live, the share of its 100 ms samples in the
/// measured 8 s in which some flow's queue was empty (the sender did not offer: what the
/// shaper cannot make up).
#[cfg(target_os = "linux")]
fn tcp_flows(tag: &str, mid_cpu: usize) {
    if Command::new("iperf3").arg("--version").output().map_or(true, |o| !o.status.success()) {
        println!("SKIPPED the TCP benchmark: no iperf3 (apt-get install iperf3)");
        return;
    }
    let runs: u32 = std::env::var("NPQOS_LIVE_TCP_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    println!(
        "\n| setup | congestion control | flows | run | per-flow rate in frame bytes, min / median / max | worst error | retransmits | samples with an empty queue |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for flows in [8u32, 64] {
        for cc in ["cubic", "bbr"] {
            for run in 1..=runs {
                for shaper in ["npqos live", "htb"] {
                    tcp_run(tag, mid_cpu, flows, cc, run, shaper);
                }
            }
        }
    }
}

/// One row of [`tcp_flows`].
#[cfg(target_os = "linux")]
fn tcp_run(tag: &str, mid_cpu: usize, flows: u32, cc: &str, run: u32, shaper: &str) {
    let bed = Bed::new(&format!("{tag}t{flows}{}", &shaper[..1])).unwrap();
    // The endpoints (iperf3 and their stacks) on the other CPU, the bridge on its own.
    let end_cpu = if mid_cpu == 0 { 1 } else { 0 };
    bed.steer(end_cpu, mid_cpu).unwrap();
    let pin = end_cpu.to_string();
    // The receiver's stack answers at 198.18.0.2, found through the middle (ARP).
    netns::sh(&["ip", "-n", &bed.rcv, "addr", "add", "198.18.0.2/24", "dev", "r0"]).unwrap();
    netns::sh(&["ip", "-n", &bed.snd, "neigh", "del", "198.18.0.2", "dev", "s0"]).unwrap();
    let d = tempfile::tempdir().unwrap();
    let child = match shaper {
        "htb" => {
            bed.kernel_htb_tcp(flows, 40000, 10_000_000, 65536).unwrap();
            None
        }
        _ => Some(npqos(
            &bed,
            mid_cpu,
            d.path(),
            &format!("{}[shaper]\nflow_rate = \"10Mbps\"\n[table]\nqueue_limit = \"64KiB\"\n", base()),
            12,
        )),
    };
    let mut server = Command::new("ip")
        .args(["netns", "exec", &bed.rcv, "taskset", "-c", &pin, "iperf3", "-s", "-1", "-B", "198.18.0.2"])
        .args(["-p", "5201"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let n = flows.to_string();
    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            &bed.snd,
            "taskset",
            "-c",
            &pin,
            "iperf3",
            "-c",
            "198.18.0.2",
            "-p",
            "5201",
            "-P",
            &n,
            "-C",
            cc,
        ])
        .args(["-t", "10", "-O", "2", "--cport", "40000", "-J"])
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let mut empty = String::from("n/a");
    if let Some(mut c) = child {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGINT) };
        let _ = c.wait();
        empty = empty_queue_share(&d.path().join("out/series.csv"), flows);
    }
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    let streams = j["end"]["streams"].as_array().cloned().unwrap_or_default();
    let mut rates: Vec<f64> = streams
        .iter()
        .map(|s| s["receiver"]["bits_per_second"].as_f64().unwrap_or(0.0) * 1514.0 / 1448.0 / 1e6)
        .collect();
    rates.sort_by(f64::total_cmp);
    let retrans: i64 = streams.iter().map(|s| s["sender"]["retransmits"].as_i64().unwrap_or(0)).sum();
    if rates.len() != flows as usize {
        let out = String::from_utf8_lossy(&o.stdout);
        let why = j["error"].as_str().map_or_else(|| out.chars().take(300).collect(), String::from);
        println!("| {shaper} | {cc} | {flows} | {run} | iperf3 gave {} streams: {why} | | | |", rates.len());
        return;
    }
    let err = rates.iter().map(|r| (r / 10.0 - 1.0).abs() * 100.0).fold(0.0, f64::max);
    println!(
        "| {shaper} | {cc} | {flows} | {run} | {:.3} / {:.3} / {:.3} Mbps | {err:.2}% | {retrans} | {empty} |",
        rates[0],
        rates[rates.len() / 2],
        rates[rates.len() - 1]
    );
}

/// The share of npqos live's 100 ms samples between 2.5 s and 10.5 s of its run (iperf3's
/// measured seconds, after its 0.5 s start and 2 s left out) in which fewer than `flows`
/// flows had frames queued.
#[cfg(target_os = "linux")]
fn empty_queue_share(series: &Path, flows: u32) -> String {
    let text = std::fs::read_to_string(series).unwrap_or_default();
    let samples: Vec<f64> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let t: f64 = f.get(3)?.parse().ok()?;
            (f.get(2) == Some(&"active_flows") && (2.5..10.5).contains(&t)).then(|| f.get(4)?.parse().ok())?
        })
        .collect();
    if samples.is_empty() {
        return "no samples".into();
    }
    let short = samples.iter().filter(|&&a| a < f64::from(flows)).count();
    format!("{:.0}% of {}", 100.0 * short as f64 / samples.len() as f64, samples.len())
}

/// Eight flows offered 20 Mbps, shaped to 10 Mbps: npqos live, then htb.
#[cfg(target_os = "linux")]
fn rate_error(rows: &mut Vec<Row>, tag: &str, mid_cpu: usize) {
    {
        let bed = Bed::new(&format!("{tag}a")).unwrap();
        let d = tempfile::tempdir().unwrap();
        let c = npqos(
            &bed,
            mid_cpu,
            d.path(),
            &format!("{}[shaper]\nflow_rate = \"10Mbps\"\n[table]\nblocks = 65536\nqueue_limit = \"32KiB\"\n", base()),
            3,
        );
        let out = d.path().join("out");
        rows.push(run(
            &bed,
            Load(8, 20_000_000, 1000, 3),
            Some(10e6),
            Some((c, &out)),
            "npqos live, 8 flows 20 -> 10 Mbps",
        ));
    }
    {
        let bed = Bed::new(&format!("{tag}b")).unwrap();
        bed.kernel_htb(8, 10_000_000, 32768).unwrap();
        rows.push(run(&bed, Load(8, 20_000_000, 1000, 3), Some(10e6), None, "htb, 8 flows 20 -> 10 Mbps"));
    }
}

/// Many flows as fast as the sender goes: npqos live with 1e3 and 1e5 flows, then htb with 1e3.
#[cfg(target_os = "linux")]
fn many_flows(rows: &mut Vec<Row>, tag: &str, mid_cpu: usize) {
    // 64 B datagrams, 106 B frames, npqos live on one core. The sender's ~220,000 frames/s give
    // each of 1e3 flows about 190 kbps and each of 1e5 flows about 1.9 kbps, so the throttled
    // rate is below that: 20 kbps, and 500 bps with a cap of 128 B (one frame, and the next
    // overdraws) so that 3 s are not all burst.
    // `NPQOS_FLOWS_ONLY`: the npqos rows to run, by label and how (for example `1e3
    // throttled,1e5 not throttled`), without htb's.
    let only = std::env::var("NPQOS_FLOWS_ONLY").ok();
    for (flows, label, slow) in
        [(1_000u32, "1e3", "20kbps"), (100_000, "1e5", "500bps\"\ncap = \"128B\"\nalpha = \"64B")]
    {
        for (rate, how) in [("10Gbps", "not throttled"), (slow, "throttled")] {
            if only.as_ref().is_some_and(|o| !o.split(',').any(|o| format!("{label} {how}") == o.trim())) {
                continue;
            }
            let bed = Bed::new(&format!("{tag}{}{}", label.replace('e', ""), &how[..3])).unwrap();
            let d = tempfile::tempdir().unwrap();
            let c = npqos(
                &bed,
                mid_cpu,
                d.path(),
                &format!(
                    "{}[shaper]\nflow_rate = \"{rate}\"\n[table]\nqueues = 131072\nblocks = 1048576\nqueue_limit = \"4KiB\"\n",
                    base()
                ),
                3,
            );
            let out = d.path().join("out");
            let what = format!("npqos live, {label} flows at {} ({how})", rate.split('"').next().unwrap_or(rate));
            rows.push(run(&bed, Load(flows, 0, 64, 3), None, Some((c, &out)), &what));
        }
    }
    if only.is_some() {
        return;
    }
    for (h, rate, how) in [("h3", 10_000_000_000, "10 Gbps (not throttled)"), ("h4", 20_000, "20 kbps (throttled)")] {
        let bed = Bed::new(&format!("{tag}{h}")).unwrap();
        bed.kernel_htb(1000, rate, 4096).unwrap();
        rows.push(run(&bed, Load(1000, 0, 64, 3), None, None, &format!("htb, 1e3 classes at {how}")));
    }
}

/// Prints the rows as a Markdown table.
#[cfg(target_os = "linux")]
fn print_table(rows: &[Row]) {
    println!("| setup | offered (frames/s) | forwarded (frames/s) | worst rate error | npqos CPU per forwarded frame | machine CPU per forwarded frame |");
    println!("|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {:.0} | {:.0} | {} | {} | {:.0} ns |",
            r.what,
            r.offered_pps,
            r.forwarded_pps,
            r.rate_err.map_or("-".into(), |e| format!("{e:.2}%")),
            r.own_cpu_ns.map_or("-".into(), |c| format!("{c:.0} ns")),
            r.machine_cpu_ns
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn main() {
    println!("SKIPPED live benchmark: Linux only");
}
