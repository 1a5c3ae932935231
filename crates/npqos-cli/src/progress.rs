//! Progress bars on a terminal only: none with `--quiet` or when stderr is not a terminal.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// A progress bar over `[0, 1]` that is a no-op when disabled.
#[derive(Clone)]
pub struct Progress {
    bar: Option<ProgressBar>,
}

const SCALE: u64 = 10_000;

impl Progress {
    pub fn new(label: &str, quiet: bool) -> Self {
        if quiet || !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let bar = ProgressBar::new(SCALE);
        bar.set_style(
            ProgressStyle::with_template("{prefix:>12} [{bar:40}] {percent:>3}% {elapsed_precise} eta {eta}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_prefix(label.to_string());
        Progress { bar: Some(bar) }
    }
    /// A bar with a status line (`npqos live`): over the duration if there is one, else a
    /// spinner until Ctrl-C.
    pub fn new_live(label: &str, quiet: bool, bounded: bool) -> Self {
        if quiet || !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let bar = if bounded { ProgressBar::new(SCALE) } else { ProgressBar::new_spinner() };
        let template = if bounded {
            "{prefix:>6} [{bar:20}] {elapsed_precise} {msg}"
        } else {
            "{prefix:>6} {spinner} {elapsed_precise} {msg} (Ctrl-C stops)"
        };
        bar.set_style(ProgressStyle::with_template(template).expect("valid template").progress_chars("=> "));
        bar.set_prefix(label.to_string());
        Progress { bar: Some(bar) }
    }
    /// Sets the status line.
    pub fn message(&self, msg: String) {
        if let Some(b) = &self.bar {
            b.set_message(msg);
            b.tick();
        }
    }
    /// Sets progress to `frac` of the whole.
    pub fn set(&self, frac: f64) {
        if let Some(b) = &self.bar {
            b.set_position((frac.clamp(0.0, 1.0) * SCALE as f64) as u64);
        }
    }
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
