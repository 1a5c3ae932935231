//! The threads part of the live benchmark (`NPQOS_LIVE_BENCH=threads`): npqos live on 1 and 2
//! forwarding threads beside the do-nothing forwarder and htb (see [`threads`]).

use super::{base, npqos_on};
use npqos_cli::live::netns::{self, Bed};
use std::{path::Path, process::Child};

/// `r0`'s received frames in the receiver's namespace (what crossed the middle box).
fn r0_frames(bed: &Bed) -> u64 {
    let at = ["ip", "netns", "exec", &bed.rcv, "cat", "/sys/class/net/r0/statistics/rx_packets"];
    netns::sh(&at).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

/// npqos live on every core (issue #44): 1 and 2 forwarding threads, 1e3, 1e5 and 1e6 flows of
/// 106 B frames from the transmit-ring sender ([`netns::send_ring`], on CPU 0, 3 s), not
/// throttled (10 Gbps per flow) and throttled (the many-flows part's rates); beside the
/// do-nothing forwarder (`mode = "pass"`) on the same rings and htb with 1e3 classes (its 16-bit
/// class ids hold no more than 65,534). npqos live is not pinned with 2 threads (one per CPU)
/// and pinned to CPU 1 with one. Each setup runs `NPQOS_THREADS_RUNS` times (default 3), 1 and
/// 2 threads alternated, and each column is the median of its runs: frames the sender offered
/// per second, frames the middle took from its receive rings (and those the kernel dropped at a
/// full ring, and the pipeline dropped), frames that reached the receiver per second, the
/// forwarding threads' CPU per frame taken (of it, in user space; and each thread's), their
/// sleeps in `ppoll` per second, the frames taken per turn of their loops, the frames handed to
/// the thread that owns their bucket (a share of those taken), and the machine's CPU per frame
/// forwarded. At 1e3 flows a row with every flow in one class (one bucket, one owner thread)
/// shows what handing frames over costs. `NPQOS_THREADS_FLOWS` narrows the flow counts
/// (`1000`); `NPQOS_THREADS_RATE` keeps the rows of one rate per flow (`20kbps`: the throttled
/// rows at 1e3 flows and htb's at 20 kbps, without the do-nothing forwarder's, to run one row
/// many times); `NPQOS_THREADS_ONE_ON=0` pins the one thread to CPU 0, where the sender runs
/// (default 1); `NPQOS_THREADS_SLOTS` sets `[table] slots`; `NPQOS_THREADS_MAC=other` sends to
/// a MAC not the receiver's, which it drops on entering IP; `NPQOS_THREADS_PACE=<frames/s>` offers
/// that rate, not all the sender can (one load for 1 and 2 threads; the sender sleeps beside the
/// thread on its CPU). Each bed's veths have a queue per thread: `NPQOS_LIVE_EXTRA='io = "xdp"'`
/// runs on AF_XDP.
pub(super) fn threads(tag: &str) {
    let runs: usize = std::env::var("NPQOS_THREADS_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    println!("\n{runs} runs per row, medians.\n");
    println!("| middle | threads | flows | rate per flow | offered (frames/s) | taken (frames/s) | dropped at the receive ring | dropped in the pipeline | forwarded (frames/s) | forwarding CPU per frame taken | of it, in user space | wake-ups/s | frames per turn | per thread | handed over | machine CPU per frame forwarded |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let only: Option<u32> = std::env::var("NPQOS_THREADS_FLOWS").ok().and_then(|v| v.parse().ok());
    let slots = std::env::var("NPQOS_THREADS_SLOTS").map(|v| format!("slots = {v}\n")).unwrap_or_default();
    let table = |flows: u32| {
        let queues = if flows > 131_072 { 1_048_576 } else { 131_072 };
        format!("[table]\nqueues = {queues}\nblocks = 1048576\nqueue_limit = \"4KiB\"\n{slots}")
    };
    let mut setups: Vec<(&str, u32, String)> = vec![("pass", 1000, String::new())];
    for flows in [1_000u32, 100_000, 1_000_000].into_iter().filter(|f| only.is_none_or(|o| o == *f)) {
        let slow = if flows <= 1000 { "20kbps\"" } else { "500bps\"\ncap = \"128B\"\nalpha = \"64B\"" };
        for rate in ["10Gbps\"", slow] {
            setups.push(("npqos", flows, rate.to_string()));
        }
        if flows == 1000 {
            // Every flow in one bucket that one thread owns: with 2 threads the other hands it
            // its share of the frames (docs/live.md, "A rate that spans threads").
            setups.push(("class", flows, "10Gbps\"".to_string()));
        }
    }
    // `NPQOS_THREADS_RATE`: only the setups of that rate per flow (the do-nothing forwarder
    // has none, so it goes too, as do htb's rows unless their rate is it).
    let only_rate = std::env::var("NPQOS_THREADS_RATE").ok();
    // `NPQOS_THREADS_ONE_ON`: the CPU the one thread is pinned to (1, away from the sender; 0,
    // where the sender runs).
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let one_on: usize = match std::env::var("NPQOS_THREADS_ONE_ON") {
        Err(_) => 1,
        Ok(v) => v
            .parse()
            .ok()
            .filter(|&c| c < cpus)
            .unwrap_or_else(|| panic!("NPQOS_THREADS_ONE_ON={v:?}: expected a CPU number from 0 to {}", cpus - 1)),
    };
    let keep = |rate: &str| only_rate.as_deref().is_none_or(|r| rate_shown(rate) == r);
    let mut rates: Vec<&str> = setups.iter().filter(|s| s.0 != "pass").map(|s| rate_shown(&s.2)).collect();
    rates.sort();
    rates.dedup();
    let rates = rates.join(", ");
    setups.retain(|(what, _, rate)| only_rate.is_none() || (*what != "pass" && keep(rate)));
    if let Some(r) = only_rate.as_deref().filter(|_| setups.is_empty()) {
        println!("NPQOS_THREADS_RATE={r:?} matches no row; the rows' rates: {rates}");
        return;
    }
    let mut n = 0;
    for (what, flows, rate) in setups {
        let shown = rate_shown(&rate).to_string();
        let label = match what {
            "pass" => "do-nothing (mode = pass)",
            "class" => "npqos live, one class of every flow",
            _ => "npqos live",
        };
        let mut got: [Vec<Measure>; 2] = Default::default();
        for _ in 0..runs {
            for t in [1u32, 2] {
                n += 1;
                let bed = Bed::with_queues(&format!("{tag}t{n}"), t).unwrap();
                let d = tempfile::tempdir().unwrap();
                let cfg = match what {
                    "pass" => format!("{}threads = {t}\nmode = \"pass\"\n[shaper]\nflow_rate = \"10Gbps\"\n", base()),
                    "class" => format!(
                        "{}threads = {t}\n[shaper]\nalpha = \"64KiB\"\ncap = \"1MiB\"\n{}[[services]]\nname = \"all\"\nprotocols = [\"udp\"]\nrate = \"{rate}\nrate_per = \"class\"\n",
                        base(),
                        // One queue per flow as in the rows above, deep enough for a turn's frames,
                        // and a bucket deep enough for a turn's (the thread looks at it once a turn).
                        table(flows).replace("4KiB", "1MiB")
                    ),
                    _ => format!("{}threads = {t}\n[shaper]\nflow_rate = \"{rate}\n{}", base(), table(flows)),
                };
                let c = npqos_on(&bed, if t == 1 { Some(one_on) } else { None }, d.path(), &cfg, 3);
                got[t as usize - 1].push(measure(&bed, t, flows, Some((c, d.path()))));
            }
        }
        for t in [1u32, 2] {
            print_measures(label, t, flows, &shown, &got[t as usize - 1]);
        }
    }
    for (rate, shown) in [(10_000_000_000u64, "10Gbps"), (20_000, "20kbps")].into_iter().filter(|(_, s)| keep(s)) {
        let mut got = Vec::new();
        for r in 0..runs {
            let bed = Bed::new(&format!("{tag}th{}{r}", &shown[..2])).unwrap();
            bed.kernel_htb(1000, rate, 4096).unwrap();
            got.push(measure(&bed, 0, 1000, None));
        }
        print_measures("htb (kernel, softirq)", 0, 1000, shown, &got);
    }
}

/// A setup's rate as the table shows it: the TOML string's contents before its closing quote
/// (`500bps"\ncap = ...` is `500bps`).
fn rate_shown(rate: &str) -> &str {
    rate.split('"').next().unwrap_or("")
}

/// What one run of the threads part measured.
#[derive(Clone, Debug, Default)]
struct Measure {
    offered: f64,
    forwarded: f64,
    machine_ns: f64,
    npqos: Option<Own>,
}

/// What npqos live's results said of one run of the threads part.
#[derive(Clone, Debug, Default)]
struct Own {
    /// Frames/s its receive rings took.
    taken: f64,
    /// Frames the kernel dropped at a full receive ring, and the pipeline dropped.
    ring: f64,
    dropped: f64,
    /// The forwarding threads' CPU ns per frame taken, and per thread (ns per frame, frames).
    cpu_ns: f64,
    /// Of it, in user space (ns per frame taken); the threads' sleeps in `ppoll` per second;
    /// frames taken per turn of their loops (what a turn's fixed costs are spread over).
    user_ns: f64,
    sleeps: f64,
    per_turn: f64,
    per: Vec<(f64, f64)>,
    /// Frames handed to the thread that owns their bucket, a share of the frames taken.
    handed: f64,
}

/// One run of the threads part: the ring sender for 3 s, then what it measured.
fn measure(bed: &Bed, t: u32, flows: u32, npqos: Option<(Child, &Path)>) -> Measure {
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (got0, busy0) = (r0_frames(bed), netns::machine_busy_ns());
    let other = std::env::var("NPQOS_THREADS_MAC").is_ok_and(|m| m == "other");
    let mac = if other { "02:00:5e:10:00:99".to_string() } else { bed.rcv_mac.clone() };
    let snd = netns::in_ns(&bed.snd, move || {
        netns::pin(0);
        let pace = std::env::var("NPQOS_THREADS_PACE").ok().and_then(|v| v.parse().ok());
        netns::send_ring("s0", &mac, flows, 64, 3_000_000_000, pace)
    });
    let off = snd.join().unwrap().unwrap().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (got, busy) = (r0_frames(bed) - got0, netns::machine_busy_ns() - busy0);
    let secs = off.elapsed_ns as f64 / 1e9;
    let sent: u64 = off.sent.iter().sum();
    let mut m = Measure {
        offered: sent as f64 / secs,
        forwarded: got as f64 / secs,
        machine_ns: busy as f64 / got.max(1) as f64,
        npqos: None,
    };
    if let Some((mut c, dir)) = npqos {
        let _ = c.wait();
        let text = std::fs::read_to_string(dir.join("out/summary.json")).unwrap_or_default();
        let j: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let sc = &j["runs"][0]["scalars"];
        let rx = sc["rx_frames"].as_f64().unwrap_or(0.0);
        let dropped: f64 = (sc.as_object().into_iter().flatten())
            .filter(|(k, _)| k.starts_with("dropped_") && !k.contains("rx_ring"))
            .filter_map(|(_, v)| v.as_f64())
            .sum();
        let info: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("out/run.json")).unwrap_or_default())
                .unwrap_or_default();
        let cpu_s = info["cpu_s"].as_f64().unwrap_or(0.0);
        let per: Vec<(f64, f64)> = (0..t)
            .filter_map(|i| {
                let (c, r) = (sc[format!("thread_cpu.{i}")].as_f64()?, sc[format!("thread_rx_frames.{i}")].as_f64()?);
                Some((c * 1e9 / r.max(1.0), r))
            })
            .collect();
        let ring = sc["dropped_rx_ring"].as_f64().unwrap_or(0.0);
        let user_ns = sc["forwarding_cpu_user"].as_f64().unwrap_or(0.0) * 1e9 / rx.max(1.0);
        // Over the run's duration (the sender's 3 s sit within it).
        let sleeps = sc["forwarding_sleeps"].as_f64().unwrap_or(0.0) / info["elapsed_s"].as_f64().unwrap_or(1.0);
        let handed = sc["handed_over"].as_f64().unwrap_or(0.0) / rx.max(1.0);
        m.npqos = Some(Own {
            taken: rx / secs,
            ring,
            dropped,
            cpu_ns: cpu_s * 1e9 / rx.max(1.0),
            user_ns,
            sleeps,
            per_turn: rx / sc["forwarding_turns"].as_f64().unwrap_or(0.0).max(1.0),
            per,
            handed,
        });
    }
    m
}

/// The median of `v` (0 when empty).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// One row of the threads part: the medians of `ms`.
fn print_measures(label: &str, t: u32, flows: u32, rate: &str, ms: &[Measure]) {
    let col = |f: &dyn Fn(&Measure) -> Option<f64>| median(ms.iter().filter_map(f).collect());
    let on = ms.iter().any(|m| m.npqos.is_some());
    let show = |x: f64, unit: &str| if on { format!("{x:.0}{unit}") } else { "-".into() };
    let per = (0..t as usize)
        .map(|i| {
            let c = col(&|m| Some(m.npqos.as_ref()?.per.get(i)?.0));
            let r = col(&|m| Some(m.npqos.as_ref()?.per.get(i)?.1));
            format!("{c:.0} ns of {r:.0}")
        })
        .collect::<Vec<_>>();
    println!(
        "| {label} | {} | {flows} | {rate} | {:.0} | {} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {:.0} ns |",
        if t == 0 { "-".to_string() } else { t.to_string() },
        col(&|m| Some(m.offered)),
        show(col(&|m| Some(m.npqos.as_ref()?.taken)), ""),
        show(col(&|m| Some(m.npqos.as_ref()?.ring)), ""),
        show(col(&|m| Some(m.npqos.as_ref()?.dropped)), ""),
        col(&|m| Some(m.forwarded)),
        show(col(&|m| Some(m.npqos.as_ref()?.cpu_ns)), " ns"),
        show(col(&|m| Some(m.npqos.as_ref()?.user_ns)), " ns"),
        show(col(&|m| Some(m.npqos.as_ref()?.sleeps)), ""),
        if on { format!("{:.1}", col(&|m| Some(m.npqos.as_ref()?.per_turn))) } else { "-".into() },
        if t > 1 && on { per.join(", ") } else { "-".into() },
        if t > 1 && on { format!("{:.1}%", 100.0 * col(&|m| Some(m.npqos.as_ref()?.handed))) } else { "-".into() },
        col(&|m| Some(m.machine_ns)),
    );
}
