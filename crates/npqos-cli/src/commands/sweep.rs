//! `npqos sweep`: a scenario over a grid of key values, on local threads or a Dask cluster.
//!
//! A sweep is planned, run point by point, then assembled, in three steps that the CLI and the
//! Python package (`npqos.sweep`, which hands points to Dask workers) share:
//!
//! 1. [`Plan::new`] expands the grid (the product of the axes, first axis slowest) and
//!    validates every point before anything is written. Each point is a self-contained
//!    resolved scenario ([`Plan::point_toml`]); `jobs.json` lists them for any executor.
//! 2. A point runs exactly as `npqos run` of its resolved scenario and writes that results
//!    directory ([`run_point`]) under a temporary name, which [`commit_point`] renames to
//!    `point-NNNN/`. A point directory is therefore either absent or whole, so a point that
//!    ran twice (a retried task) or a sweep that stopped half-way leaves nothing to repair:
//!    running the sweep again into the same directory runs only the points without a
//!    finished directory ([`Plan::finished`]).
//! 3. [`assemble`] reads every point's `results.sqlite` back and writes the sweep's
//!    `results.sqlite`, `sweep.csv`, `summary.json`, `run.json` and `report.md`.

use super::run::{interrupt_flag, load, replication_seed, run_info, run_named};
use crate::error::{bad, Interrupted};
use crate::output::{self, create_schema, insert_output, num, write_atomic, Meta};
use crate::progress::Progress;
use anyhow::{Context, Result};
use npqos_sim::results::{Output, PlotKind, PlotSpec};
use npqos_sim::scenario::{set_key, Problem, Problems, Scenario};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// One point of a sweep: its values of the axes and its validated scenario.
pub struct Point {
    pub index: usize,
    pub values: Vec<(String, String)>,
    pub scenario: Scenario,
}

impl Point {
    /// The point's directory in the sweep's: `point-NNNN`.
    pub fn dir_name(&self) -> String {
        format!("point-{:04}", self.index)
    }
    /// `key=value key=value`.
    pub fn label(&self) -> String {
        self.values.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
    }
    fn values_json(&self) -> serde_json::Map<String, Value> {
        self.values.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect()
    }
}

/// A validated sweep: the base scenario's name, the axes and every point.
pub struct Plan {
    pub name: String,
    pub axes: Vec<(String, Vec<String>)>,
    pub points: Vec<Point>,
}

/// Reads `--set KEY=V1,V2,...` arguments into axes.
pub fn parse_sets(sets: &[String]) -> Result<Vec<(String, Vec<String>)>> {
    let mut axes = Vec::new();
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
    Ok(axes)
}

impl Plan {
    /// Expands and validates the grid over `base` (read from `file`, relative paths against
    /// `base_dir`). Every problem of every point is reported at once, each under the point
    /// that has it; `seed` overrides every point's seed (all points use the same seed: common
    /// random numbers).
    pub fn new(
        base: &toml::Table,
        file: &str,
        base_dir: &Path,
        name: &str,
        axes: Vec<(String, Vec<String>)>,
        seed: Option<u64>,
    ) -> Result<Plan> {
        if axes.is_empty() {
            return Err(bad(format!("{file}: a sweep needs at least one axis (a key and its values)")));
        }
        for (i, (k, vals)) in axes.iter().enumerate() {
            if vals.is_empty() {
                return Err(bad(format!("{file}: sweep axis {k:?} has no values")));
            }
            if axes[..i].iter().any(|(a, _)| a == k) {
                return Err(bad(format!("{file}: sweep axis {k:?} is given twice")));
            }
        }
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
        let mut problems = Vec::new();
        let mut out = Vec::new();
        for (index, values) in points.into_iter().enumerate() {
            let mut t = base.clone();
            for (k, v) in &values {
                if let Err(m) = set_key(&mut t, k, v) {
                    problems.push(Problem { key: k.clone(), value: Some(v.clone()), message: m });
                }
            }
            let label = values.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
            match Scenario::from_table(&t, &format!("{file} [{label}]"), base_dir) {
                Ok(mut scenario) => {
                    if let Some(s) = seed {
                        scenario.seed = s;
                    }
                    out.push(Point { index, values, scenario });
                }
                Err(e) => problems.extend(e.list.into_iter().map(|mut pr| {
                    pr.key = format!("{} [{label}]", pr.key);
                    pr
                })),
            }
        }
        if !problems.is_empty() {
            problems.dedup();
            return Err(Problems { file: file.to_string(), list: problems }.into());
        }
        Ok(Plan { name: name.to_string(), axes, points: out })
    }

