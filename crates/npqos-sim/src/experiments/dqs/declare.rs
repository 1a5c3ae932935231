//! What the dqs experiments declare: their grids (workloads x AFM sizes, and the processing
//! models' sweeps) and the numbers the dqs paper states (Tables 2-3, Figs 7-8 and 10, sections
//! 1 and 6). The runs are in [`super`].

use super::ndpi_dir;
use crate::experiments::declare::{At, Grid, PaperValue};

/// The workloads a grid sweeps: ndpi when the corpus is present, and synthetic.
pub(super) fn workload_names() -> Vec<&'static str> {
    if ndpi_dir().is_some() {
        vec!["ndpi", "synthetic"]
    } else {
        vec!["synthetic"]
    }
}

/// A grid of links: the workloads (ndpi when present, synthetic) x AFM slots.
pub(super) fn links(slots: &[u32]) -> Grid {
    Grid::one("links").axis("workload", "", workload_names()).axis("slots", "slots", slots)
}

/// dqs Table 2, per AFM size and paper trace: mean and worst sub-table length, alpha and
/// P(>1), compared with our ndpi corpus (we do not have the paper's traces).
#[rustfmt::skip]
pub const PAPER_TABLE2: &[PaperValue] = &[
    PaperValue::new("mean_subtable_length", &[("workload", At::Text("ndpi")), ("slots", At::Int(64)), ("paper_trace", At::Text("CERNET"))], 2.65, "Table 2"),
    PaperValue::new("mean_subtable_length", &[("workload", At::Text("ndpi")), ("slots", At::Int(64)), ("paper_trace", At::Text("NLANR1"))], 2.12, "Table 2"),
    PaperValue::new("mean_subtable_length", &[("workload", At::Text("ndpi")), ("slots", At::Int(64)), ("paper_trace", At::Text("NLANR2"))], 2.91, "Table 2"),
    PaperValue::new("worst_subtable_length", &[("workload", At::Text("ndpi")), ("slots", At::Int(64)), ("paper_trace", At::Text("CERNET"))], 15.0, "Table 2"),
    PaperValue::new("worst_subtable_length", &[("workload", At::Text("ndpi")), ("slots", At::Int(64)), ("paper_trace", At::Text("NLANR1"))], 13.0, "Table 2"),
    PaperValue::new("worst_subtable_length", &[("workload", At::Text("ndpi")), ("slots", At::Int(64)), ("paper_trace", At::Text("NLANR2"))], 16.0, "Table 2"),
    PaperValue::new("alpha", &[("workload", At::Text("ndpi")), ("slots", At::Int(64)), ("paper_trace", At::Text("CERNET"))], 2.28, "Table 2"),
    PaperValue::new("alpha", &[("workload", At::Text("ndpi")), ("slots", At::Int(64)), ("paper_trace", At::Text("NLANR1"))], 1.49, "Table 2"),
    PaperValue::new("alpha", &[("workload", At::Text("ndpi")), ("slots", At::Int(64)), ("paper_trace", At::Text("NLANR2"))], 2.7, "Table 2"),
    PaperValue::new("p_more_than_1", &[("workload", At::Text("ndpi")), ("slots", At::Int(64)), ("paper_trace", At::Text("CERNET"))], 0.531, "Table 2"),
    PaperValue::new("p_more_than_1", &[("workload", At::Text("ndpi")), ("slots", At::Int(64)), ("paper_trace", At::Text("NLANR1"))], 0.346, "Table 2"),
    PaperValue::new("p_more_than_1", &[("workload", At::Text("ndpi")), ("slots", At::Int(64)), ("paper_trace", At::Text("NLANR2"))], 0.693, "Table 2"),
    PaperValue::new("mean_subtable_length", &[("workload", At::Text("ndpi")), ("slots", At::Int(256)), ("paper_trace", At::Text("CERNET"))], 1.34, "Table 2"),
    PaperValue::new("mean_subtable_length", &[("workload", At::Text("ndpi")), ("slots", At::Int(256)), ("paper_trace", At::Text("NLANR1"))], 1.24, "Table 2"),
    PaperValue::new("mean_subtable_length", &[("workload", At::Text("ndpi")), ("slots", At::Int(256)), ("paper_trace", At::Text("NLANR2"))], 1.42, "Table 2"),
    PaperValue::new("worst_subtable_length", &[("workload", At::Text("ndpi")), ("slots", At::Int(256)), ("paper_trace", At::Text("CERNET"))], 8.0, "Table 2"),
    PaperValue::new("worst_subtable_length", &[("workload", At::Text("ndpi")), ("slots", At::Int(256)), ("paper_trace", At::Text("NLANR1"))], 7.0, "Table 2"),
    PaperValue::new("worst_subtable_length", &[("workload", At::Text("ndpi")), ("slots", At::Int(256)), ("paper_trace", At::Text("NLANR2"))], 9.0, "Table 2"),
    PaperValue::new("alpha", &[("workload", At::Text("ndpi")), ("slots", At::Int(256)), ("paper_trace", At::Text("CERNET"))], 0.57, "Table 2"),
    PaperValue::new("alpha", &[("workload", At::Text("ndpi")), ("slots", At::Int(256)), ("paper_trace", At::Text("NLANR1"))], 0.37, "Table 2"),
    PaperValue::new("alpha", &[("workload", At::Text("ndpi")), ("slots", At::Int(256)), ("paper_trace", At::Text("NLANR2"))], 0.68, "Table 2"),
    PaperValue::new("p_more_than_1", &[("workload", At::Text("ndpi")), ("slots", At::Int(256)), ("paper_trace", At::Text("CERNET"))], 0.118, "Table 2"),
    PaperValue::new("p_more_than_1", &[("workload", At::Text("ndpi")), ("slots", At::Int(256)), ("paper_trace", At::Text("NLANR1"))], 0.049, "Table 2"),
    PaperValue::new("p_more_than_1", &[("workload", At::Text("ndpi")), ("slots", At::Int(256)), ("paper_trace", At::Text("NLANR2"))], 0.149, "Table 2"),
    PaperValue::new("mean_subtable_length", &[("workload", At::Text("ndpi")), ("slots", At::Int(1024)), ("paper_trace", At::Text("CERNET"))], 1.09, "Table 2"),
    PaperValue::new("mean_subtable_length", &[("workload", At::Text("ndpi")), ("slots", At::Int(1024)), ("paper_trace", At::Text("NLANR1"))], 1.03, "Table 2"),
    PaperValue::new("mean_subtable_length", &[("workload", At::Text("ndpi")), ("slots", At::Int(1024)), ("paper_trace", At::Text("NLANR2"))], 1.12, "Table 2"),
    PaperValue::new("worst_subtable_length", &[("workload", At::Text("ndpi")), ("slots", At::Int(1024)), ("paper_trace", At::Text("CERNET"))], 5.0, "Table 2"),
    PaperValue::new("worst_subtable_length", &[("workload", At::Text("ndpi")), ("slots", At::Int(1024)), ("paper_trace", At::Text("NLANR1"))], 5.0, "Table 2"),
    PaperValue::new("worst_subtable_length", &[("workload", At::Text("ndpi")), ("slots", At::Int(1024)), ("paper_trace", At::Text("NLANR2"))], 7.0, "Table 2"),
    PaperValue::new("alpha", &[("workload", At::Text("ndpi")), ("slots", At::Int(1024)), ("paper_trace", At::Text("CERNET"))], 0.14, "Table 2"),
    PaperValue::new("alpha", &[("workload", At::Text("ndpi")), ("slots", At::Int(1024)), ("paper_trace", At::Text("NLANR1"))], 0.09, "Table 2"),
    PaperValue::new("alpha", &[("workload", At::Text("ndpi")), ("slots", At::Int(1024)), ("paper_trace", At::Text("NLANR2"))], 0.17, "Table 2"),
    PaperValue::new("p_more_than_1", &[("workload", At::Text("ndpi")), ("slots", At::Int(1024)), ("paper_trace", At::Text("CERNET"))], 0.007, "Table 2"),
    PaperValue::new("p_more_than_1", &[("workload", At::Text("ndpi")), ("slots", At::Int(1024)), ("paper_trace", At::Text("NLANR1"))], 0.003, "Table 2"),
    PaperValue::new("p_more_than_1", &[("workload", At::Text("ndpi")), ("slots", At::Int(1024)), ("paper_trace", At::Text("NLANR2"))], 0.016, "Table 2"),
];

