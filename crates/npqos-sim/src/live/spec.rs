//! The `npqos live` configuration file: `[live]` (interfaces, duration, I/O), `[shaper]` (the
//! kim model's keys plus `flow_rate`), `[table]` (the dqs model's keys) and `[stats]` (the flow
//! counters' bound, the router's keys), read with the scenario reader, so errors name the key path, the value and what was expected.
//!
//! A minimal file is four keys:
//!
//! ```toml
//! [live]
//! input = "eth1"
//! output = "eth2"
//! duration = "30s"
//! [shaper]
//! flow_rate = "10Mbps"
//! ```

pub use super::io::{Io, RxWait};
use crate::models::router::{
    Allocation, IngressKind, ProcessingParams, QmemParams, RouterParams, Scheduler, ServiceParams, ShaperKind,
    ShapingParams,
};
use crate::scenario::flowtable::{self, TableKeys};
use crate::scenario::shaper::{BucketConfig, BucketKeys};
use crate::scenario::stats::StatsParams;
use crate::scenario::{Problem, Problems, Reader};
use crate::units::fmt_size;
use npqos_core::flowmap::DqsConfig;
use npqos_core::{Duration, Rate};

/// How the forwarding loop waits for frames and for the shaper's next wake-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Sleep in `ppoll` until a frame arrives or `next_wakeup()` comes (one core shared).
    Sleep,
    /// Spin on the rings and the clock (lowest latency; one core busy all the time).
    Poll,
}

/// What `npqos live` does with the frames of the way in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Through the pipeline: classified, queued, shaped, scheduled.
    Shape,
    /// Passed on as they come, with the same offload work and no pipeline: the do-nothing
    /// forwarder on the same rings, what the path itself costs (benchmarks).
    Pass,
}

/// What `npqos live` does with frames coming back, from the output to the input.
#[derive(Clone, Debug, PartialEq)]
pub enum Reverse {
    /// Passed on as they come, unshaped (with the same offload work as the way in).
    Pass,
    /// Not forwarded: a one-way bump in the wire.
    Off,
    /// Shaped by a pipeline of its own, configured by `[reverse.shaper]`, `[reverse.table]`
    /// and `[reverse.stats]` (the same keys and defaults as the way in's).
    Shape(Box<Direction>),
}

/// One direction's shaping: the keys of `[shaper]`, `[table]`, `[stats]` and `[[services]]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Direction {
    pub flow_rate: Rate,
    pub bucket: BucketConfig,
    /// `aqm = "codel"` in `[shaper]`: CoDel over the shaped queues (docs/codel.md).
    pub aqm: Option<npqos_core::pipeline::codel::CodelParams>,
    pub table: DqsConfig,
    pub stats: StatsParams,
    pub services: Vec<ServiceParams>,
}

