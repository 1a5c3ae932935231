//! The processing models of dqs section 5 (SPSQ, MPSQ, MPMQ) on the engine: the mapping
//! requests a dqs link run recorded ([`super::Request`]) arrive at a fixed rate and are served
//! by mapping processes fed from task queues, then by the serial queue allocator.
//!
//! Time is integer: [`TICKS_PER_CYCLE`] engine ticks (nanoseconds of the engine's clock) per
//! mapping cycle, so request `i` arrives at tick `round(i x 840 / speedup)`, exact for every
//! speedup dividing 840 (1 to 8 among them).
//!
//! Events (docs/dqs.md, "Processing models"): a request's search ends (class 0), the
//! allocator's grant ends (class 0), a request arrives (class 1, the model's source). At one
//! tick completions go first, so a process that frees up as a request arrives takes it at once
//! and the request is not counted as waiting.

use super::Request;
use crate::engine::{Engine, Model, RunLimits, StopReason};
use npqos_core::Instant;
use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Engine ticks per mapping cycle: 840 = lcm(1..8), so speedups 1 to 8 give integer arrival
/// ticks.
pub const TICKS_PER_CYCLE: u64 = 840;

/// Bytes a mapping request occupies in a task queue: the 13-byte IPv4 5-tuple, a 2-byte
/// sequence tag and a byte of sub-table id (our choice; the paper gives none).
pub const REQUEST_BYTES: f64 = 16.0;

/// The processing models of dqs section 5.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcModel {
    /// One mapping process, one task queue.
    Spsq,
    /// A mapping process per sub-table, one FIFO task queue (head-of-line blocking).
    Mpsq,
    /// A mapping process and a task queue per sub-table.
    Mpmq,
}

impl ProcModel {
    pub fn name(self) -> &'static str {
        match self {
            ProcModel::Spsq => "SPSQ",
            ProcModel::Mpsq => "MPSQ",
            ProcModel::Mpmq => "MPMQ",
        }
    }
}

/// What a processing model achieved on a request sequence.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcResult {
    /// Mapping output rate / request arrival rate (dqs Fig. 10).
    pub throughput: f64,
    /// Largest number of requests waiting in one task queue.
    pub max_queue: u64,
    /// Task-queue memory in bytes: the one queue's peak (SPSQ, MPSQ); for MPMQ, as the paper
    /// computes it, sub-tables x the largest per-queue peak.
    pub buffer_bytes: f64,
    /// MPMQ: the peak of the sum of all task queues (bytes).
    pub peak_total_bytes: f64,
}

/// Replays `reqs` into processing model `model` with `slots` sub-tables at `speedup` requests
/// per mapping cycle (request `i` arrives at cycle `i / speedup`).
///
/// Service: a search takes `max(1, compares)` cycles in its mapping process; a new flow then
/// needs one cycle of the queue allocator, holding its process meanwhile (SPSQ does the
/// allocation itself: one more cycle of its one process). Allocation is serial (dqs section 5)
/// and granted in request order (sequence-tag order). Results leave through the reordering
/// logic in request order, so the output time of request `i` is the latest completion among
/// requests `0..=i`. MPSQ dispatches the head of its single queue as soon as that sub-table's
/// process is idle (any number per cycle); a busy head blocks the requests behind it.
pub fn process(model: ProcModel, reqs: &[Request], slots: u32, speedup: f64) -> ProcResult {
    process_limited(model, reqs, slots, speedup, RunLimits::until(Instant::MAX), None).0
}

/// [`process`] within `limits` (an interrupted replay reports the requests served so far).
pub fn process_limited(
    model: ProcModel,
    reqs: &[Request],
    slots: u32,
    speedup: f64,
    limits: RunLimits,
    interrupt: Option<Arc<AtomicBool>>,
) -> (ProcResult, StopReason) {
    if reqs.is_empty() {
        return (ProcResult { throughput: 1.0, ..Default::default() }, StopReason::Drained);
    }
    let procs = if model == ProcModel::Spsq { 1 } else { slots.max(1) as usize };
    let queues = if model == ProcModel::Mpmq { procs } else { 1 };
    let mut m = Replay {
        model,
        reqs,
        per_tick: speedup / TICKS_PER_CYCLE as f64,
        next: 0,
        busy: vec![false; procs],
        queues: vec![VecDeque::new(); queues],
        waiting: 0,
        searched: vec![false; reqs.len()],
        alloc_busy: false,
        alloc_next: 0,
        out_first: None,
        out_last: 0,
        served: 0,
        max_queue: 0,
        max_total: 0,
    };
    let mut engine = Engine::new();
    if let Some(f) = interrupt {
        engine = engine.with_interrupt(f);
    }
    let reason = engine.run(&mut m, limits, &mut |_| {});
    // Rates over the run: n requests in n / speedup cycles in, between the first and the last
    // result (plus one inter-arrival) out.
    let n = m.served.max(1) as f64;
    let in_span = n / speedup;
    let out_span = (m.out_last - m.out_first.unwrap_or(0)) as f64 / TICKS_PER_CYCLE as f64 + 1.0 / speedup;
    let buffer_bytes = match model {
        ProcModel::Mpmq => slots as f64 * m.max_queue as f64 * REQUEST_BYTES,
        _ => m.max_queue as f64 * REQUEST_BYTES,
    };
    let r = ProcResult {
        throughput: (in_span / out_span).min(1.0),
        max_queue: m.max_queue,
        buffer_bytes,
        peak_total_bytes: m.max_total as f64 * REQUEST_BYTES,
    };
    (r, reason)
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    /// Request `i`'s search ended.
    SearchDone(u32),
    /// The allocator's grant to request `i` ended.
    AllocDone(u32),
}

