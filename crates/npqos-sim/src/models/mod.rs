//! Runnable models. Each takes a validated [`crate::scenario::Scenario`] and a seed and
//! returns a [`crate::results::RunResult`].
//!
//! * [`link`]: N queues with tail-drop buffers sharing one link under DRR; synthetic or
//!   trace-driven input. The foundation's demo model and the `shared` link mode the kim
//!   experiments will reuse.

pub mod dqs;
pub mod kim;
pub mod link;
