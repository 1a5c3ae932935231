//! The two packet functions of Everest's prototype (section 6: "a port-scan detector and a
//! TCP-SYN-flood detector"), as the paper names them without describing them; what each
//! counts is ours (docs/everest.md, "The prototype's services"):
//!
//! * [`PortScan`]: a source that probes more than `threshold` distinct destination ports, or
//!   more than `threshold` distinct destination hosts, within a window of `window` starting at
//!   its first probe. A probe is a packet that opens something: a TCP SYN without ACK, a UDP
//!   datagram to a port below 32768 (the ephemeral ranges start there or higher: a server's
//!   replies to its clients' ports are not probes), an ICMP or ICMPv6 packet (hosts only);
//!   other packets are not looked at;
//! * [`SynFlood`]: a destination with more than `threshold` half-open TCP connections in a
//!   window: a SYN (without ACK) from a client port whose handshake's third packet (an ACK
//!   without SYN from the same client port to the same server port) has not come within the
//!   window.
//!
//! Each reports a [`Detection`] once per window and source (or destination). Memory is bounded
//! by `max_tracked` sources (or half-open connections): past it, packets of untracked
//! sources are counted in `untracked` and not examined, so a flood of spoofed sources cannot
//! grow the state. Packets come in time order (`now` never goes back; an earlier one is taken
//! as at the latest time seen).

use crate::flow::FlowKey;
use std::collections::{HashMap, HashSet};

/// TCP flags as in the header's 14th byte.
pub const TCP_SYN: u8 = 0x02;
pub const TCP_ACK: u8 = 0x10;

/// What a detector found: `who` (the scanning source, or the flooded destination, as a
/// 16-byte address, IPv4 mapped), `at_ns` (the packet that crossed the threshold), `count`
/// (distinct ports, distinct hosts, or half-open connections at that packet) and `what`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Detection {
    pub what: &'static str,
    pub who: [u8; 16],
    pub at_ns: u64,
    pub window_start_ns: u64,
    pub count: u32,
}

/// A source's window.
struct Source {
    start: u64,
    ports: HashSet<u16>,
    hosts: HashSet<[u8; 16]>,
    reported: bool,
}

/// The port-scan detector (module doc).
pub struct PortScan {
    window_ns: u64,
    threshold: u32,
    max_tracked: usize,
    sources: HashMap<[u8; 16], Source>,
    now: u64,
    /// The earliest time a tracked window ends (when a full table may have room again): a
    /// full table is looked through at most once per window end, not once per packet.
    room_at: u64,
    /// Packets of sources it could not track (the table was full of live windows).
    pub untracked: u64,
}

impl PortScan {
    /// `window_ns` > 0, `threshold` >= 1, `max_tracked` >= 1.
    pub fn new(window_ns: u64, threshold: u32, max_tracked: usize) -> Self {
        PortScan {
            window_ns: window_ns.max(1),
            threshold: threshold.max(1),
            max_tracked: max_tracked.max(1),
            sources: HashMap::new(),
            now: 0,
            room_at: u64::MAX,
            untracked: 0,
        }
    }

