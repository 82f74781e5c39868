//! The tower layer on in-process services, driven by fake clocks: rejections, `poll_ready`,
//! cancellation of a half-open probe, panics, classification, per-request keys, and a key shared
//! with an annotated function.

use std::future::{Future, pending};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::common::ApiError;
use fusebox::{Policy, Reason, State, circuit_breaker};
use fusebox_tower::{BoxError, CircuitBreakerLayer};
use tower::{Layer, Service, ServiceExt, service_fn};

/// Opens after three failures in a row of three calls; waits five seconds before one probe.
const TRIP_AT_3: Policy = Policy::new()
    .window(3)
    .min_calls(3)
    .failure_rate(100)
    .open_for(Duration::from_secs(5));

/// Polls `fut` once without a runtime.
fn poll_once<F: Future>(fut: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}

/// A service that fails (`Err("down")`) while `fail` says so, counting the calls that reach it.
fn backend(
    calls: Arc<AtomicU32>,
    fail: bool,
) -> impl Service<u32, Response = u32, Error = &'static str, Future: Send> + Clone {
    service_fn(move |n: u32| {
        calls.fetch_add(1, Ordering::SeqCst);
        async move { if fail { Err("down") } else { Ok(n) } }
    })
}

fn rejection(err: &BoxError) -> &fusebox::Error {
    err.downcast_ref::<fusebox::Error>()
        .expect("a rejection is a boxed `fusebox::Error`")
}

// ---------------------------------------------------------------- rejection

fake_registry!(REJECT_CLOCK, REJECT);

#[tokio::test]
async fn opens_after_the_policy_failures_and_rejects_with_a_boxed_fusebox_error_without_calling_the_service()
 {
    let calls = Arc::new(AtomicU32::new(0));
    let layer = CircuitBreakerLayer::new("reject")
        .registry(&REJECT)
        .policy(TRIP_AT_3);
    let mut svc = layer.layer(backend(calls.clone(), true));
    for _ in 0..3 {
        let err = svc.ready().await.unwrap().call(1).await.unwrap_err();
        assert_eq!(err.to_string(), "down", "the inner error, boxed");
        assert!(err.downcast_ref::<fusebox::Error>().is_none());
    }
    assert_eq!(REJECT.get("reject").unwrap().state(), State::Open);
    let err = svc.ready().await.unwrap().call(1).await.unwrap_err();
    let rejected = rejection(&err);
    assert_eq!(rejected.key(), "reject");
    assert_eq!(rejected.reason(), Reason::Open);
    assert_eq!(rejected.retry_after(), Some(Duration::from_secs(5)));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "the rejected call never reached the service"
    );
}

// ---------------------------------------------------------------- poll_ready

fake_registry!(READY_CLOCK, READY);

#[tokio::test]
async fn poll_ready_takes_no_permit_even_when_a_probe_is_due() {
    let calls = Arc::new(AtomicU32::new(0));
    let layer = CircuitBreakerLayer::new("ready")
        .registry(&READY)
        .policy(TRIP_AT_3);
    let mut failing = layer.layer(backend(calls.clone(), true));
    for _ in 0..3 {
        let _ = failing.ready().await.unwrap().call(1).await;
    }
    READY_CLOCK.advance(Duration::from_secs(5));
    let mut svc = layer.layer(backend(calls.clone(), false));
    for _ in 0..100 {
        assert!(
            poll_once(pin!(std::future::poll_fn(|cx| svc.poll_ready(cx)))).is_ready(),
            "ready when the inner service is"
        );
    }
    let breaker = READY.get("ready").unwrap();
    assert_eq!(breaker.state(), State::Open, "readiness moved nothing");
    assert_eq!(
        breaker.snapshot().probes_in_flight,
        0,
        "readiness took no probe slot"
    );
    assert_eq!(
        svc.call(7).await.unwrap(),
        7,
        "the one probe is still there for `call`"
    );
    assert_eq!(breaker.state(), State::Closed);
}

// ---------------------------------------------------------------- cancellation

