//! `model = "dqs"` scenarios: your traffic through a dqs flow table (AFM over `M` slots, a pool
//! of physical queues, a block buffer) and one DRR link at a given offered load (docs/dqs.md,
//! "Scenario files"). The question it answers: how many physical queues, how much AFM memory
//! and how many lookup cycles does my traffic need?
//!
//! ```toml
//! model = "dqs"
//! [run]
//! duration = "500ms"          # arrivals stop here (synthetic and trace)
//! [table]
//! slots = 256                 # AFM slots M
//! hash = "h3"                 # "h3" (the paper's hardware hash) or "foldhash"
//! queues = 65536              # physical queues N in the pool
//! blocks = 1048576            # buffer blocks
//! block_size = "64B"
//! quantum = "1536B"           # DRR quantum
//! on_exhausted = "drop"       # no free queue: "drop" the packet or map it to a "shared" queue
//! [link]
//! load = 0.95                 # link capacity = the traffic's mean rate / load
//! [traffic]
//! source = "synthetic"        # or "trace"
//! flows = 5000                # synthetic: flows in progress at every moment
//! mean_packets = 10.0         # Pareto packets per flow (mean)
//! pareto_shape = 1.2
//! mean_gap = "10ms"           # exponential gap between a flow's packets
//! sizes = "imix"              # "imix" (kim Table I) or "constant" (with size)
//! files = ["a.pcap"]          # trace: captures, each from time 0, gaps capped at max_gap
//! flow_multiply = 4           # trace: overlaid copies, each rotated in time, flows kept apart
//! time_scale = 1.0            # trace: speed-up factor
//! max_gap = "1s"
//! lenient = true              # trace: skip corrupt records
//! ```

use crate::engine::{RunLimits, StopReason};
use crate::results::{Histogram, RunResult};
use crate::rng::RngStreams;
use crate::scenario::flowtable::{self, TableKeys};
use crate::scenario::{MemoryEstimate, ModelError, ModelSpec, Problem, Progress, Reader, Scenario, ScenarioModel};
use crate::trace::corpus::Corpus;
use npqos_core::flowmap::DqsConfig;
use npqos_core::{Duration, Instant};
use rand::Rng;
use serde_json::json;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::{run_link_limited, Arrival, DqsLinkParams, SyntheticFlows};

/// The dqs part of a scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct DqsSpec {
    /// `[table]`, hash seed 0 (a run draws its own from the run's seed: [`DqsSpec::table`]).
    pub table: DqsConfig,
    pub load: f64,
    pub traffic: DqsTraffic,
}

/// `[traffic]`: the shared flow-traffic reader's (`scenario::flows`).
pub type DqsTraffic = crate::scenario::flows::FlowTraffic;

/// Reads `[table]`, `[link]` and `[traffic]`, recording every problem.
pub(crate) fn read(root: &toml::Table, base_dir: &Path, probs: &mut Vec<Problem>) -> DqsSpec {
    let mut t = Reader::new(root, "table", probs);
    let table = flowtable::read(&mut t, TableKeys::DQS, probs);
    t.finish(probs);
    let mut l = Reader::new(root, "link", probs);
    let load = l.float("load", 0.95, probs, |v| v > 0.0 && v <= 100.0, "greater than 0 and at most 100");
    l.finish(probs);

    let mut r = Reader::new(root, "traffic", probs);
    let traffic = DqsTraffic::read(&mut r, base_dir, 5_000, &[], probs);
    r.finish(probs);
    DqsSpec { table, load, traffic }
}

impl DqsSpec {
    /// The flow table with hash seed `seed`.
    pub fn table(&self, seed: u64) -> DqsConfig {
        flowtable::with_seed(&self.table, seed)
    }

    /// The synthetic workload for `duration` of arrivals.
    fn synthetic(&self, duration: Duration) -> Option<SyntheticFlows> {
        self.traffic.synthetic(duration)
    }

    /// Upper estimate of one replication's memory: the table's queue records and block links,
    /// a tree node per active flow, and (trace) the corpus in memory, about its files' size.
    pub fn estimate_memory(&self) -> u128 {
        let t = &self.table;
        let table = t.queues as u128 * 48 + t.blocks as u128 * 8 + t.slots as u128 * 8;
        let traffic = self.traffic.estimate_memory(96);
        table + traffic + (1 << 20)
    }

