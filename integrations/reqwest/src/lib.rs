//! fusebox-reqwest: a `reqwest-middleware` middleware that sends every request of a
//! `ClientWithMiddleware` through a fusebox registry's circuits, one per host or one fixed key.
//!
//! ```toml
//! [dependencies]
//! fusebox = "0.1"
//! fusebox-reqwest = "0.1"
//! ```
//!
//! ```
//! use fusebox_reqwest::CircuitBreakerMiddleware;
//!
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     .with(CircuitBreakerMiddleware::per_host())
//!     .build();
//! # let _ = client;
//! ```
//!
//! Outcomes are classified with [`HttpFailures`](fusebox_tower::HttpFailures): a `5xx` or `429` response and a transport error
//! count, any other response is a success. A `429` or `503` with `Retry-After` (seconds or an
//! HTTP-date) is pushback: when it opens the circuit, the circuit stays open at least that long
//! (capped by `open_max`; see [`http_retry_after`](fusebox_tower::http_retry_after)). A rejected request is not sent; it fails with
//! `reqwest_middleware::Error::Middleware` wrapping a [`fusebox::Error`], which
//! [`rejection`] finds:
//!
//! ```
//! # async fn get(client: &reqwest_middleware::ClientWithMiddleware) {
//! match client.get("http://inventory.internal/stock").send().await {
//!     Ok(response) => { /* … */ }
//!     Err(err) => match fusebox_reqwest::rejection(&err) {
//!         Some(rejected) => println!("not sent: {rejected}"),
//!         None => println!("failed: {err}"),
//!     },
//! }
//! # }
//! ```

mod chaos;

use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use ::reqwest::{Request, Response, Url};
use http::Extensions;
use reqwest_middleware::{Middleware, Next};

use fusebox::{Breaker, Error, Hedge, Key, OwnedPermit, Policy, Registry, SiteId, usable_policy};

/// Which circuit a request goes through.
#[derive(Debug)]
enum Keying {
    /// `host:port` of the request's URL, looked up like the attribute's dynamic keys.
    PerHost,
    /// One key for every request, resolved on the first request.
    Fixed(Key, OnceLock<Breaker>),
}

/// A `reqwest-middleware` middleware: one circuit per host ([`per_host`](Self::per_host)) or one
/// fixed key ([`new`](Self::new)), in the global registry unless
/// [`registry`](Self::registry) says otherwise.
#[derive(Debug)]
pub struct CircuitBreakerMiddleware {
    registry: &'static Registry,
    policy: Policy,
    keying: Keying,
    /// Attempts per idempotent request ([`retry`](Self::retry); 1: no retry) and the backoff's base.
    retry: (u32, std::time::Duration),
    /// The time from a request's first attempt within which a retry must start
    /// ([`deadline`](Self::deadline)).
    deadline: Duration,
    /// Hedged idempotent requests ([`hedge`](Self::hedge)).
    hedge: Option<Hedge>,
    /// This middleware as an admitting site of its keys (see [`fusebox::SiteId`]).
    site: SiteId,
    /// Requests go through the key's fault injection ([`chaos`](Self::chaos)).
    #[cfg(feature = "chaos")]
    chaos: bool,
}

impl CircuitBreakerMiddleware {
    /// Every request through the circuit `key`.
    ///
    /// The key is declared in the registry as an annotated function's literal key is (and again
    /// in the one [`registry`](Self::registry) names, with the policy [`policy`](Self::policy)
    /// gives): its overrides are validated against that policy, and it is not one of
    /// [`Registry::unknown_keys`], before the first request creates its breaker.
    #[must_use]
    pub fn new(key: impl Into<Key>) -> Self {
        CircuitBreakerMiddleware {
            registry: fusebox::registry(),
            policy: Policy::DEFAULT,
            keying: Keying::Fixed(key.into(), OnceLock::new()),
            retry: NO_RETRY,
            deadline: DEFAULT_DEADLINE,
            hedge: None,
            site: SiteId::new(),
            #[cfg(feature = "chaos")]
            chaos: false,
        }
        .declared()
    }

