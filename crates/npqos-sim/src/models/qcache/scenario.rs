//! `model = "qcache"` scenarios: your queue-operation workload through the queuing subsystems of
//! the qcache paper (nc, dc, sqc, qc) with your thread count, cache sizes and Table 1 timing
//! (docs/qcache.md, "Scenario files"). The question it answers: what does a queuing cache buy
//! at my traffic's hit rate, and how many threads does it take to get there?
//!
//! Every listed subsystem runs the same operation stream (same seed, same stream), one after
//! another; each result is suffixed with the subsystem (`throughput.qc`), and with nc in the
//! list every other subsystem's `speedup` over nc is reported. The section 3.6 model's estimate
//! of the same stream sits beside each simulated throughput.
//!
//! ```toml
//! model = "qcache"
//! [run]
//! seed = 1                    # run.duration does not apply: workload.operations sets the length
//! [queuing]
//! subsystems = ["nc", "dc", "sqc", "qc"]
//! threads = 32                # closed-loop threads issuing operations
//! threads_per_processor = 0   # threads sharing one pipeline (0 = one each)
//! entries = 32                # sqc / qc fully associative descriptor entries
//! engines = 32                # qc queuing engines (at most entries)
//! alloc_cycle = "1ns"         # qc: one eviction and allocation per cycle
//! dc_lines = 128              # dc one-word lines
//! dc_ways = 2
//! model = true                # also the section 3.6 analytical estimate of the same stream
//! [timing]                    # Table 1
//! interconnect = "40ns"       # round trip
//! memory = "40ns"             # external-memory round trip
//! memory_clock = "200MHz"     # one reference starts per cycle
//! cache = "2.5ns"
//! cam = "5ns"
//! instructions_nc = "10ns"    # the thread's instructions per operation, nc and dc
//! instructions_sqc = "35ns"
//! instructions_qc = "5ns"
//! bus_clock = "400MHz"
//! bus_words = 8
//! [workload]
//! pattern = "R"               # "U", "R", "SD", "L" (Table 4) or "trace"
//! queues = 4096
//! backlog = 64                # standing backlog the departures drain
//! dominating = 16             # SD: queues in the dominating set
//! percent = 90.0              # SD: their share of the arrivals, %
//! k = 1.1                     # L: rate ratio of consecutive queues
//! files = ["a.pcap"]          # trace: a packet's queue is an H3 hash of its 5-tuple
//! flow_multiply = 1           # trace: overlaid copies, each rotated in time, flows kept apart
//! max_gap = "1s"              # trace
//! lenient = true              # trace
//! operations = 200000         # measured operations per subsystem
//! warmup_operations = 20000   # operations before measuring (default operations / 10)
//! ```

use super::sim::{run_limited, SimConfig, SimStats};
use super::workload::{OpStream, Pattern, WorkloadSpec};
use crate::results::RunResult;
use crate::rng::RngStreams;
use crate::scenario::{MemoryEstimate, ModelError, ModelSpec, Problem, Progress, Reader, Scenario, ScenarioModel};
use crate::trace::corpus::Corpus;
use crate::units::{fmt_fine_duration, fmt_frequency};
use npqos_core::flowmap::hash::H3;
use npqos_core::queues::model::{estimate, hits, ModelParams};
use npqos_core::queues::timing::{Op, Subsystem, Timing, TABLE1};
use npqos_core::{Duration, Instant};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The qcache part of a scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct QcacheSpec {
    pub subsystems: Vec<Subsystem>,
    /// The simulation's configuration (threads, caches, Table 1 timing, operation counts) for
    /// every listed subsystem; its `subsystem` field is set per run by [`QcacheSpec::config`].
    pub sim: SimConfig,
    /// Also the section 3.6 estimate of the same stream.
    pub model: bool,
    pub workload: QcacheWorkload,
    pub queues: u32,
    pub backlog: u32,
}

/// `[workload]`'s queue-selection pattern.
#[derive(Clone, Debug, PartialEq)]
pub enum QcacheWorkload {
    Synthetic(Pattern),
    Trace { files: Vec<PathBuf>, flow_multiply: u32, max_gap: Duration, lenient: bool },
}

