//! Deficit round robin (Shreedhar and Varghese; dqs ref. [18]): the link scheduler of every
//! model that puts queues on one output. The dqs experiments share "output bandwidth among all
//! the active physical queues in a DRR manner" (dqs section 6); the `link` model is N tail-drop
//! queues under it.
//!
//! Packet at a time: [`Drr::select`] names the queue whose head packet goes next; the caller
//! takes it and reports with [`Drr::dequeued`]. A queue joins the round at the back when it
//! receives a packet while idle ([`Drr::enqueued`]), with a zero deficit; it receives the
//! quantum once per visit, sends while its head fits in the deficit, and goes to the back when
//! it does not; when it empties it leaves the round and its deficit is reset. O(1) amortised
//! per packet when the quantum is at least the largest packet. Geometry: a ring of the active
//! queue ids ([`Ring`]: a queue is in it at most once, so a power-of-two array of the queue
//! count never fills, and moving the front to the back is two index operations, not a
//! `VecDeque`'s general rotation) and per queue one word holding its deficit and its active
//! flag (one cache line touched per queue visit, which matters at 1e6 queues).
//!
//! [`Drr::round_robin`] is the packet-by-packet round robin (a quantum of one packet, whatever
//! its length): kim's shared link serves its eligible queues so. A caller may also take a queue
//! out of the round while it still holds packets (kim: when the shaper throttles it) by
//! reporting it as leaving in [`Drr::dequeued`], and put it back with [`Drr::enqueued`].

use crate::error::Error;
use crate::id::{self, QueueId};
/// The flag of a queue in the round, in its state word (deficits stay far below it: at most
/// a quantum plus the largest packet).
const ACTIVE: u64 = 1 << 63;
/// The largest quantum, bytes: deficits then stay below [`ACTIVE`] for any packet length a
/// caller can hold.
const MAX_QUANTUM: u64 = 1 << 48;

/// The round: queue ids in a ring over a power-of-two array at least as long as the queue
/// count. A queue is in the round at most once, so it never fills.
#[derive(Clone, Debug)]
struct Ring {
    ids: Vec<u32>,
    /// Index of the front.
    head: usize,
    len: usize,
}

impl Ring {
    fn new(queues: usize) -> Self {
        Ring { ids: vec![0; queues.max(1).next_power_of_two()], head: 0, len: 0 }
    }
    #[inline(always)]
    fn at(&self, k: usize) -> usize {
        (self.head + k) & (self.ids.len() - 1)
    }
    #[inline(always)]
    fn len(&self) -> usize {
        self.len
    }
    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.len == 0
    }
    #[inline(always)]
    fn get(&self, k: usize) -> Option<&u32> {
        (k < self.len).then(|| &self.ids[self.at(k)])
    }
    #[inline(always)]
    fn front(&self) -> Option<&u32> {
        if self.len == 0 {
            None
        } else {
            Some(&self.ids[self.head])
        }
    }
    #[inline(always)]
    fn push_back(&mut self, q: u32) {
        assert!(self.len < self.ids.len(), "a queue is in the round at most once");
        let i = self.at(self.len);
        self.ids[i] = q;
        self.len += 1;
    }
    #[inline(always)]
    fn pop_front(&mut self) -> Option<u32> {
        let q = *self.front()?;
        self.head = self.at(1);
        self.len -= 1;
        Some(q)
    }
    /// The front goes to the back (a rotation by one).
    #[inline(always)]
    fn front_to_back(&mut self) {
        if self.len > 0 {
            let q = self.ids[self.head];
            self.head = self.at(1);
            let i = self.at(self.len - 1);
            self.ids[i] = q;
        }
    }
    fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.len).map(|k| self.ids[self.at(k)])
    }
}

#[derive(Clone, Debug)]
pub struct Drr {
    quantum: u64,
    ring: Ring,
    /// Per queue: its deficit in bytes, with [`ACTIVE`] set while it is in the round.
    state: Vec<u64>,
    /// The queue at the front of the ring has received its quantum for this visit.
    granted: bool,
    /// One packet per visit ([`Drr::round_robin`]).
    per_packet: bool,
}

