//! `throttle`: adaptive throttling sheds a closed circuit's calls with the probability
//! `max(0, (requests − K·accepts) / (requests + 1))` over the window; the admitted share settles
//! where the formula says, a healthy backend sees no rejection, a shed call reaches the fallback as
//! `Cause::Rejected` with `Reason::Throttled`, and configuration sets and validates it.
//!
//! The fixed point. `requests` and `accepts` count the calls that went out (a shed call is not
//! recorded in the window). Against a backend whose calls succeed with probability `a`, the
//! window's `accepts ≈ a × requests`, so with `requests = n`:
//! `p = max(0, (n − K·a·n) / (n + 1)) ≈ max(0, 1 − K·a)`, and the admitted share is
//! `1 − p ≈ min(1, K·a)` (plus `(1 − K·a) / (n + 1)`, under 1 % for the windows below). It does not
//! depend on `p` itself: the shed calls change nothing the formula reads, so the share is stable.
//! (Had the shed calls counted as requests, as in the SRE book, the window would hold
//! `requests = n / (1 − p)` and `accepts = a·n`, so `p = 1 − K·a·(1 − p)`, whose only fixed points
//! are `p = 1` when `K·a < 1` and `p = 0` when `K·a ≥ 1`: all or nothing against a backend that
//! fails a fixed share, which is why fusebox counts only the calls that went out.)
//! For a = 0.5: K = 2 → 1 (nothing shed but noise), K = 1.5 → 0.75, K = 1.2 → 0.6.

use std::time::Duration;

use crate::common::ApiError;
use fusebox::clock::FakeClock;
use fusebox::{Breaker, Cause, Policy, PolicyPatch, Reason, Registry, State};

fake_registry!(CLOCK, REGISTRY);

/// Runs `calls` calls against a backend whose calls fail with probability `fail` (a seeded
/// rng), one millisecond apart on `clock`; returns the admitted share of the last half of the
/// run (the first half lets the window fill and settle).
fn admitted_share(breaker: &Breaker, clock: &FakeClock, fail: f64, calls: u32) -> f64 {
    let mut backend = fastrand::Rng::with_seed(42);
    let (mut admitted, mut counted) = (0u32, 0u32);
    for call in 0..calls {
        clock.advance(Duration::from_millis(1));
        let late = call >= calls / 2;
        counted += u32::from(late);
        match breaker.try_acquire() {
            Ok(permit) => {
                admitted += u32::from(late);
                if backend.f64() < fail {
                    permit.failure();
                } else {
                    permit.success();
                }
            }
            Err(rejected) => assert_eq!(rejected.reason(), Reason::Throttled, "call {call}"),
        }
        assert_eq!(
            breaker.state(),
            State::Closed,
            "call {call}: the rate rule stays off"
        );
    }
    f64::from(admitted) / f64::from(counted)
}

#[test]
fn against_a_backend_failing_half_its_calls_the_admitted_share_is_min_1_k_times_a() {
    fastrand::seed(25);
    let windows = [
        ("count", Policy::new().window(200)),
        ("time", Policy::new().time_window(Duration::from_secs(10))),
    ];
    for (shape, base) in windows {
        for (k, predicted) in [(2.0, 1.0), (1.5, 0.75), (1.2, 0.6)] {
            let clock = FakeClock::new();
            let registry = Registry::with_clock(clock.clone());
            let policy = base.throttle(k).failure_rate(90);
            let breaker = registry
                .breaker(&format!("throttle-{shape}-{k}"), policy)
                .unwrap();
            let share = admitted_share(&breaker, &clock, 0.5, 200_000);
            assert!(
                (share - predicted).abs() <= 0.1 * predicted,
                "{shape} window, K = {k}: admitted {share:.3}, the formula says {predicted}"
            );
            let snapshot = breaker.snapshot();
            if k < 2.0 {
                assert!(
                    snapshot.throttled > 10_000,
                    "{shape}, K = {k}: {snapshot:?}"
                );
            }
            assert_eq!(snapshot.rejected, snapshot.throttled);
        }
    }
}

#[test]
fn a_healthy_backend_sees_no_rejection() {
    fastrand::seed(26);
    for (fail, k) in [(0.0, 1.0), (0.01, 2.0), (0.3, 2.0)] {
        let clock = FakeClock::new();
        let registry = Registry::with_clock(clock.clone());
        let breaker = registry
            .breaker(
                &format!("throttle-healthy-{fail}"),
                Policy::new().throttle(k),
            )
            .unwrap();
        let share = admitted_share(&breaker, &clock, fail, 20_000);
        assert_eq!(share, 1.0, "{fail} of calls failing, K = {k}");
        assert_eq!(breaker.snapshot().throttled, 0);
    }
}

