//! Per-flow and per-class counters with a memory bound (docs/pipeline.md, "Flow and class
//! counters"), in tc's vocabulary: packets and bytes offered and sent, dropped by reason,
//! overlimits (a packet held back by its rate), backlog (offered - sent - dropped).
//!
//! Flows are counted exactly in a table of up to `exact` flows, in the order they are first
//! seen. Past it, every flow's packets go to one aggregate row, [`FlowIndex::OTHER`], and the
//! heaviest of those flows by offered bytes are found by Filtered Space-Saving (Homem and
//! Carvalho, "Finding top-k elements in data streams", Information Sciences 180(24), 2010;
//! Space-Saving is Metwally, Agrawal and El Abbadi, ICDT 2005), weighted by bytes: a list of
//! `heavy` flows with their counts, and a filter of `4 x heavy` counters by hash that holds the
//! bytes of the flows not in the list. A flow enters the list, taking the place of its smallest
//! entry, when its filter counter exceeds that entry's count. An entry's count is at least its
//! flow's offered bytes and at most `error` more; every flow whose offered bytes exceed the
//! list's smallest count is in the list. Memory is bounded by `exact` and `heavy`, whatever
//! the number of flows ([`FlowIndex::memory_bytes`]).
//!
//! The table is in two parts so that a driver can keep them on two threads: [`FlowIndex`]
//! gives each packet its row from the arrival stream alone (the simulator makes it ahead of
//! the pipeline), and [`Counts`] per row (and per class) are kept where the packets' fates are
//! decided.

use crate::error::Error;
use crate::flow::FlowKey;
use crate::pipeline::hashslots::HashSlots;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Flows counted exactly by default: 4,096 rows of counters (about 100 B each with their
/// index entry) stay in a core's cache beside the pipeline's state.
pub const DEFAULT_FLOWS: u32 = 4096;
/// Heavy flows past the exact table by default: none, because the sketch costs every packet
/// past the table a hash, two lookups and a counter (about 7% of router-100g's wall time with
/// 1e6 flows, docs/PERFORMANCE.md); `heavy_flows = 1024` turns it on.
pub const DEFAULT_HEAVY: u32 = 0;

/// The flow and class counters' memory bound (`[stats]`, docs/pipeline.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatsParams {
    /// Flows counted exactly (the first seen).
    pub flows: u32,
    /// Heaviest flows past the exact table found by the sketch.
    pub heavy_flows: u32,
}

impl Default for StatsParams {
    fn default() -> Self {
        StatsParams { flows: DEFAULT_FLOWS, heavy_flows: DEFAULT_HEAVY }
    }
}

/// The maps' keys are a flow's 64-bit foldhash, computed once per packet ([`FlowIndex::row`]);
/// this hasher passes it through. Two flows whose hashes collide (about 3e-8 for 1e6 flows)
/// are told apart by their keys, which the rows and entries keep: the later one is counted
/// with the flows past the table, or (in the sketch) not at all.
#[derive(Default)]
struct Premixed(u64);

impl Hasher for Premixed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only u64 keys are hashed here; anything else is folded in, to stay correct.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
}

type ByHash = HashMap<u64, u32, BuildHasherDefault<Premixed>>;

/// What one row counts; `R` drop reasons, in the driver's order of their names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts<const R: usize> {
    pub offered_packets: u64,
    pub offered_bytes: u64,
    pub sent_packets: u64,
    pub sent_bytes: u64,
    pub dropped: [u64; R],
    pub dropped_bytes: u64,
    /// Times a packet was held back by its rate (tc's overlimits).
    pub overlimits: u64,
    /// Delay of the packets sent (arrival to departure), ns: sum and largest.
    pub delay_sum_ns: u64,
    pub delay_max_ns: u64,
}

impl<const R: usize> Default for Counts<R> {
    fn default() -> Self {
        Counts {
            offered_packets: 0,
            offered_bytes: 0,
            sent_packets: 0,
            sent_bytes: 0,
            dropped: [0; R],
            dropped_bytes: 0,
            overlimits: 0,
            delay_sum_ns: 0,
            delay_max_ns: 0,
        }
    }
}