    /// Refuses `parallel` points at once whose estimated memory exceeds the budget.
    pub fn check_memory(&self, parallel: usize) -> Result<()> {
        let per = self.points.iter().map(|p| p.scenario.estimate_memory(1)).max().unwrap_or(0);
        let budget = self.points.iter().map(|p| p.scenario.memory_budget).min().unwrap_or(u64::MAX);
        let parallel = parallel.clamp(1, self.points.len().max(1)) as u64;
        if per.saturating_mul(parallel) > budget {
            return Err(bad(format!(
                "{parallel} points in parallel need an estimated {}, above run.memory_budget {}; use fewer --jobs",
                npqos_sim::scenario::human_bytes(per * parallel),
                npqos_sim::scenario::human_bytes(budget)
            )));
        }
        Ok(())
    }

    /// The resolved scenario of a point as TOML text, `[meta] scenario` naming the sweep's
    /// base scenario: what a worker needs to run it, and what `npqos run` of it reads.
    pub fn point_toml(&self, p: &Point) -> String {
        let mut t = p.scenario.to_toml();
        let mut meta = toml::Table::new();
        meta.insert("scenario".into(), self.name.clone().into());
        t.insert("meta".into(), meta.into());
        toml::to_string(&t).expect("a resolved scenario serialises")
    }

    /// Whether `dir` already holds point `p` finished: its summary says complete and its
    /// resolved scenario is this point's (so a directory of another sweep is never reused).
    pub fn finished(&self, dir: &Path, p: &Point) -> bool {
        let d = dir.join(p.dir_name());
        if !summary_complete(&d) {
            return false;
        }
        let Some(mut t) = std::fs::read_to_string(d.join("scenario.resolved.toml"))
            .ok()
            .and_then(|s| toml::from_str::<toml::Table>(&s).ok())
        else {
            return false;
        };
        Scenario::name_in(&t).as_deref() == Some(self.name.as_str()) && {
            t.remove("meta");
            t == p.scenario.to_toml()
        }
    }

    /// Writes `jobs.json`: every point as a self-contained job (index, values, seed, directory,
    /// resolved scenario), for executors other than ours.
    pub fn write_jobs(&self, dir: &Path) -> Result<()> {
        let jobs: Vec<Value> = self
            .points
            .iter()
            .map(|p| {
                json!({"index": p.index, "point": p.values_json(), "seed": p.scenario.seed, "dir": p.dir_name(),
                       "scenario": self.point_toml(p)})
            })
            .collect();
        write_atomic(dir, "jobs.json", serde_json::to_string_pretty(&jobs)?.as_bytes())
    }
}

/// Runs one resolved point scenario (`toml`, as [`Plan::point_toml`] gives it) as `npqos run`
/// of it does: the output and the description of its results directory.
pub fn run_point_output(toml: &str, threads: usize, interrupt: &Arc<AtomicBool>) -> Result<(Output, Meta)> {
    let table: toml::Table =
        toml::from_str(toml).map_err(|e| bad(format!("sweep point: TOML syntax error: {}", e.to_string().trim())))?;
    let sc = Scenario::from_table(&table, "sweep point", Path::new("."))?;
    let name = Scenario::name_in(&table).unwrap_or_else(|| "scenario".into());
    run_named(&sc, &name, threads, interrupt, &Progress::new("", true))
}

/// [`run_point_output`], then its results directory written into `dir` (created).
pub fn run_point(toml: &str, dir: &Path, threads: usize, interrupt: &Arc<AtomicBool>) -> Result<Output> {
    let (o, meta) = run_point_output(toml, threads, interrupt)?;
    output::write_all(dir, &o, &meta)?;
    Ok(o)
}

/// A fresh temporary directory inside the sweep's directory for point `dir_name` (so the final
/// rename stays on one file system).
pub fn point_tmp(sweep_dir: &Path, dir_name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    sweep_dir.join(format!(".{dir_name}.tmp-{}-{n}", std::process::id()))
}

