//! Call sites of the attribute: [`Site`] for a literal key (its breaker resolved once and cached),
//! [`DynSite`] for a key computed per call, and [`MethodName`] for methods named after their type.
//! The expansion names them through `__private`.
//!
//! The entry points the expansion calls are `inline(always)` only without `debug_assertions`
//! (ARCHITECTURE.md, "Inlining").

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crate::breaker::{Breaker, FnName, Named, NamedPermit, RawPermit, SiteLink, SitePermit};
use crate::error::{Error, Key};
use crate::key::same_bytes;
use crate::policy::Policy;
use crate::registry::Registry;

/// One annotated function: its key, policy and name, and the breaker it resolved to.
///
/// Lives in a `static` inside the generated function body, so after the first call admission is
/// one atomic load of the cached breaker: no hashing, no lock.
#[derive(Debug)]
pub struct Site {
    key: &'static str,
    /// The annotated function's path. Public for the expansion alone, which passes
    /// `&SITE.function` to each report: a place, not a call (see [`Site::enter`]).
    #[doc(hidden)]
    pub function: &'static str,
    policy: Policy,
    breaker: OnceLock<Breaker>,
    /// The site's link to the first circuit it admitted through (see [`Site::enter_linked`]).
    link: OnceLock<SiteLink>,
}

impl Site {
    /// A call site of `function` for the breaker `key`.
    #[must_use]
    pub const fn new(key: &'static str, function: &'static str, policy: Policy) -> Self {
        Site {
            key,
            function,
            policy,
            breaker: OnceLock::new(),
            link: OnceLock::new(),
        }
    }

    /// [`Site::enter`] for an `async fn` that asks no store: the permit reaches its circuit and
    /// the function's name `name` through the site's link to the circuit (two words across the
    /// body's await, see [`SitePermit`]).
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn enter_linked(&'static self, registry: &'static Registry, name: FnName) -> SitePermit {
        let link = match self.link.get() {
            Some(link) => link,
            None => self.first_link(registry, name),
        }
        .newest();
        let core = link.core();
        crate::nested::enter(core);
        SitePermit::new(link, core.admission_for::<false>(name))
    }

    /// The site's first link, to its breaker's newest circuit.
    #[cold]
    fn first_link(&'static self, registry: &'static Registry, name: FnName) -> &'static SiteLink {
        let core: &'static crate::breaker::Circuit = self.breaker(registry).core.current();
        self.link.get_or_init(|| SiteLink::new(core, name))
    }

    /// This site's breaker in `registry` (resolved and cached on first use).
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn breaker(&'static self, registry: &'static Registry) -> &'static Breaker {
        match self.breaker.get() {
            Some(breaker) => breaker,
            None => self.resolve(registry),
        }
    }

    /// Asks this site's breaker in `registry` for admission for the function named `name` (a
    /// function's [`Site::function`], a method's `MethodName`); a rejected call gets an inert permit
    /// whose rejection says why.
    ///
    /// The expansion puts the permit in a `NamedPermit` beside the name (three words across the
    /// body's await, and no type of the expansion's own to compile); this function and the
    /// reports take the name as an argument, so they are compiled once, not once per annotated
    /// function. With `ASK_STORE` (an `async fn`), a breaker shared through a store answers with
    /// a permit that asks the store, which `admit_shared` awaits; without it, or on a registry
    /// that shares nothing, admission is the same as a sync function's.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn enter<const ASK_STORE: bool>(
        &'static self,
        registry: &'static Registry,
        name: FnName,
    ) -> RawPermit<'static> {
        let core: &'static crate::breaker::Circuit = self.breaker(registry).core.current();
        crate::nested::enter(core);
        core.enter_raw::<ASK_STORE>(name)
    }

    /// Asks this site's breaker in `registry` for admission (each attempt of a function with
    /// `retry`, `backoff` or `deadline`); a rejection is an [`Error`]. The permit finds the
    /// function's name through `name`, the expansion's zero-sized type that knows it (the attempt
    /// driver keeps a permit in several of its states, so the type saves a word in each).
    ///
    /// # Errors
    ///
    /// The rejection as an [`Error`] when the circuit or the bulkhead rejects the call.
    #[inline]
    pub fn acquire<N: Named>(
        &'static self,
        registry: &'static Registry,
        name: N,
    ) -> Result<NamedPermit<'static, N>, Error> {
        let core: &'static crate::breaker::Circuit = self.breaker(registry).core.current();
        crate::nested::enter(core);
        core.acquire_awaiting(name)
    }

    #[cold]
    fn resolve(&'static self, registry: &'static Registry) -> &'static Breaker {
        self.breaker.get_or_init(|| {
            let policy = crate::registry::usable_policy(self.key, self.function, self.policy);
            let breaker = registry.get_or_insert(self.key, policy, || Key::from_static(self.key));
            breaker
                .core
                .current()
                .claim_site(std::ptr::from_ref(self).addr());
            breaker
        })
    }
}

