//! dqs reproductions: Tables 2-3, Figs 5-8 (AFM cycles beside Theorems 1-2), Figs 9-13
//! (processing models) and the 1e6-flow scale run.
//!
//! Two workloads stand in for the paper's CERNET / NLANR traces (which we do not have):
//! * `ndpi`: every capture in the nDPI corpus (`../shared/traces/ndpi`, or `$NPQOS_TRACE_DIR`),
//!   each file aligned to start at 0 with gaps capped at [`NDPI_MAX_GAP`], merged, and overlaid
//!   [`NDPI_COPIES`] times (flow multiplication) — see [`crate::trace::corpus`]. Skipped, with a
//!   note in the report, when the corpus is absent.
//! * `synthetic`: closed population of in-progress flows with Pareto-distributed packet counts
//!   ([`SyntheticFlows`]).
//!
//! Every run: DRR over the physical queues at offered load 0.95 (dqs section 6).

use super::declare::{stated_at, Grid};
use super::RunOptions;
use crate::models::dqs::{process, run_link, DqsLinkParams, DqsLinkResult, ProcModel, SyntheticFlows};
use crate::results::{Comparison, Note, Output, Place, PlotKind, PlotSpec, RunResult, Table};
use crate::rng::RngStreams;
use crate::trace::corpus::Corpus;
use crate::workload::SizeDist;
use npqos_core::flowmap::{theory, DqsConfig, Exhausted, HashKind};
use npqos_core::Duration;
use rand::Rng;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Longest gap kept between two packets of one capture.
pub const NDPI_MAX_GAP: Duration = Duration::from_millis(1000);
/// Overlaid copies of the corpus (full runs; quick runs use 4).
pub const NDPI_COPIES: u32 = 32;
/// Offered load of every run (dqs section 6).
pub const LOAD: f64 = 0.95;

const PAPER_TRACES: [&str; 3] = ["CERNET", "NLANR1", "NLANR2"];

/// The directory of the nDPI captures, if present.
pub fn ndpi_dir() -> Option<PathBuf> {
    let mut c: Vec<PathBuf> = Vec::new();
    if let Some(d) = std::env::var_os("NPQOS_TRACE_DIR") {
        c.push(d.into());
    }
    c.push("../shared/traces/ndpi".into());
    c.push(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/traces/ndpi").into());
    c.into_iter().find(|d| d.is_dir())
}

/// Loads the nDPI corpus (all `.pcap` / `.pcapng` / `.cap` files, sorted by name, corrupt records skipped).
pub fn load_ndpi() -> Option<Result<Corpus, String>> {
    let dir = ndpi_dir()?;
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "pcap" || x == "pcapng" || x == "cap"))
            .collect(),
        Err(e) => return Some(Err(format!("{}: {e}", dir.display()))),
    };
    files.sort();
    Some(Corpus::load(&files, true, NDPI_MAX_GAP).map_err(|e| e.to_string()))
}

/// A workload of the dqs experiments.
#[derive(Clone)]
pub enum Workload {
    Ndpi { corpus: Arc<Corpus>, copies: u32 },
    Synthetic(SyntheticFlows),
}

impl Workload {
    pub fn name(&self) -> &'static str {
        match self {
            Workload::Ndpi { .. } => "ndpi",
            Workload::Synthetic(_) => "synthetic",
        }
    }
    fn describe(&self) -> String {
        match self {
            Workload::Ndpi { corpus, copies } => format!(
                "ndpi: {} captures, {} IP packets, {} flows, aligned to start at 0, gaps capped at {} ms, merged, overlaid {copies}x (copy j rotated by a uniform offset, zone j): {} packets over {:.1} s ({:.2} Mb/s mean)",
                corpus.files,
                corpus.packets.len(),
                corpus.flows(),
                corpus.max_gap.as_nanos() / 1_000_000,
                corpus.packets.len() as u64 * *copies as u64,
                corpus.duration_ns as f64 * 1e-9,
                corpus.mean_rate_bps(*copies, 1.0) / 1e6
            ),
            Workload::Synthetic(s) => format!(
                "synthetic: {} flows in progress at all times, Pareto packets per flow (shape {}, mean {}), exponential gaps of mean {} ms within a flow, kim IMIX sizes, {} s: about {} packets at {:.1} Mb/s",
                s.in_progress,
                s.pareto_shape,
                s.mean_packets,
                s.mean_gap.as_nanos() as f64 / 1e6,
                s.duration.as_secs_f64(),
                s.expected_packets(),
                s.mean_rate_bps() / 1e6
            ),
        }
    }
    fn expected_packets(&self) -> u64 {
        match self {
            Workload::Ndpi { corpus, copies } => corpus.packets.len() as u64 * *copies as u64,
            Workload::Synthetic(s) => s.expected_packets(),
        }
    }

    /// One run through the flow table with `slots` slots at the offered load of every run.
    pub fn run(&self, slots: u32, record: bool, seed: u64, progress: &mut dyn FnMut(f64)) -> DqsLinkResult {
        self.run_at(slots, LOAD, record, seed, progress)
    }

    /// [`Workload::run`] at offered load `load` (arrival rate / link rate: above 1 the enqueue
    /// rate exceeds the dequeue rate by that factor, the paper's speedup).
    pub fn run_at(
        &self,
        slots: u32,
        load: f64,
        record: bool,
        seed: u64,
        progress: &mut dyn FnMut(f64),
    ) -> DqsLinkResult {
        let streams = RngStreams::new(seed);
        let h3_seed: u64 = streams.stream("dqs.h3", 0).random();
        let p = DqsLinkParams { table: table(slots, h3_seed), load, record_requests: record, record_departures: false };
        match self {
            Workload::Ndpi { corpus, copies } => {
                let mut rng = streams.stream("dqs.trace", 0);
                let it = corpus.overlay(*copies, 1.0, &mut rng).map(|c| crate::models::dqs::Arrival {
                    ts: c.ts,
                    len: c.len,
                    flow: c.flow,
                });
                run_link(&p, it, corpus.mean_rate_bps(*copies, 1.0), self.expected_packets(), progress)
            }
            Workload::Synthetic(s) => {
                let g = s.generator(streams.stream("dqs.flows", 0));
                run_link(&p, g, s.mean_rate_bps(), self.expected_packets(), progress)
            }
        }
    }
}

