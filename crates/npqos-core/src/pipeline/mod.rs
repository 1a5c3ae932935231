//! The composed router as elements (DESIGN.md, "Models and the pipeline"; docs/pipeline.md):
//! classify -> ingress -> processing -> queue memory -> egress -> link, each element a
//! mechanism behind the contract that owns its configuration, so that the simulator's router
//! model (simulated time) and `npqos live` (the real clock and real frames) drive the same
//! code.
//!
//! Here so far:
//! * [`egress`]: stages 6 and 7, the egress element's shaper and the link's DRR round over the
//!   caller's output queues ([`egress::Egress`]);
//! * [`codel`]: CoDel (RFC 8289), the egress element's active queue management per output
//!   queue ([`codel::Codel`]);
//! * [`fq_codel`]: FQ-CoDel's round (RFC 8290), the fq-codel ingress's scheduler
//!   ([`fq_codel::FqCodel`]);
//! * [`buckets`]: the egress element's per-flow buckets with a memory bound: the one
//!   bucket-lifetime rule both drivers use ([`buckets::FlowBuckets`]);
//! * [`ingress`]: stage 3, the ingress queues: dqs, a per-flow table or hashed queues over one
//!   block buffer ([`ingress::Ingress`]);
//! * [`qmem`]: stage 5, the queue-descriptor memory as one contended resource, one of qcache's
//!   subsystems or ideal ([`qmem::Qmem`]);
//! * [`ports`]: conservation at an element's ports: packets in = out + dropped (by reason) +
//!   held, checked in debug builds on every call and by the driver at the end of every run;
//! * [`latency`]: the pipeline's latency histograms, recorded at the cost of an increment and
//!   reported as hdrhistogram's ([`latency::Latency`]);
//! * [`stats`]: per-flow and per-class counters in tc's vocabulary with a memory bound (an
//!   exact table, then the heaviest flows by a Space-Saving sketch).
//!
//! * [`router`]: the elements composed, stages 3 to 7 with processing (an everest allocator,
//!   LAP, or none), the output FIFOs and the link (a serializer or the caller's transmit ring):
//!   the one pipeline both drivers run, the simulator's engine (`npqos-sim`'s router model)
//!   and the real clock (`npqos live`'s forwarder).
//!
//! Classification is [`crate::classify`] (the router's stream calls it before the pipeline).

pub mod buckets;
pub mod codel;
pub mod egress;
pub mod fq_codel;
mod hashslots;
pub mod ingress;
pub mod latency;
pub mod ports;
pub mod qmem;
pub mod router;
pub mod stats;

pub use buckets::{BucketCounters, FlowBuckets, Taken};
pub use egress::{Egress, EgressQueues, Pick, Shaping};
pub use fq_codel::{FqCodel, FqCodelParams};
pub use hashslots::flow_hash;
pub use ingress::{Admit, Ingress, IngressDrop, IngressKind};
pub use latency::Latency;
pub use ports::{ConservationError, Ports};
pub use qmem::{Qmem, QmemCounters, QmemParams};
pub use stats::{Counts, FlowIndex, Heavy};
