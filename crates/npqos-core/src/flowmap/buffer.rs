//! The packet buffer of dqs section 4.3: storage divided into fixed-size blocks (64 B by
//! default), a stack of free blocks, and physical queues as linked lists of blocks. A packet of
//! `len` bytes takes `ceil(len / block)` blocks; its first block carries the packet's length
//! and a caller tag (the flow it belongs to). Physical queues come from a pool: taken when a
//! flow becomes active, given back when the queue empties.
//!
//! Payload bytes are stored only if the buffer was built with `store_payload`; simulations keep
//! the accounting alone.

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
    free_blocks: Vec<u32>,
    payload: Option<Vec<u8>>,
    // Per physical queue.
    head: Vec<u32>,
    tail: Vec<u32>,
    packets: Vec<u32>,
    bytes: Vec<u64>,
    free_queues: Vec<u32>,
    queues_in_use: u32,
    max_queues_in_use: u32,
}

impl QueueBuffer {
    /// `blocks` blocks of `block_size` bytes; `queues` pooled physical queues plus `extra`
    /// permanent queues (ids `queues..queues + extra`, never in the pool).
    pub fn new(blocks: u32, block_size: u32, queues: u32, extra: u32, store_payload: bool) -> Self {
        assert!(block_size > 0 && blocks < NONE && queues + extra < NONE);
        let nq = (queues + extra) as usize;
        QueueBuffer {
            block_size,
            next: vec![NONE; blocks as usize],
            pkt_len: vec![0; blocks as usize],
            pkt_tag: vec![NONE; blocks as usize],
            // Popped from the end: block 0 is handed out first.
            free_blocks: (0..blocks).rev().collect(),
            payload: store_payload.then(|| vec![0; blocks as usize * block_size as usize]),
            head: vec![NONE; nq],
            tail: vec![NONE; nq],
            packets: vec![0; nq],
            bytes: vec![0; nq],
            free_queues: (0..queues).rev().collect(),
            queues_in_use: 0,
            max_queues_in_use: 0,
        }
    }

