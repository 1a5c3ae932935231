//! `npqos live`'s data plane without its I/O (docs/live.md): the router's pipeline
//! ([`crate::models::router::pipeline`], docs/pipeline.md) driven by whoever holds the clock
//! and the rings.
//!
//! [`Forwarder`] is that pipeline's real-clock driver, with the configuration
//! [`LiveSpec::router_params`] makes of a live file: one service every frame belongs to, shaped
//! per flow; processing none; an ideal queue memory; the caller's transmit ring as the link.
//! So a frame goes through the code the simulator runs:
//!
//! 1. classification by its 5-tuple (the trace decoder's [`crate::trace::decode`]); frames
//!    that carry no IP packet form one flow of their own; its row of the flow counters
//!    ([`FlowIndex`], the memory bound of `[stats]`);
//! 2. the ingress element, dqs keeping the frames: the flow's physical queue from the pool,
//!    the frame's bytes in the block buffer, a drop with its reason when the buffer, the
//!    pool or the queue's limit is exhausted;
//! 3. the egress element: kim's event-driven shaper, one bucket per flow at the flow rate
//!    (send-then-pay or wait-for-tokens), lent by the pipeline's bucket-lifetime rule, dqs's
//!    shared queue (if any) by one bucket of its own; the DRR round over the queues that hold
//!    frames and are not throttled, as many frames as the caller has room for.
//!
//! The caller tells it `now` (CLOCK_MONOTONIC in `npqos live`, any clock in a test), hands it
//! frames with [`Forwarder::receive`], asks [`Forwarder::next_wakeup`] when the shaper next needs
//! it, calls [`Forwarder::wake`] then, and takes frames for the wire from
//! [`Forwarder::transmit`]. The pipeline counts every frame by flow and class, in = out +
//! dropped (by reason) + queued; the forwarder adds what only a data plane has (its totals,
//! each flow's first and last times in and out, the time series).

pub mod csum;
pub mod gso;
pub mod io;
pub mod key;
mod processing;
pub mod reload;
mod report;
pub mod simulate;
pub mod snapshot;
pub mod spec;

pub use spec::{Direction, LiveSpec, Mode, Reverse, Wait};

use npqos_core::flow::FlowKey;
use npqos_core::flowmap::Dqs;
use npqos_core::id::CoreId;
use npqos_core::pipeline::router::{Arrival as Classified, NO_HINT, NO_SLOT, UNCLASSIFIED};
use npqos_core::pipeline::router::{Effects, Host, Pipeline, PipelineError, Received, RowCounts, DROPS};
use npqos_core::pipeline::{FlowBuckets, FlowIndex, Shaping};
use npqos_core::shaper::EventShaper;
use npqos_core::Instant;

/// What [`Forwarder::look_ahead`] read of a frame before it is received: its flow, DSCP and
/// TCP flags, its flow hash (the flow index's and the per-flow buckets') and its ingress slot
/// (the hashes worked out once), tied to the frame's bytes by their address and length, and
/// valid for the forwarder that read it.
#[derive(Clone, Copy, Debug)]
pub struct Ahead {
    at: usize,
    len: usize,
    meta: key::FrameMeta,
    hash: u64,
    slot: Option<u32>,
}

impl Ahead {
    /// The quick reading of `frame` ([`key::quick`]), if it answers.
    #[inline]
    fn read(frame: &[u8], index: &FlowIndex, pipe: &Pipeline) -> Option<Self> {
        let meta = key::quick(frame)?;
        let (hash, slot) = (index.hash(&meta.key), pipe.ingress_slot(&meta.key));
        Some(Ahead { at: frame.as_ptr() as usize, len: frame.len(), meta, hash, slot })
    }
    /// Was this read of `frame`'s bytes?
    #[inline]
    fn is(&self, frame: &[u8]) -> bool {
        (self.at, self.len) == (frame.as_ptr() as usize, frame.len())
    }
}

