//! Helpers shared by the CLI tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn npqos() -> Command {
    Command::new(env!("CARGO_BIN_EXE_npqos"))
}

pub fn run(args: &[&str]) -> Output {
    npqos().args(args).output().expect("npqos runs")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// `../shared/traces/ndpi` beside the repository, if present.
pub fn ndpi_dir() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/ndpi");
    d.is_dir().then(|| d.canonicalize().expect("exists"))
}

/// Reports a skipped test so the reason shows in a plain `cargo test` run (the one helper every
/// suite uses: [`npqos_sim::testkit::skip`]).
pub fn skip(test: &str, reason: &str) {
    npqos_sim::testkit::skip(test, reason);
}

/// `npqos live` started in the namespace bed's middle with the configuration `cfg` (its file
/// and its results, `out/`, in the returned directory), returned once it says its rings are open
/// (`READY=1`), or once it has exited (for a test that expects a start to fail).
#[cfg(target_os = "linux")]
pub fn live_in_bed(bed: &npqos_cli::live::netns::Bed, cfg: &str) -> (tempfile::TempDir, std::process::Child) {
    use npqos_cli::live::notify::Listener;
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("live.toml"), cfg).expect("the configuration written");
    let listener = Listener::bind(&dir.path().join("notify.sock")).expect("a socket for READY=1");
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &bed.mid, env!("CARGO_BIN_EXE_npqos"), "live"])
        .arg(dir.path().join("live.toml"))
        .arg("--out")
        .arg(dir.path().join("out"))
        .arg("--quiet");
    let child = listener.spawn_started(&mut cmd, std::time::Duration::from_secs(30)).expect("npqos live starts");
    (dir, child)
}
