//! A set-associative data-cache model with LRU replacement, write-back, and a locked region
//! (kim section 3.1.3 and Tables VI-VII: 32 KB, 2-way, 64 B lines, the first L bytes of the
//! heap array locked; also the `dc` subsystem of qcache).
//!
//! Addresses are byte addresses. Line `a / line_bytes` maps to set `line mod sets`. Lines below
//! `locked_bytes / line_bytes` are **locked**: always present (every access hits) and each
//! occupies one way of its set, so a set holding `k` locked lines has `ways − k` ways left for
//! everything else (way locking, as in the cache-locking literature the paper cites). A set whose
//! ways are all locked caches nothing else: unlocked lines mapping to it always miss.
//!
//! The model counts hits, misses and write-backs; it keeps tags only (no data).

/// Geometry or locking that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    #[error("cache geometry: {0}")]
    Geometry(&'static str),
    #[error("locked region of {locked} B is larger than the cache ({size} B)")]
    LockedTooLarge { locked: u64, size: u64 },
}

/// Access counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub accesses: u64,
    /// Hits, locked lines included.
    pub hits: u64,
    pub locked_hits: u64,
    pub misses: u64,
    /// Dirty lines evicted.
    pub writebacks: u64,
}

impl CacheStats {
    pub fn miss_rate(&self) -> f64 {
        if self.accesses == 0 {
            0.0
        } else {
            self.misses as f64 / self.accesses as f64
        }
    }
}

const EMPTY: u64 = u64::MAX;

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct SetAssocCache {
    sets: usize,
    ways: usize,
    line_shift: u32,
    locked_lines: u64,
    /// Per set: ways taken by locked lines.
    locked_in_set: Vec<u8>,
    /// `sets × ways` line numbers (`EMPTY` when invalid).
    tags: Vec<u64>,
    /// Last-use stamps for LRU.
    used: Vec<u64>,
    dirty: Vec<bool>,
    clock: u64,
    stats: CacheStats,
}

impl SetAssocCache {
    /// A cache of `size_bytes` with `ways`-way sets of `line_bytes` lines (powers of two), whose
    /// first `locked_bytes` of address space are locked.
    pub fn new(size_bytes: u64, ways: usize, line_bytes: u64, locked_bytes: u64) -> Result<Self, CacheError> {
        if !line_bytes.is_power_of_two() || ways == 0 || ways > 255 {
            return Err(CacheError::Geometry("line size must be a power of two and ways 1..=255"));
        }
        let lines = size_bytes / line_bytes;
        if lines == 0 || !lines.is_multiple_of(ways as u64) || !size_bytes.is_multiple_of(line_bytes) {
            return Err(CacheError::Geometry("size must be a whole number of sets of `ways` lines"));
        }
        if locked_bytes > size_bytes {
            return Err(CacheError::LockedTooLarge { locked: locked_bytes, size: size_bytes });
        }
        let sets = (lines / ways as u64) as usize;
        let locked_lines = locked_bytes.div_ceil(line_bytes);
        let mut locked_in_set = vec![0u8; sets];
        for l in 0..locked_lines {
            locked_in_set[(l % sets as u64) as usize] += 1;
        }
        Ok(SetAssocCache {
            sets,
            ways,
            line_shift: line_bytes.trailing_zeros(),
            locked_lines,
            locked_in_set,
            tags: vec![EMPTY; sets * ways],
            used: vec![0; sets * ways],
            dirty: vec![false; sets * ways],
            clock: 0,
            stats: CacheStats::default(),
        })
    }

    pub fn stats(&self) -> &CacheStats {
        &self.stats
    }

