//! The flow and class counters' keys (`[stats]` of the router and of `npqos live`;
//! docs/pipeline.md, "Flow and class counters"): one reader and one writer.
//!
//! ```toml
//! flows = 4096          # flows counted exactly, the first seen
//! heavy_flows = 0       # past them, the heaviest by offered bytes (Filtered Space-Saving)
//! ```

use super::{Problem, Reader};

/// Flows counted exactly by default: 4,096 rows of counters (about 100 B each with their
/// index entry) stay in a core's cache beside the pipeline's state.
pub const DEFAULT_FLOWS: u32 = 4096;
/// Heavy flows past the exact table by default: none, because the sketch costs every packet
/// past the table a hash, two lookups and a counter (about 7% of router-100g's wall time with
/// 1e6 flows, docs/PERFORMANCE.md); `heavy_flows = 1024` turns it on.
pub const DEFAULT_HEAVY: u32 = 0;

/// The flow and class counters' memory bound (`[stats]`, docs/pipeline.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatsParams {
    /// Flows counted exactly (the first seen).
    pub flows: u32,
    /// Heaviest flows past the exact table found by the sketch.
    pub heavy_flows: u32,
}

impl Default for StatsParams {
    fn default() -> Self {
        StatsParams { flows: DEFAULT_FLOWS, heavy_flows: DEFAULT_HEAVY }
    }
}

impl StatsParams {
    /// Reads `flows` and `heavy_flows` from `t`.
    pub(crate) fn read(t: &mut Reader<'_>, probs: &mut Vec<Problem>) -> Self {
        let flows = t.int("flows", DEFAULT_FLOWS as i64, 0, 1 << 24, probs) as u32;
        let heavy_flows = t.int("heavy_flows", DEFAULT_HEAVY as i64, 0, 1 << 20, probs) as u32;
        StatsParams { flows, heavy_flows }
    }

    /// Writes what [`Self::read`] reads.
    pub(crate) fn write(&self, t: &mut toml::Table) {
        t.insert("flows".into(), i64::from(self.flows).into());
        t.insert("heavy_flows".into(), i64::from(self.heavy_flows).into());
    }
}
