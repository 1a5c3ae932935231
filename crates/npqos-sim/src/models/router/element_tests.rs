//! The pipeline's element tests (docs/pipeline.md, "Element tests"): each element of
//! `npqos_core::pipeline::router` in its place, every other element transparent (zero-cost
//! processing, an ideal queue memory, no shaping, a link far faster than the packets, as each
//! test says), gives exactly what its stand-alone reference gives on the same packets:
//!
//! | element | test | reference |
//! |---|---|---|
//! | Ingress (dqs) | [`dqs_alone_is_the_dqs_model`] | the `dqs` model's link run |
//! | Processing (the allocator) | [`allocation_alone_is_the_everest_model`] | the `everest` model |
//! | Processing (the scheduler within a service) | [`scheduling_alone_is_the_fair_queue`] | a stand-alone `FairQueue` |
//! | Processing (LAP) | [`lap_alone_is_the_lap_scheduler`] | a stand-alone `LapScheduler` |
//! | Processing (the processors) | [`processing_alone_is_the_fifo_multiserver`] | the FIFO c-server queue, written here |
//! | Egress (the shaper) | [`shaping_alone_is_the_token_bucket`] | tbf's token bucket, written here |
//! | Link | [`link_alone_is_the_serializer`] | a stand-alone `Serializer` |
//!
//! They run the element inside the whole pipeline, through the engine driver, rather than
//! calling it alone: the element's own unit tests are in `npqos_core::pipeline` (its ports,
//! its refusals, its rule), and what these add is that the composition (the packet records,
//! the FIFOs, the order of events at one instant, the driver) changes nothing the element
//! decides. The queue memory has no test of this kind: its caches are the core's
//! `EntryCache` and `DataCache`, which the `qcache` reproduction also runs, and `Qmem`'s own
//! tests are in `npqos_core::pipeline::qmem`.

use super::driver::run_traced;
use super::tests::{synthetic, transparent};
use super::*;
use npqos_core::alloc::Policy;
use npqos_core::classify::Rule;
use npqos_core::flowmap::DqsConfig;
use npqos_core::flowmap::HashKind;
use npqos_core::Instant;
use npqos_core::Rate;
use rand::Rng;

/// Stage 7 alone: zero-cost processing and an ideal queue memory hand every packet to the
/// output queue at its arrival; one class queue and no shaping make the link a FIFO, so each
/// packet leaves when a stand-alone `Serializer` (the `link` model's) fed the same packets
/// says. Exact.
#[test]
fn link_alone_is_the_serializer() {
    let p = transparent(64, 0.0, Rate::gbps(1));
    let tr = synthetic(2_000, 2_000); // ~1e6 packets/s of IMIX: about 2.7 Gbps on 1 Gbps
    let (run, trace) = run_traced(&p, &tr, 7).unwrap();
    let mut link = npqos_core::rate::Serializer::new(p.link_rate).unwrap();
    let RouterTraffic::Synthetic { flows, .. } = &tr else { unreachable!() };
    let stream = flows.generator(crate::rng::RngStreams::new(7).stream("router.flows", 0));
    let mut n = 0;
    for (a, t) in stream.zip(&trace) {
        assert_eq!(a.ts, t.arrival);
        let left = link.send(Instant::from_nanos(a.ts), a.len as u64).as_nanos();
        if let Some(d) = t.delivered {
            assert_eq!(d, left, "packet {n}");
        }
        n += 1;
    }
    assert_eq!(n, trace.len());
    assert!(run.get("link_utilization").unwrap() > 0.95, "the link is the bottleneck");
    assert_eq!(run.get("dropped_packets"), Some(0.0));
}

