//! The multithreaded timing simulation of qcache section 4.1: threads performing enqueues and
//! dequeues through one of the four queuing subsystems, with contention at the bus, the memory,
//! the queues and (qc) the queuing engines.
//!
//! Time is counted in ticks of 1/16 ns, so every Table 1 time is a whole number of ticks.
//!
//! # Resources
//! * **Threads** run closed-loop: a thread takes the next operation of the stream as soon as its
//!   previous one finished (no other work), so throughput is the saturation throughput.
//! * **Processors** (optional): `threads_per_processor` threads share one processor; their
//!   instruction phases run one at a time, first come first served (zero-cost thread switch:
//!   a thread stalled on memory leaves the pipeline to another). `0` = every thread has its own
//!   issue slot.
//! * **Bus**: one shared bus, 400 MHz, 8 words per cycle; a message of `w` words holds it
//!   `w / 8` of a cycle; arbitration is first come first served (ties in event order). A message
//!   arrives half the round-trip interconnect delay (20 ns) after it is granted. Requests are
//!   1 word (address, queue id) or 2 (plus data / packet pointer); responses and write
//!   acknowledgements 1 word.
//! * **Memory**: one port at the memory clock (200 MHz): one reference starts per cycle
//!   (5 ns), first come first served; it completes 40 ns (Table 1's round trip) after it starts.
//!   Dirty write-backs take a slot right after the load that caused them (a write buffer: off the
//!   critical path, on the memory's bandwidth).
//! * **Queues**: nc, dc and sqc get the paper's zero-cost synchronization: an operation on a
//!   queue begins (takes the lock) when the previous operation on it has finished; waiting
//!   threads are served in the order they took their operations. qc needs no lock: the queuing
//!   cache serves each queue's requests in arrival order (below).
//!
//! # Subsystems (stages run in sequence; `‖` = parallel branches)
//! * nc enqueue: instr; read descriptor; link write ‖ descriptor write. nc dequeue: instr; read
//!   descriptor; read link; write descriptor. Every reference is a bus request, a memory
//!   reference and a bus response.
//! * dc: as nc, but descriptor references go to a 2-way set-associative, LRU, write-back,
//!   write-allocate data cache of 128 one-word lines at the memory controller (2.5 ns). The head
//!   and the tail are separate words (Table 2 loads the tail to enqueue, the head to dequeue). A
//!   read miss holds an MSHR until the memory returns; a write miss allocates without a fetch
//!   (one-word lines). Lines are allocated at lookup.
//! * sqc: the thread looks the queue up in the CAM when it takes the lock (decides hit or miss);
//!   a miss sends an evict-and-load command (CAM, load from memory; the LRU victim not in use
//!   is written back) before the enqueue / dequeue command (CAM, link reference in memory,
//!   descriptor update in the cache array). The entry is in use until the operation finishes.
//! * qc: one command. At the controller, a request for a queue already in service waits for
//!   that queue's engine, which serves the queue's requests in arrival order; a request for a
//!   free queue takes a free engine (first come first served). An engine: CAM lookup (5 ns); on
//!   a miss an eviction and allocation (at most one per 1 ns cycle) and the descriptor load; the
//!   link reference in memory; the descriptor update in the cache (2.5 ns); then the response.
//!
//! # Mechanisms and engine
//! The operation plans are [`npqos_core::queues::timing::program`]; the descriptor caches and the
//! queuing cache's controller are [`npqos_core::queues::cache`] (the code a data plane would
//! link). The simulation runs on [`crate::engine::Engine`] with time in ticks as the engine's
//! nanoseconds; an event resumes one branch of one thread. All events are class 0: at one tick
//! they run in the order they were scheduled, which is the order the resources were granted.
//!
//! # Checks
//! Each operation is applied to a [`QueueMemory`] at its serialization point (lock taken; qc:
//! engine start). Every dequeue must find a packet, and each queue's packets must leave in the
//! order they entered: a violation ends the run with [`SimError::Order`].

