//! Everest's prototype on real frames (issue #43 part 3; docs/everest.md, "The prototype on
//! real frames"): section 6's two services on four processors under a changing mix, as a
//! capture that tcpreplay sends through `npqos live` on the namespace bed, and as the router
//! simulation of the same configuration over the same capture (`wire::compare`). The same
//! plots from both: offered rate, processors and late packets per service over time.
//!
//! The profile is `everest-fig6`'s (`experiments::everest::fig6::PROFILE`: each service's work
//! per phase in processors) at a twentieth of its packet rate: a packet costs 200 us of a
//! processor instead of 10 us, so one processor's work is 5,000 packets/s and the busiest
//! phase offers 21,000 packets/s, which this 2-core machine's sender, kernel and forwarder
//! carry without loss. The tolerance is scaled with the cost (D = 40 ms = 200 t_pkt, as
//! fig6's 2 ms = 200 x 10 us); t_sw stays the IXP2400's 2 ms, a real-clock cost.

use super::wire::Compared;
use npqos_sim::experiments::everest::fig6::{FIG6_SERVICES, PROFILE};
use npqos_sim::results::{PlotKind, PlotSpec};
use npqos_sim::trace::writer::{tcp4_frame, udp4_frame, PcapWriter};
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};

/// A processor's time per packet, ns (both services).
pub const T_PKT_NS: u64 = 200_000;

/// The live configuration past `[live]`'s interface keys (for `wire::compare`): the two
/// services by destination (port-scan detector: 198.18.2.0/24; SYN-flood detector: the rest),
/// each with its detector, equal guarantees, four processors under `policy`.
pub fn config(policy: &str) -> String {
    format!(
        r#"sample_every = "10ms"
[processing]
processors = 4
policy = "{policy}"
t_sw = "2ms"
delta = "40ms"
scheduler = "fcfs"
[[services]]
name = "portscan"
dst_prefixes = ["198.18.2.0/24"]
cost_alpha = "{t}us"
cost_beta = "0ns"
tolerance = "10ms"
guarantee = 0.5
[services.function]
kind = "port-scan"
[[services]]
name = "syn-flood"
cost_alpha = "{t}us"
cost_beta = "0ns"
tolerance = "10ms"
guarantee = 0.5
[services.function]
kind = "syn-flood"
"#,
        t = T_PKT_NS / 1000
    )
}

/// The phased capture: per phase of [`PROFILE`] (its times x `scale`), each service's packets
/// Poisson at its work x 5,000 packets/s. The port-scan detector's traffic is DNS queries
/// from 250 clients (198.18.4.x to 198.18.2.10:53, one port of one host each) and, in the
/// first phase, a SYN scan of 198.18.2.20 by 198.18.1.1 (one packet in 10 of the service's,
/// the next port each: about 1,250 ports a second); the SYN-flood detector's is complete
/// handshakes (a SYN, then the third segment from the same client port) from 250 clients
/// (198.18.5.x) to 198.18.3.10:80 and, in the second phase, a flood of SYNs from spoofed
/// sources (198.18.6.x) to 198.18.3.20:80 (one in 8 of the service's draws, a handshake being
/// two packets: about 780 a second), never completed.
/// Returns the packets written.
pub fn capture(path: &Path, scale: f64, seed: u64) -> std::io::Result<u64> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let per_processor = 1e9 / T_PKT_NS as f64;
    let mut packets: Vec<(u64, Vec<u8>)> = Vec::new();
    for s in 0..2 {
        let (mut t, mut start, mut n, mut port) = (0f64, 0f64, 0u64, 1u16);
        for (phase, (_, end, work)) in PROFILE.iter().enumerate() {
            let (end, rate) = (end * scale, work[s] * per_processor);
            t = t.max(start);
            loop {
                t += -(1.0 - rng.random::<f64>()).ln() / rate;
                if t >= end {
                    break;
                }
                n += 1;
                let c = rng.random_range(1..=250u8);
                let ns = (t * 1e9) as u64;
                if s == 0 {
                    if phase == 0 && n.is_multiple_of(10) {
                        packets.push((ns, tcp4_frame([198, 18, 1, 1], [198, 18, 2, 20], 40000, port, true, false, 0)));
                        port = port.wrapping_add(1).max(1);
                    } else {
                        packets.push((ns, udp4_frame([198, 18, 4, c], [198, 18, 2, 10], 30000 + c as u16, 53, 40)));
                    }
                } else if phase == 1 && n.is_multiple_of(8) {
                    let src = [198, 18, 6, rng.random_range(1..=250u8)];
                    packets
                        .push((ns, tcp4_frame(src, [198, 18, 3, 20], 1024 + (n % 60000) as u16, 80, true, false, 0)));
                } else {
                    // A handshake: the SYN now, its third segment 1 ms later (a packet of its own).
                    let sport = 1024 + (n % 60000) as u16;
                    packets.push((ns, tcp4_frame([198, 18, 5, c], [198, 18, 3, 10], sport, 80, true, false, 0)));
                    packets.push((
                        ns + 1_000_000,
                        tcp4_frame([198, 18, 5, c], [198, 18, 3, 10], sport, 80, false, true, 0),
                    ));
                    t += -(1.0 - rng.random::<f64>()).ln() / rate;
                }
            }
            start = end;
        }
    }
    packets.sort_by_key(|p| p.0);
    let mut w = PcapWriter::new(std::io::BufWriter::new(std::fs::File::create(path)?), 1, 65535, true, false)?;
    for (t, f) in &packets {
        w.write(1_700_000_000_000_000_000 + t, f, f.len() as u32)?;
    }
    Ok(packets.len() as u64)
}

