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

use crate::engine::calendar::Calendar;
use crate::engine::{Engine, EventKey, Model, RunLimits, StopReason};
use crate::results::RunResult;
use crate::rng::{RngStreams, StreamRng};
use crate::workload::{mean_gap_for_overload, Arrivals, GapDist, SizeDist};
use npqos_core::cache::SetAssocCache;
use npqos_core::pipeline::Shaping;
use npqos_core::queues::pool::{Packet, PacketPool};
use npqos_core::sched::drr::Drr;
use npqos_core::shaper::heap::HeapCounters;
use npqos_core::shaper::wheel::WheelCounters;
use npqos_core::shaper::{
    Adaptive, BucketParams, Conformance, Decision, EventCounters, EventShaper, PeriodicShaper, ShaperError, Timer,
};
use npqos_core::{CoreId, Duration, Instant, QueueId, Rate};
use rand::Rng;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

mod observe;
mod run;
mod scenario;
use observe::{CoreObs, IndexCounts, MissCounts};
#[cfg(test)]
use run::run_unsplit;
pub use run::{run, run_on, run_with_log};
pub use scenario::{run_scenario, KimScenario};

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

/// Whether an engine of `n` queues keeps their next arrivals in a [`Calendar`] rather than
/// queued as events: always, but a test may set a limit (0: every arrival queued), so that small
/// scenarios can run both ways. Each queue has exactly one arrival pending, about `queues`
/// arrivals' worth of time ahead: the calendar files it at the end of its slot's chunks and
/// reads it back in order, where the engine's queue pays a push, a pop and two or three moves
/// between its levels. Its memory is the members' (16 B each and a partly filled chunk a slot);
/// one engine of 1e6 queues ran in 0.70 of the queue's time (median of 3 pairs) and 91 MB
/// against 127 MB (docs/PERFORMANCE.md).
fn calendar_for(n: usize) -> bool {
    #[cfg(test)]
    return n <= tests::CALENDAR_LIMIT.with(|c| c.get());
    #[cfg(not(test))]
    {
        let _ = n;
        true
    }
}

/// The queued events.
#[derive(Clone, Copy, Debug)]
pub enum Ev {
    /// A queue's next arrival, queued (only in tests, as the reference the calendar must
    /// equal; otherwise arrivals are the engine's source: [`Kim::next_arrival`]).
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

struct Kim {
    p: KimParams,
    shaper: Shaping,
    /// Each local queue's next arrival: the engine key ([`EventKey::packed`]) of its ticket,
    /// taken when it was drawn, the earliest on top. The engine runs them as its source
    /// ([`Model::next_source_key`]), exactly where they would have run as queued events.
    /// `None` in a test's reference run ([`calendar_for`]), and arrivals are queued events.
    next_arrival: Option<Calendar>,
    /// The buffered packets (used when packets wait: a shared link, or queueing while disabled).
    pool: PacketPool,
    arrivals: Vec<Arrivals>,
    /// The groups simulated here: local queue `l` is in slot `l % groups.len()`, and the
    /// slot's `k`-th core is local core `slot + groups.len() * k`.
    groups: Vec<Group>,
    obs: IndexCounts,
    timer_at: Vec<u64>,
    /// Per core, its heap's size integrated over time.
    heap_area: Vec<HeapArea>,
    heap_max: u64,
    work: Vec<u32>,
    /// Whether packets ever wait in `pool` (otherwise every packet is sent or dropped as it
    /// arrives: an ideal link, send-then-pay, arrivals to a disabled queue dropped; then a
    /// re-enabled queue is always empty and the work list is not kept).
    buffers: bool,
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

