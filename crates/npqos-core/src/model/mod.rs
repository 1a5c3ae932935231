//! Analytical models of the mechanisms (sizing tools). No I/O, pure arithmetic.
//!
//! * [`kim`]: the stochastic model of reschedules and heap size (kim section 3.2, eqs 8-13).

pub mod kim;
