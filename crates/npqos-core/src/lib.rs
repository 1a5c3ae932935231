//! # npqos-core: the QoS mechanisms of a multicore network processor
//!
//! This crate is the part of npqos that a real data plane can link: it performs no I/O, reads no
//! clock and holds no global state. Time is passed in as an integer nanosecond [`Instant`];
//! randomness, where a mechanism needs it, comes from an RNG the caller injects. Each mechanism
//! follows the sans-IO pattern: it is told `now`, returns its decisions, and reports when it next
//! needs attention (`next_wakeup()`).
//!
//! ## How a packet flows through the mechanisms
//!
//! A packet arrives and is classified to a [`flow::FlowKey`] (the unidirectional 5-tuple) and a
//! service ([`classify`]). The
//! flow is mapped to one of a few hundred physical queues on demand (dynamic queue sharing,
//! paper `dqs`); the services that process it are given processors by an allocator (Everest,
//! paper `everest`); within a service, the next packet a core runs is chosen by a fair or
//! locality-aware scheduler using predicted processing times (paper `predictive`); the queue
//! operations go through a queue-descriptor subsystem such as the queuing cache (paper
//! `qcache`); and at egress each queue is rate-limited by an event-driven token bucket whose
//! refill events live in per-core heaps (paper `kim`), before a link scheduler puts the packet
//! on the wire.
//!
//! ## Modules, in that order
//!
//! * [`time`]: [`Instant`] and [`Duration`], integer nanoseconds.
//! * [`rate`]: [`Rate`] in bits/s and the drift-free [`rate::Serializer`].
//! * [`flow`]: the 5-tuple [`flow::FlowKey`].
//! * [`classify`]: packets into services by ordered rules (protocol, ports, direction against
//!   inside prefixes), the composed router's first stage.
//! * [`flowmap`]: dynamic queue sharing (paper `dqs`): the AFM table (hashed slots of binary
//!   search trees), on-demand physical queues, the block buffer and DRR.
//! * [`shaper`]: token-bucket rate limiting (paper `kim`): the event-driven shaper on per-core
//!   reschedule heaps and the periodic-fill baseline.
//!
//! * [`alloc`]: processor allocation among services (paper `everest`): Everest's Q_lim
//!   eligibility, marking for release, LRA victims and overload control, with the Static,
//!   Quantum, Cohort-E, Everest-LD and Everest-AE baselines and our adaptive variant; G^i
//!   from trace analysis (eq 7).
//!
//! * [`sched`]: processor scheduling with predicted processing times (paper `predictive`): the
//!   eq 1 estimate and its online least-squares fit, eq 4 admission control, fair queuing
//!   of processing time (SFQ, WF2Q+, EFQ), and locality-aware grouping (LAP, eq 19) against
//!   FCFS and T-Opt.
//!
//! * [`queues`]: queue-descriptor memory and its subsystems (paper `qcache`): the queue memory
//!   with Table 2's references per operation, the descriptor caches (sqc / qc entries, dc's data
//!   cache, the queuing cache's engine assignment), the Table 1 operation programs of nc / dc /
//!   sqc / qc, and the section 3.6 model of time gained and lost.
//!
//! * [`pipeline`]: the composed router as elements that the simulator and a real data plane
//!   both drive (ingress and queue memory so far), with conservation at every element's ports.
//!
//! * [`detect`]: the two packet functions of Everest's prototype, a port-scan and a TCP
//!   SYN-flood detector, with bounded state.
//! * [`cache`]: a set-associative cache model with a locked region (kim Tables VI-VII).
//! * [`model`]: analytical models as sizing tools (kim's stochastic model, eqs 8-13).
//! * [`hint`]: a software prefetch hint for callers that drive millions of queues (no
//!   effect on results).

pub mod alloc;
pub mod cache;
pub mod classify;
pub mod detect;
pub mod error;
pub mod flow;
pub mod flowmap;
mod fmt;
pub mod hint;
pub mod id;
pub mod model;
pub mod names;
pub mod ord;
pub mod pipeline;
pub mod queues;
pub mod radix;
pub mod rate;
pub mod sched;
pub mod shaper;
pub mod time;

pub use error::Error;
pub use id::{AppId, BufferId, CoreId, EntryId, FlowId, ProcessorId, QueueId, ServiceId};
pub use rate::Rate;
pub use time::{Duration, Instant};
