//! [`CircuitBreakerLayer`]: the builder that wraps services in a registry's circuit.

use std::borrow::Cow;
use std::fmt;

use tower_layer::Layer;

use super::SITE;
use super::classify::AnyError;
use super::service::{CircuitBreaker, FixedBreaker, KeyFn};
use fusebox::{Key, Policy, SiteId};
use fusebox::{Registry, usable_policy};

/// A tower [`Layer`] that routes every call of the wrapped service through a circuit breaker of a
/// fusebox [`Registry`]: the same circuits, policies, events and operator controls as
/// `#[fusebox::circuit_breaker]`. A key tripped by an annotated function is open for the layer,
/// and the other way round.
///
/// ```
/// use fusebox_tower::{CircuitBreakerLayer, HttpFailures};
/// use fusebox::Policy;
/// use std::time::Duration;
///
/// const POLICY: Policy = Policy::new().window(20).failure_rate(50).open_for(Duration::from_secs(30));
/// let layer = CircuitBreakerLayer::new("payment").policy(POLICY).failure(HttpFailures);
/// # let _ = layer;
/// ```
///
/// - the key: [`new`](CircuitBreakerLayer::new) takes a fixed key;
///   [`key_fn`](CircuitBreakerLayer::key_fn) takes one from each request (one circuit per host
///   or route), looked up like the attribute's dynamic keys and bounded by the same
///   [`Registry::set_max_keys`] cap;
/// - [`registry`](CircuitBreakerLayer::registry): a `static` registry instead of the global one;
/// - [`policy`](CircuitBreakerLayer::policy): the policy a breaker is created with (the first
///   registration of a key fixes it, as for the attribute; an invalid policy is logged and the
///   default runs);
/// - [`failure`](CircuitBreakerLayer::failure): which outcomes count (default [`AnyError`]: every
///   `Err` of the inner service).
///
/// The service's error type is [`BoxError`](super::BoxError): a rejection is a boxed
/// [`fusebox::Error`] (`err.downcast_ref::<fusebox::Error>()`), any other error is
/// the inner service's, boxed.
#[derive(Clone)]
pub struct CircuitBreakerLayer<C = AnyError, K = FixedKey> {
    pub(super) registry: &'static Registry,
    pub(super) policy: Policy,
    pub(super) classifier: C,
    pub(super) key: K,
    /// The key of [`CircuitBreakerLayer::new`] until [`key_fn`](CircuitBreakerLayer::key_fn)
    /// replaces it: declared in the registry, so its overrides are not unknown keys.
    pub(super) declared: Option<Key>,
    /// Calls go through the key's fault injection ([`chaos`](CircuitBreakerLayer::chaos)).
    #[cfg(feature = "chaos")]
    pub(super) chaos: bool,
}

/// The key of a [`CircuitBreakerLayer::new`] layer: one circuit for every request. The layer is
/// one admitting site of its key, whatever services it wraps (see [`fusebox::SiteId`]).
#[derive(Debug, Clone)]
pub struct FixedKey(Key, SiteId);

impl CircuitBreakerLayer {
    /// A layer for the circuit `key` of the global registry, with the default policy and
    /// classifier.
    ///
    /// The key is declared in the registry as an annotated function's literal key is (and again
    /// in the one [`registry`](CircuitBreakerLayer::registry) names, with the policy
    /// [`policy`](CircuitBreakerLayer::policy) gives): its overrides are validated against that
    /// policy, and it is not one of [`Registry::unknown_keys`], before its breaker exists.
    #[must_use]
    pub fn new(key: impl Into<Key>) -> Self {
        let key = key.into();
        CircuitBreakerLayer {
            registry: fusebox::registry(),
            policy: Policy::DEFAULT,
            classifier: AnyError,
            key: FixedKey(key.clone(), SiteId::new()),
            declared: Some(key),
            #[cfg(feature = "chaos")]
            chaos: false,
        }
        .declared()
    }
}

impl<C, K> CircuitBreakerLayer<C, K> {
    /// Uses `registry` (a `static`, or a `static LazyLock<Registry>`) instead of the global one.
    #[must_use]
    pub fn registry(mut self, registry: &'static Registry) -> Self {
        self.registry = registry;
        self.declared()
    }

