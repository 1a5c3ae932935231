//! Reproductions of the qcache paper. Part 1: Table 5's latencies derived from Table 1.

use super::declare::{stated_at, At, Grid, PaperValue};
use super::RunOptions;
use crate::results::{Comparison, Output, RunResult, Table};
use npqos_core::queues::timing::{traffic, Op, Step, Subsystem, Timing, TABLE1};
use serde_json::json;
use std::collections::BTreeMap;

/// Table 5's latencies, ns: (subsystem, op, hit, miss); nc has one value.
/// qcache Table 5: unloaded enqueue and dequeue latency (ns) per subsystem, on a hit and a miss
/// (nc has no cache: one number).
#[rustfmt::skip]
pub const PAPER_TABLE5: &[PaperValue] = &[
    PaperValue::new("latency", &[("subsystem", At::Text("qc")), ("operation", At::Text("enqueue")), ("case", At::Text("hit"))], 80.0, "Table 5"),
    PaperValue::new("latency", &[("subsystem", At::Text("qc")), ("operation", At::Text("enqueue")), ("case", At::Text("miss"))], 120.0, "Table 5"),
    PaperValue::new("latency", &[("subsystem", At::Text("qc")), ("operation", At::Text("dequeue")), ("case", At::Text("hit"))], 80.0, "Table 5"),
    PaperValue::new("latency", &[("subsystem", At::Text("qc")), ("operation", At::Text("dequeue")), ("case", At::Text("miss"))], 120.0, "Table 5"),
    PaperValue::new("latency", &[("subsystem", At::Text("sqc")), ("operation", At::Text("enqueue")), ("case", At::Text("hit"))], 120.0, "Table 5"),
    PaperValue::new("latency", &[("subsystem", At::Text("sqc")), ("operation", At::Text("enqueue")), ("case", At::Text("miss"))], 200.0, "Table 5"),
    PaperValue::new("latency", &[("subsystem", At::Text("sqc")), ("operation", At::Text("dequeue")), ("case", At::Text("hit"))], 120.0, "Table 5"),
    PaperValue::new("latency", &[("subsystem", At::Text("sqc")), ("operation", At::Text("dequeue")), ("case", At::Text("miss"))], 200.0, "Table 5"),
    PaperValue::new("latency", &[("subsystem", At::Text("dc")), ("operation", At::Text("enqueue")), ("case", At::Text("hit"))], 130.0, "Table 5"),
    PaperValue::new("latency", &[("subsystem", At::Text("dc")), ("operation", At::Text("enqueue")), ("case", At::Text("miss"))], 170.0, "Table 5"),
    PaperValue::new("latency", &[("subsystem", At::Text("dc")), ("operation", At::Text("dequeue")), ("case", At::Text("hit"))], 170.0, "Table 5"),
    PaperValue::new("latency", &[("subsystem", At::Text("dc")), ("operation", At::Text("dequeue")), ("case", At::Text("miss"))], 210.0, "Table 5"),
    PaperValue::new("latency", &[("subsystem", At::Text("nc")), ("operation", At::Text("enqueue")), ("case", At::Text("any"))], 170.0, "Table 5"),
    PaperValue::new("latency", &[("subsystem", At::Text("nc")), ("operation", At::Text("dequeue")), ("case", At::Text("any"))], 250.0, "Table 5"),
];

const SUBSYSTEMS: [Subsystem; 4] = [Subsystem::Qc, Subsystem::Sqc, Subsystem::Dc, Subsystem::Nc];

/// Table 5's grid: subsystem x operation (each cached subsystem on a hit and on a miss).
pub fn table5_grid(_quick: bool) -> Grid {
    Grid::one("latencies").axis("subsystem", "", SUBSYSTEMS.iter().map(|s| s.label())).axis(
        "operation",
        "",
        [Op::Enqueue, Op::Dequeue].map(op_label),
    )
}

fn op_label(op: Op) -> &'static str {
    match op {
        Op::Enqueue => "enqueue",
        Op::Dequeue => "dequeue",
    }
}

fn step_label(s: Step) -> &'static str {
    match s {
        Step::Instr => "instructions",
        Step::Interconnect => "interconnect",
        Step::Memory => "memory",
        Step::Cache => "cache",
        Step::Cam => "CAM",
    }
}

/// Accounting variants tried against the paper's number, in order: which on-chip times the
/// paper's arithmetic appears to leave out.
fn variants() -> Vec<(&'static str, Timing)> {
    let t = TABLE1;
    vec![
        ("all of Table 1", t),
        ("without the 2.5 ns cache access", Timing { cache_ns: 0.0, ..t }),
        ("without cache access and CAM", Timing { cache_ns: 0.0, cam_ns: 0.0, ..t }),
        (
            "without cache access, CAM and the thread's instructions",
            Timing { cache_ns: 0.0, cam_ns: 0.0, instr_ns: [0.0; 3], ..t },
        ),
    ]
}

