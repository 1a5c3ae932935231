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
use npqos_core::shaper::heap::{HeapCounters, NODE_BYTES};
use npqos_core::shaper::wheel::WheelCounters;
use npqos_core::shaper::{
    Adaptive, BucketParams, Conformance, Decision, EventCounters, EventShaper, PeriodicShaper, ShaperError, Timer,
};
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
    /// How a packet conforms: Algorithm 1's send-then-pay (the paper), or wait-for-tokens
    /// (Linux tbf: the head packet waits until the bucket holds it; needs `WhileDisabled::Queue`
    /// and a cap of at least the largest packet).
    pub conformance: Conformance,
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
    /// Event budget (0 = unlimited; with shards, per shard).
    pub max_events: u64,
    /// Independent groups the queues and cores are split into (docs/kim.md "Shards"): queue
    /// `q` and core `c` belong to group `q mod shards` and `c mod shards`, and a queue's packets
    /// go only to its group's cores. Each group is simulated on its own (on any thread) and the
    /// results combined; 1 is the paper's model (any core for any packet).
    pub shards: u32,
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
    /// The shard count does not fit the queues, cores or link mode.
    #[error("shards = {shards}: {why}")]
    Shards { shards: u32, why: &'static str },
}

impl KimParams {
    /// The parameters of a validated `model = "kim"` scenario (reads size traces if any).
    pub fn from_scenario(sc: &crate::scenario::Scenario) -> Result<KimParams, KimRunError> {
        use crate::scenario::Traffic;
        let Some(crate::scenario::KimSpec { link: l, shaper: sh }) = sc.spec_as() else {
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
            alpha_bytes: sh.bucket.alpha,
            cap_bytes: sh.bucket.cap,
            buffer_bytes: l.buffer,
            fill: match sh.fill_period {
                Some(p) => Fill::Periodic(p),
                None => Fill::EventDriven,
            },
            timer: sh.bucket.timer,
            while_disabled: if sh.queue_while_disabled { WhileDisabled::Queue } else { WhileDisabled::Drop },
            conformance: sh.bucket.conformance,
            adaptive: sh.bucket.adaptive,
            duration: sc.duration,
            warmup: sc.warmup,
            link_mode: if sh.shared_link { LinkMode::Shared } else { LinkMode::Ideal },
            sample_every: Some(sc.sample_every()),
            cache: sh.cache.then_some(CacheGeometry::KIM),
            max_events: sc.max_events,
            shards: sh.shards,
            ..KimParams::paper(l.queues)
        })
    }
}

/// Runs one replication of a `model = "kim"` scenario on up to `threads` threads (its shards
/// run in parallel; the result does not depend on `threads`).
pub fn run_scenario(
    sc: &crate::scenario::Scenario,
    seed: u64,
    threads: usize,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> Result<RunResult, KimRunError> {
    run_on(&KimParams::from_scenario(sc)?, seed, threads, interrupt, progress)
}

/// `model = "kim"`: the link model's queues shaped by token buckets (`[shaper]`).
pub struct KimScenario;

impl crate::scenario::ScenarioModel for KimScenario {
    fn name(&self) -> &'static str {
        "kim"
    }
    fn description(&self) -> &'static str {
        "N token-bucket-shaped queues, timers on per-core reschedule heaps (event-driven) or periodic fill, ideal or shared link (docs/kim.md)"
    }
    fn tables(&self) -> &'static [&'static str] {
        &["model", "run", "link", "queues", "traffic", "shaper"]
    }
    fn own_tables(&self) -> &'static [&'static str] {
        &["shaper"]
    }
    fn read(
        &self,
        root: &toml::Table,
        base_dir: &std::path::Path,
        probs: &mut Vec<crate::scenario::Problem>,
    ) -> Box<dyn crate::scenario::ModelSpec> {
        let (link, shaper) = crate::scenario::read_link(root, "kim", base_dir, probs);
        Box::new(crate::scenario::KimSpec { link, shaper: shaper.expect("read with model = \"kim\"") })
    }
}

