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
//! model = "link"                 # one of `npqos models` (crate::models::MODELS); the keys below
//!                                # are those of "link" (DRR over tail-drop queues) and "kim"
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
//! timer = "heap"                 # fill = "event": the paper's per-core heaps, or "wheel" (a
//!                                # bucketed find-first-set timer, Eiffel style; docs/kim.md)
//! alpha = "3000B"                # reschedule threshold
//! cap = "3000B"                  # bucket cap (CBE); default alpha
//! while_disabled = "drop"        # "drop" (policer, the stochastic model) or "queue" (shaper)
//! link_mode = "ideal"            # "ideal" (queues independent) or "shared" (round robin)
//! cache = false                  # simulate a 32 KB 2-way data cache per core (Tables VI-VII)
//! shards = 1                     # independent groups of queues and cores, run in parallel
//!                                # (queue q uses only cores c with c = q mod shards; docs/kim.md)
//! adaptive = false               # eq 14; then gamma, delta_th, alpha_min, interval
//! gamma = 2.0
//! delta_th = 3
//! alpha_min = "1500B"
//! interval = "1s"
//! ```

use crate::units::fmt_size;
use npqos_core::Duration;
use std::fmt;
use std::path::Path;

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

pub use kim::ShaperSpec;
pub(crate) use link::{read as read_link, to_toml as link_to_toml};
pub use link::{LinkSpec, SizeSpec, Traffic, DEFAULT_MAX_GAP};
pub(crate) use reader::{no_run_length, show, Reader};
pub use shaper::{BucketConfig, DEFAULT_ALPHA};

pub(crate) mod classify;
pub mod flows;
pub(crate) mod flowtable;
mod kim;
mod link;
mod reader;
pub(crate) mod shaper;
pub(crate) mod stats;

pub mod model;
pub use model::{MemoryEstimate, ModelError, ModelSpec, Progress, ScenarioModel};

/// A validated scenario with every default filled in: the `[run]` table, common to every
/// model, and the model's own tables in `spec` (the [`ModelSpec`] its model's reader returned).
#[derive(Clone, Debug)]
pub struct Scenario {
    pub seed: u64,
    pub duration: Duration,
    pub warmup: Duration,
    pub replications: u32,
    pub sample_interval: Duration,
    pub memory_budget: u64,
    pub max_events: u64,
    /// The `model = ` name ([`ScenarioModel::name`] of the model that read `spec`).
    model: &'static str,
    pub spec: Box<dyn ModelSpec>,
    /// Where a run writes files as it goes (the router's packet captures, `[output] pcap`):
    /// `npqos run` sets it to its results directory's `pcap/`. Not a parameter: never written
    /// back, not compared.
    pub capture_dir: Option<std::path::PathBuf>,
}

impl PartialEq for Scenario {
    fn eq(&self, o: &Self) -> bool {
        // By hand: a derived `==` on `Box<dyn ModelSpec>` tries to move out of the box.
        (self.seed, self.duration, self.warmup, self.replications, self.sample_interval)
            == (o.seed, o.duration, o.warmup, o.replications, o.sample_interval)
            && (self.memory_budget, self.max_events, self.model) == (o.memory_budget, o.max_events, o.model)
            && self.spec.eq_dyn(o.spec.as_ref())
    }
}

/// `model = "kim"`: the link tables and `[shaper]`.
#[derive(Clone, Debug, PartialEq)]
pub struct KimSpec {
    pub link: LinkSpec,
    pub shaper: ShaperSpec,
}

/// Default memory budget: 4 GiB.
pub const DEFAULT_MEMORY_BUDGET: u64 = 4 << 30;

impl Scenario {
    /// Parses and validates scenario text as a scenario of one of `models` (see
    /// [`Self::from_table_in`]). `file` names the source in messages; relative trace paths are
    /// resolved against `base_dir`. `Scenario::parse` (in `crate::models`) passes the list of
    /// every model.
    pub fn parse_in(
        models: &[&dyn ScenarioModel],
        text: &str,
        file: &str,
        base_dir: &Path,
    ) -> Result<Scenario, Problems> {
        let root: toml::Table = toml::from_str(text).map_err(|e| Problems {
            file: file.into(),
            list: vec![Problem {
                key: String::new(),
                value: None,
                message: format!("TOML syntax error: {}", e.to_string().trim()),
            }],
        })?;
        Self::from_table_in(models, &root, file, base_dir)
    }

