//! Scenario files of the predictive paper's three settings (docs/predictive.md, "Scenario
//! files"):
//!
//! * `model = "fq"`: flows with reserved processing shares on `m` processors under SFQ, WF2Q+
//!   or EFQ ([`super::run_limited`]);
//! * `model = "lap"`: a backlogged stream of payload applications on processors with
//!   one-application caches under LAP, FCFS or T-Opt ([`crate::models::predictive::lap::run_limited`]);
//! * `model = "efq-lap"`: the reserved flows on processors with caches, some bursting above
//!   their reservation, under EFQ, EFQ preferring warm processors, LAP, or the switching
//!   combination ([`crate::models::predictive::efq_lap::run_limited`]).
//!
//! ```toml
//! model = "fq"
//! [run]
//! duration = "100ms"          # arrivals stop; the run ends when every packet completed
//! [processors]
//! count = 1                   # m
//! discipline = "efq"          # "sfq", "wf2q+", "efq"
//! [traffic]
//! load = 1.0                  # each flow's rate / its reserved share (1 = just saturate)
//! [[flows]]                   # default: section 4.2.1's 32 flows (4 apps x 8 sizes, 1/32 each)
//! name = "fec-1500"           # default <app>-<size>
//! app = "fec"                 # "ip-forwarding", "encryption", "compression", "fec" (Table 1)
//! size = "1500B"
//! share = 0.03125             # reserved fraction of all processors (sum at most 1)
//! ```
//!
//! `model = "efq-lap"` has the same `[[flows]]`, and `[processors]` `count`, `mode` ("efq",
//! "efq-warm", "lap", "efq+lap"), `lap_above` and `efq_below` (with "efq+lap"); `[traffic]`
//! `calm_load`, `calm_below`, `burst_apps`, `burst_factor`, `burst_every`, `burst_length`.
//! `model = "lap"` has `[processors]` `count`, `policy` ("lap", "fcfs", "t-opt"), `visible`, and
//! `[traffic]` `packets`, `applications`, `shares`; its run length is the stream's, so
//! `run.duration` does not apply.

use crate::engine::{RunLimits, StopReason};
use crate::models::predictive::efq_lap::{self, Bursts, Mode, SwitchParams};
use crate::models::predictive::lap::{self, LapParams, Mix};
use crate::results::RunResult;
use crate::scenario::{
    show, MemoryEstimate, ModelError, ModelSpec, Problem, Progress, Reader, Scenario, ScenarioModel,
};
use crate::units::fmt_size;
use npqos_core::sched::estimate::TABLE1;
use npqos_core::sched::fq::Discipline;
use npqos_core::sched::lap::Policy;
use npqos_core::{Duration, Instant};
use serde_json::json;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::{apps_2ghz, paper_flows, FlowSpec, FqParams};

/// Application names as `flows[].app` takes them (Table 1 order).
pub fn app_names() -> Vec<&'static str> {
    TABLE1.iter().map(|a| a.name).collect()
}

/// One `[[flows]]` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowEntry {
    pub name: String,
    pub spec: FlowSpec,
}

/// The `fq` part of a scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct FqSpec {
    pub processors: u32,
    pub discipline: Discipline,
    pub load: f64,
    pub flows: Vec<FlowEntry>,
}

/// The `lap` part of a scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct LapSpec {
    pub processors: u32,
    pub policy: Policy,
    /// Packets visible to the scheduler; `None` (T-Opt) the whole stream.
    pub visible: Option<usize>,
    pub packets: usize,
    pub applications: usize,
    /// Processing shares per application; `None`: equal bandwidth.
    pub shares: Option<Vec<f64>>,
}

/// The `efq-lap` part of a scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct SwitchSpec {
    pub processors: u32,
    pub mode: Mode,
    pub calm_load: f64,
    pub calm_below: Duration,
    pub bursts: Bursts,
    pub flows: Vec<FlowEntry>,
}

