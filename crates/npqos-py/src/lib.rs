//! `npqos._native`: the Rust half of the Python package. Thin: every function calls the
//! library behind the `npqos` command (`npqos_cli`), so a run, a reproduction or a sweep point
//! started from Python writes the results directory the CLI writes, byte for byte. Tables come
//! back as columns (lists) that `python/npqos` turns into pandas DataFrames; simulations run
//! with the GIL released, on a thread of their own so Ctrl-C still reaches Python.

use npqos_cli::commands::{model, reproduce as repro, run as cli_run, sweep, trace};
use npqos_cli::error::exit_code;
use npqos_cli::output::{self, Meta};
use npqos_cli::progress::Progress;
use npqos_sim::results::Output;
use npqos_sim::scenario::{self as sc, Problem, Problems};
use pyo3::create_exception;
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

create_exception!(
    npqos,
    BadInput,
    PyValueError,
    "Bad input: a scenario, key, value, trace or argument npqos refuses. The message is the one the npqos command prints (file, key path, value, what was expected)."
);

/// The error as the CLI prints it (without `error: `): bad input (exit code 2) as `BadInput`,
/// anything else as `RuntimeError`.
fn py_err(e: anyhow::Error) -> PyErr {
    let msg = if e.downcast_ref::<Problems>().is_some() { e.to_string() } else { format!("{e:#}") };
    let msg = msg.trim_end().to_string();
    if exit_code(&e) == 2 {
        BadInput::new_err(msg)
    } else {
        PyRuntimeError::new_err(msg)
    }
}

