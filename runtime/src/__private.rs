//! Items the `#[circuit_breaker]` expansion names. Not a public API: no stability promise.

use std::future::Future;
use std::sync::{LazyLock, OnceLock};

pub use ::core;

pub use crate::breaker::{Breaker, Permit};
pub use crate::error::{Cause, Error, Key};
pub use crate::policy::Policy;
pub use crate::registry::Registry;
pub use crate::retry::{Attempts, Settled, backoff_delay, run as run_attempts};

/// One annotated function: its key, policy and name, and the breaker it resolved to.
///
/// Lives in a `static` inside the generated function body, so after the first call admission is
/// one atomic load of the cached breaker: no hashing, no lock.
pub struct Site {
    key: &'static str,
    function: &'static str,
    policy: Policy,
    breaker: OnceLock<Breaker>,
}

impl Site {
    /// A call site of `function` for the breaker `key`.
    pub const fn new(key: &'static str, function: &'static str, policy: Policy) -> Self {
        Site {
            key,
            function,
            policy,
            breaker: OnceLock::new(),
        }
    }

    /// This site's breaker in `registry` (resolved and cached on first use).
    #[inline(always)]
    pub fn breaker(&'static self, registry: &'static Registry) -> &'static Breaker {
        match self.breaker.get() {
            Some(breaker) => breaker,
            None => self.resolve(registry),
        }
    }

    /// Asks this site's breaker in `registry` for admission; a refused call gets an inert permit
    /// whose [`Permit::refusal`] says why.
    #[inline(always)]
    pub fn enter(&'static self, registry: &'static Registry) -> Permit<'static> {
        let core: &'static crate::breaker::Core = self.breaker(registry).core.current();
        core.enter(&self.function)
    }

    /// [`Site::enter`] for an `async fn`: on a shared registry the permit asks the store, and
    /// [`admit_shared`] awaits its answer.
    #[cfg(feature = "redis")]
    #[inline(always)]
    pub fn enter_async(&'static self, registry: &'static Registry) -> Permit<'static> {
        let core: &'static crate::breaker::Core = self.breaker(registry).core.current();
        core.enter_with::<true>(&self.function)
    }

    /// Asks this site's breaker in `registry` for admission; a refusal is an [`Error`].
    #[inline]
    pub fn acquire(&'static self, registry: &'static Registry) -> Result<Permit<'static>, Error> {
        let core: &'static crate::breaker::Core = self.breaker(registry).core.current();
        core.acquire(&self.function)
    }

    #[cold]
    fn resolve(&'static self, registry: &'static Registry) -> &'static Breaker {
        self.breaker.get_or_init(|| {
            let policy = crate::registry::usable_policy(self.key, self.function, self.policy);
            registry.get_or_insert(self.key, policy, || Key::from_static(self.key))
        })
    }
}

/// A call site with a dynamic key (`key = expr`): its policy and name; the breaker is looked up per
/// call, without a lock, in the registry's concurrent map.
pub struct DynSite {
    function: &'static str,
    policy: Policy,
}

impl DynSite {
    /// A call site of `function`.
    pub const fn new(function: &'static str, policy: Policy) -> Self {
        DynSite { function, policy }
    }

    /// The breaker of `key` in `registry` (created on first use, within the registry's cap).
    #[inline]
    pub fn breaker(&'static self, registry: &'static Registry, key: &str) -> Breaker {
        registry.dynamic(key, self.policy)
    }

    /// Asks `breaker` (from [`DynSite::breaker`]) for admission; see [`Site::enter`].
    #[inline(always)]
    pub fn enter<'b>(&'static self, breaker: &'b Breaker) -> Permit<'b> {
        breaker.core.current().enter(&self.function)
    }

    /// [`DynSite::enter`] for an `async fn` (see [`Site::enter_async`]).
    #[cfg(feature = "redis")]
    #[inline(always)]
    pub fn enter_async<'b>(&'static self, breaker: &'b Breaker) -> Permit<'b> {
        breaker.core.current().enter_with::<true>(&self.function)
    }