/// Why a frame was not forwarded: the pipeline's reasons a live configuration can give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A frame without an IP packet that `live.non_ip` does not let through (`unclassified`).
    NotLetThrough,
    /// dqs: not enough free blocks in the buffer (`ingress_buffer_full`).
    BufferFull,
    /// dqs: a new flow found every physical queue taken, `on_exhausted = "drop"`
    /// (`ingress_no_queue`).
    NoQueue,
    /// dqs: the flow's queue holds `[table] queue_limit` bytes (`ingress_queue_full`).
    QueueFull,
    /// Wait-for-tokens: the frame is larger than the bucket's cap, so it could never conform
    /// (Linux tbf drops such packets too) (`exceeds_bucket`).
    AboveCap,
    /// The frame is larger than a transmit slot (`oversize`).
    Oversize,
    /// CoDel dropped it from its queue's head (`codel`, `[shaper] aqm = "codel"`).
    Codel,
}

impl Reason {
    pub const ALL: [Reason; 7] = [
        Reason::NotLetThrough,
        Reason::BufferFull,
        Reason::NoQueue,
        Reason::QueueFull,
        Reason::AboveCap,
        Reason::Oversize,
        Reason::Codel,
    ];
    /// Its name in the results (`dropped_<name>`): the pipeline's, the router's too.
    pub fn name(self) -> &'static str {
        DROPS[self.index()]
    }
    /// Its index among the pipeline's reasons ([`DROPS`]).
    pub fn index(self) -> usize {
        match self {
            Reason::NotLetThrough => 0,
            Reason::BufferFull => 1,
            Reason::NoQueue => 2,
            Reason::AboveCap => 4,
            Reason::QueueFull => 6,
            Reason::Oversize => 7,
            Reason::Codel => 8,
        }
    }
    fn of(index: usize) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.index() == index)
    }
}

/// What became of a received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    Queued,
    Dropped(Reason),
    /// The pipeline stopped on a mechanism's refusal ([`Forwarder::error`]); the next
    /// [`Forwarder::transmit`] or [`Forwarder::wake`] returns it.
    Refused,
}

/// A flow's counters in the pipeline's vocabulary (docs/pipeline.md), one drop count per
/// reason of the pipeline ([`DROPS`]; [`Reason::index`]).
pub type LiveCounts = RowCounts;

/// What one flow did (or, for the row of the flows past the exact table, all of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowStats {
    pub key: FlowKey,
    /// The frames carried no IP packet (the one non-IP flow).
    pub non_ip: bool,
    /// Its service (class), by index of the pipeline's services.
    pub class: u32,
    /// The rate it is shaped to (its service's per-flow rate; `None`: unshaped).
    pub rate: Option<npqos_core::Rate>,
    /// Frames offered, sent, dropped by reason, overlimits, delay in npqos's queues: the
    /// pipeline's counters of the flow's row.
    pub counts: LiveCounts,
    /// Times the flow was given a physical queue (it keeps its bucket across them while the
    /// bucket is not full).
    pub activations: u64,
    pub first_in_ns: u64,
    pub last_in_ns: u64,
    pub first_out_ns: u64,
    pub last_out_ns: u64,
    first_out_len: u64,
}

/// The part of a flow's row only a data plane has: its key and its times in and out.
#[derive(Clone, Copy, Debug)]
struct FlowTimes {
    key: FlowKey,
    non_ip: bool,
    /// Its service (class), by index.
    class: u32,
    activations: u64,
    in_packets: u64,
    out_packets: u64,
    first_in_ns: u64,
    last_in_ns: u64,
    first_out_ns: u64,
    last_out_ns: u64,
    first_out_len: u64,
}

