//! The composed router (issue #17, docs/router.md): the five papers' mechanisms in one
//! pipeline on one packet stream, each stage swappable for its baseline.
//!
//! 1. traffic: a synthetic flow population ([`RouterTraffic::Synthetic`]) or a capture corpus;
//! 2. classification into services (`npqos_core::classify::Classifier`);
//! 3. ingress queueing ([`npqos_core::pipeline::Ingress`]): dqs, a per-flow table or hashed queues, over one
//!    block buffer;
//! 4. processing: `N_p` processors allocated among services by an everest `Allocator`, within
//!    a service the next packet by EFQ, SFQ, WF2Q+ (`FairQueue` over the ingress queues) or
//!    FCFS, on predicted costs `alpha + beta x length`, actual costs drawn around them;
//! 5. queue memory ([`npqos_core::pipeline::Qmem`]): every descriptor enqueue and dequeue through one
//!    qcache subsystem, or an ideal one;
//! 6. egress shaping: kim's event-driven shaper on the processors' heaps, periodic fill or
//!    none; Algorithm 1's send-then-pay or tbf's wait-for-tokens;
//! 7. the link: DRR over the eligible output queues at the link rate.
//!
//! [`pipeline`] holds stages 3 to 7 without a clock; [`run`] drives it on the engine
//! ([`driver`]) and checks conservation at the end.

pub(crate) mod arrivals;
mod driver;
mod output;
pub(crate) use npqos_core::pipeline::router as pipeline;
#[cfg(test)]
mod capture_tests;
#[cfg(test)]
mod codel_tests;
#[cfg(test)]
mod element_tests;
#[cfg(test)]
mod fq_codel_tests;
#[cfg(test)]
mod function_tests;
#[cfg(test)]
mod pipeline_tests;
pub mod scenario;
#[cfg(test)]
mod tests;

use crate::trace::corpus::Corpus;
use crate::workload::SizeDist;
pub use npqos_core::pipeline::{IngressKind, QmemParams};
pub use npqos_core::shaper::Conformance;
use npqos_core::Duration;
use std::sync::Arc;

pub use npqos_core::pipeline::router::{
    Allocation, Host, PipelineError, ProcessingParams, RouterParams, Scheduler, ServiceParams, ShaperKind,
    ShapingParams,
};
pub use npqos_core::pipeline::stats::StatsParams;

/// One entry of the synthetic traffic mix: flows of this protocol to this port, this share of
/// the flows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MixEntry {
    pub protocol: u8,
    pub port: u16,
    pub share: f64,
}

/// Where packets come from.
#[derive(Clone)]
pub enum RouterTraffic {
    /// dqs's synthetic flow population (flows in progress, Pareto packets per flow,
    /// exponential gaps), each flow's protocol and destination port drawn from `mix` by a hash
    /// of its 5-tuple.
    Synthetic { flows: crate::workload::flows::SyntheticFlows, mix: Vec<MixEntry> },
    /// `copies` overlaid copies of a corpus, `time_scale` times faster.
    Corpus { corpus: Arc<Corpus>, copies: u32, time_scale: f64 },
}

impl RouterTraffic {
    /// Mean packet length, bytes.
    pub fn mean_len(&self) -> f64 {
        match self {
            RouterTraffic::Synthetic { flows, .. } => flows.sizes.mean(),
            RouterTraffic::Corpus { corpus, .. } => corpus.bytes() as f64 / corpus.packets.len().max(1) as f64,
        }
    }
    /// Mean offered rate, bits/s.
    pub fn mean_rate_bps(&self) -> f64 {
        match self {
            RouterTraffic::Synthetic { flows, .. } => flows.mean_rate_bps(),
            RouterTraffic::Corpus { corpus, copies, time_scale } => corpus.mean_rate_bps(*copies, *time_scale),
        }
    }
    /// Synthetic IMIX traffic of `flows` flows in progress with the given mix.
    pub fn synthetic(flows: u32, mean_gap: Duration, duration: Duration, mix: Vec<MixEntry>) -> Self {
        RouterTraffic::Synthetic {
            flows: crate::workload::flows::SyntheticFlows {
                in_progress: flows,
                mean_packets: 10.0,
                pareto_shape: 1.2,
                mean_gap,
                sizes: SizeDist::kim_imix(),
                duration,
            },
            mix,
        }
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RouterError {
    #[error("router configuration: {0}")]
    Config(String),
    /// A mechanism refused a call: a defect in the pipeline, reported rather than hidden.
    #[error("at {at} ns, {stage}: {msg}")]
    Mechanism { at: u64, stage: &'static str, msg: String },
    /// Offered packets are not all delivered, dropped or in flight: a defect.
    #[error(
        "conservation broken: offered {offered} != delivered {delivered} + dropped {dropped} + in flight {in_flight}"
    )]
    Conservation { offered: u64, delivered: u64, dropped: u64, in_flight: u64 },
    /// An element's ports do not add up (npqos_core::pipeline::Ports): a defect of that element.
    #[error("conservation broken at an element: {0}")]
    Element(#[from] npqos_core::pipeline::ConservationError),
    #[error(transparent)]
    Trace(#[from] crate::trace::TraceError),
    /// Writing a packet capture failed (`[output] pcap`).
    #[error("writing the packet captures: {0}")]
    Capture(String),
}

impl From<PipelineError> for RouterError {
    fn from(e: PipelineError) -> Self {
        match e {
            PipelineError::Config(m) => RouterError::Config(m),
            PipelineError::Mechanism { at, stage, msg } => RouterError::Mechanism { at, stage, msg },
        }
    }
}

pub use driver::{run, run_captured, CaptureTo};
pub(crate) use output::records;
