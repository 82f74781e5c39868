//! Fault injection through the reqwest middleware (`CircuitBreakerMiddleware::chaos`) against a
//! real loopback server: an injected rejection sends nothing, an injected `503` with
//! `Retry-After` is pushback, an injected failure is retried like a real one, and a middleware
//! that did not opt in is never touched.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::middleware::client;
use axum::http::StatusCode;
use fusebox::chaos::Fault;
use fusebox::{Policy, Reason, State};
use fusebox_reqwest::{CircuitBreakerMiddleware, rejection};

fake_registry!(CLOCK, REGISTRY);

/// A server answering `200` to every request, and its hit counter.
fn server() -> (SocketAddr, Arc<AtomicU32>) {
    crate::middleware::server(StatusCode::OK)
}

#[tokio::test]
async fn an_injected_rejection_sends_nothing_and_only_where_opted_in() {
    let (addr, hits) = server();
    let opted = client(
        CircuitBreakerMiddleware::new("chaos-mw-reject")
            .registry(&REGISTRY)
            .chaos(),
    );
    let plain = client(CircuitBreakerMiddleware::new("chaos-mw-reject").registry(&REGISTRY));
    REGISTRY
        .chaos()
        .inject("chaos-mw-reject", Fault::rejection().when(|n| n == 1));
    let err = opted
        .get(format!("http://{addr}/"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        rejection(&err).map(fusebox::Error::reason),
        Some(Reason::Open)
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "a rejected request is not sent"
    );
    REGISTRY
        .chaos()
        .inject("chaos-mw-reject", Fault::rejection());
    let response = plain.get(format!("http://{addr}/")).send().await.unwrap();
    assert_eq!(
        response.status(),
        200,
        "a middleware without `chaos` is never touched"
    );
    assert_eq!(
        REGISTRY.get("chaos-mw-reject").unwrap().snapshot().rejected,
        1
    );
    REGISTRY.chaos().clear("chaos-mw-reject");
}

#[tokio::test]
async fn an_injected_retry_after_status_is_a_503_with_retry_after_and_keeps_the_circuit_open() {
    let (addr, hits) = server();
    let policy = Policy::new()
        .window(1)
        .min_calls(1)
        .failure_rate(100)
        .open_for(Duration::from_secs(1));
    let client = client(
        CircuitBreakerMiddleware::new("chaos-mw-push")
            .registry(&REGISTRY)
            .policy(policy)
            .chaos(),
    );
    REGISTRY.chaos().inject(
        "chaos-mw-push",
        Fault::retry_after(
            |_| http::StatusCode::SERVICE_UNAVAILABLE,
            Duration::from_millis(29_500),
        ),
    );
    let response = client.get(format!("http://{addr}/")).send().await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(
        response.headers()["retry-after"],
        "30",
        "the wait in whole seconds, rounded up"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    let breaker = REGISTRY.get("chaos-mw-push").unwrap();
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(
        breaker.snapshot().retry_after,
        Some(Duration::from_secs(30))
    );
}

#[tokio::test]
async fn an_injected_failure_is_counted_and_retried_like_a_real_one() {
    let (addr, hits) = server();
    let policy = Policy::new().consecutive(1_000).retry_budget(0, 10);
    let client = client(
        CircuitBreakerMiddleware::new("chaos-mw-retry")
            .registry(&REGISTRY)
            .policy(policy)
            .retry(3, Duration::ZERO)
            .chaos(),
    );
    REGISTRY.chaos().inject(
        "chaos-mw-retry",
        Fault::failure(|| http::StatusCode::BAD_GATEWAY).when(|n| n <= 2),
    );
    let response = client.get(format!("http://{addr}/")).send().await.unwrap();
    assert_eq!(
        response.status(),
        200,
        "the third attempt reached the server"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    let snapshot = REGISTRY.get("chaos-mw-retry").unwrap().snapshot();
    assert_eq!(
        (snapshot.calls, snapshot.failures),
        (3, 2),
        "two injected failures and a success"
    );
}
