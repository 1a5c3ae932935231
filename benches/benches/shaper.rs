//! Shaper hot path: per packet, `packet` (eligibility check and token update, plus the
//! throttle bookkeeping) and the end-of-packet `poll`, at 1e3, 1e5 and 1e6 queues sharing
//! 100 Gbps (each shaped to 100 Gbps / N), IMIX sizes, Poisson arrivals at overload 1.1,
//! alpha = cap = 3000 B, for the shapers of `npqos_benches`: npqos's `EventShaper` with the
//! paper's heap and with the bucketed FFS wheel, then on one shared bucket path the paper's
//! heap, the FFS wheel, an ordered map, a Carousel timing wheel, and the periodic sweep with a
//! 1 ms period; and the stream generator alone.
//! Two groups: `shaper` hands the shapers one packet at a time; `shaper_batched` runs the
//! stream 16 packets ahead and hints each shaper to load the bucket of the packet 16 places
//! ahead, as a data plane working on bursts does, so the bucket misses overlap and what differs
//! between the timers shows.
//! The state runs on across criterion's iterations; each shaper first runs 2 simulated
//! seconds (about 5e7 packets) so its waiting set is at steady state.
//! Results: docs/PERFORMANCE.md. Run: `cargo bench -p npqos-benches --bench shaper`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use npqos_benches::{drive, BenchShaper, Event, FfsWheel, Heap, OrderedMap, PeriodicSweep, Stream, TimingWheel};
use npqos_core::{Duration, Rate};
use std::hint::black_box;

const OVERLOAD: f64 = 1.1;
const WARM_NS: u64 = 2_000_000_000;

fn bench_one<S: BenchShaper>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    n: usize,
    lookahead: usize,
    mut s: S,
) {
    let mut st = Stream::new(n, Rate::gbps(100), OVERLOAD, 42).with_lookahead(lookahead);
    g.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
        // Warmed up on first use, so a filtered run skips the others' warm-ups.
        while st.now < WARM_NS {
            drive(&mut s, &mut st, 1 << 16);
        }
        b.iter_custom(|iters| {
            let t = std::time::Instant::now();
            black_box(drive(&mut s, &mut st, iters));
            t.elapsed()
        })
    });
}

/// Packets ahead whose bucket the batched driver hints (a burst of a data plane).
const LOOKAHEAD: usize = 16;

fn shapers(c: &mut Criterion) {
    // "shaper": one packet at a time; "shaper_batched": the bucket of the packet LOOKAHEAD
    // places ahead is prefetched, so bucket misses overlap and the timers show.
    for (group, k) in [("shaper", 0), ("shaper_batched", LOOKAHEAD)] {
        let mut g = c.benchmark_group(group);
        g.throughput(Throughput::Elements(1));
        g.measurement_time(std::time::Duration::from_secs(4));
        for &n in &[1_000usize, 100_000, 1_000_000] {
            let cir = Rate::gbps(100).share(n as u64);
            // The generator alone (its cost is inside every shaper's number).
            g.bench_with_input(BenchmarkId::new("generator", n), &n, |b, _| {
                let mut st = Stream::new(n, Rate::gbps(100), OVERLOAD, 42).with_lookahead(k);
                b.iter(|| black_box(st.next_packet()))
            });
            bench_one(&mut g, "event_heap", n, k, Event::heap(n, cir, 3000, 3000));
            bench_one(&mut g, "event_ffs_wheel", n, k, Event::wheel(n, cir, 3000, 3000));
            bench_one(&mut g, "heap", n, k, Heap::new(n, cir, 3000, 3000));
            bench_one(&mut g, "ffs_wheel", n, k, FfsWheel::new(n, cir, 3000, 3000));
            bench_one(&mut g, "btreemap", n, k, OrderedMap::new(n, cir, 3000, 3000));
            // 1.024 us ticks, 2^20 slots: a 1.07 s horizon (the longest wait at 1e6 queues is
            // (alpha + 1500 B) / 12.5 kB/s = 0.36 s).
            bench_one(&mut g, "timing_wheel", n, k, TimingWheel::new(n, cir, 3000, 3000, 10, 20));
            bench_one(&mut g, "periodic_sweep_1ms", n, k, PeriodicSweep::new(n, cir, 3000, Duration::from_millis(1)));
        }
        g.finish();
    }
}

criterion_group!(benches, shapers);
criterion_main!(benches);
