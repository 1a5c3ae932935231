//! The kim model: N token-bucket-shaped queues, P cores with reschedule heaps, synthetic input
//! (docs/kim.md).
//!
//! Link mode `ideal` (the setting of the paper's stochastic model): an eligible queue sends its
//! head packet at once, so queues are independent and shaping alone decides when packets leave.
//! Each send is processed by a core drawn uniformly at random; the core runs Algorithm 1 (update
//! the bucket; on a reschedule, insert into its heap) and then re-enables every due queue of its
//! heap (lines 16-19). Because a core with no packets would otherwise never look at its heap,
//! each core also has a timer at its root's reschedule time (exact re-enabling; at full load the
//! two coincide within microseconds).
//!
//! Measured: reschedules, heap operations and array accesses by index (so off-chip accesses can
//! be computed for any locked size afterwards), time-weighted mean and maximum heap size per
//! core, token-bucket accesses, the periodic-fill baseline's accesses for the same run, sends,
//! drops, and the mean delay from arrival to send.

use crate::engine::{Engine, Model, RunLimits, StopReason};
use crate::results::RunResult;
use crate::rng::{RngStreams, StreamRng};
use crate::workload::{mean_gap_for_overload, Arrivals, GapDist, SizeDist};
use npqos_core::cache::SetAssocCache;
use npqos_core::queues::pool::{Packet, PacketPool};
use npqos_core::sched::drr::Drr;
use npqos_core::shaper::heap::{OpKind, NODE_BYTES};
use npqos_core::shaper::{Adaptive, BucketParams, Decision, EventShaper, PeriodicShaper, ShaperError, Timer};
use npqos_core::{CoreId, Duration, Instant, QueueId, Rate};
use rand::Rng;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

mod observe;
use observe::{CoreObs, IndexCounts, MissCounts};

/// Which shaper the queues use.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fill {
    /// The paper's event-driven fill on per-core heaps.
    EventDriven,
    /// The periodic-fill baseline with this period.
    Periodic(Duration),
}

/// What happens to a packet that arrives while its queue is disabled (throttled).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhileDisabled {
    /// It waits in the queue's buffer and is sent when the queue is re-enabled (a shaper).
    Queue,
    /// It is dropped and counted (a policer). This is what the paper's stochastic model assumes:
    /// a queue's cycle is N arrivals while schedulable, then alpha / BW unschedulable, with the
    /// arrivals of the unschedulable period never consuming tokens (eqs 8-9).
    Drop,
}

/// Parameters of one kim run.
#[derive(Clone, Debug)]
pub struct KimParams {
    pub queues: u32,
    pub link: Rate,
    pub cores: u32,
    pub sizes: SizeDist,
    pub arrivals: GapDist,
    pub overload: f64,
    pub alpha_bytes: u64,
    pub cap_bytes: u64,
    /// Per-queue tail-drop buffer.
    pub buffer_bytes: u64,
    pub fill: Fill,
    /// Where throttled queues wait under event-driven fill.
    pub timer: Timer,
    pub while_disabled: WhileDisabled,
    pub adaptive: Option<Adaptive>,
    /// Heap tick: 2^tick_shift ns.
    pub tick_shift: u32,
    pub duration: Duration,
    /// Heap-size statistics ignore the time before this (buckets start full).
    pub warmup: Duration,
    /// Locked cache sizes whose off-chip accesses are reported.
    pub locked_sizes: Vec<u64>,
    /// How queues share the link.
    pub link_mode: LinkMode,
    /// Alternating overload (kim Fig. 11): every `period`, the input switches between
    /// `overload` and this factor (starting with `overload`).
    pub overload_alt: Option<(Duration, f64)>,
    /// Record reschedules per interval of this length as the series `reschedules_per_queue`.
    pub sample_every: Option<Duration>,
    /// Simulate each core's data cache (one per locked size in `locked_sizes`) and report
    /// misses per heap insert and per heap delete (kim Tables VI-VII).
    pub cache: Option<CacheGeometry>,
    /// Record core 0's heap operations (for replaying them under a timer: kim Tables IV-V).
    pub log_core0: bool,
    /// Event budget (0 = unlimited).
    pub max_events: u64,
}

