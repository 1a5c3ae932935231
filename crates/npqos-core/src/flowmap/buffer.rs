//! The packet buffer of dqs section 4.3: storage divided into fixed-size blocks (64 B by
//! default), a stack of free blocks, and physical queues as linked lists of blocks. A packet of
//! `len` bytes takes `ceil(len / block)` blocks; its first block carries the packet's length
//! and a caller tag (the flow it belongs to). Physical queues come from a pool: taken when a
//! flow becomes active, given back when the queue empties.
//!
//! Payload bytes are stored only if the buffer was built with `store_payload`; simulations keep
//! the accounting alone. Without payload a packet's blocks hold nothing to chain, so a packet
//! takes one record (the id of its first block, on its queue's list) and its count of blocks:
//! a push or a pop is a few operations whatever the packet's length, where chaining 24 blocks
//! of a 1,500 B packet one by one was a loop of 24 (the router at 100 Gbps spent about 590
//! instructions a packet here; docs/PERFORMANCE.md). Blocks free and in use, and when a push is
//! refused, are the same either way.
//!
//! On the mechanism contract (ARCHITECTURE.md): a construction argument out of range, a push
//! onto an unknown queue or onto a pooled queue nobody took, and a release of a queue that is
//! not taken, not pooled or not empty are [`Error`]s that change nothing. Queries and [`pop`]
//! read an unknown queue as an empty one (it holds nothing), as [`crate::queues::pool::PacketPool`]
//! does.
//!
//! [`pop`]: QueueBuffer::pop

use crate::error::Error;
use crate::id::{self, QueueId};

/// Index of "no block" / "no queue".
pub const NONE: u32 = u32::MAX;

/// A packet taken off a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Popped {
    pub len: u32,
    pub tag: u32,
    /// Blocks returned to the free stack.
    pub blocks: u32,
    /// The queue is now empty.
    pub emptied: bool,
}

/// Blocks, the free-block stack and the physical queues.
#[derive(Clone)]
pub struct QueueBuffer {
    block_size: u32,
    /// Next block in the same queue (packets of a queue are chained end to end).
    next: Vec<u32>,
    /// Packet length, on a packet's first block.
    pkt_len: Vec<u32>,
    /// Caller tag, on a packet's first block.
    pkt_tag: Vec<u32>,
    /// Blocks given back, taken again last-in first-out before any block never used.
    free_blocks: Vec<u32>,
    /// Blocks `fresh..` have never been handed out; they are taken in increasing order. The
    /// order is that of one stack of every free block with block 0 on top: a returned block is
    /// on top of the never-used ones. (Without payload these ids are the packets' records.)
    fresh: u32,
    /// Blocks held by packets.
    used: u32,
    payload: Option<Vec<u8>>,
    // Per physical queue.
    head: Vec<u32>,
    tail: Vec<u32>,
    packets: Vec<u32>,
    bytes: Vec<u64>,
    free_queues: Vec<u32>,
    /// Per pooled queue, whether it is taken (out of the pool).
    taken: Vec<bool>,
    queues_in_use: u32,
    max_queues_in_use: u32,
}

impl QueueBuffer {
    /// `blocks` blocks of `block_size` bytes; `queues` pooled physical queues plus `extra`
    /// permanent queues (ids `queues..queues + extra`, never in the pool).
    ///
    /// Errors ([`Error::BadParameter`]): a zero block size, `u32::MAX` blocks or more, or
    /// `u32::MAX` queues (pooled and extra together) or more.
    pub fn new(blocks: u32, block_size: u32, queues: u32, extra: u32, store_payload: bool) -> Result<Self, Error> {
        if block_size == 0 {
            return Err(Error::BadParameter {
                parameter: "buffer block size",
                value: block_size.to_string(),
                expected: "at least 1 byte",
            });
        }
        if blocks == NONE {
            return Err(Error::BadParameter {
                parameter: "buffer blocks",
                value: blocks.to_string(),
                expected: "below 2^32 - 1",
            });
        }
        let nq = match queues.checked_add(extra) {
            Some(n) if n < NONE => n as usize,
            _ => {
                return Err(Error::BadParameter {
                    parameter: "buffer queues",
                    value: format!("{queues} pooled + {extra} extra"),
                    expected: "below 2^32 - 1 in all",
                })
            }
        };
        // A block's next, length and tag are written when it is handed out, before they are
        // read: the per-block arrays start as zeros, which the allocator may leave to the
        // kernel's zeroed pages, so that a buffer of a million blocks costs nothing to build
        // (a live reload builds one while frames wait; docs/live.md, "Reload").
        Ok(QueueBuffer {
            block_size,
            next: vec![0; blocks as usize],
            pkt_len: vec![0; blocks as usize],
            pkt_tag: vec![0; blocks as usize],
            free_blocks: Vec::new(),
            fresh: 0,
            used: 0,
            payload: store_payload.then(|| vec![0; blocks as usize * block_size as usize]),
            head: vec![NONE; nq],
            tail: vec![NONE; nq],
            packets: vec![0; nq],
            bytes: vec![0; nq],
            free_queues: (0..queues).rev().collect(),
            taken: vec![false; queues as usize],
            queues_in_use: 0,
            max_queues_in_use: 0,
        })
    }

