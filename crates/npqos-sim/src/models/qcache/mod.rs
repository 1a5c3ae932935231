//! The qcache models: the operation streams of Table 4 and traces ([`workload`]), the
//! multithreaded timing simulation of the four queuing subsystems on the engine ([`sim`]), and
//! `model = "qcache"` scenario files ([`scenario`]). The mechanism (queue memory, the descriptor
//! caches and the queuing cache's controller, the operation plans, the analytical model) is in
//! `npqos_core::queues`. See docs/qcache.md.

pub mod scenario;
pub mod sim;
pub mod workload;

#[cfg(test)]
mod tests;
