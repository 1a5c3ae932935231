//! The flow and class counters' keys (`[stats]` of the router and of `npqos live`;
//! docs/pipeline.md, "Flow and class counters"): one reader and one writer.
//!
//! ```toml
//! flows = 4096          # flows counted exactly, the first seen
//! heavy_flows = 0       # past them, the heaviest by offered bytes (Filtered Space-Saving)
//! ```

use super::{Problem, Reader};

pub use npqos_core::pipeline::stats::{StatsParams, DEFAULT_FLOWS, DEFAULT_HEAVY};

/// Reads `flows` and `heavy_flows` from `t`.
pub(crate) fn read(t: &mut Reader<'_>, probs: &mut Vec<Problem>) -> StatsParams {
    let flows = t.int("flows", DEFAULT_FLOWS as i64, 0, 1 << 24, probs) as u32;
    let heavy_flows = t.int("heavy_flows", DEFAULT_HEAVY as i64, 0, 1 << 20, probs) as u32;
    StatsParams { flows, heavy_flows }
}

/// Writes what [`read`] reads.
pub(crate) fn write(p: &StatsParams, t: &mut toml::Table) {
    t.insert("flows".into(), i64::from(p.flows).into());
    t.insert("heavy_flows".into(), i64::from(p.heavy_flows).into());
}
