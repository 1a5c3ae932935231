//! What `npqos live` shows while it runs (docs/live.md, "Statistics while it runs"): the
//! counters of every class (service) and of the flows of the bounded flow table, copied by the
//! forwarding thread into a buffer it owns, to be handed over without a lock (the CLI
//! publishes it through a triple buffer), and rendered by whoever reads it: the Prometheus
//! text format and a `tc -s class show` look-alike.
//!
//! Filling a snapshot allocates nothing once its vectors have reached their bound (the
//! services, and `stats.flows` rows), so the forwarding thread neither locks nor calls the
//! system for it.

use super::{Forwarder, LiveCounts, Reason, Totals};
use crate::models::router::Host;
use npqos_core::flow::FlowKey;
use npqos_core::pipeline::FlowIndex;
use npqos_core::{Instant, Rate};
use std::fmt::Write as _;

/// One row's counters and its output rate over the interval since the last snapshot.
#[derive(Clone, Copy, Debug, Default)]
pub struct RowSnapshot {
    pub counts: LiveCounts,
    pub rate_bps: f64,
}

impl RowSnapshot {
    /// Frames dropped, every reason.
    pub fn dropped(&self) -> u64 {
        self.counts.dropped.iter().sum()
    }
    /// Frames and bytes held in the queues (offered, neither sent nor dropped).
    pub fn backlog(&self) -> (u64, u64) {
        let c = &self.counts;
        (
            c.offered_packets.saturating_sub(c.sent_packets + self.dropped()),
            c.offered_bytes.saturating_sub(c.sent_bytes + c.dropped_bytes),
        )
    }
}

/// A flow of the exact table.
#[derive(Clone, Copy, Debug)]
pub struct FlowSnapshot {
    pub key: FlowKey,
    /// The frames carry no IP packet.
    pub non_ip: bool,
    /// Its service, by index (`u32::MAX`: refused by `live.non_ip`).
    pub class: u32,
    pub row: RowSnapshot,
}

/// One direction's counters at one time.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Snapshots taken before this one (0: none yet).
    pub seq: u64,
    /// Since the forwarder's first frame, ns.
    pub at_ns: u64,
    pub totals: Totals,
    /// Frames in the queues.
    pub queued: u64,
    /// Per service, in order.
    pub classes: Vec<RowSnapshot>,
    /// The flows of the exact table, in the order first seen.
    pub flows: Vec<FlowSnapshot>,
    /// Every flow past the table, together.
    pub other: RowSnapshot,
}

impl Snapshot {
    /// Another forwarding thread's snapshot of the same direction added to this one (the
    /// statistics of `npqos live` on several threads): counts and rates summed, each thread's
    /// flows (a flow is one thread's), the later time. Classes are added by position while
    /// both threads run the same configuration (a reload reaches the threads a few
    /// microseconds apart: a snapshot in between keeps this one's classes).
    pub fn add(&mut self, o: &Snapshot) {
        self.seq = self.seq.max(o.seq);
        self.at_ns = self.at_ns.max(o.at_ns);
        self.totals = Forwarder::add_totals(self.totals, o.totals);
        self.queued += o.queued;
        if self.classes.len() == o.classes.len() {
            for (a, b) in self.classes.iter_mut().zip(&o.classes) {
                a.counts.add(&b.counts);
                a.rate_bps += b.rate_bps;
            }
        }
        self.flows.extend_from_slice(&o.flows);
        self.other.counts.add(&o.other.counts);
        self.other.rate_bps += o.other.rate_bps;
    }
}

/// What the forwarding thread remembers between snapshots: each row's sent bytes at the last
/// one, for the rates.
#[derive(Clone, Debug, Default)]
pub struct RateMemory {
    at_ns: u64,
    classes: Vec<u64>,
    flows: Vec<u64>,
    other: u64,
}

/// A service as the statistics name it.
#[derive(Clone, Debug)]
pub struct ServiceInfo {
    pub name: String,
    /// Its rate (per flow, per class or per subscriber, as `per` says); `None`: unshaped.
    pub rate: Option<Rate>,
    /// "flow", "class", "src" or "dst" (`rate_per`).
    pub per: &'static str,
}

