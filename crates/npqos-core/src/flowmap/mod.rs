//! Dynamic queue sharing (paper `dqs`, Hu, Tang, Chen and Liu): per-flow queueing with a few
//! hundred physical queues instead of one per in-progress flow.
//!
//! A physical queue is given to a flow when its first packet arrives and taken back when the
//! queue empties (dqs section 3). The active flow mapping ([`afm::AfmTable`]: `M` hashed slots,
//! each a binary search tree) finds a packet's queue; packets are stored as chains of
//! fixed-size blocks ([`buffer::QueueBuffer`]); deficit round robin ([`crate::sched::drr::Drr`]) serves the
//! active queues. [`theory`] has the paper's Lemma 1, Theorems 1-2 and eq 5.
//!
//! [`Dqs`] puts them together as a flow table a data plane can use: [`Dqs::enqueue`] with a
//! flow key and a length (and optionally the bytes), [`Dqs::dequeue`] for the next packet on
//! the wire. No allocation per packet once the node arena has grown to the peak number of
//! active flows.
//!
//! On the mechanism contract (ARCHITECTURE.md): queues are [`QueueId`]s, outcomes are returned
//! as values ([`Enqueue`], [`Dequeued`]), a configuration out of range is a [`crate::Error`]
//! from [`Dqs::new`], and nothing a caller passes makes it panic (any key, any length: a packet
//! larger than the free blocks is a counted drop). dqs has no timers and no decision depends
//! on time, so its calls take no `now`.
//!
//! ```
//! use npqos_core::flowmap::{Dqs, DqsConfig, Enqueue};
//! use npqos_core::flow::{FlowKey, PROTO_UDP};
//! let mut dqs = Dqs::new(DqsConfig { queues: 2, ..Default::default() }).unwrap();
//! let a = FlowKey::new("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), PROTO_UDP, 1, 2);
//! let Enqueue::Queued(e) = dqs.enqueue(&a, 100, None) else { panic!() };
//! assert!(e.new_flow);
//! assert_eq!(dqs.active_flows(), 1);
//! let d = dqs.dequeue(None).unwrap();
//! assert!(d.flow_released && d.queue_released);
//! assert_eq!(dqs.active_flows(), 0);
//! ```

pub mod afm;
pub mod buffer;
pub mod hash;
pub mod theory;

use crate::error::Error;
use crate::flow::FlowKey;
use crate::id::QueueId;
use crate::sched::drr::Drr;
pub use afm::{AfmTable, DeleteRule, Find, SlotStats};
pub use buffer::QueueBuffer;
pub use hash::{HashKind, SlotHash};

/// What happens to a new flow when every physical queue is taken. Never silent: both are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Exhausted {
    /// The packet is dropped (counted in `dropped_no_queue`).
    #[default]
    Drop,
    /// The flow is mapped to one shared overflow queue and loses isolation (counted in
    /// `flows_shared`).
    SharedQueue,
}

/// Configuration of a [`Dqs`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DqsConfig {
    /// AFM slots `M`.
    pub slots: u32,
    pub hash: HashKind,
    /// Physical queues `N` in the pool.
    pub queues: u32,
    /// Buffer blocks.
    pub blocks: u32,
    /// Bytes per block (64 in the paper).
    pub block_size: u32,
    /// DRR quantum in bytes.
    pub quantum: u32,
    pub on_exhausted: Exhausted,
    pub delete_rule: DeleteRule,
    /// Store packet bytes in the blocks (off in simulations).
    pub store_payload: bool,
    /// Check every invariant after every operation (slow: for tests and debugging).
    pub check_invariants: bool,
    /// The caller chooses which queue to serve ([`Dqs::dequeue_queue`]): the table keeps no
    /// DRR round and [`Dqs::dequeue`] returns nothing. The composed router's per-service
    /// schedulers serve dqs queues so (docs/router.md).
    pub caller_schedules: bool,
    /// Bytes one physical queue may hold (`None`: only the shared buffer limits it). Beyond
    /// the paper, whose queues share the buffer freely: with tail drop on a shared buffer, the
    /// flows whose packets happen to arrive just after a departure take every freed block and
    /// the others are locked out (measured in docs/live.md); a per-queue limit, as a qdisc gives
    /// each class, keeps every backlogged flow served.
    pub queue_limit: Option<u64>,
}