impl Drr {
    /// DRR over queues `0..queues`, `quantum` bytes per visit (> 0).
    pub fn new(queues: u32, quantum: u64) -> Result<Self, Error> {
        if quantum == 0 || quantum > MAX_QUANTUM {
            return Err(Error::BadParameter {
                parameter: "DRR quantum",
                value: quantum.to_string(),
                expected: "from 1 byte to 2^48 bytes",
            });
        }
        Ok(Drr {
            quantum,
            ring: Ring::new(queues as usize),
            state: vec![0; queues as usize],
            granted: false,
            per_packet: false,
        })
    }

    /// Packet-by-packet round robin over queues `0..queues`: each visit sends one packet. A
    /// queue that sends and stays in the round goes to the back at once, so a queue joining
    /// the round during that send lines up behind it.
    pub fn round_robin(queues: u32) -> Self {
        Drr { per_packet: true, ..Drr::new(queues, 1).expect("a quantum of one is valid") }
    }

    pub fn queues(&self) -> usize {
        self.state.len()
    }

    /// Bytes of its state, from its layout: per queue 8 B of deficit (with the active flag),
    /// and the round's ring of 4 B queue ids, the queue count rounded up to a power of two.
    pub fn state_bytes(&self) -> u64 {
        8 * self.state.len() as u64 + 4 * self.ring.ids.len() as u64
    }

    /// Queues in the round (each holds at least one packet).
    pub fn active_queues(&self) -> usize {
        self.ring.len()
    }

    /// The queue `k` places behind the front of the round (0: the front), if any: a caller
    /// can start loading the state of the queues it will serve next.
    #[inline]
    pub fn upcoming(&self, k: usize) -> Option<QueueId> {
        self.ring.get(k).map(|&q| QueueId(q))
    }

    /// A hint that `q` is about to join or be visited ([`crate::hint::prefetch`]).
    #[inline]
    pub fn prefetch(&self, q: QueueId) {
        crate::hint::prefetch(&self.state, q.index());
    }

    pub fn is_active(&self, q: QueueId) -> bool {
        self.state.get(q.index()).is_some_and(|&s| s & ACTIVE != 0)
    }

    /// Queue `q` received a packet; it joins the round if it was idle.
    #[inline]
    pub fn enqueued(&mut self, q: QueueId) -> Result<(), Error> {
        let i = id::check(QueueId::KIND, q.0, self.state.len())?;
        if self.state[i] & ACTIVE == 0 {
            self.state[i] = ACTIVE;
            self.ring.push_back(q.0);
        }
        Ok(())
    }

    /// The queue whose head packet is sent next. `head_len(q)` gives the length in bytes of
    /// `q`'s head packet (every queue in the round is non-empty).
    #[inline]
    pub fn select(&mut self, mut head_len: impl FnMut(QueueId) -> u64) -> Option<QueueId> {
        if self.per_packet {
            let &q = self.ring.front()?;
            self.granted = true;
            return Some(QueueId(q));
        }
        loop {
            let &q = self.ring.front()?;
            let i = q as usize;
            if !self.granted {
                self.state[i] += self.quantum;
                self.granted = true;
            }
            let len = head_len(QueueId(q));
            if len <= self.state[i] & !ACTIVE {
                self.state[i] -= len;
                return Some(QueueId(q));
            }
            self.ring.front_to_back();
            self.granted = false;
        }
    }

    /// [`Self::select`] where looking at a queue's head may empty it (active queue
    /// management dropping packets): `head_len(q)` is `None` when `q` has no packet left, and
    /// the queue leaves the round. Looking comes before the queue's quantum is granted, so a
    /// queue emptied by its look is given none.
    #[inline]
    pub fn select_or_leave(&mut self, mut head_len: impl FnMut(QueueId) -> Option<u64>) -> Option<QueueId> {
        loop {
            let &q = self.ring.front()?;
            let i = q as usize;
            let Some(len) = head_len(QueueId(q)) else {
                self.ring.pop_front();
                self.state[i] = 0;
                self.granted = false;
                continue;
            };
            if self.per_packet {
                self.granted = true;
                return Some(QueueId(q));
            }
            if !self.granted {
                self.state[i] += self.quantum;
                self.granted = true;
            }
            if len <= self.state[i] & !ACTIVE {
                self.state[i] -= len;
                return Some(QueueId(q));
            }
            self.ring.front_to_back();
            self.granted = false;
        }
    }