impl FlowTimes {
    fn new(key: FlowKey, non_ip: bool, class: u32) -> Self {
        FlowTimes {
            key,
            non_ip,
            class,
            activations: 0,
            in_packets: 0,
            out_packets: 0,
            first_in_ns: 0,
            last_in_ns: 0,
            first_out_ns: 0,
            last_out_ns: 0,
            first_out_len: 0,
        }
    }
    fn with(&self, counts: LiveCounts, rate: Option<npqos_core::Rate>) -> FlowStats {
        FlowStats {
            key: self.key,
            non_ip: self.non_ip,
            class: self.class,
            rate,
            counts,
            activations: self.activations,
            first_in_ns: self.first_in_ns,
            last_in_ns: self.last_in_ns,
            first_out_ns: self.first_out_ns,
            last_out_ns: self.last_out_ns,
            first_out_len: self.first_out_len,
        }
    }
}

impl FlowStats {
    pub fn dropped(&self) -> u64 {
        self.counts.dropped_packets()
    }
    /// Rate achieved on the output, bits/s: the bytes after the first frame over the time
    /// from the first frame's transmission to the last's (the first frame's bytes are the
    /// ones sent at its start). `None` with fewer than two frames out.
    pub fn rate_out_bps(&self) -> Option<f64> {
        let span = self.last_out_ns.checked_sub(self.first_out_ns).filter(|&s| s > 0)?;
        Some((self.counts.sent_bytes - self.first_out_len) as f64 * 8e9 / span as f64)
    }
    /// Rate offered on the input, bits/s, measured the same way.
    pub fn rate_in_bps(&self) -> Option<f64> {
        let span = self.last_in_ns.checked_sub(self.first_in_ns).filter(|&s| s > 0)?;
        let c = &self.counts;
        Some(c.offered_bytes.saturating_sub(c.offered_bytes / c.offered_packets.max(1)) as f64 * 8e9 / span as f64)
    }
    /// The flow as a label: `udp 198.18.0.1:5000 > 198.18.0.2:6000`.
    pub fn label(&self) -> String {
        flow_label(&self.key, self.non_ip)
    }
}

/// A flow as the results and the statistics name it: `udp 198.18.0.1:5000 > 198.18.0.2:6000`,
/// or the non-IP frames (those `live.non_ip` let through, or not).
pub(crate) fn flow_label(k: &FlowKey, non_ip: bool) -> String {
    if non_ip {
        return if k.zone == NON_IP_REFUSED.zone { "non-IP frames refused by live.non_ip" } else { "non-IP frames" }
            .into();
    }
    let proto = match k.proto {
        6 => "tcp".to_string(),
        17 => "udp".to_string(),
        1 => "icmp".to_string(),
        58 => "icmpv6".to_string(),
        p => format!("proto {p}"),
    };
    let (s, d) = (k.src_ip(), k.dst_ip());
    if k.src_port == 0 && k.dst_port == 0 {
        format!("{proto} {s} > {d}")
    } else if k.is_v6 {
        format!("{proto} [{s}]:{} > [{d}]:{}", k.src_port, k.dst_port)
    } else {
        format!("{proto} {s}:{} > {d}:{}", k.src_port, k.dst_port)
    }
}

/// The key of the non-IP flow: no IP flow has zone `u16::MAX` (zones come from trace copies).
const NON_IP: FlowKey =
    FlowKey { src: [0; 16], dst: [0; 16], src_port: 0, dst_port: 0, proto: 0, is_v6: false, zone: u16::MAX };
/// The key of the non-IP frames `live.non_ip` does not let through: a flow of their own.
const NON_IP_REFUSED: FlowKey = FlowKey { zone: u16::MAX - 1, ..NON_IP };
/// The shaper's one core: `npqos live` forwards on one thread.
const CORE: CoreId = CoreId(0);

/// Totals over the run, beyond the per-flow counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub frames_in: u64,
    pub bytes_in: u64,
    pub frames_out: u64,
    pub bytes_out: u64,
    /// Frames dropped, by reason of [`Reason::ALL`].
    pub drops: [u64; Reason::ALL.len()],
    /// Timer wake-ups that re-enabled at least one queue.
    pub wakeups: u64,
    /// Largest number of queues waiting in the shaper's heap.
    pub heap_max: usize,
    pub active_flows_max: usize,
    pub blocks_in_use_max: u32,
    /// Frames held back by their bucket (tc's overlimits).
    pub overlimits: u64,
}

