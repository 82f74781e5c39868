//! `failure_count`: N counted failures within the window open the circuit whatever their rate,
//! through the attribute, `Policy` and configuration; `min_calls` does not gate it; with a rate
//! rule either may trip.

use std::time::Duration;

use crate::common::ApiError;
use fusebox::clock::FakeClock;
use fusebox::{Breaker, Policy, PolicyPatch, Registry, State, Trigger};

fake_registry!(CLOCK, REGISTRY);

fn call(breaker: &Breaker, failed: bool) {
    let permit = breaker.try_acquire().expect("closed");
    if failed {
        permit.failure();
    } else {
        permit.success();
    }
}

fn trigger(breaker: &Breaker) -> Trigger {
    breaker
        .snapshot()
        .last_transition
        .expect("a transition")
        .trigger
}

#[fusebox::circuit_breaker(
    key = "failure-count-attr",
    registry = REGISTRY,
    window = "1m",
    failure_count = 3,
    min_calls = 500
)]
fn lookup(fail: bool) -> Result<u32, ApiError> {
    if fail { Err(ApiError::Timeout) } else { Ok(1) }
}

#[test]
fn the_attribute_opens_after_n_failures_within_the_window_at_a_low_rate() {
    for _ in 0..200 {
        lookup(false).unwrap();
    }
    lookup(true).unwrap_err();
    lookup(true).unwrap_err();
    let breaker = REGISTRY.get("failure-count-attr").unwrap();
    assert_eq!(breaker.state(), State::Closed, "2 failures of 202 calls");
    // The two failures leave the window: a minute later only new failures count.
    CLOCK.advance(Duration::from_secs(61));
    lookup(true).unwrap_err();
    lookup(true).unwrap_err();
    assert_eq!(breaker.state(), State::Closed, "2 failures in the window");
    lookup(true).unwrap_err();
    assert_eq!(
        breaker.state(),
        State::Open,
        "3 failures of 205 calls, below `min_calls`"
    );
    assert_eq!(trigger(&breaker), Trigger::FailureCount);
    assert!(lookup(false).unwrap_err().rejection().is_some());
    let policy = breaker.policy();
    assert_eq!(policy.settings().failure_count, Some(3));
    assert_eq!(
        policy.settings().failure_rate,
        None,
        "alone it replaces the rate rule"
    );
}

#[test]
fn uncounted_errors_and_successes_do_not_add_to_the_count() {
    let registry = Registry::with_clock(FakeClock::new());
    let b = registry
        .breaker(
            "failure-count-ignored",
            Policy::new().window(10).failure_count(2),
        )
        .unwrap();
    call(&b, true);
    for _ in 0..5 {
        b.try_acquire().unwrap().ignore();
        call(&b, false);
    }
    assert_eq!(b.state(), State::Closed);
    call(&b, true);
    assert_eq!(b.state(), State::Open);
    assert_eq!(trigger(&b), Trigger::FailureCount);
}

#[test]
fn a_count_window_forgets_failures_it_evicted() {
    let registry = Registry::with_clock(FakeClock::new());
    let b = registry
        .breaker(
            "failure-count-evicted",
            Policy::new().window(4).failure_count(2),
        )
        .unwrap();
    call(&b, true);
    for _ in 0..3 {
        call(&b, false);
    }
    // The window is [F, S, S, S]; the next call evicts the failure.
    call(&b, true);
    assert_eq!(b.state(), State::Closed, "1 failure in the last 4 calls");
    call(&b, true);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn with_a_rate_rule_either_rule_may_trip() {
    let registry = Registry::with_clock(FakeClock::new());
    let policy = Policy::new()
        .window(100)
        .min_calls(4)
        .failure_rate(50)
        .failure_count(5);
    let by_rate = registry.breaker("failure-count-rate", policy).unwrap();
    for failed in [true, false, true, false] {
        call(&by_rate, failed);
    }
    assert_eq!(by_rate.state(), State::Open);
    assert_eq!(trigger(&by_rate), Trigger::FailureRate);

    let by_count = registry.breaker("failure-count-count", policy).unwrap();
    for i in 0..=80 {
        assert_eq!(by_count.state(), State::Closed, "call {i}");
        call(&by_count, i % 20 == 0);
    }
    assert_eq!(by_count.state(), State::Open, "5 failures in 81 calls: 6 %");
    assert_eq!(trigger(&by_count), Trigger::FailureCount);
}

#[test]
fn configuration_sets_it_from_toml_and_the_environment() {
    let registry = Registry::with_clock(FakeClock::new());
    let b = registry
        .breaker("failure-count-toml", Policy::new())
        .unwrap();
    registry
        .load_toml("[breakers.failure-count-toml]\nfailure_count = 2\n")
        .unwrap();
    assert_eq!(b.policy().settings().failure_count, Some(2));
    assert_eq!(b.policy().settings().failure_rate, None);
    call(&b, true);
    call(&b, true);
    assert_eq!(b.state(), State::Open);

    let ok = registry
        .breaker("failure_count_env", Policy::new().window(10))
        .unwrap();
    registry
        .load_vars([(
            "FUSEBOX__FAILURE_COUNT_ENV__FAILURE_COUNT".to_string(),
            "4".to_string(),
        )])
        .unwrap();
    assert_eq!(ok.policy().settings().failure_count, Some(4));
    // Out of range: more than the count window (100 calls) holds; nothing applied.
    let error = registry
        .load_toml("[breakers.failure-count-toml]\nfailure_count = 101\n")
        .unwrap_err();
    assert!(
        error.to_string().contains("`failure_count` = 101"),
        "{error}"
    );
    assert_eq!(b.policy().settings().failure_count, Some(2));
    // `Registry::configure` takes the same patch.
    let coded = registry
        .breaker("failure-count-coded", Policy::new())
        .unwrap();
    registry
        .configure("failure-count-coded", PolicyPatch::new().failure_count(6))
        .unwrap();
    assert_eq!(coded.policy().settings().failure_count, Some(6));
}
