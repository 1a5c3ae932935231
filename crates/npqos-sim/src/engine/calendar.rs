//! A calendar of slots held as chains of small arrays: the earliest of `n` keys, one per member, where the
//! member that wins is the one whose key changes next, for members whose new keys lie far ahead
//! of the present (kim's queues: each queue's next arrival, about `n` arrivals' worth of time
//! away, and the engine's source through [`super::Model::next_source_key`]).
//!
//! Time is cut into slots of `2^shift` ns, sized so that a slot holds a few hundred members when
//! it comes up. The members of the next `slots - 1` slots are kept per slot in the order they
//! were filed, in a chain of chunks of 16 members (16 bytes a member, a chunk four cache
//! lines); a bit per slot says whether it holds any. A sorted slot gives its chunks back to a
//! stack of free ones, and a slot that fills its last chunk takes the one on top: the one whose
//! lines a sort read last, so the writes of new members go to lines still in cache, and the
//! memory is the members' (about 16 bytes each, plus a partly filled chunk a slot), not the
//! ring's span. Members
//! further ahead wait in a binary heap (`far`) and are appended to their slot when the ring
//! comes within reach of it. When the current slot runs out, the next occupied slot's members
//! become the current run, sorted by time (one counting pass over the top 8 bits of the time
//! within the slot, then an insertion sort over what that leaves, about one member a range),
//! and members leave from its front. A member whose new key falls in the current slot waits in a
//! small binary heap (`near`) beside the run.
//!
//! **Why the order is exact.** Keys are `u128` and distinct, the engine's `(time, sequence)` as
//! one integer ([`super::EventKey::packed`]), and every key given after the calendar was built
//! has a larger sequence than any key in it (the engine's tickets of one class are numbered in
//! the order they are taken; the class sits above the number, so the members' tickets must all
//! be of one class, as kim's are). A slot's chain therefore holds its members in sequence order among those of the
//! same time: the members brought in from `far` come first and in key order (they were filed
//! before the slot came within reach, and `far` gives them up in key order), the members filed
//! directly come after, each later than every member before it. A stable sort by time then
//! leaves the run in key order. The current slot's late members (`near`) are compared with the
//! run's front by their whole keys. Building sorts the keys it is given.
//!
//! **Why arrays.** A loser tree (which kim used before) replays `log2 n` matches a key, 16 for
//! 50,000 members, its compares one chain; an event queue of levels moves each entry two or
//! three times. Here a key is written once where its slot's members end, read once when the
//! slot is sorted (in order) and once more from the run: the loads go forward through memory,
//! sixteen members a chunk, the next chunk loaded while one is read. (A calendar of linked
//! lists with a member a link, tried before, walked its lists through members filed long
//! before, one dependent cache miss after another; a calendar with each slot's own room in one
//! flat array, the one before this, wrote its members to lines last used a revolution of the
//! ring before, and its memory followed the ring's span: docs/PERFORMANCE.md.)

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A member's key and index, as the calendar keeps them (24 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Entry {
    time: u64,
    seq: u64,
    member: u32,
}

impl Entry {
    #[inline(always)]
    fn new(key: u128, member: u32) -> Self {
        Entry { time: (key >> 64) as u64, seq: key as u64, member }
    }
    #[inline(always)]
    fn key(&self) -> u128 {
        ((self.time as u128) << 64) | self.seq as u128
    }
}

/// A member as filed in a slot (16 bytes, four a cache line): its time's bits below the slot's
/// (`shift` is at most 32), its sequence and index.
#[derive(Clone, Copy, Debug, Default)]
struct Filed {
    low: u32,
    member: u32,
    seq: u64,
}

/// Members a chunk.
const CHUNK: usize = 16;

/// [`CHUNK`] members of one slot (256 bytes: four cache lines, aligned to them).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Chunk([Filed; CHUNK]);
/// No chunk.
const NONE: u32 = u32::MAX;

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct Calendar {
    /// A slot's members in the order they were filed, in a chain of chunks.
    store: Vec<Chunk>,
    /// Per chunk, the next of its slot's chain ([`NONE`] at the end).
    next: Vec<u32>,
    /// Chunks no slot holds, the last given back on top: the lines a sort has just read are
    /// the next to be written.
    free: Vec<u32>,
    /// Per slot (absolute slot `a` at `a & mask`): members, and its chain's first and last
    /// chunk (when it holds any).
    lens: Vec<u32>,
    head: Vec<u32>,
    tail: Vec<u32>,
    /// One bit per slot: its chain is not empty.
    occupied: Vec<u64>,
    /// A slot spans `2^shift` ns.
    shift: u32,
    /// Slots - 1 (slots a power of two, at least 64).
    mask: u64,
    /// The absolute slot (`time >> shift`) of the current run.
    cur: u64,
    /// The current slot's members, sorted; `run[pos..]` are still pending.
    run: Vec<Entry>,
    pos: usize,
    /// Members given a key in the current slot after it was sorted.
    near: BinaryHeap<Reverse<(u128, u32)>>,
    /// Members whose slot was `cur + slots` or later when they were filed.
    far: BinaryHeap<Reverse<(u128, u32)>>,
    /// The least key and its member.
    top: Entry,
    /// The top is `near`'s, not the run's front.
    top_near: bool,
    /// Slots sorted by the counting pass (tests only: which path a test took).
    #[cfg(test)]
    counted: u64,
}

