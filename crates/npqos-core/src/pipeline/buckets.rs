//! Per-flow buckets with a memory bound: the one bucket-lifetime rule of the egress element
//! (docs/pipeline.md, "The bucket-lifetime rule"), used by the router model and `npqos live`.
//!
//! A per-flow shaper cannot keep a bucket for every flow it ever saw, and a flow must not get a
//! fresh, full bucket each time it goes idle and comes back (it would beat its rate by a cap's
//! worth per return). [`FlowBuckets`] holds `n` buckets, which the caller's shaper indexes
//! `0..n`, and lends them to flows:
//!
//! * a flow **holds** its bucket while it has packets in the element (the caller counts them
//!   in with [`FlowBuckets::acquire`] and out with [`FlowBuckets::release`]);
//! * when its last packet leaves, the bucket is **parked**: it stays the flow's, with the time
//!   it is full again (the shaper's `full_at`), and the flow takes it back if it returns
//!   before somebody else took it, full or not;
//! * a flow without a bucket takes, in this order: a bucket **never used** (the one at the
//!   flow's hint when the caller gives one and it is unused, else the lowest-numbered), then
//!   the parked bucket that is full soonest: one already **full again** is the same as a new
//!   one, so taking it changes no decision (counted as `reused`); one still filling is taken
//!   from its idle flow (counted as `evicted`), which then starts over with whatever bucket it
//!   gets.
//!
//! With no more flows than buckets every flow keeps its own bucket for life; with hints equal
//! to the flows' first-seen indices (the router model), that bucket is the flow's first-seen
//! index, as the simulator's per-flow buckets always were.
//!
//! **Memory.** 16 B per bucket; the key of the flow each bucket is lent to without a hint (40
//! B per bucket, in pages touched only when such a flow takes the bucket); an index from a
//! key's hash to its bucket (16 B a slot, at most two slots per bucket, growing by doubling
//! from room for 65,536 flows); and, once every bucket has been used, a heap of parked buckets
//! by their full time (at most `2n + 64` entries: stale entries are dropped on the way and the
//! heap is compacted when they outnumber the live ones). [`FlowBuckets::memory_bytes`] states
//! it; it does not grow with the number of flows.
//!
//! **Cost.** While a never-used bucket remains, nothing is kept in order: parking writes the
//! bucket's record and nothing else, so a run where flows never outnumber buckets pays a
//! record write per acquire and release. A flow without a hint pays a hash and a look in the
//! index; a driver that knows the next packets' keys loads their index slots and records
//! ahead ([`FlowBuckets::prefetch_index`], [`FlowBuckets::prefetch_flow`]).

use crate::error::{Clock, Error};
use crate::flow::FlowKey;
use crate::pipeline::hashslots::HashSlots;
use crate::pipeline::{ConservationError, Ports};
use crate::time::Instant;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Never lent (zero: a new table is the kernel's zeroed pages, not written at build).
const UNUSED: u32 = 0;
/// The bucket's holder is the flow whose hint is the bucket (not in the map).
const OWN: u32 = 1;
/// Held or parked by a flow in the map.
const MAPPED: u32 = 2;

/// One bucket's record.
#[derive(Clone, Copy, Debug, bytemuck::Zeroable)]
#[repr(C)]
struct Slot {
    /// [`OWN`], [`UNUSED`] or [`MAPPED`].
    owner: u32,
    /// Packets (or, for a driver that counts activations, queues) of its flow in the element.
    held: u32,
    /// While parked (`held == 0` and owned): when it is full again, ns.
    full_at: u64,
}

/// How a flow came by its bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    /// Its own, held or parked.
    Own,
    /// A bucket never used before.
    Fresh,
    /// A parked bucket of another flow, already full again.
    Reused,
    /// A parked bucket of another flow, still filling (that flow loses it).
    Evicted,
    /// Every bucket is held: the flow shares the one its key hashes to, without owning it.
    Shared,
}

/// What the rule has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BucketCounters {
    /// Never-used buckets lent.
    pub fresh: u64,
    /// Parked buckets that were full again, lent to another flow.
    pub reused: u64,
    /// Parked buckets taken from their idle flow before they were full.
    pub evicted: u64,
    /// Times a flow found every bucket held and shared one ([`Taken::Shared`]).
    pub shared: u64,
    /// Buckets parked now and the most at once.
    pub parked: u32,
    pub parked_max: u32,
}

