//! `retry_budget` through the attribute: a dead backend gets at most the budget's share of
//! retries, a healthy one never sees a retry rejected, and a fallback can tell a rejected retry
//! from attempts that ran out. Time is the registry's fake clock; nothing sleeps.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::common::ApiError;
use fusebox::{Cause, State, circuit_breaker};

// ---------------------------------------------------------------- a dead backend

fake_registry!(DEAD_CLOCK, DEAD);
static DEAD_CALLS: AtomicU64 = AtomicU64::new(0);

/// A backend failing every call. The circuit is disabled before the run, so only the budget
/// limits the retries.
#[circuit_breaker(key = "dead", registry = DEAD, retry = 3, retry_budget = "20%", failure = [Connect])]
async fn dead() -> Result<u32, ApiError> {
    DEAD_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(ApiError::Connect(503))
}

#[tokio::test]
async fn a_dead_backend_gets_at_most_twenty_percent_more_calls_plus_the_floor() {
    // Admit the first call to make the breaker, then disable the circuit: it never opens.
    assert_eq!(dead().await, Err(ApiError::Connect(503)));
    let breaker = DEAD.get("dead").unwrap();
    breaker.disable();
    DEAD_CALLS.store(0, Ordering::SeqCst);
    let rejected_before = breaker.snapshot().retries_rejected;

    // 100 calls a second for 10 minutes of fake time.
    const SECONDS: u64 = 600;
    const PER_SECOND: u64 = 100;
    let first = SECONDS * PER_SECOND;
    for _ in 0..first {
        assert_eq!(dead().await, Err(ApiError::Connect(503)));
        DEAD_CLOCK.advance(Duration::from_millis(1_000 / PER_SECOND));
    }
    let backend = DEAD_CALLS.load(Ordering::SeqCst);
    let retries = backend - first;
    // The floor: 10 retries a second, and at most one span's reserve (10 s) more.
    let floor = 10 * SECONDS;
    assert!(
        backend <= first + first / 5 + floor + 100,
        "{backend} backend calls for {first} calls: more than 1.2 × + the floor"
    );
    // Without the budget it would be 3 ×; the budget gives out what it allows, no less.
    assert!(
        retries >= (first / 5 + floor) * 9 / 10,
        "only {retries} retries: the budget allows 20 % + 10/s"
    );
    let snapshot = breaker.snapshot();
    assert_eq!(snapshot.state, State::Disabled);
    let rejected = snapshot.retries_rejected - rejected_before;
    // A call ends at its first rejected retry: one rejection at most per call, and every call
    // without one made its two retries.
    assert!(rejected <= first, "{rejected} rejections for {first} calls");
    assert!(
        retries >= 2 * (first - rejected),
        "{retries} retries, {rejected} calls rejected one: a call without a rejection retried twice"
    );
    assert!(
        rejected >= first / 2,
        "most calls had a retry rejected: {rejected}"
    );
    assert!(snapshot.retry_budget_balance.is_some());
}

// ---------------------------------------------------------------- a healthy backend

fake_registry!(HEALTHY_CLOCK, HEALTHY);
static HEALTHY_CALLS: AtomicU64 = AtomicU64::new(0);

/// Fails one call in 50 (its retry succeeds).
#[circuit_breaker(key = "healthy", registry = HEALTHY, retry = 3, retry_budget = "20%", failure = [Connect])]
async fn healthy() -> Result<u64, ApiError> {
    let n = HEALTHY_CALLS.fetch_add(1, Ordering::SeqCst);
    if n % 50 == 7 {
        return Err(ApiError::Connect(502));
    }
    Ok(n)
}

#[tokio::test]
async fn a_healthy_backend_with_rare_failures_never_sees_a_retry_rejected() {
    for _ in 0..20_000 {
        assert!(healthy().await.is_ok(), "every failure is retried");
        HEALTHY_CLOCK.advance(Duration::from_millis(7));
    }
    let snapshot = HEALTHY.get("healthy").unwrap().snapshot();
    assert_eq!(snapshot.retries_rejected, 0);
    assert_eq!(snapshot.state, State::Closed);
    assert!(snapshot.retry_budget_balance.unwrap() > 100);
}

// ---------------------------------------------------------------- what the fallback sees

fake_registry!(SEEN_CLOCK, SEEN);
static SEEN_CALLS: AtomicU32 = AtomicU32::new(0);

/// No share of first attempts, a floor of 1 retry per second: 10 retries per 10 s.
#[circuit_breaker(key = "seen", registry = SEEN, consecutive = 1000, retry = 3, retry_budget = "0%, 1/s", failure = [Connect, Timeout], fallback = seen_later)]
async fn seen() -> Result<&'static str, ApiError> {
    SEEN_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(ApiError::Connect(503))
}

async fn seen_later(cause: Cause<ApiError>) -> Result<&'static str, ApiError> {
    assert_eq!(
        cause.failed(),
        Some(&ApiError::Connect(503)),
        "the last attempt's error"
    );
    Ok(if cause.retry_rejected() {
        "budget"
    } else {
        "attempts ran out"
    })
}

#[tokio::test]
async fn a_fallback_tells_a_rejected_retry_from_attempts_that_ran_out() {
    for n in 1..=5 {
        assert_eq!(seen().await, Ok("attempts ran out"), "call {n}");
    }
    assert_eq!(
        SEEN_CALLS.load(Ordering::SeqCst),
        15,
        "10 retries of the floor"
    );
    assert_eq!(seen().await, Ok("budget"));
    assert_eq!(
        SEEN_CALLS.load(Ordering::SeqCst),
        16,
        "one attempt, no retry"
    );
    let breaker = SEEN.get("seen").unwrap();
    assert_eq!(breaker.snapshot().retries_rejected, 1);
    assert_eq!(breaker.snapshot().retry_budget_balance, Some(0));
    // A span later the floor has refilled.
    SEEN_CLOCK.advance(Duration::from_secs(10));
    assert_eq!(seen().await, Ok("attempts ran out"));
    assert_eq!(breaker.snapshot().retry_budget_balance, Some(8));
}
