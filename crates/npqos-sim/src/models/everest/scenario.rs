//! `model = "everest"` scenarios: your services on `N_p` processors under an allocation policy
//! (docs/everest.md, "Scenario files"). The tables:
//!
//! ```toml
//! model = "everest"
//! [run]                            # seed, duration (arrivals stop), replications, ...
//! sample_interval = "100us"        # queue lengths sampled this often (default duration / 100)
//! [processors]
//! count = 16                       # N_p
//! policy = "everest"               # static, quantum, cohort-e, everest, everest-ld, everest-ae,
//!                                  # everest-adaptive
//! t_sw = "2ms"                     # context-switch time
//! delta = "2ms"                    # window of R_arr(Delta) (default t_sw)
//! quantum = "10ms"                 # with policy = "quantum"
//! [traffic]                        # synthetic: per service, ON/OFF sources with Pareto periods
//! packets_per_second = 707547.0    # all services together (default UNC-2.5's mean rate)
//! sources = 16                     # ON/OFF sources per service
//! on_mean = "50ms"
//! off_mean = "100ms"
//! pareto_shape = 1.5
//! # or a trace: source = "trace", files = ["dir-or.pcap"], flow_multiply = 1 (overlaid copies,
//! # each rotated in time, flows kept apart), time_scale = 1.0, max_gap = "1s", lenient = true,
//! # classify = "natpt" (the six NAT-PT services by protocol and direction; the default with the
//! # default services), "share" (each flow to a service by a hash weighted by the shares) or
//! # "rules" (each flow to the first service whose match keys it meets; inside = ["10.0.0.0/8"]
//! # says what inbound and outbound mean)
//! [[services]]                     # default: everest Table 2's six NAT-PT services
//! name = "v4-v6-tcp"               # letters, digits, '-', '_'
//! t_pkt = "18.22us"                # processing time per packet
//! tolerance = "2ms"                # D: delay tolerance
//! share = 0.425                    # fraction of the packets (the shares must sum to 1)
//! guarantee = 0.3                  # G^i (eq 1, 7); default for every service: eq 7 from N_max
//! # with classify = "rules" (share then optional): protocols = ["tcp"], ports = [80, "8000-8099"],
//! # src_ports, dst_ports, direction = "inbound" | "outbound" | "any"; the last service has no
//! # match keys and takes every flow no earlier service matched
//! ```

use super::{SyntheticTraffic, NATPT_SERVICES, UNC25_PPS};
use crate::results::RunResult;
use crate::scenario::classify::{
    has_criteria, read_prefixes, read_rule, unique_service_names, write_prefixes, write_rule, RULE_KEYS,
};
use crate::scenario::{
    show, MemoryEstimate, ModelError, ModelSpec, Problem, Progress, Reader, Scenario, ScenarioModel,
};
use crate::trace::corpus::Corpus;
use npqos_core::alloc::{Policy, PolicyKind};
use npqos_core::classify::{Classifier, Direction, Prefix, Rule};
use npqos_core::id::ServiceId;
use npqos_core::Duration;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The everest part of a scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct EverestSpec {
    pub processors: u32,
    pub policy: Policy,
    pub t_sw: Duration,
    pub delta: Duration,
    pub traffic: TrafficSpec,
    pub services: Vec<ServiceSpec>,
}

/// A trace as an everest scenario's traffic.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceTraffic {
    pub files: Vec<PathBuf>,
    pub flow_multiply: u32,
    pub time_scale: f64,
    pub max_gap: Duration,
    pub lenient: bool,
    /// How a flow gets its service.
    pub classify: Classify,
    /// Inside prefixes: what inbound and outbound mean for `direction` rules.
    pub inside: Vec<Prefix>,
}

/// `[traffic]` of an everest scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct TrafficSpec {
    pub packets_per_second: f64,
    pub sources: u32,
    pub on_mean: Duration,
    pub off_mean: Duration,
    pub shape: f64,
    /// `Some`: the arrivals are a trace's (the synthetic keys above do not apply).
    pub trace: Option<TraceTraffic>,
}

/// How an everest trace's flows get their services.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Classify {
    /// The six NAT-PT services by protocol and direction (everest Table 2).
    Natpt,
    /// A hash of the 5-tuple weighted by the services' shares.
    Share,
    /// The first service whose match keys the flow meets (`npqos_core::classify`).
    Rules,
}

impl Classify {
    fn name(self) -> &'static str {
        match self {
            Classify::Natpt => "natpt",
            Classify::Share => "share",
            Classify::Rules => "rules",
        }
    }
}

/// One `[[services]]` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceSpec {
    pub name: String,
    pub t_pkt: Duration,
    pub tolerance: Duration,
    pub share: f64,
    /// `None`: eq 7 from N_max on the traffic (all services or none give one).
    pub guarantee: Option<f64>,
    /// The match keys (with `classify = "rules"`; empty otherwise).
    pub rule: Rule,
}

