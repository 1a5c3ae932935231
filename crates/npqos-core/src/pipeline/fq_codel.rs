//! FQ-CoDel's scheduler (RFC 8290 section 4, docs/codel.md "fq_codel"): the round over a set
//! of hashed queues that picks which queue's head goes next. Queues that became active go on
//! the list of new flows with a quantum of credit and are served before the old ones (a sparse
//! flow's packet waits behind at most one packet of each other new flow); a queue that spent
//! its credit gets another quantum and goes to the tail of the old flows; each queue runs
//! CoDel ([`crate::pipeline::codel`]) on its head when it is looked at, so a queue's drops
//! depend on its own sojourn times only. A new queue that CoDel empties goes once through the
//! old list before it leaves the round (Linux's rule against starving the old flows).
//!
//! The queues are the caller's ([`FqQueues`]): the round keeps per queue its credit, its list
//! and its CoDel state (32 B), and two lists of queue ids. Dropping from the fattest queue when
//! the buffer is full is the caller's as well (it owns the buffer): [`FqCodelParams::fattest_drop`]
//! says how many packets RFC 8290 (and Linux) take from its head.

use super::codel::{Codel, CodelParams, Dequeued};
use std::collections::VecDeque;

/// FQ-CoDel's parameters (RFC 8290 section 5.2 and Linux's defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FqCodelParams {
    /// CoDel's target, interval, MTU and ECN marking, the same for every queue.
    pub codel: CodelParams,
    /// The credit a queue gets per round, bytes (RFC 8290: one MTU, 1,514 B in Linux).
    pub quantum: u32,
    /// The most packets one overflow drops from the fattest queue (Linux's `drop_batch`, 64).
    pub drop_batch: u32,
}

impl FqCodelParams {
    /// How many packets to drop from the head of the fattest queue, whose backlog is
    /// `backlog` bytes in packets of `lens` (head first), when the buffer is full: RFC 8290
    /// section 4.1 as Linux does it, packets until half its bytes are gone or `drop_batch`.
    pub fn fattest_drop(&self, backlog: u64, lens: impl IntoIterator<Item = u32>) -> u32 {
        let (mut n, mut bytes) = (0u32, 0u64);
        for l in lens {
            n += 1;
            bytes += l as u64;
            if n >= self.drop_batch || bytes >= backlog / 2 {
                break;
            }
        }
        n
    }
}

impl Default for FqCodelParams {
    fn default() -> Self {
        FqCodelParams { codel: CodelParams { ecn: true, ..CodelParams::default() }, quantum: 1514, drop_batch: 64 }
    }
}

/// What the round needs of the caller's queues.
pub trait FqQueues {
    /// CoDel's dequeue on queue `q` at `now` with its state `codel` (the caller wraps its queue
    /// as a [`crate::pipeline::codel::CodelQueue`] and calls [`Codel::dequeue`]).
    fn codel(&mut self, q: u32, codel: &mut Codel, p: &CodelParams, now: u64) -> Dequeued;
    /// The length of queue `q`'s head packet, bytes (asked only after `codel` left one).
    fn head_len(&self, q: u32) -> u32;
}

const IDLE: u8 = 0;
const NEW: u8 = 1;
const OLD: u8 = 2;

/// One queue's state in the round.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    deficit: i32,
    list: u8,
    codel: Codel,
}

/// The round's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FqCounters {
    /// Packets CoDel dropped at a head.
    pub codel_dropped: u64,
    /// Packets CoDel marked CE.
    pub marked: u64,
    /// Queues that became active (put on the new list).
    pub new_flows: u64,
}

/// The round (see the module documentation).
#[derive(Clone, Debug)]
pub struct FqCodel {
    p: FqCodelParams,
    slots: Vec<Slot>,
    new: VecDeque<u32>,
    old: VecDeque<u32>,
    counters: FqCounters,
}

