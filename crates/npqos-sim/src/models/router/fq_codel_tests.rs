//! FQ-CoDel at the router's ingress (docs/codel.md, "fq_codel"): one processor is the
//! bottleneck (its cost is a 10 Mbps link's time per byte), offered about 1.2 times what it
//! can serve; FQ-CoDel against hashed queues with tail drop, its overflow, and its keys.

use super::scenario::run_scenario;
use crate::results::RunResult;
use crate::scenario::testing::parse;

/// Unresponsive synthetic UDP (100 flows of IMIX, about 12 Mbps) into one processor that takes
/// 800 ns per byte (a 10 Mbps link's time) and out over a 10 Gbps link; `ingress` adds keys.
fn run(ingress: &str, service: &str) -> RunResult {
    let text = format!(
        "model = \"router\"\n[run]\nseed = 1\nduration = \"3s\"\n\
         [traffic]\nsource = \"synthetic\"\nflows = 100\nmean_gap = \"34ms\"\nmix = [{{ protocol = \"udp\", port = 53, share = 1.0 }}]\n\
         [ingress]\n{ingress}\n\
         [processing]\nprocessors = 1\npolicy = \"static\"\nscheduler = \"drr\"\n[queue_memory]\nsubsystem = \"ideal\"\n\
         [shaping]\nshaper = \"none\"\n[link]\nrate = \"10Gbps\"\n\
         [[services]]\nname = \"all\"\ncost_alpha = \"0ns\"\ncost_beta = \"800ns\"\ntolerance = \"10s\"\n{service}\n"
    );
    run_scenario(&parse(&text).unwrap(), 1, 1, None, &mut |_| {}).unwrap()
}

fn g(r: &RunResult, k: &str) -> f64 {
    r.get(k).unwrap_or(f64::NAN)
}

/// Every packet accounted (the run also checks conservation at every element's ports).
fn accounted(r: &RunResult) {
    let (o, d, x, f) =
        (g(r, "offered_packets"), g(r, "delivered_packets"), g(r, "dropped_packets"), g(r, "in_flight_packets"));
    assert_eq!(o, d + x + f, "offered = delivered + dropped + in flight");
}

#[test]
fn fq_codel_drops_at_the_heads_and_bounds_the_backlog_tail_drop_lets_grow() {
    let tail = run("kind = \"hashed\"\nqueues = 1024", "");
    let fq = run("kind = \"fq-codel\"", "");
    let show = |r: &RunResult| {
        format!(
            "e2e p50 {:.0} us, p99 {:.0} us, in flight {}",
            g(r, "e2e_p50"),
            g(r, "e2e_p99"),
            g(r, "in_flight_packets")
        )
    };
    println!("hashed, tail drop: {}; fq-codel: {}, {} CoDel drops", show(&tail), show(&fq), g(&fq, "dropped_codel"));
    assert_eq!(tail.get("dropped_codel"), None, "no codel reason with hashed queues");
    assert!(g(&fq, "dropped_codel") > 100.0);
    assert_eq!(g(&fq, "dropped_codel"), g(&fq, "fq_codel_dropped"));
    // Every one of the 100 flows offers more than its fair share, so every queue is backlogged
    // and a head waits about a round of the others (100 x 1,514 B at 10 Mbps, about 120 ms):
    // the sojourn time cannot fall to the 5 ms target, CoDel keeps each queue at a few packets
    // (RFC 8290 section 5.1), while tail drop lets the backlog grow for the whole run.
    assert!(g(&fq, "in_flight_packets") * 2.0 < g(&tail, "in_flight_packets"));
    assert!(g(&fq, "e2e_p99") * 2.0 < g(&tail, "e2e_p99"));
    accounted(&tail);
    accounted(&fq);
}

#[test]
fn an_ecn_capable_service_is_marked_by_fq_codel() {
    let marked = run("kind = \"fq-codel\"", "ecn = true");
    let dropped = run("kind = \"fq-codel\"\necn = false", "ecn = true");
    let (m, d) = (g(&marked, "ecn_marked"), g(&dropped, "dropped_codel"));
    println!("ECN-capable service under fq-codel: {m} marked (ecn on, the default), {d} dropped with ecn off");
    assert!(m > 100.0);
    assert_eq!(g(&marked, "dropped_codel"), 0.0);
    assert_eq!(g(&dropped, "ecn_marked"), 0.0);
}

