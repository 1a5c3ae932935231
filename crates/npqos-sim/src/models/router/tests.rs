//! The router's tests: scenario keys, determinism, conservation under stress (a property test),
//! and degenerate equivalence: with every other stage transparent, a stage gives what its
//! stand-alone reference gives on the same packets.

use super::driver::run_traced;
use super::scenario::{run_scenario, RouterSpec};
use super::*;
use crate::results::RunResult;
use crate::scenario::testing::{assert_names, assert_round_trips, example, parse};
use npqos_core::alloc::Policy;
use npqos_core::classify::Rule;
use npqos_core::flowmap::DqsConfig;
use npqos_core::flowmap::HashKind;
use npqos_core::queues::timing::Subsystem;
use npqos_core::Instant;
use npqos_core::Rate;
use proptest::prelude::*;
use rand::Rng;
use std::sync::atomic::AtomicBool;

fn spec(text: &str) -> RouterSpec {
    let sc = parse(text).unwrap();
    sc.spec_as::<RouterSpec>().unwrap_or_else(|| panic!("not a router scenario: {:?}", sc.spec)).clone()
}

/// Defaults; the examples and resolved scenarios parse back to themselves.
#[test]
fn defaults_and_round_trip() {
    let r = spec("model = \"router\"\n[[services]]\nname = \"all\"\n");
    assert_eq!(r.params.processing.processors, 16);
    assert_eq!(r.params.ingress, IngressKind::Dqs);
    // The flow table keys' one set of defaults (the dqs model's and live's too).
    let t = &r.params.table;
    assert_eq!((t.slots, t.queues, t.blocks, t.block_size), (256, 65_536, 1 << 20, 64));
    assert_eq!(t.hash, HashKind::H3 { seed: 0 });
    assert_eq!(r.params.qmem.subsystem, Some(Subsystem::Qc));
    assert_eq!(r.params.services[0].guarantee, 1.0);
    assert_round_trips([
        example("router-synthetic"),
        "model = \"router\"\n[ingress]\nkind = \"hashed\"\nqueues = 64\n[processing]\npolicy = \"quantum\"\nquantum = \"1ms\"\nscheduler = \"fcfs\"\n[queue_memory]\nsubsystem = \"ideal\"\n[shaping]\nshaper = \"periodic\"\nperiod = \"100us\"\nconformance = \"wait-for-tokens\"\n[[services]]\nname = \"a\"\nprotocols = [\"udp\"]\nrate = \"1Mbps\"\nrate_per = \"class\"\n[[services]]\nname = \"b\"\n".into(),
        "model = \"router\"\n[processing]\npolicy = \"lap\"\nscheduler = \"drr\"\n[shaping]\nadaptive = true\ngamma = 4.0\nalpha_min = \"500B\"\n".into(),
    ]);
    let r = spec("model = \"router\"\n[shaping]\nadaptive = true\ninterval = \"100ms\"\n");
    let ShaperKind::Event { adaptive: Some(a), .. } = r.params.shaping.kind else { panic!("{:?}", r.params.shaping) };
    assert_eq!((a.gamma, a.delta_th, a.alpha_min_bytes, a.interval), (2.0, 3, 1500, Duration::from_millis(100)));
    assert_eq!(
        spec("model = \"router\"\n[processing]\nscheduler = \"drr\"\n").params.processing.scheduler,
        Scheduler::Drr
    );
}

/// Two services of one name would write two `offered_packets.<name>` rows to scalars.csv and
/// one to summary.json, and the per-service counts would no longer add up: refused, naming the
/// second one's key, as the everest model does.
#[test]
fn two_services_of_one_name_are_refused() {
    let text = "model = \"router\"\n[[services]]\nname = \"web\"\nports = [80]\n[[services]]\nname = \"web\"\n";
    let e = parse(text).expect_err("two services named web");
    assert!(e.contains("key `services[1].name` = \"web\": expected a name no other service has"), "{e}");
    assert!(!e.contains("services[0].name"), "{e}");
}