/// Reads `[processors]`, `[traffic]` and `[[flows]]` of `model = "fq"`.
pub(crate) fn read_fq(root: &toml::Table, probs: &mut Vec<Problem>) -> FqSpec {
    let mut p = Reader::new(root, "processors", probs);
    let processors = p.int("count", 1, 1, 1 << 16, probs) as u32;
    let discipline = p.named("discipline", Discipline::Efq, probs);
    p.finish(probs);
    let mut t = Reader::new(root, "traffic", probs);
    let load = t.float("load", 1.0, probs, |v| v > 0.0 && v <= 100.0, "greater than 0 and at most 100");
    t.finish(probs);
    let flows = read_flows(root, probs);
    FqSpec { processors, discipline, load, flows }
}

/// Reads `[[flows]]` (default: the paper's 32), checking names and the sum of the shares.
fn read_flows(root: &toml::Table, probs: &mut Vec<Problem>) -> Vec<FlowEntry> {
    let names = app_names();
    let flows: Vec<FlowEntry> = match root.get("flows") {
        None => paper_flows()
            .into_iter()
            .map(|f| FlowEntry { name: format!("{}-{}", names[f.app], f.len), spec: f })
            .collect(),
        Some(toml::Value::Array(a)) if !a.is_empty() => a
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let prefix = format!("flows[{i}]");
                let Some(tb) = v.as_table() else {
                    probs.push(Problem {
                        key: prefix,
                        value: Some(show(v)),
                        message: "expected a table ([[flows]])".into(),
                    });
                    return FlowEntry { name: String::new(), spec: FlowSpec { app: 0, len: 64, share: 0.0 } };
                };
                let mut r = Reader::from_table(tb, prefix.clone());
                let app = r.choice("app", "ip-forwarding", &names, probs);
                let app = names.iter().position(|n| *n == app).unwrap_or(0);
                let len = r.size("size", 64, probs);
                if !(1..=65_535).contains(&len) {
                    probs.push(Problem {
                        key: format!("{prefix}.size"),
                        value: Some(format!("\"{len}B\"")),
                        message: "expected a packet size from 1B to 65535B".into(),
                    });
                }
                let len = len.clamp(1, 65_535) as u32;
                let share = r.float("share", 0.0, probs, |v| (1e-9..=1.0).contains(&v), "from 1e-9 to 1");
                if !r.present("share") {
                    probs.push(Problem {
                        key: format!("{prefix}.share"),
                        value: None,
                        message: "required: the flow's reserved fraction of all processors".into(),
                    });
                }
                let name = r.string("name", &format!("{}-{len}", names[app]), probs);
                check_name(&name, &format!("{prefix}.name"), probs);
                r.finish(probs);
                FlowEntry { name, spec: FlowSpec { app, len, share } }
            })
            .collect(),
        Some(v) => {
            probs.push(Problem {
                key: "flows".into(),
                value: Some(show(v)),
                message: "expected one or more [[flows]] tables".into(),
            });
            Vec::new()
        }
    };
    let sum: f64 = flows.iter().map(|f| f.spec.share).sum();
    if sum > 1.0 + 1e-9 {
        probs.push(Problem {
            key: "flows.share".into(),
            value: Some(sum.to_string()),
            message: "expected the reserved shares to sum to at most 1".into(),
        });
    }
    for (i, f) in flows.iter().enumerate() {
        if flows[..i].iter().any(|g| g.name == f.name) {
            probs.push(Problem {
                key: format!("flows[{i}].name"),
                value: Some(format!("{:?}", f.name)),
                message: "expected a name no other flow has (give `name` to flows of one app and size)".into(),
            });
        }
    }
    flows
}

fn check_name(name: &str, key: &str, probs: &mut Vec<Problem>) {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        probs.push(Problem {
            key: key.into(),
            value: Some(format!("{name:?}")),
            message: "expected letters, digits, '-' or '_' (it names result columns)".into(),
        });
    }
}

