//! The `link` and `kim` scenario tables: `[link]`, `[queues]`, `[traffic]` and (kim) `[shaper]`
//! (docs/scenarios.md lists every key with its unit and default).

use super::{Problem, Reader, ShaperSpec};
use crate::trace::Alignment;
use crate::units::fmt_size;
use crate::workload::{GapDist, SizeDist};
use npqos_core::{Duration, Rate};
use std::path::{Path, PathBuf};

/// Where synthetic packet sizes come from.
#[derive(Clone, Debug, PartialEq)]
pub enum SizeSpec {
    /// A closed-form or tabulated distribution (IMIX, constant, uniform).
    Dist(SizeDist),
    /// The wire lengths of the IP packets of these captures (read when the model is built).
    Trace { files: Vec<PathBuf> },
}

impl SizeSpec {
    /// Builds the distribution (reads the captures for `Trace`).
    pub fn build(&self) -> Result<SizeDist, crate::trace::TraceError> {
        match self {
            SizeSpec::Dist(d) => Ok(d.clone()),
            SizeSpec::Trace { files } => crate::workload::empirical_sizes_from_trace(files),
        }
    }
    /// The smallest size, or 40 B for a trace not yet read (memory estimates only).
    pub fn min_hint(&self) -> u32 {
        match self {
            SizeSpec::Dist(d) => d.min(),
            SizeSpec::Trace { .. } => 40,
        }
    }
}

/// Where the traffic comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Traffic {
    /// Per-queue arrivals at `overload` times the queue's fair share; with a `population`, one
    /// aggregate stream at `overload` times the link rate whose packets belong to the flows of a
    /// [`crate::workload::FlowPopulation`], each flow's packets in the queue its id hashes to.
    Synthetic {
        overload: f64,
        sizes: SizeSpec,
        arrivals: GapDist,
        population: Option<PopulationSpec>,
    },
    Trace {
        files: Vec<PathBuf>,
        time_scale: f64,
        flow_multiply: u32,
        lenient: bool,
        align: Alignment,
    },
}

/// A flow population (`traffic.flows` and the keys after it).
#[derive(Clone, Debug, PartialEq)]
pub struct PopulationSpec {
    /// Concurrent flow slots.
    pub flows: u32,
    /// `None`: equal weights; `Some(r)`: slot `i` weighs `r^i`.
    pub decay_ratio: Option<f64>,
    /// `None`: flows never end; `Some((shape, min))`: Pareto packets per flow, at least `min`.
    pub flow_packets: Option<(f64, u64)>,
}

/// Default cap on the gap between consecutive records of one file under `align = "start"`
/// (the nDPI corpus of the reproductions uses the same).
pub const DEFAULT_MAX_GAP: Duration = Duration::from_millis(1000);

/// The `[link]`, `[queues]` and `[traffic]` tables of a `link` or `kim` scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    pub link_rate: Rate,
    pub scheduler: String,
    pub quantum: u64,
    pub queues: u32,
    pub buffer: u64,
    /// `queues.aqm = "codel"` (the link model's): CoDel on every queue (docs/codel.md).
    pub aqm: Option<npqos_core::pipeline::codel::CodelParams>,
    pub traffic: Traffic,
}

/// Reads the link tables (and `[shaper]` when `model` is "kim"), recording every problem.
pub(crate) fn read(
    root: &toml::Table,
    model: &str,
    base_dir: &Path,
    probs: &mut Vec<Problem>,
) -> (LinkSpec, Option<ShaperSpec>) {
    let mut link = Reader::new(root, "link", probs);
    let link_rate = link.rate("rate", Rate::gbps(10), probs);
    if link_rate.is_zero() {
        probs.push(Problem {
            key: "link.rate".into(),
            value: Some("0".into()),
            message: "expected a positive rate".into(),
        });
    }
    let scheduler = link.choice("scheduler", "drr", &["drr"], probs);
    let quantum = link.size("quantum", 1500, probs);
    // The DRR keeps a deficit below 2^63 in one word with its flag: at most 2^48 bytes.
    if quantum == 0 || quantum > 1 << 48 {
        probs.push(Problem {
            key: "link.quantum".into(),
            value: Some(format!("\"{quantum}B\"")),
            message: "expected a size from 1B to 2^48 B".into(),
        });
    }
    link.finish(probs);

    let mut q = Reader::new(root, "queues", probs);
    let queues = q.int("count", 16, 1, u32::MAX as i64 - 1, probs) as u32;
    let buffer = q.size("buffer", 64 << 10, probs);
    let aqm = super::shaper::read_aqm(&mut q, probs);
    q.finish(probs);
    if let Some(a) = aqm {
        // kim's queues are shaped by its own model, not managed; the link model's packets carry
        // no ECN field.
        let (key, message) = match model == "kim" {
            true => ("queues.aqm", "the link model's key: kim's queues are shaped, not managed"),
            false => ("queues.ecn", "the link model's packets are not ECN-capable: nothing would be marked"),
        };
        if model == "kim" || a.ecn {
            probs.push(Problem { key: key.into(), value: None, message: message.into() });
        }
    }

    let traffic = read_traffic(root, model, base_dir, probs);

    let shaper = (model == "kim").then(|| super::kim::read(root, queues, &traffic, probs));
    (LinkSpec { link_rate, scheduler, quantum, queues, buffer, aqm, traffic }, shaper)
}