/// Stage 4 alone: one service on `c` processors, constant cost, FCFS, ideal queue memory and a
/// link far faster than the processors: dispatch and finish times are the FIFO c-server
/// queue's (each packet to the processor that frees first), computed here without the
/// allocator. Exact.
#[test]
fn processing_alone_is_the_fifo_multiserver() {
    let (c, cost) = (4u32, 3_000u64);
    let p = transparent(c, cost as f64, Rate::gbps(1000));
    let tr = synthetic(2_000, 1_500); // ~1.33e6 packets/s against 4 / 3 us = 1.33e6: at the edge
    let (_, trace) = run_traced(&p, &tr, 3).unwrap();
    let mut free = vec![0u64; c as usize];
    let mut late = 0;
    for (i, t) in trace.iter().enumerate() {
        let k = (0..free.len()).min_by_key(|&k| free[k]).unwrap();
        let start = t.arrival.max(free[k]);
        free[k] = start + cost;
        assert_eq!((t.dispatch, t.done), (start, start + cost), "packet {i}");
        late += (start > t.arrival) as u32;
    }
    assert!(late > 1_000, "the processors were a bottleneck ({late} packets waited)");
}

/// Stage 6 alone: one class queue shaped by the event-driven shaper (heap tick 1 ns) under
/// wait-for-tokens, everything else transparent: each packet leaves when a stand-alone
/// token bucket with the same cap and rate lets it (the bucket's own arithmetic, written here
/// from tbf's definition), then the link serializes it. Exact.
#[test]
fn shaping_alone_is_the_token_bucket() {
    let mut p = transparent(64, 0.0, Rate::gbps(100));
    p.services[0].rate = Some(Rate::from_bits_per_sec(500_000_000));
    p.shaping.kind = ShaperKind::Event {
        alpha_bytes: 0,
        locked_bytes: 0,
        tick_shift: 0,
        adaptive: None,
        timer: npqos_core::shaper::Timer::Heap,
    };
    p.shaping.conformance = Conformance::WaitForTokens;
    let tr = synthetic(500, 2_000);
    let (run, trace) = run_traced(&p, &tr, 5).unwrap();
    // tbf: tokens in bit-ns (bytes x 8e9), a full bucket at time 0.
    let (cir, cap) = (500_000_000u128, 16_000u128 * 8_000_000_000);
    let (mut tokens, mut t_lu, mut link) = (cap, 0u64, npqos_core::rate::Serializer::new(p.link_rate).unwrap());
    let RouterTraffic::Synthetic { flows, .. } = &tr else { unreachable!() };
    let stream = flows.generator(crate::rng::RngStreams::new(5).stream("router.flows", 0));
    let mut prev_send = 0u64;
    for (i, (a, t)) in stream.zip(&trace).enumerate() {
        let need = a.len as u128 * 8_000_000_000;
        let mut at = a.ts.max(prev_send);
        let level = |at: u64| (tokens + (at - t_lu) as u128 * cir).min(cap);
        if level(at) < need {
            at += ((need - level(at)) as u64).div_ceil(cir as u64);
        }
        tokens = level(at) - need;
        t_lu = at;
        prev_send = at;
        let left = link.send(Instant::from_nanos(at), a.len as u64).as_nanos();
        assert_eq!(t.delivered, Some(left), "packet {i}");
    }
    assert!(run.get("shaper_reschedules").unwrap() > 100.0, "the shaper throttled");
}

/// Services tcp, udp and icmp (by protocol) like `base`, of constant costs (ns) and
/// tolerances (us), each guaranteed a third of the processors.
fn three_services(base: &ServiceParams, costs: [f64; 3], d_us: [u64; 3]) -> Vec<ServiceParams> {
    [("tcp", 6), ("udp", 17), ("icmp", 1)]
        .iter()
        .enumerate()
        .map(|(i, &(name, proto))| ServiceParams {
            name: name.into(),
            rule: Rule { protocols: vec![proto], ..Rule::default() },
            cost_alpha_ns: costs[i],
            tolerance: Duration::from_micros(d_us[i]),
            guarantee: 1.0 / 3.0,
            ..base.clone()
        })
        .collect()
}

/// Synthetic flows of [`three_services`]' protocols with these shares, 50 ms of arrivals.
fn three_service_traffic(flows: u32, gap_us: u64, shares: [f64; 3]) -> RouterTraffic {
    let mix = [(6, 443), (17, 53), (1, 0)]
        .iter()
        .zip(shares)
        .map(|(&(protocol, port), share)| MixEntry { protocol, port, share })
        .collect();
    RouterTraffic::synthetic(flows, Duration::from_micros(gap_us), Duration::from_millis(50), mix)
}

