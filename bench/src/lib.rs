//! Measurement helpers shared by the fusebox benchmarks, the footprint report and the allocation
//! tests: a counting global allocator, the operating system's thread count, and (feature
//! `redis`) a `redis-server` of the benchmark's own.
//!
//! Install the allocator in a binary or test crate with
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: fusebox_bench::CountingAlloc = fusebox_bench::CountingAlloc;
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

/// The error of the benchmarks' annotated functions: the inner `u64` error, or a rejected call
/// (`#[circuit_breaker]` without a fallback needs `From<fusebox::Error>`).
#[derive(Debug)]
pub enum BenchError {
    /// The inner work failed.
    Inner(u64),
    /// The breaker rejected the call.
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for BenchError {
    fn from(e: fusebox::Error) -> Self {
        BenchError::Rejected(e)
    }
}

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BenchError::Inner(code) => write!(f, "inner work failed with {code}"),
            BenchError::Rejected(e) => write!(f, "{e}"),
        }
    }
}

/// `REDIS_URL`, or a `redis-server` of the benchmark's own on a free loopback port (persistence
/// off), killed when the returned [`RedisServer`] is dropped.
///
/// # Panics
///
/// When `redis-server` cannot be started or does not accept connections within ten seconds.
#[cfg(feature = "redis")]
#[must_use]
pub fn redis_server() -> (String, Option<RedisServer>) {
    use std::time::{Duration, Instant};
    if let Ok(url) = std::env::var("REDIS_URL") {
        return (url, None);
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port();
    let child = std::process::Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("`redis-server` (install it with `apt-get install -y redis-server`, or set `REDIS_URL`)");
    let server = RedisServer(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (format!("redis://127.0.0.1:{port}/"), Some(server))
}

/// A `redis-server` started by [`redis_server`]; killed on drop.
#[cfg(feature = "redis")]
#[derive(Debug)]
pub struct RedisServer(std::process::Child);

#[cfg(feature = "redis")]
impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Polls `fut` once with a no-op waker (no runtime), for benchmarked futures that are ready at
/// once; panics when one is not.
#[inline(always)]
pub fn poll_once<F: std::future::Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(out) => out,
        std::task::Poll::Pending => unreachable!("the benchmarked futures are ready at once"),
    }
}
