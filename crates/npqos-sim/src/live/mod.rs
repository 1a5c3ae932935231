//! `npqos live`'s data plane without its I/O (docs/live.md): the pipeline the command runs on
//! real frames, driven here by whoever holds the clock and the rings.
//!
//! [`Forwarder`] composes the library's mechanisms, the same code the simulator calls:
//!
//! 1. classification of each frame by its 5-tuple (the trace decoder's
//!    [`crate::trace::decode`]); frames that carry no IP packet form one flow of their own;
//! 2. dqs, as the pipeline's ingress element ([`npqos_core::pipeline::Ingress`], the router
//!    model's stage 3, here keeping the frames): the flow's physical queue from the pool, the frame's
//!    bytes in the block buffer, a drop with its reason when the buffer or the pool is exhausted;
//! 3. kim's event-driven shaper ([`npqos_core::shaper::EventShaper`]), one bucket per flow at
//!    the flow rate, send-then-pay (Algorithm 1) or wait-for-tokens (tbf);
//! 4. DRR ([`npqos_core::sched::drr::Drr`]) over the queues that hold frames and are not
//!    throttled, towards the output interface, as many frames as the caller has room for.
//!    Steps 3 and 4 are the pipeline's egress element ([`npqos_core::pipeline::Egress`]), the
//!    code the router model runs.
//!
//! The caller tells it `now` (CLOCK_MONOTONIC in `npqos live`, any clock in a test), hands it
//! frames with [`Forwarder::receive`], asks [`Forwarder::next_wakeup`] when the shaper next needs
//! it, calls [`Forwarder::wake`] then, and takes frames for the wire from
//! [`Forwarder::transmit`]. It counts every frame: in = out + dropped (by reason) + queued.
//!
//! A flow's bucket outlives its physical queue, by the pipeline's one bucket-lifetime rule
//! ([`npqos_core::pipeline::FlowBuckets`], docs/pipeline.md): dqs keeps a flow's queue only
//! while it has frames queued; the flow holds its bucket while it has a queue, and when the
//! queue is released the bucket is parked with the time it is full again
//! ([`EventShaper::full_at`]). A flow that comes back takes its own bucket back, full or not;
//! a new flow takes a bucket never used, else a parked one that is full again (the same as a
//! new one), else the one nearest to full from its idle flow (counted as `bucket_evictions`).
//! The pool has two buckets per physical queue, so at least half are free of a queue.

pub mod csum;
pub mod gso;
pub mod spec;

pub use spec::{Direction, LiveSpec, Mode, Reverse, Wait};

use crate::results::{ClassRecord, CountRow, FlowRecord, Histogram, Note, RunResult, Series, Table};
use crate::trace::decode::decode;
use crate::trace::reader::{linktype, Record};
use npqos_core::flow::FlowKey;
use npqos_core::flowmap::Dqs;
use npqos_core::id::{CoreId, QueueId};
use npqos_core::pipeline::{
    Admit, Counts, Egress, EgressQueues, FlowBuckets, FlowIndex, Ingress, IngressDrop, IngressKind, Shaping,
};
use npqos_core::sched::drr::Drr;
use npqos_core::shaper::{BucketParams, Conformance, EventShaper};
use npqos_core::{Error, Instant};
use std::collections::VecDeque;

/// Why a frame was not forwarded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// dqs: not enough free blocks in the buffer.
    BufferFull,
    /// dqs: a new flow found every physical queue taken (`on_exhausted = "drop"`).
    NoQueue,
    /// dqs: the flow's queue holds `[table] queue_limit` bytes.
    QueueFull,
    /// Wait-for-tokens: the frame is larger than the bucket's cap, so it could never conform
    /// (Linux tbf drops such packets too).
    AboveCap,
    /// The frame is larger than a transmit slot.
    Oversize,
    /// Still queued when forwarding stopped.
    Stopped,
}

impl Reason {
    pub const ALL: [Reason; 6] =
        [Reason::BufferFull, Reason::NoQueue, Reason::QueueFull, Reason::AboveCap, Reason::Oversize, Reason::Stopped];
    pub fn name(self) -> &'static str {
        match self {
            Reason::BufferFull => "buffer_full",
            Reason::NoQueue => "no_queue",
            Reason::QueueFull => "queue_full",
            Reason::AboveCap => "above_cap",
            Reason::Oversize => "oversize",
            Reason::Stopped => "stopped",
        }
    }
}