impl Default for DqsConfig {
    fn default() -> Self {
        DqsConfig {
            slots: 256,
            hash: HashKind::H3 { seed: 0 },
            queues: 1024,
            blocks: 1 << 16,
            block_size: 64,
            quantum: 1536,
            on_exhausted: Exhausted::Drop,
            delete_rule: DeleteRule::Paper,
            store_payload: false,
            check_invariants: false,
            caller_schedules: false,
            queue_limit: None,
        }
    }
}

/// Why a packet was not queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// Not enough free blocks.
    BufferFull,
    /// A new flow found no free physical queue (policy [`Exhausted::Drop`]).
    NoQueue,
    /// The flow's queue holds [`DqsConfig::queue_limit`] bytes.
    QueueFull,
}

/// A queued packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Queued {
    pub queue: QueueId,
    /// The packet's flow was silent: a queue was taken and an AFM entry created.
    pub new_flow: bool,
    /// The flow shares the overflow queue (pool exhausted, [`Exhausted::SharedQueue`]).
    pub shared: bool,
    /// AFM nodes compared (the paper's cycles, without the hash cycle).
    pub compares: u32,
    /// AFM slot (sub-table) of the flow.
    pub slot: u32,
}

/// Result of [`Dqs::enqueue`]. The mapping cost is known even for dropped packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enqueue {
    Queued(Queued),
    /// `new_flow`: the packet's flow was not active (its search was unsuccessful).
    Dropped {
        reason: DropReason,
        compares: u32,
        slot: u32,
        new_flow: bool,
    },
}

/// A packet taken by [`Dqs::dequeue`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dequeued {
    pub queue: QueueId,
    pub len: u32,
    /// The flow has no more packets: its AFM entry was deleted.
    pub flow_released: bool,
    /// The queue emptied and went back to the pool.
    pub queue_released: bool,
    /// Pointer steps of the AFM deletion (two-children case).
    pub delete_steps: u32,
}

/// Counters of a [`Dqs`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DqsCounters {
    pub enqueued: u64,
    pub dequeued: u64,
    pub dropped_buffer_full: u64,
    pub dropped_no_queue: u64,
    pub dropped_queue_full: u64,
    pub flows_activated: u64,
    pub flows_released: u64,
    /// Flows mapped to the shared overflow queue.
    pub flows_shared: u64,
}

/// Dynamic queue sharing: the AFM table, the queue pool, the block buffer and DRR.
pub struct Dqs {
    cfg: DqsConfig,
    hash: SlotHash,
    afm: AfmTable,
    buf: QueueBuffer,
    drr: Drr,
    /// Packets buffered per AFM node.
    flow_packets: Vec<u32>,
    counters: DqsCounters,
}

impl Dqs {
    /// Errors: no slot, a zero block size or quantum, no physical queue, a queue count of
    /// `u32::MAX - 1` or more, or a block count of `u32::MAX`.
    pub fn new(cfg: DqsConfig) -> Result<Self, Error> {
        let bad =
            |parameter, value: u32, expected| Error::BadParameter { parameter, value: value.to_string(), expected };
        if cfg.slots == 0 {
            return Err(bad("dqs slots", cfg.slots, "at least 1"));
        }
        if cfg.block_size == 0 {
            return Err(bad("dqs block size", cfg.block_size, "at least 1 byte"));
        }
        if cfg.quantum == 0 {
            return Err(bad("dqs quantum", cfg.quantum, "at least 1 byte"));
        }
        if cfg.queues == 0 || cfg.queues >= u32::MAX - 1 {
            return Err(bad("dqs queues", cfg.queues, "at least 1 and below 2^32 - 2"));
        }
        if cfg.blocks == u32::MAX {
            return Err(bad("dqs blocks", cfg.blocks, "below 2^32 - 1"));
        }
        let shared = (cfg.on_exhausted == Exhausted::SharedQueue) as u32;
        Ok(Dqs {
            hash: SlotHash::new(cfg.hash, cfg.slots)?,
            afm: AfmTable::new(cfg.slots, cfg.queues as usize, cfg.delete_rule)?,
            buf: QueueBuffer::new(cfg.blocks, cfg.block_size, cfg.queues, shared, cfg.store_payload)?,
            drr: Drr::new(cfg.queues + shared, cfg.quantum as u64)?,
            flow_packets: Vec::with_capacity(cfg.queues as usize),
            counters: DqsCounters::default(),
            cfg,
        })
    }