/// Why a kim scenario could not run.
#[derive(Debug, thiserror::Error)]
pub enum KimRunError {
    #[error(transparent)]
    Trace(#[from] crate::trace::TraceError),
    #[error("shaper: {0}")]
    Shaper(#[from] ShaperError),
    #[error("arrival process: {0}")]
    Arrivals(#[from] crate::workload::ArrivalError),
    #[error("cache model: {0}")]
    Cache(#[from] npqos_core::cache::CacheError),
    /// The scenario is not a validated `model = "kim"` scenario with synthetic traffic.
    #[error("not a kim scenario: {0}")]
    NotKim(&'static str),
}

impl KimParams {
    /// The parameters of a validated `model = "kim"` scenario (reads size traces if any).
    pub fn from_scenario(sc: &crate::scenario::Scenario) -> Result<KimParams, KimRunError> {
        use crate::scenario::Traffic;
        let crate::scenario::Spec::Kim(l, sh) = &sc.spec else {
            return Err(KimRunError::NotKim("no [shaper] table"));
        };
        let Traffic::Synthetic { overload, sizes, arrivals, .. } = &l.traffic else {
            return Err(KimRunError::NotKim("traffic.source must be \"synthetic\""));
        };
        Ok(KimParams {
            queues: l.queues,
            link: l.link_rate,
            cores: sh.cores,
            sizes: sizes.build()?,
            arrivals: arrivals.clone(),
            overload: *overload,
            alpha_bytes: sh.alpha,
            cap_bytes: sh.cap,
            buffer_bytes: l.buffer,
            fill: match sh.fill_period {
                Some(p) => Fill::Periodic(p),
                None => Fill::EventDriven,
            },
            timer: sh.timer,
            while_disabled: if sh.queue_while_disabled { WhileDisabled::Queue } else { WhileDisabled::Drop },
            adaptive: sh.adaptive.map(|(gamma, delta_th, alpha_min_bytes, interval)| Adaptive {
                gamma,
                delta_th,
                alpha_min_bytes,
                interval,
            }),
            duration: sc.duration,
            warmup: sc.warmup,
            link_mode: if sh.shared_link { LinkMode::Shared } else { LinkMode::Ideal },
            sample_every: Some(sc.sample_every()),
            cache: sh.cache.then_some(CacheGeometry::KIM),
            max_events: sc.max_events,
            ..KimParams::paper(l.queues)
        })
    }
}

/// Runs one replication of a `model = "kim"` scenario.
pub fn run_scenario(
    sc: &crate::scenario::Scenario,
    seed: u64,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> Result<RunResult, KimRunError> {
    run(&KimParams::from_scenario(sc)?, seed, interrupt, progress)
}

/// How queues share the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkMode {
    /// An eligible queue sends its head packet at once; queues are independent (the setting of
    /// the stochastic model).
    Ideal,
    /// One server of the link's rate serves eligible non-empty queues in round robin, one packet
    /// per turn.
    Shared,
}

/// A per-core data cache (kim: 32 KB, 2-way, 64 B lines).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheGeometry {
    pub size_bytes: u64,
    pub ways: usize,
    pub line_bytes: u64,
}

impl CacheGeometry {
    /// kim section 5.1.4 (Table III): 32 KB, 2-way, 64 B lines.
    pub const KIM: CacheGeometry = CacheGeometry { size_bytes: 32 << 10, ways: 2, line_bytes: 64 };
}

/// One heap operation of core 0, for replay (`KimParams::log_core0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeapOp {
    Insert {
        queue: u32,
        time: Instant,
        now: Instant,
    },
    /// Pop every due root at `now`.
    PollDue {
        now: Instant,
    },
}

impl KimParams {
    /// The paper's full-scale setting: 100 Gbps, 100 cores, IMIX, exponential, overload 1,
    /// alpha = cap = 3000 B, 10 s, locked 2/4/8 KB, arrivals to a disabled queue dropped (the
    /// stochastic model's assumption).
    pub fn paper(queues: u32) -> Self {
        KimParams {
            queues,
            link: Rate::gbps(100),
            cores: 100,
            sizes: SizeDist::kim_imix(),
            arrivals: GapDist::Exponential,
            overload: 1.0,
            alpha_bytes: 3000,
            cap_bytes: 3000,
            buffer_bytes: 64 << 10,
            fill: Fill::EventDriven,
            timer: Timer::Heap,
            while_disabled: WhileDisabled::Drop,
            adaptive: None,
            tick_shift: 6,
            duration: Duration::from_secs(10),
            warmup: Duration::ZERO,
            locked_sizes: vec![2048, 4096, 8192],
            link_mode: LinkMode::Ideal,
            overload_alt: None,
            sample_every: None,
            cache: None,
            log_core0: false,
            max_events: 0,
        }
    }
}

/// Cache-model address of the bucket-state array (far above any heap array).
const BUCKET_REGION: u64 = 1 << 40;

#[derive(Clone, Copy, Debug)]
pub enum Ev {
    Arrival(u32),
    /// A core's heap root is due (event-driven).
    CoreTimer(u32),
    /// A queue's fill has come (periodic).
    FillWake(u32),
    /// The link finished a packet (shared link mode).
    LinkDone,
    /// End of a sampling interval.
    Sample,
}

enum Shaper {
    Event(EventShaper),
    Periodic(PeriodicShaper),
}

struct Kim {
    p: KimParams,
    shaper: Shaper,
    /// The buffered packets (used when packets wait: a shared link, or queueing while disabled).
    pool: PacketPool,
    arrivals: Vec<Arrivals>,
    rng_size: StreamRng,
    rng_gap: StreamRng,
    rng_core: StreamRng,
    obs: IndexCounts,
    timer_at: Vec<u64>,
    heap_area: Vec<u128>,
    heap_last: Vec<u64>,
    heap_max: u64,
    work: Vec<u32>,
    /// The shared link's packet-by-packet round robin over the eligible, non-empty queues
    /// (shared link mode only).
    ring: Option<Drr>,
    link_busy: bool,
    /// Per core: one cache per locked size (empty without a cache model).
    caches: Vec<Vec<SetAssocCache>>,
    misses: MissCounts,
    log: Vec<HeapOp>,
    samples: Vec<(f64, f64)>,
    last_resched: u64,
    // measurements
    arrived: u64,
    sent_pkts: u64,
    sent_bytes: u64,
    dropped: u64,
    dropped_disabled: u64,
    delay_pkts: u64,
    delay_sum_ns: u128,
}

impl Kim {
    fn core_touch(&mut self, c: usize, now: u64) {
        if let Shaper::Event(s) = &self.shaper {
            let from = self.heap_last[c].max(self.p.warmup.as_nanos());
            if now > from {
                self.heap_area[c] += heap_len(s, c) as u128 * (now - from) as u128;
            }
            self.heap_last[c] = now;
        }
    }
    fn core_done(&mut self, c: usize, engine: &mut Engine<Ev>) {
        if let Shaper::Event(s) = &self.shaper {
            let core = CoreId::from_index(c);
            self.heap_max = self.heap_max.max(s.waiting(core) as u64);
            if let Some(t) = s.earliest(core) {
                let t = t.as_nanos().max(engine.now().as_nanos());
                if t < self.timer_at[c] {
                    self.timer_at[c] = t;
                    engine.schedule(Instant::from_nanos(t), Ev::CoreTimer(c as u32));
                }
            }
        }
    }

    /// Dequeues and sends the head packet of `qi` (non-empty, eligible) through the shaper;
    /// returns the packet's size and whether the send throttled the queue.
    fn send_one(&mut self, qi: usize, engine: &mut Engine<Ev>) -> (u32, bool) {
        let p = self.pool.pop(QueueId::from_index(qi)).expect("send_one is called on a non-empty queue");
        (p.size, self.send_packet(qi, p.size, p.arrival.as_nanos(), engine))
    }

    /// Sends a packet of `size` bytes from `qi` that arrived at `arrival` ns through the shaper;
    /// returns whether the send throttled the queue.
    fn send_packet(&mut self, qi: usize, size: u32, arrival: u64, engine: &mut Engine<Ev>) -> bool {
        let now = engine.now();
        let now_ns = now.as_nanos();
        self.sent_pkts += 1;
        self.sent_bytes += size as u64;
        if now_ns >= self.p.warmup.as_nanos() {
            self.delay_pkts += 1;
            self.delay_sum_ns += (now_ns - arrival) as u128;
        }
        let throttled = match &mut self.shaper {
            Shaper::Event(_) => {
                let c = self.rng_core.random_range(0..self.p.cores) as usize;
                self.core_touch(c, now_ns);
                // Algorithm 1 line 6 reads and writes the queue's bucket state (tokens and T_lu,
                // 16 B) through the same data cache as the heap (a separate address region).
                for cache in self.caches[c].iter_mut() {
                    let a = BUCKET_REGION + qi as u64 * 16;
                    cache.access(a, false);
                    cache.access(a, true);
                }
                let log = c == 0 && self.p.log_core0;
                let inserts0 = if log { self.heap_inserts(0) } else { 0 };
                let Shaper::Event(s) = &mut self.shaper else { unreachable!() };
                let mut obs = CoreObs { counts: &mut self.obs, caches: &mut self.caches[c], misses: &mut self.misses };
                let d = s
                    .on_send_on(CoreId::from_index(c), QueueId::from_index(qi), size as u64, now, &mut obs)
                    .expect("cores and queues are in range and time does not go back");
                if log && heap_counters(s, 0).inserts > inserts0 {
                    if let Decision::Throttled { until } = d {
                        self.log.push(HeapOp::Insert { queue: qi as u32, time: until, now });
                    }
                }
                self.poll(c, now);
                self.core_done(c, engine);
                matches!(d, Decision::Throttled { .. })
            }
            Shaper::Periodic(s) => match s
                .on_send(QueueId::from_index(qi), size as u64, now)
                .expect("queues are in range and time does not go back")
            {
                Decision::Eligible => false,
                Decision::Throttled { until } => {
                    engine.schedule(until, Ev::FillWake(qi as u32));
                    true
                }
            },
        };
        throttled
    }

    fn heap_inserts(&self, c: usize) -> u64 {
        match &self.shaper {
            Shaper::Event(s) => heap_counters(s, c).inserts,
            Shaper::Periodic(_) => 0,
        }
    }

    /// Algorithm 1 lines 16-19 on core `c` (event-driven shaper).
    fn poll(&mut self, c: usize, now: Instant) {
        let Shaper::Event(s) = &mut self.shaper else { return };
        let work = &mut self.work;
        let mut obs = CoreObs { counts: &mut self.obs, caches: &mut self.caches[c], misses: &mut self.misses };
        s.poll_core(CoreId::from_index(c), now, &mut obs, |r| work.push(r.0))
            .expect("cores are in range and time does not go back");
        if c == 0 && self.p.log_core0 {
            self.log.push(HeapOp::PollDue { now });
        }
    }

    /// Serves the queues on the work list: in `ideal` mode each sends while it stays eligible;
    /// in `shared` mode they join the link's round robin.
    fn serve(&mut self, engine: &mut Engine<Ev>) {
        match self.p.link_mode {
            LinkMode::Ideal => {
                while let Some(q) = self.work.pop() {
                    let qi = q as usize;
                    while !self.pool.is_empty(QueueId::from_index(qi)) {
                        if self.send_one(qi, engine).1 {
                            break;
                        }
                    }
                }
            }
            LinkMode::Shared => {
                self.admit_work();
                if !self.link_busy {
                    self.start_next(engine);
                }
            }
        }
    }

    /// Shared mode: queues on the work list that are non-empty and eligible join the round
    /// (at the back; a queue already in it keeps its place).
    fn admit_work(&mut self) {
        let ring = self.ring.as_mut().expect("shared link mode");
        while let Some(q) = self.work.pop() {
            let queue = QueueId(q);
            if !self.pool.is_empty(queue) && eligible(&self.shaper, queue) {
                ring.enqueued(queue).expect("queues come from 0..queues");
            }
        }
    }

    /// Shared mode: the link starts the head packet of the next queue in the round. A queue
    /// leaves the round when it empties or its send throttles it.
    fn start_next(&mut self, engine: &mut Engine<Ev>) {
        let ring = self.ring.as_mut().expect("shared link mode");
        while let Some(queue) = ring.select(|_| 1) {
            let qi = queue.index();
            if self.pool.is_empty(queue) || !eligible(&self.shaper, queue) {
                // (A queue in the round is non-empty and eligible: only its own send changes
                // that. Kept as a guard.)
                ring.dequeued(queue, true).expect("the queue select() named");
                continue;
            }
            let (size, throttled) = self.send_one(qi, engine);
            let ring = self.ring.as_mut().expect("shared link mode");
            ring.dequeued(queue, throttled || self.pool.is_empty(queue)).expect("the queue select() named");
            self.admit_work();
            self.link_busy = true;
            let t = self.p.link.tx_time(size as u64).unwrap_or(Duration::NANOSECOND).max(Duration::NANOSECOND);
            engine.schedule_in(t, Ev::LinkDone);
            return;
        }
    }

    /// The overload factor of the input at `now` relative to the base `overload`.
    fn gap_factor(&self, now: Instant) -> f64 {
        match self.p.overload_alt {
            Some((period, alt)) if (now.as_nanos() / period.as_nanos().max(1)) % 2 == 1 => self.p.overload / alt,
            _ => 1.0,
        }
    }

    fn eligible(&self, q: usize) -> bool {
        eligible(&self.shaper, QueueId::from_index(q))
    }
}

/// Whether the shaper lets `q` send now.
#[inline]
fn eligible(shaper: &Shaper, q: QueueId) -> bool {
    match shaper {
        Shaper::Event(s) => !s.is_disabled(q),
        Shaper::Periodic(s) => !s.is_disabled(q),
    }
}

fn heap_counters(s: &EventShaper, c: usize) -> npqos_core::shaper::heap::HeapCounters {
    s.heap(CoreId::from_index(c)).map(|h| *h.counters()).unwrap_or_default()
}

/// Queues waiting in core `c`'s heap (or wheel).
fn heap_len(s: &EventShaper, c: usize) -> usize {
    s.waiting(CoreId::from_index(c))
}

impl Model for Kim {
    type Event = Ev;
    fn handle(&mut self, ev: Ev, engine: &mut Engine<Ev>) {
        match ev {
            Ev::Arrival(q) => {
                let qi = q as usize;
                let size = self.p.sizes.sample(&mut self.rng_size);
                let a = if self.arrivals.len() == 1 { 0 } else { qi };
                let mut gap = self.arrivals[a].next_gap(&mut self.rng_gap);
                if self.p.overload_alt.is_some() {
                    gap = Duration::from_nanos((gap.as_nanos() as f64 * self.gap_factor(engine.now())).round() as u64);
                }
                let gap = gap.max(Duration::NANOSECOND);
                engine.schedule_in(gap, Ev::Arrival(q));
                self.arrived += 1;
                if self.p.while_disabled == WhileDisabled::Drop && !self.eligible(qi) {
                    self.dropped_disabled += 1;
                    return;
                }
                // Ideal link, eligible queue: its buffer is empty (an eligible queue is drained at
                // once), so the packet leaves now without being buffered.
                // (Dropping while disabled, the buffer is never used: no need to look at it.)
                if self.p.link_mode == LinkMode::Ideal
                    && (self.p.while_disabled == WhileDisabled::Drop || self.pool.is_empty(QueueId::from_index(qi)))
                    && self.eligible(qi)
                {
                    let now = engine.now().as_nanos();
                    self.send_packet(qi, size, now, engine);
                    self.serve(engine);
                    return;
                }
                let queue = QueueId::from_index(qi);
                if self.pool.bytes(queue) + size as u64 > self.p.buffer_bytes {
                    self.dropped += 1;
                    return;
                }
                self.pool.push(queue, Packet { size, arrival: engine.now() }).expect("queue ids come from 0..queues");
                if self.eligible(qi) {
                    self.work.push(q);
                    self.serve(engine);
                }
            }
            Ev::CoreTimer(c) => {
                let c = c as usize;
                let now = engine.now();
                if self.timer_at[c] != now.as_nanos() {
                    return; // superseded
                }
                self.timer_at[c] = u64::MAX;
                self.core_touch(c, now.as_nanos());
                self.poll(c, now);
                self.core_done(c, engine);
                self.serve(engine);
            }
            Ev::LinkDone => {
                self.link_busy = false;
                self.start_next(engine);
            }
            Ev::Sample => {
                let every = self.p.sample_every.expect("sampling configured");
                engine.schedule_in(every, Ev::Sample);
                if let Shaper::Event(s) = &self.shaper {
                    let r = s.counters().reschedules;
                    let per_queue = (r - self.last_resched) as f64 / self.p.queues as f64;
                    self.samples.push((engine.now().as_secs_f64(), per_queue));
                    self.last_resched = r;
                }
            }
            Ev::FillWake(q) => {
                let Shaper::Periodic(s) = &mut self.shaper else { return };
                if s.poll_queue(QueueId(q), engine.now()).expect("queues are in range and time does not go back") {
                    self.work.push(q);
                    self.serve(engine);
                }
            }
        }
    }
}

/// Builds and runs one kim simulation.
pub fn run(
    p: &KimParams,
    seed: u64,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> Result<RunResult, KimRunError> {
    run_with_log(p, seed, interrupt, progress).map(|r| r.0)
}

/// [`run`], also returning core 0's heap operations when `p.log_core0` is set.
pub fn run_with_log(
    p: &KimParams,
    seed: u64,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> Result<(RunResult, Vec<HeapOp>), KimRunError> {
    let n = p.queues as usize;
    let share = p.link.share(p.queues as u64);
    let bucket = BucketParams { cir: share, cap_bytes: p.cap_bytes, alpha_bytes: p.alpha_bytes };
    let params = vec![bucket; n];
    let shaper = match p.fill {
        Fill::EventDriven => {
            let mut s = EventShaper::new(&params, p.cores as usize, 0, p.tick_shift)?.with_timer(p.timer);
            if let Some(a) = p.adaptive {
                s = s.with_adaptive(a)?;
            }
            Shaper::Event(s)
        }
        Fill::Periodic(period) => Shaper::Periodic(PeriodicShaper::new(&params, period)?),
    };
    let streams = RngStreams::new(seed);
    let gap = mean_gap_for_overload(p.sizes.mean(), share, p.overload)
        .filter(|g| !g.is_zero())
        .unwrap_or(Duration::NANOSECOND);
    let proc = Arrivals::new(&p.arrivals, gap)?;
    let mut m = Kim {
        p: p.clone(),
        shaper,
        pool: PacketPool::new(n as u32),
        arrivals: if proc.is_stateless() { vec![proc] } else { vec![proc; n] },
        rng_size: streams.stream("kim.sizes", 0),
        rng_gap: streams.stream("kim.arrivals", 0),
        rng_core: streams.stream("kim.cores", 0),
        obs: IndexCounts::default(),
        timer_at: vec![u64::MAX; p.cores as usize],
        heap_area: vec![0; p.cores as usize],
        heap_last: vec![0; p.cores as usize],
        heap_max: 0,
        work: Vec::new(),
        ring: (p.link_mode == LinkMode::Shared).then(|| Drr::round_robin(p.queues)),
        link_busy: false,
        caches: (0..p.cores)
            .map(|_| match p.cache {
                Some(g) => p
                    .locked_sizes
                    .iter()
                    .map(|&l| SetAssocCache::new(g.size_bytes, g.ways, g.line_bytes, l))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(KimRunError::from),
                None => Ok(Vec::new()),
            })
            .collect::<Result<Vec<_>, _>>()?,
        misses: MissCounts {
            phase: OpKind::Peek,
            peek_accesses: 0,
            peek_misses: vec![0; p.locked_sizes.len()],
            insert_ops: 0,
            insert_accesses: 0,
            delete_ops: 0,
            delete_accesses: 0,
            insert_misses: vec![0; p.locked_sizes.len()],
            delete_misses: vec![0; p.locked_sizes.len()],
        },
        log: Vec::new(),
        samples: Vec::new(),
        last_resched: 0,
        arrived: 0,
        sent_pkts: 0,
        sent_bytes: 0,
        dropped: 0,
        dropped_disabled: 0,
        delay_pkts: 0,
        delay_sum_ns: 0,
    };
    let mut engine = Engine::new();
    if let Some(f) = interrupt {
        engine = engine.with_interrupt(f);
    }
    // First arrivals at a uniformly random phase within one mean gap, so queues with constant
    // gaps are not in lockstep.
    for q in 0..n {
        let g = Duration::from_nanos(m.rng_gap.random_range(0..gap.as_nanos().max(1)));
        engine.schedule(Instant::ZERO + g, Ev::Arrival(q as u32));
    }
    if let Some(every) = p.sample_every {
        engine.schedule(Instant::ZERO + every, Ev::Sample);
    }
    let limits = RunLimits {
        until: Instant::ZERO + p.duration,
        max_events: if p.max_events == 0 { u64::MAX } else { p.max_events },
    };
    let reason = engine.run(&mut m, limits, progress);
    let end = engine.now().as_nanos();
    let secs = (end as f64 * 1e-9).max(1e-12);
    let mut r = RunResult {
        complete: matches!(reason, StopReason::EndTime | StopReason::Drained),
        stop_reason: format!("{reason:?}").to_lowercase(),
        events: engine.executed(),
        sim_time_ns: end,
        ..Default::default()
    };
    r.scalar("arrived_packets", m.arrived as f64, "packets");
    r.scalar("sent_packets", m.sent_pkts as f64, "packets");
    r.scalar("dropped_packets", m.dropped as f64, "packets");
    r.scalar("dropped_while_disabled", m.dropped_disabled as f64, "packets");
    r.scalar("rate_ratio", m.sent_bytes as f64 * 8.0 / secs / (share.bits_per_sec() as f64 * n as f64), "1");
    // Arrival to the start of transmission, for packets sent after the warm-up.
    r.scalar("mean_delay", if m.delay_pkts > 0 { m.delay_sum_ns as f64 / m.delay_pkts as f64 } else { 0.0 }, "ns");
    match &m.shaper {
        Shaper::Event(s) => {
            let c = *s.counters();
            let h = s.heap_counters();
            let heap = p.timer == Timer::Heap;
            r.scalar("reschedules", c.reschedules as f64, "1");
            if heap {
                r.scalar("heap_inserts", h.inserts as f64, "1");
                r.scalar("heap_deletes", h.deletes as f64, "1");
            } else {
                // The wheel's filings and releases (the same events as the heap's inserts and
                // deletes), and its cascades; it has no heap array to account.
                let w = s.wheel_counters();
                r.scalar("heap_inserts", w.inserts as f64, "1");
                r.scalar("heap_deletes", w.deletes as f64, "1");
                r.scalar("wheel_cascaded", w.cascaded as f64, "1");
            }
            r.scalar("deferred", c.deferred as f64, "1");
            r.scalar("bucket_accesses", c.bucket_accesses as f64, "1");
            if heap {
                let total: u64 = m.obs.0.iter().sum();
                r.scalar("heap_accesses", total as f64, "1");
                for &l in &p.locked_sizes {
                    let first = (l / NODE_BYTES) as usize;
                    let off: u64 = m.obs.0.iter().skip(first).sum();
                    r.scalar(&format!("offchip_{}KB", l / 1024), off as f64, "1");
                }
            }
            let w = p.warmup.as_nanos();
            for c in 0..p.cores as usize {
                let from = m.heap_last[c].max(w);
                if end > from {
                    m.heap_area[c] += heap_len(s, c) as u128 * (end - from) as u128;
                }
            }
            let span = end.saturating_sub(w).max(1) as f64;
            let mean = m.heap_area.iter().sum::<u128>() as f64 / (span * p.cores as f64);
            r.scalar("heap_mean_per_core", mean, "nodes");
            r.scalar("heap_max_per_core", m.heap_max as f64, "nodes");
            if heap {
                r.scalar("compares_per_op", h.compares as f64 / (h.inserts + h.deletes).max(1) as f64, "1");
                r.scalar("moves_per_op", h.moves as f64 / (h.inserts + h.deletes).max(1) as f64, "1");
            }
            if p.cache.is_some() {
                let mc = &m.misses;
                r.scalar("cache_insert_ops", mc.insert_ops as f64, "1");
                r.scalar("cache_delete_ops", mc.delete_ops as f64, "1");
                r.scalar("accesses_per_insert", mc.insert_accesses as f64 / mc.insert_ops.max(1) as f64, "1");
                r.scalar("accesses_per_delete", mc.delete_accesses as f64 / mc.delete_ops.max(1) as f64, "1");
                r.scalar("peek_accesses", mc.peek_accesses as f64, "1");
                for (k, &l) in p.locked_sizes.iter().enumerate() {
                    let kb = l / 1024;
                    for (name, misses, per) in [
                        ("misses_per_insert", mc.insert_misses[k], mc.insert_ops),
                        ("misses_per_delete", mc.delete_misses[k], mc.delete_ops),
                        ("insert_miss_rate", mc.insert_misses[k], mc.insert_accesses),
                        ("delete_miss_rate", mc.delete_misses[k], mc.delete_accesses),
                    ] {
                        r.scalar(&format!("{name}_{kb}KB"), misses as f64 / per.max(1) as f64, "1");
                    }
                }
            }
            if !m.samples.is_empty() {
                r.series.push(crate::results::Series {
                    name: "reschedules_per_queue".into(),
                    x_unit: "s".into(),
                    unit: "reschedules per queue per interval".into(),
                    points: std::mem::take(&mut m.samples),
                });
            }
        }
        Shaper::Periodic(s) => {
            r.scalar("throttles", s.counters().throttles as f64, "1");
            r.scalar("fill_accesses", s.fill_accesses(Instant::from_nanos(end)) as f64, "1");
        }
    }
    Ok((r, m.log))
}

#[cfg(test)]
mod tests;