/// The flow table of every run: `slots` slots; the pool and buffer large enough never to bind
/// (64Ki queues, 1Mi 64-byte blocks = 64 MiB), so the queues in use are what the traffic needs.
pub fn table(slots: u32, h3_seed: u64) -> DqsConfig {
    DqsConfig {
        slots,
        hash: HashKind::H3 { seed: h3_seed },
        queues: 1 << 16,
        blocks: 1 << 20,
        block_size: 64,
        quantum: 1536,
        on_exhausted: Exhausted::Drop,
        ..Default::default()
    }
}

/// The synthetic workload: quick runs are smaller and shorter.
pub fn synthetic(quick: bool) -> SyntheticFlows {
    SyntheticFlows {
        in_progress: if quick { 5_000 } else { 50_000 },
        mean_packets: 10.0,
        pareto_shape: 1.2,
        mean_gap: if quick { Duration::from_millis(10) } else { Duration::from_millis(100) },
        sizes: SizeDist::kim_imix(),
        duration: if quick { Duration::from_millis(500) } else { Duration::from_secs(10) },
    }
}

/// The workloads of grid `g`'s links: ndpi if the grid has it and the corpus reads (else a
/// note why not), synthetic.
fn workloads(opts: RunOptions, g: &Grid, out: &mut Output) -> Vec<Workload> {
    let mut w = Vec::new();
    let names: Vec<String> = g.values("links", "workload");
    let ndpi = if names.iter().any(|n| n == "ndpi") { load_ndpi() } else { None };
    match ndpi {
        Some(Ok(c)) => {
            out.assumptions.push(format!(
                "ndpi corpus: {} records not IP skipped, {} corrupt records skipped (lenient reading).",
                c.non_ip_skipped, c.counters.corrupt_skipped
            ));
            w.push(Workload::Ndpi { corpus: Arc::new(c), copies: if opts.quick { 4 } else { NDPI_COPIES } });
        }
        Some(Err(e)) => out.notes.push(Note::from(format!("**Real-trace part not run**: the nDPI corpus could not be read: {e}."))),
        None => out.notes.push(
            "**Real-trace part not run**: no nDPI corpus at `../shared/traces/ndpi` or `$NPQOS_TRACE_DIR`; only the synthetic workload ran."
                .into(),
        ),
    }
    w.push(Workload::Synthetic(synthetic(opts.quick)));
    for x in &w {
        out.assumptions.push(format!("Workload {}", x.describe()));
    }
    out.assumptions.push(format!(
        "One output link, DRR over the active physical queues (quantum 1536 B), capacity = offered mean rate / {LOAD} (dqs section 6); a packet leaves its queue when its transmission starts."
    ));
    out.assumptions.push("H3 hash over the 13-byte IPv4 5-tuple (37 bytes for IPv6) plus a 2-byte zone (the overlay copy), matrix drawn from the run's seed; slot = top bits of the 32-bit H3 value.".into());
    out.assumptions.push("AFM deletion by the paper's three cases (two children: right subtree hung below the maximum of the left subtree).".into());
    w
}

