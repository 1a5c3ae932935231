//! Scenario files: TOML with units, validated separately from construction.
//!
//! [`Scenario::parse`] turns text into a validated [`Scenario`] or a [`Problems`] list holding
//! **every** problem found (unknown keys, missing units, out-of-range values, memory budget),
//! each with the file, the key path, the value and what was expected. Nothing is allocated for
//! the simulation before validation passes, and [`Scenario::estimate_memory`] lets the caller
//! refuse a scenario whose state would not fit before building it.
//!
//! The format (one table per component; every key optional unless marked):
//!
//! ```toml
//! model = "link"                 # "link" (DRR over tail-drop queues) or "kim" (token-bucket shaping)
//! [run]
//! seed = 1                       # u64
//! duration = "100ms"             # simulated time
//! warmup = "0s"                  # statistics ignore packets that arrive earlier
//! replications = 1               # independent runs with derived seeds, averaged with a 95% CI
//! sample_interval = "1ms"        # period of time series (default duration / 100)
//! memory_budget = "4GiB"         # refuse scenarios whose estimated state exceeds this
//! max_events = 0                 # event budget per replication, 0 = unlimited
//! [link]
//! rate = "10Gbps"
//! scheduler = "drr"
//! quantum = "1500B"
//! [queues]
//! count = 16
//! buffer = "64KiB"               # per-queue tail-drop limit
//! [traffic]
//! source = "synthetic"           # or "trace"
//! overload = 0.9                 # per-queue input rate / (link rate / count), kim eq 15
//! sizes = "imix"                 # "imix" (kim Table I), "constant", "uniform", "trace"
//! size_files = ["a.pcap"]        # with sizes = "trace": wire lengths of their IP packets
//! size = "1500B"                 # with sizes = "constant"
//! min_size = "40B"               # with sizes = "uniform"
//! max_size = "1500B"
//! arrivals = "exponential"       # "constant", "exponential", "onoff"
//! on_mean = "10ms"               # with arrivals = "onoff"
//! off_mean = "40ms"
//! pareto_shape = 1.5
//! files = ["a.pcap"]             # with source = "trace" (relative to the scenario file)
//! time_scale = 1.0               # speed-up factor
//! flow_multiply = 1             # overlaid copies, each rotated in time, flows kept apart
//! lenient = false                # skip corrupt records instead of failing
//! align = "start"                # several files: each from time 0 ("start", the default for
//!                                # more than one file) or by absolute timestamp ("absolute")
//! max_gap = "1s"                 # with align = "start": cap on each gap within a file
//! [shaper]                       # model = "kim" only (docs/kim.md); traffic must be synthetic
//! fill = "event"                 # "event" (Algorithm 1, per-core heaps) or "periodic"
//! fill_period = "1ms"            # with fill = "periodic"
//! cores = 100                    # heaps; each packet goes to a core drawn at random
//! alpha = "3000B"                # reschedule threshold
//! cap = "3000B"                  # bucket cap (CBE); default alpha
//! while_disabled = "drop"        # "drop" (policer, the stochastic model) or "queue" (shaper)
//! link_mode = "ideal"            # "ideal" (queues independent) or "shared" (round robin)
//! cache = false                  # simulate a 32 KB 2-way data cache per core (Tables VI-VII)
//! adaptive = false               # eq 14; then gamma, delta_th, alpha_min, interval
//! gamma = 2.0
//! delta_th = 3
//! alpha_min = "1500B"
//! interval = "1s"
//! ```

use crate::trace::Alignment;
use crate::units::{fmt_size, parse_duration, parse_rate, parse_size};
use crate::workload::{GapDist, SizeDist};
use npqos_core::{Duration, Rate};
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

/// One problem in a scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Dotted key path, e.g. `link.rate`; empty for whole-file problems.
    pub key: String,
    /// The offending value as written, if any.
    pub value: Option<String>,
    pub message: String,
}

/// Every problem found in one scenario file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problems {
    pub file: String,
    pub list: Vec<Problem>,
}

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: {} problem{} in scenario",
            self.file,
            self.list.len(),
            if self.list.len() == 1 { "" } else { "s" }
        )?;
        for p in &self.list {
            match (&p.key[..], &p.value) {
                ("", _) => writeln!(f, "  {}: {}", self.file, p.message)?,
                (k, Some(v)) => writeln!(f, "  {}: key `{k}` = {v}: {}", self.file, p.message)?,
                (k, None) => writeln!(f, "  {}: key `{k}`: {}", self.file, p.message)?,
            }
        }
        Ok(())
    }
}
impl std::error::Error for Problems {}

/// Where synthetic packet sizes come from.
#[derive(Clone, Debug, PartialEq)]
pub enum SizeSpec {
    /// A closed-form or tabulated distribution (IMIX, constant, uniform).
    Dist(SizeDist),
    /// The wire lengths of the IP packets of these captures (read when the model is built).
    Trace { files: Vec<PathBuf> },
}

impl SizeSpec {
    /// Builds the distribution (reads the captures for `Trace`).
    pub fn build(&self) -> Result<SizeDist, crate::trace::TraceError> {
        match self {
            SizeSpec::Dist(d) => Ok(d.clone()),
            SizeSpec::Trace { files } => crate::workload::empirical_sizes_from_trace(files),
        }
    }
    /// The smallest size, or 40 B for a trace not yet read (memory estimates only).
    pub fn min_hint(&self) -> u32 {
        match self {
            SizeSpec::Dist(d) => d.min(),
            SizeSpec::Trace { .. } => 40,
        }
    }
}