impl Totals {
    /// Frames dropped for `reason`.
    pub fn dropped(&self, reason: Reason) -> u64 {
        self.drops[Reason::ALL.iter().position(|&r| r == reason).expect("a reason of ALL")]
    }
}

/// The pipeline's real-clock driver. See the module documentation.
pub struct Forwarder {
    spec: LiveSpec,
    /// The router's pipeline with processing none and the caller's ring as its link.
    pipe: Pipeline,
    /// Its timed effects as the last call gave them, and those waiting for their time (none
    /// without processors: processing none has no timed effects).
    fx: Effects,
    pending: processing::Pending,
    /// With processors, the per-service time series.
    svc: processing::ServiceSeries,
    /// The services' match rules (stage 2).
    classifier: npqos_core::classify::Classifier,
    /// Per service its arrivals' `eq`: the output queue of its first flow bucket, or its own.
    eq: Vec<u32>,
    /// Per service the rate each of its flows is shaped to (`None`: unshaped).
    rates: Vec<Option<npqos_core::Rate>>,
    /// Per service whose bucket several flows share: `Some(None)` one for the class,
    /// `Some(Some(host))` one per subscriber address; `None`: each flow its own, or unshaped.
    shares: Vec<Option<Option<Host>>>,
    /// Per service its processing cost, alpha (ns) and beta (ns per byte).
    costs: Vec<(f64, f64)>,
    /// Flows to rows of the counters, with the memory bound of `[stats]`: the first
    /// `stats.flows` flows each a row, the rest together in `other`.
    index: FlowIndex,
    times: Vec<FlowTimes>,
    other: FlowTimes,
    /// Counted here: frames and bytes in and out, the largest heap, active flows and blocks.
    totals: Totals,
    series: [Vec<(f64, f64)>; 4],
    start: Option<Instant>,
    last_sample: (u64, u64),
    heap_sum: f64,
    samples: u64,
}

impl Forwarder {
    /// A forwarder for `spec` whose transmit slots hold frames of at most `max_frame` bytes.
    ///
    /// Errors: a configuration the pipeline refuses (the spec reader catches the common ones).
    pub fn new(spec: &LiveSpec, max_frame: u32) -> Result<Self, PipelineError> {
        let p = std::sync::Arc::new(spec.router_params());
        let seed = match spec.table.hash {
            npqos_core::flowmap::HashKind::H3 { seed } | npqos_core::flowmap::HashKind::Fast { seed } => seed,
        };
        let classifier = npqos_core::pipeline::router::classifier(&p)?;
        let rates = p.services.iter().map(|s| s.rate).collect();
        let shares = (p.services.iter())
            .map(|s| match (s.rate, s.per_flow, s.host) {
                (None, ..) | (Some(_), true, None) => None,
                (Some(_), _, host) => Some(host),
            })
            .collect();
        let costs = p.services.iter().map(|s| (s.cost_alpha_ns, s.cost_beta_ns)).collect();
        let pipe = Pipeline::new(p, 0.0, seed, false)?.with_ring_link(max_frame)?;
        Ok(Forwarder {
            eq: pipe.eq_base().iter().enumerate().map(|(s, &b)| if b != 0 { b } else { s as u32 }).collect(),
            classifier,
            rates,
            shares,
            costs,
            pipe,
            fx: Effects::default(),
            pending: Default::default(),
            svc: Default::default(),
            index: FlowIndex::new(spec.stats.flows as usize, spec.stats.heavy_flows as usize),
            times: Vec::new(),
            other: FlowTimes::new(NON_IP, false, 0),
            totals: Totals::default(),
            series: Default::default(),
            start: None,
            last_sample: (0, 0),
            heap_sum: 0.0,
            samples: 0,
            spec: spec.clone(),
        })
    }

