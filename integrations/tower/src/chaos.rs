//! Fault injection through the layer (feature `chaos`, [`CircuitBreakerLayer::chaos`]): the
//! faults of the key, injected after the layer's admission as the attribute's `chaos = true`
//! injects them (what the response future keeps of them is its `Pending`).
//!
//! [`CircuitBreakerLayer::chaos`]: super::CircuitBreakerLayer::chaos

/// The bound the layer puts on its service's response and error: `'static` with the feature
/// `chaos` (an injected answer is downcast to them), none without, so a service whose error
/// borrows (`&'static str`) keeps working in spawned tasks unless the feature is on.
#[doc(hidden)]
#[cfg(feature = "chaos")]
pub trait Injectable: 'static {}
#[cfg(feature = "chaos")]
impl<T: 'static> Injectable for T {}

/// Without the feature `chaos`: no bound.
#[doc(hidden)]
#[cfg(not(feature = "chaos"))]
pub trait Injectable {}
#[cfg(not(feature = "chaos"))]
impl<T> Injectable for T {}

#[cfg(feature = "chaos")]
pub(crate) use on::call;

#[cfg(feature = "chaos")]
mod on {
    use fusebox::OwnedPermit;
    use fusebox::chaos::{Injected, Injections};
    use tower_service::Service;

    use crate::future::{Pending, ResponseFuture};

    /// A call of `inner` behind the injection point: a rejection fault leaves the permit
    /// rejected (the inner service is not called), a latency fault delays the inner future, a
    /// failure or `Retry-After` fault answers with the value it built when that value is the
    /// inner service's error or response (through the classifier, as a real one), and runs the
    /// call as written otherwise (a WARN event `chaos_type_mismatch`).
    #[cold]
    #[inline(never)]
    pub(crate) fn call<S: Service<Req>, C, Req>(
        injections: &Injections,
        inner: &mut S,
        mut permit: OwnedPermit,
        classifier: C,
        req: Req,
    ) -> ResponseFuture<S::Future, C>
    where
        S::Error: 'static,
        S::Response: 'static,
    {
        let mut pending = Pending::none();
        match injections.hit(&mut permit) {
            Some(Injected::Rejected) => {
                return ResponseFuture::new(None, permit, classifier, pending);
            }
            Some(Injected::Latency(delay)) => {
                pending.delay = Some(Box::pin(tokio::time::sleep(delay)));
            }
            Some(Injected::Failure(value) | Injected::RetryAfter(value, _)) => {
                let answer = value
                    .take::<S::Error>()
                    .map(Err)
                    .or_else(|value| value.take::<S::Response>().map(Ok));
                match answer {
                    Ok(answer) => {
                        pending.answer = Some(answer);
                        return ResponseFuture::new(None, permit, classifier, pending);
                    }
                    Err(value) => value.mismatch(&format!(
                        "{} or {}",
                        std::any::type_name::<S::Error>(),
                        std::any::type_name::<S::Response>()
                    )),
                }
            }
            _ => {}
        }
        let inner = crate::future::call_admitted(inner, &permit, req);
        ResponseFuture::new(inner, permit, classifier, pending)
    }
}