/// Names of the default services (Table 2's six NAT-PT services).
const NATPT_NAMES: [&str; 6] = ["v4-v6-tcp", "v4-v6-udp", "v4-v6-icmp", "v6-v4-tcp", "v6-v4-udp", "v6-v4-icmp"];

/// Reads `[processors]`, `[traffic]` and `[[services]]`, recording every problem.
pub(crate) fn read(root: &toml::Table, base_dir: &Path, probs: &mut Vec<Problem>) -> EverestSpec {
    let mut p = Reader::new(root, "processors", probs);
    let processors = p.int("count", 16, 1, 1 << 20, probs) as u32;
    let policy = p.named("policy", PolicyKind::Everest, probs);
    let t_sw = p.duration("t_sw", Duration::from_millis(2), probs);
    let delta = p.duration("delta", t_sw, probs);
    if delta.is_zero() {
        probs.push(Problem {
            key: "processors.delta".into(),
            value: Some(format!("\"{delta}\"")),
            message: "expected a positive duration (it defaults to t_sw)".into(),
        });
    }
    let quantum = p.duration("quantum", Duration::from_millis(10), probs);
    if policy != PolicyKind::Quantum && p.present("quantum") {
        probs.push(Problem {
            key: "processors.quantum".into(),
            value: None,
            message: "only applies with policy = \"quantum\"".into(),
        });
    }
    if policy == PolicyKind::Quantum && quantum.is_zero() {
        probs.push(Problem {
            key: "processors.quantum".into(),
            value: Some(format!("\"{quantum}\"")),
            message: "expected a positive duration".into(),
        });
    }
    p.finish(probs);
    let policy = policy.with_quantum(quantum);

    let mut t = Reader::new(root, "traffic", probs);
    let source = t.choice("source", "synthetic", &["synthetic", "trace"], probs);
    const SYNTHETIC: [&str; 5] = ["packets_per_second", "sources", "on_mean", "off_mean", "pareto_shape"];
    const TRACE: [&str; 7] = ["files", "flow_multiply", "time_scale", "max_gap", "lenient", "classify", "inside"];
    let other: &[&str] = if source == "trace" { &SYNTHETIC } else { &TRACE };
    t.not_applicable(other.iter().copied(), &format!("source = {source:?}"), probs);
    let trace = (source == "trace").then(|| {
        let default_classify = if root.contains_key("services") { "share" } else { "natpt" };
        TraceTraffic {
            files: t.files("files", base_dir, probs),
            flow_multiply: t.int("flow_multiply", 1, 1, 65_535, probs) as u32,
            time_scale: t.float("time_scale", 1.0, probs, |v| v > 0.0 && v <= 1e6, "greater than 0"),
            max_gap: t.positive_duration("max_gap", crate::scenario::DEFAULT_MAX_GAP, probs),
            lenient: t.boolean("lenient", true, probs),
            classify: match t.choice("classify", default_classify, &["natpt", "share", "rules"], probs).as_str() {
                "natpt" => Classify::Natpt,
                "share" => Classify::Share,
                _ => Classify::Rules,
            },
            inside: read_prefixes(&mut t, "inside", probs),
        }
    });
    let packets_per_second =
        t.float("packets_per_second", UNC25_PPS, probs, |v| v > 0.0 && v <= 1e10, "greater than 0 and at most 1e10");
    let sources = t.int("sources", 16, 1, 100_000, probs) as u32;
    let on_mean = t.positive_duration("on_mean", Duration::from_millis(50), probs);
    let off_mean = t.positive_duration("off_mean", Duration::from_millis(100), probs);
    let shape = t.float("pareto_shape", 1.5, probs, |v| v > 1.0, "greater than 1 (a finite mean)");
    t.finish(probs);
    let traffic = TrafficSpec { packets_per_second, sources, on_mean, off_mean, shape, trace };
    let rules = traffic.trace.as_ref().is_some_and(|t| t.classify == Classify::Rules);

    let services = match root.get("services") {
        None => {
            let mix = SyntheticTraffic::unc25_like(Duration::from_secs(1), 1).mix;
            NATPT_SERVICES
                .iter()
                .zip(NATPT_NAMES)
                .zip(mix)
                .map(|((&(_, t), name), share)| ServiceSpec {
                    name: name.into(),
                    t_pkt: Duration::from_nanos(t),
                    tolerance: Duration::from_millis(2),
                    share,
                    guarantee: None,
                    rule: Rule::default(),
                })
                .collect()
        }
        Some(toml::Value::Array(a)) if !a.is_empty() => {
            a.iter().enumerate().map(|(i, v)| read_service(i, v, rules, probs)).collect()
        }
        Some(v) => {
            probs.push(Problem {
                key: "services".into(),
                value: Some(show(v)),
                message: "expected one or more [[services]] tables".into(),
            });
            Vec::new()
        }
    };
    check_services(&services, rules, probs);
    if rules {
        check_rules(&services, traffic.trace.as_ref().map_or(&[][..], |t| &t.inside), probs);
    }
    if traffic.trace.as_ref().is_some_and(|t| t.classify == Classify::Natpt) && services.len() != NATPT_SERVICES.len() {
        probs.push(Problem {
            key: "traffic.classify".into(),
            value: Some("\"natpt\"".into()),
            message: format!(
                "classifies into the {} NAT-PT services in everest Table 2's order; there are {} [[services]] (use classify = \"share\")",
                NATPT_SERVICES.len(),
                services.len()
            ),
        });
    }
    EverestSpec { processors, policy, t_sw, delta, traffic, services }
}

