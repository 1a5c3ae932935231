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

use crate::id::{check, BufferId, QueueId};
use crate::Error;

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

/// Descriptors and links for `queues` queues over `buffers` packet buffers.
#[derive(Clone, Debug)]
pub struct QueueMemory {
    desc: Vec<Descriptor>,
    link: Vec<u32>,
    queued: Vec<bool>,
    refs: Refs,
}

impl QueueMemory {
    pub fn new(queues: u32, buffers: u32) -> Result<Self, Error> {
        if queues == 0 || buffers == 0 {
            return Err(Error::BadParameter {
                parameter: if queues == 0 { "queues" } else { "buffers" },
                value: "0".into(),
                expected: "at least 1",
            });
        }
        Ok(QueueMemory {
            desc: vec![Descriptor::default(); queues as usize],
            link: vec![NIL; buffers as usize],
            queued: vec![false; buffers as usize],
            refs: Refs::default(),
        })
    }

    pub fn queues(&self) -> u32 {
        self.desc.len() as u32
    }

    /// References made so far.
    pub fn refs(&self) -> Refs {
        self.refs
    }

    /// Queue `q`'s descriptor (not counted as a reference: for checks and reports).
    pub fn descriptor(&self, q: QueueId) -> Option<Descriptor> {
        self.desc.get(q.index()).copied()
    }

    /// Appends buffer `ptr` to queue `q` (Table 2 enqueue).
    pub fn enqueue(&mut self, q: QueueId, buffer: BufferId) -> Result<(), Error> {
        let qi = check(QueueId::KIND, q.0, self.desc.len())?;
        let ptr = check(BufferId::KIND, buffer.0, self.link.len())?;
        if self.queued[ptr] {
            return Err(Error::NotAllowed("the buffer is already in a queue"));
        }
        self.queued[ptr] = true;
        // Read the descriptor.
        self.refs.desc_reads += 1;
        let mut d = self.desc[qi];
        // Write the link: the old tail's next is the new buffer (or the new buffer ends the
        // list when the queue was empty).
        self.refs.link_writes += 1;
        self.link[ptr] = NIL;
        if d.len == 0 {
            d.head = buffer.0;
        } else {
            self.link[d.tail as usize] = buffer.0;
        }
        // Write the descriptor.
        d.tail = buffer.0;
        d.len += 1;
        self.refs.desc_writes += 1;
        self.desc[qi] = d;
        Ok(())
    }

    /// Removes the head of queue `q` (Table 2 dequeue); `None` if it is empty (one descriptor
    /// read, nothing else).
    pub fn dequeue(&mut self, q: QueueId) -> Result<Option<BufferId>, Error> {
        let qi = check(QueueId::KIND, q.0, self.desc.len())?;
        self.refs.desc_reads += 1;
        let mut d = self.desc[qi];
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
        self.desc[qi] = d;
        self.queued[head as usize] = false;
        Ok(Some(BufferId(head)))
    }
}
