//! npqos live's forwarder on 1 and 2 threads at once, without its rings (issue #44,
//! docs/PERFORMANCE.md): kim's parallel heaps on real cores, each thread with its own
//! forwarder (its own flow table, buckets and shaper heap) and its own share of the flows, as
//! the kernel's fanout gives npqos live's threads theirs. On the namespace bed the sender and
//! the kernel's delivery share this machine's two cores with the forwarding threads; here each
//! thread has a core to itself (thread `i` pinned to CPU `i`; one thread alone on CPU 1), so
//! what two threads cost against one is the forwarder's own scaling.
//!
//! Rows: 1e3, 1e5 and 1e6 flows of 106 B UDP frames, not throttled (10 Gbps a flow) and
//! throttled (the live benchmark's threads rows: 20 kbps at 1e3 flows; 500 bps with a cap of
//! 128 B, one frame, at 1e5 and 1e6), 200,000 frames/s of simulated time in all (each of two
//! threads a frame every 10 us of its own clock). Each thread's frames (every one of its flows
//! at least twice; 409,600 frames or more in all, in whole blocks) are seen once untimed, then twice timed, a
//! block of 256 at a time; between blocks each thread writes 8 MiB over the threads (not timed),
//! as the kernel's copies do on the bed ([`forwarder`](../forwarder.rs)'s benchmark). Timed:
//! the thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`) and wall time over its turns.
//!
//! Columns: CPU ns per frame over every thread's frames, per thread; frames per second of
//! forwarding wall time (each thread's frames over its timed wall time, summed over the
//! threads: what the threads forward together when the frames come as fast as they take
//! them); and two threads against one. `NPQOS_FWT_RUNS` runs per row (default 3), 1 and 2
//! threads alternated; medians. `NPQOS_FWT_FLOWS` narrows the rows to one flow count;
//! `NPQOS_FWT_SLOTS` sets `[table] slots` (dqs's AFM slots, per thread; default the queues',
//! 256 until 2026-11-27's fifth session).
//!
//! Run: `cargo bench -p npqos-benches --bench forwarder_threads`.

use npqos_benches::frames::{blocks, forwarder, turn, BLOCK};
use std::time::Instant as Wall;

/// Simulated time between frames over every thread: 200,000 frames/s.
const GAP_NS: u64 = 5_000;

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET within its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// What one thread measured: frames timed, CPU ns and wall ns over them, frames sent.
#[derive(Clone, Copy, Default)]
struct One {
    frames: u64,
    cpu_ns: u64,
    wall_ns: u64,
    sent: u64,
}

