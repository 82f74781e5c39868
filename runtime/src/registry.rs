//! The fuse box: breakers by key, sharing one clock, with bounded dynamic keys and live overrides.
//!
//! Attribute call sites with a literal key resolve their breaker once and cache it in a per-site
//! `static`, so the map is off their hot path. Dynamic keys (`key = expr`) are looked up per call in
//! a lock-free concurrent map (`papaya`, chosen by the `keys` benchmark); reads take no lock.
//!
//! **Bounds.** Breakers created for dynamic keys are capped ([`Registry::set_max_keys`], default
//! 10,000). When the cap is reached, creating one more sweeps the map once: dynamic breakers that are
//! closed, idle (not used since the previous sweep) and have nothing in flight are evicted. If the
//! sweep frees nothing, that call runs through a fresh, unregistered breaker (it is not protected)
//! and a `tracing` warning names the key; memory never grows past the cap. Breakers of literal keys
//! and those made with [`Registry::breaker`] are never evicted.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, DefaultHasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use crate::breaker::{Breaker, Core, Snapshot};
use crate::clock::{Clock, ClockSource};
use crate::error::Key;
use crate::observe::{Hooks, Transition};
use crate::policy::{Policy, PolicyError};

type Map = papaya::HashMap<Key, Breaker, foldhash::fast::RandomState>;

/// The default cap on breakers created for dynamic keys.
pub const DEFAULT_MAX_KEYS: usize = 10_000;

/// An operator's override for one key: a whole policy, or a patch applied on top of the policy the
/// code declares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Override {
    Whole(Policy),
    #[cfg(feature = "config")]
    Patch(crate::config::PolicyPatch),
}

impl Override {
    fn apply(&self, declared: Policy) -> Policy {
        match self {
            Override::Whole(policy) => *policy,
            #[cfg(feature = "config")]
            Override::Patch(patch) => patch.apply(declared),
        }
    }
}

/// Breakers by key, and the clock they read.
///
/// `Registry::new()` is `const`, so a registry can be a plain `static`; tests use
/// [`Registry::with_clock`] in a `LazyLock` to drive time by hand:
///
/// ```
/// use std::sync::LazyLock;
/// use fusebox::{clock::FakeClock, Registry};
///
/// static CLOCK: LazyLock<FakeClock> = LazyLock::new(FakeClock::new);
/// static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(CLOCK.clone()));
/// # assert!(REGISTRY.get("none").is_none());
/// ```
pub struct Registry {
    clock: ClockSource,
    hooks: OnceLock<Arc<Hooks>>,
    map: OnceLock<Map>,
    overrides: RwLock<HashMap<String, Override, BuildHasherDefault<DefaultHasher>>>,
    /// Serializes creation, eviction and reconfiguration (never taken by calls on known keys).
    write: Mutex<()>,
    dynamic: AtomicUsize,
    max_keys: AtomicUsize,
    overflow: AtomicU64,
    /// The store every breaker of this registry shares its state through ([`Registry::share`]).
    #[cfg(feature = "redis")]
    store: OnceLock<crate::redis::RedisStore>,
}

impl Registry {
    /// An empty registry on the real monotonic clock.
    pub const fn new() -> Self {
        Self::build(ClockSource::Monotonic)
    }

    /// An empty registry reading `clock` (a [`FakeClock`](crate::clock::FakeClock) in tests).
    pub fn with_clock(clock: impl Clock) -> Self {
        Self::build(ClockSource::Custom(Arc::new(clock)))
    }

    const fn build(clock: ClockSource) -> Self {
        Registry {
            clock,
            hooks: OnceLock::new(),
            map: OnceLock::new(),
            overrides: RwLock::new(HashMap::with_hasher(BuildHasherDefault::new())),
            write: Mutex::new(()),
            dynamic: AtomicUsize::new(0),
            max_keys: AtomicUsize::new(DEFAULT_MAX_KEYS),
            overflow: AtomicU64::new(0),
            #[cfg(feature = "redis")]
            store: OnceLock::new(),
        }
    }

    #[inline]
    fn map(&self) -> &Map {
        self.map
            .get_or_init(|| papaya::HashMap::with_hasher(foldhash::fast::RandomState::default()))
    }

