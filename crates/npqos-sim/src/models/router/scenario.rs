//! `model = "router"` scenarios: the composed router (docs/router.md, "Scenario files").
//!
//! ```toml
//! model = "router"
//! [run]                       # seed, duration (arrivals stop), replications, sample_interval
//! [router]
//! inside = ["10.0.0.0/8"]     # what inbound and outbound mean to the match rules
//! drain = "50ms"              # run on after arrivals stop, to let packets out
//! [traffic]                   # as a dqs scenario's: synthetic flows or a trace corpus
//! source = "synthetic"        # flows, mean_packets, pareto_shape, mean_gap, sizes, size
//! mix = [{ protocol = "tcp", port = 443, share = 0.7 }, { protocol = "udp", port = 53, share = 0.3 }]
//! # source = "trace": files, flow_multiply, time_scale, max_gap, lenient
//! [ingress]
//! kind = "dqs"                # "dqs", "per-flow" (a table entry per flow), "hashed" (K per service)
//!                             # or "fq-codel" (K hashed, FQ-CoDel's round within a service, docs/codel.md)
//! queues = 65536              # dqs's pool; per-flow: flows with packets at once; hashed, fq-codel: K (fq-codel: 1024)
//! # fq-codel only: codel_target = "5ms", codel_interval = "100ms", ecn = true, quantum = "1514B", drop_batch = 64
//! slots = 256                 # dqs: AFM slots      (these five: the flow table keys,
//! hash = "h3"                 # dqs: "h3" or "foldhash"     docs/scenarios.md, shared
//! blocks = 1048576            # the shared block buffer     with the dqs model and live)
//! block_size = "64B"
//! [processing]
//! processors = 16
//! policy = "everest"          # as an everest scenario's (static, quantum, cohort-e, everest, ...), "lap",
//!                             # or "none": no processors, the ingress queues shaped (docs/router.md)
//! t_sw = "10us"
//! delta = "10us"              # default t_sw
//! quantum = "100us"           # policy = "quantum" only
//! scheduler = "efq"           # within a service: "efq", "sfq", "wf2q+", "drr" (link quantum) or "fcfs"
//! late_drop = false
//! [queue_memory]
//! subsystem = "qc"            # "qc", "sqc", "dc", "nc" or "ideal"
//! entries = 16                # sqc / qc descriptor entries
//! dc_lines = 128
//! dc_ways = 2
//! memory_refs_per_ns = 0.2
//! [shaping]
//! shaper = "event"            # "event" (kim Algorithm 1), "periodic" or "none"
//! conformance = "send-then-pay"   # or "wait-for-tokens" (Linux tbf)
//! alpha = "3000B"             # event: reschedule threshold (the shared shaping keys:
//! cap = "3000B"               # docs/scenarios.md "Shaping keys"; cap defaults to alpha)
//! locked = "0B"               # event: locked cache per heap
//! tick_shift = 6              # event: heap ticks of 2^6 ns
//! adaptive = false            # event: kim eq 14 (alpha adapts); then gamma, delta_th, alpha_min, interval
//! period = "1ms"              # periodic: fill period
//! flow_queues = 65536         # buckets per per-flow-shaped service
//! buffer = "64MB"             # output queues together
//! [link]
//! rate = "10Gbps"
//! quantum = "1536B"
//! ahead = 1                   # packets picked ahead of the transmission (dequeues in flight)
//! [stats]                     # the flow and class counters (flows.csv, classes.csv)
//! flows = 4096                # flows counted exactly, the first seen
//! heavy_flows = 0             # past them, the heaviest by offered bytes (a sketch; 0: none)
//! [output]                    # packet captures of the pipeline's ports (docs/router.md "Packet captures")
//! pcap = ["ingress", "egress", "drops"]   # any of them; default none: pcap/<port>.pcapng in the results
//! pcap_limit = 1000000        # packets per file (past it counted, not written)
//! pcap_snaplen = "128B"       # bytes of each packet written (64B-65535B)
//! [[services]]                # default: one service "all"; the last without match keys takes the rest
//! name = "web"
//! ports = [80, 443]           # match keys as everest's: protocols, src_ports, dst_ports, ports, direction, src_prefixes, dst_prefixes, dscp
//! tolerance = "2ms"           # D
//! cost_alpha = "2us"          # predicted processing time alpha + beta x length
//! cost_beta = "1ns"           # per byte
//! variation = 0.2             # actual = predicted x (1 + variation x U(-1, 1))
//! guarantee = 0.5             # G (everest eq 7; default 1 / services)
//! rate = "100Mbps"            # shaped output rate (absent: not shaped)
//! rate_per = "flow"           # or "class", or "src" / "dst": per subscriber (address)
//! [services.function]         # a packet function its processors run on each packet (absent: none;
//! kind = "port-scan"          # docs/everest.md): "port-scan" or "syn-flood"
//! window = "1s"
//! threshold = 100             # distinct ports or hosts / half-open connections above which it reports
//! max_tracked = 65536         # sources / half-open connections it tracks at most
//! ```
//!
//! Keys of an alternative a stage does not use (dqs's `slots` with `kind = "per-flow"`, the
//! event shaper's `alpha` with `shaper = "periodic"`, ...) are checked and then ignored, so
//! one key swaps a stage for its baseline (`npqos sweep --set ingress.kind=dqs,per-flow`); the
//! resolved scenario keeps only the keys in use.

