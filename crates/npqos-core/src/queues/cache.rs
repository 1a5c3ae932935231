//! The descriptor caches of the queuing subsystems (qcache sections 3.2-3.4): which queue
//! descriptors are on chip, which one a miss evicts, and (the queuing cache) which request a
//! queuing engine serves next. These are the decisions a data plane's queue manager makes on
//! every enqueue and dequeue; the timing simulation (`npqos_sim::models::qcache`) plays them with
//! contention, and nothing here knows about time.
//!
//! * [`EntryCache`]: a small fully associative array of descriptors (sqc's and qc's CAM) with
//!   LRU replacement among the entries not in use. An operation **pins** its queue's entry from
//!   lookup to completion, so a miss never evicts a descriptor another operation is updating.
//!   Every eviction writes the victim back (a cached descriptor has been modified by the
//!   operation that loaded it).
//! * [`DataCache`]: dc's set-associative, LRU, write-back, write-allocate data cache of one-word
//!   lines at the memory controller ([`crate::cache::SetAssocCache`]); a queue's head and tail
//!   are separate words (Table 2 reads the tail to enqueue and the head to dequeue).
//! * [`QueuingCache`]: the queuing cache's controller (section 3.4): a request for a queue that
//!   a queuing engine is already serving waits behind it and is served next by the same engine,
//!   in arrival order; a request for any other queue takes a free engine, or waits first come
//!   first served for one. It owns the [`EntryCache`] its engines look descriptors up in.
//!
//! On the mechanism contract: queues are [`QueueId`], entries [`EntryId`]; an id out of range,
//! pinning a queue whose entry is already pinned, a miss with every entry pinned, or releasing
//! an entry that is not pinned is an [`Error`] and changes nothing.

use super::timing::Op;
use crate::cache::SetAssocCache;
use crate::id::{check, EntryId, QueueId};
use crate::Error;
use std::collections::VecDeque;

const EMPTY: u32 = u32::MAX;
/// An [`EntryCache`] entry's victim rank while it is pinned: never chosen.
const PINNED: u64 = u64::MAX;

/// The outcome of a lookup that pinned an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lookup {
    /// The entry now holding (and pinning) the queue's descriptor.
    pub entry: EntryId,
    /// The descriptor was already cached.
    pub hit: bool,
    /// On a miss, the queue whose descriptor was evicted (and written back), if the entry held
    /// one.
    pub evicted: Option<QueueId>,
}

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct EntryCache {
    queue: Vec<u32>,
    last: Vec<u64>,
    /// Per entry, its rank as a victim, lowest first: 0 if empty, its last use if it holds a
    /// descriptor, `PINNED` while an operation holds it. A miss takes the first lowest, so
    /// the replacement choice is one branch-free pass over one small array.
    rank: Vec<u64>,
    clock: u64,
    queues: u32,
    /// Per queue, the entry that last held it (`EMPTY` if none): the CAM's associative
    /// lookup, valid while that entry still holds the queue. An eviction does not clear the
    /// victim's slot here (with 1e6 queues that would be one more cache miss per miss).
    entry_of: Vec<u32>,
    /// With at most 16 entries, the entries in order of their last acquisition, one per 4-bit
    /// nibble, the most recent in the lowest (never-used entries at the top, the lowest index
    /// highest; unused nibbles 0xF): with nothing pinned the victim is the top nibble, which
    /// [`Self::touch`] reads instead of passing over the ranks.
    order: u64,
    /// Entries pinned now.
    pins: u32,
}

/// Every nibble of a `u64` set to 1.
const NIBBLES: u64 = 0x1111_1111_1111_1111;

