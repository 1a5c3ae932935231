//! The router's ingress queueing (stage 3) and queue memory (stage 5), each a core mechanism
//! or its baseline behind one small enum, so the pipeline ([`super::sim`]) calls them the same
//! way whichever is configured.

use npqos_core::flow::FlowKey;
use npqos_core::flowmap::{Dqs, DqsConfig, DropReason, Enqueue, Exhausted, HashKind, SlotHash};
use npqos_core::queues::cache::{DataCache, EntryCache};
use npqos_core::queues::model::serial_ns;
use npqos_core::queues::timing::{traffic, Op, Subsystem, Timing};
use npqos_core::QueueId;
use std::collections::HashMap;

/// Stage 3's choice; its sizes (queues, slots, hash, blocks, block size) are the flow
/// table's keys, [`DqsConfig`], read once for the router, the dqs model and npqos live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IngressKind {
    /// Dynamic queue sharing: the AFM table over `slots` slots, a pool of `queues` physical
    /// queues taken by a flow's first packet and returned when its queue empties.
    Dqs,
    /// The brute-force baseline: an exact-match table with one entry and one queue per flow
    /// (up to `queues` flows with packets at once), found in one access.
    PerFlow,
    /// `queues` queues per service, a flow's queue chosen by a hash of its 5-tuple; flows that
    /// collide share a queue (as fq_codel's buckets).
    Hashed,
}

npqos_core::named!(IngressKind, "ingress kind", { Dqs => "dqs", PerFlow => "per-flow", Hashed => "hashed" });

/// Why stage 3 refused a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IngressDrop {
    /// The shared block buffer has no room for the packet.
    BufferFull,
    /// A new flow found no free queue (dqs pool or per-flow table exhausted).
    NoQueue,
}

/// Ingress queueing: maps a packet to a queue and holds its blocks until a processor takes it.
pub enum Ingress {
    /// The table and its mapping accesses so far.
    Dqs(Box<Dqs>, u64),
    /// Per-flow table and hashed queues: the mapping, per-queue packet counts and bytes, and
    /// the same block accounting as dqs's buffer.
    Table(Table),
}

pub struct Table {
    per_flow: bool,
    /// Per-flow: flow -> (queue, packets queued); its queue goes back to the free list when
    /// the flow has no packet left.
    map: HashMap<FlowKey, (u32, u32)>,
    /// Per-flow: the flow of each queue in use.
    owner: Vec<Option<FlowKey>>,
    free: Vec<u32>,
    /// Hashed: queues per service and the hash.
    per_service: u32,
    hash: SlotHash,
    /// Per queue: packets and blocks held (FIFO lengths, for dequeue).
    lens: Vec<std::collections::VecDeque<u32>>,
    blocks_free: u64,
    block_size: u32,
    in_use: u32,
    max_in_use: u32,
    accesses: u64,
}

impl Ingress {
    /// `table`'s queues and its blocks of `table.block_size` bytes shared by all queues (its
    /// DRR quantum and `on_exhausted` are not the router's: the services' schedulers serve the
    /// queues, and a flow without a queue is dropped); `services` services (hashed queues are
    /// per service). `seed` keys dqs's and the hashed queues' hash.
    pub fn new(kind: IngressKind, table: &DqsConfig, services: usize, seed: u64) -> Result<Self, String> {
        let DqsConfig { queues, blocks, block_size, .. } = *table;
        match kind {
            IngressKind::Dqs => {
                let hash = match table.hash {
                    HashKind::H3 { .. } => HashKind::H3 { seed },
                    HashKind::Fast { .. } => HashKind::Fast { seed },
                };
                let cfg = DqsConfig {
                    slots: table.slots,
                    hash,
                    queues,
                    blocks,
                    block_size,
                    on_exhausted: Exhausted::Drop,
                    caller_schedules: true,
                    ..Default::default()
                };
                Ok(Ingress::Dqs(Box::new(Dqs::new(cfg).map_err(|e| e.to_string())?), 0))
            }
            IngressKind::PerFlow | IngressKind::Hashed => {
                let per_flow = kind == IngressKind::PerFlow;
                let total = if per_flow { queues as usize } else { queues as usize * services };
                if total == 0 || total >= u32::MAX as usize || block_size == 0 {
                    return Err(format!("{kind} ingress: {total} queues of {block_size} B blocks"));
                }
                Ok(Ingress::Table(Table {
                    per_flow,
                    map: HashMap::new(),
                    owner: if per_flow { vec![None; total] } else { Vec::new() },
                    free: if per_flow { (0..queues).rev().collect() } else { Vec::new() },
                    per_service: queues,
                    hash: SlotHash::new(HashKind::Fast { seed }, queues.max(1)).expect("at least one slot"),
                    lens: vec![Default::default(); total],
                    blocks_free: blocks as u64,
                    block_size,
                    in_use: 0,
                    max_in_use: 0,
                    accesses: 0,
                }))
            }
        }
    }

