//! CLI errors and exit codes: 2 for bad input, 1 for internal failures (DESIGN invariant 5),
//! 130 when interrupted by Ctrl-C after writing partial results.

use std::fmt;

/// Bad input from the user: a scenario, a trace, an argument. Exit code 2.
#[derive(Debug)]
pub struct BadInput(pub String);

impl fmt::Display for BadInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for BadInput {}

/// Shorthand for returning bad input.
pub fn bad(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(BadInput(msg.into()))
}

/// Maps a trace error to bad input or an internal failure.
pub fn from_trace(e: npqos_sim::trace::TraceError) -> anyhow::Error {
    if e.is_bad_input() {
        bad(e.to_string())
    } else {
        anyhow::Error::new(e)
    }
}

/// The run was interrupted; partial results were written. Exit code 130.
#[derive(Debug)]
pub struct Interrupted(pub String);
impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "interrupted: partial results (complete: false) written to {}", self.0)
    }
}
impl std::error::Error for Interrupted {}

/// A child process (the Python sweep behind `--dask`) ended with this exit code, having
/// printed its own message.
#[derive(Debug)]
pub struct Exit(pub i32);
impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "exit code {}", self.0)
    }
}
impl std::error::Error for Exit {}

pub fn exit_code(e: &anyhow::Error) -> i32 {
    if let Some(Exit(c)) = e.downcast_ref::<Exit>() {
        *c
    } else if e.downcast_ref::<BadInput>().is_some() || e.downcast_ref::<npqos_sim::scenario::Problems>().is_some() {
        2
    } else if e.downcast_ref::<Interrupted>().is_some() {
        130
    } else {
        1
    }
}
