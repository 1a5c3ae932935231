//! `npqos list` and `npqos reproduce`.

use crate::error::{bad, Interrupted};
use crate::output::{self, Meta};
use crate::progress::Progress;
use anyhow::Result;
use npqos_sim::experiments::declare::Compared;
use npqos_sim::experiments::{self, ExperimentInfo, RunOptions, EXPERIMENTS};
use npqos_sim::results::Output;
use serde_json::json;
use std::path::{Path, PathBuf};

/// `npqos list [IDS] [--json]`.
pub fn list(ids: &[String], as_json: bool) -> Result<()> {
    let mut chosen = Vec::new();
    for id in ids {
        chosen.push(experiments::find(id).ok_or_else(|| unknown(id))?);
    }
    if as_json {
        let all: Vec<&ExperimentInfo> = if chosen.is_empty() { EXPERIMENTS.iter().collect() } else { chosen };
        let v: Vec<serde_json::Value> = all.iter().map(|e| declaration(e)).collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else if chosen.is_empty() {
        for e in EXPERIMENTS {
            println!("{}\t{}", e.id, e.description);
        }
    } else {
        for e in chosen {
            print!("{}", describe(e));
        }
    }
    Ok(())
}

pub fn unknown(id: &str) -> anyhow::Error {
    let known = EXPERIMENTS.iter().map(|e| e.id).collect::<Vec<_>>().join(", ");
    bad(format!("unknown experiment id {id:?}: expected `all` or one of {known} (see `npqos list`)"))
}

/// An experiment's declaration as JSON: its grid, full and quick, and its paper values.
pub fn declaration(e: &ExperimentInfo) -> serde_json::Value {
    let grid = |quick: bool| {
        let g = (e.grid)(quick);
        json!({ "points": g.points(), "sweeps": g.sweeps })
    };
    let paper: Vec<serde_json::Value> = e
        .paper
        .iter()
        .map(|p| json!({ "metric": p.metric, "at": p.at_json(), "value": p.value, "source": p.source, "compared": p.compared }))
        .collect();
    json!({ "id": e.id, "description": e.description, "grid": { "full": grid(false), "quick": grid(true) }, "paper": paper })
}

/// An experiment's declaration for people: the grid (full and --quick) and the paper's numbers.
fn describe(e: &ExperimentInfo) -> String {
    let mut s = format!("{}\n  {}\n", e.id, e.description);
    for (name, quick) in [("grid", false), ("grid with --quick", true)] {
        let g = (e.grid)(quick);
        s.push_str(&format!("  {name}: {} points\n", g.points()));
        for sw in &g.sweeps {
            let axes: Vec<String> = sw
                .axes
                .iter()
                .map(|a| {
                    let vals: Vec<String> =
                        a.values.iter().map(|v| v.as_str().map_or(v.to_string(), String::from)).collect();
                    let unit = if a.unit.is_empty() { String::new() } else { format!(" ({})", a.unit) };
                    format!("{}{unit} = {}", a.name, vals.join(", "))
                })
                .collect();
            s.push_str(&format!("    {} [{} points]: {}\n", sw.name, sw.points(), axes.join("; ")));
        }
    }
    if e.paper.is_empty() {
        s.push_str("  paper values: none (the paper gives curves or text only; see the report's notes)\n");
    } else {
        s.push_str(&format!("  paper values ({}):\n", e.paper.len()));
        for p in e.paper {
            let at: Vec<String> =
                p.at.iter()
                    .map(|(k, a)| {
                        let v = a.json();
                        format!("{k}={}", v.as_str().map_or(v.to_string(), String::from))
                    })
                    .collect();
            let when = match p.compared {
                Compared::Always => "",
                Compared::FullRuns => "  (full runs only)",
                Compared::Reference => "  (reference, not compared)",
            };
            s.push_str(&format!("    {:<34} {:<40} {:>12}  [{}]{when}\n", p.metric, at.join(" "), p.value, p.source));
        }
    }
    s
}

/// Runs experiment `id` (bad input if unknown): its output and the description of the
/// results directory `npqos reproduce` writes for it.
pub fn reproduce_one(id: &str, quick: bool, seed: u64, threads: usize, progress: &Progress) -> Result<(Output, Meta)> {
    if experiments::find(id).is_none() {
        return Err(unknown(id));
    }
    let started = std::time::SystemTime::now();
    let t0 = std::time::Instant::now();
    let result = experiments::run(id, RunOptions { quick, seed, threads: threads.max(1) }, &mut |f| progress.set(f))
        .expect("id checked above");
    let events = result.runs.iter().map(|r| r.events).sum();
    let meta = Meta {
        kind: "reproduce",
        seed,
        resolved: None,
        extra: serde_json::Map::from_iter([("quick".to_string(), json!(quick))]),
        run_info: super::run::run_info(started, t0.elapsed().as_secs_f64(), events, threads),
        seeds: vec![],
    };
    Ok((result, meta))
}

pub fn reproduce(
    ids: &[String],
    quick: bool,
    out: Option<PathBuf>,
    seed: u64,
    threads: usize,
    quiet: bool,
) -> Result<()> {
    let mut todo: Vec<&str> = Vec::new();
    for id in ids {
        if id == "all" {
            todo.extend(EXPERIMENTS.iter().map(|e| e.id));
        } else if EXPERIMENTS.iter().any(|e| e.id == id) {
            todo.push(id);
        } else {
            return Err(unknown(id));
        }
    }
    todo.dedup();
    let flag = super::run::interrupt_flag();
    let root = out.unwrap_or_else(|| output::default_dir("reproduce", ""));
    let r = reproduce_into(&todo, &root, quick, seed, threads, quiet, &flag);
    // The index covers every reproduction under the root, also those of earlier runs, and is
    // written after an interrupted or failed one too.
    let listed = crate::report::write_index(&root)?;
    if !quiet && listed > 0 {
        println!("index of {listed} reproductions: {}", root.join("index.html").display());
    }
    r
}

fn reproduce_into(
    todo: &[&str],
    root: &Path,
    quick: bool,
    seed: u64,
    threads: usize,
    quiet: bool,
    flag: &std::sync::atomic::AtomicBool,
) -> Result<()> {
    for &id in todo {
        let dir = root.join(id);
        let progress = Progress::new(id, quiet);
        let (result, meta) = reproduce_one(id, quick, seed, threads, &progress)?;
        progress.finish();
        output::write_all(&dir, &result, &meta)?;
        if !quiet {
            println!("{id}: {} compared quantities -> {}", result.comparisons.len(), dir.display());
            for c in result.comparisons.iter().take(12) {
                let p = c.paper.map(output::num).unwrap_or_else(|| "—".into());
                let params = c.params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
                println!(
                    "  {:<18} {:<28} ours {:>12}  paper {:>10} {}  [{}]",
                    c.metric,
                    params,
                    output::num(c.ours),
                    p,
                    c.unit,
                    c.source
                );
            }
            if result.comparisons.len() > 12 {
                println!("  ... see {}/report.md", dir.display());
            }
        }
        if !result.complete() || flag.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(Interrupted(dir.display().to_string()).into());
        }
    }
    Ok(())
}
