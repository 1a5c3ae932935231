//! qcache section 3.6 and Figure 10: the analytical model's throughput beside the simulated
//! one, and the inter-arrival distance distributions with the loss and gain thresholds. Both
//! read the same workloads (the synthetic patterns, one queue, and the nDPI corpus).

use super::*;
use crate::experiments::declare::{At, PaperValue};

/// Draws `n` operations of a workload (after its prefill), for the model and Figure 10.
fn sequence(w: &Wl, seed: u64, n: usize) -> Vec<(Op, u32)> {
    stream(w, seed).take(n).collect()
}

/// The workloads of qcache-model and qcache-fig10.
fn model_workloads(seed: u64, out: &mut Output) -> Vec<Wl> {
    let mut one = wl(Pattern::U);
    one.spec.queues = 1;
    one.label = "one queue".into();
    let mut v = vec![
        wl(Pattern::R),
        wl(Pattern::Sd { n: 1, percent: 30.0 }),
        wl(Pattern::Sd { n: 8, percent: 90.0 }),
        wl(Pattern::Sd { n: 16, percent: 90.0 }),
        wl(Pattern::L { k: 1.1 }),
        wl(Pattern::L { k: 1.01 }),
        one,
    ];
    v.extend(trace_workloads(seed, out));
    v
}

/// qcache section 3.6: the analytical model's throughput beside the simulated one.
/// The workload names of qcache-model and qcache-fig10 (the traces when the corpus is present).
fn model_workload_names() -> Vec<&'static str> {
    let mut v = vec!["R", "SD1_30", "SD8_90", "SD16_90", "L1.1", "L1.01", "one queue"];
    v.extend(trace_names());
    v
}

/// Section 3.6's grid: every workload x subsystem at 8 and 32 threads.
pub fn model_grid(quick: bool) -> Grid {
    Grid::one("runs")
        .axis("workload", "", model_workload_names())
        .axis("subsystem", "", Subsystem::ALL.map(|s| s.label()))
        .axis("threads", "threads", [8u32, 32])
        .axis("ops", "operations", [ops(quick)])
}

/// Section 5.1 says ninety percent of SD1_30's inter-arrival times are below the service time
/// (qc's loss threshold), and about half of the exponential and edge traces' below the gain
/// threshold.
#[rustfmt::skip]
pub const PAPER_FIG10: &[PaperValue] = &[
    PaperValue::new("fraction_below_loss_threshold_qc", &[("workload", At::Text("SD1_30"))], 0.9, FIG10_LOSS),
    PaperValue::new("fraction_below_gain_threshold", &[("workload", At::Text("L1.1"))], 0.5, FIG10_GAIN),
    PaperValue::new("fraction_below_gain_threshold", &[("workload", At::Text("L1.01"))], 0.5, FIG10_GAIN),
    PaperValue::new("fraction_below_gain_threshold", &[("workload", At::Text("edge"))], 0.5, FIG10_GAIN),
];
const FIG10_LOSS: &str =
    "section 5.1: 'ninety percent of the inter-arrival times are less than the service time' (single weighted queue)";
const FIG10_GAIN: &str = "section 5.1: exponential and edge traces have 'about 50 percent' below the gain threshold";

/// Fig. 10's grid: the inter-arrival distances of every workload over 400,000 operations (quick: 50,000).
pub fn fig10_grid(quick: bool) -> Grid {
    Grid::one("distances").axis("workload", "", model_workload_names()).axis(
        "ops",
        "operations",
        [if quick { 50_000usize } else { 400_000 }],
    )
}

