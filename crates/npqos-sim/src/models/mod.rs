//! Runnable models. Each takes a validated [`crate::scenario::Scenario`] and a seed and
//! returns a [`crate::results::RunResult`].
//!
//! * [`link`]: N queues with tail-drop buffers sharing one link under DRR; synthetic or
//!   trace-driven input. The foundation's demo model and the `shared` link mode the kim
//!   experiments will reuse.
//! * [`dqs`]: the dqs link (AFM + DRR) and processing models.
//! * [`everest`]: processors shared by six NAT-PT services under an allocation policy.
//! * [`predictive`]: flows with reserved processing shares under SFQ / EFQ / WF2Q+ (section 4).
//! * [`lap`]: a backlogged stream on processors with one-application caches under LAP / FCFS /
//!   T-Opt (section 5).
//! * [`efq_lap`]: the reserved flows on processors with caches, swinging in and out of overload,
//!   under EFQ, EFQ preferring warm processors, LAP, and the switching combination (section 6).
//! * [`qcache`]: threads enqueueing and dequeueing through nc / dc / sqc / qc on the Table 1
//!   chip multiprocessor, under the Table 4 workloads or a trace hashed to queues.
//! * [`router`]: the five mechanisms in one pipeline (classification, dqs ingress, everest
//!   allocation with fair queuing, qcache queue memory, kim shaping, a DRR link).

pub mod dqs;
pub mod efq_lap;
pub mod everest;
pub mod kim;
pub mod lap;
pub mod link;
pub mod predictive;
pub mod qcache;
pub mod router;
