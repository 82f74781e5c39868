//! `timeout`, `retry`, `backoff`, `deadline` and `max_concurrent` through the attribute, on tokio's
//! paused clock: every sleep is virtual, so the timings below are exact and nothing really waits.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{LazyLock, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::common::ApiError;
use fusebox::{Cause, Reason, State, circuit_breaker};
use tokio::time::Instant;

/// The rejection inside `result`, or a panic naming what came instead.
fn rejection<T: std::fmt::Debug>(result: Result<T, ApiError>) -> fusebox::Error {
    match result {
        Err(ApiError::Rejected(error)) => error,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

/// Polls `future` once: `Some(output)` when it finished at once.
fn poll_once<F: Future + Unpin>(future: &mut F) -> Option<F::Output> {
    match std::pin::Pin::new(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

// ---------------------------------------------------------------- timeouts count

fake_registry!(TIMEOUT_CLOCK, TIMEOUT);
static SLOW_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "slow-backend", registry = TIMEOUT, window = 3, min_calls = 3, failure_rate = 100, timeout = "100ms", failure = [Timeout])]
async fn slow_backend() -> Result<u32, ApiError> {
    SLOW_CALLS.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(5)).await;
    Ok(1)
}

#[tokio::test(start_paused = true)]
async fn a_backend_slower_than_timeout_trips_the_breaker_and_callers_get_timed_out() {
    for n in 1..=3 {
        let started = Instant::now();
        let error = rejection(slow_backend().await);
        assert_eq!(error.reason(), Reason::TimedOut, "call {n}");
        assert!(!error.is_rejected(), "call {n} went out");
        assert_eq!(error.key(), "slow-backend");
        assert_eq!(
            started.elapsed(),
            Duration::from_millis(100),
            "bounded by `timeout`"
        );
        let snapshot = TIMEOUT.get("slow-backend").unwrap().snapshot();
        if n < 3 {
            assert_eq!(
                (snapshot.state, snapshot.failures),
                (State::Closed, n),
                "counted"
            );
        }
    }
    let breaker = TIMEOUT.get("slow-backend").unwrap();
    assert_eq!(
        breaker.state(),
        State::Open,
        "three timed-out calls count as three failures"
    );
    let started = Instant::now();
    let rejected = rejection(slow_backend().await);
    assert_eq!(rejected.reason(), Reason::Open);
    assert!(rejected.is_rejected(), "never sent");
    assert_eq!(started.elapsed(), Duration::ZERO, "rejected at once");
    assert_eq!(
        SLOW_CALLS.load(Ordering::SeqCst),
        3,
        "the open circuit spares the backend"
    );
}

// ---------------------------------------------------------------- every attempt is counted

fake_registry!(RETRY_CLOCK, RETRY);
static FLAKY_CALLS: AtomicU32 = AtomicU32::new(0);

/// Fails with a connect error until `fail_first` attempts were made, then succeeds.
#[circuit_breaker(key = "flaky", registry = RETRY, window = 100, min_calls = 100, retry = 3, failure = [Timeout, Connect])]
async fn flaky(fail_first: u32) -> Result<u32, ApiError> {
    let attempt = FLAKY_CALLS.fetch_add(1, Ordering::SeqCst) + 1;
    if attempt <= fail_first {
        return Err(ApiError::Connect(503));
    }
    Ok(attempt)
}

#[tokio::test(start_paused = true)]
async fn retry_makes_exactly_three_attempts_and_the_breaker_counts_each() {
    assert_eq!(flaky(u32::MAX).await, Err(ApiError::Connect(503)));
    assert_eq!(
        FLAKY_CALLS.load(Ordering::SeqCst),
        3,
        "three attempts in total"
    );
    let breaker = RETRY.get("flaky").unwrap();
    let snapshot = breaker.snapshot();
    assert_eq!(
        (snapshot.calls, snapshot.failures),
        (3, 3),
        "each attempt counted"
    );

    // Two failures, then a success on the third attempt: the caller only sees the success.
    FLAKY_CALLS.store(0, Ordering::SeqCst);
    assert_eq!(flaky(2).await, Ok(3));
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (6, 5));

    // A first-attempt success makes one attempt.
    FLAKY_CALLS.store(0, Ordering::SeqCst);
    assert_eq!(flaky(0).await, Ok(1));
    assert_eq!(FLAKY_CALLS.load(Ordering::SeqCst), 1);
}