use super::workload::OpStream;
use crate::engine::{Engine, Model, RunLimits, StopReason};
use hdrhistogram::Histogram;
use npqos_core::queues::cache::{DataCache, EntryCache, QueuingCache};
use npqos_core::queues::memory::QueueMemory;
use npqos_core::queues::timing::{program, Action, Op, Program, Subsystem};
use npqos_core::{BufferId, EntryId, Instant, QueueId};
use rand::Rng;
use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

mod params;
pub use params::{RefCounts, SimConfig, SimError, SimStats};

/// Ticks per nanosecond.
pub const TICKS_PER_NS: f64 = 16.0;

fn ticks(ns: f64) -> u64 {
    (ns * TICKS_PER_NS).round() as u64
}

#[derive(Clone, Copy, Default)]
struct Branch {
    /// The branch's actions (of the current stage), and the next one to run.
    steps: &'static [Action],
    pc: u8,
    phase: u8,
}

#[derive(Clone, Copy)]
struct Thread {
    op: Op,
    queue: u32,
    /// Sequence number of the operation in the stream.
    seq: u64,
    picked: u64,
    /// When it started waiting for its queue (qc: arrival at the controller).
    arrived: u64,
    began: u64,
    program: Program,
    stage: u8,
    live: u8,
    br: [Branch; 2],
    hit: bool,
    victim_dirty: bool,
    /// sqc / qc entry in use.
    entry: EntryId,
}

struct Sim<'a, R: Rng> {
    cfg: SimConfig,
    stream: &'a mut OpStream<R>,
    progress: &'a mut dyn FnMut(f64),
    total: u64,
    next_report: u64,
    now: u64,
    threads: Vec<Thread>,
    // Durations, ticks.
    t_instr: u64,
    t_oneway: u64,
    t_word: u64,
    t_mem: u64,
    t_mem_cycle: u64,
    t_cache: u64,
    t_cam: u64,
    t_alloc: u64,
    // Resources.
    proc_free: Vec<u64>,
    bus_free: u64,
    mem_free: u64,
    locked: Vec<bool>,
    waiting: Vec<VecDeque<u16>>,
    sqc: Option<EntryCache>,
    dc: Option<DataCache>,
    mshrs: u32,
    qc: Option<QueuingCache<u16>>,
    /// qc: the next free eviction-and-allocation slot.
    alloc_free: u64,
    // Functional model and checks.
    qm: QueueMemory,
    free_buffers: Vec<BufferId>,
    packet_of: Vec<u64>,
    last_out: Vec<u64>,
    next_packet: u64,
    ops_taken: u64,
    ops_applied: u64,
    // Counters (cumulative) and measurement.
    completed: u64,
    mem_refs: u64,
    writebacks: u64,
    bus_msgs: u64,
    bus_words: u64,
    bus_busy: u64,
    hits: u64,
    lat_sum: [u64; 2],
    lat_n: [u64; 2],
    wait_sum: u64,
    hist: Histogram<u64>,
    peak_mshrs: u32,
    mark: Option<Mark>,
    error: Option<SimError>,
}

/// Counters at the end of the warm-up.
#[derive(Clone, Copy)]
struct Mark {
    time: u64,
    mem_refs: u64,
    writebacks: u64,
    bus_msgs: u64,
    bus_words: u64,
    bus_busy: u64,
}

/// Runs `cfg` on `stream` to the end; `progress` gets the fraction done now and then.
pub fn run<R: Rng>(
    cfg: &SimConfig,
    stream: &mut OpStream<R>,
    progress: &mut dyn FnMut(f64),
) -> Result<SimStats, SimError> {
    run_limited(cfg, stream, u64::MAX, None, progress).map(|(st, _)| st)
}