/// With `classify = "rules"`: only the last service may match every flow (one before it would
/// leave the later ones nothing), the last must (so every flow has a service), and a direction
/// rule needs inside prefixes.
fn check_rules(s: &[ServiceSpec], inside: &[Prefix], probs: &mut Vec<Problem>) {
    let n = s.len();
    for (i, x) in s.iter().enumerate() {
        let catch_all = !has_criteria(&x.rule);
        if catch_all && i + 1 < n {
            probs.push(Problem {
                key: format!("services[{i}]"),
                value: None,
                message: format!("has no match keys, so it takes every flow and services[{}..] get none (only the last service may have none)", i + 1),
            });
        }
        if !catch_all && i + 1 == n {
            probs.push(Problem {
                key: format!("services[{i}]"),
                value: None,
                message: "the last service must have no match keys: it takes every flow no earlier service matched"
                    .into(),
            });
        }
        if x.rule.direction != Direction::Any && inside.is_empty() {
            probs.push(Problem {
                key: format!("services[{i}].direction"),
                value: None,
                message: "needs traffic.inside (the prefixes that say what inbound and outbound mean)".into(),
            });
        }
    }
}

fn read_service(i: usize, v: &toml::Value, rules: bool, probs: &mut Vec<Problem>) -> ServiceSpec {
    let prefix = format!("services[{i}]");
    let Some(tb) = v.as_table() else {
        probs.push(Problem { key: prefix, value: Some(show(v)), message: "expected a table ([[services]])".into() });
        return ServiceSpec {
            name: String::new(),
            t_pkt: Duration::ZERO,
            tolerance: Duration::ZERO,
            share: 0.0,
            guarantee: None,
            rule: Rule::default(),
        };
    };
    let mut r = Reader::from_table(tb, prefix.clone());
    let name = r.string("name", &format!("s{i}"), probs);
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        probs.push(Problem {
            key: format!("{prefix}.name"),
            value: Some(format!("{name:?}")),
            message: "expected letters, digits, '-' or '_' (it names result columns)".into(),
        });
    }
    let t_pkt = r.positive_duration("t_pkt", Duration::from_micros(10), probs);
    let tolerance = r.duration("tolerance", Duration::from_millis(2), probs);
    let share = r.float("share", 0.0, probs, |v| (0.0..=1.0).contains(&v), "in 0..1");
    if !r.present("share") && !rules {
        probs.push(Problem {
            key: format!("{prefix}.share"),
            value: None,
            message: "required: the fraction of the packets of this service".into(),
        });
    }
    let guarantee =
        r.present("guarantee").then(|| r.float("guarantee", 0.0, probs, |v| (0.0..=1.0).contains(&v), "in 0..1"));
    let rule = if rules {
        read_rule(&mut r, ServiceId::from_index(i), probs)
    } else {
        let given: Vec<&str> = RULE_KEYS.into_iter().filter(|k| r.present(k)).collect();
        for k in given {
            r.consume(k);
            probs.push(Problem {
                key: format!("{prefix}.{k}"),
                value: None,
                message: "a match key: only applies with traffic.classify = \"rules\"".into(),
            });
        }
        Rule::default()
    };
    r.finish(probs);
    ServiceSpec { name, t_pkt, tolerance, share, guarantee, rule }
}

fn check_services(s: &[ServiceSpec], rules: bool, probs: &mut Vec<Problem>) {
    if s.is_empty() {
        return;
    }
    let sum: f64 = s.iter().map(|x| x.share).sum();
    // With rules the shares are optional and unused (the trace decides).
    let given = !rules || s.iter().any(|x| x.share > 0.0);
    if given && (sum - 1.0).abs() > 1e-6 {
        probs.push(Problem {
            key: "services.share".into(),
            value: Some(format!("{sum}")),
            message: "expected the shares of all services to sum to 1".into(),
        });
    }
    let given = s.iter().filter(|x| x.guarantee.is_some()).count();
    if given != 0 && given != s.len() {
        probs.push(Problem {
            key: "services.guarantee".into(),
            value: None,
            message: "give a guarantee for every service or for none (then eq 7 computes them)".into(),
        });
    }
    let g: f64 = s.iter().filter_map(|x| x.guarantee).sum();
    if g > 1.0 + 1e-9 {
        probs.push(Problem {
            key: "services.guarantee".into(),
            value: Some(format!("{g}")),
            message: "expected the guarantees to sum to at most 1".into(),
        });
    }
    unique_service_names(s.iter().map(|x| x.name.as_str()), probs);
}

