//! Scenario tests: small deterministic runs whose results table is checked as a snapshot.
//! A change in any number is a change in behaviour and must be reviewed (`cargo insta review`).

use npqos_sim::models::link;
use npqos_sim::scenario::Scenario;
use std::fmt::Write;
use std::path::Path;

/// Runs `text` with `seed` and renders the scalars as a fixed-precision table.
fn check(text: &str, seed: u64) -> String {
    let sc = Scenario::parse(text, "snapshot", Path::new(".")).expect("valid scenario");
    let r = link::run(&sc, seed, 1, None, &mut |_| {}).expect("runs");
    let mut t =
        format!("complete={} stop={} events={} sim_time_ns={}\n", r.complete, r.stop_reason, r.events, r.sim_time_ns);
    for s in &r.scalars {
        let _ = writeln!(t, "{:<22} {:>16.6} {}", s.name, s.value, s.unit);
    }
    t
}

#[test]
fn drr_imix_exponential_8_queues() {
    insta::assert_snapshot!(check(
        "[run]\nduration = \"10ms\"\n[link]\nrate = \"1Gbps\"\n[queues]\ncount = 8\nbuffer = \"16KiB\"\n[traffic]\noverload = 1.2\n",
        42
    ));
}

#[test]
fn uniform_sizes_onoff_arrivals_64_queues() {
    insta::assert_snapshot!(check(
        "[run]\nduration = \"10ms\"\n[link]\nrate = \"10Gbps\"\nquantum = \"3000B\"\n[queues]\ncount = 64\n[traffic]\noverload = 0.7\nsizes = \"uniform\"\nmin_size = \"40B\"\nmax_size = \"1500B\"\narrivals = \"onoff\"\non_mean = \"500us\"\noff_mean = \"1ms\"\npareto_shape = 1.4\n",
        7
    ));
}