impl Calendar {
    /// A calendar for `keys.len()` members (at least one, fewer than 2^32) whose keys change by
    /// `mean_gap_ns` on average: slots sized to hold 128 to 256 members each, and enough of them
    /// to reach at least 8 mean gaps ahead (at most about 3 keys in 10,000 wait in `far` for
    /// exponential gaps).
    /// Any sizing gives the same order; it moves only the speed (the memory is the members',
    /// whatever the reach).
    pub fn for_gaps(keys: Vec<u128>, mean_gap_ns: u64) -> Self {
        let n = keys.len().max(1) as u128;
        let mean = mean_gap_ns.max(1) as u128;
        // About 256 a slot at most (160 with the width rounded down): kim's row at 2 s ran
        // fastest with 256 to 512 (docs/PERFORMANCE.md).
        let target: u128 = 256;
        // A slot of 2^shift ns holds about n 2^shift / mean_gap members when it comes up.
        let width = (mean * target.min(n) / n).max(1);
        let shift = (127 - width.leading_zeros()).min(32); // floor(log2 width)
        let reach = ((8 * mean) >> shift).max(64);
        let slots = reach.next_power_of_two().min(1 << 20) as usize;
        Self::new(keys, shift, slots)
    }

    /// A calendar over `keys.len()` members (at least one, fewer than 2^32), member `j` with key
    /// `keys[j]` (distinct), slots of `2^shift` ns (`shift` at most 32), `slots` of them (a power
    /// of two, at least 64).
    pub fn new(keys: Vec<u128>, shift: u32, slots: usize) -> Self {
        let n = keys.len();
        assert!((1..=u32::MAX as usize).contains(&n), "a calendar has 1 to 2^32 - 1 members, not {n}");
        assert!(shift <= 32, "slots of 2^{shift} ns");
        assert!(slots.is_power_of_two() && slots >= 64, "slots {slots}: a power of two, at least 64");
        let mut sorted: Vec<Entry> = keys.iter().enumerate().map(|(j, &k)| Entry::new(k, j as u32)).collect();
        sorted.sort_unstable_by_key(Entry::key);
        let first = sorted[0].time >> shift;
        let mut c = Calendar {
            // Room for the members and a partly filled chunk a slot; more is added if needed.
            store: Vec::with_capacity(n / CHUNK + slots.min(n)),
            next: Vec::with_capacity(n / CHUNK + slots.min(n)),
            free: Vec::new(),
            lens: vec![0; slots],
            head: vec![NONE; slots],
            tail: vec![NONE; slots],
            occupied: vec![0; slots / 64],
            shift,
            mask: slots as u64 - 1,
            // No slot is current yet: the first slot is filed like any other, then taken.
            cur: first.wrapping_sub(1),
            run: Vec::new(),
            pos: 0,
            near: BinaryHeap::new(),
            far: BinaryHeap::new(),
            top: Entry::default(),
            top_near: false,
            #[cfg(test)]
            counted: 0,
        };
        // In key order, so that members of one time are filed in key order (see the module
        // documentation). The current slot is before the first key's, so none is near.
        for e in sorted {
            c.file(e);
        }
        c.advance();
        c
    }

    /// The member with the least key.
    #[inline(always)]
    pub fn top(&self) -> u32 {
        self.top.member
    }
    /// The least key.
    #[inline(always)]
    pub fn top_key(&self) -> u128 {
        self.top.key()
    }

    /// Gives the winner the key `key`, which is not before its present key and has a larger
    /// sequence than every key given before (an engine ticket taken now).
    #[inline]
    pub fn replace_top(&mut self, key: u128) {
        let member = self.top.member;
        // The top leaves from where it was: the run's front, or `near`.
        if self.top_near {
            self.near.pop();
        } else {
            self.pos += 1;
        }
        debug_assert!(key > self.top.key(), "a member's key only grows");
        self.file(Entry::new(key, member));
        self.settle();
    }

