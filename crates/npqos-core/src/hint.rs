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
