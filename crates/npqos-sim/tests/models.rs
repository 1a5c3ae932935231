//! One snapshot per scenario model: a small scenario of each model, run once, its scalars
//! rendered as a fixed-precision table and checked with insta. A change in any number of any
//! model shows in review (`cargo insta review`); the link model has more in `scenarios.rs`.

use npqos_sim::results::RunResult;
use npqos_sim::scenario::Scenario;
use std::fmt::Write;
use std::path::Path;

/// The text of `scenarios/<name>.toml` with `[run]` keys replaced by `run` (a shorter run).
fn example(name: &str, run: &[(&str, &str)]) -> Scenario {
    let path = format!("{}/../../scenarios/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut table: toml::Table = toml::from_str(&text).expect("an example parses");
    for (k, v) in run {
        npqos_sim::scenario::set_key(&mut table, k, v).expect("a key path");
    }
    Scenario::from_table(&table, &path, Path::new(".")).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `sc` once with its seed on one thread through the model it names.
fn run(sc: &Scenario) -> RunResult {
    sc.run(sc.seed, 1, None, &mut |_| {}).unwrap_or_else(|e| panic!("{}: {e}", sc.model()))
}

/// Every model of the list has a snapshot here.
#[test]
fn every_model_has_a_snapshot() {
    let this = include_str!("models.rs");
    for m in npqos_sim::models::MODELS {
        let name = m.name().replace('-', "_");
        assert!(this.contains(&format!("fn {name}_")), "no snapshot test for model {:?}", m.name());
    }
}

/// The model's name, the run's end and every scalar with its unit.
fn table(sc: &Scenario) -> String {
    let r = run(sc);
    let mut t = format!(
        "model={} complete={} stop={} events={} sim_time_ns={}\n",
        sc.model(),
        r.complete,
        r.stop_reason,
        r.events,
        r.sim_time_ns
    );
    for s in &r.scalars {
        let _ = writeln!(t, "{:<40} {:>20.6} {}", s.name, s.value, s.unit);
    }
    t
}

#[test]
fn link_demo() {
    insta::assert_snapshot!(table(&example("demo", &[("run.duration", "\"20ms\"")])));
}

#[test]
fn kim_small() {
    insta::assert_snapshot!(table(&example(
        "kim-small",
        &[("run.duration", "\"200ms\""), ("run.warmup", "\"50ms\""), ("queues.count", "1000")]
    )));
}

#[test]
fn dqs_small() {
    insta::assert_snapshot!(table(&example("dqs-small", &[("run.duration", "\"100ms\"")])));
}

#[test]
fn everest_small() {
    insta::assert_snapshot!(table(&example("everest-small", &[("run.duration", "\"100ms\"")])));
}

#[test]
fn fq_small() {
    insta::assert_snapshot!(table(&example("fq-small", &[("run.duration", "\"50ms\"")])));
}

#[test]
fn lap_small() {
    insta::assert_snapshot!(table(&example("lap-small", &[("traffic.packets", "5000")])));
}

#[test]
fn efq_lap_small() {
    insta::assert_snapshot!(table(&example(
        "efq-lap-small",
        &[("run.duration", "\"500ms\""), ("traffic.burst_every", "\"200ms\""), ("traffic.burst_length", "\"50ms\"")]
    )));
}

#[test]
fn qcache_small() {
    insta::assert_snapshot!(table(&example(
        "qcache-small",
        &[("workload.operations", "5000"), ("workload.warmup_operations", "500")]
    )));
}

#[test]
fn router_synthetic() {
    insta::assert_snapshot!(table(&example(
        "router-synthetic",
        &[("run.duration", "\"50ms\""), ("traffic.flows", "2000")]
    )));
}
