//! fusebox-tower: a fusebox registry's circuits around tower services, and around axum routes
//! (feature `axum`).
//!
//! ```toml
//! [dependencies]
//! fusebox = "0.1"
//! fusebox-tower = "0.1"   # features = ["axum"] for the 503 answer
//! ```
//!
//! [`CircuitBreakerLayer`] wraps any `tower::Service` in a breaker of a [`Registry`](fusebox::Registry):
//! the same circuits, policies, events and operator controls as `#[fusebox::circuit_breaker]`, so
//! one key is one circuit whichever way it is called. Admission, reporting, cancellation and panics
//! go through the same [`Breaker`](fusebox::Breaker) code as the attribute.
//!
//! ```
//! use fusebox_tower::{CircuitBreakerLayer, GrpcFailures, HttpFailures};
//! use tower_layer::Layer;
//! # let (http_client, grpc_channel) = ((), ());
//!
//! // one circuit for an HTTP client service: 5xx, 429 and transport errors count
//! let inventory = CircuitBreakerLayer::new("inventory").failure(HttpFailures).layer(http_client);
//! // a gRPC channel: UNAVAILABLE, DEADLINE_EXCEEDED and RESOURCE_EXHAUSTED count
//! let ledger = CircuitBreakerLayer::new("ledger").failure(GrpcFailures).layer(grpc_channel);
//! // one circuit per host, bounded like the attribute's dynamic keys
//! let per_host = CircuitBreakerLayer::new("upstream")
//!     .failure(HttpFailures)
//!     .key_fn(|req: &http::Request<String>| req.uri().host().unwrap_or("unknown").into());
//! # let _ = (inventory, ledger, per_host);
//! ```
//!
//! # Errors
//!
//! Following tower's convention, the wrapped service's error is a [`BoxError`]: a rejected call is a
//! boxed [`fusebox::Error`], any other error is the inner service's error, boxed.
//! Turn a rejection into a response by downcasting, for example in axum's `HandleErrorLayer`:
//!
//! ```
//! use fusebox_tower::BoxError;
//! use http::StatusCode;
//!
//! fn status_of(err: &BoxError) -> StatusCode {
//!     match err.downcast_ref::<fusebox::Error>() {
//!         Some(_rejected) => StatusCode::SERVICE_UNAVAILABLE,
//!         None => StatusCode::BAD_GATEWAY,
//!     }
//! }
//! # let rejected: BoxError = Box::new(fusebox::Registry::new().breaker("k", fusebox::Policy::new()).map(|b| { b.force_open(); b.try_acquire().unwrap_err() }).unwrap());
//! # assert_eq!(status_of(&rejected), StatusCode::SERVICE_UNAVAILABLE);
//! ```
//!
//! With feature `chaos`, [`CircuitBreakerLayer::chaos`] opts the layer's calls in to their key's
//! fault injection ([`fusebox::chaos`]; the guide's "Fault injection").
//!
//! With feature `axum`, [`CircuitBreakerLayer::axum`] does that for you: a rejection becomes
//! `503 Service Unavailable` with `Retry-After` and a small JSON body.
//!
//! # Order with tower's retry and timeout layers
//!
//! Put the breaker *inside* the retry layer and *outside* the timeout layer:
//! `retry(breaker(timeout(service)))`. Then every attempt is admitted and counted on its own (three
//! failed attempts are three failures), and an attempt that times out reaches the breaker as the
//! timeout's error and counts. The other orders under-count: a breaker outside the retry counts one
//! outcome per request whatever the number of attempts, and a timeout outside the breaker drops the
//! breaker's response future, which is a cancellation and counts nothing. Make the retry policy stop
//! on a rejection (`err.downcast_ref::<fusebox::Error>().is_some()`), so an open circuit fails fast.
//! An `Ok` response the classifier counts (a 503) is a failure of that attempt; a retry policy that
//! retries those responses too gives what the attribute's `failure_if` with `retry` does: every
//! attempt counted on its own, and the last response returned when no attempt is left.
//! Wrap the retry policy in [`BudgetPolicy`] to make its retries go through the key's retry
//! budget ([`Policy::retry_budget`](fusebox::Policy::retry_budget)).

mod chaos;
mod classify;
mod future;
mod layer;
mod retry;
mod service;

#[doc(hidden)]
pub use chaos::Injectable;

#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub mod axum;

#[doc = include_str!("guide.md")]
pub mod guide {}

pub use classify::{
    AnyError, Classify, GRPC_DEADLINE_EXCEEDED, GRPC_RESOURCE_EXHAUSTED, GRPC_UNAVAILABLE,
    GrpcFailures, HttpFailures, grpc_code_counts, grpc_status_code, http_retry_after,
    http_status_counts, retry_after_value,
};
pub use future::ResponseFuture;
pub use layer::{CircuitBreakerLayer, FixedKey};
pub use retry::BudgetPolicy;
pub use service::{Admission, CircuitBreaker, FixedBreaker, KeyFn};

/// The error type of a wrapped service, as in tower: a rejection is a boxed
/// [`fusebox::Error`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The function name the layer's breakers report in events.
pub(crate) const SITE: &str = "fusebox_tower::CircuitBreakerLayer";
