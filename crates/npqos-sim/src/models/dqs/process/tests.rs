//! Tests of the processing models: cases worked by hand, ordering on random streams, and a
//! differential test against the closed-form recursion the models were first written as.

use super::*;
use proptest::prelude::*;

fn reqs(v: &[(u32, u16, bool)]) -> Vec<Request> {
    v.iter().map(|&(slot, compares, new_flow)| Request { slot, compares, new_flow }).collect()
}

#[test]
fn processing_models_by_hand() {
    // One-cycle searches spread over four sub-tables, 4 per cycle: SPSQ serves 1 per cycle
    // (throughput 1/4); MPSQ and MPMQ keep up.
    let r: Vec<Request> = (0..4000).map(|i| Request { slot: i % 4, compares: 1, new_flow: false }).collect();
    let s = process(ProcModel::Spsq, &r, 4, 4.0);
    assert!((s.throughput - 0.25).abs() < 0.001, "{s:?}");
    assert!(s.max_queue > 2900, "{s:?}");
    for m in [ProcModel::Mpsq, ProcModel::Mpmq] {
        let x = process(m, &r, 4, 4.0);
        assert!((x.throughput - 1.0).abs() < 1e-9 && x.max_queue == 0, "{m:?} {x:?}");
    }
    // Serial allocation: new flows, 0 compares: the allocator grants one per cycle.
    let r: Vec<Request> = (0..4000).map(|i| Request { slot: i % 4, compares: 0, new_flow: true }).collect();
    let m = process(ProcModel::Mpmq, &r, 4, 4.0);
    assert!((m.throughput - 0.25).abs() < 0.001, "{m:?}");
    // SPSQ: 2 cycles each (search + allocation).
    assert!((process(ProcModel::Spsq, &r, 4, 1.0).throughput - 0.5).abs() < 0.001);
    // Head-of-line blocking: sub-tables 0, 0, 1 at 3 per cycle. MPSQ: the third waits
    // behind the second; MPMQ: it starts at once.
    let r = reqs(&[(0, 1, false), (0, 1, false), (1, 1, false)]);
    let a = process(ProcModel::Mpsq, &r, 2, 3.0);
    let b = process(ProcModel::Mpmq, &r, 2, 3.0);
    assert_eq!((a.max_queue, b.max_queue), (2, 1));
    assert_eq!(b.buffer_bytes, 2.0 * REQUEST_BYTES);
    // Slow arrivals: everyone keeps up.
    let r = reqs(&[(0, 2, false), (1, 2, false), (0, 1, true)]);
    for model in [ProcModel::Spsq, ProcModel::Mpsq, ProcModel::Mpmq] {
        let x = process(model, &r, 2, 0.25);
        assert!(x.throughput > 0.99 && x.max_queue == 0, "{model:?} {x:?}");
    }
}

#[test]
fn more_parallelism_never_hurts_on_random_requests() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let r: Vec<Request> = (0..20_000)
        .map(|_| Request {
            slot: rng.random_range(0..16),
            compares: rng.random_range(0..4),
            new_flow: rng.random_bool(0.2),
        })
        .collect();
    for sp in [1.0, 2.0, 4.0, 8.0] {
        let s = process(ProcModel::Spsq, &r, 16, sp).throughput;
        let m1 = process(ProcModel::Mpsq, &r, 16, sp).throughput;
        let m2 = process(ProcModel::Mpmq, &r, 16, sp).throughput;
        assert!(s <= m1 + 1e-9 && m1 <= m2 + 1e-9, "speedup {sp}: {s} {m1} {m2}");
    }
}

#[test]
fn an_event_budget_stops_the_replay_with_partial_results() {
    let r: Vec<Request> = (0..1000).map(|i| Request { slot: i % 4, compares: 1, new_flow: false }).collect();
    let (x, why) =
        process_limited(ProcModel::Spsq, &r, 4, 4.0, RunLimits { until: Instant::MAX, max_events: 100 }, None);
    assert_eq!(why, StopReason::Budget);
    assert!(x.max_queue > 0 && x.throughput > 0.0, "{x:?}");
}

/// The same models as one pass over the requests in order (each request's start and finish
/// follow from its predecessors'), in integer ticks: how they were first written.
fn closed_form(model: ProcModel, reqs: &[Request], slots: u32, speedup: f64) -> (u64, u64, u64, u64) {
    let t = TICKS_PER_CYCLE;
    let arr = |i: usize| (i as f64 * t as f64 / speedup).round() as u64;
    let mut free = vec![0u64; if model == ProcModel::Spsq { 1 } else { slots as usize }];
    let (mut alloc_free, mut prev_dispatch) = (0u64, 0u64);
    let (mut out_first, mut out_last) = (None, 0u64);
    let mut waiting: Vec<(u64, u32)> = Vec::new(); // (start, queue) of requests not yet started
    let (mut max_queue, mut max_total) = (0u64, 0u64);
    for (i, rq) in reqs.iter().enumerate() {
        let a = arr(i);
        waiting.retain(|&(s, _)| s > a);
        let proc = if model == ProcModel::Spsq { 0 } else { rq.slot as usize };
        let start = match model {
            ProcModel::Spsq | ProcModel::Mpmq => a.max(free[proc]),
            ProcModel::Mpsq => a.max(prev_dispatch).max(free[proc]),
        };
        prev_dispatch = start;
        let mut finish = start + (rq.compares as u64).max(1) * t;
        if rq.new_flow {
            if model == ProcModel::Spsq {
                finish += t;
            } else {
                let g = finish.max(alloc_free);
                alloc_free = g + t;
                finish = g + t;
            }
        }
        free[proc] = finish;
        out_last = out_last.max(finish);
        out_first.get_or_insert(finish);
        if start > a {
            let q = if model == ProcModel::Mpmq { rq.slot } else { 0 };
            waiting.push((start, q));
            max_queue = max_queue.max(waiting.iter().filter(|w| w.1 == q).count() as u64);
            max_total = max_total.max(waiting.len() as u64);
        }
    }
    (out_first.unwrap_or(0), out_last, max_queue, max_total)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, rng_seed: proptest::test_runner::RngSeed::Fixed(0x70726f63), ..ProptestConfig::default() })]

    /// The event model and the closed-form recursion agree on every request stream: the same
    /// output span, largest task queue and largest total backlog, for all three models.
    #[test]
    fn events_agree_with_the_closed_form(
        raw in prop::collection::vec((0u32..6, 0u16..5, any::<bool>()), 1..300),
        slots in 1u32..7,
        speedup in prop::sample::select(vec![0.5, 1.0, 2.0, 3.0, 5.0, 7.0, 8.0]),
    ) {
        let r: Vec<Request> = raw.iter().map(|&(s, c, n)| Request { slot: s % slots, compares: c, new_flow: n }).collect();
        for model in [ProcModel::Spsq, ProcModel::Mpsq, ProcModel::Mpmq] {
            let (first, last, mq, mt) = closed_form(model, &r, slots, speedup);
            let x = process(model, &r, slots, speedup);
            let span = (last - first) as f64 / TICKS_PER_CYCLE as f64 + 1.0 / speedup;
            prop_assert_eq!((x.max_queue, x.peak_total_bytes), (mq, mt as f64 * REQUEST_BYTES), "{:?}", model);
            prop_assert!((x.throughput - (r.len() as f64 / speedup / span).min(1.0)).abs() < 1e-12, "{:?}", model);
        }
    }
}