impl crate::scenario::ModelSpec for crate::scenario::KimSpec {
    fn model(&self) -> &'static str {
        "kim"
    }
    fn resolved(&self, root: &mut toml::Table) {
        crate::scenario::link_to_toml(&self.link, Some(&self.shaper), root)
    }
    fn memory(&self, duration: Duration, sample: Duration) -> crate::scenario::MemoryEstimate {
        self.link.memory_estimate(Some(&self.shaper), duration, sample)
    }
    fn run(
        &self,
        sc: &crate::scenario::Scenario,
        seed: u64,
        threads: usize,
        interrupt: Option<Arc<AtomicBool>>,
        progress: crate::scenario::Progress<'_>,
    ) -> Result<RunResult, crate::scenario::ModelError> {
        use crate::scenario::ModelError;
        run_scenario(sc, seed, threads, interrupt, progress).map_err(|e| match e {
            KimRunError::Trace(t) => ModelError::Trace(t),
            other => ModelError::Bad(other.to_string()),
        })
    }
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
            conformance: Conformance::SendThenPay,
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
            shards: 1,
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
}

/// One group's random streams and core count (a shard simulates one group; the unsplit
/// reference all of them in one engine).
struct Group {
    size: StreamRng,
    gap: StreamRng,
    core: StreamRng,
    /// Cores of this group.
    cores: u32,
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
    /// The groups simulated here: local queue `l` is in slot `l % groups.len()`, and the
    /// slot's `k`-th core is local core `slot + groups.len() * k`.
    groups: Vec<Group>,
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
    /// End of the open sampling interval (ns; `u64::MAX` without sampling). An interval is
    /// closed when the first event after its end runs, so events at its very end belong to it.
    next_sample: u64,
    /// Reschedules per closed sampling interval.
    resched_per_interval: Vec<u64>,
    last_resched: u64,
    counts: Counts,
}

/// The packet counts of a run (or of one shard: they add up).
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    arrived: u64,
    sent_pkts: u64,
    sent_bytes: u64,
    dropped: u64,
    dropped_disabled: u64,
    /// Packets sent after the warm-up, and the sum of their delays.
    delay_pkts: u64,
    delay_sum_ns: u128,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.arrived += o.arrived;
        self.sent_pkts += o.sent_pkts;
        self.sent_bytes += o.sent_bytes;
        self.dropped += o.dropped;
        self.dropped_disabled += o.dropped_disabled;
        self.delay_pkts += o.delay_pkts;
        self.delay_sum_ns += o.delay_sum_ns;
    }
}

impl Kim {
    /// The slot in `groups` of local queue `qi`, and the number of slots.
    #[inline(always)]
    fn group_of(&self, qi: usize) -> (usize, usize) {
        let m = self.groups.len();
        (if m == 1 { 0 } else { qi % m }, m)
    }

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
    /// Under wait-for-tokens the packet may not conform: it stays at the head, the queue is
    /// throttled until the bucket will hold it, and the size returned is 0 (nothing sent).
    fn send_one(&mut self, qi: usize, engine: &mut Engine<Ev>) -> (u32, bool) {
        let queue = QueueId::from_index(qi);
        if self.p.conformance == Conformance::WaitForTokens {
            let size = self.pool.head(queue).expect("send_one is called on a non-empty queue").size;
            if size as u64 > self.p.cap_bytes {
                // It could never conform: dropped, as tbf drops it (the scenario reader refuses
                // synthetic sizes above the cap, so only trace sizes get here).
                self.pool.pop(queue);
                self.counts.dropped += 1;
                return (0, false);
            }
            if self.decide(qi, size, engine) {
                return (0, true);
            }
            let p = self.pool.pop(queue).expect("non-empty");
            self.count_sent(p.size, p.arrival.as_nanos(), engine.now().as_nanos());
            return (p.size, false);
        }
        let p = self.pool.pop(queue).expect("send_one is called on a non-empty queue");
        (p.size, self.send_packet(qi, p.size, p.arrival.as_nanos(), engine))
    }

    fn count_sent(&mut self, size: u32, arrival: u64, now_ns: u64) {
        self.counts.sent_pkts += 1;
        self.counts.sent_bytes += size as u64;
        if now_ns >= self.p.warmup.as_nanos() {
            self.counts.delay_pkts += 1;
            self.counts.delay_sum_ns += (now_ns - arrival) as u128;
        }
    }

