//! `npqos trace stats`.

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