const PATTERNS: [&str; 5] = ["U", "R", "SD", "L", "trace"];

fn sub_name(s: Subsystem) -> &'static str {
    s.label()
}

fn sub_of(name: &str) -> Subsystem {
    Subsystem::ALL.into_iter().find(|s| s.label() == name).unwrap_or(Subsystem::Qc)
}

/// Reads `[queuing]`, `[timing]` and `[workload]`, recording every problem.
pub(crate) fn read(root: &toml::Table, base_dir: &Path, probs: &mut Vec<Problem>) -> QcacheSpec {
    crate::scenario::no_run_length(root, "qcache", "workload.operations and workload.warmup_operations set", probs);
    let names: Vec<&str> = Subsystem::ALL.iter().map(|s| s.label()).collect();
    let mut q = Reader::new(root, "queuing", probs);
    let subsystems = q.choices("subsystems", &names, &names, probs);
    if subsystems.is_empty() && q.present("subsystems") {
        probs.push(Problem {
            key: "queuing.subsystems".into(),
            value: Some("[]".into()),
            message: "expected at least one subsystem".into(),
        });
    }
    let threads = q.int("threads", 32, 1, 65_535, probs) as u32;
    let threads_per_processor = q.int("threads_per_processor", 0, 0, 65_535, probs) as u32;
    let entries = q.int("entries", 32, 1, 1 << 20, probs) as u32;
    let engines = q.int("engines", entries.into(), 1, 1 << 20, probs) as u32;
    let alloc_cycle_ns = q.fine_duration("alloc_cycle", 1.0, probs);
    let dc_lines = q.int("dc_lines", 128, 1, 1 << 24, probs) as u32;
    let dc_ways = q.int("dc_ways", 2, 1, 64, probs) as u32;
    let model = q.boolean("model", true, probs);
    let subsystems: Vec<Subsystem> = subsystems.iter().map(|s| sub_of(s)).collect();
    let mut bad = |key: &str, value: String, message: String| {
        probs.push(Problem { key: format!("queuing.{key}"), value: Some(value), message })
    };
    if subsystems.contains(&Subsystem::Qc) && engines > entries {
        bad(
            "engines",
            engines.to_string(),
            format!("expected at most queuing.entries ({entries}): each engine in service pins an entry"),
        );
    }
    if subsystems.contains(&Subsystem::Sqc) && threads > entries {
        bad(
            "threads",
            threads.to_string(),
            format!("sqc: expected at most queuing.entries ({entries}): each operation in flight pins an entry"),
        );
    }
    if subsystems.contains(&Subsystem::Dc)
        && (!dc_lines.is_multiple_of(dc_ways) || !(dc_lines / dc_ways).is_power_of_two())
    {
        bad(
            "dc_lines",
            dc_lines.to_string(),
            format!("expected dc_lines / dc_ways ({dc_ways}) to be a power of two (sets)"),
        );
    }
    if alloc_cycle_ns <= 0.0 {
        bad("alloc_cycle", fmt_fine_duration(alloc_cycle_ns), "expected a duration above 0".into());
    }
    q.finish(probs);

    let mut t = Reader::new(root, "timing", probs);
    let d = TABLE1;
    let interconnect_ns = t.fine_duration("interconnect", d.interconnect_ns, probs);
    let memory_ns = t.fine_duration("memory", d.memory_ns, probs);
    let memory_mhz = t.frequency("memory_clock", 200.0, probs);
    let cache_ns = t.fine_duration("cache", d.cache_ns, probs);
    let cam_ns = t.fine_duration("cam", d.cam_ns, probs);
    let instr_ns = [
        t.fine_duration("instructions_nc", d.instr_ns[0], probs),
        t.fine_duration("instructions_sqc", d.instr_ns[1], probs),
        t.fine_duration("instructions_qc", d.instr_ns[2], probs),
    ];
    let bus_mhz = t.frequency("bus_clock", d.bus_mhz, probs);
    let bus_words = t.int("bus_words", d.bus_words.into(), 1, 1024, probs) as u32;
    t.finish(probs);
    let timing = Timing { interconnect_ns, memory_ns, cache_ns, cam_ns, instr_ns, bus_mhz, bus_words, ..TABLE1 };

    let mut w = Reader::new(root, "workload", probs);
    let pattern = w.choice("pattern", "R", &PATTERNS, probs);
    let queues = w.int("queues", 4096, 1, 1 << 24, probs) as u32;
    let backlog = w.int("backlog", 64, 1, 1 << 24, probs) as u32;
    let applies: &[&str] = match pattern.as_str() {
        "SD" => &["dominating", "percent"],
        "L" => &["k"],
        "trace" => &["files", "flow_multiply", "max_gap", "lenient"],
        _ => &[],
    };
    let other = ["dominating", "percent", "k", "files", "flow_multiply", "max_gap", "lenient"];
    w.not_applicable(other.into_iter().filter(|k| !applies.contains(k)), &format!("pattern = {pattern:?}"), probs);
    let workload = match pattern.as_str() {
        "U" => QcacheWorkload::Synthetic(Pattern::U),
        "SD" => {
            let n = w.int("dominating", 16, 1, i64::from(queues), probs) as u32;
            let percent = w.float("percent", 90.0, probs, |v| (0.0..=100.0).contains(&v), "from 0 to 100");
            QcacheWorkload::Synthetic(Pattern::Sd { n, percent })
        }
        "L" => QcacheWorkload::Synthetic(Pattern::L {
            k: w.float("k", 1.1, probs, |v| v > 0.0 && v <= 1e6, "greater than 0"),
        }),
        "trace" => QcacheWorkload::Trace {
            files: w.files("files", base_dir, probs),
            flow_multiply: w.int("flow_multiply", 1, 1, 65_535, probs) as u32,
            max_gap: w.positive_duration("max_gap", crate::scenario::DEFAULT_MAX_GAP, probs),
            lenient: w.boolean("lenient", true, probs),
        },
        _ => QcacheWorkload::Synthetic(Pattern::R),
    };
    let operations = w.int("operations", 200_000, 1, 1 << 40, probs) as u64;
    let warmup_operations = w.int("warmup_operations", (operations / 10) as i64, 0, 1 << 40, probs) as u64;
    w.finish(probs);
    let sim = SimConfig {
        subsystem: Subsystem::Qc,
        threads,
        timing,
        memory_mhz,
        threads_per_processor,
        entries,
        engines: engines.min(entries),
        alloc_cycle_ns: alloc_cycle_ns.max(1e-3),
        dc_lines,
        dc_ways,
        warmup_ops: warmup_operations,
        ops: operations,
    };
    QcacheSpec { subsystems, sim, model, workload, queues, backlog }
}