use super::{
    Allocation, Host, IngressKind, MixEntry, ProcessingParams, QmemParams, RouterParams, RouterTraffic, Scheduler,
    ServiceParams, ShaperKind, ShapingParams,
};
use crate::results::RunResult;
use crate::scenario::classify::{
    has_criteria, read_prefixes, read_rule, unique_service_names, write_prefixes, write_rule,
};
use crate::scenario::flows::FlowTraffic;
use crate::scenario::flowtable::{self, TableKeys};
use crate::scenario::shaper::{BucketConfig, BucketKeys};
use crate::scenario::{
    show, MemoryEstimate, ModelError, ModelSpec, Problem, Progress, Reader, Scenario, ScenarioModel,
};
use crate::trace::corpus::Corpus;
use crate::units::{fmt_fine_duration, fmt_size};
use npqos_core::alloc::{Policy, PolicyKind};
use npqos_core::detect::{FunctionKind, FunctionParams};
use npqos_core::id::ServiceId;
use npqos_core::names::Named;
use npqos_core::queues::timing::{Subsystem, TABLE1};
use npqos_core::sched::fq::Discipline;
use npqos_core::{Duration, Instant, Rate};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The router part of a scenario: the pipeline (its `duration` and `sample_every` come from
/// `[run]` when it runs) and the traffic.
#[derive(Clone, Debug, PartialEq)]
pub struct RouterSpec {
    pub params: RouterParams,
    pub traffic: TrafficSpec,
    /// `[shaping]`'s bucket keys as read (the shared reader's; `params.shaping` holds what the
    /// chosen shaper uses of them).
    pub bucket: BucketConfig,
    /// `[output]`: the packet captures of the pipeline's ports.
    pub output: OutputSpec,
}

/// `[output]` (docs/router.md, "Packet captures"): which ports' packets go to pcapng files in
/// the results directory (`pcap/<port>.pcapng`), at most `pcap_limit` packets per file, cut
/// at `pcap_snaplen` bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputSpec {
    pub pcap: Vec<super::pipeline::Port>,
    pub pcap_limit: u64,
    pub pcap_snaplen: u32,
}

/// Packets per capture file by default: 1,000,000 (about 130 MB at the default snap length;
/// router-100g's 3e8 packets would be some 20 GB a port).
pub const PCAP_LIMIT: u64 = 1_000_000;

impl Default for OutputSpec {
    fn default() -> Self {
        OutputSpec { pcap: Vec::new(), pcap_limit: PCAP_LIMIT, pcap_snaplen: 128 }
    }
}

impl OutputSpec {
    /// Reads `[output]` of `root`.
    pub(crate) fn read(root: &toml::Table, probs: &mut Vec<Problem>) -> Self {
        use super::pipeline::Port;
        let mut o = Reader::new(root, "output", probs);
        let names: Vec<&str> = Port::ALL.iter().map(|p| p.name()).collect();
        let pcap = o.choices("pcap", &[], &names, probs);
        let pcap_limit = o.int("pcap_limit", PCAP_LIMIT as i64, 1, 1 << 40, probs) as u64;
        let snap = o.size("pcap_snaplen", 128, probs);
        if !(64..=65_535).contains(&snap) {
            problem(probs, "output.pcap_snaplen", Some(format!("\"{}\"", fmt_size(snap))), "expected 64B to 65535B");
        }
        o.finish(probs);
        let mut ports: Vec<Port> = Port::ALL.into_iter().filter(|p| pcap.iter().any(|x| x == p.name())).collect();
        ports.dedup();
        OutputSpec { pcap: ports, pcap_limit, pcap_snaplen: snap.clamp(64, 65_535) as u32 }
    }