/// Runs `cfg` on `stream` for at most `max_events` events; raising `interrupt` stops it early.
/// A run stopped early returns what it measured so far (over the operations completed after
/// the warm-up, or over all of them if the warm-up did not end) and why it stopped.
pub fn run_limited<R: Rng>(
    cfg: &SimConfig,
    stream: &mut OpStream<R>,
    max_events: u64,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(f64),
) -> Result<(SimStats, StopReason), SimError> {
    let mut sim = Sim::new(*cfg, stream, progress)?;
    let mut engine = Engine::new();
    if let Some(flag) = interrupt {
        engine = engine.with_interrupt(flag);
    }
    for t in 0..sim.threads.len() {
        sim.pick(&mut engine, t);
    }
    let stop = engine.run(&mut sim, RunLimits { until: Instant::MAX, max_events }, &mut |_| {});
    if let Some(e) = sim.error.take() {
        return Err(e);
    }
    let stats = SimStats { events: engine.executed(), ..sim.stats() };
    match stop {
        StopReason::Drained if sim.completed < sim.total => Err(SimError::Stalled(sim.completed)),
        StopReason::Halted | StopReason::Drained => Ok((stats, StopReason::Drained)),
        other => Ok((stats, other)),
    }
}

impl<R: Rng> Model for Sim<'_, R> {
    type Event = u32;

    fn handle(&mut self, ev: u32, engine: &mut Engine<u32>) {
        self.now = engine.now().as_nanos();
        self.run(engine, (ev >> 1) as usize, (ev & 1) as usize);
        if self.error.is_some() || self.completed >= self.total {
            engine.halt();
        }
        if self.completed >= self.next_report {
            (self.progress)(self.completed as f64 / self.total as f64);
            self.next_report += (self.total / 100).max(1);
        }
    }
}

impl<'a, R: Rng> Sim<'a, R> {
    fn new(cfg: SimConfig, stream: &'a mut OpStream<R>, progress: &'a mut dyn FnMut(f64)) -> Result<Self, SimError> {
        let bad = |m: &str| Err(SimError::Config(m.into()));
        if cfg.threads == 0 || cfg.threads > u16::MAX as u32 {
            return bad("threads must be 1..=65535");
        }
        if cfg.ops == 0 {
            return bad("ops must be at least 1");
        }
        if cfg.memory_mhz.is_nan() || cfg.memory_mhz <= 0.0 || cfg.alloc_cycle_ns.is_nan() || cfg.alloc_cycle_ns <= 0.0
        {
            return bad("memory_mhz and alloc_cycle_ns must be positive");
        }
        match cfg.subsystem {
            Subsystem::Sqc if cfg.threads > cfg.entries => {
                return bad("sqc: threads must not exceed the cache entries (each in-flight operation holds one)")
            }
            Subsystem::Qc if cfg.engines == 0 || cfg.engines > cfg.entries => {
                return bad("qc: engines must be 1..=entries (each engine in service holds one)")
            }
            _ => {}
        }
        let nq = stream.queues();
        let config = |what: &str, e: npqos_core::Error| SimError::Config(format!("{what}: {e}"));
        let dc = match cfg.subsystem {
            Subsystem::Dc => Some(DataCache::new(cfg.dc_lines, cfg.dc_ways, nq).map_err(|e| config("data cache", e))?),
            _ => None,
        };
        let sqc = match cfg.subsystem {
            Subsystem::Sqc => Some(EntryCache::new(cfg.entries, nq).map_err(|e| config("sqc", e))?),
            _ => None,
        };
        let qc = match cfg.subsystem {
            Subsystem::Qc => Some(QueuingCache::new(cfg.engines, cfg.entries, nq).map_err(|e| config("qc", e))?),
            _ => None,
        };
        let t = cfg.timing;
        let instr = match cfg.subsystem {
            Subsystem::Nc | Subsystem::Dc => t.instr_ns[0],
            Subsystem::Sqc => t.instr_ns[1],
            Subsystem::Qc => t.instr_ns[2],
        };
        let prefill = stream.prefill().len();
        let buffers = prefill + cfg.threads as usize + 2;
        let mut qm = QueueMemory::new(nq, buffers as u32).map_err(|e| config("queue memory", e))?;
        let nq = nq as usize;
        let mut packet_of = vec![0u64; buffers];
        let mut free_buffers: Vec<BufferId> = (0..buffers as u32).rev().map(BufferId).collect();
        let mut next_packet = 0u64;
        for &q in stream.prefill() {
            let b = free_buffers.pop().expect("buffers for the backlog");
            qm.enqueue(QueueId(q), b).map_err(|e| config("backlog", e))?;
            next_packet += 1;
            packet_of[b.index()] = next_packet;
        }
        let nthreads = cfg.threads as usize;
        let procs =
            if cfg.threads_per_processor == 0 { 0 } else { nthreads.div_ceil(cfg.threads_per_processor as usize) };
        Ok(Sim {
            cfg,
            stream,
            progress,
            total: cfg.warmup_ops + cfg.ops,
            next_report: ((cfg.warmup_ops + cfg.ops) / 100).max(1),
            now: 0,
            threads: vec![
                Thread {
                    op: Op::Enqueue,
                    queue: 0,
                    seq: 0,
                    picked: 0,
                    arrived: 0,
                    began: 0,
                    program: program(Subsystem::Nc, Op::Enqueue, false),
                    stage: 0,
                    live: 0,
                    br: [Branch::default(); 2],
                    hit: false,
                    victim_dirty: false,
                    entry: EntryId(0),
                };
                nthreads
            ],
            t_instr: ticks(instr),
            t_oneway: ticks(t.interconnect_ns / 2.0),
            t_word: ticks(1000.0 / t.bus_mhz / t.bus_words as f64),
            t_mem: ticks(t.memory_ns),
            t_mem_cycle: ticks(1000.0 / cfg.memory_mhz),
            t_cache: ticks(t.cache_ns),
            t_cam: ticks(t.cam_ns),
            t_alloc: ticks(cfg.alloc_cycle_ns),
            proc_free: vec![0; procs],
            bus_free: 0,
            mem_free: 0,
            locked: vec![false; nq],
            waiting: (0..nq).map(|_| VecDeque::new()).collect(),
            sqc,
            dc,
            mshrs: 0,
            qc,
            alloc_free: 0,
            qm,
            free_buffers,
            packet_of,
            last_out: vec![0; nq],
            next_packet,
            ops_taken: 0,
            ops_applied: 0,
            completed: 0,
            mem_refs: 0,
            writebacks: 0,
            bus_msgs: 0,
            bus_words: 0,
            bus_busy: 0,
            hits: 0,
            lat_sum: [0; 2],
            lat_n: [0; 2],
            wait_sum: 0,
            hist: Histogram::new_with_bounds(1, 1 << 40, 3).expect("valid bounds"),
            peak_mshrs: 0,
            mark: if cfg.warmup_ops == 0 { Some(Mark::zero()) } else { None },
            error: None,
        })
    }