/// Reads `[traffic]` of a `link` or `kim` scenario, recording every problem: a trace or
/// synthetic input, and the other source's keys refused.
fn read_traffic(root: &toml::Table, model: &str, base_dir: &Path, probs: &mut Vec<Problem>) -> Traffic {
    let mut t = Reader::new(root, "traffic", probs);
    let source = t.choice("source", "synthetic", &["synthetic", "trace"], probs);
    let traffic = if source == "trace" {
        read_trace(&mut t, base_dir, probs)
    } else {
        read_synthetic(&mut t, model, base_dir, probs)
    };
    for k in ["files", "time_scale", "flow_multiply", "lenient"] {
        if source != "trace" {
            t.consume(k);
            if t.present(k) {
                probs.push(Problem {
                    key: format!("traffic.{k}"),
                    value: None,
                    message: "only applies to source = \"trace\"".into(),
                });
            }
        }
    }
    if source == "trace" {
        for k in [
            "flows",
            "flow_weights",
            "decay_ratio",
            "flow_packets_shape",
            "flow_packets_min",
            "overload",
            "sizes",
            "size",
            "min_size",
            "max_size",
            "size_files",
            "arrivals",
            "on_mean",
            "off_mean",
            "pareto_shape",
        ] {
            t.consume(k);
            if t.present(k) {
                probs.push(Problem {
                    key: format!("traffic.{k}"),
                    value: None,
                    message: "only applies to source = \"synthetic\"".into(),
                });
            }
        }
    }
    t.finish(probs);
    traffic
}

/// `source = "trace"`: the captures and how they are replayed.
fn read_trace(t: &mut Reader<'_>, base_dir: &Path, probs: &mut Vec<Problem>) -> Traffic {
    let files = t.files("files", base_dir, probs);
    let time_scale = t.float("time_scale", 1.0, probs, |v| v > 0.0, "greater than 0");
    let flow_multiply = t.int("flow_multiply", 1, 1, 65_535, probs) as u32;
    let lenient = t.boolean("lenient", false, probs);
    let default_align = if files.len() > 1 { "start" } else { "absolute" };
    let align = t.choice("align", default_align, &["start", "absolute"], probs);
    let max_gap = t.duration("max_gap", DEFAULT_MAX_GAP, probs);
    let align = if align == "start" {
        if max_gap.is_zero() {
            probs.push(Problem {
                key: "traffic.max_gap".into(),
                value: Some(format!("\"{max_gap}\"")),
                message: "expected a positive duration".into(),
            });
        }
        Alignment::Start { max_gap }
    } else {
        if t.present("max_gap") {
            probs.push(Problem {
                key: "traffic.max_gap".into(),
                value: Some(format!("\"{max_gap}\"")),
                message: "only applies with traffic.align = \"start\"".into(),
            });
        }
        Alignment::Absolute
    };
    Traffic::Trace { files, time_scale, flow_multiply, lenient, align }
}