pub fn model(opts: RunOptions, g: &Grid, progress: &mut dyn FnMut(f64)) -> Output {
    let mut out = Output::default();
    common_assumptions(&mut out);
    out.assumptions.push("Model (npqos_core::queues::model): time = Σ T_i / n + T_l with T_i the unloaded latency of each operation on its hit or miss, T_l = Σ max(0, S_prev - t(i)) the time lost waiting for the previous operation on the same queue (held S_prev: the whole operation for nc/dc/sqc, the engine for qc), t(i) from issuing operations in sequence order every T_i / n; throughput = min(N / time, 200 M refs/s / (3 - 2h)). Hits: the sequence replayed through the subsystem's cache. T_s divided by n and the step function read as the text says (docs/qcache.md).".into());
    let wls = model_workloads(opts.seed, &mut out);
    let threads: Vec<u32> = g.values("runs", "threads");
    let jobs: Vec<Job> = (0..wls.len())
        .flat_map(|i| {
            let threads = threads.clone();
            Subsystem::ALL
                .into_iter()
                .flat_map(move |sub| threads.clone().into_iter().map(move |threads| Job { wl: i, sub, threads }))
        })
        .collect();
    let n_ops: u64 = g.value("runs", "ops");
    let stats = simulate(&wls, &jobs, n_ops, opts, &mut |x| progress(0.8 * x));
    // The model sees the measured part of the same stream.
    let warm = (n_ops / 10) as usize;
    let seqs: Vec<Vec<(Op, u32)>> = wls.iter().map(|w| sequence(w, opts.seed, warm + n_ops as usize)).collect();
    let mut table = Table::new([
        "workload",
        "subsystem",
        "threads",
        "simulated (M ops/s)",
        "section 3.6 model",
        "model / simulated",
        "bounds (ours)",
        "bounds / simulated",
        "hit rate sim / model",
        "model: stalled ops, T_l share of time",
    ]);
    let mut scatter = Vec::new();
    let mut bounds_pts = Vec::new();
    for (j, st) in jobs.iter().zip(&stats) {
        let w = &wls[j.wl];
        let seq = &seqs[j.wl];
        let h = hits(j.sub, seq, 32, 128, 2).expect("a valid data-cache geometry");
        let p = ModelParams { timing: TABLE1, threads: j.threads, memory_refs_per_ns: MEM_REFS_PER_NS };
        let e = estimate(j.sub, &seq[warm..], &h[warm..], w.spec.queues, &p)
            .expect("one hit flag per operation, queue ids from the workload");
        let mut r = record(w, j, st);
        r.scalar("model_throughput", e.throughput_mops, "M ops/s");
        r.scalar("bounds_throughput", e.bounds_mops, "M ops/s");
        r.scalar("model_hit_rate", e.hit_rate, "");
        r.scalar("model_time_lost_ns", e.time_lost_ns, "ns");
        r.scalar("model_time_gained_ns", e.time_gained_ns, "ns");
        out.runs.push(r);
        let lost_share =
            e.time_lost_ns / (e.time_lost_ns + e.mean_op_ns * (seq.len() - warm) as f64 / j.threads as f64);
        table.row([
            w.label.to_string(),
            j.sub.label().to_string(),
            j.threads.to_string(),
            format!("{:.1}", st.throughput_mops),
            format!("{:.1}", e.throughput_mops),
            format!("{:.2}", e.throughput_mops / st.throughput_mops),
            format!("{:.1}", e.bounds_mops),
            format!("{:.2}", e.bounds_mops / st.throughput_mops),
            format!("{:.2} / {:.2}", st.hit_rate, e.hit_rate),
            format!("{:.2}, {:.2}", e.stalled_fraction, lost_share),
        ]);
        out.comparisons.push(Comparison::new(
            "model_over_simulated",
            params(&[("workload", json!(w.label)), ("subsystem", json!(j.sub.label())), ("threads", json!(j.threads))]),
            e.throughput_mops / st.throughput_mops,
            None,
            "x",
            "section 3.6 (the paper gives no model numbers)",
        ));
        out.comparisons.push(Comparison::new(
            "bounds_over_simulated",
            params(&[("workload", json!(w.label)), ("subsystem", json!(j.sub.label())), ("threads", json!(j.threads))]),
            e.bounds_mops / st.throughput_mops,
            None,
            "x",
            "ours (threads, memory and busiest-queue bounds; not in the paper)",
        ));
        if j.threads == 32 {
            scatter.push((st.throughput_mops, e.throughput_mops));
            bounds_pts.push((st.throughput_mops, e.bounds_mops));
        }
    }
    progress(1.0);
    out.notes.push(table.into());
    let max = scatter.iter().chain(&bounds_pts).map(|p| p.0.max(p.1)).fold(0.0, f64::max);
    out.plots.push(plot(
        "model_vs_simulation",
        "Section 3.6 model vs simulation, 32 threads (all workloads and subsystems)",
        "simulated (M ops/s)",
        "model (M ops/s)",
        vec![
            ("section 3.6 model".into(), scatter),
            ("bounds (ours)".into(), bounds_pts),
            ("y = x".into(), (0..=60).map(|i| (max * i as f64 / 60.0, max * i as f64 / 60.0)).collect()),
        ],
        PlotKind::Points,
        false,
    ));
    out.notes.push("The section 3.6 model is exact where one effect dominates: one queue (pure serialization), uniformly random traffic (pure memory bandwidth, or n / T̄ with few threads). Where several queues are hot it charges every stall in full to the total time (section 3.6 adds T_l to the parallel time), while in the simulation the other threads and the other hot queues keep going during a stall: the model is pessimistic there (down to 0.15-0.3 of the simulation). Our bounds (threads, memory, busiest queue; no queueing) are optimistic; the simulation lies between the two.".into());
    out
}