impl EntryCache {
    /// `entries` entries caching descriptors of queues `0..queues`.
    pub fn new(entries: u32, queues: u32) -> Result<Self, Error> {
        if entries == 0 || queues == 0 {
            return Err(Error::BadParameter {
                parameter: if entries == 0 { "entries" } else { "queues" },
                value: "0".into(),
                expected: "at least 1",
            });
        }
        let n = entries as usize;
        // Entry 0 in the top used nibble, entry n - 1 in the lowest; 0xF above. Unused above 16
        // entries.
        let order = match n {
            17.. => 0,
            _ => (0..n as u64)
                .fold(if n < 16 { u64::MAX << (4 * n) } else { 0 }, |o, i| o | (n as u64 - 1 - i) << (4 * i)),
        };
        Ok(EntryCache {
            queue: vec![EMPTY; n],
            last: vec![0; n],
            rank: vec![0; n],
            clock: 0,
            queues,
            entry_of: vec![EMPTY; queues as usize],
            order,
            pins: 0,
        })
    }

    /// Moves entry `i` to the front of `order` (it was just acquired); nothing with more than 16
    /// entries.
    #[inline(always)]
    fn move_to_front(&mut self, i: usize) {
        let n = self.queue.len();
        if n > 16 {
            return;
        }
        // The nibble equal to `i`: the lowest zero nibble of `order ^ i...i` (exactly one nibble
        // of the used ones holds `i`; the unused ones hold 0xF, which no entry of fewer than 16 is).
        let x = self.order ^ (NIBBLES * i as u64);
        let zero = x.wrapping_sub(NIBBLES) & !x & (NIBBLES << 3);
        let p = zero.trailing_zeros() / 4;
        let below = self.order & ((1u64 << (4 * p)) - 1);
        let above = self.order.checked_shr(4 * (p + 1)).map_or(0, |a| a << (4 * (p + 1)));
        self.order = above | below << 4 | i as u64;
    }

    pub fn entries(&self) -> u32 {
        self.queue.len() as u32
    }

    /// Entries pinned now.
    pub fn pinned(&self) -> usize {
        self.rank.iter().filter(|&&r| r == PINNED).count()
    }

    /// The entry holding `q`'s descriptor, without touching the LRU order.
    pub fn find(&self, q: QueueId) -> Option<EntryId> {
        self.entry(q.index()).map(|e| EntryId(e as u32))
    }

    /// The queue whose descriptor entry `e` holds.
    pub fn holds(&self, e: EntryId) -> Option<QueueId> {
        self.queue.get(e.index()).copied().filter(|&q| q != EMPTY).map(QueueId)
    }

    /// Looks `q` up and pins its entry; on a miss the least recently used entry not pinned (an
    /// empty one first) is allocated to `q`.
    pub fn acquire(&mut self, q: QueueId) -> Result<Lookup, Error> {
        let qi = check(QueueId::KIND, q.0, self.queues as usize)?;
        if let Some(i) = self.entry(qi) {
            if self.rank[i] == PINNED {
                return Err(Error::NotAllowed("the queue's descriptor entry is already in use"));
            }
            self.clock += 1;
            self.last[i] = self.clock;
            self.rank[i] = PINNED;
            self.pins += 1;
            self.move_to_front(i);
            return Ok(Lookup { entry: EntryId::from_index(i), hit: true, evicted: None });
        }
        // The least recently used entry not pinned, an empty one first; ties (empties) go to
        // the lowest index.
        let (mut v, mut low) = (0, self.rank[0]);
        for (i, &r) in self.rank.iter().enumerate().skip(1) {
            if r < low {
                (v, low) = (i, r);
            }
        }
        if low == PINNED {
            return Err(Error::NotAllowed("every descriptor entry is in use"));
        }
        self.clock += 1;
        let evicted = (self.queue[v] != EMPTY).then_some(QueueId(self.queue[v]));
        self.entry_of[qi] = v as u32;
        self.queue[v] = q.0;
        self.last[v] = self.clock;
        self.rank[v] = PINNED;
        self.pins += 1;
        self.move_to_front(v);
        Ok(Lookup { entry: EntryId::from_index(v), hit: false, evicted })
    }