impl QcacheSpec {
    /// The simulation's configuration for subsystem `sub`.
    pub fn config(&self, sub: Subsystem) -> SimConfig {
        SimConfig { subsystem: sub, ..self.sim }
    }

    /// The label of the workload, which also names its RNG stream (`qcache.<label>`, as the
    /// reproductions name theirs).
    pub fn label(&self) -> String {
        match &self.workload {
            QcacheWorkload::Synthetic(p) => p.label(),
            QcacheWorkload::Trace { .. } => "trace".into(),
        }
    }

    /// Upper estimate of one replication's memory: per queue its descriptor, lock and waiting
    /// list (64 B), the operation sequence the model replays (9 B an operation), a trace's
    /// queue ids (4 B a packet, about a tenth of its file), and the latency histogram.
    pub fn estimate_memory(&self) -> u128 {
        let ops = self.sim.ops + self.sim.warmup_ops;
        let model = if self.model { ops as u128 * 9 } else { 0 };
        let trace = match &self.workload {
            QcacheWorkload::Trace { files, flow_multiply, .. } => {
                files.iter().map(|f| std::fs::metadata(f).map_or(0, |m| m.len()) as u128).sum::<u128>()
                    * (2 + *flow_multiply as u128 / 2)
            }
            _ => 0,
        };
        self.queues as u128 * 64 + self.backlog as u128 * 16 + model + trace + (4 << 20)
    }