    /// `[output]` written back.
    pub(crate) fn write(&self, root: &mut toml::Table) {
        let mut o = toml::Table::new();
        o.insert("pcap".into(), toml::Value::Array(self.pcap.iter().map(|p| p.name().into()).collect()));
        o.insert("pcap_limit".into(), (self.pcap_limit as i64).into());
        o.insert("pcap_snaplen".into(), fmt_size(self.pcap_snaplen as u64).into());
        root.insert("output".into(), o.into());
    }
}

/// `[traffic]`: the shared flow-traffic reader's keys (`scenario::flows`) and, for synthetic
/// flows, the protocol and port mix.
#[derive(Clone, Debug, PartialEq)]
pub struct TrafficSpec {
    pub source: FlowTraffic,
    pub mix: Vec<MixEntry>,
}

const SUBSYSTEMS: [&str; 5] = ["qc", "sqc", "dc", "nc", "ideal"];

fn problem(probs: &mut Vec<Problem>, key: &str, value: Option<String>, message: &str) {
    probs.push(Problem { key: key.into(), value, message: message.into() });
}

/// The shared bucket keys the router's `[shaping]` has: all but `timer` (its shaper files
/// throttled queues in the paper's heaps).
const ROUTER_BUCKET_KEYS: BucketKeys =
    BucketKeys { timer: false, wire: true, wake: Some(Duration::ZERO), ..BucketKeys::SIMULATED };

/// Reads every router table, recording every problem.
pub(crate) fn read(root: &toml::Table, base_dir: &Path, probs: &mut Vec<Problem>) -> RouterSpec {
    let mut r = Reader::new(root, "router", probs);
    let inside = read_prefixes(&mut r, "inside", probs);
    let drain = r.duration("drain", Duration::from_millis(50), probs);
    r.finish(probs);
    let traffic = read_traffic(root, base_dir, probs);

    let mut g = Reader::new(root, "ingress", probs);
    let ingress = g.named("kind", IngressKind::Dqs, probs);
    let default_queues = ingress == IngressKind::FqCodel && !g.present("queues");
    let mut table = flowtable::read(&mut g, TableKeys::ROUTER, probs);
    if default_queues {
        // FQ-CoDel's 1,024 queues (RFC 8290, Linux) rather than dqs's pool.
        table.queues = 1024;
    }
    let fq_codel = crate::scenario::shaper::read_fq_codel(&mut g, ingress, probs);
    if let Some(l) = table.queue_limit.filter(|_| ingress != IngressKind::Dqs) {
        problem(
            probs,
            "ingress.queue_limit",
            Some(format!("\"{}\"", fmt_size(l))),
            "only the dqs ingress has a per-queue limit (ingress.kind = \"dqs\")",
        );
    }
    g.finish(probs);

    let processing = read_processing(root, "everest", probs);

    let mut q = Reader::new(root, "queue_memory", probs);
    let subsystem = q.choice("subsystem", "qc", &SUBSYSTEMS, probs);
    let entries = q.int("entries", 16, 1, 1 << 20, probs) as u32;
    let dc_lines = q.int("dc_lines", 128, 1, 1 << 24, probs) as u32;
    let dc_ways = q.int("dc_ways", 2, 1, 64, probs) as u32;
    let refs = q.float("memory_refs_per_ns", 0.2, probs, |v| v > 0.0 && v <= 100.0, "greater than 0 and at most 100");
    q.finish(probs);
    // "ideal" is the one name that is not a subsystem: no queue memory cost at all.
    let subsystem = Subsystem::named(&subsystem).ok();

    let mut s = Reader::new(root, "shaping", probs);
    let shaper = s.choice("shaper", "event", &["event", "periodic", "none"], probs);
    let bucket = BucketConfig::read(&mut s, ROUTER_BUCKET_KEYS, probs);
    let locked = s.size("locked", 0, probs);
    let tick_shift = s.int("tick_shift", 6, 0, npqos_core::shaper::heap::MAX_TICK_SHIFT as i64, probs) as u32;
    let period = s.positive_duration("period", Duration::from_millis(1), probs);
    let flow_queues = s.int("flow_queues", 65_536, 1, 1 << 24, probs) as u32;
    let buffer = s.size("buffer", 64 << 20, probs);
    let aqm = crate::scenario::shaper::read_aqm(&mut s, probs);
    s.finish(probs);
    let kind = match shaper.as_str() {
        "none" => ShaperKind::None,
        "periodic" => ShaperKind::Periodic { period },
        _ => ShaperKind::Event {
            alpha_bytes: bucket.alpha,
            locked_bytes: locked,
            tick_shift,
            adaptive: bucket.adaptive,
            timer: bucket.timer,
        },
    };
    let shaping = ShapingParams {
        kind,
        conformance: bucket.conformance,
        cap_bytes: bucket.cap.clamp(1, npqos_core::shaper::MAX_BUCKET_BYTES),
        // 0 by default (the simulated clock is never late); a live configuration simulated
        // brings live's, so that its buckets are live's.
        cap_wake_ns: bucket.wake_tolerance.as_nanos(),
        flow_queues,
        buffer_bytes: buffer,
        overhead: bucket.overhead,
        mpu: bucket.mpu,
        aqm,
    };

    let mut l = Reader::new(root, "link", probs);
    let link_rate = l.rate("rate", Rate::gbps(10), probs);
    if link_rate.is_zero() {
        problem(probs, "link.rate", Some(format!("\"{link_rate}\"")), "expected a positive rate");
    }
    let lq = l.size("quantum", 1536, probs);
    if !(1..=1 << 24).contains(&lq) {
        problem(probs, "link.quantum", Some(format!("\"{lq}B\"")), "expected a size from 1B to 16MB");
    }
    let link_ahead = l.int("ahead", 1, 1, 1024, probs) as u32;
    l.finish(probs);

    let mut st = Reader::new(root, "stats", probs);
    let stats = crate::scenario::stats::read(&mut st, probs);
    st.finish(probs);

    let services = read_services(root, Some(&inside), probs);
    if processing.policy == Allocation::None {
        for (i, _) in services.iter().enumerate().filter(|(_, s)| s.function.is_some()) {
            problem(
                probs,
                &format!("services[{i}].function"),
                None,
                "a packet function runs on the processors: not with processing.policy = \"none\"",
            );
        }
    }
    RouterSpec {
        params: RouterParams {
            services,
            inside,
            ingress,
            table,
            fq_codel,
            processing,
            qmem: QmemParams { subsystem, timing: TABLE1, entries, dc_lines, dc_ways, memory_refs_per_ns: refs },
            shaping,
            link_rate: if link_rate.is_zero() { Rate::gbps(10) } else { link_rate },
            quantum: lq.clamp(1, 1 << 24) as u32,
            link_ahead,
            duration: Duration::ZERO,
            drain,
            sample_every: Duration::ZERO,
            stats,
        },
        traffic,
        bucket,
        output: OutputSpec::read(root, probs),
    }
}