/// Reads `[processors]` and `[traffic]` of `model = "lap"`.
pub(crate) fn read_lap(root: &toml::Table, probs: &mut Vec<Problem>) -> LapSpec {
    crate::scenario::no_run_length(root, "lap", "traffic.packets sets", probs);
    let mut p = Reader::new(root, "processors", probs);
    let processors = p.int("count", 16, 1, 1 << 16, probs) as u32;
    let policy = match p.choice("policy", "lap", &["lap", "fcfs", "t-opt"], probs).as_str() {
        "fcfs" => Policy::Fcfs,
        "t-opt" => Policy::TOpt,
        _ => Policy::Lap,
    };
    let visible = p.int("visible", 512, 1, 1 << 30, probs) as usize;
    if policy == Policy::TOpt && p.present("visible") {
        probs.push(Problem {
            key: "processors.visible".into(),
            value: None,
            message: "does not apply to policy = \"t-opt\" (it sees the whole stream)".into(),
        });
    }
    p.finish(probs);
    let mut t = Reader::new(root, "traffic", probs);
    let packets = t.int("packets", 100_000, 1, 1 << 31, probs) as usize;
    let applications = t.int("applications", 3, 1, 1 << 16, probs) as usize;
    let shares = t.floats("shares", probs, |v| v >= 0.0, "at least 0");
    if let Some(s) = &shares {
        if s.len() != applications || s.iter().sum::<f64>() <= 0.0 {
            probs.push(Problem {
                key: "traffic.shares".into(),
                value: Some(format!("{s:?}")),
                message: format!("expected one share per application ({applications}), not all 0"),
            });
        }
    }
    t.finish(probs);
    LapSpec { processors, policy, visible: (policy != Policy::TOpt).then_some(visible), packets, applications, shares }
}

/// Reads `[processors]`, `[traffic]` and `[[flows]]` of `model = "efq-lap"`.
pub(crate) fn read_switch(root: &toml::Table, probs: &mut Vec<Problem>) -> SwitchSpec {
    let mut p = Reader::new(root, "processors", probs);
    let processors = p.int("count", 4, 1, 1 << 16, probs) as u32;
    let mode = p.choice("mode", "efq+lap", &["efq", "efq-warm", "lap", "efq+lap"], probs);
    let hi = p.positive_duration("lap_above", Duration::from_millis(20), probs);
    let lo = p.positive_duration("efq_below", Duration::from_millis(10), probs);
    if mode != "efq+lap" {
        for k in ["lap_above", "efq_below"] {
            if p.present(k) {
                probs.push(Problem {
                    key: format!("processors.{k}"),
                    value: None,
                    message: "only applies with mode = \"efq+lap\"".into(),
                });
            }
        }
    } else if lo > hi {
        probs.push(Problem {
            key: "processors.efq_below".into(),
            value: Some(format!("\"{lo}\"")),
            message: format!("expected at most processors.lap_above ({hi})"),
        });
    }
    p.finish(probs);
    let mode = match mode.as_str() {
        "efq" => Mode::Efq,
        "efq-warm" => Mode::EfqWarm,
        "lap" => Mode::Lap,
        _ => Mode::Combined { hi_ns: hi.as_nanos() as f64, lo_ns: lo.as_nanos() as f64 },
    };
    let names = app_names();
    let mut t = Reader::new(root, "traffic", probs);
    let calm_load = t.float("calm_load", 0.5, probs, |v| v > 0.0 && v <= 100.0, "greater than 0 and at most 100");
    let calm_below = t.positive_duration("calm_below", Duration::from_millis(10), probs);
    let apps = t.choices("burst_apps", &["compression"], &names, probs);
    let factor = t.float("burst_factor", 3.0, probs, |v| v > 0.0 && v <= 1000.0, "greater than 0 and at most 1000");
    let every = t.positive_duration("burst_every", Duration::from_millis(1500), probs);
    let len = t.duration("burst_length", Duration::from_millis(200), probs);
    if len > every {
        probs.push(Problem {
            key: "traffic.burst_length".into(),
            value: Some(format!("\"{len}\"")),
            message: format!("expected at most traffic.burst_every ({every})"),
        });
    }
    t.finish(probs);
    let bursts = Bursts {
        apps: apps.iter().filter_map(|a| names.iter().position(|n| n == a)).collect(),
        factor,
        every_ns: every.as_nanos().max(1),
        len_ns: len.as_nanos().min(every.as_nanos()),
    };
    let flows = read_flows(root, probs);
    SwitchSpec { processors, mode, calm_load, calm_below, bursts, flows }
}