/// qcache Figure 10 / section 5.1: distribution of inter-arrival distances per workload, with
/// the loss and gain thresholds.
pub fn fig10(opts: RunOptions, grid: &Grid, progress: &mut dyn FnMut(f64)) -> Output {
    let mut out = Output::default();
    out.assumptions.push("Inter-arrival distance of an operation: operations since the previous one on the same queue (section 5.1's 'time elapsed to service all other requests between two requests for the same queue', counted in operations); a queue's first operation is left out. We plot the distribution over operations (the figure's caption speaks of per-queue averages; the text of individual inter-arrival times).".into());
    out.assumptions.push("Loss threshold at 32 threads: 32 x S̄ / T̄ operations (the queue is still held when fewer operations separate two on it; S̄ the mean hold time, T̄ the mean operation time of the subsystem). Gain threshold: 32 (the entries of the fully associative caches); reuse at a shorter distance is a guaranteed hit.".into());
    let wls = model_workloads(opts.seed, &mut out);
    let n: usize = grid.value("distances", "ops");
    let mut lines = Vec::new();
    // The paper's fractions below a threshold, drawn at the threshold: (curve, metric, params, x).
    let mut marks = Vec::new();
    let mut table = Table::new([
        "workload",
        "median distance",
        "below qc loss threshold",
        "below nc loss threshold",
        "below gain threshold (32)",
    ]);
    for (i, w) in wls.iter().enumerate() {
        let seq = sequence(w, opts.seed, n);
        let mut g: Vec<u64> =
            gaps(&seq, w.spec.queues).expect("queue ids from the workload").into_iter().filter(|&d| d > 0).collect();
        g.sort_unstable();
        let frac = |x: f64| g.partition_point(|&d| (d as f64) < x) as f64 / g.len().max(1) as f64;
        let loss = |sub: Subsystem| {
            let h = hits(sub, &seq, 32, 128, 2).expect("a valid data-cache geometry");
            let e = estimate(
                sub,
                &seq,
                &h,
                w.spec.queues,
                &ModelParams { timing: TABLE1, threads: 32, memory_refs_per_ns: MEM_REFS_PER_NS },
            )
            .expect("one hit flag per operation, queue ids from the workload");
            thresholds(&e, 32, 32).0
        };
        let (lq, ln) = (loss(Subsystem::Qc), loss(Subsystem::Nc));
        let median = g.get(g.len() / 2).copied().unwrap_or(0);
        table.row([
            w.label.to_string(),
            median.to_string(),
            format!("{:.3} (< {lq:.1})", frac(lq)),
            format!("{:.3} (< {ln:.1})", frac(ln)),
            format!("{:.3}", frac(32.0)),
        ]);
        let pr = |m: &str| params(&[("workload", json!(w.label)), ("threshold", json!(m))]);
        let src = match w.label.as_str() {
            "SD1_30" => FIG10_LOSS,
            "L1.1" | "L1.01" | "edge" => FIG10_GAIN,
            _ => "Fig. 10 (plotted only)",
        };
        out.comparisons.push(Comparison::new(
            "fraction_below_loss_threshold_qc",
            pr("loss qc"),
            frac(lq),
            None,
            "",
            src,
        ));
        out.comparisons.push(Comparison::new(
            "fraction_below_gain_threshold",
            pr("gain 32"),
            frac(32.0),
            None,
            "",
            src,
        ));
        // CDF on a log axis: distances 1, 2, 4, ... (ratio 2^(1/4)).
        let mut pts = Vec::new();
        let mut x = 1.0f64;
        let max = *g.last().unwrap_or(&1) as f64;
        while x <= max * 1.2 {
            pts.push((x, frac(x + 0.5)));
            x *= 2f64.powf(0.25);
        }
        lines.push((w.label.clone(), pts));
        marks.push((w.label.clone(), "fraction_below_loss_threshold_qc", pr("loss qc"), lq));
        marks.push((w.label.clone(), "fraction_below_gain_threshold", pr("gain 32"), 32.0));
        let mut r = RunResult { label: w.label.clone(), complete: true, events: n as u64, ..Default::default() };
        r.params.insert("workload".into(), json!(w.label));
        r.scalar("median_distance", median as f64, "ops");
        r.scalar("fraction_below_loss_qc", frac(lq), "");
        r.scalar("fraction_below_loss_nc", frac(ln), "");
        r.scalar("fraction_below_gain", frac(32.0), "");
        out.runs.push(r);
        progress((i + 1) as f64 / wls.len() as f64);
    }
    out.notes.push(table.into());
    let mut cdf = plot(
        "fig10_interarrival_cdf",
        "Inter-arrival distance (operations since the previous one on the same queue): CDF",
        "operations",
        "fraction of operations",
        lines,
        PlotKind::Lines,
        true,
    );
    for (c, metric, pr, x) in &marks {
        cdf.mark(c, metric, pr, Place::AtX(*x));
    }
    out.plots.push(cdf);
    out
}
