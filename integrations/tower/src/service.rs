//! [`CircuitBreaker`]: the service a [`CircuitBreakerLayer`](super::CircuitBreakerLayer) makes.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::task::{Context, Poll};

use tower_service::Service;

use super::future::{Pending, ResponseFuture};
use super::{BoxError, Classify, SITE};
use fusebox::{Breaker, Policy, Registry};
use fusebox::{KeptBreaker, OwnedPermit, SiteId};

/// A service wrapped in a circuit breaker. Made by
/// [`CircuitBreakerLayer`](super::CircuitBreakerLayer).
///
/// `poll_ready` is the inner service's readiness and takes no permit; `call` asks the circuit for
/// admission and, when rejected, answers with a boxed [`fusebox::Error`] without
/// calling the inner service. An admitted call reports its outcome when its response future
/// completes; dropping the future gives the permit back without counting anything (a cancelled
/// half-open probe frees its slot), and a panic while calling or polling the inner service counts
/// as a failure.
#[derive(Clone)]
pub struct CircuitBreaker<S, C, K> {
    inner: S,
    classifier: C,
    key: K,
    /// The registry's injections, when the layer opted in ([`CircuitBreakerLayer::chaos`]).
    ///
    /// [`CircuitBreakerLayer::chaos`]: super::CircuitBreakerLayer::chaos
    #[cfg(feature = "chaos")]
    chaos: Option<&'static fusebox::chaos::Injections>,
}

impl<S, C, K> CircuitBreaker<S, C, K> {
    pub(super) fn new(inner: S, classifier: C, key: K) -> Self {
        CircuitBreaker {
            inner,
            classifier,
            key,
            #[cfg(feature = "chaos")]
            chaos: None,
        }
    }

    /// Calls go through the injection point of `injections` (`None`: they do not).
    #[cfg(feature = "chaos")]
    pub(super) fn with_chaos(
        mut self,
        injections: Option<&'static fusebox::chaos::Injections>,
    ) -> Self {
        self.chaos = injections;
        self
    }

    /// The wrapped service.
    #[must_use]
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    #[must_use]
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The wrapped service, unwrapped.
    #[must_use]
    pub fn into_inner(self) -> S {
        self.inner
    }
}

/// Where a [`CircuitBreaker`] finds the breaker of a request: a [`FixedBreaker`] (the fixed key
/// of [`CircuitBreakerLayer::new`](super::CircuitBreakerLayer::new)), a [`Breaker`], or a
/// [`KeyFn`] (a key taken from each request). Sealed: only these implement it.
pub trait Admission<Req>: sealed::Sealed {
    /// Asks the breaker of `req` for admission; a rejected call gets an inert permit that says why.
    fn admit(&self, req: &Req) -> OwnedPermit;
}

/// The seal of [`Admission`]: a public trait in a private module, so no other crate can
/// implement it.
mod sealed {
    #[expect(
        unnameable_types,
        reason = "the seal must not be nameable outside the crate"
    )]
    pub trait Sealed {}

    impl Sealed for fusebox::Breaker {}

    impl Sealed for super::FixedBreaker {}

    impl<F, Req> Sealed for super::KeyFn<F, Req> {}
}

impl<Req> Admission<Req> for Breaker {
    #[inline]
    fn admit(&self, _req: &Req) -> OwnedPermit {
        self.admit(&SITE)
    }
}

/// The breaker of the services a [`CircuitBreakerLayer::new`](super::CircuitBreakerLayer::new)
/// layer makes: the circuit of its fixed key, kept for the life of the process, so that a call's
/// response future holds it by a plain reference (taking and dropping it costs no atomic
/// operation). Calls follow the circuit's reconfigurations like a [`Breaker`]'s.
#[derive(Clone, Copy)]
pub struct FixedBreaker(KeptBreaker);

impl FixedBreaker {
    /// The circuit of `breaker`, kept, named from the layer `site`.
    pub(super) fn new(breaker: &Breaker, site: SiteId) -> Self {
        let kept = breaker.keep();
        kept.claim(site);
        FixedBreaker(kept)
    }
}

impl<Req> Admission<Req> for FixedBreaker {
    #[inline]
    fn admit(&self, _req: &Req) -> OwnedPermit {
        self.0.admit(&SITE)
    }
}

impl fmt::Debug for FixedBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("FixedBreaker").field(&self.0.key()).finish()
    }
}

/// The key of a [`CircuitBreakerLayer::key_fn`](super::CircuitBreakerLayer::key_fn) layer and
/// of the services it makes: a function that takes the key from each request, with the registry
/// and policy its breakers are created in (the layer's, given when it wraps a service).
pub struct KeyFn<F, Req> {
    /// The key function.
    f: F,
    registry: &'static Registry,
    policy: Policy,
    _req: PhantomData<fn(&Req)>,
}

impl<F, Req> KeyFn<F, Req> {
    /// The key function `f`, creating breakers in the global registry with the default policy
    /// until [`with`](KeyFn::with) says otherwise.
    pub(super) fn new(f: F) -> Self {
        KeyFn {
            f,
            registry: fusebox::registry(),
            policy: Policy::DEFAULT,
            _req: PhantomData,
        }
    }

    /// The same key function, creating breakers in `registry` with `policy`.
    pub(super) fn with(&self, registry: &'static Registry, policy: Policy) -> Self
    where
        F: Clone,
    {
        KeyFn {
            f: self.f.clone(),
            registry,
            policy,
            _req: PhantomData,
        }
    }
}

impl<F: Clone, Req> Clone for KeyFn<F, Req> {
    fn clone(&self) -> Self {
        self.with(self.registry, self.policy)
    }
}

impl<F, Req> Admission<Req> for KeyFn<F, Req>
where
    F: for<'r> Fn(&'r Req) -> Cow<'r, str>,
{
    #[inline]
    fn admit(&self, req: &Req) -> OwnedPermit {
        let key = (self.f)(req);
        self.registry.dynamic(&key, self.policy).admit(&SITE)
    }
}

impl<F, Req> fmt::Debug for KeyFn<F, Req> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyFn")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl<S, C, K, Req> Service<Req> for CircuitBreaker<S, C, K>
where
    S: Service<Req>,
    S::Error: Into<BoxError> + crate::Injectable,
    S::Response: crate::Injectable,
    C: Classify<S::Response, S::Error> + Clone,
    K: Admission<Req>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future, C>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    #[inline]
    fn call(&mut self, req: Req) -> Self::Future {
        let permit = self.key.admit(&req);
        #[cfg(feature = "chaos")]
        if let Some(injections) = self.chaos {
            let classifier = self.classifier.clone();
            return super::chaos::call(injections, &mut self.inner, permit, classifier, req);
        }
        let inner = super::future::call_admitted(&mut self.inner, &permit, req);
        ResponseFuture::new(inner, permit, self.classifier.clone(), Pending::none())
    }
}

impl<S: fmt::Debug, C, K: fmt::Debug> fmt::Debug for CircuitBreaker<S, C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreaker")
            .field("inner", &self.inner)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}
