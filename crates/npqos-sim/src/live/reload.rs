//! A new configuration while npqos live runs (docs/live.md, "Reload"), without losing or
//! reordering a frame.
//!
//! The new configuration is a [`Forwarder`] of its own, built beside the running one, and takes
//! every frame from the change on. The one before keeps the frames it held and sends them at its
//! own rates, taking nothing new, until it holds none (its backlog: at most each queue's
//! `queue_limit` at its flow's old rate). A flow that it still holds at the change keeps its
//! order: its later frames wait here, in arrival order, and go into the new configuration once
//! the old one has let go of the flow's last frame. Flows with nothing queued at the change,
//! and new flows, are under the new configuration at once.
//!
//! Every frame is accounted: given = the forwarders' frames in + frames waiting here + frames
//! dropped here: by the new configuration's `queue_limit` applied to a flow's frames in the old
//! configuration and here together (`dropped_queue_full`, what it would drop without a
//! change), or because the frames waiting here filled its buffer (`dropped_waiting`, the one
//! loss the change itself can cause).

use super::{Ahead, Arrival, Forwarder, LiveSpec, Reason};
use crate::models::router::scenario::OutputSpec;
use crate::trace::capture::{Captured, PortCaptures};
use npqos_core::flow::FlowKey;
use npqos_core::pipeline::router::{PipelineError, Port, Tapped};
use npqos_core::Instant;
use std::collections::{HashMap, VecDeque};

/// What the changes did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReloadCounts {
    /// Configurations taken.
    pub reloads: u64,
    /// Frames given to [`Reloading::receive`].
    pub given: u64,
    /// Frames that waited for an older configuration to let go of their flow.
    pub waited: u64,
    /// Frames dropped because their flow's queue was full: its frames still in the old
    /// configuration and those waiting here together past the new `queue_limit` (what the
    /// new configuration would have dropped had it held them all; not a loss of the change).
    pub dropped_queue_full: u64,
    /// Frames dropped because the frames waiting here filled the new configuration's buffer
    /// (a loss of the change).
    pub dropped_waiting: u64,
    /// The most bytes waiting at once.
    pub waiting_bytes_max: u64,
}

impl ReloadCounts {
    /// Two forwarding threads' counts of the same reloads together (`npqos live` on several
    /// threads): each thread takes every reload, so the reloads are one thread's; the frames
    /// are summed, the most bytes waiting the sum of each thread's most.
    pub fn add(&self, o: &ReloadCounts) -> ReloadCounts {
        ReloadCounts {
            reloads: self.reloads.max(o.reloads),
            given: self.given + o.given,
            waited: self.waited + o.waited,
            dropped_queue_full: self.dropped_queue_full + o.dropped_queue_full,
            dropped_waiting: self.dropped_waiting + o.dropped_waiting,
            waiting_bytes_max: self.waiting_bytes_max + o.waiting_bytes_max,
        }
    }
}

/// The forwarder of the current configuration, the ones before it still sending what they
/// held, and the frames waiting between them.
pub struct Reloading {
    current: Forwarder,
    /// Earlier configurations still holding frames, oldest first.
    draining: Vec<Forwarder>,
    /// Earlier configurations that sent everything they held, oldest first (their results).
    done: Vec<Forwarder>,
    /// Per flow an earlier configuration still holds: its frames since the change, in order.
    waiting: HashMap<FlowKey, VecDeque<Vec<u8>>>,
    waiting_bytes: u64,
    counts: ReloadCounts,
    max_frame: u32,
    /// The way's packet captures (`[output] pcap`), across its configurations.
    capture: Option<Capture>,
}

/// Packet captures of the way in's ports over every configuration: the files, the ports each
/// forwarder taps, and the time of the first record (the captures' 0).
struct Capture {
    files: PortCaptures,
    ports: Vec<Port>,
    start: Option<u64>,
    error: Option<String>,
}