/// `source = "synthetic"`: overload, sizes, arrivals and an optional flow population.
fn read_synthetic(t: &mut Reader<'_>, model: &str, base_dir: &Path, probs: &mut Vec<Problem>) -> Traffic {
    let overload = t.float("overload", 0.9, probs, |v| v > 0.0 && v <= 1000.0, "greater than 0 and at most 1000");
    let kind = t.choice("sizes", "imix", &["imix", "constant", "uniform", "trace"], probs);
    let sizes = match kind.as_str() {
        "constant" => {
            let s = t.size("size", 1500, probs);
            check_pkt(s, "traffic.size", probs);
            SizeSpec::Dist(SizeDist::Constant(s.clamp(1, 65535) as u32))
        }
        "trace" => SizeSpec::Trace { files: t.files("size_files", base_dir, probs) },
        "uniform" => {
            let a = t.size("min_size", 40, probs);
            let b = t.size("max_size", 1500, probs);
            check_pkt(a, "traffic.min_size", probs);
            check_pkt(b, "traffic.max_size", probs);
            if a > b {
                probs.push(Problem {
                    key: "traffic.min_size".into(),
                    value: Some(format!("\"{a}B\"")),
                    message: format!("expected at most traffic.max_size ({b}B)"),
                });
            }
            let (a, b) = (a.clamp(1, 65535) as u32, b.clamp(1, 65535) as u32);
            SizeSpec::Dist(SizeDist::Uniform { min: a.min(b), max: b.max(a) })
        }
        _ => SizeSpec::Dist(SizeDist::kim_imix()),
    };
    for k in ["size", "min_size", "max_size", "size_files"] {
        let belongs = match k {
            "size" => kind == "constant",
            "size_files" => kind == "trace",
            _ => kind == "uniform",
        };
        t.consume(k);
        if t.present(k) && !belongs {
            probs.push(Problem {
                key: format!("traffic.{k}"),
                value: None,
                message: format!("does not apply to sizes = {kind:?}"),
            });
        }
    }
    let akind = t.choice("arrivals", "exponential", &["constant", "exponential", "onoff"], probs);
    let arrivals = match akind.as_str() {
        "constant" => GapDist::Constant,
        "onoff" => {
            let on_mean = t.duration("on_mean", Duration::from_millis(10), probs);
            let off_mean = t.duration("off_mean", Duration::from_millis(40), probs);
            for (k, v) in [("on_mean", on_mean), ("off_mean", off_mean)] {
                if v.is_zero() {
                    probs.push(Problem {
                        key: format!("traffic.{k}"),
                        value: Some("\"0s\"".into()),
                        message: "expected a positive duration".into(),
                    });
                }
            }
            let shape = t.float("pareto_shape", 1.5, probs, |v| v > 1.0, "greater than 1 (finite mean)");
            GapDist::OnOff { on_mean, off_mean, shape }
        }
        _ => GapDist::Exponential,
    };
    if akind != "onoff" {
        for k in ["on_mean", "off_mean", "pareto_shape"] {
            if t.present(k) {
                probs.push(Problem {
                    key: format!("traffic.{k}"),
                    value: None,
                    message: format!("does not apply to arrivals = {akind:?}"),
                });
            }
        }
    }
    let population = if t.present("flows") {
        let flows = t.int("flows", 1000, 1, 1 << 26, probs) as u32;
        let w = t.choice("flow_weights", "equal", &["equal", "exp-decay"], probs);
        let ratio = t.float("decay_ratio", 0.999, probs, |v| v > 0.0 && v <= 1.0, "in (0, 1]");
        if w != "exp-decay" && t.present("decay_ratio") {
            probs.push(Problem {
                key: "traffic.decay_ratio".into(),
                value: None,
                message: "only applies with flow_weights = \"exp-decay\"".into(),
            });
        }
        let shape = t.float("flow_packets_shape", 1.2, probs, |v| v > 0.0 && v <= 100.0, "greater than 0");
        let min = t.int("flow_packets_min", 1, 1, 1 << 40, probs) as u64;
        let ends = t.present("flow_packets_shape") || t.present("flow_packets_min");
        if model == "kim" {
            probs.push(Problem {
                key: "traffic.flows".into(),
                value: None,
                message:
                    "model = \"kim\" shapes per-queue synthetic input; a flow population applies to model = \"link\""
                        .into(),
            });
        }
        Some(PopulationSpec {
            flows,
            decay_ratio: (w == "exp-decay").then_some(ratio),
            flow_packets: ends.then_some((shape, min)),
        })
    } else {
        for k in ["flow_weights", "decay_ratio", "flow_packets_shape", "flow_packets_min"] {
            t.consume(k);
            if t.present(k) {
                probs.push(Problem {
                    key: format!("traffic.{k}"),
                    value: None,
                    message: "only applies with traffic.flows (a flow population)".into(),
                });
            }
        }
        None
    };
    Traffic::Synthetic { overload, sizes, arrivals, population }
}

impl LinkSpec {
    /// Upper estimate of one replication's memory: per-queue state (queue record, arrival
    /// generator, DRR list entry, pending arrival event, bucket state for kim) plus the
    /// packet-node pool in the worst case (every buffer full of minimum-size packets) and the
    /// time series.
    pub fn estimate_memory(&self, shaper: Option<&ShaperSpec>, duration: Duration, sample: Duration) -> u128 {
        let n = self.queues as u128;
        // See models::link and models::kim for the layouts (kim adds the bucket state, 50 B).
        // DRR: an 8 B deficit and, at worst, 8 B of its ring (the queue count rounded up to a
        // power of two, 4 B each).
        let per_queue = 32 + 64 + 16 + 48 + 16 + if shaper.is_some() { 56 } else { 0 };
        // A flow population: a weight (alias table, 16 B) and a flow id and packets left per slot.
        let population = match &self.traffic {
            Traffic::Synthetic { population: Some(p), .. } => p.flows as u128 * 32,
            _ => 0,
        };
        let min_pkt = match &self.traffic {
            Traffic::Synthetic { sizes, .. } => sizes.min_hint().max(1) as u128,
            Traffic::Trace { .. } => 40,
        };
        // kim with an ideal link dropping while disabled never holds a packet past its arrival.
        let buffers = !matches!(shaper, Some(sh) if !sh.shared_link && !sh.queue_while_disabled);
        let nodes = if buffers { n * (self.buffer as u128 / min_pkt + 1) } else { n };
        let series = 2 * 3 * 16 * (duration.as_nanos() / sample.as_nanos().max(1)) as u128;
        n * per_queue + nodes * 16 + series + population + (1 << 20)
    }
}

