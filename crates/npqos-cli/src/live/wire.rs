//! The simulator checked against the wire on the namespace bed (docs/live.md, "The simulator
//! against the wire"): one live configuration and one capture, run twice. `npqos run` of the
//! router scenario that `npqos live CONFIG --as-scenario CAPTURE` writes; and `npqos live CONFIG`
//! in the middle namespace while tcpreplay sends the capture from the sender's at the capture's
//! timing. Both write classes.csv from the same pipeline's class table; the two resolved
//! configurations are diffed as router scenarios. The benchmark `wire` prints the table; the
//! test `tests/live_wire.rs` holds the two to each other.

use super::netns::Bed;
use npqos_core::Duration;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Why the comparison cannot run here, if it cannot: no namespace bed (not root, no `ip`), or no
/// tcpreplay.
pub fn unavailable() -> Option<String> {
    if let Some(why) = super::netns::unavailable() {
        return Some(why);
    }
    match Command::new("tcpreplay").arg("-V").output() {
        Ok(_) => None,
        Err(_) => Some("no tcpreplay (apt-get install tcpreplay)".into()),
    }
}

/// One side's classes.csv: per class, its columns by name.
pub type Classes = Vec<(String, Vec<(String, f64)>)>;

/// What the two runs gave.
pub struct Compared {
    /// The capture as replayed: its span and packets.
    pub span: Duration,
    pub packets: u64,
    /// tcpreplay's own account ("Actual: ... sent in ... seconds").
    pub replay: String,
    /// The two resolved configurations' differences as router scenarios (`diff` of the two
    /// files, [meta] left out): empty when they are the same router.
    pub diff: String,
    pub sim: Classes,
    pub wire: Classes,
}

