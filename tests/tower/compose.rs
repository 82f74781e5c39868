//! The order of the breaker and tower's own retry and timeout layers: which order counts every
//! attempt. The rule of `fusebox_tower` and `guide::tower`: `retry(breaker(timeout(service)))`.

use std::future::{Ready, ready};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use fusebox::{Policy, State};
use fusebox_tower::{BoxError, CircuitBreakerLayer};
use tower::retry::{Policy as RetryPolicy, RetryLayer};
use tower::timeout::TimeoutLayer;
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};

const TRIP_AT_3: Policy = Policy::new()
    .window(3)
    .min_calls(3)
    .failure_rate(100)
    .open_for(Duration::from_secs(5));

/// Errors a retry policy can look into.
trait Rejection {
    fn is_rejected(&self) -> bool;
}

impl Rejection for BoxError {
    fn is_rejected(&self) -> bool {
        self.downcast_ref::<fusebox::Error>().is_some()
    }
}

impl Rejection for &'static str {
    fn is_rejected(&self) -> bool {
        false
    }
}

/// Up to `.0` attempts in all; never retries a rejected call (an open circuit fails fast).
#[derive(Clone)]
struct Attempts(u32);

impl<Req: Clone, Res, E: Rejection> RetryPolicy<Req, Res, E> for Attempts {
    type Future = Ready<()>;

    fn retry(&mut self, _req: &mut Req, result: &mut Result<Res, E>) -> Option<Ready<()>> {
        match result {
            Err(e) if !e.is_rejected() && self.0 > 1 => {
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

fn failing(
    calls: Arc<AtomicU32>,
) -> impl Service<u32, Response = u32, Error = &'static str, Future: Send> + Clone {
    service_fn(move |_: u32| {
        calls.fetch_add(1, Ordering::SeqCst);
        ready(Err::<u32, _>("down"))
    })
}

fake_registry!(CLOCK, REGISTRY);

#[tokio::test]
async fn breaker_inside_retry_counts_every_attempt_and_a_rejection_stops_the_retries() {
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc = ServiceBuilder::new()
        .layer(RetryLayer::new(Attempts(3)))
        .layer(
            CircuitBreakerLayer::new("retry-outside")
                .registry(&REGISTRY)
                .policy(TRIP_AT_3),
        )
        .service(failing(calls.clone()));
    svc.ready().await.unwrap().call(1).await.unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let breaker = REGISTRY.get("retry-outside").unwrap();
    assert_eq!(
        breaker.state(),
        State::Open,
        "three attempts, three failures: the policy's `min_calls = 3` is met by one request"
    );

    let err = svc.ready().await.unwrap().call(1).await.unwrap_err();
    assert!(err.downcast_ref::<fusebox::Error>().is_some());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "rejected at once, not retried"
    );
}

#[tokio::test]
async fn breaker_outside_retry_counts_one_outcome_per_request() {
    let calls = Arc::new(AtomicU32::new(0));
    let mut svc = ServiceBuilder::new()
        .layer(
            CircuitBreakerLayer::new("retry-inside")
                .registry(&REGISTRY)
                .policy(TRIP_AT_3),
        )
        .layer(RetryLayer::new(Attempts(3)))
        .service(failing(calls.clone()));
    svc.ready().await.unwrap().call(1).await.unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let snap = REGISTRY.get("retry-inside").unwrap().snapshot();
    assert_eq!(
        (snap.calls, snap.failures),
        (1, 1),
        "three attempts, one failure"
    );
}

fn slow() -> impl Service<u32, Response = u32, Error = &'static str, Future: Send> + Clone {
    service_fn(|n: u32| async move {
        tokio::time::sleep(Duration::from_secs(10)).await;
        Ok(n)
    })
}

#[tokio::test(start_paused = true)]
async fn a_timeout_inside_the_breaker_counts_as_a_failure() {
    let mut svc = ServiceBuilder::new()
        .layer(
            CircuitBreakerLayer::new("timeout-inside")
                .registry(&REGISTRY)
                .policy(TRIP_AT_3),
        )
        .layer(TimeoutLayer::new(Duration::from_secs(1)))
        .service(slow());
    let err = svc.ready().await.unwrap().call(1).await.unwrap_err();
    assert!(err.is::<tower::timeout::error::Elapsed>(), "{err}");
    let snap = REGISTRY.get("timeout-inside").unwrap().snapshot();
    assert_eq!((snap.calls, snap.failures), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn a_timeout_outside_the_breaker_cancels_the_call_and_counts_nothing() {
    let mut svc = ServiceBuilder::new()
        .layer(TimeoutLayer::new(Duration::from_secs(1)))
        .layer(
            CircuitBreakerLayer::new("timeout-outside")
                .registry(&REGISTRY)
                .policy(TRIP_AT_3),
        )
        .service(slow());
    for _ in 0..5 {
        let err = svc.ready().await.unwrap().call(1).await.unwrap_err();
        assert!(err.is::<tower::timeout::error::Elapsed>(), "{err}");
    }
    let breaker = REGISTRY.get("timeout-outside").unwrap();
    let snap = breaker.snapshot();
    assert_eq!(
        (snap.calls, snap.failures),
        (0, 0),
        "five timeouts, nothing counted"
    );
    assert_eq!(breaker.state(), State::Closed);
}

fn search_backend() -> impl Service<u32, Response = u32, Error = &'static str, Future: Send> + Clone
{
    slow()
}

#[tokio::test(start_paused = true)]
async fn the_readme_order_counts_every_timed_out_attempt() {
    let service = ServiceBuilder::new()
        .layer(RetryLayer::new(Attempts(3))) // outermost: each attempt…
        .layer(CircuitBreakerLayer::new("search")) // …is admitted and counted…
        .layer(TimeoutLayer::new(Duration::from_secs(2))) // …and a timed-out one is a failure
        .service(search_backend());
    let err = service.oneshot(7).await.unwrap_err();
    assert!(err.is::<tower::timeout::error::Elapsed>(), "{err}");
    let snap = fusebox::registry().get("search").unwrap().snapshot();
    assert_eq!((snap.calls, snap.failures), (3, 3));
}