    pub fn config(&self) -> &DqsConfig {
        &self.cfg
    }
    pub fn counters(&self) -> DqsCounters {
        self.counters
    }
    pub fn afm(&self) -> &AfmTable {
        &self.afm
    }
    pub fn buffer(&self) -> &QueueBuffer {
        &self.buf
    }
    /// [`QueueBuffer::release_storage`] of the table's buffer (the table then takes no packet).
    ///
    /// Errors (no effect): packets still queued.
    pub fn release_storage(&mut self) -> Result<(), Error> {
        self.buf.release_storage()
    }
    /// Flows with packets in the buffer (`l` of eq 5).
    pub fn active_flows(&self) -> usize {
        self.afm.len()
    }
    /// Packets in the buffer.
    pub fn is_empty(&self) -> bool {
        self.counters.enqueued == self.counters.dequeued
    }
    /// The id of the shared overflow queue, if the policy has one.
    pub fn shared_queue(&self) -> Option<QueueId> {
        (self.cfg.on_exhausted == Exhausted::SharedQueue).then_some(QueueId(self.cfg.queues))
    }
    /// The slot of a flow.
    pub fn slot_of(&self, key: &FlowKey) -> u32 {
        self.hash.slot(key)
    }
    /// The hash [`Self::slot_of`] is.
    pub fn slot_hash(&self) -> &SlotHash {
        &self.hash
    }

    /// A hint: a packet of `key` is enqueued soon, so its AFM slot starts loading now (no
    /// effect on results; it costs one hash).
    #[inline]
    pub fn prefetch(&self, key: &FlowKey) {
        self.afm.prefetch(self.hash.slot(key));
    }
    /// [`Self::prefetch`] of the flow whose AFM slot ([`Self::slot_of`]) is `slot`.
    #[inline]
    pub fn prefetch_slot(&self, slot: u32) {
        self.afm.prefetch(slot);
    }
    /// The second of two hints ([`Self::prefetch_slot`] first, some work before this): AFM
    /// slot `slot` is loaded, so the root of its tree starts loading now.
    #[inline]
    pub fn prefetch_root(&self, slot: u32) {
        self.afm.prefetch_root(slot);
    }

    /// Maps the packet's flow to its queue (creating the mapping for a new flow) and appends
    /// the packet (dqs Fig. 1a).
    #[inline]
    pub fn enqueue(&mut self, key: &FlowKey, len: u32, payload: Option<&[u8]>) -> Enqueue {
        self.enqueue_at(self.hash.slot(key), key, len, payload)
    }

