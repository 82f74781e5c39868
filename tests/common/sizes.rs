//! The functions whose futures `tests/attribute/sizes.rs` bounds and `bench/examples/future_sizes.rs`
//! prints: one `async fn` awaiting one inner future, bare and under `#[circuit_breaker]` with each
//! kind of argument.
#![allow(dead_code)] // each includer uses its own subset

use fusebox::{Cause, Registry, circuit_breaker};

pub(crate) static REGISTRY: Registry = Registry::new();

/// The guide's pattern: the function's error wraps `fusebox::Error`.
#[derive(Debug)]
pub(crate) enum ApiError {
    Timeout,
    Rejected(#[allow(dead_code)] fusebox::Error),
}

impl From<fusebox::Error> for ApiError {
    fn from(error: fusebox::Error) -> Self {
        ApiError::Rejected(error)
    }
}

/// The one inner future every body awaits.
pub(crate) async fn backend(n: u64) -> Result<u64, ApiError> {
    tokio::task::yield_now().await;
    if n == 0 {
        Err(ApiError::Timeout)
    } else {
        Ok(n)
    }
}

pub(crate) async fn bare(n: u64) -> Result<u64, ApiError> {
    backend(n).await
}

#[circuit_breaker(key = "sizes.annotated", registry = REGISTRY)]
pub(crate) async fn annotated(n: u64) -> Result<u64, ApiError> {
    backend(n).await
}

pub(crate) async fn fallback(n: u64, _cause: Cause<ApiError>) -> Result<u64, ApiError> {
    Ok(n)
}

#[circuit_breaker(key = "sizes.fallback", registry = REGISTRY, fallback = fallback)]
pub(crate) async fn with_fallback(n: u64) -> Result<u64, ApiError> {
    backend(n).await
}

#[circuit_breaker(key = "sizes.timeout", registry = REGISTRY, timeout = "1s")]
pub(crate) async fn with_timeout(n: u64) -> Result<u64, ApiError> {
    backend(n).await
}

#[circuit_breaker(key = "sizes.retry", registry = REGISTRY, retry = 3)]
pub(crate) async fn with_retry(n: u64) -> Result<u64, ApiError> {
    backend(n).await
}

#[circuit_breaker(
    key = "sizes.all",
    registry = REGISTRY,
    timeout = "1s",
    retry = 3,
    fallback = fallback
)]
pub(crate) async fn with_all(n: u64) -> Result<u64, ApiError> {
    backend(n).await
}

/// A dynamic key (`key = expr`): the future keeps the key's breaker alive across the body's await.
#[circuit_breaker(key = host, registry = REGISTRY)]
pub(crate) async fn dynamic(host: &str, n: u64) -> Result<u64, ApiError> {
    let _ = host;
    backend(n).await
}

/// [`dynamic`] without the attribute: the same parameters.
pub(crate) async fn bare_dynamic(host: &str, n: u64) -> Result<u64, ApiError> {
    let _ = host;
    backend(n).await
}
