//! The subjects of `benches/tower.rs` (timed) and `examples/tower_paths.rs` (instruction counts):
//! the same inner service bare, under the fusebox layer, under tower-resilience's breaker, and the
//! same work as an `async fn`, bare and under the attribute. Every breaker trips at 50 % over 100
//! calls and stays closed (only successes).

use std::borrow::Cow;
use std::convert::Infallible;
use std::fmt::Debug;
use std::future::{Future, ready};
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use fusebox::Policy;
use tower::{Layer, Service, service_fn};

/// The open wait of every breaker: far longer than a run.
pub(crate) const OPEN_WAIT: Duration = Duration::from_secs(60 * 60);

/// The policy of every fusebox subject: 50 % over the last 100 calls.
pub(crate) const POLICY: Policy = Policy::new()
    .window(100)
    .failure_rate(50)
    .open_for(OPEN_WAIT);

/// The keys of the fusebox subjects: the layer, the layer with `key_fn`, the attribute.
pub(crate) const KEYS: [&str; 3] = ["tower-layer", "tower-layer-key-fn", "tower-attribute"];

/// Polls `fut` once with a no-op waker; every future here is ready at once.
#[inline(always)]
pub(crate) fn poll_once<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => unreachable!("every future here is ready at once"),
    }
}

/// `poll_ready`, `call`, one poll: one request through `svc`.
#[inline(always)]
pub(crate) fn request<S: Service<u64>>(svc: &mut S, x: u64) -> Result<S::Response, S::Error> {
    let mut cx = Context::from_waker(Waker::noop());
    match svc.poll_ready(&mut cx) {
        Poll::Ready(Ok(())) => {}
        _ => unreachable!("every service here is always ready"),
    }
    poll_once(svc.call(x))
}

/// The inner service every subject wraps.
pub(crate) fn inner()
-> impl Service<u64, Response = u64, Error = Infallible, Future: Send> + Clone + Send {
    service_fn(|x: u64| ready(Ok::<u64, Infallible>(x)))
}

/// `fusebox_tower::CircuitBreakerLayer::new(key)` around the inner service.
pub(crate) fn fusebox_layer() -> impl Service<u64, Response = u64, Error: Debug> {
    fusebox_tower::CircuitBreakerLayer::new(KEYS[0])
        .policy(POLICY)
        .layer(inner())
}

/// The layer with a key taken from each request (one key).
pub(crate) fn fusebox_layer_key_fn() -> impl Service<u64, Response = u64, Error: Debug> {
    fusebox_tower::CircuitBreakerLayer::new("unused")
        .policy(POLICY)
        .key_fn(|_: &u64| Cow::Borrowed(KEYS[1]))
        .layer(inner())
}

/// `tower_resilience::circuitbreaker::CircuitBreakerLayer` around the inner service.
pub(crate) fn tower_resilience() -> impl Service<u64, Response = u64, Error: Debug> {
    tower_resilience::circuitbreaker::CircuitBreakerLayer::builder()
        .failure_rate_threshold(0.5)
        .sliding_window_size(100)
        .minimum_number_of_calls(10)
        .wait_duration_in_open(OPEN_WAIT)
        .build()
        .expect("a valid tower-resilience configuration")
        .layer(inner())
}

/// The attribute's error type: a rejected call needs `From<fusebox::Error>`.
#[derive(Debug)]
pub(crate) enum AttrError {
    /// The breaker rejected the call.
    Rejected,
}

impl From<fusebox::Error> for AttrError {
    fn from(_: fusebox::Error) -> Self {
        AttrError::Rejected
    }
}

/// The same work as the inner service, as an `async fn`.
pub(crate) async fn bare_async_fn(x: u64) -> Result<u64, AttrError> {
    ready(Ok(x)).await
}

/// The same work under the attribute, with the same policy.
#[fusebox::circuit_breaker(
    key = "tower-attribute",
    window = 100,
    failure_rate = 50,
    open_for = "1h"
)]
pub(crate) async fn attribute(x: u64) -> Result<u64, AttrError> {
    ready(Ok(x)).await
}