    /// Queue ids are `0..queues()`.
    pub fn queues(&self) -> u32 {
        match self {
            Ingress::Dqs(d, _) => d.config().queues,
            Ingress::Table(t) => t.lens.len() as u32,
        }
    }

    /// Queues the packet of `len` bytes of flow `key` (of service `service`).
    pub fn enqueue(&mut self, key: &FlowKey, service: usize, len: u32) -> Result<QueueId, IngressDrop> {
        match self {
            Ingress::Dqs(d, acc) => match d.enqueue(key, len, None) {
                Enqueue::Queued(q) => {
                    *acc += 1 + q.compares as u64;
                    Ok(q.queue)
                }
                Enqueue::Dropped { reason, compares, .. } => {
                    *acc += 1 + compares as u64;
                    Err(match reason {
                        DropReason::BufferFull => IngressDrop::BufferFull,
                        DropReason::NoQueue => IngressDrop::NoQueue,
                        // The router sets no per-queue limit: its queues share the buffer.
                        DropReason::QueueFull => IngressDrop::BufferFull,
                    })
                }
            },
            Ingress::Table(t) => t.enqueue(key, service, len),
        }
    }

    /// Takes the head packet of `q`; returns its length.
    pub fn dequeue(&mut self, q: QueueId) -> Option<u32> {
        match self {
            Ingress::Dqs(d, acc) => {
                let x = d.dequeue_queue(q, None).ok().flatten()?;
                *acc += x.flow_released as u64 + x.delete_steps as u64;
                Some(x.len)
            }
            Ingress::Table(t) => t.dequeue(q),
        }
    }

    /// Queues holding packets now, and at most so far.
    pub fn in_use(&self) -> (u32, u32) {
        match self {
            Ingress::Dqs(d, _) => (d.buffer().queues_in_use(), d.buffer().max_queues_in_use()),
            Ingress::Table(t) => (t.in_use, t.max_in_use),
        }
    }

    /// Mapping-table accesses so far: dqs's AFM node comparisons of each search plus one slot
    /// read per packet, and one access plus the pointer steps of each deletion; one per lookup and one per release for the
    /// per-flow table; none for hashed queues (the hash is computed, not looked up).
    pub fn table_accesses(&self) -> u64 {
        match self {
            Ingress::Dqs(_, acc) => *acc,
            Ingress::Table(t) => t.accesses,
        }
    }

    /// State of the mapping and the queues, bytes (docs/router.md, "State bytes"): dqs 4 B per
    /// slot, 32 B per AFM node at the peak of active flows, 8 B per physical queue; the
    /// per-flow table 32 B per entry for every flow it must hold; hashed queues 8 B each.
    pub fn state_bytes(&self) -> u64 {
        match self {
            Ingress::Dqs(d, _) => {
                let c = d.config();
                c.slots as u64 * 4 + d.buffer().max_queues_in_use() as u64 * 32 + c.queues as u64 * 8
            }
            Ingress::Table(t) if t.per_flow => t.lens.len() as u64 * 32,
            Ingress::Table(t) => t.lens.len() as u64 * 8,
        }
    }
}

impl Table {
    fn blocks_for(&self, len: u32) -> u64 {
        (len.max(1) as u64).div_ceil(self.block_size as u64)
    }

