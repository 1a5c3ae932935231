//! Runnable models. Each takes a validated [`crate::scenario::Scenario`] and a seed and
//! returns a [`crate::results::RunResult`].
//!
//! * [`link`]: N queues with tail-drop buffers sharing one link under DRR; synthetic or
//!   trace-driven input. The foundation's demo model and the `shared` link mode the kim
//!   experiments will reuse.
//! * [`dqs`]: the dqs link (AFM + DRR) and processing models.
//! * [`everest`]: processors shared by six NAT-PT services under an allocation policy.
//! * [`predictive`]: flows with reserved processing shares under SFQ / EFQ / WF2Q+ (section 4).
//! * [`predictive::lap`]: a backlogged stream on processors with one-application caches under LAP / FCFS /
//!   T-Opt (section 5).
//! * [`predictive::efq_lap`]: the reserved flows on processors with caches, swinging in and out of overload,
//!   under EFQ, EFQ preferring warm processors, LAP, and the switching combination (section 6).
//! * [`qcache`]: threads enqueueing and dequeueing through nc / dc / sqc / qc on the Table 1
//!   chip multiprocessor, under the Table 4 workloads or a trace hashed to queues.
//! * [`router`]: the five mechanisms in one pipeline (classification, dqs ingress, everest
//!   allocation with fair queuing, qcache queue memory, kim shaping, a DRR link).

pub mod dqs;
pub mod everest;
pub mod kim;
pub mod link;
pub mod predictive;
pub mod qcache;
pub mod router;

use crate::scenario::{Problems, Scenario, ScenarioModel};
use std::path::Path;

/// Every scenario model, in the order `npqos models` lists them; the first is the default when
/// a scenario names none. `npqos run`, `sweep`, `models`, the Python package and the scenario
/// fuzz target all read this list. A new model is its own file (a [`ScenarioModel`] and its
/// [`crate::scenario::ModelSpec`]) plus one line here.
pub static MODELS: &[&dyn ScenarioModel] = &[
    &link::LinkScenario,
    &kim::KimScenario,
    &dqs::scenario::DqsScenario,
    &predictive::scenario::FqScenario,
    &predictive::scenario::LapScenario,
    &predictive::scenario::EfqLapScenario,
    &qcache::scenario::QcacheScenario,
    &everest::scenario::EverestScenario,
    &router::scenario::RouterScenario,
];

/// The model named `name`, if any.
pub fn named(name: &str) -> Option<&'static dyn ScenarioModel> {
    MODELS.iter().copied().find(|m| m.name() == name)
}

impl Scenario {
    /// Parses and validates scenario text as a scenario of one of [`MODELS`]. `file` names the
    /// source in messages; relative trace paths are resolved against `base_dir`.
    pub fn parse(text: &str, file: &str, base_dir: &Path) -> Result<Scenario, Problems> {
        Scenario::parse_in(MODELS, text, file, base_dir)
    }

    /// Validates an already-parsed table as a scenario of one of [`MODELS`] (used by sweeps
    /// after `--set` overrides).
    pub fn from_table(root: &toml::Table, file: &str, base_dir: &Path) -> Result<Scenario, Problems> {
        Scenario::from_table_in(MODELS, root, file, base_dir)
    }
}