/// Per-flow buckets with a memory bound. See the module documentation.
#[derive(Clone, Debug)]
pub struct FlowBuckets {
    slots: Vec<Slot>,
    /// Flows without a hint (or whose hint's bucket went to another flow): their bucket by
    /// their key's hash.
    map: HashSlots,
    /// Per bucket: the key of its flow, while the bucket is [`MAPPED`].
    keys: Vec<FlowKey>,
    /// Every bucket below is used.
    next_unused: u32,
    unused: u32,
    /// Parked buckets by full time; kept only once `unused` is 0 (built then from the slots).
    /// An entry is live while its bucket is parked with that time.
    parked: BinaryHeap<Reverse<(u64, u32)>>,
    ordered: bool,
    counters: BucketCounters,
    /// Packets (or queues) counted in by `acquire` and out by `release`.
    ports: Ports<0>,
    clock: Clock,
}

impl FlowBuckets {
    /// `buckets` buckets, all unused.
    ///
    /// Errors: no buckets, or more than `u32::MAX - 1`.
    pub fn new(buckets: u32) -> Result<Self, Error> {
        if buckets == 0 || buckets == u32::MAX {
            return Err(Error::BadParameter {
                parameter: "buckets",
                value: buckets.to_string(),
                expected: "1 to 2^32 - 2 buckets",
            });
        }
        Ok(FlowBuckets {
            // Every slot UNUSED, holding nothing.
            slots: bytemuck::zeroed_vec(buckets as usize),
            map: HashSlots::new(buckets as usize),
            keys: bytemuck::zeroed_vec(buckets as usize),
            next_unused: 0,
            unused: buckets,
            parked: BinaryHeap::new(),
            ordered: false,
            counters: BucketCounters::default(),
            ports: Ports { input: 0, output: 0, dropped: [] },
            clock: Clock::default(),
        })
    }

    pub fn buckets(&self) -> u32 {
        self.slots.len() as u32
    }
    pub fn counters(&self) -> &BucketCounters {
        &self.counters
    }
    /// Packets (or queues) counted in on `bucket` and not yet out; 0 for an unknown bucket.
    pub fn held(&self, bucket: u32) -> u32 {
        self.slots.get(bucket as usize).map_or(0, |s| s.held)
    }

    /// A hint: `bucket`'s record is needed soon (no effect on results).
    #[inline]
    pub fn prefetch(&self, bucket: u32) {
        crate::hint::prefetch(&self.slots, bucket as usize);
    }

    /// The hash of flow key `key` that [`Self::prefetch_index`], [`Self::prefetch_flow`] and
    /// [`Self::acquire_hashed`] take: [`super::flow_hash`].
    #[inline]
    pub fn hash(&self, key: &FlowKey) -> u64 {
        super::flow_hash(key)
    }

    /// A hint: a packet of the flow whose [`Self::hash`] is `h` comes soon, so its index slot
    /// is loaded now (no effect on results).
    #[inline]
    pub fn prefetch_index(&self, h: u64) {
        self.map.prefetch(h);
    }

    /// A hint, the second some work after [`Self::prefetch_index`]: the record and key of the
    /// bucket the index slot of `h` names (its key not checked) are loaded now. No effect on
    /// results.
    #[inline]
    pub fn prefetch_flow(&self, h: u64) {
        if let Some(b) = self.map.peek(h) {
            crate::hint::prefetch(&self.slots, b as usize);
            crate::hint::prefetch_whole(&self.keys, b as usize);
        }
    }

    /// Flow `key` has one more packet (or queue) in the element at `now`: its bucket, and how
    /// it came by it. `hint` is the bucket the caller would give the flow if it were unused
    /// (the router model's first-seen index); a hint must belong to one flow only.
    ///
    /// Errors (no effect): a hint outside the buckets, `now` before a time already given, or
    /// more than `u32::MAX` packets held on one bucket.
    pub fn acquire(&mut self, key: &FlowKey, hint: Option<u32>, now: Instant) -> Result<(u32, Taken), Error> {
        self.acquire_hashed(key, hint, now, None)
    }

