//! The composed router's ablation (issue #17, docs/router.md): the pipeline of the two example
//! scenarios, `scenarios/router-synthetic.toml` and `scenarios/router.toml` (the nDPI corpus),
//! with each mechanism replaced by its baseline in turn. No paper has this result, so there is
//! nothing to compare with: the experiment reports what each mechanism buys end to end, and
//! where it buys nothing.

use super::declare::Grid;
use super::{par_map, RunOptions};
use crate::models::router::scenario::RouterSpec;
use crate::models::router::{self, Allocation, IngressKind, RouterParams, RouterTraffic, Scheduler, ShaperKind};
use crate::results::{Note, Output, PlotKind, PlotSpec, Table};
use crate::scenario::Scenario;
use npqos_core::alloc::Policy;
use npqos_core::pipeline::codel::CodelParams;
use npqos_core::pipeline::FqCodelParams;
use npqos_core::queues::timing::Subsystem;
use npqos_core::Duration;
use serde_json::json;
use std::path::Path;

/// The example scenarios the ablation starts from (the repository's own files, so the
/// ablation's base is what a user runs with `npqos run`).
const SYNTHETIC: &str = include_str!("../../../../scenarios/router-synthetic.toml");
const NDPI: &str = include_str!("../../../../scenarios/router.toml");

/// The full pipeline, then each mechanism replaced by its baseline (one key each).
pub const VARIANTS: [(&str, &str); 11] = [
    ("full", "the example scenario as it is: dqs, Everest, EFQ, qc, event-driven fill"),
    ("dqs->per-flow", "ingress.kind = per-flow (a table entry and a queue per flow)"),
    ("dqs->hashed", "ingress.kind = hashed (K = ingress.queues queues per service, by hash)"),
    ("everest->static", "processing.policy = static (G x N_p processors per service, fixed)"),
    ("everest->quantum", "processing.policy = quantum (every processor time-shared, 100 us quanta)"),
    ("everest->lap", "processing.policy = lap (predictive eq 19 over the services, cold penalty t_sw)"),
    ("efq->fcfs", "processing.scheduler = fcfs (oldest packet of the service)"),
    ("qc->nc", "queue_memory.subsystem = nc (descriptors in external memory, no cache)"),
    ("event->periodic-1ms", "shaping.shaper = periodic, period 1 ms (kim's comparison)"),
    ("event->periodic-100us", "shaping.shaper = periodic, period 100 us"),
    (
        "linux",
        "what Linux does, three keys at once: ingress.kind = fq-codel (1,024 hashed queues per service served by FQ-CoDel's round in place of dqs and EFQ, CoDel per queue, the fattest queue dropped from when the buffer is full) and shaping.aqm = codel (CoDel on the shaped output queues in place of tail drop)",
    ),
];

/// The workloads: synthetic always, the nDPI corpus when present.
fn workload_names() -> Vec<&'static str> {
    let mut w = vec!["synthetic"];
    if super::dqs::ndpi_dir().is_some() {
        w.push("ndpi");
    }
    w
}

/// The grid: workload x variant; quick runs are shorter (simulated seconds per workload).
pub fn ablation_grid(quick: bool) -> Grid {
    Grid::one("runs")
        .axis("workload", "", workload_names())
        .axis("variant", "", VARIANTS.iter().map(|v| v.0))
        .axis("duration_s", "s", [if quick { 0.1 } else { 0.5 }])
        .axis("ndpi_duration_s", "s", [if quick { 0.5 } else { 2.0 }])
}

/// A parsed example scenario: the pipeline and the traffic (loaded once).
struct Base {
    params: RouterParams,
    traffic: RouterTraffic,
    sample_every: Duration,
}