    /// [`Self::acquire`] and at once [`Self::release`] (an operation that needs no pin across
    /// time: the router's queue memory): the same lookup and the same state after. With at most
    /// 16 entries and none pinned, the victim is the top of `order` rather than a pass over the
    /// ranks.
    ///
    /// Errors: as [`Self::acquire`].
    #[inline]
    pub fn touch(&mut self, q: QueueId) -> Result<Lookup, Error> {
        let n = self.queue.len();
        if n > 16 || self.pins != 0 {
            let l = self.acquire(q)?;
            self.release(l.entry)?;
            return Ok(l);
        }
        let qi = check(QueueId::KIND, q.0, self.queues as usize)?;
        self.clock += 1;
        let (i, hit, evicted) = match self.entry(qi) {
            Some(i) => (i, true, None),
            None => {
                let v = (self.order >> (4 * (n - 1)) & 0xF) as usize;
                let evicted = (self.queue[v] != EMPTY).then_some(QueueId(self.queue[v]));
                self.entry_of[qi] = v as u32;
                self.queue[v] = q.0;
                (v, false, evicted)
            }
        };
        self.last[i] = self.clock;
        self.rank[i] = self.clock;
        self.move_to_front(i);
        Ok(Lookup { entry: EntryId::from_index(i), hit, evicted })
    }

    /// A hint that `q` is about to be acquired ([`crate::hint::prefetch`]).
    #[inline]
    pub fn prefetch(&self, q: QueueId) {
        crate::hint::prefetch(&self.entry_of, q.index());
    }

    /// The entry holding queue index `qi`, if any.
    #[inline]
    fn entry(&self, qi: usize) -> Option<usize> {
        let e = *self.entry_of.get(qi)? as usize;
        (self.queue.get(e).is_some_and(|&h| h as usize == qi)).then_some(e)
    }

    /// Unpins entry `e` (its operation finished).
    pub fn release(&mut self, e: EntryId) -> Result<(), Error> {
        let i = check(EntryId::KIND, e.0, self.queue.len())?;
        if self.rank[i] != PINNED {
            return Err(Error::NotAllowed("the descriptor entry is not in use"));
        }
        self.pins -= 1;
        self.rank[i] = self.last[i];
        Ok(())
    }
}

/// The outcome of a data-cache access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub hit: bool,
    /// A dirty line was evicted (written back to memory).
    pub writeback: bool,
}

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct DataCache {
    cache: SetAssocCache,
    queues: u32,
}

impl DataCache {
    /// `lines` one-word lines in sets of `ways`, for queues `0..queues`.
    pub fn new(lines: u32, ways: u32, queues: u32) -> Result<Self, Error> {
        if queues == 0 {
            return Err(Error::BadParameter { parameter: "queues", value: "0".into(), expected: "at least 1" });
        }
        let cache = SetAssocCache::new(lines as u64 * 4, ways as usize, 4, 0).map_err(|e| Error::BadParameter {
            parameter: "lines, ways",
            value: format!("{lines}, {ways}"),
            expected: match e {
                crate::cache::CacheError::Geometry(g) => g,
                crate::cache::CacheError::LockedTooLarge { .. } => "no locked region",
            },
        })?;
        Ok(DataCache { cache, queues })
    }

    /// Reads (`write` false) or writes the descriptor word that `op` on `q` uses: the tail for an
    /// enqueue, the head for a dequeue. A write miss allocates without a fetch.
    pub fn access(&mut self, q: QueueId, op: Op, write: bool) -> Result<Access, Error> {
        check(QueueId::KIND, q.0, self.queues as usize)?;
        let word = 2 * q.0 as u64 + u64::from(op == Op::Enqueue);
        let wb0 = self.cache.stats().writebacks;
        let hit = self.cache.access(word * 4, write);
        Ok(Access { hit, writeback: self.cache.stats().writebacks > wb0 })
    }

    pub fn stats(&self) -> crate::cache::CacheStats {
        *self.cache.stats()
    }
}

/// See the module documentation. `R` is the caller's handle for a request (a thread, a packet).
#[derive(Clone, Debug)]
pub struct QueuingCache<R> {
    entries: EntryCache,
    /// A request for the queue is in service or waiting for an engine.
    claimed: Vec<bool>,
    /// Requests behind the claimed one, per queue, in arrival order.
    behind: Vec<VecDeque<R>>,
    /// Claimed requests waiting for a free engine, first come first served.
    ready: VecDeque<(QueueId, R)>,
    engines: u32,
    free: u32,
}