/// What became of a received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    Queued,
    Dropped(Reason),
}

/// A flow's counters in the pipeline's vocabulary (docs/pipeline.md), one drop count per
/// [`Reason::ALL`].
pub type LiveCounts = Counts<6>;

/// What one flow did (or, for the row of the flows past the exact table, all of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowStats {
    pub key: FlowKey,
    /// The frames carried no IP packet (the one non-IP flow).
    pub non_ip: bool,
    /// Frames offered, sent, dropped by reason, overlimits, delay in npqos's queues.
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

impl FlowStats {
    fn new(key: FlowKey, non_ip: bool) -> Self {
        FlowStats {
            key,
            non_ip,
            counts: LiveCounts::default(),
            activations: 0,
            first_in_ns: 0,
            last_in_ns: 0,
            first_out_ns: 0,
            last_out_ns: 0,
            first_out_len: 0,
        }
    }
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
        if self.non_ip {
            return "non-IP frames".into();
        }
        let k = &self.key;
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
}

/// The key of the non-IP flow: no IP flow has zone `u16::MAX` (zones come from trace copies).
const NON_IP: FlowKey =
    FlowKey { src: [0; 16], dst: [0; 16], src_port: 0, dst_port: 0, proto: 0, is_v6: false, zone: u16::MAX };
/// No flow row (a queue nobody holds); distinct from [`FlowIndex::OTHER`].
const NO_FLOW: u32 = u32::MAX - 1;
const NONE: u32 = u32::MAX;
/// The shaper's one core: `npqos live` forwards on one thread.
const CORE: CoreId = CoreId(0);

/// Totals over the run, beyond the per-flow counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub frames_in: u64,
    pub bytes_in: u64,
    pub frames_out: u64,
    pub bytes_out: u64,
    pub drops: [u64; 6],
    /// Timer wake-ups that re-enabled at least one queue.
    pub wakeups: u64,
    /// Largest number of queues waiting in the shaper's heap.
    pub heap_max: usize,
    pub active_flows_max: usize,
    pub blocks_in_use_max: u32,
    /// Frames held back by their bucket (tc's overlimits).
    pub overlimits: u64,
}

