//! The registry of reproducible experiments (`npqos reproduce ID`). Each experiment runs our
//! model, and returns our numbers beside the paper's with the source of each.
//!
//! Ids are `<paper short name>-<figure or table>`. The kim experiments live in [`kim`].

pub mod dqs;
pub mod everest;
pub mod kim;
pub mod kim_heap;
pub mod kim_load;
pub mod predictive;
pub mod predictive_lap;
pub mod qcache;
pub mod qcache_sim;

use crate::results::{Comparison, Output, PlotKind, PlotSpec, RunResult};
use crate::rng::RngStreams;
use crate::workload::{mean_gap_for_overload, Arrivals, GapDist, SizeDist, KIM_IMIX};
use npqos_core::Rate;
use serde_json::json;
use std::collections::BTreeMap;

/// What runs one experiment: our numbers, the paper's beside them, plots and assumptions.
pub type Runner = fn(RunOptions, &mut dyn FnMut(f64)) -> Output;

/// An experiment: its id (`npqos reproduce ID`), the line `npqos list` shows, and its runner.
#[derive(Clone, Copy)]
pub struct ExperimentInfo {
    pub id: &'static str,
    pub description: &'static str,
    pub run: Runner,
}

impl std::fmt::Debug for ExperimentInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExperimentInfo").field("id", &self.id).field("description", &self.description).finish()
    }
}