/// Stage 4 under LAP alone: three services of constant cost on 3 processors, `policy =
/// "lap"`, everything else transparent: every packet is dispatched when a stand-alone
/// `LapScheduler` (the `predictive-fig10-12` scheduler) says, with the router's rules written
/// out here: a free processor asks LAP for its next packet; an arrival goes to an idle
/// processor whose cache holds its service, else the lowest idle one; a cold cache adds t_sw.
/// Completions at one instant run in the order they were scheduled (the engine's). Exact.
#[test]
fn lap_alone_is_the_lap_scheduler() {
    use npqos_core::sched::lap::{LapPacket, LapScheduler, Policy as LapPolicy};
    use npqos_core::{AppId, ProcessorId};
    let mut p = transparent(3, 2_000.0, Rate::gbps(1000));
    p.processing.policy = Allocation::Lap;
    p.processing.t_sw = Duration::from_nanos(1_500);
    p.services = three_services(&p.services[0], [2_000.0, 1_000.0, 3_000.0], [1_000_000; 3]);
    let tr = three_service_traffic(1_500, 1_200, [0.5, 0.3, 0.2]);
    let (run, trace) = run_traced(&p, &tr, 6).unwrap();
    let cost = [2_000u64, 1_000, 3_000];
    let mut lap = LapScheduler::new(LapPolicy::Lap, 3, 3).unwrap();
    let mut idle = [true; 3];
    // Completions: (time, scheduling order, processor).
    let mut done: std::collections::BTreeSet<(u64, u64, u32)> = Default::default();
    let (mut order, mut next, mut cold) = (0u64, 0usize, 0u64);
    let mut dispatch = |lap: &mut LapScheduler, idle: &mut [bool; 3], pr: u32, now: u64, order: &mut u64| {
        let done_at = match lap.dispatch(ProcessorId(pr)).unwrap() {
            Some(pick) => {
                let i = pick.packet.id as usize;
                assert_eq!(trace[i].dispatch, now, "packet {i}");
                cold += pick.cold as u64;
                idle[pr as usize] = false;
                *order += 1;
                Some((now + cost[trace[i].service as usize] + if pick.cold { 1_500 } else { 0 }, *order, pr))
            }
            None => {
                idle[pr as usize] = true;
                None
            }
        };
        done_at
    };
    loop {
        let arrival = trace.get(next).map(|t| t.arrival);
        match done.first().copied() {
            Some((t, o, pr)) if arrival.is_none_or(|a| t <= a) => {
                done.remove(&(t, o, pr));
                if let Some(d) = dispatch(&mut lap, &mut idle, pr, t, &mut order) {
                    done.insert(d);
                }
            }
            _ => {
                let Some(a) = arrival else { break };
                let s = trace[next].service as u32;
                lap.enqueue(LapPacket { id: next as u64, app: AppId(s), est: cost[s as usize] as f64 }).unwrap();
                next += 1;
                let warm = (0..3).find(|&q| idle[q] && lap.cache(ProcessorId(q as u32)) == Some(AppId(s)));
                if let Some(q) = warm.or_else(|| (0..3).find(|&q| idle[q])) {
                    if let Some(d) = dispatch(&mut lap, &mut idle, q as u32, a, &mut order) {
                        done.insert(d);
                    }
                }
            }
        }
    }
    assert_eq!(run.get("context_switches"), Some(cold as f64));
    assert!(cold > 100, "LAP moved processors between services ({cold} cold dispatches)");
    assert!(trace.iter().filter(|t| t.dispatch > t.arrival).count() > 10_000, "the processors were a bottleneck");
}

/// The synthetic stream the router sees with `seed`: the generator's packets with the mix's
/// protocol and port written in (one mix entry).
fn router_stream(tr: &RouterTraffic, seed: u64) -> Vec<crate::models::dqs::Arrival> {
    let RouterTraffic::Synthetic { flows, mix } = tr else { unreachable!() };
    let g = flows.generator(crate::rng::RngStreams::new(seed).stream("router.flows", 0));
    g.map(|mut a| {
        (a.flow.proto, a.flow.dst_port) = (mix[0].protocol, mix[0].port);
        a
    })
    .collect()
}

