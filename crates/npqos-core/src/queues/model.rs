//! The analytical model of qcache section 3.6 (time lost to serialization, time gained by
//! hits) and the inter-arrival characterisation of section 5.1 (loss and gain thresholds,
//! Figure 10), evaluated on an operation sequence.
//!
//! # The model as we evaluate it
//! For `N` operations on `n` threads, with per-operation thread time `T_i` (the unloaded
//! latency of [`super::timing`] on a hit or a miss):
//!
//! `time = Σ_i T_i / n + T_l`, `T_l = Σ_i max(0, S_p(i) - t(i))` over operations whose queue
//! was used before (`p(i)` the previous operation on that queue), `throughput = min(N / time,
//! memory bound)`.
//!
//! * Section 3.6 writes `(N_e T_e + N_d T_d) / n + T_l - T_s` with `T_e`, `T_d` the miss times
//!   and `T_s = Σ h (T_miss - T_hit)`. Taken literally, `T_s` is not divided by `n` and the time
//!   goes negative for `n > 1` at high hit rates; we divide it by `n` (a hit shortens one
//!   thread's operation), which is `Σ_i T_i / n` with per-operation hit or miss. The paper's
//!   `T_s` (undivided) is reported as [`Estimate::time_gained_ns`].
//! * The paper's step function `f` "is one when x is greater than T_op", but the text says the
//!   stall happens when the next operation arrives *before* the current one is complete; we use
//!   the text: a stall when `t(i) < S_p(i)`. `T_op` is the hold time of the operation in
//!   service on the queue (the previous one), which is what the new one waits for.
//! * Operations are issued in sequence order, one every `T_i / n`; `t(i)` is the issue time of
//!   operation `i` minus that of `p(i)` (with one thread: exactly `p(i)`'s duration and more,
//!   so no stall).
//! * `S_i`, the time the queue is held: the whole operation for nc, dc and sqc (their
//!   zero-cost lock); for qc the queuing engine's part (CAM, descriptor load on a miss, link
//!   reference, cache update). Section 3.6 uses `T_op` for every subsystem.
//! * Section 3.6 says peak throughput is reached "when enough threads are used to saturate
//!   memory bandwidth"; the bound is `memory references per second / references per
//!   operation`, with `3` references for nc and `1 + 2 (1 - h)` for the cached subsystems
//!   (Table 5, section 5.2).
//!
//! Beside it, [`Estimate::bounds_mops`] takes the smallest of three bounds (threads, memory,
//! the busiest queue's total hold time) without queueing: the paper's model charges every
//! stall to the total time and is pessimistic when several queues are hot; the bounds are
//! optimistic. The simulation falls between them.
//!
//! Hits come from replaying the sequence through the subsystem's cache in sequence order
//! ([`hits`]): fully associative LRU for sqc and qc (a hit iff fewer than `entries` other queues
//! were used since the queue's last use: section 5.1's *gain threshold*), the 2-way data cache
//! on head and tail words for dc.

use super::timing::{Op, Subsystem, Timing};
use crate::cache::SetAssocCache;

/// For each operation, the distance in operations to the previous operation on the same queue
/// (`i - j` for the last `j < i` on that queue), or 0 for a queue's first operation.
pub fn gaps(seq: &[(Op, u32)], queues: u32) -> Vec<u64> {
    let mut last = vec![u64::MAX; queues as usize];
    seq.iter()
        .enumerate()
        .map(|(i, &(_, q))| {
            let l = std::mem::replace(&mut last[q as usize], i as u64);
            if l == u64::MAX {
                0
            } else {
                i as u64 - l
            }
        })
        .collect()
}

/// Whether each operation's descriptor access hits, replaying `seq` in order through the
/// cache of `sub` (`entries` fully associative entries for sqc / qc; `dc_lines` one-word lines
/// in `dc_ways`-way sets for dc; nc never hits).
pub fn hits(sub: Subsystem, seq: &[(Op, u32)], entries: usize, dc_lines: u64, dc_ways: usize) -> Vec<bool> {
    match sub {
        Subsystem::Nc => vec![false; seq.len()],
        Subsystem::Sqc | Subsystem::Qc => {
            // Move-to-front list of the `entries` most recently used queues.
            let mut mru: Vec<u32> = Vec::with_capacity(entries + 1);
            seq.iter()
                .map(|&(_, q)| {
                    let hit = match mru.iter().position(|&x| x == q) {
                        Some(p) => {
                            mru.remove(p);
                            true
                        }
                        None => {
                            if mru.len() == entries {
                                mru.pop();
                            }
                            false
                        }
                    };
                    if entries > 0 {
                        mru.insert(0, q);
                    }
                    hit
                })
                .collect()
        }
        Subsystem::Dc => {
            let mut c = SetAssocCache::new(dc_lines * 4, dc_ways, 4, 0).expect("valid data-cache geometry");
            seq.iter()
                .map(|&(op, q)| {
                    let word = 2 * q as u64 + u64::from(op == Op::Enqueue);
                    let hit = c.access(word * 4, false);
                    c.access(word * 4, true);
                    hit
                })
                .collect()
        }
    }
}

