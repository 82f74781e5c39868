//! Fault injection through the layer (`CircuitBreakerLayer::chaos`): a key's rejections,
//! failures, `Retry-After` answers and latency reach the calls of a layer that opted in, as they
//! reach an annotated function's, and never those of a layer that did not.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use fusebox::chaos::Fault;
use fusebox::{Policy, Reason, State};
use fusebox_tower::{BoxError, CircuitBreakerLayer, HttpFailures};
use tower::{Layer, Service, ServiceExt, service_fn};

/// Opens after three failures of three calls; waits five seconds before one probe.
const TRIP_AT_3: Policy = Policy::new()
    .window(3)
    .min_calls(3)
    .failure_rate(100)
    .open_for(Duration::from_secs(5));

/// The inner service's error.
#[derive(Debug, PartialEq)]
struct Down(&'static str);

impl std::fmt::Display for Down {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Down {}

/// A service that answers its request, counting the calls that reach it.
fn backend(
    calls: Arc<AtomicU32>,
) -> impl Service<u32, Response = u32, Error = Down, Future: Send> + Clone {
    service_fn(move |n: u32| {
        calls.fetch_add(1, Ordering::SeqCst);
        async move { Ok(n) }
    })
}

fake_registry!(REJECT_CLOCK, REJECT);

#[tokio::test]
async fn an_injected_rejection_answers_as_an_open_circuit_without_calling_the_service_only_where_opted_in()
 {
    let calls = Arc::new(AtomicU32::new(0));
    let layer = CircuitBreakerLayer::new("chaos-layer-reject").registry(&REJECT);
    let mut opted = layer.clone().chaos().layer(backend(calls.clone()));
    let mut plain = layer.layer(backend(calls.clone()));
    REJECT
        .chaos()
        .inject("chaos-layer-reject", Fault::rejection().when(|n| n == 2));
    assert_eq!(opted.ready().await.unwrap().call(1).await.unwrap(), 1);
    let err = opted.ready().await.unwrap().call(2).await.unwrap_err();
    let rejected = err
        .downcast_ref::<fusebox::Error>()
        .expect("a boxed rejection");
    assert_eq!(rejected.reason(), Reason::Open);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "the rejected call never reached the service"
    );
    for n in 3..6 {
        assert_eq!(
            plain.ready().await.unwrap().call(n).await.unwrap(),
            n,
            "a layer without `chaos` is never touched"
        );
    }
    assert_eq!(opted.ready().await.unwrap().call(6).await.unwrap(), 6);
    let breaker = REJECT.get("chaos-layer-reject").unwrap();
    assert_eq!(breaker.snapshot().rejected, 1, "counted as a rejected call");
    assert_eq!(
        breaker.state(),
        State::Closed,
        "the circuit itself is untouched"
    );
}

fake_registry!(FAIL_CLOCK, FAIL);

#[tokio::test]
async fn an_injected_error_of_the_service_is_classified_counted_and_trips_the_circuit() {
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc = CircuitBreakerLayer::new("chaos-layer-fail")
        .registry(&FAIL)
        .policy(TRIP_AT_3)
        .chaos()
        .layer(backend(calls.clone()));
    FAIL.chaos()
        .inject("chaos-layer-fail", Fault::failure(|| Down("injected")));
    for n in 0..3 {
        let err: BoxError = svc.ready().await.unwrap().call(n).await.unwrap_err();
        assert_eq!(err.downcast_ref::<Down>(), Some(&Down("injected")));
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "an injected failure never calls the service"
    );
    assert_eq!(FAIL.get("chaos-layer-fail").unwrap().state(), State::Open);
    FAIL.chaos().clear("chaos-layer-fail");
    let err = svc.ready().await.unwrap().call(9).await.unwrap_err();
    assert_eq!(
        err.downcast_ref::<fusebox::Error>()
            .map(fusebox::Error::reason),
        Some(Reason::Open)
    );
}

fake_registry!(PUSH_CLOCK, PUSH);

#[tokio::test]
async fn an_injected_retry_after_response_is_pushback_through_the_http_classifier() {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let inner = service_fn(move |_req: http::Request<String>| {
        counter.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, Down>(http::Response::new(String::new())) }
    });
    let mut svc = CircuitBreakerLayer::new("chaos-layer-push")
        .registry(&PUSH)
        .policy(
            Policy::new()
                .window(1)
                .min_calls(1)
                .failure_rate(100)
                .open_for(Duration::from_secs(1)),
        )
        .failure(HttpFailures)
        .chaos()
        .layer(inner);
    let answer = |wait: Duration| {
        http::Response::builder()
            .status(503)
            .header("retry-after", wait.as_secs().to_string())
            .body(String::new())
            .unwrap()
    };
    PUSH.chaos().inject(
        "chaos-layer-push",
        Fault::retry_after(answer, Duration::from_secs(30)),
    );
    let response = svc
        .ready()
        .await
        .unwrap()
        .call(http::Request::new(String::new()))
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "30");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let breaker = PUSH.get("chaos-layer-push").unwrap();
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(
        breaker.snapshot().retry_after,
        Some(Duration::from_secs(30)),
        "the injected wait keeps it open"
    );
}

fake_registry!(SLOW_CLOCK, SLOW);

#[tokio::test(start_paused = true)]
async fn injected_latency_delays_the_call_on_tokio_clock_and_a_mistyped_value_is_not_injected() {
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc = CircuitBreakerLayer::new("chaos-layer-slow")
        .registry(&SLOW)
        .chaos()
        .layer(backend(calls.clone()));
    SLOW.chaos().inject(
        "chaos-layer-slow",
        Fault::latency(Duration::from_millis(300)),
    );
    let start = tokio::time::Instant::now();
    assert_eq!(svc.ready().await.unwrap().call(4).await.unwrap(), 4);
    assert_eq!(start.elapsed(), Duration::from_millis(300));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    SLOW.chaos().inject(
        "chaos-layer-slow",
        Fault::failure(|| "not the service's error"),
    );
    assert_eq!(
        svc.ready().await.unwrap().call(5).await.unwrap(),
        5,
        "a value of another type runs the call"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}