/// Stage 3 alone: dqs ingress (a small pool, a tight block buffer) drained by one processor
/// whose cost is the packet's serialization time at 8 Gbps (1 ns per byte), DRR within the
/// service, everything else transparent: the `dqs` model (its table scheduling its own queues
/// by DRR into an 8 Gbps link) on the same packets starts every packet at the same instant,
/// in the same order, and drops the same packets for the same reasons. Exact: both are
/// integer nanoseconds (1 ns per byte), and both serve a departure before an arrival at one
/// instant. The `dqs` model stops at the last arrival; the router drains, so its list of
/// starts is longer.
#[test]
fn dqs_alone_is_the_dqs_model() {
    let seed = 11;
    let mut p = transparent(1, 0.0, Rate::gbps(1000));
    p.services[0].cost_beta_ns = 1.0;
    p.processing.scheduler = Scheduler::Drr;
    p.ingress = IngressKind::Dqs;
    p.table = DqsConfig { slots: 64, queues: 24, blocks: 300, ..p.table };
    let tr = synthetic(3_000, 1_000); // 3e6 packets/s of IMIX: about 1.1 x 8 Gbps
    let (run, trace) = run_traced(&p, &tr, seed).unwrap();

    let arrivals = router_stream(&tr, seed);
    let offered = tr.mean_rate_bps();
    let h3: u64 = crate::rng::RngStreams::new(seed).stream("router.hash", 0).random();
    let q = crate::models::dqs::DqsLinkParams {
        table: npqos_core::flowmap::DqsConfig {
            slots: 64,
            queues: 24,
            blocks: 300,
            block_size: 64,
            quantum: 1536,
            hash: HashKind::H3 { seed: h3 },
            ..Default::default()
        },
        load: offered / 8e9,
        record_requests: false,
        record_departures: true,
    };
    let r = crate::models::dqs::run_link(&q, arrivals.into_iter(), offered, 0, &mut |_| {});
    assert_eq!(r.capacity_bps, 8e9);
    let mut starts: Vec<(u64, u32)> = trace.iter().filter(|t| t.drop.is_none()).map(|t| (t.dispatch, t.len)).collect();
    starts.sort_unstable();
    assert!(r.departures.len() > 50_000 && starts.len() >= r.departures.len());
    for (i, (a, b)) in r.departures.iter().zip(&starts).enumerate() {
        assert_eq!(a, b, "start {i}");
    }
    assert_eq!(run.get("dropped_ingress_buffer_full"), Some(r.dropped_buffer_full as f64));
    assert_eq!(run.get("dropped_ingress_no_queue"), Some(r.dropped_no_queue as f64));
    assert!(r.dropped_buffer_full > 100 && r.dropped_no_queue > 100, "{r:?}");
    assert_eq!(run.get("ingress_queues_max"), Some(r.max_queues as f64));
}

/// Stage 4's allocation alone: three services of constant cost, FCFS within each, Everest
/// with a context-switch cost, everything else transparent: the `everest` model fed the same
/// (arrival, service) stream gives the same packets and late packets per service, the same
/// sum and maximum of the delays and the same number of context switches. Exact (integer
/// nanoseconds, the same event order at one instant: processors, timer, arrivals).
#[test]
fn allocation_alone_is_the_everest_model() {
    let mut p = transparent(4, 2_000.0, Rate::gbps(1000));
    p.processing.policy = Allocation::Policy(Policy::Everest);
    p.processing.t_sw = Duration::from_micros(10);
    p.processing.delta = Duration::from_micros(10);
    p.services = three_services(&p.services[0], [2_000.0, 1_000.0, 4_000.0], [60, 40, 200]);
    let tr = three_service_traffic(2_000, 1_050, [0.6, 0.3, 0.1]);
    let (run, trace) = run_traced(&p, &tr, 4).unwrap();
    let e = crate::models::everest::EverestParams {
        processors: 4,
        t_sw: p.processing.t_sw,
        delta: p.processing.delta,
        policy: Policy::Everest,
        services: p
            .services
            .iter()
            .map(|s| npqos_core::alloc::ServiceSpec {
                name: s.name.clone(),
                t_pkt: Duration::from_nanos(s.cost_alpha_ns as u64),
                tolerance: s.tolerance,
                guarantee: s.guarantee,
            })
            .collect(),
        sample_every: Duration::from_millis(1),
        check_invariants: true,
        timeline: None,
    };
    let stream = trace.iter().map(|t| (t.arrival, t.service as u8));
    let r = crate::models::everest::run(&e, stream, 0, &mut |_| {}).unwrap();
    let mut per = vec![(0u64, 0u64); 3];
    let (mut sum, mut max) = (0u128, 0u64);
    for t in &trace {
        let d = t.done - t.arrival;
        let x = &mut per[t.service as usize];
        x.0 += 1;
        x.1 += (d > p.services[t.service as usize].tolerance.as_nanos()) as u64;
        sum += d as u128;
        max = max.max(d);
    }
    assert_eq!(per, r.per_service);
    assert_eq!((sum, max), (r.delay_sum_ns, r.max_delay_ns));
    assert_eq!(run.get("context_switches"), Some(r.stats.switches as f64));
    assert!(r.stats.switches > 10 && r.late > 100, "switches {} late {}", r.stats.switches, r.late);
}