/// A run's series `name` from its series.csv (first run): (time s, value) points.
fn series(dir: &Path, name: &str) -> Result<Vec<(f64, f64)>, String> {
    let path = dir.join("series.csv");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let pts: Vec<(f64, f64)> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|v| v.len() >= 5 && v[0] == "0" && v[2] == name)
        .filter_map(|v| Some((v[3].parse().ok()?, v[4].parse().ok()?)))
        .collect();
    match pts.is_empty() {
        true => Err(format!("{}: no series {name}", path.display())),
        false => Ok(pts),
    }
}

/// Per phase of [`PROFILE`] (times x `scale`) and service: the mean of `series` over the
/// samples within the phase (`sum`: their sum instead).
pub fn by_phase(dir: &Path, series_name: &str, scale: f64, sum: bool) -> Result<Vec<[f64; 2]>, String> {
    let mut out = vec![[0.0; 2]; PROFILE.len()];
    for (s, svc) in FIG6_SERVICES.iter().enumerate() {
        let pts = series(dir, &format!("{series_name}.{svc}"))?;
        let mut start = 0.0;
        for (i, (_, end, _)) in PROFILE.iter().enumerate() {
            let end = end * scale;
            let v: Vec<f64> = pts.iter().filter(|p| p.0 > start && p.0 <= end).map(|p| p.1).collect();
            out[i][s] = match sum {
                true => v.iter().sum(),
                false => v.iter().sum::<f64>() / v.len().max(1) as f64,
            };
            start = end;
        }
    }
    Ok(out)
}

/// detections.csv's rows (first run): (class, what, who, at s, count).
pub fn detections(dir: &Path) -> Vec<(String, String, String, f64, u64)> {
    let text = std::fs::read_to_string(dir.join("detections.csv")).unwrap_or_default();
    text.lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>())
        .filter(|v| v.len() >= 8 && v[0] == "0")
        .map(|v| {
            (
                v[2].clone(),
                v[3].clone(),
                v[4].clone(),
                v[5].parse::<f64>().unwrap_or(0.0) / 1e9,
                v[7].parse().unwrap_or(0),
            )
        })
        .collect()
}

/// The three plots of the simulation (`c`'s `sim` run in `dir/sim`) beside the live run's
/// (`dir/live`), each service's simulated and live lines on one plot, written to `out` as
/// `<stem>-offered.svg`, `<stem>-processors.svg` and `<stem>-late.svg`. Returns the files.
pub fn plots(dir: &Path, out: &Path, stem: &str, title: &str) -> Result<Vec<PathBuf>, String> {
    let (sim, live) = (dir.join("sim"), dir.join("live"));
    let mut files = Vec::new();
    for (what, y, label) in [
        ("offered_rate", "offered rate (packets/s; 5,000 = one processor's work)", "offered"),
        ("processors", "processors held", "processors"),
        ("late_packets", "late packets per 10 ms (when done)", "late"),
    ] {
        let mut lines = Vec::new();
        for svc in FIG6_SERVICES {
            lines.push((format!("{svc} (simulation)"), series(&sim, &format!("{what}.{svc}"))?));
            lines.push((format!("{svc} (live)"), series(&live, &format!("{what}.{svc}"))?));
        }
        let spec = PlotSpec {
            name: format!("{stem}-{label}"),
            title: format!("{title}: {label} per service, simulation and live"),
            x_label: "time (s)".into(),
            y_label: y.into(),
            lines,
            kind: PlotKind::Lines,
            ..Default::default()
        };
        let svg = crate::plots::render(&spec).map_err(|e| e.to_string())?;
        let f = out.join(format!("{}.svg", spec.name));
        std::fs::write(&f, svg).map_err(|e| format!("{}: {e}", f.display()))?;
        files.push(f);
    }
    Ok(files)
}

/// Per phase, simulation / live: mean processors per service and late packets per service;
/// then each side's detections.
pub fn table(c: &Compared, dir: &Path, scale: f64) -> Result<String, String> {
    let (sim, live) = (dir.join("sim"), dir.join("live"));
    let (ps, pl) = (by_phase(&sim, "processors", scale, false)?, by_phase(&live, "processors", scale, false)?);
    let (ls, ll) = (by_phase(&sim, "late_packets", scale, true)?, by_phase(&live, "late_packets", scale, true)?);
    let mut t = String::from(
        "| phase | processors portscan (sim / live) | processors syn-flood | late portscan | late syn-flood |\n|---|---|---|---|---|\n",
    );
    for (i, (name, ..)) in PROFILE.iter().enumerate() {
        t += &format!(
            "| {name} | {:.2} / {:.2} | {:.2} / {:.2} | {:.0} / {:.0} | {:.0} / {:.0} |\n",
            ps[i][0], pl[i][0], ps[i][1], pl[i][1], ls[i][0], ll[i][0], ls[i][1], ll[i][1]
        );
    }
    for (side, d) in [("simulation", &sim), ("live", &live)] {
        t += &format!("\n{side} detections:\n");
        for (class, what, who, at, count) in detections(d) {
            t += &format!("  {class:<10} {what:<10} {who:<15} at {at:.3} s  count {count}\n");
        }
    }
    let delivered =
        |wire| FIG6_SERVICES.iter().map(|s| c.get(wire, s, "sent_packets").unwrap_or(f64::NAN)).sum::<f64>();
    t += &format!(
        "\nframes: {} in the capture; sent {} (sim) / {} (live)\n",
        c.packets,
        delivered(false),
        delivered(true)
    );
    Ok(t)
}
