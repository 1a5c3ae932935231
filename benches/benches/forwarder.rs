//! npqos live's forwarder without its rings (docs/PERFORMANCE.md): what one frame costs its
//! thread from the ring block to the transmit ring, in user space, with 1e3 and 1e5 flows of
//! 106 B UDP frames, throttled (20 kbps a flow: most frames dropped at their full 4 KiB
//! queue) and not (10 Gbps a flow), the live benchmark's rows on a simulated clock.
//!
//! Frames come in blocks of 256 laid out one after another as in a TPACKET_V3 block, flows in
//! a seeded random order, 200,000 frames/s of simulated time. Between blocks 8 MiB are written
//! (not timed), as the kernel's copies into the rings and its skbs do between two turns of the
//! forwarding thread on the namespace bed, so that the flows' state is not all in cache.
//! `plain` gives each frame to `receive`; `look_ahead` first hints the next two frames
//! (`Forwarder::look_ahead`, what `npqos live`'s worker does). The same forwarder on 1 and 2
//! threads at once: the `forwarder_threads` benchmark.
//!
//! Run: `cargo bench -p npqos-benches --bench forwarder`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use npqos_benches::frames::{blocks, forwarder, turn, BLOCK};
use std::time::{Duration, Instant as Wall};

/// Simulated time between frames: 200,000 frames/s.
const GAP_NS: u64 = 5_000;

fn bench(c: &mut Criterion) {
    let mut dirt = vec![0u8; 8 << 20];
    let mut g = c.benchmark_group("forwarder");
    g.throughput(Throughput::Elements(BLOCK as u64));
    g.sample_size(20).measurement_time(Duration::from_secs(6));
    for flows in [1_000u32, 100_000] {
        let frames = blocks((0..(BLOCK * 400) as u32).map(|i| i % flows).collect(), 7);
        for (rate, how) in [("20kbps", "throttled"), ("10Gbps", "not_throttled")] {
            for ahead in [false, true] {
                let name = format!(
                    "{}_{how}_{}",
                    if flows == 1000 { "1e3" } else { "1e5" },
                    if ahead { "look_ahead" } else { "plain" }
                );
                let mut fw = forwarder(rate, None, None);
                let mut now = 1_000_000u64;
                // Every flow seen before timing starts.
                for b in &frames {
                    now = turn(&mut fw, b, now, GAP_NS, ahead);
                }
                let mut k = 0;
                g.bench_function(name, |bn| {
                    bn.iter_custom(|iters| {
                        let mut spent = Duration::ZERO;
                        for _ in 0..iters {
                            for (j, d) in dirt.iter_mut().enumerate().step_by(64) {
                                *d = d.wrapping_add(j as u8);
                            }
                            let w = Wall::now();
                            now = turn(&mut fw, &frames[k % frames.len()], now, GAP_NS, ahead);
                            spent += w.elapsed();
                            k += 1;
                        }
                        spent
                    })
                });
            }
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
