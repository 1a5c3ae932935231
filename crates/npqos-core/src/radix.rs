//! The 64-way radix levels that both the shaper's [`crate::shaper::wheel::TimerWheel`] and the
//! simulator's event queue file their entries in.
//!
//! Relative to a base key `B`, a key `k > B` belongs at level `l`, the highest 6-bit digit in
//! which `k` differs from `B`, in slot `s`, its value of that digit (a key equal to `B` goes to
//! level 0, slot `B`'s lowest digit). Every key filed against one base sorts by (level, slot),
//! and moving the base to the smallest key of the first occupied slot (or to that slot's start,
//! [`Levels::slot_start`], which is at or below it) leaves every other slot's
//! keys where they belong, so a user empties that slot, files its entries again against the new
//! base, and each entry moves at most once per level. `L` levels cover `6 L` bits of key.
//! Per level a 64-bit word marks the occupied slots and one 16-bit word the non-empty levels,
//! so the first occupied slot is two `trailing_zeros` away.

/// Slots per level.
pub const SLOTS: usize = 64;
const DIGIT: u32 = 6;

/// `L` levels of 64 slots of `T`, indexed `level * 64 + slot`. See the module documentation.
#[derive(Clone, Debug)]
pub struct Levels<T, const L: usize> {
    slots: Vec<Vec<T>>,
    occupied: [u64; L],
    nonempty: u16,
}

impl<T, const L: usize> Default for Levels<T, L> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, const L: usize> Levels<T, L> {
    pub fn new() -> Self {
        assert!(L <= 16 && L * DIGIT as usize >= 60, "16 levels at most, 60 bits at least");
        Levels { slots: (0..L * SLOTS).map(|_| Vec::new()).collect(), occupied: [0; L], nonempty: 0 }
    }

    /// The slot `key` (at least `base`) belongs in.
    #[inline(always)]
    pub fn index(base: u64, key: u64) -> usize {
        debug_assert!(key >= base);
        let diff = key ^ base;
        let l = if diff == 0 { 0 } else { ((63 - diff.leading_zeros()) / DIGIT) as usize };
        debug_assert!(l < L, "key beyond the levels");
        l * SLOTS + ((key >> (DIGIT * l as u32)) & (SLOTS as u64 - 1)) as usize
    }

    /// Appends `item` to slot `i`.
    /// The earliest key slot `i` can hold when its entries were filed against `base`: `base`'s
    /// digits above the slot's level, the slot's digit at it, zeros below.
    #[inline]
    pub fn slot_start(base: u64, i: usize) -> u64 {
        let (l, s) = ((i / SLOTS) as u32, (i % SLOTS) as u64);
        let above = DIGIT * (l + 1);
        let high = if above >= 64 { 0 } else { (base >> above) << above };
        high | (s << (DIGIT * l))
    }

    #[inline(always)]
    pub fn push(&mut self, i: usize, item: T) {
        self.slots[i].push(item);
        self.occupied[i / SLOTS] |= 1 << (i % SLOTS);
        self.nonempty |= 1 << (i / SLOTS);
    }

    /// The first occupied slot of the lowest non-empty level.
    #[inline]
    pub fn first(&self) -> Option<usize> {
        if self.nonempty == 0 {
            return None;
        }
        let l = self.nonempty.trailing_zeros() as usize;
        Some(l * SLOTS + self.occupied[l].trailing_zeros() as usize)
    }

    /// The entries of slot `i`.
    #[inline]
    pub fn slot(&self, i: usize) -> &[T] {
        &self.slots[i]
    }

    /// Removes the last entry of slot `i` (marking the slot empty when it was the last).
    #[inline]
    pub fn pop(&mut self, i: usize) -> Option<T> {
        let x = self.slots[i].pop();
        if self.slots[i].is_empty() {
            self.vacate(i);
        }
        x
    }

    /// Takes slot `i`'s entries out, marking it empty; hand the vector back with
    /// [`give_back`](Self::give_back) to reuse its allocation.
    #[inline]
    pub fn take(&mut self, i: usize) -> Vec<T> {
        self.vacate(i);
        std::mem::take(&mut self.slots[i])
    }

    /// Returns an emptied vector to slot `i` (still empty) for reuse, if its capacity is at
    /// most `keep` entries (a large one is freed, so memory follows what is filed).
    #[inline]
    pub fn give_back(&mut self, i: usize, mut v: Vec<T>, keep: usize) {
        v.clear();
        if v.capacity() <= keep && self.slots[i].is_empty() {
            self.slots[i] = v;
        }
    }

    /// Keeps only the entries `f` accepts, in every slot.
    pub fn retain(&mut self, mut f: impl FnMut(&T) -> bool) {
        for i in 0..self.slots.len() {
            self.slots[i].retain(&mut f);
            if self.slots[i].is_empty() {
                self.vacate(i);
            }
        }
    }

    /// Every entry, slot by slot.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.slots.iter().flatten()
    }

    /// Checks that the occupancy words match the slots (for tests).
    pub fn check(&self) -> Result<(), String> {
        for (i, v) in self.slots.iter().enumerate() {
            let bit = self.occupied[i / SLOTS] >> (i % SLOTS) & 1 == 1;
            if bit == v.is_empty() {
                return Err(format!("slot {i}: occupancy bit {bit} with {} entries", v.len()));
            }
        }
        for (l, &w) in self.occupied.iter().enumerate() {
            if (self.nonempty >> l & 1 == 1) != (w != 0) {
                return Err(format!("level {l}: level bit wrong"));
            }
        }
        Ok(())
    }

    #[inline(always)]
    fn vacate(&mut self, i: usize) {
        let l = i / SLOTS;
        self.occupied[l] &= !(1 << (i % SLOTS));
        if self.occupied[l] == 0 {
            self.nonempty &= !(1 << l);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slot's start is at or below every key filed in it, and is itself filed in it, for
    /// keys at every level against bases with digits set above, at and below them.
    #[test]
    fn a_slot_start_is_the_least_key_the_slot_holds() {
        type L11 = Levels<u64, 11>;
        for base in [0u64, 1, 63, 64 * 5 + 3, 0x0123_4567_89ab_cdef, u64::MAX - (1 << 40)] {
            for shift in [0u32, 5, 6, 11, 12, 30, 36, 59, 60, 63] {
                for add in [1u64, 7, 1 << shift, (1 << shift) | 1] {
                    let Some(key) = base.checked_add(add) else { continue };
                    let i = L11::index(base, key);
                    let start = L11::slot_start(base, i);
                    assert!(start <= key, "base {base:#x} key {key:#x}: start {start:#x}");
                    assert!(start >= base || i / SLOTS == 0, "base {base:#x} key {key:#x}: start {start:#x}");
                    assert_eq!(L11::index(base, start.max(base)), i, "base {base:#x} key {key:#x}");
                }
            }
        }
        // Level 1, slot 3 against base 0x1234 (digits 0x12 = 4 x 64 + 52): 0x1000 + 3 x 64.
        assert_eq!(L11::slot_start(0x1234, SLOTS + 3), 0x1000 + 3 * 64);
    }
}