fn flows_toml(flows: &[FlowEntry]) -> toml::Value {
    let names = app_names();
    toml::Value::Array(
        flows
            .iter()
            .map(|f| {
                let mut x = toml::Table::new();
                x.insert("name".into(), f.name.clone().into());
                x.insert("app".into(), names[f.spec.app].into());
                x.insert("size".into(), fmt_size(f.spec.len as u64).into());
                x.insert("share".into(), f.spec.share.into());
                x.into()
            })
            .collect(),
    )
}

fn table(pairs: Vec<(&str, toml::Value)>) -> toml::Value {
    toml::Value::Table(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

impl FqSpec {
    pub(crate) fn to_toml(&self, root: &mut toml::Table) {
        root.insert(
            "processors".into(),
            table(vec![("count", (self.processors as i64).into()), ("discipline", self.discipline.label().into())]),
        );
        root.insert("traffic".into(), table(vec![("load", self.load.into())]));
        root.insert("flows".into(), flows_toml(&self.flows));
    }

    /// Packets offered in `duration` (every flow periodic at `load` times its share).
    pub fn packets(&self, duration: Duration) -> f64 {
        packets(&self.flows, self.processors, self.load, duration)
    }
}

fn packets(flows: &[FlowEntry], m: u32, load: f64, duration: Duration) -> f64 {
    let apps = apps_2ghz();
    flows
        .iter()
        .map(|f| {
            let te = apps[f.spec.app].estimate_us(f.spec.len) * 1e3;
            duration.as_nanos() as f64 * load * f.spec.share * m as f64 / te
        })
        .sum()
}

impl LapSpec {
    pub(crate) fn to_toml(&self, root: &mut toml::Table) {
        let mut p = vec![("count", (self.processors as i64).into()), ("policy", self.policy.label().into())];
        if let Some(v) = self.visible {
            p.push(("visible", (v as i64).into()));
        }
        root.insert("processors".into(), table(p));
        let mut t =
            vec![("packets", (self.packets as i64).into()), ("applications", (self.applications as i64).into())];
        if let Some(s) = &self.shares {
            t.push(("shares", toml::Value::Array(s.iter().map(|&x| x.into()).collect())));
        }
        root.insert("traffic".into(), table(t));
    }
}

impl SwitchSpec {
    pub(crate) fn to_toml(&self, root: &mut toml::Table) {
        let mut p = vec![("count", (self.processors as i64).into()), ("mode", self.mode.label().into())];
        if let Mode::Combined { hi_ns, lo_ns } = self.mode {
            p.push(("lap_above", Duration::from_nanos(hi_ns as u64).to_string().into()));
            p.push(("efq_below", Duration::from_nanos(lo_ns as u64).to_string().into()));
        }
        root.insert("processors".into(), table(p));
        let names = app_names();
        root.insert(
            "traffic".into(),
            table(vec![
                ("calm_load", self.calm_load.into()),
                ("calm_below", self.calm_below.to_string().into()),
                ("burst_apps", toml::Value::Array(self.bursts.apps.iter().map(|&a| names[a].into()).collect())),
                ("burst_factor", self.bursts.factor.into()),
                ("burst_every", Duration::from_nanos(self.bursts.every_ns).to_string().into()),
                ("burst_length", Duration::from_nanos(self.bursts.len_ns).to_string().into()),
            ]),
        );
        root.insert("flows".into(), flows_toml(&self.flows));
    }

    /// Upper estimate of the packets offered in `duration` (every flow at its burst rate).
    pub fn packets(&self, duration: Duration) -> f64 {
        packets(&self.flows, self.processors, self.calm_load.max(self.bursts.factor), duration)
    }
}

fn limits(sc: &Scenario) -> RunLimits {
    RunLimits { until: Instant::MAX, max_events: if sc.max_events == 0 { u64::MAX } else { sc.max_events } }
}

fn record(stop: StopReason) -> RunResult {
    RunResult {
        complete: matches!(stop, StopReason::Drained),
        stop_reason: format!("{stop:?}").to_lowercase(),
        ..Default::default()
    }
}

/// What `npqos model predictive` reports for one reserved flow.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FlowSizing {
    pub name: String,
    pub app: &'static str,
    pub size: u32,
    pub share: f64,
    /// t_e (eq 1) on the 2 GHz processor, and the largest error V and time A = t_e + V, ns.
    pub t_e_ns: f64,
    pub v_max_ns: f64,
    pub a_max_ns: f64,
    /// At `traffic.load` of its reservation: packets/s, input bit/s, and eq 4's P_j
    /// (processors' worth of processing), with the output bit/s (expansion gamma applied).
    pub packets_per_second: f64,
    pub bandwidth_bps: f64,
    pub processing: f64,
    pub out_bandwidth_bps: f64,
    /// Worst-case misordering against WF2Q+ (eqs 13 and 18 as we read them), ns.
    pub sfq_bound_ns: f64,
    pub efq_bound_ns: f64,
}

/// Eq 1 estimates, eq 4 reservations and the eq 13 / eq 18 bounds of an fq scenario's flows
/// (the sizing side of the predictive model, `npqos model predictive`). Every flow is offered
/// at `load` times its reservation on `processors` processors, as the simulation offers it.
pub fn fq_sizing(f: &FqSpec) -> Vec<FlowSizing> {
    use npqos_core::sched::admission::FlowRequest;
    let apps = apps_2ghz();
    let m = f.processors as f64;
    let t_e: Vec<f64> = f.flows.iter().map(|x| apps[x.spec.app].estimate_us(x.spec.len) * 1e3).collect();
    let v_max: Vec<f64> =
        f.flows.iter().zip(&t_e).map(|(x, te)| te * crate::models::predictive::VARIATION[x.spec.app]).collect();
    let a_max: Vec<f64> = t_e.iter().zip(&v_max).map(|(t, v)| t + v).collect();
    f.flows
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let pps = x.spec.share * m * f.load / (t_e[i] * 1e-9);
            let bandwidth_bps = pps * x.spec.len as f64 * 8.0;
            let req = FlowRequest { bandwidth_bps, mean_len: x.spec.len, app: apps[x.spec.app] };
            let (sfq, efq) = npqos_core::sched::fq::misordering_bounds(&a_max, &v_max, i, x.spec.share)
                .unwrap_or((f64::NAN, f64::NAN));
            FlowSizing {
                name: x.name.clone(),
                app: apps[x.spec.app].name,
                size: x.spec.len,
                share: x.spec.share,
                t_e_ns: t_e[i],
                v_max_ns: v_max[i],
                a_max_ns: a_max[i],
                packets_per_second: pps,
                bandwidth_bps,
                processing: req.processing(),
                out_bandwidth_bps: req.out_bandwidth_bps(),
                sfq_bound_ns: sfq,
                efq_bound_ns: efq,
            }
        })
        .collect()
}