/// Every problem is reported with its key path.
#[test]
fn problems_name_their_keys() {
    assert_names(
        "model = \"router\"\n[ingress]\nkind = \"hashed\"\nslots = 0\nblock_size = \"1B\"\n[processing]\nscheduler = \"lifo\"\nquantum = \"0ms\"\n[shaping]\nshaper = \"periodic\"\nalpha = \"1KB\"\ncap = \"500B\"\ngamma = 1.0\n[traffic]\nmix = [{ protocol = \"sctp\", port = 1 }]\n[[services]]\nname = \"a b\"\n[[services]]\nname = \"c\"\ndirection = \"inbound\"\nrate = \"0bps\"\n",
        &[
            "ingress.slots",
            "ingress.block_size",
            "processing.scheduler",
            "processing.quantum",
            "shaping.alpha",
            "shaping.gamma",
            "traffic.mix[0].protocol",
            "services[0].name",
            "services[0]",
            "services[1].direction",
            "services[1].rate",
        ],
    );
    assert_names("model = \"router\"\nservices = 3\n", &["services"]);
    assert_names("model = \"router\"\n[link]\nahead = 0\n", &["link.ahead"]);
    assert_names(
        "model = \"router\"\n[stats]\nflows = -1\nheavy_flows = \"many\"\nheavy = 3\n",
        &["stats.flows", "stats.heavy_flows", "stats.heavy"],
    );
    // One key swaps a stage: the other alternative's keys are ignored.
    let ex = example("router-synthetic");
    let swapped =
        spec(&ex.replace("kind = \"dqs\"", "kind = \"hashed\"").replace("shaper = \"event\"", "shaper = \"periodic\""));
    assert_eq!(swapped.params.ingress, IngressKind::Hashed);
    assert_eq!(swapped.params.table.queues, 4096);
    assert!(matches!(swapped.params.shaping.kind, ShaperKind::Periodic { .. }));
    assert_eq!(spec("model = \"router\"\n").params.services[0].name, "all");
}

/// One service of constant-cost packets: its params with every stage but `keep` transparent
/// (ideal queue memory, no shaping, ample buffers, many processors, a fast link).
pub(super) fn transparent(processors: u32, cost_ns: f64, link: Rate) -> RouterParams {
    RouterParams {
        services: vec![ServiceParams {
            name: "all".into(),
            rule: Default::default(),
            tolerance: Duration::from_secs(1),
            cost_alpha_ns: cost_ns,
            cost_beta_ns: 0.0,
            variation: 0.0,
            guarantee: 1.0,
            rate: None,
            per_flow: false,
        }],
        inside: Vec::new(),
        ingress: IngressKind::PerFlow,
        table: DqsConfig { queues: 1 << 16, blocks: 1 << 24, block_size: 64, ..Default::default() },
        processing: ProcessingParams {
            processors,
            policy: Allocation::Policy(Policy::Static),
            t_sw: Duration::from_micros(1),
            delta: Duration::from_micros(1),
            scheduler: Scheduler::Fcfs,
            late_drop: false,
        },
        qmem: QmemParams::ideal(),
        shaping: ShapingParams {
            kind: ShaperKind::None,
            conformance: Conformance::SendThenPay,
            cap_bytes: 16_000,
            flow_queues: 1024,
            buffer_bytes: u64::MAX / 2,
        },
        link_rate: link,
        quantum: 1536,
        link_ahead: 1,
        duration: Duration::from_millis(50),
        drain: Duration::from_secs(1),
        sample_every: Duration::from_millis(10),
        stats: StatsParams::default(),
    }
}

/// [`transparent`] on 4 processors and a 10 Gbps link with its one service shaped per flow to
/// 100 Mbps (the refusal tests' router).
pub(super) fn per_flow_shaped() -> RouterParams {
    let mut p = transparent(4, 0.0, Rate::gbps(10));
    p.services[0].rate = Some(Rate::from_bits_per_sec(100_000_000));
    p.services[0].per_flow = true;
    p
}

