//! `npqos sweep`: a grid of scenario overrides, run in parallel on this machine.
//!
//! The grid is expanded into self-contained jobs (resolved scenario table + seed + output
//! directory) and written to `jobs.json` before anything runs; the local executor then runs them
//! on `--jobs` threads. Another executor (a Dask cluster, a batch system) can take the same
//! jobs: each is exactly `npqos run <point>/scenario.resolved.toml --out <point>`.

use super::run::{execute, interrupt_flag, replication_seed, run_info};
use crate::error::{bad, Interrupted};
use crate::output::{self, create_schema, insert_output, num, write_atomic, Meta};
use crate::progress::Progress;
use anyhow::{Context, Result};
use npqos_sim::results::{Output, PlotKind, PlotSpec};
use npqos_sim::scenario::{set_key, Problem, Problems, Scenario};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

struct Job {
    index: usize,
    point: Vec<(String, String)>,
    scenario: Scenario,
    dir: PathBuf,
}

pub fn sweep(
    path: &Path,
    sets: &[String],
    jobs: usize,
    out: Option<PathBuf>,
    seed: Option<u64>,
    quiet: bool,
) -> Result<()> {
    let (base, _) = super::run::load(path)?;
    let mut axes: Vec<(String, Vec<String>)> = Vec::new();
    for s in sets {
        let Some((k, vs)) = s.split_once('=') else {
            return Err(bad(format!("--set {s:?}: expected KEY=V1,V2,... such as traffic.overload=0.5,0.9")));
        };
        let vals: Vec<String> = vs.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect();
        if k.trim().is_empty() || vals.is_empty() {
            return Err(bad(format!("--set {s:?}: expected KEY=V1,V2,... with at least one value")));
        }
        axes.push((k.trim().to_string(), vals));
    }
    // Cartesian product, first axis slowest.
    let mut points: Vec<Vec<(String, String)>> = vec![vec![]];
    for (k, vals) in &axes {
        points = points
            .into_iter()
            .flat_map(|p| {
                vals.iter().map(move |v| {
                    let mut q = p.clone();
                    q.push((k.clone(), v.clone()));
                    q
                })
            })
            .collect();
    }
    let name = path.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_else(|| "sweep".into());
    let dir = out.unwrap_or_else(|| output::default_dir("sweep", &name));
    let base_dir = path.parent().unwrap_or(Path::new("."));
    let mut all_problems = Vec::new();
    let mut grid = Vec::new();
    for (i, p) in points.iter().enumerate() {
        let mut t = base.clone();
        for (k, v) in p {
            if let Err(m) = set_key(&mut t, k, v) {
                all_problems.push(Problem { key: k.clone(), value: Some(v.clone()), message: m });
            }
        }
        let label = p.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
        match Scenario::from_table(&t, &format!("{} [{label}]", path.display()), base_dir) {
            Ok(mut sc) => {
                if let Some(s) = seed {
                    sc.seed = s;
                }
                grid.push(Job { index: i, point: p.clone(), scenario: sc, dir: dir.join(format!("point-{i:04}")) });
            }
            Err(e) => all_problems.extend(e.list.into_iter().map(|mut pr| {
                pr.key = format!("{} [{label}]", pr.key);
                pr
            })),
        }
    }
    if !all_problems.is_empty() {
        all_problems.dedup();
        return Err(Problems { file: path.display().to_string(), list: all_problems }.into());
    }
    let per = grid.iter().map(|j| j.scenario.estimate_memory(1)).max().unwrap_or(0);
    let budget = grid.iter().map(|j| j.scenario.memory_budget).min().unwrap_or(u64::MAX);
    let parallel = jobs.clamp(1, grid.len().max(1)) as u64;
    if per.saturating_mul(parallel) > budget {
        return Err(bad(format!(
            "{} points in parallel need an estimated {}, above run.memory_budget {}; use fewer --jobs",
            parallel,
            npqos_sim::scenario::human_bytes(per * parallel),
            npqos_sim::scenario::human_bytes(budget)
        )));
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let jobs_json: Vec<Value> = grid.iter().map(|j| json!({
        "index": j.index, "point": j.point.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect::<serde_json::Map<_, _>>(),
        "seed": j.scenario.seed, "dir": j.dir.file_name().map(|f| f.to_string_lossy().to_string()),
        "scenario": toml::to_string(&j.scenario.to_toml()).unwrap_or_default()})).collect();
    write_atomic(&dir, "jobs.json", serde_json::to_string_pretty(&jobs_json)?.as_bytes())?;

    let flag = interrupt_flag();
    let progress = Progress::new(&name, quiet);
    let next = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Output>>>> = Mutex::new((0..grid.len()).map(|_| None).collect());
    let started = std::time::SystemTime::now();
    let t0 = std::time::Instant::now();
    std::thread::scope(|s| {
        for _ in 0..parallel {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= grid.len() || flag.load(Ordering::Relaxed) {
                    return;
                }
                let j = &grid[i];
                let r = run_point(j, &flag);
                finished.fetch_add(1, Ordering::Relaxed);
                progress.set(finished.load(Ordering::Relaxed) as f64 / grid.len() as f64);
                results.lock().expect("no worker panicked")[i] = Some(r);
            });
        }
    });
    progress.finish();
    let results = results.into_inner().expect("no worker panicked");

    // Top level: one database with every run, a table, a summary.
    let tmp = dir.join(".results.sqlite.tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut db = rusqlite::Connection::open(&tmp)?;
    create_schema(&db)?;
    let tx = db.transaction()?;
    let mut summary_points = Vec::new();
    let mut csv = String::new();
    let mut header_done = false;
    let mut complete = true;
    let mut collected: Vec<(&Job, Output)> = Vec::new();
    for (j, r) in grid.iter().zip(results) {
        let Some(r) = r else {
            complete = false;
            continue;
        };
        let o = r?;
        complete &= o.complete();
        let point: serde_json::Map<String, Value> =
            j.point.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
        let meta = Meta {
            kind: "sweep-point",
            seed: j.scenario.seed,
            resolved: None,
            extra: Default::default(),
            run_info: Default::default(),
            seeds: (0..j.scenario.replications).map(|i| replication_seed(j.scenario.seed, i)).collect(),
        };
        insert_output(&tx, &o, &meta, &Value::Object(point.clone()))?;
        let sc: serde_json::Map<String, Value> =
            o.aggregate.iter().map(|(n, m, c, u)| (n.clone(), json!({"value": m, "ci95": c, "unit": u}))).collect();
        summary_points.push(json!({"index": j.index, "point": point, "dir": format!("point-{:04}", j.index), "complete": o.complete(), "scalars": sc}));
        if !header_done {
            let keys: Vec<&str> = j.point.iter().map(|(k, _)| k.as_str()).collect();
            let names: Vec<&str> = o.aggregate.iter().map(|a| a.0.as_str()).collect();
            let _ = writeln!(csv, "point,{},{}", keys.join(","), names.join(","));
            header_done = true;
        }
        let vals: Vec<String> = j.point.iter().map(|(_, v)| v.clone()).collect();
        let nums: Vec<String> = o.aggregate.iter().map(|a| a.1.to_string()).collect();
        let _ = writeln!(csv, "{},{},{}", j.index, vals.join(","), nums.join(","));
        collected.push((j, o));
    }
    tx.commit()?;
    drop(db);
    std::fs::rename(&tmp, dir.join("results.sqlite"))?;
    write_atomic(&dir, "sweep.csv", csv.as_bytes())?;
    let summary = json!({"npqos_version": output::version(), "kind": "sweep", "scenario": name, "complete": complete,
        "axes": axes.iter().map(|(k, v)| json!({"key": k, "values": v})).collect::<Vec<_>>(), "points": summary_points});
    write_atomic(&dir, "summary.json", format!("{}\n", serde_json::to_string_pretty(&summary)?).as_bytes())?;
    let events = collected.iter().flat_map(|(_, o)| o.runs.iter()).map(|r| r.events).sum();
    write_atomic(
        &dir,
        "run.json",
        serde_json::to_string_pretty(&Value::Object(run_info(
            started,
            t0.elapsed().as_secs_f64(),
            events,
            parallel as usize,
        )))?
        .as_bytes(),
    )?;
    write_report(&dir, &name, &axes, &collected)?;
    if !quiet {
        println!("{} points -> {}", collected.len(), dir.display());
        print!("{csv}");
    }
    if !complete || flag.load(Ordering::Relaxed) {
        return Err(Interrupted(dir.display().to_string()).into());
    }
    Ok(())
}

