//! What a scenario model is: the two traits every `model = "<name>"` implements, and the error
//! its run returns.
//!
//! A model is one value implementing [`ScenarioModel`] (its name, one-line description, the
//! tables it reads and the reader) and one type implementing [`ModelSpec`] (what the reader
//! returns: the validated tables with their defaults filled in, written back as the resolved
//! form, sized before anything is allocated, and run). The list of models lives above this
//! layer (`crate::models::MODELS`); `scenario/` imports no model, so adding one is its own file
//! plus one line in that list. Dispatch goes through the trait: there is no name matched as a
//! string anywhere else, and no fallback.

use super::{Problem, Scenario};
use crate::results::RunResult;
use crate::trace::TraceError;
use npqos_core::{Duration, Instant};
use std::any::Any;
use std::fmt;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// A scenario model: what `npqos models` lists and `model = "<name>"` selects.
pub trait ScenarioModel: Sync {
    /// The `model = ` name.
    fn name(&self) -> &'static str;
    /// One line for `npqos models` (ends with the doc page).
    fn description(&self) -> &'static str;
    /// The top-level keys a scenario of this model may have (`model`, `run` and its tables).
    fn tables(&self) -> &'static [&'static str];
    /// Tables no other model reads: a scenario of another model that has one is told which
    /// model it belongs to instead of "unknown key".
    fn own_tables(&self) -> &'static [&'static str] {
        &[]
    }
    /// Reads this model's tables from `root`, recording every problem (the caller has read
    /// `[run]` and `[meta]` and checked the top-level keys against [`Self::tables`]).
    fn read(&self, root: &toml::Table, base_dir: &Path, probs: &mut Vec<Problem>) -> Box<dyn ModelSpec>;
}

/// One replication's estimated memory, and what to say when it exceeds `run.memory_budget`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryEstimate {
    /// Upper estimate in bytes.
    pub bytes: u128,
    /// The key the problem names, and its value as written.
    pub key: &'static str,
    pub value: String,
    /// What the estimate counts.
    pub what: &'static str,
    /// What the user can lower.
    pub remedy: &'static str,
}

/// Why a model's run failed: bad input found only when running (exit 2), a trace that cannot
/// be read (exit 2, with the file and offset), or a defect (exit 1).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A configuration the mechanism refuses, found only when building it.
    #[error("{0}")]
    Bad(String),
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// An internal failure (a broken invariant): a defect, not the user's input.
    #[error(transparent)]
    Internal(Box<dyn std::error::Error + Send + Sync>),
}

/// The progress callback of a run: told the simulated time reached.
pub type Progress<'a> = &'a mut dyn FnMut(Instant);

/// A model's validated tables: the part of a [`Scenario`] that depends on `model =`.
pub trait ModelSpec: SpecObject + fmt::Debug + Send + Sync + 'static {
    /// Writes this model's tables into `root`, every default filled in (its part of
    /// `scenario.resolved.toml`).
    fn resolved(&self, root: &mut toml::Table);
    /// One replication's estimated memory for a run of `duration` sampled every `sample`.
    fn memory(&self, duration: Duration, sample: Duration) -> MemoryEstimate;
    /// Whether `run.duration` and `run.warmup` apply (false for models whose run length is
    /// their stream's, such as lap and qcache).
    fn has_run_length(&self) -> bool {
        true
    }
    /// Runs one replication of `sc` (whose spec is `self`) with `seed` on up to `threads`
    /// threads; the result does not depend on `threads`. Stops early, marking the result
    /// incomplete, when `interrupt` is raised.
    fn run(
        &self,
        sc: &Scenario,
        seed: u64,
        threads: usize,
        interrupt: Option<Arc<AtomicBool>>,
        progress: Progress<'_>,
    ) -> Result<RunResult, ModelError>;
}

/// Object plumbing every [`ModelSpec`] gets for free (a blanket implementation): downcasting,
/// cloning and comparing behind `Box<dyn ModelSpec>`.
pub trait SpecObject {
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
    fn clone_box(&self) -> Box<dyn ModelSpec>;
    fn eq_dyn(&self, other: &dyn ModelSpec) -> bool;
}

impl<T: ModelSpec + Clone + PartialEq> SpecObject for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn clone_box(&self) -> Box<dyn ModelSpec> {
        Box::new(self.clone())
    }
    fn eq_dyn(&self, other: &dyn ModelSpec) -> bool {
        other.as_any().downcast_ref::<T>().is_some_and(|o| o == self)
    }
}

impl Clone for Box<dyn ModelSpec> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

impl PartialEq for Box<dyn ModelSpec> {
    fn eq(&self, other: &Self) -> bool {
        self.eq_dyn(other.as_ref())
    }
}
