//! Tests of the qcache simulation reproductions: each `--quick` run asserts its paper's
//! qualitative result (peaks, orders, the model against the pure cases).

use super::*;

fn thr(out: &Output, wl: &str, sub: Subsystem, threads: u32) -> f64 {
    let label = format!("{}/threads={threads}", curve(wl, sub));
    out.run_scalar(&label, "throughput").unwrap_or_else(|| panic!("{label}"))
}

fn cmp(out: &Output, metric: &str, sub: &str) -> f64 {
    out.comparisons
        .iter()
        .find(|c| c.metric == metric && c.params.get("subsystem") == Some(&json!(sub)))
        .unwrap_or_else(|| panic!("{metric} {sub}"))
        .ours
}

/// Figure 5: all subsystems saturate at the same memory bound; qc needs the fewest threads.
#[test]
fn fig5_same_peak_qc_fewest_threads() {
    let out = crate::experiments::quick_output("qcache-fig5");
    let peaks: Vec<f64> = Subsystem::ALL.iter().map(|s| cmp(out, "peak_throughput", s.label())).collect();
    let (lo, hi) = peaks.iter().fold((f64::MAX, 0.0f64), |a, &p| (a.0.min(p), a.1.max(p)));
    assert!(hi / lo < 1.03, "peaks {peaks:?}");
    assert!((lo - 200.0 / 3.0).abs() < 3.0, "memory bound {lo}");
    let q = cmp(out, "threads_to_95pct_of_peak", "qc");
    for s in ["nc", "dc", "sqc"] {
        assert!(q < cmp(out, "threads_to_95pct_of_peak", s), "qc {q} vs {s}");
    }
    for s in ["dc", "sqc", "qc"] {
        let h = out
            .run_scalar(
                &format!("{}/threads=32", curve("R", Subsystem::ALL.into_iter().find(|x| x.label() == s).unwrap())),
                "hit_rate",
            )
            .unwrap();
        assert!(h < 0.05, "{s} hit {h}");
    }
}

/// Figure 6: under SD1_30 qc is best and everyone is below R; along the weight sweep the
/// cached subsystems gain at small weights, qc keeps the gain longest, and at 100% the
/// order is qc > sqc > dc > nc.
#[test]
fn fig6_single_dominating_queue() {
    let out = crate::experiments::quick_output("qcache-fig6");
    let t = |s| thr(out, "SD1_30", s, 32);
    assert!(
        t(Subsystem::Qc) > t(Subsystem::Sqc)
            && t(Subsystem::Sqc) > t(Subsystem::Dc)
            && t(Subsystem::Dc) > t(Subsystem::Nc)
    );
    assert!(t(Subsystem::Qc) < 200.0 / 3.0, "SD1_30 below the random-traffic level");
    let keep = |s: &str| cmp(out, "largest_weight_at_or_above_R_throughput", s);
    assert!(
        keep("qc") > keep("sqc") && keep("qc") > keep("dc"),
        "qc {} sqc {} dc {}",
        keep("qc"),
        keep("sqc"),
        keep("dc")
    );
    assert!(keep("qc") >= 10.0);
    let w = |s: Subsystem, k: f64| thr(out, &format!("weight/SD1_{k}"), s, 32);
    assert!(w(Subsystem::Qc, 100.0) > w(Subsystem::Sqc, 100.0) && w(Subsystem::Sqc, 100.0) > w(Subsystem::Dc, 100.0));
    assert!(w(Subsystem::Dc, 100.0) > w(Subsystem::Nc, 100.0));
}

/// Figure 7: with 16 dominating queues, the cached subsystems beat the memory bound of
/// random traffic, qc most; qc and sqc peak with a dominating set around the cache size and
/// all fall back toward the random level at 256.
#[test]
fn fig7_dominating_set() {
    let out = crate::experiments::quick_output("qcache-fig7");
    let t = |s| thr(out, "SD16_90", s, 32);
    assert!(t(Subsystem::Qc) > 1.5 * 200.0 / 3.0, "qc {}", t(Subsystem::Qc));
    assert!(
        t(Subsystem::Qc) > t(Subsystem::Sqc)
            && t(Subsystem::Sqc) > t(Subsystem::Dc)
            && t(Subsystem::Dc) > t(Subsystem::Nc)
    );
    let at_peak = |s: &str| cmp(out, "dominating_set_size_at_peak", s);
    assert!((16.0..=64.0).contains(&at_peak("qc")), "qc peak at {}", at_peak("qc"));
    assert!(at_peak("dc") >= at_peak("qc"), "dc {} qc {}", at_peak("dc"), at_peak("qc"));
    let s256 = thr(out, "set/SD256_90", Subsystem::Qc, 32);
    assert!(s256 < 0.75 * t(Subsystem::Qc), "qc at 256 {s256}");
}