/// dqs Table 2's grid: the workloads x M = 64, 256, 1024.
pub fn table2_grid(_quick: bool) -> Grid {
    links(&[64, 256, 1024])
}

/// dqs Table 3 per paper trace: maximum and mean physical queues (compared with our ndpi corpus),
/// and the traces' mean rate and link capacity in Mb/s (reference: ours are other traces).
#[rustfmt::skip]
pub const PAPER_TABLE3: &[PaperValue] = &[
    PaperValue::new("max_queues", &[("workload", At::Text("ndpi")), ("paper_trace", At::Text("CERNET"))], 352.0, "Table 3"),
    PaperValue::new("max_queues", &[("workload", At::Text("ndpi")), ("paper_trace", At::Text("NLANR1"))], 239.0, "Table 3"),
    PaperValue::new("max_queues", &[("workload", At::Text("ndpi")), ("paper_trace", At::Text("NLANR2"))], 385.0, "Table 3"),
    PaperValue::new("mean_queues", &[("workload", At::Text("ndpi")), ("paper_trace", At::Text("CERNET"))], 146.0, "Table 3"),
    PaperValue::new("mean_queues", &[("workload", At::Text("ndpi")), ("paper_trace", At::Text("NLANR1"))], 95.0, "Table 3"),
    PaperValue::new("mean_queues", &[("workload", At::Text("ndpi")), ("paper_trace", At::Text("NLANR2"))], 173.0, "Table 3"),
    PaperValue::reference("mean_rate_mbps", &[("paper_trace", At::Text("CERNET"))], 278.8, "Table 3"),
    PaperValue::reference("mean_rate_mbps", &[("paper_trace", At::Text("NLANR1"))], 447.4, "Table 3"),
    PaperValue::reference("mean_rate_mbps", &[("paper_trace", At::Text("NLANR2"))], 662.6, "Table 3"),
    PaperValue::reference("capacity_mbps", &[("paper_trace", At::Text("CERNET"))], 293.5, "Table 3"),
    PaperValue::reference("capacity_mbps", &[("paper_trace", At::Text("NLANR1"))], 470.9, "Table 3"),
    PaperValue::reference("capacity_mbps", &[("paper_trace", At::Text("NLANR2"))], 697.4, "Table 3"),
];

