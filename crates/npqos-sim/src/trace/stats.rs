//! Summary statistics of trace files, for `npqos trace stats` and for calibrating workloads.

use super::decode::NonIp;
use super::reader::{linktype, Format, TraceError, TraceReader};
use npqos_core::flow::FlowKey;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Upper edges (inclusive) of the packet-size histogram bins, in bytes; the last bin is open.
pub const SIZE_BIN_EDGES: [u32; 7] = [64, 128, 256, 512, 1024, 1518, 9000];
/// Number of equal time bins of the active-flows series.
pub const ACTIVE_BINS: usize = 20;

#[derive(Clone, Copy, Debug, Default)]
struct FlowInfo {
    packets: u64,
    bytes: u64,
    first: u64,
    last: u64,
}

/// Statistics of one file, or of several merged ("total").
#[derive(Clone, Debug, Default)]
pub struct TraceStats {
    pub file: String,
    pub format: Option<Format>,
    pub packets: u64,
    /// Sum of wire (original) lengths.
    pub bytes: u64,
    pub captured_bytes: u64,
    pub ip_packets: u64,
    pub non_ip_packets: u64,
    /// Records on link types we do not decode (included in `non_ip_packets`).
    pub unsupported_link_packets: u64,
    pub first_ts_ns: Option<u64>,
    pub last_ts_ns: Option<u64>,
    pub link_types: BTreeMap<String, u64>,
    /// Packet counts per size bin (see [`SIZE_BIN_EDGES`]).
    pub size_hist: Vec<u64>,
    pub corrupt_skipped: u64,
    pub abandoned_tail: bool,
    flows: HashMap<FlowKey, FlowInfo>,
}

impl TraceStats {
    fn new(file: String) -> Self {
        TraceStats { file, size_hist: vec![0; SIZE_BIN_EDGES.len() + 1], ..Default::default() }
    }

    /// Reads one file.
    pub fn of_file(path: &Path, lenient: bool) -> Result<TraceStats, TraceError> {
        let mut r = TraceReader::open(path, lenient)?;
        let mut st = TraceStats::new(path.display().to_string());
        st.format = Some(r.format());
        while let Some(rec) = r.next()? {
            let decoded = super::decode::decode(&rec);
            st.add(rec.ts_ns, rec.orig_len, rec.data.len() as u64, rec.link, decoded.map(|m| m.flow));
        }
        let c = r.counters();
        st.corrupt_skipped = c.corrupt_skipped;
        st.abandoned_tail = c.abandoned_tail;
        Ok(st)
    }

    fn add(&mut self, ts: u64, wire: u32, cap: u64, link: u16, flow: Result<FlowKey, NonIp>) {
        self.packets += 1;
        self.bytes += wire as u64;
        self.captured_bytes += cap;
        self.first_ts_ns = Some(self.first_ts_ns.map_or(ts, |f| f.min(ts)));
        self.last_ts_ns = Some(self.last_ts_ns.map_or(ts, |l| l.max(ts)));
        *self.link_types.entry(linktype::name(link)).or_default() += 1;
        let bin = SIZE_BIN_EDGES.iter().position(|&e| wire <= e).unwrap_or(SIZE_BIN_EDGES.len());
        self.size_hist[bin] += 1;
        match flow {
            Ok(k) => {
                self.ip_packets += 1;
                let f = self.flows.entry(k).or_insert(FlowInfo { first: ts, last: ts, ..Default::default() });
                f.packets += 1;
                f.bytes += wire as u64;
                f.first = f.first.min(ts);
                f.last = f.last.max(ts);
            }
            Err(why) => {
                self.non_ip_packets += 1;
                if why == NonIp::UnsupportedLink {
                    self.unsupported_link_packets += 1;
                }
            }
        }
    }

    /// Merges several files' statistics into a "total" for the merged stream.
    pub fn total(all: &[TraceStats]) -> TraceStats {
        let mut t = TraceStats::new("total".into());
        for s in all {
            t.packets += s.packets;
            t.bytes += s.bytes;
            t.captured_bytes += s.captured_bytes;
            t.ip_packets += s.ip_packets;
            t.non_ip_packets += s.non_ip_packets;
            t.unsupported_link_packets += s.unsupported_link_packets;
            t.corrupt_skipped += s.corrupt_skipped;
            t.abandoned_tail |= s.abandoned_tail;
            t.first_ts_ns = match (t.first_ts_ns, s.first_ts_ns) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            t.last_ts_ns = match (t.last_ts_ns, s.last_ts_ns) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            for (k, v) in &s.link_types {
                *t.link_types.entry(k.clone()).or_default() += v;
            }
            for (i, c) in s.size_hist.iter().enumerate() {
                t.size_hist[i] += c;
            }
            for (k, f) in &s.flows {
                let e = t.flows.entry(*k).or_insert(FlowInfo { first: f.first, last: f.last, ..Default::default() });
                e.packets += f.packets;
                e.bytes += f.bytes;
                e.first = e.first.min(f.first);
                e.last = e.last.max(f.last);
            }
        }
        t
    }

