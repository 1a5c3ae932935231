//! The registry of reproducible experiments (`npqos reproduce ID`). Each experiment runs our
//! model, and returns our numbers beside the paper's with the source of each.
//!
//! Ids are `<paper short name>-<figure or table>`. The kim experiments live in [`kim`].

pub mod declare;
pub mod dqs;
pub mod everest;
pub mod kim;
pub mod kim_heap;
pub mod kim_load;
pub mod predictive;
pub mod predictive_lap;
pub mod qcache;
pub mod qcache_sim;
pub mod router;

use crate::results::{Comparison, Output, PlotKind, PlotSpec, RunResult};
use crate::rng::RngStreams;
use crate::workload::{mean_gap_for_overload, Arrivals, GapDist, SizeDist, KIM_IMIX};
use declare::{At, Grid, PaperValue};
use npqos_core::Rate;
use serde_json::json;
use std::collections::BTreeMap;

/// What runs one experiment's points: our numbers, plots and assumptions. It takes the grid
/// the experiment declared and leaves the paper's numbers to the runner ([`run`]).
pub type Runner = fn(RunOptions, &Grid, &mut dyn FnMut(f64)) -> Output;

/// An experiment, declared: its id (`npqos reproduce ID`), the line `npqos list` shows, its grid
/// (full or `--quick`), the numbers its paper states, and the code that runs its points.
#[derive(Clone, Copy)]
pub struct ExperimentInfo {
    pub id: &'static str,
    pub description: &'static str,
    pub grid: fn(quick: bool) -> Grid,
    pub paper: &'static [PaperValue],
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
        description: "kim Table I IMIX packet sizes and eqs 15-16 overload factor: generated vs specified",
        grid: kim_table1_grid,
        paper: PAPER_KIM_TABLE1,
        run: kim_table1,
    },
    ExperimentInfo {
        id: "kim-fig7",
        description: "kim Fig. 7: periodic-fill read-modify-writes in 10 s, 1e3..1e6 queues, 100 us..10 ms",
        grid: kim::fig7_grid,
        paper: kim::PAPER_FIG7,
        run: |_, g, _| kim::fig7(g),
    },
    ExperimentInfo {
        id: "kim-table2",
        description: "kim Table II: off-chip heap accesses (2/4/8 KB locked) and reschedules in 10 s, 1e3..1e6 queues; reduction vs periodic fill",
        grid: kim::table2_grid,
        paper: kim::PAPER_TABLE2,
        run: kim::table2,
    },
    ExperimentInfo {
        id: "kim-fig8",
        description: "kim Fig. 8: mean and max heap size per core, 100 cores, 1e3..1e6 queues, overload 1",
        grid: kim::table2_grid,
        paper: kim::PAPER_FIG8,
        run: kim::fig8,
    },
    ExperimentInfo {
        id: "kim-power",
        description: "kim Tables VIII-IX: DRAM power (total, dynamic) of periodic fill vs the event-driven scheme, 1e4..1e6 queues, from our access counts and a labelled energy model",
        grid: kim::power_grid,
        paper: kim::PAPER_POWER,
        run: kim::power,
    },
    ExperimentInfo {
        id: "kim-table10",
        description: "kim Table X / Fig. 10: stochastic model vs simulated heap size per core, constant arrivals, uniform and IMIX",
        grid: kim::table10_grid,
        paper: kim::PAPER_TABLE10,
        run: kim::table10,
    },
    ExperimentInfo {
        id: "kim-table4-5",
        description: "kim Tables IV-V: heap insert/delete comparisons, moves and ns per operation vs queues and overload",
        grid: kim_heap::table45_grid,
        paper: kim_heap::PAPER_TABLE45,
        run: kim_heap::table45,
    },
    ExperimentInfo {
        id: "kim-table6-7",
        description: "kim Tables VI-VII: data-cache misses per heap insert/delete with 2/4/8 KB locked, 1e6 queues, overload 1.29",
        grid: kim_heap::table67_grid,
        paper: kim_heap::PAPER_TABLE67,
        run: kim_heap::table67,
    },
    ExperimentInfo {
        id: "kim-fig9",
        description: "kim Fig. 9: reschedules and heap size vs overload, all queues oversubscribed, 4 size x arrival combinations",
        grid: kim_load::fig9_grid,
        paper: &[],
        run: kim_load::fig9,
    },
    ExperimentInfo {
        id: "kim-fig11",
        description: "kim Fig. 11: adaptive reschedule threshold under periodic overload (1 / 3.85), delta_th 2, 3, 4",
        grid: kim_load::fig11_grid,
        paper: &[],
        run: kim_load::fig11,
    },
    ExperimentInfo {
        id: "kim-delay",
        description: "kim section 5.2.3: mean packet delay, event-driven vs periodic fill (1 ms), overload 0.9 and 0.95",
        grid: kim_load::delay_grid,
        paper: kim_load::PAPER_DELAY,
        run: kim_load::delay,
    },
    ExperimentInfo {
        id: "kim-fig12",
        description: "kim Fig. 12: reschedules per queue and mean heap size vs alpha (500-4500 B) at overload 1.29",
        grid: kim::fig12_grid,
        paper: kim::PAPER_FIG12,
        run: kim::fig12,
    },
    ExperimentInfo {
        id: "dqs-table2",
        description: "dqs Table 2: sub-table lengths, alpha, P(>1) for M = 64/256/1024 at load 0.95 with DRR (nDPI corpus, synthetic)",
        grid: dqs::table2_grid,
        paper: dqs::PAPER_TABLE2,
        run: dqs::table2,
    },
    ExperimentInfo {
        id: "dqs-table3",
        description: "dqs Table 3: maximum and mean physical queues needed at load 0.95",
        grid: dqs::table3_grid,
        paper: dqs::PAPER_TABLE3,
        run: dqs::table3,
    },
    ExperimentInfo {
        id: "dqs-fig5-8",
        description: "dqs Figs 5-8: search/update cycles vs M beside Theorems 1-2, cycles per packet, CDF at M = 256",
        grid: dqs::fig5_8_grid,
        paper: dqs::PAPER_FIG5_8,
        run: dqs::fig5_8,
    },
    ExperimentInfo {
        id: "dqs-fig9-13",
        description: "dqs Figs 9-13: SPSQ/MPSQ/MPMQ normalised throughput and task-queue buffer vs speedup (M = 64) and vs M (speedup 8)",
        grid: dqs::fig9_13_grid,
        paper: dqs::PAPER_FIG9_13,
        run: dqs::fig9_13,
    },
    ExperimentInfo {
        id: "dqs-scale",
        description: "dqs: 1e6 in-progress flows, queues only for active ones; AFM memory (eq 5) vs brute force",
        grid: dqs::scale_grid,
        paper: dqs::PAPER_SCALE,
        run: dqs::scale,
    },
    ExperimentInfo {
        id: "everest-fig3a",
        description: "everest Fig. 3(a): % packets later than D vs D, 8 schedulers, 16 processors, t_sw 2 ms; Everest vs the others",
        grid: everest::d_grid,
        paper: everest::PAPER_FIG3A,
        run: everest::fig3a,
    },
    ExperimentInfo {
        id: "everest-fig3b",
        description: "everest Fig. 3(b): queue-length CDF at D = t_sw = 2 ms, 8 schedulers",
        grid: everest::fig3b_grid,
        paper: &[],
        run: everest::fig3b,
    },
    ExperimentInfo {
        id: "everest-fig3c",
        description: "everest Fig. 3(c): context switches per second vs D, 8 schedulers",
        grid: everest::d_grid,
        paper: &[],
        run: everest::fig3c,
    },
    ExperimentInfo {
        id: "everest-fig3d",
        description: "everest Fig. 3(d): % packets later than D vs processors (D = t_sw = 2 ms)",
        grid: everest::fig3d_grid,
        paper: &[],
        run: everest::fig3d,
    },
    ExperimentInfo {
        id: "everest-fig4",
        description: "everest Fig. 4: % late vs t_sw / D for D = 500 us and 2 ms; everest-adaptive vs the better of Everest and Everest-AE",
        grid: everest::fig4_grid,
        paper: &[],
        run: everest::fig4,
    },
    ExperimentInfo {
        id: "everest-fig5",
        description: "everest Fig. 5: mean delay vs t_sw / D at D = 2 ms",
        grid: everest::fig5_grid,
        paper: &[],
        run: everest::fig5,
    },
    ExperimentInfo {
        id: "everest-fig6",
        description: "everest Fig. 6: processors per service over time, 2 services on 4 processors, changing mix and an overload with equal shares; Everest vs Static and Quantum",
        grid: everest::fig6_grid,
        paper: everest::PAPER_FIG6,
        run: everest::fig6,
    },
    ExperimentInfo {
        id: "predictive-fig5-7",
        description: "predictive Figs. 5-7: per-packet delays of a forwarding, a CAST (200 B) and an FEC flow, SFQ vs EFQ vs WF2Q+, with the eq 13 / eq 18 bounds",
        grid: predictive::fq_grid,
        paper: predictive::PAPER_FIG5_7,
        run: predictive::fig5_7,
    },
    ExperimentInfo {
        id: "predictive-fig8",
        description: "predictive Fig. 8: mean misordering delay per flow vs mean processing time (SFQ biased, EFQ near zero)",
        grid: predictive::fq_grid,
        paper: &[],
        run: predictive::fig8,
    },
    ExperimentInfo {
        id: "predictive-fig9",
        description: "predictive Fig. 9: processors per application around a load change (equal -> 80/10/10), FCFS vs LAP, 16 processors, q = 64",
        grid: predictive_lap::fig9_grid,
        paper: &[],
        run: predictive_lap::fig9,
    },
    ExperimentInfo {
        id: "predictive-fig10-12",
        description: "predictive Figs. 10-12: throughput vs T-Opt, cold-cache fraction and order variation vs q, LAP vs FCFS, 30 applications",
        grid: predictive_lap::fig10_12_grid,
        paper: predictive_lap::PAPER_FIG10_12,
        run: predictive_lap::fig10_12,
    },
    ExperimentInfo {
        id: "predictive-switch",
        description: "predictive section 6: EFQ / EFQ+warm processors / LAP / EFQ-LAP switching on queued work, under bursts in and out of overload",
        grid: predictive_lap::switch_grid,
        paper: &[],
        run: predictive_lap::switch,
    },
    ExperimentInfo {
        id: "qcache-table5",
        description: "qcache Table 5: enqueue/dequeue latency on hit and miss for nc, dc, sqc, qc, derived from Table 1",
        grid: qcache::table5_grid,
        paper: qcache::PAPER_TABLE5,
        run: qcache::table5,
    },
    ExperimentInfo {
        id: "qcache-fig5",
        description: "qcache Fig. 5: throughput and hit rate vs threads (1-32), uniformly random traffic (R)",
        grid: qcache_sim::fig5_grid,
        paper: qcache_sim::PAPER_FIG5,
        run: qcache_sim::fig5,
    },
    ExperimentInfo {
        id: "qcache-fig6",
        description: "qcache Fig. 6: SD1_30 vs threads; throughput at 32 threads vs the dominating queue's weight (5-100%)",
        grid: qcache_sim::fig6_grid,
        paper: qcache_sim::PAPER_FIG6,
        run: qcache_sim::fig6,
    },
    ExperimentInfo {
        id: "qcache-fig7",
        description: "qcache Fig. 7: SD16_90 vs threads; 32 threads vs dominating-set size (1-256); backlog sensitivity",
        grid: qcache_sim::fig7_grid,
        paper: qcache_sim::PAPER_FIG7,
        run: qcache_sim::fig7,
    },
    ExperimentInfo {
        id: "qcache-fig8",
        description: "qcache Fig. 8: exponentially weighted queues L1.1 and L1.01 vs threads",
        grid: qcache_sim::fig8_grid,
        paper: &[],
        run: qcache_sim::fig8,
    },
    ExperimentInfo {
        id: "qcache-fig9",
        description: "qcache Fig. 9: real-trace workloads (nDPI corpus as edge / 32 overlaid copies as core) vs threads",
        grid: qcache_sim::fig9_grid,
        paper: qcache_sim::PAPER_FIG9,
        run: qcache_sim::fig9,
    },
    ExperimentInfo {
        id: "qcache-fig10",
        description: "qcache Fig. 10 / section 5.1: inter-arrival distance distributions with loss and gain thresholds",
        grid: qcache_sim::fig10_grid,
        paper: qcache_sim::PAPER_FIG10,
        run: qcache_sim::fig10,
    },
    ExperimentInfo {
        id: "qcache-worstcase",
        description: "qcache section 4.6: every operation on one queue, qc vs nc, sqc, dc",
        grid: qcache_sim::worstcase_grid,
        paper: qcache_sim::PAPER_WORSTCASE,
        run: qcache_sim::worstcase,
    },
    ExperimentInfo {
        id: "qcache-model",
        description: "qcache section 3.6: analytical model vs simulated throughput, every workload and subsystem, 8 and 32 threads",
        grid: qcache_sim::model_grid,
        paper: &[],
        run: qcache_sim::model,
    },
    ExperimentInfo {
        id: "router-ablation",
        description: "the composed router (no paper): each mechanism replaced by its baseline in turn, synthetic and nDPI traffic; p99 per service, late %, drops, state, off-chip accesses, throughput",
        grid: router::ablation_grid,
        paper: &[],
        run: router::ablation,
    },
    ExperimentInfo {
        id: "qcache-scale",
        description: "qcache: 1e7 operations on 32 threads through each subsystem; wall-clock per run",
        grid: qcache_sim::scale_grid,
        paper: &[],
        run: qcache_sim::scale,
    },
    ExperimentInfo {
        id: "everest-scale",
        description: "everest: 60 M packets (UNC-10's size) through 16 processors, 6 services, every scheduler; wall-clock per run",
        grid: everest::scale_grid,
        paper: &[],
        run: everest::scale,
    },
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

