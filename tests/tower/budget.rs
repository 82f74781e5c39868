//! The retry budget through tower's retry layer (`fusebox_tower::BudgetPolicy`) and the reqwest
//! middleware's retries: the same per-key budget as the attribute's `retry`.

use std::future::{Ready, ready};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use fusebox::{Policy, State};
use fusebox_tower::{BoxError, BudgetPolicy, CircuitBreakerLayer};
use tower::retry::Policy as RetryPolicy;
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};

/// Up to `.0` attempts in all, retrying every error that is not a rejection.
#[derive(Clone)]
struct Attempts(u32);

impl<Req: Clone, Res> RetryPolicy<Req, Res, BoxError> for Attempts {
    type Future = Ready<()>;

    fn retry(&mut self, _req: &mut Req, result: &mut Result<Res, BoxError>) -> Option<Ready<()>> {
        match result {
            Err(e) if e.downcast_ref::<fusebox::Error>().is_none() && self.0 > 1 => {
                self.0 -= 1;
                Some(ready(()))
            }
            _ => None,
        }
    }

    fn clone_request(&mut self, req: &Req) -> Option<Req> {
        Some(req.clone())
    }
}

fake_registry!(CLOCK, REGISTRY);

#[tokio::test]
async fn tower_retries_of_a_dead_backend_stay_within_the_budget() {
    const BUDGET: Policy = Policy::new().retry_budget(20, 10);
    let breaker = REGISTRY.breaker("tower-budget", BUDGET).unwrap();
    breaker.disable(); // only the budget limits the retries
    let calls = Arc::new(AtomicU64::new(0));
    let counter = calls.clone();
    let mut svc = ServiceBuilder::new()
        .retry(BudgetPolicy::new(breaker.clone(), Attempts(3)))
        .layer(
            CircuitBreakerLayer::new("tower-budget")
                .registry(&REGISTRY)
                .policy(BUDGET),
        )
        .service(service_fn(move |_: u32| {
            counter.fetch_add(1, Ordering::SeqCst);
            ready(Err::<u32, _>("down"))
        }));
    // 100 requests a second for a minute of fake time.
    const SECONDS: u64 = 60;
    let first = SECONDS * 100;
    for _ in 0..first {
        svc.ready().await.unwrap().call(1).await.unwrap_err();
        CLOCK.advance(Duration::from_millis(10));
    }
    let backend = calls.load(Ordering::SeqCst);
    // The floor: 10 retries a second, and at most one span's reserve (10 s) more.
    let floor = 10 * SECONDS;
    assert!(
        backend <= first + first / 5 + floor + 100,
        "{backend} backend calls for {first} requests"
    );
    assert!(
        backend - first >= (first / 5 + floor) * 9 / 10,
        "the budget gives out what it allows: {backend}"
    );
    let snapshot = breaker.snapshot();
    assert_eq!(snapshot.state, State::Disabled);
    assert!(snapshot.retries_rejected >= first / 2);
}

fake_registry!(HEALTHY_CLOCK, HEALTHY);

#[tokio::test]
async fn tower_retries_of_a_healthy_backend_are_never_rejected() {
    let breaker = HEALTHY
        .breaker("tower-healthy", Policy::new().retry_budget(20, 10))
        .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let mut svc = ServiceBuilder::new()
        .retry(BudgetPolicy::new(breaker.clone(), Attempts(3)))
        .layer(CircuitBreakerLayer::new("tower-healthy").registry(&HEALTHY))
        .service(service_fn(move |_: u32| {
            // One call in 40 fails; its retry succeeds.
            let n = counter.fetch_add(1, Ordering::SeqCst);
            ready(if n % 40 == 3 { Err("blip") } else { Ok(n) })
        }));
    for _ in 0..4_000 {
        svc.ready().await.unwrap().call(1).await.unwrap();
        HEALTHY_CLOCK.advance(Duration::from_millis(5));
    }
    assert_eq!(breaker.snapshot().retries_rejected, 0);
}

#[cfg(all(feature = "reqwest", feature = "axum"))]
mod reqwest_middleware_retries {
    use super::*;
    use crate::support::serve;
    use axum::Router;
    use axum::http::StatusCode;
    use axum::routing::{get, post};
    use fusebox_reqwest::CircuitBreakerMiddleware;
    use reqwest_middleware::ClientBuilder;

    fake_registry!(CLOCK, REGISTRY);

    #[tokio::test]
    async fn the_middleware_retries_through_the_budget_and_returns_the_last_response() {
        let hits = Arc::new(AtomicU32::new(0));
        let (get_hits, post_hits) = (hits.clone(), hits.clone());
        let app = Router::new()
            .route(
                "/",
                get(move || {
                    get_hits.fetch_add(1, Ordering::SeqCst);
                    async { StatusCode::SERVICE_UNAVAILABLE }
                }),
            )
            .route(
                "/order",
                post(move || {
                    post_hits.fetch_add(1, Ordering::SeqCst);
                    async { StatusCode::SERVICE_UNAVAILABLE }
                }),
            );
        let addr = serve(app);
        // No share of first attempts, a floor of 1 retry a second: 10 retries in the span (the
        // fake clock stands still). The circuit never opens.
        let policy = Policy::new().consecutive(1_000).retry_budget(0, 1);
        let client = ClientBuilder::new(reqwest::Client::new())
            .with(
                CircuitBreakerMiddleware::new("reqwest-budget")
                    .registry(&REGISTRY)
                    .policy(policy)
                    .retry(3, Duration::ZERO),
            )
            .build();
        for _ in 0..20 {
            let response = client.get(format!("http://{addr}/")).send().await.unwrap();
            assert_eq!(response.status(), 503, "the last attempt's response");
        }
        assert_eq!(
            hits.load(Ordering::SeqCst),
            30,
            "20 requests and the budget's 10 retries"
        );
        let snapshot = REGISTRY.get("reqwest-budget").unwrap().snapshot();
        assert_eq!(
            snapshot.retries_rejected, 15,
            "requests 6 to 20 had their first retry rejected"
        );
        assert_eq!(snapshot.retry_budget_balance, Some(0));

        // A POST is not idempotent: never retried.
        CLOCK.advance(Duration::from_secs(60));
        let response = client
            .post(format!("http://{addr}/order"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 503);
        assert_eq!(hits.load(Ordering::SeqCst), 31, "one attempt");
    }
}
