//! `npqos trace stats`, `npqos trace detect` and `npqos trace ethernet`.

use crate::error::from_trace;
use crate::output::num;
use anyhow::Result;
use npqos_sim::trace::stats::{TraceStats, SIZE_BIN_EDGES};
use std::path::PathBuf;

/// The statistics of each file, then their total when there are several.
fn collect(files: &[PathBuf], lenient: bool) -> Result<Vec<TraceStats>> {
    let mut all = Vec::with_capacity(files.len());
    for f in files {
        all.push(TraceStats::of_file(f, lenient).map_err(from_trace)?);
    }
    if files.len() > 1 {
        all.push(TraceStats::total(&all));
    }
    Ok(all)
}

/// What `npqos trace stats --json` prints: one object per file, then a `total` object when
/// several files are given.
pub fn stats_json(files: &[PathBuf], lenient: bool) -> Result<Vec<serde_json::Value>> {
    Ok(collect(files, lenient)?.iter().map(|s| s.to_json()).collect())
}

pub fn stats(files: &[PathBuf], json: bool, lenient: bool) -> Result<()> {
    let all = collect(files, lenient)?;
    if json {
        let v: Vec<serde_json::Value> = all.iter().map(|s| s.to_json()).collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    for s in &all {
        println!("{}", s.file);
        if let Some(f) = s.format {
            println!("  format          {f:?}");
        }
        println!(
            "  packets         {} ({} IP, {} non-IP{})",
            s.packets,
            s.ip_packets,
            s.non_ip_packets,
            if s.unsupported_link_packets > 0 {
                format!(", {} on undecoded link types", s.unsupported_link_packets)
            } else {
                String::new()
            }
        );
        println!("  bytes           {} on the wire ({} captured)", s.bytes, s.captured_bytes);
        println!("  duration        {} s", num(s.duration_ns() as f64 * 1e-9));
        println!("  mean size       {} B", num(s.mean_size()));
        let links = s.link_types.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ");
        println!("  link types      {links}");
        println!("  flows           {} unidirectional 5-tuples", s.flows());
        let (p50, p90, p99, max) = s.flow_size_quantiles();
        println!("  flow size       p50 {p50}, p90 {p90}, p99 {p99}, max {max} packets");
        let mut lo = 0;
        let hist: Vec<String> = s
            .size_hist
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let label = match SIZE_BIN_EDGES.get(i) {
                    Some(&hi) => format!("{lo}-{hi}"),
                    None => format!(">{}", lo - 1),
                };
                lo = SIZE_BIN_EDGES.get(i).map_or(lo, |h| h + 1);
                format!("{label}: {c}")
            })
            .collect();
        println!("  sizes (B)       {}", hist.join(", "));
        let act: Vec<String> = s.active_flows().iter().map(|(_, n)| n.to_string()).collect();
        println!("  active flows    {} (per 1/20 of the duration)", act.join(" "));
        if s.corrupt_skipped > 0 || s.abandoned_tail {
            println!(
                "  corrupt records {} skipped{}",
                s.corrupt_skipped,
                if s.abandoned_tail { ", rest of file abandoned" } else { "" }
            );
        }
    }
    Ok(())
}

/// A MAC address as `02:00:00:00:00:01`.
fn mac(text: &str) -> Result<[u8; 6]> {
    let parts: Vec<u8> = text.split(':').filter_map(|p| u8::from_str_radix(p, 16).ok()).collect();
    match (text.split(':').count(), <[u8; 6]>::try_from(parts)) {
        (6, Ok(m)) => Ok(m),
        _ => Err(crate::error::bad(format!("{text:?}: expected a MAC address such as 02:00:00:00:00:01"))),
    }
}