    /// The policy breakers are created with.
    #[must_use]
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self.declared()
    }

    /// Opts the layer's calls in to fault injection (feature `chaos`), as the attribute's
    /// `chaos = true` does: a fault injected into the key ([`Registry::chaos`]) reaches the
    /// calls of the services this layer makes. A layer without it is never touched by an
    /// injection, and without the feature there is nothing to opt in to.
    ///
    /// After the layer's admission, a fault that hits the call:
    /// - [`Fault::rejection`](fusebox::chaos::Fault::rejection): the inner service is not
    ///   called; the call fails with a boxed [`fusebox::Error`] (reason `Open`), as when the
    ///   circuit is open;
    /// - [`Fault::latency`](fusebox::chaos::Fault::latency): the response future waits that
    ///   long (`tokio::time::sleep`) before it polls the inner service's, so a timeout outside
    ///   the layer sees it and one inside it does not;
    /// - [`Fault::failure`](fusebox::chaos::Fault::failure) and
    ///   [`Fault::retry_after`](fusebox::chaos::Fault::retry_after): the value the fault builds
    ///   is the answer, without calling the inner service, when it is the inner service's error
    ///   or its response (an `http::Response` with a `503` status and a `Retry-After` header,
    ///   say): it goes through the classifier, its pushback and the report as a real one. A
    ///   value of another type is not injected (a WARN event `chaos_type_mismatch`) and the
    ///   call runs.
    ///
    /// With the feature on, the layer asks its service's response and error to be `'static` (an
    /// injected value is downcast to them): an error type that borrows, like `&'static str`,
    /// can then make a spawned task's future not `Send`; use an owned error (`String`, a type
    /// of your own) in services that run behind a layer with this feature.
    ///
    /// ```
    /// # #[cfg(feature = "chaos")] {
    /// use fusebox::chaos::Fault;
    /// use fusebox_tower::CircuitBreakerLayer;
    ///
    /// static REGISTRY: fusebox::Registry = fusebox::Registry::new();
    /// let layer = CircuitBreakerLayer::new("doc-layer-chaos").registry(&REGISTRY).chaos();
    /// REGISTRY.chaos().inject("doc-layer-chaos", Fault::rejection().rate(0.1));
    /// # let _ = layer;
    /// # }
    /// ```
    #[cfg(feature = "chaos")]
    #[cfg_attr(docsrs, doc(cfg(feature = "chaos")))]
    #[must_use]
    pub fn chaos(mut self) -> Self {
        self.chaos = true;
        self
    }

    /// Declares the fixed key, if any, in the registry with the policy.
    fn declared(self) -> Self {
        if let Some(key) = &self.declared {
            self.registry.declare(key.as_str(), self.policy);
        }
        self
    }

    /// Which outcomes count as failures: a closure `|r: &Result<Response, Error>| -> bool`, or
    /// [`HttpFailures`](super::HttpFailures), [`GrpcFailures`](super::GrpcFailures),
    /// [`AnyError`]. `Error` here is the inner service's own error type.
    #[must_use]
    pub fn failure<C2>(self, classifier: C2) -> CircuitBreakerLayer<C2, K> {
        CircuitBreakerLayer {
            registry: self.registry,
            policy: self.policy,
            classifier,
            key: self.key,
            declared: self.declared,
            #[cfg(feature = "chaos")]
            chaos: self.chaos,
        }
    }

    /// Takes the key from each request: `|req: &Request<Body>| req.uri().path().into()`.
    ///
    /// Keys are looked up per call like the attribute's `key = expr`: created on first use, with
    /// idle ones evicted and calls past the registry's cap running unprotected (see
    /// [`Registry::set_max_keys`]), so a key taken from what a client sends cannot grow memory
    /// without bound.
    #[must_use]
    pub fn key_fn<Req, F>(self, f: F) -> CircuitBreakerLayer<C, KeyFn<F, Req>>
    where
        F: for<'r> Fn(&'r Req) -> Cow<'r, str>,
    {
        CircuitBreakerLayer {
            registry: self.registry,
            policy: self.policy,
            classifier: self.classifier,
            key: KeyFn::new(f),
            declared: None,
            #[cfg(feature = "chaos")]
            chaos: self.chaos,
        }
    }
}

impl<S, C: Clone> Layer<S> for CircuitBreakerLayer<C, FixedKey> {
    type Service = CircuitBreaker<S, C, FixedBreaker>;

    fn layer(&self, inner: S) -> Self::Service {
        let key = &self.key.0;
        let policy = usable_policy(key.as_str(), SITE, self.policy);
        let breaker = self.registry.fixed(key.as_str(), policy);
        let service = CircuitBreaker::new(
            inner,
            self.classifier.clone(),
            FixedBreaker::new(&breaker, self.key.1),
        );
        #[cfg(feature = "chaos")]
        let service = service.with_chaos(self.chaos.then(|| self.registry.chaos()));
        service
    }
}

impl<S, C: Clone, F: Clone, Req> Layer<S> for CircuitBreakerLayer<C, KeyFn<F, Req>> {
    type Service = CircuitBreaker<S, C, KeyFn<F, Req>>;

    fn layer(&self, inner: S) -> Self::Service {
        let policy = usable_policy("key_fn", SITE, self.policy);
        let key = self.key.with(self.registry, policy);
        let service = CircuitBreaker::new(inner, self.classifier.clone(), key);
        #[cfg(feature = "chaos")]
        let service = service.with_chaos(self.chaos.then(|| self.registry.chaos()));
        service
    }
}

impl<C, K: fmt::Debug> fmt::Debug for CircuitBreakerLayer<C, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreakerLayer")
            .field("key", &self.key)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}