    fn hooks(&self) -> &Arc<Hooks> {
        self.hooks.get_or_init(Arc::default)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.write
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The breaker registered under `key`, if any call or [`breaker`](Registry::breaker) made it.
    pub fn get(&self, key: &str) -> Option<Breaker> {
        self.map().pin().get(key).cloned()
    }

    /// The breaker under `key`, created with `policy` if it does not exist yet.
    ///
    /// The first registration fixes the policy (an operator's [`configure`](Registry::configure)
    /// aside): a later call with a different policy gets the existing breaker and a `tracing`
    /// warning naming the key. An invalid `policy` is refused with an error naming the key, the
    /// field and its allowed range; nothing is registered then.
    pub fn breaker(&self, key: &str, policy: Policy) -> Result<Breaker, PolicyError> {
        policy.validate().map_err(|e| e.for_key(key))?;
        Ok(self.get_or_insert(key, policy, || Key::from(key)))
    }

    /// The breaker of a literal-key call site (or of [`breaker`](Registry::breaker)): never evicted.
    pub(crate) fn get_or_insert(
        &self,
        key: &str,
        policy: Policy,
        make_key: impl FnOnce() -> Key,
    ) -> Breaker {
        if let Some(existing) = self.get(key) {
            existing.core.set_pinned(true);
            warn_if_different(&existing, policy);
            return existing;
        }
        let _write = self.lock();
        if let Some(existing) = self.get(key) {
            existing.core.set_pinned(true);
            warn_if_different(&existing, policy);
            return existing;
        }
        let breaker = self.create(make_key(), policy);
        self.map()
            .pin()
            .insert(breaker.core.key().clone(), breaker.clone());
        breaker
    }

    /// A breaker made under the write lock, with the operator's override applied when valid.
    fn create(&self, key: Key, declared: Policy) -> Breaker {
        let policy = match self
            .overrides
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(key.as_str())
        {
            Some(o) => {
                let wanted = o.apply(declared);
                match wanted.validate() {
                    Ok(()) => wanted,
                    Err(error) => {
                        let field = error.field();
                        tracing::error!(
                            target: "fusebox",
                            key = key.as_str(),
                            field,
                            "{}; the override is ignored and the declared policy applies",
                            error.for_key(key.as_str())
                        );
                        declared
                    }
                }
            }
            None => declared,
        };
        let core = Core::new(key, policy, self.clock.clone(), self.hooks().clone());
        #[cfg(feature = "redis")]
        let core = crate::redis::attach(self.store.get(), core);
        #[cfg(not(feature = "redis"))]
        let core = Arc::new(core);
        Breaker { core }
    }

    /// Makes every breaker of this registry, present and future, one circuit across the processes
    /// that share `store` (keys the store keeps local aside). Breakers already in use continue
    /// their state locally and take the shared state from their next call on. Sharing is set once:
    /// a second call returns `false` and changes nothing.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), fusebox::redis::StoreError> {
    /// let store = fusebox::redis::RedisStore::connect("redis://127.0.0.1:6379/").await?;
    /// fusebox::registry().share(store);
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "redis")]
    pub fn share(&self, store: crate::redis::RedisStore) -> bool {
        let _write = self.lock();
        if self.store.set(store).is_err() {
            return false;
        }
        let map = self.map().pin();
        let existing: Vec<Breaker> = map.values().cloned().collect();
        for breaker in existing {
            let old = breaker.core.current();
            let next = crate::redis::attach(self.store.get(), old.successor_with(*old.policy()));
            if old.retire(next.clone()).is_ok() {
                map.insert(old.key().clone(), Breaker { core: next });
            }
        }
        true
    }

    /// The breaker of a dynamic key: one lock-free lookup (created on first use, within the cap).
    #[inline]
    pub(crate) fn dynamic(&self, key: &str, policy: Policy) -> Breaker {
        {
            let map = self.map().pin();
            if let Some(found) = map.get(key) {
                let core = found.core.current();
                core.touch();
                return Breaker { core: core.clone() };
            }
        }
        Breaker {
            core: self.insert_dynamic(key, policy),
        }
    }

    #[cold]
    fn insert_dynamic(&self, key: &str, policy: Policy) -> Arc<Core> {
        let _write = self.lock();
        if let Some(found) = self.get(key) {
            return found.core;
        }
        if self.dynamic.load(Ordering::Acquire) >= self.max_keys.load(Ordering::Acquire) {
            self.sweep();
        }
        let breaker = self.create(Key::from(key), usable_policy(key, "", policy));
        breaker.core.set_pinned(false);
        if self.dynamic.load(Ordering::Acquire) >= self.max_keys.load(Ordering::Acquire) {
            let overflow = self.overflow.fetch_add(1, Ordering::Relaxed) + 1;
            if overflow.is_power_of_two() {
                tracing::warn!(
                    target: "fusebox",
                    key,
                    max_keys = self.max_keys.load(Ordering::Relaxed),
                    overflow,
                    "registry holds its maximum of dynamic breakers and none is idle: this call to `{key}` is not protected; raise the cap with `Registry::set_max_keys`"
                );
            }
            return breaker.core;
        }
        self.dynamic.fetch_add(1, Ordering::AcqRel);
        self.map()
            .pin()
            .insert(breaker.core.key().clone(), breaker.clone());
        breaker.core
    }

    /// Evicts idle, closed, dynamic breakers (caller holds the write lock).
    fn sweep(&self) {
        let map = self.map().pin();
        let idle: Vec<Key> = map
            .iter()
            .filter(|(_, breaker)| breaker.core.current().evictable())
            .map(|(key, _)| key.clone())
            .collect();
        for key in idle {
            if map.remove(&key).is_some() {
                self.dynamic.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Caps the number of breakers created for dynamic keys (see the module documentation).
    pub fn set_max_keys(&self, max: usize) {
        self.max_keys.store(max.max(1), Ordering::Release);
    }

    /// Calls for dynamic keys that found the registry full and ran unprotected.
    pub fn overflow_count(&self) -> u64 {
        self.overflow.load(Ordering::Relaxed)
    }

    /// Replaces the policy of `key`, before or after its first use.
    ///
    /// Before: the breaker is created with `policy` instead of the declared one. After: the breaker is
    /// replaced by one running `policy` that continues its state (closed, open with the same
    /// deadline, forced open, disabled; half-open becomes open with its wait over, so the next call
    /// probes); its window starts empty. Call sites pick the new breaker up on their next call.
    /// An invalid policy is refused with an error naming the key, the field and the allowed range,
    /// and nothing changes.
    pub fn configure(&self, key: &str, policy: Policy) -> Result<(), PolicyError> {
        policy.validate().map_err(|e| e.for_key(key))?;
        let _write = self.lock();
        self.apply_override(key, Override::Whole(policy));
        Ok(())
    }

    /// Records `value` for `key` and swaps the live breaker (caller holds the write lock).
    pub(crate) fn apply_override(&self, key: &str, value: Override) {
        self.overrides
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.to_owned(), value);
        let map = self.map().pin();
        if let Some(existing) = map.get(key) {
            let old = existing.core.current();
            let policy = value.apply(*old.policy());
            let next = Arc::new(old.successor_with(policy));
            if old.retire(next.clone()).is_ok() {
                map.insert(old.key().clone(), Breaker { core: next });
            }
        }
    }

    /// Validates every override first and applies them only if all are valid.
    pub(crate) fn apply_overrides(
        &self,
        all: Vec<(String, Override)>,
    ) -> Result<usize, PolicyError> {
        let _write = self.lock();
        for (key, value) in &all {
            let base = self.get(key).map_or(Policy::DEFAULT, |b| b.policy());
            value.apply(base).validate().map_err(|e| e.for_key(key))?;
        }
        let n = all.len();
        for (key, value) in all {
            self.apply_override(&key, value);
        }
        Ok(n)
    }

    /// Calls `hook` on every state change of every breaker of this registry, present or future.
    ///
    /// The hook runs on the thread that made the transition, after the new state is published and
    /// outside any lock: it may read breakers or call into the registry without deadlocking.
    pub fn on_transition(&self, hook: impl Fn(&Transition<'_>) + Send + Sync + 'static) {
        self.hooks().add(Arc::new(hook));
    }

    /// Snapshots of every breaker, sorted by key.
    pub fn snapshot(&self) -> Vec<Snapshot> {
        let mut all: Vec<Snapshot> = self.map().pin().values().map(Breaker::snapshot).collect();
        all.sort_by(|a, b| a.key.cmp(&b.key));
        all
    }

    /// The number of registered breakers.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// True when no breaker exists yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `policy` when valid; otherwise the default, with an error event naming the key and the field.
/// (Literal attribute arguments are checked at compile time; a `policy = CONST` is checked here.)
pub(crate) fn usable_policy(key: &str, function: &str, policy: Policy) -> Policy {
    match policy.validate() {
        Ok(()) => policy,
        Err(error) => {
            let field = error.field();
            tracing::error!(
                target: "fusebox",
                key,
                field,
                function,
                "{}; breaker `{key}` runs the default policy instead",
                error.for_key(key)
            );
            Policy::DEFAULT
        }
    }
}

fn warn_if_different(existing: &Breaker, wanted: Policy) {
    if existing.policy() != wanted {
        tracing::warn!(
            target: "fusebox",
            key = existing.key(),
            existing = ?existing.policy(),
            requested = ?wanted,
            "breaker `{}` already exists with another policy; the first policy stays in force",
            existing.key()
        );
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("clock", &self.clock)
            .field("breakers", &self.len())
            .finish()
    }
}

static GLOBAL: Registry = Registry::new();

/// The global registry, used by every `#[circuit_breaker]` without `registry = …`.
pub fn registry() -> &'static Registry {
    &GLOBAL
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::State;
    use std::time::Duration;

    #[test]
    fn same_key_same_breaker_and_first_policy_wins() {
        let r = Registry::new();
        let a = r
            .breaker("k", Policy::new().window(5).min_calls(5))
            .unwrap();
        let b = r.breaker("k", Policy::new()).unwrap();
        assert_eq!(b.policy().window_len(), Some(5));
        a.force_open();
        assert_eq!(b.state(), State::ForcedOpen);
        assert_eq!(r.len(), 1);
        assert!(r.get("other").is_none());
    }

    #[test]
    fn invalid_policy_registers_nothing() {
        let r = Registry::new();
        let err = r.breaker("k", Policy::new().failure_rate(150)).unwrap_err();
        assert_eq!(err.field(), "failure_rate");
        assert_eq!(err.key(), Some("k"));
        assert!(r.is_empty());
    }

    #[test]
    fn configure_before_and_after_first_use() {
        let r = Registry::new();
        r.configure("early", Policy::new().window(7).min_calls(7))
            .unwrap();
        let early = r.breaker("early", Policy::new()).unwrap();
        assert_eq!(early.policy().window_len(), Some(7));

        let late = r
            .breaker("late", Policy::new().window(2).min_calls(1))
            .unwrap();
        late.try_acquire().unwrap().failure();
        assert_eq!(late.state(), State::Open);
        r.configure(
            "late",
            Policy::new()
                .window(3)
                .min_calls(3)
                .open_for(Duration::from_secs(1)),
        )
        .unwrap();
        // The old handle follows the replacement, which kept the open state.
        assert_eq!(late.policy().window_len(), Some(3));
        assert_eq!(late.state(), State::Open);
        assert_eq!(r.get("late").unwrap().policy().window_len(), Some(3));

        let err = r.configure("late", Policy::new().window(0)).unwrap_err();
        assert_eq!((err.key(), err.field()), (Some("late"), "window"));
        assert_eq!(late.policy().window_len(), Some(3), "nothing half-applied");
    }

    #[test]
    fn dynamic_keys_are_capped_and_idle_ones_evicted() {
        let r = Registry::new();
        r.set_max_keys(3);
        let policy = Policy::new();
        for host in ["a", "b", "c"] {
            r.dynamic(host, policy).try_acquire().unwrap().success();
        }
        assert_eq!(r.len(), 3);
        // Full and everything was used since creation: the first sweep only clears the marks.
        r.dynamic("d", policy).try_acquire().unwrap().success();
        assert_eq!(r.len(), 3);
        assert!(r.get("d").is_none());
        assert_eq!(r.overflow_count(), 1);
        // `a` is used again; `b` and `c` stay idle and go at the next sweep.
        r.dynamic("a", policy).try_acquire().unwrap().success();
        r.dynamic("e", policy).try_acquire().unwrap().success();
        assert!(r.get("a").is_some() && r.get("e").is_some());
        assert!(r.get("b").is_none() && r.get("c").is_none());
        // Literal keys are never evicted.
        r.breaker("pinned", policy).unwrap();
        assert!(r.len() <= 3 + 1);
    }
}