/// The model's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelParams {
    pub timing: Timing,
    pub threads: u32,
    /// External-memory references per ns (200 MHz, one per cycle: 0.2).
    pub memory_refs_per_ns: f64,
}

/// The model's answer for one subsystem and sequence.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Estimate {
    /// `min(unbounded, memory bound)`, M operations/s.
    pub throughput_mops: f64,
    /// `N / time` before the memory bound.
    pub unbounded_mops: f64,
    pub memory_bound_mops: f64,
    pub hit_rate: f64,
    /// Mean thread time per operation `T̄`, ns.
    pub mean_op_ns: f64,
    /// Mean time the queue is held per operation `S̄`, ns.
    pub mean_serial_ns: f64,
    /// `T_l`, ns, and the paper's `T_s = Σ h (T_miss - T_hit)`, ns.
    pub time_lost_ns: f64,
    pub time_gained_ns: f64,
    /// Fraction of operations that stall (`t(i) < S_i`).
    pub stalled_fraction: f64,
    /// Our optimistic counterpart: `min(n / T̄, memory bound, N / max_q Σ_{i on q} S_i)` (the
    /// threads, the memory and the busiest queue's hold time each bound the throughput; no
    /// queueing at any of them).
    pub bounds_mops: f64,
}

/// The time the queue is held by one operation of `sub` (see the module documentation).
pub fn serial_ns(t: &Timing, sub: Subsystem, op: Op, hit: bool) -> f64 {
    match sub {
        Subsystem::Qc => t.cam_ns + t.memory_ns * if hit { 1.0 } else { 2.0 } + t.cache_ns,
        _ => t.latency_ns(sub, op, hit),
    }
}

/// Evaluates the model on `seq` over `queues` queues with per-operation `hit` flags (see
/// [`hits`]).
pub fn estimate(sub: Subsystem, seq: &[(Op, u32)], hit: &[bool], queues: u32, p: &ModelParams) -> Estimate {
    assert_eq!(seq.len(), hit.len(), "one hit flag per operation");
    let n_ops = seq.len().max(1) as f64;
    let threads = p.threads.max(1) as f64;
    let t = &p.timing;
    // Per queue: issue time and hold time of its last operation.
    let mut last: Vec<(f64, f64)> = vec![(f64::NAN, 0.0); queues as usize];
    let mut held = vec![0.0f64; queues as usize];
    let (mut issue, mut thread_sum, mut lost, mut gained, mut stalled, mut serial_sum, mut hits) =
        (0.0, 0.0, 0.0, 0.0, 0u64, 0.0, 0u64);
    for (&(op, q), &h) in seq.iter().zip(hit) {
        let s = serial_ns(t, sub, op, h);
        let ti = t.latency_ns(sub, op, h);
        serial_sum += s;
        held[q as usize] += s;
        thread_sum += ti;
        if h {
            hits += 1;
            gained += t.latency_ns(sub, op, false) - ti;
        }
        let (prev_issue, prev_hold) = last[q as usize];
        if !prev_issue.is_nan() {
            let since = issue - prev_issue;
            if since < prev_hold {
                lost += prev_hold - since;
                stalled += 1;
            }
        }
        last[q as usize] = (issue, s);
        issue += ti / threads;
    }
    let time = thread_sum / threads + lost;
    let unbounded = n_ops / time * 1e3;
    let h = hits as f64 / n_ops;
    let refs = if sub.cached() { 1.0 + 2.0 * (1.0 - h) } else { 3.0 };
    let bound = p.memory_refs_per_ns / refs * 1e3;
    Estimate {
        throughput_mops: unbounded.min(bound),
        unbounded_mops: unbounded,
        memory_bound_mops: bound,
        hit_rate: h,
        mean_op_ns: thread_sum / n_ops,
        mean_serial_ns: serial_sum / n_ops,
        time_lost_ns: lost,
        time_gained_ns: gained,
        stalled_fraction: stalled as f64 / n_ops,
        bounds_mops: (threads / (thread_sum / n_ops) * 1e3)
            .min(bound)
            .min(n_ops / held.iter().copied().fold(f64::MIN_POSITIVE, f64::max) * 1e3),
    }
}