/// How many keys a [`DynSite`] caches over its life (see [`DynSite`]).
pub(crate) const SITE_CACHE_SLOTS: usize = 4;

/// A call site with a dynamic key (`key = expr`): its policy and name, and a cache of its last
/// key. The breaker is looked up per call, without a lock, in the registry's concurrent map, unless
/// the key is the cached one.
///
/// When two calls in a row on one thread find (or make, then find) the same breaker in the map,
/// the site caches that key
/// and its breaker; a call with the cached key then skips the map and takes no reference count
/// (one load of the cache and a comparison of the key). A site fills at most
/// four cache slots over its life and keeps what it put in them, so a site holds at most four
/// breakers alive beyond the registry's cap; once they are full it switches only
/// between the keys they hold. A cached breaker the registry has evicted, or one of another
/// registry, is never handed out: that call goes to the map.
#[derive(Debug)]
pub struct DynSite {
    /// The annotated function's path, public for the expansion alone (see [`Site::function`]).
    #[doc(hidden)]
    pub function: &'static str,
    policy: Policy,
    /// Keys found twice in a row, with their breakers, filled in order and never emptied.
    slots: [OnceLock<Cached>; SITE_CACHE_SLOTS],
    /// The slot of the last key plus one (0 when none).
    current: AtomicUsize,
    /// Slots claimed so far (may exceed the slot count; only the first ones are filled).
    claimed: AtomicUsize,
}

thread_local! {
    /// The address of the breaker this thread's last dynamic-key lookup found or made (0 before
    /// any): thread-local, so calls to many keys from many threads write no shared line for it.
    static SEEN: Cell<usize> = const { Cell::new(0) };
}

/// A [`DynSite`]'s cached key.
#[derive(Debug)]
struct Cached {
    registry: &'static Registry,
    key: Box<str>,
    breaker: Breaker,
}

impl Cached {
    /// This slot's breaker when it serves `key` in `registry` and is still registered.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn serves(&'static self, registry: &Registry, key: &str) -> Option<&'static Breaker> {
        if !std::ptr::eq(self.registry, registry)
            || !same_bytes(self.key.as_bytes(), key.as_bytes())
        {
            return None;
        }
        let core = self.breaker.core.current();
        if core.is_evicted() {
            return None;
        }
        core.touch();
        Some(&self.breaker)
    }
}

/// Where a dynamic-key call keeps its breaker while it runs: empty when the breaker is the
/// site's cached one (borrowed for the program's life, no reference count), else the breaker
/// found in the registry, which the call owns (an `async fn` may be polled on other threads
/// while the registry evicts the key). One word.
#[derive(Debug, Default)]
pub struct SiteBreaker(Option<Breaker>);

impl SiteBreaker {
    /// An empty holder, filled by [`DynSite::enter`] or [`DynSite::breaker`].
    #[inline(always)]
    #[must_use]
    pub const fn new() -> Self {
        SiteBreaker(None)
    }
}

/// Where a dynamic-key call of a plain `fn` keeps its breaker while it runs: the breaker found in
/// the registry is borrowed under a guard of the registry's map, held for the call, so the call
/// takes no reference count (the map frees an evicted or replaced breaker only once every guard
/// that could see it has been dropped). A breaker the call had to create, or the site's cached
/// one, is held or borrowed as by [`SiteBreaker`].
///
/// A guard ties the call to its thread, which a plain `fn` never leaves; an `async fn`, which may
/// move between threads at each await, holds a [`SiteBreaker`] instead. While a guard lives, the
/// map keeps what it removes (for every key) in memory: a call holds it no longer than it runs.
#[derive(Default)]
pub struct LocalBreaker(std::mem::ManuallyDrop<Option<Pinned>>);