/// Where the traffic comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Traffic {
    Synthetic { overload: f64, sizes: SizeSpec, arrivals: GapDist },
    Trace { files: Vec<PathBuf>, time_scale: f64, flow_multiply: u32, lenient: bool, align: Alignment },
}

/// Default cap on the gap between consecutive records of one file under `align = "start"`
/// (the nDPI corpus of the reproductions uses the same).
pub const DEFAULT_MAX_GAP: Duration = Duration::from_millis(1000);

/// The `[shaper]` table of a `model = "kim"` scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct ShaperSpec {
    /// `None`: event-driven; `Some(period)`: periodic fill.
    pub fill_period: Option<Duration>,
    pub cores: u32,
    pub alpha: u64,
    pub cap: u64,
    pub queue_while_disabled: bool,
    pub shared_link: bool,
    pub cache: bool,
    /// (gamma, delta_th, alpha_min, interval) when adaptive.
    pub adaptive: Option<(f64, u32, u64, Duration)>,
}

/// The scenario models (`model = "<name>"`), each with a one-line description: what
/// `npqos models` prints.
pub const MODELS: &[(&str, &str)] = &[
    (
        "link",
        "N tail-drop queues sharing one link under deficit round robin; synthetic or trace traffic (docs/link.md)",
    ),
    (
        "kim",
        "N token-bucket-shaped queues, timers on per-core reschedule heaps (event-driven) or periodic fill, ideal or shared link (docs/kim.md)",
    ),
    (
        "everest",
        "processors shared by services under an allocation policy (Everest, -LD, -AE, adaptive, Static, Quantum, Cohort-E) with context-switch cost; bursty synthetic traffic (docs/everest.md)",
    ),
];

/// A validated scenario with every default filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub model: String,
    pub seed: u64,
    pub duration: Duration,
    pub warmup: Duration,
    pub replications: u32,
    pub sample_interval: Duration,
    pub memory_budget: u64,
    pub max_events: u64,
    pub link_rate: Rate,
    pub scheduler: String,
    pub quantum: u64,
    pub queues: u32,
    pub buffer: u64,
    pub traffic: Traffic,
    /// `model = "kim"`: the shaper.
    pub shaper: Option<ShaperSpec>,
    /// `model = "everest"`: processors, services and their traffic (the link, queue and
    /// traffic fields above are then unused).
    pub everest: Option<crate::models::everest::scenario::EverestSpec>,
}

/// Reads typed values from one TOML table, recording problems and the keys it consumed.
pub(crate) struct Reader<'a> {
    prefix: String,
    table: Option<&'a toml::Table>,
    used: BTreeSet<String>,
}