/// Section 5.1's thresholds for `sub` on `n` threads, in operations: serialization (loss) when
/// fewer than `n S̄ / T̄` operations separate two on the same queue (the queue is still held);
/// hits guaranteed (gain) when fewer than `entries` other queues were used in between.
pub fn thresholds(e: &Estimate, threads: u32, entries: u32) -> (f64, f64) {
    (threads as f64 * e.mean_serial_ns / e.mean_op_ns.max(f64::MIN_POSITIVE), entries as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queues::timing::TABLE1;

    fn params(threads: u32) -> ModelParams {
        ModelParams { timing: TABLE1, threads, memory_refs_per_ns: 0.2 }
    }

    #[test]
    fn gaps_and_lru_hits() {
        let seq: Vec<(Op, u32)> = [0, 1, 0, 2, 3, 1, 0].iter().map(|&q| (Op::Enqueue, q)).collect();
        assert_eq!(gaps(&seq, 4), vec![0, 0, 2, 0, 0, 4, 4]);
        // Two entries: 0 hits after one other queue; 1 and 0 come back after three others.
        assert_eq!(hits(Subsystem::Qc, &seq, 2, 128, 2), vec![false, false, true, false, false, false, false]);
        assert_eq!(hits(Subsystem::Qc, &seq, 4, 128, 2), vec![false, false, true, false, false, true, true]);
        assert!(hits(Subsystem::Nc, &seq, 4, 128, 2).iter().all(|h| !h));
        // dc: enqueues touch the tail word only; a dequeue of queue 0 misses on the head word.
        let mixed = vec![(Op::Enqueue, 0), (Op::Enqueue, 0), (Op::Dequeue, 0), (Op::Dequeue, 0)];
        assert_eq!(hits(Subsystem::Dc, &mixed, 32, 128, 2), vec![false, true, false, true]);
    }

    /// One queue: with one thread nothing stalls (throughput 1 / T̄); with more, everything
    /// serializes: throughput = 1 / S̄ (within the first operation's share), whatever the threads.
    #[test]
    fn one_queue_is_serial() {
        let seq: Vec<(Op, u32)> = (0..1000).map(|i| (if i % 2 == 0 { Op::Enqueue } else { Op::Dequeue }, 0)).collect();
        for sub in Subsystem::ALL {
            let h = hits(sub, &seq, 32, 128, 2);
            for n in [2, 8, 32] {
                let e = estimate(sub, &seq, &h, 1, &params(n));
                let want = 1e3 / e.mean_serial_ns;
                assert!(
                    (e.throughput_mops - want).abs() < 0.01 * want,
                    "{sub:?} n {n}: {} vs {want}",
                    e.throughput_mops
                );
            }
            let e = estimate(sub, &seq, &h, 1, &params(32));
            assert!((e.bounds_mops - 1e3 / e.mean_serial_ns).abs() < 1e-6, "{sub:?} bounds {}", e.bounds_mops);
            let one = estimate(sub, &seq, &h, 1, &params(1));
            assert_eq!(one.time_lost_ns, 0.0, "{sub:?}");
            assert!((one.throughput_mops - 1e3 / one.mean_op_ns).abs() < 1e-9);
        }
    }

    /// Distinct queues: no stalls, throughput = n / T̄ up to the memory bound (3 references per
    /// operation without hits: 66.7 M ops/s).
    #[test]
    fn distinct_queues_scale_to_the_memory_bound() {
        let seq: Vec<(Op, u32)> =
            (0..4096u32).map(|i| (if i % 2 == 0 { Op::Enqueue } else { Op::Dequeue }, i % 2048)).collect();
        for sub in Subsystem::ALL {
            let h = hits(sub, &seq, 32, 128, 2);
            let one = estimate(sub, &seq, &h, 2048, &params(1));
            assert_eq!(one.time_lost_ns, 0.0);
            assert!((one.throughput_mops - 1e3 / one.mean_op_ns).abs() < 1e-9);
            let many = estimate(sub, &seq, &h, 2048, &params(32));
            assert!((many.throughput_mops - 200.0 / 3.0).abs() < 1e-9, "{sub:?} {}", many.throughput_mops);
            assert!((many.bounds_mops - 200.0 / 3.0).abs() < 1e-9, "{sub:?} {}", many.bounds_mops);
        }
    }
}
