//! Pushback through the reqwest middleware and the tower layer: a `503` or `429` with
//! `Retry-After` (delta-seconds or an HTTP-date) keeps the circuit it opens open at least that
//! long, capped by `open_max`, on the fake clock (whose wall time is the Unix epoch plus the time
//! it was advanced by: the server below dates its answers by it); and the middleware's retries
//! wait one out only within their deadline (paused time).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::support::serve;
use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::get;
use fusebox::clock::{Clock, FakeClock};
use fusebox::{Policy, Reason, Registry, State};
use fusebox_reqwest::{CircuitBreakerMiddleware, rejection};
use fusebox_tower::{CircuitBreakerLayer, HttpFailures};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use tower::{Layer, Service, ServiceExt, service_fn};

/// Opens on the first counted failure, for one second unless pushback says longer.
const TRIP_AT_1: Policy = Policy::new()
    .consecutive(1)
    .open_for(Duration::from_secs(1));

/// What the server's `Retry-After` says.
#[derive(Clone, Copy)]
enum After {
    Seconds(u64),
    /// An HTTP-date this many seconds after the fake clock's wall time.
    DateIn(u64),
}

/// A server answering `status` with `Retry-After` to every request, and its hit counter.
fn server(status: StatusCode, after: After, clock: FakeClock) -> (SocketAddr, Arc<AtomicU32>) {
    let hits = Arc::new(AtomicU32::new(0));
    let counter = hits.clone();
    let app = Router::new().route(
        "/",
        get(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            let value = match after {
                After::Seconds(secs) => secs.to_string(),
                After::DateIn(secs) => {
                    httpdate::fmt_http_date(clock.wall_time() + Duration::from_secs(secs))
                }
            };
            async move { (status, [(header::RETRY_AFTER, value)]) }
        }),
    );
    (serve(app), hits)
}

fn client(middleware: CircuitBreakerMiddleware) -> ClientWithMiddleware {
    ClientBuilder::new(reqwest::Client::new())
        .with(middleware)
        .build()
}

/// One fake clock and registry per test: they advance their clocks on their own.
fn registry(clock: &FakeClock) -> &'static Registry {
    Box::leak(Box::new(Registry::with_clock(clock.clone())))
}

/// Sends one request: `Ok(status)` when it went out, `Err(rejection)` when the circuit rejected it.
async fn send(client: &ClientWithMiddleware, addr: SocketAddr) -> Result<u16, fusebox::Error> {
    match client.get(format!("http://{addr}/")).send().await {
        Ok(response) => Ok(response.status().as_u16()),
        Err(err) => Err(rejection(&err).expect("a rejection").clone()),
    }
}