    pub(crate) fn to_toml(&self, root: &mut toml::Table) {
        let mut t = toml::Table::new();
        flowtable::write(&self.table, TableKeys::DQS, &mut t);
        root.insert("table".into(), t.into());
        let mut l = toml::Table::new();
        l.insert("load".into(), self.load.into());
        root.insert("link".into(), l.into());
        let mut r = toml::Table::new();
        self.traffic.write(&mut r);
        root.insert("traffic".into(), r.into());
    }
}

/// `model = "dqs"`: flows through a dqs flow table and a DRR link.
pub struct DqsScenario;

impl ScenarioModel for DqsScenario {
    fn name(&self) -> &'static str {
        "dqs"
    }
    fn description(&self) -> &'static str {
        "your flows through a dqs flow table (AFM over M slots, pooled physical queues, block buffer) and a DRR link: queues, AFM memory and lookup cycles needed; synthetic or trace traffic (docs/dqs.md)"
    }
    fn tables(&self) -> &'static [&'static str] {
        &["model", "run", "table", "link", "traffic"]
    }
    fn read(&self, root: &toml::Table, base_dir: &Path, probs: &mut Vec<Problem>) -> Box<dyn ModelSpec> {
        Box::new(read(root, base_dir, probs))
    }
}

impl ModelSpec for DqsSpec {
    fn resolved(&self, root: &mut toml::Table) {
        self.to_toml(root)
    }
    fn memory(&self, _: Duration, _: Duration) -> MemoryEstimate {
        MemoryEstimate {
            bytes: self.estimate_memory(),
            key: "table.queues",
            value: self.table.queues.to_string(),
            what: "the flow table's queues and blocks, active flows, a trace in memory",
            remedy: "lower table.queues or table.blocks",
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
        run_scenario(sc, seed, interrupt, progress).map_err(ModelError::from)
    }
}

/// Runs one replication of a `model = "dqs"` scenario with `seed`: arrivals for `run.duration`
/// through the flow table and the link. Fails only on trace input errors.
pub fn run_scenario(
    sc: &Scenario,
    seed: u64,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> Result<RunResult, crate::trace::TraceError> {
    let Some(d) = sc.spec_as::<DqsSpec>() else { panic!("not a dqs scenario: model = {:?}", sc.model()) };
    let streams = RngStreams::new(seed);
    let p = DqsLinkParams {
        table: d.table(streams.stream("dqs.h3", 0).random()),
        load: d.load,
        record_requests: false,
        record_departures: false,
    };
    let limits =
        RunLimits { until: Instant::MAX, max_events: if sc.max_events == 0 { u64::MAX } else { sc.max_events } };
    let end = sc.duration.as_nanos();
    let mut report = |f: f64| progress(Instant::from_nanos((f * end as f64) as u64));
    let (r, stop) = match &d.traffic {
        DqsTraffic::Trace { files, flow_multiply, time_scale, max_gap, lenient } => {
            let corpus = Corpus::load(files, *lenient, *max_gap)?;
            let mut rng = streams.stream("dqs.trace", 0);
            let it = corpus
                .overlay(*flow_multiply, *time_scale, &mut rng)
                .map(|c| Arrival { ts: c.ts, len: c.len, flow: c.flow })
                .take_while(|a| a.ts < end);
            let expected = (corpus.packets.len() as u64 * *flow_multiply as u64).max(1);
            run_link_limited(
                &p,
                it,
                corpus.mean_rate_bps(*flow_multiply, *time_scale),
                expected,
                limits,
                interrupt,
                &mut report,
            )
        }
        DqsTraffic::Synthetic { .. } => {
            let s = d.synthetic(sc.duration).expect("synthetic traffic");
            let g = s.generator(streams.stream("dqs.flows", 0));
            run_link_limited(&p, g, s.mean_rate_bps(), s.expected_packets(), limits, interrupt, &mut report)
        }
    };
    let mut run = RunResult {
        complete: matches!(stop, StopReason::Drained),
        stop_reason: format!("{stop:?}").to_lowercase(),
        ..Default::default()
    };
    run.params.insert("slots".into(), json!(d.table.slots));
    run.sim_time_ns = r.span_ns;
    let n = r.samples.max(1) as f64;
    for (name, value, unit) in [
        ("packets", r.packets as f64, "packets"),
        ("offered", r.offered_bps * 1e-9, "Gbps"),
        ("capacity", r.capacity_bps * 1e-9, "Gbps"),
        ("peak_10ms", r.peak_10ms_bps * 1e-9, "Gbps"),
        ("dropped_buffer_full", r.dropped_buffer_full as f64, "packets"),
        ("dropped_no_queue", r.dropped_no_queue as f64, "packets"),
        ("flows_activated", r.flows_activated as f64, "flows"),
        ("active_flows_mean", r.sum_active / n, "flows"),
        ("active_flows_max", r.max_active as f64, "flows"),
        ("nonempty_slots_mean", r.sum_nonempty / n, "slots"),
        ("shared_slots_mean", r.sum_multi / n, "slots"),
        ("worst_slot", r.worst_slot as f64, "flows"),
        ("queues_max", r.max_queues as f64, "queues"),
        ("queues_mean", r.mean_queues, "queues"),
        ("afm_memory", r.afm_memory_bytes as f64, "B"),
        ("cycles_mean", r.mean_cycles(), "cycles"),
        ("search_compares", r.search.mean_measured(), "nodes"),
        ("search_compares_theorem1", r.search.mean_paper(), "nodes"),
        ("search_compares_exact", r.search.mean_exact(), "nodes"),
        ("update_compares", r.update.mean_measured(), "nodes"),
        ("update_compares_theorem2", r.update.mean_paper(), "nodes"),
        ("update_compares_exact", r.update.mean_exact(), "nodes"),
    ] {
        run.scalar(name, value, unit);
    }
    run.histograms.push(Histogram {
        name: "cycles".into(),
        unit: "cycles".into(),
        bins: r
            .cycles_hist
            .iter()
            .enumerate()
            .filter(|(_, &k)| k > 0)
            .map(|(c, &k)| (c as f64, c as f64 + 1.0, k))
            .collect(),
    });
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::testing::{assert_names, assert_round_trips, example, parse};

    /// Defaults; every example and resolved scenario parses back to itself.
    #[test]
    fn defaults_and_round_trip() {
        let sc = parse("model = \"dqs\"\n").unwrap();
        let d = sc.spec_as::<DqsSpec>().expect("dqs");
        assert_eq!((d.table.slots, d.table.queues, d.load), (256, 1 << 16, 0.95));
        assert_round_trips([
            example("dqs-small"),
            example("dqs-paper"),
            "model = \"dqs\"\n[table]\nhash = \"foldhash\"\non_exhausted = \"shared\"\nblock_size = \"128B\"\n[traffic]\nsizes = \"constant\"\nsize = \"576B\"\n".into(),
        ]);
    }

    /// Every problem is reported with its key path.
    #[test]
    fn problems_name_their_keys() {
        assert_names(
            "model = \"dqs\"\n[table]\nslots = 0\nhash = \"crc\"\nblock_size = \"1B\"\n[link]\nload = 0\n[traffic]\npareto_shape = 1.0\nmean_gap = \"0s\"\nsize = \"64B\"\nfiles = [\"x.pcap\"]\n",
            &[
                "table.slots",
                "table.hash",
                "table.block_size",
                "link.load",
                "traffic.pareto_shape",
                "traffic.mean_gap",
                "traffic.size",
                "traffic.files",
            ],
        );
        assert_names(
            "model = \"dqs\"\n[traffic]\nsource = \"trace\"\nfiles = [\"no-such.pcap\"]\nflows = 3\n",
            &["traffic.files[0]", "traffic.flows"],
        );
    }

    /// The small example is the dqs-table3 quick synthetic point (same workload, same seed
    /// streams): the scenario path and the experiment path build the same run.
    #[test]
    fn small_example_is_the_reproduction_point() {
        let sc = parse(&example("dqs-small")).unwrap();
        let r = run_scenario(&sc, 1, None, &mut |_| {}).unwrap();
        let out = crate::experiments::quick_output("dqs-table3");
        let exp = out.runs.iter().find(|x| x.label == "synthetic").expect("synthetic run");
        assert_eq!(r.get("packets"), exp.get("packets"));
        assert_eq!(r.get("queues_max"), exp.get("max_queues"));
        assert_eq!(r.get("queues_mean"), exp.get("mean_queues"));
        assert_eq!(r.get("cycles_mean"), exp.get("overall_cycles"));
    }
}