    /// Files `e`, whose slot is not before the current one.
    #[inline(always)]
    fn file(&mut self, e: Entry) {
        let s = e.time >> self.shift;
        let ahead = s.wrapping_sub(self.cur);
        if ahead == 0 {
            self.near.push(Reverse((e.key(), e.member)));
        } else if ahead <= self.mask {
            self.put((s & self.mask) as usize, e);
        } else {
            self.far.push(Reverse((e.key(), e.member)));
        }
    }

    /// Finds the least key: the run's front or `near`'s, taking the next slot when both are
    /// empty.
    #[inline(always)]
    fn settle(&mut self) {
        if self.pos == self.run.len() && self.near.is_empty() {
            self.advance();
            return;
        }
        self.set_top();
    }

    /// The least key becomes the top: the run's front or `near`'s, whichever is less.
    #[inline(always)]
    fn set_top(&mut self) {
        let front = self.run.get(self.pos);
        (self.top, self.top_near) = match (front, self.near.peek()) {
            (Some(&f), Some(&Reverse((k, m)))) if k < f.key() => (Entry::new(k, m), true),
            (Some(&f), _) => (f, false),
            (None, Some(&Reverse((k, m)))) => (Entry::new(k, m), true),
            (None, None) => unreachable!("a calendar always has members"),
        };
    }

    /// Makes the next occupied slot current (the run and `near` are empty), bringing in from
    /// `far` the members of the slots that come within reach, and sorts it.
    #[cold]
    fn advance(&mut self) {
        let next = match self.next_occupied() {
            Some(s) => s,
            // Nothing within reach: the earliest far member's slot.
            None => {
                let Reverse((k, _)) = *self.far.peek().expect("a calendar always has members");
                ((k >> 64) as u64) >> self.shift
            }
        };
        // Slots up to next + mask come within reach: their far members first, in key order.
        while let Some(&Reverse((k, m))) = self.far.peek() {
            let s = ((k >> 64) as u64) >> self.shift;
            if s.wrapping_sub(next) > self.mask {
                break;
            }
            self.far.pop();
            self.put((s & self.mask) as usize, Entry::new(k, m));
        }
        self.cur = next;
        let i = (next & self.mask) as usize;
        self.occupied[i / 64] &= !(1 << (i % 64));
        self.pos = 0;
        self.take_sorted(i);
        self.set_top();
    }

    /// Appends `e` to slot `i`'s members.
    #[inline(always)]
    fn put(&mut self, i: usize, e: Entry) {
        let f = Filed { low: e.time as u32 & ((1u64 << self.shift) - 1) as u32, member: e.member, seq: e.seq };
        let len = self.lens[i] as usize;
        let at = len % CHUNK;
        if at == 0 {
            let k = self.chunk();
            if len == 0 {
                self.head[i] = k;
            } else {
                self.next[self.tail[i] as usize] = k;
            }
            self.tail[i] = k;
        }
        self.store[self.tail[i] as usize].0[at] = f;
        self.lens[i] = len as u32 + 1;
        self.occupied[i / 64] |= 1 << (i % 64);
    }

    /// A free chunk (its contents stale).
    #[inline(always)]
    fn chunk(&mut self) -> u32 {
        match self.free.pop() {
            Some(k) => k,
            None => self.grow(),
        }
    }
    #[cold]
    fn grow(&mut self) -> u32 {
        let k = u32::try_from(self.next.len()).ok().filter(|&k| k != NONE).expect("fewer than 2^32 - 1 chunks");
        self.next.push(NONE);
        self.store.push(Chunk::default());
        k
    }

    /// The first occupied slot after the current one, within reach.
    #[inline]
    fn next_occupied(&self) -> Option<u64> {
        let slots = self.mask + 1;
        let words = self.occupied.len();
        let start = self.cur.wrapping_add(1);
        let i = (start & self.mask) as usize;
        // The first word from bit i on, then the following words, wrapping around once.
        let (w0, b0) = (i / 64, i % 64);
        let first = self.occupied[w0] & (u64::MAX << b0);
        if first != 0 {
            let j = (w0 * 64 + first.trailing_zeros() as usize) as u64;
            return Some(start + ((j + slots - (start & self.mask)) & self.mask));
        }
        for k in 1..=words {
            let w = (w0 + k) % words;
            let mut bits = self.occupied[w];
            if k == words {
                bits &= !(u64::MAX << b0); // back at the first word: the bits before i
            }
            if bits != 0 {
                let j = (w * 64 + bits.trailing_zeros() as usize) as u64;
                return Some(start + ((j + slots - (start & self.mask)) & self.mask));
            }
        }
        None
    }