impl Reloading {
    /// Forwarding under `spec`, transmit slots of `max_frame` bytes.
    ///
    /// Errors: a configuration the pipeline refuses.
    pub fn new(spec: &LiveSpec, max_frame: u32) -> Result<Self, PipelineError> {
        Ok(Reloading {
            current: Forwarder::new(spec, max_frame)?,
            draining: Vec::new(),
            done: Vec::new(),
            waiting: HashMap::new(),
            waiting_bytes: 0,
            counts: ReloadCounts::default(),
            max_frame,
            capture: None,
        })
    }

    /// Writes the packets of the ports of `output` (`[output] pcap`) to `dir` as pcapng files
    /// (docs/live.md, "Packet captures"), every configuration's, times from the first packet.
    pub fn capture_to(&mut self, dir: &std::path::Path, output: &OutputSpec) -> std::io::Result<()> {
        if output.pcap.is_empty() {
            return Ok(());
        }
        let files = PortCaptures::create(dir, "", &output.pcap, output.pcap_limit, output.pcap_snaplen)?;
        self.current.set_taps(&output.pcap);
        self.capture = Some(Capture { files, ports: output.pcap.clone(), start: None, error: None });
        Ok(())
    }

    /// The records every configuration's taps gave, written.
    fn drain_taps(&mut self) {
        let Some(c) = self.capture.as_mut() else { return };
        for f in self.draining.iter_mut().chain(std::iter::once(&mut self.current)) {
            let Some(t) = f.tapped() else { continue };
            if let Some(first) = t.first() {
                let start = *c.start.get_or_insert(first.t);
                for r in t.iter_mut() {
                    r.t = r.t.saturating_sub(start);
                }
            }
            if let Err(e) = c.files.write(t) {
                c.error.get_or_insert(e.to_string());
                t.clear();
            }
        }
    }

    /// A frame of flow `key` taken or dropped here (waiting for an older configuration) at `now`.
    fn tap_here(&mut self, now: Instant, key: FlowKey, len: u32, reason: Option<&'static str>) {
        let Some(c) = self.capture.as_mut() else { return };
        let t = now.as_nanos().saturating_sub(*c.start.get_or_insert(now.as_nanos()));
        let mut recs = vec![Tapped { port: Port::Ingress, t, len, key, reason: None }];
        if reason.is_some() {
            recs.push(Tapped { port: Port::Drops, t, len, key, reason });
        }
        if let Err(e) = c.files.write(&mut recs) {
            c.error.get_or_insert(e.to_string());
        }
    }

    /// Closes the captures: what each file holds. Errors: writing one failed during the run or
    /// now.
    pub fn finish_capture(&mut self) -> Result<Vec<Captured>, String> {
        self.drain_taps();
        let Some(c) = self.capture.take() else { return Ok(Vec::new()) };
        if let Some(e) = c.error {
            return Err(e);
        }
        c.files.finish().map_err(|e| e.to_string())
    }

    /// Takes `spec` from now on; the configuration before sends what it holds.
    ///
    /// Errors: a configuration the pipeline refuses (the running one stays).
    pub fn reload(&mut self, spec: &LiveSpec) -> Result<(), PipelineError> {
        let next = self.build(spec)?;
        self.take(next);
        Ok(())
    }

    /// The forwarder of `spec` for [`Self::take`] (built first, so that two ways can change
    /// together or not at all).
    ///
    /// Errors: a configuration the pipeline refuses.
    pub fn build(&self, spec: &LiveSpec) -> Result<Forwarder, PipelineError> {
        Forwarder::new(spec, self.max_frame)
    }

    /// Takes the forwarder `next` (of [`Self::build`]) from now on; the one before sends what
    /// it holds.
    pub fn take(&mut self, mut next: Forwarder) {
        self.drain_taps();
        if let Some(c) = &self.capture {
            next.set_taps(&c.ports);
        }
        let mut old = std::mem::replace(&mut self.current, next);
        if old.queued() > 0 {
            self.draining.push(old);
        } else {
            old.retire();
            self.done.push(old);
        }
        self.counts.reloads += 1;
    }