/// Runs `f` on a thread of its own with the GIL released, checking for Ctrl-C (on the main
/// thread) while it runs: on Ctrl-C the run is asked to stop and `KeyboardInterrupt` raised.
fn run_released<T: Send>(py: Python<'_>, f: impl FnOnce(&Arc<AtomicBool>) -> anyhow::Result<T> + Send) -> PyResult<T> {
    let flag = Arc::new(AtomicBool::new(false));
    std::thread::scope(|s| {
        let h = s.spawn(|| f(&flag));
        loop {
            let done = py.detach(|| {
                for _ in 0..20 {
                    if h.is_finished() {
                        return true;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                false
            });
            if done {
                break;
            }
            if let Err(e) = py.check_signals() {
                flag.store(true, Ordering::Relaxed);
                py.detach(|| {
                    while !h.is_finished() {
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                });
                return Err(e);
            }
        }
        let r = h.join().map_err(|_| PyRuntimeError::new_err("npqos: the run panicked (a bug; please report it)"))?;
        if flag.load(Ordering::Relaxed) {
            return Err(PyKeyboardInterrupt::new_err("interrupted"));
        }
        r.map_err(py_err)
    })
}

/// A validated scenario: the parsed table (after overrides), where relative paths resolve, its
/// name and the checked `Scenario`.
#[pyclass(frozen, module = "npqos._native")]
struct Scenario {
    table: toml::Table,
    file: String,
    base_dir: PathBuf,
    name: String,
    sc: sc::Scenario,
}

#[pymethods]
impl Scenario {
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }
    #[getter]
    fn model(&self) -> &'static str {
        self.sc.model()
    }
    #[getter]
    fn seed(&self) -> u64 {
        self.sc.seed
    }
    /// The scenario with every default filled in (the body of `scenario.resolved.toml`).
    fn resolved_toml(&self) -> String {
        toml::to_string(&self.sc.to_toml()).unwrap_or_default()
    }
}

/// Reads a scenario from a file (`kind = "path"`), TOML text (`"toml"`) or a dict given as
/// JSON text (`"json"`), applies `overrides` (dotted key, value as on the command line),
/// validates it and overrides its seed.
#[pyfunction]
#[pyo3(signature = (source, kind, overrides, seed=None, name=None))]
fn load(
    source: &str,
    kind: &str,
    overrides: Vec<(String, String)>,
    seed: Option<u64>,
    name: Option<String>,
) -> PyResult<Scenario> {
    let is_path = kind == "path";
    let (mut table, file, base_dir) = match kind {
        "path" => {
            let p = Path::new(source);
            let t = cli_run::read_table(p).map_err(py_err)?;
            (t, source.to_string(), p.parent().map(Path::to_path_buf).unwrap_or_default())
        }
        "toml" => {
            let t: toml::Table = toml::from_str(source)
                .map_err(|e| BadInput::new_err(format!("<scenario>: TOML syntax error: {}", e.to_string().trim())))?;
            (t, "<scenario>".to_string(), PathBuf::from("."))
        }
        _ => {
            let v: serde_json::Value =
                serde_json::from_str(source).map_err(|e| BadInput::new_err(format!("<scenario dict>: {e}")))?;
            let t = toml::Table::try_from(v).map_err(|e| {
                BadInput::new_err(format!("<scenario dict>: not a TOML table ({e}); values must be str, int, float, bool, lists or dicts, never None"))
            })?;
            (t, "<scenario dict>".to_string(), PathBuf::from("."))
        }
    };
    let mut problems = Vec::new();
    for (k, v) in &overrides {
        if let Err(m) = sc::set_key(&mut table, k, v) {
            problems.push(Problem { key: k.clone(), value: Some(v.clone()), message: m });
        }
    }
    if !problems.is_empty() {
        return Err(py_err(Problems { file, list: problems }.into()));
    }
    let mut s = sc::Scenario::from_table(&table, &file, &base_dir).map_err(|e| py_err(e.into()))?;
    if let Some(seed) = seed {
        s.seed = seed;
    }
    let name = name.or_else(|| sc::Scenario::name_in(&table)).unwrap_or_else(|| {
        if is_path {
            cli_run::name_of(Path::new(source), &table)
        } else {
            "scenario".into()
        }
    });
    Ok(Scenario { table, file, base_dir, name, sc: s })
}

/// The output of a run or a reproduction, with what its results directory needs.
#[pyclass(frozen, module = "npqos._native")]
struct RunOutput {
    out: Output,
    meta: Meta,
}

/// A row's run: label, parameters (JSON) and seed.
type RunKey = (String, String, u64);

impl RunOutput {
    /// One row per item `items` gives for each run, each prefixed by the run's key.
    fn rows<T>(&self, items: impl Fn(&npqos_sim::results::RunResult) -> Vec<T>) -> Vec<(RunKey, T)> {
        let mut out = Vec::new();
        for (i, r) in self.out.runs.iter().enumerate() {
            let seed = self.meta.seeds.get(i).copied().unwrap_or(self.meta.seed);
            let key = (r.label.clone(), serde_json::to_string(&r.params).unwrap_or_default(), seed);
            out.extend(items(r).into_iter().map(|t| (key.clone(), t)));
        }
        out
    }
}

/// A count row's fields as a JSON object, the drops as `dropped_<reason>`.
fn count_object(
    r: &npqos_sim::results::RunResult,
    c: &npqos_sim::results::CountRow,
) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    for (k, v) in [
        ("offered_packets", c.offered_packets),
        ("offered_bytes", c.offered_bytes),
        ("sent_packets", c.sent_packets),
        ("sent_bytes", c.sent_bytes),
        ("dropped_packets", c.dropped_packets),
        ("overlimits", c.overlimits),
        ("backlog_packets", c.backlog_packets),
        ("backlog_bytes", c.backlog_bytes),
    ] {
        m.insert(k.into(), v.into());
    }
    for (reason, n) in r.drop_reasons.iter().zip(&c.dropped) {
        m.insert(format!("dropped_{reason}"), (*n).into());
    }
    m.insert("delay_mean_ns".into(), c.delay_mean_ns.into());
    m.insert("delay_max_ns".into(), c.delay_max_ns.into());
    m
}