    /// Makes slot `i`'s members (of the current slot) the run, sorted by time, stably: their
    /// times share the bits above `shift`. One counting pass over the top 8 of the `shift` bits
    /// below scatters them into 256 ranges (a slot's times spread over its width, so a range
    /// holds about one member), then an insertion sort orders what is left; both keep members of
    /// equal time in the order they were filed.
    fn take_sorted(&mut self, i: usize) {
        let n = self.lens[i] as usize;
        self.lens[i] = 0;
        let base = self.cur << self.shift;
        let head = self.head[i];
        let Calendar { store, next, free, run, shift, .. } = self;
        let chain = || Chain { store, next, k: head, left: n };
        let entry = |f: &Filed| Entry { time: base | f.low as u64, seq: f.seq, member: f.member };
        run.clear();
        if n <= 16 || *shift == 0 {
            for c in chain() {
                run.extend(c.iter().map(entry));
            }
        } else {
            #[cfg(test)]
            {
                self.counted += 1;
            }
            let lo = shift.saturating_sub(8);
            // At most 8 bits: the digit indexes `counts` without a bounds check.
            let mask = ((1u32 << (*shift - lo)) - 1) & 0xff;
            let digit = |f: &Filed| ((f.low >> lo) & mask) as usize;
            let mut counts = [0u32; 257];
            for c in chain() {
                for f in c {
                    counts[digit(f) + 1] += 1;
                }
            }
            for d in 1..257 {
                counts[d] += counts[d - 1];
            }
            run.resize(n, Entry::default());
            for c in chain() {
                for f in c {
                    let d = digit(f);
                    run[counts[d] as usize] = entry(f);
                    counts[d] += 1;
                }
            }
        }
        // The chunks go back, the last read on top.
        let mut k = head;
        for _ in 0..n.div_ceil(CHUNK) {
            free.push(k);
            k = next[k as usize];
        }
        for k in 1..n {
            let e = self.run[k];
            if self.run[k - 1].time <= e.time {
                continue;
            }
            let mut j = k;
            while j > 0 && self.run[j - 1].time > e.time {
                self.run[j] = self.run[j - 1];
                j -= 1;
            }
            self.run[j] = e;
        }
    }
}

#[cfg(test)]
impl Calendar {
    /// Every chunk is either free or in exactly one slot's chain, and a chain has as many chunks
    /// as its slot's members need.
    fn check_chunks(&self) -> Result<(), String> {
        let mut seen = vec![0u32; self.store.len()];
        for &k in &self.free {
            seen[k as usize] += 1;
        }
        for (i, &n) in self.lens.iter().enumerate() {
            let chunks = (n as usize).div_ceil(CHUNK);
            let mut k = self.head[i];
            for c in 0..chunks {
                seen[k as usize] += 1;
                if c + 1 < chunks {
                    k = self.next[k as usize];
                }
            }
            if chunks > 0 && k != self.tail[i] {
                return Err(format!("slot {i}: its chain ends at chunk {k}, its tail is {}", self.tail[i]));
            }
        }
        match seen.iter().position(|&c| c != 1) {
            Some(k) => Err(format!("chunk {k} held {} times", seen[k])),
            None => Ok(()),
        }
    }
}

/// A slot's members as the slices of its chunks, in the order they were filed; each step
/// starts loading the chunk after.
struct Chain<'a> {
    store: &'a [Chunk],
    next: &'a [u32],
    k: u32,
    left: usize,
}

impl<'a> Iterator for Chain<'a> {
    type Item = &'a [Filed];
    #[inline(always)]
    fn next(&mut self) -> Option<&'a [Filed]> {
        if self.left == 0 {
            return None;
        }
        let m = self.left.min(CHUNK);
        let c = &self.store[self.k as usize].0[..m];
        self.left -= m;
        if self.left > 0 {
            self.k = self.next[self.k as usize];
            npqos_core::hint::prefetch_whole(self.store, self.k as usize);
        }
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// Replays `steps` changes of the winner's key (each `gaps[i]` ns after its present time,
    /// with the next sequence number) on a calendar and on an ordered set, checking the winner
    /// and its key every time.
    fn against_a_set(cal: &mut Calendar, keys: &[u128], gaps: &[u64]) -> Result<(), TestCaseError> {
        let mut set: BTreeSet<(u128, u32)> = keys.iter().enumerate().map(|(j, &k)| (k, j as u32)).collect();
        let first = keys.iter().map(|&k| k as u64).max().unwrap_or(0) + 1;
        for (seq, (step, &g)) in (first..).zip(gaps.iter().enumerate()) {
            let &(k, j) = set.first().unwrap();
            prop_assert_eq!((cal.top_key(), cal.top()), (k, j), "step {}", step);
            if step % 997 == 0 {
                cal.check_chunks().map_err(|e| TestCaseError::fail(format!("step {step}: {e}")))?;
            }
            set.pop_first();
            let next = ((((k >> 64) as u64 + g) as u128) << 64) | seq as u128;
            set.insert((next, j));
            cal.replace_top(next);
        }
        Ok(())
    }

