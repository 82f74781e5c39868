//! The tower layer's closed-path overhead over the bare service, next to tower-resilience 0.13's
//! circuit breaker on the same service, and the attribute's closed path, in one run.
//!
//! Every subject wraps the same inner service, `service_fn(|x| ready(Ok::<u64, Infallible>(x)))`.
//! One iteration is what a caller of a tower service does: `poll_ready` (polled once), `call`,
//! and one poll of the response future, with `Waker::noop()` inside a current-thread tokio
//! runtime's context (tower-resilience takes a tokio mutex; no future here ever waits). Every
//! breaker trips at 50 % over 100 calls and stays closed (only successes). No tracing subscriber
//! is installed.
//!
//! Cases (group `tower_closed`):
//! - `bare_service`: the inner service alone;
//! - `fusebox_layer`: `fusebox::tower::CircuitBreakerLayer::new(key)`;
//! - `fusebox_layer_key_fn`: the layer with a key taken from each request (one key);
//! - `tower_resilience`: `tower_resilience::circuitbreaker::CircuitBreakerLayer`;
//! - `bare_async_fn` and `attribute`: the same work as an `async fn`, bare and under
//!   `#[fusebox::circuit_breaker]` (the attribute's closed path, for comparison).
//!
//! Overhead of a subject = its time minus `bare_service` (`bare_async_fn` for the attribute).
//!
//! Run: `cargo bench -p fusebox-bench --bench tower`

use std::borrow::Cow;
use std::convert::Infallible;
use std::future::{Future, ready};
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use criterion::Criterion;
use fusebox::Policy;
use tower::{Layer, Service, service_fn};

/// The open wait of every breaker: far longer than a run.
const OPEN_WAIT: Duration = Duration::from_secs(60 * 60);

/// The policy of every fusebox subject: 50 % over the last 100 calls.
const POLICY: Policy = Policy::new()
    .window(100)
    .failure_rate(50)
    .open_for(OPEN_WAIT);

/// Polls `fut` once with a no-op waker; every benchmarked future is ready at once.
#[inline(always)]
fn poll_once<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => unreachable!("the benchmarked futures are ready at once"),
    }
}

/// `poll_ready`, `call`, one poll: one request through `svc`.
#[inline(always)]
fn request<S: Service<u64>>(svc: &mut S, x: u64) -> Result<S::Response, S::Error> {
    let mut cx = Context::from_waker(Waker::noop());
    match svc.poll_ready(&mut cx) {
        Poll::Ready(Ok(())) => {}
        _ => unreachable!("the benchmarked services are always ready"),
    }
    poll_once(svc.call(x))
}

/// The inner service every subject wraps.
fn inner() -> impl Service<u64, Response = u64, Error = Infallible, Future: Send> + Clone + Send {
    service_fn(|x: u64| ready(Ok::<u64, Infallible>(x)))
}

/// The attribute's error type: a refused call needs `From<fusebox::Error>`.
#[derive(Debug)]
enum AttrError {
    /// The breaker refused the call.
    Refused,
}

impl From<fusebox::Error> for AttrError {
    fn from(_: fusebox::Error) -> Self {
        AttrError::Refused
    }
}

/// The same work as the inner service, as an `async fn`.
async fn bare_async_fn(x: u64) -> Result<u64, AttrError> {
    ready(Ok(x)).await
}

/// The same work under the attribute, with the same policy.
#[fusebox::circuit_breaker(
    key = "bench-tower-attribute",
    window = 100,
    failure_rate = 50,
    open_for = "1h"
)]
async fn attribute(x: u64) -> Result<u64, AttrError> {
    ready(Ok(x)).await
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(1_000))
        .measurement_time(Duration::from_millis(3_000))
        .sample_size(50)
        .configure_from_args();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    let _context = runtime.enter();

    let mut bare = inner();
    let mut layer = fusebox::tower::CircuitBreakerLayer::new("bench-tower-layer")
        .policy(POLICY)
        .layer(inner());
    let mut layer_key_fn = fusebox::tower::CircuitBreakerLayer::new("unused")
        .policy(POLICY)
        .key_fn(|_: &u64| Cow::Borrowed("bench-tower-layer-key-fn"))
        .layer(inner());
    let mut resilience = tower_resilience::circuitbreaker::CircuitBreakerLayer::builder()
        .failure_rate_threshold(0.5)
        .sliding_window_size(100)
        .minimum_number_of_calls(10)
        .wait_duration_in_open(OPEN_WAIT)
        .build()
        .expect("a valid tower-resilience configuration")
        .layer(inner());

    // Each subject answers before it is timed.
    assert_eq!(request(&mut bare, 1).unwrap(), 1);
    assert_eq!(request(&mut layer, 2).unwrap(), 2);
    assert_eq!(request(&mut layer_key_fn, 3).unwrap(), 3);
    assert_eq!(request(&mut resilience, 4).unwrap(), 4);
    assert_eq!(poll_once(attribute(5)).unwrap(), 5);

    let mut group = c.benchmark_group("tower_closed");
    group.bench_function("bare_service", |b| {
        b.iter(|| request(&mut bare, black_box(1)))
    });
    group.bench_function("fusebox_layer", |b| {
        b.iter(|| request(&mut layer, black_box(1)))
    });
    group.bench_function("fusebox_layer_key_fn", |b| {
        b.iter(|| request(&mut layer_key_fn, black_box(1)))
    });
    group.bench_function("tower_resilience", |b| {
        b.iter(|| request(&mut resilience, black_box(1)))
    });
    group.bench_function("bare_async_fn", |b| {
        b.iter(|| poll_once(bare_async_fn(black_box(1))))
    });
    group.bench_function("attribute", |b| {
        b.iter(|| poll_once(attribute(black_box(1))))
    });
    group.finish();

    for key in [
        "bench-tower-layer",
        "bench-tower-layer-key-fn",
        "bench-tower-attribute",
    ] {
        let breaker = fusebox::registry()
            .get(key)
            .expect("registered by its subject");
        assert_eq!(
            breaker.state(),
            fusebox::State::Closed,
            "`{key}` stayed closed"
        );
    }
    c.final_summary();
}
