//! [`ResponseFuture`]: an admitted call in flight, or a refusal waiting to be returned.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::{BoxError, Classify};
use crate::Error;
use crate::breaker::OwnedPermit;

pin_project! {
    /// The response future of a [`CircuitBreaker`](super::CircuitBreaker).
    ///
    /// Reports the call's outcome when the inner future completes. Dropped before that, it gives
    /// the permit back without counting anything; a panic while polling the inner future counts
    /// as a failure.
    pub struct ResponseFuture<F, C> {
        #[pin]
        inner: Option<F>,
        permit: Option<OwnedPermit>,
        refused: Option<Error>,
        classifier: C,
    }
}

impl<F, C> ResponseFuture<F, C> {
    pub(super) fn admitted(inner: F, permit: OwnedPermit, classifier: C) -> Self {
        ResponseFuture {
            inner: Some(inner),
            permit: Some(permit),
            refused: None,
            classifier,
        }
    }

    pub(super) fn refused(refused: Error, classifier: C) -> Self {
        ResponseFuture {
            inner: None,
            permit: None,
            refused: Some(refused),
            classifier,
        }
    }
}

/// Reports a failure if the inner future panics while polled (the permit lives in the response
/// future, which is dropped only after the unwinding is over, when it would look like a
/// cancellation).
struct PanicGuard<'a>(&'a mut Option<OwnedPermit>);

impl Drop for PanicGuard<'_> {
    fn drop(&mut self) {
        // Only reached while unwinding: the normal path forgets the guard. Dropping the permit
        // now, during the panic, counts it as a failure.
        drop(self.0.take());
    }
}

impl<F, C, T, E> Future for ResponseFuture<F, C>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
    C: Classify<T, E>,
{
    type Output = Result<T, BoxError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let Some(inner) = this.inner.as_mut().as_pin_mut() else {
            return match this.refused.take() {
                Some(refused) => Poll::Ready(Err(Box::new(refused))),
                // Polled again after completion: never resolves again, never panics.
                None => Poll::Pending,
            };
        };
        let guard = PanicGuard(&mut *this.permit);
        let polled = inner.poll(cx);
        std::mem::forget(guard);
        let Poll::Ready(result) = polled else {
            return Poll::Pending;
        };
        this.inner.set(None);
        if let Some(permit) = this.permit.take() {
            match &result {
                _ if this.classifier.is_failure(&result) => permit.failure(),
                Ok(_) => permit.success(),
                Err(_) => permit.ignore(),
            }
        }
        Poll::Ready(result.map_err(Into::into))
    }
}

impl<F, C> fmt::Debug for ResponseFuture<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("refused", &self.refused)
            .field("permit", &self.permit)
            .finish_non_exhaustive()
    }
}
