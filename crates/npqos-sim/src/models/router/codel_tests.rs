//! CoDel on the router's output queues (docs/codel.md): a service offered 1.2 times its 10 Mbps
//! link for 3 s, tail drop against CoDel, drops against ECN marks, and the keys' problems.

use super::scenario::run_scenario;
use crate::results::RunResult;
use crate::scenario::testing::parse;

/// Unresponsive synthetic UDP (100 flows of IMIX, about 12 Mbps) through 4 processors that
/// are never the bottleneck into one output queue and a 10 Mbps link; `shaping` adds keys.
fn run(shaping: &str, service: &str) -> RunResult {
    let text = format!(
        "model = \"router\"\n[run]\nseed = 1\nduration = \"3s\"\n\
         [traffic]\nsource = \"synthetic\"\nflows = 100\nmean_gap = \"34ms\"\nmix = [{{ protocol = \"udp\", port = 53, share = 1.0 }}]\n\
         [processing]\nprocessors = 4\npolicy = \"static\"\n[queue_memory]\nsubsystem = \"ideal\"\n\
         [shaping]\nshaper = \"none\"\n{shaping}\n[link]\nrate = \"10Mbps\"\n\
         [[services]]\nname = \"all\"\ncost_alpha = \"10ns\"\ncost_beta = \"0ns\"\n{service}\n"
    );
    run_scenario(&parse(&text).unwrap(), 1, 1, None, &mut |_| {}).unwrap()
}

#[test]
fn codel_drops_at_the_head_and_shortens_the_queue_tail_drop_lets_grow() {
    let tail = run("", "");
    let codel = run("aqm = \"codel\"", "");
    let g = |r: &RunResult, k: &str| r.get(k).unwrap_or(f64::NAN);
    println!(
        "tail drop: in flight at the end {}, e2e p50 {:.0} us; CoDel: {} dropped, in flight {}, e2e p50 {:.0} us",
        g(&tail, "in_flight_packets"),
        g(&tail, "e2e_p50"),
        g(&codel, "dropped_codel"),
        g(&codel, "in_flight_packets"),
        g(&codel, "e2e_p50")
    );
    assert_eq!(tail.get("dropped_codel"), None, "no codel reason without aqm");
    assert!(g(&codel, "dropped_codel") > 100.0);
    assert!(g(&codel, "in_flight_packets") < g(&tail, "in_flight_packets"));
    assert!(g(&codel, "e2e_p50") < g(&tail, "e2e_p50"));
    // Every packet accounted (the run checks conservation at every element's ports).
    let (o, d, x, f) = (
        g(&codel, "offered_packets"),
        g(&codel, "delivered_packets"),
        g(&codel, "dropped_packets"),
        g(&codel, "in_flight_packets"),
    );
    assert_eq!(o, d + x + f);
}

#[test]
fn an_ecn_capable_service_is_marked_where_it_would_be_dropped() {
    let marked = run("aqm = \"codel\"\necn = true", "ecn = true");
    let dropped = run("aqm = \"codel\"", "ecn = true");
    let (m, d) = (marked.get("ecn_marked").unwrap(), dropped.get("dropped_codel").unwrap());
    println!("ECN-capable service: {m} marked with ecn on, {d} dropped with it off");
    assert!(m > 100.0);
    assert_eq!(marked.get("dropped_codel"), Some(0.0));
    assert_eq!(dropped.get("ecn_marked"), Some(0.0));
}

#[test]
fn codel_keys_are_checked() {
    let problems = |shaping: &str| match parse(&format!("model = \"router\"\n[shaping]\n{shaping}\n")) {
        Ok(_) => String::new(),
        Err(e) => e.to_string(),
    };
    assert!(problems("codel_target = \"10ms\"").contains("shaping.codel_target"), "without aqm = codel");
    let p = problems("aqm = \"codel\"\ncodel_target = \"200ms\"");
    assert!(p.contains("shaping.codel_target") && p.contains("less than codel_interval"), "{p}");
    assert!(problems("aqm = \"red\"").contains("shaping.aqm"));
    assert_eq!(problems("aqm = \"codel\"\ncodel_target = \"2ms\"\ncodel_interval = \"50ms\"\necn = true"), "");
}