    pub fn block_size(&self) -> u32 {
        self.block_size
    }
    pub fn total_blocks(&self) -> u32 {
        self.next.len() as u32
    }
    pub fn free_blocks(&self) -> u32 {
        self.free_blocks.len() as u32
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
    pub fn packets(&self, q: u32) -> u32 {
        self.packets[q as usize]
    }
    pub fn bytes(&self, q: u32) -> u64 {
        self.bytes[q as usize]
    }
    /// Length of the packet at the head of `q`, if any.
    pub fn head_len(&self, q: u32) -> Option<u32> {
        let h = self.head[q as usize];
        (h != NONE).then(|| self.pkt_len[h as usize])
    }

    /// Takes a queue from the pool (a flow became active).
    pub fn take_queue(&mut self) -> Option<u32> {
        let q = self.free_queues.pop()?;
        self.queues_in_use += 1;
        self.max_queues_in_use = self.max_queues_in_use.max(self.queues_in_use);
        Some(q)
    }

    /// Returns an empty pooled queue to the pool.
    pub fn release_queue(&mut self, q: u32) {
        debug_assert_eq!(self.packets[q as usize], 0, "releasing a non-empty queue");
        self.free_queues.push(q);
        self.queues_in_use -= 1;
    }

    /// Appends a packet of `len` bytes (payload copied if stored) to queue `q`. `false` (and
    /// nothing changed) if there are not enough free blocks.
    pub fn push(&mut self, q: u32, len: u32, tag: u32, payload: Option<&[u8]>) -> bool {
        let need = self.blocks_for(len);
        if need > self.free_blocks.len() as u32 {
            return false;
        }
        let first = *self.free_blocks.last().expect("checked");
        self.pkt_len[first as usize] = len;
        self.pkt_tag[first as usize] = tag;
        let bs = self.block_size as usize;
        let mut prev = self.tail[q as usize];
        for i in 0..need as usize {
            let b = self.free_blocks.pop().expect("checked");
            if i > 0 {
                self.pkt_tag[b as usize] = NONE;
            }
            if let (Some(store), Some(data)) = (self.payload.as_mut(), payload) {
                let src = data.get(i * bs..((i + 1) * bs).min(data.len())).unwrap_or(&[]);
                store[b as usize * bs..b as usize * bs + src.len()].copy_from_slice(src);
            }
            self.next[b as usize] = NONE;
            if prev == NONE {
                self.head[q as usize] = b;
            } else {
                self.next[prev as usize] = b;
            }
            prev = b;
        }
        self.tail[q as usize] = prev;
        self.packets[q as usize] += 1;
        self.bytes[q as usize] += len as u64;
        true
    }

    /// Takes the head packet of `q`, copying its payload into `out` if stored and given.
    pub fn pop(&mut self, q: u32, mut out: Option<&mut Vec<u8>>) -> Option<Popped> {
        let mut b = self.head[q as usize];
        if b == NONE {
            return None;
        }
        let (len, tag) = (self.pkt_len[b as usize], self.pkt_tag[b as usize]);
        let n = self.blocks_for(len);
        let bs = self.block_size as usize;
        if let Some(o) = out.as_deref_mut() {
            o.clear();
        }
        for i in 0..n {
            if let (Some(store), Some(o)) = (self.payload.as_ref(), out.as_deref_mut()) {
                let take = (len as usize - i as usize * bs).min(bs);
                o.extend_from_slice(&store[b as usize * bs..b as usize * bs + take]);
            }
            let nx = self.next[b as usize];
            self.free_blocks.push(b);
            b = nx;
        }
        self.head[q as usize] = b;
        if b == NONE {
            self.tail[q as usize] = NONE;
        }
        self.packets[q as usize] -= 1;
        self.bytes[q as usize] -= len as u64;
        Some(Popped { len, tag, blocks: n, emptied: b == NONE })
    }

    /// Checks block accounting: every block is either free or on exactly one queue's list,
    /// and each queue's packet and byte counts match its list. O(blocks).
    pub fn check(&self) -> Result<(), String> {
        let total = self.next.len();
        let mut seen = vec![false; total];
        for &b in &self.free_blocks {
            if std::mem::replace(&mut seen[b as usize], true) {
                return Err(format!("block {b} twice on the free stack"));
            }
        }
        let mut used = 0usize;
        for q in 0..self.head.len() {
            let (mut b, mut pk, mut by, mut last) = (self.head[q], 0u32, 0u64, NONE);
            while b != NONE {
                let len = self.pkt_len[b as usize];
                for _ in 0..self.blocks_for(len) {
                    if b == NONE {
                        return Err(format!("queue {q}: packet chain ends early"));
                    }
                    if std::mem::replace(&mut seen[b as usize], true) {
                        return Err(format!("block {b} (queue {q}) is free or on another list"));
                    }
                    used += 1;
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
        if used + self.free_blocks.len() != total {
            return Err(format!("{used} blocks in use + {} free != {total}", self.free_blocks.len()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_round_trip_with_payload_and_blocks_come_back() {
        let mut b = QueueBuffer::new(10, 64, 2, 0, true);
        let q = b.take_queue().unwrap();
        let p1: Vec<u8> = (0..150).map(|i| i as u8).collect();
        assert!(b.push(q, 150, 7, Some(&p1)));
        assert!(b.push(q, 64, 8, Some(&p1[..64])));
        assert_eq!(b.free_blocks(), 6);
        assert!(!b.push(q, 1000, 9, None), "16 blocks do not fit in 6");
        assert_eq!(b.free_blocks(), 6);
        b.check().unwrap();
        let mut out = Vec::new();
        assert_eq!(b.pop(q, Some(&mut out)), Some(Popped { len: 150, tag: 7, blocks: 3, emptied: false }));
        assert_eq!(out, p1);
        assert_eq!(b.pop(q, Some(&mut out)), Some(Popped { len: 64, tag: 8, blocks: 1, emptied: true }));
        assert_eq!(out, &p1[..64]);
        assert_eq!(b.pop(q, None), None);
        assert_eq!(b.free_blocks(), 10);
        b.release_queue(q);
        assert_eq!((b.queues_in_use(), b.max_queues_in_use(), b.pool_free()), (0, 1, 2));
        b.check().unwrap();
    }

    #[test]
    fn pool_runs_out() {
        let mut b = QueueBuffer::new(4, 64, 2, 1, false);
        assert!(b.take_queue().is_some() && b.take_queue().is_some());
        assert_eq!(b.take_queue(), None);
        // The extra queue (id 2) is usable without the pool.
        assert!(b.push(2, 1, 0, None));
        assert_eq!(b.head_len(2), Some(1));
        b.check().unwrap();
    }
}