#[fusebox::circuit_breaker(
    key = "throttle-attr",
    registry = REGISTRY,
    failure = [Timeout],
    window = 10,
    min_calls = 10,
    failure_rate = 100,
    throttle = 1.0,
    fallback = served_from_cache
)]
fn fetch(outcome: u8) -> Result<String, ApiError> {
    match outcome {
        0 => Ok("fresh".into()),
        1 => Err(ApiError::Timeout),
        // Not a counted failure (`failure = [Timeout]`): it leaves the window as it is.
        _ => Err(ApiError::Declined { code: 1 }),
    }
}

fn served_from_cache(_outcome: u8, cause: Cause<ApiError>) -> Result<String, ApiError> {
    match cause {
        Cause::Rejected(error) => Ok(format!("rejected {}", error.reason().code())),
        Cause::TimedOut(error) => Ok(format!("timed out {error}")),
        Cause::Failed(_) => Ok("failed".into()),
    }
}

#[test]
fn a_shed_call_reaches_the_fallback_as_rejected_with_reason_throttled() {
    fastrand::seed(27);
    assert_eq!(fetch(0).unwrap(), "fresh");
    for _ in 0..9 {
        assert_eq!(fetch(1).unwrap(), "failed");
    }
    let breaker = REGISTRY.get("throttle-attr").unwrap();
    assert_eq!(breaker.state(), State::Closed, "the rate rule needs 100 %");
    assert_eq!(breaker.policy().settings().throttle, Some(1.0));
    // p = (10 - 1) / 11: most calls are shed, the others pass through as `Declined`.
    let mut shed = 0;
    for _ in 0..200 {
        match fetch(2) {
            Ok(text) => {
                assert_eq!(text, "rejected throttled");
                shed += 1;
            }
            Err(ApiError::Declined { .. }) => {}
            Err(other) => panic!("{other:?}"),
        }
    }
    assert!(
        (130..=190).contains(&shed),
        "{shed} of 200 shed at p = 9/11"
    );
    assert_eq!(breaker.snapshot().throttled, shed);
    assert_eq!(breaker.state(), State::Closed);
    // The binary rules still open the circuit: the rejections become `Open`.
    CLOCK.advance(Duration::from_secs(1));
    breaker.force_open();
    assert_eq!(fetch(2).unwrap(), "rejected forced_open");
    breaker.reset();
}

#[test]
fn configuration_sets_and_validates_it() {
    let registry = Registry::with_clock(FakeClock::new());
    let b = registry.breaker("throttle-toml", Policy::new()).unwrap();
    registry
        .load_toml("[breakers.throttle-toml]\nthrottle = 1.5\n")
        .unwrap();
    assert_eq!(b.policy().settings().throttle, Some(1.5));
    registry
        .load_toml("[breakers.throttle-toml]\nthrottle = 3\n")
        .unwrap();
    assert_eq!(
        b.policy().settings().throttle,
        Some(3.0),
        "an integer is a factor too"
    );

    let env = registry.breaker("throttle_env", Policy::new()).unwrap();
    registry
        .load_vars([(
            "FUSEBOX__THROTTLE_ENV__THROTTLE".to_string(),
            "2".to_string(),
        )])
        .unwrap();
    assert_eq!(env.policy().settings().throttle, Some(2.0));

    // Below 1, above 100, not a number: refused with the fix, nothing applied.
    for (value, says) in [
        ("0.5", "invalid `throttle` = 0.5; use a value in 1..=100"),
        ("250", "invalid `throttle` = 250; use a value in 1..=100"),
        ("\"fast\"", "a number like 2 or 1.5"),
    ] {
        let error = registry
            .load_toml(&format!("[breakers.throttle-toml]\nthrottle = {value}\n"))
            .unwrap_err();
        assert!(error.to_string().contains(says), "{value}: {error}");
    }
    assert_eq!(b.policy().settings().throttle, Some(3.0));
    // 0 turns it off, and `Registry::configure` takes the same patch.
    registry
        .load_toml("[breakers.throttle-toml]\nthrottle = 0\n")
        .unwrap();
    assert_eq!(b.policy().settings().throttle, None);
    registry
        .configure("throttle-toml", PolicyPatch::new().throttle(1.25))
        .unwrap();
    assert_eq!(b.policy().settings().throttle, Some(1.25));
    let error = registry
        .breaker("throttle-bad", Policy::new().throttle(0.9))
        .unwrap_err();
    assert!(error.to_string().contains("`throttle` = 0.9"), "{error}");
}
