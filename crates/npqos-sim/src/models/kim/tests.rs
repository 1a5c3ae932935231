//! Tests of the kim model: shaped rates and heap statistics, event-driven against periodic fill,
//! queueing while disabled, the shared link, the cache model, alternating overload, determinism.

use super::*;
use crate::workload::SizeDist;
use std::cell::Cell;

thread_local! {
    /// The queues up to which this thread's runs keep arrivals in a calendar. (`run` with
    /// one thread simulates every shard on the calling thread, so the limit reaches them all.)
    pub(super) static CALENDAR_LIMIT: Cell<usize> = const { Cell::new(usize::MAX) };
    /// False: the calendar's arrivals run after the queued events of their instant, as a
    /// source without tickets would (the negative control below).
    pub(super) static TICKETS: Cell<bool> = const { Cell::new(true) };
}

/// Every arrival a queued event (the reference), or the arrivals in a calendar as the engine's source: the same run, result for result,
/// in the model's modes (fills, timers, what happens while disabled, the link, conformance,
/// the cache model, alternating overload, constant gaps, sampling, shards, the adaptive
/// threshold, an event budget). Without the tickets the dense case differs: arrivals meet a
/// core's timer at the same nanosecond there.
#[test]
fn arrivals_in_a_calendar_run_as_queued_arrivals_do() {
    let base = KimParams {
        duration: Duration::from_secs(1),
        warmup: Duration::from_millis(200),
        sample_every: Some(Duration::from_millis(250)),
        ..small(Fill::EventDriven)
    };
    // Dense enough that arrivals fall on the very nanosecond of a core's timer (a few hundred
    // times), where the order decides which runs first.
    let dense = KimParams {
        queues: 10_000,
        link: Rate::gbps(10),
        duration: Duration::from_millis(300),
        warmup: Duration::from_millis(50),
        ..base.clone()
    };
    let cases = [
        dense,
        base.clone(),
        KimParams { arrivals: GapDist::Constant, ..base.clone() },
        KimParams { timer: Timer::Wheel, while_disabled: WhileDisabled::Queue, ..base.clone() },
        KimParams { link_mode: LinkMode::Shared, while_disabled: WhileDisabled::Queue, overload: 1.3, ..base.clone() },
        KimParams {
            conformance: Conformance::WaitForTokens,
            while_disabled: WhileDisabled::Queue,
            cap_bytes: 6000,
            ..base.clone()
        },
        KimParams { cache: Some(CacheGeometry::KIM), ..base.clone() },
        KimParams { overload_alt: Some((Duration::from_millis(100), 0.5)), ..base.clone() },
        KimParams { fill: Fill::Periodic(Duration::from_millis(1)), ..base.clone() },
        KimParams { shards: 4, ..base.clone() },
        KimParams {
            adaptive: Some(Adaptive {
                gamma: 2.0,
                delta_th: 2,
                alpha_min_bytes: 1500,
                interval: Duration::from_millis(50),
            }),
            ..base.clone()
        },
        KimParams { max_events: 5_000, ..base.clone() },
    ];
    for (i, p) in cases.iter().enumerate() {
        let calendar = run(p, 5, None, &mut |_| {}).unwrap();
        CALENDAR_LIMIT.with(|c| c.set(0));
        let queued = run(p, 5, None, &mut |_| {}).unwrap();
        CALENDAR_LIMIT.with(|c| c.set(usize::MAX));
        let budget = if p.max_events > 0 { p.max_events } else { 10_000 };
        assert!(queued.events >= budget, "case {i}: {} events", queued.events);
        assert_eq!(calendar, queued, "case {i}: {:?} {:?} {:?} {:?}", p.fill, p.timer, p.link_mode, p.conformance);
        if i == 0 {
            TICKETS.with(|c| c.set(false));
            let untimely = run(p, 5, None, &mut |_| {}).unwrap();
            TICKETS.with(|c| c.set(true));
            assert_ne!(untimely, queued, "the dense case has no arrival at a core timer's instant");
        }
    }
}

fn small(fill: Fill) -> KimParams {
    KimParams {
        queues: 1000,
        link: Rate::from_bits_per_sec(100_000_000),
        cores: 10,
        duration: Duration::from_secs(5),
        fill,
        ..KimParams::paper(1000)
    }
}