    pub(crate) fn to_toml(&self, root: &mut toml::Table) {
        let mut q = toml::Table::new();
        q.insert(
            "subsystems".into(),
            toml::Value::Array(self.subsystems.iter().map(|s| sub_name(*s).into()).collect()),
        );
        q.insert("threads".into(), i64::from(self.sim.threads).into());
        q.insert("threads_per_processor".into(), i64::from(self.sim.threads_per_processor).into());
        q.insert("entries".into(), i64::from(self.sim.entries).into());
        q.insert("engines".into(), i64::from(self.sim.engines).into());
        q.insert("alloc_cycle".into(), fmt_fine_duration(self.sim.alloc_cycle_ns).into());
        q.insert("dc_lines".into(), i64::from(self.sim.dc_lines).into());
        q.insert("dc_ways".into(), i64::from(self.sim.dc_ways).into());
        q.insert("model".into(), self.model.into());
        root.insert("queuing".into(), q.into());
        let t = &self.sim.timing;
        let mut m = toml::Table::new();
        m.insert("interconnect".into(), fmt_fine_duration(t.interconnect_ns).into());
        m.insert("memory".into(), fmt_fine_duration(t.memory_ns).into());
        m.insert("memory_clock".into(), fmt_frequency(self.sim.memory_mhz).into());
        m.insert("cache".into(), fmt_fine_duration(t.cache_ns).into());
        m.insert("cam".into(), fmt_fine_duration(t.cam_ns).into());
        m.insert("instructions_nc".into(), fmt_fine_duration(t.instr_ns[0]).into());
        m.insert("instructions_sqc".into(), fmt_fine_duration(t.instr_ns[1]).into());
        m.insert("instructions_qc".into(), fmt_fine_duration(t.instr_ns[2]).into());
        m.insert("bus_clock".into(), fmt_frequency(t.bus_mhz).into());
        m.insert("bus_words".into(), i64::from(t.bus_words).into());
        root.insert("timing".into(), m.into());
        let mut w = toml::Table::new();
        match &self.workload {
            QcacheWorkload::Synthetic(p) => {
                w.insert(
                    "pattern".into(),
                    match p {
                        Pattern::U => "U",
                        Pattern::Sd { .. } => "SD",
                        Pattern::L { .. } => "L",
                        _ => "R",
                    }
                    .into(),
                );
                match p {
                    Pattern::Sd { n, percent } => {
                        w.insert("dominating".into(), i64::from(*n).into());
                        w.insert("percent".into(), (*percent).into());
                    }
                    Pattern::L { k } => {
                        w.insert("k".into(), (*k).into());
                    }
                    _ => {}
                }
            }
            QcacheWorkload::Trace { files, flow_multiply, max_gap, lenient } => {
                w.insert("pattern".into(), "trace".into());
                w.insert(
                    "files".into(),
                    toml::Value::Array(files.iter().map(|f| f.display().to_string().into()).collect()),
                );
                w.insert("flow_multiply".into(), i64::from(*flow_multiply).into());
                w.insert("max_gap".into(), max_gap.to_string().into());
                w.insert("lenient".into(), (*lenient).into());
            }
        }
        w.insert("queues".into(), i64::from(self.queues).into());
        w.insert("backlog".into(), i64::from(self.backlog).into());
        w.insert("operations".into(), (self.sim.ops as i64).into());
        w.insert("warmup_operations".into(), (self.sim.warmup_ops as i64).into());
        root.insert("workload".into(), w.into());
    }