impl<const R: usize> Counts<R> {
    #[inline]
    pub fn offer(&mut self, len: u32) {
        self.offered_packets += 1;
        self.offered_bytes += len as u64;
    }
    #[inline]
    pub fn send(&mut self, len: u32, delay_ns: u64) {
        self.sent_packets += 1;
        self.sent_bytes += len as u64;
        self.delay_sum_ns = self.delay_sum_ns.saturating_add(delay_ns);
        self.delay_max_ns = self.delay_max_ns.max(delay_ns);
    }
    /// A packet of `len` bytes dropped for reason `reason`.
    ///
    /// Errors: a reason outside `0..R` (nothing is counted).
    #[inline]
    pub fn drop(&mut self, reason: usize, len: u32) -> Result<(), Error> {
        let d = self.dropped.get_mut(reason).ok_or(Error::UnknownId {
            kind: "drop reason",
            id: reason.min(u32::MAX as usize) as u32,
            count: R,
        })?;
        *d += 1;
        self.dropped_bytes += len as u64;
        Ok(())
    }
    pub fn dropped_packets(&self) -> u64 {
        self.dropped.iter().sum()
    }
    /// Packets offered and neither sent nor dropped (still held).
    pub fn backlog_packets(&self) -> u64 {
        self.offered_packets.saturating_sub(self.sent_packets + self.dropped_packets())
    }
    pub fn backlog_bytes(&self) -> u64 {
        self.offered_bytes.saturating_sub(self.sent_bytes + self.dropped_bytes)
    }
    /// Mean delay of the packets sent, ns (0 with none).
    pub fn delay_mean_ns(&self) -> f64 {
        if self.sent_packets == 0 {
            0.0
        } else {
            self.delay_sum_ns as f64 / self.sent_packets as f64
        }
    }
    /// Adds `o`'s counts to these.
    pub fn add(&mut self, o: &Self) {
        self.offered_packets += o.offered_packets;
        self.offered_bytes += o.offered_bytes;
        self.sent_packets += o.sent_packets;
        self.sent_bytes += o.sent_bytes;
        for (a, b) in self.dropped.iter_mut().zip(o.dropped) {
            *a += b;
        }
        self.dropped_bytes += o.dropped_bytes;
        self.overlimits += o.overlimits;
        self.delay_sum_ns = self.delay_sum_ns.saturating_add(o.delay_sum_ns);
        self.delay_max_ns = self.delay_max_ns.max(o.delay_max_ns);
    }
}

/// Flows to rows: an exact table of up to `exact` flows, then [`FlowIndex::OTHER`] with a
/// Filtered Space-Saving sketch of the heaviest flows past the table. See the module
/// documentation.
pub struct FlowIndex {
    exact: usize,
    /// A row by its flow's hash.
    map: HashSlots,
    /// Per row: the flow and its class.
    rows: Vec<(FlowKey, u32)>,
    heavy: HeavyHitters,
}

/// One heavy flow past the exact table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heavy {
    pub key: FlowKey,
    pub class: u32,
    /// Offered bytes counted for the flow: at least its true offered bytes, at most `error`
    /// more.
    pub bytes: u64,
    /// Packets counted since the flow took its entry (a lower bound of its offered packets).
    pub packets: u64,
    pub error: u64,
}

impl FlowIndex {
    /// The row of every flow past the exact table.
    pub const OTHER: u32 = u32::MAX;

    /// Up to `exact` flows counted exactly, then the `heavy` heaviest of the rest (either may
    /// be 0).
    pub fn new(exact: usize, heavy: usize) -> Self {
        let exact = exact.min(u32::MAX as usize - 1);
        FlowIndex { exact, map: HashSlots::new(exact), rows: Vec::new(), heavy: HeavyHitters::new(heavy) }
    }

    /// The row of a packet of `len` bytes of flow `key` in class `class`, first seen now or
    /// before: its exact row, or [`Self::OTHER`] (the packet then counts in the sketch).
    #[inline]
    pub fn row(&mut self, key: &FlowKey, class: u32, len: u32) -> u32 {
        self.row_hashed(self.hash(key), key, class, len)
    }