impl EverestSpec {
    /// The synthetic traffic for `duration` of arrivals.
    pub fn synthetic(&self, duration: Duration) -> SyntheticTraffic {
        SyntheticTraffic {
            rate_pps: self.traffic.packets_per_second,
            mix: self.services.iter().map(|s| s.share).collect(),
            t_pkt_ns: self.services.iter().map(|s| s.t_pkt.as_nanos()).collect(),
            sources_per_service: self.traffic.sources,
            on_mean: self.traffic.on_mean,
            off_mean: self.traffic.off_mean,
            shape: self.traffic.shape,
            duration,
        }
    }

    /// The allocator's services with guarantees `g`.
    pub fn alloc_services(&self, g: &[f64]) -> Vec<npqos_core::alloc::ServiceSpec> {
        self.services
            .iter()
            .zip(g)
            .map(|(s, &g)| npqos_core::alloc::ServiceSpec {
                name: s.name.clone(),
                t_pkt: s.t_pkt,
                tolerance: s.tolerance,
                guarantee: g,
            })
            .collect()
    }

    /// Upper estimate of one replication's memory: every packet of `duration` waiting at once
    /// (8 B each), plus per-source and per-processor state.
    pub fn estimate_memory(&self, duration: Duration) -> u64 {
        // A trace: its packets in memory (about its files' size) and, at worst, all waiting.
        if let Some(tr) = &self.traffic.trace {
            let bytes: u64 = tr.files.iter().map(|f| std::fs::metadata(f).map_or(0, |m| m.len())).sum();
            return bytes.saturating_mul(2 + tr.flow_multiply as u64) + self.processors as u64 * 64 + (1 << 20);
        }
        let packets =
            self.traffic.packets_per_second * (duration.as_secs_f64() + super::SYNTHETIC_WARMUP.as_secs_f64());
        let sources = self.traffic.sources as f64 * self.services.len() as f64 * 128.0;
        (packets * 8.0 + sources + self.processors as f64 * 64.0 + (1 << 20) as f64).min(u64::MAX as f64) as u64
    }

    /// The resolved tables (every default filled in).
    pub fn to_toml(&self, root: &mut toml::Table) {
        let mut p = toml::Table::new();
        p.insert("count".into(), (self.processors as i64).into());
        p.insert("policy".into(), self.policy.name().into());
        p.insert("t_sw".into(), self.t_sw.to_string().into());
        p.insert("delta".into(), self.delta.to_string().into());
        if let Policy::Quantum { quantum } = self.policy {
            p.insert("quantum".into(), quantum.to_string().into());
        }
        root.insert("processors".into(), p.into());
        let mut t = toml::Table::new();
        match &self.traffic.trace {
            None => {
                t.insert("source".into(), "synthetic".into());
                t.insert("packets_per_second".into(), self.traffic.packets_per_second.into());
                t.insert("sources".into(), (self.traffic.sources as i64).into());
                t.insert("on_mean".into(), self.traffic.on_mean.to_string().into());
                t.insert("off_mean".into(), self.traffic.off_mean.to_string().into());
                t.insert("pareto_shape".into(), self.traffic.shape.into());
            }
            Some(tr) => {
                t.insert("source".into(), "trace".into());
                t.insert(
                    "files".into(),
                    toml::Value::Array(tr.files.iter().map(|f| f.display().to_string().into()).collect()),
                );
                t.insert("flow_multiply".into(), i64::from(tr.flow_multiply).into());
                t.insert("time_scale".into(), tr.time_scale.into());
                t.insert("max_gap".into(), tr.max_gap.to_string().into());
                t.insert("lenient".into(), tr.lenient.into());
                t.insert("classify".into(), tr.classify.name().into());
                if !tr.inside.is_empty() {
                    t.insert("inside".into(), write_prefixes(&tr.inside));
                }
            }
        }
        root.insert("traffic".into(), t.into());
        let s: Vec<toml::Value> = self
            .services
            .iter()
            .map(|s| {
                let mut x = toml::Table::new();
                x.insert("name".into(), s.name.clone().into());
                x.insert("t_pkt".into(), s.t_pkt.to_string().into());
                x.insert("tolerance".into(), s.tolerance.to_string().into());
                x.insert("share".into(), s.share.into());
                if let Some(g) = s.guarantee {
                    x.insert("guarantee".into(), g.into());
                }
                write_rule(&s.rule, &mut x);
                x.into()
            })
            .collect();
        root.insert("services".into(), toml::Value::Array(s));
    }
}

