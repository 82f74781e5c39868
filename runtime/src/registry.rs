//! The fuse box: breakers by key, sharing one clock.
//!
//! Attribute call sites look a breaker up once and cache it in a per-site static, so the map is off
//! the hot path for literal keys.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, DefaultHasher};
use std::sync::{Arc, OnceLock, RwLock};

use crate::breaker::{Breaker, Core, Snapshot};
use crate::clock::{Clock, ClockSource};
use crate::error::Key;
use crate::observe::{Hooks, Transition};
use crate::policy::{Policy, PolicyError};

type Map = HashMap<Key, Breaker, BuildHasherDefault<DefaultHasher>>;

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
    breakers: RwLock<Map>,
}

impl Registry {
    /// An empty registry on the real monotonic clock.
    pub const fn new() -> Self {
        Registry {
            clock: ClockSource::Monotonic,
            hooks: OnceLock::new(),
            breakers: RwLock::new(HashMap::with_hasher(BuildHasherDefault::new())),
        }
    }

    /// An empty registry reading `clock` (a [`FakeClock`](crate::clock::FakeClock) in tests).
    pub fn with_clock(clock: impl Clock) -> Self {
        Registry {
            clock: ClockSource::Custom(Arc::new(clock)),
            hooks: OnceLock::new(),
            breakers: RwLock::new(HashMap::with_hasher(BuildHasherDefault::new())),
        }
    }

    /// The breaker registered under `key`, if any call or [`breaker`](Registry::breaker) made it.
    pub fn get(&self, key: &str) -> Option<Breaker> {
        self.read().get(key).cloned()
    }

    /// The breaker under `key`, created with `policy` if it does not exist yet.
    ///
    /// The first registration fixes the policy: a later call with a different policy gets the
    /// existing breaker (and a `tracing` warning naming the key). An invalid `policy` is refused
    /// with an error naming the field and its allowed range; nothing is registered then.
    pub fn breaker(&self, key: &str, policy: Policy) -> Result<Breaker, PolicyError> {
        policy.validate()?;
        Ok(self.get_or_insert(key, policy, || Key::from(key)))
    }

    pub(crate) fn get_or_insert(
        &self,
        key: &str,
        policy: Policy,
        make_key: impl FnOnce() -> Key,
    ) -> Breaker {
        if let Some(existing) = self.read().get(key) {
            warn_if_different(existing, policy);
            return existing.clone();
        }
        let mut map = self
            .breakers
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let breaker = map.entry(make_key()).or_insert_with_key(|key| Breaker {
            core: Arc::new(Core::new(
                key.clone(),
                policy,
                self.clock.clone(),
                self.hooks().clone(),
            )),
        });
        warn_if_different(breaker, policy);
        breaker.clone()
    }

    /// Calls `hook` on every state change of every breaker of this registry, present or future.
    ///
    /// The hook runs on the thread that made the transition, after the new state is published and
    /// outside any lock: it may read breakers or call into the registry without deadlocking.
    pub fn on_transition(&self, hook: impl Fn(&Transition<'_>) + Send + Sync + 'static) {
        self.hooks().add(Arc::new(hook));
    }

    fn hooks(&self) -> &Arc<Hooks> {
        self.hooks.get_or_init(Arc::default)
    }

    /// Snapshots of every breaker, sorted by key.
    pub fn snapshot(&self) -> Vec<Snapshot> {
        let mut all: Vec<Snapshot> = self.read().values().map(Breaker::snapshot).collect();
        all.sort_by(|a, b| a.key.cmp(&b.key));
        all
    }

    /// The number of breakers.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// True when no breaker exists yet.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Map> {
        self.breakers
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
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

    #[test]
    fn same_key_same_breaker_and_first_policy_wins() {
        let r = Registry::new();
        let a = r
            .breaker("k", Policy::new().window(5).min_calls(5))
            .unwrap();
        let b = r.breaker("k", Policy::new()).unwrap();
        assert_eq!(b.policy().window_len(), Some(5));
        a.force_open();
        assert_eq!(b.state(), crate::State::ForcedOpen);
        assert_eq!(r.len(), 1);
        assert!(r.get("other").is_none());
    }

    #[test]
    fn invalid_policy_registers_nothing() {
        let r = Registry::new();
        let err = r.breaker("k", Policy::new().failure_rate(0)).unwrap_err();
        assert_eq!(err.field(), "failure_rate");
        assert!(r.is_empty());
    }
}
