//! Packet queues: the packet buffer of whole-packet queues, and queues in shared memory with
//! the subsystems that hold their descriptors (paper `qcache`).
//!
//! * [`pool`]: per-queue packet FIFOs over one pool of 16-byte nodes (the buffer of the `link`
//!   and `kim` models).
//! * [`memory`]: descriptors (head, tail, length) and linked lists of buffer pointers, with the
//!   paper's enqueue and dequeue (Table 2) counting every queue-memory reference.
//! * [`cache`]: the descriptor caches and their decisions: sqc's and qc's fully associative
//!   entries (LRU among entries not in use), dc's set-associative data cache, and the queuing
//!   cache's controller (which request each queuing engine serves next).
//! * [`timing`]: the Table 1 parameters and, per subsystem (nc, dc, sqc, qc), the program an
//!   operation runs on a hit and on a miss (Table 2, Figure 4), written once: the simulator plays
//!   it with contention; reduced to steps it gives the unloaded latency (the paper's Table 5),
//!   interconnect transactions and off-chip references.
//! * [`model`]: the analytical model of section 3.6 (time lost to serialization, time gained
//!   by hits) and the inter-arrival characterisation of section 5.1, on an operation sequence.
//!
//! The multithreaded timing simulation with contention and the workloads are in
//! `npqos_sim::models::qcache` (docs/qcache.md).

pub mod cache;
pub mod memory;
pub mod model;
pub mod pool;
pub mod timing;

#[cfg(test)]
mod tests;