    /// The workload as the operation stream takes it (a trace is read and hashed to queues).
    fn workload_spec(&self, streams: &RngStreams) -> Result<WorkloadSpec, QcacheRunError> {
        let pattern = match &self.workload {
            QcacheWorkload::Synthetic(p) => p.clone(),
            QcacheWorkload::Trace { files, flow_multiply, max_gap, lenient } => {
                let corpus = Corpus::load(files, *lenient, *max_gap)?;
                let h = H3::new(rand::Rng::random(&mut streams.stream("qcache.h3", 0)));
                let mut rng = streams.stream("qcache.trace.rotations", 0);
                let queues: Vec<u32> =
                    corpus.overlay(*flow_multiply, 1.0, &mut rng).map(|p| h.hash(&p.flow) % self.queues).collect();
                if queues.is_empty() {
                    return Err(QcacheRunError::EmptyTrace);
                }
                Pattern::Trace { name: "trace".into(), queues: Arc::new(queues) }
            }
        };
        Ok(WorkloadSpec { pattern, queues: self.queues, backlog: self.backlog })
    }
}

/// Why a qcache scenario could not run.
#[derive(Debug, thiserror::Error)]
pub enum QcacheRunError {
    #[error(transparent)]
    Trace(#[from] crate::trace::TraceError),
    #[error("the trace has no IP packets to map to queues")]
    EmptyTrace,
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Sim(#[from] super::sim::SimError),
}

/// `model = "qcache"`: threads through the queue-descriptor subsystems.
pub struct QcacheScenario;

impl ScenarioModel for QcacheScenario {
    fn name(&self) -> &'static str {
        "qcache"
    }
    fn description(&self) -> &'static str {
        "threads enqueueing and dequeueing through a queue-descriptor subsystem (no cache, data cache, software- or hardware-managed queuing cache) with contention at bus, memory and queues: throughput, hit rate, off-chip references (docs/qcache.md)"
    }
    fn tables(&self) -> &'static [&'static str] {
        &["model", "run", "queuing", "timing", "workload"]
    }
    fn read(&self, root: &toml::Table, base_dir: &Path, probs: &mut Vec<Problem>) -> Box<dyn ModelSpec> {
        Box::new(read(root, base_dir, probs))
    }
}

impl ModelSpec for QcacheSpec {
    fn resolved(&self, root: &mut toml::Table) {
        self.to_toml(root)
    }
    fn memory(&self, _: Duration, _: Duration) -> MemoryEstimate {
        MemoryEstimate {
            bytes: self.estimate_memory(),
            key: "workload.operations",
            value: self.sim.ops.to_string(),
            what: "per queue, per operation the model replays, a trace's queue ids",
            remedy: "lower workload.operations or set queuing.model = false",
        }
    }
    fn has_run_length(&self) -> bool {
        false
    }
    fn run(
        &self,
        sc: &Scenario,
        seed: u64,
        threads: usize,
        interrupt: Option<Arc<AtomicBool>>,
        progress: Progress<'_>,
    ) -> Result<RunResult, ModelError> {
        let _ = threads;
        run_scenario(sc, seed, interrupt, progress).map_err(|e| match e {
            QcacheRunError::Trace(t) => ModelError::Trace(t),
            other => ModelError::Bad(other.to_string()),
        })
    }
}