    /// One packet of `flow` at `ts_ns` with its TCP flags (`None` if it is not TCP or its header
    /// was not captured): a detection if its source just crossed the threshold.
    pub fn packet(&mut self, ts_ns: u64, flow: &FlowKey, tcp_flags: Option<u8>) -> Option<Detection> {
        self.now = self.now.max(ts_ns);
        let probe = match flow.proto {
            6 => tcp_flags.is_some_and(|f| f & TCP_SYN != 0 && f & TCP_ACK == 0),
            17 => flow.dst_port < 32768,
            1 | 58 => true,
            _ => false,
        };
        if !probe {
            return None;
        }
        let (now, window) = (self.now, self.window_ns);
        if !self.sources.contains_key(&flow.src) && self.sources.len() >= self.max_tracked {
            // Windows that ended make room; a table of live windows takes no one new.
            if now >= self.room_at {
                self.sources.retain(|_, s| now - s.start < window);
                self.room_at = self.sources.values().map(|s| s.start + window).min().unwrap_or(u64::MAX);
            }
            if self.sources.len() >= self.max_tracked {
                self.untracked += 1;
                return None;
            }
        }
        self.room_at = self.room_at.min(now + window);
        let limit = self.threshold as usize + 1;
        let s = self.sources.entry(flow.src).or_insert_with(|| Source {
            start: now,
            ports: HashSet::new(),
            hosts: HashSet::new(),
            reported: false,
        });
        if now - s.start >= window {
            *s = Source { start: now, ports: HashSet::new(), hosts: HashSet::new(), reported: false };
        }
        // At most threshold + 1 of each are kept: enough to know it was crossed.
        if s.ports.len() < limit {
            s.ports.insert(flow.dst_port);
        }
        if s.hosts.len() < limit {
            s.hosts.insert(flow.dst);
        }
        let count = s.ports.len().max(s.hosts.len()) as u32;
        if s.reported || count <= self.threshold {
            return None;
        }
        s.reported = true;
        Some(Detection { what: "port_scan", who: flow.src, at_ns: now, window_start_ns: s.start, count })
    }
}

/// A destination's window of half-open connections.
struct Target {
    start: u64,
    /// Client (address, port) and server port of each SYN not yet completed, with its time.
    open: HashMap<([u8; 16], u16, u16), u64>,
    reported: bool,
}

/// The SYN-flood detector (module doc).
pub struct SynFlood {
    window_ns: u64,
    threshold: u32,
    max_tracked: usize,
    targets: HashMap<[u8; 16], Target>,
    tracked: usize,
    now: u64,
    /// The earliest time a tracked half-open connection leaves its window (as `PortScan`'s).
    room_at: u64,
    /// SYNs it could not track (as many half-open connections tracked as it may hold).
    pub untracked: u64,
}

impl SynFlood {
    /// `window_ns` > 0, `threshold` >= 1, `max_tracked` >= 1 half-open connections in all.
    pub fn new(window_ns: u64, threshold: u32, max_tracked: usize) -> Self {
        SynFlood {
            window_ns: window_ns.max(1),
            threshold: threshold.max(1),
            max_tracked: max_tracked.max(1),
            targets: HashMap::new(),
            tracked: 0,
            now: 0,
            room_at: u64::MAX,
            untracked: 0,
        }
    }

    /// One packet of `flow` at `ts_ns` with its TCP flags (`None` for a packet that is not
    /// TCP or whose header was not captured): a detection if its destination just crossed the
    /// threshold.
    pub fn packet(&mut self, ts_ns: u64, flow: &FlowKey, tcp_flags: Option<u8>) -> Option<Detection> {
        self.now = self.now.max(ts_ns);
        let flags = tcp_flags?;
        let now = self.now;
        let key = (flow.src, flow.src_port, flow.dst_port);
        let (syn, ack) = (flags & TCP_SYN != 0, flags & TCP_ACK != 0);
        if ack && !syn {
            // A handshake's third packet (or any later one) completes what it opened.
            if let Some(t) = self.targets.get_mut(&flow.dst) {
                if t.open.remove(&key).is_some() {
                    self.tracked -= 1;
                }
            }
            return None;
        }
        if !syn || ack {
            return None;
        }
        let window = self.window_ns;
        if self.tracked >= self.max_tracked {
            if now >= self.room_at {
                self.expire(now);
            }
            if self.tracked >= self.max_tracked {
                self.untracked += 1;
                return None;
            }
        }
        self.room_at = self.room_at.min(now + window);
        let t = self.targets.entry(flow.dst).or_insert_with(|| Target {
            start: now,
            open: HashMap::new(),
            reported: false,
        });
        if now - t.start >= window {
            // A new window: the connections still open from the last one stay half-open only
            // if they are younger than a window.
            let before = t.open.len();
            t.open.retain(|_, &mut at| now - at < window);
            self.tracked -= before - t.open.len();
            (t.start, t.reported) = (now, false);
        }
        if t.open.insert(key, now).is_none() {
            self.tracked += 1;
        }
        let count = t.open.len() as u32;
        if t.reported || count <= self.threshold {
            return None;
        }
        t.reported = true;
        Some(Detection { what: "syn_flood", who: flow.dst, at_ns: now, window_start_ns: t.start, count })
    }