/// `[processing]` of `root` (the router's keys, and `npqos live`'s), `policy` defaulting to
/// `default_policy` ("everest" in a scenario, "none" in a live file).
pub(crate) fn read_processing(root: &toml::Table, default_policy: &str, probs: &mut Vec<Problem>) -> ProcessingParams {
    let mut p = Reader::new(root, "processing", probs);
    let processors = p.int("processors", 16, 1, 1 << 16, probs) as u32;
    let policies: Vec<&str> = PolicyKind::ALL.iter().map(|k| k.name()).chain(["lap", "none"]).collect();
    let policy = p.choice("policy", default_policy, &policies, probs);
    let t_sw = p.duration("t_sw", Duration::from_micros(10), probs);
    let delta = p.duration("delta", t_sw, probs);
    if delta.is_zero() {
        problem(
            probs,
            "processing.delta",
            Some(format!("\"{delta}\"")),
            "expected a positive duration (it defaults to t_sw)",
        );
    }
    let quantum = p.positive_duration("quantum", Duration::from_micros(100), probs);
    let scheduler = p.named("scheduler", Scheduler::Fair(Discipline::Efq), probs);
    let late_drop = p.boolean("late_drop", false, probs);
    p.finish(probs);
    let policy = match PolicyKind::named(&policy) {
        Ok(kind) => Allocation::Policy(kind.with_quantum(quantum)),
        Err(_) if policy == "none" => Allocation::None,
        Err(_) => Allocation::Lap,
    };
    ProcessingParams { processors, policy, t_sw, delta, scheduler, late_drop }
}

/// `[processing]` written back, every default filled in.
pub(crate) fn write_processing(pr: &ProcessingParams) -> toml::Table {
    let mut x = toml::Table::new();
    x.insert("processors".into(), (pr.processors as i64).into());
    x.insert("policy".into(), pr.policy.name().into());
    if let Allocation::Policy(Policy::Quantum { quantum }) = pr.policy {
        x.insert("quantum".into(), quantum.to_string().into());
    }
    x.insert("t_sw".into(), pr.t_sw.to_string().into());
    x.insert("delta".into(), pr.delta.to_string().into());
    x.insert("scheduler".into(), pr.scheduler.label().into());
    x.insert("late_drop".into(), pr.late_drop.into());
    x
}