struct Replay<'a> {
    model: ProcModel,
    reqs: &'a [Request],
    /// Requests per tick (speedup / ticks per cycle).
    per_tick: f64,
    /// Next request to arrive.
    next: usize,
    /// Per mapping process: serving a request (search, or holding for its grant).
    busy: Vec<bool>,
    /// Task queues of request indices not yet started.
    queues: Vec<VecDeque<u32>>,
    /// Requests in all task queues.
    waiting: u64,
    /// New-flow requests whose search has ended (they wait for their grant in request order).
    searched: Vec<bool>,
    alloc_busy: bool,
    /// The next request in request order that may need the allocator.
    alloc_next: usize,
    out_first: Option<u64>,
    out_last: u64,
    /// Requests whose result is out.
    served: u64,
    max_queue: u64,
    max_total: u64,
}

impl Replay<'_> {
    fn arrival_tick(&self, i: usize) -> u64 {
        (i as f64 / self.per_tick).round() as u64
    }
    fn proc_of(&self, i: u32) -> usize {
        if self.model == ProcModel::Spsq {
            0
        } else {
            self.reqs[i as usize].slot as usize % self.busy.len()
        }
    }
    fn queue_of(&self, i: u32) -> usize {
        if self.model == ProcModel::Mpmq {
            self.proc_of(i)
        } else {
            0
        }
    }

    /// Starts request `i` on its (idle) process.
    fn start(&mut self, i: u32, engine: &mut Engine<Ev>) {
        let p = self.proc_of(i);
        self.busy[p] = true;
        let r = self.reqs[i as usize];
        let mut cycles = (r.compares as u64).max(1);
        if r.new_flow && self.model == ProcModel::Spsq {
            cycles += 1; // SPSQ allocates the queue itself
        }
        engine.schedule_class(
            engine.now() + npqos_core::Duration::from_nanos(cycles * TICKS_PER_CYCLE),
            0,
            Ev::SearchDone(i),
        );
    }

    /// Starts every queued request whose process is idle, in queue order.
    fn dispatch(&mut self, q: usize, engine: &mut Engine<Ev>) {
        while let Some(&h) = self.queues[q].front() {
            if self.busy[self.proc_of(h)] {
                break; // SPSQ, MPMQ: the process is busy; MPSQ: the head blocks the rest
            }
            self.queues[q].pop_front();
            self.waiting -= 1;
            self.start(h, engine);
        }
    }

    /// Grants the allocator to the next request in request order, once its search has ended.
    fn try_alloc(&mut self, engine: &mut Engine<Ev>) {
        if self.alloc_busy {
            return;
        }
        while self.alloc_next < self.reqs.len() && !self.reqs[self.alloc_next].new_flow {
            self.alloc_next += 1;
        }
        if self.alloc_next < self.reqs.len() && self.searched[self.alloc_next] {
            self.alloc_busy = true;
            let i = self.alloc_next as u32;
            self.alloc_next += 1;
            engine.schedule_class(
                engine.now() + npqos_core::Duration::from_nanos(TICKS_PER_CYCLE),
                0,
                Ev::AllocDone(i),
            );
        }
    }

    /// Request `i` is done: its process is free, its result goes out.
    fn finish(&mut self, i: u32, engine: &mut Engine<Ev>) {
        let now = engine.now().as_nanos();
        let p = self.proc_of(i);
        self.busy[p] = false;
        if i == 0 {
            self.out_first = Some(now);
        }
        self.out_last = self.out_last.max(now);
        self.served += 1;
        let q = self.queue_of(i);
        self.dispatch(q, engine);
    }
}

impl Model for Replay<'_> {
    type Event = Ev;

    fn handle(&mut self, ev: Ev, engine: &mut Engine<Ev>) {
        match ev {
            Ev::SearchDone(i) => {
                if self.reqs[i as usize].new_flow && self.model != ProcModel::Spsq {
                    self.searched[i as usize] = true;
                    self.try_alloc(engine);
                } else {
                    self.finish(i, engine);
                }
            }
            Ev::AllocDone(i) => {
                self.alloc_busy = false;
                self.finish(i, engine);
                self.try_alloc(engine);
            }
        }
    }

    fn next_source(&mut self) -> Option<(Instant, u8)> {
        (self.next < self.reqs.len()).then(|| (Instant::from_nanos(self.arrival_tick(self.next)), 1))
    }

    fn source(&mut self, engine: &mut Engine<Ev>) {
        let i = self.next as u32;
        self.next += 1;
        let q = self.queue_of(i);
        self.queues[q].push_back(i);
        self.waiting += 1;
        self.dispatch(q, engine);
        if self.queues[q].back() == Some(&i) {
            self.max_queue = self.max_queue.max(self.queues[q].len() as u64);
            self.max_total = self.max_total.max(self.waiting);
        }
    }
}

#[cfg(test)]
mod tests;
