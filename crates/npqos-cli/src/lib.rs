//! The library behind the `npqos` command: running scenarios and reproductions, writing results
//! directories, sweeps and the sizing models. The binary (`src/main.rs`) parses arguments and
//! prints; the Python package (`crates/npqos-py`) calls the same functions, so a results
//! directory written from Python is the one `npqos` writes.

pub mod commands;
pub mod error;
#[cfg(target_os = "linux")]
pub mod live;
pub mod output;
mod plots;
pub mod progress;
pub mod report;