    pub fn block_size(&self) -> u32 {
        self.block_size
    }
    pub fn total_blocks(&self) -> u32 {
        self.next.len() as u32
    }
    pub fn free_blocks(&self) -> u32 {
        self.total_blocks() - self.used
    }
    /// Blocks a packet of `len` bytes needs (at least one).
    pub fn blocks_for(&self, len: u32) -> u32 {
        len.div_ceil(self.block_size).max(1)
    }
    pub fn queues_in_use(&self) -> u32 {
        self.queues_in_use
    }
    pub fn max_queues_in_use(&self) -> u32 {
        self.max_queues_in_use
    }
    pub fn pool_free(&self) -> u32 {
        self.free_queues.len() as u32
    }
    /// Physical queues, pooled and extra (ids `0..queues()`).
    pub fn queues(&self) -> u32 {
        self.head.len() as u32
    }
    /// Packets in `q` (0 for an unknown queue, which holds nothing).
    pub fn packets(&self, q: u32) -> u32 {
        self.packets.get(q as usize).copied().unwrap_or(0)
    }
    /// Bytes in `q` (0 for an unknown queue, which holds nothing).
    pub fn bytes(&self, q: u32) -> u64 {
        self.bytes.get(q as usize).copied().unwrap_or(0)
    }
    /// Length of the packet at the head of `q`, if any (`None` for an unknown queue).
    pub fn head_len(&self, q: u32) -> Option<u32> {
        let h = *self.head.get(q as usize)?;
        (h != NONE).then(|| self.pkt_len[h as usize])
    }

    /// Takes a queue from the pool (a flow became active).
    pub fn take_queue(&mut self) -> Option<u32> {
        let q = self.free_queues.pop()?;
        self.taken[q as usize] = true;
        self.queues_in_use += 1;
        self.max_queues_in_use = self.max_queues_in_use.max(self.queues_in_use);
        Some(q)
    }

    /// Returns an empty pooled queue to the pool.
    ///
    /// Errors (no effect): an unknown queue ([`Error::UnknownId`]); an extra queue (never in
    /// the pool), a queue not taken (released twice, or never taken) or one that still holds
    /// packets ([`Error::NotAllowed`]).
    pub fn release_queue(&mut self, q: u32) -> Result<(), Error> {
        let qi = id::check(QueueId::KIND, q, self.head.len())?;
        match self.taken.get(qi) {
            None => return Err(Error::NotAllowed("buffer: an extra queue is never in the pool")),
            Some(false) => return Err(Error::NotAllowed("buffer: the queue is not taken from the pool")),
            Some(true) => {}
        }
        if self.packets[qi] != 0 {
            return Err(Error::NotAllowed("buffer: the queue still holds packets"));
        }
        self.taken[qi] = false;
        self.free_queues.push(q);
        self.queues_in_use -= 1;
        Ok(())
    }