/// One [`FqCodel::dequeue`]'s outcome: the queue whose head goes next (`None`: every queue is
/// empty), after CoDel dropped `dropped` head packets (of any queues it looked at).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FqPick {
    pub queue: Option<u32>,
    pub dropped: u32,
}

impl FqCodel {
    /// A round over queues `0..queues`.
    ///
    /// Errors: no queue, a zero quantum or drop batch, a quantum above 16 MB.
    pub fn new(p: FqCodelParams, queues: u32) -> Result<Self, crate::Error> {
        let bad = |parameter, value: u32, expected| crate::Error::BadParameter {
            parameter,
            value: value.to_string(),
            expected,
        };
        if queues == 0 {
            return Err(bad("queues", 0, "at least 1"));
        }
        if !(1..=1 << 24).contains(&p.quantum) {
            return Err(bad("quantum", p.quantum, "from 1 to 16777216 bytes"));
        }
        if p.drop_batch == 0 {
            return Err(bad("drop_batch", 0, "at least 1 packet"));
        }
        Ok(FqCodel {
            p,
            slots: vec![Slot::default(); queues as usize],
            new: VecDeque::new(),
            old: VecDeque::new(),
            counters: FqCounters::default(),
        })
    }

    pub fn params(&self) -> &FqCodelParams {
        &self.p
    }
    pub fn counters(&self) -> &FqCounters {
        &self.counters
    }

    /// Queue `q` took a packet: an idle queue joins the new flows with a quantum of credit.
    ///
    /// Errors: `q` out of range.
    #[inline]
    pub fn enqueued(&mut self, q: u32) -> Result<(), crate::Error> {
        let n = self.slots.len();
        let s = self.slots.get_mut(q as usize).ok_or(crate::Error::UnknownId { kind: "queue", id: q, count: n })?;
        if s.list == IDLE {
            s.list = NEW;
            s.deficit = self.p.quantum as i32;
            self.new.push_back(q);
            self.counters.new_flows += 1;
        }
        Ok(())
    }

    /// RFC 8290's dequeue at `now`: the queue whose head packet goes next, its credit charged
    /// with the packet's length; the caller then takes that head. CoDel's drops on the way are
    /// the caller's to account (each a `drop_head` on its queue).
    pub fn dequeue(&mut self, now: u64, queues: &mut impl FqQueues) -> FqPick {
        let mut pick = FqPick::default();
        loop {
            let (q, from_new) = match (self.new.front(), self.old.front()) {
                (Some(&q), _) => (q, true),
                (None, Some(&q)) => (q, false),
                (None, None) => return pick,
            };
            let s = &mut self.slots[q as usize];
            if s.deficit <= 0 {
                s.deficit += self.p.quantum as i32;
                s.list = OLD;
                if from_new {
                    self.new.pop_front()
                } else {
                    self.old.pop_front()
                };
                self.old.push_back(q);
                continue;
            }
            let d = queues.codel(q, &mut s.codel, &self.p.codel, now);
            pick.dropped += d.dropped;
            self.counters.codel_dropped += d.dropped as u64;
            self.counters.marked += d.marked as u64;
            if !d.head {
                // Empty: a new queue passes once through the old list (if it has queues), so
                // that a flow cannot stay new by emptying; otherwise it leaves the round.
                if from_new {
                    self.new.pop_front();
                    if self.old.is_empty() {
                        s.list = IDLE;
                    } else {
                        s.list = OLD;
                        self.old.push_back(q);
                    }
                } else {
                    self.old.pop_front();
                    s.list = IDLE;
                }
                continue;
            }
            s.deficit -= queues.head_len(q) as i32;
            pick.queue = Some(q);
            return pick;
        }
    }

    /// Queues in the round now (new, old).
    pub fn active(&self) -> (usize, usize) {
        (self.new.len(), self.old.len())
    }

    /// The round's state, B: per queue its credit, list and CoDel state (32 B), and the lists'
    /// ids (4 B per queue at most).
    pub fn state_bytes(&self) -> u64 {
        self.slots.len() as u64 * 36
    }
}

#[cfg(test)]
mod tests;