impl Compared {
    /// `key` of `class` in the simulation's (`wire` false) or the wire's classes.csv.
    pub fn get(&self, wire: bool, class: &str, key: &str) -> Option<f64> {
        let side = if wire { &self.wire } else { &self.sim };
        let row = side.iter().find(|(c, _)| c == class)?;
        row.1.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// Per class, simulation / wire: offered, sent packets and bytes, dropped, delay p50 and p99.
    pub fn table(&self) -> String {
        let mut out = String::from(
            "| service | offered (sim / wire) | sent | sent bytes | dropped | delay p50 (ms) | delay p99 (ms) |\n\
             |---|---|---|---|---|---|---|\n",
        );
        for (class, _) in &self.sim {
            let pair = |k: &str, scale: f64, digits: usize| {
                let v = |wire| self.get(wire, class, k).map_or(f64::NAN, |v| v / scale);
                format!("{:.digits$} / {:.digits$}", v(false), v(true))
            };
            out += &format!(
                "| {class} | {} | {} | {} | {} | {} | {} |\n",
                pair("offered_packets", 1.0, 0),
                pair("sent_packets", 1.0, 0),
                pair("sent_bytes", 1.0, 0),
                pair("dropped_packets", 1.0, 0),
                pair("delay_p50_ns", 1e6, 2),
                pair("delay_p99_ns", 1e6, 2)
            );
        }
        out
    }
}

/// A capture of `flows` UDP flows from 198.18.0.1 (ports 5000...) to 198.18.0.2 for `secs`
/// seconds, each Poisson at `rate_bps` of frame bytes with payloads uniform in 100-1400 B; the
/// first half of the flows to port 10000, the others to 10001 (seeded by `seed`). Returns the
/// packets written.
pub fn synthetic_capture(path: &Path, flows: u16, secs: f64, rate_bps: f64, seed: u64) -> std::io::Result<u64> {
    use npqos_sim::trace::writer::{udp4_frame, PcapWriter};
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut packets: Vec<(u64, Vec<u8>)> = Vec::new();
    for f in 0..flows {
        let mut t = 0f64;
        loop {
            let payload = rng.random_range(100..=1400usize);
            t += -(1.0 - rng.random::<f64>()).ln() * (payload + 42) as f64 * 8.0 / rate_bps;
            if t >= secs {
                break;
            }
            let dport = 10000 + u16::from(f >= flows / 2);
            packets.push(((t * 1e9) as u64, udp4_frame([198, 18, 0, 1], [198, 18, 0, 2], 5000 + f, dport, payload)));
        }
    }
    packets.sort_by_key(|p| p.0);
    let mut w = PcapWriter::new(std::io::BufWriter::new(std::fs::File::create(path)?), 1, 65535, true, false)?;
    for (t, f) in &packets {
        w.write(1_700_000_000_000_000_000 + t, f, f.len() as u32)?;
    }
    Ok(packets.len() as u64)
}

/// The capture as tcpreplay sends it on the bed, in `dir` (`npqos trace ethernet`): Ethernet
/// frames, with the receiver's address on those that had another framing (SLL, raw IP), and
/// packets cut by the snap length padded to their length on the wire (the simulator counts
/// that length). tcprewrite --dlt=enet left an SLL capture of the corpus as it was
/// (KakaoTalk_talk.pcap, tcprewrite 4.4.3), hence a command of our own.
fn ethernet(npqos: &Path, bed: &Bed, capture: &Path, dir: &Path) -> Result<PathBuf, String> {
    let out = dir.join("replayed.pcap");
    let mut c = Command::new(npqos);
    c.args(["trace", "ethernet"]).arg(capture).arg(&out).args(["--dst-mac", &bed.rcv_mac]);
    output(&mut c, "npqos trace ethernet")?;
    Ok(out)
}

/// Runs `command`, its standard output, or its error output as the error.
fn output(command: &mut Command, what: &str) -> Result<Vec<u8>, String> {
    let o = command.output().map_err(|e| format!("{what}: {e}"))?;
    match o.status.success() {
        true => Ok(o.stdout),
        false => Err(format!("{what}: {}", String::from_utf8_lossy(&o.stderr).trim())),
    }
}

/// `shaping` (a live file's [shaper] / [[services]] / [table]) on the bed and in the
/// simulator over `capture`, in `dir`: `npqos` is the binary, `mid_cpu` npqos live's CPU (the
/// sender gets the other). Both keep sending for `drain` after the capture's last packet
/// (`router.drain`; npqos live's duration is the capture's span, the second before the replay
/// starts and `drain`, rounded up): make it longer than a full queue takes to leave at its
/// rate, so that both send all they will.
pub fn compare(
    npqos: &Path,
    bed: &Bed,
    capture: &Path,
    shaping: &str,
    dir: &Path,
    mid_cpu: usize,
    drain: std::time::Duration,
) -> Result<Compared, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let cap = ethernet(npqos, bed, capture, dir)?;
    let (span, packets) = npqos_sim::live::simulate::capture_span(&cap)?;
    let secs = (span.as_secs_f64() + 1.0 + drain.as_secs_f64()).ceil() as u64;
    let cfg = dir.join("live.toml");
    let text = format!("[live]\ninput = \"in0\"\noutput = \"out0\"\nduration = \"{secs}s\"\n{shaping}");
    std::fs::write(&cfg, text).map_err(|e| e.to_string())?;
    // The simulator: the router scenario of this configuration over the capture.
    let drain_arg = format!("{}ms", drain.as_millis());
    let as_scenario = |cfg: &Path| {
        let mut c = Command::new(npqos);
        c.arg("live").arg(cfg).arg("--as-scenario").arg(&cap).args(["--drain", &drain_arg]);
        c
    };
    let scenario = output(&mut as_scenario(&cfg), "--as-scenario")?;
    std::fs::write(dir.join("sim.toml"), &scenario).map_err(|e| e.to_string())?;
    let (sim_dir, live_dir) = (dir.join("sim"), dir.join("live"));
    output(
        Command::new(npqos).arg("run").arg(dir.join("sim.toml")).arg("--out").arg(&sim_dir).arg("--quiet"),
        "npqos run",
    )?;
    // The wire: npqos live in the middle, tcpreplay from the sender at the capture's timing,
    // started once npqos live says its rings are open (`NOTIFY_SOCKET`, live::notify), not
    // after a guessed delay.
    let mut live = Command::new("ip");
    live.args(["netns", "exec", &bed.mid, "taskset", "-c", &mid_cpu.to_string()])
        .arg(npqos)
        .arg("live")
        .arg(&cfg)
        .arg("--out")
        .arg(&live_dir)
        .arg("--quiet");
    let mut live = super::notify::spawn_ready(&mut live, &dir.join("notify.sock"), std::time::Duration::from_secs(30))?;
    let sender_cpu = if mid_cpu == 0 { 1 } else { 0 };
    let replayed = output(
        Command::new("ip")
            .args(["netns", "exec", &bed.snd, "taskset", "-c", &sender_cpu.to_string(), "tcpreplay", "-q", "-i", "s0"])
            .arg(&cap),
        "tcpreplay",
    );
    let status = live.wait().map_err(|e| e.to_string())?;
    let replay =
        String::from_utf8_lossy(&replayed?).lines().find(|l| l.contains("Actual")).unwrap_or("").trim().to_string();
    if !status.success() {
        return Err(format!("npqos live exited with {status}"));
    }
    // The two resolved configurations as router scenarios, without the [meta] of a run.
    let again = output(&mut as_scenario(&live_dir.join("scenario.resolved.toml")), "--as-scenario of the live run")?;
    let bare = |text: &str, to: &str| -> Result<PathBuf, String> {
        let mut t: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
        t.remove("meta");
        let p = dir.join(to);
        std::fs::write(&p, toml::to_string(&t).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
        Ok(p)
    };
    let a = bare(&String::from_utf8_lossy(&again), "live-as-router.toml")?;
    let sim_resolved = std::fs::read_to_string(sim_dir.join("scenario.resolved.toml")).map_err(|e| e.to_string())?;
    let b = bare(&sim_resolved, "sim-resolved.toml")?;
    let diff = Command::new("diff").arg(&a).arg(&b).output().map_err(|e| format!("diff: {e}"))?;
    Ok(Compared {
        span,
        packets,
        replay,
        diff: String::from_utf8_lossy(&diff.stdout).into_owned(),
        sim: classes(&sim_dir.join("classes.csv"))?,
        wire: classes(&live_dir.join("classes.csv"))?,
    })
}

/// classes.csv's rows of its first run.
fn classes(path: &Path) -> Result<Classes, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let at = head.iter().position(|h| *h == "class").ok_or_else(|| format!("{}: no class column", path.display()))?;
    let mut rows: Classes = Vec::new();
    for l in lines {
        let v: Vec<&str> = l.split(',').collect();
        let class = v.get(at).unwrap_or(&"").to_string();
        if v.first() != Some(&"0") || rows.iter().any(|(c, _)| *c == class) {
            continue;
        }
        let cols = head.iter().zip(&v).skip(at + 1).map(|(h, x)| (h.to_string(), x.parse().unwrap_or(f64::NAN)));
        rows.push((class, cols.collect()));
    }
    Ok(rows)
}