/// A validated `npqos live` configuration with every default filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveSpec {
    /// Interface frames are read from.
    pub input: String,
    /// Interface frames are written to.
    pub output: String,
    /// How long to forward; `None`: until Ctrl-C.
    pub duration: Option<Duration>,
    pub wait: Wait,
    /// The way in through the pipeline, or passed on (a baseline).
    pub mode: Mode,
    /// The way back, output to input.
    pub reverse: Reverse,
    /// The sockets (`live.io`).
    pub io: Io,
    /// Bytes of the receive ring (TPACKET_V3 blocks; AF_XDP: chunks of 2 KiB).
    pub rx_ring: u64,
    /// Frames of the transmit ring.
    pub tx_frames: u32,
    /// Forwarding threads (`live.threads`): `None` is `"auto"`, one per CPU
    /// ([`LiveSpec::forwarding_threads`]).
    pub threads: Option<u32>,
    /// The interval of the time series (output rate, heap size, active flows).
    pub sample_every: Duration,
    /// Where the statistics are served while it runs (`live.stats`; `None`: nowhere).
    pub stats_listen: Option<StatsListen>,
    /// Which frames without an IP packet pass, both ways (`live.non_ip`): `None`, all of them
    /// (`"pass"`, the default); otherwise those whose EtherType is listed (0 for an 802.3
    /// frame with a length in that field, `"llc"`), none with an empty list (`"drop"`). The
    /// others are dropped as `unclassified`.
    pub non_ip: Option<Vec<u16>>,
    /// Every flow's shaped rate.
    pub flow_rate: Rate,
    /// alpha, cap, conformance and timer: the keys every shaping file shares
    /// (`scenario/shaper.rs`), with live's one override, cap = 2 x alpha by default.
    pub bucket: BucketConfig,
    /// `[shaper] aqm`: CoDel over the shaped queues (docs/codel.md); `None`: tail drop.
    pub aqm: Option<npqos_core::pipeline::codel::CodelParams>,
    /// The dqs flow table (AFM slots, physical queues, block buffer, DRR quantum).
    pub table: DqsConfig,
    /// The flow counters' memory bound: flows counted exactly, heavy flows past them.
    pub stats: StatsParams,
    /// The way in's `[[services]]`, in file order (empty: none, every frame in one service
    /// `all` shaped per flow to `flow_rate`). Each service's `rate` is per flow, or with
    /// `rate_per = "class"` one bucket for all its flows; frames that match no service go
    /// through unshaped, in a service `unmatched` of their own.
    pub services: Vec<ServiceParams>,
    /// The way in's `[processing]`: processors among the services between the ingress and
    /// the egress (Everest's prototype on real frames); `None`: processing none.
    pub processing: Option<ProcessingParams>,
    /// `[output]`: the packet captures of the way in's ports (the router's keys), written to
    /// the results' `pcap/` as the run goes.
    pub capture: crate::models::router::scenario::OutputSpec,
}

/// Where `npqos live` serves its statistics while it runs (docs/live.md, "Statistics while
/// it runs").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StatsListen {
    /// A TCP address (`"127.0.0.1:9464"`, what `"on"` means).
    Tcp(std::net::SocketAddr),
    /// A UNIX socket's path (`"unix:/run/npqos.sock"`), readable by its owner only.
    Unix(std::path::PathBuf),
}

impl std::fmt::Display for StatsListen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StatsListen::Tcp(a) => write!(f, "{a}"),
            StatsListen::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// The address `live.stats = "on"` serves on: loopback, the port Prometheus exporters of
/// network statistics commonly take.
pub const STATS_DEFAULT: &str = "127.0.0.1:9464";

/// `live.stats`: `"off"` (the default), `"on"` ([`STATS_DEFAULT`]), `"host:port"` or
/// `"unix:/path"`.
fn read_stats_listen(l: &mut Reader<'_>, probs: &mut Vec<Problem>) -> Option<StatsListen> {
    let path = l.path("stats");
    let v = l.string("stats", "off", probs);
    let v = if v == "on" { STATS_DEFAULT.to_string() } else { v };
    match v.as_str() {
        "off" => None,
        u if u.starts_with("unix:") && u.len() > 5 => Some(StatsListen::Unix(u[5..].into())),
        a => match a.parse() {
            Ok(addr) => Some(StatsListen::Tcp(addr)),
            Err(_) => {
                probs.push(Problem {
                    key: path,
                    value: Some(format!("{a:?}")),
                    message: format!(
                        "expected \"off\", \"on\" ({STATS_DEFAULT}), an address and port such as \"127.0.0.1:9464\" \
                         or \"[::1]:9464\", or \"unix:/path/to/socket\""
                    ),
                });
                None
            }
        },
    }
}

/// Largest interface name (IFNAMSIZ - 1).
const IFNAME_MAX: usize = 15;