#[pymethods]
impl RunOutput {
    #[getter]
    fn id(&self) -> &str {
        &self.out.id
    }
    #[getter]
    fn complete(&self) -> bool {
        self.out.complete()
    }
    /// summary.json, as `npqos` writes it.
    fn summary_json(&self) -> PyResult<String> {
        let v = output::summary_json(&self.out, &self.meta);
        Ok(format!("{}\n", serde_json::to_string_pretty(&v).map_err(|e| PyRuntimeError::new_err(e.to_string()))?))
    }
    /// Writes the standard results directory into `dir`.
    fn write(&self, py: Python<'_>, dir: PathBuf) -> PyResult<()> {
        py.detach(|| output::write_all(&dir, &self.out, &self.meta)).map_err(py_err)
    }
    /// Rows of the scalars: ((run, params JSON, seed), (name, value, unit)).
    fn scalars(&self) -> Vec<(RunKey, (String, f64, String))> {
        self.rows(|r| r.scalars.iter().map(|s| (s.name.clone(), s.value, s.unit.clone())).collect())
    }
    /// Rows of the time series: (run key, (name, x, y, x_unit, unit)).
    #[allow(clippy::type_complexity)]
    fn series(&self) -> Vec<(RunKey, (String, f64, f64, String, String))> {
        self.rows(|r| {
            r.series
                .iter()
                .flat_map(|s| s.points.iter().map(|&(x, y)| (s.name.clone(), x, y, s.x_unit.clone(), s.unit.clone())))
                .collect()
        })
    }
    /// Rows of the histograms: (run key, (name, lo, hi, count, unit)).
    #[allow(clippy::type_complexity)]
    fn histograms(&self) -> Vec<(RunKey, (String, f64, f64, u64, String))> {
        self.rows(|r| {
            r.histograms
                .iter()
                .flat_map(|h| h.bins.iter().map(|&(lo, hi, n)| (h.name.clone(), lo, hi, n, h.unit.clone())))
                .collect()
        })
    }
    /// Rows of the flow counters (flows.csv): (run key, the row as a JSON object: flow, class,
    /// kind, the counts, `dropped_<reason>` per drop reason, offered_bytes_error).
    fn flows(&self) -> Vec<(RunKey, String)> {
        self.rows(|r| {
            r.flows
                .iter()
                .map(|f| {
                    let mut m = count_object(r, &f.counts);
                    m.insert("flow".into(), f.flow.clone().into());
                    m.insert("class".into(), f.class.clone().into());
                    m.insert("kind".into(), f.kind.into());
                    m.insert("offered_bytes_error".into(), f.offered_bytes_error.into());
                    serde_json::Value::Object(m).to_string()
                })
                .collect()
        })
    }
    /// Rows of the class counters (classes.csv): (run key, the row as a JSON object: class, the
    /// counts, `dropped_<reason>` per drop reason, delay_p50_ns, delay_p99_ns).
    fn classes(&self) -> Vec<(RunKey, String)> {
        self.rows(|r| {
            r.classes
                .iter()
                .map(|c| {
                    let mut m = count_object(r, &c.counts);
                    m.insert("class".into(), c.class.clone().into());
                    m.insert("delay_p50_ns".into(), c.delay_p50_ns.into());
                    m.insert("delay_p99_ns".into(), c.delay_p99_ns.into());
                    serde_json::Value::Object(m).to_string()
                })
                .collect()
        })
    }
    /// Rows of the packet functions' reports (detections.csv): (run key, the row as a JSON
    /// object: class, what, who, at_ns, window_start_ns, count).
    fn detections(&self) -> Vec<(RunKey, String)> {
        self.rows(|r| r.detections.iter().map(|d| serde_json::to_value(d).unwrap_or_default().to_string()).collect())
    }
    /// Rows of the comparison with the paper: (metric, params JSON, ours, paper, unit, source).
    fn comparisons(&self) -> Vec<(String, String, f64, Option<f64>, String, String)> {
        self.out
            .comparisons
            .iter()
            .map(|k| {
                let params = serde_json::to_string(&k.params).unwrap_or_default();
                (k.metric.clone(), params, k.ours, k.paper, k.unit.clone(), k.source.clone())
            })
            .collect()
    }
    /// The mean and 95% confidence half-width of each scalar over the replications.
    fn aggregate(&self) -> Vec<(String, f64, f64, String)> {
        self.out.aggregate.clone()
    }
    /// The assumptions a reproduction lists.
    fn assumptions(&self) -> Vec<String> {
        self.out.assumptions.clone()
    }
}

