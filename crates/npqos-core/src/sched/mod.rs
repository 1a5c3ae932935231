//! Processor scheduling with predicted processing times (paper `predictive`).
//!
//! * [`estimate`]: `t_e(a, l) = alpha_a + beta_a l` (eq 1) with the Table 1 parameters, and the
//!   online least-squares fit of eqs 2-3 (running centred sums, O(1) per sample).
//! * [`admission`]: eq 4, processing share `P_j` and outgoing bandwidth `gamma_a B_j` against
//!   what is left; refusals say which resource ran out.
//! * [`fq`]: fair queuing of processing time over `m` processors seen as one resource: SFQ,
//!   WF2Q+ (the oracle that knows true processing times) and EFQ (eqs 8-12).
//! * [`drr`]: deficit round robin, the link scheduler (dqs section 6, the `link` model).
//! * [`lap`]: LAP (eq 19), FCFS and T-Opt over distinct processors with one-application
//!   instruction caches (section 5); removal by id lets EFQ and LAP share the packets in the
//!   section 6 combination.

pub mod admission;
pub mod drr;
pub mod estimate;
pub mod fq;
pub mod lap;

#[cfg(test)]
mod tests;