    /// Asks `breaker` for admission; a refusal is an [`Error`].
    #[inline]
    pub fn acquire<'b>(&'static self, breaker: &'b Breaker) -> Result<Permit<'b>, Error> {
        breaker.core.current().acquire(&self.function)
    }
}

#[cfg(feature = "redis")]
pub use crate::redis::{admit_shared, asks_store, flush_shared, reports_to_store};

/// The global registry.
#[inline]
pub fn global() -> &'static Registry {
    crate::registry::registry()
}

/// What `registry = …` accepts: a `static` [`Registry`] or a `static LazyLock<Registry>`.
#[diagnostic::on_unimplemented(
    message = "`registry = …` must name a `static` of type `fusebox::Registry`, found `{Self}`",
    label = "not a `fusebox::Registry`",
    note = "declare it as `static REGISTRY: fusebox::Registry = fusebox::Registry::new();` or `static REGISTRY: LazyLock<fusebox::Registry> = …`"
)]
pub trait RegistryRef {
    /// The registry.
    fn registry(&'static self) -> &'static Registry;
}

impl RegistryRef for Registry {
    #[inline]
    fn registry(&'static self) -> &'static Registry {
        self
    }
}

impl<F: FnOnce() -> Registry> RegistryRef for LazyLock<Registry, F> {
    #[inline]
    fn registry(&'static self) -> &'static Registry {
        self
    }
}

/// Resolves a `registry = …` argument.
#[inline]
pub fn registry_of<R: RegistryRef + ?Sized>(registry: &'static R) -> &'static Registry {
    registry.registry()
}

/// The return type of an annotated function: a `Result`.
#[diagnostic::on_unimplemented(
    message = "`#[circuit_breaker]` needs a function that returns `Result<T, E>`, found `{Self}`",
    label = "not a `Result`",
    note = "the breaker counts `Err` values; return `Result<T, E>` (a type alias of it works too)"
)]
pub trait Outcome {
    /// The error type.
    type Error;
}

impl<T, E> Outcome for Result<T, E> {
    type Error = E;
}

/// Pins the output type of the wrapped async body so `?` inside it infers the function's error type.
#[inline(always)]
pub fn async_body<R: Outcome, F: Future<Output = R>>(body: F) -> F {
    body
}

/// Runs the wrapped body of a sync function; the closure keeps `return` and `?` inside it.
#[inline(always)]
pub fn sync_body<R: Outcome, F: FnOnce() -> R>(body: F) -> R {
    body()
}

/// An error type that can carry a refused call.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot carry a refused call: implement `From<fusebox::Error>` for `{Self}`, or add `fallback = …` to `#[circuit_breaker]`",
    label = "needs `From<fusebox::Error>`",
    note = "when the circuit is open the call returns `Err(E::from(fusebox::Error))` unless a fallback handles it"
)]
pub trait FromRejection {
    /// Converts the refusal.
    fn from_rejection(error: Error) -> Self;
}

impl<E: From<Error>> FromRejection for E {
    #[inline]
    fn from_rejection(error: Error) -> Self {
        E::from(error)
    }
}

/// Converts a refusal into the function's error type.
#[inline]
pub fn reject<E: FromRejection>(error: Error) -> E {
    E::from_rejection(error)
}

/// The value an async function's fallback returns: a future of the function's own return type.
#[diagnostic::on_unimplemented(
    message = "the fallback of an `async fn` must be an `async fn` returning `{R}`, but it returns `{Self}`",
    label = "this fallback does not return a future of `{R}`",
    note = "declare the fallback as `async fn name(<the function's parameters>, cause: fusebox::Cause<E>) -> {R}`"
)]
pub trait AsyncFallback<R>: Future<Output = R> {}

impl<R, F: Future<Output = R>> AsyncFallback<R> for F {}

/// Checks that an async fallback returns a future of the function's return type.
#[inline(always)]
pub fn async_fallback<R, F: AsyncFallback<R>>(fallback: F) -> F {
    fallback
}
