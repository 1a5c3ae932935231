//! Event-queue throughput in the classic "hold" model: with N events pending, pop the earliest
//! and push a new one a random increment later, so the queue size stays N. Initial times and
//! increments come from the same distribution (uniform on [0, 2 ms)), as in the hold model's
//! steady state. Reported as push+pop pairs per second for the engine's radix `EventQueue` and,
//! as the baseline measured in the same run, `std`'s `BinaryHeap` ordered by the same
//! (time, seq) key.
//! Results: docs/PERFORMANCE.md. Run: `cargo bench -p npqos-benches --bench engine`.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use npqos_core::Instant;
use npqos_sim::engine::EventQueue;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

const MEAN_NS: u64 = 1_000_000;

/// Pre-drawn increments, so RNG cost is not measured.
fn increments() -> Vec<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    (0..4096).map(|_| rng.random_range(0..2 * MEAN_NS)).collect()
}

fn hold(c: &mut Criterion) {
    let mut g = c.benchmark_group("hold");
    g.throughput(Throughput::Elements(1));
    let inc = increments();
    for &n in &[1_000usize, 100_000, 1_000_000] {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let init: Vec<u64> = (0..n).map(|_| rng.random_range(0..2 * MEAN_NS)).collect();
        let mut k = 0usize;

        let mut q: EventQueue<u32> = EventQueue::new();
        for (i, &t) in init.iter().enumerate() {
            q.push(Instant::from_nanos(t), i as u32);
        }
        g.bench_with_input(BenchmarkId::new("npqos_radix", n), &n, |b, _| {
            b.iter(|| {
                let (t, e) = q.pop().expect("non-empty");
                k = (k + 1) & 4095;
                q.push(Instant::from_nanos(t.as_nanos() + inc[k]), black_box(e));
            })
        });
        drop(q);

        let mut h: BinaryHeap<Reverse<(u64, u64, u32)>> = BinaryHeap::with_capacity(n);
        let mut seq = 0u64;
        for (i, &t) in init.iter().enumerate() {
            h.push(Reverse((t, seq, i as u32)));
            seq += 1;
        }
        g.bench_with_input(BenchmarkId::new("std_binaryheap", n), &n, |b, _| {
            b.iter(|| {
                let Reverse((t, _, e)) = h.pop().expect("non-empty");
                k = (k + 1) & 4095;
                h.push(Reverse((t + inc[k], seq, black_box(e))));
                seq += 1;
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(4)).warm_up_time(std::time::Duration::from_secs(2));
    targets = hold
}
criterion_main!(benches);
