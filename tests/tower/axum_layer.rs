//! The axum layer on a real loopback server: a failing route opens the circuit, refusals are
//! `503` with `Retry-After` and a JSON body without reaching the handler, and the circuit
//! half-opens and closes after the wait (a fake clock).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use crate::support::{get as http_get, serve};
use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use fusebox::tower::CircuitBreakerLayer;
use fusebox::{Policy, State};

const TRIP_AT_3: Policy = Policy::new()
    .window(3)
    .min_calls(3)
    .failure_rate(100)
    .open_for(Duration::from_secs(30));

fake_registry!(CLOCK, REGISTRY);

static FAIL: AtomicBool = AtomicBool::new(true);
static HITS: AtomicU32 = AtomicU32::new(0);

async fn backend() -> (StatusCode, &'static str) {
    HITS.fetch_add(1, Ordering::SeqCst);
    if FAIL.load(Ordering::SeqCst) {
        (StatusCode::INTERNAL_SERVER_ERROR, "backend down")
    } else {
        (StatusCode::OK, "ok")
    }
}

static NOT_FOUND_HITS: AtomicU32 = AtomicU32::new(0);

async fn missing() -> StatusCode {
    NOT_FOUND_HITS.fetch_add(1, Ordering::SeqCst);
    StatusCode::NOT_FOUND
}

#[test]
fn a_failing_route_opens_then_503s_without_the_handler_then_half_opens_and_closes() {
    let app = Router::new().route("/backend", get(backend)).layer(
        CircuitBreakerLayer::new("axum-backend")
            .registry(&REGISTRY)
            .policy(TRIP_AT_3)
            .axum(),
    );
    let addr = serve(app);
    for _ in 0..3 {
        let reply = http_get(addr, "/backend");
        assert_eq!(reply.status, 500);
        assert_eq!(reply.body, "backend down");
    }
    let breaker = REGISTRY.get("axum-backend").unwrap();
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(HITS.load(Ordering::SeqCst), 3);

    CLOCK.advance(Duration::from_millis(500));
    for _ in 0..5 {
        let reply = http_get(addr, "/backend");
        assert_eq!(reply.status, 503);
        assert_eq!(reply.headers["retry-after"], "30", "29.5 s rounded up");
        assert_eq!(reply.headers["content-type"], "application/json");
        assert_eq!(
            reply.body,
            r#"{"error":"circuit_open","reason":"open","retry_after":30}"#
        );
    }
    assert_eq!(
        HITS.load(Ordering::SeqCst),
        3,
        "refused requests never reach the handler"
    );
    assert_eq!(
        http_get(addr, "/unknown").status,
        503,
        "`Router::layer` wraps the fallback too"
    );

    FAIL.store(false, Ordering::SeqCst);
    CLOCK.advance(Duration::from_millis(29_500));
    let probe = http_get(addr, "/backend");
    assert_eq!(
        (probe.status, probe.body.as_str()),
        (200, "ok"),
        "the probe reaches the handler"
    );
    assert_eq!(
        breaker.state(),
        State::Closed,
        "one successful probe closes it"
    );
    assert_eq!(http_get(addr, "/backend").status, 200);
    assert_eq!(HITS.load(Ordering::SeqCst), 5);
}

#[test]
fn client_errors_of_the_handler_do_not_open_the_circuit() {
    let app = Router::new().route("/missing", get(missing)).layer(
        CircuitBreakerLayer::new("axum-4xx")
            .registry(&REGISTRY)
            .policy(TRIP_AT_3)
            .axum(),
    );
    let addr = serve(app);
    for _ in 0..10 {
        assert_eq!(http_get(addr, "/missing").status, 404);
    }
    let breaker = REGISTRY.get("axum-4xx").unwrap();
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().failures, 0);
    assert_eq!(NOT_FOUND_HITS.load(Ordering::SeqCst), 10);
}
