//! Measurement helpers of fusebox's benchmarks and allocation tests: a counting global allocator
//! and the operating system's thread count. The tests beside it hold fusebox to two promises: the
//! closed and open paths allocate nothing (`tests/zero_alloc.rs`), and a breaker starts no thread
//! (`tests/threads.rs`).
//!
//! Install the allocator in a binary or test crate with
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: fusebox_measure::CountingAlloc = fusebox_measure::CountingAlloc;
//! ```
//!
//! then read [`thread_allocations`] around the code under test (per thread, so tests running in
//! parallel do not disturb each other) or [`live_bytes`] for the process-wide heap in use.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A global allocator that forwards to [`System`] and counts what passes through it.
///
/// It counts allocation calls (including reallocations) per thread and heap bytes in use for the
/// whole process.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAlloc;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static THREAD_ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count_allocation() {
    // `try_with`: the allocator may run while this thread's locals are being torn down.
    let _ = THREAD_ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the counters
// are plain atomics and a const-initialised thread-local `Cell`, neither of which allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_allocation();
        // SAFETY: forwarded from the caller, who upholds `GlobalAlloc::alloc`'s contract.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_allocation();
        // SAFETY: as for `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (every allocation goes through us).
        unsafe { System.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_allocation();
        // SAFETY: as for `dealloc`; `new_size` is forwarded unchanged.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
            LIVE_BYTES.fetch_add(new_size, Ordering::Relaxed);
        }
        new
    }
}

/// Allocation calls (allocations and reallocations) made so far by the current thread.
///
/// Only meaningful when [`CountingAlloc`] is the global allocator.
pub fn thread_allocations() -> u64 {
    THREAD_ALLOCATIONS.try_with(Cell::get).unwrap_or(0)
}

/// Heap bytes in use by the whole process (allocated and not yet freed).
///
/// Only meaningful when [`CountingAlloc`] is the global allocator.
pub fn live_bytes() -> usize {
    LIVE_BYTES.load(Ordering::Relaxed)
}

/// The number of OS threads of this process, from the `Threads:` line of `/proc/self/status`.
///
/// `None` where `/proc` is not available (outside Linux).
#[must_use]
pub fn os_threads() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
}