    /// Keys of `n` members: times from `times`, sequences 0.. in member order (as kim takes its
    /// first tickets).
    fn keys_of(times: &[u64]) -> Vec<u128> {
        times.iter().enumerate().map(|(j, &t)| ((t as u128) << 64) | j as u128).collect()
    }

    #[test]
    fn pops_in_key_order_at_kims_scale_with_exponential_gaps() {
        use rand::{Rng, SeedableRng};
        use rand_distr::{Distribution, Exp};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let n = 50_000;
        let mean = 41_000_000.0;
        let times: Vec<u64> = (0..n).map(|_| rng.random_range(0..mean as u64)).collect();
        let keys = keys_of(&times);
        let exp = Exp::new(1.0 / mean).unwrap();
        let gaps: Vec<u64> = (0..400_000).map(|_| (exp.sample(&mut rng) as u64).max(1)).collect();
        let mut cal = Calendar::for_gaps(keys.clone(), mean as u64);
        against_a_set(&mut cal, &keys, &gaps).unwrap();
        // Slots were sorted by the counting pass (more than 16 members, shift above 8): about
        // 160 members a slot, 400,000 keys over about 2,500 slots.
        assert!(cal.shift > 8 && cal.counted > 1_000, "shift {}, slots counted {}", cal.shift, cal.counted);
        // The memory is the members' and a partly filled chunk a slot: sorted slots give their
        // chunks back, and they are used again.
        let slots = cal.lens.len();
        assert!(cal.store.len() <= n / CHUNK + slots, "{} chunks for {n} members in {slots} slots", cal.store.len());
    }

    #[test]
    fn equal_times_leave_in_sequence_order_through_every_path() {
        // Every key at one of a few times: ties in the run, in near, and from far.
        let times: Vec<u64> = (0..200).map(|j| (j % 3) * 1000).collect();
        let keys = keys_of(&times);
        let gaps: Vec<u64> = (0..5000).map(|i| [0, 0, 1000, 70_000, 1 << 20][i % 5]).collect();
        for (shift, slots) in [(0, 64), (4, 64), (10, 64), (16, 128), (32, 64)] {
            let mut cal = Calendar::new(keys.clone(), shift, slots);
            against_a_set(&mut cal, &keys, &gaps).unwrap();
        }
    }

    #[test]
    fn one_member_and_long_silences() {
        let keys = keys_of(&[5]);
        let gaps = [0, 1, 1 << 40, 3, 1 << 50, 0, 0];
        let mut cal = Calendar::new(keys.clone(), 8, 64);
        against_a_set(&mut cal, &keys, &gaps).unwrap();
    }

    proptest! {
        /// Random sizes, times, gaps (from none to far beyond the ring's reach) and sizings:
        /// the same member and key as an ordered set, every time.
        #[test]
        fn matches_an_ordered_set(
            times in prop::collection::vec(0u64..1 << 24, 1..400),
            gaps in prop::collection::vec(prop_oneof![0u64..4, 0u64..1 << 12, 0u64..1 << 26], 1..3000),
            shift in 0u32..=32,
            slots_log2 in 6u32..9,
        ) {
            let keys = keys_of(&times);
            let mut cal = Calendar::new(keys.clone(), shift, 1 << slots_log2);
            against_a_set(&mut cal, &keys, &gaps)?;
        }

        /// Keys given in any order (their sequences shuffled against their members): building
        /// sorts them.
        #[test]
        fn builds_from_keys_in_any_order(
            times in prop::collection::vec(0u64..1 << 12, 1..200),
            gaps in prop::collection::vec(0u64..1 << 14, 1..1000),
            shift in 0u32..12,
        ) {
            let n = times.len();
            let keys: Vec<u128> = times.iter().enumerate().map(|(j, &t)| ((t as u128) << 64) | ((j * 7919) % n) as u128 | ((j as u128) << 32)).collect();
            let mut cal = Calendar::new(keys.clone(), shift, 64);
            against_a_set(&mut cal, &keys, &gaps)?;
        }
    }
}