/// The arrivals of a scenario: its synthetic sources for `duration`, or its trace (every
/// capture from time 0 with gaps capped, `flow_multiply` rotated copies, sped up `time_scale`
/// times) up to `duration`, classified into the services. Also the packets expected, for
/// progress.
pub fn traffic(e: &EverestSpec, duration: Duration) -> Result<(super::Traffic, u64), super::EverestError> {
    let Some(tr) = &e.traffic.trace else {
        let expected = (e.traffic.packets_per_second * duration.as_secs_f64()) as u64;
        return Ok((super::Traffic::Synthetic(e.synthetic(duration)), expected));
    };
    let corpus = Corpus::load(&tr.files, tr.lenient, tr.max_gap)?;
    let classes = if tr.classify == Classify::Natpt {
        super::classify_corpus(&corpus)
    } else if tr.classify == Classify::Rules {
        let rules = e.services.iter().map(|s| s.rule.clone()).collect();
        let c = Classifier::new(e.services.len(), rules, tr.inside.clone(), None)
            .map_err(|err| super::EverestError::Rules(err.to_string()))?;
        let mut map = std::collections::HashMap::new();
        for p in &corpus.packets {
            let mut k = p.flow;
            k.zone = 0;
            if let std::collections::hash_map::Entry::Vacant(v) = map.entry(k) {
                let s = c.classify(&k).ok_or_else(|| {
                    super::EverestError::Rules(format!(
                        "flow {k} matches no service (give the last [[services]] no match keys)"
                    ))
                })?;
                v.insert(s.index() as u8);
            }
        }
        map
    } else {
        // Each flow (both directions apart) to a service by a hash weighted by the shares.
        let total: f64 = e.services.iter().map(|s| s.share).sum::<f64>().max(f64::MIN_POSITIVE);
        let mut cum = Vec::with_capacity(e.services.len());
        let mut acc = 0.0;
        for s in &e.services {
            acc += s.share / total;
            cum.push(acc);
        }
        let mut map = std::collections::HashMap::new();
        for p in &corpus.packets {
            let mut k = p.flow;
            k.zone = 0;
            map.entry(k).or_insert_with(|| {
                let u = (mix64(k.digest()) >> 11) as f64 / (1u64 << 53) as f64;
                cum.iter().position(|&c| u < c).unwrap_or(cum.len() - 1) as u8
            });
        }
        map
    };
    let span = (corpus.duration_ns as f64 / tr.time_scale).max(1.0);
    let expected =
        (corpus.packets.len() as f64 * tr.flow_multiply as f64 * (duration.as_nanos() as f64 / span).min(1.0)) as u64;
    Ok((
        super::Traffic::Corpus {
            corpus: std::sync::Arc::new(corpus),
            classes: std::sync::Arc::new(classes),
            copies: tr.flow_multiply,
            time_scale: tr.time_scale,
            end: duration,
        },
        expected,
    ))
}

/// splitmix64's finalizer: a fixed 64-bit mix.
fn mix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What `npqos model everest` reports for one service.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ServiceSizing {
    pub name: String,
    pub t_pkt_ns: u64,
    pub tolerance_ns: u64,
    /// Packets of the service in `run.duration` of the scenario's traffic.
    pub packets: u64,
    /// Mean processors' worth of work: packets x t_pkt / duration.
    pub mean_load: f64,
    /// N_max^i: the fewest dedicated processors that finish every packet within D (FIFO),
    /// and whether the search stopped at its cap.
    pub n_max: u32,
    pub n_max_capped: bool,
    /// G^i (eq 7), and G^i x N_p.
    pub guarantee: f64,
    pub guaranteed_processors: f64,
    /// Whole processors by the largest remainder of G^i x N_p (every service at least one when
    /// N_p allows).
    pub whole_processors: u32,
}

/// `model = "everest"`: processors shared by services under an allocation policy.
pub struct EverestScenario;

impl ScenarioModel for EverestScenario {
    fn name(&self) -> &'static str {
        "everest"
    }
    fn description(&self) -> &'static str {
        "processors shared by services under an allocation policy (Everest, -LD, -AE, adaptive, Static, Quantum, Cohort-E) with context-switch cost; bursty synthetic traffic (docs/everest.md)"
    }
    fn tables(&self) -> &'static [&'static str] {
        &["model", "run", "processors", "traffic", "services"]
    }
    fn read(&self, root: &toml::Table, base_dir: &Path, probs: &mut Vec<Problem>) -> Box<dyn ModelSpec> {
        Box::new(read(root, base_dir, probs))
    }
}