pub(super) fn synthetic(flows: u32, gap_us: u64) -> RouterTraffic {
    RouterTraffic::synthetic(
        flows,
        Duration::from_micros(gap_us),
        Duration::from_millis(50),
        vec![MixEntry { protocol: 6, port: 443, share: 1.0 }],
    )
}

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

/// A reschedule threshold above the cap is a configuration error wherever the parameters come
/// from: the scenario reader refuses it, and so does a run given such `RouterParams` directly
/// (it used to clamp alpha to the cap silently).
#[test]
fn alpha_above_the_cap_is_refused_by_the_run() {
    let mut p = transparent(4, 0.0, Rate::gbps(10));
    p.services[0].rate = Some(Rate::from_bits_per_sec(100_000_000));
    p.shaping.kind = ShaperKind::Event {
        alpha_bytes: 20_000,
        locked_bytes: 0,
        tick_shift: 0,
        adaptive: None,
        timer: npqos_core::shaper::Timer::Heap,
    };
    p.shaping.cap_bytes = 16_000;
    match run(&p, &synthetic(10, 1_000), 1, 1, None, &mut |_| {}) {
        Err(RouterError::Config(m)) => assert!(m.contains("alpha") && m.contains("cap"), "{m}"),
        other => panic!("expected a configuration error, got {:?}", other.map(|r| r.scalars.len())),
    }
    assert_names("model = \"router\"\n[shaping]\nalpha = \"20000B\"\ncap = \"16000B\"\n", &["shaping.alpha"]);
}