    fn schedule(&self, eng: &mut Engine<u32>, at: u64, t: usize, b: usize) {
        eng.schedule(Instant::from_nanos(at), (t as u32) << 1 | b as u32);
    }

    fn measuring(&self) -> bool {
        self.mark.is_some()
    }

    /// Thread `t` takes the next operation.
    fn pick(&mut self, eng: &mut Engine<u32>, t: usize) {
        let (op, q) = self.stream.next().expect("the stream is endless");
        self.ops_taken += 1;
        let th = &mut self.threads[t];
        th.op = op;
        th.queue = q;
        th.seq = self.ops_taken;
        th.picked = self.now;
        th.arrived = self.now;
        if self.cfg.subsystem == Subsystem::Qc {
            self.begin(eng, t);
            return;
        }
        let qi = q as usize;
        if self.locked[qi] {
            self.waiting[qi].push_back(t as u16);
        } else {
            self.locked[qi] = true;
            self.begin(eng, t);
        }
    }

    /// Thread `t` starts its operation (it holds its queue, or qc).
    fn begin(&mut self, eng: &mut Engine<u32>, t: usize) {
        let now = self.now;
        let sub = self.cfg.subsystem;
        let (op, q) = (self.threads[t].op, self.threads[t].queue);
        self.threads[t].began = now;
        if sub != Subsystem::Qc {
            self.apply(t);
        }
        let hit = match self.sqc.as_mut().map(|c| c.acquire(QueueId(q))) {
            Some(Ok(l)) => {
                let th = &mut self.threads[t];
                th.entry = l.entry;
                th.hit = l.hit;
                th.victim_dirty = l.evicted.is_some();
                l.hit
            }
            Some(Err(error)) => {
                self.refused(t, error);
                return;
            }
            None => false,
        };
        let program = program(sub, op, hit);
        let th = &mut self.threads[t];
        th.program = program;
        th.stage = 0;
        if sub != Subsystem::Sqc {
            th.hit = false;
        }
        self.start_stage(eng, t);
    }

