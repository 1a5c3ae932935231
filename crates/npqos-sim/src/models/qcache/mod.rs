//! The qcache models (issue #7): the operation streams of Table 4 and traces ([`workload`]) and
//! the multithreaded timing simulation of the four queuing subsystems ([`sim`]). The mechanism
//! (queue memory, per-subsystem operation plans, the analytical model) is in
//! `npqos_core::queues`. See docs/qcache.md.

pub mod sim;
pub mod workload;

#[cfg(test)]
mod tests;