impl Drop for LocalBreaker {
    /// A holder the site's cache served is empty: one check, inline. The map's guard is released
    /// here too; a breaker the call created, out of line.
    #[inline(always)]
    fn drop(&mut self) {
        // `take` leaves `None`, which owns nothing: `ManuallyDrop` only keeps the compiler from
        // adding a second, outlined check of the field after this one.
        if let Some(Pinned { map, owned }) = self.0.take() {
            drop(map);
            if let Some(owned) = owned {
                release(owned);
            }
        }
    }
}

/// Drops the breaker a call created (it was not in the map), out of line.
#[cold]
#[inline(never)]
fn release(owned: Breaker) {
    drop(owned);
}

/// A [`LocalBreaker`] that went to the map: a guard of the map, and the breaker the call created
/// when the map did not have it. One `Option` around both, so a call served by the site's cache
/// drops its holder with one check.
struct Pinned {
    map: crate::registry::Pinned,
    owned: Option<Breaker>,
}

impl LocalBreaker {
    /// An empty holder, filled by [`DynSite::enter_local`].
    #[inline(always)]
    #[must_use]
    pub const fn new() -> Self {
        LocalBreaker(std::mem::ManuallyDrop::new(None))
    }
}

impl std::fmt::Debug for LocalBreaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalBreaker")
            .field("pinned", &self.0.is_some())
            .field("owned", &self.0.as_ref().and_then(|p| p.owned.as_ref()))
            .finish()
    }
}

impl DynSite {
    /// A call site of `function`.
    #[must_use]
    pub const fn new(function: &'static str, policy: Policy) -> Self {
        DynSite {
            function,
            policy,
            slots: [const { OnceLock::new() }; SITE_CACHE_SLOTS],
            current: AtomicUsize::new(0),
            claimed: AtomicUsize::new(0),
        }
    }

