//! `model = "kim"`: the scenario's parameters for the kim model, and the scenario model.

use super::*;

impl KimParams {
    /// The parameters of a validated `model = "kim"` scenario (reads size traces if any).
    pub fn from_scenario(sc: &crate::scenario::Scenario) -> Result<KimParams, KimRunError> {
        use crate::scenario::Traffic;
        let Some(crate::scenario::KimSpec { link: l, shaper: sh }) = sc.spec_as() else {
            return Err(KimRunError::NotKim("no [shaper] table"));
        };
        let Traffic::Synthetic { overload, sizes, arrivals, .. } = &l.traffic else {
            return Err(KimRunError::NotKim("traffic.source must be \"synthetic\""));
        };
        Ok(KimParams {
            queues: l.queues,
            link: l.link_rate,
            cores: sh.cores,
            sizes: sizes.build()?,
            arrivals: arrivals.clone(),
            overload: *overload,
            alpha_bytes: sh.bucket.alpha,
            cap_bytes: sh.bucket.cap,
            buffer_bytes: l.buffer,
            fill: match sh.fill_period {
                Some(p) => Fill::Periodic(p),
                None => Fill::EventDriven,
            },
            timer: sh.bucket.timer,
            while_disabled: if sh.queue_while_disabled { WhileDisabled::Queue } else { WhileDisabled::Drop },
            conformance: sh.bucket.conformance,
            adaptive: sh.bucket.adaptive,
            duration: sc.duration,
            warmup: sc.warmup,
            link_mode: if sh.shared_link { LinkMode::Shared } else { LinkMode::Ideal },
            sample_every: Some(sc.sample_every()),
            cache: sh.cache.then_some(CacheGeometry::KIM),
            max_events: sc.max_events,
            shards: sh.shards,
            ..KimParams::paper(l.queues)
        })
    }
}

/// Runs one replication of a `model = "kim"` scenario on up to `threads` threads (its shards
/// run in parallel; the result does not depend on `threads`).
pub fn run_scenario(
    sc: &crate::scenario::Scenario,
    seed: u64,
    threads: usize,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> Result<RunResult, KimRunError> {
    run_on(&KimParams::from_scenario(sc)?, seed, threads, interrupt, progress)
}

/// `model = "kim"`: the link model's queues shaped by token buckets (`[shaper]`).
pub struct KimScenario;

impl crate::scenario::ScenarioModel for KimScenario {
    fn name(&self) -> &'static str {
        "kim"
    }
    fn description(&self) -> &'static str {
        "N token-bucket-shaped queues, timers on per-core reschedule heaps (event-driven) or periodic fill, ideal or shared link (docs/kim.md)"
    }
    fn tables(&self) -> &'static [&'static str] {
        &["model", "run", "link", "queues", "traffic", "shaper"]
    }
    fn own_tables(&self) -> &'static [&'static str] {
        &["shaper"]
    }
    fn read(
        &self,
        root: &toml::Table,
        base_dir: &std::path::Path,
        probs: &mut Vec<crate::scenario::Problem>,
    ) -> Box<dyn crate::scenario::ModelSpec> {
        let (link, shaper) = crate::scenario::read_link(root, "kim", base_dir, probs);
        Box::new(crate::scenario::KimSpec { link, shaper: shaper.expect("read with model = \"kim\"") })
    }
}

impl crate::scenario::ModelSpec for crate::scenario::KimSpec {
    fn resolved(&self, root: &mut toml::Table) {
        crate::scenario::link_to_toml(&self.link, Some(&self.shaper), root)
    }
    fn memory(&self, duration: Duration, sample: Duration) -> crate::scenario::MemoryEstimate {
        self.link.memory_estimate(Some(&self.shaper), duration, sample)
    }
    fn run(
        &self,
        sc: &crate::scenario::Scenario,
        seed: u64,
        threads: usize,
        interrupt: Option<Arc<AtomicBool>>,
        progress: crate::scenario::Progress<'_>,
    ) -> Result<RunResult, crate::scenario::ModelError> {
        use crate::scenario::ModelError;
        run_scenario(sc, seed, threads, interrupt, progress).map_err(|e| match e {
            KimRunError::Trace(t) => ModelError::Trace(t),
            other => ModelError::Bad(other.to_string()),
        })
    }
}