    /// [`Self::enqueue`] of a key whose AFM slot ([`Self::slot_of`]) the caller worked out
    /// before (a data plane's look at the next frames); any other slot corrupts the table.
    pub fn enqueue_at(&mut self, slot: u32, key: &FlowKey, len: u32, payload: Option<&[u8]>) -> Enqueue {
        debug_assert_eq!(slot, self.hash.slot(key), "the slot of another key");
        let out = match self.afm.find(slot, key) {
            Find::Found { value, compares, .. }
                if self.cfg.queue_limit.is_some_and(|l| self.buf.bytes(value) + len as u64 > l) =>
            {
                self.counters.dropped_queue_full += 1;
                Enqueue::Dropped { reason: DropReason::QueueFull, compares, slot, new_flow: false }
            }
            Find::Vacant(v) if self.cfg.queue_limit.is_some_and(|l| len as u64 > l) => {
                self.counters.dropped_queue_full += 1;
                Enqueue::Dropped { reason: DropReason::QueueFull, compares: v.compares, slot, new_flow: true }
            }
            Find::Found { node, value, compares } => {
                if self.buf.push(value, len, node, payload).expect("a flow's queue is taken, or the shared one") {
                    self.flow_packets[node as usize] += 1;
                    if !self.cfg.caller_schedules {
                        self.drr.enqueued(QueueId(value)).expect("pooled queue ids are in range");
                    }
                    let shared = Some(QueueId(value)) == self.shared_queue();
                    Enqueue::Queued(Queued { queue: QueueId(value), new_flow: false, shared, compares, slot })
                } else {
                    self.counters.dropped_buffer_full += 1;
                    Enqueue::Dropped { reason: DropReason::BufferFull, compares, slot, new_flow: false }
                }
            }
            Find::Vacant(v) => {
                let compares = v.compares;
                if self.buf.free_blocks() < self.buf.blocks_for(len) {
                    self.counters.dropped_buffer_full += 1;
                    Enqueue::Dropped { reason: DropReason::BufferFull, compares, slot, new_flow: true }
                } else {
                    let (queue, shared) = match (self.buf.take_queue(), self.shared_queue()) {
                        (Some(q), _) => (Some(q), false),
                        (None, Some(s)) => (Some(s.0), true),
                        (None, None) => (None, false),
                    };
                    match queue {
                        None => {
                            self.counters.dropped_no_queue += 1;
                            Enqueue::Dropped { reason: DropReason::NoQueue, compares, slot, new_flow: true }
                        }
                        Some(q) => {
                            let node = self.afm.insert_at(v, *key, q);
                            if self.flow_packets.len() <= node as usize {
                                self.flow_packets.resize(node as usize + 1, 0);
                            }
                            let pushed = self.buf.push(q, len, node, payload).expect("taken just now, or shared");
                            debug_assert!(pushed, "blocks were checked");
                            self.flow_packets[node as usize] = 1;
                            if !self.cfg.caller_schedules {
                                self.drr.enqueued(QueueId(q)).expect("pooled queue ids are in range");
                            }
                            self.counters.flows_activated += 1;
                            self.counters.flows_shared += shared as u64;
                            Enqueue::Queued(Queued { queue: QueueId(q), new_flow: true, shared, compares, slot })
                        }
                    }
                }
            }
        };
        if matches!(out, Enqueue::Queued(_)) {
            self.counters.enqueued += 1;
        }
        self.maybe_check();
        out
    }

    /// The next packet by DRR (dqs Fig. 1b): its blocks go back to the free stack; a flow with
    /// no more packets leaves the AFM table, and an emptied queue goes back to the pool.
    /// Nothing when the caller schedules ([`DqsConfig::caller_schedules`]).
    pub fn dequeue(&mut self, out: Option<&mut Vec<u8>>) -> Option<Dequeued> {
        if self.cfg.caller_schedules {
            return None;
        }
        let buf = &self.buf;
        let q = self.drr.select(|q| buf.head_len(q.0).expect("DRR round holds only non-empty queues") as u64)?.0;
        let p = self.buf.pop(q, out).expect("selected queue is non-empty");
        self.drr.dequeued(QueueId(q), p.emptied).expect("the queue select() named");
        Some(self.popped(q, p))
    }

