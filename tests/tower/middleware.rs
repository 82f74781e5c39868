//! The reqwest-middleware middleware against real loopback servers: one circuit per host (two
//! ports, two keys, isolated), a fixed key shared by every host, and rejections that send nothing.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::support::serve;
use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use fusebox::{Policy, Reason, State};
use fusebox_reqwest::{CircuitBreakerMiddleware, rejection};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};

const TRIP_AT_3: Policy = Policy::new()
    .window(3)
    .min_calls(3)
    .failure_rate(100)
    .open_for(Duration::from_secs(30));

fake_registry!(CLOCK, REGISTRY);

/// A server answering `status` to every request, and its hit counter.
pub(crate) fn server(status: StatusCode) -> (SocketAddr, Arc<AtomicU32>) {
    let hits = Arc::new(AtomicU32::new(0));
    let counter = hits.clone();
    let app = Router::new().route(
        "/",
        get(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            async move { status }
        }),
    );
    (serve(app), hits)
}

pub(crate) fn client(middleware: CircuitBreakerMiddleware) -> ClientWithMiddleware {
    ClientBuilder::new(reqwest::Client::new())
        .with(middleware)
        .build()
}

#[tokio::test]
async fn one_circuit_per_host_and_two_hosts_are_isolated() {
    let (down, down_hits) = server(StatusCode::SERVICE_UNAVAILABLE);
    let (up, up_hits) = server(StatusCode::OK);
    let client = client(
        CircuitBreakerMiddleware::per_host()
            .registry(&REGISTRY)
            .policy(TRIP_AT_3),
    );
    for _ in 0..3 {
        let response = client.get(format!("http://{down}/")).send().await.unwrap();
        assert_eq!(
            response.status(),
            503,
            "a 5xx response is returned as it is"
        );
    }
    let down_key = format!("127.0.0.1:{}", down.port());
    assert_eq!(REGISTRY.get(&down_key).unwrap().state(), State::Open);

    let err = client
        .get(format!("http://{down}/"))
        .send()
        .await
        .unwrap_err();
    let rejected = rejection(&err).expect("a rejection carries a `fusebox::Error`");
    assert_eq!(
        (rejected.key(), rejected.reason()),
        (down_key.as_str(), Reason::Open)
    );
    assert_eq!(
        down_hits.load(Ordering::SeqCst),
        3,
        "a rejected request is not sent"
    );

    for _ in 0..5 {
        let response = client.get(format!("http://{up}/")).send().await.unwrap();
        assert_eq!(response.status(), 200, "the other host's circuit is closed");
    }
    assert_eq!(up_hits.load(Ordering::SeqCst), 5);
    let up_key = format!("127.0.0.1:{}", up.port());
    assert_eq!(REGISTRY.get(&up_key).unwrap().state(), State::Closed);
}

#[tokio::test]
async fn a_fixed_key_is_one_circuit_for_every_host_and_client_errors_do_not_count() {
    let (down, _) = server(StatusCode::TOO_MANY_REQUESTS);
    let (missing, _) = server(StatusCode::NOT_FOUND);
    let (up, up_hits) = server(StatusCode::OK);
    let client = client(
        CircuitBreakerMiddleware::new("reqwest-fixed")
            .registry(&REGISTRY)
            .policy(TRIP_AT_3),
    );
    for _ in 0..10 {
        let response = client
            .get(format!("http://{missing}/"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404);
    }
    let breaker = REGISTRY.get("reqwest-fixed").unwrap();
    assert_eq!(breaker.snapshot().failures, 0, "4xx does not count");
    for _ in 0..3 {
        client.get(format!("http://{down}/")).send().await.unwrap();
    }
    assert_eq!(breaker.state(), State::Open, "429 counts");
    let err = client
        .get(format!("http://{up}/"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(rejection(&err).map(|e| e.key()), Some("reqwest-fixed"));
    assert_eq!(up_hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_transport_error_counts() {
    // A port that was bound and released: connecting to it is refused.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let client = client(
        CircuitBreakerMiddleware::new("reqwest-transport")
            .registry(&REGISTRY)
            .policy(TRIP_AT_3),
    );
    for _ in 0..3 {
        let err = client
            .get(format!("http://{closed}/"))
            .send()
            .await
            .unwrap_err();
        assert!(
            rejection(&err).is_none(),
            "a connection error, not a rejection: {err}"
        );
    }
    assert_eq!(
        REGISTRY.get("reqwest-transport").unwrap().state(),
        State::Open
    );
}

static DECLARING: std::sync::LazyLock<fusebox::Registry> =
    std::sync::LazyLock::new(fusebox::Registry::new);

#[test]
fn a_fixed_key_middleware_declares_its_key_before_the_first_request() {
    let _middleware = CircuitBreakerMiddleware::new("middleware-only").registry(&DECLARING);
    DECLARING
        .load_toml("[breakers.middleware-only]\nfailure_rate = 30\n")
        .unwrap();
    assert_eq!(DECLARING.unknown_keys(), Vec::new());
    assert!(
        DECLARING.get("middleware-only").is_none(),
        "no breaker before the first request"
    );
}
