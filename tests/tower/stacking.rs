//! Stacking on one key: the attribute over the tower layer or the reqwest middleware, a layer over
//! a layer, an annotated function over another. The innermost admission records each attempt;
//! the ones around it record nothing; cancelled calls leave nothing behind; unrelated calls on the
//! key are each recorded.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use fusebox::{Policy, State};
use fusebox_tower::{BoxError, CircuitBreakerLayer};
use tower::util::BoxCloneService;
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};

fake_registry!(CLOCK, REGISTRY);

/// Trips at 4 failures in 4 calls: one request of three failing attempts must not trip it.
const TRIP_AT_4: Policy = Policy::new()
    .window(10)
    .min_calls(4)
    .failure_rate(50)
    .open_for(Duration::from_secs(30));

#[derive(Debug)]
struct Failed;

impl From<fusebox::Error> for Failed {
    fn from(_: fusebox::Error) -> Self {
        Failed
    }
}

type Svc = BoxCloneService<(), (), BoxError>;

/// A service that fails every call, counting them.
fn failing(
    hits: &'static AtomicU32,
) -> impl Service<(), Response = (), Error = BoxError, Future: Send> + Clone + Send {
    service_fn(move |()| {
        hits.fetch_add(1, Ordering::SeqCst);
        async { Err::<(), BoxError>("down".into()) }
    })
}

/// `attempts` tries through the layer of `key` (never retrying a rejection).
async fn with_retries(svc: Svc, attempts: u32) -> Result<(), BoxError> {
    let mut last = Ok(());
    for _ in 0..attempts {
        last = svc.clone().oneshot(()).await;
        match &last {
            Err(e) if e.downcast_ref::<fusebox::Error>().is_some() => break,
            Err(_) => {}
            Ok(()) => break,
        }
    }
    last
}

fn layered(key: &'static str, hits: &'static AtomicU32) -> Svc {
    BoxCloneService::new(
        ServiceBuilder::new()
            .layer(
                CircuitBreakerLayer::new(key)
                    .registry(&REGISTRY)
                    .policy(TRIP_AT_4),
            )
            .service(failing(hits)),
    )
}

fn window(key: &str) -> (u32, u32, State) {
    let breaker = REGISTRY.get(key).expect("the key's breaker");
    let snapshot = breaker.snapshot();
    (snapshot.calls, snapshot.failures, breaker.state())
}

#[fusebox::circuit_breaker(key = "stack.tower", registry = REGISTRY, window = 10, min_calls = 4, failure_rate = 50, open_for = "30s")]
async fn over_layer(svc: Svc) -> Result<(), Failed> {
    with_retries(svc, 3).await.map_err(|_| Failed)
}

#[tokio::test]
async fn the_attribute_over_the_layer_records_each_attempt_once() {
    static HITS: AtomicU32 = AtomicU32::new(0);
    let svc = layered("stack.tower", &HITS);
    assert!(over_layer(svc).await.is_err());
    assert_eq!(HITS.load(Ordering::SeqCst), 3, "three attempts went out");
    assert_eq!(
        window("stack.tower"),
        (3, 3, State::Closed),
        "3 outcomes, not 4"
    );
}

#[tokio::test]
async fn a_layer_over_a_layer_records_each_attempt_once() {
    static HITS: AtomicU32 = AtomicU32::new(0);
    let inner = failing(&HITS);
    let svc: Svc = BoxCloneService::new(
        ServiceBuilder::new()
            .layer(
                CircuitBreakerLayer::new("stack.layers")
                    .registry(&REGISTRY)
                    .policy(TRIP_AT_4),
            )
            .layer(
                CircuitBreakerLayer::new("stack.layers")
                    .registry(&REGISTRY)
                    .policy(TRIP_AT_4),
            )
            .service(inner),
    );
    assert!(with_retries(svc, 3).await.is_err());
    assert_eq!(HITS.load(Ordering::SeqCst), 3);
    assert_eq!(
        window("stack.layers"),
        (3, 3, State::Closed),
        "3 outcomes, not 6"
    );
}

#[fusebox::circuit_breaker(key = "stack.attrs", registry = REGISTRY, window = 10, min_calls = 4, failure_rate = 50, open_for = "30s")]
async fn inner_call() -> Result<(), Failed> {
    Err(Failed)
}

#[fusebox::circuit_breaker(key = "stack.attrs", registry = REGISTRY, window = 10, min_calls = 4, failure_rate = 50, open_for = "30s")]
async fn outer_call() -> Result<(), Failed> {
    let mut last = Ok(());
    for _ in 0..3 {
        last = inner_call().await;
    }
    last
}

#[fusebox::circuit_breaker(key = "stack.sync", registry = REGISTRY, window = 10, min_calls = 4, failure_rate = 50, open_for = "30s")]
fn inner_sync() -> Result<(), Failed> {
    Err(Failed)
}

#[fusebox::circuit_breaker(key = "stack.sync", registry = REGISTRY, window = 10, min_calls = 4, failure_rate = 50, open_for = "30s")]
fn outer_sync() -> Result<(), Failed> {
    let _ = inner_sync();
    let _ = inner_sync();
    inner_sync()
}

#[tokio::test]
async fn an_annotated_function_over_another_on_its_key_records_the_inner_calls() {
    assert!(outer_call().await.is_err());
    assert_eq!(
        window("stack.attrs"),
        (3, 3, State::Closed),
        "3 outcomes, not 4"
    );
    assert!(
        outer_call().await.is_err(),
        "still closed: the first call recorded 3"
    );
    assert_eq!(window("stack.attrs").2, State::Open, "6 failures trip it");
}