    /// Drops half-open connections older than a window, and destinations left with none.
    fn expire(&mut self, now: u64) {
        let window = self.window_ns;
        let mut dropped = 0;
        self.targets.retain(|_, t| {
            let before = t.open.len();
            t.open.retain(|_, &mut at| now - at < window);
            dropped += before - t.open.len();
            !t.open.is_empty()
        });
        self.tracked -= dropped;
        self.room_at =
            self.targets.values().flat_map(|t| t.open.values()).map(|&at| at + window).min().unwrap_or(u64::MAX);
    }

    /// Half-open connections held now.
    pub fn tracked(&self) -> usize {
        self.tracked
    }
}

/// Which detector a service's packet function is (`[services.function] kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FunctionKind {
    PortScan,
    SynFlood,
}

crate::named!(FunctionKind, "packet function", {
    PortScan => "port-scan",
    SynFlood => "syn-flood",
});

/// A service's packet function and its keys (`[services.function]`, docs/everest.md "The
/// prototype's services"): the detector its processors run on each of its packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionParams {
    pub kind: FunctionKind,
    /// The detector's window, ns.
    pub window_ns: u64,
    /// Distinct ports or hosts (port-scan) or half-open connections (syn-flood) above which a
    /// window is reported.
    pub threshold: u32,
    /// Sources (port-scan) or half-open connections (syn-flood) it tracks at most.
    pub max_tracked: u32,
}

impl FunctionParams {
    /// The defaults of `npqos trace detect`: a 1 s window, a threshold of 100, 65,536 tracked.
    pub const fn default_for(kind: FunctionKind) -> Self {
        FunctionParams { kind, window_ns: 1_000_000_000, threshold: 100, max_tracked: 65_536 }
    }
}

/// A packet function's state: one of the two detectors.
pub enum Function {
    PortScan(PortScan),
    SynFlood(SynFlood),
}

impl Function {
    pub fn new(p: &FunctionParams) -> Self {
        let (w, t, m) = (p.window_ns, p.threshold, p.max_tracked as usize);
        match p.kind {
            FunctionKind::PortScan => Function::PortScan(PortScan::new(w, t, m)),
            FunctionKind::SynFlood => Function::SynFlood(SynFlood::new(w, t, m)),
        }
    }

    /// One packet (see [`PortScan::packet`], [`SynFlood::packet`]).
    #[inline]
    pub fn packet(&mut self, ts_ns: u64, flow: &FlowKey, tcp_flags: Option<u8>) -> Option<Detection> {
        match self {
            Function::PortScan(d) => d.packet(ts_ns, flow, tcp_flags),
            Function::SynFlood(d) => d.packet(ts_ns, flow, tcp_flags),
        }
    }

    /// Packets it could not examine because its table was full.
    pub fn untracked(&self) -> u64 {
        match self {
            Function::PortScan(d) => d.untracked,
            Function::SynFlood(d) => d.untracked,
        }
    }
}