/// `model = "fq"`: reserved flows under SFQ, WF2Q+ or EFQ.
pub struct FqScenario;
/// `model = "lap"`: a backlogged stream under LAP, FCFS or T-Opt.
pub struct LapScenario;
/// `model = "efq-lap"`: reserved flows, some bursting, under EFQ, LAP or the switch.
pub struct EfqLapScenario;

impl ScenarioModel for FqScenario {
    fn name(&self) -> &'static str {
        "fq"
    }
    fn description(&self) -> &'static str {
        "flows with reserved processing shares on m processors under SFQ, WF2Q+ or EFQ (predictive section 4; docs/predictive.md)"
    }
    fn tables(&self) -> &'static [&'static str] {
        &["model", "run", "processors", "traffic", "flows"]
    }
    fn read(&self, root: &toml::Table, _: &std::path::Path, probs: &mut Vec<Problem>) -> Box<dyn ModelSpec> {
        Box::new(read_fq(root, probs))
    }
}

impl ScenarioModel for LapScenario {
    fn name(&self) -> &'static str {
        "lap"
    }
    fn description(&self) -> &'static str {
        "a backlogged stream of applications on processors with one-application caches under LAP, FCFS or T-Opt (predictive section 5; docs/predictive.md)"
    }
    fn tables(&self) -> &'static [&'static str] {
        &["model", "run", "processors", "traffic"]
    }
    fn read(&self, root: &toml::Table, _: &std::path::Path, probs: &mut Vec<Problem>) -> Box<dyn ModelSpec> {
        Box::new(read_lap(root, probs))
    }
}

