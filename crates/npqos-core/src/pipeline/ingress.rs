//! Stage 3, ingress queueing: maps a packet to a queue and holds its blocks until the stage
//! after it takes the packet. One element, three kinds behind it (docs/router.md, stage 3):
//! dqs (the paper's dynamic queue sharing), the brute-force per-flow table and hashed queues
//! (fq_codel's buckets), all over one shared block buffer sized by the flow table keys
//! ([`DqsConfig`]). The dqs kind can also keep the packets' bytes (a data plane's frames),
//! limit each queue's bytes and give flows that find no queue a shared overflow queue, as
//! `npqos live` needs; the simulator's router keeps lengths only.

use super::ports::{ConservationError, Ports};
use crate::error::Error;
use crate::flow::FlowKey;
use crate::flowmap::{Dqs, DqsConfig, DropReason, Enqueue, Exhausted, HashKind, SlotHash};
use crate::QueueId;
use std::collections::{HashMap, VecDeque};

/// Which ingress; its sizes (queues, slots, hash, blocks, block size) are the flow table's
/// [`DqsConfig`].
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
    /// FQ-CoDel (RFC 8290): the hashed queues (`queues` per service, 1,024 by default), served
    /// within a service by FQ-CoDel's round ([`crate::pipeline::fq_codel`]: new flows first,
    /// an MTU of credit per round, CoDel per queue), and a full buffer makes room by dropping
    /// from the head of the fattest queue ([`Ingress::fattest`]). The round is the processing
    /// element's (it needs processors).
    FqCodel,
}

crate::named!(IngressKind, "ingress kind", {
    Dqs => "dqs",
    PerFlow => "per-flow",
    Hashed => "hashed",
    FqCodel => "fq-codel",
});

impl IngressKind {
    /// Hashed queues per service (hashed, fq-codel).
    pub fn hashed(self) -> bool {
        matches!(self, IngressKind::Hashed | IngressKind::FqCodel)
    }
}

/// Why the ingress refused a packet, in the order of [`Ingress::ports`]' drop counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IngressDrop {
    /// The shared block buffer has no room for the packet.
    BufferFull,
    /// A new flow found no free queue (dqs pool or per-flow table exhausted).
    NoQueue,
    /// The flow's queue holds its limit (`DqsConfig::queue_limit`, dqs only).
    QueueFull,
}

crate::named!(IngressDrop, "ingress drop reason", {
    BufferFull => "buffer_full",
    NoQueue => "no_queue",
    QueueFull => "queue_full",
});

/// A packet the ingress handed on ([`Ingress::dequeue_with`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Left {
    pub len: u32,
    /// Its queue emptied and went back to the pool (dqs, per-flow) or out of use (hashed).
    pub released: bool,
}

/// What became of a packet offered to the ingress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    Queued(QueueId),
    Dropped(IngressDrop),
}

/// The ingress element. See the module documentation.
pub struct Ingress {
    kind: Kinds,
    services: usize,
    ports: Ports<3>,
}

enum Kinds {
    /// The table and its mapping accesses so far.
    Dqs(Box<Dqs>, u64),
    /// Per-flow table and hashed queues: the mapping, per-queue packet lengths, and the same
    /// block accounting as dqs's buffer.
    Table(Table),
}

struct Table {
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
    /// Per queue: the lengths of its packets (FIFO, for dequeue).
    lens: Vec<VecDeque<u32>>,
    /// Per queue: its bytes (for the fattest queue).
    bytes: Vec<u64>,
    /// Packets in `lens` together.
    held: u64,
    blocks_free: u64,
    block_size: u32,
    in_use: u32,
    max_in_use: u32,
    accesses: u64,
}

