//! Call sites of the attribute: [`Site`] for a literal key (its breaker resolved once and cached),
//! [`DynSite`] for a key computed per call, and [`MethodName`] for methods named after their type.
//! The expansion names them through `__private`.

use std::sync::OnceLock;

use crate::breaker::{Breaker, Permit};
use crate::error::{Error, Key};
use crate::policy::Policy;
use crate::registry::Registry;

/// One annotated function: its key, policy and name, and the breaker it resolved to.
///
/// Lives in a `static` inside the generated function body, so after the first call admission is
/// one atomic load of the cached breaker: no hashing, no lock.
#[derive(Debug)]
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
    /// `admit_shared` awaits its answer.
    #[cfg(feature = "redis")]
    #[inline(always)]
    pub fn enter_async(&'static self, registry: &'static Registry) -> Permit<'static> {
        let core: &'static crate::breaker::Core = self.breaker(registry).core.current();
        core.enter_with::<true>(&self.function)
    }

    /// [`Site::enter_async`] for a method, whose events carry `name` (from [`MethodName::get`]).
    #[cfg(feature = "redis")]
    #[inline(always)]
    pub fn enter_async_as(
        &'static self,
        registry: &'static Registry,
        name: &'static &'static str,
    ) -> Permit<'static> {
        let core: &'static crate::breaker::Core = self.breaker(registry).core.current();
        core.enter_with::<true>(name)
    }

    /// Asks this site's breaker in `registry` for admission; a refusal is an [`Error`].
    ///
    /// # Errors
    ///
    /// The refusal as an [`Error`] when the circuit or the bulkhead refuses the call.
    #[inline]
    pub fn acquire(&'static self, registry: &'static Registry) -> Result<Permit<'static>, Error> {
        self.acquire_as(registry, &self.function)
    }

    /// [`Site::enter`] for a method, whose events carry `name` (from [`MethodName::get`]).
    #[inline(always)]
    pub fn enter_as(
        &'static self,
        registry: &'static Registry,
        name: &'static &'static str,
    ) -> Permit<'static> {
        let core: &'static crate::breaker::Core = self.breaker(registry).core.current();
        core.enter(name)
    }

    /// [`Site::acquire`] for a method, whose events carry `name` (from [`MethodName::get`]).
    ///
    /// # Errors
    ///
    /// The refusal as an [`Error`] when the circuit or the bulkhead refuses the call.
    #[inline]
    pub fn acquire_as(
        &'static self,
        registry: &'static Registry,
        name: &'static &'static str,
    ) -> Result<Permit<'static>, Error> {
        let core: &'static crate::breaker::Core = self.breaker(registry).core.current();
        core.acquire(name)
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
#[derive(Debug)]
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

    /// [`DynSite::enter_async`] for a method, whose events carry `name` (from [`MethodName::get`]).
    #[cfg(feature = "redis")]
    #[inline(always)]
    pub fn enter_async_as<'b>(
        &'static self,
        breaker: &'b Breaker,
        name: &'static &'static str,
    ) -> Permit<'b> {
        breaker.core.current().enter_with::<true>(name)
    }

    /// Asks `breaker` for admission; a refusal is an [`Error`].
    ///
    /// # Errors
    ///
    /// The refusal as an [`Error`] when the circuit or the bulkhead refuses the call.
    #[inline]
    pub fn acquire<'b>(&'static self, breaker: &'b Breaker) -> Result<Permit<'b>, Error> {
        breaker.core.current().acquire(&self.function)
    }

    /// [`DynSite::enter`] for a method, whose events carry `name` (from [`MethodName::get`]).
    #[inline(always)]
    pub fn enter_as<'b>(
        &'static self,
        breaker: &'b Breaker,
        name: &'static &'static str,
    ) -> Permit<'b> {
        breaker.core.current().enter(name)
    }

    /// [`DynSite::acquire`] for a method, whose events carry `name` (from [`MethodName::get`]).
    ///
    /// # Errors
    ///
    /// The refusal as an [`Error`] when the circuit or the bulkhead refuses the call.
    #[inline]
    pub fn acquire_as<'b>(
        &'static self,
        breaker: &'b Breaker,
        name: &'static &'static str,
    ) -> Result<Permit<'b>, Error> {
        breaker.core.current().acquire(name)
    }
}

/// The name events give an annotated method: `path::to::Type::method`, built on the first call
/// from `core::any::type_name::<Self>()` (a `static` cannot name `Self`), then kept.
#[derive(Debug)]
pub struct MethodName {
    method: &'static str,
    full: OnceLock<&'static str>,
}

impl MethodName {
    /// The name of `method`, completed with its type on first use.
    pub const fn new(method: &'static str) -> Self {
        MethodName {
            method,
            full: OnceLock::new(),
        }
    }

    /// `Type::method`, where `type_name` is `core::any::type_name::<Self>`.
    #[inline(always)]
    pub fn get(&'static self, type_name: fn() -> &'static str) -> &'static &'static str {
        match self.full.get() {
            Some(name) => name,
            None => self.init(type_name),
        }
    }

    #[cold]
    fn init(&'static self, type_name: fn() -> &'static str) -> &'static &'static str {
        self.full.get_or_init(|| {
            let name = method_path(type_name(), self.method);
            // Once per annotated method, for the life of the program.
            Box::leak(name.into_boxed_str())
        })
    }
}

/// `Type::method` from a type's name: the generic arguments are left out, so every
/// instantiation of a generic type shares one name (`app::Client::get`, not
/// `app::Client<app::Json>::get`).
fn method_path(type_name: &str, method: &str) -> String {
    let base = match type_name.find('<') {
        Some(0) | None => type_name,
        Some(at) => &type_name[..at],
    };
    format!("{base}::{method}")
}

impl crate::declared::DeclaredSite for Site {
    fn key(&self) -> &'static str {
        self.key
    }

    /// The declared policy as the breaker will run it (the default when it is invalid).
    fn policy(&self) -> Policy {
        if self.policy.validate().is_ok() {
            self.policy
        } else {
            Policy::DEFAULT
        }
    }
}

#[cfg(test)]
mod tests {
    use super::method_path;

    #[test]
    fn method_paths_leave_generic_arguments_out() {
        assert_eq!(method_path("app::Client", "get"), "app::Client::get");
        assert_eq!(
            method_path("app::Client<app::Json, u8>", "get"),
            "app::Client::get"
        );
        assert_eq!(method_path("&app::Client", "get"), "&app::Client::get");
        assert_eq!(method_path("<weird>", "get"), "<weird>::get");
    }
}