    /// The current configuration's [`Forwarder::shared_bucket`] of `frame`.
    pub fn shared_bucket(&self, frame: &[u8]) -> Option<u64> {
        self.current.shared_bucket(frame)
    }
    /// The current configuration's [`Forwarder::look_ahead`] at the next two frames to come.
    #[inline]
    pub fn look_ahead(&self, next: &[u8], after: &[u8], known: Option<Ahead>) -> [Option<Ahead>; 2] {
        self.current.look_ahead(next, after, known)
    }
    /// The current configuration's times from `origin` ([`Forwarder::set_origin`]).
    pub fn set_origin(&mut self, origin: Instant) {
        self.current.set_origin(origin);
    }

    /// The transmit slots' size the forwarders are built for.
    pub fn max_frame(&self) -> u32 {
        self.max_frame
    }
    /// The current configuration's forwarder.
    pub fn current(&self) -> &Forwarder {
        &self.current
    }
    /// Every configuration's forwarder, oldest first (the current one last).
    pub fn all(&self) -> impl Iterator<Item = &Forwarder> {
        self.done.iter().chain(&self.draining).chain(std::iter::once(&self.current))
    }
    pub fn counts(&self) -> ReloadCounts {
        self.counts
    }
    /// Frames waiting for an older configuration to let go of their flow.
    pub fn waiting(&self) -> u64 {
        self.waiting.values().map(|q| q.len() as u64).sum()
    }
    /// Frames in every configuration's queues and waiting here.
    pub fn queued(&self) -> u64 {
        self.draining.iter().map(Forwarder::queued).sum::<u64>() + self.current.queued() + self.waiting()
    }
    /// An older configuration still sends what it held.
    pub fn switching(&self) -> bool {
        !self.draining.is_empty()
    }

    /// A frame arrived at `now`: into the current configuration, or, if an older one still
    /// holds its flow, waiting here behind that flow's frames there.
    pub fn receive(&mut self, frame: &[u8], now: Instant) -> Arrival {
        self.receive_ahead(frame, now, None)
    }

    /// [`Self::receive`] with what [`Self::look_ahead`] read of the frame.
    pub fn receive_ahead(&mut self, frame: &[u8], now: Instant, ahead: Option<Ahead>) -> Arrival {
        self.counts.given += 1;
        if !self.draining.is_empty() {
            let (key, ..) = Forwarder::key_of(frame);
            let held: Option<u64> = self.draining.iter().filter_map(|d| d.held_bytes(&key)).reduce(|a, b| a + b);
            if held.is_some() || self.waiting.contains_key(&key) {
                let q = self.waiting.entry(key).or_default();
                let flow_bytes: u64 = held.unwrap_or(0) + q.iter().map(|f| f.len() as u64).sum::<u64>();
                let spec = self.current.spec();
                let buffer = spec.table.blocks as u64 * spec.table.block_size as u64;
                let len = frame.len() as u64;
                // The flow's frames in the old configuration and here are its queue: the new
                // configuration's limit applies to them together, as it would without a change.
                if spec.table.queue_limit.is_some_and(|l| flow_bytes + len > l) {
                    self.counts.dropped_queue_full += 1;
                    self.tap_here(now, key, len as u32, Some(Reason::QueueFull.name()));
                    return Arrival::Dropped(Reason::QueueFull);
                }
                if self.waiting_bytes + len > buffer {
                    self.counts.dropped_waiting += 1;
                    self.tap_here(now, key, len as u32, Some(Reason::BufferFull.name()));
                    return Arrival::Dropped(Reason::BufferFull);
                }
                q.push_back(frame.to_vec());
                self.waiting_bytes += len;
                self.counts.waited += 1;
                self.counts.waiting_bytes_max = self.counts.waiting_bytes_max.max(self.waiting_bytes);
                return Arrival::Queued;
            }
        }
        let got = self.current.receive_ahead(frame, now, ahead);
        self.drain_taps();
        got
    }