    /// Validates an already-parsed table against the models of `models` (the first is the
    /// default when `model` is absent); `Scenario::from_table` passes `crate::models::MODELS`.
    pub fn from_table_in(
        models: &[&dyn ScenarioModel],
        root: &toml::Table,
        file: &str,
        base_dir: &Path,
    ) -> Result<Scenario, Problems> {
        let mut probs = Vec::new();
        let default = models[0];
        let model = match root.get("model") {
            None => default,
            Some(toml::Value::String(s)) if models.iter().any(|m| m.name() == s) => {
                *models.iter().find(|m| m.name() == s).expect("just found")
            }
            Some(v) => {
                let names: Vec<String> = models.iter().map(|m| format!("{:?}", m.name())).collect();
                probs.push(Problem {
                    key: "model".into(),
                    value: Some(show(v)),
                    message: format!("expected one of {} (see `npqos models`)", names.join(", ")),
                });
                default
            }
        };
        let known = model.tables();
        for (k, v) in root {
            if k != "meta" && !known.contains(&k.as_str()) {
                let list: Vec<String> =
                    known.iter().map(|k| if *k == "model" { k.to_string() } else { format!("[{k}]") }).collect();
                let message = match models.iter().find(|m| m.own_tables().contains(&k.as_str())) {
                    Some(owner) => format!("only applies to model = {:?}", owner.name()),
                    None => format!("unknown key for model = {:?} (known: {})", model.name(), list.join(", ")),
                };
                probs.push(Problem { key: k.clone(), value: Some(show(v)), message });
            }
        }

        // `[meta]`: what npqos records in `scenario.resolved.toml` (the scenario's name, seed,
        // version, commit). Read so a resolved scenario runs again as it is; only the name
        // has an effect (`Scenario::name_in`).
        let mut meta = Reader::new(root, "meta", &mut probs);
        meta.string("scenario", "", &mut probs);
        meta.int("seed", 0, 0, i64::MAX, &mut probs);
        meta.string("npqos_version", "", &mut probs);
        meta.string("git_commit", "", &mut probs);
        meta.finish(&mut probs);

        let mut run = Reader::new(root, "run", &mut probs);
        let seed = run.int("seed", 1, 0, i64::MAX, &mut probs) as u64;
        let duration = run.positive_duration("duration", Duration::from_millis(100), &mut probs);
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

        let spec = model.read(root, base_dir, &mut probs);
        let sc = Scenario {
            seed,
            duration,
            warmup,
            replications,
            sample_interval,
            memory_budget,
            max_events,
            model: model.name(),
            spec,
            capture_dir: None,
        };
        if probs.is_empty() {
            let need = sc.estimate_memory(1);
            if need > sc.memory_budget {
                let MemoryEstimate { key, value, what, remedy, .. } = sc.spec.memory(sc.duration, sc.sample_every());
                probs.push(Problem {
                    key: key.into(),
                    value: Some(value),
                    message: format!(
                        "one replication needs an estimated {} ({what}), above run.memory_budget = {}; {remedy}, or raise run.memory_budget",
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

    /// The model's name.
    pub fn model(&self) -> &'static str {
        self.model
    }

    /// The model's tables as `T` (its [`ModelSpec`] type), or `None` for another model's
    /// scenario.
    pub fn spec_as<T: ModelSpec>(&self) -> Option<&T> {
        self.spec.as_any().downcast_ref()
    }

    /// [`Self::spec_as`], mutable.
    pub fn spec_as_mut<T: ModelSpec>(&mut self) -> Option<&mut T> {
        self.spec.as_any_mut().downcast_mut()
    }

    /// Runs one replication with `seed` through the model the scenario names ([`ModelSpec::run`]).
    pub fn run(
        &self,
        seed: u64,
        threads: usize,
        interrupt: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
        progress: Progress<'_>,
    ) -> Result<crate::results::RunResult, ModelError> {
        self.spec.run(self, seed, threads, interrupt, progress)
    }

    /// The scenario name a resolved scenario records (`[meta] scenario`), if any: a run of
    /// `scenario.resolved.toml` keeps the name of the run that wrote it.
    pub fn name_in(root: &toml::Table) -> Option<String> {
        match root.get("meta")?.get("scenario")? {
            toml::Value::String(s) if !s.is_empty() => Some(s.clone()),
            _ => None,
        }
    }

    /// The link tables of a `link` or `kim` scenario.
    pub fn link(&self) -> Option<&LinkSpec> {
        self.spec_as::<LinkSpec>().or_else(|| self.spec_as::<KimSpec>().map(|k| &k.link))
    }

    /// The `[shaper]` of a `kim` scenario.
    pub fn shaper(&self) -> Option<&ShaperSpec> {
        self.spec_as::<KimSpec>().map(|k| &k.shaper)
    }

    /// The sampling interval of time series (duration / 100 when not configured).
    pub fn sample_every(&self) -> Duration {
        self.sample_interval
    }

    /// Upper estimate of the memory `parallel` replications running at once need, in bytes
    /// (each model's estimate is documented where it is computed).
    pub fn estimate_memory(&self, parallel: u32) -> u64 {
        let one = self.spec.memory(self.duration, self.sample_every()).bytes;
        u64::try_from(one.saturating_mul(parallel.max(1) as u128)).unwrap_or(u64::MAX)
    }

    /// The scenario with every default filled in, as TOML (the `scenario.resolved.toml` body).
    pub fn to_toml(&self) -> toml::Table {
        let mut root = toml::Table::new();
        root.insert("model".into(), self.model().into());
        let mut run = toml::Table::new();
        run.insert("seed".into(), (self.seed as i64).into());
        // lap's and qcache's run lengths are their streams' (run.duration does not apply).
        if self.spec.has_run_length() {
            run.insert("duration".into(), self.duration.to_string().into());
            run.insert("warmup".into(), self.warmup.to_string().into());
        }
        run.insert("replications".into(), (self.replications as i64).into());
        run.insert("sample_interval".into(), self.sample_every().to_string().into());
        run.insert("memory_budget".into(), fmt_size(self.memory_budget).into());
        run.insert("max_events".into(), (self.max_events as i64).into());
        root.insert("run".into(), run.into());
        self.spec.resolved(&mut root);
        root
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

/// Helpers the scenario models' tests share: parsing with messages as the CLI prints them, the
/// examples in `scenarios/`, the round trip through the resolved form, and the key paths a
/// refused scenario must name.
#[cfg(test)]
pub(crate) mod testing {
    use super::Scenario;
    use std::path::Path;

    /// Parses `text` as `t.toml`, relative paths against the working directory.
    pub(crate) fn parse(text: &str) -> Result<Scenario, String> {
        Scenario::parse(text, "t.toml", Path::new(".")).map_err(|p| p.to_string())
    }

    /// The text of `scenarios/<name>.toml`.
    pub(crate) fn example(name: &str) -> String {
        let path = format!("{}/../../scenarios/{name}.toml", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// Each text parses, and its resolved form parses back to the same scenario.
    pub(crate) fn assert_round_trips(texts: impl IntoIterator<Item = String>) {
        for text in texts {
            let sc = parse(&text).unwrap_or_else(|e| panic!("{e}\nin:\n{text}"));
            let again = Scenario::from_table(&sc.to_toml(), "resolved.toml", Path::new(".")).unwrap();
            assert_eq!(again, sc, "{text}");
        }
    }

    /// `text` is refused, naming every one of `keys`.
    pub(crate) fn assert_names(text: &str, keys: &[&str]) {
        let e = parse(text).expect_err("a scenario with problems");
        for key in keys {
            assert!(e.contains(key), "{key} missing in:\n{e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use npqos_core::Rate;

    fn parse(s: &str) -> Result<Scenario, Problems> {
        Scenario::parse(s, "t.toml", Path::new("."))
    }

    #[test]
    fn defaults_fill_in() {
        let s = parse("").unwrap();
        assert_eq!(s.model(), "link");
        assert_eq!(s.link().unwrap().queues, 16);
        assert_eq!(s.link().unwrap().link_rate, Rate::gbps(10));
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

    /// The link's DRR takes quanta up to 2^48 bytes; a larger one is bad input, not a panic.
    #[test]
    fn a_huge_link_quantum_is_refused() {
        let e = parse("[link]\nquantum = \"1PB\"\n").unwrap_err();
        assert_eq!(e.list.iter().map(|p| p.key.as_str()).collect::<Vec<_>>(), ["link.quantum"], "{e}");
        assert!(parse("[link]\nquantum = \"1TB\"\n").is_ok());
    }

    #[test]
    fn memory_budget_refuses_before_allocating() {
        let e = parse("[queues]\ncount = 100000000\n").unwrap_err();
        assert!(e.to_string().contains("above run.memory_budget"), "{e}");
    }

    #[test]
    fn kim_scenarios_validate_the_shaper_table() {
        let ok = parse("model = \"kim\"\n[queues]\ncount = 1000\n[shaper]\nfill = \"periodic\"\nfill_period = \"1ms\"\ncores = 10\n").unwrap();
        let sh = ok.shaper().cloned().unwrap();
        assert_eq!(sh.fill_period, Some(Duration::from_millis(1)));
        assert_eq!((sh.cores, sh.bucket.alpha, sh.bucket.cap), (10, 3000, 3000));
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
    fn the_kim_timer_key() {
        use npqos_core::shaper::Timer;
        let ok = parse("model = \"kim\"\n[queues]\ncount = 100\n[shaper]\ntimer = \"wheel\"\n").unwrap();
        assert_eq!(ok.shaper().unwrap().bucket.timer, Timer::Wheel);
        let again = Scenario::from_table(&ok.to_toml(), "t", Path::new(".")).unwrap();
        assert_eq!(again, ok, "the timer survives the resolved TOML");
        assert_eq!(
            parse("model = \"kim\"\n[queues]\ncount = 100\n").unwrap().shaper().unwrap().bucket.timer,
            Timer::Heap
        );
        for (toml, needle) in [
            ("timer = \"calendar\"", "one of \"heap\", \"wheel\""),
            ("fill = \"periodic\"\ntimer = \"wheel\"", "does not apply to fill = \"periodic\""),
            ("timer = \"wheel\"\ncache = true", "needs timer = \"heap\""),
        ] {
            let e = parse(&format!("model = \"kim\"\n[shaper]\n{toml}\n")).unwrap_err().to_string();
            assert!(e.contains(needle), "{needle} in {e}");
        }
    }

    /// `shards`: read, resolved and parsed back; out of range or with the shared link, refused
    /// with the key path, the value and what was expected.
    #[test]
    fn the_kim_shards_key() {
        let ok = parse("model = \"kim\"\n[queues]\ncount = 1000\n[shaper]\ncores = 10\nshards = 5\n").unwrap();
        assert_eq!(ok.shaper().unwrap().shards, 5);
        let again = Scenario::from_table(&ok.to_toml(), "t", Path::new(".")).unwrap();
        assert_eq!(again, ok, "shards survive the resolved TOML");
        assert_eq!(parse("model = \"kim\"\n").unwrap().shaper().unwrap().shards, 1);
        for (toml, needle) in [
            ("shards = 0", "shaper.shards"),
            ("cores = 10\nshards = 11", "expected at most 10"),
            ("shards = 2\nlink_mode = \"shared\"", "needs shards = 1"),
            ("shards = \"many\"", "shaper.shards"),
        ] {
            let e =
                parse(&format!("model = \"kim\"\n[queues]\ncount = 1000\n[shaper]\n{toml}\n")).unwrap_err().to_string();
            assert!(e.contains(needle), "{needle} in {e}");
        }
    }

    /// `conformance`: read and resolved; wait-for-tokens needs queueing while disabled and a cap
    /// that holds the largest packet.
    #[test]
    fn the_kim_conformance_key() {
        use npqos_core::shaper::Conformance;
        let base = "model = \"kim\"\n[queues]\ncount = 100\n[shaper]\n";
        let ok = parse(&format!("{base}conformance = \"wait-for-tokens\"\nwhile_disabled = \"queue\"\n")).unwrap();
        assert_eq!(ok.shaper().unwrap().bucket.conformance, Conformance::WaitForTokens);
        let again = Scenario::from_table(&ok.to_toml(), "t", Path::new(".")).unwrap();
        assert_eq!(again, ok, "conformance survives the resolved TOML");
        assert_eq!(parse(base).unwrap().shaper().unwrap().bucket.conformance, Conformance::SendThenPay);
        for (toml, needle) in [
            ("conformance = \"wait-for-tokens\"", "needs while_disabled = \"queue\""),
            (
                "conformance = \"wait-for-tokens\"\nwhile_disabled = \"queue\"\nalpha = \"500B\"\ncap = \"1000B\"",
                "expected at least the largest packet (1500B)",
            ),
            ("conformance = \"tbf\"", "shaper.conformance"),
        ] {
            let e = parse(&format!("{base}{toml}\n")).unwrap_err().to_string();
            assert!(e.contains(needle), "{needle} in {e}");
        }
    }

    #[test]
    fn set_key_overrides() {
        let mut t: toml::Table = toml::from_str("[link]\nrate = \"1Gbps\"").unwrap();
        set_key(&mut t, "link.rate", "40Gbps").unwrap();
        set_key(&mut t, "queues.count", "64").unwrap();
        let s = Scenario::from_table(&t, "x", Path::new(".")).unwrap();
        assert_eq!(s.link().unwrap().link_rate, Rate::gbps(40));
        assert_eq!(s.link().unwrap().queues, 64);
    }
}