/// Runs every (workload, slots) point on the worker threads (`--threads`); results in input order.
fn sweep(
    ws: &[Workload],
    slots: &[u32],
    record: bool,
    opts: RunOptions,
    progress: &mut dyn FnMut(f64),
) -> Vec<DqsLinkResult> {
    let seed = opts.seed;
    let points: Vec<(Workload, u32)> = ws.iter().flat_map(|w| slots.iter().map(move |&m| (w.clone(), m))).collect();
    super::par_map(opts.threads, &points, |(w, m), prog| w.run(*m, record, seed, prog), progress)
}

fn params(w: &str, m: u32) -> BTreeMap<String, serde_json::Value> {
    BTreeMap::from([("workload".into(), json!(w)), ("slots".into(), json!(m))])
}

fn link_run(label: String, w: &str, m: u32, r: &DqsLinkResult) -> RunResult {
    let mut run = RunResult { label, complete: true, stop_reason: "drained".into(), ..Default::default() };
    run.params = params(w, m);
    run.scalar("packets", r.packets as f64, "packets");
    run.scalar("flows_activated", r.flows_activated as f64, "flows");
    run.scalar("capacity", r.capacity_bps, "bit/s");
    run.scalar("offered", r.offered_bps, "bit/s");
    run.scalar("peak_10ms_over_mean", r.peak_10ms_bps / r.offered_bps.max(1.0), "ratio");
    run.scalar("dropped_buffer_full", r.dropped_buffer_full as f64, "packets");
    run.scalar("dropped_no_queue", r.dropped_no_queue as f64, "packets");
    run.scalar("mean_active_flows", r.sum_active / r.samples.max(1) as f64, "flows");
    run.scalar("max_active_flows", r.max_active as f64, "flows");
    run.scalar("mean_subtable_length", r.sum_active / r.sum_nonempty.max(1.0), "flows");
    run.scalar("worst_subtable_length", r.worst_slot as f64, "flows");
    run.scalar("alpha", r.sum_active / r.samples.max(1) as f64 / m as f64, "flows/slot");
    run.scalar("p_more_than_1", r.sum_multi / (r.samples.max(1) as f64 * m as f64), "probability");
    run.scalar("max_queues", r.max_queues as f64, "queues");
    run.scalar("mean_queues", r.mean_queues, "queues");
    run.scalar("search_cycles", r.search.mean_measured(), "nodes compared");
    run.scalar("update_cycles", r.update.mean_measured(), "nodes compared");
    run.scalar("overall_cycles", r.mean_cycles(), "cycles");
    run.sim_time_ns = r.span_ns;
    run.events = r.packets;
    run
}

/// dqs Table 2: sub-table lengths, alpha and P(>1) for M = 64, 256, 1024 at load 0.95.
pub fn table2(opts: RunOptions, g: &Grid, progress: &mut dyn FnMut(f64)) -> Output {
    let mut out = Output::default();
    let ws = workloads(opts, g, &mut out);
    let ms: Vec<u32> = g.values("links", "slots");
    let rs = sweep(&ws, &ms, false, opts, progress);
    let mut rows = Table::new([
        "workload",
        "M",
        "mean sub-table length",
        "worst",
        "alpha",
        "P(>1)",
        "paper CERNET / NLANR1 / NLANR2 (mean, worst, alpha, P(1))",
    ]);
    for (i, r) in rs.iter().enumerate() {
        let (w, m) = (ws[i / ms.len()].name(), ms[i % ms.len()]);
        let run = link_run(format!("{w} M={m}"), w, m, r);
        let vals = [
            ("mean_subtable_length", run.get("mean_subtable_length").unwrap_or(0.0), "flows"),
            ("worst_subtable_length", run.get("worst_subtable_length").unwrap_or(0.0), "flows"),
            ("alpha", run.get("alpha").unwrap_or(0.0), "flows/slot"),
            ("p_more_than_1", run.get("p_more_than_1").unwrap_or(0.0), "probability"),
        ];
        let paper_cells: Vec<String> = PAPER_TRACES
            .iter()
            .map(|t| {
                let at = [("workload", json!("ndpi")), ("slots", json!(m)), ("paper_trace", json!(t))];
                let cells: Vec<String> = vals
                    .iter()
                    .map(|v| stated_at(PAPER_TABLE2, v.0, &at).map_or("—".into(), |x| x.to_string()))
                    .collect();
                format!("{t}: {}", cells.join(", "))
            })
            .collect();
        rows.row([
            w.to_string(),
            m.to_string(),
            format!("{:.2}", vals[0].1),
            vals[1].1.to_string(),
            format!("{:.3}", vals[2].1),
            format!("{:.3}", vals[3].1),
            paper_cells.join("; "),
        ]);
        for (metric, v, unit) in &vals {
            if w == "ndpi" {
                for trace in PAPER_TRACES {
                    let mut p = params(w, m);
                    p.insert("paper_trace".into(), json!(trace));
                    out.comparisons.push(Comparison::new(metric, p, *v, None, unit, "Table 2"));
                }
            } else {
                out.comparisons.push(Comparison::new(metric, params(w, m), *v, None, unit, "Table 2"));
            }
        }
        out.runs.push(run);
    }
    out.notes.push(rows.into());
    out.notes.push(
        "Sampling: at every packet arrival, before its mapping. Mean sub-table length counts only non-empty slots (as the paper's does); P(>1) is the fraction of all slots holding more than one flow; alpha = mean active flows / M; worst = the longest sub-table at any arrival.".into(),
    );
    out
}

