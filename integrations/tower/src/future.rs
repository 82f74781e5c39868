//! [`ResponseFuture`]: an admitted call in flight, or a rejection waiting to be returned.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::{BoxError, Classify};
use fusebox::{OwnedPermit, Recording, Verdict};
use tower_service::Service;

pin_project! {
    /// The response future of a [`CircuitBreaker`](super::CircuitBreaker).
    ///
    /// Reports the call's outcome when the inner future completes. Dropped before that, it gives
    /// the permit back without counting anything; a panic while polling the inner future counts
    /// as a failure.
    #[project = Projection]
    pub struct ResponseFuture<F: Future, C> {
        // `None` when the call was rejected (the permit says why), or once completed.
        #[pin]
        inner: Option<F>,
        permit: OwnedPermit,
        classifier: C,
        // Strict mode: the outcome's recording, awaited before the result is returned.
        recording: Option<(Recording, F::Output)>,
        // What a fault injection left for this call (nothing without the feature `chaos`).
        chaos: Pending<F::Output>,
    }
}

impl<F: Future, C> ResponseFuture<F, C> {
    pub(super) fn new(
        inner: Option<F>,
        permit: OwnedPermit,
        classifier: C,
        chaos: Pending<F::Output>,
    ) -> Self {
        ResponseFuture {
            inner,
            recording: None,
            permit,
            classifier,
            chaos,
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

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Some((mut recorded, result)) = this.recording.take() {
            if Pin::new(&mut recorded).poll(cx).is_pending() {
                *this.recording = Some((recorded, result));
                return Poll::Pending;
            }
            return Poll::Ready(result.map_err(Into::into));
        }
        #[cfg(feature = "chaos")]
        if let Some(delay) = &mut this.chaos.delay {
            if delay.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.chaos.delay = None;
        }
        #[cfg(feature = "chaos")]
        if let Some(answer) = this.chaos.answer.take() {
            return complete(&mut this, answer, cx);
        }
        let Some(inner) = this.inner.as_mut().as_pin_mut() else {
            return match this.permit.rejection() {
                Some(rejected) => Poll::Ready(Err(Box::new(rejected))),
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
        complete(&mut this, result, cx)
    }
}

/// Classifies and reports the call's `result` (waiting for its recording in strict mode), then
/// returns it.
#[inline(always)]
fn complete<F, C, T, E>(
    this: &mut Projection<'_, F, C>,
    result: Result<T, E>,
    cx: &mut Context<'_>,
) -> Poll<Result<T, BoxError>>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
    C: Classify<T, E>,
{
    let outcome = match &result {
        _ if this.classifier.is_failure(&result) => {
            // Pushback: the wait the failure asked for (a `Retry-After`), before it settles.
            if let Some(wait) = this
                .classifier
                .retry_after(&result, this.permit.wall_time())
            {
                this.permit.push_back(wait);
            }
            Verdict::Failure
        }
        Ok(_) => Verdict::Success,
        // Not a failure: nothing, or a success under `Others::Success`.
        Err(_) => this.permit.uncounted(),
    };
    if let Some(mut recorded) = this.permit.recording() {
        this.permit.settle(outcome);
        if Pin::new(&mut recorded).poll(cx).is_pending() {
            *this.recording = Some((recorded, result));
            return Poll::Pending;
        }
        return Poll::Ready(result.map_err(Into::into));
    }
    this.permit.settle(outcome);
    Poll::Ready(result.map_err(Into::into))
}

impl<F: Future, C> fmt::Debug for ResponseFuture<F, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("permit", &self.permit)
            .finish_non_exhaustive()
    }
}

/// What an injection left for the response future: a delay before the inner future is polled,
/// or the answer it returns instead of calling the inner service. Empty without the feature.
pub(crate) struct Pending<O> {
    #[cfg(feature = "chaos")]
    pub(crate) delay: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    #[cfg(feature = "chaos")]
    pub(crate) answer: Option<O>,
    _output: PhantomData<fn() -> O>,
}

impl<O> Pending<O> {
    /// Nothing injected.
    #[inline(always)]
    pub(crate) fn none() -> Self {
        Pending {
            #[cfg(feature = "chaos")]
            delay: None,
            #[cfg(feature = "chaos")]
            answer: None,
            _output: PhantomData,
        }
    }
}

/// The future of `inner`'s call of `req` when `permit` admitted it; `None`, the inner service
/// not called, when it was rejected. A panic in `inner.call` drops the caller's `permit` while
/// unwinding: counted as a failure.
#[inline(always)]
pub(crate) fn call_admitted<S: Service<Req>, Req>(
    inner: &mut S,
    permit: &OwnedPermit,
    req: Req,
) -> Option<S::Future> {
    if permit.is_rejected() {
        None
    } else {
        Some(inner.call(req))
    }
}