fn interface(r: &mut Reader<'_>, key: &str, probs: &mut Vec<Problem>) -> String {
    let present = r.present(key);
    let name = r.string(key, "", probs);
    let path = r.path(key);
    if !present {
        probs.push(Problem { key: path, value: None, message: "required: the name of a network interface".into() });
    } else if name.is_empty()
        || name.len() > IFNAME_MAX
        || name.contains(['/', ' ', '\t', '\n', ':'])
        || name == "."
        || name == ".."
    {
        probs.push(Problem {
            key: path,
            value: Some(format!("{name:?}")),
            message: format!("expected an interface name of 1 to {IFNAME_MAX} characters without '/', ':' or spaces"),
        });
    }
    name
}

/// Reads and validates a configuration; every problem is reported, not only the first.
pub fn read(root: &toml::Table, file: &str) -> Result<LiveSpec, Problems> {
    let mut probs = Vec::new();
    for (k, v) in root {
        // `[meta]` is what npqos writes into a run's scenario.resolved.toml (commit, version):
        // that file runs again as it is.
        if !["live", "shaper", "table", "stats", "reverse", "services", "processing", "output", "meta"]
            .contains(&k.as_str())
        {
            probs.push(Problem {
                key: k.clone(),
                value: Some(crate::scenario::show(v)),
                message: "unknown table (an npqos live file has [live], [shaper], [table], [stats], [reverse], \
                          [processing], [output] and [[services]])"
                    .into(),
            });
        }
    }
    let reverse_table = match root.get("reverse") {
        None => None,
        Some(toml::Value::Table(t)) => Some(t),
        Some(v) => {
            probs.push(Problem {
                key: "reverse".into(),
                value: Some(crate::scenario::show(v)),
                message: "expected a table ([reverse.shaper], [reverse.table], [reverse.stats], [[reverse.services]])"
                    .into(),
            });
            None
        }
    };
    let mut l = Reader::new(root, "live", &mut probs);
    let input = interface(&mut l, "input", &mut probs);
    let output = interface(&mut l, "output", &mut probs);
    if !input.is_empty() && input == output {
        probs.push(Problem {
            key: "live.output".into(),
            value: Some(format!("{output:?}")),
            message: "expected an interface other than live.input (frames would loop)".into(),
        });
    }
    let duration = l.present("duration").then(|| l.positive_duration("duration", Duration::ZERO, &mut probs));
    let wait = l.choice("wait", "sleep", &["sleep", "poll"], &mut probs);
    let mode =
        if l.choice("mode", "shape", &["shape", "pass"], &mut probs) == "pass" { Mode::Pass } else { Mode::Shape };
    // A [reverse] table shapes the way back, unless the file says otherwise (then it is an error).
    let reverse_default = if reverse_table.is_some() { "shape" } else { "pass" };
    let reverse = l.choice("reverse", reverse_default, &["pass", "off", "shape"], &mut probs);
    let rx_ring = l.size("rx_ring", 16 << 20, &mut probs);
    if !(1 << 20..=1 << 30).contains(&rx_ring) {
        probs.push(Problem {
            key: "live.rx_ring".into(),
            value: Some(format!("\"{}\"", fmt_size(rx_ring))),
            message: "expected a size from 1MiB to 1GiB".into(),
        });
    }
    let tx_frames = l.int("tx_frames", 4096, 64, 1 << 20, &mut probs) as u32;
    let io = super::io::read(&mut l, &mut probs);
    let threads = l.int_or_auto("threads", 1, MAX_THREADS as i64, &mut probs).map(|n| n as u32);
    let sample_every = l.positive_duration("sample_every", Duration::from_millis(100), &mut probs);
    let non_ip = read_non_ip(&mut l, &mut probs);
    let stats_listen = read_stats_listen(&mut l, &mut probs);
    l.finish(&mut probs);

    let forward = read_direction(root, None, &mut probs);
    let processing = read_processing(root, &forward.services, &mut probs);
    let capture = crate::models::router::scenario::OutputSpec::read(root, &mut probs);
    let reverse = match (reverse.as_str(), reverse_table) {
        ("shape", Some(t)) => {
            for k in t.keys().filter(|k| !["shaper", "table", "stats", "services"].contains(&k.as_str())) {
                probs.push(Problem {
                    key: format!("reverse.{k}"),
                    value: None,
                    message: "unknown key ([reverse] has [reverse.shaper], [reverse.table], [reverse.stats] and \
                              [[reverse.services]])"
                        .into(),
                });
            }
            Reverse::Shape(Box::new(read_direction(t, Some("reverse"), &mut probs)))
        }
        ("shape", None) => {
            probs.push(Problem {
                key: "reverse.shaper.flow_rate".into(),
                value: None,
                message: "required by live.reverse = \"shape\": the rate every flow of the way back is shaped to"
                    .into(),
            });
            Reverse::Off
        }
        (other, Some(_)) => {
            probs.push(Problem {
                key: "live.reverse".into(),
                value: Some(format!("{other:?}")),
                message: "expected \"shape\" (or no [reverse] table): [reverse] configures the way back's shaping"
                    .into(),
            });
            Reverse::Off
        }
        ("off", None) => Reverse::Off,
        _ => Reverse::Pass,
    };
    // Processors are one set, virtual on one thread; captures are one set of files.
    for (what, on) in
        [("[processing] with a policy", processing.is_some()), ("[output] pcap", !capture.pcap.is_empty())]
    {
        if on && threads.is_some_and(|n| n > 1) {
            probs.push(Problem {
                key: "live.threads".into(),
                value: threads.map(|n| n.to_string()),
                message: format!("expected 1 (or \"auto\", which is 1 here) with {what}: they run on one thread"),
            });
        }
    }
    if mode == Mode::Pass && matches!(reverse, Reverse::Shape(_)) {
        probs.push(Problem {
            key: "live.mode".into(),
            value: Some("\"pass\"".into()),
            message: "expected \"shape\" with a shaped way back (mode = \"pass\" is the do-nothing baseline)".into(),
        });
    }
    if !probs.is_empty() {
        return Err(Problems { file: file.to_string(), list: probs });
    }
    Ok(LiveSpec {
        input,
        output,
        duration,
        wait: if wait == "poll" { Wait::Poll } else { Wait::Sleep },
        mode,
        reverse,
        io,
        rx_ring,
        tx_frames,
        threads,
        sample_every,
        non_ip,
        stats_listen,
        flow_rate: forward.flow_rate,
        bucket: forward.bucket,
        aqm: forward.aqm,
        table: forward.table,
        stats: forward.stats,
        services: forward.services,
        processing,
        capture,
    })
}