/// Runs one replication of a `model = "qcache"` scenario with `seed`: every listed subsystem on
/// the same operation stream, one after another.
pub fn run_scenario(
    sc: &Scenario,
    seed: u64,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> Result<RunResult, QcacheRunError> {
    let Some(s) = sc.spec_as::<QcacheSpec>() else { panic!("not a qcache scenario: model = {:?}", sc.model()) };
    let streams = RngStreams::new(seed);
    let spec = s.workload_spec(&streams)?;
    let stream = || {
        OpStream::new(&spec, streams.stream(&format!("qcache.{}", s.label()), 0))
            .map_err(|e| QcacheRunError::Config(format!("workload: {e}")))
    };
    let end = sc.duration.as_nanos() as f64;
    let n = s.subsystems.len() as f64;
    let mut run = RunResult { complete: true, stop_reason: "drained".into(), ..Default::default() };
    run.params.insert("workload".into(), json!(s.label()));
    run.params.insert("threads".into(), json!(s.sim.threads));
    run.params.insert("queues".into(), json!(s.queues));
    let mut nc_throughput = None;
    let mut results: Vec<(Subsystem, SimStats)> = Vec::new();
    for (i, &sub) in s.subsystems.iter().enumerate() {
        let mut ops = stream()?;
        let budget = if sc.max_events == 0 { u64::MAX } else { sc.max_events };
        let (st, stop) = run_limited(&s.config(sub), &mut ops, budget, interrupt.clone(), &mut |f| {
            progress(Instant::from_nanos(((i as f64 + f) / n * end) as u64))
        })?;
        run.events += st.events;
        run.sim_time_ns += st.sim_time_ns.round() as u64;
        if stop != crate::engine::StopReason::Drained {
            run.complete = false;
            run.stop_reason = format!("{stop:?}").to_lowercase();
        }
        if sub == Subsystem::Nc {
            nc_throughput = Some(st.throughput_mops);
        }
        results.push((sub, st));
        if !run.complete {
            break;
        }
    }
    let seq: Vec<(Op, u32)> = if s.model && run.complete {
        let mut ops = stream()?;
        let total = (s.sim.warmup_ops + s.sim.ops) as usize;
        ops.by_ref().take(total).collect()
    } else {
        Vec::new()
    };
    for (sub, st) in &results {
        let name = sub_name(*sub);
        let mut put = |k: &str, v: f64, unit: &str| run.scalar(&format!("{k}.{name}"), v, unit);
        put("operations", st.ops as f64, "operations");
        put("throughput", st.throughput_mops, "M ops/s");
        put("hit_rate", st.hit_rate, "1");
        put("offchip_refs_per_op", st.offchip_per_op, "refs");
        put("writebacks_per_op", st.writebacks_per_op, "refs");
        put("bus_messages_per_op", st.bus_msgs_per_op, "messages");
        put("bus_words_per_op", st.bus_words_per_op, "words");
        put("memory_utilization", st.memory_util, "1");
        put("bus_utilization", st.bus_util, "1");
        put("latency_mean_enqueue", st.mean_latency_ns[0], "ns");
        put("latency_mean_dequeue", st.mean_latency_ns[1], "ns");
        put("latency_p99", st.p99_latency_ns, "ns");
        put("queue_wait_mean", st.mean_queue_wait_ns, "ns");
        put("unloaded_latency_enqueue_hit", s.sim.timing.latency_ns(*sub, Op::Enqueue, true), "ns");
        put("unloaded_latency_dequeue_miss", s.sim.timing.latency_ns(*sub, Op::Dequeue, false), "ns");
        if *sub == Subsystem::Dc {
            put("peak_mshrs", st.peak_mshrs as f64, "MSHRs");
        }
        if let Some(nc) = nc_throughput.filter(|_| *sub != Subsystem::Nc) {
            put("speedup", st.throughput_mops / nc, "x");
        }
        if !seq.is_empty() {
            let warm = s.sim.warmup_ops as usize;
            let h = hits(*sub, &seq, s.sim.entries as usize, s.sim.dc_lines as u64, s.sim.dc_ways as usize)
                .map_err(|e| QcacheRunError::Config(format!("queue model: {e}")))?;
            let p = ModelParams {
                timing: s.sim.timing,
                threads: s.sim.threads,
                memory_refs_per_ns: s.sim.memory_mhz / 1e3,
            };
            let e = estimate(*sub, &seq[warm..], &h[warm..], s.queues, &p)
                .map_err(|e| QcacheRunError::Config(format!("queue model: {e}")))?;
            put("model_throughput", e.throughput_mops, "M ops/s");
            put("bounds_throughput", e.bounds_mops, "M ops/s");
            put("model_hit_rate", e.hit_rate, "1");
        }
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::testing::{assert_names, assert_round_trips, example, parse};

    /// Defaults are the paper's; every example and resolved scenario parses back to itself.
    #[test]
    fn defaults_and_round_trip() {
        let sc = parse("model = \"qcache\"\n").unwrap();
        let q = sc.spec_as::<QcacheSpec>().expect("qcache");
        assert_eq!(q.config(Subsystem::Qc), SimConfig::paper(Subsystem::Qc, 32, 200_000));
        assert_eq!(q.subsystems, Subsystem::ALL.to_vec());
        assert_round_trips([
            example("qcache-small"),
            example("qcache-paper"),
            "model = \"qcache\"\n[queuing]\nsubsystems = [\"qc\"]\nalloc_cycle = \"0.5ns\"\n[timing]\ncache = \"1.25ns\"\nmemory_clock = \"266.666MHz\"\n[workload]\npattern = \"L\"\nk = 1.01\n".into(),
            "model = \"qcache\"\n[workload]\npattern = \"SD\"\ndominating = 1\npercent = 30.0\n".into(),
        ]);
    }

    /// Every problem is reported with its key path.
    #[test]
    fn problems_name_their_keys() {
        assert_names(
            "model = \"qcache\"\n[run]\nduration = \"1s\"\n[queuing]\nsubsystems = [\"sqc\", \"dc\", \"l2\"]\nthreads = 40\nengines = 64\ndc_lines = 100\n[timing]\ncache = \"2.5\"\nbus_clock = \"0MHz\"\n[workload]\npattern = \"X\"\nk = 2.0\nfiles = [\"a.pcap\"]\n",
            &[
                "run.duration",
                "queuing.subsystems",
                "queuing.threads",
                "queuing.dc_lines",
                "timing.cache",
                "timing.bus_clock",
                "workload.pattern",
                "workload.k",
                "workload.files",
            ],
        );
        assert_names("model = \"qcache\"\n[queuing]\nsubsystems = [\"qc\"]\nengines = 64\n", &["queuing.engines"]);
        assert_names("model = \"qcache\"\n[queuing]\nsubsystems = []\n", &["at least one subsystem"]);
    }

    /// The small example is a qcache-fig5 quick point (R, 4,096 queues, backlog 64, 20,000
    /// operations after 2,000 of warm-up, the stream `qcache.R`): the scenario path and the
    /// experiment path build the same run.
    #[test]
    fn small_example_is_the_reproduction_point() {
        let sc = parse(&example("qcache-small")).unwrap();
        let q = sc.spec_as::<QcacheSpec>().expect("qcache");
        let r = run_scenario(&sc, 1, None, &mut |_| {}).unwrap();
        let out = crate::experiments::quick_output("qcache-fig5");
        for sub in &q.subsystems {
            let label = match sub {
                Subsystem::Nc => format!("R.nc/threads={}", q.sim.threads),
                Subsystem::Dc => format!("R.dc.128.2way/threads={}", q.sim.threads),
                s => format!("R.{}.32.fa/threads={}", s.label(), q.sim.threads),
            };
            let exp = out.runs.iter().find(|x| x.label == label).unwrap_or_else(|| panic!("{label}"));
            let name = sub.label();
            assert_eq!(r.get(&format!("throughput.{name}")), exp.get("throughput"), "{name}");
            assert_eq!(r.get(&format!("hit_rate.{name}")), exp.get("hit_rate"), "{name}");
            assert_eq!(r.get(&format!("latency_p99.{name}")), exp.get("p99_latency"), "{name}");
        }
        // With nc in the list, the others report their speedup over it.
        let qc = r.get("throughput.qc").unwrap() / r.get("throughput.nc").unwrap();
        assert_eq!(r.get("speedup.qc"), Some(qc));
        assert!(r.get("model_throughput.qc").unwrap() > 0.0);
    }

    /// An event budget stops the run early with partial, labelled results.
    #[test]
    fn budget_gives_partial_results() {
        let mut sc =
            parse("model = \"qcache\"\n[queuing]\nsubsystems = [\"qc\"]\n[workload]\noperations = 10000\n").unwrap();
        sc.max_events = 5_000;
        let r = run_scenario(&sc, 1, None, &mut |_| {}).unwrap();
        assert!(!r.complete);
        assert_eq!(r.stop_reason, "budget");
        let done = r.get("operations.qc").unwrap();
        assert!(done > 0.0 && done < 10_000.0, "{done}");
        assert!(r.get("model_throughput.qc").is_none(), "no model on a partial run");
    }
}