    /// The hash [`Self::row_hashed`], [`Self::find_hashed`] and [`Self::prefetch`] take:
    /// [`super::flow_hash`].
    #[inline]
    pub fn hash(&self, key: &FlowKey) -> u64 {
        super::flow_hash(key)
    }

    /// [`Self::row`] of a key whose [`Self::hash`] is `h`.
    #[inline]
    pub fn row_hashed(&mut self, h: u64, key: &FlowKey, class: u32, len: u32) -> u32 {
        match self.map.peek(h) {
            Some(r) if self.rows[r as usize].0 == *key => return r,
            Some(_) => {}
            None if self.rows.len() < self.exact => {
                let r = self.rows.len() as u32;
                self.map.insert(h, r);
                self.rows.push((*key, class));
                return r;
            }
            None => {}
        }
        self.heavy.add(key, h, class, len);
        Self::OTHER
    }

    /// The row of flow `key` without counting a packet: its exact row, or [`Self::OTHER`]
    /// (for a packet already counted by [`Self::row`], met again where its key is all a
    /// driver has, such as a frame leaving a queue several flows share).
    pub fn find(&self, key: &FlowKey) -> u32 {
        self.find_hashed(self.hash(key), key)
    }

    /// [`Self::find`] of a key whose [`Self::hash`] is `h`.
    #[inline]
    pub fn find_hashed(&self, h: u64, key: &FlowKey) -> u32 {
        match self.map.peek(h) {
            Some(r) if self.rows[r as usize].0 == *key => r,
            _ => Self::OTHER,
        }
    }

    /// A hint: a packet of the flow whose [`Self::hash`] is `h` comes soon, so its index slot
    /// is loaded now (no effect on results).
    #[inline]
    pub fn prefetch(&self, h: u64) {
        self.map.prefetch(h);
    }

    /// The row the index slot of hash `h` names, without checking its key: a guess for
    /// prefetch hints (its slot loaded by [`Self::prefetch`] some work before), [`Self::OTHER`]
    /// for none. [`Self::row_hashed`] says which row a packet really has.
    #[inline]
    pub fn peek(&self, h: u64) -> u32 {
        self.map.peek(h).unwrap_or(Self::OTHER)
    }

    /// A hint: `row` (an exact row) is looked at soon, so its key is loaded now.
    #[inline]
    pub fn prefetch_row(&self, row: u32) {
        crate::hint::prefetch_whole(&self.rows, row as usize);
    }

    /// Flows in the exact table, by row.
    pub fn rows(&self) -> &[(FlowKey, u32)] {
        &self.rows
    }

    /// The sketch's flows, heaviest first (ties by key order, so the list is deterministic).
    pub fn heavy(&self) -> Vec<Heavy> {
        self.heavy.sorted()
    }

    /// Upper estimate of the memory the index can ever hold, bytes: the exact table's map
    /// entries and rows and the sketch's entries, at their capacity.
    pub fn memory_bytes(&self) -> u64 {
        Self::bound_bytes(self.exact, self.heavy.k)
    }

    /// [`Self::memory_bytes`] of an index of `exact` rows and `heavy` sketch entries.
    pub fn bound_bytes(exact: usize, heavy: usize) -> u64 {
        let key = std::mem::size_of::<FlowKey>() as u64;
        // The index's slots: (hash, row) padded to 16 B, twice the rows rounded up to a power
        // of two.
        let map = 16 * HashSlots::max_slots(exact) as u64;
        let rows = (key + 4) * exact as u64;
        map + rows + HeavyHitters::bound_bytes(heavy)
    }
}

/// Weighted Filtered Space-Saving over offered bytes, with an indexed min-heap of its entries.
struct HeavyHitters {
    k: usize,
    entries: Vec<Heavy>,
    /// Per entry its flow's hash (the key of `index`).
    hashes: Vec<u64>,
    index: ByHash,
    /// Entry ids, a min-heap by (bytes, id).
    heap: Vec<u32>,
    /// Filtered Space-Saving's filter: bytes of flows not in the list, by hash, and the
    /// counts of flows that left the list (4 counters per entry).
    filter: Vec<u64>,
    /// Per entry its place in `heap`.
    pos: Vec<u32>,
}