    fn refused(&mut self, t: usize, error: npqos_core::Error) {
        if self.error.is_none() {
            self.error = Some(SimError::Mechanism { op: self.threads[t].seq, error });
        }
    }

    /// Applies thread `t`'s operation to the queue memory and checks the order.
    fn apply(&mut self, t: usize) {
        let th = self.threads[t];
        let q = th.queue;
        self.ops_applied += 1;
        match th.op {
            Op::Enqueue => {
                let b = self.free_buffers.pop().expect("buffers: backlog + threads + 2");
                if let Err(e) = self.qm.enqueue(QueueId(q), b) {
                    self.fail(q, th.seq, e.to_string());
                    return;
                }
                self.next_packet += 1;
                self.packet_of[b.index()] = self.next_packet;
            }
            Op::Dequeue => match self.qm.dequeue(QueueId(q)) {
                Ok(Some(b)) => {
                    let p = self.packet_of[b.index()];
                    if p <= self.last_out[q as usize] {
                        self.fail(q, th.seq, format!("packet {p} left after packet {}", self.last_out[q as usize]));
                    }
                    self.last_out[q as usize] = p;
                    self.free_buffers.push(b);
                }
                Ok(None) => self.fail(q, th.seq, "dequeue found the queue empty".into()),
                Err(e) => self.fail(q, th.seq, e.to_string()),
            },
        }
    }

    fn fail(&mut self, queue: u32, op: u64, what: String) {
        if self.error.is_none() {
            self.error = Some(SimError::Order { queue, op, what });
        }
    }

    fn start_stage(&mut self, eng: &mut Engine<u32>, t: usize) {
        let th = &mut self.threads[t];
        let stage = th.program[th.stage as usize];
        let branches = stage.len();
        th.live = branches as u8;
        th.br = [Branch::default(); 2];
        for (br, steps) in th.br.iter_mut().zip(stage) {
            br.steps = steps;
        }
        for b in 0..branches {
            self.run(eng, t, b);
        }
    }

    /// Runs branch `b` of thread `t` until it waits or ends.
    fn run(&mut self, eng: &mut Engine<u32>, t: usize, b: usize) {
        loop {
            let br = &self.threads[t].br[b];
            let Some(&action) = br.steps.get(br.pc as usize) else {
                self.branch_done(eng, t);
                return;
            };
            if !self.step(eng, t, b, action) {
                return;
            }
            let br = &mut self.threads[t].br[b];
            br.pc += 1;
            br.phase = 0;
        }
    }

    fn branch_done(&mut self, eng: &mut Engine<u32>, t: usize) {
        let th = &mut self.threads[t];
        th.live -= 1;
        if th.live > 0 {
            return;
        }
        th.stage += 1;
        if (th.stage as usize) < th.program.len() {
            self.start_stage(eng, t);
        } else {
            self.finish(eng, t);
        }
    }

    /// Reserves the memory port now; returns when the reference completes.
    fn memory(&mut self) -> u64 {
        let start = self.now.max(self.mem_free);
        self.mem_free = start + self.t_mem_cycle;
        self.mem_refs += 1;
        start + self.t_mem
    }

    fn writeback(&mut self) {
        self.memory();
        self.writebacks += 1;
    }

    /// Waits: schedules branch `b` of `t` at `at` with the next phase.
    #[inline(always)]
    fn wait(&mut self, eng: &mut Engine<u32>, t: usize, b: usize, at: u64) -> bool {
        self.threads[t].br[b].phase += 1;
        self.schedule(eng, at, t, b);
        false
    }