    /// The head packet of `queue`, for a caller that schedules the queues itself
    /// ([`DqsConfig::caller_schedules`]); `None` if the queue is empty. The same bookkeeping as
    /// [`Dqs::dequeue`].
    ///
    /// Errors (no effect): the table runs its own DRR, or an unknown queue.
    pub fn dequeue_queue(&mut self, queue: QueueId, out: Option<&mut Vec<u8>>) -> Result<Option<Dequeued>, Error> {
        if !self.cfg.caller_schedules {
            return Err(Error::NotAllowed("dqs: dequeue_queue() needs caller_schedules (the table runs its DRR)"));
        }
        let nq = self.cfg.queues + self.shared_queue().is_some() as u32;
        let q = crate::id::check(QueueId::KIND, queue.0, nq as usize)? as u32;
        let Some(p) = self.buf.pop(q, out) else { return Ok(None) };
        Ok(Some(self.popped(q, p)))
    }

    fn popped(&mut self, q: u32, p: buffer::Popped) -> Dequeued {
        let node = p.tag;
        let fp = &mut self.flow_packets[node as usize];
        *fp -= 1;
        let flow_released = *fp == 0;
        let mut delete_steps = 0;
        if flow_released {
            delete_steps = self.afm.remove(node);
            self.counters.flows_released += 1;
        }
        let queue_released = p.emptied && Some(QueueId(q)) != self.shared_queue();
        if queue_released {
            self.buf.release_queue(q).expect("an emptied pooled queue is taken");
        }
        self.counters.dequeued += 1;
        self.maybe_check();
        Dequeued { queue: QueueId(q), len: p.len, flow_released, queue_released, delete_steps }
    }

    fn maybe_check(&self) {
        if self.cfg.check_invariants {
            if let Err(e) = self.check() {
                panic!("dqs invariant broken: {e}");
            }
        }
    }