impl HeavyHitters {
    fn new(k: usize) -> Self {
        let k = k.min(u32::MAX as usize);
        HeavyHitters {
            k,
            entries: Vec::new(),
            hashes: Vec::new(),
            index: ByHash::default(),
            heap: Vec::new(),
            pos: Vec::new(),
            filter: vec![0; 4 * k],
        }
    }

    fn less(&self, a: u32, b: u32) -> bool {
        (self.entries[a as usize].bytes, a) < (self.entries[b as usize].bytes, b)
    }

    /// A packet of `len` bytes of flow `key`, whose hash is `h`.
    fn add(&mut self, key: &FlowKey, h: u64, class: u32, len: u32) {
        if self.k == 0 {
            return;
        }
        let len = len as u64;
        if let Some(&i) = self.index.get(&h) {
            let e = &mut self.entries[i as usize];
            if e.key != *key {
                return; // another flow of the same hash holds the entry
            }
            e.bytes += len;
            e.packets += 1;
            self.down(self.pos[i as usize] as usize);
            return;
        }
        if self.entries.len() < self.k {
            let i = self.entries.len() as u32;
            self.entries.push(Heavy { key: *key, class, bytes: len, packets: 1, error: 0 });
            self.hashes.push(h);
            self.index.insert(h, i);
            self.heap.push(i);
            self.pos.push(i);
            self.up(self.heap.len() - 1);
            return;
        }
        // Not in the list: its bytes go to its filter counter, which bounds every unlisted
        // flow's bytes of that hash from above; it enters only when that exceeds the list's
        // smallest count, taking its place, with the counter as its error.
        let m = self.filter.len() as u64;
        let f = (h % m) as usize;
        let before = self.filter[f];
        self.filter[f] += len;
        let i = self.heap[0];
        if self.filter[f] <= self.entries[i as usize].bytes {
            return;
        }
        let out_hash = self.hashes[i as usize];
        self.index.remove(&out_hash);
        let e = &mut self.entries[i as usize];
        // The flow that leaves keeps its count in its own filter counter (an upper bound of
        // its bytes from now on, as for every unlisted flow).
        let g = (out_hash % m) as usize;
        self.filter[g] = self.filter[g].max(e.bytes);
        *e = Heavy { key: *key, class, bytes: before + len, packets: 1, error: before };
        self.hashes[i as usize] = h;
        self.index.insert(h, i);
        self.down(0);
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.pos[self.heap[a] as usize] = a as u32;
        self.pos[self.heap[b] as usize] = b as u32;
    }

    fn up(&mut self, mut i: usize) {
        while i > 0 {
            let p = (i - 1) / 2;
            if !self.less(self.heap[i], self.heap[p]) {
                break;
            }
            self.swap(i, p);
            i = p;
        }
    }

