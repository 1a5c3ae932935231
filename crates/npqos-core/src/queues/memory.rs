//! Queue memory (qcache section 2.1 and Table 2): one descriptor per queue (head, tail,
//! length) and a link memory holding, for every buffer, the buffer that follows it in its
//! queue. Enqueue and dequeue are the paper's three references each:
//!
//! * enqueue: read the descriptor, write the link, write the descriptor (the last two are
//!   independent);
//! * dequeue: read the descriptor, read the head's link (the new head), write the descriptor
//!   (all three in sequence).
//!
//! Table 2 always performs the link reference. For an enqueue to an empty queue we write the
//! new buffer's own link (NIL) instead of the stale tail's, and a dequeue of the last packet
//! reads a NIL link: the reference count stays three, as the paper counts it, and the lists
//! stay well formed.

use thiserror::Error;

/// End of a list.
pub const NIL: u32 = u32::MAX;

/// One queue's descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor {
    pub head: u32,
    pub tail: u32,
    pub len: u32,
}

impl Default for Descriptor {
    fn default() -> Self {
        Descriptor { head: NIL, tail: NIL, len: 0 }
    }
}

/// References made to queue memory, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Refs {
    pub desc_reads: u64,
    pub desc_writes: u64,
    pub link_reads: u64,
    pub link_writes: u64,
}

impl Refs {
    pub fn total(&self) -> u64 {
        self.desc_reads + self.desc_writes + self.link_reads + self.link_writes
    }
}

/// Misuse of the queue memory.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum QueueError {
    #[error("queue {0} does not exist")]
    NoQueue(u32),
    #[error("buffer {0} does not exist")]
    NoBuffer(u32),
    #[error("buffer {0} is already queued")]
    Queued(u32),
}

/// Descriptors and links for `queues` queues over `buffers` packet buffers.
#[derive(Clone, Debug)]
pub struct QueueMemory {
    desc: Vec<Descriptor>,
    link: Vec<u32>,
    queued: Vec<bool>,
    refs: Refs,
}

impl QueueMemory {
    pub fn new(queues: u32, buffers: u32) -> Self {
        QueueMemory {
            desc: vec![Descriptor::default(); queues as usize],
            link: vec![NIL; buffers as usize],
            queued: vec![false; buffers as usize],
            refs: Refs::default(),
        }
    }

    pub fn queues(&self) -> u32 {
        self.desc.len() as u32
    }

    /// References made so far.
    pub fn refs(&self) -> Refs {
        self.refs
    }

    /// Queue `q`'s descriptor (not counted as a reference: for checks and reports).
    pub fn descriptor(&self, q: u32) -> Option<Descriptor> {
        self.desc.get(q as usize).copied()
    }

    /// Appends buffer `ptr` to queue `q` (Table 2 enqueue).
    pub fn enqueue(&mut self, q: u32, ptr: u32) -> Result<(), QueueError> {
        if q as usize >= self.desc.len() {
            return Err(QueueError::NoQueue(q));
        }
        match self.queued.get(ptr as usize) {
            None => return Err(QueueError::NoBuffer(ptr)),
            Some(true) => return Err(QueueError::Queued(ptr)),
            Some(false) => {}
        }
        self.queued[ptr as usize] = true;
        // Read the descriptor.
        self.refs.desc_reads += 1;
        let mut d = self.desc[q as usize];
        // Write the link: the old tail's next is the new buffer (or the new buffer ends the
        // list when the queue was empty).
        self.refs.link_writes += 1;
        self.link[ptr as usize] = NIL;
        if d.len == 0 {
            d.head = ptr;
        } else {
            self.link[d.tail as usize] = ptr;
        }
        // Write the descriptor.
        d.tail = ptr;
        d.len += 1;
        self.refs.desc_writes += 1;
        self.desc[q as usize] = d;
        Ok(())
    }

    /// Removes the head of queue `q` (Table 2 dequeue); `None` if it is empty (one descriptor
    /// read, nothing else).
    pub fn dequeue(&mut self, q: u32) -> Result<Option<u32>, QueueError> {
        if q as usize >= self.desc.len() {
            return Err(QueueError::NoQueue(q));
        }
        self.refs.desc_reads += 1;
        let mut d = self.desc[q as usize];
        if d.len == 0 {
            return Ok(None);
        }
        let head = d.head;
        self.refs.link_reads += 1;
        let next = self.link[head as usize];
        d.head = next;
        d.len -= 1;
        if d.len == 0 {
            d.tail = NIL;
        }
        self.refs.desc_writes += 1;
        self.desc[q as usize] = d;
        self.queued[head as usize] = false;
        Ok(Some(head))
    }
}