/// dqs Table 3: physical queues needed at load 0.95.
pub fn table3(opts: RunOptions, g: &Grid, progress: &mut dyn FnMut(f64)) -> Output {
    let mut out = Output::default();
    let ws = workloads(opts, g, &mut out);
    let m: u32 = g.value("links", "slots");
    let rs = sweep(&ws, &[m], false, opts, progress);
    let mut rows = Table::new([
        "workload",
        "flows",
        "mean rate (Mb/s)",
        "capacity (Mb/s)",
        "peak 10 ms / mean",
        "max queues",
        "mean queues",
    ]);
    for t in PAPER_TRACES {
        let at = [("workload", json!("ndpi")), ("paper_trace", json!(t))];
        let cell = |m: &str| stated_at(PAPER_TABLE3, m, &at).map_or("—".into(), |x| x.to_string());
        rows.row([
            format!("paper {t}"),
            "n/a".to_string(),
            cell("mean_rate_mbps"),
            cell("capacity_mbps"),
            "n/a".to_string(),
            cell("max_queues"),
            cell("mean_queues"),
        ]);
    }
    for (w, r) in ws.iter().zip(&rs) {
        let w = w.name();
        let run = link_run(w.into(), w, m, r);
        rows.row([
            format!("ours {w}"),
            r.flows_activated.to_string(),
            format!("{:.2}", r.offered_bps / 1e6),
            format!("{:.2}", r.capacity_bps / 1e6),
            format!("{:.1}", r.peak_10ms_bps / r.offered_bps),
            r.max_queues.to_string(),
            format!("{:.1}", r.mean_queues),
        ]);
        let p = BTreeMap::from([("workload".into(), json!(w))]);
        for (metric, v) in [("max_queues", r.max_queues as f64), ("mean_queues", r.mean_queues)] {
            if w == "ndpi" {
                for trace in PAPER_TRACES {
                    let mut pp = p.clone();
                    pp.insert("paper_trace".into(), json!(trace));
                    out.comparisons.push(Comparison::new(metric, pp, v, None, "queues", "Table 3"));
                }
            } else {
                out.comparisons.push(Comparison::new(metric, p.clone(), v, None, "queues", "Table 3"));
            }
        }
        out.comparisons.push(Comparison::new(
            "flows_in_trace",
            p.clone(),
            r.flows_activated as f64,
            None,
            "flow activations",
            "Table 3",
        ));
        out.runs.push(run);
    }
    out.notes.push(rows.into());
    out.notes.push("Mean queues is the time average of the physical queues in use between the first and the last arrival. Queue numbers do not depend on M (the mapping does not change which packets are buffered).".into());
    out
}