    fn down(&mut self, mut i: usize) {
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < self.heap.len() && self.less(self.heap[l], self.heap[m]) {
                m = l;
            }
            if r < self.heap.len() && self.less(self.heap[r], self.heap[m]) {
                m = r;
            }
            if m == i {
                break;
            }
            self.swap(i, m);
            i = m;
        }
    }

    fn sorted(&self) -> Vec<Heavy> {
        let mut v = self.entries.clone();
        v.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.key.cmp(&b.key)));
        v
    }

    fn bound_bytes(k: usize) -> u64 {
        // The entry, its hash, heap slot and position, 4 filter counters; a map entry (hash,
        // id) plus its control byte, at most twice over for the load factor.
        let entry = std::mem::size_of::<Heavy>() as u64 + 8 + 8 + 4 * 8;
        let map = 2 * (8 + 4 + 4 + 1);
        (entry + map) * k as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    fn key(i: u32, port: u16) -> FlowKey {
        FlowKey::new(
            IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i)),
            IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
            17,
            port,
            53,
        )
    }

    /// The first `exact` flows get rows in the order they are first seen; later flows share
    /// OTHER; the counts add up with the backlog.
    #[test]
    fn exact_rows_then_other() {
        let mut ix = FlowIndex::new(2, 4);
        assert_eq!(ix.row(&key(1, 1), 0, 100), 0);
        assert_eq!(ix.row(&key(2, 1), 1, 100), 1);
        assert_eq!(ix.row(&key(1, 1), 0, 100), 0);
        assert_eq!(ix.row(&key(3, 1), 0, 100), FlowIndex::OTHER);
        assert_eq!(ix.rows().iter().map(|r| r.1).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(ix.heavy().len(), 1);
        // find: the same rows, and nothing counted.
        assert_eq!(
            (ix.find(&key(2, 1)), ix.find(&key(3, 1)), ix.find(&key(9, 1))),
            (1, FlowIndex::OTHER, FlowIndex::OTHER)
        );
        assert_eq!(ix.heavy()[0].packets, 1);
        let mut c = Counts::<2>::default();
        for len in [100, 200, 300] {
            c.offer(len);
        }
        c.send(100, 5_000);
        c.drop(1, 200).unwrap();
        assert!(matches!(c.drop(7, 1), Err(Error::UnknownId { kind: "drop reason", id: 7, count: 2 })));
        assert_eq!((c.backlog_packets(), c.backlog_bytes(), c.dropped_packets()), (1, 300, 1));
        assert_eq!((c.delay_mean_ns(), c.delay_max_ns), (5_000.0, 5_000));
    }

    /// A million flows through a table of 4,096 exact rows and a sketch of 256: the memory
    /// the index holds stays within its stated bound, every flow heavier than the sketch's
    /// error bound is found, and every entry's count is within its error of the truth.
    #[test]
    fn a_million_flows_stay_within_the_bound() {
        let (exact, k) = (4_096, 256);
        let mut ix = FlowIndex::new(exact, k);
        let bound = ix.memory_bytes();
        let mut truth: HashMap<FlowKey, u64> = HashMap::new();
        let mut other = 0u64;
        let mut offer = |ix: &mut FlowIndex, f: FlowKey, len: u32| {
            if ix.row(&f, 0, len) == FlowIndex::OTHER {
                *truth.entry(f).or_default() += len as u64;
                other += len as u64;
            }
        };
        for i in 0..1_000_000u32 {
            offer(&mut ix, key(i, 1), 100);
            if i % 1000 == 999 && i > 10_000 {
                // Past the exact table, ten heavy flows take turns: ten 1500 B packets a turn.
                let h = key(i / 1000 % 10, 9);
                for _ in 0..10 {
                    offer(&mut ix, h, 1500);
                }
            }
        }
        assert_eq!(ix.rows().len(), exact);
        assert!(ix.map.len() <= exact && ix.heavy.entries.len() <= k && ix.heavy.index.len() <= k);
        assert_eq!(ix.memory_bytes(), bound, "the bound does not depend on the flows seen");
        // What the structures hold, at most the bound.
        let held = (ix.map.capacity() * 16
            + ix.rows.capacity() * std::mem::size_of::<(FlowKey, u32)>()
            + ix.heavy.entries.capacity() * std::mem::size_of::<Heavy>()
            + ix.heavy.hashes.capacity() * 8
            + ix.heavy.index.capacity() * (16 + 1)
            + (ix.heavy.heap.capacity() + ix.heavy.pos.capacity()) * 4
            + ix.heavy.filter.capacity() * 8) as u64;
        assert!(held <= bound, "{held} B held, bound {bound} B");
        let heavy = ix.heavy();
        let limit = other / k as u64;
        for h in &heavy {
            let t = truth[&h.key];
            assert!(h.bytes >= t && h.bytes - h.error <= t, "{h:?}: true {t}");
            assert!(h.error <= limit, "{h:?}: error above {limit}");
        }
        for j in 0..10 {
            let t = truth[&key(j, 9)];
            assert!(t > limit);
            assert!(heavy[..10].iter().any(|h| h.key == key(j, 9)), "heavy flow {j} ({t} B) not in the top 10");
        }
    }
}