    /// Sends a packet of `size` bytes from `qi` that arrived at `arrival` ns through the shaper
    /// (send-then-pay); returns whether the send throttled the queue.
    fn send_packet(&mut self, qi: usize, size: u32, arrival: u64, engine: &mut Engine<Ev>) -> bool {
        self.count_sent(size, arrival, engine.now().as_nanos());
        self.decide(qi, size, engine)
    }

    /// The shaper's decision on a packet of `size` bytes from `qi` now, under the run's
    /// conformance: send-then-pay (the packet is sent; returns whether that throttled the queue)
    /// or wait-for-tokens (returns whether the packet must wait: the queue is throttled until
    /// its bucket will hold it; otherwise it was paid for and is sent).
    fn decide(&mut self, qi: usize, size: u32, engine: &mut Engine<Ev>) -> bool {
        let now = engine.now();
        let wait = self.p.conformance == Conformance::WaitForTokens;
        let (queue, bytes) = (QueueId::from_index(qi), size as u64);
        match &mut self.shaper {
            Shaper::Event(_) => {
                let (slot, m) = self.group_of(qi);
                let g = &mut self.groups[slot];
                let c = slot + m * g.core.random_range(0..g.cores) as usize;
                self.core_touch(c, now.as_nanos());
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
                let core = CoreId::from_index(c);
                let d = if wait {
                    s.try_send_on(core, queue, bytes, now, &mut obs)
                } else {
                    s.on_send_on(core, queue, bytes, now, &mut obs)
                }
                .expect("cores and queues are in range, time does not go back, packets fit the cap");
                if log && heap_counters(s, 0).inserts > inserts0 {
                    if let Decision::Throttled { until } = d {
                        self.log.push(HeapOp::Insert { queue: qi as u32, time: until, now });
                    }
                }
                self.poll(c, now);
                self.core_done(c, engine);
                matches!(d, Decision::Throttled { .. })
            }
            Shaper::Periodic(s) => {
                let d = if wait { s.try_send(queue, bytes, now) } else { s.on_send(queue, bytes, now) }
                    .expect("queues are in range, time does not go back, packets fit the cap");
                match d {
                    Decision::Eligible => false,
                    Decision::Throttled { until } => {
                        engine.schedule(until, Ev::FillWake(qi as u32));
                        true
                    }
                }
            }
        }
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
        while let Some(queue) = self.ring.as_mut().expect("shared link mode").select(|_| 1) {
            let qi = queue.index();
            if self.pool.is_empty(queue) || !eligible(&self.shaper, queue) {
                // (A queue in the round is non-empty and eligible: only its own send changes
                // that. Kept as a guard.)
                let ring = self.ring.as_mut().expect("shared link mode");
                ring.dequeued(queue, true).expect("the queue select() named");
                continue;
            }
            let (size, throttled) = self.send_one(qi, engine);
            let ring = self.ring.as_mut().expect("shared link mode");
            ring.dequeued(queue, throttled || self.pool.is_empty(queue)).expect("the queue select() named");
            self.admit_work();
            if size == 0 {
                continue; // wait-for-tokens: the head packet did not conform; the next queue goes
            }
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

impl Kim {
    /// Closes every sampling interval that ended before `now` (ns).
    #[cold]
    fn close_samples(&mut self, now: u64) {
        let every = self.p.sample_every.map_or(u64::MAX, |e| e.as_nanos().max(1));
        let Shaper::Event(s) = &self.shaper else { return };
        while self.next_sample < now {
            let r = s.counters().reschedules;
            self.resched_per_interval.push(r - self.last_resched);
            self.last_resched = r;
            self.next_sample = self.next_sample.saturating_add(every);
        }
    }
}

impl Model for Kim {
    type Event = Ev;
    fn handle(&mut self, ev: Ev, engine: &mut Engine<Ev>) {
        if engine.now().as_nanos() > self.next_sample {
            self.close_samples(engine.now().as_nanos());
        }
        match ev {
            Ev::Arrival(q) => {
                let qi = q as usize;
                // The next arrival's bucket state starts loading while this one is decided.
                if let (Some(Ev::Arrival(next)), Shaper::Event(s)) = (engine.peek_cheap(), &self.shaper) {
                    s.prefetch(QueueId(*next));
                }
                let slot = self.group_of(qi).0;
                let g = &mut self.groups[slot];
                let size = self.p.sizes.sample(&mut g.size);
                let a = if self.arrivals.len() == 1 { 0 } else { qi };
                let mut gap = self.arrivals[a].next_gap(&mut g.gap);
                if self.p.overload_alt.is_some() {
                    gap = Duration::from_nanos((gap.as_nanos() as f64 * self.gap_factor(engine.now())).round() as u64);
                }
                let gap = gap.max(Duration::NANOSECOND);
                engine.schedule_in(gap, Ev::Arrival(q));
                self.counts.arrived += 1;
                if self.p.while_disabled == WhileDisabled::Drop && !self.eligible(qi) {
                    self.counts.dropped_disabled += 1;
                    return;
                }
                // Ideal link, eligible queue: its buffer is empty (an eligible queue is drained at
                // once), so the packet leaves now without being buffered.
                // (Dropping while disabled, the buffer is never used: no need to look at it.)
                if self.p.link_mode == LinkMode::Ideal
                    && self.p.conformance == Conformance::SendThenPay
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
                    self.counts.dropped += 1;
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

/// Builds and runs one kim simulation on one thread.
pub fn run(
    p: &KimParams,
    seed: u64,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> Result<RunResult, KimRunError> {
    run_on(p, seed, 1, interrupt, progress)
}

/// Builds and runs one kim simulation, its shards on up to `threads` threads. The result is
/// the same for every `threads`.
pub fn run_on(
    p: &KimParams,
    seed: u64,
    threads: usize,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> Result<RunResult, KimRunError> {
    run_with_log_on(p, seed, threads, interrupt, progress).map(|r| r.0)
}

/// [`run`], also returning core 0's heap operations when `p.log_core0` is set.
pub fn run_with_log(
    p: &KimParams,
    seed: u64,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> Result<(RunResult, Vec<HeapOp>), KimRunError> {
    run_with_log_on(p, seed, 1, interrupt, progress)
}

/// Checks that `p.shards` fits the queues, cores and link mode.
fn check_shards(p: &KimParams) -> Result<(), KimRunError> {
    let shards = p.shards;
    let why = if shards == 0 {
        "expected at least 1"
    } else if shards > p.queues.max(1) {
        "expected at most one shard per queue"
    } else if p.fill == Fill::EventDriven && shards > p.cores {
        "expected at most one shard per core (each shard has its own cores)"
    } else if shards > 1 && p.link_mode == LinkMode::Shared {
        "the shared link couples every queue: it needs shards = 1"
    } else {
        return Ok(());
    };
    Err(KimRunError::Shards { shards, why })
}

/// How many of `0..n` are `g` modulo `shards`.
fn members(n: u32, shards: u32, g: u32) -> u32 {
    if g >= n {
        0
    } else {
        (n - g).div_ceil(shards)
    }
}

fn run_with_log_on(
    p: &KimParams,
    seed: u64,
    threads: usize,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> Result<(RunResult, Vec<HeapOp>), KimRunError> {
    check_shards(p)?;
    let shards = p.shards as usize;
    let dur = p.duration.as_nanos().max(1);
    let workers = threads.clamp(1, shards);
    let mut outs = Vec::with_capacity(shards);
    if workers == 1 {
        for g in 0..shards {
            let base = g as u64 * dur;
            let mut each = |now: Instant| progress(Instant::from_nanos((base + now.as_nanos()) / shards as u64));
            outs.push(simulate(p, seed, Some(g as u32), interrupt.clone(), &mut each)?);
        }
    } else {
        // Workers take shards in index order; results are combined in index order, so the
        // outcome does not depend on which thread ran which shard. This thread reports progress.
        use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
        let next = AtomicUsize::new(0);
        let finished = AtomicUsize::new(0);
        let done_ns: Vec<AtomicU64> = (0..shards).map(|_| AtomicU64::new(0)).collect();
        let slots: std::sync::Mutex<Vec<Option<Result<ShardOut, KimRunError>>>> =
            std::sync::Mutex::new((0..shards).map(|_| None).collect());
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| loop {
                    let g = next.fetch_add(1, Ordering::Relaxed);
                    if g >= shards {
                        return;
                    }
                    let mut each = |now: Instant| done_ns[g].store(now.as_nanos(), Ordering::Relaxed);
                    let r = simulate(p, seed, Some(g as u32), interrupt.clone(), &mut each);
                    done_ns[g].store(dur, Ordering::Relaxed);
                    slots.lock().expect("no shard panicked")[g] = Some(r);
                    finished.fetch_add(1, Ordering::Relaxed);
                });
            }
            while finished.load(Ordering::Relaxed) < shards {
                let sum: u64 = done_ns.iter().map(|a| a.load(Ordering::Relaxed)).sum();
                progress(Instant::from_nanos(sum / shards as u64));
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        });
        for r in slots.into_inner().expect("no shard panicked") {
            outs.push(r.expect("every shard ran")?);
        }
    }
    Ok(combine(p, outs))
}

/// Runs every group of `p.shards` in one engine, unsplit: the reference the sharded run must
/// equal (tests).
#[cfg(test)]
pub(crate) fn run_unsplit(p: &KimParams, seed: u64) -> Result<RunResult, KimRunError> {
    check_shards(p)?;
    Ok(combine(p, vec![simulate(p, seed, None, None, &mut |_| {})?]).0)
}

/// What one shard measured, in countable form (combined by [`combine`]).
struct ShardOut {
    reason: StopReason,
    events: u64,
    end: u64,
    counts: Counts,
    timers: Option<TimerOut>,
    /// Periodic fill: throttles and fill accesses.
    periodic: Option<(u64, u64)>,
    log: Vec<HeapOp>,
}

/// The event-driven shaper's measurements of one shard.
struct TimerOut {
    counters: EventCounters,
    heap: HeapCounters,
    wheel: WheelCounters,
    index: Vec<u64>,
    misses: MissCounts,
    /// Sum over the shard's cores of heap size x time after the warm-up (node ns).
    heap_area: u128,
    heap_max: u64,
    resched_per_interval: Vec<u64>,
}

/// Simulates group `group` of `p.shards` (or, with `None`, every group in one engine).
fn simulate(
    p: &KimParams,
    seed: u64,
    group: Option<u32>,
    interrupt: Option<Arc<AtomicBool>>,
    progress: &mut dyn FnMut(Instant),
) -> Result<ShardOut, KimRunError> {
    let gs: Vec<u32> = match group {
        Some(g) => vec![g],
        None => (0..p.shards).collect(),
    };
    let (n, cores) = match group {
        Some(g) => (members(p.queues, p.shards, g) as usize, members(p.cores, p.shards, g) as usize),
        None => (p.queues as usize, p.cores as usize),
    };
    // Every queue's share of the whole link, whichever shard it is in.
    let share = p.link.share(p.queues as u64);
    let bucket = BucketParams { cir: share, cap_bytes: p.cap_bytes, alpha_bytes: p.alpha_bytes };
    let params = vec![bucket; n];
    let shaper = match p.fill {
        Fill::EventDriven => {
            let mut s = EventShaper::new(&params, cores, 0, p.tick_shift)?.with_timer(p.timer)?;
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
    let sampling = p.sample_every.filter(|_| p.fill == Fill::EventDriven);
    let mut m = Kim {
        p: p.clone(),
        shaper,
        pool: PacketPool::new(n as u32),
        arrivals: if proc.is_stateless() { vec![proc] } else { vec![proc; n] },
        groups: gs
            .iter()
            .map(|&g| Group {
                size: streams.stream("kim.sizes", g as u64),
                gap: streams.stream("kim.arrivals", g as u64),
                core: streams.stream("kim.cores", g as u64),
                cores: members(p.cores, p.shards, g),
            })
            .collect(),
        obs: IndexCounts::default(),
        timer_at: vec![u64::MAX; cores],
        heap_area: vec![0; cores],
        heap_last: vec![0; cores],
        heap_max: 0,
        work: Vec::new(),
        ring: (p.link_mode == LinkMode::Shared).then(|| Drr::round_robin(n as u32)),
        link_busy: false,
        caches: (0..cores)
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
        misses: MissCounts::new(p.locked_sizes.len()),
        log: Vec::new(),
        next_sample: sampling.map_or(u64::MAX, |e| e.as_nanos().max(1)),
        resched_per_interval: Vec::new(),
        last_resched: 0,
        counts: Counts::default(),
    };
    let mut engine = Engine::new();
    if let Some(f) = interrupt {
        engine = engine.with_interrupt(f);
    }
    // First arrivals at a uniformly random phase within one mean gap, so queues with constant
    // gaps are not in lockstep (drawn in queue order from each queue's group stream).
    let slots = m.groups.len();
    for q in 0..n {
        let rng = &mut m.groups[q % slots].gap;
        let g = Duration::from_nanos(rng.random_range(0..gap.as_nanos().max(1)));
        engine.schedule(Instant::ZERO + g, Ev::Arrival(q as u32));
    }
    let limits = RunLimits {
        until: Instant::ZERO + p.duration,
        max_events: if p.max_events == 0 { u64::MAX } else { p.max_events },
    };
    let reason = engine.run(&mut m, limits, progress);
    let end = engine.now().as_nanos();
    // Intervals that ended by the end time (the last one at it, like an event at that time).
    if m.next_sample <= end {
        m.close_samples(end.saturating_add(1));
    }
    let mut out = ShardOut {
        reason,
        events: engine.executed(),
        end,
        counts: m.counts,
        timers: None,
        periodic: None,
        log: std::mem::take(&mut m.log),
    };
    match &m.shaper {
        Shaper::Event(s) => {
            let w = p.warmup.as_nanos();
            for c in 0..cores {
                let from = m.heap_last[c].max(w);
                if end > from {
                    m.heap_area[c] += heap_len(s, c) as u128 * (end - from) as u128;
                }
            }
            out.timers = Some(TimerOut {
                counters: *s.counters(),
                heap: s.heap_counters(),
                wheel: s.wheel_counters(),
                index: std::mem::take(&mut m.obs.0),
                misses: m.misses.clone(),
                heap_area: m.heap_area.iter().sum(),
                heap_max: m.heap_max,
                resched_per_interval: std::mem::take(&mut m.resched_per_interval),
            });
        }
        Shaper::Periodic(s) => {
            out.periodic = Some((s.counters().throttles, s.fill_accesses(Instant::from_nanos(end))));
        }
    }
    Ok(out)
}

/// Adds `b` into `a` element by element (growing `a`).
fn add_into(a: &mut Vec<u64>, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// Combines the shards' measurements (in shard order) into the run's result. Counts add up;
/// per-core heap statistics span all cores of all shards: the maximum is the largest of the
/// shards' maxima, the mean is the summed size x time over the run's span and all `p.cores`.
fn combine(p: &KimParams, outs: Vec<ShardOut>) -> (RunResult, Vec<HeapOp>) {
    let end = outs.iter().map(|o| o.end).min().unwrap_or(0);
    let secs = (end as f64 * 1e-9).max(1e-12);
    let reason = outs.iter().map(|o| o.reason).find(|r| *r != StopReason::EndTime).unwrap_or(StopReason::EndTime);
    let sum = |f: fn(&ShardOut) -> u64| outs.iter().map(f).sum::<u64>();
    let mut r = RunResult {
        complete: outs.iter().all(|o| matches!(o.reason, StopReason::EndTime | StopReason::Drained)),
        stop_reason: format!("{reason:?}").to_lowercase(),
        events: sum(|o| o.events),
        sim_time_ns: end,
        ..Default::default()
    };
    let n = p.queues as usize;
    let share = p.link.share(p.queues as u64);
    let mut k = Counts::default();
    for o in &outs {
        k.add(&o.counts);
    }
    r.scalar("arrived_packets", k.arrived as f64, "packets");
    r.scalar("sent_packets", k.sent_pkts as f64, "packets");
    r.scalar("dropped_packets", k.dropped as f64, "packets");
    r.scalar("dropped_while_disabled", k.dropped_disabled as f64, "packets");
    r.scalar("rate_ratio", k.sent_bytes as f64 * 8.0 / secs / (share.bits_per_sec() as f64 * n as f64), "1");
    // Arrival to the start of transmission, for packets sent after the warm-up.
    r.scalar("mean_delay", if k.delay_pkts > 0 { k.delay_sum_ns as f64 / k.delay_pkts as f64 } else { 0.0 }, "ns");
    let mut log = Vec::new();
    let timers: Vec<&TimerOut> = outs.iter().filter_map(|o| o.timers.as_ref()).collect();
    if !timers.is_empty() {
        let mut c = EventCounters::default();
        let mut h = HeapCounters::default();
        let mut wc = WheelCounters::default();
        let mut index = Vec::new();
        let mut misses = MissCounts::new(p.locked_sizes.len());
        let mut resched: Vec<u64> = Vec::new();
        let (mut area, mut heap_max) = (0u128, 0u64);
        let shortest = timers.iter().map(|t| t.resched_per_interval.len()).min().unwrap_or(0);
        for t in &timers {
            c.add(&t.counters);
            h.add(&t.heap);
            wc.add(&t.wheel);
            add_into(&mut index, &t.index);
            misses.add(&t.misses);
            area += t.heap_area;
            heap_max = heap_max.max(t.heap_max);
            add_into(&mut resched, &t.resched_per_interval[..shortest]);
        }
        let heap = p.timer == Timer::Heap;
        r.scalar("reschedules", c.reschedules as f64, "1");
        if heap {
            r.scalar("heap_inserts", h.inserts as f64, "1");
            r.scalar("heap_deletes", h.deletes as f64, "1");
        } else {
            // The wheel's filings and releases (the same events as the heap's inserts and
            // deletes), its cascades and the entries it sorted into runs; it has no heap
            // array to account.
            r.scalar("heap_inserts", wc.inserts as f64, "1");
            r.scalar("heap_deletes", wc.deletes as f64, "1");
            r.scalar("wheel_cascaded", wc.cascaded as f64, "1");
            r.scalar("wheel_sorted", wc.sorted as f64, "1");
        }
        r.scalar("deferred", c.deferred as f64, "1");
        r.scalar("bucket_accesses", c.bucket_accesses as f64, "1");
        if heap {
            let total: u64 = index.iter().sum();
            r.scalar("heap_accesses", total as f64, "1");
            for &l in &p.locked_sizes {
                let first = (l / NODE_BYTES) as usize;
                let off: u64 = index.iter().skip(first).sum();
                r.scalar(&format!("offchip_{}KB", l / 1024), off as f64, "1");
            }
        }
        let span = end.saturating_sub(p.warmup.as_nanos()).max(1) as f64;
        r.scalar("heap_mean_per_core", area as f64 / (span * p.cores as f64), "nodes");
        r.scalar("heap_max_per_core", heap_max as f64, "nodes");
        if heap {
            r.scalar("compares_per_op", h.compares as f64 / (h.inserts + h.deletes).max(1) as f64, "1");
            r.scalar("moves_per_op", h.moves as f64 / (h.inserts + h.deletes).max(1) as f64, "1");
        }
        if p.cache.is_some() {
            let mc = &misses;
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
        if !resched.is_empty() {
            let every = p.sample_every.map_or(1, |e| e.as_nanos().max(1));
            r.series.push(crate::results::Series {
                name: "reschedules_per_queue".into(),
                x_unit: "s".into(),
                unit: "reschedules per queue per interval".into(),
                points: resched
                    .iter()
                    .enumerate()
                    .map(|(k, &x)| (Instant::from_nanos((k as u64 + 1) * every).as_secs_f64(), x as f64 / n as f64))
                    .collect(),
            });
        }
    }
    let periodic: Vec<(u64, u64)> = outs.iter().filter_map(|o| o.periodic).collect();
    if !periodic.is_empty() {
        r.scalar("throttles", periodic.iter().map(|x| x.0).sum::<u64>() as f64, "1");
        r.scalar("fill_accesses", periodic.iter().map(|x| x.1).sum::<u64>() as f64, "1");
    }
    // Core 0 is group 0's first core: the first shard's log.
    if let Some(o) = outs.into_iter().next() {
        log = o.log;
    }
    (r, log)
}

#[cfg(test)]
mod tests;
