//! `open_for = function` and `open_jitter`: the function is given the failed recoveries and the
//! window that opened the circuit, its wait is used, floored and capped by `open_max`; jitter
//! spreads the waits of keys opened at the same instant over its span, never below the wait.

use std::sync::Mutex;
use std::time::Duration;

use crate::common::ApiError;
use fusebox::clock::FakeClock;
use fusebox::{Breaker, OpenContext, Policy, Registry, State};

fake_registry!(CLOCK, REGISTRY);

/// Every context the function below was given, in order.
static SEEN: Mutex<Vec<OpenContext>> = Mutex::new(Vec::new());

/// 3 s, plus 2 s per failed recovery so far.
fn recorded_wait(open: &OpenContext) -> Duration {
    SEEN.lock().unwrap().push(*open);
    Duration::from_secs(3 + 2 * u64::from(open.failed_recoveries()))
}

#[fusebox::circuit_breaker(
    key = "open-wait-fn",
    registry = REGISTRY,
    window = 4,
    failure_rate = 50,
    slow = "1s",
    slow_rate = 100,
    open_for = recorded_wait
)]
fn lookup(fail: bool) -> Result<u32, ApiError> {
    if fail { Err(ApiError::Timeout) } else { Ok(1) }
}

/// The wait a rejected call of `lookup` reports.
fn rejected_wait() -> Duration {
    let error = lookup(false).unwrap_err();
    let rejection = error.rejection().expect("rejected");
    rejection.retry_after().expect("open: a wait")
}

#[test]
fn the_function_is_given_the_window_and_the_failed_recoveries_and_its_wait_is_used() {
    for fail in [false, false, true] {
        let _ = lookup(fail);
    }
    let breaker = REGISTRY.get("open-wait-fn").unwrap();
    assert!(SEEN.lock().unwrap().is_empty(), "closed: not asked yet");
    lookup(true).unwrap_err();
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(
        SEEN.lock().unwrap().as_slice(),
        [OpenContext::new(0, 4, 2, 0)],
        "the window that tripped: 4 calls, 2 failures, no slow call"
    );
    assert_eq!(SEEN.lock().unwrap()[0].failure_rate(), 50.0);
    assert_eq!(rejected_wait(), Duration::from_secs(3));
    CLOCK.advance(Duration::from_millis(2_999));
    assert!(rejected_wait() <= Duration::from_millis(1), "still open");
    CLOCK.advance(Duration::from_millis(1));
    // The probe fails: a failed recovery, decided by one probe that failed.
    lookup(true).unwrap_err();
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(
        SEEN.lock().unwrap().last(),
        Some(&OpenContext::new(1, 1, 1, 0))
    );
    assert_eq!(rejected_wait(), Duration::from_secs(5));
    CLOCK.advance(Duration::from_secs(5));
    lookup(true).unwrap_err();
    assert_eq!(
        SEEN.lock().unwrap().last(),
        Some(&OpenContext::new(2, 1, 1, 0))
    );
    assert_eq!(rejected_wait(), Duration::from_secs(7));
    // A probe that passes closes the circuit, and the count of failed recoveries starts over.
    CLOCK.advance(Duration::from_secs(7));
    lookup(false).unwrap();
    assert_eq!(breaker.state(), State::Closed);
    for fail in [true, true, false, true] {
        let _ = lookup(fail);
    }
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(
        SEEN.lock().unwrap().last(),
        Some(&OpenContext::new(0, 4, 3, 0))
    );
    assert_eq!(rejected_wait(), Duration::from_secs(3));
    assert_eq!(SEEN.lock().unwrap().len(), 4, "asked once per opening");
}

fn an_hour(_: &OpenContext) -> Duration {
    Duration::from_secs(3600)
}

fn no_wait(_: &OpenContext) -> Duration {
    Duration::ZERO
}

fn ten_seconds(_: &OpenContext) -> Duration {
    Duration::from_secs(10)
}

/// Opens `breaker` (a window of one call) with one failure.
fn trip(breaker: &Breaker) {
    breaker.try_acquire().expect("closed").failure();
    assert_eq!(breaker.state(), State::Open);
}

