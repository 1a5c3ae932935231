//! What a router run reports (docs/router.md, "Outputs"), and the conservation check.

use super::pipeline::{Outcome, RowCounts, Tables, DROPS, STAGES};
use super::RouterError;
use crate::engine::StopReason;
use crate::results::{ClassRecord, CountRow, FlowRecord, Histogram, RunResult, Series};
use npqos_core::pipeline::FlowIndex;

/// The pipeline's flow and class counters as result rows (flows.csv, classes.csv), the flows
/// named by the driver's `index`: the exact table's flows in the order first seen, the
/// sketch's heaviest flows past it, then every flow past it together; the classes in their
/// order; the drops by reason those the configuration can give, in that order. The router and
/// live's forwarder alike.
pub(crate) fn records(t: &Tables, index: &FlowIndex) -> (Vec<FlowRecord>, Vec<ClassRecord>) {
    let row = |c: &RowCounts| {
        let mut r = CountRow::from(c);
        r.dropped = t.reasons.iter().map(|&i| c.dropped[i]).collect();
        r
    };
    let class = |c: u32| t.services.get(c as usize).cloned().unwrap_or_else(|| "-".to_string());
    let zero = RowCounts::default();
    let exact = |i: usize| row(t.flows.get(i).unwrap_or(&zero));
    let flows = FlowRecord::table(index, exact, row(&t.other), t.reasons.len(), class);
    let classes = (t.classes.iter())
        .map(|c| ClassRecord {
            class: c.name.clone(),
            counts: row(&c.counts),
            delay_p50_ns: c.delay_p50_ns,
            delay_p99_ns: c.delay_p99_ns,
        })
        .collect();
    (flows, classes)
}

/// Checks conservation and writes the result, the flows named by the stream's `index`.
pub(super) fn finish(o: Outcome, index: &FlowIndex, stop: StopReason) -> Result<RunResult, RouterError> {
    let offered = o.offered.iter().sum::<u64>() + o.unclassified;
    let delivered: u64 = o.delivered.iter().sum();
    let dropped: u64 = o.drops.iter().sum();
    if offered != delivered + dropped + o.in_flight {
        return Err(RouterError::Conservation { offered, delivered, dropped, in_flight: o.in_flight });
    }
    o.elements.clone()?;
    let (flows, classes) = records(&o.tables, index);
    let detections = crate::results::DetectionRecord::from_found(&o.detections, &o.names);
    let mut run = RunResult {
        drop_reasons: o.reasons.iter().map(|&r| DROPS[r].to_string()).collect(),
        flows,
        classes,
        detections,
        complete: matches!(stop, StopReason::Drained | StopReason::EndTime),
        stop_reason: format!("{stop:?}").to_lowercase(),
        sim_time_ns: o.sim_ns,
        events: o.events,
        ..Default::default()
    };
    run.scalar("offered_packets", offered as f64, "packets");
    run.scalar("delivered_packets", delivered as f64, "packets");
    run.scalar("dropped_packets", dropped as f64, "packets");
    run.scalar("in_flight_packets", o.in_flight as f64, "packets");
    for &i in &o.reasons {
        run.scalar(&format!("dropped_{}", DROPS[i]), o.drops[i] as f64, "packets");
    }
    let late: u64 = o.late.iter().sum();
    let processed: u64 = o.hist.iter().map(|h| h[1].len()).sum();
    run.scalar("late_packets", late as f64, "packets");
    run.scalar("late_percent", 100.0 * late as f64 / processed.max(1) as f64, "%");
    // Over the time from 0 to the last delivery (the drain after it is idle by construction).
    let busy = o.last_delivery_ns.max(1) as f64 * 1e-9;
    run.scalar("throughput", o.delivered_bytes as f64 * 8.0 / busy * 1e-9, "Gbps");
    run.scalar("link_utilization", o.delivered_bytes as f64 * 8.0 / busy / o.link_bps, "fraction");
    let mut all = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds");
    for h in &o.hist {
        all.add(&h[3]).expect("same bounds");
    }
    for (q, label) in [(0.5, "p50"), (0.99, "p99"), (0.999, "p999")] {
        run.scalar(&format!("e2e_{label}"), quantile_us(&all, q), "us");
    }
    for (s, n) in o.names.iter().enumerate() {
        let h = &o.hist[s];
        run.scalar(&format!("offered_packets.{n}"), o.offered[s] as f64, "packets");
        run.scalar(&format!("delivered_packets.{n}"), o.delivered[s] as f64, "packets");
        run.scalar(&format!("dropped_packets.{n}"), o.drops_by_service[s] as f64, "packets");
        run.scalar(&format!("late_percent.{n}"), 100.0 * o.late[s] as f64 / h[1].len().max(1) as f64, "%");
        for (q, label) in [(0.5, "p50"), (0.99, "p99"), (0.999, "p999")] {
            run.scalar(&format!("e2e_{label}.{n}"), quantile_us(&h[3], q), "us");
        }
        for (i, stage) in STAGES[..3].iter().enumerate() {
            run.scalar(&format!("{stage}_p99.{n}"), quantile_us(&h[i], 0.99), "us");
        }
        run.histograms.push(log_bins(&format!("e2e.{n}"), &h[3]));
    }
    run.scalar("processors", o.processors as f64, "processors");
    for (name, v, unit) in o.stage_scalars {
        run.scalar(&name, v, unit);
    }
    run.series = (o.series.into_iter())
        .map(|l| Series { name: l.name, x_unit: "s".into(), unit: l.unit.into(), points: l.points })
        .collect();
    Ok(run)
}

fn quantile_us(h: &hdrhistogram::Histogram<u64>, q: f64) -> f64 {
    if h.is_empty() {
        0.0
    } else {
        h.value_at_quantile(q) as f64 / 1e3
    }
}

/// A latency histogram in power-of-two bins of microseconds.
fn log_bins(name: &str, h: &hdrhistogram::Histogram<u64>) -> Histogram {
    let mut bins = Vec::new();
    if !h.is_empty() {
        let mut lo = 0u64;
        let mut hi = 1_000u64;
        while lo <= h.max() {
            let n = h.count_between(lo, hi - 1);
            if n > 0 {
                bins.push((lo as f64 / 1e3, hi as f64 / 1e3, n));
            }
            lo = hi;
            hi *= 2;
        }
    }
    Histogram { name: name.into(), unit: "us".into(), bins }
}
