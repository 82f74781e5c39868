//! What an annotated call carries: the size of the future an annotated `async fn` returns, against
//! the same function without the attribute, and the size of `fusebox::Error`. The bounds hold in
//! debug and release builds (`cargo run --release -p fusebox-bench --example future_sizes` prints
//! the release figures of BENCHMARKS.md).

use fusebox::{Cause, Registry, circuit_breaker};

static REGISTRY: Registry = Registry::new();

/// The README's pattern: the function's error wraps `fusebox::Error`.
#[derive(Debug)]
enum ApiError {
    Timeout,
    Refused(#[allow(dead_code)] fusebox::Error),
}

impl From<fusebox::Error> for ApiError {
    fn from(error: fusebox::Error) -> Self {
        ApiError::Refused(error)
    }
}

/// The one inner future every body awaits.
async fn backend(n: u64) -> Result<u64, ApiError> {
    tokio::task::yield_now().await;
    if n == 0 {
        Err(ApiError::Timeout)
    } else {
        Ok(n)
    }
}

async fn bare(n: u64) -> Result<u64, ApiError> {
    backend(n).await
}

#[circuit_breaker(key = "sizes.annotated", registry = REGISTRY)]
async fn annotated(n: u64) -> Result<u64, ApiError> {
    backend(n).await
}

async fn fallback(n: u64, _cause: Cause<ApiError>) -> Result<u64, ApiError> {
    Ok(n)
}

#[circuit_breaker(key = "sizes.fallback", registry = REGISTRY, fallback = fallback)]
async fn with_fallback(n: u64) -> Result<u64, ApiError> {
    backend(n).await
}

#[circuit_breaker(key = "sizes.timeout", registry = REGISTRY, timeout = "1s")]
async fn with_timeout(n: u64) -> Result<u64, ApiError> {
    backend(n).await
}

#[circuit_breaker(key = "sizes.retry", registry = REGISTRY, retry = 3)]
async fn with_retry(n: u64) -> Result<u64, ApiError> {
    backend(n).await
}

#[test]
fn an_error_is_three_words() {
    assert_eq!(size_of::<fusebox::Error>(), 3 * size_of::<usize>());
}

/// Measured at 56 B bare, 104 B annotated, 144 B with a fallback, 216 B with `timeout` (the
/// annotated future and the timer) and 280 B with `retry`, in debug and release (rustc 1.95).
/// With the `redis` feature an `async fn` may await a shared registry's store: 112 B annotated and
/// 208 B with a fallback (release).
#[test]
fn annotated_futures_stay_within_their_bounds() {
    let bare = size_of_val(&bare(1));
    let annotated = size_of_val(&annotated(1));
    let timer = size_of::<tokio::time::Sleep>();
    // The permit (four words) and the moved copy of the parameters beside the body's future;
    // with `redis`, the admission and the report that may await the store add their own states.
    let (over_annotated, over_fallback) = if cfg!(feature = "redis") {
        (56, 152)
    } else {
        (48, 88)
    };
    assert!(
        annotated <= bare + over_annotated,
        "annotated: {annotated} B, bare: {bare} B"
    );
    let with_fallback = size_of_val(&with_fallback(1));
    assert!(
        with_fallback <= bare + over_fallback,
        "with a fallback: {with_fallback} B, bare: {bare} B"
    );
    // `timeout` without `retry` adds the timer and nothing else.
    let with_timeout = size_of_val(&with_timeout(1));
    assert!(
        with_timeout <= annotated + timer,
        "with `timeout`: {with_timeout} B, annotated: {annotated} B, timer: {timer} B"
    );
    let with_retry = size_of_val(&with_retry(1));
    assert!(
        with_retry <= annotated + timer + 64,
        "with `retry`: {with_retry} B, annotated: {annotated} B, timer: {timer} B"
    );
}
