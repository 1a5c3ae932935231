//! # npqos-sim: the simulator around the mechanisms
//!
//! * [`engine`]: the deterministic discrete-event engine (events ordered by time, then
//!   insertion; cancellation by key; end time, event budget and interrupt).
//! * [`rng`]: per-component ChaCha streams derived from the scenario seed.
//! * [`workload`]: packet-size and inter-arrival generators, kim's overload factor, flow
//!   populations.
//! * [`trace`]: streaming pcap / pcapng input, decoding, merging, time scaling and flow
//!   multiplication, trace statistics.
//! * [`units`] and [`scenario`]: TOML scenarios with units, validated separately from
//!   construction, every problem reported.
//! * [`models`]: the models of the five mechanisms and the `link` model; `link` and `kim` run
//!   from scenario files, the others from their experiments (`npqos reproduce`).
//! * [`results`]: the in-memory result of a run (scalars, series, histograms), written out by
//!   the CLI.
//! * [`experiments`]: the `npqos reproduce` registry.
//! * [`live`]: `npqos live`'s data plane without its I/O (classify, dqs, kim shaper, DRR on real frames).
//! * [`testkit`]: helpers the test suites share (visible skips).

pub mod engine;
pub mod experiments;
pub mod live;
pub mod merge;
pub mod models;
pub mod results;
pub mod rng;
pub mod scenario;
pub mod testkit;
pub mod trace;
pub mod units;
pub mod workload;