    /// One circuit per host: the key is the URL's `host:port` (`api.example.com:443`, the port
    /// made explicit), so two ports of one host are two circuits. Keys are looked up like the
    /// attribute's dynamic keys and bounded by [`Registry::set_max_keys`].
    #[must_use]
    pub fn per_host() -> Self {
        CircuitBreakerMiddleware {
            registry: fusebox::registry(),
            policy: Policy::DEFAULT,
            keying: Keying::PerHost,
            retry: NO_RETRY,
            deadline: DEFAULT_DEADLINE,
            hedge: None,
            site: SiteId::new(),
            #[cfg(feature = "chaos")]
            chaos: false,
        }
    }

    /// Uses `registry` (a `static`, or a `static LazyLock<Registry>`) instead of the global one.
    #[must_use]
    pub fn registry(mut self, registry: &'static Registry) -> Self {
        self.registry = registry;
        self.declared()
    }

    /// The policy breakers are created with (an invalid one is logged and the default runs).
    #[must_use]
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = usable_policy("reqwest", SITE_REQWEST, policy);
        self.declared()
    }

    /// Makes up to `attempts` attempts (at least 1; 1 is the default, no retry) of a request
    /// with an idempotent method (`GET`, `HEAD`, `OPTIONS`, `TRACE`, `PUT`, `DELETE`) and a
    /// body that can be cloned, while an attempt counts as a failure ([`HttpFailures`](fusebox_tower::HttpFailures): a `5xx`,
    /// a `429`, a transport error). Every attempt is admitted and counted by the circuit, as the
    /// attribute's `retry` does, and every retry must be allowed by the key's retry budget
    /// ([`Policy::retry_budget`](fusebox::Policy::retry_budget), through
    /// [`policy`](Self::policy) or configuration): a retry the budget or the circuit rejects,
    /// or the last attempt, ends the request with that attempt's response or error. Between
    /// attempts it waits a full-jitter exponential backoff from `backoff` (zero: no wait), and
    /// never less than a `429` or `503` response's `Retry-After`. A wait that does not fit the
    /// [`deadline`](Self::deadline) (10 s from the first attempt unless set), or one over 30 s,
    /// ends the request at once with the last attempt's response or error, as the attribute's
    /// `deadline` does: a `503` with `Retry-After: 20` is returned as it is, not retried 20 s
    /// later.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fusebox_reqwest::CircuitBreakerMiddleware;
    ///
    /// let middleware = CircuitBreakerMiddleware::new("inventory")
    ///     .policy(fusebox::Policy::new().retry_budget(20, 10))
    ///     .retry(3, Duration::from_millis(50));
    /// # let _ = middleware;
    /// ```
    #[must_use]
    pub fn retry(mut self, attempts: u32, backoff: std::time::Duration) -> Self {
        self.retry = (attempts.clamp(1, MAX_ATTEMPTS), backoff);
        self
    }

    /// The time a request's retries have from the start of its first attempt: a retry must
    /// start before it, so a wait between attempts (the backoff, or a `Retry-After` longer than
    /// it) that would end past it ends the request at once with the last attempt's response or
    /// error. The default, 10 s, is about as long as a person at a browser waits for a page
    /// before giving up on it; a request that was never going to succeed in that time returns
    /// its last answer instead of holding the caller. An attempt in flight is not cut short (set
    /// the client's own timeout for that), so a request takes at most the deadline plus its last
    /// attempt. [`Duration::MAX`] leaves only the 30 s bound on each wait. Without
    /// [`retry`](Self::retry) there is one attempt and nothing to bound.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fusebox_reqwest::CircuitBreakerMiddleware;
    ///
    /// // A batch job that may wait out a server's `Retry-After` of up to a minute in all.
    /// let middleware = CircuitBreakerMiddleware::new("reports")
    ///     .retry(4, Duration::from_millis(200))
    ///     .deadline(Duration::from_secs(60));
    /// # let _ = middleware;
    /// ```
    #[must_use]
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Hedges a request with an idempotent method and a body that can be cloned, as the
    /// attribute's `hedge` does: when its attempt has not answered after the hedge's delay
    /// (fixed, or a percentile of the key's recent latencies), another is sent beside it, up to
    /// the hedge's `max` in flight; the first response or error decides, and the other attempts
    /// are dropped, each reported as cancelled. Every attempt is admitted and counted by the
    /// circuit; no hedge is sent unless the circuit is closed, and the key's hedges are at most
    /// 10 % more requests over 10 s ([`Policy::hedge_budget`](fusebox::Policy::hedge_budget)). A request that
    /// is hedged is not retried: `hedge` replaces [`retry`](Self::retry) for the requests it
    /// applies to. Each attempt gets its own copy of the request's extensions; the winner's are
    /// kept.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fusebox::{Hedge, HedgeDelay};
    /// use fusebox_reqwest::CircuitBreakerMiddleware;
    ///
    /// let middleware = CircuitBreakerMiddleware::new("search")
    ///     .hedge(Hedge::new(HedgeDelay::Percentile(95)));
    /// # let _ = middleware;
    /// ```
    #[must_use]
    pub fn hedge(mut self, hedge: Hedge) -> Self {
        self.hedge = Some(hedge);
        self
    }

    /// Opts the middleware's requests in to fault injection (feature `chaos`), as the
    /// attribute's `chaos = true` does: a fault injected into a key ([`Registry::chaos`]) reaches
    /// every attempt of this middleware on that key (a plain request, each retry, each hedge).
    /// A middleware without it is never touched by an injection, and without the feature there
    /// is nothing to opt in to.
    ///
    /// After an attempt's admission, a fault that hits it:
    /// - [`Fault::rejection`](fusebox::chaos::Fault::rejection): the attempt is not sent; it
    ///   is rejected as by an open circuit ([`rejection`] finds the [`fusebox::Error`], reason
    ///   `Open`), and ends a retried request as a real rejection does;
    /// - [`Fault::latency`](fusebox::chaos::Fault::latency): the attempt is sent that late
    ///   (`tokio::time::sleep`), so a hedge sees it (the client's own timeout starts once it
    ///   is sent);
    /// - [`Fault::failure`](fusebox::chaos::Fault::failure) and
    ///   [`Fault::retry_after`](fusebox::chaos::Fault::retry_after): the attempt is not sent and
    ///   the value the fault builds is its answer, classified and reported as a real one (and
    ///   retried when [`retry`](Self::retry) says so): a `reqwest_middleware::Error` is its
    ///   error, a `reqwest::Response` its response, an `http::StatusCode` a synthetic response
    ///   of that status with an empty body — with `Retry-After` set to the fault's wait (whole
    ///   seconds, rounded up) for a `Retry-After` fault, so a `503` or `429` is pushback. A value
    ///   of another type is not injected (a WARN event `chaos_type_mismatch`) and the attempt is
    ///   sent.
    ///
    /// ```
    /// # #[cfg(feature = "chaos")] {
    /// use std::time::Duration;
    /// use fusebox::chaos::Fault;
    /// use fusebox_reqwest::CircuitBreakerMiddleware;
    ///
    /// static REGISTRY: fusebox::Registry = fusebox::Registry::new();
    /// let middleware = CircuitBreakerMiddleware::new("doc-reqwest-chaos").registry(&REGISTRY).chaos();
    /// REGISTRY.chaos().inject(
    ///     "doc-reqwest-chaos",
    ///     Fault::retry_after(|_| http::StatusCode::SERVICE_UNAVAILABLE, Duration::from_secs(5)).rate(0.1),
    /// );
    /// # let _ = middleware;
    /// # }
    /// ```
    #[cfg(feature = "chaos")]
    #[cfg_attr(docsrs, doc(cfg(feature = "chaos")))]
    #[must_use]
    pub fn chaos(mut self) -> Self {
        self.chaos = true;
        self
    }

    /// A permit of `breaker` for one attempt and what an injection does to it, or why it was
    /// rejected (by the circuit, or by an injected rejection).
    #[inline]
    fn admit(&self, breaker: &Breaker) -> Result<(OwnedPermit, chaos::Effect), Error> {
        #[cfg_attr(not(feature = "chaos"), allow(unused_mut))]
        let mut permit = acquire(breaker)?;
        #[cfg(feature = "chaos")]
        if self.chaos {
            let effect = chaos::effect(self.registry.chaos(), &mut permit)?;
            return Ok((permit, effect));
        }
        Ok((permit, chaos::Effect::None))
    }

    /// Declares the fixed key, if any, in the registry with the policy.
    fn declared(self) -> Self {
        if let Keying::Fixed(key, _) = &self.keying {
            self.registry.declare(key.as_str(), self.policy);
        }
        self
    }

    fn breaker(&self, url: &Url) -> Breaker {
        match &self.keying {
            Keying::Fixed(key, breaker) => breaker
                .get_or_init(|| {
                    let policy = usable_policy(key.as_str(), SITE_REQWEST, self.policy);
                    let breaker = self.registry.fixed(key.as_str(), policy);
                    breaker.claim(self.site);
                    breaker
                })
                .clone(),
            Keying::PerHost => {
                let breaker = self.registry.dynamic(&host_key(url), self.policy);
                breaker.claim(self.site);
                breaker
            }
        }
    }
}

