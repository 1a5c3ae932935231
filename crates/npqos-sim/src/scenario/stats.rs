//! The flow and class counters' keys (`[stats]` of the router; docs/pipeline.md, "Flow and
//! class counters"): one reader and one writer.
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

/// Reads `flows` and `heavy_flows` from `t`: (exact, heavy).
pub(crate) fn read(t: &mut Reader<'_>, probs: &mut Vec<Problem>) -> (u32, u32) {
    let flows = t.int("flows", DEFAULT_FLOWS as i64, 0, 1 << 24, probs) as u32;
    let heavy = t.int("heavy_flows", DEFAULT_HEAVY as i64, 0, 1 << 20, probs) as u32;
    (flows, heavy)
}

/// Writes what [`read`] reads.
pub(crate) fn write(flows: u32, heavy: u32, t: &mut toml::Table) {
    t.insert("flows".into(), i64::from(flows).into());
    t.insert("heavy_flows".into(), i64::from(heavy).into());
}