    fn enqueue(&mut self, key: &FlowKey, service: usize, len: u32) -> Result<QueueId, IngressDrop> {
        let blocks = self.blocks_for(len);
        if !self.per_flow {
            let q = service as u32 * self.per_service + self.hash.slot(key);
            if blocks > self.blocks_free {
                return Err(IngressDrop::BufferFull);
            }
            self.push(q, len, blocks);
            return Ok(QueueId(q));
        }
        self.accesses += 1;
        let q = match self.map.get_mut(key) {
            Some(e) => {
                if blocks > self.blocks_free {
                    return Err(IngressDrop::BufferFull);
                }
                e.1 += 1;
                e.0
            }
            None => {
                if blocks > self.blocks_free {
                    return Err(IngressDrop::BufferFull);
                }
                let Some(q) = self.free.pop() else { return Err(IngressDrop::NoQueue) };
                self.map.insert(*key, (q, 1));
                self.owner[q as usize] = Some(*key);
                q
            }
        };
        self.push(q, len, blocks);
        Ok(QueueId(q))
    }

    fn push(&mut self, q: u32, len: u32, blocks: u64) {
        let l = &mut self.lens[q as usize];
        if l.is_empty() {
            self.in_use += 1;
            self.max_in_use = self.max_in_use.max(self.in_use);
        }
        l.push_back(len);
        self.blocks_free -= blocks;
    }

    fn dequeue(&mut self, q: QueueId) -> Option<u32> {
        let len = self.lens.get_mut(q.index())?.pop_front()?;
        self.blocks_free += self.blocks_for(len);
        if self.lens[q.index()].is_empty() {
            self.in_use -= 1;
        }
        if self.per_flow {
            let key = self.owner[q.index()].expect("a per-flow queue with packets has its flow");
            let e = self.map.get_mut(&key).expect("the flow of a queue in use is mapped");
            e.1 -= 1;
            if e.1 == 0 {
                self.map.remove(&key);
                self.owner[q.index()] = None;
                self.free.push(q.0);
                self.accesses += 1;
            }
        }
        Some(len)
    }
}

/// Stage 5's choice: an ideal (zero-cost) queue memory or one of qcache's subsystems.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QmemParams {
    /// `None`: ideal.
    pub subsystem: Option<Subsystem>,
    pub timing: Timing,
    /// Descriptor entries of sqc's and qc's cache.
    pub entries: u32,
    /// dc's lines and ways.
    pub dc_lines: u32,
    pub dc_ways: u32,
    /// External-memory references per ns (qcache: 200 MHz, one per cycle: 0.2).
    pub memory_refs_per_ns: f64,
}

/// Counters of the queue memory.
#[derive(Clone, Copy, Debug, Default)]
pub struct QmemCounters {
    pub ops: u64,
    pub hits: u64,
    pub memory_refs: u64,
    pub interconnect: u64,
    /// Time operations waited for their queue (held by the previous operation on it) or the
    /// memory port, ns.
    pub wait_ns: u64,
}

/// The queue-descriptor memory as one shared, contended resource: every enqueue and dequeue of
/// a descriptor (ingress and egress) is an operation of the configured subsystem, with
/// qcache's unloaded latency for a hit or a miss (`Timing::latency_ns`), the subsystem's cache
/// deciding hits, and two kinds of serialization: an operation waits until the previous one on
/// the same queue released it (`serial_ns`: qc holds a queue for its engine's memory
/// references only, the others for the whole operation), and external-memory references go
/// through one port at `memory_refs_per_ns`, in the order operations are issued. The two
/// waits overlap: an operation starts when both its queue and its turn at the port are free,
/// so one busy queue never blocks the port for the others.
pub struct Qmem {
    p: QmemParams,
    cache: QmemCache,
    queue_free: Vec<u64>,
    mem_free: f64,
    /// (latency, hold) ns, by [op][hit].
    cost: [[(u64, u64); 2]; 2],
    /// (interconnect transactions, memory references), by [op][hit][writeback]: `traffic`
    /// walks the operation's program, so it is computed once here rather than per operation.
    refs: [[[(u32, u32); 2]; 2]; 2],
    pub counters: QmemCounters,
}