#[test]
fn a_full_buffer_drops_from_the_fattest_queue() {
    // 256 blocks of 64 B (16 KB): the backlog fills it; each arrival that does not fit takes
    // a batch from the head of the fattest queue.
    let fq = run("kind = \"fq-codel\"\nblocks = 256\ncodel_target = \"50ms\"\ncodel_interval = \"500ms\"", "");
    println!(
        "16 KB buffer: {} dropped as buffer full, {} by CoDel, {} delivered",
        g(&fq, "dropped_ingress_buffer_full"),
        g(&fq, "dropped_codel"),
        g(&fq, "delivered_packets")
    );
    assert!(g(&fq, "dropped_ingress_buffer_full") > 100.0);
    assert!(g(&fq, "delivered_packets") > 1000.0);
    accounted(&fq);
}

#[test]
fn fq_codel_keys_are_checked() {
    let problems = |text: &str| match parse(&format!("model = \"router\"\n{text}\n")) {
        Ok(_) => String::new(),
        Err(e) => e.to_string(),
    };
    let p = problems("[ingress]\nkind = \"dqs\"\ncodel_target = \"10ms\"\ndrop_batch = 8");
    assert!(p.contains("ingress.codel_target") && p.contains("ingress.drop_batch") && p.contains("fq-codel"), "{p}");
    let p = problems("[ingress]\nkind = \"fq-codel\"\ncodel_target = \"200ms\"");
    assert!(p.contains("ingress.codel_target") && p.contains("less than codel_interval"), "{p}");
    assert!(problems("[ingress]\nkind = \"fq-codel\"\nquantum = \"10B\"").contains("ingress.quantum"));
    assert!(problems("[ingress]\nkind = \"fq-codel\"\ndrop_batch = 0").contains("ingress.drop_batch"));
    assert!(problems("[ingress]\nkind = \"fq-codel\"\ncodel_interval = \"0ms\"").contains("ingress.codel_interval"));
    assert!(problems("[ingress]\nkind = \"fq-codel\"\necn = \"yes\"").contains("ingress.ecn"));
    assert!(problems("[ingress]\nkind = \"fq_codel\"").contains("fq-codel"), "the names are listed");
    assert_eq!(
        problems("[ingress]\nkind = \"fq-codel\"\ncodel_target = \"2ms\"\ncodel_interval = \"50ms\"\necn = false\nquantum = \"3028B\"\ndrop_batch = 16"),
        ""
    );
    // 1,024 queues per service unless given, and the keys survive the resolved file.
    let sc = parse("model = \"router\"\n[ingress]\nkind = \"fq-codel\"\ndrop_batch = 16\n").unwrap();
    let spec = sc.spec_as::<super::scenario::RouterSpec>().unwrap();
    assert_eq!((spec.params.table.queues, spec.params.fq_codel.drop_batch), (1024, 16));
    let again = parse(&toml::to_string(&sc.to_toml()).unwrap()).unwrap();
    assert_eq!(again.spec_as::<super::scenario::RouterSpec>().unwrap().params, spec.params);
}

#[test]
fn fq_codel_needs_processors_and_is_not_lap() {
    let err = |text: &str| {
        let sc =
            parse(&format!("model = \"router\"\n[run]\nduration = \"10ms\"\n[ingress]\nkind = \"fq-codel\"\n{text}\n"));
        match sc {
            Err(e) => e.to_string(),
            Ok(sc) => run_scenario(&sc, 1, 1, None, &mut |_| {}).err().map(|e| e.to_string()).unwrap_or_default(),
        }
    };
    let none = err("[processing]\npolicy = \"none\"\n[queue_memory]\nsubsystem = \"ideal\"");
    assert!(none.contains("fq-codel") && none.contains("processors"), "{none}");
    assert!(err("[processing]\npolicy = \"lap\"").contains("lap"));
}
