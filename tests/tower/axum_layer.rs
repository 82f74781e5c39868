//! The axum layer on a real loopback server: a failing route opens the circuit, rejections are
//! `503` with `Retry-After` and a JSON body without reaching the handler, and the circuit
//! half-opens and closes after the wait (a fake clock); a request adaptive throttling sheds is a
//! `503` with the reason `throttled` while the circuit stays closed.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use crate::support::{get as http_get, serve};
use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use fusebox::{Policy, State};
use fusebox_tower::CircuitBreakerLayer;

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
        "rejected requests never reach the handler"
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

static THROTTLED_HITS: AtomicU32 = AtomicU32::new(0);

/// Always down.
async fn browning_out() -> StatusCode {
    THROTTLED_HITS.fetch_add(1, Ordering::SeqCst);
    StatusCode::INTERNAL_SERVER_ERROR
}

#[test]
fn a_throttled_request_is_a_503_with_reason_throttled_and_the_circuit_stays_closed() {
    // No rule trips within the test (a run of 1000 failures), so only throttling sheds.
    let policy = Policy::new()
        .window(10)
        .min_calls(10)
        .rate_off()
        .consecutive(1000)
        .throttle(1.0);
    let app = Router::new().route("/browning", get(browning_out)).layer(
        CircuitBreakerLayer::new("axum-throttled")
            .registry(&REGISTRY)
            .policy(policy)
            .axum(),
    );
    let addr = serve(app);
    for _ in 0..10 {
        assert_eq!(http_get(addr, "/browning").status, 500);
    }
    // p = 10 / 11 of the requests are shed before the handler (the window stays all failures).
    let mut shed = 0;
    for _ in 0..100 {
        let reply = http_get(addr, "/browning");
        match reply.status {
            503 => {
                assert_eq!(
                    reply.body,
                    r#"{"error":"circuit_open","reason":"throttled","retry_after":1}"#
                );
                assert_eq!(reply.headers["retry-after"], "1", "no wait: the least");
                shed += 1;
            }
            500 => {}
            other => panic!("status {other}"),
        }
    }
    assert!(
        (75..=100).contains(&shed),
        "{shed} of 100 shed at p = 10/11"
    );
    assert_eq!(THROTTLED_HITS.load(Ordering::SeqCst), 110 - shed);
    let breaker = REGISTRY.get("axum-throttled").unwrap();
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().throttled, u64::from(shed));
}