/// Figure 8: L1.1 has more locality than L1.01: higher hit rates, and a higher qc peak.
#[test]
fn fig8_narrow_beats_wide() {
    let out = crate::experiments::quick_output("qcache-fig8");
    for s in [Subsystem::Dc, Subsystem::Sqc, Subsystem::Qc] {
        let h = |wl: &str| out.run_scalar(&format!("{}/threads=32", curve(wl, s)), "hit_rate").unwrap();
        assert!(h("L1.1") > h("L1.01") + 0.2, "{s:?}: {} vs {}", h("L1.1"), h("L1.01"));
    }
    assert!(thr(out, "L1.1", Subsystem::Qc, 32) > thr(out, "L1.01", Subsystem::Qc, 32));
}

/// Figure 9: the edge stand-in has more locality than the core one; qc is the best on both.
#[test]
fn fig9_edge_and_core() {
    let out = crate::experiments::quick_output("qcache-fig9");
    if out.runs.is_empty() {
        crate::testkit::skip("experiments::qcache_sim::tests::fig9_edge_and_core", crate::testkit::NO_NDPI);
        return;
    }
    let h = |wl: &str| out.run_scalar(&format!("{}/threads=32", curve(wl, Subsystem::Qc)), "hit_rate").unwrap();
    assert!(h("edge") > h("core"), "edge {} core {}", h("edge"), h("core"));
    for wl in ["edge", "core"] {
        for s in [Subsystem::Nc, Subsystem::Dc, Subsystem::Sqc] {
            assert!(thr(out, wl, Subsystem::Qc, 32) >= 0.98 * thr(out, wl, s, 32), "{wl} {s:?}");
        }
    }
}

/// Section 4.6: with one queue, qc > sqc > dc > nc and qc is several times nc.
#[test]
fn worstcase_order() {
    let out = crate::experiments::quick_output("qcache-worstcase");
    let r = |s: &str| cmp(out, &format!("qc_over_{s}"), s);
    assert!(r("nc") > r("dc") && r("dc") > r("sqc") && r("sqc") > 1.0, "{} {} {}", r("nc"), r("dc"), r("sqc"));
    assert!(r("nc") > 3.0);
}

/// The model is exact for one queue and for random traffic at 32 threads (within 5%); for
/// every point the simulation lies between the paper's model and our bounds.
#[test]
fn model_matches_the_pure_cases() {
    let out = crate::experiments::quick_output("qcache-model");
    for c in out.comparisons.iter().filter(|c| c.metric == "model_over_simulated") {
        assert!(c.ours < 1.2, "model above the simulation: {:?} {}", c.params, c.ours);
    }
    for c in out.comparisons.iter().filter(|c| c.metric == "bounds_over_simulated") {
        assert!(c.ours > 0.97, "bounds below the simulation: {:?} {}", c.params, c.ours);
    }
    for wl in ["one queue", "R"] {
        for s in Subsystem::ALL {
            let c = out
                .comparisons
                .iter()
                .find(|c| {
                    c.metric == "model_over_simulated"
                        && c.params["workload"] == json!(wl)
                        && c.params["subsystem"] == json!(s.label())
                        && c.params["threads"] == json!(32)
                })
                .unwrap();
            assert!((c.ours - 1.0).abs() < 0.05, "{wl} {s:?}: model / sim {}", c.ours);
        }
    }
}

/// Figure 10: the single dominating queue has the most operations below the loss
/// threshold, random traffic the fewest below the gain threshold.
#[test]
fn fig10_thresholds_order_the_workloads() {
    let out = crate::experiments::quick_output("qcache-fig10");
    let f = |wl: &str, k: &str| out.run_scalar(wl, k).unwrap();
    assert!(f("SD1_30", "fraction_below_loss_nc") > f("R", "fraction_below_loss_nc") + 0.2);
    assert!(f("L1.1", "fraction_below_gain") > f("L1.01", "fraction_below_gain"));
    assert!(f("R", "fraction_below_gain") < 0.05);
    assert_eq!(f("one queue", "fraction_below_gain"), 1.0);
}

#[test]
fn scale_quick_runs_every_subsystem() {
    let out = crate::experiments::quick_output("qcache-scale");
    assert_eq!(out.runs.len(), 4);
    assert_eq!(out.timings.len(), 5);
}