    /// [`Self::acquire`] with the key's [`Self::hash`] if the caller has it (so it is not
    /// worked out again). Any other value corrupts the index (checked in debug builds).
    pub fn acquire_hashed(
        &mut self,
        key: &FlowKey,
        hint: Option<u32>,
        now: Instant,
        hashed: Option<u64>,
    ) -> Result<(u32, Taken), Error> {
        debug_assert!(hashed.is_none_or(|h| h == self.hash(key)), "a hash of another key");
        let n = self.slots.len();
        if let Some(h) = hint.filter(|&h| h as usize >= n) {
            return Err(Error::UnknownId { kind: "bucket", id: h, count: n });
        }
        self.clock.advance(now)?;
        // Its own: by its hint, or else by its key (hashed once, when needed).
        let mut hash = hashed;
        let own = match hint {
            Some(h) if self.slots[h as usize].owner == OWN => Some(h),
            _ => {
                let h = *hash.get_or_insert_with(|| super::flow_hash(key));
                self.map.find(h, |b| self.keys[b as usize] == *key)
            }
        };
        if let Some(b) = own {
            self.hold(b)?;
            self.ports.input += 1;
            return Ok((b, Taken::Own));
        }
        let (b, how) = match hint.filter(|&h| self.slots[h as usize].owner == UNUSED) {
            Some(h) => (h, Taken::Fresh),
            None if self.unused > 0 => {
                while self.slots[self.next_unused as usize].owner != UNUSED {
                    self.next_unused += 1;
                }
                (self.next_unused, Taken::Fresh)
            }
            None => match self.take_parked(now) {
                Some(taken) => taken,
                None => {
                    // Every bucket is held: share one, by hash, without owning it.
                    let b = (hash.unwrap_or_else(|| super::flow_hash(key)) % n as u64) as u32;
                    self.hold(b)?;
                    self.ports.input += 1;
                    self.counters.shared += 1;
                    return Ok((b, Taken::Shared));
                }
            },
        };
        if how == Taken::Fresh {
            self.unused -= 1;
            self.counters.fresh += 1;
        }
        self.ports.input += 1;
        let s = &mut self.slots[b as usize];
        s.held = 1;
        if hint == Some(b) {
            s.owner = OWN;
        } else {
            s.owner = MAPPED;
            let h = hash.unwrap_or_else(|| super::flow_hash(key));
            self.map.insert(h, b);
            self.keys[b as usize] = *key;
        }
        Ok((b, how))
    }

    /// One held packet (or queue) of `bucket`'s flow left the element at `now`; the shaper
    /// says the bucket is full at `full_at`. When it was the last, the bucket is parked.
    /// Returns whether it was parked.
    ///
    /// Errors (no effect): an unknown bucket, one holding nothing, `now` before a time
    /// already given.
    pub fn release(&mut self, bucket: u32, full_at: Instant, now: Instant) -> Result<bool, Error> {
        let n = self.slots.len();
        let s = self.slots.get(bucket as usize).ok_or(Error::UnknownId { kind: "bucket", id: bucket, count: n })?;
        if s.held == 0 {
            return Err(Error::NotAllowed("release of a bucket that holds nothing"));
        }
        self.clock.advance(now)?;
        self.ports.output += 1;
        let s = &mut self.slots[bucket as usize];
        s.held -= 1;
        if s.held > 0 {
            return Ok(false);
        }
        s.full_at = full_at.as_nanos();
        self.counters.parked += 1;
        self.counters.parked_max = self.counters.parked_max.max(self.counters.parked);
        if self.ordered {
            self.parked.push(Reverse((s.full_at, bucket)));
            self.compact();
        }
        Ok(true)
    }

    /// Whether `bucket` is parked with full time `t` (a heap entry is live).
    fn is_parked_at(&self, bucket: u32, t: u64) -> bool {
        let s = &self.slots[bucket as usize];
        s.owner != UNUSED && s.held == 0 && s.full_at == t
    }

    fn hold(&mut self, b: u32) -> Result<(), Error> {
        let s = &mut self.slots[b as usize];
        if s.held == 0 {
            self.counters.parked -= 1;
        }
        s.held = s.held.checked_add(1).ok_or(Error::NotAllowed("more than u32::MAX packets on one bucket"))?;
        Ok(())
    }