/// `[processing]` (the router's keys, `policy` "none" by default): processors between the
/// ingress and the egress of the way in (docs/live.md, "Processors on real frames"), or
/// `None`. A packet function needs them; a processor's time is its service's configured cost
/// (`variation` is the simulator's).
fn read_processing(
    root: &toml::Table,
    services: &[ServiceParams],
    probs: &mut Vec<Problem>,
) -> Option<ProcessingParams> {
    let p = root
        .contains_key("processing")
        .then(|| crate::models::router::scenario::read_processing(root, "none", probs))
        .filter(|p| p.policy != Allocation::None);
    for (i, s) in services.iter().enumerate() {
        if s.ecn {
            probs.push(Problem {
                key: format!("services[{i}].ecn"),
                value: Some("true".into()),
                message: "the simulator's key: npqos live reads each frame's own ECN field".into(),
            });
        }
        if s.function.is_some() && p.is_none() {
            probs.push(Problem {
                key: format!("services[{i}].function"),
                value: None,
                message: "a packet function runs on the processors: give [processing] a policy (everest, static, ...)"
                    .into(),
            });
        }
        if s.variation > 0.0 && p.is_some() {
            probs.push(Problem {
                key: format!("services[{i}].variation"),
                value: Some(s.variation.to_string()),
                message: "expected 0 in npqos live: a processor's time is its service's cost (variation is the \
                          simulator's)"
                    .into(),
            });
        }
    }
    p
}

