//! Flow-to-queue mapping cost per packet (dqs): the AFM table (H3 slot hash + BST search in
//! the slot) at M = 64, 256 and 1024 slots, the same with the foldhash slot hash at 256 and
//! 1024, and a hashbrown `HashMap<FlowKey, u32>` (its
//! default foldhash hasher), with 1e2, 1e4 and 1e6 active flows, in one run.
//!
//! Each table holds `n` active flows (distinct synthetic IPv4 5-tuples); each packet looks up
//! a flow drawn uniformly from them (a precomputed random sequence of 2^20 indices, walked
//! cyclically), so at 1e6 flows both tables miss the caches the way a real flow table would.
//! The cost includes computing the hash. Results: docs/PERFORMANCE.md.
//! Run: `cargo bench -p npqos-benches --bench flowmap`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use npqos_core::flow::FlowKey;
use npqos_core::flowmap::{AfmTable, DeleteRule, Find, HashKind, SlotHash};
use npqos_sim::models::dqs::synthetic_key;
use rand::{Rng, SeedableRng};
use std::hint::black_box;

fn flowmap(c: &mut Criterion) {
    let mut g = c.benchmark_group("flowmap");
    g.throughput(Throughput::Elements(1));
    g.measurement_time(std::time::Duration::from_secs(3));
    g.warm_up_time(std::time::Duration::from_secs(1));
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    for &n in &[100usize, 10_000, 1_000_000] {
        // Random ids so keys are inserted in random order (random BSTs).
        let keys: Vec<FlowKey> = (0..n).map(|_| synthetic_key(rng.random::<u64>() >> 16)).collect();
        let order: Vec<u32> = (0..1 << 20).map(|_| rng.random_range(0..n as u32)).collect();
        let tables = [64u32, 256, 1024].map(|m| ("h3", m, HashKind::H3 { seed: 1 }));
        let fast = [256u32, 1024].map(|m| ("fast", m, HashKind::Fast { seed: 1 }));
        for (hname, m, kind) in tables.into_iter().chain(fast) {
            let h = SlotHash::new(kind, m).expect("slots");
            let mut t = AfmTable::new(m, n, DeleteRule::Paper).expect("slots");
            for (i, k) in keys.iter().enumerate() {
                t.get_or_insert_with(h.slot(k), *k, || i as u32);
            }
            g.bench_with_input(BenchmarkId::new(format!("afm_{hname}_m{m}"), n), &n, |b, _| {
                let mut i = 0usize;
                b.iter(|| {
                    let k = &keys[order[i & ((1 << 20) - 1)] as usize];
                    i += 1;
                    match t.find(h.slot(k), k) {
                        Find::Found { value, .. } => black_box(value),
                        Find::Vacant(_) => unreachable!(),
                    }
                })
            });
        }
        let mut hm: hashbrown::HashMap<FlowKey, u32> = hashbrown::HashMap::with_capacity(n);
        for (i, k) in keys.iter().enumerate() {
            hm.insert(*k, i as u32);
        }
        g.bench_with_input(BenchmarkId::new("hashbrown", n), &n, |b, _| {
            let mut i = 0usize;
            b.iter(|| {
                let k = &keys[order[i & ((1 << 20) - 1)] as usize];
                i += 1;
                black_box(hm[k])
            })
        });
        // The slot hash alone (inside every AFM number).
        let h = SlotHash::new(HashKind::H3 { seed: 1 }, 256).expect("slots");
        g.bench_with_input(BenchmarkId::new("h3_hash_only", n), &n, |b, _| {
            let mut i = 0usize;
            b.iter(|| {
                let k = &keys[order[i & ((1 << 20) - 1)] as usize];
                i += 1;
                black_box(h.slot(k))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, flowmap);
criterion_main!(benches);