enum QmemCache {
    None,
    Entry(EntryCache),
    Data(DataCache),
}

impl Qmem {
    /// A queue memory for queues `0..queues`.
    pub fn new(p: QmemParams, queues: u32) -> Result<Self, String> {
        let cache = match p.subsystem {
            Some(Subsystem::Sqc | Subsystem::Qc) => {
                QmemCache::Entry(EntryCache::new(p.entries, queues).map_err(|e| e.to_string())?)
            }
            Some(Subsystem::Dc) => {
                QmemCache::Data(DataCache::new(p.dc_lines, p.dc_ways, queues).map_err(|e| e.to_string())?)
            }
            _ => QmemCache::None,
        };
        let mut cost = [[(0, 0); 2]; 2];
        let mut refs = [[[(0, 0); 2]; 2]; 2];
        if let Some(sub) = p.subsystem {
            for (i, op) in [Op::Enqueue, Op::Dequeue].into_iter().enumerate() {
                for (j, hit) in [false, true].into_iter().enumerate() {
                    let lat = p.timing.latency_ns(sub, op, hit).ceil() as u64;
                    let hold = serial_ns(&p.timing, sub, op, hit).ceil() as u64;
                    cost[i][j] = (lat, hold);
                    for (k, writeback) in [false, true].into_iter().enumerate() {
                        refs[i][j][k] = traffic(sub, op, hit, writeback);
                    }
                }
            }
        }
        let n = if p.subsystem.is_some() { queues as usize } else { 0 };
        Ok(Qmem { p, cache, queue_free: vec![0; n], mem_free: 0.0, cost, refs, counters: QmemCounters::default() })
    }

    pub fn is_ideal(&self) -> bool {
        self.p.subsystem.is_none()
    }

    /// An operation on queue `q` issued at `now_ns`; returns when it completes.
    pub fn op(&mut self, now_ns: u64, q: u32, op: Op) -> u64 {
        if self.p.subsystem.is_none() {
            return now_ns;
        }
        self.counters.ops += 1;
        let (hit, writeback) = match &mut self.cache {
            QmemCache::None => (false, false),
            QmemCache::Entry(c) => {
                let l = c.acquire(QueueId(q)).expect("queue ids are in range and nothing stays pinned");
                c.release(l.entry).expect("just pinned");
                (l.hit, l.evicted.is_some())
            }
            QmemCache::Data(c) => {
                let a = c.access(QueueId(q), op, true).expect("queue ids are in range");
                (a.hit, a.writeback)
            }
        };
        self.counters.hits += hit as u64;
        let o = (op == Op::Dequeue) as usize;
        let (ic, refs) = self.refs[o][hit as usize][writeback as usize];
        self.counters.interconnect += ic as u64;
        self.counters.memory_refs += refs as u64;
        let (lat, hold) = self.cost[o][hit as usize];
        // The port serves references in issue order; the queue's hold applies on its own (an
        // operation waiting for a busy queue does not hold up the port for other queues).
        let port = (now_ns as f64).max(self.mem_free);
        self.mem_free = port + refs as f64 / self.p.memory_refs_per_ns;
        let begin = (port.ceil() as u64).max(self.queue_free[q as usize]);
        self.counters.wait_ns += begin - now_ns;
        self.queue_free[q as usize] = begin + hold;
        begin + lat
    }

    /// A hint that queue `q` is about to be operated on: starts loading its state.
    #[inline]
    pub fn prefetch(&self, q: u32) {
        npqos_core::hint::prefetch(&self.queue_free, q as usize);
        if let QmemCache::Entry(c) = &self.cache {
            c.prefetch(QueueId(q));
        }
    }

    /// Descriptor state: 8 B per queue off chip, and the on-chip cache (8 B per entry or line).
    pub fn state_bytes(&self) -> u64 {
        let on_chip = match self.p.subsystem {
            Some(Subsystem::Sqc | Subsystem::Qc) => self.p.entries as u64 * 8,
            Some(Subsystem::Dc) => self.p.dc_lines as u64 * self.p.dc_ways as u64 * 8,
            _ => 0,
        };
        self.queue_free.len() as u64 * 8 + on_chip
    }
}