#[test]
fn shaped_rate_and_heap_statistics_are_sane() {
    let r = run(&small(Fill::EventDriven), 1, None, &mut |_| {}).unwrap();
    // Drop while disabled (the default): every arrival is sent or counted as dropped, and the
    // sent rate stays below the shaped rate (plus the initial full buckets).
    let sent = r.get("sent_packets").unwrap();
    let dropped = r.get("dropped_packets").unwrap() + r.get("dropped_while_disabled").unwrap();
    assert_eq!(r.get("arrived_packets").unwrap(), sent + dropped);
    let ratio = r.get("rate_ratio").unwrap();
    assert!(ratio > 0.5 && ratio < 1.01, "rate ratio {ratio}");
    // Buffering while disabled: the rate is held near the offered rate, never above CIR.
    let q = run(&KimParams { while_disabled: WhileDisabled::Queue, ..small(Fill::EventDriven) }, 1, None, &mut |_| {})
        .unwrap();
    let ratio = q.get("rate_ratio").unwrap();
    assert!(ratio > 0.9 && ratio < 1.01, "rate ratio {ratio}");
    assert!(r.get("reschedules").unwrap() > 0.0);
    assert_eq!(r.get("heap_inserts"), Some(r.get("reschedules").unwrap() + r.get("deferred").unwrap()));
    let (mean, max) = (r.get("heap_mean_per_core").unwrap(), r.get("heap_max_per_core").unwrap());
    assert!(mean > 0.0 && mean < max && max <= 1000.0, "mean {mean} max {max}");
    let (a2, a8) = (r.get("offchip_2KB").unwrap(), r.get("offchip_8KB").unwrap());
    assert!(a2 >= a8, "more locked cache, fewer off-chip accesses");
}

#[test]
fn event_driven_needs_far_fewer_accesses_than_periodic_fill() {
    let q = WhileDisabled::Queue;
    let ev = run(&KimParams { while_disabled: q, ..small(Fill::EventDriven) }, 2, None, &mut |_| {}).unwrap();
    let pe =
        run(&KimParams { while_disabled: q, ..small(Fill::Periodic(Duration::from_millis(1))) }, 2, None, &mut |_| {})
            .unwrap();
    let ratio = pe.get("fill_accesses").unwrap() / ev.get("offchip_2KB").unwrap().max(1.0);
    assert!(ratio > 10.0, "reduction factor {ratio}");
    let (d_ev, d_pe) = (ev.get("mean_delay").unwrap(), pe.get("mean_delay").unwrap());
    assert!(d_ev > 0.0 && d_pe > 0.0);
}

/// With queueing while disabled at overload 1, the backlog built while a queue waits drains
/// its alpha tokens at once on re-enabling: queues spend far more time disabled than when
/// those arrivals are dropped (the stochastic model's setting).
#[test]
fn queueing_while_disabled_keeps_queues_throttled_longer() {
    let drop = run(&small(Fill::EventDriven), 3, None, &mut |_| {}).unwrap();
    let queue =
        run(&KimParams { while_disabled: WhileDisabled::Queue, ..small(Fill::EventDriven) }, 3, None, &mut |_| {})
            .unwrap();
    assert!(drop.get("dropped_while_disabled").unwrap() > 0.0);
    assert_eq!(queue.get("dropped_while_disabled"), Some(0.0));
    assert!(queue.get("heap_mean_per_core").unwrap() > 2.0 * drop.get("heap_mean_per_core").unwrap());
}

/// Shared link: the same shaped rates as ideal (the CIRs sum to the link rate), never more
/// than the link, and packets wait at least as long as in ideal mode.
#[test]
fn shared_link_serves_round_robin_within_the_link_rate() {
    let base = KimParams { while_disabled: WhileDisabled::Queue, overload: 0.95, ..small(Fill::EventDriven) };
    let ideal = run(&base, 4, None, &mut |_| {}).unwrap();
    let shared = run(&KimParams { link_mode: LinkMode::Shared, ..base.clone() }, 4, None, &mut |_| {}).unwrap();
    let (ri, rs) = (ideal.get("rate_ratio").unwrap(), shared.get("rate_ratio").unwrap());
    assert!(rs <= 1.0 && (ri - rs).abs() < 0.02, "ideal {ri} shared {rs}");
    assert!(shared.get("mean_delay").unwrap() >= ideal.get("mean_delay").unwrap());
    // A link far slower than the offered load: the link, not the shapers, is the limit.
    let slow = KimParams { link_mode: LinkMode::Shared, overload: 3.0, ..base };
    let r = run(&slow, 4, None, &mut |_| {}).unwrap();
    let sent_bits = r.get("sent_packets").unwrap() * SizeDist::kim_imix().mean() * 8.0;
    assert!(sent_bits <= 1.02 * 100e6 * 5.0, "{sent_bits} bits in 5 s on 100 Mbps");
}

