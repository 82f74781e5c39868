//! fusebox's closed and open paths allocate nothing: the manual permit API and the attribute on
//! async and sync functions, with and without a fallback, checked with a counting allocator.

use std::future::{Future, ready};
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use fusebox::{Cause, Policy, Registry, State};
use fusebox_measure::{CountingAlloc, thread_allocations};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const POLICY: Policy = Policy::new()
    .window(100)
    .failure_rate(50)
    .open_for(Duration::from_secs(60 * 60));

const CALLS: usize = 1_000;

#[derive(Debug)]
enum TestError {
    Inner(u64),
    Rejected(fusebox::Error),
}

impl std::fmt::Display for TestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TestError::Inner(code) => write!(f, "inner work failed with {code}"),
            TestError::Rejected(e) => write!(f, "{e}"),
        }
    }
}

impl From<fusebox::Error> for TestError {
    fn from(e: fusebox::Error) -> Self {
        TestError::Rejected(e)
    }
}

fn poll_once<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => unreachable!("ready at once"),
    }
}

/// The tests of this file run one at a time: run at once, a measured loop allocated five times in
/// about one run in five, with the sizes of a window's first contention (`available_parallelism`
/// reading the cgroup files, then the per-thread counters; `guide::semantics`, "Allocations and memory", allows that once
/// per breaker), though only one thread calls each measured breaker.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Allocation calls made by this thread while `f` runs `CALLS` times.
fn allocations(mut f: impl FnMut()) -> u64 {
    f(); // first call: registration and lazy statics are allowed to allocate
    let before = thread_allocations();
    for _ in 0..CALLS {
        f();
    }
    thread_allocations() - before
}

/// Calls `fail_once` until the global registry's breaker under `key` is open.
fn open_site(key: &str, mut fail_once: impl FnMut()) {
    for _ in 0..1_000 {
        fail_once();
        let snapshot = fusebox::registry()
            .snapshot()
            .into_iter()
            .find(|s| s.key.as_str() == key)
            .expect("registered by its first call");
        if snapshot.state == State::Open {
            return;
        }
    }
    panic!("`{key}` did not open");
}

fn work(fail: bool) -> Result<u64, TestError> {
    if fail {
        Err(TestError::Inner(0))
    } else {
        Ok(1)
    }
}

#[fusebox::circuit_breaker(
    key = "zero-alloc-closed-async",
    window = 100,
    failure_rate = 50,
    open_for = "1h"
)]
async fn closed_async(fail: bool) -> Result<u64, TestError> {
    ready(work(fail)).await
}

#[fusebox::circuit_breaker(
    key = "zero-alloc-closed-sync",
    window = 100,
    failure_rate = 50,
    open_for = "1h"
)]
fn closed_sync(fail: bool) -> Result<u64, TestError> {
    work(fail)
}

#[fusebox::circuit_breaker(
    key = "zero-alloc-open-async",
    window = 100,
    failure_rate = 50,
    open_for = "1h"
)]
async fn open_async(fail: bool) -> Result<u64, TestError> {
    ready(work(fail)).await
}

#[fusebox::circuit_breaker(
    key = "zero-alloc-open-sync",
    window = 100,
    failure_rate = 50,
    open_for = "1h"
)]
fn open_sync(fail: bool) -> Result<u64, TestError> {
    work(fail)
}

#[fusebox::circuit_breaker(key = "zero-alloc-fallback-async", window = 100, failure_rate = 50, open_for = "1h", fallback = zero_async)]
async fn fallback_async(fail: bool) -> Result<u64, TestError> {
    ready(work(fail)).await
}

#[fusebox::circuit_breaker(key = "zero-alloc-fallback-sync", window = 100, failure_rate = 50, open_for = "1h", fallback = zero_sync)]
fn fallback_sync(fail: bool) -> Result<u64, TestError> {
    work(fail)
}

async fn zero_async(_fail: bool, _cause: Cause<TestError>) -> Result<u64, TestError> {
    Ok(0)
}

fn zero_sync(_fail: bool, _cause: Cause<TestError>) -> Result<u64, TestError> {
    Ok(0)
}

#[test]
fn manual_api_closed_and_open_paths_do_not_allocate() {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let registry = Registry::new();
    let closed = registry.breaker("closed", POLICY).unwrap();
    let open_breaker = registry.breaker("open", POLICY).unwrap();
    while open_breaker.state() != State::Open {
        open_breaker.try_acquire().unwrap().failure();
    }

    let n = allocations(|| closed.try_acquire().expect("closed").success());
    assert_eq!(n, 0, "closed path allocated {n} times in {CALLS} calls");
    let n = allocations(|| {
        let rejected = open_breaker.try_acquire().expect_err("open");
        assert_eq!(rejected.reason(), fusebox::Reason::Open);
    });
    assert_eq!(n, 0, "open path allocated {n} times in {CALLS} calls");
}

#[test]
fn attribute_closed_and_open_paths_do_not_allocate() {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let n = allocations(|| assert_eq!(poll_once(closed_async(false)).unwrap(), 1));
    assert_eq!(n, 0, "closed async path allocated {n} times");
    let n = allocations(|| assert_eq!(closed_sync(false).unwrap(), 1));
    assert_eq!(n, 0, "closed sync path allocated {n} times");

    open_site("zero-alloc-open-async", || {
        drop(poll_once(open_async(true)))
    });
    open_site("zero-alloc-open-sync", || drop(open_sync(true)));
    open_site("zero-alloc-fallback-async", || {
        drop(poll_once(fallback_async(true)))
    });
    open_site("zero-alloc-fallback-sync", || drop(fallback_sync(true)));

    let n = allocations(|| {
        assert!(matches!(
            poll_once(open_async(false)),
            Err(TestError::Rejected(_))
        ))
    });
    assert_eq!(n, 0, "open async path allocated {n} times");
    let n = allocations(|| assert!(matches!(open_sync(false), Err(TestError::Rejected(_)))));
    assert_eq!(n, 0, "open sync path allocated {n} times");
    let n = allocations(|| assert_eq!(poll_once(fallback_async(false)).unwrap(), 0));
    assert_eq!(n, 0, "open async path with fallback allocated {n} times");
    let n = allocations(|| assert_eq!(fallback_sync(false).unwrap(), 0));
    assert_eq!(n, 0, "open sync path with fallback allocated {n} times");
}

#[derive(Debug)]
enum ApiError {
    Timeout,
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for ApiError {
    fn from(e: fusebox::Error) -> Self {
        ApiError::Rejected(e)
    }
}

#[fusebox::circuit_breaker(
    key = "zero-alloc-variants",
    window = 10,
    min_calls = 10,
    open_for = "1h",
    failure = [Timeout]
)]
async fn by_variant(fail: bool) -> Result<u64, ApiError> {
    if fail { Err(ApiError::Timeout) } else { Ok(1) }
}

#[test]
fn failure_variant_lists_classify_without_allocating() {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let closed = allocations(|| assert_eq!(poll_once(by_variant(false)).unwrap(), 1));
    assert_eq!(closed, 0, "closed path with `failure = [..]` allocated");
    open_site("zero-alloc-variants", || {
        let _ = poll_once(by_variant(true));
    });
    let open = allocations(|| {
        let rejected = poll_once(by_variant(false)).unwrap_err();
        assert!(
            matches!(&rejected, ApiError::Rejected(e) if e.reason() == fusebox::Reason::Open),
            "{rejected:?}"
        );
    });
    assert_eq!(open, 0, "rejected path with `failure = [..]` allocated");
}
