//! `npqos run`: validate a scenario, run its replications (in parallel if asked), write results.

use crate::error::{bad, from_trace, Interrupted};
use crate::output::{self, Meta};
use crate::progress::Progress;
use anyhow::Result;
use npqos_sim::results::{Output, RunResult};
use npqos_sim::scenario::{human_bytes, ModelError, Scenario};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The process-wide Ctrl-C flag (installed once). When this process started with SIGINT
/// ignored (a background job of a shell without job control, `nohup`-style launchers), it stays
/// ignored and the flag never trips, as POSIX tools do: Ctrl-C at the terminal is then meant for
/// the foreground job, not this one.
pub fn interrupt_flag() -> Arc<AtomicBool> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    FLAG.get_or_init(|| {
        let f = Arc::new(AtomicBool::new(false));
        let g = f.clone();
        if sigint_ignored() {
            tracing::debug!("SIGINT was ignored at start; leaving it ignored");
        } else if let Err(e) = ctrlc::set_handler(move || g.store(true, Ordering::Relaxed)) {
            tracing::warn!("cannot install the Ctrl-C handler: {e}");
        }
        f
    })
    .clone()
}

/// Whether SIGINT's disposition is "ignore" (inherited across exec).
#[cfg(target_os = "linux")]
fn sigint_ignored() -> bool {
    // SAFETY: with a null new action, sigaction only writes the current one into `old`, a
    // zeroed plain-data struct owned here.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGINT, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

#[cfg(not(target_os = "linux"))]
fn sigint_ignored() -> bool {
    false
}

/// Reads a scenario file's TOML (not yet validated); problems are bad input (exit 2).
pub fn read_table(path: &Path) -> Result<toml::Table> {
    let text =
        std::fs::read_to_string(path).map_err(|e| bad(format!("{}: cannot read scenario: {e}", path.display())))?;
    toml::from_str(&text).map_err(|e| bad(format!("{}: TOML syntax error: {}", path.display(), e.to_string().trim())))
}

/// Reads and validates a scenario file; problems are bad input (exit 2).
pub fn load(path: &Path) -> Result<(toml::Table, Scenario)> {
    let table = read_table(path)?;
    let base = path.parent().unwrap_or(Path::new("."));
    let sc = Scenario::from_table(&table, &path.display().to_string(), base)?;
    Ok((table, sc))
}

/// Seed of replication `i`: the scenario seed plus `i`.
pub fn replication_seed(seed: u64, i: u32) -> u64 {
    seed.wrapping_add(i as u64)
}

/// Runs one replication of `sc` with `seed` on the model it names, on up to `threads` threads
/// (the router and the link model make their arrivals on a second one, kim runs its shards in
/// parallel; the other models use one). Errors are bad input (exit 2: a trace, a configuration the mechanism
/// refuses) or internal failures (exit 1).
fn run_one(
    sc: &Scenario,
    id: &str,
    seed: u64,
    threads: usize,
    interrupt: &Arc<AtomicBool>,
    report: &mut dyn FnMut(npqos_core::Instant),
) -> Result<RunResult> {
    sc.run(seed, threads, Some(interrupt.clone()), report).map_err(|e| match e {
        ModelError::Bad(m) => bad(format!("{id}: {m}")),
        ModelError::Trace(t) => from_trace(t),
        other => anyhow::Error::new(other),
    })
}

/// Runs every replication of `sc` on `threads` workers. Results are in replication order,
/// whatever the number of threads. Stops early (keeping finished and partial runs) when
/// `interrupt` is raised.
pub fn execute(
    sc: &Scenario,
    id: &str,
    threads: usize,
    interrupt: &Arc<AtomicBool>,
    progress: &Progress,
) -> Result<Output> {
    let n = sc.replications as usize;
    let next = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<Result<RunResult>>>> = Mutex::new((0..n).map(|_| None).collect());
    let done_ns: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let total_ns = sc.duration.as_nanos() as f64 * n as f64;
    let workers = threads.clamp(1, n);
    // Threads left over when there are fewer replications than threads go to each one.
    let per_run = (threads / workers).max(1);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n || interrupt.load(Ordering::Relaxed) {
                    return;
                }
                let seed = replication_seed(sc.seed, i as u32);
                let mut report = |now: npqos_core::Instant| {
                    done_ns[i].store(now.as_nanos(), Ordering::Relaxed);
                    let sum: u64 = done_ns.iter().map(|a| a.load(Ordering::Relaxed)).sum();
                    progress.set(sum as f64 / total_ns);
                };
                let r = run_one(sc, id, seed, per_run, interrupt, &mut report);
                slots.lock().expect("no worker panicked")[i] = Some(r);
            });
        }
    });
    let mut out = Output { id: id.to_string(), ..Default::default() };
    for (i, r) in slots.into_inner().expect("no worker panicked").into_iter().enumerate() {
        let Some(r) = r else { continue };
        let mut r = r?;
        r.label = format!("rep{i}");
        r.params.insert("replication".into(), json!(i));
        out.runs.push(r);
    }
    out.aggregate_runs();
    Ok(out)
}