/// Moves a point's finished results directory `tmp` to `sweep_dir/dir_name`. An unfinished
/// directory of that name (an interrupted run) is replaced; a finished one is kept and `tmp`
/// removed, so a point that ran twice is stored once. Returns whether `tmp` was installed.
pub fn commit_point(sweep_dir: &Path, dir_name: &str, tmp: &Path) -> Result<bool> {
    let dst = sweep_dir.join(dir_name);
    if dst.exists() {
        if summary_complete(&dst) {
            let _ = std::fs::remove_dir_all(tmp);
            return Ok(false);
        }
        std::fs::remove_dir_all(&dst).with_context(|| format!("removing unfinished {}", dst.display()))?;
    }
    match std::fs::rename(tmp, &dst) {
        Ok(()) => Ok(true),
        // Another attempt of the same point got there first.
        Err(_) if summary_complete(&dst) => {
            let _ = std::fs::remove_dir_all(tmp);
            Ok(false)
        }
        Err(e) => Err(e).with_context(|| format!("renaming {} to {}", tmp.display(), dst.display())),
    }
}

/// Whether the results directory `d` has a summary.json that says `"complete": true`.
fn summary_complete(d: &Path) -> bool {
    std::fs::read(d.join("summary.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .is_some_and(|v| v["complete"] == Value::Bool(true))
}

/// Removes temporary point directories an interrupted sweep left behind.
pub fn remove_stale_tmps(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().to_string();
            if n.starts_with(".point-") && n.contains(".tmp-") {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

/// The sweep's own files from the point directories in `dir`: `results.sqlite` (every run,
/// with its point), `sweep.csv` (one row per point: index, values, every scalar's mean),
/// `summary.json`, `run.json` (the sweep's start, wall time, events of every point and worker
/// count) and `report.md`. Returns whether every point is finished.
pub fn assemble(
    dir: &Path,
    plan: &Plan,
    started: std::time::SystemTime,
    elapsed_s: f64,
    workers: usize,
) -> Result<bool> {
    let tmp = dir.join(".results.sqlite.tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut db = rusqlite::Connection::open(&tmp)?;
    create_schema(&db)?;
    let tx = db.transaction()?;
    let mut summary_points = Vec::new();
    let mut csv = String::new();
    let mut header_done = false;
    let mut complete = true;
    let mut collected: Vec<(&Point, Output)> = Vec::new();
    for p in &plan.points {
        let pd = dir.join(p.dir_name());
        if !pd.join("results.sqlite").is_file() {
            complete = false;
            continue;
        }
        let o = output::read_output(&pd)?;
        complete &= o.complete();
        let point = p.values_json();
        let meta = Meta {
            kind: "sweep-point",
            seed: p.scenario.seed,
            resolved: None,
            extra: Default::default(),
            run_info: Default::default(),
            seeds: (0..p.scenario.replications).map(|i| replication_seed(p.scenario.seed, i)).collect(),
        };
        insert_output(&tx, &o, &meta, &Value::Object(point.clone()))?;
        let sc: serde_json::Map<String, Value> =
            o.aggregate.iter().map(|(n, m, c, u)| (n.clone(), json!({"value": m, "ci95": c, "unit": u}))).collect();
        summary_points.push(
            json!({"index": p.index, "point": point, "dir": p.dir_name(), "complete": o.complete(), "scalars": sc}),
        );
        if !header_done {
            let keys: Vec<&str> = p.values.iter().map(|(k, _)| k.as_str()).collect();
            let names: Vec<&str> = o.aggregate.iter().map(|a| a.0.as_str()).collect();
            let _ = writeln!(csv, "point,{},{}", keys.join(","), names.join(","));
            header_done = true;
        }
        let vals: Vec<String> = p.values.iter().map(|(_, v)| v.clone()).collect();
        let nums: Vec<String> = o.aggregate.iter().map(|a| a.1.to_string()).collect();
        let _ = writeln!(csv, "{},{},{}", p.index, vals.join(","), nums.join(","));
        collected.push((p, o));
    }
    tx.commit()?;
    drop(db);
    std::fs::rename(&tmp, dir.join("results.sqlite"))?;
    write_atomic(dir, "sweep.csv", csv.as_bytes())?;
    let summary = json!({"npqos_version": output::version(), "kind": "sweep", "scenario": plan.name, "complete": complete,
        "axes": plan.axes.iter().map(|(k, v)| json!({"key": k, "values": v})).collect::<Vec<_>>(), "points": summary_points});
    write_atomic(dir, "summary.json", format!("{}\n", serde_json::to_string_pretty(&summary)?).as_bytes())?;
    let events = collected.iter().flat_map(|(_, o)| o.runs.iter()).map(|r| r.events).sum();
    let info = run_info(started, elapsed_s, events, workers);
    write_atomic(dir, "run.json", serde_json::to_string_pretty(&Value::Object(info))?.as_bytes())?;
    write_report(dir, &plan.name, &plan.axes, &collected)?;
    crate::report::write_html(dir)?;
    Ok(complete)
}

/// `npqos sweep`: on `jobs` local threads, or through the Python package on the Dask cluster at
/// `dask`.
#[allow(clippy::too_many_arguments)]
pub fn sweep(
    path: &Path,
    sets: &[String],
    jobs: usize,
    out: Option<PathBuf>,
    seed: Option<u64>,
    quiet: bool,
    dask: Option<String>,
) -> Result<()> {
    if let Some(addr) = dask {
        return via_dask(path, sets, out, seed, quiet, &addr);
    }
    let (base, _) = load(path)?;
    let axes = parse_sets(sets)?;
    let name = super::run::name_of(path, &base);
    // Absolute, so every point's resolved scenario names its traces wherever it runs.
    let base_dir = std::path::absolute(path.parent().unwrap_or(Path::new("."))).unwrap_or_default();
    let plan = Plan::new(&base, &path.display().to_string(), &base_dir, &name, axes, seed)?;
    let parallel = jobs.clamp(1, plan.points.len().max(1));
    plan.check_memory(parallel)?;
    let dir = out.unwrap_or_else(|| output::default_dir("sweep", &name));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    remove_stale_tmps(&dir);
    plan.write_jobs(&dir)?;
    let todo: Vec<&Point> = plan.points.iter().filter(|p| !plan.finished(&dir, p)).collect();
    if !quiet && todo.len() < plan.points.len() {
        eprintln!(
            "{} of {} points already finished in {}; running the other {}",
            plan.points.len() - todo.len(),
            plan.points.len(),
            dir.display(),
            todo.len()
        );
    }

    let flag = interrupt_flag();
    let progress = Progress::new(&name, quiet);
    let next = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let per_point = (std::thread::available_parallelism().map_or(1, |n| n.get()) / parallel).max(1);
    let started = std::time::SystemTime::now();
    let t0 = std::time::Instant::now();
    let failures: std::sync::Mutex<Vec<anyhow::Error>> = Default::default();
    std::thread::scope(|s| {
        for _ in 0..parallel.min(todo.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= todo.len() || flag.load(Ordering::Relaxed) {
                    return;
                }
                let p = todo[i];
                let tmp = point_tmp(&dir, &p.dir_name());
                let r = run_point(&plan.point_toml(p), &tmp, per_point, &flag)
                    .and_then(|_| commit_point(&dir, &p.dir_name(), &tmp))
                    .with_context(|| format!("sweep point {} ({})", p.index, p.label()));
                if let Err(e) = r {
                    let _ = std::fs::remove_dir_all(&tmp);
                    failures.lock().expect("no worker panicked").push(e);
                    flag.store(true, Ordering::Relaxed);
                    return;
                }
                progress.set((finished.fetch_add(1, Ordering::Relaxed) + 1) as f64 / todo.len() as f64);
            });
        }
    });
    progress.finish();
    if let Some(e) = failures.into_inner().expect("no worker panicked").into_iter().next() {
        return Err(e);
    }
    let complete = assemble(&dir, &plan, started, t0.elapsed().as_secs_f64(), parallel)?;
    if !quiet {
        println!("{} points -> {}", plan.points.len(), dir.display());
        print!("{}", std::fs::read_to_string(dir.join("sweep.csv")).unwrap_or_default());
    }
    if !complete || flag.load(Ordering::Relaxed) {
        return Err(Interrupted(dir.display().to_string()).into());
    }
    Ok(())
}

/// `npqos sweep --dask ADDR`: the same sweep through the Python package (`python -m npqos
/// sweep`), whose points are Dask tasks. The Python is `$NPQOS_PYTHON`, else `python3`.
fn via_dask(
    path: &Path,
    sets: &[String],
    out: Option<PathBuf>,
    seed: Option<u64>,
    quiet: bool,
    addr: &str,
) -> Result<()> {
    let python = std::env::var("NPQOS_PYTHON").unwrap_or_else(|_| "python3".into());
    let check = std::process::Command::new(&python).args(["-c", "import npqos, distributed"]).output();
    match check {
        Err(e) => return Err(bad(format!(
            "--dask runs the sweep through the npqos Python package, but {python} cannot be started: {e}; set NPQOS_PYTHON to a Python where `pip install .` was run"
        ))),
        Ok(o) if !o.status.success() => {
            let why = String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or("").to_string();
            return Err(bad(format!(
                "--dask runs the sweep through the npqos Python package and dask.distributed, which {python} cannot import ({why}); `pip install .` (and `pip install \"dask[distributed]\"`) in that Python, or set NPQOS_PYTHON"
            )));
        }
        Ok(_) => {}
    }
    let mut cmd = std::process::Command::new(&python);
    cmd.args(["-m", "npqos", "sweep"]).arg(path).args(["--dask", addr]);
    for s in sets {
        cmd.args(["--set", s]);
    }
    if let Some(o) = out {
        cmd.arg("--out").arg(o);
    }
    if let Some(s) = seed {
        cmd.args(["--seed", &s.to_string()]);
    }
    if quiet {
        cmd.arg("--quiet");
    }
    let status = cmd.status().with_context(|| format!("starting {python} -m npqos sweep"))?;
    match status.code() {
        Some(0) => Ok(()),
        Some(code) => Err(crate::error::Exit(code).into()),
        None => Err(anyhow::anyhow!("{python} -m npqos sweep was killed by a signal")),
    }
}

/// report.md with a table of every point and, when the first axis is numeric, plots of the
/// main scalars against it (one line per value of the other axes).
fn write_report(dir: &Path, name: &str, axes: &[(String, Vec<String>)], pts: &[(&Point, Output)]) -> Result<()> {
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
    for (p, o) in pts {
        let vals: Vec<&str> = p.values.iter().map(|(_, v)| v.as_str()).collect();
        let nums: Vec<String> = shown
            .iter()
            .map(|n| o.aggregate.iter().find(|a| a.0 == *n).map(|a| num(a.1)).unwrap_or_default())
            .collect();
        let _ = writeln!(s, "| {} | {} | {} |", p.index, vals.join(" | "), nums.join(" | "));
    }
    // One plot per main scalar and numeric axis: the scalar's mean against the axis, a curve
    // per combination of the other axes' values, whiskers for the 95% confidence interval where
    // points have replications.
    let x_numeric = |v: &str| v.trim_matches('"').parse::<f64>().ok();
    let mut plotted = false;
    for (k, (key, _)) in axes.iter().enumerate() {
        if !pts.iter().all(|(p, _)| x_numeric(&p.values[k].1).is_some()) {
            continue;
        }
        if !plotted {
            s.push_str("\n## Plots\n\n");
            plotted = true;
        }
        for metric in &shown {
            let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
            let mut whiskers: Vec<crate::plots::Whiskers> = Vec::new();
            for (p, o) in pts {
                let rest = p
                    .values
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != k)
                    .map(|(_, (k, v))| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ");
                let legend = if rest.is_empty() { metric.to_string() } else { rest };
                let Some(a) = o.aggregate.iter().find(|a| a.0 == *metric) else { continue };
                let x = x_numeric(&p.values[k].1).expect("checked");
                match lines.iter_mut().find(|l| l.0 == legend) {
                    Some(l) => l.1.push((x, a.1)),
                    None => lines.push((legend.clone(), vec![(x, a.1)])),
                }
                if o.runs.len() > 1 && a.2.is_finite() && a.2 > 0.0 {
                    match whiskers.iter_mut().find(|w| w.0 == legend) {
                        Some(w) => w.1.push((x, a.1 - a.2, a.1 + a.2)),
                        None => whiskers.push((legend, vec![(x, a.1 - a.2, a.1 + a.2)])),
                    }
                }
            }
            for l in &mut lines {
                l.1.sort_by(|a, b| a.0.total_cmp(&b.0));
            }
            let unit = first.aggregate.iter().find(|a| a.0 == *metric).map(|a| a.3.clone()).unwrap_or_default();
            let spec = PlotSpec {
                name: if k == 0 { format!("sweep-{metric}") } else { format!("sweep-{metric}-by-{key}") },
                title: format!("{metric} vs {key}"),
                x_label: key.clone(),
                y_label: if unit.is_empty() { metric.to_string() } else { format!("{metric} ({unit})") },
                lines,
                kind: PlotKind::Lines,
                log_x: false,
                log_y: false,
                ..Default::default()
            };
            let mut style = crate::plots::Style::new(std::slice::from_ref(&spec), &[]);
            style.set_whiskers(&spec.name, whiskers);
            let file = format!("{}.svg", spec.name);
            write_atomic(dir, &file, crate::plots::render_styled(&spec, &style)?.as_bytes())?;
            let ci = if pts.iter().any(|(_, o)| o.runs.len() > 1) {
                " (whiskers: 95% confidence interval over the replications)"
            } else {
                ""
            };
            let _ = writeln!(s, "![{metric} vs {key}{ci}]({file})\n");
        }
    }
    write_atomic(dir, "report.md", s.as_bytes())
}