/// The most forwarding threads `live.threads` takes.
pub const MAX_THREADS: usize = 64;

impl LiveSpec {
    /// How many threads forward (docs/live.md, "Every core"): `live.threads`, or with
    /// `"auto"` one per CPU this process may run on (at most [`MAX_THREADS`]), except that
    /// processors (`[processing]`) and packet captures (`[output] pcap`) run on one thread.
    pub fn forwarding_threads(&self) -> usize {
        if let Some(n) = self.threads {
            return n as usize;
        }
        if self.processing.is_some() || !self.capture.pcap.is_empty() {
            return 1;
        }
        std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_THREADS)
    }

    /// The configuration one of `threads` forwarding threads runs: the same, with what the file
    /// sizes for the whole forwarder shared among the threads (each rounded up), both ways: the
    /// flow tables' rows (`[stats] flows` and `heavy_flows`), so that flows.csv holds at most
    /// the rows the file asks for, and the flow table's physical queues and buffer blocks
    /// (`[table] queues` and `blocks`), so that the frames held, and the memory, are what the
    /// file says whatever the number of threads (the fanout spreads the flows evenly; a
    /// queue's own limit, `queue_limit`, and the AFM's `slots` stay each thread's).
    pub fn for_thread(&self, threads: usize) -> LiveSpec {
        let n = threads.max(1) as u32;
        let share = |s: &mut StatsParams, t: &mut DqsConfig| {
            s.flows = s.flows.div_ceil(n);
            s.heavy_flows = s.heavy_flows.div_ceil(n);
            t.queues = t.queues.div_ceil(n);
            t.blocks = t.blocks.div_ceil(n);
        };
        let mut spec = self.clone();
        share(&mut spec.stats, &mut spec.table);
        if let Reverse::Shape(d) = &mut spec.reverse {
            share(&mut d.stats, &mut d.table);
        }
        spec
    }
}

/// EtherTypes `live.non_ip` knows by name ("llc": an 802.3 frame, a length in that field).
const ETHERTYPES: [(&str, u16); 6] =
    [("llc", 0), ("arp", 0x0806), ("rarp", 0x8035), ("lldp", 0x88cc), ("ptp", 0x88f7), ("lacp", 0x8809)];

/// `live.non_ip`: `"pass"` (every frame without an IP packet, the default), `"drop"` (none),
/// or the list of EtherTypes that pass, by name or number.
fn read_non_ip(l: &mut Reader<'_>, probs: &mut Vec<Problem>) -> Option<Vec<u16>> {
    let path = l.path("non_ip");
    let bad = |probs: &mut Vec<Problem>, key: String, v: &toml::Value| {
        probs.push(Problem {
            key,
            value: Some(crate::scenario::show(v)),
            message: "expected \"pass\", \"drop\" or a list of the EtherTypes that pass: \"arp\", \"rarp\", \"lldp\", \
                      \"ptp\", \"lacp\", \"llc\" (802.3 frames) or a number from 0x0600 to 0xffff"
                .into(),
        })
    };
    match l.value("non_ip") {
        None => None,
        Some(toml::Value::String(s)) if s == "pass" => None,
        Some(toml::Value::String(s)) if s == "drop" => Some(Vec::new()),
        Some(toml::Value::Array(a)) => Some(
            a.iter()
                .enumerate()
                .filter_map(|(i, v)| {
                    let t = match v {
                        toml::Value::String(n) => ETHERTYPES.iter().find(|(name, _)| name == n).map(|&(_, t)| t),
                        toml::Value::Integer(t) if (0x0600..=0xffff).contains(t) => Some(*t as u16),
                        _ => None,
                    };
                    if t.is_none() {
                        bad(probs, format!("{path}[{i}]"), v);
                    }
                    t
                })
                .collect(),
        ),
        Some(v) => {
            bad(probs, path, v);
            None
        }
    }
}