fn base(workload: &str, duration: Duration) -> Result<Base, String> {
    let text = match workload {
        "synthetic" => SYNTHETIC.to_string(),
        _ => {
            let dir = super::dqs::ndpi_dir().ok_or("no nDPI corpus")?;
            let abs = std::fs::canonicalize(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let line = "files = [\"../../shared/traces/ndpi\"]";
            assert!(NDPI.contains(line), "scenarios/router.toml names the corpus so");
            NDPI.replace(line, &format!("files = [{:?}]", abs.display().to_string()))
        }
    };
    let sc = Scenario::parse(&text, &format!("router-{workload}.toml"), Path::new("."))
        .map_err(|e| format!("the example scenario does not parse: {e}"))?;
    let Some(r) = sc.spec_as::<RouterSpec>() else { return Err("not a router scenario".into()) };
    let traffic = r.traffic(duration).map_err(|e| e.to_string())?;
    let mut params = r.params.clone();
    params.duration = duration;
    Ok(Base { params, traffic, sample_every: sc.sample_every() })
}

/// The example's pipeline with `variant`'s one change.
pub fn variant(p: &RouterParams, variant: &str) -> RouterParams {
    let mut p = p.clone();
    match variant {
        "dqs->per-flow" => p.ingress = IngressKind::PerFlow,
        "dqs->hashed" => p.ingress = IngressKind::Hashed,
        "everest->static" => p.processing.policy = Allocation::Policy(Policy::Static),
        "everest->quantum" => {
            p.processing.policy = Allocation::Policy(Policy::Quantum { quantum: Duration::from_micros(100) })
        }
        "everest->lap" => p.processing.policy = Allocation::Lap,
        "efq->fcfs" => p.processing.scheduler = Scheduler::Fcfs,
        "qc->nc" => p.qmem.subsystem = Some(Subsystem::Nc),
        "event->periodic-1ms" => p.shaping.kind = ShaperKind::Periodic { period: Duration::from_millis(1) },
        "event->periodic-100us" => p.shaping.kind = ShaperKind::Periodic { period: Duration::from_micros(100) },
        "linux" => {
            p.ingress = IngressKind::FqCodel;
            p.table.queues = 1024;
            p.fq_codel = FqCodelParams::default();
            p.shaping.aqm = Some(CodelParams::default());
        }
        "full" => {}
        other => unreachable!("variant {other:?} is not in VARIANTS"),
    }
    p
}

/// State bytes of every stage together.
const STATE: [&str; 5] =
    ["ingress_state_bytes", "processing_state_bytes", "qmem_state_bytes", "shaping_state_bytes", "link_state_bytes"];

/// `npqos reproduce router-ablation`: every workload x variant, a table per workload and plots.
pub fn ablation(opts: RunOptions, g: &Grid, progress: &mut dyn FnMut(f64)) -> Output {
    let mut out = Output::default();
    let secs: f64 = g.value("runs", "duration_s");
    let ndpi_secs: f64 = g.value("runs", "ndpi_duration_s");
    let variants: Vec<String> = g.values("runs", "variant");
    let mut bases = Vec::new();
    for w in g.values::<String>("runs", "workload") {
        let d = Duration::from_nanos((if w == "ndpi" { ndpi_secs } else { secs } * 1e9).round() as u64);
        match base(&w, d) {
            Ok(b) => bases.push((w, b)),
            Err(e) => out.notes.push(Note::from(format!("**{w} not run**: {e}"))),
        }
    }
    if super::dqs::ndpi_dir().is_none() {
        eprintln!("router-ablation: no nDPI corpus at ../shared/traces/ndpi or $NPQOS_TRACE_DIR; the real-trace part is skipped");
        out.notes.push(
            "**Real-trace part not run**: no nDPI corpus at `../shared/traces/ndpi` or `$NPQOS_TRACE_DIR`; only the synthetic workload ran."
                .into(),
        );
    }
    let points: Vec<(usize, &str)> =
        (0..bases.len()).flat_map(|b| variants.iter().map(move |v| (b, v.as_str()))).collect();
    let results = par_map(
        opts.threads,
        &points,
        |&(b, v), prog| {
            let (w, base) = &bases[b];
            let mut p = variant(&base.params, v);
            p.sample_every = base.sample_every;
            let r = router::run(&p, &base.traffic, opts.seed, 1, None, prog);
            (w.clone(), v.to_string(), r)
        },
        progress,
    );
    out.assumptions.push(format!(
        "Bases: scenarios/router-synthetic.toml ({secs} s of arrivals) and scenarios/router.toml on the nDPI corpus ({ndpi_secs} s), each with its 50 ms drain; seed {}. Each variant changes one key of the base (the table below); everything else, the traffic included (common random numbers), is the same.",
        opts.seed
    ));
    for (name, what) in VARIANTS {
        out.assumptions.push(format!("{name}: {what}."));
    }
    out.assumptions.push("State bytes: every stage's estimate (docs/router.md, \"State bytes\") added up. Off-chip accesses: the queue memory's external references plus the shaper's bucket and heap accesses (the mapping table's accesses are apart, in ingress_table_accesses_per_s).".into());
    let svc_names: Vec<Vec<String>> =
        bases.iter().map(|(_, b)| b.params.services.iter().map(|s| s.name.clone()).collect()).collect();
    for (bi, (w, _)) in bases.iter().enumerate() {
        let names = &svc_names[bi];
        let mut cols = vec!["variant".to_string()];
        cols.extend(names.iter().map(|n| format!("p99 {n} (us)")));
        cols.extend(
            [
                "late %",
                "dropped",
                "ingress state (KB)",
                "shaping state (KB)",
                "state in all (KB)",
                "off-chip (M/s)",
                "qmem wait (us)",
                "throughput (Gbps)",
                "switches",
            ]
            .map(String::from),
        );
        let mut t = Table::new(cols);
        let mut p99_lines: Vec<(String, Vec<(f64, f64)>)> = names.iter().map(|n| (n.clone(), Vec::new())).collect();
        let mut cost_lines: Vec<(String, Vec<(f64, f64)>)> =
            ["state in all (KB)", "off-chip (M/s)"].iter().map(|n| (n.to_string(), Vec::new())).collect();
        let mut variants = Vec::new();
        for (vi, (rw, v, r)) in results.iter().filter(|x| &x.0 == w).enumerate() {
            // The plots' x axis names the variants (categories 0, 1, ...: the table's rows).
            let x = vi as f64;
            variants.push(v.clone());
            let mut run = match r {
                Ok(run) => run.clone(),
                Err(e) => {
                    out.notes.push(Note::from(format!("**{rw} {v} failed**: {e}")));
                    continue;
                }
            };
            let get = |k: &str| run.get(k).unwrap_or(f64::NAN);
            let state: f64 = STATE.iter().map(|k| get(k)).sum();
            let offchip = get("qmem_offchip_per_s") + get("shaping_offchip_per_s");
            let mut row = vec![v.clone()];
            for (i, n) in names.iter().enumerate() {
                let p = get(&format!("e2e_p99.{n}"));
                row.push(format!("{p:.1}"));
                p99_lines[i].1.push((x, p));
            }
            row.extend([
                format!("{:.2}", get("late_percent")),
                format!("{:.0}", get("dropped_packets")),
                format!("{:.1}", get("ingress_state_bytes") / 1e3),
                format!("{:.0}", get("shaping_state_bytes") / 1e3),
                format!("{:.0}", state / 1e3),
                format!("{:.2}", offchip / 1e6),
                format!("{:.3}", get("qmem_wait_mean")),
                format!("{:.3}", get("throughput")),
                format!("{:.0}", get("context_switches")),
            ]);
            cost_lines[0].1.push((x, state / 1e3));
            cost_lines[1].1.push((x, offchip / 1e6));
            t.row(row);
            run.scalar("state_bytes", state, "B");
            run.scalar("offchip_per_s", offchip, "accesses/s");
            run.label = format!("{rw}/{v}");
            run.params.insert("workload".into(), json!(rw));
            run.params.insert("variant".into(), json!(v));
            // The ablation compares aggregates: its 20 runs' per-flow rows (about 5,000 each)
            // would make its results.sqlite 60 times larger. Classes stay; `npqos run` of the
            // example scenarios writes the flows.
            run.flows.clear();
            out.runs.push(run);
        }
        out.notes.push(Note::from(format!("**{w}**")));
        out.notes.push(t.into());
        let x_label = "variant (the table's rows, the full pipeline first)".to_string();
        out.plots.push(PlotSpec {
            name: format!("ablation-p99-{w}"),
            title: format!("router ablation ({w}): end-to-end p99 per service"),
            x_label: x_label.clone(),
            y_label: "end-to-end p99 (us)".into(),
            lines: p99_lines,
            kind: PlotKind::Points,
            log_x: false,
            log_y: true,
            x_categories: variants.clone(),
            ..Default::default()
        });
        out.plots.push(PlotSpec {
            name: format!("ablation-cost-{w}"),
            title: format!("router ablation ({w}): state and off-chip accesses"),
            x_label,
            y_label: "KB; M accesses/s".into(),
            lines: cost_lines,
            kind: PlotKind::Points,
            log_x: false,
            log_y: true,
            x_categories: variants,
            ..Default::default()
        });
    }
    out
}

#[cfg(test)]
mod tests {

    /// The quick ablation runs every variant (conservation is checked in each run) and shows
    /// what each mechanism is for on synthetic traffic: dqs holds less state than a per-flow
    /// table at the same latency, hashed queues mix flows and raise web's p99, the queuing
    /// cache cuts queue-memory waits and off-chip references against nc, and event-driven
    /// fill makes far fewer off-chip accesses than periodic fill.
    #[test]
    fn ablation_quick_shows_what_each_mechanism_buys() {
        let out = crate::experiments::quick_output("router-ablation");
        let g = |v: &str, k: &str| {
            out.runs
                .iter()
                .find(|r| r.label == format!("synthetic/{v}"))
                .unwrap_or_else(|| panic!("synthetic/{v} ran: {:?}", out.notes))
                .get(k)
                .unwrap()
        };
        assert_eq!(out.runs.iter().filter(|r| r.label.starts_with("synthetic/")).count(), super::VARIANTS.len());
        assert!(g("full", "delivered_packets") > 50_000.0);
        assert_eq!(g("full", "e2e_p99.web"), g("dqs->per-flow", "e2e_p99.web"), "same queues, same order");
        assert!(g("full", "ingress_state_bytes") * 2.0 < g("dqs->per-flow", "ingress_state_bytes"));
        assert!(g("dqs->hashed", "e2e_p99.web") > g("full", "e2e_p99.web"));
        assert!(g("qc->nc", "qmem_wait_mean") > 5.0 * g("full", "qmem_wait_mean"));
        assert!(g("qc->nc", "qmem_offchip_per_s") > 1.5 * g("full", "qmem_offchip_per_s"));
        assert!(g("event->periodic-1ms", "shaping_offchip_per_s") > 10.0 * g("full", "shaping_offchip_per_s"));
        assert!(g("everest->quantum", "context_switches") > 100.0 * g("full", "context_switches").max(1.0));
    }
}
