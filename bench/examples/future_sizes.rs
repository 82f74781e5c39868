//! Prints the size of the future an `async fn` returns, bare and under `#[circuit_breaker]` with
//! each kind of argument, and the size of `fusebox::Error`: the table of BENCHMARKS.md.
//!
//! Run: `cargo run --release -p fusebox-bench --example future_sizes` (sizes depend on the
//! optimisation level: the suite's `tests/sizes.rs` asserts bounds that hold in both).

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

#[circuit_breaker(
    key = "sizes.all",
    registry = REGISTRY,
    timeout = "1s",
    retry = 3,
    fallback = fallback
)]
async fn with_all(n: u64) -> Result<u64, ApiError> {
    backend(n).await
}

fn main() {
    let bare = size_of_val(&bare(1));
    let row = |name: &str, size: usize| println!("| {name} | {size} B | +{} B |", size - bare);
    println!("| function | future size | over bare |");
    println!("|---|---:|---:|");
    println!("| bare `async fn` | {bare} B | |");
    row("annotated", size_of_val(&annotated(1)));
    row("with `fallback`", size_of_val(&with_fallback(1)));
    row("with `timeout`", size_of_val(&with_timeout(1)));
    row("with `retry`", size_of_val(&with_retry(1)));
    row(
        "with `timeout`, `retry` and `fallback`",
        size_of_val(&with_all(1)),
    );
    println!(
        "\n`tokio::time::Sleep`: {} B; `fusebox::Error`: {} B; `Result<u64, ApiError>`: {} B",
        size_of::<tokio::time::Sleep>(),
        size_of::<fusebox::Error>(),
        size_of::<Result<u64, ApiError>>()
    );
}