impl Ingress {
    /// `table`'s queues and its blocks of `table.block_size` bytes shared by all queues (its
    /// DRR quantum does not apply: the stage after the ingress picks the queue to serve);
    /// `services` services (hashed queues are per service). `seed` keys dqs's and the hashed
    /// queues' hash. dqs also takes the table's `on_exhausted`, `queue_limit`,
    /// `store_payload` and `delete_rule`.
    ///
    /// Errors: no service, no queue, more queues than ids, a table dqs refuses, or (per-flow,
    /// hashed) a table asking for frames, a per-queue limit or a shared queue, which only dqs
    /// has.
    pub fn new(kind: IngressKind, table: &DqsConfig, services: usize, seed: u64) -> Result<Self, Error> {
        let DqsConfig { queues, blocks, block_size, .. } = *table;
        if services == 0 {
            return Err(Error::BadParameter { parameter: "services", value: "0".into(), expected: "at least 1" });
        }
        let kinds = match kind {
            IngressKind::Dqs => {
                let hash = match table.hash {
                    HashKind::H3 { .. } => HashKind::H3 { seed },
                    HashKind::Fast { .. } => HashKind::Fast { seed },
                };
                let cfg = DqsConfig { hash, caller_schedules: true, check_invariants: false, ..*table };
                Kinds::Dqs(Box::new(Dqs::new(cfg)?), 0)
            }
            IngressKind::PerFlow | IngressKind::Hashed | IngressKind::FqCodel
                if table.store_payload || table.queue_limit.is_some() || table.on_exhausted != Exhausted::Drop =>
            {
                return Err(Error::BadParameter {
                    parameter: "ingress",
                    value: format!("{kind} with frames, a per-queue limit or a shared queue"),
                    expected: "the dqs ingress for those",
                });
            }
            IngressKind::PerFlow | IngressKind::Hashed | IngressKind::FqCodel => {
                let per_flow = kind == IngressKind::PerFlow;
                let total = if per_flow { queues as usize } else { queues as usize * services };
                if total == 0 || total >= u32::MAX as usize {
                    return Err(Error::BadParameter {
                        parameter: "queues",
                        value: format!("{total} ({kind} ingress)"),
                        expected: "from 1 to 2^32 - 2 queues in all",
                    });
                }
                if block_size == 0 {
                    return Err(Error::BadParameter {
                        parameter: "block_size",
                        value: "0".into(),
                        expected: "at least 1 byte",
                    });
                }
                Kinds::Table(Table {
                    per_flow,
                    map: HashMap::new(),
                    owner: if per_flow { vec![None; total] } else { Vec::new() },
                    free: if per_flow { (0..queues).rev().collect() } else { Vec::new() },
                    per_service: queues,
                    hash: SlotHash::new(HashKind::Fast { seed }, queues)?,
                    lens: vec![VecDeque::new(); total],
                    bytes: vec![0; total],
                    held: 0,
                    blocks_free: blocks as u64,
                    block_size,
                    in_use: 0,
                    max_in_use: 0,
                    accesses: 0,
                })
            }
        };
        Ok(Ingress { kind: kinds, services, ports: Ports::default() })
    }

    /// Queue ids are `0..queues()` (dqs's shared overflow queue, when it has one, is the last).
    pub fn queues(&self) -> u32 {
        match &self.kind {
            Kinds::Dqs(d, _) => d.config().queues + d.shared_queue().is_some() as u32,
            Kinds::Table(t) => t.lens.len() as u32,
        }
    }

    /// Offers the packet of `len` bytes of flow `key` of service `service`.
    ///
    /// Errors: a service outside `0..services`.
    #[inline]
    pub fn enqueue(&mut self, key: &FlowKey, service: usize, len: u32) -> Result<Admit, Error> {
        self.enqueue_with(key, service, len, None, None).map(|(a, _)| a)
    }

    /// A hint: a packet of `key` arrives soon, so the state its enqueue reads first (dqs's
    /// AFM slot) starts loading now (no effect on results).
    #[inline]
    pub fn prefetch(&self, key: &FlowKey) {
        if let Kinds::Dqs(d, _) = &self.kind {
            d.prefetch(key);
        }
    }
    /// The table's slot of `key` (dqs's AFM slot), for a driver that works it out ahead
    /// ([`Self::prefetch_slot`], [`Self::enqueue_with`]); `None` for the other tables.
    #[inline]
    pub fn slot_of(&self, key: &FlowKey) -> Option<u32> {
        match &self.kind {
            Kinds::Dqs(d, _) => Some(d.slot_of(key)),
            Kinds::Table(_) => None,
        }
    }
    /// [`Self::prefetch`] by the key's [`Self::slot_of`]; `deeper`: the second of two hints
    /// (the slot loaded by the first), what the slot leads to.
    #[inline]
    pub fn prefetch_slot(&self, slot: u32, deeper: bool) {
        if let Kinds::Dqs(d, _) = &self.kind {
            match deeper {
                false => d.prefetch_slot(slot),
                true => d.prefetch_root(slot),
            }
        }
    }