/// The worker threads of a run: as given, or one per CPU, lowered while the replications that
/// would run in parallel do not fit the scenario's memory budget. Refuses (bad input) a count
/// whose parallel replications do not fit.
pub fn threads_for(sc: &Scenario, threads: Option<usize>, file: &str) -> Result<usize> {
    let threads = threads.map(|t| t.max(1)).unwrap_or_else(|| {
        let mut t = std::thread::available_parallelism().map_or(1, |n| n.get());
        while t > 1 && sc.estimate_memory(t.clamp(1, sc.replications as usize) as u32) > sc.memory_budget {
            t -= 1;
        }
        t
    });
    let parallel = threads.clamp(1, sc.replications as usize) as u32;
    let need = sc.estimate_memory(parallel);
    if need > sc.memory_budget {
        return Err(bad(format!(
            "{file}: {parallel} replications in parallel need an estimated {}, above run.memory_budget = {}; use fewer --threads or raise the budget",
            human_bytes(need),
            human_bytes(sc.memory_budget)
        )));
    }
    Ok(threads)
}

/// The name a run of `path` goes by (its results' `id`): the name a resolved scenario records,
/// else the file's stem.
pub fn name_of(path: &Path, table: &toml::Table) -> String {
    Scenario::name_in(table).unwrap_or_else(|| {
        path.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_else(|| "scenario".into())
    })
}

/// Runs scenario `sc` named `name` on `threads` workers: its output and the description of
/// the results directory `npqos run` writes for it.
pub fn run_named(
    sc: &Scenario,
    name: &str,
    threads: usize,
    interrupt: &Arc<AtomicBool>,
    progress: &Progress,
) -> Result<(Output, Meta)> {
    let started = std::time::SystemTime::now();
    let t0 = std::time::Instant::now();
    let result = execute(sc, name, threads, interrupt, progress)?;
    let elapsed = t0.elapsed().as_secs_f64();
    let events: u64 = result.runs.iter().map(|r| r.events).sum();
    let meta = Meta {
        kind: "run",
        seed: sc.seed,
        resolved: Some(sc.to_toml()),
        extra: serde_json::Map::from_iter([
            ("scenario".to_string(), json!(name)),
            ("replications".to_string(), json!(sc.replications)),
        ]),
        run_info: run_info(started, elapsed, events, threads),
        seeds: (0..sc.replications).map(|i| replication_seed(sc.seed, i)).collect(),
    };
    Ok((result, meta))
}

/// `npqos run`.
pub fn run(path: &Path, out: Option<PathBuf>, seed: Option<u64>, threads: Option<usize>, quiet: bool) -> Result<()> {
    let (table, mut sc) = load(path)?;
    if let Some(s) = seed {
        sc.seed = s;
    }
    let threads = threads_for(&sc, threads, &path.display().to_string())?;
    let name = name_of(path, &table);
    let dir = out.unwrap_or_else(|| output::default_dir("run", &name));
    // A run writes its packet captures (the router's [output] pcap) into the results as it goes.
    sc.capture_dir = Some(dir.join("pcap"));
    let flag = interrupt_flag();
    let progress = Progress::new(&name, quiet);
    let (result, meta) = run_named(&sc, &name, threads, &flag, &progress)?;
    progress.finish();
    output::write_all(&dir, &result, &meta)?;
    if !quiet {
        print_aggregate(&result);
        println!("results: {}", dir.display());
    }
    if !result.complete() || flag.load(Ordering::Relaxed) {
        return Err(Interrupted(dir.display().to_string()).into());
    }
    Ok(())
}

/// Non-deterministic metadata for run.json.
pub fn run_info(
    started: std::time::SystemTime,
    elapsed: f64,
    events: u64,
    threads: usize,
) -> serde_json::Map<String, serde_json::Value> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or_default();
    let secs = started.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    serde_json::Map::from_iter([
        ("started_unix_s".to_string(), json!(secs)),
        ("wall_clock_s".to_string(), json!(elapsed)),
        ("events".to_string(), json!(events)),
        ("events_per_s".to_string(), json!(if elapsed > 0.0 { events as f64 / elapsed } else { 0.0 })),
        ("threads".to_string(), json!(threads)),
        ("host".to_string(), json!(host)),
        ("args".to_string(), json!(std::env::args().collect::<Vec<_>>())),
        ("cwd".to_string(), json!(std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_default())),
    ])
}

fn print_aggregate(out: &Output) {
    let n = out.runs.len();
    for (name, mean, ci, unit) in &out.aggregate {
        if n > 1 {
            println!("{name:>20}  {} ± {} {unit}", output::num(*mean), output::num(*ci));
        } else {
            println!("{name:>20}  {} {unit}", output::num(*mean));
        }
    }
}
