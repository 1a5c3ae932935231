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
//! # Checks
//! Each operation is applied to a [`QueueMemory`] at its serialization point (lock taken; qc:
//! engine start). Every dequeue must find a packet, and each queue's packets must leave in the
//! order they entered: a violation ends the run with [`SimError::Order`].

use super::workload::OpStream;
use hdrhistogram::Histogram;
use npqos_core::cache::SetAssocCache;
use npqos_core::queues::memory::{QueueMemory, Refs};
use npqos_core::queues::timing::{Op, Subsystem, Timing, TABLE1};
use rand::Rng;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use thiserror::Error;

/// Ticks per nanosecond.
pub const TICKS_PER_NS: f64 = 16.0;

fn ticks(ns: f64) -> u64 {
    (ns * TICKS_PER_NS).round() as u64
}

/// Parameters of one run.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct SimConfig {
    pub subsystem: Subsystem,
    pub threads: u32,
    pub timing: Timing,
    /// Memory clock; one reference starts per cycle.
    pub memory_mhz: f64,
    /// Threads sharing one processor's pipeline; 0 = none.
    pub threads_per_processor: u32,
    /// sqc / qc fully associative entries.
    pub entries: u32,
    /// qc queuing engines.
    pub engines: u32,
    /// qc evictions and allocations: one per this many ns.
    pub alloc_cycle_ns: f64,
    /// dc lines (one word each) and ways.
    pub dc_lines: u32,
    pub dc_ways: u32,
    /// Operations completed before measuring (cache and queue warm-up).
    pub warmup_ops: u64,
    /// Operations measured.
    pub ops: u64,
}

impl SimConfig {
    /// The paper's configuration (Table 1, section 4.1.1) for `sub` with `threads` threads.
    pub fn paper(sub: Subsystem, threads: u32, ops: u64) -> Self {
        SimConfig {
            subsystem: sub,
            threads,
            timing: TABLE1,
            memory_mhz: 200.0,
            threads_per_processor: 0,
            entries: 32,
            engines: 32,
            alloc_cycle_ns: 1.0,
            dc_lines: 128,
            dc_ways: 2,
            warmup_ops: ops / 10,
            ops,
        }
    }
}

/// A run that cannot be done, or went wrong.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum SimError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("no event pending after {0} operations: the model stalled")]
    Stalled(u64),
    #[error("queue {queue}: {what} (operation {op})")]
    Order { queue: u32, op: u64, what: String },
}

/// What a run measured (over the operations after the warm-up).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SimStats {
    pub ops: u64,
    pub sim_time_ns: f64,
    /// Operations per microsecond = M ops/s.
    pub throughput_mops: f64,
    /// Descriptor hit rate (nc: 0).
    pub hit_rate: f64,
    /// External-memory references per operation, dirty write-backs included.
    pub offchip_per_op: f64,
    pub writebacks_per_op: f64,
    /// Bus messages and words per operation.
    pub bus_msgs_per_op: f64,
    pub bus_words_per_op: f64,
    /// Busy fraction of the memory port and of the bus.
    pub memory_util: f64,
    pub bus_util: f64,
    /// Mean time from taking an operation to its end, ns: enqueue, dequeue.
    pub mean_latency_ns: [f64; 2],
    pub p99_latency_ns: f64,
    /// Mean time an operation waited for its queue (lock, or qc engine), ns.
    pub mean_queue_wait_ns: f64,
    /// dc: most read misses outstanding at once (MSHRs in use).
    pub peak_mshrs: u32,
    /// Table 2 references of the whole run (warm-up included) and operations applied to the
    /// queue memory and checked (those in flight at the end included).
    pub refs: RefCounts,
    pub ops_checked: u64,
}

/// [`Refs`] as a serializable record.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct RefCounts {
    pub desc_reads: u64,
    pub desc_writes: u64,
    pub link_reads: u64,
    pub link_writes: u64,
}

impl From<Refs> for RefCounts {
    fn from(r: Refs) -> Self {
        RefCounts {
            desc_reads: r.desc_reads,
            desc_writes: r.desc_writes,
            link_reads: r.link_reads,
            link_writes: r.link_writes,
        }
    }
}

/// One step of a branch.
#[derive(Clone, Copy, Debug, PartialEq)]
enum S {
    Instr,
    /// A bus message of this many words.
    Send(u8),
    /// A memory reference.
    Mem,
    /// A memory load of a descriptor, followed by the dirty victim's write-back if there is one.
    Load,
    Cam,
    Cache,
    /// dc descriptor access at the controller.
    DcRead,
    DcWrite,
    /// qc: the queuing engine's work.
    Engine,
}

