//! The memory floor (docs/PERFORMANCE.md, "The floor"): what one random access costs on this
//! machine at the working-set sizes of our full-scale runs.
//!
//! A random cyclic permutation (Sattolo's algorithm) over `n` cache lines of 64 B. `chase1`
//! follows it: every load depends on the one before, so the time per step is the latency of a
//! random access. `chase8` follows eight independent cursors in turn: up to eight misses overlap,
//! and the time per access is what a packet path that prefetches or batches could approach.
//! Each at 32 MiB (kim's 1e6 bucket records), 256 MiB and 2 GiB, with 4 KiB pages and with
//! transparent huge pages asked for (`madvise(MADV_HUGEPAGE)`, as the `npqos` binary's allocator
//! does for large blocks).
//! Run: `cargo bench -p npqos-benches --bench memory`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use std::hint::black_box;

/// One cache line; word 0 holds the next line's index.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u64; 8]);

fn cycle(lines: usize, huge: bool) -> Vec<Line> {
    let mut v = vec![Line([0; 8]); lines];
    if huge {
        let (p, len) = (v.as_mut_ptr() as usize, lines * 64);
        let start = p.next_multiple_of(2 << 20);
        let end = (p + len) & !((2 << 20) - 1);
        if end > start {
            // SAFETY: the range lies inside `v`'s allocation; the advice changes no contents.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
        // Touch again so the kernel can back the range with huge pages.
        for l in v.iter_mut() {
            l.0[1] = 1;
        }
    }
    // Sattolo: one cycle through every line.
    let mut perm: Vec<u64> = (0..lines as u64).collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    for i in (1..lines).rev() {
        let j = rng.random_range(0..i);
        perm.swap(i, j);
    }
    for i in 0..lines {
        v[i].0[0] = perm[i];
    }
    v
}

fn floor(c: &mut Criterion) {
    let mut g = c.benchmark_group("memory");
    g.throughput(Throughput::Elements(1));
    g.measurement_time(std::time::Duration::from_secs(4));
    for (label, bytes) in [("32MiB", 32usize << 20), ("256MiB", 256 << 20), ("2GiB", 2 << 30)] {
        for huge in [false, true] {
            let v = cycle(bytes / 64, huge);
            let pages = if huge { "huge" } else { "4k" };
            let mut at = 0u64;
            g.bench_function(BenchmarkId::new(format!("chase1_{pages}"), label), |b| {
                b.iter_custom(|iters| {
                    let t = std::time::Instant::now();
                    for _ in 0..iters {
                        at = v[at as usize].0[0];
                    }
                    black_box(at);
                    t.elapsed()
                })
            });
            let mut cur = [0u64; 8];
            for (k, c) in cur.iter_mut().enumerate() {
                *c = (k * v.len() / 8) as u64;
            }
            g.bench_function(BenchmarkId::new(format!("chase8_{pages}"), label), |b| {
                b.iter_custom(|iters| {
                    let t = std::time::Instant::now();
                    for _ in 0..iters.div_ceil(8) {
                        for c in cur.iter_mut() {
                            *c = v[*c as usize].0[0];
                        }
                    }
                    black_box(cur);
                    t.elapsed()
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, floor);
criterion_main!(benches);