    /// Core `c`'s heap area up to `now`, at the size its heap's last change left: call it when
    /// the heap may have changed at `now` (before or after the change), before [`Self::core_done`]
    /// records the new size.
    fn core_touch(&mut self, c: usize, now: u64) {
        self.heap_area[c].advance(now, self.p.warmup.as_nanos());
    }
    /// (Tests.) The size the heap area runs at is core `c`'s heap's: every change went through
    /// [`Self::core_done`].
    #[cfg(test)]
    fn check_area(&self, c: usize) {
        if let Shaping::Event(s) = &self.shaper {
            assert_eq!(self.heap_area[c].len, s.waiting(CoreId::from_index(c)) as u64, "core {c}'s heap area");
        }
    }
    /// After core `c`'s heap changed (or may have): its size taken for the area from now on,
    /// the maximum, and the core's timer.
    fn core_done(&mut self, c: usize, engine: &mut Engine<Ev>) {
        if let Shaping::Event(s) = &self.shaper {
            let core = CoreId::from_index(c);
            let len = s.waiting(core) as u64;
            self.heap_area[c].len = len;
            self.heap_max = self.heap_max.max(len);
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
        let (queue, bytes) = (QueueId::from_index(qi), size as u64);
        match &self.shaper {
            Shaping::Event(_) => {
                let (slot, m) = self.group_of(qi);
                let g = &mut self.groups[slot];
                // rand's `random_range(0..cores)`, inlined (a group has a core or more).
                let c = slot + m * crate::rng::range_u32(&mut g.core, 0, g.cores - 1) as usize;
                #[cfg(test)]
                self.check_area(c);
                let log = c == 0 && self.p.log_core0;
                let inserts0 = if log { self.heap_inserts(0) } else { 0 };
                // Algorithm 1 line 6 reads and writes the queue's bucket state (tokens and T_lu,
                // 16 B) through the same data cache as the heap (a separate address region).
                let caches = &mut self.caches[c];
                for cache in caches.iter_mut() {
                    let a = BUCKET_REGION + qi as u64 * 16;
                    cache.access(a, false);
                    cache.access(a, true);
                }
                let Shaping::Event(s) = &mut self.shaper else { unreachable!("matched above") };
                let mut obs = CoreObs { counts: &mut self.obs, caches, misses: &mut self.misses };
                // A send that leaves the core's heap as it was, with nothing due on it: the poll
                // reads the root and finds nothing, and the heap's size, earliest time and so
                // this core's timer are what the event that last changed them left. (With the
                // log, the poll is made in full, to be logged.)
                let core = CoreId::from_index(c);
                let wait = self.p.conformance == Conformance::WaitForTokens;
                let (d, idle) = (s.send_and_poll_idle(core, queue, bytes, now, wait, !log, &mut obs))
                    .expect("cores and queues are in range, time does not go back, packets fit the cap");
                if idle {
                    return false;
                }
                // The heap may have changed just now (an insert): its area up to now is at the
                // size the last change left, which an idle send does not touch.
                self.core_touch(c, now.as_nanos());
                if log && self.heap_inserts(0) > inserts0 {
                    if let Decision::Throttled { until } = d {
                        self.log.push(HeapOp::Insert { queue: qi as u32, time: until, now });
                    }
                }
                self.poll(c, now);
                self.core_done(c, engine);
                matches!(d, Decision::Throttled { .. })
            }
            Shaping::Periodic(_) | Shaping::None => {
                let d = (self.shaper.decide(CoreId(0), queue, bytes, now, self.p.conformance, &mut ()))
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
            Shaping::Event(s) => heap_counters(s, c).inserts,
            Shaping::Periodic(_) | Shaping::None => 0,
        }
    }

    /// Algorithm 1 lines 16-19 on core `c` (event-driven shaper).
    fn poll(&mut self, c: usize, now: Instant) {
        let Shaping::Event(s) = &mut self.shaper else { return };
        let (work, buffers) = (&mut self.work, self.buffers);
        let mut obs = CoreObs { counts: &mut self.obs, caches: &mut self.caches[c], misses: &mut self.misses };
        s.poll_core(CoreId::from_index(c), now, &mut obs, |r| {
            if buffers {
                work.push(r.0)
            }
        })
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

/// A heap's size integrated over time (ns x queues), after the warm-up. It is brought up to
/// date only at an instant the heap may have changed, at the size the last change left
/// ([`HeapArea::advance`]), and told the new size after (`len`): a send that leaves the heap as
/// it was (most of them) does not touch it, and the sum is what advancing it at every event
/// would give.
#[derive(Clone, Copy, Debug, Default)]
struct HeapArea {
    sum: u128,
    /// The time up to which `sum` is taken.
    since: u64,
    /// The heap's size since then.
    len: u64,
}

impl HeapArea {
    /// Takes the area up to `now` (ns), counting only what lies after `warmup`.
    #[inline]
    fn advance(&mut self, now: u64, warmup: u64) {
        let from = self.since.max(warmup);
        if now > from {
            self.sum += self.len as u128 * (now - from) as u128;
        }
        self.since = now;
    }
}

/// Whether the shaper lets `q` send now.
#[inline]
fn eligible(shaper: &Shaping, q: QueueId) -> bool {
    !shaper.is_disabled(q)
}

fn heap_counters(s: &EventShaper, c: usize) -> npqos_core::shaper::heap::HeapCounters {
    s.heap(CoreId::from_index(c)).map(|h| *h.counters()).unwrap_or_default()
}

impl Kim {
    /// Closes every sampling interval that ended before `now` (ns).
    #[cold]
    fn close_samples(&mut self, now: u64) {
        let every = self.p.sample_every.map_or(u64::MAX, |e| e.as_nanos().max(1));
        let Shaping::Event(s) = &self.shaper else { return };
        while self.next_sample < now {
            let r = s.counters().reschedules;
            self.resched_per_interval.push(r - self.last_resched);
            self.last_resched = r;
            self.next_sample = self.next_sample.saturating_add(every);
        }
    }
}

impl Kim {
    /// The arrival of queue `q` now: its next arrival is drawn and takes its place (in the
    /// calendar, or queued), then this one is sent, dropped or buffered.
    #[inline]
    fn arrive(&mut self, q: u32, engine: &mut Engine<Ev>) {
        let qi = q as usize;
        let slot = self.group_of(qi).0;
        let g = &mut self.groups[slot];
        let size = self.p.sizes.sample(&mut g.size);
        let a = if self.arrivals.len() == 1 { 0 } else { qi };
        let mut gap = self.arrivals[a].next_gap(&mut g.gap);
        if self.p.overload_alt.is_some() {
            gap = Duration::from_nanos((gap.as_nanos() as f64 * self.gap_factor(engine.now())).round() as u64);
        }
        let gap = gap.max(Duration::NANOSECOND);
        // The next arrival of this queue takes its place in the engine's order now. Then the
        // next arrival's bucket state starts loading while this one is decided.
        let next = match &mut self.next_arrival {
            Some(t) => {
                t.replace_top(engine.ticket(engine.now() + gap, 0).packed());
                Some(t.top())
            }
            None => {
                engine.schedule_in(gap, Ev::Arrival(q));
                match engine.peek_cheap() {
                    Some(&Ev::Arrival(next)) => Some(next),
                    _ => None,
                }
            }
        };
        if let (Some(next), Shaping::Event(s)) = (next, &self.shaper) {
            s.prefetch(QueueId(next));
        }
        self.counts.arrived += 1;
        let eligible = self.eligible(qi);
        if self.p.while_disabled == WhileDisabled::Drop && !eligible {
            self.counts.dropped_disabled += 1;
            return;
        }
        // Ideal link, eligible queue: its buffer is empty (an eligible queue is drained at
        // once), so the packet leaves now without being buffered.
        // (Dropping while disabled, the buffer is never used: no need to look at it.)
        if self.p.link_mode == LinkMode::Ideal
            && self.p.conformance == Conformance::SendThenPay
            && (self.p.while_disabled == WhileDisabled::Drop || self.pool.is_empty(QueueId::from_index(qi)))
            && eligible
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
        if eligible {
            self.work.push(q);
            self.serve(engine);
        }
    }
}

impl Model for Kim {
    type Event = Ev;
    /// An arrival seldom pushes an event (a core's timer when its heap changed; with the
    /// periodic shaper a fill's wake-up, with the shared link its end of transmission; the
    /// calendar's tickets are not pushes): arrivals run in a row.
    const SOURCE_ROWS: bool = true;
    #[inline]
    fn next_source(&mut self) -> Option<(Instant, u8)> {
        self.next_source_key().map(|k| (k.time(), k.class()))
    }
    #[inline(always)]
    fn next_source_key(&mut self) -> Option<EventKey> {
        #[cfg(test)]
        if !tests::TICKETS.with(|c| c.get()) {
            // A test's negative control: the old rule, a source event after the queued ones.
            let k = EventKey::from_packed(self.next_arrival.as_ref()?.top_key());
            return Some(EventKey::after_queued(k.time(), k.class()));
        }
        self.next_arrival.as_ref().map(|t| EventKey::from_packed(t.top_key()))
    }
    fn source(&mut self, engine: &mut Engine<Ev>) {
        if engine.now().as_nanos() > self.next_sample {
            self.close_samples(engine.now().as_nanos());
        }
        let q = self.next_arrival.as_ref().expect("a source event comes from the calendar").top();
        self.arrive(q, engine);
    }
    fn handle(&mut self, ev: Ev, engine: &mut Engine<Ev>) {
        if engine.now().as_nanos() > self.next_sample {
            self.close_samples(engine.now().as_nanos());
        }
        match ev {
            Ev::Arrival(q) => self.arrive(q, engine),
            Ev::CoreTimer(c) => {
                let c = c as usize;
                let now = engine.now();
                if self.timer_at[c] != now.as_nanos() {
                    return; // superseded
                }
                self.timer_at[c] = u64::MAX;
                #[cfg(test)]
                self.check_area(c);
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
                let Shaping::Periodic(s) = &mut self.shaper else { return };
                if s.poll_queue(QueueId(q), engine.now()).expect("queues are in range and time does not go back") {
                    self.work.push(q);
                    self.serve(engine);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