static DECLINED_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "declining", registry = RETRY, retry = 3, backoff = "10ms", failure = [Timeout, Connect])]
async fn declining(code: u32) -> Result<u32, ApiError> {
    DECLINED_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(ApiError::Declined { code })
}

#[tokio::test(start_paused = true)]
async fn a_business_error_is_returned_after_exactly_one_attempt() {
    let started = Instant::now();
    assert_eq!(declining(51).await, Err(ApiError::Declined { code: 51 }));
    assert_eq!(DECLINED_CALLS.load(Ordering::SeqCst), 1);
    assert_eq!(started.elapsed(), Duration::ZERO, "no backoff either");
    let snapshot = RETRY.get("declining").unwrap().snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (0, 0), "not counted");
}

// ---------------------------------------------------------------- no retry after a rejection

fake_registry!(REJECT_CLOCK, REJECT);
static TRIPPING_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "tripping", registry = REJECT, window = 2, min_calls = 2, failure_rate = 100, retry = 3, failure = [Connect])]
async fn tripping() -> Result<u32, ApiError> {
    TRIPPING_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(ApiError::Connect(502))
}

#[tokio::test(start_paused = true)]
async fn the_attempt_after_the_trip_is_rejected_and_not_retried() {
    // Attempts 1 and 2 fail and open the circuit; attempt 3 is rejected, so the caller gets the
    // rejection and the backend saw two calls.
    assert_eq!(rejection(tripping().await).reason(), Reason::Open);
    assert_eq!(TRIPPING_CALLS.load(Ordering::SeqCst), 2);
    // The next call is rejected on its first attempt: no further attempt, no backend call.
    let breaker = REJECT.get("tripping").unwrap();
    let rejected = breaker.snapshot().rejected;
    assert_eq!(rejection(tripping().await).reason(), Reason::Open);
    assert_eq!(TRIPPING_CALLS.load(Ordering::SeqCst), 2);
    assert_eq!(
        breaker.snapshot().rejected,
        rejected + 1,
        "one rejection, not three"
    );
}

// ---------------------------------------------------------------- deadline and backoff

fake_registry!(BUDGET_CLOCK, BUDGET);
static HANGING_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "hanging", registry = BUDGET, window = 100, min_calls = 100, timeout = "100ms", retry = 10, deadline = "250ms", failure = [Timeout])]
async fn hanging() -> Result<u32, ApiError> {
    HANGING_CALLS.fetch_add(1, Ordering::SeqCst);
    std::future::pending::<()>().await;
    Ok(0)
}

#[tokio::test(start_paused = true)]
async fn deadline_stops_the_retries_early() {
    let started = Instant::now();
    assert_eq!(rejection(hanging().await).reason(), Reason::TimedOut);
    // Attempts end at 100, 200 and 300 ms; after the third, 300 ms is past the 250 ms budget.
    assert_eq!(
        HANGING_CALLS.load(Ordering::SeqCst),
        3,
        "3 of the 10 allowed attempts"
    );
    assert_eq!(started.elapsed(), Duration::from_millis(300));
    assert_eq!(BUDGET.get("hanging").unwrap().snapshot().failures, 3);
}

/// When each attempt started, for the current call.
static STARTS: LazyLock<Mutex<Vec<Instant>>> = LazyLock::new(|| Mutex::new(Vec::new()));

#[circuit_breaker(key = "backing-off", registry = BUDGET, window = 1000, min_calls = 1000, retry = 4, backoff = "100ms", failure = [Connect])]
async fn backing_off() -> Result<u32, ApiError> {
    STARTS.lock().unwrap().push(Instant::now());
    Err(ApiError::Connect(503))
}

