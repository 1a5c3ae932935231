//! The router's tests: scenario keys, determinism, conservation under stress (a property test),
//! the refusals and the counters; the element tests (each element alone gives what its
//! stand-alone reference gives) are in `element_tests.rs`.

use super::scenario::{run_scenario, RouterSpec};
use super::*;
use crate::results::RunResult;
use crate::scenario::testing::{assert_names, assert_round_trips, example, parse};
use npqos_core::alloc::Policy;
use npqos_core::classify::Rule;
use npqos_core::flowmap::DqsConfig;
use npqos_core::flowmap::HashKind;
use npqos_core::queues::timing::Subsystem;
use npqos_core::Rate;
use proptest::prelude::*;
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
    assert_names(
        "model = \"router\"\n[[services]]\nname = \"a\"\nsrc_prefixes = [\"198.18.0.0/33\"]\ndst_prefixes = \"10.0.0.0/8\"\n",
        &["services[0].src_prefixes[0]", "services[0].dst_prefixes"],
    );
    assert_names(
        "model = \"router\"\n[[services]]\nname = \"a\"\ndscp = [64, \"xx\"]\n",
        &["services[0].dscp[0]", "services[0].dscp[1]"],
    );
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

/// A subscriber's prefixes match its packets in the router too, and are written back.
#[test]
fn prefixes_are_match_keys() {
    let text = "model = \"router\"\n[[services]]\nname = \"sub1\"\nsrc_prefixes = [\"198.18.1.0/24\", \"2001:db8:1::/48\"]\ndscp = [\"af41\", 0]\n[[services]]\nname = \"rest\"\n";
    let r = spec(text);
    let rule = &r.params.services[0].rule;
    assert_eq!(
        rule.src_prefixes.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
        ["198.18.1.0/24", "2001:db8:1::/48"]
    );
    assert!(rule.dst_prefixes.is_empty() && r.params.services[1].rule.src_prefixes.is_empty());
    assert_eq!(rule.dscp, [34, 0]);
    let c = pipeline::classifier(&r.params).unwrap();
    let k = |s: &str| npqos_core::flow::FlowKey::new(s.parse().unwrap(), "198.19.0.1".parse().unwrap(), 17, 1, 2);
    assert_eq!(c.classify(&k("198.18.1.9")).map(|s| s.0), Some(0));
    assert_eq!(c.classify(&k("198.18.2.9")).map(|s| s.0), Some(1));
    assert_round_trips([text.to_string()]);
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
            host: None,
            ecn: false,
            function: None,
        }],
        inside: Vec::new(),
        ingress: IngressKind::PerFlow,
        table: DqsConfig { queues: 1 << 16, blocks: 1 << 24, block_size: 64, ..Default::default() },
        fq_codel: Default::default(),
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
            cap_wake_ns: 0,
            flow_queues: 1024,
            buffer_bytes: u64::MAX / 2,
            overhead: 0,
            mpu: 0,
            aqm: None,
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
/// one rate, 33 B per output queue (flag, hot and cold records) and one 24 B profile (CIR, cap, alpha), plus 8 B
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
    assert_eq!(get("shaping_state_bytes"), queues * 33.0 + 24.0 + heap_nodes * 8.0);
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

/// A subscriber's rate in the router (`rate_per = "src"`): the web service's buckets per
/// source address, its hints per address on the stream's thread: the run conserves every
/// packet at every element, gives the same bytes on one thread and two, and reads back.
#[test]
fn a_subscribers_rate_runs_in_the_router() {
    let text = example("router-synthetic").replace("duration = \"500ms\"", "duration = \"50ms\"").replace(
        "rate = \"2Mbps\"                # every web flow shaped to 2 Mbps\nrate_per = \"flow\"",
        "rate = \"2Mbps\"\nrate_per = \"src\"",
    );
    assert!(text.contains("rate_per = \"src\""));
    let sc = parse(&text).unwrap();
    let r = sc.spec_as::<RouterSpec>().unwrap();
    assert_eq!(r.params.services[0].host, Some(Host::Src));
    let a = run_scenario(&sc, 1, 1, None, &mut |_| {}).unwrap();
    let b = run_scenario(&sc, 1, 2, None, &mut |_| {}).unwrap();
    assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
    assert!(a.get("delivered_packets").unwrap() > 10_000.0);
    assert_round_trips([text]);
}