/// Every experiment, in `npqos list` order: the one list of experiment ids.
pub const EXPERIMENTS: &[ExperimentInfo] = &[
    ExperimentInfo {
        id: "kim-table1",
        description: "kim Table I IMIX packet sizes and eqs 15-16 overload factor: generated vs specified", run: kim_table1 },
    ExperimentInfo { id: "kim-fig7", description: "kim Fig. 7: periodic-fill read-modify-writes in 10 s, 1e3..1e6 queues, 100 us..10 ms", run: |o, _| kim::fig7(o) },
    ExperimentInfo {
        id: "kim-table2",
        description: "kim Table II: off-chip heap accesses (2/4/8 KB locked) and reschedules in 10 s, 1e3..1e6 queues; reduction vs periodic fill", run: kim::table2 },
    ExperimentInfo { id: "kim-fig8", description: "kim Fig. 8: mean and max heap size per core, 100 cores, 1e3..1e6 queues, overload 1", run: kim::fig8 },
    ExperimentInfo {
        id: "kim-table10",
        description: "kim Table X / Fig. 10: stochastic model vs simulated heap size per core, constant arrivals, uniform and IMIX", run: kim::table10 },
    ExperimentInfo {
        id: "kim-table4-5",
        description: "kim Tables IV-V: heap insert/delete comparisons, moves and ns per operation vs queues and overload", run: kim_heap::table45 },
    ExperimentInfo {
        id: "kim-table6-7",
        description: "kim Tables VI-VII: data-cache misses per heap insert/delete with 2/4/8 KB locked, 1e6 queues, overload 1.29", run: kim_heap::table67 },
    ExperimentInfo {
        id: "kim-fig9",
        description: "kim Fig. 9: reschedules and heap size vs overload, all queues oversubscribed, 4 size x arrival combinations", run: kim_load::fig9 },
    ExperimentInfo {
        id: "kim-fig11",
        description: "kim Fig. 11: adaptive reschedule threshold under periodic overload (1 / 3.85), delta_th 2, 3, 4", run: kim_load::fig11 },
    ExperimentInfo {
        id: "kim-delay",
        description: "kim section 5.2.3: mean packet delay, event-driven vs periodic fill (1 ms), overload 0.9 and 0.95", run: kim_load::delay },
    ExperimentInfo { id: "kim-fig12", description: "kim Fig. 12: reschedules per queue and mean heap size vs alpha (500-4500 B) at overload 1.29", run: kim::fig12 },
    ExperimentInfo {
        id: "dqs-table2",
        description: "dqs Table 2: sub-table lengths, alpha, P(>1) for M = 64/256/1024 at load 0.95 with DRR (nDPI corpus, synthetic)", run: dqs::table2 },
    ExperimentInfo { id: "dqs-table3", description: "dqs Table 3: maximum and mean physical queues needed at load 0.95", run: dqs::table3 },
    ExperimentInfo {
        id: "dqs-fig5-8",
        description: "dqs Figs 5-8: search/update cycles vs M beside Theorems 1-2, cycles per packet, CDF at M = 256", run: dqs::fig5_8 },
    ExperimentInfo {
        id: "dqs-fig9-13",
        description: "dqs Figs 9-13: SPSQ/MPSQ/MPMQ normalised throughput and task-queue buffer vs speedup (M = 64) and vs M (speedup 8)", run: dqs::fig9_13 },
    ExperimentInfo { id: "dqs-scale", description: "dqs: 1e6 in-progress flows, queues only for active ones; AFM memory (eq 5) vs brute force", run: dqs::scale },
    ExperimentInfo {
        id: "everest-fig3a",
        description: "everest Fig. 3(a): % packets later than D vs D, 8 schedulers, 16 processors, t_sw 2 ms; Everest vs the others", run: everest::fig3a },
    ExperimentInfo { id: "everest-fig3b", description: "everest Fig. 3(b): queue-length CDF at D = t_sw = 2 ms, 8 schedulers", run: everest::fig3b },
    ExperimentInfo { id: "everest-fig3c", description: "everest Fig. 3(c): context switches per second vs D, 8 schedulers", run: everest::fig3c },
    ExperimentInfo { id: "everest-fig3d", description: "everest Fig. 3(d): % packets later than D vs processors (D = t_sw = 2 ms)", run: everest::fig3d },
    ExperimentInfo {
        id: "everest-fig4",
        description: "everest Fig. 4: % late vs t_sw / D for D = 500 us and 2 ms; everest-adaptive vs the better of Everest and Everest-AE", run: everest::fig4 },
    ExperimentInfo { id: "everest-fig5", description: "everest Fig. 5: mean delay vs t_sw / D at D = 2 ms", run: everest::fig5 },
    ExperimentInfo {
        id: "predictive-fig5-7",
        description: "predictive Figs. 5-7: per-packet delays of a forwarding, a CAST (200 B) and an FEC flow, SFQ vs EFQ vs WF2Q+, with the eq 13 / eq 18 bounds", run: predictive::fig5_7 },
    ExperimentInfo {
        id: "predictive-fig8",
        description: "predictive Fig. 8: mean misordering delay per flow vs mean processing time (SFQ biased, EFQ near zero)", run: predictive::fig8 },
    ExperimentInfo {
        id: "predictive-fig9",
        description: "predictive Fig. 9: processors per application around a load change (equal -> 80/10/10), FCFS vs LAP, 16 processors, q = 64", run: predictive_lap::fig9 },
    ExperimentInfo {
        id: "predictive-fig10-12",
        description: "predictive Figs. 10-12: throughput vs T-Opt, cold-cache fraction and order variation vs q, LAP vs FCFS, 30 applications", run: predictive_lap::fig10_12 },
    ExperimentInfo {
        id: "predictive-switch",
        description: "predictive section 6: EFQ / EFQ+warm processors / LAP / EFQ-LAP switching on queued work, under bursts in and out of overload", run: predictive_lap::switch },
    ExperimentInfo {
        id: "qcache-table5",
        description: "qcache Table 5: enqueue/dequeue latency on hit and miss for nc, dc, sqc, qc, derived from Table 1", run: qcache::table5 },
    ExperimentInfo { id: "qcache-fig5", description: "qcache Fig. 5: throughput and hit rate vs threads (1-32), uniformly random traffic (R)", run: qcache_sim::fig5 },
    ExperimentInfo {
        id: "qcache-fig6",
        description: "qcache Fig. 6: SD1_30 vs threads; throughput at 32 threads vs the dominating queue's weight (5-100%)", run: qcache_sim::fig6 },
    ExperimentInfo {
        id: "qcache-fig7",
        description: "qcache Fig. 7: SD16_90 vs threads; 32 threads vs dominating-set size (1-256); backlog sensitivity", run: qcache_sim::fig7 },
    ExperimentInfo { id: "qcache-fig8", description: "qcache Fig. 8: exponentially weighted queues L1.1 and L1.01 vs threads", run: qcache_sim::fig8 },
    ExperimentInfo {
        id: "qcache-fig9",
        description: "qcache Fig. 9: real-trace workloads (nDPI corpus as edge / 32 overlaid copies as core) vs threads", run: qcache_sim::fig9 },
    ExperimentInfo {
        id: "qcache-fig10",
        description: "qcache Fig. 10 / section 5.1: inter-arrival distance distributions with loss and gain thresholds", run: qcache_sim::fig10 },
    ExperimentInfo { id: "qcache-worstcase", description: "qcache section 4.6: every operation on one queue, qc vs nc, sqc, dc", run: qcache_sim::worstcase },
    ExperimentInfo {
        id: "qcache-model",
        description: "qcache section 3.6: analytical model vs simulated throughput, every workload and subsystem, 8 and 32 threads", run: qcache_sim::model },
    ExperimentInfo { id: "qcache-scale", description: "qcache: 1e7 operations on 32 threads through each subsystem; wall-clock per run", run: qcache_sim::scale },
    ExperimentInfo {
        id: "everest-scale",
        description: "everest: 60 M packets (UNC-10's size) through 16 processors, 6 services, every scheduler; wall-clock per run", run: everest::scale },
];

