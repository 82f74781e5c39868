//! What an outcome counts as: errors the classification does not count (`others`), and errors
//! converted from the rejection of an inner breaker (stacked attributes, nested annotated
//! functions), which an outer breaker never counts.

use crate::common::ApiError;
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
    assert_eq!(breaker.policy().settings().others, Others::Ignore);
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

// ------------------------------------------------------------------ nested breakers

/// The failures and state of the breaker `key`.
fn failures_of(key: &str) -> (u32, State) {
    let breaker = REGISTRY.get(key).expect("registered");
    (breaker.snapshot().failures, breaker.state())
}

/// Two attributes on one function: whichever runs inside, its rejections reach the other as the
/// function's error, converted by `From<fusebox::Error>`.
#[fusebox::circuit_breaker(key = "stacked-first", registry = REGISTRY, window = 4, min_calls = 2)]
#[fusebox::circuit_breaker(key = "stacked-second", registry = REGISTRY, window = 4, min_calls = 2)]
fn stacked() -> Result<u32, ApiError> {
    Ok(1)
}

#[test]
fn stacked_attributes_do_not_count_each_others_rejections() {
    stacked().unwrap();
    for (forced, other) in [
        ("stacked-first", "stacked-second"),
        ("stacked-second", "stacked-first"),
    ] {
        let breaker = REGISTRY.get(forced).unwrap();
        breaker.force_open();
        for _ in 0..4 {
            let rejected = stacked().unwrap_err();
            assert_eq!(rejected.rejection().map(fusebox::Error::key), Some(forced));
        }
        // One of the two runs inside the other: that one's rejections went through the other,
        // which counted none of them (it counted 4 failures, and opened, before).
        assert_eq!(failures_of(other), (0, State::Closed), "{other}");
        breaker.reset();
    }
}

#[fusebox::circuit_breaker(key = "nested-inner", registry = REGISTRY, consecutive = 1, open_for = "1h")]
fn inner(fail: bool) -> Result<u32, ApiError> {
    if fail { Err(ApiError::Timeout) } else { Ok(1) }
}

#[fusebox::circuit_breaker(key = "nested-outer", registry = REGISTRY, window = 4, min_calls = 2)]
fn outer(fail: bool) -> Result<u32, ApiError> {
    Ok(inner(fail)? + 1)
}

#[test]
fn an_annotated_function_does_not_count_the_rejections_of_one_it_calls() {
    // The inner dependency times out: both count it (the outer's dependency failed too), and
    // the inner circuit opens.
    assert_eq!(outer(true), Err(ApiError::Timeout));
    assert_eq!(failures_of("nested-inner").1, State::Open);
    assert_eq!(failures_of("nested-outer"), (1, State::Closed));
    // The inner circuit rejects: the outer returns the rejection and counts nothing.
    for _ in 0..5 {
        let rejected = outer(false).unwrap_err();
        assert_eq!(
            rejected.rejection().map(fusebox::Error::key),
            Some("nested-inner")
        );
    }
    let snap = REGISTRY.get("nested-outer").unwrap().snapshot();
    assert_eq!(
        (snap.calls, snap.failures, snap.state),
        (1, 1, State::Closed)
    );
}

#[fusebox::circuit_breaker(key = "async-inner", registry = REGISTRY, consecutive = 1, open_for = "1h")]
async fn async_inner() -> Result<u32, ApiError> {
    Err(ApiError::Timeout)
}

#[fusebox::circuit_breaker(key = "async-outer", registry = REGISTRY, window = 4, min_calls = 2, retry = 3)]
async fn async_outer() -> Result<u32, ApiError> {
    tokio::task::yield_now().await;
    let n = async_inner().await?;
    Ok(n + 1)
}

#[tokio::test]
async fn an_async_fn_with_retry_neither_counts_nor_retries_an_inner_rejection() {
    // The first call: the inner timeout is counted by both, and retried by the outer, whose
    // second attempt is rejected by the now open inner circuit.
    let first = async_outer().await.unwrap_err();
    assert_eq!(
        first.rejection().map(fusebox::Error::key),
        Some("async-inner")
    );
    let inner = REGISTRY.get("async-inner").unwrap();
    assert_eq!((inner.state(), inner.snapshot().rejected), (State::Open, 1));
    assert_eq!(failures_of("async-outer"), (1, State::Closed));
    for count in 2..6 {
        let rejected = async_outer().await.unwrap_err();
        assert_eq!(
            rejected.rejection().map(fusebox::Error::key),
            Some("async-inner")
        );
        assert_eq!(inner.snapshot().rejected, count, "one attempt per call");
    }
    assert_eq!(failures_of("async-outer"), (1, State::Closed));
}

#[fusebox::circuit_breaker(key = "task-outer", registry = REGISTRY, window = 4, min_calls = 2)]
async fn waits_then_times_out(go: tokio::sync::oneshot::Receiver<()>) -> Result<u32, ApiError> {
    go.await.unwrap();
    Err(ApiError::Timeout)
}

#[fusebox::circuit_breaker(key = "task-inner", registry = REGISTRY)]
async fn rejected_elsewhere() -> Result<u32, ApiError> {
    Ok(1)
}