/// The wait `breaker` reports to a rejected call.
fn wait_of(breaker: &Breaker) -> Duration {
    match breaker.try_acquire() {
        Ok(_) => panic!("`{}` admitted a call: not open", breaker.key()),
        Err(rejected) => rejected.retry_after().expect("open: a wait"),
    }
}

#[test]
fn the_function_s_wait_is_capped_by_open_max_and_floored_at_a_millisecond() {
    let registry = Registry::with_clock(FakeClock::new());
    let one_call = Policy::new().window(1).min_calls(1);
    let capped = registry
        .breaker(
            "open-wait-capped",
            one_call
                .open_for_fn(an_hour)
                .open_max(Duration::from_secs(60)),
        )
        .unwrap();
    trip(&capped);
    assert_eq!(wait_of(&capped), Duration::from_secs(60));
    let floored = registry
        .breaker("open-wait-floored", one_call.open_for_fn(no_wait))
        .unwrap();
    trip(&floored);
    assert_eq!(wait_of(&floored), Duration::from_millis(1));
}

/// 100 keys opened at the same instant (one fake clock) probe at instants spread over the
/// jitter's span (10 s plus up to 20 %: 10 s ..= 12 s), not at one instant, and none outside it.
#[test]
fn keys_opened_at_the_same_instant_probe_over_the_jitter_span() {
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    let policy = Policy::new()
        .window(1)
        .min_calls(1)
        .open_for(Duration::from_secs(10))
        .open_jitter(20);
    let breakers: Vec<Breaker> = (0..100)
        .map(|i| registry.breaker(&format!("jitter-{i}"), policy).unwrap())
        .collect();
    for breaker in &breakers {
        trip(breaker);
    }
    let (wait, span) = (Duration::from_secs(10), Duration::from_secs(2));
    for breaker in &breakers {
        let reported = wait_of(breaker);
        assert!(
            (wait..=wait + span).contains(&reported),
            "{reported:?} outside 10 s ..= 12 s"
        );
    }
    // Step the clock and note when each key first admits a probe.
    let step = Duration::from_millis(50);
    let mut probed_at: Vec<Option<Duration>> = vec![None; breakers.len()];
    let mut now = Duration::ZERO;
    while now <= wait + span + step {
        for (breaker, at) in breakers.iter().zip(&mut probed_at) {
            if at.is_none()
                && let Ok(probe) = breaker.try_acquire()
            {
                *at = Some(now);
                probe.success();
            }
        }
        clock.advance(step);
        now += step;
    }
    let instants: Vec<Duration> = probed_at
        .into_iter()
        .map(|at| at.expect("every key probed within the span"))
        .collect();
    assert!(
        instants
            .iter()
            .all(|at| (wait..=wait + span + step).contains(at)),
        "a probe outside the span: {instants:?}"
    );
    let (first, last) = (
        *instants.iter().min().unwrap(),
        *instants.iter().max().unwrap(),
    );
    assert!(
        last - first >= span * 8 / 10,
        "probes spread over {:?} only, of a 2 s span",
        last - first
    );
    let distinct: std::collections::BTreeSet<_> = instants.iter().collect();
    assert!(
        distinct.len() >= 20,
        "{} distinct instants of 41",
        distinct.len()
    );
}

#[fusebox::circuit_breaker(
    key = "open-wait-jitter-fn",
    registry = REGISTRY,
    window = 1,
    min_calls = 1,
    open_for = ten_seconds,
    open_jitter = 50
)]
fn jittered(fail: bool) -> Result<u32, ApiError> {
    if fail { Err(ApiError::Timeout) } else { Ok(1) }
}

/// Jitter applies to a function's wait too: 10 s plus up to 50 %.
#[test]
fn jitter_spreads_a_function_s_wait() {
    jittered(true).unwrap_err();
    let breaker = REGISTRY.get("open-wait-jitter-fn").unwrap();
    assert_eq!(breaker.policy().settings().open_jitter, 50);
    let wait = wait_of(&breaker);
    assert!(
        (Duration::from_secs(10)..=Duration::from_secs(15)).contains(&wait),
        "{wait:?}"
    );
}