    /// Appends a packet of `len` bytes (payload copied if stored) to queue `q`. `Ok(false)`
    /// (and nothing changed) if there are not enough free blocks.
    ///
    /// Errors (no effect): an unknown queue ([`Error::UnknownId`]), or a pooled queue that is
    /// not taken ([`Error::NotAllowed`]: it is in the pool, where queues are empty).
    pub fn push(&mut self, q: u32, len: u32, tag: u32, payload: Option<&[u8]>) -> Result<bool, Error> {
        let qi = id::check(QueueId::KIND, q, self.head.len())?;
        if self.taken.get(qi) == Some(&false) {
            return Err(Error::NotAllowed("buffer: push onto a queue that is in the pool"));
        }
        let need = self.blocks_for(len);
        if need > self.free_blocks() {
            return Ok(false);
        }
        let (next, free) = (&mut self.next, &mut self.free_blocks);
        // The last id given back, else the lowest never used (there is one: the caller checked,
        // and without payload a packet takes one id and at least one block).
        let mut take = || {
            free.pop().unwrap_or_else(|| {
                self.fresh += 1;
                self.fresh - 1
            })
        };
        let tail = self.tail[q as usize];
        let first = take();
        let mut last = first;
        if let Some(store) = self.payload.as_mut() {
            let bs = self.block_size as usize;
            let mut chunks = payload.unwrap_or(&[]).chunks(bs);
            for i in 0..need {
                let b = if i == 0 { first } else { take() };
                if i > 0 {
                    next[last as usize] = b;
                }
                if let Some(src) = chunks.next() {
                    store[b as usize * bs..b as usize * bs + src.len()].copy_from_slice(src);
                }
                last = b;
            }
        }
        next[last as usize] = NONE;
        self.pkt_len[first as usize] = len;
        self.pkt_tag[first as usize] = tag;
        if tail == NONE {
            self.head[q as usize] = first;
        } else {
            next[tail as usize] = first;
        }
        self.used += need;
        self.tail[q as usize] = last;
        self.packets[q as usize] += 1;
        self.bytes[q as usize] += len as u64;
        Ok(true)
    }

    /// Takes the head packet of `q`, copying its payload into `out` if stored and given
    /// (`None` if `q` is empty or unknown).
    pub fn pop(&mut self, q: u32, mut out: Option<&mut Vec<u8>>) -> Option<Popped> {
        let mut b = *self.head.get(q as usize)?;
        if b == NONE {
            return None;
        }
        let (len, tag) = (self.pkt_len[b as usize], self.pkt_tag[b as usize]);
        let n = self.blocks_for(len);
        if let Some(o) = out.as_deref_mut() {
            o.clear();
        }
        if let Some(store) = self.payload.as_ref() {
            let bs = self.block_size as usize;
            for i in 0..n as usize {
                if let Some(o) = out.as_deref_mut() {
                    let take = (len as usize - i * bs).min(bs);
                    o.extend_from_slice(&store[b as usize * bs..b as usize * bs + take]);
                }
                let nx = self.next[b as usize];
                self.free_blocks.push(b);
                b = nx;
            }
        } else {
            // One record for the packet, its blocks counted.
            let nx = self.next[b as usize];
            self.free_blocks.push(b);
            b = nx;
        }
        self.used -= n;
        self.head[q as usize] = b;
        if b == NONE {
            self.tail[q as usize] = NONE;
        }
        self.packets[q as usize] -= 1;
        self.bytes[q as usize] -= len as u64;
        Some(Popped { len, tag, blocks: n, emptied: b == NONE })
    }

    /// Gives the blocks' storage back (their lists and payload): a buffer that holds nothing and
    /// will take nothing (a push finds no free block), kept for its counters. `npqos live`
    /// retires a configuration's buffer so once a reload's old configuration has sent what it
    /// held, so that a run with many reloads does not keep every old buffer's touched pages.
    ///
    /// Errors (no effect): a queue still holds packets ([`Error::NotAllowed`]).
    pub fn release_storage(&mut self) -> Result<(), Error> {
        if self.packets.iter().any(|&p| p != 0) {
            return Err(Error::NotAllowed("buffer: storage released while queues hold packets"));
        }
        (self.next, self.pkt_len, self.pkt_tag, self.free_blocks) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        debug_assert_eq!(self.used, 0, "no packet holds a block");
        self.payload = self.payload.as_ref().map(|_| Vec::new());
        self.fresh = 0;
        Ok(())
    }

