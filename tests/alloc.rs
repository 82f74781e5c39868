//! The closed and open paths of an annotated function allocate nothing.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use common::ApiError;
use fusebox::circuit_breaker;

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwards the caller's layout to the system allocator unchanged.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[circuit_breaker(key = "alloc", window = 10, min_calls = 10, open_for = "1h", failure = [Timeout])]
async fn call(fail: bool) -> Result<u64, ApiError> {
    if fail { Err(ApiError::Timeout) } else { Ok(1) }
}

fn poll_once<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("ready future"),
    }
}

fn allocations_during(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    f();
    ALLOCATIONS.load(Ordering::SeqCst) - before
}

#[test]
fn closed_and_open_paths_allocate_nothing() {
    // First call resolves and caches the breaker (that one allocates, once).
    assert_eq!(poll_once(call(false)).unwrap(), 1);
    let closed = allocations_during(|| {
        for _ in 0..10_000 {
            assert_eq!(poll_once(call(false)).unwrap(), 1);
        }
    });
    assert_eq!(closed, 0, "closed path allocated");
    for _ in 0..10 {
        let _ = poll_once(call(true));
    }
    assert_eq!(
        fusebox::registry().get("alloc").unwrap().state(),
        fusebox::State::Open
    );
    let open = allocations_during(|| {
        for _ in 0..10_000 {
            let err = poll_once(call(false)).unwrap_err();
            assert!(err.refusal().is_some());
        }
    });
    assert_eq!(open, 0, "rejection path allocated");
}
