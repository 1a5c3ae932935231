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
pub(crate) mod pipeline;
pub mod scenario;
#[cfg(test)]
mod tests;

use crate::trace::corpus::Corpus;
use crate::workload::SizeDist;
use npqos_core::alloc::Policy;
use npqos_core::classify::{Prefix, Rule};
use npqos_core::flowmap::DqsConfig;
pub use npqos_core::pipeline::{IngressKind, QmemParams};
use npqos_core::sched::fq::Discipline;
pub use npqos_core::shaper::Conformance;
use npqos_core::shaper::{Adaptive, Timer};
use npqos_core::{Duration, Rate};
use std::sync::Arc;

/// One service: its match rule, delay tolerance, processing cost and output rate.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceParams {
    pub name: String,
    pub rule: Rule,
    /// D: a packet whose processing ends more than D after its arrival is late.
    pub tolerance: Duration,
    /// Predicted processing time `alpha + beta x length` (predictive Table 1), ns and ns/B.
    pub cost_alpha_ns: f64,
    pub cost_beta_ns: f64,
    /// Actual time = predicted x (1 + variation x U(-1, 1)).
    pub variation: f64,
    /// G^i of everest eq 7 (the share of the processors the service keeps in overload).
    pub guarantee: f64,
    /// Shaped output rate; `None`: not shaped.
    pub rate: Option<Rate>,
    /// The rate is per flow (one bucket per flow) rather than for the whole service.
    pub per_flow: bool,
}

impl ServiceParams {
    /// The predicted processing time of a packet of `len` bytes, ns.
    #[inline]
    pub fn est_ns(&self, len: u32) -> f64 {
        self.cost_alpha_ns + self.cost_beta_ns * len as f64
    }
}

/// Processing (stage 4).
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessingParams {
    pub processors: u32,
    pub policy: Allocation,
    pub t_sw: Duration,
    pub delta: Duration,
    /// Which waiting packet of a service its next processor takes.
    pub scheduler: Scheduler,
    /// Drop late packets at the end of processing instead of forwarding them.
    pub late_drop: bool,
}

/// The scheduler within a service (stage 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduler {
    /// The oldest packet of the service.
    Fcfs,
    /// Deficit round robin over the service's ingress queues (the link's quantum, bytes), as
    /// dqs serves its physical queues.
    Drr,
    /// Fair queuing over the service's ingress queues on predicted costs (EFQ, SFQ, WF2Q+).
    Fair(Discipline),
}

impl Scheduler {
    /// Its name in configuration files and results.
    pub fn label(&self) -> &'static str {
        npqos_core::names::Named::name(*self)
    }
}

/// `processing.scheduler`'s names, in the order messages list them.
impl npqos_core::names::Named for Scheduler {
    const KIND: &'static str = "scheduler";
    const ALL: &'static [Self] = &[
        Scheduler::Fair(Discipline::Efq),
        Scheduler::Fair(Discipline::Sfq),
        Scheduler::Fair(Discipline::Wf2qPlus),
        Scheduler::Drr,
        Scheduler::Fcfs,
    ];
    fn name(self) -> &'static str {
        match self {
            Scheduler::Fcfs => "fcfs",
            Scheduler::Drr => "drr",
            Scheduler::Fair(d) => d.label(),
        }
    }
}

/// How the processors are shared among services (stage 4).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Allocation {
    /// An everest policy: whole processors per service, a switch costs t_sw.
    Policy(Policy),
    /// LAP (predictive eq 19) with the services as its applications: a free processor takes
    /// the oldest packet of the service LAP names; a processor whose cache held another service
    /// pays t_sw on that packet (the cold-cache penalty). Within a service: oldest first.
    Lap,
    /// No processing (`npqos live`'s pipeline): a packet waits in its ingress queue, which is
    /// the queue its bucket shapes, and goes from there to the link (docs/router.md,
    /// "Processing none").
    None,
}

impl Allocation {
    pub fn name(&self) -> &'static str {
        match self {
            Allocation::Policy(p) => p.name(),
            Allocation::Lap => "lap",
            Allocation::None => "none",
        }
    }
}

/// Egress shaping (stage 6).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ShaperKind {
    None,
    /// kim's Algorithm 1 on one heap per processor.
    Event {
        alpha_bytes: u64,
        locked_bytes: u64,
        tick_shift: u32,
        adaptive: Option<Adaptive>,
        /// Where throttled queues wait: kim's heaps or the timer wheel (npqos live's `timer`).
        timer: Timer,
    },
    Periodic {
        period: Duration,
    },
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShapingParams {
    pub kind: ShaperKind,
    pub conformance: Conformance,
    /// Bucket cap, bytes.
    pub cap_bytes: u64,
    /// Output queues (buckets) of each per-flow-shaped service, lent to flows by the
    /// pipeline's bucket-lifetime rule ([`npqos_core::pipeline::FlowBuckets`]).
    pub flow_queues: u32,
    /// Bytes the output queues may hold together.
    pub buffer_bytes: u64,
}

/// Everything but the traffic.
#[derive(Clone, Debug, PartialEq)]
pub struct RouterParams {
    pub services: Vec<ServiceParams>,
    /// Prefixes that say what inbound and outbound mean to the match rules.
    pub inside: Vec<Prefix>,
    pub ingress: IngressKind,
    /// The ingress queues and their block buffer (the flow table keys; `quantum` and
    /// `on_exhausted` unused: see [`Ingress::new`](npqos_core::pipeline::Ingress::new)).
    pub table: DqsConfig,
    pub processing: ProcessingParams,
    pub qmem: QmemParams,
    pub shaping: ShapingParams,
    pub link_rate: Rate,
    /// DRR quantum of the link, bytes.
    pub quantum: u32,
    /// Packets the link picks ahead of the transmission (their descriptor dequeues in flight).
    pub link_ahead: u32,
    /// Arrivals stop at `duration`; the run goes on for `drain` to let packets out.
    pub duration: Duration,
    pub drain: Duration,
    pub sample_every: Duration,
    pub stats: StatsParams,
}

pub use crate::scenario::stats::StatsParams;

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
}

pub use driver::run;
