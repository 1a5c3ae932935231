//! `npqos list` and `npqos reproduce`.

use crate::error::{bad, Interrupted};
use crate::output::{self, Meta};
use crate::progress::Progress;
use anyhow::Result;
use npqos_sim::experiments::{self, RunOptions, EXPERIMENTS};
use serde_json::json;
use std::path::PathBuf;

pub fn list() -> Result<()> {
    for e in EXPERIMENTS {
        println!("{}\t{}", e.id, e.description);
    }
    Ok(())
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
            let known = EXPERIMENTS.iter().map(|e| e.id).collect::<Vec<_>>().join(", ");
            return Err(bad(format!(
                "unknown experiment id {id:?}: expected `all` or one of {known} (see `npqos list`)"
            )));
        }
    }
    todo.dedup();
    let flag = super::run::interrupt_flag();
    for id in todo {
        let dir = match &out {
            Some(d) => d.join(id),
            None => output::default_dir("reproduce", id),
        };
        let progress = Progress::new(id, quiet);
        let started = std::time::SystemTime::now();
        let t0 = std::time::Instant::now();
        let result = experiments::run(id, RunOptions { quick, seed, threads }, &mut |f| progress.set(f))
            .expect("id checked above");
        progress.finish();
        let events = result.runs.iter().map(|r| r.events).sum();
        let meta = Meta {
            kind: "reproduce",
            seed,
            resolved: None,
            extra: serde_json::Map::from_iter([("quick".to_string(), json!(quick))]),
            run_info: super::run::run_info(started, t0.elapsed().as_secs_f64(), events, threads),
            seeds: vec![],
        };
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