/// qcache Table 5: enqueue and dequeue latency on a hit and a miss for each subsystem, derived
/// from Table 1 by the operation plans of `npqos_core::queues::timing`.
pub fn table5(_opts: RunOptions, g: &Grid, progress: &mut dyn FnMut(f64)) -> Output {
    let mut out = Output {
        assumptions: vec![
        "Table 1: interconnect round trip 40 ns, memory 40 ns, cache 2.5 ns, CAM 5 ns, instructions 10 ns (nc, dc) / 35 ns (sqc) / 5 ns (qc). Unloaded: no contention, no queueing at the bus or memory.".into(),
        "Plans (Table 2, Figure 4): nc enqueue = read descriptor, then link and descriptor writes in parallel; nc dequeue = read descriptor, read link, write descriptor in sequence. dc: descriptor references go over the interconnect to the cache (memory on a miss). sqc: a miss costs an extra evict-and-load command (interconnect + CAM + memory) before the enqueue/dequeue command (interconnect + CAM + memory for the link + cache). qc: one command (interconnect + CAM + memory for the link + cache), plus the descriptor load on a miss. Dirty write-backs are off the critical path.".into(),
        ],
        ..Default::default()
    };
    let t = TABLE1;
    let vars = variants();
    let mut table = Table::new([
        "subsystem",
        "operation",
        "case",
        "ours (ns)",
        "paper (ns)",
        "critical path (ours)",
        "interconnect transactions",
        "off-chip references",
        "paper's number is ours ...",
    ]);
    let mut rr = RunResult { label: "unloaded".into(), complete: true, ..Default::default() };
    let subs: Vec<Subsystem> = g
        .values::<String>("latencies", "subsystem")
        .iter()
        .map(|l| *SUBSYSTEMS.iter().find(|s| s.label() == l).expect("a subsystem"))
        .collect();
    let ops: Vec<Op> = g
        .values::<String>("latencies", "operation")
        .iter()
        .map(|l| if l == "enqueue" { Op::Enqueue } else { Op::Dequeue })
        .collect();
    let points: Vec<(Subsystem, Op)> = subs.iter().flat_map(|&s| ops.iter().map(move |&o| (s, o))).collect();
    for (k, &(sub, op)) in points.iter().enumerate() {
        let cases: &[(bool, &str)] = if sub.cached() { &[(true, "hit"), (false, "miss")] } else { &[(false, "-")] };
        for &(hit, case) in cases {
            let at = [
                ("subsystem", json!(sub.label())),
                ("operation", json!(op_label(op))),
                ("case", json!(if sub.cached() { case } else { "any" })),
            ];
            let paper = stated_at(PAPER_TABLE5, "latency", &at).expect("Table 5 covers the grid");
            let ours = t.latency_ns(sub, op, hit);
            let path = t
                .critical_path(sub, op, hit)
                .iter()
                .map(|&(s, n)| format!("{n} x {} {}", step_label(s), t.step_ns(sub, s)))
                .collect::<Vec<_>>()
                .join(" + ");
            let (ic, off) = traffic(sub, op, hit, false);
            let matched = vars
                .iter()
                .find(|(_, v)| (v.latency_ns(sub, op, hit) - paper).abs() < 1e-9)
                .map(|(name, _)| name.to_string())
                .unwrap_or_else(|| {
                    let best = vars
                        .iter()
                        .map(|(n, v)| (n, v.latency_ns(sub, op, hit)))
                        .min_by(|a, b| (a.1 - paper).abs().total_cmp(&(b.1 - paper).abs()))
                        .expect("variants");
                    format!("no variant matches; closest {} ns ({})", best.1, best.0)
                });
            table.row([
                sub.label().to_string(),
                op_label(op).to_string(),
                case.to_string(),
                ours.to_string(),
                paper.to_string(),
                path.to_string(),
                ic.to_string(),
                off.to_string(),
                matched.to_string(),
            ]);
            let name = format!("{}_{}_{}", sub.label(), op_label(op), if sub.cached() { case } else { "any" });
            rr.scalar(&format!("latency_ns_{name}"), ours, "ns");
            let params = BTreeMap::from([
                ("subsystem".into(), json!(sub.label())),
                ("operation".into(), json!(op_label(op))),
                ("case".into(), json!(if sub.cached() { case } else { "any" })),
            ]);
            out.comparisons.push(Comparison::new("latency", params, ours, None, "ns", "Table 5"));
        }
        progress((k + 1) as f64 / points.len() as f64);
    }
    out.runs.push(rr);
    out.notes.push(table.into());
    out.notes.push(
        "Reading: nc matches Table 5 exactly. The others differ only by on-chip times the paper's arithmetic leaves out, and not consistently: dc's numbers omit the 2.5 ns cache access (once per descriptor reference), sqc's hit keeps the 5 ns CAM but omits the cache access and its miss adds 80 ns (interconnect + memory, no CAM) where our evict-and-load command also pays the CAM; qc's omit the CAM, the cache and the thread's 5 ns of instructions. The last column is computed: the first accounting variant that reproduces the paper's number. The simulator uses all of Table 1.".into(),
    );
    out
}

#[cfg(test)]
mod tests {

    #[test]
    fn table5_orders_the_subsystems_as_the_paper_and_nc_is_exact() {
        let out = crate::experiments::quick_output("qcache-table5");
        let c = |sub: &str, op: &str, case: &str| {
            out.comparisons
                .iter()
                .find(|c| c.params["subsystem"] == sub && c.params["operation"] == op && c.params["case"] == case)
                .unwrap_or_else(|| panic!("{sub} {op} {case}"))
        };
        assert_eq!(c("nc", "enqueue", "any").ours, 170.0);
        assert_eq!(c("nc", "dequeue", "any").ours, 250.0);
        for op in ["enqueue", "dequeue"] {
            let (qc, sqc, dc) = (c("qc", op, "hit").ours, c("sqc", op, "hit").ours, c("dc", op, "hit").ours);
            assert!(qc < sqc && sqc < dc, "{op}: {qc} {sqc} {dc}");
            // Within 15 ns of the paper everywhere (on-chip times the paper leaves out).
            for sub in ["qc", "sqc", "dc"] {
                for case in ["hit", "miss"] {
                    let x = c(sub, op, case);
                    assert!((x.ours - x.paper.unwrap()).abs() <= 12.5, "{sub} {op} {case}: {}", x.ours);
                }
            }
        }
    }
}