    /// [`Self::enqueue`] with the packet's bytes when the table keeps them (`frame`, dqs with
    /// `store_payload`); also says whether the packet gave its flow a queue (a new flow).
    /// `slot`: the key's [`Self::slot_of`], if the caller worked it out.
    ///
    /// Errors: a service outside `0..services`; bytes for a table that keeps none.
    pub fn enqueue_with(
        &mut self,
        key: &FlowKey,
        service: usize,
        len: u32,
        frame: Option<&[u8]>,
        slot: Option<u32>,
    ) -> Result<(Admit, bool), Error> {
        if service >= self.services {
            return Err(Error::UnknownId { kind: "service", id: service as u32, count: self.services });
        }
        if frame.is_some() && !matches!(&self.kind, Kinds::Dqs(d, _) if d.config().store_payload) {
            return Err(Error::NotAllowed("ingress: packet bytes for a table that keeps none"));
        }
        self.ports.input += 1;
        let r = match &mut self.kind {
            Kinds::Dqs(d, acc) => match d.enqueue_at(slot.unwrap_or_else(|| d.slot_of(key)), key, len, frame) {
                Enqueue::Queued(q) => {
                    *acc += 1 + q.compares as u64;
                    (Admit::Queued(q.queue), q.new_flow)
                }
                Enqueue::Dropped { reason, compares, .. } => {
                    *acc += 1 + compares as u64;
                    let why = match reason {
                        DropReason::BufferFull => IngressDrop::BufferFull,
                        DropReason::NoQueue => IngressDrop::NoQueue,
                        DropReason::QueueFull => IngressDrop::QueueFull,
                    };
                    (Admit::Dropped(why), false)
                }
            },
            Kinds::Table(t) => t.enqueue(key, service, len),
        };
        if let Admit::Dropped(why) = r.0 {
            self.ports.dropped[why as usize] += 1;
        }
        debug_assert_eq!(self.check(), Ok(()));
        Ok(r)
    }

    /// Takes the head packet of `q`; returns its length, or `None` when `q` is empty.
    ///
    /// Errors: a queue outside `0..queues()`.
    #[inline]
    pub fn dequeue(&mut self, q: QueueId) -> Result<Option<u32>, Error> {
        Ok(self.dequeue_with(q, None)?.map(|l| l.len))
    }

    /// [`Self::dequeue`] with the packet's bytes copied into `frame` when the table keeps
    /// them, and whether the queue was released.
    ///
    /// Errors: a queue outside `0..queues()`.
    pub fn dequeue_with(&mut self, q: QueueId, frame: Option<&mut Vec<u8>>) -> Result<Option<Left>, Error> {
        let left = match &mut self.kind {
            Kinds::Dqs(d, acc) => match d.dequeue_queue(q, frame)? {
                Some(x) => {
                    *acc += x.flow_released as u64 + x.delete_steps as u64;
                    Some(Left { len: x.len, released: x.queue_released })
                }
                None => None,
            },
            Kinds::Table(t) => {
                if q.index() >= t.lens.len() {
                    return Err(Error::UnknownId { kind: "queue", id: q.0, count: t.lens.len() });
                }
                t.dequeue(q)
            }
        };
        self.ports.output += left.is_some() as u64;
        debug_assert_eq!(self.check(), Ok(()));
        Ok(left)
    }

    /// Bytes of queue `q`'s head packet (`None`: empty or unknown).
    #[inline]
    pub fn head_len(&self, q: QueueId) -> Option<u32> {
        match &self.kind {
            Kinds::Dqs(d, _) => d.buffer().head_len(q.0),
            Kinds::Table(t) => t.lens.get(q.index())?.front().copied(),
        }
    }

    /// Packets queue `q` holds (0 for an unknown queue).
    #[inline]
    pub fn packets(&self, q: QueueId) -> u32 {
        match &self.kind {
            Kinds::Dqs(d, _) => d.buffer().packets(q.0),
            Kinds::Table(t) => t.lens.get(q.index()).map_or(0, |l| l.len() as u32),
        }
    }