/// No retry: one attempt.
const NO_RETRY: (u32, std::time::Duration) = (1, std::time::Duration::ZERO);
/// The default [`CircuitBreakerMiddleware::deadline`].
const DEFAULT_DEADLINE: Duration = Duration::from_secs(10);
/// The most attempts [`CircuitBreakerMiddleware::retry`] makes (the attribute's limit).
const MAX_ATTEMPTS: u32 = 100;

/// The function name the middleware's breakers report in events.
const SITE_REQWEST: &str = "fusebox_reqwest::CircuitBreakerMiddleware";

/// `host:port` of `url` (`unknown` for a URL without a host).
fn host_key(url: &Url) -> String {
    let host = url.host_str().unwrap_or("unknown");
    match url.port_or_known_default() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    }
}

/// The [`fusebox::Error`] inside `err` when the middleware rejected the request.
#[must_use]
pub fn rejection(err: &reqwest_middleware::Error) -> Option<&Error> {
    match err {
        reqwest_middleware::Error::Middleware(inner) => inner.downcast_ref::<Error>(),
        reqwest_middleware::Error::Reqwest(_) => None,
    }
}

/// [`HttpFailures`](fusebox_tower::HttpFailures) over a middleware's result: a `5xx` or `429` response and a transport error
/// count.
fn is_failure(outcome: &Result<Response, reqwest_middleware::Error>) -> bool {
    match outcome {
        Ok(response) => fusebox_tower::http_status_counts(response.status()),
        Err(_) => true,
    }
}