/// The middleware's circuit `key` opens on a `status` answer whose `Retry-After` asks for 7
/// seconds: rejected (and nothing sent) until then, probed after.
async fn opens_for_seven_seconds(key: &'static str, status: StatusCode, after: After) {
    let clock = FakeClock::new();
    let registry = registry(&clock);
    let (addr, hits) = server(status, after, clock.clone());
    let client = client(
        CircuitBreakerMiddleware::new(key)
            .registry(registry)
            .policy(TRIP_AT_1),
    );
    assert_eq!(send(&client, addr).await, Ok(status.as_u16()));
    let breaker = registry.get(key).unwrap();
    assert_eq!(breaker.state(), State::Open);
    let rejected = send(&client, addr).await.unwrap_err();
    assert_eq!(rejected.reason(), Reason::Open);
    assert_eq!(
        rejected.retry_after(),
        Some(Duration::from_secs(7)),
        "the rejection says how long the server asked for, not the policy's 1 s"
    );
    clock.advance(Duration::from_millis(6_900));
    let rejected = send(&client, addr).await.unwrap_err();
    assert_eq!(rejected.retry_after(), Some(Duration::from_millis(100)));
    assert_eq!(hits.load(Ordering::SeqCst), 1, "nothing sent while open");
    clock.advance(Duration::from_millis(100));
    assert_eq!(
        send(&client, addr).await,
        Ok(status.as_u16()),
        "the probe goes out after 7 s"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_503_with_retry_after_seconds_opens_for_at_least_that_long() {
    opens_for_seven_seconds(
        "pushback-503-seconds",
        StatusCode::SERVICE_UNAVAILABLE,
        After::Seconds(7),
    )
    .await;
}

#[tokio::test]
async fn a_503_with_an_http_date_opens_until_that_date_on_the_breakers_clock() {
    opens_for_seven_seconds(
        "pushback-503-date",
        StatusCode::SERVICE_UNAVAILABLE,
        After::DateIn(7),
    )
    .await;
}

#[tokio::test]
async fn a_429_with_retry_after_opens_for_at_least_that_long() {
    opens_for_seven_seconds(
        "pushback-429",
        StatusCode::TOO_MANY_REQUESTS,
        After::Seconds(7),
    )
    .await;
}

#[tokio::test]
async fn the_wait_is_capped_by_open_max() {
    let clock = FakeClock::new();
    let registry = registry(&clock);
    let (addr, hits) = server(
        StatusCode::SERVICE_UNAVAILABLE,
        After::Seconds(3_600),
        clock.clone(),
    );
    let client = client(
        CircuitBreakerMiddleware::new("pushback-capped")
            .registry(registry)
            .policy(TRIP_AT_1.open_max(Duration::from_secs(30))),
    );
    assert_eq!(send(&client, addr).await, Ok(503));
    let rejected = send(&client, addr).await.unwrap_err();
    assert_eq!(rejected.retry_after(), Some(Duration::from_secs(30)));
    clock.advance(Duration::from_millis(29_900));
    assert!(send(&client, addr).await.is_err(), "open at 29.9 s");
    clock.advance(Duration::from_millis(100));
    assert_eq!(send(&client, addr).await, Ok(503), "probed at open_max");
    assert_eq!(hits.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_500_with_retry_after_and_a_date_in_the_past_are_not_pushback() {
    for (key, status, after) in [
        (
            "pushback-500",
            StatusCode::INTERNAL_SERVER_ERROR,
            After::Seconds(7),
        ),
        (
            "pushback-past",
            StatusCode::SERVICE_UNAVAILABLE,
            After::DateIn(0),
        ),
    ] {
        let clock = FakeClock::new();
        clock.advance(Duration::from_secs(100));
        let registry = registry(&clock);
        let (addr, _) = server(status, after, clock.clone());
        let client = client(
            CircuitBreakerMiddleware::new(key)
                .registry(registry)
                .policy(TRIP_AT_1),
        );
        assert_eq!(send(&client, addr).await, Ok(status.as_u16()));
        let rejected = send(&client, addr).await.unwrap_err();
        assert_eq!(
            rejected.retry_after(),
            Some(Duration::from_secs(1)),
            "{key}: the policy's wait"
        );
    }
}

#[tokio::test]
async fn the_tower_layer_with_http_failures_reads_retry_after() {
    let clock = FakeClock::new();
    let registry = registry(&clock);
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let backend = service_fn(move |_: ()| {
        counter.fetch_add(1, Ordering::SeqCst);
        async {
            let response = http::Response::builder()
                .status(503)
                .header("retry-after", "7")
                .body(())
                .unwrap();
            Ok::<_, std::convert::Infallible>(response)
        }
    });
    let mut svc = CircuitBreakerLayer::new("pushback-layer")
        .registry(registry)
        .policy(TRIP_AT_1)
        .failure(HttpFailures)
        .layer(backend);
    let response = svc.ready().await.unwrap().call(()).await.unwrap();
    assert_eq!(response.status(), 503);
    let breaker = registry.get("pushback-layer").unwrap();
    assert_eq!(breaker.state(), State::Open);
    clock.advance(Duration::from_millis(6_900));
    let err = svc.ready().await.unwrap().call(()).await.unwrap_err();
    let rejected = err.downcast_ref::<fusebox::Error>().expect("a rejection");
    assert_eq!(rejected.retry_after(), Some(Duration::from_millis(100)));
    clock.advance(Duration::from_millis(100));
    svc.ready().await.unwrap().call(()).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2, "probed after 7 s");
}

// ------------------------------------------------------------------ retries and the deadline

/// A client whose connections are not kept: an idle pooled connection has a reaper timer, which
/// paused time would jump to while a request waits on the network.
fn unpooled(middleware: CircuitBreakerMiddleware) -> ClientWithMiddleware {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    ClientBuilder::new(client).with(middleware).build()
}

/// The middleware's retries wait out a `Retry-After` only when the wait fits the deadline from
/// the first attempt (10 s unless set): a `503` asking for 20 s is returned at once, not slept
/// on; with room for one such wait, the second attempt's answer ends the request. Paused time:
/// the waits pass at once and `elapsed` is what a caller would wait.
#[tokio::test(start_paused = true)]
async fn a_retry_after_that_does_not_fit_the_deadline_ends_the_request_at_once() {
    let clock = FakeClock::new();
    let (addr, hits) = server(
        StatusCode::SERVICE_UNAVAILABLE,
        After::Seconds(20),
        clock.clone(),
    );
    let never_opens = Policy::new().consecutive(1_000);
    let middleware = |key: &'static str| {
        CircuitBreakerMiddleware::new(key)
            .registry(registry(&clock))
            .policy(never_opens)
            .retry(3, Duration::ZERO)
    };

    let started = tokio::time::Instant::now();
    assert_eq!(
        send(&unpooled(middleware("deadline-default")), addr).await,
        Ok(503)
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        1,
        "20 s does not fit 10 s: no retry"
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );

    hits.store(0, Ordering::SeqCst);
    let roomy = middleware("deadline-30s").deadline(Duration::from_secs(30));
    let started = tokio::time::Instant::now();
    assert_eq!(send(&unpooled(roomy), addr).await, Ok(503));
    assert_eq!(
        hits.load(Ordering::SeqCst),
        2,
        "a retry at 20 s; the next would start at 40 s, past the deadline"
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(20) && took < Duration::from_secs(30),
        "{took:?}"
    );
}