    /// Checks the AFM table, the block accounting and that they agree: every active flow owns
    /// exactly its queue's packets (or some of the shared queue's), and every in-use queue
    /// belongs to exactly one flow. O(blocks + flows).
    pub fn check(&self) -> Result<(), String> {
        self.afm.check()?;
        self.buf.check()?;
        let nq = self.cfg.queues as usize + self.shared_queue().is_some() as usize;
        let mut owner_packets = vec![0u64; nq];
        let mut owners = vec![0u32; nq];
        // Walk all nodes through the flow_packets table: live nodes have a count > 0.
        let mut live = 0usize;
        for (node, &c) in self.flow_packets.iter().enumerate() {
            if c == 0 {
                continue;
            }
            live += 1;
            let q = self.afm.value(node as u32) as usize;
            owner_packets[q] += c as u64;
            owners[q] += 1;
            let slot = self.hash.slot(self.afm.key(node as u32));
            if !matches!(self.afm.find(slot, self.afm.key(node as u32)), Find::Found { node: n, .. } if n == node as u32)
            {
                return Err(format!("flow node {node} with {c} packets is not in its slot {slot}"));
            }
        }
        if live != self.afm.len() {
            return Err(format!("{live} flows hold packets but the AFM table has {}", self.afm.len()));
        }
        let mut in_use = 0;
        for q in 0..nq {
            if owner_packets[q] != self.buf.packets(q as u32) as u64 {
                return Err(format!(
                    "queue {q} holds {} packets, its flows {}",
                    self.buf.packets(q as u32),
                    owner_packets[q]
                ));
            }
            let pooled = q < self.cfg.queues as usize;
            if pooled && owners[q] > 1 {
                return Err(format!("queue {q} is shared by {} flows", owners[q]));
            }
            in_use += (pooled && owners[q] == 1) as u32;
        }
        if in_use != self.buf.queues_in_use() {
            return Err(format!("{in_use} queues owned, pool says {} in use", self.buf.queues_in_use()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::PROTO_TCP;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn a_queue_limit_drops_what_would_overfill_the_flows_queue() {
        let mut d = Dqs::new(DqsConfig { queues: 4, queue_limit: Some(250), ..Default::default() }).unwrap();
        assert!(matches!(d.enqueue(&key(1), 100, None), Enqueue::Queued(_)));
        assert!(matches!(d.enqueue(&key(1), 100, None), Enqueue::Queued(_)));
        let full = d.enqueue(&key(1), 100, None);
        assert!(matches!(full, Enqueue::Dropped { reason: DropReason::QueueFull, new_flow: false, .. }), "{full:?}");
        let big = d.enqueue(&key(2), 300, None);
        assert!(matches!(big, Enqueue::Dropped { reason: DropReason::QueueFull, new_flow: true, .. }), "{big:?}");
        assert!(matches!(d.enqueue(&key(1), 50, None), Enqueue::Queued(_)), "up to the limit exactly");
        assert_eq!(d.counters().dropped_queue_full, 2);
        assert_eq!(d.active_flows(), 1);
        d.check().unwrap();
    }

    fn key(i: u32) -> FlowKey {
        FlowKey::new(std::net::Ipv4Addr::from(i).into(), std::net::Ipv4Addr::from(1).into(), PROTO_TCP, 1, 2)
    }

    /// A caller that schedules the queues takes any queue's head; the same mapping and release
    /// as under the table's own DRR, and no DRR round kept.
    #[test]
    fn caller_scheduled_queues() {
        let cfg = DqsConfig { queues: 4, check_invariants: true, caller_schedules: true, ..Default::default() };
        let mut d = Dqs::new(cfg).unwrap();
        let Enqueue::Queued(a) = d.enqueue(&key(1), 100, None) else { panic!() };
        let Enqueue::Queued(b) = d.enqueue(&key(2), 200, None) else { panic!() };
        let Enqueue::Queued(b2) = d.enqueue(&key(2), 300, None) else { panic!() };
        assert_eq!(b.queue, b2.queue);
        assert_eq!(d.dequeue(None), None, "no DRR when the caller schedules");
        // Flow 2's queue first, out of DRR order.
        let x = d.dequeue_queue(b.queue, None).unwrap().unwrap();
        assert_eq!((x.len, x.flow_released, x.queue_released), (200, false, false));
        let y = d.dequeue_queue(b.queue, None).unwrap().unwrap();
        assert_eq!((y.len, y.flow_released, y.queue_released), (300, true, true));
        assert_eq!(d.dequeue_queue(b.queue, None).unwrap(), None);
        assert!(!d.is_empty());
        assert!(d.dequeue_queue(a.queue, None).unwrap().unwrap().queue_released);
        assert!(d.is_empty());
        assert!(d.dequeue_queue(QueueId(4), None).is_err(), "unknown queue");
        let mut own = Dqs::new(DqsConfig { queues: 4, ..Default::default() }).unwrap();
        own.enqueue(&key(1), 100, None);
        assert!(own.dequeue_queue(QueueId(0), None).is_err(), "the table runs its own DRR");
        assert_eq!(own.counters().dequeued, 0);
    }

    #[test]
    fn queue_created_on_first_packet_and_released_when_empty() {
        let mut d = Dqs::new(DqsConfig { queues: 4, check_invariants: true, ..Default::default() }).unwrap();
        let Enqueue::Queued(a1) = d.enqueue(&key(1), 100, None) else { panic!() };
        assert!(a1.new_flow);
        let Enqueue::Queued(a2) = d.enqueue(&key(1), 100, None) else { panic!() };
        assert!(!a2.new_flow);
        assert_eq!(a1.queue, a2.queue);
        let Enqueue::Queued(b) = d.enqueue(&key(2), 100, None) else { panic!() };
        assert_ne!(b.queue, a1.queue);
        assert_eq!((d.active_flows(), d.buffer().queues_in_use()), (2, 2));
        // DRR (quantum 1536 B): both of flow 1's packets in its round, the second releasing it,
        // then flow 2's.
        let x = d.dequeue(None).unwrap();
        assert_eq!((x.queue, x.flow_released, x.queue_released), (a1.queue, false, false));
        let y = d.dequeue(None).unwrap();
        assert_eq!((y.queue, y.flow_released, y.queue_released), (a1.queue, true, true));
        assert_eq!(d.buffer().queues_in_use(), 1);
        let z = d.dequeue(None).unwrap();
        assert_eq!((z.queue, z.flow_released, z.queue_released), (b.queue, true, true));
        assert!(d.dequeue(None).is_none());
        assert_eq!((d.active_flows(), d.buffer().queues_in_use(), d.buffer().max_queues_in_use()), (0, 0, 2));
        // The flow comes back: a new mapping.
        let Enqueue::Queued(again) = d.enqueue(&key(1), 100, None) else { panic!() };
        assert!(again.new_flow);
    }

    #[test]
    fn exhaustion_is_counted_under_both_policies() {
        let mut d = Dqs::new(DqsConfig { queues: 2, check_invariants: true, ..Default::default() }).unwrap();
        for i in 0..3 {
            d.enqueue(&key(i), 64, None);
        }
        assert!(matches!(d.enqueue(&key(9), 64, None), Enqueue::Dropped { reason: DropReason::NoQueue, .. }));
        assert_eq!(d.counters().dropped_no_queue, 2);
        let mut s = Dqs::new(DqsConfig {
            queues: 2,
            on_exhausted: Exhausted::SharedQueue,
            check_invariants: true,
            ..Default::default()
        })
        .unwrap();
        for i in 0..5 {
            s.enqueue(&key(i), 64, None);
        }
        assert_eq!(s.counters().flows_shared, 3);
        assert_eq!(s.active_flows(), 5);
        while s.dequeue(None).is_some() {}
        assert_eq!(s.active_flows(), 0);
        assert_eq!(s.counters().flows_released, 5);
    }

    #[test]
    fn full_buffer_drops_are_counted_and_leave_no_mapping() {
        let mut d = Dqs::new(DqsConfig { blocks: 4, check_invariants: true, ..Default::default() }).unwrap();
        assert!(matches!(d.enqueue(&key(1), 200, None), Enqueue::Queued(_)));
        assert!(matches!(
            d.enqueue(&key(2), 200, None),
            Enqueue::Dropped { reason: DropReason::BufferFull, new_flow: true, .. }
        ));
        assert!(matches!(
            d.enqueue(&key(1), 200, None),
            Enqueue::Dropped { reason: DropReason::BufferFull, new_flow: false, compares: 1, .. }
        ));
        assert_eq!(d.active_flows(), 1);
        assert_eq!(d.counters().dropped_buffer_full, 2);
    }

    #[test]
    fn random_traffic_never_leaks_blocks_queues_or_mappings() {
        // A small table under heavy churn, every invariant checked after every operation.
        for (policy, seed) in [(Exhausted::Drop, 1u64), (Exhausted::SharedQueue, 2)] {
            let mut d = Dqs::new(DqsConfig {
                slots: 8,
                queues: 12,
                blocks: 200,
                on_exhausted: policy,
                check_invariants: true,
                ..Default::default()
            })
            .unwrap();
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            for _ in 0..20_000 {
                if rng.random_bool(0.52) {
                    d.enqueue(&key(rng.random_range(0..40)), rng.random_range(1..1500), None);
                } else {
                    d.dequeue(None);
                }
            }
            while d.dequeue(None).is_some() {}
            let c = d.counters();
            assert_eq!(c.enqueued, c.dequeued);
            assert_eq!(c.flows_activated, c.flows_released);
            assert_eq!(d.buffer().free_blocks(), 200);
            assert!(c.dropped_buffer_full > 0, "the test should exercise a full buffer: {c:?}");
            if policy == Exhausted::Drop {
                assert!(c.dropped_no_queue > 0, "{c:?}");
            } else {
                assert!(c.flows_shared > 0, "{c:?}");
            }
        }
    }

    #[test]
    fn bad_configurations_are_errors() {
        for cfg in [
            DqsConfig { slots: 0, ..Default::default() },
            DqsConfig { block_size: 0, ..Default::default() },
            DqsConfig { quantum: 0, ..Default::default() },
            DqsConfig { queues: 0, ..Default::default() },
            DqsConfig { queues: u32::MAX, ..Default::default() },
            DqsConfig { blocks: u32::MAX, ..Default::default() },
        ] {
            assert!(matches!(Dqs::new(cfg), Err(Error::BadParameter { .. })), "{cfg:?}");
        }
    }

    #[derive(Clone, Debug)]
    enum Call {
        Enqueue(u32, u32, bool),
        Dequeue,
        /// Read queue `k`'s buffer counts (ids past the end included).
        Read(u32),
    }

    fn call() -> impl Strategy<Value = Call> {
        prop_oneof![
            5 => (0u32..30, prop_oneof![0u32..3000, Just(u32::MAX)], any::<bool>()).prop_map(|(k, l, p)| Call::Enqueue(k, l, p)),
            4 => Just(Call::Dequeue),
            1 => (0u32..12).prop_map(Call::Read),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, rng_seed: proptest::test_runner::RngSeed::Fixed(0x647173), ..ProptestConfig::default() })]

        /// Arbitrary enqueues (any key, any length up to u32::MAX, with or without payload
        /// bytes), dequeues and reads of the buffer (any queue id) on arbitrary small tables: no
        /// panic, every invariant after every call (`check_invariants`), each flow's packets
        /// leave in order with their bytes, an unknown queue reads as empty, and everything is
        /// given back once drained.
        #[test]
        fn arbitrary_calls_keep_the_contract(
            calls in prop::collection::vec(call(), 1..300),
            slots in 1u32..6, queues in 1u32..8, blocks in 1u32..120, block_size in 1u32..200,
            quantum in 1u32..2000, shared in any::<bool>(), splice in any::<bool>(),
        ) {
            let mut d = Dqs::new(DqsConfig {
                slots, queues, blocks, block_size, quantum,
                on_exhausted: if shared { Exhausted::SharedQueue } else { Exhausted::Drop },
                delete_rule: if splice { DeleteRule::Splice } else { DeleteRule::Paper },
                store_payload: true,
                check_invariants: true,
                ..Default::default()
            }).unwrap();
            let mut fifo: std::collections::HashMap<u32, std::collections::VecDeque<(u32, u8)>> = Default::default();
            let mut seq = 0u8;
            let mut out = Vec::new();
            for c in calls {
                match c {
                    Call::Enqueue(k, len, with_payload) => {
                        seq = seq.wrapping_add(1);
                        let bytes = vec![seq; (len as usize).min(4096)];
                        let payload = (with_payload && len <= 4096).then_some(&bytes[..]);
                        if let Enqueue::Queued(_) = d.enqueue(&key(k), len, payload) {
                            fifo.entry(k).or_default().push_back((len, if payload.is_some() { seq } else { 0 }));
                        }
                    }
                    Call::Read(q) => {
                        let buf = d.buffer();
                        let known = q < buf.queues();
                        prop_assert_eq!(buf.queues(), queues + shared as u32);
                        if !known {
                            prop_assert_eq!((buf.packets(q), buf.bytes(q), buf.head_len(q)), (0, 0, None));
                        }
                        prop_assert_eq!(buf.head_len(q).is_some(), buf.packets(q) > 0);
                    }
                    Call::Dequeue => match d.dequeue(Some(&mut out)) {
                        None => prop_assert!(fifo.values().all(|f| f.is_empty())),
                        Some(x) => {
                            // Which flow: the one whose head matches (flows on the shared queue
                            // interleave, so match by the bytes' tag too).
                            let found = fifo.iter_mut().find(|(_, f)| f.front().is_some_and(|&(l, t)| l == x.len && (t == 0 || out.iter().all(|&b| b == t))));
                            prop_assert!(found.is_some(), "dequeued {:?} is no flow's head", x);
                            let (_, f) = found.unwrap();
                            f.pop_front();
                            prop_assert_eq!(out.len(), x.len as usize);
                        }
                    },
                }
            }
            while d.dequeue(None).is_some() {}
            let c = d.counters();
            prop_assert_eq!((c.enqueued, c.flows_activated), (c.dequeued, c.flows_released));
            prop_assert_eq!((d.buffer().free_blocks(), d.buffer().queues_in_use(), d.active_flows()), (blocks, 0, 0));
        }
    }
}