/// The pipeline. See the module documentation.
pub struct Forwarder {
    spec: LiveSpec,
    /// The pipeline's ingress element: dqs over the block buffer that keeps the frames.
    ingress: Ingress,
    /// The pipeline's egress element: the event-driven shaper over the buckets and the DRR
    /// round over the physical queues.
    egress: Egress,
    max_frame: u32,
    /// Flows to rows of the counters, with the memory bound of `[stats]`: the first
    /// `stats.flows` flows each a row of `stats`, the rest together in `other`.
    index: FlowIndex,
    stats: Vec<FlowStats>,
    other: FlowStats,
    /// Per physical queue, the arrival times of its frames (their delay when they leave).
    stamps: Vec<VecDeque<u64>>,
    /// Every sent frame's delay in npqos's queues, ns.
    delay: hdrhistogram::Histogram<u64>,
    /// Per physical queue, the row of the flow it holds (NO_FLOW: none; the shared queue
    /// holds many, found from the frame).
    queue_flow: Vec<u32>,
    shared: Option<QueueId>,
    /// The shared queue's one bucket (the last).
    shared_bucket: u32,
    /// The flows' buckets (the shaper's first `2 x queues`), lent by the pipeline's rule.
    buckets: FlowBuckets,
    /// Per physical queue, the bucket of the flow holding it; per flow bucket, the physical
    /// queue of its flow while the flow holds one (NONE while parked).
    queue_bucket: Vec<u32>,
    bucket_queue: Vec<u32>,
    /// A call `receive` could not make (it returns what became of the frame, not an error):
    /// the next `transmit` returns it.
    refused: Option<Error>,
    frame: Vec<u8>,
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
    /// Errors: a configuration a mechanism refuses (the spec reader catches the common ones).
    pub fn new(spec: &LiveSpec, max_frame: u32) -> Result<Self, Error> {
        let seed = match spec.table.hash {
            npqos_core::flowmap::HashKind::H3 { seed } | npqos_core::flowmap::HashKind::Fast { seed } => seed,
        };
        let ingress = Ingress::new(IngressKind::Dqs, &spec.table, 1, seed)?;
        let shared = ingress.dqs().and_then(Dqs::shared_queue);
        let queues = spec.table.queues + shared.is_some() as u32;
        // Two buckets per physical queue: one for each flow that holds a queue, and as many for
        // idle flows whose buckets are still filling. Then the shared queue's.
        let flow_buckets = 2 * spec.table.queues;
        let bucket = BucketParams { cir: spec.flow_rate, cap_bytes: spec.bucket.cap, alpha_bytes: spec.bucket.alpha };
        let shaper = EventShaper::new(&vec![bucket; (flow_buckets + shared.is_some() as u32) as usize], 1, 0, 6)
            .map_err(|e| Error::BadParameter { parameter: "shaper", value: e.to_string(), expected: "a valid bucket" })?
            .with_timer(spec.bucket.timer)
            .map_err(|e| Error::BadParameter {
                parameter: "shaper",
                value: e.to_string(),
                expected: "a valid bucket",
            })?;
        let drr = Drr::new(queues, spec.table.quantum as u64)?;
        Ok(Forwarder {
            ingress,
            egress: Egress::new(Shaping::Event(shaper), spec.bucket.conformance, drr),
            max_frame,
            index: FlowIndex::new(spec.stats.flows as usize, spec.stats.heavy_flows as usize),
            stats: Vec::new(),
            other: FlowStats::new(NON_IP, false),
            stamps: vec![VecDeque::new(); queues as usize],
            delay: hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds"),
            queue_flow: vec![NO_FLOW; queues as usize],
            shared,
            shared_bucket: flow_buckets,
            buckets: FlowBuckets::new(flow_buckets)?,
            queue_bucket: vec![NONE; queues as usize],
            bucket_queue: vec![NONE; flow_buckets as usize],
            refused: None,
            frame: Vec::with_capacity(max_frame as usize),
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
    pub fn totals(&self) -> &Totals {
        &self.totals
    }
    /// The flows of the exact table, in the order first seen.
    pub fn flows(&self) -> &[FlowStats] {
        &self.stats
    }
    /// Every flow past the exact table, together.
    pub fn other_flows(&self) -> &FlowStats {
        &self.other
    }
    pub fn shaper(&self) -> &EventShaper {
        match self.egress.shaping() {
            Shaping::Event(e) => e,
            _ => unreachable!("live builds an event-driven shaper"),
        }
    }
    /// The flows' buckets and the rule's counters.
    pub fn buckets(&self) -> &FlowBuckets {
        &self.buckets
    }
    /// Frames in the buffer.
    pub fn queued(&self) -> u64 {
        self.ingress.held()
    }

    /// The row of a frame of `len` bytes of flow `key`, counted as offered to the index (its
    /// sketch of the heaviest flows past the table).
    fn flow_of(&mut self, key: FlowKey, non_ip: bool, len: u32) -> u32 {
        let r = self.index.row(&key, 0, len);
        if r as usize == self.stats.len() {
            self.stats.push(FlowStats::new(key, non_ip));
        }
        r
    }

    /// Row `r`'s counters.
    #[inline]
    fn row(&mut self, r: u32) -> &mut FlowStats {
        match r {
            FlowIndex::OTHER => &mut self.other,
            r => &mut self.stats[r as usize],
        }
    }

    /// The row of the frame that just left queue `q` (in `self.frame`).
    fn row_leaving(&self, q: QueueId) -> u32 {
        match self.queue_flow[q.index()] {
            NO_FLOW => self.index.find(&Self::key_of(&self.frame).0),
            f => f,
        }
    }

    /// The bucket that shapes physical queue `q`.
    #[inline]
    fn bucket(&self, q: QueueId) -> QueueId {
        if Some(q) == self.shared {
            return QueueId(self.shared_bucket);
        }
        QueueId(self.queue_bucket[q.index()])
    }

    /// Flow `key` was given physical queue `q` at `now`: it holds a bucket while it has it.
    fn bind_bucket(&mut self, key: &FlowKey, q: QueueId, now: Instant) -> Result<(), Error> {
        let (b, _) = self.buckets.acquire(key, None, now)?;
        self.queue_bucket[q.index()] = b;
        self.bucket_queue[b as usize] = q.0;
        Ok(())
    }

    /// Physical queue `q` was released at `now`: its flow's bucket is parked until it is full.
    fn release(&mut self, q: QueueId, now: Instant) -> Result<(), Error> {
        self.queue_flow[q.index()] = NO_FLOW;
        let b = std::mem::replace(&mut self.queue_bucket[q.index()], NONE);
        if b == NONE {
            return Ok(());
        }
        self.bucket_queue[b as usize] = NONE;
        let full = self.egress.shaping().full_at(QueueId(b)).unwrap_or(now);
        self.buckets.release(b, full, now)?;
        Ok(())
    }

    fn key_of(frame: &[u8]) -> (FlowKey, bool) {
        let rec = Record { ts_ns: 0, orig_len: frame.len() as u32, link: linktype::ETHERNET, data: frame, offset: 0 };
        match decode(&rec) {
            Ok(m) => (m.flow, false),
            Err(_) => (NON_IP, true),
        }
    }

    fn drop(&mut self, f: u32, reason: Reason, len: u32) -> Arrival {
        self.row(f).counts.drop(reason as usize, len).expect("a reason of Reason::ALL, below the counters' 6");
        self.totals.drops[reason as usize] += 1;
        Arrival::Dropped(reason)
    }

    /// A frame arrived at `now` (no earlier than any time given before).
    pub fn receive(&mut self, frame: &[u8], now: Instant) -> Arrival {
        let now_ns = now.as_nanos();
        self.start.get_or_insert(now);
        let (key, non_ip) = Self::key_of(frame);
        let len = frame.len() as u32;
        let f = self.flow_of(key, non_ip, len);
        let s = self.row(f);
        if s.counts.offered_packets == 0 {
            s.first_in_ns = now_ns;
        }
        s.counts.offer(len);
        s.last_in_ns = now_ns;
        self.totals.frames_in += 1;
        self.totals.bytes_in += len as u64;
        if len > self.max_frame {
            return self.drop(f, Reason::Oversize, len);
        }
        if self.spec.bucket.conformance == Conformance::WaitForTokens && len as u64 > self.spec.bucket.cap {
            return self.drop(f, Reason::AboveCap, len);
        }
        let (admit, new_flow) = match self.ingress.enqueue_with(&key, 0, len, Some(frame)) {
            Ok(r) => r,
            Err(err) => {
                // The ingress keeps frames and has one service: not reached; reported by the
                // next transmit, the frame counted as its buffer's.
                self.refused.get_or_insert(err);
                (Admit::Dropped(IngressDrop::BufferFull), false)
            }
        };
        let q = match admit {
            Admit::Queued(q) => q,
            Admit::Dropped(IngressDrop::BufferFull) => return self.drop(f, Reason::BufferFull, len),
            Admit::Dropped(IngressDrop::NoQueue) => return self.drop(f, Reason::NoQueue, len),
            Admit::Dropped(IngressDrop::QueueFull) => return self.drop(f, Reason::QueueFull, len),
        };
        if Some(q) != self.shared {
            self.queue_flow[q.index()] = f;
            if new_flow {
                if let Err(err) = self.bind_bucket(&key, q, now) {
                    // Only a `now` that went backwards gets here; the next transmit reports it.
                    self.refused.get_or_insert(err);
                }
            }
        }
        self.row(f).activations += new_flow as u64;
        self.stamps[q.index()].push_back(now_ns);
        if let Err(err) = self.egress.arrived(q, Some(self.bucket(q))) {
            // The ingress's queue ids are the round's; reported by the next transmit.
            self.refused.get_or_insert(err);
        }
        let d = self.dqs();
        let (active, used) = (d.active_flows(), d.buffer().total_blocks() - d.buffer().free_blocks());
        self.totals.active_flows_max = self.totals.active_flows_max.max(active);
        self.totals.blocks_in_use_max = self.totals.blocks_in_use_max.max(used);
        Arrival::Queued
    }

    /// The dqs table behind the ingress element (its counters and buffer).
    fn dqs(&self) -> &Dqs {
        self.ingress.dqs().expect("live's ingress is dqs")
    }

    /// When [`Self::wake`] must next be called: the egress element's `next_wakeup()`. It
    /// changes only in [`Self::transmit`] (a queue throttled) and [`Self::wake`].
    pub fn next_wakeup(&self) -> Option<Instant> {
        self.egress.next_wakeup()
    }

    /// The shaper's timer call: queues whose reschedule time has come are enabled again and
    /// rejoin the DRR round if they hold frames. Calling it early is harmless.
    pub fn wake(&mut self, now: Instant) -> Result<(), Error> {
        let (shared, shared_bucket, bucket_queue, buf) =
            (self.shared, self.shared_bucket, &self.bucket_queue, &self.ingress);
        let queue_of = |b: QueueId| match b.0 {
            x if x == shared_bucket => shared,
            x => Some(bucket_queue[x as usize]).filter(|&q| q != NONE).map(QueueId),
        };
        let woken = self.egress.wake(now, queue_of, |q| buf.packets(q) > 0)?;
        self.totals.wakeups += (woken > 0) as u64;
        Ok(())
    }

    /// Up to `room` frames for the wire at `now`, each handed to `emit`, by DRR over the queues
    /// that hold frames and are not throttled. Returns how many were emitted.
    pub fn transmit(&mut self, now: Instant, room: usize, mut emit: impl FnMut(&[u8])) -> Result<usize, Error> {
        if let Some(e) = self.refused.take() {
            return Err(e);
        }
        let mut sent = 0;
        while sent < room {
            let overlimits = self.totals.overlimits;
            let mut queues = LiveQueues {
                ingress: &self.ingress,
                queue_bucket: &self.queue_bucket,
                shared: self.shared,
                shared_bucket: self.shared_bucket,
                queue_flow: &self.queue_flow,
                stats: &mut self.stats,
                other: &mut self.other,
                overlimits: &mut self.totals.overlimits,
            };
            let pick = self.egress.pick(now, &mut queues)?;
            if self.totals.overlimits != overlimits {
                self.totals.heap_max = self.totals.heap_max.max(self.shaper().waiting(CORE));
            }
            let Some(pick) = pick else { break };
            let q = pick.queue;
            let out = self.ingress.dequeue_with(q, Some(&mut self.frame))?.expect("the selected queue is non-empty");
            emit(&self.frame);
            sent += 1;
            let f = self.row_leaving(q);
            let now_ns = now.as_nanos();
            let delay = now_ns.saturating_sub(self.stamps[q.index()].pop_front().unwrap_or(now_ns));
            self.delay.saturating_record(delay.max(1));
            let s = self.row(f);
            if s.counts.sent_packets == 0 {
                s.first_out_ns = now_ns;
                s.first_out_len = out.len as u64;
            }
            s.counts.send(out.len, delay);
            // Send-then-pay: the frame that overdrew (its flow known now, on the shared queue too).
            s.counts.overlimits += pick.throttled as u64;
            s.last_out_ns = now_ns;
            self.totals.frames_out += 1;
            self.totals.bytes_out += out.len as u64;
            let empty = self.ingress.packets(q) == 0;
            if out.released {
                self.release(q, now)?;
            }
            self.egress.sent(pick, empty)?;
        }
        Ok(sent)
    }

    /// Stops forwarding: every frame still queued is counted as dropped ([`Reason::Stopped`]).
    pub fn stop(&mut self) {
        let queues = self.queue_flow.len() as u32;
        for q in 0..queues {
            while let Ok(Some(d)) = self.ingress.dequeue_with(QueueId(q), Some(&mut self.frame)) {
                let f = self.row_leaving(QueueId(q));
                self.stamps[q as usize].pop_front();
                if d.released {
                    self.queue_flow[q as usize] = NO_FLOW;
                }
                self.drop(f, Reason::Stopped, d.len);
            }
        }
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
        self.last_sample = (now.as_nanos(), self.totals.bytes_out);
    }

    /// Flows whose offered rate was above the shaped rate (by 1%): the ones a shaper must hold
    /// to the rate.
    pub fn backlogged(&self) -> impl Iterator<Item = &FlowStats> {
        let r = self.spec.flow_rate.bits_per_sec() as f64;
        self.stats.iter().filter(move |s| s.counts.sent_packets >= 2 && s.rate_in_bps().is_some_and(|i| i > 1.01 * r))
    }

    /// The run's results: totals, drops by reason, the shaper's counters, per-flow rates (a
    /// histogram and a table of the largest flows), the time series. `extra` are the I/O
    /// layer's own counts (ring drops, send errors), added as scalars.
    pub fn result(&self, elapsed_ns: u64, complete: bool, stop_reason: &str, extra: &[(&str, f64, &str)]) -> RunResult {
        let mut r = RunResult {
            label: "live".into(),
            complete,
            stop_reason: stop_reason.into(),
            sim_time_ns: elapsed_ns,
            ..Default::default()
        };
        let t = &self.totals;
        let c = self.shaper().counters();
        let rate = self.spec.flow_rate.bits_per_sec() as f64;
        r.scalar("flows", self.stats.len() as f64, "flows");
        r.scalar("frames_past_flow_table", self.other.counts.offered_packets as f64, "frames");
        r.scalar("overlimits", t.overlimits as f64, "frames");
        r.scalar("frames_in", t.frames_in as f64, "frames");
        r.scalar("bytes_in", t.bytes_in as f64, "B");
        r.scalar("frames_out", t.frames_out as f64, "frames");
        r.scalar("bytes_out", t.bytes_out as f64, "B");
        for reason in Reason::ALL {
            r.scalar(&format!("dropped_{}", reason.name()), t.drops[reason as usize] as f64, "frames");
        }
        r.scalar("queued_at_end", self.queued() as f64, "frames");
        for (name, v, unit) in extra {
            r.scalar(name, *v, unit);
        }
        r.scalar("flow_rate_configured", rate / 1e6, "Mbps");
        let back: Vec<f64> = self.backlogged().filter_map(FlowStats::rate_out_bps).collect();
        r.scalar("backlogged_flows", back.len() as f64, "flows");
        if !back.is_empty() {
            let mean = back.iter().sum::<f64>() / back.len() as f64;
            let min = back.iter().copied().fold(f64::INFINITY, f64::min);
            let max = back.iter().copied().fold(0.0, f64::max);
            let err = back.iter().map(|b| (b / rate - 1.0).abs()).fold(0.0, f64::max);
            r.scalar("backlogged_rate_mean", mean / 1e6, "Mbps");
            r.scalar("backlogged_rate_min", min / 1e6, "Mbps");
            r.scalar("backlogged_rate_max", max / 1e6, "Mbps");
            r.scalar("backlogged_rate_error_max", 100.0 * err, "%");
        }
        r.scalar("reschedules", c.reschedules as f64, "reschedules");
        r.scalar("reenabled", c.reenabled as f64, "queues");
        r.scalar("timer_wakeups", t.wakeups as f64, "wake-ups");
        r.scalar("heap_max", t.heap_max as f64, "queues");
        let bc = self.buckets.counters();
        r.scalar("parked_buckets_max", bc.parked_max as f64, "buckets");
        r.scalar("bucket_evictions", bc.evicted as f64, "buckets");
        r.scalar("heap_mean", if self.samples > 0 { self.heap_sum / self.samples as f64 } else { 0.0 }, "queues");
        r.scalar("active_flows_max", t.active_flows_max as f64, "flows");
        r.scalar("queues_in_use_max", self.dqs().buffer().max_queues_in_use() as f64, "queues");
        r.scalar("buffer_blocks_in_use_max", t.blocks_in_use_max as f64, "blocks");
        for (i, (name, unit)) in [
            ("output_rate", "Mbps"),
            ("heap_size", "queues"),
            ("active_flows", "flows"),
            ("buffer_blocks_in_use", "blocks"),
        ]
        .into_iter()
        .enumerate()
        {
            r.series.push(Series {
                name: name.into(),
                x_unit: "s".into(),
                unit: unit.into(),
                points: self.series[i].clone(),
            });
        }
        self.tables(&mut r);
        // Per-flow achieved rates relative to the configured rate, 1% bins.
        let rates: Vec<f64> = self.stats.iter().filter_map(FlowStats::rate_out_bps).map(|b| 100.0 * b / rate).collect();
        if !rates.is_empty() {
            let hi = rates.iter().copied().fold(0.0, f64::max).ceil().max(1.0) as usize;
            let mut bins = vec![0u64; hi + 1];
            for x in &rates {
                bins[(*x as usize).min(hi)] += 1;
            }
            r.histograms.push(Histogram {
                name: "flow_rate_out".into(),
                unit: "% of flow_rate".into(),
                bins: bins
                    .iter()
                    .enumerate()
                    .filter(|(_, &n)| n > 0)
                    .map(|(i, &n)| (i as f64, i as f64 + 1.0, n))
                    .collect(),
            });
        }
        r
    }

    /// The flow and class counters (docs/pipeline.md): flows.csv and classes.csv in the
    /// router's vocabulary, one class (`all`: every flow is shaped to `flow_rate`).
    fn tables(&self, r: &mut RunResult) {
        r.drop_reasons = Reason::ALL.iter().map(|x| x.name().to_string()).collect();
        let exact = |row: usize| CountRow::from(&self.stats[row].counts);
        let other = CountRow::from(&self.other.counts);
        r.flows = FlowRecord::table(&self.index, exact, other, Reason::ALL.len(), |_| "all".into());
        let mut all = self.other.counts;
        for s in &self.stats {
            all.add(&s.counts);
        }
        // The shared queue's held-back frames are counted in the totals only.
        all.overlimits = self.totals.overlimits;
        let q = |x: f64| if self.delay.is_empty() { 0.0 } else { self.delay.value_at_quantile(x) as f64 };
        r.classes = vec![ClassRecord {
            class: "all".into(),
            counts: CountRow::from(&all),
            delay_p50_ns: q(0.5),
            delay_p99_ns: q(0.99),
        }];
    }

    /// The report's notes: a table of the flows with the most bytes in (at most `max_rows`).
    pub fn notes(&self, max_rows: usize) -> Vec<Note> {
        let mut idx: Vec<usize> = (0..self.stats.len()).collect();
        idx.sort_by_key(|&i| (std::cmp::Reverse(self.stats[i].counts.offered_bytes), i));
        let mut t = Table::new(["flow", "frames in", "frames out", "dropped", "Mbps in", "Mbps out", "vs flow_rate"])
            .captioned(format!(
            "The {} flows with the most bytes in, of the {} counted exactly (flows.csv). Rates are measured from each flow's first \
                 to its last frame; flow_rate is {}.",
            idx.len().min(max_rows),
            idx.len(),
            self.spec.flow_rate
        ));
        let rate = self.spec.flow_rate.bits_per_sec() as f64;
        for &i in idx.iter().take(max_rows) {
            let s = &self.stats[i];
            let mbps = |v: Option<f64>| v.map_or("-".to_string(), |b| format!("{:.3}", b / 1e6));
            let rel = s.rate_out_bps().map_or("-".to_string(), |b| format!("{:+.2}%", 100.0 * (b / rate - 1.0)));
            t.row([
                s.label(),
                s.counts.offered_packets.to_string(),
                s.counts.sent_packets.to_string(),
                s.dropped().to_string(),
                mbps(s.rate_in_bps()),
                mbps(s.rate_out_bps()),
                rel,
            ]);
        }
        vec![Note::Table(t)]
    }
}

/// Live's physical queues as the egress element sees them: dqs's queues of frames, each shaped
/// by the bucket of the flow holding it (the shared queue by its own).
struct LiveQueues<'a> {
    ingress: &'a Ingress,
    queue_bucket: &'a [u32],
    shared: Option<QueueId>,
    shared_bucket: u32,
    queue_flow: &'a [u32],
    stats: &'a mut [FlowStats],
    other: &'a mut FlowStats,
    overlimits: &'a mut u64,
}

impl EgressQueues for LiveQueues<'_> {
    #[inline]
    fn head_len(&self, q: QueueId) -> u64 {
        self.ingress.head_len(q).unwrap_or(0) as u64
    }
    #[inline]
    fn bucket(&self, q: QueueId) -> Option<QueueId> {
        Some(QueueId(if Some(q) == self.shared { self.shared_bucket } else { self.queue_bucket[q.index()] }))
    }
    fn core(&self, _q: QueueId) -> CoreId {
        CORE
    }
    /// Counts the overlimit: in the totals always; on the flow's row when the frame waits
    /// (a frame sent is counted on its row once it left, where its flow is known). On the
    /// shared queue a waiting frame's flow is not known: the totals only.
    fn throttled(&mut self, q: QueueId, _until: Instant, sent: bool) {
        *self.overlimits += 1;
        match self.queue_flow[q.index()] {
            _ if sent => {}
            NO_FLOW => {}
            FlowIndex::OTHER => self.other.counts.overlimits += 1,
            f => self.stats[f as usize].counts.overlimits += 1,
        }
    }
}

#[cfg(test)]
mod tests;