/// `Retry-After` of a `429` or `503` response ([`http_retry_after`](fusebox_tower::http_retry_after)).
fn retry_after(
    outcome: &Result<Response, reqwest_middleware::Error>,
    now: SystemTime,
) -> Option<Duration> {
    let response = outcome.as_ref().ok()?;
    fusebox_tower::http_retry_after(response.status(), response.headers(), now)
}

/// A permit of `breaker` for one attempt, or why it was rejected.
fn acquire(breaker: &Breaker) -> Result<OwnedPermit, Error> {
    let permit = breaker.admit(&SITE_REQWEST);
    match permit.rejection() {
        None => Ok(permit),
        Some(rejected) => Err(rejected),
    }
}

#[async_trait::async_trait]
impl Middleware for CircuitBreakerMiddleware {
    async fn handle(
        &self,
        req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        if let Some(hedge) = self.hedge
            && req.method().is_idempotent()
            && req.try_clone().is_some()
        {
            return self.handle_hedged(req, extensions, next, hedge).await;
        }
        if self.retry.0 > 1 && req.method().is_idempotent() {
            return self.handle_retrying(req, extensions, next).await;
        }
        let (permit, effect) = self
            .admit(&self.breaker(req.url()))
            .map_err(reqwest_middleware::Error::middleware)?;
        // Dropped unreported if this future is cancelled (nothing counted) or a panic unwinds
        // through it (a failure).
        let result = chaos::run(effect, next, req, extensions).await;
        report(permit, &result);
        result
    }
}

/// One attempt of a hedged request: its response and the extensions it ran with.
type HedgedAttempt<'a> = std::pin::Pin<
    Box<
        dyn std::future::Future<Output = (reqwest_middleware::Result<Response>, Extensions)>
            + Send
            + 'a,
    >,
>;

/// Sends `req` down the chain with its own copy of the extensions (or answers it, as `effect`
/// says).
fn attempt<'a>(
    next: &Next<'a>,
    (req, effect): (Request, chaos::Effect),
    extensions: Extensions,
) -> HedgedAttempt<'a> {
    let next = next.clone();
    Box::pin(async move {
        let mut extensions = extensions;
        let result = chaos::run(effect, next, req, &mut extensions).await;
        (result, extensions)
    })
}