/// dqs Table 3's grid: the workloads at M = 256 (queue numbers do not depend on M).
pub fn table3_grid(_quick: bool) -> Grid {
    links(&[256])
}

/// dqs Figs 7-8 as the text states them: about two cycles per packet at M >= 256 (all three
/// traces; compared with our ndpi corpus) and the NLANR2 CDF at M = 256.
#[rustfmt::skip]
pub const PAPER_FIG5_8: &[PaperValue] = &[
    PaperValue::new("overall_cycles_per_packet", &[("workload", At::Text("ndpi")), ("slots", At::Int(256))], 2.0, FIG7_SOURCE),
    PaperValue::new("overall_cycles_per_packet", &[("workload", At::Text("ndpi")), ("slots", At::Int(512))], 2.0, FIG7_SOURCE),
    PaperValue::new("overall_cycles_per_packet", &[("workload", At::Text("ndpi")), ("slots", At::Int(1024))], 2.0, FIG7_SOURCE),
    PaperValue::new("cdf_cycles_le_1", &[("workload", At::Text("ndpi")), ("slots", At::Int(256))], 0.40, FIG8_SOURCE),
    PaperValue::new("cdf_cycles_le_2", &[("workload", At::Text("ndpi")), ("slots", At::Int(256))], 0.84, FIG8_SOURCE),
    PaperValue::new("max_cycles", &[("workload", At::Text("ndpi")), ("slots", At::Int(256))], 6.0, FIG8_SOURCE),
];
pub(super) const FIG7_SOURCE: &str = "Fig. 7 (text: about 2 at M >= 256)";
pub(super) const FIG8_SOURCE: &str = "Fig. 8 (NLANR2 text)";

/// dqs Figs 5-8's grid: the workloads x M = 16 .. 1024.
pub fn fig5_8_grid(_quick: bool) -> Grid {
    links(&[16, 32, 64, 128, 256, 512, 1024])
}

/// dqs Fig. 10's text: MPMQ has about five times SPSQ's throughput (compared with our ndpi
/// corpus at every point).
#[rustfmt::skip]
pub const PAPER_FIG9_13: &[PaperValue] = &[
    PaperValue::new("mpmq_over_spsq_throughput", &[("workload", At::Text("ndpi"))], 5.0, "Fig. 10 (text: MPMQ about 5x SPSQ)"),
];

/// dqs Figs 9-13's grid: the recorded links (workloads x M), Fig. 9's flow table at each
/// speedup (M = 64), then the processing models replayed on the recorded links against the
/// speedup at M = 64 and against M at speedup 8.
pub fn fig9_13_grid(quick: bool) -> Grid {
    let models = ["SPSQ", "MPSQ", "MPMQ"];
    let f9: &[f64] = if quick { &[1.0, 2.0, 4.0, 8.0] } else { &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0] };
    links(&[16, 32, 64, 128, 256, 1024])
        .sweep("fig 9")
        .axis("speedup", "1", f9)
        .axis("slots", "slots", [64u32])
        .sweep("by speedup")
        .axis("model", "", models)
        .axis("speedup", "1", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
        .axis("slots", "slots", [64u32])
        .sweep("by M")
        .axis("model", "", models)
        .axis("slots", "slots", [16u32, 32, 64, 128, 256, 1024])
        .axis("speedup", "1", [8.0])
}

/// dqs section 6's AFM memory example (M = l = N_q = 256, 32-bit flow ids) and section 1's
/// brute-force pointer memory for 2^20 flows.
#[rustfmt::skip]
pub const PAPER_SCALE: &[PaperValue] = &[
    PaperValue::new("afm_memory_eq5_paper_example", &[ ("slots", At::Int(256)), ("active_flows", At::Int(256)), ("queues", At::Int(256)), ("flow_id_bits", At::Int(32)), ], 16_384.0, "section 6 (\"only 16 K bits\")"),
    PaperValue::new("brute_force_pointer_memory", &[("flows", At::Int(1_048_576))], 40.0 * 1_048_576.0, "section 1 (2 x 2^20 x 20 = 40 Mbit)"),
];

/// dqs-scale's grid: one run of 1e6 in-progress flows (quick: 1e5) at M = 256.
pub fn scale_grid(quick: bool) -> Grid {
    Grid::one("run").axis("in_progress_flows", "flows", [if quick { 100_000u32 } else { 1_000_000 }]).axis(
        "slots",
        "slots",
        [256u32],
    )
}
