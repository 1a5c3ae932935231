//! What the qcache simulation experiments declare: their grids (workloads x subsystems x
//! threads, and the sweeps at 32 threads) and the numbers the qcache paper states (sections
//! 4.2-4.6 and the abstract). The runs are in [`super`]; section 3.6 and Fig. 10 declare theirs
//! in [`super::analysis`].

use super::{ops, thread_counts};
use crate::experiments::declare::{At, Grid, PaperValue};
use npqos_core::queues::timing::Subsystem;

/// A grid of `workloads` x every subsystem x the thread counts, with the operations per run.
pub(super) fn threads_grid(quick: bool, workloads: &[&str]) -> Grid {
    Grid::one("threads")
        .axis("workload", "", workloads)
        .axis("subsystem", "", Subsystem::ALL.map(|s| s.label()))
        .axis("threads", "threads", thread_counts(quick))
        .axis("ops", "operations", [ops(quick)])
}

/// The trace workloads, when the nDPI corpus is present.
pub(super) fn trace_names() -> Vec<&'static str> {
    if crate::experiments::dqs::ndpi_dir().is_some() {
        vec!["edge", "core"]
    } else {
        vec![]
    }
}

/// qcache Fig. 5 / section 4.2 on R: every subsystem peaks "slightly over 80M" operations per
/// second; qc peaks with 12 threads (18-20 for the others: a range, not compared).
#[rustfmt::skip]
pub const PAPER_FIG5: &[PaperValue] = &[
    PaperValue::new("peak_throughput", &[("workload", At::Text("R"))], 80.0, "Fig. 5 / section 4.2 ('slightly over 80M')"),
    PaperValue::new("threads_to_95pct_of_peak", &[("workload", At::Text("R")), ("subsystem", At::Text("qc"))], 12.0, "section 4.2: qc peaks with 12 threads"),
];

/// qcache section 4.3.1 on SD1_30: hit rates around 30%; locality stops helping qc beyond a 20%
/// weight, the others at around 10%.
#[rustfmt::skip]
pub const PAPER_FIG6: &[PaperValue] = &[
    PaperValue::new("hit_rate", &[("workload", At::Text("SD1_30")), ("threads", At::Int(32))], 0.30, "section 4.3.1 ('hit rates, around 30%')"),
    PaperValue::new("largest_weight_at_or_above_R_throughput", &[("subsystem", At::Text("qc"))], 20.0, FIG6_LOCALITY),
    PaperValue::new("largest_weight_at_or_above_R_throughput", &[("subsystem", At::Text("sqc"))], 10.0, FIG6_LOCALITY),
    PaperValue::new("largest_weight_at_or_above_R_throughput", &[("subsystem", At::Text("dc"))], 10.0, FIG6_LOCALITY),
];
const FIG6_LOCALITY: &str = "section 4.3.1: locality stops helping qc beyond 20%, the others at around 10%";

/// qcache section 4.3.2 on SD16_90 at 32 threads: qc reaches 150 M ops/s, 1.15x sqc and 1.30x dc;
/// throughput rises with the dominating set until the cache capacity (32; the data cache 64).
#[rustfmt::skip]
pub const PAPER_FIG7: &[PaperValue] = &[
    PaperValue::new("throughput", &[("workload", At::Text("SD16_90")), ("subsystem", At::Text("qc")), ("threads", At::Int(32))], 150.0, "section 4.3.2"),
    PaperValue::new("qc_over_sqc", &[("workload", At::Text("SD16_90"))], 1.15, "section 4.3.2"),
    PaperValue::new("qc_over_dc", &[("workload", At::Text("SD16_90"))], 1.30, "section 4.3.2"),
    PaperValue::new("dominating_set_size_at_peak", &[("subsystem", At::Text("dc"))], 64.0, FIG7_SET),
    PaperValue::new("dominating_set_size_at_peak", &[("subsystem", At::Text("sqc"))], 32.0, FIG7_SET),
    PaperValue::new("dominating_set_size_at_peak", &[("subsystem", At::Text("qc"))], 32.0, FIG7_SET),
];
const FIG7_SET: &str =
    "section 4.3.2: throughput rises until the cache capacity (32 entries; the data cache declines from 64)";