/// The EtherType of an Ethernet frame past its VLAN tags (802.1Q, 802.1ad), 0 for an 802.3
/// frame (a length in that field), `None` for a frame too short to have one.
pub fn ethertype(frame: &[u8]) -> Option<u16> {
    let mut at = 12;
    loop {
        let t = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
        match t {
            0x8100 | 0x88a8 | 0x9100 => at += 4,
            t if t < 0x0600 => return Some(0),
            t => return Some(t),
        }
    }
}

impl LiveSpec {
    /// Whether a frame without an IP packet passes (`live.non_ip`).
    pub fn non_ip_passes(&self, frame: &[u8]) -> bool {
        match &self.non_ip {
            None => true,
            Some(list) => ethertype(frame).is_some_and(|t| list.contains(&t)),
        }
    }
}

/// One direction's `[[services]]` in `parent` (the router's keys, `models/router/scenario.rs`),
/// none when it has none; `outer` prefixes the key paths of its problems.
fn read_services(parent: &toml::Table, outer: Option<&str>, probs: &mut Vec<Problem>) -> Vec<ServiceParams> {
    if !parent.contains_key("services") {
        return Vec::new();
    }
    let mut mine = Vec::new();
    let services = crate::models::router::scenario::read_services(parent, None, &mut mine);
    probs.extend(mine.into_iter().map(|p| match outer {
        Some(o) => Problem { key: format!("{o}.{}", p.key), ..p },
        None => p,
    }));
    services
}

/// One direction's `[shaper]`, `[table]`, `[stats]` and `[[services]]`, in `parent` (the file,
/// or its `[reverse]` table: `outer` then prefixes the key paths).
fn read_direction(parent: &toml::Table, outer: Option<&str>, probs: &mut Vec<Problem>) -> Direction {
    let path = |name: &str| outer.map_or(name.to_string(), |o| format!("{o}.{name}"));
    let services = read_services(parent, outer, probs);
    let services_present = !services.is_empty();
    let mut s = Reader::new_in(parent, outer, "shaper", probs);
    let rate_present = s.present("flow_rate");
    let flow_rate = s.rate("flow_rate", Rate::from_bits_per_sec(0), probs);
    if services_present {
        if rate_present {
            probs.push(Problem {
                key: path("shaper.flow_rate"),
                value: Some(format!("\"{}\"", flow_rate)),
                message: "not with [[services]]: each service's rate (per flow) is its flows' rate".into(),
            });
        }
    } else if !rate_present {
        probs.push(Problem {
            key: path("shaper.flow_rate"),
            value: None,
            message: "required: the rate every flow is shaped to, such as \"10Mbps\"".into(),
        });
    } else if flow_rate.is_zero() {
        probs.push(Problem {
            key: path("shaper.flow_rate"),
            value: Some(format!("\"{}\"", flow_rate)),
            message: "expected a positive rate".into(),
        });
    }
    // Twice alpha by default (the kim model's default is alpha itself): under send-then-pay a
    // queue is re-enabled when its bucket holds alpha, so with cap = alpha every nanosecond the
    // real clock wakes late is lost to the cap (measured: -1.7% at 10 Mbps, docs/live.md).
    let bucket = BucketConfig::read(&mut s, BucketKeys::LIVE, probs);
    let aqm = crate::scenario::shaper::read_aqm(&mut s, probs);
    s.finish(probs);

    let mut t = Reader::new_in(parent, outer, "table", probs);
    let table = flowtable::read(&mut t, TableKeys::LIVE, probs);
    t.finish(probs);
    let buffer = table.blocks as u64 * table.block_size as u64;
    if buffer > 16 << 30 {
        probs.push(Problem {
            key: path("table.blocks"),
            value: Some(table.blocks.to_string()),
            message: format!("expected at most 16GiB of buffer (blocks x block_size = {})", fmt_size(buffer)),
        });
    }

    let mut st = Reader::new_in(parent, outer, "stats", probs);
    let stats = crate::scenario::stats::read(&mut st, probs);
    st.finish(probs);
    Direction {
        flow_rate,
        bucket,
        aqm,
        table: DqsConfig { store_payload: true, caller_schedules: true, ..table },
        stats,
        services,
    }
}

