//! The binary's global allocator: the system allocator, plus a transparent-huge-page hint for
//! large blocks on Linux.
//!
//! Simulations at full scale keep per-queue state in arrays of tens of megabytes (1e6 queues x
//! 64 B of bucket state, the event queue, the arrival processes) and touch them at random: with
//! 4 KiB pages nearly every access is a TLB miss as well as a cache miss. When the kernel's THP
//! mode is `madvise` (the common default), `madvise(MADV_HUGEPAGE)` on blocks of 4 MiB and more
//! lets it back them with 2 MiB pages. The hint changes no result, only speed (measured in
//! docs/PERFORMANCE.md); it is best effort and its failure is ignored.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

pub struct HugePageHint;

/// Cleared by `NPQOS_NO_HUGEPAGES=1` (read in `main` before any large allocation), to measure
/// the hint's effect.
static ENABLED: AtomicBool = AtomicBool::new(true);

pub fn configure_from_env() {
    if std::env::var_os("NPQOS_NO_HUGEPAGES").is_some_and(|v| v == "1") {
        ENABLED.store(false, Ordering::Relaxed);
    }
}

const LARGE: usize = 4 << 20;

#[cfg(target_os = "linux")]
fn hint(ptr: *mut u8, size: usize) {
    if !ENABLED.load(Ordering::Relaxed) {
        return;
    }
    let page = 4096usize;
    let start = (ptr as usize).next_multiple_of(page);
    let end = (ptr as usize + size) & !(page - 1);
    if end > start {
        // SAFETY: the range lies inside a block this allocator just returned; MADV_HUGEPAGE only
        // changes how the kernel backs it, never its contents.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn hint(_: *mut u8, _: usize) {}

// SAFETY: every call is forwarded to `System` unchanged; the hint does not touch the memory.
unsafe impl GlobalAlloc for HugePageHint {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() && layout.size() >= LARGE {
            hint(p, layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() && layout.size() >= LARGE {
            hint(p, layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() && new_size >= LARGE {
            hint(p, new_size);
        }
        p
    }
}
