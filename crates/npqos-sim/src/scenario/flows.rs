//! `[traffic]` of the flow-driven models (`dqs`, `router`): dqs's synthetic flow population or
//! a trace corpus, read, checked and written in one place.
//!
//! ```toml
//! [traffic]
//! source = "synthetic"   # flows, mean_packets, pareto_shape, mean_gap, sizes ("imix" or "constant"), size
//! # source = "trace":      files, flow_multiply, time_scale, max_gap, lenient
//! ```

use super::{Problem, Reader};
use crate::units::fmt_size;
use crate::workload::flows::SyntheticFlows;
use crate::workload::SizeDist;
use npqos_core::Duration;
use std::path::{Path, PathBuf};

/// Where a flow-driven model's packets come from.
#[derive(Clone, Debug, PartialEq)]
pub enum FlowTraffic {
    /// `flows` in progress, Pareto packets per flow, exponential gaps, IMIX or constant sizes.
    Synthetic { flows: u32, mean_packets: f64, pareto_shape: f64, mean_gap: Duration, size: Option<u32> },
    /// `flow_multiply` rotated copies of a corpus, `time_scale` times faster.
    Trace { files: Vec<PathBuf>, flow_multiply: u32, time_scale: f64, max_gap: Duration, lenient: bool },
}

const SYNTHETIC_KEYS: [&str; 6] = ["flows", "mean_packets", "pareto_shape", "mean_gap", "sizes", "size"];
const TRACE_KEYS: [&str; 5] = ["files", "flow_multiply", "time_scale", "max_gap", "lenient"];

impl FlowTraffic {
    /// Reads `source` and its keys from `[traffic]` (`r`), recording every problem; the other
    /// source's keys (and the model's own synthetic-only `extra_synthetic` keys under a trace)
    /// are problems. `default_flows` is the model's default population.
    pub(crate) fn read(
        r: &mut Reader,
        base_dir: &Path,
        default_flows: u32,
        extra_synthetic: &[&str],
        probs: &mut Vec<Problem>,
    ) -> Self {
        let source = r.choice("source", "synthetic", &["synthetic", "trace"], probs);
        let other: Vec<&str> = if source == "trace" {
            SYNTHETIC_KEYS.iter().chain(extra_synthetic).copied().collect()
        } else {
            TRACE_KEYS.to_vec()
        };
        r.not_applicable(other, &format!("source = {source:?}"), probs);
        if source == "trace" {
            let files = r.files("files", base_dir, probs);
            let flow_multiply = r.int("flow_multiply", 1, 1, 65_535, probs) as u32;
            let time_scale = r.float("time_scale", 1.0, probs, |v| v > 0.0 && v <= 1e6, "greater than 0");
            let max_gap = r.positive_duration("max_gap", super::DEFAULT_MAX_GAP, probs);
            let lenient = r.boolean("lenient", true, probs);
            return FlowTraffic::Trace { files, flow_multiply, time_scale, max_gap, lenient };
        }
        let flows = r.int("flows", default_flows as i64, 1, 1 << 26, probs) as u32;
        let mean_packets = r.float("mean_packets", 10.0, probs, |v| (1.0..=1e9).contains(&v), "from 1 to 1e9");
        let pareto_shape = r.float("pareto_shape", 1.2, probs, |v| v > 1.0 && v <= 100.0, "greater than 1");
        let mean_gap = r.positive_duration("mean_gap", Duration::from_millis(10), probs);
        let sizes = r.choice("sizes", "imix", &["imix", "constant"], probs);
        let size = r.size("size", 1500, probs);
        if sizes != "constant" && r.present("size") {
            probs.push(Problem {
                key: "traffic.size".into(),
                value: None,
                message: "only applies with sizes = \"constant\"".into(),
            });
        }
        if !(1..=65_535).contains(&size) {
            probs.push(Problem {
                key: "traffic.size".into(),
                value: Some(format!("\"{size}B\"")),
                message: "expected a packet size from 1B to 65535B".into(),
            });
        }
        let size = (sizes == "constant").then_some(size.clamp(1, 65_535) as u32);
        FlowTraffic::Synthetic { flows, mean_packets, pareto_shape, mean_gap, size }
    }

    /// Writes the keys [`FlowTraffic::read`] reads into `t` (the `[traffic]` table).
    pub(crate) fn write(&self, t: &mut toml::Table) {
        match self {
            FlowTraffic::Synthetic { flows, mean_packets, pareto_shape, mean_gap, size } => {
                t.insert("source".into(), "synthetic".into());
                t.insert("flows".into(), (*flows as i64).into());
                t.insert("mean_packets".into(), (*mean_packets).into());
                t.insert("pareto_shape".into(), (*pareto_shape).into());
                t.insert("mean_gap".into(), mean_gap.to_string().into());
                match size {
                    Some(s) => {
                        t.insert("sizes".into(), "constant".into());
                        t.insert("size".into(), fmt_size(*s as u64).into());
                    }
                    None => {
                        t.insert("sizes".into(), "imix".into());
                    }
                }
            }
            FlowTraffic::Trace { files, flow_multiply, time_scale, max_gap, lenient } => {
                t.insert("source".into(), "trace".into());
                t.insert(
                    "files".into(),
                    toml::Value::Array(files.iter().map(|f| f.display().to_string().into()).collect()),
                );
                t.insert("flow_multiply".into(), (*flow_multiply as i64).into());
                t.insert("time_scale".into(), (*time_scale).into());
                t.insert("max_gap".into(), max_gap.to_string().into());
                t.insert("lenient".into(), (*lenient).into());
            }
        }
    }

    /// The synthetic population for `duration` of arrivals (`None` for a trace).
    pub fn synthetic(&self, duration: Duration) -> Option<SyntheticFlows> {
        let FlowTraffic::Synthetic { flows, mean_packets, pareto_shape, mean_gap, size } = self else {
            return None;
        };
        Some(SyntheticFlows {
            in_progress: *flows,
            mean_packets: *mean_packets,
            pareto_shape: *pareto_shape,
            mean_gap: *mean_gap,
            sizes: size.map_or_else(SizeDist::kim_imix, SizeDist::Constant),
            duration,
        })
    }

    /// Memory of the traffic source: `per_flow` bytes per synthetic flow in progress, or the
    /// corpus in memory (about twice its files).
    pub fn estimate_memory(&self, per_flow: u128) -> u128 {
        match self {
            FlowTraffic::Synthetic { flows, .. } => *flows as u128 * per_flow,
            FlowTraffic::Trace { files, .. } => {
                files.iter().map(|f| std::fs::metadata(f).map_or(0, |m| m.len()) as u128).sum::<u128>() * 2
            }
        }
    }
}
