//! Packets waiting in per-queue FIFOs over one pool of packet nodes: the packet buffer of the
//! `link` and `kim` models and of any data plane that keeps whole packets (as descriptors) per
//! queue.
//!
//! Geometry: a node is 16 bytes (`next: u32`, `size: u32`, `arrival: u64` ns); a queue is 16
//! bytes (`head`, `tail` node indices and its byte count). Nodes live in one `Vec` threaded by
//! `next`; freed nodes form a LIFO free list, so the pool grows to the peak number of buffered
//! packets and never shrinks, and a push or pop allocates nothing once it is warm. O(1) per
//! operation. The buffer limit (tail drop, a shared pool) is the caller's policy: the pool
//! stores whatever it is given.

use crate::error::Error;
use crate::id::{self, QueueId};
use crate::time::Instant;

const NIL: u32 = u32::MAX;

/// A buffered packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Wire length in bytes.
    pub size: u32,
    /// When it was buffered.
    pub arrival: Instant,
}

#[derive(Clone, Copy, Debug)]
struct Node {
    next: u32,
    size: u32,
    arrival: u64,
}

#[derive(Clone, Copy, Debug)]
struct Fifo {
    head: u32,
    tail: u32,
    bytes: u64,
}

/// Per-queue packet FIFOs over one node pool (see the module documentation).
#[derive(Clone, Debug)]
pub struct PacketPool {
    nodes: Vec<Node>,
    free: u32,
    fifos: Vec<Fifo>,
    packets: usize,
}

impl PacketPool {
    /// Queues `0..queues`, all empty.
    pub fn new(queues: u32) -> Self {
        PacketPool {
            nodes: Vec::new(),
            free: NIL,
            fifos: vec![Fifo { head: NIL, tail: NIL, bytes: 0 }; queues as usize],
            packets: 0,
        }
    }

    pub fn queues(&self) -> usize {
        self.fifos.len()
    }

    /// Packets buffered in all queues.
    pub fn packets(&self) -> usize {
        self.packets
    }

    /// Nodes allocated so far (the peak number of buffered packets).
    pub fn nodes_allocated(&self) -> usize {
        self.nodes.len()
    }

    /// Bytes buffered in `q` (0 for an unknown queue, which holds nothing).
    #[inline]
    pub fn bytes(&self, q: QueueId) -> u64 {
        self.fifos.get(q.index()).map_or(0, |f| f.bytes)
    }

    /// Whether `q` holds no packet (true for an unknown queue).
    #[inline]
    pub fn is_empty(&self, q: QueueId) -> bool {
        self.fifos.get(q.index()).is_none_or(|f| f.head == NIL)
    }

    /// A hint that `q` is about to be used: loads its record ([`crate::hint::prefetch`]).
    #[inline]
    pub fn prefetch(&self, q: QueueId) {
        crate::hint::prefetch(&self.fifos, q.index());
    }

    /// A hint that `q`'s head packet is about to be taken: loads its node (reads `q`'s record,
    /// so prefetch that a little earlier).
    #[inline]
    pub fn prefetch_head(&self, q: QueueId) {
        if let Some(f) = self.fifos.get(q.index()) {
            crate::hint::prefetch(&self.nodes, f.head as usize);
        }
    }

    /// The head packet of `q`, if any.
    #[inline]
    pub fn head(&self, q: QueueId) -> Option<Packet> {
        let f = self.fifos.get(q.index())?;
        (f.head != NIL).then(|| {
            let n = self.nodes[f.head as usize];
            Packet { size: n.size, arrival: Instant::from_nanos(n.arrival) }
        })
    }

    /// Appends a packet to `q`.
    #[inline]
    pub fn push(&mut self, q: QueueId, p: Packet) -> Result<(), Error> {
        let qi = id::check(QueueId::KIND, q.0, self.fifos.len())?;
        let node = Node { next: NIL, size: p.size, arrival: p.arrival.as_nanos() };
        let i = if self.free != NIL {
            let i = self.free;
            self.free = self.nodes[i as usize].next;
            self.nodes[i as usize] = node;
            i
        } else {
            if self.nodes.len() >= NIL as usize {
                return Err(Error::NotAllowed("packet pool: 2^32 - 1 packets buffered"));
            }
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        };
        let f = &mut self.fifos[qi];
        if f.tail == NIL {
            f.head = i;
        } else {
            self.nodes[f.tail as usize].next = i;
        }
        f.tail = i;
        f.bytes += p.size as u64;
        self.packets += 1;
        Ok(())
    }