#[tokio::test(start_paused = true)]
async fn backoff_delays_stay_under_their_exponential_ceilings() {
    let ceilings = [100, 200, 400].map(Duration::from_millis);
    let mut waited = Duration::ZERO;
    for _ in 0..50 {
        STARTS.lock().unwrap().clear();
        let started = Instant::now();
        assert_eq!(backing_off().await, Err(ApiError::Connect(503)));
        let elapsed = started.elapsed();
        let starts = STARTS.lock().unwrap().clone();
        assert_eq!(starts.len(), 4);
        for (gap, ceiling) in starts.windows(2).map(|w| w[1] - w[0]).zip(ceilings) {
            assert!(gap <= ceiling, "{gap:?} > {ceiling:?}");
        }
        assert!(elapsed <= ceilings.iter().sum(), "{elapsed:?}");
        waited += elapsed;
    }
    // Full jitter: over 50 calls the delays are not all zero, and not all at the ceiling.
    assert!(waited > Duration::ZERO, "backoff never waited");
    assert!(waited < ceilings.iter().sum::<Duration>() * 50);
}

// ---------------------------------------------------------------- bulkhead

fake_registry!(BULK_CLOCK, BULK);
static GATE: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(0);

#[circuit_breaker(key = "bulkhead", registry = BULK, max_concurrent = 2, failure = [Timeout])]
async fn held(id: u32) -> Result<u32, ApiError> {
    GATE.acquire().await.expect("open semaphore").forget();
    Ok(id)
}

static RETRIED_GATE: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(0);
static RETRIED_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "bulkhead-retried", registry = BULK, max_concurrent = 2, retry = 3, timeout = "1s", failure = [Timeout])]
async fn held_retried(id: u32) -> Result<u32, ApiError> {
    RETRIED_CALLS.fetch_add(1, Ordering::SeqCst);
    RETRIED_GATE
        .acquire()
        .await
        .expect("open semaphore")
        .forget();
    // With `retry`, every attempt borrows the parameters; they keep their types.
    Ok(id)
}

#[tokio::test(start_paused = true)]
async fn a_third_concurrent_call_is_rejected_at_once_and_capacity_comes_back() {
    let breaker = || BULK.get("bulkhead").unwrap();
    for round in 0..3 {
        let mut first = Box::pin(held(1));
        let mut second = Box::pin(held(2));
        assert!(poll_once(&mut first).is_none() && poll_once(&mut second).is_none());
        assert_eq!(breaker().snapshot().in_flight, 2, "round {round}");
        let error = rejection(held(3).await);
        assert_eq!(error.reason(), Reason::BulkheadFull, "round {round}");
        // One finishes, the other is cancelled: both slots come back.
        GATE.add_permits(1);
        assert_eq!(first.await, Ok(1));
        drop(second);
        assert_eq!(breaker().snapshot().in_flight, 0, "round {round}");
    }
    let snapshot = breaker().snapshot();
    assert_eq!(
        snapshot.state,
        State::Closed,
        "a full bulkhead is not a backend failure"
    );
    assert_eq!(snapshot.failures, 0);
}

#[tokio::test(start_paused = true)]
async fn with_retry_a_full_bulkhead_is_rejected_once_and_not_retried() {
    let mut first = pin!(held_retried(1));
    let mut second = pin!(held_retried(2));
    assert!(poll_once(&mut first).is_none() && poll_once(&mut second).is_none());
    let started = Instant::now();
    assert_eq!(
        rejection(held_retried(3).await).reason(),
        Reason::BulkheadFull
    );
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(
        RETRIED_CALLS.load(Ordering::SeqCst),
        2,
        "the third call never ran"
    );
    RETRIED_GATE.add_permits(2);
    assert_eq!(first.await, Ok(1));
    assert_eq!(second.await, Ok(2));
    let snapshot = BULK.get("bulkhead-retried").unwrap().snapshot();
    assert_eq!(snapshot.in_flight, 0);
    assert_eq!((snapshot.calls, snapshot.failures), (2, 0));
}