    /// The breaker of `key` in `registry` (created on first use, within the registry's cap),
    /// kept in `held` when the call must own it.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn breaker<'b>(
        &'static self,
        registry: &'static Registry,
        key: &str,
        held: &'b mut SiteBreaker,
    ) -> &'b Breaker {
        match self.cached(registry, key) {
            Some(breaker) => breaker,
            None => self.look_up(registry, key, held),
        }
    }

    /// The site's cached breaker, when it serves `key` in `registry`.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn cached(&'static self, registry: &'static Registry, key: &str) -> Option<&'static Breaker> {
        let current = self.current.load(Ordering::Acquire);
        let slot = self.slots.get(current.checked_sub(1)?)?;
        slot.get()?.serves(registry, key)
    }

    /// The map lookup of a key that is not the cached one, kept in `held`; caches the key when
    /// this thread's previous lookup found the same breaker.
    #[inline(never)]
    fn look_up<'b>(
        &'static self,
        registry: &'static Registry,
        key: &str,
        held: &'b mut SiteBreaker,
    ) -> &'b Breaker {
        let Some(breaker) = registry.find_dynamic(key) else {
            let made = registry.dynamic(key, self.policy);
            SEEN.set(Arc::as_ptr(&made.core) as usize);
            return held.0.insert(made);
        };
        self.seen(registry, key, &breaker);
        held.0.insert(breaker)
    }

    /// Notes that this thread's lookup found `breaker` in the map, and caches `key` when its
    /// previous lookup found the same one.
    #[inline(always)]
    fn seen(&'static self, registry: &'static Registry, key: &str, breaker: &Breaker) {
        let at = Arc::as_ptr(&breaker.core) as usize;
        if SEEN.replace(at) == at {
            self.cache(registry, key, breaker);
        }
    }

    /// [`DynSite::look_up`] for a call that runs on this thread (a plain `fn`): the breaker found
    /// in the map is borrowed under the guard `held` keeps for the call, without a reference
    /// count.
    #[inline(never)]
    fn look_up_local<'b>(
        &'static self,
        registry: &'static Registry,
        key: &str,
        held: &'b mut LocalBreaker,
    ) -> &'b Breaker {
        let Pinned { map, owned } = held.0.insert(Pinned {
            map: registry.pinned(),
            owned: None,
        });
        let Some(breaker) = registry.find_dynamic_in(key, map) else {
            let made = owned.insert(registry.dynamic(key, self.policy));
            SEEN.set(Arc::as_ptr(&made.core) as usize);
            return made;
        };
        self.seen(registry, key, breaker);
        breaker
    }

    /// Points the cache at `key`: a slot that already serves it, else the next free slot.
    #[cold]
    fn cache(&'static self, registry: &'static Registry, key: &str, breaker: &Breaker) {
        let filled = self.claimed.load(Ordering::Acquire).min(SITE_CACHE_SLOTS);
        for (at, slot) in self.slots[..filled].iter().enumerate() {
            if slot
                .get()
                .is_some_and(|c| c.serves(registry, key).is_some())
            {
                self.current.store(at + 1, Ordering::Release);
                return;
            }
        }
        if filled == SITE_CACHE_SLOTS {
            return;
        }
        let at = self.claimed.fetch_add(1, Ordering::AcqRel);
        let Some(slot) = self.slots.get(at) else {
            return;
        };
        let cached = Cached {
            registry,
            key: key.into(),
            breaker: breaker.clone(),
        };
        if slot.set(cached).is_ok() {
            self.current.store(at + 1, Ordering::Release);
        }
    }

    /// Asks the breaker of `key` in `registry` for admission for the function named `name`; a
    /// rejected call gets an inert permit whose rejection says why. The breaker is kept in `held`
    /// when the call owns it (see [`SiteBreaker`]); the permit borrows it. `ASK_STORE` and the
    /// name are as on [`Site::enter`].
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn enter<'b, const ASK_STORE: bool>(
        &'static self,
        registry: &'static Registry,
        key: &str,
        held: &'b mut SiteBreaker,
        name: FnName,
    ) -> RawPermit<'b> {
        crate::nested::clear();
        let breaker = self.breaker(registry, key, held);
        breaker.core.current().enter_raw::<ASK_STORE>(name)
    }

    /// [`DynSite::enter`] for a plain `fn`, whose call runs on the calling thread: a breaker found
    /// in the registry is borrowed under the map's guard that `held` keeps for the call (see
    /// [`LocalBreaker`]), so the call takes no reference count. The name is as on
    /// [`Site::enter`].
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn enter_local<'b>(
        &'static self,
        registry: &'static Registry,
        key: &str,
        held: &'b mut LocalBreaker,
        name: FnName,
    ) -> RawPermit<'b> {
        crate::nested::clear();
        let breaker = match self.cached(registry, key) {
            Some(breaker) => breaker,
            None => self.look_up_local(registry, key, held),
        };
        breaker.core.current().enter_raw::<false>(name)
    }

    /// Asks `breaker` (from [`DynSite::breaker`]) for admission (each attempt of a function with
    /// `retry`, `backoff` or `deadline`); a rejection is an [`Error`]. The permit finds the
    /// function's name through `name`, as with [`Site::acquire`].
    ///
    /// # Errors
    ///
    /// The rejection as an [`Error`] when the circuit or the bulkhead rejects the call.
    #[inline]
    pub fn acquire<'b, N: Named>(
        &'static self,
        breaker: &'b Breaker,
        name: N,
    ) -> Result<NamedPermit<'b, N>, Error> {
        crate::nested::clear();
        breaker.core.current().acquire_awaiting(name)
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
    #[must_use]
    pub const fn new(method: &'static str) -> Self {
        MethodName {
            method,
            full: OnceLock::new(),
        }
    }

    /// `Type::method`, where `type_name` is `core::any::type_name::<Self>`.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn get(&'static self, type_name: fn() -> &'static str) -> &'static &'static str {
        match self.full.get() {
            Some(name) => name,
            None => self.init(type_name),
        }
    }

    /// The name [`MethodName::get`] made (the bare method's name before the first `get`).
    #[inline(always)]
    pub fn cached(&'static self) -> &'static &'static str {
        self.full.get().unwrap_or(&self.method)
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
mod tests;