fake_registry!(CANCEL_CLOCK, CANCEL);

#[test]
fn dropping_the_response_future_of_a_half_open_probe_frees_the_probe_slot() {
    let layer = CircuitBreakerLayer::new("cancel")
        .registry(&CANCEL)
        .policy(TRIP_AT_3);
    let breaker = CANCEL.breaker("cancel", TRIP_AT_3).unwrap();
    breaker.force_open();
    breaker.reset();
    let mut failing = layer.layer(service_fn(|_: u32| async { Err::<u32, _>("down") }));
    for _ in 0..3 {
        let mut fut = pin!(failing.call(1));
        assert!(poll_once(fut.as_mut()).is_ready());
    }
    assert_eq!(breaker.state(), State::Open);
    CANCEL_CLOCK.advance(Duration::from_secs(5));

    let mut hanging = layer.layer(service_fn(|_: u32| pending::<Result<u32, &str>>()));
    let probe = hanging.call(1);
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(breaker.snapshot().probes_in_flight, 1);
    let mut second = pin!(hanging.call(2));
    match poll_once(second.as_mut()) {
        Poll::Ready(Err(err)) => assert_eq!(rejection(&err).reason(), Reason::HalfOpenFull),
        other => panic!("the only probe slot is taken, expected a rejection: {other:?}"),
    }
    drop(probe);
    assert_eq!(
        breaker.snapshot().probes_in_flight,
        0,
        "the dropped probe gave its slot back"
    );
    assert_eq!(
        breaker.state(),
        State::HalfOpen,
        "a cancellation counts nothing"
    );
    let snap = breaker.snapshot();
    let mut ok = layer.layer(service_fn(|n: u32| async move { Ok::<_, &str>(n) }));
    let mut next = pin!(ok.call(3));
    assert!(
        matches!(poll_once(next.as_mut()), Poll::Ready(Ok(3))),
        "the next call probes"
    );
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(snap.failures, breaker.snapshot().failures);
}

// ---------------------------------------------------------------- panics

fake_registry!(PANIC_CLOCK, PANIC);

#[test]
fn a_panic_while_polling_the_inner_future_counts_as_a_failure() {
    let layer = CircuitBreakerLayer::new("panic-poll")
        .registry(&PANIC)
        .policy(TRIP_AT_3);
    let mut svc = layer.layer(service_fn(|_: u32| async {
        if true {
            panic!("handler bug");
        }
        Ok::<u32, &str>(0)
    }));
    let mut fut = Box::pin(svc.call(1));
    let caught = catch_unwind(AssertUnwindSafe(|| poll_once(fut.as_mut())));
    assert!(caught.is_err(), "the panic propagates");
    // A runtime drops the task's future after catching the panic, outside the unwinding.
    drop(fut);
    let snap = PANIC.get("panic-poll").unwrap().snapshot();
    assert_eq!((snap.calls, snap.failures), (1, 1));
}

#[test]
fn a_panic_in_the_inner_services_call_counts_as_a_failure() {
    let layer = CircuitBreakerLayer::new("panic-call")
        .registry(&PANIC)
        .policy(TRIP_AT_3);
    let mut svc = layer.layer(service_fn(
        |n: u32| -> std::future::Ready<Result<u32, &str>> {
            assert!(n < 10, "bad request");
            std::future::ready(Ok(n))
        },
    ));
    let caught = catch_unwind(AssertUnwindSafe(|| drop(svc.call(99))));
    assert!(caught.is_err());
    let snap = PANIC.get("panic-call").unwrap().snapshot();
    assert_eq!((snap.calls, snap.failures), (1, 1));
}

// ---------------------------------------------------------------- classification

fake_registry!(CLASSIFY_CLOCK, CLASSIFY);