    /// One access to byte address `addr`; returns whether it hit. A miss allocates the line
    /// (write-allocate), evicting the least recently used unlocked way.
    #[inline]
    pub fn access(&mut self, addr: u64, write: bool) -> bool {
        self.stats.accesses += 1;
        let line = addr >> self.line_shift;
        if line < self.locked_lines {
            self.stats.hits += 1;
            self.stats.locked_hits += 1;
            return true;
        }
        self.clock += 1;
        let set = (line % self.sets as u64) as usize;
        let first = set * self.ways + self.locked_in_set[set] as usize;
        let end = (set + 1) * self.ways;
        if first == end {
            self.stats.misses += 1;
            return false;
        }
        let mut victim = first;
        for w in first..end {
            if self.tags[w] == line {
                self.stats.hits += 1;
                self.used[w] = self.clock;
                self.dirty[w] |= write;
                return true;
            }
            if self.used[w] < self.used[victim] {
                victim = w;
            }
        }
        self.stats.misses += 1;
        if self.tags[victim] != EMPTY && self.dirty[victim] {
            self.stats.writebacks += 1;
        }
        self.tags[victim] = line;
        self.used[victim] = self.clock;
        self.dirty[victim] = write;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_and_locking_errors() {
        assert!(SetAssocCache::new(32 << 10, 2, 64, 0).is_ok());
        assert!(matches!(SetAssocCache::new(32 << 10, 2, 48, 0), Err(CacheError::Geometry(_))));
        assert!(matches!(SetAssocCache::new(100, 2, 64, 0), Err(CacheError::Geometry(_))));
        assert_eq!(
            SetAssocCache::new(1024, 2, 64, 2048).unwrap_err(),
            CacheError::LockedTooLarge { locked: 2048, size: 1024 }
        );
    }

    /// Two-way LRU: a third line in a set evicts the least recently used; write-back only for
    /// dirty victims.
    #[test]
    fn lru_and_writeback() {
        // 4 sets x 2 ways x 16 B.
        let mut c = SetAssocCache::new(128, 2, 16, 0).unwrap();
        let set0 = |k: u64| k * 4 * 16; // lines 0, 4, 8 all map to set 0
        assert!(!c.access(set0(0), true));
        assert!(!c.access(set0(1), false));
        assert!(c.access(set0(0), false)); // line 0 now most recent
        assert!(!c.access(set0(2), false)); // evicts line 4 (clean)
        assert_eq!(c.stats().writebacks, 0);
        assert!(c.access(set0(0) + 15, false), "same line");
        assert!(!c.access(set0(1), false)); // line 0 was used last, so line 8 goes
        assert!(c.access(set0(0), false));
        assert!(!c.access(set0(2), false)); // line 8 was evicted by line 4's return
                                            // Line 0 (dirty) is now LRU and goes next.
        assert!(!c.access(set0(3), false));
        assert_eq!(c.stats().writebacks, 1);
        let s = *c.stats();
        assert_eq!(s.hits + s.misses, s.accesses);
    }

    /// Locked lines always hit and take one way of their set: with one way locked in set 0,
    /// two other lines in set 0 keep evicting each other.
    #[test]
    fn locked_lines_hit_and_take_a_way() {
        let mut c = SetAssocCache::new(128, 2, 16, 16).unwrap(); // line 0 locked (set 0)
        assert!(c.access(0, true) && c.access(8, false));
        assert_eq!(c.stats().locked_hits, 2);
        let (a, b) = (4 * 16, 8 * 16); // lines 4 and 8, set 0
        assert!(!c.access(a, false));
        assert!(c.access(a, false));
        assert!(!c.access(b, false));
        assert!(!c.access(a, false), "set 0 has one free way");
        // Set 1 still has both ways.
        assert!(!c.access(16, false) && !c.access(5 * 16, false) && c.access(16, false));
        // Fully locked cache: everything else misses.
        let mut full = SetAssocCache::new(128, 2, 16, 128).unwrap();
        assert!(full.access(100, false));
        assert!(!full.access(128, false) && !full.access(128, false));
    }

    /// A working set that fits is all hits after the first pass; one that is twice the cache,
    /// streamed in order, is all misses under LRU.
    #[test]
    fn working_set_behaviour() {
        let mut c = SetAssocCache::new(32 << 10, 2, 64, 0).unwrap();
        for pass in 0..3 {
            for a in (0..(32u64 << 10)).step_by(8) {
                let hit = c.access(a, false);
                if pass > 0 {
                    assert!(hit);
                }
            }
        }
        let mut c = SetAssocCache::new(32 << 10, 2, 64, 0).unwrap();
        for _ in 0..3 {
            for a in (0..(64u64 << 10)).step_by(64) {
                assert!(!c.access(a, false));
            }
        }
    }
}