    /// Performs (the current phase of) one step; true when the step is done.
    fn step(&mut self, eng: &mut Engine<u32>, t: usize, b: usize, s: Action) -> bool {
        use Action::*;
        let phase = self.threads[t].br[b].phase;
        let now = self.now;
        match (s, phase) {
            (Instr, 0) => {
                let at = if self.proc_free.is_empty() {
                    now + self.t_instr
                } else {
                    let p = t / self.cfg.threads_per_processor as usize;
                    let start = now.max(self.proc_free[p]);
                    self.proc_free[p] = start + self.t_instr;
                    start + self.t_instr
                };
                self.wait(eng, t, b, at)
            }
            (Send(w), 0) => {
                let start = now.max(self.bus_free);
                let busy = w as u64 * self.t_word;
                self.bus_free = start + busy;
                self.bus_busy += busy;
                self.bus_msgs += 1;
                self.bus_words += w as u64;
                self.wait(eng, t, b, start + self.t_oneway)
            }
            (Memory, 0) => {
                let at = self.memory();
                self.wait(eng, t, b, at)
            }
            (Load, 0) => {
                let at = self.memory();
                if self.threads[t].victim_dirty {
                    self.writeback();
                }
                self.wait(eng, t, b, at)
            }
            (Cam, 0) => self.wait(eng, t, b, now + self.t_cam),
            (Cache, 0) => self.wait(eng, t, b, now + self.t_cache),
            (DcRead | DcWrite, 0) => {
                let th = self.threads[t];
                let dc = self.dc.as_mut().expect("dc has a data cache");
                let a = match dc.access(QueueId(th.queue), th.op, s == DcWrite) {
                    Ok(a) => a,
                    Err(error) => {
                        self.refused(t, error);
                        return false;
                    }
                };
                let th = &mut self.threads[t];
                th.victim_dirty = a.writeback;
                if s == DcRead {
                    th.hit = a.hit;
                    if !a.hit {
                        self.mshrs += 1;
                        self.peak_mshrs = self.peak_mshrs.max(self.mshrs);
                    }
                }
                self.wait(eng, t, b, now + self.t_cache)
            }
            (DcRead, 1) => {
                if self.threads[t].hit {
                    return true;
                }
                let at = self.memory();
                if self.threads[t].victim_dirty {
                    self.writeback();
                }
                self.wait(eng, t, b, at)
            }
            (DcRead, 2) => {
                self.mshrs -= 1;
                true
            }
            (DcWrite, 1) => {
                if self.threads[t].victim_dirty {
                    self.writeback();
                }
                true
            }
            (Engine, _) => self.engine(eng, t, b, phase),
            (_, _) => true,
        }
    }

    /// The queuing cache, for thread `t`'s request (phases: 0 arrival, 1 start, 2 after the CAM,
    /// 3 allocation slot, 4 after the load, 5 after the link reference, 6 after the cache).
    fn engine(&mut self, eng: &mut Engine<u32>, t: usize, b: usize, phase: u8) -> bool {
        let now = self.now;
        let q = QueueId(self.threads[t].queue);
        let qc = self.qc.as_mut().expect("qc has a queuing cache");
        match phase {
            0 => {
                self.threads[t].br[b].phase = 1;
                self.threads[t].arrived = now;
                match qc.arrive(q, t as u16) {
                    Ok(Some(_)) => self.engine(eng, t, b, 1),
                    Ok(None) => false,
                    Err(error) => {
                        self.refused(t, error);
                        false
                    }
                }
            }
            1 => {
                let l = match qc.start(q) {
                    Ok(l) => l,
                    Err(error) => {
                        self.refused(t, error);
                        return false;
                    }
                };
                self.threads[t].began = now;
                self.apply(t);
                let th = &mut self.threads[t];
                th.entry = l.entry;
                th.hit = l.hit;
                th.victim_dirty = l.evicted.is_some();
                self.wait(eng, t, b, now + self.t_cam)
            }
            2 => {
                if self.threads[t].hit {
                    self.threads[t].br[b].phase = 4;
                    return self.engine(eng, t, b, 4);
                }
                let slot = now.max(self.alloc_free);
                self.alloc_free = slot + self.t_alloc;
                self.wait(eng, t, b, slot)
            }
            3 => {
                let at = self.memory();
                if self.threads[t].victim_dirty {
                    self.writeback();
                }
                self.wait(eng, t, b, at)
            }
            4 => {
                let at = self.memory();
                self.wait(eng, t, b, at)
            }
            5 => self.wait(eng, t, b, now + self.t_cache),
            _ => {
                // The engine serves the queue's next request, or the oldest one waiting.
                match qc.finish(q, self.threads[t].entry) {
                    Ok(Some((_, n))) => self.run(eng, n as usize, 0),
                    Ok(None) => {}
                    Err(error) => self.refused(t, error),
                }
                true
            }
        }
    }