#[tokio::test]
async fn the_classifier_decides_what_counts_and_uncounted_errors_pass_through() {
    let layer = CircuitBreakerLayer::new("classify")
        .registry(&CLASSIFY)
        .policy(TRIP_AT_3)
        .failure(|r: &Result<u32, &'static str>| matches!(r, Err("timeout") | Ok(503)));
    let mut svc = layer.layer(service_fn(|n: u32| async move {
        match n {
            0 => Err("timeout"),
            1 => Err("declined"),
            n => Ok(n),
        }
    }));
    for _ in 0..10 {
        let err = svc.ready().await.unwrap().call(1).await.unwrap_err();
        assert_eq!(err.to_string(), "declined", "passed through, boxed");
    }
    let breaker = CLASSIFY.get("classify").unwrap();
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.calls, snap.failures),
        (0, 0),
        "business errors are not recorded"
    );
    svc.ready().await.unwrap().call(503).await.unwrap();
    svc.ready().await.unwrap().call(0).await.unwrap_err();
    svc.ready().await.unwrap().call(200).await.unwrap();
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.calls, snap.failures),
        (3, 2),
        "an `Ok` the classifier accepts is a failure"
    );
}

#[tokio::test]
async fn with_others_success_an_error_the_classifier_rejects_is_a_success() {
    let layer = CircuitBreakerLayer::new("classify-others")
        .registry(&CLASSIFY)
        .policy(TRIP_AT_3.others(fusebox::Others::Success))
        .failure(|r: &Result<u32, &'static str>| matches!(r, Err("timeout")));
    let mut svc = layer.layer(service_fn(|n: u32| async move {
        match n {
            0 => Err("timeout"),
            _ => Err("declined"),
        }
    }));
    for _ in 0..2 {
        let err = svc.ready().await.unwrap().call(1).await.unwrap_err();
        assert_eq!(err.to_string(), "declined", "passed through, boxed");
    }
    svc.ready().await.unwrap().call(0).await.unwrap_err();
    let breaker = CLASSIFY.get("classify-others").unwrap();
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.calls, snap.failures, snap.state),
        (3, 1, State::Closed),
        "two declined calls are successes: 1 failure of 3, under 100 %"
    );
}

// ---------------------------------------------------------------- per-request keys

fake_registry!(KEYS_CLOCK, KEYS);

#[tokio::test]
async fn key_fn_gives_each_key_its_own_circuit() {
    let layer = CircuitBreakerLayer::new("unused")
        .registry(&KEYS)
        .policy(TRIP_AT_3)
        .key_fn(|req: &(String, bool)| req.0.as_str().into());
    let mut svc = layer.layer(service_fn(|(_, fail): (String, bool)| async move {
        if fail { Err("down") } else { Ok(()) }
    }));
    for _ in 0..3 {
        let _ = svc.ready().await.unwrap().call(("a".into(), true)).await;
    }
    let err = svc
        .ready()
        .await
        .unwrap()
        .call(("a".into(), false))
        .await
        .unwrap_err();
    assert_eq!(rejection(&err).key(), "a");
    svc.ready()
        .await
        .unwrap()
        .call(("b".into(), false))
        .await
        .unwrap();
    assert_eq!(KEYS.get("a").unwrap().state(), State::Open);
    assert_eq!(KEYS.get("b").unwrap().state(), State::Closed);
    assert!(
        KEYS.get("unused").is_none(),
        "the fixed key is replaced, not registered"
    );
}

// ---------------------------------------------------------------- shared with the attribute

fake_registry!(SHARED_CLOCK, SHARED);

#[circuit_breaker(key = "shared-a", registry = SHARED, window = 3, min_calls = 3, failure_rate = 100, open_for = "5s", failure = [Timeout])]
fn annotated_a(fail: bool) -> Result<u32, ApiError> {
    if fail { Err(ApiError::Timeout) } else { Ok(1) }
}

#[circuit_breaker(key = "shared-b", registry = SHARED, window = 3, min_calls = 3, failure_rate = 100, open_for = "5s", failure = [Timeout])]
fn annotated_b(fail: bool) -> Result<u32, ApiError> {
    if fail { Err(ApiError::Timeout) } else { Ok(1) }
}