    /// The queue holding the most bytes and its bytes (hashed queues and the per-flow table;
    /// `None` for dqs or when every queue is empty): the queue FQ-CoDel drops from when its
    /// buffer is full. A scan over the queues, as Linux's `fq_codel_drop` makes.
    pub fn fattest(&self) -> Option<(QueueId, u64)> {
        let Kinds::Table(t) = &self.kind else { return None };
        let (q, &b) = t.bytes.iter().enumerate().max_by_key(|&(i, b)| (*b, std::cmp::Reverse(i)))?;
        (b > 0).then_some((QueueId(q as u32), b))
    }

    /// The lengths of queue `q`'s packets, head first (hashed queues and the per-flow table;
    /// none for dqs).
    pub fn lens(&self, q: QueueId) -> impl Iterator<Item = u32> + '_ {
        let l = match &self.kind {
            Kinds::Table(t) => t.lens.get(q.index()),
            Kinds::Dqs(..) => None,
        };
        l.into_iter().flat_map(|l| l.iter().copied())
    }

    /// Whether a packet of `len` bytes fits the block buffer now.
    pub fn fits(&self, len: u32) -> bool {
        match &self.kind {
            Kinds::Table(t) => t.blocks_for(len) <= t.blocks_free,
            Kinds::Dqs(d, _) => {
                d.buffer().free_blocks() as u64 >= (len.max(1) as u64).div_ceil(d.config().block_size as u64)
            }
        }
    }

    /// Gives a dqs ingress's buffer storage back ([`Dqs::release_storage`]): for an element
    /// that holds nothing and will take nothing more (a retired configuration of npqos live).
    ///
    /// Errors (no effect): packets still held.
    pub fn release_storage(&mut self) -> Result<(), Error> {
        match &mut self.kind {
            Kinds::Dqs(d, _) => d.release_storage(),
            Kinds::Table(_) => Ok(()),
        }
    }

    /// The dqs table behind a dqs ingress, for its counters and buffer (read only: packets go
    /// in and out through the element, which counts them at its ports).
    pub fn dqs(&self) -> Option<&Dqs> {
        match &self.kind {
            Kinds::Dqs(d, _) => Some(d),
            Kinds::Table(_) => None,
        }
    }

    /// Packets taken in, handed on and dropped (by [`IngressDrop`], in its order).
    pub fn ports(&self) -> Ports<3> {
        self.ports
    }

    /// Packets held in the queues, as the queues count them.
    pub fn held(&self) -> u64 {
        match &self.kind {
            Kinds::Dqs(d, _) => {
                let c = d.counters();
                c.enqueued - c.dequeued
            }
            Kinds::Table(t) => t.held,
        }
    }

    /// Conservation at the element's ports ([`Ports::check`]).
    pub fn check(&self) -> Result<(), ConservationError> {
        self.ports.check("ingress", self.held())
    }

    /// Queues holding packets now, and at most so far.
    pub fn in_use(&self) -> (u32, u32) {
        match &self.kind {
            Kinds::Dqs(d, _) => (d.buffer().queues_in_use(), d.buffer().max_queues_in_use()),
            Kinds::Table(t) => (t.in_use, t.max_in_use),
        }
    }

    /// Mapping-table accesses so far: dqs's AFM node comparisons of each search plus one slot
    /// read per packet, and one access plus the pointer steps of each deletion; one per lookup
    /// and one per release for the per-flow table; none for hashed queues (the hash is
    /// computed, not looked up).
    pub fn table_accesses(&self) -> u64 {
        match &self.kind {
            Kinds::Dqs(_, acc) => *acc,
            Kinds::Table(t) => t.accesses,
        }
    }

    /// State of the mapping and the queues, bytes (docs/router.md, "State bytes"): dqs 4 B per
    /// slot, 32 B per AFM node at the peak of active flows, 8 B per physical queue; the
    /// per-flow table 32 B per entry for every flow it must hold; hashed queues 8 B each.
    pub fn state_bytes(&self) -> u64 {
        match &self.kind {
            Kinds::Dqs(d, _) => {
                let c = d.config();
                c.slots as u64 * 4 + d.buffer().max_queues_in_use() as u64 * 32 + c.queues as u64 * 8
            }
            Kinds::Table(t) if t.per_flow => t.lens.len() as u64 * 32,
            Kinds::Table(t) => t.lens.len() as u64 * 8,
        }
    }
}