// ---------------------------------------------------------------- fallbacks

fake_registry!(FALLBACK_CLOCK, FALLBACK);
static CAUSES: LazyLock<Mutex<Vec<String>>> = LazyLock::new(|| Mutex::new(Vec::new()));

#[circuit_breaker(key = "quotes", registry = FALLBACK, window = 10, min_calls = 10, timeout = "50ms", retry = 2, failure = [Timeout, Connect], fallback = cached_quote)]
async fn quote(item: String, delay_ms: u64) -> Result<String, ApiError> {
    tokio::time::sleep(Duration::from_millis(delay_ms)).await;
    if delay_ms == 1 {
        return Err(ApiError::Connect(503));
    }
    Ok(format!("fresh {item}"))
}

async fn cached_quote(
    item: String,
    delay_ms: u64,
    cause: Cause<ApiError>,
) -> Result<String, ApiError> {
    let seen = match &cause {
        Cause::Rejected(error) => format!("rejected {:?}", error.reason()),
        Cause::TimedOut(error) => format!("timed out {:?}", error.reason()),
        Cause::Failed(error) => format!("failed {error:?}"),
    };
    CAUSES.lock().unwrap().push(seen);
    Ok(format!("cached {item} after {delay_ms}ms"))
}

#[tokio::test(start_paused = true)]
async fn the_fallback_gets_its_arguments_and_the_cause_of_the_last_attempt() {
    assert_eq!(quote("tea".into(), 10).await.unwrap(), "fresh tea");
    let started = Instant::now();
    assert_eq!(
        quote("tea".into(), 500).await.unwrap(),
        "cached tea after 500ms"
    );
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(100),
        "two attempts of 50 ms"
    );
    assert_eq!(
        quote("jam".into(), 1).await.unwrap(),
        "cached jam after 1ms"
    );
    assert_eq!(
        *CAUSES.lock().unwrap(),
        ["timed out TimedOut", "failed Connect(503)"]
    );
    let snapshot = FALLBACK.get("quotes").unwrap().snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (5, 4));
}

// ---------------------------------------------------------------- a timeout is not a rejection

/// What a fallback saw, and how many times the backend had been called by then.
static SEEN: LazyLock<Mutex<Vec<(String, u32)>>> = LazyLock::new(|| Mutex::new(Vec::new()));

fn seen_by_fallback(key: &str, cause: &Cause<ApiError>, hits: u32) {
    let seen = match cause {
        // The backend was never called: the only cause a fallback may safely re-queue.
        Cause::Rejected(error) => format!("{key}: rejected {:?}", error.reason()),
        // The call went out; its result is unknown.
        Cause::TimedOut(error) => format!("{key}: timed out {:?}", error.reason()),
        Cause::Failed(error) => format!("{key}: failed {error:?}"),
    };
    SEEN.lock().unwrap().push((seen, hits));
}

/// What the fallback of `key` saw (exactly that key: `charge` does not take `charge-retried`'s).
fn seen(key: &str) -> Vec<(String, u32)> {
    let prefix = format!("{key}: ");
    SEEN.lock()
        .unwrap()
        .iter()
        .filter(|(s, _)| s.starts_with(&prefix))
        .cloned()
        .collect()
}

fake_registry!(CHARGE_CLOCK, CHARGE);
static CHARGE_HITS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "charge", registry = CHARGE, window = 2, min_calls = 2, failure_rate = 100, open_for = "30s", timeout = "300ms", failure = [Timeout, Connect], fallback = charge_later)]
async fn charge(_amount: u32) -> Result<u32, ApiError> {
    CHARGE_HITS.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(5)).await; // the backend is slow: every call times out
    Ok(1)
}

