//! What an outcome counts as: errors the classification does not count (`others`), and errors
//! converted from the refusal of an inner breaker (stacked attributes, nested annotated
//! functions), which an outer breaker never counts.

mod common;

use common::ApiError;
use fusebox::{Others, Policy, State};

fake_registry!(CLOCK, REGISTRY);

// ------------------------------------------------------------------ others

/// 4 declined cards, then 2 timeouts, through a window of 10 at 50 % with `min_calls = 2`.
fn declined_then_timeouts(call: fn(bool) -> Result<u32, ApiError>) {
    for _ in 0..4 {
        assert!(matches!(call(false), Err(ApiError::Declined { .. })));
    }
    for _ in 0..2 {
        assert!(matches!(call(true), Err(ApiError::Timeout)));
    }
}

#[fusebox::circuit_breaker(key = "others-ignore", registry = REGISTRY, failure = [Timeout], window = 10, min_calls = 2, failure_rate = 50)]
fn ignoring(timeout: bool) -> Result<u32, ApiError> {
    Err(if timeout {
        ApiError::Timeout
    } else {
        ApiError::Declined { code: 51 }
    })
}

#[fusebox::circuit_breaker(key = "others-success", registry = REGISTRY, failure = [Timeout], window = 10, min_calls = 2, failure_rate = 50, others = "success")]
fn counting(timeout: bool) -> Result<u32, ApiError> {
    Err(if timeout {
        ApiError::Timeout
    } else {
        ApiError::Declined { code: 51 }
    })
}

#[test]
fn by_default_an_error_failure_does_not_list_counts_as_nothing() {
    declined_then_timeouts(ignoring);
    let breaker = REGISTRY.get("others-ignore").unwrap();
    // The window holds the two timeouts only: 2 of 2 failed.
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.policy().get_others(), Others::Ignore);
}

#[test]
fn with_others_success_an_error_failure_does_not_list_is_a_success() {
    declined_then_timeouts(counting);
    let breaker = REGISTRY.get("others-success").unwrap();
    // The declined cards dilute the rate: 2 of 6 failed.
    assert_eq!(breaker.state(), State::Closed);
    let snap = breaker.snapshot();
    assert_eq!((snap.calls, snap.failures), (6, 2));
}

#[test]
fn with_others_success_a_declined_probe_closes_the_circuit() {
    let clock = fusebox::clock::FakeClock::new();
    let registry = fusebox::Registry::with_clock(clock.clone());
    let policy = Policy::new()
        .consecutive(1)
        .open_for(std::time::Duration::from_secs(1))
        .others(Others::Success);
    let breaker = registry.breaker("probe", policy).unwrap();
    breaker.try_acquire().unwrap().failure();
    assert_eq!(breaker.state(), State::Open);
    clock.advance(std::time::Duration::from_secs(1));
    let probe = breaker.try_acquire().unwrap();
    assert!(probe.is_probe());
    probe.ignore();
    assert_eq!(breaker.state(), State::Closed);
    // `call` classifies the same way: an error `is_failure` rejects is a success.
    let declined: Result<(), ApiError> = breaker
        .call(
            || Err(ApiError::Declined { code: 51 }),
            |e| matches!(e, ApiError::Timeout),
        )
        .expect("closed");
    assert!(declined.is_err());
    assert_eq!(breaker.snapshot().calls, 1);
}