fn run_point(j: &Job, flag: &std::sync::Arc<std::sync::atomic::AtomicBool>) -> Result<Output> {
    let label = j.point.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
    let o = execute(&j.scenario, &label, 1, flag, &Progress::new("", true))?;
    let meta = Meta {
        kind: "sweep-point",
        seed: j.scenario.seed,
        resolved: Some(j.scenario.to_toml()),
        extra: serde_json::Map::from_iter([(
            "point".to_string(),
            json!(j
                .point
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect::<serde_json::Map<_, _>>()),
        )]),
        run_info: Default::default(),
        seeds: (0..j.scenario.replications).map(|i| replication_seed(j.scenario.seed, i)).collect(),
    };
    output::write_all(&j.dir, &o, &meta)?;
    Ok(o)
}

/// report.md with a table of every point and, when the first axis is numeric, plots of the
/// main scalars against it (one line per value of the other axes).
fn write_report(dir: &Path, name: &str, axes: &[(String, Vec<String>)], pts: &[(&Job, Output)]) -> Result<()> {
    let mut s = format!("# npqos sweep: {name}\n\n{} points. Each point's full results are in its `point-NNNN/` directory; every run is in `results.sqlite`.\n\n", pts.len());
    let Some((_, first)) = pts.first() else {
        return write_atomic(dir, "report.md", s.as_bytes());
    };
    let names: Vec<&str> = first.aggregate.iter().map(|a| a.0.as_str()).collect();
    let shown: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| {
            ["throughput", "utilization", "delay_mean", "delay_p99", "drop_fraction", "jain_fairness"].contains(n)
        })
        .collect();
    let _ = writeln!(
        s,
        "| point | {} | {} |\n|---|{}",
        axes.iter().map(|a| a.0.as_str()).collect::<Vec<_>>().join(" | "),
        shown.join(" | "),
        "---|".repeat(axes.len() + shown.len())
    );
    for (j, o) in pts {
        let vals: Vec<&str> = j.point.iter().map(|(_, v)| v.as_str()).collect();
        let nums: Vec<String> = shown
            .iter()
            .map(|n| o.aggregate.iter().find(|a| a.0 == *n).map(|a| num(a.1)).unwrap_or_default())
            .collect();
        let _ = writeln!(s, "| {} | {} | {} |", j.index, vals.join(" | "), nums.join(" | "));
    }
    let x_numeric = |v: &str| v.trim_matches('"').parse::<f64>().ok();
    if let Some((key, _)) = axes.first() {
        if pts.iter().all(|(j, _)| x_numeric(&j.point[0].1).is_some()) {
            s.push_str("\n## Plots\n\n");
            for metric in &shown {
                let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
                for (j, o) in pts {
                    let rest = j.point[1..].iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
                    let legend = if rest.is_empty() { metric.to_string() } else { rest };
                    let y = o.aggregate.iter().find(|a| a.0 == *metric).map(|a| a.1).unwrap_or(f64::NAN);
                    let x = x_numeric(&j.point[0].1).expect("checked");
                    match lines.iter_mut().find(|l| l.0 == legend) {
                        Some(l) => l.1.push((x, y)),
                        None => lines.push((legend, vec![(x, y)])),
                    }
                }
                let unit = first.aggregate.iter().find(|a| a.0 == *metric).map(|a| a.3.clone()).unwrap_or_default();
                let spec = PlotSpec {
                    name: format!("sweep-{metric}"),
                    title: format!("{metric} vs {key}"),
                    x_label: key.clone(),
                    y_label: format!("{metric} ({unit})"),
                    lines,
                    kind: PlotKind::Lines,
                    log_x: false,
                    log_y: false,
                };
                let file = format!("{}.svg", spec.name);
                write_atomic(dir, &file, crate::plots::render(&spec)?.as_bytes())?;
                let _ = writeln!(s, "![{metric} vs {key}]({file})\n");
            }
        }
    }
    write_atomic(dir, "report.md", s.as_bytes())
}