impl ModelSpec for EverestSpec {
    fn resolved(&self, root: &mut toml::Table) {
        self.to_toml(root)
    }
    fn memory(&self, duration: Duration, _: Duration) -> MemoryEstimate {
        let trace = self.traffic.trace.is_some();
        MemoryEstimate {
            bytes: self.estimate_memory(duration) as u128,
            key: if trace { "traffic.files" } else { "traffic.packets_per_second" },
            value: if trace { "(trace)".into() } else { self.traffic.packets_per_second.to_string() },
            what: "if every packet of the run waited at once: there is no queue limit",
            remedy: "shorten run.duration or lower the rate",
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
        run_scenario(sc, seed, interrupt, progress).map_err(|e| match e {
            super::EverestError::Config(c) => ModelError::Bad(c.to_string()),
            super::EverestError::Trace(t) => ModelError::Trace(t),
            other => ModelError::Internal(Box::new(other)),
        })
    }
}

/// N_max^i and the eq 7 guarantees of the scenario's services on its traffic (`run.duration`
/// of it, arrivals from `seed`): the sizing side of the everest model (`npqos model everest`).
pub fn sizing(sc: &crate::scenario::Scenario, seed: u64) -> Result<Vec<ServiceSizing>, super::EverestError> {
    let Some(e) = sc.spec_as::<EverestSpec>() else {
        return Err(super::EverestError::NotEverest);
    };
    let (traffic, _) = traffic(e, sc.duration)?;
    let t_pkt: Vec<Duration> = e.services.iter().map(|s| s.t_pkt).collect();
    let d: Vec<Duration> = e.services.iter().map(|s| s.tolerance).collect();
    let nm = super::n_max(|| traffic.stream(seed), &t_pkt, &d, 4 * e.processors.max(64));
    let g = npqos_core::alloc::guarantee::shares(&nm.iter().map(|x| x.0).collect::<Vec<_>>());
    let whole = npqos_core::alloc::guarantee::round_shares(&g, e.processors);
    let secs = sc.duration.as_secs_f64().max(f64::MIN_POSITIVE);
    Ok(e.services
        .iter()
        .enumerate()
        .map(|(i, s)| ServiceSizing {
            name: s.name.clone(),
            t_pkt_ns: s.t_pkt.as_nanos(),
            tolerance_ns: s.tolerance.as_nanos(),
            packets: nm[i].2,
            mean_load: nm[i].2 as f64 * s.t_pkt.as_secs_f64() / secs,
            n_max: nm[i].0,
            n_max_capped: nm[i].1,
            guarantee: g[i],
            guaranteed_processors: g[i] * e.processors as f64,
            whole_processors: whole[i],
        })
        .collect())
}

/// Runs one replication of a `model = "everest"` scenario with `seed`: the guarantees (given,
/// or eq 7 from N_max passes over the same traffic), then the allocator on the engine until
/// every packet offered before `run.duration` is processed (or the event budget, or Ctrl-C).
pub fn run_scenario(
    sc: &crate::scenario::Scenario,
    seed: u64,
    interrupt: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    progress: &mut dyn FnMut(npqos_core::Instant),
) -> Result<crate::results::RunResult, super::EverestError> {
    use crate::engine::{RunLimits, StopReason};
    use crate::results::RunResult;
    use serde_json::json;
    let Some(e) = sc.spec_as::<EverestSpec>() else {
        return Err(super::EverestError::NotEverest);
    };
    let (traffic, expected) = traffic(e, sc.duration)?;
    let t_pkt: Vec<Duration> = e.services.iter().map(|s| s.t_pkt).collect();
    let d: Vec<Duration> = e.services.iter().map(|s| s.tolerance).collect();
    let given: Option<Vec<f64>> = e.services.iter().map(|s| s.guarantee).collect();
    let (g, nmax) = match given {
        Some(g) => (g, None),
        None => {
            let nm = super::n_max(|| traffic.stream(seed), &t_pkt, &d, 4 * e.processors.max(64));
            (npqos_core::alloc::guarantee::shares(&nm.iter().map(|x| x.0).collect::<Vec<_>>()), Some(nm))
        }
    };
    let p = super::EverestParams {
        processors: e.processors,
        t_sw: e.t_sw,
        delta: e.delta,
        policy: e.policy,
        services: e.alloc_services(&g),
        sample_every: sc.sample_every(),
        check_invariants: false,
        timeline: None,
    };
    let span = sc.duration.as_nanos() as f64;
    let limits = RunLimits {
        until: npqos_core::Instant::MAX,
        max_events: if sc.max_events == 0 { u64::MAX } else { sc.max_events },
    };
    let (r, stop) = super::run_limited(
        &p,
        traffic.stream(seed),
        expected,
        &mut |f| progress(npqos_core::Instant::from_nanos((f.clamp(0.0, 1.0) * span) as u64)),
        limits,
        interrupt,
    )?;
    let mut run = RunResult {
        complete: matches!(stop, StopReason::Drained),
        stop_reason: format!("{stop:?}").to_lowercase(),
        ..Default::default()
    };
    run.params.insert("policy".into(), json!(e.policy.name()));
    run.params.insert("processors".into(), json!(e.processors));
    r.write_scalars(e.processors, &mut run);
    for (i, s) in e.services.iter().enumerate() {
        let (n, late) = r.per_service[i];
        run.scalar(&format!("packets.{}", s.name), n as f64, "packets");
        run.scalar(&format!("late_percent.{}", s.name), 100.0 * late as f64 / n.max(1) as f64, "%");
        run.scalar(&format!("guarantee.{}", s.name), g[i], "fraction");
        if let Some(nm) = &nmax {
            run.scalar(&format!("n_max.{}", s.name), nm[i].0 as f64, "processors");
        }
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use crate::scenario::testing::{assert_names, assert_round_trips, example, parse};
    use crate::scenario::Scenario;
    use std::path::Path;

    /// The minimal everest scenario is the NAT-PT default; every resolved scenario parses back
    /// to itself.
    #[test]
    fn defaults_and_round_trip() {
        let sc = parse("model = \"everest\"\n").unwrap();
        let e = sc.spec_as::<super::EverestSpec>().expect("an everest spec");
        assert_eq!(e.services.len(), 6);
        assert_eq!(e.services[0].name, "v4-v6-tcp");
        assert!((e.services.iter().map(|s| s.share).sum::<f64>() - 1.0).abs() < 1e-12);
        assert_round_trips([
            "model = \"everest\"\n".to_string(),
            example("everest-small"),
            example("everest-natpt"),
            "model = \"everest\"\n[processors]\npolicy = \"quantum\"\nquantum = \"5ms\"\n[[services]]\nname = \"a\"\nt_pkt = \"2us\"\nshare = 1.0\nguarantee = 0.5\n".into(),
        ]);
    }

    /// Every problem is reported with its key path.
    #[test]
    fn problems_name_their_keys() {
        assert_names(
            "model = \"everest\"\n[link]\nrate = \"1Gbps\"\n[processors]\ncount = 0\npolicy = \"fifo\"\ncolour = 1\nquantum = \"1ms\"\n[traffic]\npareto_shape = 0.9\n[[services]]\nname = \"a b\"\nt_pkt = \"0s\"\nshare = 0.5\nguarantee = 0.2\n[[services]]\nname = \"c\"\nshare = 0.2\n",
            &[
                "link",
                "processors.count",
                "processors.policy",
                "processors.colour",
                "processors.quantum",
                "traffic.pareto_shape",
                "services[0].name",
                "services[0].t_pkt",
                "services.share",
                "services.guarantee",
            ],
        );
        let e = parse("model = \"everest\"\n[[services]]\nt_pkt = \"1us\"\n").unwrap_err();
        assert!(e.contains("services[0].share") && e.contains("required"), "{e}");
        assert_names(
            "model = \"everest\"\n[run]\nduration = \"100000s\"\n[traffic]\npackets_per_second = 1e9\n",
            &["traffic.packets_per_second", "memory_budget"],
        );
    }

    /// Trace traffic: synthetic keys and a NAT-PT classification of other services are refused;
    /// with the corpus, the example round-trips, offers its packets to the six services, and
    /// `classify = "share"` follows the shares.
    #[test]
    fn trace_traffic() {
        assert_names(
            "model = \"everest\"\n[traffic]\nsource = \"trace\"\nfiles = []\nsources = 3\nclassify = \"natpt\"\n[[services]]\nname = \"a\"\nshare = 1.0\n",
            &["traffic.sources", "traffic.classify"],
        );
        // The example's files (relative to the examples' directory) exist only beside ../shared.
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios");
        if !Path::new(dir).join("../../shared/traces/ndpi").is_dir() {
            crate::testkit::skip(
                "models::everest::scenario::tests::trace_traffic (the example)",
                crate::testkit::NO_NDPI,
            );
            return;
        }
        let text = example("everest-trace");
        let sc = Scenario::parse(&text, "t", Path::new(dir)).unwrap();
        assert_eq!(Scenario::from_table(&sc.to_toml(), "r", Path::new(dir)).unwrap(), sc);
        let mut short = sc.clone();
        short.duration = npqos_core::Duration::from_millis(200);
        let r = super::run_scenario(&short, 1, None, &mut |_| {}).unwrap();
        assert!(r.get("packets").unwrap() > 10_000.0, "{:?}", r.get("packets"));
        let shares = text.replace("classify = \"natpt\"", "classify = \"share\"")
            + "[[services]]\nname = \"a\"\nt_pkt = \"5us\"\nshare = 0.9\n[[services]]\nname = \"b\"\nt_pkt = \"5us\"\nshare = 0.1\n";
        let mut sc2 = Scenario::parse(&shares, "t", Path::new(dir)).unwrap();
        sc2.duration = npqos_core::Duration::from_millis(200);
        let s = super::sizing(&sc2, 1).unwrap();
        let frac = s[0].packets as f64 / (s[0].packets + s[1].packets) as f64;
        // By flow, not by packet: heavy flows make the packet split coarser than the shares.
        assert!(frac > 0.6 && frac < 1.0, "{frac}");
        // classify = "rules": each service gets exactly the packets its match keys select, counted
        // here from the corpus by the rule text (one copy, the whole corpus inside the run).
        let text = example("everest-rules").replace("flow_multiply = 20", "flow_multiply = 1");
        let mut sc3 = Scenario::parse(&text, "t", Path::new(dir)).unwrap();
        assert_eq!(Scenario::from_table(&sc3.to_toml(), "r", Path::new(dir)).unwrap(), sc3);
        sc3.duration = npqos_core::Duration::from_secs(3600);
        let s = super::sizing(&sc3, 1).unwrap();
        let e = sc3.spec_as::<super::EverestSpec>().expect("an everest spec");
        let tr = e.traffic.trace.as_ref().unwrap();
        let corpus = crate::trace::corpus::Corpus::load(&tr.files, tr.lenient, tr.max_gap).unwrap();
        let mut want = [0u64; 3];
        for p in &corpus.packets {
            let k = p.flow;
            let either = |ports: &[u16]| ports.contains(&k.src_port) || ports.contains(&k.dst_port);
            want[if k.proto == 6 && either(&[80, 443]) {
                0
            } else if k.proto == 17 && either(&[53]) {
                1
            } else {
                2
            }] += 1;
        }
        let got: Vec<u64> = s.iter().map(|x| x.packets).collect();
        assert_eq!(got, want, "packets per service (web, dns, other)");
        assert!(want.iter().all(|&n| n > 0), "{want:?}");
        // A spec built around the reader's checks is an error, not a panic.
        let broken = |f: &dyn Fn(&mut super::EverestSpec)| {
            let mut b = sc3.clone();
            let e = b.spec_as_mut::<super::EverestSpec>().expect("an everest spec");
            f(e);
            super::sizing(&b, 1).unwrap_err().to_string()
        };
        let e1 = broken(&|e| e.services[2].rule.ports = vec![npqos_core::classify::PortRange::one(1)]);
        assert!(e1.contains("matches no service"), "{e1}");
        let e2 = broken(&|e| e.services[0].rule.direction = npqos_core::classify::Direction::Inbound);
        assert!(e2.contains("classification rules") && e2.contains("direction"), "{e2}");
    }

    /// classify = "rules": match keys are read with their key paths, refused without it, and
    /// the services must end with exactly one that has no match keys.
    #[test]
    fn rules_are_checked() {
        // A committed capture (empty: parsing only needs the file to exist).
        let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../npqos-cli/tests/corpus/traces/empty.pcap");
        let head =
            format!("model = \"everest\"\n[traffic]\nsource = \"trace\"\nfiles = [{file:?}]\nclassify = \"rules\"\n");
        let ok = format!("{head}inside = [\"10.0.0.0/8\"]\n[[services]]\nname = \"web\"\nprotocols = [\"tcp\", 17]\nports = [80, \"8000-8099\"]\ndirection = \"inbound\"\n[[services]]\nname = \"rest\"\n");
        let sc = parse(&ok).unwrap();
        let e = sc.spec_as::<super::EverestSpec>().expect("an everest spec");
        let r = &e.services[0].rule;
        assert_eq!(r.protocols, vec![6, 17]);
        assert_eq!(
            r.ports,
            vec![npqos_core::classify::PortRange::one(80), npqos_core::classify::PortRange { lo: 8000, hi: 8099 }]
        );
        assert_round_trips([ok.clone()]);
        assert_names(
            &format!("{head}[[services]]\nname = \"a\"\nports = [\"80-x\", 70000]\nprotocols = [\"sctp\"]\ndirection = \"up\"\n[[services]]\nname = \"b\"\n[[services]]\nname = \"c\"\nsrc_ports = 53\n"),
            &["services[0].ports[0]", "services[0].ports[1]", "services[0].protocols[0]", "services[0].direction", "services[1]", "services[2].src_ports", "services[2]"],
        );
        let e = parse(&format!("{head}[[services]]\nname = \"a\"\n[[services]]\nname = \"b\"\nports = [80]\n"))
            .unwrap_err();
        assert!(e.contains("`services[0]`: has no match keys, so it takes every flow"), "{e}");
        assert!(e.contains("`services[1]`: the last service must have no match keys"), "{e}");
        assert_names(
            &format!("{head}[[services]]\nname = \"a\"\ndirection = \"outbound\"\n[[services]]\nname = \"b\"\n"),
            &["services[0].direction"],
        );
        assert_names(
            "model = \"everest\"\n[traffic]\nsource = \"trace\"\nfiles = []\nclassify = \"share\"\ninside = [\"10.0.0.0/33\"]\n[[services]]\nname = \"a\"\nshare = 1.0\nports = [80]\n",
            &["traffic.inside[0]", "services[0].ports"],
        );
    }
}