impl Table {
    fn blocks_for(&self, len: u32) -> u64 {
        (len.max(1) as u64).div_ceil(self.block_size as u64)
    }

    /// The packet's fate and whether it gave its flow a queue (hashed: its queue was empty).
    fn enqueue(&mut self, key: &FlowKey, service: usize, len: u32) -> (Admit, bool) {
        let blocks = self.blocks_for(len);
        if !self.per_flow {
            let q = service as u32 * self.per_service + self.hash.slot(key);
            if blocks > self.blocks_free {
                return (Admit::Dropped(IngressDrop::BufferFull), false);
            }
            let new = self.lens[q as usize].is_empty();
            self.push(q, len, blocks);
            return (Admit::Queued(QueueId(q)), new);
        }
        self.accesses += 1;
        if blocks > self.blocks_free {
            return (Admit::Dropped(IngressDrop::BufferFull), false);
        }
        let (q, new) = match self.map.get_mut(key) {
            Some(e) => {
                e.1 += 1;
                (e.0, false)
            }
            None => {
                let Some(q) = self.free.pop() else { return (Admit::Dropped(IngressDrop::NoQueue), false) };
                self.map.insert(*key, (q, 1));
                self.owner[q as usize] = Some(*key);
                (q, true)
            }
        };
        self.push(q, len, blocks);
        (Admit::Queued(QueueId(q)), new)
    }

    fn push(&mut self, q: u32, len: u32, blocks: u64) {
        let l = &mut self.lens[q as usize];
        if l.is_empty() {
            self.in_use += 1;
            self.max_in_use = self.max_in_use.max(self.in_use);
        }
        l.push_back(len);
        self.bytes[q as usize] += len as u64;
        self.held += 1;
        self.blocks_free -= blocks;
    }

    fn dequeue(&mut self, q: QueueId) -> Option<Left> {
        let len = self.lens[q.index()].pop_front()?;
        self.bytes[q.index()] -= len as u64;
        self.held -= 1;
        self.blocks_free += self.blocks_for(len);
        let released = self.lens[q.index()].is_empty();
        if released {
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
        Some(Left { len, released })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::Named;
    use proptest::prelude::*;
    use std::net::{IpAddr, Ipv4Addr};

    fn key(i: u32) -> FlowKey {
        FlowKey::new(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)), IpAddr::V4(Ipv4Addr::new(10, 9, 9, 9)), 6, 1000, 80)
    }

    fn table(queues: u32, blocks: u32) -> DqsConfig {
        DqsConfig { slots: 8, queues, blocks, block_size: 64, ..Default::default() }
    }

    /// Bad caller input is an error, not a panic, and leaves the ports as they were.
    #[test]
    fn unknown_services_and_queues_are_errors() {
        for kind in IngressKind::ALL.iter().copied() {
            let mut g = Ingress::new(kind, &table(4, 100), 2, 1).unwrap();
            assert!(matches!(g.enqueue(&key(1), 2, 100), Err(Error::UnknownId { kind: "service", .. })), "{kind}");
            assert!(g.dequeue(QueueId(g.queues())).is_err(), "{kind}");
            assert_eq!(g.dequeue(QueueId(0)), Ok(None), "{kind}");
            assert_eq!(g.ports(), Ports::default(), "{kind}");
        }
        assert!(Ingress::new(IngressKind::Hashed, &table(0, 100), 1, 1).is_err());
        assert!(Ingress::new(IngressKind::Dqs, &table(4, 100), 0, 1).is_err());
    }

    /// Each kind drops with its reason: the buffer full, or (dqs, per-flow) no queue free.
    #[test]
    fn drops_are_counted_by_reason() {
        for kind in [IngressKind::Dqs, IngressKind::PerFlow] {
            let mut g = Ingress::new(kind, &table(2, 1000), 1, 1).unwrap();
            for i in 0..3 {
                let want = if i < 2 { "queued" } else { "no_queue" };
                let got = match g.enqueue(&key(i), 0, 64).unwrap() {
                    Admit::Queued(_) => "queued",
                    Admit::Dropped(d) => d.name(),
                };
                assert_eq!(got, want, "{kind}, flow {i}");
            }
            assert_eq!(g.ports().dropped, [0, 1, 0], "{kind}");
        }
        let mut g = Ingress::new(IngressKind::Hashed, &table(2, 3), 1, 1).unwrap();
        assert!(matches!(g.enqueue(&key(0), 0, 128).unwrap(), Admit::Queued(_)));
        assert_eq!(g.enqueue(&key(1), 0, 128).unwrap(), Admit::Dropped(IngressDrop::BufferFull));
        assert_eq!(g.ports().dropped, [1, 0, 0]);
        assert_eq!(g.check(), Ok(()));
    }