impl ScenarioModel for EfqLapScenario {
    fn name(&self) -> &'static str {
        "efq-lap"
    }
    fn description(&self) -> &'static str {
        "reserved flows on processors with caches, some bursting, under EFQ, EFQ preferring warm caches, LAP, or switching between them (predictive section 6; docs/predictive.md)"
    }
    fn tables(&self) -> &'static [&'static str] {
        &["model", "run", "processors", "traffic", "flows"]
    }
    fn read(&self, root: &toml::Table, _: &std::path::Path, probs: &mut Vec<Problem>) -> Box<dyn ModelSpec> {
        Box::new(read_switch(root, probs))
    }
}

impl ModelSpec for FqSpec {
    fn resolved(&self, root: &mut toml::Table) {
        self.to_toml(root)
    }
    // Per packet: its delay and flow (12 B); per flow and processor, their state.
    fn memory(&self, duration: Duration, _: Duration) -> MemoryEstimate {
        MemoryEstimate {
            bytes: (self.packets(duration) * 12.0) as u128
                + self.flows.len() as u128 * 256
                + self.processors as u128 * 64
                + (1 << 20),
            key: "run.duration",
            value: format!("\"{duration}\""),
            what: "12 B per packet offered",
            remedy: "shorten run.duration or lower traffic.load",
        }
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
        Ok(run_fq(sc, self, seed, interrupt, progress))
    }
}

