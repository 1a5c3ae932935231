//! The router pipeline's configuration (docs/router.md, docs/pipeline.md): its services and
//! each stage's parameters, plain values that the scenario readers of `npqos-sim` fill in.

use crate::alloc::Policy;
use crate::classify::{Prefix, Rule};
use crate::flowmap::DqsConfig;
use crate::pipeline::stats::StatsParams;
use crate::pipeline::{IngressKind, QmemParams};
use crate::sched::fq::Discipline;
use crate::shaper::{Adaptive, Conformance, Timer};
use crate::{Duration, Rate};

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
    /// With `per_flow`: the buckets are per host rather than per flow, every flow of one
    /// source (or destination) address sharing one (`rate_per = "src"` / `"dst"`: a
    /// subscriber's rate).
    pub host: Option<Host>,
    /// Its packets are ECN-capable (ECT): with CoDel marking (`shaping.ecn`) they are marked
    /// CE rather than dropped. `npqos live` reads each frame's own ECN field besides.
    pub ecn: bool,
    /// The packet function its processors run on each of its packets (`[services.function]`:
    /// Everest's prototype's detectors); `None`: processing is its cost alone.
    pub function: Option<crate::detect::FunctionParams>,
}

/// Which address of a flow names its subscriber ([`ServiceParams::host`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Host {
    Src,
    Dst,
}

/// The key a flow's bucket is lent by: the flow's own, or with `host` its subscriber's (the
/// address alone, in a zone no flow has).
#[inline]
pub fn bucket_key(key: &crate::flow::FlowKey, host: Option<Host>) -> crate::flow::FlowKey {
    let addr = match host {
        None => return *key,
        Some(Host::Src) => key.src,
        Some(Host::Dst) => key.dst,
    };
    crate::flow::FlowKey { src: addr, is_v6: key.is_v6, zone: u16::MAX - 1, ..Default::default() }
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
        crate::names::Named::name(*self)
    }
}

/// `processing.scheduler`'s names, in the order messages list them.
impl crate::names::Named for Scheduler {
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
    /// With it, each shaped bucket's cap is at least alpha plus its rate for this long, ns
    /// (npqos live's `wake_tolerance`: a forwarding thread that wakes up to this late loses no
    /// rate); 0: every cap is `cap_bytes` (the simulators, whose clock is never late).
    pub cap_wake_ns: u64,
    /// Output queues (buckets) of each per-flow-shaped service, lent to flows by the
    /// pipeline's bucket-lifetime rule ([`crate::pipeline::FlowBuckets`]).
    pub flow_queues: u32,
    /// Bytes the output queues may hold together.
    pub buffer_bytes: u64,
    /// Rates in wire terms, as tc's `overhead` and `mpu`: the shaper charges a packet of `len`
    /// bytes `max(len + overhead, mpu)` (at least 1); 0 and 0: its length.
    pub overhead: i64,
    pub mpu: u64,
    /// Active queue management on the shaped queues (`shaping.aqm = "codel"`: CoDel, RFC
    /// 8289, with its target, interval and ECN marking); `None`: tail drop only.
    pub aqm: Option<crate::pipeline::codel::CodelParams>,
}

impl ShapingParams {
    /// The bytes the shaper charges a packet of `len` bytes.
    #[inline]
    pub fn wire_len(&self, len: u32) -> u64 {
        wire_len(len as u64, self.overhead, self.mpu)
    }
}

/// `max(len + overhead, mpu)`, at least 1: a packet's length in wire terms (tc's `overhead` and
/// `mpu`).
#[inline]
pub fn wire_len(len: u64, overhead: i64, mpu: u64) -> u64 {
    (len as i64).saturating_add(overhead).max(mpu as i64).max(1) as u64
}

/// Everything but the traffic.
#[derive(Clone, Debug, PartialEq)]
pub struct RouterParams {
    pub services: Vec<ServiceParams>,
    /// Prefixes that say what inbound and outbound mean to the match rules.
    pub inside: Vec<Prefix>,
    pub ingress: IngressKind,
    /// The ingress queues and their block buffer (the flow table keys; `quantum` and
    /// `on_exhausted` unused: see [`Ingress::new`](crate::pipeline::Ingress::new)).
    pub table: DqsConfig,
    /// FQ-CoDel's parameters (`ingress.kind = "fq-codel"`; unused otherwise).
    pub fq_codel: crate::pipeline::FqCodelParams,
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