impl LiveSpec {
    /// Every parameter with its default filled in, in the file's own keys (for
    /// `scenario.resolved.toml`).
    pub fn to_toml(&self) -> toml::Table {
        let mut l = toml::Table::new();
        l.insert("input".into(), self.input.clone().into());
        l.insert("output".into(), self.output.clone().into());
        if let Some(d) = self.duration {
            l.insert("duration".into(), d.to_string().into());
        }
        l.insert("wait".into(), if self.wait == Wait::Poll { "poll" } else { "sleep" }.into());
        l.insert("mode".into(), if self.mode == Mode::Pass { "pass" } else { "shape" }.into());
        let way_back = match self.reverse {
            Reverse::Pass => "pass",
            Reverse::Off => "off",
            Reverse::Shape(_) => "shape",
        };
        l.insert("reverse".into(), way_back.into());
        super::io::insert(self.io, &mut l);
        l.insert("rx_ring".into(), fmt_size(self.rx_ring).into());
        l.insert("tx_frames".into(), (self.tx_frames as i64).into());
        l.insert("threads".into(), self.threads.map_or("auto".into(), |n| (n as i64).into()));
        l.insert("sample_every".into(), self.sample_every.to_string().into());
        l.insert("stats".into(), self.stats_listen.as_ref().map_or("off".to_string(), |a| a.to_string()).into());
        l.insert(
            "non_ip".into(),
            match &self.non_ip {
                None => "pass".into(),
                Some(v) if v.is_empty() => "drop".into(),
                Some(v) => toml::Value::Array(
                    v.iter()
                        .map(|&t| match ETHERTYPES.iter().find(|(_, n)| *n == t) {
                            Some((name, _)) => (*name).into(),
                            None => (t as i64).into(),
                        })
                        .collect(),
                ),
            },
        );
        let mut root = toml::Table::new();
        root.insert("live".into(), l.into());
        self.direction().write(&mut root);
        if let Some(p) = &self.processing {
            root.insert("processing".into(), crate::models::router::scenario::write_processing(p).into());
        }
        self.capture.write(&mut root);
        if let Reverse::Shape(d) = &self.reverse {
            let mut r = toml::Table::new();
            d.write(&mut r);
            root.insert("reverse".into(), r.into());
        }
        root
    }

    /// The way in's shaping.
    pub fn direction(&self) -> Direction {
        Direction {
            flow_rate: self.flow_rate,
            bucket: self.bucket.clone(),
            aqm: self.aqm,
            table: self.table,
            stats: self.stats,
            services: self.services.clone(),
        }
    }

    /// The way back as a configuration of its own when it is shaped (`live.reverse =
    /// "shape"`): from the output to the input, with `[reverse]`'s shaping.
    pub fn reversed(&self) -> Option<LiveSpec> {
        let Reverse::Shape(d) = &self.reverse else { return None };
        Some(LiveSpec {
            input: self.output.clone(),
            output: self.input.clone(),
            reverse: Reverse::Off,
            processing: None,
            capture: Default::default(),
            flow_rate: d.flow_rate,
            bucket: d.bucket.clone(),
            aqm: d.aqm,
            table: d.table,
            stats: d.stats,
            services: d.services.clone(),
            ..self.clone()
        })
    }
}