impl<R: Copy> QueuingCache<R> {
    /// `engines` queuing engines and `entries` descriptor entries for queues `0..queues`.
    /// Each engine in service pins one entry, so `engines` must not exceed `entries`.
    pub fn new(engines: u32, entries: u32, queues: u32) -> Result<Self, Error> {
        if engines == 0 || engines > entries {
            return Err(Error::BadParameter {
                parameter: "engines",
                value: engines.to_string(),
                expected: "from 1 to the number of entries (each engine in service pins one)",
            });
        }
        let entries = EntryCache::new(entries, queues)?;
        let n = queues as usize;
        Ok(QueuingCache {
            entries,
            claimed: vec![false; n],
            behind: (0..n).map(|_| VecDeque::new()).collect(),
            ready: VecDeque::new(),
            engines,
            free: engines,
        })
    }

    /// A request `r` for queue `q` arrives. `Some(r)`: an engine starts serving it now (the
    /// caller then calls [`start`](Self::start)); `None`: it waits.
    pub fn arrive(&mut self, q: QueueId, r: R) -> Result<Option<R>, Error> {
        let qi = check(QueueId::KIND, q.0, self.claimed.len())?;
        if self.claimed[qi] {
            self.behind[qi].push_back(r);
            return Ok(None);
        }
        self.claimed[qi] = true;
        if self.free == 0 {
            self.ready.push_back((q, r));
            return Ok(None);
        }
        self.free -= 1;
        Ok(Some(r))
    }

    /// The engine serving `q`'s request looks its descriptor up (and pins its entry).
    pub fn start(&mut self, q: QueueId) -> Result<Lookup, Error> {
        let qi = check(QueueId::KIND, q.0, self.claimed.len())?;
        if !self.claimed[qi] {
            return Err(Error::NotAllowed("no request for the queue is being served"));
        }
        self.entries.acquire(q)
    }

    /// The engine finished `q`'s request (whose entry was `e`): the entry is released and the
    /// engine serves `q`'s next request, or else the oldest request waiting for an engine, or
    /// becomes free (`None`).
    pub fn finish(&mut self, q: QueueId, e: EntryId) -> Result<Option<(QueueId, R)>, Error> {
        let qi = check(QueueId::KIND, q.0, self.claimed.len())?;
        if !self.claimed[qi] || self.entries.holds(e) != Some(q) {
            return Err(Error::NotAllowed("the queue's request is not in service in that entry"));
        }
        self.entries.release(e)?;
        if let Some(n) = self.behind[qi].pop_front() {
            return Ok(Some((q, n)));
        }
        self.claimed[qi] = false;
        match self.ready.pop_front() {
            Some(next) => Ok(Some(next)),
            None => {
                self.free += 1;
                Ok(None)
            }
        }
    }

    /// Engines serving a request now.
    pub fn busy(&self) -> u32 {
        self.engines - self.free
    }

    /// Requests waiting (behind a queue in service, or for an engine).
    pub fn waiting(&self) -> usize {
        self.behind.iter().map(VecDeque::len).sum::<usize>() + self.ready.len()
    }