    pub fn spec(&self) -> &LiveSpec {
        &self.spec
    }
    /// The totals, with the drops and overlimits the pipeline counted.
    pub fn totals(&self) -> Totals {
        let mut t = self.totals;
        let d = self.pipe.drops();
        t.drops = Reason::ALL.map(|r| d[r.index()]);
        t.wakeups = self.pipe.wakeups();
        t.overlimits = (0..self.rates.len()).filter_map(|s| self.pipe.class_row(s)).map(|c| c.overlimits).sum();
        t
    }
    /// Flows counted exactly (the rows of [`Self::flows`]).
    pub fn flow_count(&self) -> usize {
        self.times.len()
    }
    /// The flows of the exact table, in the order first seen.
    pub fn flows(&self) -> Vec<FlowStats> {
        let rate = |t: &FlowTimes| self.rates.get(t.class as usize).copied().flatten();
        self.times.iter().enumerate().map(|(r, t)| t.with(self.pipe.flow_row(r as u32), rate(t))).collect()
    }
    /// Every flow past the exact table, together.
    pub fn other_flows(&self) -> FlowStats {
        self.other.with(self.pipe.flow_row(FlowIndex::OTHER), None)
    }
    pub fn shaper(&self) -> &EventShaper {
        match self.pipe.shaping() {
            Shaping::Event(e) => e,
            _ => unreachable!("live's configuration is event-driven shaping"),
        }
    }
    /// The flows' buckets and the rule's counters.
    ///
    /// # Panics
    /// With no per-flow or per-subscriber rate (every service's rate per class, or none).
    pub fn buckets(&self) -> &FlowBuckets {
        self.pipe.flow_buckets().expect("live shapes per flow")
    }
    /// Whether a frame of flow `key` is queued here (dqs keeps a flow's mapping, to its own
    /// queue or the shared one, exactly while it has frames queued).
    pub fn holds(&self, key: &FlowKey) -> bool {
        self.held_bytes(key).is_some()
    }
    /// The bytes queued in flow `key`'s queue (for a flow in the shared queue, that queue's),
    /// `None` when none of its frames is queued here.
    pub fn held_bytes(&self, key: &FlowKey) -> Option<u64> {
        let d = self.dqs();
        if d.is_empty() {
            return None;
        }
        match d.afm().find(d.slot_of(key), key) {
            npqos_core::flowmap::afm::Find::Found { value, .. } => Some(d.buffer().bytes(value)),
            npqos_core::flowmap::afm::Find::Vacant(_) => None,
        }
    }
    /// Frames in the buffer.
    pub fn queued(&self) -> u64 {
        match self.pipe.has_processors() {
            // In the ingress, on or waiting for a processor, or in an output queue.
            true => self.pipe.in_flight(),
            false => self.pipe.ingress_held(),
        }
    }
    /// A configuration that holds nothing and takes nothing more (a reload's old one, once it
    /// has sent what it held): its buffer's storage (the frames' blocks and their lists) given
    /// back, its counters, flow rows and series kept for the results. Nothing if it still
    /// holds frames.
    pub fn retire(&mut self) {
        if self.queued() == 0 {
            let _ = self.pipe.release_storage();
        }
    }
    /// The mechanism's refusal that stopped the pipeline, if one did.
    pub fn error(&self) -> Option<&PipelineError> {
        self.pipe.error()
    }

    /// Conservation at the pipeline's elements (the ingress, the flow buckets): in = out +
    /// dropped by reason + held at each one's ports.
    pub fn check(&self) -> Result<(), npqos_core::pipeline::ConservationError> {
        self.pipe.check_elements()
    }

    /// The dqs table behind the ingress element (its counters and buffer).
    fn dqs(&self) -> &Dqs {
        self.pipe.dqs().expect("live's ingress is dqs")
    }