    fn finish(&mut self, eng: &mut Engine<u32>, t: usize) {
        let now = self.now;
        let th = self.threads[t];
        self.completed += 1;
        if self.measuring() {
            let k = (th.op == Op::Dequeue) as usize;
            let lat = now - th.picked;
            self.lat_sum[k] += lat;
            self.lat_n[k] += 1;
            self.wait_sum += th.began - th.arrived;
            self.hist.saturating_record(lat.max(1));
            self.hits += u64::from(th.hit);
        } else if self.completed == self.cfg.warmup_ops {
            self.mark = Some(Mark {
                time: now,
                mem_refs: self.mem_refs,
                writebacks: self.writebacks,
                bus_msgs: self.bus_msgs,
                bus_words: self.bus_words,
                bus_busy: self.bus_busy,
            });
        }
        if self.cfg.subsystem != Subsystem::Qc {
            if let Some(Err(error)) = self.sqc.as_mut().map(|c| c.release(th.entry)) {
                self.refused(t, error);
            }
            let qi = th.queue as usize;
            if let Some(n) = self.waiting[qi].pop_front() {
                self.begin(eng, n as usize);
            } else {
                self.locked[qi] = false;
            }
        }
        if self.completed < self.cfg.warmup_ops + self.cfg.ops {
            self.pick(eng, t);
        }
    }

    fn stats(&self) -> SimStats {
        let m = self.mark.unwrap_or(Mark::zero());
        // Operations measured: all of them after a complete run; fewer if it stopped early.
        let ops =
            if self.mark.is_some() { self.completed - self.cfg.warmup_ops.min(self.completed) } else { self.completed };
        let ops = ops.max(1);
        let span = (self.now - m.time).max(1);
        let per = |x: u64| x as f64 / ops as f64;
        let ns = |x: u64| x as f64 / TICKS_PER_NS;
        let mean = |s: u64, n: u64| if n == 0 { 0.0 } else { ns(s) / n as f64 };
        SimStats {
            ops,
            events: 0,
            sim_time_ns: ns(span),
            throughput_mops: ops as f64 / ns(span) * 1e3,
            hit_rate: per(self.hits),
            offchip_per_op: per(self.mem_refs - m.mem_refs),
            writebacks_per_op: per(self.writebacks - m.writebacks),
            bus_msgs_per_op: per(self.bus_msgs - m.bus_msgs),
            bus_words_per_op: per(self.bus_words - m.bus_words),
            memory_util: ((self.mem_refs - m.mem_refs) * self.t_mem_cycle) as f64 / span as f64,
            bus_util: (self.bus_busy - m.bus_busy) as f64 / span as f64,
            mean_latency_ns: [mean(self.lat_sum[0], self.lat_n[0]), mean(self.lat_sum[1], self.lat_n[1])],
            p99_latency_ns: ns(self.hist.value_at_quantile(0.99)),
            mean_queue_wait_ns: mean(self.wait_sum, ops),
            peak_mshrs: self.peak_mshrs,
            refs: self.qm.refs().into(),
            ops_checked: self.ops_applied,
        }
    }
}

impl Mark {
    fn zero() -> Self {
        Mark { time: 0, mem_refs: 0, writebacks: 0, bus_msgs: 0, bus_words: 0, bus_busy: 0 }
    }
}