/// `shaping_state_bytes` is what the shaper holds (asked of it, not a per-queue constant): with
/// one rate, 33 B per output queue (flag, hot and cold records) and one 16 B profile, plus 8 B
/// per heap node at the peak.
#[test]
fn shaping_state_is_the_shapers_own() {
    let mut p = transparent(4, 0.0, Rate::gbps(10));
    p.services[0].rate = Some(Rate::from_bits_per_sec(1_000_000));
    p.services[0].per_flow = true;
    p.shaping.kind = ShaperKind::Event {
        alpha_bytes: 1500,
        locked_bytes: 0,
        tick_shift: 0,
        adaptive: None,
        timer: npqos_core::shaper::Timer::Heap,
    };
    let r = run(&p, &synthetic(200, 1_000), 1, 1, None, &mut |_| {}).unwrap();
    let get = |n: &str| r.scalars.iter().find(|s| s.name == n).unwrap_or_else(|| panic!("{n}")).value;
    let queues = 1.0 + p.shaping.flow_queues as f64;
    let heap_nodes = get("shaper_heap_max_per_core") * 4.0;
    assert!(heap_nodes > 0.0, "some flows were throttled");
    assert_eq!(get("shaping_state_bytes"), queues * 33.0 + 16.0 + heap_nodes * 8.0);
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

#[allow(clippy::too_many_arguments)]
fn stress_params(
    blocks: u32,
    procs: u32,
    cost_us: f64,
    rate_kbps: Option<u64>,
    guarantee0: f64,
    dqs_queues: u32,
    shaper: u8,
    qmem: u8,
) -> RouterParams {
    let mut p = transparent(procs, cost_us * 1e3, Rate::from_bits_per_sec(200_000_000));
    p.ingress = IngressKind::Dqs;
    p.table = DqsConfig { slots: 16, queues: dqs_queues, blocks, ..p.table };
    p.processing.scheduler = Scheduler::Fair(npqos_core::sched::fq::Discipline::Efq);
    p.processing.policy = Allocation::Policy(if guarantee0 == 0.0 { Policy::Static } else { Policy::Everest });
    p.processing.late_drop = cost_us > 5.0;
    p.services[0].rule.protocols = vec![17];
    p.services[0].guarantee = guarantee0;
    p.services[0].rate = rate_kbps.map(|k| Rate::from_bits_per_sec(k * 1000));
    p.services.push(ServiceParams {
        name: "rest".into(),
        rule: Rule::default(),
        guarantee: 1.0 - guarantee0,
        rate: rate_kbps.map(|k| Rate::from_bits_per_sec(k * 2000)),
        per_flow: true,
        ..p.services[0].clone()
    });
    p.shaping.kind = match shaper {
        0 => ShaperKind::None,
        1 => ShaperKind::Periodic { period: Duration::from_micros(200) },
        _ => ShaperKind::Event {
            alpha_bytes: 500,
            locked_bytes: 0,
            tick_shift: 6,
            adaptive: None,
            timer: npqos_core::shaper::Timer::Heap,
        },
    };
    p.shaping.conformance = if shaper == 3 { Conformance::WaitForTokens } else { Conformance::SendThenPay };
    p.shaping.cap_bytes = 1_000;
    p.shaping.buffer_bytes = 200_000;
    // As few per-flow buckets as dqs queues: flows outnumber them, and the bucket rule reuses,
    // evicts and (with every bucket held) shares.
    p.shaping.flow_queues = dqs_queues;
    p.qmem.subsystem = [None, Some(Subsystem::Nc), Some(Subsystem::Qc), Some(Subsystem::Dc)][qmem as usize % 4];
    p.services[0].tolerance = Duration::from_micros(200);
    p.services[1].tolerance = Duration::from_micros(200);
    p.duration = Duration::from_millis(20);
    p.drain = Duration::from_millis(5);
    p
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, rng_seed: proptest::test_runner::RngSeed::Fixed(0x726f7574), ..ProptestConfig::default() })]

    /// Conservation under stress: random small routers (a starved block buffer, too few dqs
    /// queues, overloaded or unallocated processors, late drops, shaped rates far below the
    /// offered rate, a small output buffer, every shaper and conformance and queue memory):
    /// the run succeeds (it checks offered = delivered + dropped + in flight itself), every
    /// packet of the stream is offered, and the drops by reason add up.
    #[test]
    fn conservation_under_stress(
        blocks in 4u32..2_000,
        procs in 1u32..4,
        cost_us in 0.5f64..20.0,
        rate_kbps in prop::option::of(100u64..50_000),
        g0 in prop_oneof![Just(0.0), Just(0.5)],
        dqs_queues in 1u32..64,
        shaper in 0u8..4,
        qmem in 0u8..4,
        seed in 0u64..1_000,
    ) {
        let p = stress_params(blocks, procs, cost_us, rate_kbps, g0, dqs_queues, shaper, qmem);
        let tr = RouterTraffic::synthetic(300, Duration::from_micros(500), p.duration, vec![
            MixEntry { protocol: 17, port: 53, share: 0.5 },
            MixEntry { protocol: 6, port: 80, share: 0.5 },
        ]);
        // Odd seeds make the arrivals on a second thread.
        let r = run(&p, &tr, seed, 1 + (seed % 2) as usize, None, &mut |_| {}).unwrap();
        let RouterTraffic::Synthetic { flows, .. } = &tr else { unreachable!() };
        let n = flows.generator(crate::rng::RngStreams::new(seed).stream("router.flows", 0)).count() as f64;
        let g = |k: &str| r.get(k).unwrap();
        prop_assert_eq!(g("offered_packets"), n);
        prop_assert_eq!(g("offered_packets"), g("delivered_packets") + g("dropped_packets") + g("in_flight_packets"));
        let by_reason: f64 = r.drop_reasons.iter().map(|d| g(&format!("dropped_{d}"))).sum();
        prop_assert_eq!(by_reason, g("dropped_packets"));
        let by_service = g("dropped_packets.all") + g("dropped_packets.rest") + g("dropped_unclassified");
        prop_assert_eq!(by_service, g("dropped_packets"));
    }
}