/// Reports `result` on `permit` as [`Middleware::handle`] does.
fn report(permit: OwnedPermit, result: &reqwest_middleware::Result<Response>) {
    if !is_failure(result) {
        permit.success();
    } else if let Some(wait) = retry_after(result, permit.wall_time()) {
        // Pushback: a `429` or `503` with `Retry-After` keeps the circuit open that long when
        // it opens it.
        permit.failure_after(wait);
    } else {
        permit.failure();
    }
}

impl CircuitBreakerMiddleware {
    /// [`Middleware::handle`] with [`hedge`](Self::hedge): each attempt admitted and counted,
    /// each hedge sent while the circuit is closed and the key's hedge budget has room.
    async fn handle_hedged(
        &self,
        req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
        hedge: Hedge,
    ) -> reqwest_middleware::Result<Response> {
        let breaker = self.breaker(req.url());
        let (permit, effect) = (breaker.hedging())
            .attempt(|| self.admit(&breaker))
            .map_err(reqwest_middleware::Error::middleware)?;
        let copy = req.try_clone();
        let first = (permit, attempt(&next, (req, effect), extensions.clone()));
        let (permit, (result, kept), _) = fusebox::hedged(breaker.hedging(), hedge, first, || {
            let req = copy.as_ref()?.try_clone()?;
            let (permit, effect) = self.admit(&breaker).ok()?;
            Some((permit, attempt(&next, (req, effect), extensions.clone())))
        })
        .await;
        *extensions = kept;
        report(permit, &result);
        result
    }

    /// [`Middleware::handle`] with [`retry`](Self::retry): each attempt admitted and counted,
    /// each retry allowed by the circuit and the key's retry budget.
    async fn handle_retrying(
        &self,
        req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let breaker = self.breaker(req.url());
        let (attempts, backoff) = self.retry;
        let started = tokio::time::Instant::now();
        let mut req = req;
        let mut last = None;
        let mut n = 0;
        loop {
            n += 1;
            let (permit, effect) = match self.admit(&breaker) {
                Ok(admitted) => admitted,
                // A retry the circuit rejects ends with the last attempt's outcome.
                Err(rejected) => {
                    return last
                        .unwrap_or_else(|| Err(reqwest_middleware::Error::middleware(rejected)));
                }
            };
            breaker.count_attempt();
            // The next attempt's copy, made before this one consumes the request (`None`: a
            // streaming body, which cannot be sent twice).
            let again = if n < attempts { req.try_clone() } else { None };
            let result = chaos::run(effect, next.clone(), req, extensions).await;
            let failed = is_failure(&result);
            // Pushback: the wait a `429` or `503` asked for, reported as in `handle`.
            let wait = if failed {
                retry_after(&result, permit.wall_time())
            } else {
                None
            };
            match (failed, wait) {
                (false, _) => permit.success(),
                (true, Some(wait)) => permit.failure_after(wait),
                (true, None) => permit.failure(),
            }
            // A retry never comes back before the server's wait; one longer than the longest
            // backoff, or one that would start past the deadline, ends the request, as the
            // attribute's retries do. The retry budget is asked last.
            let backed_off = fusebox::backoff(backoff, n);
            let delay = backed_off.max(wait.unwrap_or_default());
            let fits = delay <= fusebox::limits::MAX_BACKOFF
                && started.elapsed().saturating_add(delay) < self.deadline;
            match again {
                Some(copy) if failed && fits && breaker.try_retry() => req = copy,
                _ => return result,
            }
            last = Some(result);
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_keys_name_host_and_port() {
        let key = |s: &str| host_key(&Url::parse(s).unwrap());
        assert_eq!(key("http://127.0.0.1:8080/a?b"), "127.0.0.1:8080");
        assert_eq!(key("https://api.example.com/x"), "api.example.com:443");
        assert_eq!(key("http://api.example.com/x"), "api.example.com:80");
        assert_eq!(key("http://[::1]:9000/"), "[::1]:9000");
        assert_eq!(key("data:text/plain,hi"), "unknown");
    }
}