/// qcache section 4.4 and the abstract on the real traces: qc at 130 M ops/s on the edge trace,
/// 1.3x sqc, 1.75x dc, 2.6x nc; on the core trace qc needs 17 threads to peak, dc and sqc 25.
#[rustfmt::skip]
pub const PAPER_FIG9: &[PaperValue] = &[
    PaperValue::new("throughput", &[("workload", At::Text("edge")), ("subsystem", At::Text("qc")), ("threads", At::Int(32))], 130.0, "section 4.4 (NLANR edge trace)"),
    PaperValue::new("qc_over_sqc", &[("workload", At::Text("edge"))], 1.3, "section 4.4"),
    PaperValue::new("qc_over_dc", &[("workload", At::Text("edge"))], 1.75, "section 4.4"),
    PaperValue::new("qc_over_nc", &[("workload", At::Text("edge"))], 2.6, "abstract / section 6"),
    PaperValue::new("threads_to_95pct_of_peak", &[("workload", At::Text("core")), ("subsystem", At::Text("qc"))], 17.0, "section 4.4"),
    PaperValue::new("threads_to_95pct_of_peak", &[("workload", At::Text("core")), ("subsystem", At::Text("dc"))], 25.0, "section 4.4"),
    PaperValue::new("threads_to_95pct_of_peak", &[("workload", At::Text("core")), ("subsystem", At::Text("sqc"))], 25.0, "section 4.4"),
];

/// qcache section 4.6 and the abstract: with every operation on one queue, qc is 3.1x nc, 1.5x sqc
/// and 2.1x dc.
#[rustfmt::skip]
pub const PAPER_WORSTCASE: &[PaperValue] = &[
    PaperValue::new("qc_over_nc", &[], 3.1, "section 4.6 / abstract"),
    PaperValue::new("qc_over_sqc", &[], 1.5, "section 4.6 / abstract"),
    PaperValue::new("qc_over_dc", &[], 2.1, "section 4.6 / abstract"),
];

/// Fig. 5's grid: R x every subsystem x threads.
pub fn fig5_grid(quick: bool) -> Grid {
    threads_grid(quick, &["R"])
}

/// Fig. 6's grid: SD1_30 x every subsystem x threads; then, at 32 threads, the dominating queue's
/// weight (and R, the no-locality reference).
pub fn fig6_grid(quick: bool) -> Grid {
    let weights: Vec<f64> = if quick {
        vec![5.0, 10.0, 20.0, 30.0, 60.0, 100.0]
    } else {
        vec![5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0]
    };
    let mut g = threads_grid(quick, &["SD1_30"]);
    g = g
        .sweep("weights")
        .axis("weight_percent", "%", weights)
        .axis("subsystem", "", Subsystem::ALL.map(|s| s.label()))
        .axis("threads", "threads", [32u32])
        .axis("ops", "operations", [ops(quick)]);
    g
}

/// Fig. 7's grid: SD16_90 x every subsystem x threads; then, at 32 threads, the size of the
/// dominating set, and SD16_90's sensitivity to the standing backlog.
pub fn fig7_grid(quick: bool) -> Grid {
    let sizes: Vec<u32> =
        if quick { vec![1, 4, 16, 32, 64, 256] } else { vec![1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256] };
    threads_grid(quick, &["SD16_90"])
        .sweep("set sizes")
        .axis("dominating_queues", "queues", sizes)
        .axis("subsystem", "", Subsystem::ALL.map(|s| s.label()))
        .axis("threads", "threads", [32u32])
        .axis("ops", "operations", [ops(quick)])
        .sweep("backlog")
        .axis("backlog", "packets", [16u32, 64, 256, 1024])
        .axis("subsystem", "", Subsystem::ALL.map(|s| s.label()))
        .axis("threads", "threads", [32u32])
}

/// Fig. 8's grid: L1.1 and L1.01 x every subsystem x threads.
pub fn fig8_grid(quick: bool) -> Grid {
    threads_grid(quick, &["L1.1", "L1.01"])
}

/// Fig. 9's grid: the trace workloads (when the corpus is present) x every subsystem x threads.
pub fn fig9_grid(quick: bool) -> Grid {
    threads_grid(quick, &trace_names())
}

/// Section 4.6's grid: one queue, every subsystem at 32 threads.
pub fn worstcase_grid(quick: bool) -> Grid {
    Grid::one("one queue")
        .axis("subsystem", "", Subsystem::ALL.map(|s| s.label()))
        .axis("threads", "threads", [32u32])
        .axis("ops", "operations", [ops(quick)])
}

/// qcache-scale's grid: R, every subsystem at 32 threads, 1e7 operations (quick: 1e5).
pub fn scale_grid(quick: bool) -> Grid {
    Grid::one("run").axis("subsystem", "", Subsystem::ALL.map(|s| s.label())).axis("threads", "threads", [32u32]).axis(
        "ops",
        "operations",
        [if quick { 100_000u64 } else { 10_000_000 }],
    )
}