impl LiveSpec {
    /// This configuration as the router pipeline's (docs/pipeline.md): its `[[services]]`
    /// (and `unmatched`, unshaped, when the last one has match keys) or one service that every
    /// frame belongs to (`all`), shaped per flow at `flow_rate`; two buckets per physical
    /// queue (the pipeline's bucket-lifetime rule lends them); dqs ingress keeping the frames;
    /// no processing and an ideal queue memory; the link is the caller's transmit ring, so its
    /// rate and the run's duration are unused.
    pub fn router_params(&self) -> RouterParams {
        let service = |name: &str, rate: Option<Rate>| ServiceParams {
            name: name.into(),
            rule: Default::default(),
            tolerance: Duration::from_secs(3_600),
            cost_alpha_ns: 0.0,
            cost_beta_ns: 0.0,
            variation: 0.0,
            guarantee: 1.0,
            rate,
            per_flow: true,
            host: None,
            ecn: false,
            function: None,
        };
        let mut services = self.services.clone();
        if services.is_empty() {
            services.push(service("all", Some(self.flow_rate)));
        } else if services.last().is_some_and(|s| crate::scenario::classify::has_criteria(&s.rule)) {
            // Frames no service matches (ARP among them, unless a service takes non-IP
            // frames) pass unshaped rather than being dropped: a bridge must not cut the
            // endpoints' neighbour resolution.
            let name = if services.iter().any(|s| s.name == "unmatched") { "unmatched_" } else { "unmatched" };
            services.push(service(name, None));
        }
        RouterParams {
            services,
            inside: Vec::new(),
            ingress: IngressKind::Dqs,
            table: self.table,
            fq_codel: Default::default(),
            processing: self.processing.clone().unwrap_or(ProcessingParams {
                processors: 1,
                policy: Allocation::None,
                t_sw: Duration::ZERO,
                delta: Duration::from_millis(1),
                scheduler: Scheduler::Fcfs,
                late_drop: false,
            }),
            qmem: QmemParams::ideal(),
            shaping: ShapingParams {
                kind: ShaperKind::Event {
                    alpha_bytes: self.bucket.alpha,
                    locked_bytes: 0,
                    tick_shift: 6,
                    adaptive: self.bucket.adaptive,
                    timer: self.bucket.timer,
                },
                conformance: self.bucket.conformance,
                cap_bytes: self.bucket.cap,
                cap_wake_ns: self.bucket.wake_tolerance.as_nanos(),
                // Two per physical queue: one for each flow holding a queue, as many for idle
                // flows whose buckets are still filling.
                flow_queues: 2 * self.table.queues,
                buffer_bytes: u64::MAX / 2,
                overhead: self.bucket.overhead,
                mpu: self.bucket.mpu,
                aqm: self.aqm,
            },
            link_rate: Rate::from_bits_per_sec(1 << 50),
            quantum: self.table.quantum,
            link_ahead: 1,
            duration: Duration::ZERO,
            drain: Duration::ZERO,
            sample_every: Duration::ZERO,
            stats: self.stats,
        }
    }
}

impl Direction {
    /// `[shaper]`, `[table]`, `[stats]` and `[[services]]` into `parent`, every default filled
    /// in.
    fn write(&self, parent: &mut toml::Table) {
        let mut s = toml::Table::new();
        if self.services.is_empty() {
            s.insert("flow_rate".into(), self.flow_rate.to_string().into());
        } else {
            parent.insert("services".into(), crate::models::router::scenario::write_services(&self.services));
        }
        self.bucket.write(BucketKeys::LIVE, &mut s);
        crate::scenario::shaper::write_aqm(self.aqm.as_ref(), &mut s);
        let t = &self.table;
        let mut g = toml::Table::new();
        flowtable::write(t, TableKeys::LIVE, &mut g);
        parent.insert("shaper".into(), s.into());
        parent.insert("table".into(), g.into());
        let mut st = toml::Table::new();
        crate::scenario::stats::write(&self.stats, &mut st);
        parent.insert("stats".into(), st.into());
    }
}