/// Options common to all experiments.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    pub quick: bool,
    pub seed: u64,
    /// Worker threads for an experiment's points ([`par_map`]); results do not depend on it.
    pub threads: usize,
}

/// The options of the `--quick` tests.
#[cfg(test)]
pub(crate) fn quick() -> RunOptions {
    RunOptions { quick: true, seed: 1, threads: 2 }
}

/// Runs experiment `id`; `None` if there is no such experiment. The output carries the id.
pub fn run(id: &str, opts: RunOptions, progress: &mut dyn FnMut(f64)) -> Option<Output> {
    let e = EXPERIMENTS.iter().find(|e| e.id == id)?;
    let mut out = (e.run)(opts, progress);
    out.id = e.id.to_string();
    Some(out)
}

/// The grid runner every experiment uses: maps `f` over `items` (an experiment's points) on
/// `threads` worker threads (at least one); results come back in input order whatever the
/// scheduling, so output does not depend on the thread count or timing. `f` gets a progress callback
/// (0..1 of its item); this thread reports the mean over items.
pub(crate) fn par_map<T: Sync, R: Send>(
    threads: usize,
    items: &[T],
    f: impl Fn(&T, &mut dyn FnMut(f64)) -> R + Sync,
    progress: &mut dyn FnMut(f64),
) -> Vec<R> {
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::sync::Mutex;
    let next = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let done: Vec<AtomicU64> = items.iter().map(|_| AtomicU64::new(0)).collect();
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, items.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= items.len() {
                    return;
                }
                let r = f(&items[i], &mut |x| done[i].store(x.to_bits(), Ordering::Relaxed));
                results.lock().expect("no worker panicked")[i] = Some(r);
                done[i].store(1f64.to_bits(), Ordering::Relaxed);
                finished.fetch_add(1, Ordering::Relaxed);
            });
        }
        while finished.load(Ordering::Relaxed) < items.len() {
            std::thread::sleep(std::time::Duration::from_millis(100));
            let sum: f64 = done.iter().map(|d| f64::from_bits(d.load(Ordering::Relaxed))).sum();
            progress(sum / items.len().max(1) as f64);
        }
    });
    results.into_inner().expect("no worker panicked").into_iter().map(|r| r.expect("every item ran")).collect()
}