    pub fn entries(&self) -> &EntryCache {
        &self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn entry_cache_is_lru_among_unpinned_entries() {
        let mut c = EntryCache::new(2, 8).unwrap();
        let a = c.acquire(QueueId(1)).unwrap();
        assert_eq!((a.hit, a.evicted), (false, None));
        assert!(c.acquire(QueueId(1)).is_err(), "pinned twice");
        let b = c.acquire(QueueId(2)).unwrap();
        assert!(matches!(c.acquire(QueueId(3)), Err(Error::NotAllowed(_))), "all pinned");
        c.release(a.entry).unwrap();
        c.release(b.entry).unwrap();
        assert!(c.release(b.entry).is_err());
        assert!(c.acquire(QueueId(1)).unwrap().hit);
        c.release(a.entry).unwrap();
        // Queue 2 is now the least recently used.
        let m = c.acquire(QueueId(3)).unwrap();
        assert_eq!((m.hit, m.evicted, m.entry), (false, Some(QueueId(2)), b.entry));
        assert!(matches!(c.acquire(QueueId(8)), Err(Error::UnknownId { .. })));
        assert!(EntryCache::new(0, 1).is_err());
    }

    #[test]
    fn queuing_cache_serves_a_queue_in_order_on_one_engine() {
        let mut qc: QueuingCache<u32> = QueuingCache::new(1, 2, 4).unwrap();
        assert_eq!(qc.arrive(QueueId(0), 10).unwrap(), Some(10));
        assert_eq!(qc.arrive(QueueId(1), 20).unwrap(), None, "no free engine");
        assert_eq!(qc.arrive(QueueId(0), 11).unwrap(), None, "behind queue 0");
        let l = qc.start(QueueId(0)).unwrap();
        assert!(qc.start(QueueId(2)).is_err());
        // Queue 0's next request goes first, on the same engine, then queue 1.
        assert_eq!(qc.finish(QueueId(0), l.entry).unwrap(), Some((QueueId(0), 11)));
        let l = qc.start(QueueId(0)).unwrap();
        assert!(l.hit);
        assert_eq!(qc.finish(QueueId(0), l.entry).unwrap(), Some((QueueId(1), 20)));
        let l = qc.start(QueueId(1)).unwrap();
        assert!(qc.finish(QueueId(0), l.entry).is_err(), "queue 0 is not in service");
        assert_eq!(qc.finish(QueueId(1), l.entry).unwrap(), None);
        assert_eq!((qc.busy(), qc.waiting()), (0, 0));
        assert!(QueuingCache::<u32>::new(3, 2, 4).is_err());
    }

    #[test]
    fn data_cache_keeps_head_and_tail_apart() {
        let mut d = DataCache::new(128, 2, 16).unwrap();
        assert!(!d.access(QueueId(3), Op::Enqueue, false).unwrap().hit);
        assert!(d.access(QueueId(3), Op::Enqueue, true).unwrap().hit);
        assert!(!d.access(QueueId(3), Op::Dequeue, false).unwrap().hit, "the head is another word");
        assert!(d.access(QueueId(16), Op::Enqueue, false).is_err());
        assert!(DataCache::new(3, 2, 1).is_err());
    }

    #[derive(Clone, Debug)]
    enum Call {
        Acquire(u32),
        Release(u32),
        Touch(u32),
    }

    fn call() -> impl Strategy<Value = Call> {
        // Queues 20 and above are out of range; 17 entries can fill.
        prop_oneof![
            (0u32..24).prop_map(Call::Acquire),
            (0u32..18).prop_map(Call::Release),
            (0u32..24).prop_map(Call::Touch)
        ]
    }

    /// What a cache holds and decides by, `order` and `pins` aside.
    fn state(c: &EntryCache) -> (Vec<u32>, Vec<u64>, Vec<u64>, u64, Vec<u32>) {
        (c.queue.clone(), c.last.clone(), c.rank.clone(), c.clock, c.entry_of.clone())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
        /// Arbitrary calls (ids out of range included) never panic; a queue is in at most one
        /// entry, an error changes nothing, and a hit is exactly "the queue was cached".
        #[test]
        fn entry_cache_contract(calls in proptest::collection::vec(call(), 1..400), entries in prop_oneof![Just(4u32), Just(16), Just(17)]) {
            // 20 queues: 16 and 17 entries fill too.
            let mut c = EntryCache::new(entries, 20).unwrap();
            for call in calls {
                let before = c.clone();
                match call {
                    Call::Acquire(q) => {
                        let cached = c.find(QueueId(q)).is_some();
                        match c.acquire(QueueId(q)) {
                            Ok(l) => {
                                prop_assert_eq!(l.hit, cached);
                                prop_assert_eq!(c.holds(l.entry), Some(QueueId(q)));
                                if !l.hit {
                                    // LRU among the unpinned, an empty entry first, lowest index on ties.
                                    let b = &before;
                                    let want = (0..b.queue.len())
                                        .filter(|&i| b.rank[i] != PINNED)
                                        .min_by_key(|&i| if b.queue[i] == EMPTY { 0 } else { b.last[i] });
                                    prop_assert_eq!(Some(l.entry.index()), want);
                                }
                            }
                            Err(_) => prop_assert_eq!(&c.queue, &before.queue),
                        }
                    }
                    Call::Release(e) => {
                        if c.release(EntryId(e)).is_err() {
                            prop_assert_eq!(&c.rank, &before.rank);
                        }
                    }
                    // The same lookup and state as acquire then release (on a copy), the
                    // victim read from `order` or from the ranks.
                    Call::Touch(q) => {
                        let mut want = before.clone();
                        let w = want.acquire(QueueId(q)).and_then(|l| want.release(l.entry).map(|_| l));
                        let got = c.touch(QueueId(q));
                        prop_assert_eq!(got.is_ok(), w.is_ok());
                        if let (Ok(g), Ok(w)) = (got, w) {
                            prop_assert_eq!(g, w);
                        }
                        prop_assert_eq!(state(&c), state(&want));
                    }
                }
                prop_assert_eq!(c.pins as usize, c.pinned());
                for (e, &q) in c.queue.iter().enumerate() {
                    if q != EMPTY {
                        prop_assert_eq!(c.entry_of[q as usize], e as u32, "the CAM map disagrees");
                    }
                }
                let found = (0..c.queues).filter(|&q| c.find(QueueId(q)).is_some()).count();
                prop_assert_eq!(found, c.queue.iter().filter(|&&q| q != EMPTY).count());
                let mut held: Vec<u32> = c.queue.iter().copied().filter(|&q| q != EMPTY).collect();
                let n = held.len();
                held.sort_unstable();
                held.dedup();
                prop_assert_eq!(held.len(), n, "a queue in two entries");
            }
        }

        /// Arbitrary arrivals and finishes: requests of one queue start in arrival order, at
        /// most `engines` are in service, and every request is served exactly once.
        #[test]
        fn queuing_cache_contract(calls in proptest::collection::vec((0u32..6, any::<bool>()), 1..300)) {
            let mut qc: QueuingCache<u32> = QueuingCache::new(2, 3, 5).unwrap();
            let mut next = 0u32;
            let mut in_service: Vec<(QueueId, EntryId, u32)> = Vec::new();
            let mut arrived: Vec<Vec<u32>> = vec![Vec::new(); 6];
            let mut started: Vec<Vec<u32>> = vec![Vec::new(); 6];
            let start = |qc: &mut QueuingCache<u32>, q: QueueId, r: u32, in_service: &mut Vec<(QueueId, EntryId, u32)>, started: &mut Vec<Vec<u32>>| {
                let l = qc.start(q).expect("a started request finds an entry");
                in_service.push((q, l.entry, r));
                started[q.index()].push(r);
            };
            for (q, arrive) in calls {
                if arrive || in_service.is_empty() {
                    next += 1;
                    match qc.arrive(QueueId(q), next) {
                        Ok(Some(r)) => { arrived[q as usize].push(r); start(&mut qc, QueueId(q), r, &mut in_service, &mut started); }
                        Ok(None) => arrived[q as usize].push(next),
                        Err(_) => prop_assert!(q >= 5),
                    }
                } else {
                    let (fq, e, _) = in_service.remove(q as usize % in_service.len());
                    if let Some((nq, r)) = qc.finish(fq, e).expect("finishing a request in service") {
                        start(&mut qc, nq, r, &mut in_service, &mut started);
                    }
                }
                prop_assert!(in_service.len() as u32 == qc.busy() && qc.busy() <= 2);
                let mut qs: Vec<u32> = in_service.iter().map(|x| x.0 .0).collect();
                qs.sort_unstable();
                let n = qs.len();
                qs.dedup();
                prop_assert_eq!(qs.len(), n, "two requests of one queue in service");
            }
            for q in 0..6 {
                prop_assert_eq!(&started[q][..], &arrived[q][..started[q].len()], "queue {} out of order", q);
            }
            let waiting: usize = (0..6).map(|q| arrived[q].len() - started[q].len()).sum();
            prop_assert_eq!(waiting, qc.waiting());
        }
    }
}