use S::*;

type Program = &'static [&'static [&'static [S]]];

const NC_ENQ: Program =
    &[&[&[Instr]], &[&[Send(1), Mem, Send(1)]], &[&[Send(2), Mem, Send(1)], &[Send(2), Mem, Send(1)]]];
const NC_DEQ: Program =
    &[&[&[Instr]], &[&[Send(1), Mem, Send(1)]], &[&[Send(1), Mem, Send(1)]], &[&[Send(2), Mem, Send(1)]]];
const DC_ENQ: Program =
    &[&[&[Instr]], &[&[Send(1), DcRead, Send(1)]], &[&[Send(2), Mem, Send(1)], &[Send(2), DcWrite, Send(1)]]];
const DC_DEQ: Program =
    &[&[&[Instr]], &[&[Send(1), DcRead, Send(1)]], &[&[Send(1), Mem, Send(1)]], &[&[Send(2), DcWrite, Send(1)]]];
const SQC_ENQ_HIT: Program = &[&[&[Instr]], &[&[Send(2), Cam, Mem, Cache, Send(1)]]];
const SQC_DEQ_HIT: Program = &[&[&[Instr]], &[&[Send(1), Cam, Mem, Cache, Send(1)]]];
const SQC_ENQ_MISS: Program =
    &[&[&[Instr]], &[&[Send(1), Cam, Load, Send(1)]], &[&[Send(2), Cam, Mem, Cache, Send(1)]]];
const SQC_DEQ_MISS: Program =
    &[&[&[Instr]], &[&[Send(1), Cam, Load, Send(1)]], &[&[Send(1), Cam, Mem, Cache, Send(1)]]];
const QC_ENQ: Program = &[&[&[Instr]], &[&[Send(2), Engine, Send(1)]]];
const QC_DEQ: Program = &[&[&[Instr]], &[&[Send(1), Engine, Send(1)]]];

#[derive(Clone, Copy, Default)]
struct Branch {
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
    entry: u32,
}

const NO_QUEUE: u32 = u32::MAX;

/// A small fully associative LRU array whose entries can be pinned (in use).
struct Fa {
    queue: Vec<u32>,
    last: Vec<u64>,
    pinned: Vec<bool>,
    clock: u64,
}

impl Fa {
    fn new(n: u32) -> Self {
        Fa { queue: vec![NO_QUEUE; n as usize], last: vec![0; n as usize], pinned: vec![false; n as usize], clock: 0 }
    }

    /// Looks `q` up and pins its entry: (entry, hit, dirty victim evicted).
    fn acquire(&mut self, q: u32) -> (u32, bool, bool) {
        self.clock += 1;
        if let Some(i) = self.queue.iter().position(|&x| x == q) {
            debug_assert!(!self.pinned[i], "one operation per queue at a time");
            self.last[i] = self.clock;
            self.pinned[i] = true;
            return (i as u32, true, false);
        }
        // LRU among entries not in use; an empty entry is the oldest.
        let v = (0..self.queue.len())
            .filter(|&i| !self.pinned[i])
            .min_by_key(|&i| if self.queue[i] == NO_QUEUE { 0 } else { self.last[i] })
            .expect("entries >= operations in flight (checked at construction)");
        let dirty = self.queue[v] != NO_QUEUE;
        self.queue[v] = q;
        self.last[v] = self.clock;
        self.pinned[v] = true;
        (v as u32, false, dirty)
    }

    fn release(&mut self, e: u32) {
        self.pinned[e as usize] = false;
    }
}

/// The queuing cache's request handling.
struct QcUnit {
    /// A request for the queue is in service or waiting for an engine.
    claimed: Vec<bool>,
    /// Requests behind the claimed one, per queue, in arrival order.
    behind: Vec<VecDeque<u16>>,
    /// Claimed requests waiting for a free engine.
    ready: VecDeque<u16>,
    free_engines: u32,
    alloc_free: u64,
}

struct Sim<'a, R: Rng> {
    cfg: SimConfig,
    stream: &'a mut OpStream<R>,
    now: u64,
    seq: u64,
    events: BinaryHeap<Reverse<(u64, u64, u32)>>,
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
    fa: Fa,
    dc: Option<SetAssocCache>,
    mshrs: u32,
    qc: QcUnit,
    // Functional model and checks.
    qm: QueueMemory,
    free_buffers: Vec<u32>,
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

/// Runs `cfg` on `stream`; `progress` gets the fraction done now and then.
pub fn run<R: Rng>(
    cfg: &SimConfig,
    stream: &mut OpStream<R>,
    progress: &mut dyn FnMut(f64),
) -> Result<SimStats, SimError> {
    let mut sim = Sim::new(*cfg, stream)?;
    sim.go(progress)
}

impl<'a, R: Rng> Sim<'a, R> {
    fn new(cfg: SimConfig, stream: &'a mut OpStream<R>) -> Result<Self, SimError> {
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
        let dc = if cfg.subsystem == Subsystem::Dc {
            Some(
                SetAssocCache::new(cfg.dc_lines as u64 * 4, cfg.dc_ways as usize, 4, 0)
                    .map_err(|e| SimError::Config(format!("data cache: {e}")))?,
            )
        } else {
            None
        };
        let t = cfg.timing;
        let instr = match cfg.subsystem {
            Subsystem::Nc | Subsystem::Dc => t.instr_ns[0],
            Subsystem::Sqc => t.instr_ns[1],
            Subsystem::Qc => t.instr_ns[2],
        };
        let nq = stream.queues() as usize;
        let prefill = stream.prefill().len();
        let buffers = prefill + cfg.threads as usize + 2;
        let mut qm = QueueMemory::new(nq as u32, buffers as u32);
        let mut packet_of = vec![0u64; buffers];
        let mut free_buffers: Vec<u32> = (0..buffers as u32).rev().collect();
        let mut next_packet = 0u64;
        for &q in stream.prefill() {
            let b = free_buffers.pop().expect("buffers for the backlog");
            qm.enqueue(q, b).expect("prefill enqueue");
            next_packet += 1;
            packet_of[b as usize] = next_packet;
        }
        let nthreads = cfg.threads as usize;
        let procs =
            if cfg.threads_per_processor == 0 { 0 } else { nthreads.div_ceil(cfg.threads_per_processor as usize) };
        Ok(Sim {
            cfg,
            stream,
            now: 0,
            seq: 0,
            events: BinaryHeap::with_capacity(4 * nthreads),
            threads: vec![
                Thread {
                    op: Op::Enqueue,
                    queue: 0,
                    seq: 0,
                    picked: 0,
                    arrived: 0,
                    began: 0,
                    program: NC_ENQ,
                    stage: 0,
                    live: 0,
                    br: [Branch::default(); 2],
                    hit: false,
                    victim_dirty: false,
                    entry: 0,
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
            fa: Fa::new(cfg.entries),
            dc,
            mshrs: 0,
            qc: QcUnit {
                claimed: vec![false; if cfg.subsystem == Subsystem::Qc { nq } else { 0 }],
                behind: (0..if cfg.subsystem == Subsystem::Qc { nq } else { 0 }).map(|_| VecDeque::new()).collect(),
                ready: VecDeque::new(),
                free_engines: cfg.engines,
                alloc_free: 0,
            },
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

    fn go(&mut self, progress: &mut dyn FnMut(f64)) -> Result<SimStats, SimError> {
        for t in 0..self.threads.len() {
            self.pick(t);
        }
        let total = self.cfg.warmup_ops + self.cfg.ops;
        let step = (total / 100).max(1);
        let mut next_report = step;
        while self.completed < total {
            let Some(Reverse((time, _, payload))) = self.events.pop() else {
                return Err(SimError::Stalled(self.completed));
            };
            self.now = time;
            self.run((payload >> 1) as usize, (payload & 1) as usize);
            if let Some(e) = self.error.take() {
                return Err(e);
            }
            if self.completed >= next_report {
                progress(self.completed as f64 / total as f64);
                next_report += step;
            }
        }
        Ok(self.stats())
    }

    fn schedule(&mut self, at: u64, t: usize, b: usize) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq, (t as u32) << 1 | b as u32)));
    }

    fn measuring(&self) -> bool {
        self.mark.is_some()
    }

    /// Thread `t` takes the next operation.
    fn pick(&mut self, t: usize) {
        let (op, q) = self.stream.next().expect("the stream is endless");
        self.ops_taken += 1;
        let th = &mut self.threads[t];
        th.op = op;
        th.queue = q;
        th.seq = self.ops_taken;
        th.picked = self.now;
        th.arrived = self.now;
        if self.cfg.subsystem == Subsystem::Qc {
            self.begin(t);
            return;
        }
        let qi = q as usize;
        if self.locked[qi] {
            self.waiting[qi].push_back(t as u16);
        } else {
            self.locked[qi] = true;
            self.begin(t);
        }
    }

    /// Thread `t` starts its operation (it holds its queue, or qc).
    fn begin(&mut self, t: usize) {
        let now = self.now;
        let sub = self.cfg.subsystem;
        let (op, q) = (self.threads[t].op, self.threads[t].queue);
        self.threads[t].began = now;
        if sub != Subsystem::Qc {
            self.apply(t);
        }
        let program = match (sub, op) {
            (Subsystem::Nc, Op::Enqueue) => NC_ENQ,
            (Subsystem::Nc, Op::Dequeue) => NC_DEQ,
            (Subsystem::Dc, Op::Enqueue) => DC_ENQ,
            (Subsystem::Dc, Op::Dequeue) => DC_DEQ,
            (Subsystem::Sqc, _) => {
                let (e, hit, dirty) = self.fa.acquire(q);
                let th = &mut self.threads[t];
                th.entry = e;
                th.hit = hit;
                th.victim_dirty = dirty;
                match (op, hit) {
                    (Op::Enqueue, true) => SQC_ENQ_HIT,
                    (Op::Dequeue, true) => SQC_DEQ_HIT,
                    (Op::Enqueue, false) => SQC_ENQ_MISS,
                    (Op::Dequeue, false) => SQC_DEQ_MISS,
                }
            }
            (Subsystem::Qc, Op::Enqueue) => QC_ENQ,
            (Subsystem::Qc, Op::Dequeue) => QC_DEQ,
        };
        let th = &mut self.threads[t];
        th.program = program;
        th.stage = 0;
        if sub != Subsystem::Sqc {
            th.hit = false;
        }
        self.start_stage(t);
    }

    /// Applies thread `t`'s operation to the queue memory and checks the order.
    fn apply(&mut self, t: usize) {
        let th = self.threads[t];
        let q = th.queue;
        self.ops_applied += 1;
        match th.op {
            Op::Enqueue => {
                let b = self.free_buffers.pop().expect("buffers: backlog + threads + 2");
                if let Err(e) = self.qm.enqueue(q, b) {
                    self.fail(q, th.seq, e.to_string());
                    return;
                }
                self.next_packet += 1;
                self.packet_of[b as usize] = self.next_packet;
            }
            Op::Dequeue => match self.qm.dequeue(q) {
                Ok(Some(b)) => {
                    let p = self.packet_of[b as usize];
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

    fn start_stage(&mut self, t: usize) {
        let th = &mut self.threads[t];
        let branches = th.program[th.stage as usize].len();
        th.live = branches as u8;
        th.br = [Branch::default(); 2];
        for b in 0..branches {
            self.run(t, b);
        }
    }

    /// Runs branch `b` of thread `t` until it waits or ends.
    fn run(&mut self, t: usize, b: usize) {
        loop {
            let th = &self.threads[t];
            let steps = th.program[th.stage as usize][b];
            let pc = th.br[b].pc as usize;
            if pc == steps.len() {
                self.branch_done(t);
                return;
            }
            if !self.step(t, b, steps[pc]) {
                return;
            }
            let br = &mut self.threads[t].br[b];
            br.pc += 1;
            br.phase = 0;
        }
    }

    fn branch_done(&mut self, t: usize) {
        let th = &mut self.threads[t];
        th.live -= 1;
        if th.live > 0 {
            return;
        }
        th.stage += 1;
        if (th.stage as usize) < th.program.len() {
            self.start_stage(t);
        } else {
            self.finish(t);
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
    fn wait(&mut self, t: usize, b: usize, at: u64) -> bool {
        self.threads[t].br[b].phase += 1;
        self.schedule(at, t, b);
        false
    }

    /// Performs (the current phase of) one step; true when the step is done.
    fn step(&mut self, t: usize, b: usize, s: S) -> bool {
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
                self.wait(t, b, at)
            }
            (Send(w), 0) => {
                let start = now.max(self.bus_free);
                let busy = w as u64 * self.t_word;
                self.bus_free = start + busy;
                self.bus_busy += busy;
                self.bus_msgs += 1;
                self.bus_words += w as u64;
                self.wait(t, b, start + self.t_oneway)
            }
            (Mem, 0) => {
                let at = self.memory();
                self.wait(t, b, at)
            }
            (Load, 0) => {
                let at = self.memory();
                if self.threads[t].victim_dirty {
                    self.writeback();
                }
                self.wait(t, b, at)
            }
            (Cam, 0) => self.wait(t, b, now + self.t_cam),
            (Cache, 0) => self.wait(t, b, now + self.t_cache),
            (DcRead | DcWrite, 0) => {
                let th = self.threads[t];
                let word = 2 * th.queue as u64 + u64::from(th.op == Op::Enqueue);
                let dc = self.dc.as_mut().expect("dc has a data cache");
                let wb0 = dc.stats().writebacks;
                let hit = dc.access(word * 4, s == DcWrite);
                let dirty = dc.stats().writebacks > wb0;
                let th = &mut self.threads[t];
                th.victim_dirty = dirty;
                if s == DcRead {
                    th.hit = hit;
                    if !hit {
                        self.mshrs += 1;
                        self.peak_mshrs = self.peak_mshrs.max(self.mshrs);
                    }
                }
                self.wait(t, b, now + self.t_cache)
            }
            (DcRead, 1) => {
                if self.threads[t].hit {
                    return true;
                }
                let at = self.memory();
                if self.threads[t].victim_dirty {
                    self.writeback();
                }
                self.wait(t, b, at)
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
            (Engine, _) => self.engine(t, b, phase),
            (_, _) => true,
        }
    }

    /// The queuing cache, for thread `t`'s request (phases: 0 arrival, 1 start, 2 after the CAM,
    /// 3 allocation slot, 4 after the load, 5 after the link reference, 6 after the cache).
    fn engine(&mut self, t: usize, b: usize, phase: u8) -> bool {
        let now = self.now;
        let q = self.threads[t].queue as usize;
        match phase {
            0 => {
                self.threads[t].br[b].phase = 1;
                self.threads[t].arrived = now;
                if self.qc.claimed[q] {
                    self.qc.behind[q].push_back(t as u16);
                    return false;
                }
                self.qc.claimed[q] = true;
                if self.qc.free_engines == 0 {
                    self.qc.ready.push_back(t as u16);
                    return false;
                }
                self.qc.free_engines -= 1;
                self.engine(t, b, 1)
            }
            1 => {
                self.threads[t].began = now;
                self.apply(t);
                let (e, hit, dirty) = self.fa.acquire(q as u32);
                let th = &mut self.threads[t];
                th.entry = e;
                th.hit = hit;
                th.victim_dirty = dirty;
                self.wait(t, b, now + self.t_cam)
            }
            2 => {
                if self.threads[t].hit {
                    self.threads[t].br[b].phase = 4;
                    return self.engine(t, b, 4);
                }
                let slot = now.max(self.qc.alloc_free);
                self.qc.alloc_free = slot + self.t_alloc;
                self.wait(t, b, slot)
            }
            3 => {
                let at = self.memory();
                if self.threads[t].victim_dirty {
                    self.writeback();
                }
                self.wait(t, b, at)
            }
            4 => {
                let at = self.memory();
                self.wait(t, b, at)
            }
            5 => self.wait(t, b, now + self.t_cache),
            _ => {
                self.fa.release(self.threads[t].entry);
                if let Some(n) = self.qc.behind[q].pop_front() {
                    // The same engine serves the queue's next request.
                    self.run(n as usize, 0);
                } else {
                    self.qc.claimed[q] = false;
                    if let Some(n) = self.qc.ready.pop_front() {
                        self.run(n as usize, 0);
                    } else {
                        self.qc.free_engines += 1;
                    }
                }
                true
            }
        }
    }

    fn finish(&mut self, t: usize) {
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
        match self.cfg.subsystem {
            Subsystem::Qc => {}
            sub => {
                if sub == Subsystem::Sqc {
                    self.fa.release(th.entry);
                }
                let qi = th.queue as usize;
                if let Some(n) = self.waiting[qi].pop_front() {
                    self.begin(n as usize);
                } else {
                    self.locked[qi] = false;
                }
            }
        }
        if self.completed < self.cfg.warmup_ops + self.cfg.ops {
            self.pick(t);
        }
    }

    fn stats(&self) -> SimStats {
        let m = self.mark.unwrap_or(Mark::zero());
        let ops = self.cfg.ops;
        let span = (self.now - m.time).max(1);
        let per = |x: u64| x as f64 / ops as f64;
        let ns = |x: u64| x as f64 / TICKS_PER_NS;
        let mean = |s: u64, n: u64| if n == 0 { 0.0 } else { ns(s) / n as f64 };
        SimStats {
            ops,
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