/// dqs Figs 5-8: search and update cycles vs M beside Theorems 1-2, overall cycles per packet,
/// and the CDF of cycles at M = 256.
pub fn fig5_8(opts: RunOptions, g: &Grid, progress: &mut dyn FnMut(f64)) -> Output {
    let mut out = Output::default();
    let ws = workloads(opts, g, &mut out);
    let slots: Vec<u32> = g.values("links", "slots");
    let rs = sweep(&ws, &slots, false, opts, progress);
    let n = slots.len();
    let mut rows = Table::new([
        "workload",
        "M",
        "search: measured / Thm 1 as printed / exact per flow",
        "update: measured / Thm 2 bound / exact",
        "overall cycles per packet",
    ]);
    let mut f5: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut f6: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut f7: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for (wi, w) in ws.iter().enumerate() {
        let w = w.name();
        let mut lines: [Vec<(f64, f64)>; 7] = Default::default();
        for (mi, &m) in slots.iter().enumerate() {
            fig5_7_at(&mut out, &mut rows, &mut lines, w, m, &rs[wi * n + mi]);
        }
        let names =
            ["measured", "Theorem 1 as printed", "exact, per flow", "measured", "Theorem 2 bound", "exact", "overall"];
        for (k, l) in lines.into_iter().enumerate() {
            let legend = format!("{w}: {}", names[k]);
            match k {
                0..=2 => f5.push((legend, l)),
                3..=5 => f6.push((legend, l)),
                _ => f7.push((legend, l)),
            }
        }
        // Fig. 8: CDF of cycles at M = 256.
        fig8(&mut out, w, &rs[wi * n + slots.iter().position(|&m| m == 256).expect("256 in the sweep")]);
    }
    for (name, title, y, lines) in [
        ("fig5", "dqs Fig. 5: nodes compared to find an active flow", "nodes compared", f5),
        ("fig6", "dqs Fig. 6: nodes compared to identify a new flow", "nodes compared", f6),
        ("fig7", "dqs Fig. 7: cycles per packet (1 hash + nodes compared)", "cycles", f7),
    ] {
        out.plots.push(PlotSpec {
            name: name.into(),
            title: title.into(),
            x_label: "AFM slots M".into(),
            y_label: y.into(),
            lines,
            kind: PlotKind::Lines,
            log_x: true,
            log_y: false,
            ..Default::default()
        });
    }
    out.notes.push(rows.into());
    out.notes.push("Theorem columns are averaged over the lookups, each at the number of active flows l when it happened. 'Theorem 1 as printed' averages SL_k over slots (empty slots count 0); 'exact per flow' is what a search for a uniformly chosen active flow costs in random BSTs (its slot holds it and Binomial(l-1, 1/M) others). 'Theorem 2' is the paper's height bound; 'exact' the random-BST unsuccessful search length 2(H_{k+1} - 1).".into());
    out.assumptions.push("One cycle for the hash and one per node compared (dqs section 6). A new flow in an empty slot costs the hash cycle only.".into());
    out
}