#[test]
fn a_sync_function_over_another_on_its_key_records_the_inner_calls() {
    assert!(outer_sync().is_err());
    assert_eq!(
        window("stack.sync"),
        (3, 3, State::Closed),
        "3 outcomes, not 4"
    );
}

#[fusebox::circuit_breaker(key = "stack.cancel", registry = REGISTRY, window = 10, min_calls = 4, failure_rate = 50, open_for = "30s")]
async fn pending_inside(svc: Svc) -> Result<(), Failed> {
    svc.oneshot(()).await.map_err(|_| Failed)
}

#[fusebox::circuit_breaker(key = "stack.cancel", registry = REGISTRY, window = 10, min_calls = 4, failure_rate = 50, open_for = "30s")]
async fn alone() -> Result<(), Failed> {
    Err(Failed)
}

/// Polls `future` once, then drops it (a cancelled call).
fn poll_once_then_drop<F: Future>(future: F) {
    let mut cx = Context::from_waker(Waker::noop());
    let future = pin!(future);
    assert!(matches!(future.poll(&mut cx), Poll::Pending));
}

#[tokio::test]
async fn a_cancelled_stacked_call_leaves_no_mark() {
    let never = BoxCloneService::new(
        ServiceBuilder::new()
            .layer(
                CircuitBreakerLayer::new("stack.cancel")
                    .registry(&REGISTRY)
                    .policy(TRIP_AT_4),
            )
            .service(service_fn(|()| {
                std::future::pending::<Result<(), BoxError>>()
            })),
    );
    poll_once_then_drop(pending_inside(never.clone()));
    assert_eq!(
        window("stack.cancel"),
        (0, 0, State::Closed),
        "a cancellation counts nothing"
    );
    // The key's calls after it are recorded, each once.
    assert!(alone().await.is_err());
    assert_eq!(
        window("stack.cancel"),
        (1, 1, State::Closed),
        "a later call is recorded"
    );
    let failing_svc = layered("stack.cancel", {
        static HITS: AtomicU32 = AtomicU32::new(0);
        &HITS
    });
    assert!(pending_inside(failing_svc).await.is_err());
    assert_eq!(
        window("stack.cancel"),
        (2, 2, State::Closed),
        "a stacked call after it is recorded once"
    );
}

#[fusebox::circuit_breaker(key = "stack.concurrent", registry = REGISTRY, window = 10, min_calls = 4, failure_rate = 50, open_for = "30s")]
async fn waits_then_fails(go: tokio::sync::oneshot::Receiver<()>) -> Result<(), Failed> {
    let _ = go.await;
    Err(Failed)
}

#[tokio::test(flavor = "current_thread")]
async fn unrelated_concurrent_calls_on_a_stacking_key_are_each_recorded() {
    static HITS: AtomicU32 = AtomicU32::new(0);
    // A layer on the key makes it track stacking.
    let _svc = layered("stack.concurrent", &HITS);
    let (tx_a, rx_a) = tokio::sync::oneshot::channel();
    let (tx_b, rx_b) = tokio::sync::oneshot::channel();
    let a = tokio::spawn(waits_then_fails(rx_a));
    let b = tokio::spawn(waits_then_fails(rx_b));
    tokio::task::yield_now().await;
    tx_b.send(()).unwrap();
    tx_a.send(()).unwrap();
    assert!(a.await.unwrap().is_err());
    assert!(b.await.unwrap().is_err());
    assert_eq!(
        window("stack.concurrent"),
        (2, 2, State::Closed),
        "two calls, two outcomes"
    );
}

#[cfg(all(feature = "reqwest", feature = "axum"))]
mod over_the_middleware {
    use super::*;
    use axum::http::StatusCode;
    use fusebox_reqwest::CircuitBreakerMiddleware;
    use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};

    #[fusebox::circuit_breaker(key = "stack.reqwest", registry = REGISTRY, window = 10, min_calls = 4, failure_rate = 50, open_for = "30s")]
    async fn fetch(client: &ClientWithMiddleware, url: &str) -> Result<(), Failed> {
        let response = client.get(url).send().await.map_err(|_| Failed)?;
        if response.status().is_server_error() {
            return Err(Failed);
        }
        Ok(())
    }

    #[tokio::test]
    async fn the_attribute_over_the_middleware_records_each_attempt_once() {
        static HITS: AtomicU32 = AtomicU32::new(0);
        let app = axum::Router::new().route(
            "/",
            axum::routing::get(|| async {
                HITS.fetch_add(1, Ordering::SeqCst);
                StatusCode::SERVICE_UNAVAILABLE
            }),
        );
        let addr = crate::support::serve(app);
        let client = ClientBuilder::new(reqwest::Client::new())
            .with(
                CircuitBreakerMiddleware::new("stack.reqwest")
                    .registry(&REGISTRY)
                    .policy(TRIP_AT_4)
                    .retry(3, Duration::ZERO),
            )
            .build();
        assert!(fetch(&client, &format!("http://{addr}/")).await.is_err());
        assert_eq!(HITS.load(Ordering::SeqCst), 3, "three attempts went out");
        assert_eq!(
            window("stack.reqwest"),
            (3, 3, State::Closed),
            "3 outcomes, not 4"
        );
    }
}
