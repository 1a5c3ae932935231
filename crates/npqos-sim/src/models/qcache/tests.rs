//! Tests of the qcache timing simulation: one thread against the unloaded plans, every queue
//! in order under contention, determinism, the memory bound of random traffic, one queue
//! serializing, and refused configurations.

use super::sim::{run, SimConfig, SimError, SimStats};
use super::workload::{OpStream, Pattern, WorkloadSpec};
use npqos_core::queues::timing::{Op, Subsystem, TABLE1};
use rand::SeedableRng;
use rand_chacha::ChaCha12Rng;

fn sim(sub: Subsystem, threads: u32, pattern: Pattern, queues: u32, ops: u64) -> Result<SimStats, SimError> {
    let spec = WorkloadSpec { pattern, queues, backlog: 256.min(4 * queues) };
    let mut s = OpStream::new(&spec, ChaCha12Rng::seed_from_u64(3)).unwrap();
    run(&SimConfig::paper(sub, threads, ops), &mut s, &mut |_| {})
}

/// One thread sees no contention but its own: the simulated latency of every operation is the
/// unloaded latency of the plan in npqos-core (Table 5), except nc's enqueue, whose two
/// parallel writes share the one memory port (one 5 ns memory cycle apart). Hits: one queue;
/// misses: 4096 queues visited round robin.
#[test]
fn one_thread_matches_the_unloaded_plans() {
    for sub in Subsystem::ALL {
        for hit in [true, false] {
            if !sub.cached() && hit {
                continue;
            }
            let queues = if hit { 1 } else { 4096 };
            let st = sim(sub, 1, Pattern::U, queues, 20_000).unwrap();
            let want_hit = if sub.cached() && hit { 1.0 } else { 0.0 };
            assert_eq!(st.hit_rate, want_hit, "{sub:?} hit {hit}");
            for (k, op) in [Op::Enqueue, Op::Dequeue].into_iter().enumerate() {
                let extra = if sub == Subsystem::Nc && op == Op::Enqueue { 5.0 } else { 0.0 };
                let want = TABLE1.latency_ns(sub, op, hit) + extra;
                assert!(
                    (st.mean_latency_ns[k] - want).abs() < 1e-9,
                    "{sub:?} {op:?} hit {hit}: simulated {} ns, plan {want} ns",
                    st.mean_latency_ns[k]
                );
            }
        }
    }
}

/// Under heavy contention (32 threads, one queue taking 30%, bursts from the DRR departures)
/// every dequeue finds its queue's oldest packet in every subsystem: the per-queue ordering of
/// locks and of the queuing cache's engines holds. Table 2's three references per operation.
#[test]
fn contention_keeps_every_queue_in_order() {
    for sub in Subsystem::ALL {
        let st = sim(sub, 32, Pattern::Sd { n: 1, percent: 30.0 }, 512, 30_000).unwrap();
        let r = st.refs;
        assert_eq!(r.desc_reads, r.desc_writes, "{sub:?}");
        assert_eq!(r.link_reads + r.link_writes, r.desc_reads, "{sub:?}");
        assert!(st.ops_checked >= 33_000, "{sub:?}: {} operations applied", st.ops_checked);
    }
}

/// Same seed, same numbers.
#[test]
fn runs_are_deterministic() {
    let a = sim(Subsystem::Dc, 16, Pattern::L { k: 1.01 }, 1024, 20_000).unwrap();
    let b = sim(Subsystem::Dc, 16, Pattern::L { k: 1.01 }, 1024, 20_000).unwrap();
    assert_eq!(a, b);
}

/// Uniformly random traffic over many queues: every subsystem makes about three off-chip
/// references per operation, the memory port saturates, and throughput sits at its bound
/// (200 M references/s / 3).
#[test]
fn random_traffic_is_memory_bound() {
    for sub in Subsystem::ALL {
        let st = sim(sub, 32, Pattern::R, 4096, 40_000).unwrap();
        assert!(st.hit_rate < 0.05, "{sub:?} hit {}", st.hit_rate);
        assert!((st.offchip_per_op - 3.0).abs() < 0.15, "{sub:?} off-chip {}", st.offchip_per_op);
        assert!(st.memory_util > 0.95, "{sub:?} memory {}", st.memory_util);
        let bound = 200.0 / st.offchip_per_op;
        assert!((st.throughput_mops - bound).abs() < 0.05 * bound, "{sub:?} {} vs {bound}", st.throughput_mops);
    }
}

/// All traffic to one queue serializes: throughput = 1 / (serialized time per operation).
/// nc, dc and sqc hold the queue for a whole operation; qc only for the engine's CAM + link
/// reference + cache update (47.5 ns).
#[test]
fn one_queue_serializes() {
    let t = TABLE1;
    for (sub, serial_ns) in [
        (
            Subsystem::Nc,
            (t.latency_ns(Subsystem::Nc, Op::Enqueue, false) + 5.0 + t.latency_ns(Subsystem::Nc, Op::Dequeue, false))
                / 2.0,
        ),
        (
            Subsystem::Dc,
            (t.latency_ns(Subsystem::Dc, Op::Enqueue, true) + t.latency_ns(Subsystem::Dc, Op::Dequeue, true)) / 2.0,
        ),
        (Subsystem::Sqc, t.latency_ns(Subsystem::Sqc, Op::Enqueue, true)),
        (Subsystem::Qc, t.cam_ns + t.memory_ns + t.cache_ns),
    ] {
        let st = sim(sub, 32, Pattern::U, 1, 20_000).unwrap();
        let want = 1e3 / serial_ns;
        assert!((st.throughput_mops - want).abs() < 0.01 * want, "{sub:?}: {} vs {want}", st.throughput_mops);
    }
}

#[test]
fn bad_configurations_are_errors() {
    let spec = WorkloadSpec { pattern: Pattern::R, queues: 64, backlog: 64 };
    let mut s = OpStream::new(&spec, ChaCha12Rng::seed_from_u64(1)).unwrap();
    let c = SimConfig::paper(Subsystem::Sqc, 33, 10);
    assert!(matches!(run(&c, &mut s, &mut |_| {}), Err(SimError::Config(_))));
    let c = SimConfig { engines: 0, ..SimConfig::paper(Subsystem::Qc, 4, 10) };
    assert!(matches!(run(&c, &mut s, &mut |_| {}), Err(SimError::Config(_))));
    let c = SimConfig::paper(Subsystem::Nc, 0, 10);
    assert!(matches!(run(&c, &mut s, &mut |_| {}), Err(SimError::Config(_))));
}
