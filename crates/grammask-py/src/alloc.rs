//! The extension's global allocator: mimalloc, with a small arena reservation.
//!
//! mimalloc reserves address space for its arenas 1 GiB at a time by default. Inside a Python
//! process that would add 1 GiB of virtual memory at `import grammask`, enough to make a process
//! under `ulimit -v` that also loads torch fail to start. Before the first allocation we lower
//! the reservation to `ARENA_RESERVE_KIB`; mimalloc reserves more arenas as the heap grows.
//!
//! mimalloc is built with `no_thp` (Cargo feature of `libmimalloc-sys`): it does not madvise its
//! arenas `MADV_HUGEPAGE`. Under THP "madvise" the first touch of each 2 MiB page would otherwise
//! fault in (zero, maybe compact) a whole huge page inside one mask fill: ~4.7 ms each on the
//! benchmark VM, the largest fills of `bench/tail_states.py` (docs/architecture.md). The
//! process-wide THP setting (`prctl`) is left as the host application chose it.
//!
//! Freed memory is not purged (`mi_option_purge_delay` -1): it stays with the extension's heap
//! for its later allocations. mimalloc's default returns it to the OS a delay after it is freed
//! (1 s in mimalloc 3), with `madvise(MADV_DONTNEED)`, in whichever allocation or free of the
//! extension's comes after the delay: in a mask fill after a compiled grammar was dropped, up to
//! ~170 calls in one fill (0.5-9 ms; 31 of the ~67k fills of `bench/tail_states.py`'s sample, 14
//! of its 40 slowest, at places that varied run to run), then page faults when the memory is
//! used again. The cost: the heap's resident memory stays at its high-water mark
//! (docs/benchmarks.md, session 36). An application's `MIMALLOC_PURGE_DELAY` is kept.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, Ordering};

use mimalloc::MiMalloc;

/// `mi_option_arena_reserve` in mimalloc's `mi_option_t` (3.x, as libmimalloc-sys 0.1.49 builds it).
const MI_OPTION_ARENA_RESERVE: libmimalloc_sys::mi_option_t = 23;
/// mimalloc's default for that option (1 GiB, in KiB): checked before we change it, so a
/// different mimalloc version with another option order is left alone rather than misconfigured.
const DEFAULT_ARENA_RESERVE_KIB: std::ffi::c_long = 1 << 20;
/// `mi_option_purge_delay` in the same enum, its default (1 s in mimalloc 3, which
/// libmimalloc-sys builds without its `v2` feature) and ours (never purge).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
const DEFAULT_PURGE_DELAY_MS: std::ffi::c_long = 1000;
const NO_PURGE: std::ffi::c_long = -1;
/// 64 MiB per arena reservation.
pub const ARENA_RESERVE_KIB: std::ffi::c_long = 64 << 10;

static CONFIGURED: AtomicBool = AtomicBool::new(false);

#[inline]
fn configure() {
    if CONFIGURED.load(Ordering::Relaxed) {
        return;
    }
    // SAFETY: mi_option_get/mi_option_set only read and write mimalloc's option table; they do
    // not allocate. Two threads racing here both write the same value.
    unsafe {
        if libmimalloc_sys::mi_option_get(MI_OPTION_ARENA_RESERVE) == DEFAULT_ARENA_RESERVE_KIB {
            libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_RESERVE, ARENA_RESERVE_KIB);
            // The same option order: the purge delay's slot is known too.
            if libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) == DEFAULT_PURGE_DELAY_MS {
                libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, NO_PURGE);
            }
        }
    }
    CONFIGURED.store(true, Ordering::Relaxed);
}

/// mimalloc, configured on first use (see the module doc).
pub struct Allocator;

// SAFETY: every method forwards to `MiMalloc`, a correct `GlobalAlloc`, with the caller's
// arguments unchanged; `configure` has no effect on the memory handed out.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        configure();
        MiMalloc.alloc(layout)
    }
    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        configure();
        MiMalloc.alloc_zeroed(layout)
    }
    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        MiMalloc.dealloc(ptr, layout);
    }
    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        configure();
        MiMalloc.realloc(ptr, layout, new_size)
    }
}