    /// The head packet of `q`, which [`select`](Self::select) just named, was taken;
    /// `now_empty` if `q` holds no more packets (or leaves the round for another reason).
    #[inline]
    pub fn dequeued(&mut self, q: QueueId, now_empty: bool) -> Result<(), Error> {
        if self.ring.front() != Some(&q.0) || !self.granted {
            return Err(Error::NotAllowed("DRR: dequeued() names a queue select() did not just name"));
        }
        if now_empty {
            self.ring.pop_front();
            self.state[q.index()] = 0;
            self.granted = false;
        } else if self.per_packet {
            self.ring.front_to_back();
            self.granted = false;
        }
        Ok(())
    }

    /// Checks the internal invariants: the ring holds exactly the active queues, once each.
    pub fn check_invariants(&self) -> Result<(), String> {
        let active: Vec<bool> = self.state.iter().map(|&s| s & ACTIVE != 0).collect();
        let mut seen = vec![false; active.len()];
        for q in self.ring.iter() {
            let i = q as usize;
            if i >= seen.len() || seen[i] || !active[i] {
                return Err(format!("queue {q} in the ring twice, unknown or inactive"));
            }
            seen[i] = true;
        }
        if seen != active {
            return Err("an active queue is not in the ring".into());
        }
        if self.ring.is_empty() && self.granted {
            return Err("a visit is in progress with an empty ring".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    /// The state is 8 B a queue and a ring of 4 B ids as long as the queue count rounded up to
    /// a power of two: 65,539 queues (the router example's) take a ring of 131,072.
    #[test]
    fn state_bytes_count_the_deficits_and_the_ring() {
        assert_eq!(Drr::new(4, 1500).unwrap().state_bytes(), 4 * 8 + 4 * 4);
        assert_eq!(Drr::new(5, 1500).unwrap().state_bytes(), 5 * 8 + 8 * 4);
        assert_eq!(Drr::new(65_539, 1500).unwrap().state_bytes(), 65_539 * 8 + 131_072 * 4);
        assert_eq!(Drr::round_robin(0).state_bytes(), 4);
    }

    #[test]
    fn shares_bytes_equally_between_backlogged_queues() {
        // Queue 0 sends 1500 B packets, queue 1 sends 100 B packets, both always backlogged:
        // DRR gives them equal bytes over many rounds.
        let mut d = Drr::new(2, 1500).unwrap();
        d.enqueued(QueueId(0)).unwrap();
        d.enqueued(QueueId(1)).unwrap();
        let len = |q: QueueId| if q.0 == 0 { 1500 } else { 100 };
        let mut bytes = [0u64; 2];
        for _ in 0..16_000 {
            let q = d.select(len).unwrap();
            bytes[q.index()] += len(q);
            d.dequeued(q, false).unwrap();
        }
        let ratio = bytes[0] as f64 / bytes[1] as f64;
        assert!((ratio - 1.0).abs() < 0.01, "{bytes:?}");
    }

    #[test]
    fn packets_larger_than_the_quantum_still_go() {
        let mut d = Drr::new(1, 100).unwrap();
        d.enqueued(QueueId(0)).unwrap();
        assert_eq!(d.select(|_| 1000), Some(QueueId(0)));
        d.dequeued(QueueId(0), true).unwrap();
        assert_eq!(d.select(|_| 1000), None);
    }

    #[test]
    fn round_robin_sends_one_packet_per_visit_and_joiners_queue_behind() {
        let mut d = Drr::round_robin(3);
        d.enqueued(QueueId(0)).unwrap();
        d.enqueued(QueueId(1)).unwrap();
        let mut order = vec![];
        for step in 0..5 {
            let q = d.select(|_| unreachable!("lengths do not matter")).unwrap();
            order.push(q.0);
            d.dequeued(q, false).unwrap();
            if step == 0 {
                d.enqueued(QueueId(2)).unwrap(); // joins during queue 0's send: behind it
            }
        }
        assert_eq!(order, [0, 1, 0, 2, 1]);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(matches!(Drr::new(4, 0), Err(Error::BadParameter { .. })));
        let mut d = Drr::new(4, 100).unwrap();
        assert_eq!(d.enqueued(QueueId(4)), Err(Error::UnknownId { kind: "queue", id: 4, count: 4 }));
        assert!(matches!(d.dequeued(QueueId(0), true), Err(Error::NotAllowed(_))));
    }

    #[derive(Clone, Debug)]
    enum Op {
        Arrive(u32, u16),
        Send,
        Bogus(u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u32..6, 1u16..3000).prop_map(|(q, s)| Op::Arrive(q, s)),
            4 => Just(Op::Send),
            1 => (0u32..10).prop_map(Op::Bogus),
        ]
    }

    proptest! {
        /// The round's ring against a `VecDeque` (which the round was before): pushes up to a
        /// full ring, pops, moves of the front to the back and reads at every place, for queue
        /// counts around powers of two, so the ring wraps and fills.
        #[test]
        fn the_ring_is_a_deque(queues in 1usize..70, ops in proptest::collection::vec(0u8..4, 1..600)) {
            let mut ring = Ring::new(queues);
            let mut model: VecDeque<u32> = VecDeque::new();
            let mut next = 0u32;
            for op in ops {
                match op {
                    0 | 1 if model.len() < queues => {
                        ring.push_back(next);
                        model.push_back(next);
                        next += 1;
                    }
                    2 => prop_assert_eq!(ring.pop_front(), model.pop_front()),
                    _ => {
                        ring.front_to_back();
                        model.rotate_left(model.len().min(1));
                    }
                }
                prop_assert_eq!(ring.len(), model.len());
                prop_assert_eq!(ring.is_empty(), model.is_empty());
                prop_assert_eq!(ring.front(), model.front());
                for k in 0..=model.len() {
                    prop_assert_eq!(ring.get(k), model.get(k));
                }
                prop_assert!(ring.iter().eq(model.iter().copied()));
            }
        }

        /// Arbitrary arrivals, sends and bogus calls (unknown ids, dequeued without select):
        /// no panic, the invariants hold, every packet leaves in FIFO order per queue, and no
        /// backlogged queue waits more than one round of the others. In round-robin mode a
        /// queue sends again only after every queue that was waiting at its last send has sent
        /// (or left the round).
        #[test]
        fn arbitrary_calls_keep_the_invariants(ops in proptest::collection::vec(op(), 1..400), rr in any::<bool>()) {
            let mut d = if rr { Drr::round_robin(6) } else { Drr::new(6, 1500).unwrap() };
            // Round robin: the queues that were waiting when queue i last sent, and have not sent
            // or left the round since (none may be left when i sends again).
            let mut owed = [[false; 6]; 6];
            let mut fifo: Vec<VecDeque<u64>> = vec![VecDeque::new(); 6];
            let mut seq = 0u64;
            let mut sent = Vec::new();
            for o in ops {
                match o {
                    Op::Arrive(q, s) => {
                        d.enqueued(QueueId(q)).unwrap();
                        fifo[q as usize].push_back(((s as u64) << 32) | seq);
                        seq += 1;
                    }
                    Op::Send => {
                        let picked = d.select(|q| fifo[q.index()].front().map(|x| x >> 32).expect("non-empty"));
                        match picked {
                            None => prop_assert!(fifo.iter().all(|f| f.is_empty())),
                            Some(q) => {
                                let i = q.index();
                                prop_assert!(!rr || !owed[i].contains(&true), "{} sent again before {:?}", q, owed[i]);
                                for (j, f) in fifo.iter().enumerate() {
                                    owed[i][j] = j != i && !f.is_empty();
                                    owed[j][i] = false;
                                }
                                let p = fifo[q.index()].pop_front().unwrap();
                                sent.push((q, p));
                                let empty = fifo[q.index()].is_empty();
                                d.dequeued(q, empty).unwrap();
                                if empty {
                                    // It left the round: nobody waits for it, it waits for nobody.
                                    owed[q.index()] = [false; 6];
                                    owed.iter_mut().for_each(|o| o[q.index()] = false);
                                }
                            }
                        }
                    }
                    Op::Bogus(q) => {
                        if q >= 6 {
                            prop_assert!(d.enqueued(QueueId(q)).is_err());
                        }
                        let _ = d.dequeued(QueueId(q), false);
                    }
                }
                prop_assert!(d.check_invariants().is_ok(), "{:?}", d.check_invariants());
                for (i, f) in fifo.iter().enumerate() {
                    prop_assert_eq!(d.is_active(QueueId(i as u32)), !f.is_empty());
                }
            }
            for q in 0..6u32 {
                let order: Vec<u64> = sent.iter().filter(|s| s.0 .0 == q).map(|s| s.1 & 0xffff_ffff).collect();
                prop_assert!(order.windows(2).all(|w| w[0] < w[1]), "FIFO per queue");
            }
        }
    }
}
