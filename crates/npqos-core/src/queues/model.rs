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
use crate::error::Error;
use crate::id::{self, QueueId};

/// For each operation, the distance in operations to the previous operation on the same queue
/// (`i - j` for the last `j < i` on that queue), or 0 for a queue's first operation.
///
/// Errors ([`Error::UnknownId`]): an operation on a queue outside `0..queues`.
pub fn gaps(seq: &[(Op, u32)], queues: u32) -> Result<Vec<u64>, Error> {
    let mut last = vec![u64::MAX; queues as usize];
    seq.iter()
        .enumerate()
        .map(|(i, &(_, q))| {
            let q = id::check(QueueId::KIND, q, last.len())?;
            let l = std::mem::replace(&mut last[q], i as u64);
            Ok(if l == u64::MAX { 0 } else { i as u64 - l })
        })
        .collect()
}

/// Whether each operation's descriptor access hits, replaying `seq` in order through the
/// cache of `sub` (`entries` fully associative entries for sqc / qc; `dc_lines` one-word lines
/// in `dc_ways`-way sets for dc; nc never hits).
///
/// Errors ([`Error::BadParameter`]): for dc, a geometry the cache cannot have (no line, lines
/// not a whole number of sets, or ways outside 1..=255); the dc arguments are not read for the
/// other subsystems.
pub fn hits(
    sub: Subsystem,
    seq: &[(Op, u32)],
    entries: usize,
    dc_lines: u64,
    dc_ways: usize,
) -> Result<Vec<bool>, Error> {
    Ok(match sub {
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
            let c = dc_lines.checked_mul(4).and_then(|bytes| SetAssocCache::new(bytes, dc_ways, 4, 0).ok());
            let Some(mut c) = c else {
                return Err(Error::BadParameter {
                    parameter: "data-cache geometry",
                    value: format!("{dc_lines} one-word lines in {dc_ways}-way sets"),
                    expected: "at least one set of 1 to 255 ways, lines a multiple of the ways",
                });
            };
            seq.iter()
                .map(|&(op, q)| {
                    let word = 2 * q as u64 + u64::from(op == Op::Enqueue);
                    let hit = c.access(word * 4, false);
                    c.access(word * 4, true);
                    hit
                })
                .collect()
        }
    })
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

