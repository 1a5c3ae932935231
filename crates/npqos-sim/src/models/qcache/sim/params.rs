//! What one run of the qcache simulation takes and gives: its configuration ([`SimConfig`],
//! the paper's by default), its errors and its measurements.

use npqos_core::queues::memory::Refs;
use npqos_core::queues::timing::{Subsystem, Timing, TABLE1};
use thiserror::Error;

/// Parameters of one run.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct SimConfig {
    pub subsystem: Subsystem,
    pub threads: u32,
    pub timing: Timing,
    /// Memory clock; one reference starts per cycle.
    pub memory_mhz: f64,
    /// Threads sharing one processor's pipeline; 0 = none.
    pub threads_per_processor: u32,
    /// sqc / qc fully associative entries.
    pub entries: u32,
    /// qc queuing engines.
    pub engines: u32,
    /// qc evictions and allocations: one per this many ns.
    pub alloc_cycle_ns: f64,
    /// dc lines (one word each) and ways.
    pub dc_lines: u32,
    pub dc_ways: u32,
    /// Operations completed before measuring (cache and queue warm-up).
    pub warmup_ops: u64,
    /// Operations measured.
    pub ops: u64,
}

impl SimConfig {
    /// The paper's configuration (Table 1, section 4.1.1) for `sub` with `threads` threads.
    pub fn paper(sub: Subsystem, threads: u32, ops: u64) -> Self {
        SimConfig {
            subsystem: sub,
            threads,
            timing: TABLE1,
            memory_mhz: 200.0,
            threads_per_processor: 0,
            entries: 32,
            engines: 32,
            alloc_cycle_ns: 1.0,
            dc_lines: 128,
            dc_ways: 2,
            warmup_ops: ops / 10,
            ops,
        }
    }
}

/// A run that cannot be done, or went wrong.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum SimError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("no event pending after {0} operations: the model stalled")]
    Stalled(u64),
    #[error("queue {queue}: {what} (operation {op})")]
    Order { queue: u32, op: u64, what: String },
    #[error("operation {op}: the queue mechanism refused a call: {error}")]
    Mechanism { op: u64, error: npqos_core::Error },
}

/// What a run measured (over the operations after the warm-up).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SimStats {
    pub ops: u64,
    /// Engine events executed (the whole run).
    #[serde(skip)]
    pub events: u64,
    pub sim_time_ns: f64,
    /// Operations per microsecond = M ops/s.
    pub throughput_mops: f64,
    /// Descriptor hit rate (nc: 0).
    pub hit_rate: f64,
    /// External-memory references per operation, dirty write-backs included.
    pub offchip_per_op: f64,
    pub writebacks_per_op: f64,
    /// Bus messages and words per operation.
    pub bus_msgs_per_op: f64,
    pub bus_words_per_op: f64,
    /// Busy fraction of the memory port and of the bus.
    pub memory_util: f64,
    pub bus_util: f64,
    /// Mean time from taking an operation to its end, ns: enqueue, dequeue.
    pub mean_latency_ns: [f64; 2],
    pub p99_latency_ns: f64,
    /// Mean time an operation waited for its queue (lock, or qc engine), ns.
    pub mean_queue_wait_ns: f64,
    /// dc: most read misses outstanding at once (MSHRs in use).
    pub peak_mshrs: u32,
    /// Table 2 references of the whole run (warm-up included) and operations applied to the
    /// queue memory and checked (those in flight at the end included).
    pub refs: RefCounts,
    pub ops_checked: u64,
}

/// [`Refs`] as a serializable record.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct RefCounts {
    pub desc_reads: u64,
    pub desc_writes: u64,
    pub link_reads: u64,
    pub link_writes: u64,
}

impl From<Refs> for RefCounts {
    fn from(r: Refs) -> Self {
        RefCounts {
            desc_reads: r.desc_reads,
            desc_writes: r.desc_writes,
            link_reads: r.link_reads,
            link_writes: r.link_writes,
        }
    }
}
