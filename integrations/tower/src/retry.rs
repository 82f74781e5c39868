//! [`BudgetPolicy`]: a `tower::retry::Policy` that asks a key's retry budget before each retry.

use tower::retry::Policy as RetryPolicy;

use fusebox::Breaker;

/// Wraps a `tower::retry::Policy` so its retries go through the retry budget
/// ([`Policy::retry_budget`](fusebox::Policy::retry_budget)) of a breaker's key: every attempt
/// is counted in the budget, and a retry the inner policy wants is made only when the budget
/// allows it (otherwise the last attempt's result is returned). The same budget as the
/// attribute's `retry` and the reqwest middleware's on that key.
///
/// Put it on tower's retry layer around the breaker layer of the same key:
/// `retry(BudgetPolicy(breaker(timeout(service))))`. The budget counts every attempt the
/// retry layer makes (`clone_request` is called once per attempt) and takes the first attempts
/// to be the attempts less the retries it allowed. A key without a budget allows every retry.
///
/// ```
/// use std::time::Duration;
/// use fusebox_tower::{BudgetPolicy, CircuitBreakerLayer, HttpFailures};
/// use fusebox::{Policy, Registry};
/// use tower::ServiceBuilder;
///
/// # #[derive(Clone)] struct Attempts(u32);
/// # impl tower::retry::Policy<u32, u32, fusebox_tower::BoxError> for Attempts {
/// #     type Future = std::future::Ready<()>;
/// #     fn retry(&mut self, _: &mut u32, r: &mut Result<u32, fusebox_tower::BoxError>) -> Option<Self::Future> {
/// #         (r.is_err() && self.0 > 1).then(|| { self.0 -= 1; std::future::ready(()) })
/// #     }
/// #     fn clone_request(&mut self, req: &u32) -> Option<u32> { Some(*req) }
/// # }
/// static REGISTRY: std::sync::LazyLock<Registry> = std::sync::LazyLock::new(Registry::new);
/// let policy = Policy::new().retry_budget(20, 10);
/// let breaker = REGISTRY.breaker("inventory", policy).unwrap();
/// let service = ServiceBuilder::new()
///     .retry(BudgetPolicy::new(breaker, Attempts(3)))
///     .layer(CircuitBreakerLayer::new("inventory").registry(&REGISTRY).policy(policy))
///     .service_fn(|n: u32| async move { Ok::<u32, fusebox_tower::BoxError>(n) });
/// # let _ = service;
/// ```
#[derive(Debug, Clone)]
pub struct BudgetPolicy<P> {
    breaker: Breaker,
    inner: P,
}

impl<P> BudgetPolicy<P> {
    /// `inner`'s retries, each allowed by the retry budget of `breaker`'s key (from
    /// [`Registry::breaker`](fusebox::Registry::breaker) or [`Registry::get`](fusebox::Registry::get)).
    #[must_use]
    pub fn new(breaker: Breaker, inner: P) -> Self {
        BudgetPolicy { breaker, inner }
    }

    /// The wrapped policy.
    #[must_use]
    pub fn inner(&self) -> &P {
        &self.inner
    }
}

impl<P, Req, Res, E> RetryPolicy<Req, Res, E> for BudgetPolicy<P>
where
    P: RetryPolicy<Req, Res, E>,
{
    type Future = P::Future;

    fn retry(&mut self, req: &mut Req, result: &mut Result<Res, E>) -> Option<Self::Future> {
        let wait = self.inner.retry(req, result)?;
        self.breaker.try_retry().then_some(wait)
    }

    fn clone_request(&mut self, req: &Req) -> Option<Req> {
        self.breaker.count_attempt();
        self.inner.clone_request(req)
    }
}