impl Detection {
    /// `who` as text: dotted IPv4 for a mapped address, IPv6 otherwise.
    pub fn who_text(&self) -> String {
        let a = std::net::Ipv6Addr::from(self.who);
        match a.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => a.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(src: u8, sport: u16, dst: u8, dport: u16) -> FlowKey {
        let a = |x: u8| {
            let mut o = [0u8; 16];
            (o[10], o[11], o[12], o[13], o[15]) = (0xff, 0xff, 198, 18, x);
            o
        };
        FlowKey { src: a(src), dst: a(dst), src_port: sport, dst_port: dport, proto: 6, is_v6: false, zone: 0 }
    }

    #[test]
    fn a_scan_is_reported_once_per_window_and_benign_traffic_is_not() {
        let mut d = PortScan::new(1_000_000_000, 100, 1000);
        let mut found = Vec::new();
        for p in 0..300u16 {
            let t = p as u64 * 1_000_000;
            found.extend(d.packet(t, &flow(1, 40000, 2, 1 + p), Some(TCP_SYN)));
            // A benign client: 10 ports of one server, many connections each.
            found.extend(d.packet(t, &flow(3, 40000 + p, 2, 80 + p % 10), Some(TCP_SYN)));
            // The server's replies to 300 client ports are not probes.
            found.extend(d.packet(t, &flow(2, 80 + p % 10, 3, 40000 + p), Some(TCP_SYN | TCP_ACK)));
            found.extend(d.packet(t, &flow(2, 80, 3, 40000 + p), Some(TCP_ACK)));
        }
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].who, found[0].count, found[0].at_ns), (flow(1, 0, 0, 0).src, 101, 100_000_000));
        // The next window reports it again.
        let again = (0..200u16)
            .filter_map(|p| d.packet(1_000_000_000 + p as u64, &flow(1, 40000, 2, p), Some(TCP_SYN)))
            .count();
        assert_eq!(again, 1);
    }

    #[test]
    fn hosts_count_as_ports_do() {
        let mut d = PortScan::new(1_000_000_000, 50, 1000);
        let found: Vec<Detection> =
            (0..100u8).filter_map(|h| d.packet(h as u64, &flow(1, 40000, h, 22), Some(TCP_SYN))).collect();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].count, 51);
    }

    #[test]
    fn a_flood_of_syns_is_reported_and_completed_handshakes_are_not() {
        let mut d = SynFlood::new(1_000_000_000, 100, 10_000);
        let mut found = Vec::new();
        for i in 0..500u16 {
            let t = i as u64 * 1_000_000;
            // The flood: SYNs to server 9 port 80 from many client ports, never completed.
            found.extend(d.packet(t, &flow(1, 10000 + i, 9, 80), Some(TCP_SYN)));
            // Benign: a complete handshake to server 8 every millisecond.
            found.extend(d.packet(t, &flow(2, 20000 + i, 8, 443), Some(TCP_SYN)));
            found.extend(d.packet(t + 10, &flow(2, 20000 + i, 8, 443), Some(TCP_ACK)));
            // A SYN-ACK the server sends is not a SYN.
            found.extend(d.packet(t + 5, &flow(8, 443, 2, 20000 + i), Some(TCP_SYN | TCP_ACK)));
        }
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].who, found[0].count), (flow(0, 0, 9, 0).dst, 101));
    }

    #[test]
    fn memory_stays_within_the_bound_under_spoofed_sources() {
        let mut d = SynFlood::new(1_000_000_000, 1_000_000, 1000);
        let mut s = PortScan::new(1_000_000_000, 10, 1000);
        for i in 0..100_000u32 {
            let f = flow((i % 250) as u8, (i / 250) as u16, 9, 80);
            d.packet(i as u64, &f, Some(TCP_SYN));
            let mut spoofed = f;
            spoofed.src[14] = (i >> 8) as u8;
            spoofed.src[13] = (i >> 16) as u8;
            s.packet(i as u64, &spoofed, Some(TCP_SYN));
        }
        assert!(d.tracked() <= 1000 && d.untracked >= 98_000, "{} {}", d.tracked(), d.untracked);
        assert!(s.sources.len() <= 1000 && s.untracked >= 98_000, "{} {}", s.sources.len(), s.untracked);
    }
}
