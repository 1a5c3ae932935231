//! `npqos model <short>`: analytical models as sizing tools.
//!
//! `kim` currently gives the workload side of the paper (eqs 15-16) and the cost of the
//! periodic-fill baseline (section 1 / 2.2); the stochastic heap-size model (section 4) comes
//! with the kim mechanism.

use crate::error::bad;
use crate::output::num;
use anyhow::Result;
use npqos_sim::units::{parse_duration, parse_rate};
use npqos_sim::workload::{mean_gap_for_overload, SizeDist};
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct ModelArgs {
    /// Number of shaped queues
    #[arg(long, default_value_t = 1_000_000)]
    queues: u64,
    /// Link (interface) rate shared equally by the queues
    #[arg(long, default_value = "100Gbps")]
    link: String,
    /// Overload factor: input rate / shaped rate (kim eq 15)
    #[arg(long, default_value_t = 1.0)]
    overload: f64,
    /// Packet sizes: imix (kim Table I) or uniform (40-1500 B)
    #[arg(long, default_value = "imix")]
    sizes: String,
    /// Fill period of the periodic-fill baseline
    #[arg(long, default_value = "10us")]
    fill_period: String,
    /// Print JSON instead of a table
    #[arg(long)]
    json: bool,
}

pub fn model(short: &str, a: &ModelArgs) -> Result<()> {
    match short {
        "kim" => kim(a),
        "qcache" | "predictive" | "dqs" | "everest" => {
            Err(bad(format!("npqos model {short}: not implemented yet (its mechanism issue is open); available: kim")))
        }
        other => Err(bad(format!(
            "unknown model {other:?}: expected one of kim (qcache, predictive, dqs, everest are not implemented yet)"
        ))),
    }
}

fn kim(a: &ModelArgs) -> Result<()> {
    let link = parse_rate(&a.link).map_err(|e| bad(format!("--link {:?}: {e}", a.link)))?;
    let period = parse_duration(&a.fill_period).map_err(|e| bad(format!("--fill-period {:?}: {e}", a.fill_period)))?;
    if a.queues == 0 {
        return Err(bad("--queues 0: expected at least one queue"));
    }
    if link.is_zero() || period.is_zero() {
        return Err(bad("--link and --fill-period must be positive"));
    }
    if !(a.overload > 0.0 && a.overload.is_finite()) {
        return Err(bad(format!("--overload {}: expected a positive number", a.overload)));
    }
    let sizes = match a.sizes.as_str() {
        "imix" => SizeDist::kim_imix(),
        "uniform" => SizeDist::Uniform { min: 40, max: 1500 },
        s => return Err(bad(format!("--sizes {s:?}: expected imix or uniform"))),
    };
    let share = link.share(a.queues);
    if share.is_zero() {
        return Err(bad(format!("{} queues on {link} leave less than 1 bit/s per queue", a.queues)));
    }
    let mean = sizes.mean();
    let gap = mean_gap_for_overload(mean, share, a.overload)
        .ok_or_else(|| bad("overload gives no finite inter-packet delay"))?;
    let pps_queue = 1.0 / gap.as_secs_f64();
    // Integer nanoseconds keep 1e6 queues / 10 us exactly 1e11.
    let fills_per_s = a.queues as f64 * 1e9 / period.as_nanos() as f64;
    let tokens_per_fill = share.bits_per_sec() as f64 / 8.0 * period.as_secs_f64();
    let rows = [
        ("per_queue_rate", share.bits_per_sec() as f64, "bit/s", "link / queues"),
        ("mean_packet_size", mean, "B", if a.sizes == "imix" { "kim Table I" } else { "uniform 40-1500 B" }),
        ("mean_interpacket_delay", gap.as_nanos() as f64, "ns", "kim eq 16 solved for the delay"),
        ("packets_per_s_per_queue", pps_queue, "1/s", "1 / delay"),
        ("packets_per_s_total", pps_queue * a.queues as f64, "1/s", "queues / delay"),
        ("periodic_fills_per_s", fills_per_s, "1/s", "kim section 1: queues / fill period"),
        ("periodic_fill_accesses_per_s", 2.0 * fills_per_s, "1/s", "one read-modify-write per fill"),
        ("tokens_per_fill", tokens_per_fill, "B", "kim section 1: rate x period"),
    ];
    if a.json {
        let m: serde_json::Map<String, serde_json::Value> =
            rows.iter().map(|(k, v, u, s)| (k.to_string(), json!({"value": v, "unit": u, "source": s}))).collect();
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"model": "kim", "queues": a.queues, "link": link.to_string(), "overload": a.overload, "sizes": a.sizes, "fill_period": period.to_string(), "results": m})
            )?
        );
    } else {
        println!(
            "kim sizing: {} queues on {link}, overload {}, {} sizes, fill period {period}",
            a.queues, a.overload, a.sizes
        );
        for (k, v, u, s) in rows {
            println!("  {k:<30} {:>16} {u:<6} ({s})", num(v));
        }
        println!("  (the stochastic heap-size model of kim section 4 is not implemented yet)");
    }
    Ok(())
}