impl super::LiveSpec {
    /// The services as the statistics name them (the pipeline's: with `unmatched` when live
    /// adds it).
    pub fn service_info(&self) -> Vec<ServiceInfo> {
        let p = self.router_params();
        p.services
            .iter()
            .map(|s| ServiceInfo {
                name: s.name.clone(),
                rate: s.rate,
                per: match (s.per_flow, s.host) {
                    (_, Some(Host::Src)) => "src",
                    (_, Some(Host::Dst)) => "dst",
                    (true, None) => "flow",
                    (false, None) => "class",
                },
            })
            .collect()
    }
}

impl Forwarder {
    /// Copies the counters at `now` into `into`, rates over the time since the last call
    /// (`mem` keeps what they need). Allocates only while a vector grows to its bound.
    pub fn snapshot(&self, now: Instant, into: &mut Snapshot, mem: &mut RateMemory) {
        let start = self.start.map_or(now.as_nanos(), |s| s.as_nanos());
        let at = now.as_nanos().saturating_sub(start);
        let dt = at.saturating_sub(mem.at_ns).max(1) as f64;
        let rate = |sent: u64, prev: u64| sent.saturating_sub(prev) as f64 * 8e9 / dt;
        into.seq += 1;
        into.at_ns = at;
        into.totals = self.totals();
        into.queued = self.queued();
        into.classes.clear();
        mem.classes.resize(self.rates.len(), 0);
        for (s, prev) in mem.classes.iter_mut().enumerate() {
            let counts = self.pipe.class_row(s).copied().unwrap_or_default();
            into.classes.push(RowSnapshot { counts, rate_bps: rate(counts.sent_bytes, *prev) });
            *prev = counts.sent_bytes;
        }
        into.flows.clear();
        mem.flows.resize(self.times.len(), 0);
        for (r, (t, prev)) in self.times.iter().zip(mem.flows.iter_mut()).enumerate() {
            let counts = self.pipe.flow_row(r as u32);
            let row = RowSnapshot { counts, rate_bps: rate(counts.sent_bytes, *prev) };
            into.flows.push(FlowSnapshot { key: t.key, non_ip: t.non_ip, class: t.class, row });
            *prev = counts.sent_bytes;
        }
        let counts = self.pipe.flow_row(FlowIndex::OTHER);
        into.other = RowSnapshot { counts, rate_bps: rate(counts.sent_bytes, mem.other) };
        mem.other = counts.sent_bytes;
        mem.at_ns = at;
    }
}

/// One direction to render: its name (`in`, `back`), its snapshot and its services.
pub struct Way<'a> {
    pub name: &'a str,
    pub snapshot: &'a Snapshot,
    pub services: &'a [ServiceInfo],
}