/// Stage 4's scheduler alone: one processor, per-flow ingress queues, each fair-queuing
/// discipline on costs `alpha + beta x length`, everything else transparent: every packet is
/// dispatched when a stand-alone `FairQueue` (the `fq` model's scheduler) fed the same packets
/// of the same queues dispatches it. Exact.
#[test]
fn scheduling_alone_is_the_fair_queue() {
    use npqos_core::sched::fq::{Discipline, FairQueue, FqPacket};
    for d in [Discipline::Efq, Discipline::Sfq, Discipline::Wf2qPlus] {
        let mut p = transparent(1, 300.0, Rate::gbps(1000));
        p.services[0].cost_beta_ns = 2.0;
        p.processing.scheduler = Scheduler::Fair(d);
        p.ingress = IngressKind::PerFlow;
        p.table.queues = 4096;
        let tr = synthetic(400, 400); // 1e6 packets/s against a ~1.0 us mean cost
        let (_, trace) = run_traced(&p, &tr, 9).unwrap();
        let nq = 4096;
        let mut fq = FairQueue::new(d, 1, &vec![1.0 / nq as f64; nq]).unwrap();
        let cost = |t: &super::pipeline::Trace| (300.0 + 2.0 * t.len as f64).ceil() as u64;
        let pkt = |i: usize, t: &super::pipeline::Trace| FqPacket {
            id: i as u64,
            flow: npqos_core::FlowId(t.iq),
            app: npqos_core::AppId(0),
            est_ns: 300.0 + 2.0 * t.len as f64,
            actual_ns: 300.0 + 2.0 * t.len as f64,
            arrival: Instant::from_nanos(t.arrival),
        };
        let mut busy: Option<(u64, usize)> = None;
        let mut next = 0;
        let mut waited = 0;
        loop {
            let arrival = trace.get(next).map(|t| t.arrival);
            match busy {
                Some((done, i)) if arrival.is_none_or(|a| done <= a) => {
                    fq.completed(&pkt(i, &trace[i])).unwrap();
                    busy = None;
                    if let Some(x) = fq.dequeue(Instant::from_nanos(done)).unwrap() {
                        let j = x.packet.id as usize;
                        assert_eq!(trace[j].dispatch, done, "{d:?}: packet {j}");
                        busy = Some((done + cost(&trace[j]), j));
                        waited += 1;
                    }
                }
                _ => {
                    let Some(a) = arrival else { break };
                    fq.enqueue(Instant::from_nanos(a), pkt(next, &trace[next])).unwrap();
                    next += 1;
                    if busy.is_none() {
                        let x = fq.dequeue(Instant::from_nanos(a)).unwrap().unwrap();
                        let j = x.packet.id as usize;
                        assert_eq!(trace[j].dispatch, a, "{d:?}: packet {j}");
                        busy = Some((a + cost(&trace[j]), j));
                    }
                }
            }
        }
        assert!(waited > 10_000, "{d:?}: the processor was a bottleneck ({waited} packets waited)");
    }
}