/// Wait-for-tokens (tbf) conformance, both shapers, ideal and shared link: every arrival is
/// sent, buffered or dropped by the tail; a backlogged queue (overload 2) sends at its CIR and
/// never above it (the bucket never goes negative, so the count of bytes is bounded by the
/// buckets' initial cap plus CIR x time); a packet never jumps its queue's head.
#[test]
fn wait_for_tokens_holds_the_rate_without_going_negative() {
    for fill in [Fill::EventDriven, Fill::Periodic(Duration::from_millis(1))] {
        for link_mode in [LinkMode::Ideal, LinkMode::Shared] {
            let p = KimParams {
                conformance: Conformance::WaitForTokens,
                while_disabled: WhileDisabled::Queue,
                overload: 2.0,
                link_mode,
                ..small(fill)
            };
            let r = run(&p, 5, None, &mut |_| {}).unwrap();
            let (sent, arrived) = (r.get("sent_packets").unwrap(), r.get("arrived_packets").unwrap());
            assert!(
                r.get("dropped_packets").unwrap() > 0.0,
                "{fill:?} {link_mode:?}: overload 2 overflows the buffers"
            );
            assert_eq!(r.get("dropped_while_disabled"), Some(0.0));
            assert!(sent < arrived);
            let ratio = r.get("rate_ratio").unwrap();
            // Sent bytes over 5 s against the CIRs' sum (100 Mbps) plus the initial buckets.
            let bound = 1.0 + (1000.0 * 3000.0 * 8.0) / (100e6 * 5.0);
            assert!(ratio > 0.97 && ratio <= bound, "{fill:?} {link_mode:?}: rate ratio {ratio}");
        }
    }
    // Send-then-pay in the same setting may also overdraw each bucket by one packet (1500 B).
    let stp = KimParams { while_disabled: WhileDisabled::Queue, overload: 2.0, ..small(Fill::EventDriven) };
    let ratio = run(&stp, 5, None, &mut |_| {}).unwrap().get("rate_ratio").unwrap();
    let bound = 1.0 + (1000.0 * (3000.0 + 1500.0) * 8.0) / (100e6 * 5.0);
    assert!(ratio > 0.97 && ratio <= bound, "send-then-pay: {ratio}");
}

/// Cache model: more locked cache, fewer misses per delete; every op touches the cache.
#[test]
fn cache_model_attributes_misses_to_inserts_and_deletes() {
    let p = KimParams {
        queues: 20_000,
        link: Rate::from_bits_per_sec(2_000_000_000),
        cores: 1,
        overload: 1.29,
        duration: Duration::from_millis(1500),
        cache: Some(CacheGeometry::KIM),
        ..KimParams::paper(20_000)
    };
    let r = run(&p, 5, None, &mut |_| {}).unwrap();
    assert!(r.get("cache_insert_ops").unwrap() > 1000.0 && r.get("cache_delete_ops").unwrap() > 1000.0);
    assert!(r.get("accesses_per_delete").unwrap() > r.get("accesses_per_insert").unwrap());
    let (d2, d8) = (r.get("misses_per_delete_2KB").unwrap(), r.get("misses_per_delete_8KB").unwrap());
    assert!(d2 > d8 && d8 >= 0.0, "delete misses 2KB {d2} 8KB {d8}");
    let rate = r.get("insert_miss_rate_2KB").unwrap();
    assert!((0.0..=1.0).contains(&rate));
}

/// Alternating overload with sampling: one point per interval, more reschedules in the
/// overloaded phases.
#[test]
fn alternating_overload_is_sampled_per_interval() {
    let p = KimParams {
        overload: 1.0,
        overload_alt: Some((Duration::from_secs(1), 4.0)),
        sample_every: Some(Duration::from_millis(250)),
        duration: Duration::from_secs(4),
        ..small(Fill::EventDriven)
    };
    let r = run(&p, 6, None, &mut |_| {}).unwrap();
    let s = &r.series[0].points;
    assert_eq!(s.len(), 16); // the last at the end time, 4 s
    let phase = |a: f64, b: f64| s.iter().filter(|x| x.0 > a && x.0 <= b).map(|x| x.1).sum::<f64>();
    assert!(phase(1.25, 2.0) > 2.0 * phase(2.25, 3.0), "{s:?}");
}