/// Stress reaches every drop reason but `unclassified` (every packet has a service), and
/// leaves packets in flight when a service has no processor.
#[test]
fn stress_reaches_the_drop_reasons() {
    let go = |p: RouterParams| {
        let tr = RouterTraffic::synthetic(
            300,
            Duration::from_micros(500),
            p.duration,
            vec![MixEntry { protocol: 17, port: 53, share: 0.5 }, MixEntry { protocol: 6, port: 80, share: 0.5 }],
        );
        run(&p, &tr, 1, 1, None, &mut |_| {}).unwrap()
    };
    let positive = |r: &RunResult, k: &str| assert!(r.get(k).unwrap() > 0.0, "{k}: {:?}", r.scalars);
    // Static with G = 0: 'all' never gets a processor; its packets stay, fill the 40 blocks and
    // starve 'rest' of buffer; 4 dqs queues for hundreds of flows.
    let r = go(stress_params(40, 1, 10.0, Some(1_000), 0.0, 4, 2, 2));
    for k in ["dropped_ingress_buffer_full", "dropped_ingress_no_queue", "in_flight_packets"] {
        positive(&r, k);
    }
    // One processor at 10 us a packet against ~600,000 packets/s: late, and dropped so.
    positive(&go(stress_params(2_000, 1, 10.0, Some(1_000), 0.5, 64, 2, 2)), "dropped_late");
    // Wait-for-tokens with a 1,000 B cap: IMIX's 1,500 B packets can never conform.
    positive(&go(stress_params(1 << 20, 4, 0.5, Some(1_000), 0.5, 64, 3, 0)), "dropped_exceeds_bucket");
    // Shaped to 1-2 Mbps with 20 kB of output buffer.
    let mut p = stress_params(1 << 20, 4, 0.5, Some(1_000), 0.5, 64, 2, 0);
    p.shaping.buffer_bytes = 20_000;
    positive(&go(p), "dropped_egress_buffer_full");
}

/// Same seed, same result, on one thread or with the arrivals made on a second; another
/// seed, another result.
#[test]
fn runs_are_deterministic() {
    let sc = parse(&example("router-synthetic").replace("duration = \"500ms\"", "duration = \"50ms\"")).unwrap();
    let a = run_scenario(&sc, 1, 1, None, &mut |_| {}).unwrap();
    let b = run_scenario(&sc, 1, 2, None, &mut |_| {}).unwrap();
    let c = run_scenario(&sc, 2, 1, None, &mut |_| {}).unwrap();
    assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
    assert_ne!(a.get("e2e_p99"), c.get("e2e_p99"));
    assert!(a.get("delivered_packets").unwrap() > 40_000.0);
}

/// A two-thread run stopped at once (Ctrl-C before the first event) returns: the helper
/// thread making arrivals ends when the pipeline stops taking them.
#[test]
fn an_interrupted_two_thread_run_returns() {
    let sc = parse(&example("router-synthetic")).unwrap();
    let flag = Arc::new(AtomicBool::new(true));
    let r = run_scenario(&sc, 1, 2, Some(flag), &mut |_| {}).unwrap();
    assert!(r.get("offered_packets").unwrap() < 1_000.0);
}