/// kim Table I and eqs 15-16.
///
/// * Draws packet sizes from our IMIX generator and compares the fraction of each size with the
///   ratio of Table I.
/// * For each IMIX overload factor of kim Table X, generates exponential inter-arrivals with the
///   mean from eq 16 for a queue shaped to 100 Gbps / 1,000,000 queues = 100 kbps (the paper's
///   full-scale setting) and measures input rate / output rate (eq 15) over the generated packets.
fn kim_table1(opts: RunOptions, progress: &mut dyn FnMut(f64)) -> Output {
    let streams = RngStreams::new(opts.seed);
    let n_sizes: u64 = if opts.quick { 1_000_000 } else { 100_000_000 };
    let n_gaps: u64 = if opts.quick { 200_000 } else { 20_000_000 };
    let imix = SizeDist::kim_imix();
    let mut counts: BTreeMap<u32, u64> = BTreeMap::new();
    let mut rng = streams.stream("kim-table1.sizes", 0);
    let mut sum = 0u64;
    for i in 0..n_sizes {
        let s = imix.sample(&mut rng);
        *counts.entry(s).or_default() += 1;
        sum += s as u64;
        if i % (1 << 20) == 0 {
            progress(0.5 * i as f64 / n_sizes as f64);
        }
    }
    let mut out = Output::default();
    let mut run =
        RunResult { label: "imix".into(), complete: true, stop_reason: "drained".into(), ..Default::default() };
    run.params.insert("packets".into(), json!(n_sizes));
    let mut ours_line = Vec::new();
    let mut paper_line = Vec::new();
    for (size, tenths) in KIM_IMIX {
        let frac = *counts.get(&size).unwrap_or(&0) as f64 / n_sizes as f64 * 100.0;
        run.scalar(&format!("imix_percent_{size}B"), frac, "%");
        out.comparisons.push(Comparison {
            metric: "imix_percent".into(),
            params: BTreeMap::from([("size_bytes".into(), json!(size))]),
            ours: frac,
            paper: Some(tenths as f64 / 10.0),
            unit: "%".into(),
            source: "Table I".into(),
        });
        ours_line.push((size as f64, frac));
        paper_line.push((size as f64, tenths as f64 / 10.0));
    }
    let mean = sum as f64 / n_sizes as f64;
    run.scalar("imix_mean_size", mean, "B");
    out.comparisons.push(Comparison {
        metric: "imix_mean_size".into(),
        params: BTreeMap::new(),
        ours: mean,
        paper: None,
        unit: "B".into(),
        source: "Table I (the paper states no mean; exact mean of the table is 514.882 B)".into(),
    });

    let share = Rate::gbps(100).share(1_000_000);
    let mut grng = streams.stream("kim-table1.gaps", 0);
    let mut srng = streams.stream("kim-table1.gap-sizes", 0);
    let mut ovl_line = Vec::new();
    let targets = [1.1, 1.29, 1.72, 2.57, 5.15];
    for (k, &target) in targets.iter().enumerate() {
        let gap = mean_gap_for_overload(imix.mean(), share, target).expect("positive");
        let mut arr = Arrivals::new(&GapDist::Exponential, gap).expect("valid");
        let (mut t, mut bytes) = (0u64, 0u64);
        for _ in 0..n_gaps {
            t += arr.next_gap(&mut grng).as_nanos();
            bytes += imix.sample(&mut srng) as u64;
        }
        let measured = bytes as f64 * 8.0 / (t as f64 * 1e-9) / share.bits_per_sec() as f64;
        run.scalar(&format!("overload_measured_{target}"), measured, "1");
        out.comparisons.push(Comparison {
            metric: "overload_factor".into(),
            params: BTreeMap::from([
                ("queues".into(), json!(1_000_000)),
                ("link".into(), json!("100Gbps")),
                ("packets".into(), json!(n_gaps)),
            ]),
            ours: measured,
            paper: Some(target),
            unit: "1".into(),
            source: "Table X (IMIX overload values), eqs 15-16".into(),
        });
        ovl_line.push((target, measured));
        progress(0.5 + 0.5 * (k + 1) as f64 / targets.len() as f64);
    }
    out.runs.push(run);
    out.plots.push(PlotSpec {
        name: "imix".into(),
        title: "kim Table I: IMIX packet sizes, generated vs table".into(),
        x_label: "packet size (B)".into(),
        y_label: "share of packets (%)".into(),
        lines: vec![("ours".into(), ours_line), ("paper (Table I)".into(), paper_line)],
        kind: PlotKind::Points,
        log_x: true,
        log_y: false,
    });
    out.plots.push(PlotSpec {
        name: "overload".into(),
        title: "kim eqs 15-16: measured vs specified overload".into(),
        x_label: "specified overload".into(),
        y_label: "measured input / output rate".into(),
        lines: vec![("y = x".into(), targets.iter().map(|&t| (t, t)).collect()), ("ours".into(), ovl_line)],
        kind: PlotKind::Lines,
        log_x: false,
        log_y: false,
    });
    out.assumptions = vec![
        "Table I sizes are bytes on the wire and its ratios are per-packet probabilities.".into(),
        "Full-scale per-queue scheduling bandwidth is 100 Gbps / 1,000,000 queues = 100 kbps (kim section 5).".into(),
        "Inter-arrival gaps are exponential, rounded to the nearest nanosecond.".into(),
        format!("{n_sizes} sizes and {n_gaps} gaps per overload value are drawn (seed {}).", opts.seed),
    ];
    out.notes.push(
        "This experiment validates the workload generators every kim experiment depends on; it is not one of the paper's result figures. \
         The paper's numbers here are its specification (Table I ratios, Table X overload values), so agreement is expected within sampling error."
            .into(),
    );
    out.aggregate_runs();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kim_table1_quick_agrees_with_the_table() {
        let out = run("kim-table1", quick(), &mut |_| {}).unwrap();
        for c in &out.comparisons {
            if let Some(p) = c.paper {
                let tol = if c.metric == "imix_percent" { 0.2 } else { 0.02 * p };
                assert!((c.ours - p).abs() <= tol, "{} {:?}: ours {} paper {}", c.metric, c.params, c.ours, p);
            }
        }
        assert!(run("nope", quick(), &mut |_| {}).is_none());
    }

    #[test]
    fn results_do_not_depend_on_the_worker_threads() {
        let items: Vec<u64> = (0..37).collect();
        let f = |&x: &u64, p: &mut dyn FnMut(f64)| {
            p(0.5);
            (0..x * 1000).fold(x, |a, b| a.wrapping_mul(31).wrapping_add(b))
        };
        let one = par_map(1, &items, f, &mut |_| {});
        for threads in [0, 2, 5, 64] {
            assert_eq!(par_map(threads, &items, f, &mut |_| {}), one, "{threads} threads");
        }
        // A whole experiment's comparisons, on one thread and on three.
        let a = run("predictive-fig9", RunOptions { threads: 1, ..quick() }, &mut |_| {}).unwrap();
        let b = run("predictive-fig9", RunOptions { threads: 3, ..quick() }, &mut |_| {}).unwrap();
        assert_eq!(serde_json::to_string(&a.comparisons).unwrap(), serde_json::to_string(&b.comparisons).unwrap());
        assert_eq!(a.id, "predictive-fig9");
    }

    #[test]
    fn experiment_ids_are_unique() {
        let mut ids: Vec<&str> = EXPERIMENTS.iter().map(|e| e.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), EXPERIMENTS.len());
    }
}
