//! [`ResponseFuture`]: an admitted call in flight, or a refusal waiting to be returned.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::{BoxError, Classify};
use crate::breaker::{OwnedPermit, Verdict};

/// A shared breaker's admission in flight (nothing without the `redis` feature).
#[cfg(feature = "redis")]
type Asking = Option<crate::breaker::Boxed<'static, crate::state::Word>>;
#[cfg(not(feature = "redis"))]
type Asking = ();

pin_project! {
    /// The response future of a [`CircuitBreaker`](super::CircuitBreaker).
    ///
    /// Reports the call's outcome when the inner future completes. Dropped before that, it gives
    /// the permit back without counting anything; a panic while polling the inner future counts
    /// as a failure.
    pub struct ResponseFuture<F, C> {
        // `None` when the call was refused (the permit says why), or once completed.
        #[pin]
        inner: Option<F>,
        permit: OwnedPermit,
        classifier: C,
        // A shared breaker's admission, awaited from its store before `inner` is polled.
        asking: Asking,
    }
}

impl<F, C> ResponseFuture<F, C> {
    pub(super) fn new(inner: Option<F>, permit: OwnedPermit, classifier: C) -> Self {
        ResponseFuture {
            inner,
            #[cfg(feature = "redis")]
            asking: permit.asks_store(),
            #[cfg(not(feature = "redis"))]
            asking: (),
            permit,
            classifier,
        }
    }
}

/// Reports a failure if the inner future panics while polled (the permit lives in the response
/// future, which is dropped only after the unwinding is over, when it would look like a
/// cancellation).
struct PanicGuard<'a>(&'a mut OwnedPermit);

impl Drop for PanicGuard<'_> {
    fn drop(&mut self) {
        // Only reached while unwinding: the normal path forgets the guard.
        self.0.abandon();
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
        #[cfg(feature = "redis")]
        if let Some(asking) = this.asking.as_mut() {
            let Poll::Ready(word) = asking.as_mut().poll(cx) else {
                return Poll::Pending;
            };
            *this.asking = None;
            this.permit.admitted_as(word);
            if this.permit.is_refused() {
                // Refused by the store: the inner future is dropped unpolled.
                this.inner.set(None);
            }
        }
        let Some(inner) = this.inner.as_mut().as_pin_mut() else {
            return match this.permit.refusal() {
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
        let outcome = match &result {
            _ if this.classifier.is_failure(&result) => Verdict::Failure,
            Ok(_) => Verdict::Success,
            Err(_) => Verdict::Released,
        };
        this.permit.settle(outcome);
        Poll::Ready(result.map_err(Into::into))
    }
}

impl<F, C> fmt::Debug for ResponseFuture<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("permit", &self.permit)
            .finish_non_exhaustive()
    }
}