/// `s` as a Prometheus label value (backslash, double quote and newline escaped).
fn label(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// A flow as the statistics name it: `udp 198.18.0.1:5000 > 198.18.0.2:10000`.
fn flow_name(f: &FlowSnapshot) -> String {
    super::flow_label(&f.key, f.non_ip)
}

fn class_name(services: &[ServiceInfo], class: u32) -> &str {
    services.get(class as usize).map_or("unclassified", |s| s.name.as_str())
}

/// The subscribers of the services with `rate_per = "src"` or `"dst"`, from the flow table:
/// (service, address, the sum of its flows' rows), by service then address.
fn subscribers(d: &Way<'_>) -> Vec<(u32, String, RowSnapshot)> {
    let mut m: std::collections::BTreeMap<(u32, String), RowSnapshot> = Default::default();
    for f in d.snapshot.flows.iter().filter(|f| !f.non_ip) {
        let Some(s) = d.services.get(f.class as usize) else { continue };
        let addr = match s.per {
            "src" => f.key.src_ip(),
            "dst" => f.key.dst_ip(),
            _ => continue,
        };
        let e = m.entry((f.class, addr.to_string())).or_default();
        let (c, r) = (&mut e.counts, &f.row.counts);
        c.offered_packets += r.offered_packets;
        c.offered_bytes += r.offered_bytes;
        c.sent_packets += r.sent_packets;
        c.sent_bytes += r.sent_bytes;
        c.dropped_bytes += r.dropped_bytes;
        c.overlimits += r.overlimits;
        for (a, b) in c.dropped.iter_mut().zip(r.dropped) {
            *a += b;
        }
        e.rate_bps += f.row.rate_bps;
    }
    m.into_iter().map(|((c, a), r)| (c, a, r)).collect()
}

/// The metric families of the Prometheus text format, each with its help and type.
const FAMILIES: [(&str, &str, &str); 8] = [
    ("sent_bytes_total", "counter", "bytes sent (tc: Sent bytes)"),
    ("sent_packets_total", "counter", "frames sent (tc: Sent pkt)"),
    ("dropped_packets_total", "counter", "frames dropped, by reason (tc: dropped)"),
    ("overlimits_total", "counter", "times a frame was held back by its rate (tc: overlimits)"),
    ("backlog_bytes", "gauge", "bytes queued (tc: backlog)"),
    ("backlog_packets", "gauge", "frames queued (tc: backlog p)"),
    ("rate_bits_per_second", "gauge", "output rate over the last sample interval (tc: rate)"),
    ("offered_packets_total", "counter", "frames offered"),
];

/// Renders `dirs` in the Prometheus text format (version 0.0.4): totals per direction, then per
/// class, per subscriber and per flow of the table (and the row of the flows past it), each
/// in tc's vocabulary.
pub fn prometheus(dirs: &[Way<'_>], out: &mut String) {
    let _ = writeln!(out, "# HELP npqos_snapshot_seconds time of the snapshot since the first frame");
    let _ = writeln!(out, "# TYPE npqos_snapshot_seconds gauge");
    for d in dirs {
        let _ = writeln!(out, "npqos_snapshot_seconds{{direction=\"{}\"}} {}", d.name, d.snapshot.at_ns as f64 * 1e-9);
    }
    for (name, v) in [("frames_in_total", 0), ("frames_out_total", 1), ("queued_frames", 2)] {
        let _ = writeln!(out, "# TYPE npqos_{name} {}", if v == 2 { "gauge" } else { "counter" });
        for d in dirs {
            let t: &Totals = &d.snapshot.totals;
            let x = [t.frames_in, t.frames_out, d.snapshot.queued][v];
            let _ = writeln!(out, "npqos_{name}{{direction=\"{}\"}} {x}", d.name);
        }
    }
    let _ = writeln!(out, "# TYPE npqos_class_rate_configured_bits_per_second gauge");
    for d in dirs {
        for s in d.services.iter() {
            if let Some(r) = s.rate {
                let _ = writeln!(
                    out,
                    "npqos_class_rate_configured_bits_per_second{{direction=\"{}\",class=\"{}\",per=\"{}\"}} {}",
                    d.name,
                    label(&s.name),
                    s.per,
                    r.bits_per_sec()
                );
            }
        }
    }
    for level in ["class", "subscriber", "flow"] {
        // Each level's rows once (labels and counts), then every family over them.
        let rows: Vec<(&str, Vec<(String, RowSnapshot)>)> = dirs.iter().map(|d| (d.name, rows_of(d, level))).collect();
        for (fam, kind, help) in FAMILIES {
            let _ = writeln!(out, "# HELP npqos_{level}_{fam} {help}");
            let _ = writeln!(out, "# TYPE npqos_{level}_{fam} {kind}");
            for (name, rows) in &rows {
                for (labels, r) in rows {
                    let lead = format!("npqos_{level}_{fam}{{direction=\"{name}\",{labels}");
                    sample(out, &lead, fam, r);
                }
            }
        }
    }
}

/// One level's rows of a direction (`class`, `subscriber`, `flow`): their Prometheus labels
/// past `direction`, and their counts.
fn rows_of(d: &Way<'_>, level: &str) -> Vec<(String, RowSnapshot)> {
    match level {
        "class" => (d.snapshot.classes.iter().enumerate())
            .map(|(s, r)| (format!("class=\"{}\"", label(class_name(d.services, s as u32))), *r))
            .collect(),
        "subscriber" => subscribers(d)
            .into_iter()
            .map(|(c, a, r)| (format!("class=\"{}\",subscriber=\"{a}\"", label(class_name(d.services, c))), r))
            .collect(),
        _ => (d.snapshot.flows.iter())
            .map(|f| {
                let c = label(class_name(d.services, f.class));
                (format!("class=\"{c}\",flow=\"{}\"", label(&flow_name(f))), f.row)
            })
            .chain(std::iter::once(("class=\"-\",flow=\"past the table\"".to_string(), d.snapshot.other)))
            .collect(),
    }
}

/// The sample(s) of family `fam` for row `r`, its name and labels begun in `lead`.
fn sample(out: &mut String, lead: &str, fam: &str, r: &RowSnapshot) {
    let (bp, bb) = r.backlog();
    let c = &r.counts;
    if fam == "dropped_packets_total" {
        for reason in Reason::ALL {
            let _ = writeln!(out, "{lead},reason=\"{}\"}} {}", reason.name(), c.dropped[reason.index()]);
        }
        return;
    }
    let v = match fam {
        "sent_bytes_total" => c.sent_bytes as f64,
        "sent_packets_total" => c.sent_packets as f64,
        "overlimits_total" => c.overlimits as f64,
        "backlog_bytes" => bb as f64,
        "backlog_packets" => bp as f64,
        "offered_packets_total" => c.offered_packets as f64,
        _ => r.rate_bps,
    };
    let _ = writeln!(out, "{lead}}} {v}");
}

/// `bits` per second as tc writes rates: `9996Kbit`, `10Mbit`.
fn tc_rate(bits: f64) -> String {
    match bits {
        b if b >= 1e9 => format!("{:.3}Gbit", b / 1e9),
        b if b >= 1e6 => format!("{:.3}Mbit", b / 1e6),
        b if b >= 1e3 => format!("{:.0}Kbit", b / 1e3),
        b => format!("{b:.0}bit"),
    }
}

/// One row as `tc -s class show` prints a class's statistics.
fn tc_row(out: &mut String, head: &str, r: &RowSnapshot) {
    let (bp, bb) = r.backlog();
    let c = &r.counts;
    let _ = writeln!(out, "{head}");
    let _ = writeln!(
        out,
        " Sent {} bytes {} pkt (dropped {}, overlimits {} requeues 0)",
        c.sent_bytes,
        c.sent_packets,
        r.dropped(),
        c.overlimits
    );
    let _ = writeln!(out, " backlog {bb}b {bp}p requeues 0");
    let _ = writeln!(out, " rate {}", tc_rate(r.rate_bps));
    let reasons: Vec<String> = Reason::ALL
        .iter()
        .filter(|x| c.dropped[x.index()] > 0)
        .map(|x| format!("{} {}", x.name(), c.dropped[x.index()]))
        .collect();
    if !reasons.is_empty() {
        let _ = writeln!(out, " dropped by reason: {}", reasons.join(", "));
    }
}

/// `dirs` as `tc -s class show` would print them: a class per service (its configured rate),
/// then its subscribers, then the `flows` busiest flows of the table by bytes sent.
pub fn tc_style(dirs: &[Way<'_>], flows: usize, out: &mut String) {
    for d in dirs {
        let t = &d.snapshot.totals;
        let _ = writeln!(
            out,
            "direction {} at {:.1}s: {} frames in, {} out, {} queued",
            d.name,
            d.snapshot.at_ns as f64 * 1e-9,
            t.frames_in,
            t.frames_out,
            d.snapshot.queued
        );
        for (s, r) in d.snapshot.classes.iter().enumerate() {
            let info = &d.services[s];
            let rate = info.rate.map_or("unshaped".to_string(), |x| {
                format!("rate {} per {}", tc_rate(x.bits_per_sec() as f64), info.per)
            });
            tc_row(out, &format!("class {} {rate}", info.name), r);
        }
        for (c, a, r) in subscribers(d) {
            tc_row(out, &format!("subscriber {a} of class {}", class_name(d.services, c)), &r);
        }
        let mut busiest: Vec<&FlowSnapshot> = d.snapshot.flows.iter().collect();
        busiest.sort_by_key(|f| std::cmp::Reverse(f.row.counts.sent_bytes));
        for f in busiest.into_iter().take(flows) {
            tc_row(out, &format!("flow {} of class {}", flow_name(f), class_name(d.services, f.class)), &f.row);
        }
        if d.snapshot.other.counts.offered_packets > 0 {
            tc_row(out, "flows past the table", &d.snapshot.other);
        }
        let _ = writeln!(out);
    }
}