    /// Every bucket is in use: the parked one full soonest, taken from its flow. `None` when
    /// every bucket is held (the flows holding them outnumber the buckets the caller sized the
    /// element for; a caller with a bound of its own, such as live's two buckets per queue,
    /// never gets there).
    fn take_parked(&mut self, now: Instant) -> Option<(u32, Taken)> {
        if !self.ordered {
            self.ordered = true;
            let parked = self.slots.iter().enumerate().filter(|(_, s)| s.held == 0 && s.owner != UNUSED);
            self.parked = parked.map(|(b, s)| Reverse((s.full_at, b as u32))).collect();
        }
        while let Some(Reverse((t, b))) = self.parked.pop() {
            if !self.is_parked_at(b, t) {
                continue;
            }
            self.counters.parked -= 1;
            self.unbind(b);
            let how = if t <= now.as_nanos() { Taken::Reused } else { Taken::Evicted };
            match how {
                Taken::Reused => self.counters.reused += 1,
                _ => self.counters.evicted += 1,
            }
            return Some((b, how));
        }
        None
    }

    /// Bucket `b` leaves its idle flow.
    fn unbind(&mut self, b: u32) {
        if self.slots[b as usize].owner == MAPPED {
            let h = super::flow_hash(&self.keys[b as usize]);
            let was = self.map.remove(h, b);
            debug_assert!(was, "a mapped bucket is in the index");
        }
        self.slots[b as usize].owner = UNUSED;
    }

    /// Drops stale heap entries once they outnumber the live ones, so the heap stays within
    /// `2n + 64` entries however often flows come and go.
    fn compact(&mut self) {
        if self.parked.len() <= 2 * self.counters.parked as usize + 64 {
            return;
        }
        let mut v = std::mem::take(&mut self.parked).into_vec();
        v.retain(|&Reverse((t, b))| self.is_parked_at(b, t));
        v.sort_unstable();
        v.dedup();
        self.parked = v.into();
    }

    /// Bytes held, whatever the number of flows: the records, the keys, the index at its
    /// capacity and the heap at its capacity.
    pub fn memory_bytes(&self) -> u64 {
        (self.slots.capacity() * size_of::<Slot>()
            + self.keys.capacity() * size_of::<FlowKey>()
            + self.map.capacity() * 16
            + self.parked.capacity() * size_of::<Reverse<(u64, u32)>>()) as u64
    }

    /// Conservation at the element's ports: packets (or queues) counted in = counted out +
    /// held on the buckets now.
    pub fn conservation(&self) -> Result<(), ConservationError> {
        self.ports.check("flow buckets", self.slots.iter().map(|s| s.held as u64).sum())
    }

    /// The rule's invariants: the counts agree with the records, every mapped bucket is in
    /// the maps both ways and no other is, and every parked bucket has a live heap entry once
    /// the heap is kept.
    pub fn check(&self) -> Result<(), String> {
        self.conservation().map_err(|e| e.to_string())?;
        let unused = self.slots.iter().filter(|s| s.owner == UNUSED).count() as u32;
        if unused != self.unused {
            return Err(format!("{unused} unused buckets, counted {}", self.unused));
        }
        let parked = self.slots.iter().filter(|s| s.owner != UNUSED && s.held == 0).count() as u32;
        if parked != self.counters.parked {
            return Err(format!("{parked} parked buckets, counted {}", self.counters.parked));
        }
        if let Some(b) = self.slots.iter().position(|s| s.owner == UNUSED && s.held > 0) {
            return Err(format!("bucket {b} is unused but holds packets"));
        }
        let mapped = self.slots.iter().filter(|s| s.owner == MAPPED).count();
        if mapped != self.map.len() {
            return Err(format!("{mapped} mapped buckets, {} in the index", self.map.len()));
        }
        for (b, k) in self.keys.iter().enumerate().filter(|&(b, _)| self.slots[b].owner == MAPPED) {
            if self.map.find(self.hash(k), |x| self.keys[x as usize] == *k) != Some(b as u32) {
                return Err(format!("bucket {b} is mapped to a flow whose key does not lead to it"));
            }
        }
        if self.ordered {
            let live: std::collections::HashSet<u32> =
                self.parked.iter().filter(|e| self.is_parked_at(e.0 .1, e.0 .0)).map(|e| e.0 .1).collect();
            if live.len() != parked as usize {
                return Err(format!("{parked} parked buckets, {} in the heap", live.len()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