    /// Removes and returns the head packet of `q` (`None` if it is empty or unknown).
    #[inline]
    pub fn pop(&mut self, q: QueueId) -> Option<Packet> {
        let f = self.fifos.get_mut(q.index())?;
        let head = f.head;
        if head == NIL {
            return None;
        }
        let n = self.nodes[head as usize];
        f.head = n.next;
        if f.head == NIL {
            f.tail = NIL;
        }
        f.bytes -= n.size as u64;
        self.nodes[head as usize].next = self.free;
        self.free = head;
        self.packets -= 1;
        Some(Packet { size: n.size, arrival: Instant::from_nanos(n.arrival) })
    }

    /// Checks the internal invariants: every node is on exactly one queue or the free list,
    /// byte counts equal the sums of the queued sizes.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut owner = vec![false; self.nodes.len()];
        let visit = |i: u32, owner: &mut Vec<bool>| -> Result<(), String> {
            let Some(o) = owner.get_mut(i as usize) else { return Err(format!("node {i} out of range")) };
            if *o {
                return Err(format!("node {i} reached twice"));
            }
            *o = true;
            Ok(())
        };
        let mut packets = 0;
        for (q, f) in self.fifos.iter().enumerate() {
            let (mut i, mut bytes, mut last) = (f.head, 0u64, NIL);
            while i != NIL {
                visit(i, &mut owner)?;
                bytes += self.nodes[i as usize].size as u64;
                packets += 1;
                last = i;
                i = self.nodes[i as usize].next;
            }
            if last != f.tail || bytes != f.bytes {
                return Err(format!("queue {q}: tail or byte count wrong"));
            }
        }
        let mut i = self.free;
        while i != NIL {
            visit(i, &mut owner)?;
            i = self.nodes[i as usize].next;
        }
        if owner.iter().any(|o| !o) || packets != self.packets {
            return Err("a node is lost or the packet count is wrong".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[test]
    fn fifo_per_queue_and_nodes_reused() {
        let mut p = PacketPool::new(2);
        let pk = |s: u32, t: u64| Packet { size: s, arrival: Instant::from_nanos(t) };
        p.push(QueueId(0), pk(100, 1)).unwrap();
        p.push(QueueId(1), pk(200, 2)).unwrap();
        p.push(QueueId(0), pk(300, 3)).unwrap();
        assert_eq!(p.bytes(QueueId(0)), 400);
        assert_eq!(p.head(QueueId(0)), Some(pk(100, 1)));
        assert_eq!(p.pop(QueueId(0)), Some(pk(100, 1)));
        assert_eq!(p.pop(QueueId(0)), Some(pk(300, 3)));
        assert_eq!(p.pop(QueueId(0)), None);
        p.push(QueueId(0), pk(50, 4)).unwrap();
        assert_eq!(p.nodes_allocated(), 3, "freed nodes are reused");
        assert_eq!(p.push(QueueId(2), pk(1, 1)), Err(Error::UnknownId { kind: "queue", id: 2, count: 2 }));
        assert!(p.is_empty(QueueId(9)) && p.pop(QueueId(9)).is_none() && p.bytes(QueueId(9)) == 0);
        p.check_invariants().unwrap();
    }

    proptest! {
        /// Arbitrary pushes and pops, some on unknown queues: no panic, the pool equals one
        /// `VecDeque` per queue, and the invariants hold after every call.
        #[test]
        fn matches_a_vecdeque_per_queue(ops in proptest::collection::vec((0u32..6, any::<bool>(), 1u32..9000), 1..500)) {
            let mut p = PacketPool::new(4);
            let mut model: Vec<VecDeque<Packet>> = vec![VecDeque::new(); 4];
            for (t, (q, push, size)) in ops.into_iter().enumerate() {
                let pk = Packet { size, arrival: Instant::from_nanos(t as u64) };
                if push {
                    let r = p.push(QueueId(q), pk);
                    prop_assert_eq!(r.is_ok(), q < 4);
                    if q < 4 {
                        model[q as usize].push_back(pk);
                    }
                } else {
                    let want = model.get_mut(q as usize).and_then(|m| m.pop_front());
                    prop_assert_eq!(p.pop(QueueId(q)), want);
                }
                for (i, m) in model.iter().enumerate() {
                    prop_assert_eq!(p.bytes(QueueId(i as u32)), m.iter().map(|x| x.size as u64).sum::<u64>());
                }
                prop_assert!(p.check_invariants().is_ok(), "{:?}", p.check_invariants());
            }
        }
    }
}