    #[inline]
    fn times(&mut self, row: u32) -> &mut FlowTimes {
        match row {
            FlowIndex::OTHER => &mut self.other,
            r => &mut self.times[r as usize],
        }
    }

    /// The frame's flow, whether it carries no IP packet, its DSCP and its TCP flags.
    #[inline]
    fn key_of(frame: &[u8]) -> (FlowKey, bool, u8, Option<u8>) {
        let m = key::meta(frame, NON_IP);
        (m.key, m.non_ip, m.dscp, m.tcp_flags)
    }

    /// Hints: `next` and `after` are the next two frames to be given to [`Self::receive`] (a
    /// ring block's), so their flows' state loads while the frame before them is worked on,
    /// in two steps so that each step's loads are independent and overlap: for `after`, its
    /// index slot and its dqs slot; for `next` (whose slots the call before loaded), its rows
    /// of the flow counters (here and in the pipeline) and its dqs tree root. `known` is what
    /// the call before returned for `next` (then its `after`). Returns what was read of `next`
    /// and `after`, for [`Self::receive_ahead`] and the next call. Changes nothing; frames the
    /// quick reading does not answer for ([`key::quick`]) get no hint.
    #[inline]
    pub fn look_ahead(&self, next: &[u8], after: &[u8], known: Option<Ahead>) -> [Option<Ahead>; 2] {
        let a = Ahead::read(after, &self.index, &self.pipe);
        if let Some(a) = &a {
            self.index.prefetch(a.hash);
            if let Some(s) = a.slot {
                self.pipe.prefetch_slot(s, false);
            }
            // The flow counters and the per-flow buckets index by one hash (`flow_hash`).
            if self.pipe.has_flow_buckets() {
                self.pipe.prefetch_bucket(a.hash, false);
            }
        }
        let n = known.filter(|k| k.is(next)).or_else(|| Ahead::read(next, &self.index, &self.pipe));
        if let Some(n) = &n {
            let row = self.index.peek(n.hash);
            if row != FlowIndex::OTHER {
                self.index.prefetch_row(row);
                npqos_core::hint::prefetch_whole(&self.times, row as usize);
                self.pipe.prefetch_row(row);
            }
            if let Some(s) = n.slot {
                self.pipe.prefetch_slot(s, true);
            }
            if self.pipe.has_flow_buckets() {
                self.pipe.prefetch_bucket(n.hash, true);
            }
        }
        [n, a]
    }

    /// The bucket `frame` would be shaped by when several flows share it (its service's rate
    /// per class, or per subscriber address), as a 64-bit hash of the bucket's key; `None`
    /// when its flow has a bucket of its own or none. `npqos live` on several threads hands
    /// such a frame to the thread that owns the bucket (docs/live.md, "Every core").
    pub fn shared_bucket(&self, frame: &[u8]) -> Option<u64> {
        let (key, non_ip, dscp, _) = Self::key_of(frame);
        if non_ip && !self.spec.non_ip_passes(frame) {
            return None;
        }
        let service = self.classifier.classify_packet(&key, dscp).map_or(self.eq.len() - 1, |s| s.index());
        let host = (*self.shares.get(service)?)?;
        let k = npqos_core::pipeline::router::bucket_key(&key, host);
        let a = u128::from_ne_bytes(k.src);
        let h = (a as u64) ^ ((a >> 64) as u64).rotate_left(29) ^ ((service as u64 + 1) << 48);
        // A full-avalanche mix (splitmix64's finaliser): any bit of the key moves the owner.
        let h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        let h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Some(h ^ (h >> 31))
    }

    /// Times run from `origin` rather than from the first frame (the series, the snapshots):
    /// `npqos live` on several threads gives every thread's forwarder the run's start, so
    /// that their samples line up. Nothing once a frame has come.
    pub fn set_origin(&mut self, origin: Instant) {
        self.start.get_or_insert(origin);
    }

