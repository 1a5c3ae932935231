//! Helpers for tests, shared by every crate's test suite (public so the CLI tests use the same
//! ones).

use std::io::Write;

/// Reports that a test (or part of one) was skipped, and why, on the process's real standard
/// error. libtest captures `println!` / `eprintln!` of passing tests, so a skip reported through
/// them is silent; writing to the stderr handle bypasses the capture and the line shows in a
/// plain `cargo test` run:
///
/// ```text
/// SKIPPED experiments::dqs::tests::table2_quick (real-trace assertions): no nDPI corpus ...
/// ```
pub fn skip(test: &str, reason: &str) {
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
}

/// The reason every trace-dependent test gives when the nDPI corpus is absent.
pub const NO_NDPI: &str = "no nDPI corpus at ../shared/traces/ndpi or $NPQOS_TRACE_DIR (a clone without ../shared)";
