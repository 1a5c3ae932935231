//! A software prefetch hint, so callers driving millions of queues can overlap the cache
//! misses of the next packets' state with the work on the current one. A hint changes no
//! result: it only asks the CPU to start loading a line.

/// Asks the CPU to bring `s[i]` into its caches; nothing if `i` is out of range or the
/// target has no prefetch instruction.
#[inline(always)]
pub fn prefetch<T>(s: &[T], i: usize) {
    if let Some(x) = s.get(i) {
        // SAFETY: SSE is part of the x86_64 baseline, and a prefetch never faults and writes
        // nothing, whatever the address.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((x as *const T).cast())
        };
        #[cfg(not(target_arch = "x86_64"))]
        let _ = x;
    }
}

/// [`prefetch`] of every cache line `s[i]` touches (a record larger than a line, or one that
/// straddles two).
#[inline(always)]
pub fn prefetch_whole<T>(s: &[T], i: usize) {
    if let Some(x) = s.get(i) {
        let p = (x as *const T).cast::<u8>();
        let end = p.wrapping_add(std::mem::size_of::<T>().max(1) - 1);
        let mut line = p;
        while line <= end {
            // SAFETY: as in `prefetch`: a prefetch never faults and writes nothing.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(line.cast())
            };
            line = line.wrapping_add(64);
        }
        // The last line, when the record's end is in a line the steps skipped.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(end.cast())
        };
    }
}