/// Experiment `id`'s output with [`quick`] options, run once per test process: the tests of
/// one experiment share its run, and the check of every experiment's paper numbers
/// (`every_paper_number_comes_from_a_declaration`) reuses them. Panics on an unknown id.
#[cfg(test)]
pub(crate) fn quick_output(id: &str) -> &'static Output {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static RUNS: OnceLock<Mutex<HashMap<String, &'static OnceLock<Output>>>> = OnceLock::new();
    let cell = *RUNS
        .get_or_init(Default::default)
        .lock()
        .expect("no test panicked holding the map")
        .entry(id.to_string())
        .or_insert_with(|| Box::leak(Box::new(OnceLock::new())));
    cell.get_or_init(|| run(id, quick(), &mut |_| {}).unwrap_or_else(|| panic!("no experiment {id}")))
}

/// The experiment `id`, if there is one.
pub fn find(id: &str) -> Option<&'static ExperimentInfo> {
    EXPERIMENTS.iter().find(|e| e.id == id)
}

/// Runs experiment `id` on its declared grid; `None` if there is no such experiment. The output
/// carries the id, and each compared quantity the paper states a number for carries that number
/// and its source from the experiment's declaration.
pub fn run(id: &str, opts: RunOptions, progress: &mut dyn FnMut(f64)) -> Option<Output> {
    let e = find(id)?;
    let grid = (e.grid)(opts.quick);
    let mut out = (e.run)(opts, &grid, progress);
    out.id = e.id.to_string();
    for c in out.comparisons.iter_mut().filter(|c| c.paper.is_none()) {
        if let Some(p) = declare::lookup(e.paper, &c.metric, &c.params, opts.quick) {
            c.paper = Some(p.value);
            c.source = p.source.to_string();
        }
    }
    out.place_paper_values();
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

/// kim Table I's IMIX ratios (%), and Table X's IMIX overload factors, which our generator is
/// asked for (eqs 15-16) and measured against.
#[rustfmt::skip]
pub const PAPER_KIM_TABLE1: &[PaperValue] = &[
    PaperValue::new("imix_percent", &[("size_bytes", At::Int(28))], 1.2, "Table I"),
    PaperValue::new("imix_percent", &[("size_bytes", At::Int(40))], 35.5, "Table I"),
    PaperValue::new("imix_percent", &[("size_bytes", At::Int(44))], 2.0, "Table I"),
    PaperValue::new("imix_percent", &[("size_bytes", At::Int(48))], 2.0, "Table I"),
    PaperValue::new("imix_percent", &[("size_bytes", At::Int(52))], 3.5, "Table I"),
    PaperValue::new("imix_percent", &[("size_bytes", At::Int(552))], 0.8, "Table I"),
    PaperValue::new("imix_percent", &[("size_bytes", At::Int(576))], 11.5, "Table I"),
    PaperValue::new("imix_percent", &[("size_bytes", At::Int(628))], 1.0, "Table I"),
    PaperValue::new("imix_percent", &[("size_bytes", At::Int(770))], 29.5, "Table I"),
    PaperValue::new("imix_percent", &[("size_bytes", At::Int(1420))], 3.0, "Table I"),
    PaperValue::new("imix_percent", &[("size_bytes", At::Int(1500))], 10.0, "Table I"),
    PaperValue::new("overload_factor", &[("overload", At::Num(1.1))], 1.1, "Table X (IMIX overload values), eqs 15-16"),
    PaperValue::new("overload_factor", &[("overload", At::Num(1.29))], 1.29, "Table X (IMIX overload values), eqs 15-16"),
    PaperValue::new("overload_factor", &[("overload", At::Num(1.72))], 1.72, "Table X (IMIX overload values), eqs 15-16"),
    PaperValue::new("overload_factor", &[("overload", At::Num(2.57))], 2.57, "Table X (IMIX overload values), eqs 15-16"),
    PaperValue::new("overload_factor", &[("overload", At::Num(5.15))], 5.15, "Table X (IMIX overload values), eqs 15-16"),
];

/// kim Table I's grid: packet sizes drawn, and the overload factors of Table X's IMIX column.
fn kim_table1_grid(quick: bool) -> Grid {
    let (sizes, gaps) = if quick { (1_000_000u64, 200_000u64) } else { (100_000_000, 20_000_000) };
    Grid::one("sizes")
        .axis("packets", "packets", [sizes])
        .sweep("gaps")
        .axis("overload", "1", [1.1, 1.29, 1.72, 2.57, 5.15])
        .axis("packets", "packets", [gaps])
}

/// kim Table I and eqs 15-16.
///
/// * Draws packet sizes from our IMIX generator and compares the fraction of each size with the
///   ratio of Table I.
/// * For each IMIX overload factor of kim Table X, generates exponential inter-arrivals with the
///   mean from eq 16 for a queue shaped to 100 Gbps / 1,000,000 queues = 100 kbps (the paper's
///   full-scale setting) and measures input rate / output rate (eq 15) over the generated packets.
fn kim_table1(opts: RunOptions, g: &Grid, progress: &mut dyn FnMut(f64)) -> Output {
    let streams = RngStreams::new(opts.seed);
    let n_sizes: u64 = g.value("sizes", "packets");
    let n_gaps: u64 = g.value("gaps", "packets");
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
    for (size, _) in KIM_IMIX {
        let frac = *counts.get(&size).unwrap_or(&0) as f64 / n_sizes as f64 * 100.0;
        run.scalar(&format!("imix_percent_{size}B"), frac, "%");
        let params = BTreeMap::from([("size_bytes".into(), json!(size))]);
        let paper = declare::stated(PAPER_KIM_TABLE1, "imix_percent", &params).expect("Table I has every size");
        out.comparisons.push(Comparison {
            metric: "imix_percent".into(),
            params,
            ours: frac,
            paper: None,
            unit: "%".into(),
            source: "Table I".into(),
        });
        ours_line.push((size as f64, frac));
        paper_line.push((size as f64, paper));
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
    let targets: Vec<f64> = g.values("gaps", "overload");
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
                ("overload".into(), json!(target)),
            ]),
            ours: measured,
            paper: None,
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
        ..Default::default()
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
        ..Default::default()
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
        let out = quick_output("kim-table1");
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

    /// Every experiment declares a grid with points, full and quick, and paper values that are
    /// well formed and never ambiguous: two values of one metric must differ in a parameter both
    /// name, or a compared quantity could match both.
    #[test]
    fn declarations_are_well_formed() {
        for e in EXPERIMENTS {
            for quick in [false, true] {
                let g = (e.grid)(quick);
                // Only a grid of trace workloads is empty, and only without the corpus (qcache-fig9).
                let no_traces = dqs::ndpi_dir().is_none()
                    && g.sweeps.iter().all(|s| s.axes.iter().any(|a| a.name == "workload" && a.values.is_empty()));
                assert!(g.points() > 0 || no_traces, "{} (quick {quick}) declares no points", e.id);
                for s in &g.sweeps {
                    let mut names: Vec<&str> = s.axes.iter().map(|a| a.name.as_str()).collect();
                    names.sort_unstable();
                    assert!(names.windows(2).all(|w| w[0] != w[1]), "{} sweep {}: an axis twice", e.id, s.name);
                }
            }
            for (i, a) in e.paper.iter().enumerate() {
                assert!(a.value.is_finite() && !a.source.is_empty() && !a.metric.is_empty(), "{}: {a:?}", e.id);
                for b in &e.paper[i + 1..] {
                    let differ = a.at.iter().any(|(k, x)| b.at.iter().any(|(l, y)| k == l && x != y));
                    assert!(a.metric != b.metric || differ, "{}: {a:?} and {b:?} can match one quantity", e.id);
                }
            }
        }
    }

    /// Every paper number in every quick reproduction's comparisons is one its experiment
    /// declares for that quantity and setting, with its source; every value declared for quick
    /// runs is set wherever its setting occurs; and every declared metric occurs in the quick
    /// run, except those of the trace workloads when the nDPI corpus is absent. (`npqos
    /// reproduce` writes these comparisons to comparison.json as they are: the CLI's test
    /// `reproduce_quick_writes_comparison_json` checks that for one experiment.)
    #[test]
    fn every_paper_number_comes_from_a_declaration() {
        let (mut set, mut declared) = (0, 0);
        for e in EXPERIMENTS {
            let rows = &quick_output(e.id).comparisons;
            for row in rows.iter().filter(|r| r.paper.is_some()) {
                let p = e
                    .paper
                    .iter()
                    .find(|p| p.compared == declare::Compared::Always && p.matches(&row.metric, &row.params))
                    .unwrap_or_else(|| panic!("{}: a paper number no declaration gives: {row:?}", e.id));
                assert_eq!((row.paper, row.source.as_str()), (Some(p.value), p.source), "{}: {row:?}", e.id);
                set += 1;
            }
            for p in e.paper.iter().filter(|p| p.compared != declare::Compared::Reference) {
                declared += 1;
                let hits: Vec<&Comparison> = rows.iter().filter(|r| p.matches(&r.metric, &r.params)).collect();
                if p.compared == declare::Compared::Always {
                    assert!(hits.iter().all(|r| r.paper == Some(p.value)), "{}: {p:?} not set on {hits:?}", e.id);
                }
                let trace = p.at.iter().any(|(k, a)| {
                    *k == "workload" && matches!(a, declare::At::Text(w) if ["ndpi", "edge", "core"].contains(w))
                });
                if !trace || dqs::ndpi_dir().is_some() {
                    // A quantity of that name with every parameter the declaration names (a
                    // full-only value's setting may not occur in a quick run, but its parameter
                    // names do).
                    assert!(
                        rows.iter()
                            .any(|r| r.metric == p.metric && p.at.iter().all(|(k, _)| r.params.contains_key(*k))),
                        "{}: no quantity {} with parameters {:?}",
                        e.id,
                        p.metric,
                        p.at.iter().map(|(k, _)| k).collect::<Vec<_>>()
                    );
                }
            }
        }
        assert!(set > 50 && declared > 150, "{set} paper numbers set, {declared} declared");
    }

    #[test]
    fn experiment_ids_are_unique() {
        let mut ids: Vec<&str> = EXPERIMENTS.iter().map(|e| e.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), EXPERIMENTS.len());
    }
}