/// A rejection converted in another task on the same thread is not taken for this call's error.
#[tokio::test(flavor = "current_thread")]
async fn a_rejection_in_another_task_on_the_thread_does_not_hide_a_failure() {
    rejected_elsewhere().await.unwrap();
    REGISTRY.get("task-inner").unwrap().force_open();
    for _ in 0..2 {
        let (go, wait) = tokio::sync::oneshot::channel();
        let outer = tokio::spawn(waits_then_times_out(wait));
        tokio::task::yield_now().await; // the outer call is admitted and waits
        let other = tokio::spawn(async {
            assert!(
                rejected_elsewhere()
                    .await
                    .unwrap_err()
                    .rejection()
                    .is_some()
            );
            go.send(()).unwrap();
        });
        other.await.unwrap();
        assert_eq!(outer.await.unwrap(), Err(ApiError::Timeout));
    }
    // Two timeouts of two calls: open (its window starts empty again).
    assert_eq!(failures_of("task-outer").1, State::Open);
}

#[fusebox::circuit_breaker(key = "success-outer", registry = REGISTRY, failure = [Timeout], others = "success")]
fn counts_others(fail: bool) -> Result<u32, ApiError> {
    Ok(inner_of_success(fail)? + 1)
}

#[fusebox::circuit_breaker(key = "success-inner", registry = REGISTRY)]
fn inner_of_success(fail: bool) -> Result<u32, ApiError> {
    if fail {
        Err(ApiError::Declined { code: 51 })
    } else {
        Ok(1)
    }
}

#[test]
fn an_inner_rejection_is_no_success_under_others_success() {
    counts_others(false).unwrap();
    assert!(matches!(
        counts_others(true),
        Err(ApiError::Declined { .. })
    ));
    let outer = REGISTRY.get("success-outer").unwrap();
    assert_eq!(
        outer.snapshot().calls,
        2,
        "an `Ok` and a declined card: two successes"
    );
    REGISTRY.get("success-inner").unwrap().force_open();
    for _ in 0..3 {
        assert!(counts_others(false).unwrap_err().rejection().is_some());
    }
    assert_eq!(
        outer.snapshot().calls,
        2,
        "rejections of the inner breaker count as nothing"
    );
}

// ------------------------------------------------------------------ std::io::Error

#[fusebox::circuit_breaker(key = "io-kinds", registry = REGISTRY, failure = [TimedOut, ConnectionRefused], window = 10, min_calls = 4, failure_rate = 50)]
fn connect(kind: std::io::ErrorKind) -> std::io::Result<u32> {
    Err(std::io::Error::from(kind))
}

/// An `io::Error` behind an alias of the user's: the kinds written out.
type IoResult<T> = Result<T, std::io::Error>;

#[fusebox::circuit_breaker(key = "io-paths", registry = REGISTRY, failure = [std::io::ErrorKind::TimedOut], consecutive = 2)]
fn read_block(error: std::io::Error) -> IoResult<u32> {
    Err(error)
}

/// `failure = [TimedOut, ConnectionRefused]` on an `io::Result` counts those kinds only, and
/// the rejection of the opened circuit is an `io::Error` of kind `Other` carrying the
/// `fusebox::Error`: no fallback, no error type of one's own.
#[test]
fn an_io_error_is_classified_by_its_kind_and_a_rejection_becomes_one() {
    use std::io::ErrorKind::{ConnectionRefused, NotFound, PermissionDenied, TimedOut};
    for kind in [NotFound, PermissionDenied, NotFound, PermissionDenied] {
        assert_eq!(connect(kind).unwrap_err().kind(), kind);
    }
    let breaker = REGISTRY.get("io-kinds").unwrap();
    assert_eq!(breaker.snapshot().calls, 0, "other kinds are not counted");
    for kind in [TimedOut, ConnectionRefused, TimedOut, ConnectionRefused] {
        assert_eq!(connect(kind).unwrap_err().kind(), kind);
    }
    assert_eq!(breaker.state(), State::Open);
    let rejected = connect(TimedOut).unwrap_err();
    assert_eq!(rejected.kind(), std::io::ErrorKind::Other);
    let error = rejected
        .get_ref()
        .and_then(|e| e.downcast_ref::<fusebox::Error>())
        .expect("the rejection is the io::Error's inner error");
    assert!(error.is_circuit_open() && error.key() == "io-kinds");
    assert_eq!(rejected.to_string(), error.to_string());

    let paths = REGISTRY.get("io-paths").unwrap();
    for kind in [NotFound, NotFound, NotFound, TimedOut] {
        assert_eq!(read_block(kind.into()).unwrap_err().kind(), kind);
        assert_eq!(paths.state(), State::Closed);
    }
    assert_eq!(read_block(TimedOut.into()).unwrap_err().kind(), TimedOut);
    assert_eq!(paths.state(), State::Open);
}

static IO_ATTEMPTS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

#[fusebox::circuit_breaker(key = "io-retry", registry = REGISTRY, failure = [TimedOut], retry = 3)]
async fn fetch(kind: std::io::ErrorKind) -> std::io::Result<u32> {
    IO_ATTEMPTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    Err(kind.into())
}

/// The attempt driver classifies an `io::Error` by kind too: a timeout is retried, a missing
/// file is not.
#[tokio::test]
async fn an_async_io_result_with_retry_retries_the_listed_kinds_only() {
    use std::sync::atomic::Ordering::SeqCst;
    let kind = |result: std::io::Result<u32>| result.unwrap_err().kind();
    assert_eq!(
        kind(fetch(std::io::ErrorKind::NotFound).await),
        std::io::ErrorKind::NotFound
    );
    assert_eq!(IO_ATTEMPTS.swap(0, SeqCst), 1);
    assert_eq!(
        kind(fetch(std::io::ErrorKind::TimedOut).await),
        std::io::ErrorKind::TimedOut
    );
    assert_eq!(IO_ATTEMPTS.swap(0, SeqCst), 3);
}