/// One run of a row on `sets.len()` threads, thread `i` on CPU `cpus[i]` with the blocks
/// `sets[i]`.
fn run(rate: &str, (queues, slots): (u32, Option<u32>), sets: &[Vec<Vec<u8>>], cpus: &[usize]) -> Vec<One> {
    let threads = sets.len();
    let barrier = std::sync::Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (sets.iter().zip(cpus))
            .map(|(set, &cpu)| {
                let barrier = &barrier;
                s.spawn(move || {
                    pin(cpu);
                    let mut fw = forwarder(rate, Some(queues), slots);
                    let gap = GAP_NS * threads as u64;
                    let mut dirt = vec![0u8; (8 << 20) / threads];
                    let mut now = 1_000_000u64;
                    for b in set {
                        now = turn(&mut fw, b, now, gap, true);
                    }
                    let sent0 = fw.totals().frames_out;
                    barrier.wait();
                    let mut one = One::default();
                    for b in set.iter().chain(set) {
                        for (j, d) in dirt.iter_mut().enumerate().step_by(64) {
                            *d = d.wrapping_add(j as u8);
                        }
                        let (c, w) = (thread_cpu_ns(), Wall::now());
                        now = turn(&mut fw, b, now, gap, true);
                        one.wall_ns += w.elapsed().as_nanos() as u64;
                        one.cpu_ns += thread_cpu_ns() - c;
                        one.frames += BLOCK as u64;
                    }
                    one.sent = fw.totals().frames_out - sent0;
                    one
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("forwarder_threads: bench");
        return;
    }
    let runs: usize = std::env::var("NPQOS_FWT_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let only: Option<u32> = std::env::var("NPQOS_FWT_FLOWS").ok().and_then(|v| v.parse().ok());
    let slots: Option<u32> = std::env::var("NPQOS_FWT_SLOTS").ok().and_then(|v| v.parse().ok());
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        println!("forwarder_threads: skipped, it needs 2 CPUs and this machine has {cpus}");
        return;
    }
    println!("\n{runs} runs per row, medians; thread i on CPU i (one thread on CPU 1).\n");
    println!("| flows | rate per flow | threads | CPU per frame | per thread | frames/s of forwarding time | sent per frame | 2 threads / 1: CPU per frame | 2 threads / 1: frames/s |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for flows in [1_000u32, 100_000, 1_000_000].into_iter().filter(|f| only.is_none_or(|o| o == *f)) {
        let queues = (if flows > 131_072 { 1_048_576 } else { 131_072 }, slots);
        // Every flow at least twice, at least 409,600 frames, whole blocks (a block's tail is
        // never empty frames): flow f is thread f % t's.
        let times = (409_600usize.div_ceil(flows as usize)).max(2);
        let whole = |n: usize| n.div_ceil(BLOCK) * BLOCK;
        let sets = |t: u32| -> Vec<Vec<Vec<u8>>> {
            (0..t)
                .map(|i| {
                    blocks(
                        (0..flows).filter(|f| f % t == i).cycle().take(whole((flows / t) as usize * times)).collect(),
                        7 + i as u64,
                    )
                })
                .collect()
        };
        let (one, two) = (sets(1), sets(2));
        let slow = if flows <= 1000 { "20kbps" } else { "500bps\"\ncap = \"128B\"\nalpha = \"64B" };
        for (rate, shown) in [("10Gbps", "10Gbps"), (slow, if flows <= 1000 { "20kbps" } else { "500bps" })] {
            let mut got: [Vec<Vec<One>>; 2] = Default::default();
            for _ in 0..runs {
                got[0].push(run(rate, queues, &one, &[1]));
                got[1].push(run(rate, queues, &two, &[0, 1]));
            }
            let cpu = |r: &Vec<One>| {
                r.iter().map(|o| o.cpu_ns).sum::<u64>() as f64 / r.iter().map(|o| o.frames).sum::<u64>() as f64
            };
            let fps = |r: &Vec<One>| r.iter().map(|o| o.frames as f64 / (o.wall_ns as f64 / 1e9)).sum::<f64>();
            let sent = |r: &Vec<One>| {
                r.iter().map(|o| o.sent).sum::<u64>() as f64 / r.iter().map(|o| o.frames).sum::<u64>() as f64
            };
            let (c1, c2) = (median(got[0].iter().map(cpu).collect()), median(got[1].iter().map(cpu).collect()));
            let (f1, f2) = (median(got[0].iter().map(fps).collect()), median(got[1].iter().map(fps).collect()));
            for (t, rs, c, f) in [(1, &got[0], c1, f1), (2, &got[1], c2, f2)] {
                let per: Vec<String> = (0..t)
                    .map(|i| {
                        format!(
                            "{:.0} ns",
                            median(rs.iter().map(|r| r[i].cpu_ns as f64 / r[i].frames as f64).collect())
                        )
                    })
                    .collect();
                let ratio = if t == 2 { format!("{:.3} | {:.2}", c2 / c1, f2 / f1) } else { " | ".to_string() };
                println!(
                    "| {flows} | {shown} | {t} | {c:.0} ns | {} | {f:.0} | {:.3} | {ratio} |",
                    per.join(", "),
                    median(rs.iter().map(sent).collect())
                );
            }
        }
    }
}