/// The flow and class counters add up to the run's totals, whatever the table's bound: the
/// exact rows and the row of the flows past them together hold every packet offered, sent and
/// dropped (by reason), and so do the classes; the table and the sketch keep to their sizes;
/// the same on one thread and two.
#[test]
fn flow_and_class_counters_add_up() {
    let text = example("router-synthetic").replace("duration = \"500ms\"", "duration = \"50ms\"");
    assert!(text.contains("duration = \"50ms\""));
    for (exact, heavy) in [(0, 0), (40, 8), (100_000, 16)] {
        let text = format!("{text}\n[stats]\nflows = {exact}\nheavy_flows = {heavy}\n");
        let sc = parse(&text).unwrap();
        let one = run_scenario(&sc, 3, 1, None, &mut |_| {}).unwrap();
        let two = run_scenario(&sc, 3, 2, None, &mut |_| {}).unwrap();
        assert_eq!(one.flows, two.flows, "same rows on one thread and two");
        assert_eq!(one.classes, two.classes);
        let r = one;
        let total = |rows: &mut dyn Iterator<Item = &crate::results::CountRow>| {
            rows.fold([0u64; 4], |a, c| {
                [a[0] + c.offered_packets, a[1] + c.sent_packets, a[2] + c.dropped_packets, a[3] + c.overlimits]
            })
        };
        let flows = total(&mut r.flows.iter().filter(|f| f.kind != "heavy").map(|f| &f.counts));
        let classes = total(&mut r.classes.iter().map(|c| &c.counts));
        let want =
            [r.get("offered_packets").unwrap(), r.get("delivered_packets").unwrap(), r.get("dropped_packets").unwrap()];
        assert!(want[0] > 1000.0, "{want:?}");
        assert_eq!([flows[0] as f64, flows[1] as f64, flows[2] as f64], want, "flows, bound {exact}");
        // Classes hold the classified packets: all of them here.
        assert_eq!(r.get("dropped_unclassified"), Some(0.0));
        assert_eq!(&classes[..3], &flows[..3], "classes, bound {exact}");
        assert_eq!(classes[3], flows[3], "overlimits");
        let n = |k: &str| r.flows.iter().filter(|f| f.kind == k).count();
        // More than 40 flows and fewer than 100,000: the table fills up to its bound, or holds
        // every flow and then has no row of flows past it.
        let filled = exact < 100_000;
        assert_eq!(n("exact") == exact as usize, filled, "{} exact rows, bound {exact}", n("exact"));
        assert_eq!(n("other"), usize::from(filled));
        assert!(n("heavy") <= heavy as usize && (n("heavy") > 0) == (filled && heavy > 0));
        for f in r.flows.iter().filter(|f| f.kind == "heavy") {
            assert!(f.counts.offered_bytes >= f.offered_bytes_error);
        }
        let reasons: Vec<&str> = r.drop_reasons.iter().map(|s| s.as_str()).collect();
        // The router's reasons (no queue limit here: no `ingress_queue_full`).
        assert_eq!(reasons, super::pipeline::DROPS[..6]);
    }
}

/// Flows beyond `shaping.flow_queues`: the pipeline's bucket rule lends the buckets of idle
/// flows (full again: reused; still filling: evicted) and shares one by hash only when every
/// bucket is held; the buckets' ports add up (the run checks them); the same on one thread
/// and two.
#[test]
fn flows_beyond_the_buckets_take_idle_ones() {
    let mut p = transparent(4, 0.0, Rate::gbps(10));
    p.services[0].rate = Some(Rate::from_bits_per_sec(20_000_000));
    p.services[0].per_flow = true;
    p.shaping.kind = ShaperKind::Event {
        alpha_bytes: 1500,
        locked_bytes: 0,
        tick_shift: 6,
        adaptive: None,
        timer: npqos_core::shaper::Timer::Heap,
    };
    p.shaping.flow_queues = 16;
    // 200 flows in progress, each at about 2.4 Mbps: most of the time a flow has no packet
    // in the router and its bucket is parked.
    let tr = synthetic(200, 2_000);
    let one = run(&p, &tr, 7, 1, None, &mut |_| {}).unwrap();
    let two = run(&p, &tr, 7, 2, None, &mut |_| {}).unwrap();
    assert_eq!(serde_json::to_string(&one).unwrap(), serde_json::to_string(&two).unwrap());
    let g = |k: &str| one.get(k).unwrap_or_else(|| panic!("{k}"));
    assert!(g("flow_buckets_reused") > 0.0 && g("flow_buckets_evicted") > 0.0, "{:?}", one.scalars);
    assert!(g("delivered_packets") > 1_000.0);
    // With as many buckets as flows, no bucket changes hands and none is shared.
    p.shaping.flow_queues = 100_000;
    let r = run(&p, &tr, 7, 1, None, &mut |_| {}).unwrap();
    for k in ["flow_buckets_reused", "flow_buckets_evicted", "flow_queue_shared_packets"] {
        assert_eq!(r.get(k), Some(0.0), "{k}");
    }
}