    /// The mechanism's refusal that stopped a pipeline, if one did.
    pub fn error(&self) -> Option<&PipelineError> {
        self.draining.iter().chain(std::iter::once(&self.current)).find_map(Forwarder::error)
    }
    /// The current configuration's time-series point at `now`.
    pub fn sample(&mut self, now: Instant) {
        self.current.sample(now);
    }
    /// Every configuration's forwarder, oldest first, the current one last (for the results).
    pub fn into_all(self) -> Vec<Forwarder> {
        let mut v = self.done;
        v.extend(self.draining);
        v.push(self.current);
        v
    }

    /// The earliest wake-up any configuration asks for.
    pub fn next_wakeup(&self) -> Option<Instant> {
        self.draining.iter().chain(std::iter::once(&self.current)).filter_map(Forwarder::next_wakeup).min()
    }

    /// Wakes every configuration's shaper whose time has come.
    ///
    /// Errors: a pipeline stopped on a mechanism's refusal.
    pub fn wake(&mut self, now: Instant) -> Result<(), PipelineError> {
        for d in &mut self.draining {
            d.wake(now)?;
        }
        let r = self.current.wake(now);
        self.drain_taps();
        r
    }

    /// Up to `room` frames for the wire: the older configurations' first (what they held),
    /// then the current one's; then flows the older ones let go of move their waiting frames
    /// into the current configuration, and a configuration that holds nothing more retires.
    ///
    /// Errors: a pipeline stopped on a mechanism's refusal.
    pub fn transmit(&mut self, now: Instant, room: usize, mut emit: impl FnMut(&[u8])) -> Result<usize, PipelineError> {
        let mut sent = 0;
        for d in &mut self.draining {
            sent += d.transmit(now, room - sent, &mut emit)?;
        }
        sent += self.current.transmit(now, room - sent, &mut emit)?;
        // Frames that go into the current configuration now may leave now too: the caller
        // need not come back for them (it would sleep until its next event).
        if !self.draining.is_empty() && self.release(now) {
            sent += self.current.transmit(now, room - sent, &mut emit)?;
        }
        self.drain_taps();
        Ok(sent)
    }

    /// Waiting flows no older configuration holds go into the current one, in order; older
    /// configurations that hold nothing retire. Whether any frame moved.
    fn release(&mut self, now: Instant) -> bool {
        let draining = &self.draining;
        let free: Vec<FlowKey> =
            self.waiting.keys().filter(|k| !draining.iter().any(|d| d.holds(k))).copied().collect();
        let moved = !free.is_empty();
        for k in free {
            for f in self.waiting.remove(&k).unwrap_or_default() {
                self.waiting_bytes -= f.len() as u64;
                self.current.receive(&f, now);
            }
        }
        let (empty, busy): (Vec<Forwarder>, Vec<Forwarder>) =
            std::mem::take(&mut self.draining).into_iter().partition(|d| d.queued() == 0);
        self.done.extend(empty.into_iter().map(|mut d| {
            d.retire();
            d
        }));
        self.draining = busy;
        moved
    }

    /// Every frame given is in a forwarder, waiting here, or dropped here.
    pub fn check(&self) -> Result<(), String> {
        let inside: u64 = self.all().map(|f| f.totals().frames_in).sum();
        let (w, d) = (self.waiting(), self.counts.dropped_waiting + self.counts.dropped_queue_full);
        if self.counts.given != inside + w + d {
            return Err(format!(
                "given {} != in the forwarders {inside} + waiting {w} + dropped here {d}",
                self.counts.given
            ));
        }
        for f in self.all() {
            f.check().map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}