pub(crate) fn show(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

impl<'a> Reader<'a> {
    pub(crate) fn new(root: &'a toml::Table, name: &str, probs: &mut Vec<Problem>) -> Self {
        let table = match root.get(name) {
            None => None,
            Some(toml::Value::Table(t)) => Some(t),
            Some(v) => {
                probs.push(Problem {
                    key: name.into(),
                    value: Some(show(v)),
                    message: "expected a table ([section])".into(),
                });
                None
            }
        };
        Reader { prefix: name.into(), table, used: BTreeSet::new() }
    }
    /// A reader over a table that is not a top-level section (an entry of `[[services]]`),
    /// with `prefix` naming it in problems (`services[2]`).
    pub(crate) fn from_table(table: &'a toml::Table, prefix: String) -> Self {
        Reader { prefix, table: Some(table), used: BTreeSet::new() }
    }
    /// A string value (any string).
    pub(crate) fn string(&mut self, key: &str, default: &str, probs: &mut Vec<Problem>) -> String {
        self.string_with(key, default.to_string(), probs, "a string", |s| Ok(s.to_string()))
    }
    pub(crate) fn path(&self, key: &str) -> String {
        format!("{}.{key}", self.prefix)
    }
    fn raw(&mut self, key: &str) -> Option<&'a toml::Value> {
        self.used.insert(key.into());
        self.table.and_then(|t| t.get(key))
    }
    fn string_with<T>(
        &mut self,
        key: &str,
        default: T,
        probs: &mut Vec<Problem>,
        expected: &str,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> T
    where
        T: Clone,
    {
        match self.raw(key) {
            None => default,
            Some(toml::Value::String(s)) => match parse(s) {
                Ok(v) => v,
                Err(m) => {
                    probs.push(Problem { key: self.path(key), value: Some(format!("{s:?}")), message: m });
                    default
                }
            },
            Some(v) => {
                probs.push(Problem {
                    key: self.path(key),
                    value: Some(show(v)),
                    message: format!("expected {expected} as a quoted string"),
                });
                default
            }
        }
    }
    pub(crate) fn duration(&mut self, key: &str, default: Duration, probs: &mut Vec<Problem>) -> Duration {
        self.string_with(key, default, probs, "a duration such as \"2ms\"", |s| parse_duration(s).map_err(|e| e.0))
    }
    pub(crate) fn rate(&mut self, key: &str, default: Rate, probs: &mut Vec<Problem>) -> Rate {
        self.string_with(key, default, probs, "a rate such as \"10Gbps\"", |s| parse_rate(s).map_err(|e| e.0))
    }
    pub(crate) fn size(&mut self, key: &str, default: u64, probs: &mut Vec<Problem>) -> u64 {
        self.string_with(key, default, probs, "a size such as \"1500B\"", |s| parse_size(s).map_err(|e| e.0))
    }
    pub(crate) fn choice(&mut self, key: &str, default: &str, allowed: &[&str], probs: &mut Vec<Problem>) -> String {
        let list = allowed.iter().map(|a| format!("{a:?}")).collect::<Vec<_>>().join(", ");
        self.string_with(key, default.to_string(), probs, &format!("one of {list}"), |s| {
            if allowed.contains(&s) {
                Ok(s.to_string())
            } else {
                Err(format!("expected one of {list}"))
            }
        })
    }
    pub(crate) fn int(&mut self, key: &str, default: i64, min: i64, max: i64, probs: &mut Vec<Problem>) -> i64 {
        match self.raw(key) {
            None => default,
            Some(toml::Value::Integer(i)) if (min..=max).contains(i) => *i,
            Some(v @ toml::Value::Integer(_)) => {
                probs.push(Problem {
                    key: self.path(key),
                    value: Some(show(v)),
                    message: format!("expected an integer from {min} to {max}"),
                });
                default
            }
            Some(v) => {
                probs.push(Problem {
                    key: self.path(key),
                    value: Some(show(v)),
                    message: "expected an integer".into(),
                });
                default
            }
        }
    }
    pub(crate) fn float(
        &mut self,
        key: &str,
        default: f64,
        probs: &mut Vec<Problem>,
        ok: impl Fn(f64) -> bool,
        expected: &str,
    ) -> f64 {
        let v = match self.raw(key) {
            None => return default,
            Some(toml::Value::Float(f)) => *f,
            Some(toml::Value::Integer(i)) => *i as f64,
            Some(v) => {
                probs.push(Problem {
                    key: self.path(key),
                    value: Some(show(v)),
                    message: format!("expected a number {expected}"),
                });
                return default;
            }
        };
        if v.is_finite() && ok(v) {
            v
        } else {
            probs.push(Problem {
                key: self.path(key),
                value: Some(v.to_string()),
                message: format!("expected a number {expected}"),
            });
            default
        }
    }
    pub(crate) fn boolean(&mut self, key: &str, default: bool, probs: &mut Vec<Problem>) -> bool {
        match self.raw(key) {
            None => default,
            Some(toml::Value::Boolean(b)) => *b,
            Some(v) => {
                probs.push(Problem {
                    key: self.path(key),
                    value: Some(show(v)),
                    message: "expected true or false".into(),
                });
                default
            }
        }
    }
    /// A required non-empty array of existing trace files, relative to `base_dir`.
    pub(crate) fn files(&mut self, key: &str, base_dir: &Path, probs: &mut Vec<Problem>) -> Vec<PathBuf> {
        let mut files = Vec::new();
        match self.raw(key) {
            Some(toml::Value::Array(a)) if !a.is_empty() => {
                for (i, v) in a.iter().enumerate() {
                    match v {
                        toml::Value::String(s) => {
                            let p = base_dir.join(s);
                            if !p.is_file() {
                                probs.push(Problem {
                                    key: format!("{}[{i}]", self.path(key)),
                                    value: Some(format!("{s:?}")),
                                    message: format!("no such file ({})", p.display()),
                                });
                            }
                            files.push(p);
                        }
                        other => probs.push(Problem {
                            key: format!("{}[{i}]", self.path(key)),
                            value: Some(show(other)),
                            message: "expected a file path string".into(),
                        }),
                    }
                }
            }
            Some(v) => probs.push(Problem {
                key: self.path(key),
                value: Some(show(v)),
                message: "expected a non-empty array of pcap/pcapng paths".into(),
            }),
            None => probs.push(Problem {
                key: self.path(key),
                value: None,
                message: "required here: an array of pcap/pcapng paths".into(),
            }),
        }
        files
    }
    pub(crate) fn present(&self, key: &str) -> bool {
        self.table.is_some_and(|t| t.contains_key(key))
    }
    /// Reports keys of the table that nobody read.
    pub(crate) fn finish(self, probs: &mut Vec<Problem>) {
        if let Some(t) = self.table {
            for (k, v) in t {
                if !self.used.contains(k) {
                    let known = self.used.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
                    probs.push(Problem {
                        key: self.path(k),
                        value: Some(show(v)),
                        message: format!("unknown key (known keys here: {known})"),
                    });
                }
            }
        }
    }
}

/// Default memory budget: 4 GiB.
pub const DEFAULT_MEMORY_BUDGET: u64 = 4 << 30;

impl Scenario {
    /// Parses and validates scenario text. `file` names the source in messages; relative trace
    /// paths are resolved against `base_dir`.
    pub fn parse(text: &str, file: &str, base_dir: &Path) -> Result<Scenario, Problems> {
        let root: toml::Table = toml::from_str(text).map_err(|e| Problems {
            file: file.into(),
            list: vec![Problem {
                key: String::new(),
                value: None,
                message: format!("TOML syntax error: {}", e.to_string().trim()),
            }],
        })?;
        Self::from_table(&root, file, base_dir)
    }

    /// Validates an already-parsed table (used by sweeps after `--set` overrides).
    pub fn from_table(root: &toml::Table, file: &str, base_dir: &Path) -> Result<Scenario, Problems> {
        let mut probs = Vec::new();
        let model = match root.get("model") {
            None => "link".to_string(),
            Some(toml::Value::String(s)) if MODELS.iter().any(|m| m.0 == s) => s.clone(),
            Some(v) => {
                let names: Vec<String> = MODELS.iter().map(|m| format!("{:?}", m.0)).collect();
                probs.push(Problem {
                    key: "model".into(),
                    value: Some(show(v)),
                    message: format!("expected one of {} (see `npqos models`)", names.join(", ")),
                });
                "link".into()
            }
        };
        let known: &[&str] = if model == "everest" {
            &["model", "run", "processors", "traffic", "services"]
        } else {
            &["model", "run", "link", "queues", "traffic", "shaper"]
        };
        for (k, v) in root {
            if !known.contains(&k.as_str()) {
                let list: Vec<String> =
                    known.iter().map(|k| if *k == "model" { k.to_string() } else { format!("[{k}]") }).collect();
                probs.push(Problem {
                    key: k.clone(),
                    value: Some(show(v)),
                    message: format!("unknown key for model = {model:?} (known: {})", list.join(", ")),
                });
            }
        }
        if model == "link" && root.contains_key("shaper") {
            probs.push(Problem {
                key: "shaper".into(),
                value: None,
                message: "only applies to model = \"kim\"".into(),
            });
        }

        let mut run = Reader::new(root, "run", &mut probs);
        let seed = run.int("seed", 1, 0, i64::MAX, &mut probs) as u64;
        let duration = run.duration("duration", Duration::from_millis(100), &mut probs);
        if duration.is_zero() {
            probs.push(Problem {
                key: "run.duration".into(),
                value: Some("\"0s\"".into()),
                message: "expected a positive duration".into(),
            });
        }
        let warmup = run.duration("warmup", Duration::ZERO, &mut probs);
        if warmup >= duration && !duration.is_zero() {
            probs.push(Problem {
                key: "run.warmup".into(),
                value: Some(format!("\"{warmup}\"")),
                message: format!("expected less than run.duration ({duration})"),
            });
        }
        let replications = run.int("replications", 1, 1, 10_000, &mut probs) as u32;
        let sample_interval = run.duration("sample_interval", Duration::ZERO, &mut probs);
        // Unset (or zero): a hundred samples per run.
        let sample_interval = if sample_interval.is_zero() {
            Duration::from_nanos((duration.as_nanos() / 100).max(1))
        } else {
            sample_interval
        };
        let memory_budget = run.size("memory_budget", DEFAULT_MEMORY_BUDGET, &mut probs);
        let max_events = run.int("max_events", 0, 0, i64::MAX, &mut probs) as u64;
        run.finish(&mut probs);

        let everest_tables = model == "everest";
        let (link_rate, scheduler, quantum, queues, buffer, traffic, shaper, everest) = if everest_tables {
            let spec = crate::models::everest::scenario::read(root, &mut probs);
            let traffic = Traffic::Synthetic {
                overload: 1.0,
                sizes: SizeSpec::Dist(SizeDist::Constant(1)),
                arrivals: GapDist::Constant,
            };
            (Rate::gbps(10), "drr".to_string(), 1500, 0, 0, traffic, None, Some(spec))
        } else {
            let mut link = Reader::new(root, "link", &mut probs);
            let link_rate = link.rate("rate", Rate::gbps(10), &mut probs);
            if link_rate.is_zero() {
                probs.push(Problem {
                    key: "link.rate".into(),
                    value: Some("0".into()),
                    message: "expected a positive rate".into(),
                });
            }
            let scheduler = link.choice("scheduler", "drr", &["drr"], &mut probs);
            let quantum = link.size("quantum", 1500, &mut probs);
            if quantum == 0 {
                probs.push(Problem {
                    key: "link.quantum".into(),
                    value: Some("\"0B\"".into()),
                    message: "expected a positive size".into(),
                });
            }
            link.finish(&mut probs);

            let mut q = Reader::new(root, "queues", &mut probs);
            let queues = q.int("count", 16, 1, u32::MAX as i64 - 1, &mut probs) as u32;
            let buffer = q.size("buffer", 64 << 10, &mut probs);
            q.finish(&mut probs);

            let mut t = Reader::new(root, "traffic", &mut probs);
            let source = t.choice("source", "synthetic", &["synthetic", "trace"], &mut probs);
            let traffic = if source == "trace" {
                let files = t.files("files", base_dir, &mut probs);
                let time_scale = t.float("time_scale", 1.0, &mut probs, |v| v > 0.0, "greater than 0");
                let flow_multiply = t.int("flow_multiply", 1, 1, 65_535, &mut probs) as u32;
                let lenient = t.boolean("lenient", false, &mut probs);
                let default_align = if files.len() > 1 { "start" } else { "absolute" };
                let align = t.choice("align", default_align, &["start", "absolute"], &mut probs);
                let max_gap = t.duration("max_gap", DEFAULT_MAX_GAP, &mut probs);
                let align = if align == "start" {
                    if max_gap.is_zero() {
                        probs.push(Problem {
                            key: "traffic.max_gap".into(),
                            value: Some(format!("\"{max_gap}\"")),
                            message: "expected a positive duration".into(),
                        });
                    }
                    Alignment::Start { max_gap }
                } else {
                    if t.table.is_some_and(|tb| tb.contains_key("max_gap")) {
                        probs.push(Problem {
                            key: "traffic.max_gap".into(),
                            value: Some(format!("\"{max_gap}\"")),
                            message: "only applies with traffic.align = \"start\"".into(),
                        });
                    }
                    Alignment::Absolute
                };
                Traffic::Trace { files, time_scale, flow_multiply, lenient, align }
            } else {
                let overload =
                    t.float("overload", 0.9, &mut probs, |v| v > 0.0 && v <= 1000.0, "greater than 0 and at most 1000");
                let kind = t.choice("sizes", "imix", &["imix", "constant", "uniform", "trace"], &mut probs);
                let sizes = match kind.as_str() {
                    "constant" => {
                        let s = t.size("size", 1500, &mut probs);
                        check_pkt(s, "traffic.size", &mut probs);
                        SizeSpec::Dist(SizeDist::Constant(s.clamp(1, 65535) as u32))
                    }
                    "trace" => SizeSpec::Trace { files: t.files("size_files", base_dir, &mut probs) },
                    "uniform" => {
                        let a = t.size("min_size", 40, &mut probs);
                        let b = t.size("max_size", 1500, &mut probs);
                        check_pkt(a, "traffic.min_size", &mut probs);
                        check_pkt(b, "traffic.max_size", &mut probs);
                        if a > b {
                            probs.push(Problem {
                                key: "traffic.min_size".into(),
                                value: Some(format!("\"{a}B\"")),
                                message: format!("expected at most traffic.max_size ({b}B)"),
                            });
                        }
                        let (a, b) = (a.clamp(1, 65535) as u32, b.clamp(1, 65535) as u32);
                        SizeSpec::Dist(SizeDist::Uniform { min: a.min(b), max: b.max(a) })
                    }
                    _ => SizeSpec::Dist(SizeDist::kim_imix()),
                };
                for k in ["size", "min_size", "max_size", "size_files"] {
                    let belongs = match k {
                        "size" => kind == "constant",
                        "size_files" => kind == "trace",
                        _ => kind == "uniform",
                    };
                    t.used.insert(k.into());
                    if t.present(k) && !belongs {
                        probs.push(Problem {
                            key: format!("traffic.{k}"),
                            value: None,
                            message: format!("does not apply to sizes = {kind:?}"),
                        });
                    }
                }
                let akind = t.choice("arrivals", "exponential", &["constant", "exponential", "onoff"], &mut probs);
                let arrivals = match akind.as_str() {
                    "constant" => GapDist::Constant,
                    "onoff" => {
                        let on_mean = t.duration("on_mean", Duration::from_millis(10), &mut probs);
                        let off_mean = t.duration("off_mean", Duration::from_millis(40), &mut probs);
                        for (k, v) in [("on_mean", on_mean), ("off_mean", off_mean)] {
                            if v.is_zero() {
                                probs.push(Problem {
                                    key: format!("traffic.{k}"),
                                    value: Some("\"0s\"".into()),
                                    message: "expected a positive duration".into(),
                                });
                            }
                        }
                        let shape =
                            t.float("pareto_shape", 1.5, &mut probs, |v| v > 1.0, "greater than 1 (finite mean)");
                        GapDist::OnOff { on_mean, off_mean, shape }
                    }
                    _ => GapDist::Exponential,
                };
                if akind != "onoff" {
                    for k in ["on_mean", "off_mean", "pareto_shape"] {
                        if t.present(k) {
                            probs.push(Problem {
                                key: format!("traffic.{k}"),
                                value: None,
                                message: format!("does not apply to arrivals = {akind:?}"),
                            });
                        }
                    }
                }
                Traffic::Synthetic { overload, sizes, arrivals }
            };
            for k in ["files", "time_scale", "flow_multiply", "lenient"] {
                if source != "trace" {
                    t.used.insert(k.into());
                    if t.present(k) {
                        probs.push(Problem {
                            key: format!("traffic.{k}"),
                            value: None,
                            message: "only applies to source = \"trace\"".into(),
                        });
                    }
                }
            }
            if source == "trace" {
                for k in [
                    "overload",
                    "sizes",
                    "size",
                    "min_size",
                    "max_size",
                    "size_files",
                    "arrivals",
                    "on_mean",
                    "off_mean",
                    "pareto_shape",
                ] {
                    t.used.insert(k.into());
                    if t.present(k) {
                        probs.push(Problem {
                            key: format!("traffic.{k}"),
                            value: None,
                            message: "only applies to source = \"synthetic\"".into(),
                        });
                    }
                }
            }
            t.finish(&mut probs);

            let shaper = if model == "kim" {
                if source == "trace" {
                    probs.push(Problem {
                        key: "traffic.source".into(),
                        value: Some("\"trace\"".into()),
                        message:
                            "model = \"kim\" needs synthetic traffic (the overload factor sets each queue's input)"
                                .into(),
                    });
                }
                let mut sh = Reader::new(root, "shaper", &mut probs);
                let fill = sh.choice("fill", "event", &["event", "periodic"], &mut probs);
                let period = sh.duration("fill_period", Duration::from_millis(1), &mut probs);
                if fill == "periodic" && period.is_zero() {
                    probs.push(Problem {
                        key: "shaper.fill_period".into(),
                        value: Some("\"0s\"".into()),
                        message: "expected a positive duration".into(),
                    });
                }
                if fill != "periodic" && sh.present("fill_period") {
                    probs.push(Problem {
                        key: "shaper.fill_period".into(),
                        value: None,
                        message: "only applies to fill = \"periodic\"".into(),
                    });
                }
                let cores = sh.int("cores", 100, 1, 65_536, &mut probs) as u32;
                let alpha = sh.size("alpha", 3000, &mut probs);
                let cap = sh.size("cap", alpha, &mut probs);
                if alpha > cap {
                    probs.push(Problem {
                        key: "shaper.alpha".into(),
                        value: Some(format!("\"{alpha}B\"")),
                        message: format!("expected at most shaper.cap ({cap}B)"),
                    });
                }
                let max = npqos_core::shaper::MAX_BUCKET_BYTES;
                if cap > max {
                    probs.push(Problem {
                        key: "shaper.cap".into(),
                        value: Some(format!("\"{cap}B\"")),
                        message: format!("expected at most {max}B"),
                    });
                }
                let wd = sh.choice("while_disabled", "drop", &["drop", "queue"], &mut probs);
                let lm = sh.choice("link_mode", "ideal", &["ideal", "shared"], &mut probs);
                let cache = sh.boolean("cache", false, &mut probs);
                let adaptive = sh.boolean("adaptive", false, &mut probs);
                let gamma = sh.float("gamma", 2.0, &mut probs, |v| v > 1.0 && v <= 1e6, "greater than 1");
                let delta_th = sh.int("delta_th", 3, 0, u32::MAX as i64, &mut probs) as u32;
                let alpha_min = sh.size("alpha_min", alpha.min(1500), &mut probs);
                let interval = sh.duration("interval", Duration::from_secs(1), &mut probs);
                if adaptive && interval.is_zero() {
                    probs.push(Problem {
                        key: "shaper.interval".into(),
                        value: Some("\"0s\"".into()),
                        message: "expected a positive duration".into(),
                    });
                }
                if !adaptive {
                    for k in ["gamma", "delta_th", "alpha_min", "interval"] {
                        if sh.present(k) {
                            probs.push(Problem {
                                key: format!("shaper.{k}"),
                                value: None,
                                message: "only applies with adaptive = true".into(),
                            });
                        }
                    }
                }
                if fill == "periodic" && (adaptive || cache) {
                    probs.push(Problem {
                        key: "shaper.fill".into(),
                        value: Some("\"periodic\"".into()),
                        message: "adaptive and cache apply to the event-driven shaper only".into(),
                    });
                }
                sh.finish(&mut probs);
                Some(ShaperSpec {
                    fill_period: (fill == "periodic").then_some(period),
                    cores: cores.min(queues.max(1)),
                    alpha,
                    cap,
                    queue_while_disabled: wd == "queue",
                    shared_link: lm == "shared",
                    cache,
                    adaptive: adaptive.then_some((gamma, delta_th, alpha_min, interval)),
                })
            } else {
                None
            };
            (link_rate, scheduler, quantum, queues, buffer, traffic, shaper, None)
        };

        let sc = Scenario {
            model,
            seed,
            duration,
            warmup,
            replications,
            sample_interval,
            memory_budget,
            max_events,
            link_rate,
            scheduler,
            quantum,
            queues,
            buffer,
            traffic,
            shaper,
            everest,
        };
        if probs.is_empty() {
            let need = sc.estimate_memory(1);
            if need > sc.memory_budget && sc.everest.is_some() {
                probs.push(Problem {
                    key: "traffic.packets_per_second".into(),
                    value: Some(sc.everest.as_ref().map_or(0.0, |e| e.traffic.packets_per_second).to_string()),
                    message: format!(
                        "if every packet of the run waited at once (no queue limit), one replication would need {}, above run.memory_budget = {}; shorten run.duration or raise the budget",
                        human_bytes(need),
                        human_bytes(sc.memory_budget)
                    ),
                });
            } else if need > sc.memory_budget {
                probs.push(Problem {
                    key: "queues.count".into(),
                    value: Some(sc.queues.to_string()),
                    message: format!(
                        "the estimated state of one replication is {} (queues x per-queue state + worst-case buffered packets), above run.memory_budget = {}; lower queues.count or queues.buffer, or raise run.memory_budget",
                        human_bytes(need),
                        human_bytes(sc.memory_budget)
                    ),
                });
            }
        }
        if probs.is_empty() {
            Ok(sc)
        } else {
            Err(Problems { file: file.into(), list: probs })
        }
    }

    /// The sampling interval of time series (duration / 100 when not configured).
    pub fn sample_every(&self) -> Duration {
        self.sample_interval
    }

    /// Upper estimate of the memory `parallel` replications running at once need, in bytes:
    /// per-queue state (queue record, arrival generator, DRR list entry, pending arrival event)
    /// plus the packet-node pool in the worst case (every buffer full of minimum-size packets).
    pub fn estimate_memory(&self, parallel: u32) -> u64 {
        if let Some(e) = &self.everest {
            return e.estimate_memory(self.duration).saturating_mul(parallel.max(1) as u64);
        }
        let n = self.queues as u128;
        // See models::link and models::kim for the layouts (kim adds the bucket state, 50 B).
        let per_queue = 32 + 64 + 8 + 48 + 16 + if self.shaper.is_some() { 56 } else { 0 };
        let min_pkt = match &self.traffic {
            Traffic::Synthetic { sizes, .. } => sizes.min_hint().max(1) as u128,
            Traffic::Trace { .. } => 40,
        };
        // kim with an ideal link dropping while disabled never holds a packet past its arrival.
        let buffers = !matches!(&self.shaper, Some(sh) if !sh.shared_link && !sh.queue_while_disabled);
        let nodes = if buffers { n * (self.buffer as u128 / min_pkt + 1) } else { n };
        let series = 2 * 3 * 16 * (self.duration.as_nanos() / self.sample_every().as_nanos().max(1)) as u128;
        let total = (n * per_queue + nodes * 16 + series + (1 << 20)) * parallel.max(1) as u128;
        u64::try_from(total).unwrap_or(u64::MAX)
    }

    /// The scenario with every default filled in, as TOML (the `scenario.resolved.toml` body).
    pub fn to_toml(&self) -> toml::Table {
        let mut root = toml::Table::new();
        root.insert("model".into(), self.model.clone().into());
        let mut run = toml::Table::new();
        run.insert("seed".into(), (self.seed as i64).into());
        run.insert("duration".into(), self.duration.to_string().into());
        run.insert("warmup".into(), self.warmup.to_string().into());
        run.insert("replications".into(), (self.replications as i64).into());
        run.insert("sample_interval".into(), self.sample_every().to_string().into());
        run.insert("memory_budget".into(), fmt_size(self.memory_budget).into());
        run.insert("max_events".into(), (self.max_events as i64).into());
        root.insert("run".into(), run.into());
        if let Some(e) = &self.everest {
            e.to_toml(&mut root);
            return root;
        }
        let mut link = toml::Table::new();
        link.insert("rate".into(), self.link_rate.to_string().into());
        link.insert("scheduler".into(), self.scheduler.clone().into());
        link.insert("quantum".into(), fmt_size(self.quantum).into());
        root.insert("link".into(), link.into());
        let mut q = toml::Table::new();
        q.insert("count".into(), (self.queues as i64).into());
        q.insert("buffer".into(), fmt_size(self.buffer).into());
        root.insert("queues".into(), q.into());
        let mut t = toml::Table::new();
        match &self.traffic {
            Traffic::Synthetic { overload, sizes, arrivals } => {
                t.insert("source".into(), "synthetic".into());
                t.insert("overload".into(), (*overload).into());
                match sizes {
                    SizeSpec::Trace { files } => {
                        t.insert("sizes".into(), "trace".into());
                        t.insert(
                            "size_files".into(),
                            toml::Value::Array(files.iter().map(|f| f.display().to_string().into()).collect()),
                        );
                    }
                    SizeSpec::Dist(SizeDist::Constant(s)) => {
                        t.insert("sizes".into(), "constant".into());
                        t.insert("size".into(), format!("{s}B").into());
                    }
                    SizeSpec::Dist(SizeDist::Uniform { min, max }) => {
                        t.insert("sizes".into(), "uniform".into());
                        t.insert("min_size".into(), format!("{min}B").into());
                        t.insert("max_size".into(), format!("{max}B").into());
                    }
                    SizeSpec::Dist(SizeDist::Empirical(_)) => {
                        t.insert("sizes".into(), "imix".into());
                    }
                }
                match arrivals {
                    GapDist::Constant => {
                        t.insert("arrivals".into(), "constant".into());
                    }
                    GapDist::Exponential => {
                        t.insert("arrivals".into(), "exponential".into());
                    }
                    GapDist::OnOff { on_mean, off_mean, shape } => {
                        t.insert("arrivals".into(), "onoff".into());
                        t.insert("on_mean".into(), on_mean.to_string().into());
                        t.insert("off_mean".into(), off_mean.to_string().into());
                        t.insert("pareto_shape".into(), (*shape).into());
                    }
                }
            }
            Traffic::Trace { files, time_scale, flow_multiply, lenient, align } => {
                t.insert("source".into(), "trace".into());
                t.insert(
                    "files".into(),
                    toml::Value::Array(files.iter().map(|f| f.display().to_string().into()).collect()),
                );
                t.insert("time_scale".into(), (*time_scale).into());
                t.insert("flow_multiply".into(), (*flow_multiply as i64).into());
                t.insert("lenient".into(), (*lenient).into());
                match align {
                    Alignment::Absolute => {
                        t.insert("align".into(), "absolute".into());
                    }
                    Alignment::Start { max_gap } => {
                        t.insert("align".into(), "start".into());
                        t.insert("max_gap".into(), max_gap.to_string().into());
                    }
                }
            }
        }
        root.insert("traffic".into(), t.into());
        if let Some(sh) = &self.shaper {
            let mut k = toml::Table::new();
            match sh.fill_period {
                Some(p) => {
                    k.insert("fill".into(), "periodic".into());
                    k.insert("fill_period".into(), p.to_string().into());
                }
                None => {
                    k.insert("fill".into(), "event".into());
                }
            }
            k.insert("cores".into(), (sh.cores as i64).into());
            k.insert("alpha".into(), fmt_size(sh.alpha).into());
            k.insert("cap".into(), fmt_size(sh.cap).into());
            k.insert("while_disabled".into(), if sh.queue_while_disabled { "queue" } else { "drop" }.into());
            k.insert("link_mode".into(), if sh.shared_link { "shared" } else { "ideal" }.into());
            k.insert("cache".into(), sh.cache.into());
            k.insert("adaptive".into(), sh.adaptive.is_some().into());
            if let Some((g, th, amin, iv)) = sh.adaptive {
                k.insert("gamma".into(), g.into());
                k.insert("delta_th".into(), (th as i64).into());
                k.insert("alpha_min".into(), fmt_size(amin).into());
                k.insert("interval".into(), iv.to_string().into());
            }
            root.insert("shaper".into(), k.into());
        }
        root
    }
}

fn check_pkt(s: u64, key: &str, probs: &mut Vec<Problem>) {
    if !(1..=65535).contains(&s) {
        probs.push(Problem {
            key: key.into(),
            value: Some(format!("\"{s}B\"")),
            message: "expected a packet size from 1B to 65535B".into(),
        });
    }
}

/// `1.5 GiB`-style formatting for messages.
pub fn human_bytes(b: u64) -> String {
    let f = b as f64;
    for (s, u) in [(1u64 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] {
        if b >= s {
            return format!("{:.1} {u}", f / s as f64);
        }
    }
    format!("{b} B")
}

/// Applies a `--set key.path=value` override to a parsed table. The value is read as a TOML
/// value when it parses as one (numbers, booleans, arrays), else taken as a string.
pub fn set_key(root: &mut toml::Table, path: &str, value: &str) -> Result<(), String> {
    let parsed: toml::Value = toml::from_str::<toml::Table>(&format!("v = {value}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(value.to_string()));
    let parts: Vec<&str> = path.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(format!("bad key path {path:?}: expected dotted keys such as link.rate"));
    }
    let mut t = root;
    for p in &parts[..parts.len() - 1] {
        let e = t.entry(p.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = match e {
            toml::Value::Table(tt) => tt,
            _ => return Err(format!("key path {path:?}: {p} is not a table")),
        };
    }
    t.insert(parts[parts.len() - 1].to_string(), parsed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Scenario, Problems> {
        Scenario::parse(s, "t.toml", Path::new("."))
    }

    #[test]
    fn defaults_fill_in() {
        let s = parse("").unwrap();
        assert_eq!(s.queues, 16);
        assert_eq!(s.link_rate, Rate::gbps(10));
        let again = Scenario::from_table(&s.to_toml(), "r.toml", Path::new(".")).unwrap();
        assert_eq!(again, s, "the resolved scenario parses back to the same scenario");
    }

    #[test]
    fn every_problem_is_reported() {
        let e = parse("[link]\nrate = \"10\"\nspeed = 3\n[queues]\ncount = 0\n[traffic]\noverload = -1\n").unwrap_err();
        let keys: Vec<&str> = e.list.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, vec!["link.rate", "link.speed", "queues.count", "traffic.overload"], "{e}");
        let msg = e.to_string();
        assert!(msg.contains("t.toml: key `link.rate` = \"10\": missing unit"), "{msg}");
        assert!(msg.contains("unknown key"), "{msg}");
    }

    #[test]
    fn memory_budget_refuses_before_allocating() {
        let e = parse("[queues]\ncount = 100000000\n").unwrap_err();
        assert!(e.to_string().contains("above run.memory_budget"), "{e}");
    }

    #[test]
    fn kim_scenarios_validate_the_shaper_table() {
        let ok = parse("model = \"kim\"\n[queues]\ncount = 1000\n[shaper]\nfill = \"periodic\"\nfill_period = \"1ms\"\ncores = 10\n").unwrap();
        let sh = ok.shaper.clone().unwrap();
        assert_eq!(sh.fill_period, Some(Duration::from_millis(1)));
        assert_eq!((sh.cores, sh.alpha, sh.cap), (10, 3000, 3000));
        // Round trip through the resolved TOML.
        let again = Scenario::from_table(&ok.to_toml(), "t", Path::new(".")).unwrap();
        assert_eq!(again, ok);
        // Every problem at once.
        let e = parse(
            "model = \"kim\"\n[traffic]\nsource = \"trace\"\nfiles = []\n[shaper]\nalpha = \"4000B\"\ncap = \"3000B\"\ngamma = 3.0\nfill_period = \"1ms\"\ncolour = 1\n",
        )
        .unwrap_err()
        .to_string();
        for needle in [
            "traffic.source",
            "shaper.alpha",
            "shaper.gamma",
            "only applies with adaptive",
            "shaper.fill_period",
            "shaper.colour",
        ] {
            assert!(e.contains(needle), "{needle} in {e}");
        }
        let e = parse("[shaper]\ncores = 4\n").unwrap_err().to_string();
        assert!(e.contains("only applies to model = \"kim\""), "{e}");
    }

    #[test]
    fn set_key_overrides() {
        let mut t: toml::Table = toml::from_str("[link]\nrate = \"1Gbps\"").unwrap();
        set_key(&mut t, "link.rate", "40Gbps").unwrap();
        set_key(&mut t, "queues.count", "64").unwrap();
        let s = Scenario::from_table(&t, "x", Path::new(".")).unwrap();
        assert_eq!(s.link_rate, Rate::gbps(40));
        assert_eq!(s.queues, 64);
    }
}