/// dqs Figs 9-13: normalised throughput and task-queue buffer of SPSQ, MPSQ and MPMQ vs
/// speedup (M = 64) and vs M (speedup 8).
pub fn fig9_13(opts: RunOptions, g: &Grid, progress: &mut dyn FnMut(f64)) -> Output {
    let mut out = Output::default();
    let ws = workloads(opts, g, &mut out);
    let slots: Vec<u32> = g.values("links", "slots");
    let rs = sweep(&ws, &slots, true, opts, &mut |x| progress(0.6 * x));
    fig9_by_speedup(opts, g, &ws, &mut out, &mut |x| progress(0.6 + 0.4 * x));
    let speedups: Vec<f64> = g.values("by speedup", "speedup");
    let (sp_slots, m_speedup): (u32, f64) = (g.value("by speedup", "slots"), g.value("by M", "speedup"));
    let models = [ProcModel::Spsq, ProcModel::Mpsq, ProcModel::Mpmq];
    let mut ratio_plots = mpmq_over_spsq_plots(sp_slots, m_speedup);
    let mut rows = Table::new([
        "workload",
        "M",
        "speedup",
        "SPSQ thr / buffer KB",
        "MPSQ",
        "MPMQ (buffer = M x largest queue; peak total)",
        "MPMQ / SPSQ",
    ]);
    for (wi, w) in ws.iter().enumerate() {
        let w = w.name();
        let mut thr_s: Vec<(String, Vec<(f64, f64)>)> =
            models.iter().map(|m| (format!("{w} {}", m.name()), vec![])).collect();
        let mut buf_s = thr_s.clone();
        let mut thr_m = thr_s.clone();
        let mut buf_m = thr_s.clone();
        // MPMQ / SPSQ throughput (the paper's "about 5x"): (x, ratio, params) by speedup and by M.
        let (mut ratio_s, mut ratio_m) = (Vec::new(), Vec::new());
        let mut emit = |m: u32,
                        sp: f64,
                        reqs: &[crate::models::dqs::Request],
                        by_speedup: bool,
                        out: &mut Output,
                        rows: &mut Table| {
            let res: Vec<_> = models.iter().map(|&pm| process(pm, reqs, m, sp)).collect();
            for (k, r) in res.iter().enumerate() {
                let x = if by_speedup { sp } else { m as f64 };
                let (t, b) = if by_speedup { (&mut thr_s, &mut buf_s) } else { (&mut thr_m, &mut buf_m) };
                t[k].1.push((x, r.throughput));
                b[k].1.push((x, r.buffer_bytes / 1024.0));
                let mut p = params(w, m);
                p.insert("speedup".into(), json!(sp));
                p.insert("model".into(), json!(models[k].name()));
                let fig = if by_speedup { "Figs 10-11" } else { "Figs 12-13" };
                out.comparisons.push(Comparison::new(
                    "normalised_throughput",
                    p.clone(),
                    r.throughput,
                    None,
                    "ratio",
                    fig,
                ));
                out.comparisons.push(Comparison::new("task_queue_buffer", p, r.buffer_bytes / 1024.0, None, "KB", fig));
            }
            let ratio = res[2].throughput / res[0].throughput;
            let mut p = params(w, m);
            p.insert("speedup".into(), json!(sp));
            let x = if by_speedup { sp } else { m as f64 };
            if by_speedup { &mut ratio_s } else { &mut ratio_m }.push((x, ratio, p.clone()));
            out.comparisons.push(Comparison::new(
                "mpmq_over_spsq_throughput",
                p,
                ratio,
                None,
                "ratio",
                "Fig. 10 (text: MPMQ about 5x SPSQ)",
            ));
            rows.row([
                w.to_string(),
                m.to_string(),
                sp.to_string(),
                format!("{:.3} / {:.2}", res[0].throughput, res[0].buffer_bytes / 1024.0),
                format!("{:.3} / {:.2}", res[1].throughput, res[1].buffer_bytes / 1024.0),
                format!(
                    "{:.3} / {:.2}; {:.2}",
                    res[2].throughput,
                    res[2].buffer_bytes / 1024.0,
                    res[2].peak_total_bytes / 1024.0
                ),
                format!("{:.2}", ratio),
            ]);
        };
        let n = slots.len();
        let i64 = slots.iter().position(|&m| m == sp_slots).expect("the speedup sweep's M is a recorded link");
        for &sp in &speedups {
            emit(sp_slots, sp, &rs[wi * n + i64].requests, true, &mut out, &mut rows);
        }
        for (mi, &m) in slots.iter().enumerate() {
            emit(m, m_speedup, &rs[wi * n + mi].requests, false, &mut out, &mut rows);
        }
        fig10_13_plots(&mut out, w, [thr_s, buf_s, thr_m, buf_m]);
        for (mi, &m) in slots.iter().enumerate() {
            out.runs.push(link_run(format!("{w} M={m}"), w, m, &rs[wi * n + mi]));
        }
        ratio_plots[0].lines.push((w.to_string(), ratio_s.iter().map(|r| (r.0, r.1)).collect()));
        ratio_plots[1].lines.push((w.to_string(), ratio_m.iter().map(|r| (r.0, r.1)).collect()));
        for (plot, points) in ratio_plots.iter_mut().zip([&ratio_s, &ratio_m]) {
            for (x, _, p) in points {
                plot.mark(w, "mpmq_over_spsq_throughput", p, Place::AtX(*x));
            }
        }
    }
    out.plots.extend(ratio_plots);
    out.notes.push(rows.into());
    out.assumptions.push("Processing models (dqs section 5, Figs 10-13): time in mapping cycles; request i arrives at i / speedup (speedup = enqueue rate / dequeue rate, one dequeue per cycle); the request sequence (sub-table, nodes compared, new flow) is the one recorded in the load-0.95 DRR run, so in Figs 10-13 the AFM state does not depend on the speedup. Fig. 9 runs the flow table itself at each speedup instead (next assumption).".into());
    out.assumptions.push("Fig. 9: the DRR link model with its output rate set to the arrival rate / speedup (offered load = speedup), M = 64, the same arrivals and table (64Ki queues, 1Mi 64-byte blocks; arrivals that find the buffer full are dropped and counted): a flow stays in the table while it has packets queued, so a speedup above 1 builds a backlog, more flows are active, and every lookup searches a fuller table. The paper measures on NLANR1, which we do not have.".into());
    out.assumptions.push("A search occupies its mapping process max(1, nodes compared) cycles; a new flow then takes one cycle of the single queue allocator, granted in request order (the paper: allocation is serial). SPSQ does the allocation in its one process. The hash is pipelined before the task queue.".into());
    out.assumptions.push(format!("A task-queue entry is {} bytes (13-byte 5-tuple, 2-byte sequence tag, 1-byte sub-table id); MPMQ memory is M x the largest task queue, as the paper computes it (peak of the sum also shown). Normalised throughput = (requests / arrival span) / (requests / output span).", crate::models::dqs::REQUEST_BYTES));
    out
}