    /// Distinct unidirectional 5-tuples of IP packets.
    pub fn flows(&self) -> u64 {
        self.flows.len() as u64
    }
    pub fn duration_ns(&self) -> u64 {
        match (self.first_ts_ns, self.last_ts_ns) {
            (Some(a), Some(b)) => b - a,
            _ => 0,
        }
    }
    pub fn mean_size(&self) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            self.bytes as f64 / self.packets as f64
        }
    }

    /// Flow sizes in packets as (upper edge of a power-of-two bin, flows): 1, 2-3, 4-7, ...
    pub fn flow_size_hist(&self) -> Vec<(u64, u64)> {
        let mut bins: BTreeMap<u32, u64> = BTreeMap::new();
        for f in self.flows.values() {
            *bins.entry(63 - f.packets.leading_zeros()).or_default() += 1;
        }
        bins.into_iter().map(|(b, n)| ((1u64 << (b + 1)) - 1, n)).collect()
    }

    /// Flow-size quantiles in packets: (p50, p90, p99, max).
    pub fn flow_size_quantiles(&self) -> (u64, u64, u64, u64) {
        let mut v: Vec<u64> = self.flows.values().map(|f| f.packets).collect();
        if v.is_empty() {
            return (0, 0, 0, 0);
        }
        v.sort_unstable();
        let q = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
        (q(0.5), q(0.9), q(0.99), *v.last().expect("non-empty"))
    }

    /// Active flows over time: the trace split into [`ACTIVE_BINS`] equal bins, and per bin the
    /// number of flows whose first packet is at or before the bin's end and whose last packet is
    /// at or after its start. Returns (bin start in ns from the first packet, flows).
    pub fn active_flows(&self) -> Vec<(u64, u64)> {
        let (Some(t0), Some(_)) = (self.first_ts_ns, self.last_ts_ns) else {
            return vec![];
        };
        let dur = self.duration_ns().max(1);
        let width = dur.div_ceil(ACTIVE_BINS as u64);
        let mut diff = [0i64; ACTIVE_BINS + 1];
        for f in self.flows.values() {
            let a = (((f.first - t0) / width) as usize).min(ACTIVE_BINS - 1);
            let b = (((f.last - t0) / width) as usize).min(ACTIVE_BINS - 1);
            diff[a] += 1;
            diff[b + 1] -= 1;
        }
        let mut acc = 0i64;
        (0..ACTIVE_BINS)
            .map(|i| {
                acc += diff[i];
                (i as u64 * width, acc as u64)
            })
            .collect()
    }

    /// The JSON object of `npqos trace stats --json`.
    pub fn to_json(&self) -> serde_json::Value {
        let (p50, p90, p99, max) = self.flow_size_quantiles();
        let mut size_hist = Vec::new();
        let mut lo = 0u32;
        for (i, c) in self.size_hist.iter().enumerate() {
            let hi = SIZE_BIN_EDGES.get(i).copied();
            size_hist.push(serde_json::json!({"min": lo, "max": hi, "packets": c}));
            lo = hi.map_or(lo, |h| h + 1);
        }
        serde_json::json!({
            "file": self.file,
            "format": self.format,
            "packets": self.packets,
            "bytes": self.bytes,
            "captured_bytes": self.captured_bytes,
            "ip_packets": self.ip_packets,
            "non_ip_packets": self.non_ip_packets,
            "unsupported_link_packets": self.unsupported_link_packets,
            "flows": self.flows(),
            "duration_ns": self.duration_ns(),
            "first_ts_ns": self.first_ts_ns,
            "mean_size": self.mean_size(),
            "link_types": self.link_types,
            "size_histogram": size_hist,
            "flow_size_packets": {"p50": p50, "p90": p90, "p99": p99, "max": max,
                "histogram": self.flow_size_hist().iter().map(|(e, n)| serde_json::json!({"max": e, "flows": n})).collect::<Vec<_>>()},
            "active_flows": self.active_flows().iter().map(|(t, n)| serde_json::json!({"t_ns": t, "flows": n})).collect::<Vec<_>>(),
            "corrupt_skipped": self.corrupt_skipped,
            "abandoned_tail": self.abandoned_tail,
        })
    }
}