fn read_traffic(root: &toml::Table, base_dir: &Path, probs: &mut Vec<Problem>) -> TrafficSpec {
    let mut r = Reader::new(root, "traffic", probs);
    let source = FlowTraffic::read(&mut r, base_dir, 2_000, &["mix"], probs);
    let mix = if matches!(source, FlowTraffic::Synthetic { .. }) {
        read_mix(&mut r, probs)
    } else {
        vec![MixEntry { protocol: 6, port: 443, share: 1.0 }]
    };
    r.finish(probs);
    TrafficSpec { source, mix }
}

/// `traffic.mix`: an array of { protocol, port, share } (default: all TCP to port 443).
fn read_mix(r: &mut Reader, probs: &mut Vec<Problem>) -> Vec<MixEntry> {
    let default = vec![MixEntry { protocol: 6, port: 443, share: 1.0 }];
    let Some(v) = r.value("mix") else { return default };
    let Some(a) = v.as_array().filter(|a| !a.is_empty()) else {
        problem(probs, "traffic.mix", Some(show(v)), "expected an array of { protocol, port, share } tables");
        return default;
    };
    let mut out = Vec::new();
    for (i, e) in a.iter().enumerate() {
        let key = format!("traffic.mix[{i}]");
        let Some(t) = e.as_table() else {
            problem(probs, &key, Some(show(e)), "expected a table { protocol, port, share }");
            continue;
        };
        let mut m = Reader::from_table(t, key.clone());
        let proto = m.choice("protocol", "tcp", &["tcp", "udp"], probs);
        let port = m.int("port", 443, 0, 65_535, probs) as u16;
        let share = m.float("share", 1.0, probs, |v| v > 0.0 && v.is_finite(), "a positive weight");
        m.finish(probs);
        out.push(MixEntry { protocol: if proto == "udp" { 17 } else { 6 }, port, share });
    }
    if out.is_empty() {
        default
    } else {
        out
    }
}

/// `[[services]]` of `root` (the router's and `npqos live`'s keys), one service `all` that
/// takes every packet when there are none; `inside` (`router.inside`) gives `direction` its
/// meaning, and `None` says the file has no such key (`npqos live`).
pub(crate) fn read_services(
    root: &toml::Table,
    inside: Option<&[npqos_core::classify::Prefix]>,
    probs: &mut Vec<Problem>,
) -> Vec<ServiceParams> {
    let Some(v) = root.get("services") else {
        // One service that takes every packet, with the defaults of a [[services]] table.
        let t = toml::Table::from_iter([("name".to_string(), toml::Value::from("all"))]);
        return read_services(
            &toml::Table::from_iter([("services".to_string(), toml::Value::Array(vec![t.into()]))]),
            inside,
            probs,
        );
    };
    let Some(a) = v.as_array().filter(|a| !a.is_empty()) else {
        problem(probs, "services", Some(show(v)), "expected one or more [[services]] tables");
        return Vec::new();
    };
    let n = a.len();
    let mut out = Vec::with_capacity(n);
    for (i, v) in a.iter().enumerate() {
        let prefix = format!("services[{i}]");
        let Some(tb) = v.as_table() else {
            problem(probs, &prefix, Some(show(v)), "expected a table ([[services]])");
            continue;
        };
        let mut r = Reader::from_table(tb, prefix.clone());
        let name = r.string("name", &format!("s{i}"), probs);
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            problem(
                probs,
                &format!("{prefix}.name"),
                Some(format!("{name:?}")),
                "expected letters, digits, '-' or '_' (it names result columns)",
            );
        }
        let tolerance = r.positive_duration("tolerance", Duration::from_millis(2), probs);
        let cost_alpha_ns = r.fine_duration("cost_alpha", 2_000.0, probs);
        let cost_beta_ns = r.fine_duration("cost_beta", 1.0, probs);
        let variation = r.float("variation", 0.0, probs, |v| (0.0..=1.0).contains(&v), "in 0..1");
        let guarantee = r.float("guarantee", 1.0 / n as f64, probs, |v| (0.0..=1.0).contains(&v), "in 0..1");
        let rate = r.present("rate").then(|| r.rate("rate", Rate::gbps(1), probs));
        if rate.is_some_and(|x| x.is_zero()) {
            problem(
                probs,
                &format!("{prefix}.rate"),
                Some("\"0bps\"".into()),
                "expected a positive rate (leave it out for no shaping)",
            );
        }
        let per = r.choice("rate_per", "flow", &["flow", "class", "src", "dst"], probs);
        let ecn = r.boolean("ecn", false, probs);
        let rule = read_rule(&mut r, ServiceId::from_index(i), probs);
        r.consume("function");
        let function = tb.contains_key("function").then(|| read_function(tb, &prefix, probs));
        if !has_criteria(&rule) && i + 1 < n {
            problem(
                probs,
                &prefix,
                None,
                &format!("has no match keys, so it takes every flow and services[{}..] get none (only the last service may have none)", i + 1),
            );
        }
        if rule.direction != npqos_core::classify::Direction::Any && inside.is_none_or(|p| p.is_empty()) {
            problem(
                probs,
                &format!("{prefix}.direction"),
                None,
                match inside {
                    Some(_) => "needs router.inside (the prefixes that say what inbound and outbound mean)",
                    None => "not in npqos live (it has no inside prefixes): match on src_prefixes or dst_prefixes",
                },
            );
        }
        r.finish(probs);
        out.push(ServiceParams {
            name,
            rule,
            tolerance,
            cost_alpha_ns,
            cost_beta_ns,
            variation,
            guarantee,
            rate: rate.filter(|x| !x.is_zero()),
            per_flow: per != "class",
            host: match per.as_str() {
                "src" => Some(Host::Src),
                "dst" => Some(Host::Dst),
                _ => None,
            },
            ecn,
            function,
        });
    }
    if !out.is_empty() && out.iter().map(|s| s.guarantee).sum::<f64>() > 1.0 + 1e-9 {
        problem(probs, "services.guarantee", None, "expected the guarantees to sum to at most 1");
    }
    unique_service_names(out.iter().map(|s| s.name.as_str()), probs);
    out
}