    /// Checks block accounting: every block (without payload: every packet's record) is either
    /// free or on exactly one queue's list, the blocks in use are the packets' blocks, and each
    /// queue's packet and byte counts match its list; and the pool: every pooled queue
    /// is either taken or on the free list (once, and empty), and the taken ones are counted as
    /// in use. O(blocks + queues).
    pub fn check(&self) -> Result<(), String> {
        let mut listed = vec![false; self.taken.len()];
        for &q in &self.free_queues {
            let Some(seen) = listed.get_mut(q as usize) else {
                return Err(format!("queue {q} on the free list is not a pooled queue"));
            };
            if std::mem::replace(seen, true) {
                return Err(format!("queue {q} twice on the free list"));
            }
            if self.taken[q as usize] {
                return Err(format!("queue {q} is taken and on the free list"));
            }
            if self.head[q as usize] != NONE {
                return Err(format!("queue {q} is in the pool but not empty"));
            }
        }
        let taken = self.taken.iter().filter(|&&t| t).count();
        if taken + self.free_queues.len() != self.taken.len() || taken != self.queues_in_use as usize {
            return Err(format!(
                "{taken} queues taken + {} free != {} pooled, or {} counted in use",
                self.free_queues.len(),
                self.taken.len(),
                self.queues_in_use
            ));
        }
        let total = self.next.len();
        let mut seen = vec![false; total];
        for &b in &self.free_blocks {
            if b >= self.fresh {
                return Err(format!("block {b} given back but never handed out"));
            }
            if std::mem::replace(&mut seen[b as usize], true) {
                return Err(format!("block {b} twice on the free stack"));
            }
        }
        let (mut used, mut ids) = (0usize, 0usize);
        for q in 0..self.head.len() {
            let (mut b, mut pk, mut by, mut last) = (self.head[q], 0u32, 0u64, NONE);
            while b != NONE {
                let len = self.pkt_len[b as usize];
                used += self.blocks_for(len) as usize;
                let ids_of_packet = if self.payload.is_some() { self.blocks_for(len) } else { 1 };
                for _ in 0..ids_of_packet {
                    if b == NONE {
                        return Err(format!("queue {q}: packet chain ends early"));
                    }
                    if std::mem::replace(&mut seen[b as usize], true) {
                        return Err(format!("block {b} (queue {q}) is free or on another list"));
                    }
                    ids += 1;
                    last = b;
                    b = self.next[b as usize];
                }
                pk += 1;
                by += len as u64;
            }
            if last != self.tail[q] {
                return Err(format!("queue {q}: tail {} but list ends at {last}", self.tail[q]));
            }
            if pk != self.packets[q] || by != self.bytes[q] {
                return Err(format!(
                    "queue {q}: counts {} packets / {} bytes, list holds {pk} / {by}",
                    self.packets[q], self.bytes[q]
                ));
            }
        }
        if (self.fresh..total as u32).any(|b| seen[b as usize]) {
            return Err(format!("a block from {} on is on a list but was never handed out", self.fresh));
        }
        let free_ids = self.free_blocks.len() + (total - self.fresh as usize);
        if ids + free_ids != total {
            return Err(format!("{ids} ids on lists + {free_ids} free != {total}"));
        }
        if used != self.used as usize || used > total {
            return Err(format!("the packets hold {used} blocks, {} counted in use, of {total}", self.used));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Released storage: refused while a queue holds packets (nothing changes), then the
    /// buffer holds nothing and takes nothing, its counters kept and its accounting whole.
    #[test]
    fn released_storage_takes_nothing_and_keeps_its_counters() {
        let mut b = QueueBuffer::new(64, 64, 4, 0, true).unwrap();
        let q = b.take_queue().unwrap();
        assert!(b.push(q, 200, 7, Some(&[1u8; 200])).unwrap());
        assert!(b.release_storage().is_err());
        assert_eq!((b.total_blocks(), b.packets(q)), (64, 1), "a refused release changed nothing");
        assert_eq!(b.pop(q, None).map(|p| p.len), Some(200));
        b.release_storage().unwrap();
        assert_eq!((b.total_blocks(), b.free_blocks(), b.max_queues_in_use()), (0, 0, 1));
        assert!(!b.push(q, 100, 7, Some(&[1u8; 100])).unwrap(), "no block to take");
        b.check().unwrap();
    }

    #[test]
    fn packets_round_trip_with_payload_and_blocks_come_back() {
        let mut b = QueueBuffer::new(10, 64, 2, 0, true).unwrap();
        let q = b.take_queue().unwrap();
        let p1: Vec<u8> = (0..150).map(|i| i as u8).collect();
        assert_eq!(b.push(q, 150, 7, Some(&p1)), Ok(true));
        assert_eq!(b.push(q, 64, 8, Some(&p1[..64])), Ok(true));
        assert_eq!(b.free_blocks(), 6);
        assert_eq!(b.push(q, 1000, 9, None), Ok(false), "16 blocks do not fit in 6");
        assert_eq!(b.free_blocks(), 6);
        b.check().unwrap();
        let mut out = Vec::new();
        assert_eq!(b.pop(q, Some(&mut out)), Some(Popped { len: 150, tag: 7, blocks: 3, emptied: false }));
        assert_eq!(out, p1);
        assert_eq!(b.pop(q, Some(&mut out)), Some(Popped { len: 64, tag: 8, blocks: 1, emptied: true }));
        assert_eq!(out, &p1[..64]);
        assert_eq!(b.pop(q, None), None);
        assert_eq!(b.free_blocks(), 10);
        b.release_queue(q).unwrap();
        assert_eq!((b.queues_in_use(), b.max_queues_in_use(), b.pool_free()), (0, 1, 2));
        b.check().unwrap();
    }

    /// Without payload a packet takes one id and counts its blocks: `check` finds the counts
    /// and the lists disagreeing, and more blocks held than the buffer has (which the ids alone,
    /// one a packet, could not show).
    #[test]
    fn check_finds_block_counts_that_do_not_add_up() {
        let mut b = QueueBuffer::new(8, 64, 2, 0, false).unwrap();
        let q = b.take_queue().unwrap();
        assert_eq!((b.push(q, 300, 1, None), b.push(q, 100, 2, None)), (Ok(true), Ok(true)));
        assert_eq!((b.free_blocks(), b.push(q, 200, 3, None)), (1, Ok(false)), "5 + 2 of 8 blocks held");
        b.check().unwrap();
        let mut bad = b.clone();
        bad.used -= 1;
        assert!(bad.check().is_err(), "one block less counted than the packets hold");
        let mut bad = b.clone();
        bad.pkt_len[bad.head[q as usize] as usize] = 1000;
        bad.bytes[q as usize] += 700;
        bad.used = 18;
        assert!(bad.check().is_err(), "more blocks held than there are");
    }

    /// A payload shorter than the packet, or none, while storing: what was given comes back
    /// first, and the blocks are accounted by the packet's length.
    #[test]
    fn a_short_payload_comes_back_first() {
        let mut b = QueueBuffer::new(8, 64, 1, 0, true).unwrap();
        let q = b.take_queue().unwrap();
        let data: Vec<u8> = (0..100).collect();
        assert_eq!(b.push(q, 200, 1, Some(&data)), Ok(true));
        assert_eq!(b.push(q, 70, 2, None), Ok(true));
        assert_eq!(b.free_blocks(), 8 - 4 - 2);
        b.check().unwrap();
        let mut out = Vec::new();
        assert_eq!(b.pop(q, Some(&mut out)).map(|p| (p.len, p.blocks)), Some((200, 4)));
        assert_eq!((out.len(), &out[..100]), (200, &data[..]));
        assert_eq!(b.pop(q, Some(&mut out)).map(|p| (p.len, p.blocks, p.emptied)), Some((70, 2, true)));
        assert_eq!(out.len(), 70);
        b.check().unwrap();
    }

    #[test]
    fn pool_runs_out() {
        let mut b = QueueBuffer::new(4, 64, 2, 1, false).unwrap();
        assert!(b.take_queue().is_some() && b.take_queue().is_some());
        assert_eq!(b.take_queue(), None);
        // The extra queue (id 2) is usable without the pool.
        assert_eq!(b.push(2, 1, 0, None), Ok(true));
        assert_eq!(b.head_len(2), Some(1));
        b.check().unwrap();
    }

    #[test]
    fn bad_construction_is_an_error() {
        for (blocks, block_size, queues, extra) in
            [(4, 0, 2, 0), (u32::MAX, 64, 2, 0), (4, 64, u32::MAX, 0), (4, 64, u32::MAX - 1, 1), (4, 64, u32::MAX, 2)]
        {
            let r = QueueBuffer::new(blocks, block_size, queues, extra, false);
            assert!(matches!(r, Err(Error::BadParameter { .. })), "{blocks} {block_size} {queues} {extra}");
        }
        assert!(QueueBuffer::new(0, 1, 0, 0, false).is_ok_and(|b| b.queues() == 0), "empty but valid");
    }

    /// Queries and pops read an unknown queue as an empty one; a push onto it is refused.
    #[test]
    fn unknown_queues_hold_nothing_and_take_nothing() {
        let mut b = QueueBuffer::new(4, 64, 2, 1, false).unwrap();
        for q in [3, 4, NONE] {
            assert_eq!((b.packets(q), b.bytes(q), b.head_len(q)), (0, 0, None));
            assert_eq!(b.pop(q, None), None);
            assert_eq!(b.push(q, 10, 0, None), Err(Error::UnknownId { kind: "queue", id: q, count: 3 }));
        }
        assert_eq!(b.free_blocks(), 4);
        b.check().unwrap();
    }

    /// Releasing a queue twice, one never taken, an extra one, a non-empty one or an unknown
    /// one is refused and leaves the pool as it was (the counter of queues in use used to wrap
    /// and the queue to go on the free list twice); so is a push onto a queue in the pool.
    #[test]
    fn bad_releases_and_pushes_change_nothing() {
        let mut b = QueueBuffer::new(4, 64, 2, 1, false).unwrap();
        let state = |b: &QueueBuffer| (b.queues_in_use(), b.pool_free(), b.free_blocks());
        assert!(matches!(b.release_queue(0), Err(Error::NotAllowed(_))), "never taken");
        assert_eq!(state(&b), (0, 2, 4));
        assert!(matches!(b.push(0, 10, 0, None), Err(Error::NotAllowed(_))), "in the pool");
        let q = b.take_queue().unwrap();
        assert_eq!(b.push(q, 10, 0, None), Ok(true));
        assert!(matches!(b.release_queue(q), Err(Error::NotAllowed(_))), "holds a packet");
        assert!(matches!(b.release_queue(2), Err(Error::NotAllowed(_))), "the extra queue");
        assert_eq!(b.release_queue(3), Err(Error::UnknownId { kind: "queue", id: 3, count: 3 }));
        assert_eq!(state(&b), (1, 1, 3));
        b.check().unwrap();
        assert!(b.pop(q, None).is_some_and(|p| p.emptied));
        b.release_queue(q).unwrap();
        assert!(matches!(b.release_queue(q), Err(Error::NotAllowed(_))), "released twice");
        assert_eq!(state(&b), (0, 2, 4));
        b.check().unwrap();
        assert_eq!((b.take_queue(), b.take_queue(), b.take_queue()), (Some(q), Some(1 - q), None));
    }

    #[derive(Clone, Debug)]
    enum Call {
        Take,
        Release(u32),
        Push(u32, u32),
        Pop(u32),
        Read(u32),
    }

    fn call() -> impl Strategy<Value = Call> {
        prop_oneof![
            2 => Just(Call::Take),
            2 => (0u32..8).prop_map(Call::Release),
            4 => (0u32..8, 0u32..300).prop_map(|(q, l)| Call::Push(q, l)),
            3 => (0u32..8).prop_map(Call::Pop),
            1 => (0u32..8).prop_map(Call::Read),
        ]
    }

    /// Packet `tag`'s `len` bytes: bytes that change along the packet (repeating every 251,
    /// a prime, so no two blocks of a packet of up to 251 blocks read the same), so that a
    /// block copied to the wrong place or from the wrong block shows.
    fn payload_of(tag: u32, len: u32) -> Vec<u8> {
        (0..len).map(|i| (tag.wrapping_mul(131).wrapping_add(i) % 251) as u8).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, rng_seed: proptest::test_runner::RngSeed::Fixed(0x627566), ..ProptestConfig::default() })]