#[tokio::test]
async fn tripping_a_key_through_the_attribute_rejects_through_the_layer() {
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc = CircuitBreakerLayer::new("shared-a")
        .registry(&SHARED)
        .policy(TRIP_AT_3)
        .layer(backend(calls.clone(), false));
    assert_eq!(svc.ready().await.unwrap().call(1).await.unwrap(), 1);
    for _ in 0..3 {
        assert_eq!(annotated_a(true), Err(ApiError::Timeout));
    }
    let err = svc.ready().await.unwrap().call(1).await.unwrap_err();
    assert_eq!(rejection(&err).key(), "shared-a");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn tripping_a_key_through_the_layer_rejects_through_the_attribute() {
    assert_eq!(annotated_b(false), Ok(1));
    let mut svc = CircuitBreakerLayer::new("shared-b")
        .registry(&SHARED)
        .policy(TRIP_AT_3)
        .layer(backend(Arc::default(), true));
    for _ in 0..3 {
        let _ = svc.ready().await.unwrap().call(1).await;
    }
    let rejected = annotated_b(false).unwrap_err();
    assert_eq!(rejected.rejection().map(|e| e.key()), Some("shared-b"));
}

// ---------------------------------------------------------------- events

fake_registry!(EVENTS_CLOCK, EVENTS);

#[tokio::test]
async fn transitions_name_the_layer_as_the_calling_function() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = seen.clone();
    EVENTS.on_transition(move |t| {
        sink.lock()
            .unwrap()
            .push((t.key.to_owned(), t.to, t.function.to_owned()));
    });
    let mut svc = CircuitBreakerLayer::new("events")
        .registry(&EVENTS)
        .policy(TRIP_AT_3)
        .layer(backend(Arc::default(), true));
    for _ in 0..3 {
        let _ = svc.ready().await.unwrap().call(1).await;
    }
    assert_eq!(
        *seen.lock().unwrap(),
        [(
            "events".to_owned(),
            State::Open,
            "fusebox_tower::CircuitBreakerLayer".to_owned()
        )]
    );
}

// ---------------------------------------------------------------- bad input

fake_registry!(BAD_CLOCK, BAD);

#[tokio::test]
async fn an_invalid_policy_runs_the_default_instead_of_panicking() {
    let mut svc = CircuitBreakerLayer::new("bad-policy")
        .registry(&BAD)
        .policy(Policy::new().window(0))
        .layer(backend(Arc::default(), false));
    assert_eq!(svc.ready().await.unwrap().call(4).await.unwrap(), 4);
    assert_eq!(BAD.get("bad-policy").unwrap().policy(), Policy::DEFAULT);
}

// ------------------------------------------------------- a layer's key is declared

static DECLARING: std::sync::LazyLock<fusebox::Registry> =
    std::sync::LazyLock::new(fusebox::Registry::new);

#[test]
fn a_layer_s_fixed_key_is_declared_before_its_breaker_exists() {
    let layer = CircuitBreakerLayer::new("layer-only")
        .registry(&DECLARING)
        .policy(Policy::new().window(5));
    let events = crate::common::capture::capture(|| {
        DECLARING
            .load_toml("[breakers.layer-only]\nfailure_rate = 30\n[breakers.layer-onyl]\nfailure_rate = 30\n")
            .unwrap();
    });
    let unknown = DECLARING.unknown_keys();
    assert_eq!(
        unknown.iter().map(|u| u.key.as_str()).collect::<Vec<_>>(),
        ["layer-onyl"],
        "the layer's key is declared; a misspelling of it is not"
    );
    assert_eq!(unknown[0].closest, ["layer-only"]);
    let warned: Vec<&str> = events
        .iter()
        .filter(|e| e.level == tracing::Level::WARN)
        .filter_map(|e| e.fields.get("key").map(String::as_str))
        .collect();
    assert_eq!(warned, ["layer-onyl"]);
    // Overrides of it are validated against the layer's policy (a count window of 5).
    let err = DECLARING
        .load_toml("[breakers.layer-only]\nmin_calls = 50\n")
        .unwrap_err();
    assert!(err.to_string().contains("at most `window`"), "{err}");
    let _service = layer.layer(service_fn(|()| async { Ok::<_, ApiError>(()) }));
    assert_eq!(
        DECLARING
            .get("layer-only")
            .unwrap()
            .policy()
            .settings()
            .failure_rate,
        Some(30),
        "the override applies to the breaker the layer creates"
    );
}