impl ModelSpec for LapSpec {
    fn resolved(&self, root: &mut toml::Table) {
        self.to_toml(root)
    }
    // The stream (24 B a packet) and the scheduler's visible window (64 B a packet).
    fn memory(&self, _: Duration, _: Duration) -> MemoryEstimate {
        MemoryEstimate {
            bytes: self.packets as u128 * 24
                + self.visible.unwrap_or(self.packets).min(self.packets) as u128 * 64
                + (1 << 20),
            key: "traffic.packets",
            value: self.packets.to_string(),
            what: "24 B per packet of the stream",
            remedy: "lower traffic.packets",
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
        Ok(run_lap(sc, self, seed, interrupt, progress))
    }
}

impl ModelSpec for SwitchSpec {
    fn resolved(&self, root: &mut toml::Table) {
        self.to_toml(root)
    }
    // Per packet: its record and delay, and both queues' entries if all waited at once.
    fn memory(&self, duration: Duration, _: Duration) -> MemoryEstimate {
        MemoryEstimate {
            bytes: (self.packets(duration) * 160.0) as u128 + self.flows.len() as u128 * 256 + (1 << 20),
            key: "run.duration",
            value: format!("\"{duration}\""),
            what: "160 B per packet offered at the burst rate, if every packet waited at once",
            remedy: "shorten run.duration",
        }
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
        Ok(run_switch(sc, self, seed, interrupt, progress))
    }
}

/// Runs one replication of a `model = "fq"`, `"lap"` or `"efq-lap"` scenario with `seed`:
/// arrivals for `run.duration` (lap: the whole stream), then until every packet completed (or
/// the event budget, or Ctrl-C).
pub fn run_scenario(
    sc: &Scenario,
    seed: u64,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> RunResult {
    if let Some(f) = sc.spec_as::<FqSpec>() {
        run_fq(sc, f, seed, interrupt, progress)
    } else if let Some(l) = sc.spec_as::<LapSpec>() {
        run_lap(sc, l, seed, interrupt, progress)
    } else if let Some(s) = sc.spec_as::<SwitchSpec>() {
        run_switch(sc, s, seed, interrupt, progress)
    } else {
        panic!("not a predictive scenario: model = {:?}", sc.model())
    }
}

fn run_fq(
    sc: &Scenario,
    f: &FqSpec,
    seed: u64,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> RunResult {
    let p = FqParams {
        discipline: f.discipline,
        processors: f.processors,
        flows: f.flows.iter().map(|x| x.spec).collect(),
        load: f.load,
        duration_ns: sc.duration.as_nanos(),
        record: Vec::new(),
        seed,
    };
    let (r, stop) = super::run_limited(&p, limits(sc), interrupt, progress);
    let mut run = record(stop);
    run.params.insert("discipline".into(), json!(f.discipline.label()));
    run.params.insert("processors".into(), json!(f.processors));
    run.events = r.events;
    let done: Vec<f64> = r.delays.iter().copied().filter(|d| d.is_finite()).collect();
    run.scalar("packets", r.packets as f64, "packets");
    run.scalar("offered", r.delays.len() as f64, "packets");
    run.scalar("delay_mean", done.iter().sum::<f64>() / done.len().max(1) as f64, "ns");
    run.scalar("delay_max", done.iter().fold(0.0, |a: f64, &b| a.max(b)), "ns");
    run.scalar("utilization", r.busy_ns / (f.processors as f64 * sc.duration.as_nanos() as f64), "1");
    for (e, st) in f.flows.iter().zip(&r.flows) {
        run.scalar(&format!("packets.{}", e.name), st.packets as f64, "packets");
        run.scalar(&format!("delay_mean.{}", e.name), st.mean_delay_ns(), "ns");
        run.scalar(&format!("delay_max.{}", e.name), st.max_delay_ns, "ns");
        run.scalar(&format!("interarrival.{}", e.name), st.interarrival_ns, "ns");
    }
    run
}

fn run_lap(
    sc: &Scenario,
    l: &LapSpec,
    seed: u64,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> RunResult {
    let mix = match &l.shares {
        None => Mix::EqualBandwidth,
        Some(s) => Mix::Processing(vec![(0, s.clone())]),
    };
    let stream = lap::stream(l.applications, l.packets, &mix, seed);
    let p = LapParams {
        policy: l.policy,
        processors: l.processors,
        apps: l.applications,
        visible: l.visible,
        record: 0..0,
    };
    // Progress against the stream's processing time spread over the processors (the bar's
    // scale is run.duration).
    let work_ns: f64 = stream.iter().map(|x| x.warm_ns).sum::<f64>() / l.processors as f64;
    let span = sc.duration.as_nanos() as f64;
    let mut report = |t: Instant| {
        progress(Instant::from_nanos((t.as_nanos() as f64 / work_ns.max(1.0)).min(1.0).mul_add(span, 0.0) as u64))
    };
    let (r, stop) = lap::run_limited(&p, &stream, limits(sc), interrupt, &mut report);
    let mut run = record(stop);
    run.params.insert("policy".into(), json!(l.policy.label()));
    run.params.insert("processors".into(), json!(l.processors));
    run.sim_time_ns = r.makespan_ns as u64;
    run.events = r.events;
    run.scalar("packets", r.packets as f64, "packets");
    run.scalar("throughput", r.throughput_gbps(), "Gbps");
    run.scalar("makespan", r.makespan_ns, "ns");
    run.scalar("cold_fraction", r.cold_fraction(), "1");
    run.scalar("penalty_fraction", r.penalty_ns / (r.makespan_ns.max(1.0) * l.processors as f64), "1");
    run.scalar("order_std", r.order_std, "packets");
    run.scalar("order_max", r.order_max as f64, "packets");
    run
}

fn run_switch(
    sc: &Scenario,
    s: &SwitchSpec,
    seed: u64,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> RunResult {
    let p = SwitchParams {
        mode: s.mode,
        processors: s.processors,
        flows: s.flows.iter().map(|x| x.spec).collect(),
        calm_load: s.calm_load,
        bursts: s.bursts.clone(),
        duration_ns: sc.duration.as_nanos(),
        calm_below_ns: s.calm_below.as_nanos() as f64,
        seed,
    };
    let (r, stop) = efq_lap::run_limited(&p, limits(sc), interrupt, progress);
    let mut run = record(stop);
    run.params.insert("mode".into(), json!(s.mode.label()));
    run.params.insert("processors".into(), json!(s.processors));
    run.sim_time_ns = r.end_ns;
    run.events = r.events;
    run.scalar("packets", r.packets as f64, "packets");
    for (name, d) in [
        ("conforming_calm", &r.conforming_calm),
        ("conforming_overloaded", &r.conforming_overloaded),
        ("bursting", &r.bursting),
    ] {
        run.scalar(&format!("packets.{name}"), d.count() as f64, "packets");
        run.scalar(&format!("delay_p99.{name}"), d.quantile(0.99), "ns");
        run.scalar(&format!("delay_max.{name}"), d.max(), "ns");
    }
    run.scalar("cold_fraction", r.cold_fraction(), "1");
    run.scalar("overloaded_time", r.overloaded_ns, "ns");
    run.scalar("overloaded_goodput", r.overloaded_goodput(), "processors");
    run.scalar("max_backlog", r.max_backlog_ns, "ns");
    run.scalar("switches_to_lap", r.switches as f64, "1");
    run.scalar("time_in_lap", r.lap_ns, "ns");
    run
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::testing::{assert_names, assert_round_trips, example, parse};

    /// The minimal scenario of each model is its paper's setting; every example and resolved
    /// scenario parses back to itself.
    #[test]
    fn defaults_and_round_trip() {
        let sc = parse("model = \"fq\"\n").unwrap();
        let f = sc.spec_as::<FqSpec>().expect("fq");
        assert_eq!((f.flows.len(), f.processors, f.discipline), (32, 1, Discipline::Efq));
        assert_eq!(f.flows[31].name, "fec-1500");
        let sc = parse("model = \"lap\"\n").unwrap();
        let l = sc.spec_as::<LapSpec>().expect("lap");
        assert_eq!((l.processors, l.visible, l.applications), (16, Some(512), 3));
        let sc = parse("model = \"efq-lap\"\n").unwrap();
        let e = sc.spec_as::<SwitchSpec>().expect("efq-lap");
        assert_eq!((e.processors, e.bursts.apps.clone(), e.mode.label()), (4, vec![2], "efq+lap"));
        let mut texts: Vec<String> =
            ["fq-small", "fq-paper", "lap-small", "lap-paper", "efq-lap-small", "efq-lap-paper"].map(example).into();
        texts.push(
            "model = \"lap\"\n[processors]\npolicy = \"t-opt\"\n[traffic]\napplications = 2\nshares = [0.8, 0.2]\n"
                .into(),
        );
        texts.push("model = \"efq-lap\"\n[processors]\nmode = \"efq-warm\"\n[traffic]\nburst_apps = []\n".into());
        assert_round_trips(texts);
    }

    /// Every problem is reported with its key path.
    #[test]
    fn problems_name_their_keys() {
        assert_names(
            "model = \"fq\"\n[processors]\ncount = 0\ndiscipline = \"drr\"\n[traffic]\nload = 0\n[[flows]]\napp = \"dpi\"\nsize = \"0B\"\nshare = 0.7\n[[flows]]\nname = \"a b\"\nshare = 0.7\n[[flows]]\nsize = \"64B\"\n",
            &[
                "processors.count",
                "processors.discipline",
                "traffic.load",
                "flows[0].app",
                "flows[0].size",
                "flows[1].name",
                "flows[2].share",
                "flows.share",
            ],
        );
        assert_names(
            "model = \"lap\"\n[run]\nduration = \"1s\"\n[processors]\npolicy = \"t-opt\"\nvisible = 8\n[traffic]\nshares = [1.0]\n",
            &["run.duration", "processors.visible", "traffic.shares"],
        );
        assert_names(
            "model = \"efq-lap\"\n[processors]\nmode = \"lap\"\nlap_above = \"1ms\"\n[traffic]\nburst_apps = [\"dpi\"]\nburst_length = \"2s\"\n",
            &["processors.lap_above", "traffic.burst_apps", "traffic.burst_length"],
        );
        assert_names(
            "model = \"fq\"\n[run]\nduration = \"100000s\"\n[processors]\ncount = 64\n",
            &["run.duration", "memory_budget"],
        );
    }

    /// The efq-lap example at its defaults is the reproduction's `efq+lap` point: the scenario
    /// path and the experiment path build the same run.
    #[test]
    fn efq_lap_example_is_the_reproduction_point() {
        let sc = parse(&example("efq-lap-small")).unwrap();
        let r = run_scenario(&sc, 1, None, &mut |_| {});
        let out = crate::experiments::quick_output("predictive-switch");
        let exp = out.runs.iter().find(|x| x.label == "efq+lap").expect("efq+lap run");
        assert_eq!(r.get("packets"), exp.get("packets"));
        assert_eq!(r.get("delay_p99.conforming_calm").map(|x| x * 1e-6), exp.get("conforming_calm_p99_ms"));
        assert_eq!(r.get("switches_to_lap"), exp.get("switches"));
    }
}