        /// Arbitrary takes, releases, pushes, pops and reads on arbitrary small buffers, with
        /// ids up to past the end and releases and pushes the pool does not allow: no panic; a
        /// refused call is an error of the right kind and changes nothing; every queue is a
        /// FIFO of its packets and their bytes (with payload stored, or the accounting alone);
        /// every invariant holds after every call.
        #[test]
        fn arbitrary_calls_keep_the_contract(
            calls in prop::collection::vec(call(), 1..300),
            blocks in 0u32..40, block_size in prop_oneof![Just(64u32), 1u32..100], queues in 0u32..5, extra in 0u32..3,
            store in any::<bool>(),
        ) {
            let mut b = QueueBuffer::new(blocks, block_size, queues, extra, store).unwrap();
            let nq = (queues + extra) as usize;
            let mut fifo = vec![std::collections::VecDeque::<(u32, u32)>::new(); nq];
            let mut taken = vec![false; queues as usize];
            let (mut tag, mut out) = (0u32, Vec::new());
            for c in calls {
                let before = (b.free_blocks(), b.queues_in_use(), b.pool_free());
                let refused = match c {
                    Call::Take => {
                        match b.take_queue() {
                            Some(q) => {
                                prop_assert!(!std::mem::replace(&mut taken[q as usize], true), "took a taken queue");
                                prop_assert!(fifo[q as usize].is_empty());
                            }
                            None => prop_assert!(taken.iter().all(|&t| t)),
                        }
                        None
                    }
                    Call::Release(q) => {
                        let r = b.release_queue(q);
                        let qi = q as usize;
                        match &r {
                            Ok(()) => {
                                prop_assert!(qi < taken.len() && taken[qi] && fifo[qi].is_empty());
                                taken[qi] = false;
                            }
                            Err(Error::UnknownId { .. }) => prop_assert!(qi >= nq),
                            Err(Error::NotAllowed(_)) => {
                                prop_assert!(qi < nq && !(qi < taken.len() && taken[qi] && fifo[qi].is_empty()));
                            }
                            Err(e) => prop_assert!(false, "{e:?}"),
                        }
                        r.err()
                    }
                    Call::Push(q, len) => {
                        tag += 1;
                        let bytes = payload_of(tag, len);
                        let r = b.push(q, len, tag, Some(&bytes));
                        let qi = q as usize;
                        match &r {
                            Ok(fits) => {
                                prop_assert!(qi < nq && taken.get(qi) != Some(&false));
                                prop_assert_eq!(*fits, b.blocks_for(len) <= before.0);
                                if *fits {
                                    fifo[qi].push_back((len, tag));
                                }
                            }
                            Err(Error::UnknownId { .. }) => prop_assert!(qi >= nq),
                            Err(Error::NotAllowed(_)) => prop_assert!(taken.get(qi) == Some(&false)),
                            Err(e) => prop_assert!(false, "{e:?}"),
                        }
                        r.err()
                    }
                    Call::Pop(q) => {
                        let got = b.pop(q, Some(&mut out));
                        let want = fifo.get_mut(q as usize).and_then(|f| f.pop_front());
                        prop_assert_eq!(got.map(|p| (p.len, p.tag)), want);
                        if let (Some(p), Some((len, t))) = (got, want) {
                            prop_assert_eq!(&out, &if store { payload_of(t, len) } else { Vec::new() });
                            prop_assert_eq!(p.emptied, fifo[q as usize].is_empty());
                        }
                        None
                    }
                    Call::Read(q) => {
                        let f = fifo.get(q as usize);
                        prop_assert_eq!(b.packets(q) as usize, f.map_or(0, |f| f.len()));
                        prop_assert_eq!(b.bytes(q), f.map_or(0, |f| f.iter().map(|x| x.0 as u64).sum()));
                        prop_assert_eq!(b.head_len(q), f.and_then(|f| f.front()).map(|x| x.0));
                        None
                    }
                };
                if refused.is_some() {
                    prop_assert_eq!(before, (b.free_blocks(), b.queues_in_use(), b.pool_free()), "a refused call changed the buffer");
                }
                prop_assert!(b.check().is_ok(), "{:?}", b.check());
            }
        }
    }
}