// ---------------------------------------------------------------- adaptive bulkhead

fake_registry!(ADAPTIVE_CLOCK, ADAPTIVE);

#[test]
fn the_layer_holds_calls_to_the_adaptive_limit() {
    let policy = Policy::new().adaptive_concurrency(2, 200);
    let layer = CircuitBreakerLayer::new("adaptive")
        .registry(&ADAPTIVE)
        .policy(policy);
    let mut hanging = layer.layer(service_fn(|_: u32| pending::<Result<u32, &str>>()));
    let mut calls: Vec<_> = (0..20).map(|n| Box::pin(hanging.call(n))).collect();
    for call in &mut calls {
        assert!(poll_once(call.as_mut()).is_pending());
    }
    let breaker = ADAPTIVE.get("adaptive").unwrap();
    let snap = breaker.snapshot();
    assert_eq!((snap.in_flight, snap.concurrency_limit), (20, Some(20)));
    let mut over = pin!(hanging.call(21));
    match poll_once(over.as_mut()) {
        Poll::Ready(Err(err)) => assert_eq!(rejection(&err).reason(), Reason::BulkheadFull),
        other => panic!("the adaptive limit is 20, expected a rejection: {other:?}"),
    }
    drop(calls);
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.in_flight, snap.concurrency_limit),
        (0, Some(20)),
        "cancelled calls free their slots and teach the limit nothing"
    );
}

// ---------------------------------------------------------------- the kept circuit

fake_registry!(KEPT_CLOCK, KEPT);

#[test]
fn a_layered_service_follows_a_reconfiguration_of_its_key() {
    let layer = CircuitBreakerLayer::new("kept-reconfigured")
        .registry(&KEPT)
        .policy(TRIP_AT_3);
    let mut svc = layer.layer(service_fn(|_: u32| async { Err::<u32, _>("down") }));
    let mut fut = pin!(svc.call(1));
    assert!(poll_once(fut.as_mut()).is_ready());
    assert_eq!(
        KEPT.get("kept-reconfigured").unwrap().state(),
        State::Closed
    );
    // One failure in a row now opens: the service's next call reports to the new breaker.
    KEPT.configure(
        "kept-reconfigured",
        fusebox::PolicyPatch::new().consecutive(1),
    )
    .unwrap();
    let mut fut = pin!(svc.call(2));
    assert!(poll_once(fut.as_mut()).is_ready());
    assert_eq!(
        KEPT.get("kept-reconfigured").unwrap().state(),
        State::Open,
        "the failure reached the reconfigured breaker"
    );
    let mut fut = pin!(svc.call(3));
    match poll_once(fut.as_mut()) {
        Poll::Ready(Err(err)) => assert_eq!(rejection(&err).reason(), Reason::Open),
        other => panic!("the open breaker rejects: {other:?}"),
    }
}

#[test]
fn a_response_future_that_outlives_its_service_still_reports() {
    let layer = CircuitBreakerLayer::new("kept-outlived")
        .registry(&KEPT)
        .policy(TRIP_AT_3);
    let mut futures = Vec::new();
    for n in 0..3 {
        // Each service goes out of scope before its future is polled.
        let mut svc = layer.layer(service_fn(|_: u32| async { Err::<u32, _>("down") }));
        futures.push(Box::pin(svc.call(n)));
    }
    let breaker = KEPT.get("kept-outlived").unwrap();
    assert_eq!(breaker.state(), State::Closed, "nothing reported yet");
    for mut fut in futures {
        assert!(poll_once(fut.as_mut()).is_ready());
    }
    assert_eq!(
        breaker.state(),
        State::Open,
        "the three failures reached the breaker"
    );
}