/// dqs Figs 5-7 at one (workload, M) point: its curve points, table row, comparisons and run.
fn fig5_7_at(out: &mut Output, rows: &mut Table, lines: &mut [Vec<(f64, f64)>; 7], w: &str, m: u32, r: &DqsLinkResult) {
    let x = m as f64;
    let (s, u) = (&r.search, &r.update);
    lines[0].push((x, s.mean_measured()));
    lines[1].push((x, s.mean_paper()));
    lines[2].push((x, s.mean_exact()));
    lines[3].push((x, u.mean_measured()));
    lines[4].push((x, u.mean_paper()));
    lines[5].push((x, u.mean_exact()));
    lines[6].push((x, r.mean_cycles()));
    rows.row([
        w.to_string(),
        m.to_string(),
        format!("{:.3} / {:.3} / {:.3}", s.mean_measured(), s.mean_paper(), s.mean_exact()),
        format!("{:.3} / {:.3} / {:.3}", u.mean_measured(), u.mean_paper(), u.mean_exact()),
        format!("{:.3}", r.mean_cycles()),
    ]);
    let p = params(w, m);
    out.comparisons.push(Comparison::new(
        "search_nodes_compared",
        p.clone(),
        s.mean_measured(),
        None,
        "nodes",
        "Fig. 5",
    ));
    out.comparisons.push(Comparison::new(
        "search_theorem1_as_printed",
        p.clone(),
        s.mean_paper(),
        None,
        "nodes",
        "Theorem 1 (eq 3)",
    ));
    out.comparisons.push(Comparison::new(
        "search_exact_per_flow",
        p.clone(),
        s.mean_exact(),
        None,
        "nodes",
        "Lemma 1, eq 2 (our per-flow weighting)",
    ));
    out.comparisons.push(Comparison::new(
        "update_nodes_compared",
        p.clone(),
        u.mean_measured(),
        None,
        "nodes",
        "Fig. 6",
    ));
    out.comparisons.push(Comparison::new(
        "update_theorem2_bound",
        p.clone(),
        u.mean_paper(),
        None,
        "nodes",
        "Theorem 2 (eq 4)",
    ));
    out.comparisons.push(Comparison::new(
        "update_exact",
        p.clone(),
        u.mean_exact(),
        None,
        "nodes",
        "random-BST unsuccessful search, eq 2",
    ));
    out.comparisons.push(Comparison::new("overall_cycles_per_packet", p, r.mean_cycles(), None, "cycles", FIG7_SOURCE));
    out.runs.push(link_run(format!("{w} M={m}"), w, m, r));
}

/// dqs Fig. 8 for workload `w`: the CDF of cycles per packet in run `r` (M = 256).
fn fig8(out: &mut Output, w: &str, r: &DqsLinkResult) {
    let total: u64 = r.cycles_hist.iter().sum();
    let mut acc = 0u64;
    let mut cdf = Vec::new();
    for (c, &k) in r.cycles_hist.iter().enumerate().skip(1) {
        acc += k;
        cdf.push((c as f64, acc as f64 / total.max(1) as f64));
    }
    let frac = |c: usize| cdf.get(c.wrapping_sub(1)).map_or(1.0, |p| p.1);
    let p256 = params(w, 256);
    out.comparisons.push(Comparison::new("cdf_cycles_le_1", p256.clone(), frac(1), None, "fraction", FIG8_SOURCE));
    out.comparisons.push(Comparison::new("cdf_cycles_le_2", p256.clone(), frac(2), None, "fraction", FIG8_SOURCE));
    out.comparisons.push(Comparison::new(
        "max_cycles",
        p256,
        (r.cycles_hist.len() - 1) as f64,
        None,
        "cycles",
        FIG8_SOURCE,
    ));
    out.plots.push(PlotSpec {
        name: format!("fig8_{w}"),
        title: format!("dqs Fig. 8: CDF of cycles per packet, M = 256 ({w})"),
        x_label: "cycles (hash + nodes compared)".into(),
        y_label: "fraction of packets".into(),
        lines: vec![(w.into(), cdf)],
        kind: PlotKind::Lines,
        log_x: false,
        log_y: false,
        ..Default::default()
    });
}

/// dqs Fig. 9: runs the flow table at each speedup on the worker threads and reports it.
fn fig9_by_speedup(opts: RunOptions, g: &Grid, ws: &[Workload], out: &mut Output, progress: &mut dyn FnMut(f64)) {
    // Fig. 9: the flow table itself at enqueue rate = speedup x dequeue rate (the link at load
    // = speedup), so the table's state, and with it the search and update cost, follows the
    // backlog the speedup builds.
    let f9_speedups: Vec<f64> = g.values("fig 9", "speedup");
    let f9_slots: u32 = g.value("fig 9", "slots");
    let f9_points: Vec<(usize, f64)> = (0..ws.len()).flat_map(|w| f9_speedups.iter().map(move |&sp| (w, sp))).collect();
    let f9 = super::par_map(
        opts.threads,
        &f9_points,
        |&(w, sp), prog| ws[w].run_at(f9_slots, sp, false, opts.seed, prog),
        progress,
    );
    fig9(out, ws, &f9_points, &f9, f9_slots);
}