/// `[services.function]` of service table `tb` (named `prefix` in problems): the packet
/// function its processors run (docs/everest.md, "The prototype's services").
fn read_function(tb: &toml::Table, prefix: &str, probs: &mut Vec<Problem>) -> FunctionParams {
    let mut f = Reader::new_in(tb, Some(prefix), "function", probs);
    let kind = f.named("kind", FunctionKind::PortScan, probs);
    let d = FunctionParams::default_for(kind);
    let window = f.positive_duration("window", Duration::from_nanos(d.window_ns), probs);
    let threshold = f.int("threshold", d.threshold as i64, 1, u32::MAX as i64, probs) as u32;
    let max_tracked = f.int("max_tracked", d.max_tracked as i64, 1, 1 << 24, probs) as u32;
    f.finish(probs);
    FunctionParams { kind, window_ns: window.as_nanos().max(1), threshold, max_tracked }
}

impl RouterSpec {
    /// The traffic of one replication for `duration` of arrivals.
    pub fn traffic(&self, duration: Duration) -> Result<RouterTraffic, crate::trace::TraceError> {
        Ok(match &self.traffic.source {
            FlowTraffic::Synthetic { .. } => RouterTraffic::Synthetic {
                flows: self.traffic.source.synthetic(duration).expect("synthetic"),
                mix: self.traffic.mix.clone(),
            },
            FlowTraffic::Trace { files, flow_multiply, time_scale, max_gap, lenient } => RouterTraffic::Corpus {
                corpus: Arc::new(Corpus::load(files, *lenient, *max_gap)?),
                copies: *flow_multiply,
                time_scale: *time_scale,
            },
        })
    }

    /// Upper estimate of one replication's memory (docs/router.md): per ingress queue its
    /// scheduler state in every service (80 B), per output queue its bucket, FIFO and DRR
    /// state (96 B), per per-flow bucket its owner's record (16 B, `FlowBuckets`, one set for
    /// every per-flow service), the ingress buffer's block links (8 B per block), the flows (100 B each
    /// for synthetic flows in progress) or the corpus (twice its files), and the in-flight
    /// packets (64 B per 64 B block), and the flow counters (`FlowIndex::memory_bytes` and
    /// the counters of each exact row).
    pub fn estimate_memory(&self) -> u128 {
        let p = &self.params;
        let nqi = match p.ingress {
            IngressKind::Dqs | IngressKind::PerFlow => p.table.queues as u128,
            IngressKind::Hashed | IngressKind::FqCodel => p.table.queues as u128 * p.services.len() as u128,
        };
        let flow_services = p.services.iter().filter(|s| s.per_flow && s.rate.is_some()).count() as u128;
        let nqe = p.services.len() as u128 + flow_services * p.shaping.flow_queues as u128;
        let traffic = self.traffic.source.estimate_memory(100);
        let (flows, heavy) = (p.stats.flows as usize, p.stats.heavy_flows as usize);
        let counts = std::mem::size_of::<super::pipeline::RowCounts>() as u128;
        let stats = npqos_core::pipeline::FlowIndex::bound_bytes(flows, heavy) as u128 + flows as u128 * counts;
        let owners = if flow_services > 0 { p.shaping.flow_queues as u128 * 16 } else { 0 };
        nqi * 80 * p.services.len() as u128
            + nqe * 96
            + owners
            + p.table.blocks as u128 * 72
            + traffic
            + stats
            + (8 << 20)
    }