/// Runs a scenario on `threads` workers (default: one per CPU within the memory budget).
#[pyfunction]
#[pyo3(signature = (scenario, threads=None))]
fn run(py: Python<'_>, scenario: &Scenario, threads: Option<usize>) -> PyResult<RunOutput> {
    let threads = cli_run::threads_for(&scenario.sc, threads, &scenario.file).map_err(py_err)?;
    let (out, meta) = run_released(py, |flag| {
        cli_run::run_named(&scenario.sc, &scenario.name, threads, flag, &Progress::new("", true))
    })?;
    Ok(RunOutput { out, meta })
}

/// Runs the reproduction `id` of a paper's experiment.
#[pyfunction]
#[pyo3(signature = (id, quick=true, seed=1, threads=None))]
fn reproduce(py: Python<'_>, id: &str, quick: bool, seed: u64, threads: Option<usize>) -> PyResult<RunOutput> {
    let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let (out, meta) = run_released(py, |_| repro::reproduce_one(id, quick, seed, threads, &Progress::new("", true)))?;
    Ok(RunOutput { out, meta })
}

/// Every experiment's declaration (id, description, grids, paper values) as JSON.
#[pyfunction]
fn experiments() -> String {
    let v: Vec<serde_json::Value> = npqos_sim::experiments::EXPERIMENTS.iter().map(repro::declaration).collect();
    serde_json::to_string(&v).unwrap_or_default()
}

/// The scenario models: (name, description).
#[pyfunction]
fn models() -> Vec<(&'static str, &'static str)> {
    npqos_sim::models::MODELS.iter().map(|m| (m.name(), m.description())).collect()
}

/// `npqos trace stats --json` of `files`, as JSON text.
#[pyfunction]
#[pyo3(signature = (files, lenient=false))]
fn trace_stats(py: Python<'_>, files: Vec<PathBuf>, lenient: bool) -> PyResult<String> {
    let v = py.detach(|| trace::stats_json(&files, lenient)).map_err(py_err)?;
    Ok(serde_json::to_string(&v).unwrap_or_default())
}

/// `npqos model ARGS... --json`, as JSON text (`args` starts with the model's short name).
#[pyfunction]
fn sizing_model(args: Vec<String>) -> PyResult<String> {
    let v = model::model_json(&args).map_err(py_err)?;
    Ok(v.to_string())
}

/// A validated sweep over a scenario.
#[pyclass(frozen, module = "npqos._native")]
struct SweepPlan {
    plan: sweep::Plan,
}

#[pymethods]
impl SweepPlan {
    #[getter]
    fn name(&self) -> &str {
        &self.plan.name
    }
    /// (index, directory name, [(key, value)], resolved scenario TOML) of every point.
    #[allow(clippy::type_complexity)]
    fn points(&self) -> Vec<(usize, String, Vec<(String, String)>, String)> {
        self.plan.points.iter().map(|p| (p.index, p.dir_name(), p.values.clone(), self.plan.point_toml(p))).collect()
    }
    /// Refuses `parallel` points at once beyond the memory budget.
    fn check_memory(&self, parallel: usize) -> PyResult<()> {
        self.plan.check_memory(parallel).map_err(py_err)
    }
    /// Whether `dir` holds point `index` finished (complete, same resolved scenario).
    fn finished(&self, dir: PathBuf, index: usize) -> bool {
        self.plan.points.get(index).is_some_and(|p| self.plan.finished(&dir, p))
    }
    /// Writes jobs.json into `dir` (created), removing temporary point directories an
    /// interrupted sweep left there.
    fn prepare(&self, dir: PathBuf) -> PyResult<()> {
        std::fs::create_dir_all(&dir)
            .map_err(|e| PyRuntimeError::new_err(format!("creating {}: {e}", dir.display())))?;
        sweep::remove_stale_tmps(&dir);
        self.plan.write_jobs(&dir).map_err(py_err)
    }
    /// Writes the sweep's own files from its point directories; whether all are finished.
    fn assemble(&self, py: Python<'_>, dir: PathBuf, elapsed_s: f64, workers: usize) -> PyResult<bool> {
        let started = std::time::SystemTime::now() - std::time::Duration::from_secs_f64(elapsed_s.max(0.0));
        py.detach(|| sweep::assemble(&dir, &self.plan, started, elapsed_s, workers)).map_err(py_err)
    }
}