/// Queues what was never sent (`Ok(0)`); a timed-out charge may have gone through and is not queued.
async fn charge_later(_amount: u32, cause: Cause<ApiError>) -> Result<u32, ApiError> {
    seen_by_fallback("charge", &cause, CHARGE_HITS.load(Ordering::SeqCst));
    match cause {
        Cause::Rejected(_) => Ok(0),
        cause => Err(cause.into_error()),
    }
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_call_reaches_the_fallback_as_timed_out_and_an_open_circuit_as_rejected() {
    for _ in 0..2 {
        let error = charge(7).await.unwrap_err().rejection().cloned().unwrap();
        assert_eq!(error.reason(), Reason::TimedOut);
        assert!(!error.is_rejected(), "the call went out");
    }
    assert_eq!(CHARGE.get("charge").unwrap().state(), State::Open);
    assert_eq!(charge(7).await.unwrap(), 0, "rejected: queued");
    assert_eq!(
        seen("charge"),
        [
            ("charge: timed out TimedOut".to_owned(), 1),
            ("charge: timed out TimedOut".to_owned(), 2),
            ("charge: rejected Open".to_owned(), 2),
        ],
        "(cause, backend calls so far)"
    );
    assert_eq!(
        CHARGE_HITS.load(Ordering::SeqCst),
        2,
        "the open circuit spared the backend"
    );
}

fake_registry!(RETRIED_CLOCK, RETRIED);
static RETRIED_HITS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "charge-retried", registry = RETRIED, window = 4, min_calls = 4, failure_rate = 100, open_for = "30s", timeout = "300ms", retry = 3, failure = [Timeout, Connect], fallback = charge_retried_later)]
async fn charge_retried(amount: u32) -> Result<u32, ApiError> {
    RETRIED_HITS.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(5)).await;
    Ok(amount)
}

async fn charge_retried_later(amount: u32, cause: Cause<ApiError>) -> Result<u32, ApiError> {
    seen_by_fallback(
        "charge-retried",
        &cause,
        RETRIED_HITS.load(Ordering::SeqCst),
    );
    Ok(amount)
}

#[tokio::test(start_paused = true)]
async fn with_retry_a_timeout_stays_a_timeout_even_when_the_retry_is_rejected() {
    // Three attempts, all timed out.
    charge_retried(1).await.unwrap();
    // One attempt times out and trips the circuit (4 failures of 4); the retry is rejected, but
    // the first attempt went out: the fallback must not hear "never called".
    charge_retried(2).await.unwrap();
    // Now open: rejected before any attempt.
    charge_retried(3).await.unwrap();
    assert_eq!(
        seen("charge-retried"),
        [
            ("charge-retried: timed out TimedOut".to_owned(), 3),
            ("charge-retried: timed out TimedOut".to_owned(), 4),
            ("charge-retried: rejected Open".to_owned(), 4),
        ],
        "(cause, backend calls so far)"
    );
}

fake_registry!(FAILED_FIRST_CLOCK, FAILED_FIRST);
static FAILED_FIRST_HITS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "rejected-retry", registry = FAILED_FIRST, window = 1, min_calls = 1, failure_rate = 100, retry = 3, failure = [Connect], fallback = rejected_retry_later)]
async fn rejected_retry() -> Result<u32, ApiError> {
    FAILED_FIRST_HITS.fetch_add(1, Ordering::SeqCst);
    Err(ApiError::Connect(503))
}

async fn rejected_retry_later(cause: Cause<ApiError>) -> Result<u32, ApiError> {
    seen_by_fallback(
        "rejected-retry",
        &cause,
        FAILED_FIRST_HITS.load(Ordering::SeqCst),
    );
    Ok(0)
}

#[tokio::test(start_paused = true)]
async fn a_retry_rejected_after_a_counted_failure_is_rejected() {
    // The first attempt fails (its result is known) and trips the circuit; the retry is rejected.
    rejected_retry().await.unwrap();
    rejected_retry().await.unwrap();
    assert_eq!(
        seen("rejected-retry"),
        [
            ("rejected-retry: rejected Open".to_owned(), 1),
            ("rejected-retry: rejected Open".to_owned(), 1),
        ],
        "(cause, backend calls so far)"
    );
}