/// The resolved tables (every default filled in).
pub(crate) fn to_toml(l: &LinkSpec, shaper: Option<&ShaperSpec>, root: &mut toml::Table) {
    let mut link = toml::Table::new();
    link.insert("rate".into(), l.link_rate.to_string().into());
    link.insert("scheduler".into(), l.scheduler.clone().into());
    link.insert("quantum".into(), fmt_size(l.quantum).into());
    root.insert("link".into(), link.into());
    let mut q = toml::Table::new();
    q.insert("count".into(), (l.queues as i64).into());
    q.insert("buffer".into(), fmt_size(l.buffer).into());
    if l.aqm.is_some() {
        super::shaper::write_aqm(l.aqm.as_ref(), &mut q);
    }
    root.insert("queues".into(), q.into());
    let mut t = toml::Table::new();
    match &l.traffic {
        Traffic::Synthetic { overload, sizes, arrivals, population } => {
            t.insert("source".into(), "synthetic".into());
            t.insert("overload".into(), (*overload).into());
            if let Some(p) = population {
                t.insert("flows".into(), i64::from(p.flows).into());
                match p.decay_ratio {
                    Some(r) => {
                        t.insert("flow_weights".into(), "exp-decay".into());
                        t.insert("decay_ratio".into(), r.into());
                    }
                    None => {
                        t.insert("flow_weights".into(), "equal".into());
                    }
                }
                if let Some((shape, min)) = p.flow_packets {
                    t.insert("flow_packets_shape".into(), shape.into());
                    t.insert("flow_packets_min".into(), (min as i64).into());
                }
            }
            match sizes {
                SizeSpec::Trace { files } => {
                    t.insert("sizes".into(), "trace".into());
                    t.insert(
                        "size_files".into(),
                        toml::Value::Array(files.iter().map(|f| f.display().to_string().into()).collect()),
                    );
                }
                SizeSpec::Dist(SizeDist::Constant(s)) => {
                    t.insert("sizes".into(), "constant".into());
                    t.insert("size".into(), format!("{s}B").into());
                }
                SizeSpec::Dist(SizeDist::Uniform { min, max }) => {
                    t.insert("sizes".into(), "uniform".into());
                    t.insert("min_size".into(), format!("{min}B").into());
                    t.insert("max_size".into(), format!("{max}B").into());
                }
                SizeSpec::Dist(SizeDist::Empirical(_)) => {
                    t.insert("sizes".into(), "imix".into());
                }
            }
            match arrivals {
                GapDist::Constant => {
                    t.insert("arrivals".into(), "constant".into());
                }
                GapDist::Exponential => {
                    t.insert("arrivals".into(), "exponential".into());
                }
                GapDist::OnOff { on_mean, off_mean, shape } => {
                    t.insert("arrivals".into(), "onoff".into());
                    t.insert("on_mean".into(), on_mean.to_string().into());
                    t.insert("off_mean".into(), off_mean.to_string().into());
                    t.insert("pareto_shape".into(), (*shape).into());
                }
            }
        }
        Traffic::Trace { files, time_scale, flow_multiply, lenient, align } => {
            t.insert("source".into(), "trace".into());
            t.insert(
                "files".into(),
                toml::Value::Array(files.iter().map(|f| f.display().to_string().into()).collect()),
            );
            t.insert("time_scale".into(), (*time_scale).into());
            t.insert("flow_multiply".into(), (*flow_multiply as i64).into());
            t.insert("lenient".into(), (*lenient).into());
            match align {
                Alignment::Absolute => {
                    t.insert("align".into(), "absolute".into());
                }
                Alignment::Start { max_gap } => {
                    t.insert("align".into(), "start".into());
                    t.insert("max_gap".into(), max_gap.to_string().into());
                }
            }
        }
    }
    root.insert("traffic".into(), t.into());
    if let Some(sh) = shaper {
        super::kim::write(sh, root);
    }
}

fn check_pkt(s: u64, key: &str, probs: &mut Vec<Problem>) {
    if !(1..=65535).contains(&s) {
        probs.push(Problem {
            key: key.into(),
            value: Some(format!("\"{s}B\"")),
            message: "expected a packet size from 1B to 65535B".into(),
        });
    }
}
