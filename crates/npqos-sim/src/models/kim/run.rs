//! Building and running kim simulations: one engine, or the scenario's shards on worker
//! threads, combined in shard order so the result does not depend on the thread count.

use super::*;

/// Builds and runs one kim simulation on one thread.
pub fn run(
    p: &KimParams,
    seed: u64,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> Result<RunResult, KimRunError> {
    run_on(p, seed, 1, interrupt, progress)
}

/// Builds and runs one kim simulation, its shards on up to `threads` threads. The result is
/// the same for every `threads`.
pub fn run_on(
    p: &KimParams,
    seed: u64,
    threads: usize,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> Result<RunResult, KimRunError> {
    run_with_log_on(p, seed, threads, interrupt, progress).map(|r| r.0)
}

/// [`run`], also returning core 0's heap operations when `p.log_core0` is set.
pub fn run_with_log(
    p: &KimParams,
    seed: u64,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> Result<(RunResult, Vec<HeapOp>), KimRunError> {
    run_with_log_on(p, seed, 1, interrupt, progress)
}

/// Checks that `p.shards` fits the queues, cores and link mode.
fn check_shards(p: &KimParams) -> Result<(), KimRunError> {
    let shards = p.shards;
    let why = if shards == 0 {
        "expected at least 1"
    } else if shards > p.queues.max(1) {
        "expected at most one shard per queue"
    } else if p.fill == Fill::EventDriven && shards > p.cores {
        "expected at most one shard per core (each shard has its own cores)"
    } else if shards > 1 && p.link_mode == LinkMode::Shared {
        "the shared link couples every queue: it needs shards = 1"
    } else {
        return Ok(());
    };
    Err(KimRunError::Shards { shards, why })
}

/// How many of `0..n` are `g` modulo `shards`.
fn members(n: u32, shards: u32, g: u32) -> u32 {
    if g >= n {
        0
    } else {
        (n - g).div_ceil(shards)
    }
}

fn run_with_log_on(
    p: &KimParams,
    seed: u64,
    threads: usize,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> Result<(RunResult, Vec<HeapOp>), KimRunError> {
    check_shards(p)?;
    let shards = p.shards as usize;
    let dur = p.duration.as_nanos().max(1);
    let workers = threads.clamp(1, shards);
    let mut outs = Vec::with_capacity(shards);
    if workers == 1 {
        for g in 0..shards {
            let base = g as u64 * dur;
            let mut each = |now: Instant| progress(Instant::from_nanos((base + now.as_nanos()) / shards as u64));
            outs.push(simulate(p, seed, Some(g as u32), interrupt.clone(), &mut each)?);
        }
    } else {
        // Workers take shards in index order; results are combined in index order, so the
        // outcome does not depend on which thread ran which shard. This thread reports progress.
        use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
        let next = AtomicUsize::new(0);
        let finished = AtomicUsize::new(0);
        let done_ns: Vec<AtomicU64> = (0..shards).map(|_| AtomicU64::new(0)).collect();
        let slots: std::sync::Mutex<Vec<Option<Result<ShardOut, KimRunError>>>> =
            std::sync::Mutex::new((0..shards).map(|_| None).collect());
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| loop {
                    let g = next.fetch_add(1, Ordering::Relaxed);
                    if g >= shards {
                        return;
                    }
                    let mut each = |now: Instant| done_ns[g].store(now.as_nanos(), Ordering::Relaxed);
                    let r = simulate(p, seed, Some(g as u32), interrupt.clone(), &mut each);
                    done_ns[g].store(dur, Ordering::Relaxed);
                    slots.lock().expect("no shard panicked")[g] = Some(r);
                    finished.fetch_add(1, Ordering::Relaxed);
                });
            }
            while finished.load(Ordering::Relaxed) < shards {
                let sum: u64 = done_ns.iter().map(|a| a.load(Ordering::Relaxed)).sum();
                progress(Instant::from_nanos(sum / shards as u64));
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        });
        for r in slots.into_inner().expect("no shard panicked") {
            outs.push(r.expect("every shard ran")?);
        }
    }
    Ok(combine(p, outs))
}

/// Runs every group of `p.shards` in one engine, unsplit: the reference the sharded run must
/// equal (tests).
#[cfg(test)]
pub(crate) fn run_unsplit(p: &KimParams, seed: u64) -> Result<RunResult, KimRunError> {
    check_shards(p)?;
    Ok(combine(p, vec![simulate(p, seed, None, None, &mut |_| {})?]).0)
}

/// What one shard measured, in countable form (combined by [`combine`]).
struct ShardOut {
    reason: StopReason,
    events: u64,
    end: u64,
    counts: Counts,
    timers: Option<TimerOut>,
    /// Periodic fill: throttles and fill accesses.
    periodic: Option<(u64, u64)>,
    log: Vec<HeapOp>,
}

/// The event-driven shaper's measurements of one shard.
struct TimerOut {
    counters: EventCounters,
    heap: HeapCounters,
    wheel: WheelCounters,
    /// Heap accesses by bin ([`IndexCounts`]).
    index: Vec<u64>,
    misses: MissCounts,
    /// Sum over the shard's cores of heap size x time after the warm-up (node ns).
    heap_area: u128,
    heap_max: u64,
    resched_per_interval: Vec<u64>,
}

/// Simulates group `group` of `p.shards` (or, with `None`, every group in one engine).
fn simulate(
    p: &KimParams,
    seed: u64,
    group: Option<u32>,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> Result<ShardOut, KimRunError> {
    let gs: Vec<u32> = match group {
        Some(g) => vec![g],
        None => (0..p.shards).collect(),
    };
    let (n, cores) = match group {
        Some(g) => (members(p.queues, p.shards, g) as usize, members(p.cores, p.shards, g) as usize),
        None => (p.queues as usize, p.cores as usize),
    };
    // Every queue's share of the whole link, whichever shard it is in.
    let share = p.link.share(p.queues as u64);
    let bucket = BucketParams { cir: share, cap_bytes: p.cap_bytes, alpha_bytes: p.alpha_bytes };
    let params = vec![bucket; n];
    let shaper = match p.fill {
        Fill::EventDriven => {
            let mut s = EventShaper::new(&params, cores, 0, p.tick_shift)?.with_timer(p.timer)?;
            if let Some(a) = p.adaptive {
                s = s.with_adaptive(a)?;
            }
            Shaping::Event(s)
        }
        Fill::Periodic(period) => Shaping::Periodic(PeriodicShaper::new(&params, period)?),
    };
    let streams = RngStreams::new(seed);
    let gap = mean_gap_for_overload(p.sizes.mean(), share, p.overload)
        .filter(|g| !g.is_zero())
        .unwrap_or(Duration::NANOSECOND);
    let proc = Arrivals::new(&p.arrivals, gap)?;
    let sampling = p.sample_every.filter(|_| p.fill == Fill::EventDriven);
    let mut groups: Vec<Group> = gs
        .iter()
        .map(|&g| Group {
            size: streams.stream("kim.sizes", g as u64),
            gap: streams.stream("kim.arrivals", g as u64),
            core: streams.stream("kim.cores", g as u64),
            cores: members(p.cores, p.shards, g),
        })
        .collect();
    // A send draws one of its group's cores (`rng::range_u32(.., 0, cores - 1)`): with
    // event-driven fill every group has one (`check_shards`).
    assert!(p.fill != Fill::EventDriven || groups.iter().all(|g| g.cores > 0), "every group has a core");
    let mut engine = Engine::new();
    if let Some(f) = interrupt {
        engine = engine.with_interrupt(f);
    }
    // First arrivals at a uniformly random phase within one mean gap, so queues with constant
    // gaps are not in lockstep (drawn in queue order from each queue's group stream), each
    // queued or with its ticket in the engine's order.
    let slots = groups.len();
    let calendar = calendar_for(n);
    let mut first: Vec<u128> = Vec::with_capacity(if calendar { n } else { 0 });
    for q in 0..n {
        let rng = &mut groups[q % slots].gap;
        let at = Instant::ZERO + Duration::from_nanos(rng.random_range(0..gap.as_nanos().max(1)));
        if calendar {
            first.push(engine.ticket(at, 0).packed());
        } else {
            engine.schedule(at, Ev::Arrival(q as u32));
        }
    }
    let mut m = Kim {
        p: p.clone(),
        shaper,
        next_arrival: (calendar && n > 0).then(|| Calendar::for_gaps(first, gap.as_nanos())),
        pool: PacketPool::new(n as u32),
        arrivals: if proc.is_stateless() { vec![proc] } else { vec![proc; n] },
        groups,
        obs: IndexCounts::new(&p.locked_sizes),
        timer_at: vec![u64::MAX; cores],
        heap_area: vec![HeapArea::default(); cores],
        heap_max: 0,
        work: Vec::new(),
        buffers: !(p.link_mode == LinkMode::Ideal
            && p.conformance == Conformance::SendThenPay
            && p.while_disabled == WhileDisabled::Drop),
        ring: (p.link_mode == LinkMode::Shared).then(|| Drr::round_robin(n as u32)),
        link_busy: false,
        caches: (0..cores)
            .map(|_| match p.cache {
                Some(g) => p
                    .locked_sizes
                    .iter()
                    .map(|&l| SetAssocCache::new(g.size_bytes, g.ways, g.line_bytes, l))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(KimRunError::from),
                None => Ok(Vec::new()),
            })
            .collect::<Result<Vec<_>, _>>()?,
        misses: MissCounts::new(p.locked_sizes.len()),
        log: Vec::new(),
        next_sample: sampling.map_or(u64::MAX, |e| e.as_nanos().max(1)),
        resched_per_interval: Vec::new(),
        last_resched: 0,
        counts: Counts::default(),
    };
    let limits = RunLimits {
        until: Instant::ZERO + p.duration,
        max_events: if p.max_events == 0 { u64::MAX } else { p.max_events },
    };
    let reason = engine.run(&mut m, limits, progress);
    let end = engine.now().as_nanos();
    // Intervals that ended by the end time (the last one at it, like an event at that time).
    if m.next_sample <= end {
        m.close_samples(end.saturating_add(1));
    }
    let mut out = ShardOut {
        reason,
        events: engine.executed(),
        end,
        counts: m.counts,
        timers: None,
        periodic: None,
        log: std::mem::take(&mut m.log),
    };
    match &m.shaper {
        Shaping::Event(s) => {
            let w = p.warmup.as_nanos();
            for a in &mut m.heap_area {
                a.advance(end, w);
            }
            out.timers = Some(TimerOut {
                counters: *s.counters(),
                heap: s.heap_counters(),
                wheel: s.wheel_counters(),
                index: std::mem::take(&mut m.obs.bins),
                misses: m.misses.clone(),
                heap_area: m.heap_area.iter().map(|a| a.sum).sum(),
                heap_max: m.heap_max,
                resched_per_interval: std::mem::take(&mut m.resched_per_interval),
            });
        }
        Shaping::Periodic(s) => {
            out.periodic = Some((s.counters().throttles, s.fill_accesses(Instant::from_nanos(end))));
        }
        Shaping::None => {}
    }
    Ok(out)
}

/// Adds `b` into `a` element by element (growing `a`).
fn add_into(a: &mut Vec<u64>, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// Combines the shards' measurements (in shard order) into the run's result. Counts add up;
/// per-core heap statistics span all cores of all shards: the maximum is the largest of the
/// shards' maxima, the mean is the summed size x time over the run's span and all `p.cores`.
fn combine(p: &KimParams, outs: Vec<ShardOut>) -> (RunResult, Vec<HeapOp>) {
    let end = outs.iter().map(|o| o.end).min().unwrap_or(0);
    let secs = (end as f64 * 1e-9).max(1e-12);
    let reason = outs.iter().map(|o| o.reason).find(|r| *r != StopReason::EndTime).unwrap_or(StopReason::EndTime);
    let sum = |f: fn(&ShardOut) -> u64| outs.iter().map(f).sum::<u64>();
    let mut r = RunResult {
        complete: outs.iter().all(|o| matches!(o.reason, StopReason::EndTime | StopReason::Drained)),
        stop_reason: format!("{reason:?}").to_lowercase(),
        events: sum(|o| o.events),
        sim_time_ns: end,
        ..Default::default()
    };
    let n = p.queues as usize;
    let share = p.link.share(p.queues as u64);
    let mut k = Counts::default();
    for o in &outs {
        k.add(&o.counts);
    }
    r.scalar("arrived_packets", k.arrived as f64, "packets");
    r.scalar("sent_packets", k.sent_pkts as f64, "packets");
    r.scalar("dropped_packets", k.dropped as f64, "packets");
    r.scalar("dropped_while_disabled", k.dropped_disabled as f64, "packets");
    r.scalar("rate_ratio", k.sent_bytes as f64 * 8.0 / secs / (share.bits_per_sec() as f64 * n as f64), "1");
    // Arrival to the start of transmission, for packets sent after the warm-up.
    r.scalar("mean_delay", if k.delay_pkts > 0 { k.delay_sum_ns as f64 / k.delay_pkts as f64 } else { 0.0 }, "ns");
    let mut log = Vec::new();
    let timers: Vec<&TimerOut> = outs.iter().filter_map(|o| o.timers.as_ref()).collect();
    if !timers.is_empty() {
        let mut c = EventCounters::default();
        let mut h = HeapCounters::default();
        let mut wc = WheelCounters::default();
        let mut index = Vec::new();
        let mut misses = MissCounts::new(p.locked_sizes.len());
        let mut resched: Vec<u64> = Vec::new();
        let (mut area, mut heap_max) = (0u128, 0u64);
        let shortest = timers.iter().map(|t| t.resched_per_interval.len()).min().unwrap_or(0);
        for t in &timers {
            c.add(&t.counters);
            h.add(&t.heap);
            wc.add(&t.wheel);
            add_into(&mut index, &t.index);
            misses.add(&t.misses);
            area += t.heap_area;
            heap_max = heap_max.max(t.heap_max);
            add_into(&mut resched, &t.resched_per_interval[..shortest]);
        }
        let heap = p.timer == Timer::Heap;
        r.scalar("reschedules", c.reschedules as f64, "1");
        if heap {
            r.scalar("heap_inserts", h.inserts as f64, "1");
            r.scalar("heap_deletes", h.deletes as f64, "1");
        } else {
            // The wheel's filings and releases (the same events as the heap's inserts and
            // deletes), its cascades and the entries it sorted into runs; it has no heap
            // array to account.
            r.scalar("heap_inserts", wc.inserts as f64, "1");
            r.scalar("heap_deletes", wc.deletes as f64, "1");
            r.scalar("wheel_cascaded", wc.cascaded as f64, "1");
            r.scalar("wheel_sorted", wc.sorted as f64, "1");
        }
        r.scalar("deferred", c.deferred as f64, "1");
        r.scalar("bucket_accesses", c.bucket_accesses as f64, "1");
        if heap {
            let total: u64 = index.iter().sum();
            r.scalar("heap_accesses", total as f64, "1");
            let bins = IndexCounts::new(&p.locked_sizes);
            for &l in &p.locked_sizes {
                let off = bins.at_or_after(&index, l);
                r.scalar(&format!("offchip_{}KB", l / 1024), off as f64, "1");
            }
        }
        let span = end.saturating_sub(p.warmup.as_nanos()).max(1) as f64;
        r.scalar("heap_mean_per_core", area as f64 / (span * p.cores as f64), "nodes");
        r.scalar("heap_max_per_core", heap_max as f64, "nodes");
        if heap {
            r.scalar("compares_per_op", h.compares as f64 / (h.inserts + h.deletes).max(1) as f64, "1");
            r.scalar("moves_per_op", h.moves as f64 / (h.inserts + h.deletes).max(1) as f64, "1");
        }
        if p.cache.is_some() {
            let mc = &misses;
            r.scalar("cache_insert_ops", mc.insert_ops as f64, "1");
            r.scalar("cache_delete_ops", mc.delete_ops as f64, "1");
            r.scalar("accesses_per_insert", mc.insert_accesses as f64 / mc.insert_ops.max(1) as f64, "1");
            r.scalar("accesses_per_delete", mc.delete_accesses as f64 / mc.delete_ops.max(1) as f64, "1");
            r.scalar("peek_accesses", mc.peek_accesses as f64, "1");
            for (k, &l) in p.locked_sizes.iter().enumerate() {
                let kb = l / 1024;
                for (name, misses, per) in [
                    ("misses_per_insert", mc.insert_misses[k], mc.insert_ops),
                    ("misses_per_delete", mc.delete_misses[k], mc.delete_ops),
                    ("insert_miss_rate", mc.insert_misses[k], mc.insert_accesses),
                    ("delete_miss_rate", mc.delete_misses[k], mc.delete_accesses),
                ] {
                    r.scalar(&format!("{name}_{kb}KB"), misses as f64 / per.max(1) as f64, "1");
                }
            }
        }
        if !resched.is_empty() {
            let every = p.sample_every.map_or(1, |e| e.as_nanos().max(1));
            r.series.push(crate::results::Series {
                name: "reschedules_per_queue".into(),
                x_unit: "s".into(),
                unit: "reschedules per queue per interval".into(),
                points: resched
                    .iter()
                    .enumerate()
                    .map(|(k, &x)| (Instant::from_nanos((k as u64 + 1) * every).as_secs_f64(), x as f64 / n as f64))
                    .collect(),
            });
        }
    }
    let periodic: Vec<(u64, u64)> = outs.iter().filter_map(|o| o.periodic).collect();
    if !periodic.is_empty() {
        r.scalar("throttles", periodic.iter().map(|x| x.0).sum::<u64>() as f64, "1");
        r.scalar("fill_accesses", periodic.iter().map(|x| x.1).sum::<u64>() as f64, "1");
    }
    // Core 0 is group 0's first core: the first shard's log.
    if let Some(o) = outs.into_iter().next() {
        log = o.log;
    }
    (r, log)
}