    /// A frame arrived at `now` (no earlier than any time given before).
    pub fn receive(&mut self, frame: &[u8], now: Instant) -> Arrival {
        self.receive_ahead(frame, now, None)
    }

    /// [`Self::receive`] with what [`Self::look_ahead`] read of the frame, if it did (not read
    /// again; ignored if it was read of other bytes).
    pub fn receive_ahead(&mut self, frame: &[u8], now: Instant, ahead: Option<Ahead>) -> Arrival {
        let now_ns = now.as_nanos();
        self.start.get_or_insert(now);
        let ahead = ahead.filter(|a| a.is(frame));
        let (mut key, non_ip, dscp, tcp_flags) = match &ahead {
            Some(a) => (a.meta.key, a.meta.non_ip, a.meta.dscp, a.meta.tcp_flags),
            None => Self::key_of(frame),
        };
        let len = frame.len() as u32;
        // The last service takes what the others do not (router_params adds one if needed);
        // non-IP frames live.non_ip refuses are the pipeline's unclassified ones.
        let service = if non_ip && !self.spec.non_ip_passes(frame) {
            key = NON_IP_REFUSED;
            UNCLASSIFIED
        } else {
            self.classifier.classify_packet(&key, dscp).map_or(self.eq.len() - 1, |s| s.index()) as u32
        };
        // (The quick reading, and so `hash`, is only of IP frames, whose key stays.)
        let row = match &ahead {
            Some(a) => self.index.row_hashed(a.hash, &key, service, len),
            None => self.index.row(&key, service, len),
        };
        if row as usize == self.times.len() {
            self.times.push(FlowTimes::new(key, non_ip, service));
        }
        let t = self.times(row);
        if t.in_packets == 0 {
            t.first_in_ns = now_ns;
        }
        t.in_packets += 1;
        t.last_in_ns = now_ns;
        self.totals.frames_in += 1;
        self.totals.bytes_in += len as u64;
        let eq = self.eq.get(service as usize).copied().unwrap_or(0);
        // With processors: what is due first, and the frame's processing time is its
        // service's configured cost (its `variation` is 0 in a live file).
        let mut actual = 0.0;
        if self.pipe.has_processors() {
            self.run_due(now);
            if let Some(svc) = self.costs.get(service as usize) {
                actual = svc.0 + svc.1 * len as f64;
            }
        }
        // The slot look_ahead worked out, for the key it read (a refused non-IP frame's key is
        // changed above, but the quick reading reads only IP frames).
        let slot = ahead.and_then(|a| a.slot).unwrap_or(NO_SLOT);
        let a = Classified { t: now_ns, len, service, eq, hint: NO_HINT, actual, key, row, tcp_flags, slot };
        let got = match ahead {
            Some(h) => self.pipe.receive_frame_hashed(a, frame, h.hash, &mut self.fx),
            None => self.pipe.receive_frame(a, frame, &mut self.fx),
        };
        self.absorb();
        match got {
            Received::Queued { new_flow } => {
                self.times(row).activations += new_flow as u64;
                let d = self.dqs();
                let (active, used) = (d.active_flows(), d.buffer().total_blocks() - d.buffer().free_blocks());
                self.totals.active_flows_max = self.totals.active_flows_max.max(active);
                self.totals.blocks_in_use_max = self.totals.blocks_in_use_max.max(used);
                Arrival::Queued
            }
            Received::Dropped(i) => Reason::of(i).map_or(Arrival::Refused, Arrival::Dropped),
            Received::Refused => Arrival::Refused,
        }
    }