    pub(crate) fn to_toml(&self, root: &mut toml::Table) {
        let p = &self.params;
        let mut r = toml::Table::new();
        r.insert("inside".into(), write_prefixes(&p.inside));
        r.insert("drain".into(), p.drain.to_string().into());
        root.insert("router".into(), r.into());
        let mut t = toml::Table::new();
        self.traffic.source.write(&mut t);
        if matches!(self.traffic.source, FlowTraffic::Synthetic { .. }) {
            let m = self
                .traffic
                .mix
                .iter()
                .map(|m| {
                    let mut e = toml::Table::new();
                    e.insert("protocol".into(), if m.protocol == 17 { "udp" } else { "tcp" }.into());
                    e.insert("port".into(), (m.port as i64).into());
                    e.insert("share".into(), m.share.into());
                    toml::Value::Table(e)
                })
                .collect();
            t.insert("mix".into(), toml::Value::Array(m));
        }
        root.insert("traffic".into(), t.into());
        let mut g = toml::Table::new();
        g.insert("kind".into(), p.ingress.name().into());
        flowtable::write(&p.table, TableKeys::ROUTER, &mut g);
        if p.ingress == IngressKind::FqCodel {
            crate::scenario::shaper::write_fq_codel(&p.fq_codel, &mut g);
        }
        root.insert("ingress".into(), g.into());
        root.insert("processing".into(), write_processing(&p.processing).into());
        let mut q = toml::Table::new();
        q.insert("subsystem".into(), p.qmem.subsystem.map_or("ideal", |s| s.label()).into());
        q.insert("entries".into(), (p.qmem.entries as i64).into());
        q.insert("dc_lines".into(), (p.qmem.dc_lines as i64).into());
        q.insert("dc_ways".into(), (p.qmem.dc_ways as i64).into());
        q.insert("memory_refs_per_ns".into(), p.qmem.memory_refs_per_ns.into());
        root.insert("queue_memory".into(), q.into());
        let sh = &p.shaping;
        let mut s = toml::Table::new();
        self.bucket.write(ROUTER_BUCKET_KEYS, &mut s);
        match sh.kind {
            ShaperKind::None => {
                s.insert("shaper".into(), "none".into());
            }
            ShaperKind::Event { locked_bytes, tick_shift, .. } => {
                s.insert("shaper".into(), "event".into());
                s.insert("locked".into(), fmt_size(locked_bytes).into());
                s.insert("tick_shift".into(), (tick_shift as i64).into());
            }
            ShaperKind::Periodic { period } => {
                s.insert("shaper".into(), "periodic".into());
                s.insert("period".into(), period.to_string().into());
            }
        }
        s.insert("flow_queues".into(), (sh.flow_queues as i64).into());
        s.insert("buffer".into(), fmt_size(sh.buffer_bytes).into());
        crate::scenario::shaper::write_aqm(sh.aqm.as_ref(), &mut s);
        root.insert("shaping".into(), s.into());
        let mut l = toml::Table::new();
        l.insert("rate".into(), p.link_rate.to_string().into());
        l.insert("quantum".into(), fmt_size(p.quantum as u64).into());
        l.insert("ahead".into(), (p.link_ahead as i64).into());
        root.insert("link".into(), l.into());
        let mut st = toml::Table::new();
        crate::scenario::stats::write(&p.stats, &mut st);
        root.insert("stats".into(), st.into());
        root.insert("services".into(), write_services(&p.services));
        self.output.write(root);
    }
}

