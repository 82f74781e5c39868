//! Retry alone versus retry through a circuit breaker, against a backend that times out on every call.
//!
//! 20 requests, each tried up to 3 times. Retry alone sends 60 calls to a backend that is already
//! failing. Through a breaker that opens after 5 failures, the backend sees 5 calls and every later
//! request fails fast with a `fusebox::Error` instead of waiting for a timeout.
//!
//! Run it with `cargo run --example retry_vs_breaker`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// How long the struggling backend takes before the client gives up on a call.
pub(crate) const TIMEOUT: Duration = Duration::from_millis(25);
/// Requests sent by the checkout.
pub(crate) const REQUESTS: u32 = 20;
/// Attempts per request (the first try and two retries).
pub(crate) const ATTEMPTS: u32 = 3;

/// The client's error type.
#[derive(Debug)]
pub(crate) enum BackendError {
    /// The call did not answer within [`TIMEOUT`]: an infrastructure failure.
    Timeout,
    /// The breaker rejected the call without calling the backend.
    Rejected(#[allow(dead_code)] /* shown through `Debug` */ fusebox::Error),
}

impl From<fusebox::Error> for BackendError {
    fn from(e: fusebox::Error) -> Self {
        BackendError::Rejected(e)
    }
}

static BACKEND_CALLS: AtomicU32 = AtomicU32::new(0);

/// The backend: it is down, so every call runs into the client's timeout.
async fn backend() -> Result<u32, BackendError> {
    BACKEND_CALLS.fetch_add(1, Ordering::Relaxed);
    tokio::time::sleep(TIMEOUT).await;
    Err(BackendError::Timeout)
}

/// The same call through a breaker that opens when 5 of its last 5 calls failed, with the
/// retries on the attribute: up to [`ATTEMPTS`] attempts, each one asking the breaker first and
/// counted on its own. Once the circuit is open the next attempt is rejected, and a rejected call is never
/// retried.
#[fusebox::circuit_breaker(key = "backend", window = 5, min_calls = 5, failure_rate = 100, open_for = "30s", retry = 3, failure = [Timeout])]
async fn guarded() -> Result<u32, BackendError> {
    backend().await
}

/// Retry alone: the loop every client writes, calling the backend up to [`ATTEMPTS`] times.
async fn retry_alone() -> Result<u32, BackendError> {
    let mut last = backend().await;
    for _ in 1..ATTEMPTS {
        if last.is_ok() {
            break;
        }
        last = backend().await;
    }
    last
}

/// What one scenario cost.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Report {
    /// Calls that reached the backend.
    pub backend_calls: u32,
    /// Requests that succeeded.
    pub successes: u32,
    /// Requests answered by a `fusebox::Error` (rejected without waiting for the backend).
    pub fast_errors: u32,
    /// Requests that failed with a backend timeout.
    pub timeouts: u32,
    /// Wall time for all requests.
    pub elapsed: Duration,
}

/// Sends the requests one after the other, each tried up to [`ATTEMPTS`] times: by a hand-written
/// retry loop around the bare backend, or by `retry = 3` on the breaker's attribute.
pub(crate) async fn run(with_breaker: bool) -> Report {
    if let Some(breaker) = fusebox::registry().get("backend") {
        breaker.reset();
    }
    BACKEND_CALLS.store(0, Ordering::Relaxed);
    let (mut successes, mut fast_errors, mut timeouts) = (0, 0, 0);
    let start = Instant::now();
    for _ in 0..REQUESTS {
        let result = if with_breaker {
            guarded().await
        } else {
            retry_alone().await
        };
        match result {
            Ok(_) => successes += 1,
            Err(BackendError::Rejected(_)) => fast_errors += 1,
            Err(BackendError::Timeout) => timeouts += 1,
        }
    }
    Report {
        backend_calls: BACKEND_CALLS.load(Ordering::Relaxed),
        successes,
        fast_errors,
        timeouts,
        elapsed: start.elapsed(),
    }
}

/// Renders both reports as a table.
pub(crate) fn table(retry: &Report, breaker: &Report) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{REQUESTS} requests, up to {ATTEMPTS} attempts each, backend timing out after {TIMEOUT:?} on every call\n\n"
    ));
    out.push_str("| scenario              | backend calls | successes | fast fusebox::Error | timed out | total time |\n");
    out.push_str("|-----------------------|---------------|-----------|---------------------|-----------|------------|\n");
    for (name, r) in [("retry alone", retry), ("retry through breaker", breaker)] {
        out.push_str(&format!(
            "| {name:<21} | {:>13} | {:>9} | {:>19} | {:>9} | {:>10} |\n",
            r.backend_calls,
            r.successes,
            r.fast_errors,
            r.timeouts,
            format!("{} ms", r.elapsed.as_millis())
        ));
    }
    out
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let retry = run(false).await;
    let breaker = run(true).await;
    print!("{}", table(&retry, &breaker));
    let b = fusebox::registry()
        .get("backend")
        .expect("the breaker exists");
    println!(
        "\nbreaker `backend` is {} and rejected {} calls",
        b.state(),
        b.snapshot().rejected
    );
}