/// The MPMQ / SPSQ throughput plots of Figs 10 and 12, without curves yet.
fn mpmq_over_spsq_plots(sp_slots: u32, m_speedup: f64) -> [PlotSpec; 2] {
    [
        PlotSpec {
            name: "fig10_mpmq_over_spsq".into(),
            title: format!("dqs Fig. 10: MPMQ / SPSQ throughput vs speedup, M = {sp_slots}"),
            x_label: "speedup".into(),
            y_label: "MPMQ throughput / SPSQ throughput".into(),
            ..Default::default()
        },
        PlotSpec {
            name: "fig12_mpmq_over_spsq".into(),
            title: format!("dqs Fig. 12: MPMQ / SPSQ throughput vs M, speedup {m_speedup}"),
            x_label: "AFM slots M".into(),
            y_label: "MPMQ throughput / SPSQ throughput".into(),
            log_x: true,
            ..Default::default()
        },
    ]
}

/// A plot's named curves (`PlotSpec::lines`).
type Curves = Vec<(String, Vec<(f64, f64)>)>;

/// Workload `w`'s plots of Figs 10-13: throughput and buffer by speedup, then by M.
fn fig10_13_plots(out: &mut Output, w: &str, curves: [Curves; 4]) {
    let [thr_s, buf_s, thr_m, buf_m] = curves;
    for (name, title, xl, yl, lines, log_x) in [
        (
            "fig10",
            "dqs Fig. 10: normalised throughput vs speedup, M = 64",
            "speedup",
            "normalised throughput",
            thr_s,
            false,
        ),
        ("fig11", "dqs Fig. 11: task-queue buffer vs speedup, M = 64", "speedup", "buffer (KB)", buf_s, false),
        (
            "fig12",
            "dqs Fig. 12: normalised throughput vs M, speedup 8",
            "AFM slots M",
            "normalised throughput",
            thr_m,
            true,
        ),
        ("fig13", "dqs Fig. 13: task-queue buffer vs M, speedup 8", "AFM slots M", "buffer (KB)", buf_m, true),
    ] {
        out.plots.push(PlotSpec {
            name: format!("{name}_{w}"),
            title: format!("{title} ({w})"),
            x_label: xl.into(),
            y_label: yl.into(),
            lines,
            kind: PlotKind::Lines,
            log_x,
            log_y: false,
            ..Default::default()
        });
    }
}

/// dqs Fig. 9: nodes compared per search (a known flow) and per update (a new flow's insert)
/// against the speedup, one plot per workload, with the mean active flows and drops in a table.
fn fig9(out: &mut Output, ws: &[Workload], points: &[(usize, f64)], rs: &[DqsLinkResult], slots: u32) {
    let mut t = Table::new([
        "workload",
        "speedup",
        "search (nodes)",
        "update (nodes)",
        "mean active flows",
        "dropped (buffer full / no queue)",
    ])
    .captioned(format!(
        "dqs Fig. 9: the flow table run at enqueue rate = speedup x dequeue rate (M = {slots}); nodes compared per lookup of a known flow (search) and per new flow's insert (update)."
    ));
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for (&(w, sp), r) in points.iter().zip(rs) {
        let name = ws[w].name();
        let mean = |b: &crate::models::dqs::Beside| if b.count > 0 { b.measured / b.count as f64 } else { 0.0 };
        let (search, update) = (mean(&r.search), mean(&r.update));
        let active = r.sum_active / r.samples.max(1) as f64;
        t.row([
            name.to_string(),
            sp.to_string(),
            format!("{search:.3}"),
            format!("{update:.3}"),
            format!("{active:.1}"),
            format!("{} / {}", r.dropped_buffer_full, r.dropped_no_queue),
        ]);
        for (label, v) in [("search", search), ("update", update)] {
            let curve = format!("{name} {label}");
            match lines.iter_mut().find(|l| l.0 == curve) {
                Some(l) => l.1.push((sp, v)),
                None => lines.push((curve, vec![(sp, v)])),
            }
        }
        let mut p = params(name, slots);
        p.insert("speedup".into(), json!(sp));
        for (metric, v, unit) in [
            ("fig9_search_nodes", search, "nodes"),
            ("fig9_update_nodes", update, "nodes"),
            ("fig9_mean_active_flows", active, "flows"),
        ] {
            out.comparisons.push(Comparison::new(metric, p.clone(), v, None, unit, "Fig. 9 (plotted only)"));
        }
    }
    out.notes.push(t.into());
    out.plots.push(PlotSpec {
        name: "fig9".into(),
        title: format!("dqs Fig. 9: nodes compared per search and per update vs speedup, M = {slots}"),
        x_label: "speedup (enqueue rate / dequeue rate)".into(),
        y_label: "nodes compared".into(),
        lines,
        kind: PlotKind::Lines,
        ..Default::default()
    });
}

mod declare;
mod scale;
pub use declare::*;
use declare::{FIG7_SOURCE, FIG8_SOURCE};
pub use scale::scale;

#[cfg(test)]
mod tests;