#[test]
fn deterministic() {
    let p = KimParams { duration: Duration::from_millis(500), ..small(Fill::EventDriven) };
    assert_eq!(run(&p, 9, None, &mut |_| {}).unwrap(), run(&p, 9, None, &mut |_| {}).unwrap());
}

/// The wheel timer gives the heap's statistics: the same arrivals (they do not depend on
/// shaping), sends and reschedules within 1% (only the order of queues released within one
/// tick differs, and with it later random core draws), the heap-array measures left out.
#[test]
fn the_wheel_timer_gives_the_heaps_statistics() {
    let heap = run(&small(Fill::EventDriven), 4, None, &mut |_| {}).unwrap();
    let wheel = run(&KimParams { timer: Timer::Wheel, ..small(Fill::EventDriven) }, 4, None, &mut |_| {}).unwrap();
    assert_eq!(heap.get("arrived_packets"), wheel.get("arrived_packets"));
    for k in ["sent_packets", "reschedules", "heap_inserts", "heap_mean_per_core", "mean_delay"] {
        let (a, b) = (heap.get(k).unwrap(), wheel.get(k).unwrap());
        assert!((a - b).abs() <= 0.01 * a, "{k}: heap {a}, wheel {b}");
    }
    assert!(wheel.get("wheel_cascaded").unwrap() + wheel.get("wheel_sorted").unwrap() > 0.0);
    assert!(wheel.get("offchip_2KB").is_none() && heap.get("offchip_2KB").is_some());
}

/// Shards: running each group of queues and cores on its own and combining the results gives
/// exactly what one engine simulating every group gives (per-core heap mean and maximum,
/// off-chip counts by index, cache misses, the sampled series and the event count included),
/// on any number of threads; and sharding is a different model only in which cores a queue
/// may use: its statistics stay those of the unsharded run.
#[test]
fn shards_combine_to_the_unsplit_run_on_any_thread_count() {
    let base = KimParams {
        shards: 4,
        duration: Duration::from_secs(2),
        warmup: Duration::from_millis(300),
        sample_every: Some(Duration::from_millis(250)),
        ..small(Fill::EventDriven)
    };
    let cases = [
        base.clone(),
        KimParams { timer: Timer::Wheel, while_disabled: WhileDisabled::Queue, ..base.clone() },
        KimParams { cache: Some(CacheGeometry::KIM), shards: 3, ..base.clone() },
        KimParams { fill: Fill::Periodic(Duration::from_millis(1)), shards: 7, ..base.clone() },
    ];
    for p in &cases {
        let one = run_unsplit(p, 11).unwrap();
        assert!(one.events > 0 && one.complete);
        for threads in [1, 2, 3] {
            let split = run_on(p, 11, threads, None, &mut |_| {}).unwrap();
            assert_eq!(split, one, "shards {} on {threads} threads, {:?} {:?}", p.shards, p.fill, p.timer);
        }
    }
    let sharded = run(&base, 11, None, &mut |_| {}).unwrap();
    assert_eq!(sharded.series[0].points.len(), 8);
    let plain = run(&KimParams { shards: 1, ..base }, 11, None, &mut |_| {}).unwrap();
    // Counts within four standard deviations of a Poisson count, the mean heap within 10%.
    for k in ["reschedules", "sent_packets", "heap_mean_per_core"] {
        let (a, b) = (plain.get(k).unwrap(), sharded.get(k).unwrap());
        let tol = if k == "heap_mean_per_core" { 0.1 * a } else { 4.0 * (a + b).sqrt() };
        assert!((a - b).abs() <= tol, "{k}: 1 shard {a}, 4 shards {b}");
    }
}

#[test]
fn shards_must_fit_the_cores_queues_and_link() {
    let p = small(Fill::EventDriven);
    for (shards, mode, why) in [
        (0, LinkMode::Ideal, "at least 1"),
        (11, LinkMode::Ideal, "one shard per core"),
        (2, LinkMode::Shared, "shared link"),
    ] {
        let e = run(&KimParams { shards, link_mode: mode, ..p.clone() }, 1, None, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains(why), "{e}");
    }
}