/// `[[services]]` written back, every default filled in (the router's and `npqos live`'s).
pub(crate) fn write_services(services: &[ServiceParams]) -> toml::Value {
    let services = services
        .iter()
        .map(|s| {
            let mut t = toml::Table::new();
            t.insert("name".into(), s.name.clone().into());
            write_rule(&s.rule, &mut t);
            t.insert("tolerance".into(), s.tolerance.to_string().into());
            t.insert("cost_alpha".into(), fmt_fine_duration(s.cost_alpha_ns).into());
            t.insert("cost_beta".into(), fmt_fine_duration(s.cost_beta_ns).into());
            t.insert("variation".into(), s.variation.into());
            t.insert("guarantee".into(), s.guarantee.into());
            if let Some(r) = s.rate {
                t.insert("rate".into(), r.to_string().into());
                let per = match (s.per_flow, s.host) {
                    (false, _) => "class",
                    (true, None) => "flow",
                    (true, Some(Host::Src)) => "src",
                    (true, Some(Host::Dst)) => "dst",
                };
                t.insert("rate_per".into(), per.into());
            }
            if s.ecn {
                t.insert("ecn".into(), true.into());
            }
            if let Some(f) = &s.function {
                let mut x = toml::Table::new();
                x.insert("kind".into(), f.kind.to_string().into());
                x.insert("window".into(), Duration::from_nanos(f.window_ns).to_string().into());
                x.insert("threshold".into(), (f.threshold as i64).into());
                x.insert("max_tracked".into(), (f.max_tracked as i64).into());
                t.insert("function".into(), x.into());
            }
            toml::Value::Table(t)
        })
        .collect();
    toml::Value::Array(services)
}

/// `model = "router"`: the five mechanisms composed.
pub struct RouterScenario;

impl ScenarioModel for RouterScenario {
    fn name(&self) -> &'static str {
        "router"
    }
    fn description(&self) -> &'static str {
        "the five mechanisms in one pipeline: classification into services, dqs / per-flow / hashed ingress queues, processors allocated by an everest policy or LAP with EFQ / SFQ / WF2Q+ / DRR / FCFS within a service, a qcache queue memory, kim or periodic egress shaping, a DRR link; synthetic or trace traffic (docs/router.md)"
    }
    fn tables(&self) -> &'static [&'static str] {
        &[
            "model",
            "run",
            "router",
            "traffic",
            "ingress",
            "processing",
            "queue_memory",
            "shaping",
            "link",
            "stats",
            "services",
            "output",
        ]
    }
    fn read(&self, root: &toml::Table, base_dir: &Path, probs: &mut Vec<Problem>) -> Box<dyn ModelSpec> {
        Box::new(read(root, base_dir, probs))
    }
}

impl ModelSpec for RouterSpec {
    fn resolved(&self, root: &mut toml::Table) {
        self.to_toml(root)
    }
    fn memory(&self, _: Duration, _: Duration) -> MemoryEstimate {
        MemoryEstimate {
            bytes: self.estimate_memory(),
            key: "ingress.queues",
            value: format!("{:?}", self.params.ingress),
            what: "per ingress queue its scheduler state in every service, per output queue its bucket and FIFO, the block buffer, the flows or the trace",
            remedy: "lower ingress.queues, shaping.flow_queues or ingress.blocks",
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
        run_scenario(sc, seed, threads, interrupt, progress).map_err(|e| match e {
            super::RouterError::Trace(t) => ModelError::Trace(t),
            super::RouterError::Config(c) => ModelError::Bad(c),
            other => ModelError::Internal(Box::new(other)),
        })
    }
}

/// Runs one replication of a `model = "router"` scenario with `seed` on `threads` threads
/// (two or more: the arrivals are made on a second one; the result does not change).
pub fn run_scenario(
    sc: &Scenario,
    seed: u64,
    threads: usize,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> Result<RunResult, super::RouterError> {
    let Some(r) = sc.spec_as::<RouterSpec>() else {
        return Err(super::RouterError::Config("not a model = \"router\" scenario".into()));
    };
    let mut params = r.params.clone();
    params.duration = sc.duration;
    params.sample_every = sc.sample_every();
    let traffic = r.traffic(sc.duration)?;
    let end = sc.duration.as_nanos() as f64;
    let capture = match (&r.output.pcap, &sc.capture_dir) {
        (ports, _) if ports.is_empty() => None,
        (_, None) => {
            return Err(super::RouterError::Config(
                "output.pcap writes into the results directory: run the scenario with npqos run (or give the \
                 scenario a capture directory)"
                    .into(),
            ))
        }
        (ports, Some(dir)) => Some(super::CaptureTo {
            dir: dir.clone(),
            // One replication: pcap/<port>.pcapng; several: pcap/rep<i>.<port>.pcapng.
            prefix: match sc.replications {
                1 => String::new(),
                _ => format!("rep{}.", seed.wrapping_sub(sc.seed)),
            },
            ports: ports.clone(),
            limit: r.output.pcap_limit,
            snaplen: r.output.pcap_snaplen,
        }),
    };
    let mut prog = |f: f64| progress(Instant::from_nanos((f * end) as u64));
    super::run_captured(&params, &traffic, seed, threads, interrupt, &mut prog, capture.as_ref())
}