/// Expands and validates a sweep of `scenario` over `axes` ([(key, [values])]).
#[pyfunction]
#[pyo3(signature = (scenario, axes, seed=None))]
fn plan_sweep(scenario: &Scenario, axes: Vec<(String, Vec<String>)>, seed: Option<u64>) -> PyResult<SweepPlan> {
    let base_dir = std::path::absolute(&scenario.base_dir).unwrap_or_else(|_| scenario.base_dir.clone());
    let plan =
        sweep::Plan::new(&scenario.table, &scenario.file, &base_dir, &scenario.name, axes, seed).map_err(py_err)?;
    Ok(SweepPlan { plan })
}

/// Runs one sweep point (its resolved TOML) as `npqos run` of it does. With `dir`, writes its
/// results directory there. Returns the aggregate scalars (name, mean, ci95, unit).
#[pyfunction]
#[pyo3(signature = (toml, dir=None, threads=1))]
fn run_point(
    py: Python<'_>,
    toml: String,
    dir: Option<PathBuf>,
    threads: usize,
) -> PyResult<Vec<(String, f64, f64, String)>> {
    run_released(py, |flag| {
        let o = match &dir {
            Some(d) => sweep::run_point(&toml, d, threads.max(1), flag)?,
            None => sweep::run_point_output(&toml, threads.max(1), flag)?.0,
        };
        Ok(o.aggregate)
    })
}

/// `value` as a `--set` value that reads back as the string `value`: itself when TOML would not
/// read it as something else (`10Gbps`), else quoted (`"5"`, `"true"`).
#[pyfunction]
fn string_override(value: &str) -> String {
    let mut probe = toml::Table::new();
    if sc::set_key(&mut probe, "v", value).is_ok() && probe.get("v") == Some(&toml::Value::String(value.into())) {
        value.to_string()
    } else {
        toml::Value::String(value.into()).to_string()
    }
}

/// A fresh temporary directory name for point `dir_name` inside the sweep directory.
#[pyfunction]
fn point_tmp(sweep_dir: PathBuf, dir_name: &str) -> PathBuf {
    sweep::point_tmp(&sweep_dir, dir_name)
}

/// Installs a point's finished results directory `tmp` as `sweep_dir/dir_name` (a finished one
/// already there is kept). Returns whether `tmp` was installed.
#[pyfunction]
fn commit_point(sweep_dir: PathBuf, dir_name: &str, tmp: PathBuf) -> PyResult<bool> {
    sweep::commit_point(&sweep_dir, dir_name, &tmp).map_err(py_err)
}

/// The aggregate scalars of a finished point directory (read from its results.sqlite).
#[pyfunction]
fn read_point(dir: PathBuf) -> PyResult<Vec<(String, f64, f64, String)>> {
    Ok(output::read_output(&dir).map_err(py_err)?.aggregate)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("BadInput", m.py().get_type::<BadInput>())?;
    m.add("__version__", output::version())?;
    m.add_class::<Scenario>()?;
    m.add_class::<RunOutput>()?;
    m.add_class::<SweepPlan>()?;
    for f in [
        wrap_pyfunction!(load, m)?,
        wrap_pyfunction!(run, m)?,
        wrap_pyfunction!(reproduce, m)?,
        wrap_pyfunction!(experiments, m)?,
        wrap_pyfunction!(models, m)?,
        wrap_pyfunction!(trace_stats, m)?,
        wrap_pyfunction!(sizing_model, m)?,
        wrap_pyfunction!(plan_sweep, m)?,
        wrap_pyfunction!(run_point, m)?,
        wrap_pyfunction!(point_tmp, m)?,
        wrap_pyfunction!(commit_point, m)?,
        wrap_pyfunction!(read_point, m)?,
        wrap_pyfunction!(string_override, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