    /// The dqs ingress with a data plane's table: frames kept and handed back byte for byte,
    /// a per-queue limit (`queue_full`), the shared overflow queue, new flows and released
    /// queues said; the other kinds refuse such a table, and every kind refuses bytes it
    /// cannot keep.
    #[test]
    fn dqs_keeps_frames_limits_queues_and_shares_the_overflow() {
        let cfg = DqsConfig {
            store_payload: true,
            queue_limit: Some(200),
            on_exhausted: Exhausted::SharedQueue,
            ..table(1, 100)
        };
        let mut g = Ingress::new(IngressKind::Dqs, &cfg, 1, 3).unwrap();
        assert_eq!(g.queues(), 2, "one queue and the shared one");
        let f = |i: u8| vec![i; 90];
        assert_eq!(g.enqueue_with(&key(0), 0, 90, Some(&f(1)), None).unwrap(), (Admit::Queued(QueueId(0)), true));
        assert_eq!(g.enqueue_with(&key(0), 0, 90, Some(&f(2)), None).unwrap(), (Admit::Queued(QueueId(0)), false));
        assert_eq!(
            g.enqueue_with(&key(0), 0, 90, Some(&f(3)), None).unwrap().0,
            Admit::Dropped(IngressDrop::QueueFull)
        );
        assert_eq!(g.enqueue_with(&key(1), 0, 90, Some(&f(4)), None).unwrap().0, Admit::Queued(QueueId(1)), "shared");
        assert_eq!((g.packets(QueueId(0)), g.head_len(QueueId(0))), (2, Some(90)));
        let mut out = Vec::new();
        assert_eq!(g.dequeue_with(QueueId(0), Some(&mut out)).unwrap(), Some(Left { len: 90, released: false }));
        assert_eq!(out, f(1));
        assert_eq!(g.dequeue_with(QueueId(0), Some(&mut out)).unwrap(), Some(Left { len: 90, released: true }));
        assert_eq!(out, f(2));
        assert_eq!(g.ports().dropped, [0, 0, 1]);
        assert_eq!(g.check(), Ok(()));
        assert!(g.dqs().is_some());
        for kind in [IngressKind::PerFlow, IngressKind::Hashed] {
            assert!(matches!(Ingress::new(kind, &cfg, 1, 3), Err(Error::BadParameter { .. })), "{kind}");
            let mut g = Ingress::new(kind, &table(2, 100), 1, 3).unwrap();
            assert!(matches!(g.enqueue_with(&key(0), 0, 90, Some(&f(1)), None), Err(Error::NotAllowed(_))), "{kind}");
            assert_eq!(g.ports().input, 0);
        }
    }

    proptest! {
        /// Any sequence of offers and takes: every packet offered is out, dropped or held, as
        /// the queues count what they hold, and each queue gives back its packets' lengths in
        /// the order they came.
        #[test]
        fn the_ports_add_up(kind in 0usize..3, ops in proptest::collection::vec((0u32..12, 40u32..1500, any::<bool>()), 1..400)) {
            let kind = IngressKind::ALL[kind];
            let mut g = Ingress::new(kind, &table(6, 120), 2, 7).unwrap();
            let mut fifo: Vec<std::collections::VecDeque<u32>> = vec![Default::default(); g.queues() as usize];
            for (flow, len, take) in ops {
                if take {
                    let q = flow % g.queues();
                    prop_assert_eq!(g.dequeue(QueueId(q)).unwrap(), fifo[q as usize].pop_front());
                } else if let Admit::Queued(q) = g.enqueue(&key(flow), (flow % 2) as usize, len).unwrap() {
                    fifo[q.index()].push_back(len);
                }
                prop_assert_eq!(g.check(), Ok(()));
                prop_assert_eq!(g.held(), fifo.iter().map(|f| f.len() as u64).sum::<u64>());
            }
        }
    }
}