/// `npqos trace ethernet IN OUT`: every record as an Ethernet frame (an Ethernet header with
/// `macs` = [source, destination] in front of a non-Ethernet record's packet), padded to its
/// length on the wire if `pad`; a classic pcap with nanosecond timestamps.
pub fn ethernet(input: &std::path::Path, output: &std::path::Path, macs: [&str; 2], pad: bool) -> Result<()> {
    use npqos_sim::trace::decode::link_payload;
    use npqos_sim::trace::reader::TraceReader;
    use npqos_sim::trace::writer::PcapWriter;
    let (src, dst) = (mac(macs[0])?, mac(macs[1])?);
    let mut r = TraceReader::open(input, false).map_err(from_trace)?;
    let file = std::fs::File::create(output).map_err(|e| crate::error::bad(format!("{}: {e}", output.display())))?;
    let mut w = PcapWriter::new(std::io::BufWriter::new(file), 1, 262_144, true, false)?;
    let (mut n, mut framed, mut padded) = (0u64, 0u64, 0u64);
    let mut frame = Vec::with_capacity(65_600);
    while let Some(rec) = r.next().map_err(from_trace)? {
        frame.clear();
        let wire = if rec.link == 1 {
            frame.extend_from_slice(rec.data);
            rec.orig_len as usize
        } else {
            let Some((ethertype, packet)) = link_payload(&rec) else {
                return Err(crate::error::bad(format!(
                    "{}: record {} has link type {}, which this command does not turn into Ethernet",
                    input.display(),
                    n + 1,
                    rec.link
                )));
            };
            framed += 1;
            frame.extend_from_slice(&dst);
            frame.extend_from_slice(&src);
            frame.extend_from_slice(&ethertype.to_be_bytes());
            frame.extend_from_slice(packet);
            // The header it had on the wire is replaced by 14 bytes of Ethernet.
            (rec.orig_len as usize + 14).saturating_sub(rec.data.len() - packet.len())
        };
        if pad && wire > frame.len() {
            frame.resize(wire, 0);
            padded += 1;
        }
        w.write(rec.ts_ns, &frame, wire.max(frame.len()) as u32)?;
        n += 1;
    }
    w.into_inner().into_inner().map_err(|e| anyhow::anyhow!("{}: {e}", output.display()))?;
    eprintln!(
        "{n} records to {}: {framed} given an Ethernet header, {padded} padded to their length",
        output.display()
    );
    Ok(())
}

/// `npqos trace detect`'s settings.
pub struct Detect {
    pub scan_window: String,
    pub scan_threshold: u32,
    pub syn_window: String,
    pub syn_threshold: u32,
    pub max_tracked: usize,
}

/// An address of a flow key (IPv4 mapped or IPv6) as text.
fn address(a: &[u8; 16], v6: bool) -> String {
    match v6 {
        true => std::net::Ipv6Addr::from(*a).to_string(),
        false => std::net::Ipv4Addr::new(a[12], a[13], a[14], a[15]).to_string(),
    }
}

/// `npqos trace detect FILES`: the port-scan and SYN-flood detectors (`npqos_core::detect`)
/// over each file on its own; per file its packets and what was detected (what, who, when
/// from the file's first packet, how many).
pub fn detect(files: &[PathBuf], d: &Detect, json: bool, lenient: bool) -> Result<()> {
    use npqos_core::detect::{PortScan, SynFlood};
    use npqos_sim::trace::decode::decode;
    use npqos_sim::trace::reader::TraceReader;
    let dur = |k: &str, v: &str| {
        npqos_sim::units::parse_duration(v)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| crate::error::bad(format!("--{k} {v}: expected a positive duration such as 1s")))
    };
    let (scan_w, syn_w) = (dur("scan-window", &d.scan_window)?, dur("syn-window", &d.syn_window)?);
    if d.scan_threshold == 0 || d.syn_threshold == 0 || d.max_tracked == 0 {
        return Err(crate::error::bad("--scan-threshold, --syn-threshold and --max-tracked: expected at least 1"));
    }
    let mut out = Vec::new();
    for f in files {
        let mut r = TraceReader::open(f, lenient).map_err(from_trace)?;
        let mut scan = PortScan::new(scan_w.as_nanos(), d.scan_threshold, d.max_tracked);
        let mut syn = SynFlood::new(syn_w.as_nanos(), d.syn_threshold, d.max_tracked);
        let (mut packets, mut first, mut found) = (0u64, None::<u64>, Vec::new());
        while let Some(rec) = r.next().map_err(from_trace)? {
            let Ok(m) = decode(&rec) else { continue };
            packets += 1;
            let t0 = *first.get_or_insert(rec.ts_ns);
            let ts = rec.ts_ns.saturating_sub(t0);
            let hits = [scan.packet(ts, &m.flow, m.tcp_flags), syn.packet(ts, &m.flow, m.tcp_flags)];
            for h in hits.into_iter().flatten() {
                found.push(serde_json::json!({
                    "what": h.what,
                    "who": address(&h.who, m.flow.is_v6),
                    "at_s": h.at_ns as f64 / 1e9,
                    "window_start_s": h.window_start_ns as f64 / 1e9,
                    "count": h.count,
                }));
            }
        }
        out.push(serde_json::json!({
            "file": f.display().to_string(),
            "ip_packets": packets,
            "detections": found,
            "untracked_packets": scan.untracked + syn.untracked,
        }));
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    for o in &out {
        let found = o["detections"].as_array().map_or(&[][..], |v| v.as_slice());
        println!("{}: {} IP packets, {} detections", o["file"].as_str().unwrap_or(""), o["ip_packets"], found.len());
        for h in found {
            println!(
                "  {:<9} {:<39} at {:>10.6} s  count {}",
                h["what"].as_str().unwrap_or(""),
                h["who"].as_str().unwrap_or(""),
                h["at_s"].as_f64().unwrap_or(0.0),
                h["count"]
            );
        }
    }
    Ok(())
}