    /// When [`Self::wake`] must next be called: the pipeline's `next_wakeup()` (with the ring
    /// as its link and no processors, the shaper's). It changes only in [`Self::transmit`] (a
    /// queue throttled) and [`Self::wake`].
    pub fn next_wakeup(&self) -> Option<Instant> {
        let effect = self.pending.peek().map(|e| Instant::from_nanos(e.0));
        match (self.pipe.next_wakeup().map(|(t, _)| t), effect) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The shaper's timer call: queues whose reschedule time has come are enabled again and
    /// rejoin the DRR round if they hold frames. Calling it early is harmless.
    ///
    /// Errors: the pipeline stopped on a mechanism's refusal.
    pub fn wake(&mut self, now: Instant) -> Result<(), PipelineError> {
        self.run_due(now);
        self.pipe.error().map_or(Ok(()), |e| Err(e.clone()))
    }

    /// Up to `room` frames for the wire at `now`, each handed to `emit`, by DRR over the queues
    /// that hold frames and are not throttled. Returns how many were emitted.
    ///
    /// Errors: the pipeline stopped on a mechanism's refusal.
    pub fn transmit(&mut self, now: Instant, room: usize, mut emit: impl FnMut(&[u8])) -> Result<usize, PipelineError> {
        if let Some(e) = self.pipe.error() {
            return Err(e.clone());
        }
        let now_ns = now.as_nanos();
        if self.pipe.has_processors() {
            self.run_due(now);
        }
        let (times, other, totals) = (&mut self.times, &mut self.other, &mut self.totals);
        let sent = self.pipe.transmit(now, room, &mut self.fx, |frame, row| {
            emit(frame);
            let t = match row {
                FlowIndex::OTHER => &mut *other,
                r => &mut times[r as usize],
            };
            if t.out_packets == 0 {
                t.first_out_ns = now_ns;
                t.first_out_len = frame.len() as u64;
            }
            t.out_packets += 1;
            t.last_out_ns = now_ns;
            totals.frames_out += 1;
            totals.bytes_out += frame.len() as u64;
        });
        self.absorb();
        self.totals.heap_max = self.totals.heap_max.max(self.shaper().waiting(CORE));
        self.pipe.error().map_or(Ok(sent), |e| Err(e.clone()))
    }

    /// Records one point of each time series at `now` (output rate over the interval since the
    /// last sample, heap size, active flows, buffer blocks in use).
    pub fn sample(&mut self, now: Instant) {
        let Some(start) = self.start else { return };
        let t = now.saturating_since(start).as_secs_f64();
        let (t0, b0) = self.last_sample;
        let dt = now.as_nanos().saturating_sub(t0.max(start.as_nanos()));
        if dt > 0 {
            let mbps = (self.totals.bytes_out - b0) as f64 * 8e3 / dt as f64;
            self.series[0].push((t, mbps));
        }
        let heap = self.shaper().waiting(CORE);
        self.heap_sum += heap as f64;
        self.samples += 1;
        self.series[1].push((t, heap as f64));
        let d = self.dqs();
        let (active, used) = (d.active_flows(), d.buffer().total_blocks() - d.buffer().free_blocks());
        self.series[2].push((t, active as f64));
        self.series[3].push((t, used as f64));
        self.sample_services(t);
        self.last_sample = (now.as_nanos(), self.totals.bytes_out);
    }

    /// Flows whose offered rate was above the shaped rate (by 1%): the ones a shaper must hold
    /// to the rate.
    pub fn backlogged(&self) -> Vec<FlowStats> {
        let hot = |s: &FlowStats| {
            let r = s.rate.map_or(f64::INFINITY, |r| r.bits_per_sec() as f64);
            s.counts.sent_packets >= 2 && s.rate_in_bps().is_some_and(|i| i > 1.01 * r)
        };
        self.flows().into_iter().filter(hot).collect()
    }

    /// The suffix of a per-service scalar: none with one service (`all`), `.<name>` with
    /// `[[services]]`.
    fn suffix(&self, class: u32) -> String {
        match self.spec.services.is_empty() {
            true => String::new(),
            false => format!(".{}", self.pipe.service_name(class as usize)),
        }
    }
}

#[cfg(test)]
mod ahead_tests;
#[cfg(test)]
mod codel_tests;
#[cfg(test)]
mod processing_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod wake_tests;
