//! axum (feature `axum`): a rejected request becomes `503 Service Unavailable` with `Retry-After`
//! and a small JSON body, with no error handler to write.
//!
//! ```
//! use axum::{Router, routing::get, http::StatusCode};
//! use fusebox_tower::CircuitBreakerLayer;
//!
//! async fn report() -> StatusCode { StatusCode::OK }
//!
//! let app: Router = Router::new()
//!     .route("/report", get(report))
//!     .layer(CircuitBreakerLayer::new("report").axum());
//! # let _ = app;
//! ```
//!
//! [`CircuitBreakerLayer::axum`] keeps the key, registry and policy; its classifier defaults to
//! [`HttpFailures`] (a handler answering `5xx` or `429` counts, `4xx` does not), since an axum
//! route never returns an `Err`. A rejection answers without running the handler (or any layer
//! inside this one). `Router::layer` also wraps the router's fallback (unknown paths share the
//! circuit); `Router::route_layer` wraps the matched routes only.

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use ::axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::{AnyError, BoxError, CircuitBreakerLayer, Classify, GrpcFailures, HttpFailures};
use fusebox::Error;

/// A classifier for axum's `Result<Response, Infallible>`: [`AnyError`] (the layer's default)
/// becomes [`HttpFailures`], any other classifier is kept.
pub trait AxumClassifier {
    /// The classifier the axum layer runs.
    type Classifier: Classify<Response, Infallible> + Clone;

    /// Converts into the classifier the axum layer runs.
    fn into_classifier(self) -> Self::Classifier;
}

impl AxumClassifier for AnyError {
    type Classifier = HttpFailures;

    fn into_classifier(self) -> HttpFailures {
        HttpFailures
    }
}

impl AxumClassifier for HttpFailures {
    type Classifier = HttpFailures;

    fn into_classifier(self) -> HttpFailures {
        self
    }
}

impl AxumClassifier for GrpcFailures {
    type Classifier = GrpcFailures;

    fn into_classifier(self) -> GrpcFailures {
        self
    }
}

impl<F> AxumClassifier for F
where
    F: Fn(&Result<Response, Infallible>) -> bool + Clone,
{
    type Classifier = F;

    fn into_classifier(self) -> F {
        self
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
impl<C: AxumClassifier, K> CircuitBreakerLayer<C, K> {
    /// The layer for axum's `Router::layer` / `route_layer`: a rejection becomes
    /// `503 Service Unavailable` with `Retry-After` and a JSON body (see
    /// [`IntoResponse for fusebox::Error`](fusebox::Error#impl-IntoResponse-for-Error)).
    #[must_use]
    pub fn axum(self) -> AxumLayer<C::Classifier, K> {
        AxumLayer(CircuitBreakerLayer {
            registry: self.registry,
            policy: self.policy,
            classifier: self.classifier.into_classifier(),
            key: self.key,
            declared: self.declared,
            #[cfg(feature = "chaos")]
            chaos: self.chaos,
        })
    }
}

/// [`CircuitBreakerLayer`] for axum, made by [`CircuitBreakerLayer::axum`].
#[derive(Clone, Debug)]
pub struct AxumLayer<C, K>(CircuitBreakerLayer<C, K>);

impl<S, C, K> Layer<S> for AxumLayer<C, K>
where
    CircuitBreakerLayer<C, K>: Layer<S>,
{
    type Service = RejectionResponse<<CircuitBreakerLayer<C, K> as Layer<S>>::Service>;

    fn layer(&self, inner: S) -> Self::Service {
        RejectionResponse(self.0.layer(inner))
    }
}

/// Turns a wrapped service's [`BoxError`] into a response: a [`fusebox::Error`]
/// becomes its `503` response, any other error `500 Internal Server Error`. Its error type is
/// [`Infallible`], as axum requires.
#[derive(Clone, Debug)]
pub struct RejectionResponse<S>(pub S);

impl<S, Req> Service<Req> for RejectionResponse<S>
where
    S: Service<Req, Response = Response, Error = BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = RejectionFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // An inner readiness error cannot be answered here (there is no request yet); report ready
        // and let `call` answer it. Route, the usual inner service, is always ready.
        match self.0.poll_ready(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(_) => Poll::Ready(Ok(())),
        }
    }

    fn call(&mut self, req: Req) -> Self::Future {
        RejectionFuture {
            inner: self.0.call(req),
        }
    }
}

pin_project! {
    /// The response future of [`RejectionResponse`].
    pub struct RejectionFuture<F> {
        #[pin]
        inner: F,
    }
}

impl<F> Future for RejectionFuture<F>
where
    F: Future<Output = Result<Response, BoxError>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().inner.poll(cx).map(|result| {
            Ok(match result {
                Ok(response) => response,
                Err(error) => match error.downcast::<Error>() {
                    Ok(rejected) => rejection_response(&rejected),
                    Err(_other) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
                },
            })
        })
    }
}

impl<F> fmt::Debug for RejectionFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RejectionFuture")
    }
}

/// The answer to a rejected request: `503 Service Unavailable`, `Retry-After: <seconds>` (the wait until the next probe in whole
/// seconds, [`Error::retry_after_secs`]: rounded up unless the part of a second is at most 10 ms,
/// at least 1; `1` when the rejection carries no wait) and the body
/// `{"error":"circuit_open","reason":"open","retry_after":30}` (`content-type: application/json`;
/// `reason` is one of `open`, `half_open_full`, `recovering`, `forced_open`, `bulkhead_full`,
/// `timed_out`, `throttled`). The breaker's key is not in the response, so internal names do not leak to
/// clients. A handler that calls through a breaker itself can answer a rejection the same way.
#[must_use]
pub fn rejection_response(error: &Error) -> Response {
    let secs = error.retry_after_secs().unwrap_or(1);
    let body = format!(
        r#"{{"error":"circuit_open","reason":"{}","retry_after":{secs}}}"#,
        error.reason().code()
    );
    let mut response = (StatusCode::SERVICE_UNAVAILABLE, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    response
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A circuit opened for 2 s off a whole millisecond: its first rejection waits 2.0005 s (the
    /// deadline is rounded up to the millisecond) and says `Retry-After: 2`, not `3`.
    #[test]
    fn the_first_rejection_of_a_two_second_wait_says_two() {
        use fusebox::{Policy, Registry, clock::FakeClock};
        let clock = FakeClock::new();
        let registry = Registry::with_clock(clock.clone());
        let policy = Policy::new()
            .consecutive(1)
            .open_for(Duration::from_secs(2));
        let breaker = registry.breaker("t", policy).unwrap();
        clock.advance(Duration::from_micros(500));
        breaker.try_acquire().unwrap().failure();
        let rejected = breaker.try_acquire().unwrap_err();
        assert_eq!(
            rejected.retry_after(),
            Some(Duration::from_micros(2_000_500))
        );
        let response = rejection_response(&rejected);
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "2");
    }
}