/// Evaluates the model on `seq` over `queues` queues (ids `0..queues`) with per-operation
/// `hit` flags (see [`hits`]).
///
/// Errors: a number of hit flags other than the number of operations
/// ([`Error::BadParameter`]), or an operation on a queue outside `0..queues`
/// ([`Error::UnknownId`]).
pub fn estimate(
    sub: Subsystem,
    seq: &[(Op, u32)],
    hit: &[bool],
    queues: u32,
    p: &ModelParams,
) -> Result<Estimate, Error> {
    if seq.len() != hit.len() {
        return Err(Error::BadParameter {
            parameter: "hit flags",
            value: format!("{} for {} operations", hit.len(), seq.len()),
            expected: "one per operation",
        });
    }
    let n_ops = seq.len().max(1) as f64;
    let threads = p.threads.max(1) as f64;
    let t = &p.timing;
    // Per queue: issue time and hold time of its last operation.
    let mut last: Vec<(f64, f64)> = vec![(f64::NAN, 0.0); queues as usize];
    let mut held = vec![0.0f64; queues as usize];
    let (mut issue, mut thread_sum, mut lost, mut gained, mut stalled, mut serial_sum, mut hits) =
        (0.0, 0.0, 0.0, 0.0, 0u64, 0.0, 0u64);
    for (&(op, q), &h) in seq.iter().zip(hit) {
        let q = id::check(QueueId::KIND, q, last.len())?;
        let s = serial_ns(t, sub, op, h);
        let ti = t.latency_ns(sub, op, h);
        serial_sum += s;
        held[q] += s;
        thread_sum += ti;
        if h {
            hits += 1;
            gained += t.latency_ns(sub, op, false) - ti;
        }
        let (prev_issue, prev_hold) = last[q];
        if !prev_issue.is_nan() {
            let since = issue - prev_issue;
            if since < prev_hold {
                lost += prev_hold - since;
                stalled += 1;
            }
        }
        last[q] = (issue, s);
        issue += ti / threads;
    }
    let time = thread_sum / threads + lost;
    let unbounded = n_ops / time * 1e3;
    let h = hits as f64 / n_ops;
    let refs = if sub.cached() { 1.0 + 2.0 * (1.0 - h) } else { 3.0 };
    let bound = p.memory_refs_per_ns / refs * 1e3;
    Ok(Estimate {
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
    })
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
    use proptest::prelude::*;

    fn params(threads: u32) -> ModelParams {
        ModelParams { timing: TABLE1, threads, memory_refs_per_ns: 0.2 }
    }

    #[test]
    fn gaps_and_lru_hits() {
        let seq: Vec<(Op, u32)> = [0, 1, 0, 2, 3, 1, 0].iter().map(|&q| (Op::Enqueue, q)).collect();
        assert_eq!(gaps(&seq, 4).unwrap(), vec![0, 0, 2, 0, 0, 4, 4]);
        // Two entries: 0 hits after one other queue; 1 and 0 come back after three others.
        assert_eq!(hits(Subsystem::Qc, &seq, 2, 128, 2).unwrap(), vec![false, false, true, false, false, false, false]);
        assert_eq!(hits(Subsystem::Qc, &seq, 4, 128, 2).unwrap(), vec![false, false, true, false, false, true, true]);
        assert!(hits(Subsystem::Nc, &seq, 4, 128, 2).unwrap().iter().all(|h| !h));
        // dc: enqueues touch the tail word only; a dequeue of queue 0 misses on the head word.
        let mixed = vec![(Op::Enqueue, 0), (Op::Enqueue, 0), (Op::Dequeue, 0), (Op::Dequeue, 0)];
        assert_eq!(hits(Subsystem::Dc, &mixed, 32, 128, 2).unwrap(), vec![false, true, false, true]);
    }

    /// One queue: with one thread nothing stalls (throughput 1 / T̄); with more, everything
    /// serializes: throughput = 1 / S̄ (within the first operation's share), whatever the threads.
    #[test]
    fn one_queue_is_serial() {
        let seq: Vec<(Op, u32)> = (0..1000).map(|i| (if i % 2 == 0 { Op::Enqueue } else { Op::Dequeue }, 0)).collect();
        for sub in Subsystem::ALL {
            let h = hits(sub, &seq, 32, 128, 2).unwrap();
            for n in [2, 8, 32] {
                let e = estimate(sub, &seq, &h, 1, &params(n)).unwrap();
                let want = 1e3 / e.mean_serial_ns;
                assert!(
                    (e.throughput_mops - want).abs() < 0.01 * want,
                    "{sub:?} n {n}: {} vs {want}",
                    e.throughput_mops
                );
            }
            let e = estimate(sub, &seq, &h, 1, &params(32)).unwrap();
            assert!((e.bounds_mops - 1e3 / e.mean_serial_ns).abs() < 1e-6, "{sub:?} bounds {}", e.bounds_mops);
            let one = estimate(sub, &seq, &h, 1, &params(1)).unwrap();
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
            let h = hits(sub, &seq, 32, 128, 2).unwrap();
            let one = estimate(sub, &seq, &h, 2048, &params(1)).unwrap();
            assert_eq!(one.time_lost_ns, 0.0);
            assert!((one.throughput_mops - 1e3 / one.mean_op_ns).abs() < 1e-9);
            let many = estimate(sub, &seq, &h, 2048, &params(32)).unwrap();
            assert!((many.throughput_mops - 200.0 / 3.0).abs() < 1e-9, "{sub:?} {}", many.throughput_mops);
            assert!((many.bounds_mops - 200.0 / 3.0).abs() < 1e-9, "{sub:?} {}", many.bounds_mops);
        }
    }

    /// Hit flags that do not match the operations, or an operation on a queue outside
    /// `0..queues`, are errors (they used to fail an assertion or index out of bounds).
    #[test]
    fn mismatched_flags_and_unknown_queues_are_errors() {
        let seq = vec![(Op::Enqueue, 0), (Op::Dequeue, 1)];
        let e = estimate(Subsystem::Qc, &seq, &[true], 2, &params(4));
        assert!(matches!(e, Err(Error::BadParameter { parameter: "hit flags", .. })), "{e:?}");
        let e = estimate(Subsystem::Qc, &seq, &[true, false, true], 2, &params(4));
        assert!(matches!(e, Err(Error::BadParameter { .. })), "{e:?}");
        let e = estimate(Subsystem::Nc, &seq, &[false, false], 1, &params(4));
        assert_eq!(e, Err(Error::UnknownId { kind: "queue", id: 1, count: 1 }));
        assert!(estimate(Subsystem::Nc, &seq, &[false, false], 2, &params(4)).is_ok());
    }

    /// An operation on a queue outside `0..queues` is an error of `gaps`, and a data-cache
    /// geometry the cache cannot have one of `hits` under dc (they used to index out of bounds
    /// and fail an `expect`); the dc geometry is not read for the other subsystems.
    #[test]
    fn gaps_and_hits_refuse_what_they_cannot_model() {
        let seq = vec![(Op::Enqueue, 0), (Op::Dequeue, 4)];
        assert_eq!(gaps(&seq, 4), Err(Error::UnknownId { kind: "queue", id: 4, count: 4 }));
        assert_eq!(gaps(&seq, 5), Ok(vec![0, 0]));
        for (lines, ways) in [(0, 2), (3, 2), (128, 0), (512, 256), (u64::MAX, 1)] {
            let e = hits(Subsystem::Dc, &seq, 32, lines, ways);
            assert!(matches!(e, Err(Error::BadParameter { parameter: "data-cache geometry", .. })), "{lines} {ways}");
        }
        for sub in [Subsystem::Nc, Subsystem::Sqc, Subsystem::Qc] {
            assert_eq!(hits(sub, &seq, 32, 0, 0).map(|h| h.len()), Ok(2), "{sub:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, rng_seed: proptest::test_runner::RngSeed::Fixed(0x716d6f), ..ProptestConfig::default() })]

        /// Any operations, flags and queue count: an estimate exactly when there is one flag
        /// per operation and every queue id is below the count, a typed error otherwise; the
        /// gaps exactly when every queue id is below the count; never a panic.
        #[test]
        fn estimate_answers_any_input(
            seq in prop::collection::vec((any::<bool>(), 0u32..6), 0..60),
            extra_flags in -2i32..3,
            queues in 0u32..6,
            threads in 0u32..40,
        ) {
            let seq: Vec<(Op, u32)> = seq.into_iter().map(|(e, q)| (if e { Op::Enqueue } else { Op::Dequeue }, q)).collect();
            let n = (seq.len() as i32 + extra_flags).max(0) as usize;
            let hit: Vec<bool> = (0..n).map(|i| i % 3 == 0).collect();
            let known = seq.iter().all(|&(_, q)| q < queues);
            match gaps(&seq, queues) {
                Ok(g) => prop_assert!(known && g.len() == seq.len()),
                Err(e) => prop_assert!(!known && matches!(e, Error::UnknownId { .. }), "{:?}", e),
            }
            for sub in Subsystem::ALL {
                let r = estimate(sub, &seq, &hit, queues, &params(threads));
                match r {
                    Ok(_) => prop_assert!(n == seq.len() && known),
                    Err(Error::BadParameter { .. }) => prop_assert!(n != seq.len()),
                    Err(Error::UnknownId { id, count, .. }) => {
                        prop_assert!(n == seq.len() && id >= queues && count == queues as usize);
                    }
                    Err(e) => prop_assert!(false, "{:?}", e),
                }
            }
        }
    }
}
