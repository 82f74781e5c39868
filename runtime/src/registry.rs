//! The fuse box: breakers by key, sharing one clock, with bounded dynamic keys and live overrides.
//!
//! Attribute call sites with a literal key resolve their breaker once and cache it in a per-site
//! `static`, so the map is off their hot path. Dynamic keys (`key = expr`) are looked up per call in
//! a lock-free concurrent map (`papaya`, chosen by the `keys` benchmark); reads take no lock.
//!
//! **Bounds.** Breakers created for dynamic keys are capped ([`Registry::set_max_keys`], default
//! 10,000). When the cap is reached, creating one more advances a clock hand over the dynamic keys
//! in creation order, looking at no more than [`SWEEP_STEP`] of them: a breaker with nothing in
//! flight goes when it is closed and idle (no call found it since it was created or since the hand
//! last passed it) or open with its wait over (the next probe would find out again all it knows). An open breaker still within its
//! wait is never evicted, so a flood of new keys cannot reset a tripped circuit. If the hand frees
//! nothing, that call runs through a fresh, unregistered breaker (it is not protected) and a
//! rate-limited `tracing` warning names the key; memory never grows past the cap. Breakers of
//! literal keys and those made with [`Registry::breaker`] are never evicted and do not count
//! against the cap, also when a dynamic key created them first. A dynamic key longer than
//! [`MAX_KEY_LEN`] bytes is stored as a bounded form of itself (see [`MAX_KEY_LEN`]).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, DefaultHasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use crate::breaker::{Breaker, Core, Snapshot};
use crate::clock::{Clock, ClockSource};
use crate::error::Key;
use crate::observe::{Hooks, Transition};
use crate::policy::{Policy, PolicyError, PolicyPatch};
use crate::state::State;

type Map = papaya::HashMap<Key, Breaker, foldhash::fast::RandomState>;

/// The default cap on breakers created for dynamic keys.
pub const DEFAULT_MAX_KEYS: usize = 10_000;

/// The longest dynamic key kept as it is, in bytes.
///
/// A longer dynamic key (`key = expr`) is stored as its first bytes (up to 239, cut at a character
/// boundary), `#`, and 16 hex digits of a hash of the whole key: at most this many bytes. Each long
/// key still gets its own breaker; events, snapshots and errors show the bounded form, and
/// [`Registry::get`] accepts either form. So the registry's memory is bounded by the key cap
/// whatever the keys' length.
pub const MAX_KEY_LEN: usize = 256;

/// The most dynamic breakers one creation looks at when the registry is full (the clock hand's
/// step): eviction costs a bounded amount per miss, never a sweep of every key.
pub const SWEEP_STEP: usize = 32;

/// The bounded form of a dynamic key longer than [`MAX_KEY_LEN`] (`None` when it fits).
fn bounded_key(key: &str) -> Option<String> {
    use std::hash::{Hash, Hasher};
    if key.len() <= MAX_KEY_LEN {
        return None;
    }
    let mut cut = MAX_KEY_LEN - 17;
    while !key.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut hasher = DefaultHasher::new();
    key.hash(&mut hasher);
    Some(format!("{}#{:016x}", &key[..cut], hasher.finish()))
}

type Patches = HashMap<String, PolicyPatch, BuildHasherDefault<DefaultHasher>>;

/// Where an override came from. Each load replaces everything the previous load from the same
/// source set; the sources apply in this order, a later one winning on the fields it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg(feature = "config")]
pub(crate) enum Source {
    /// `load_toml`.
    File,
    /// `load_env` / `load_vars`.
    Env,
}

/// Operators' overrides, by source. A breaker runs its declared policy with the file's patch,
/// then the environment's, then `configure`'s applied on top.
#[derive(Default, Clone)]
struct Overrides {
    file: Patches,
    env: Patches,
    configured: Patches,
}

impl Overrides {
    fn patch(&self, key: &str) -> PolicyPatch {
        [&self.file, &self.env, &self.configured]
            .into_iter()
            .filter_map(|layer| layer.get(key).copied())
            .fold(PolicyPatch::new(), PolicyPatch::then)
    }

    #[cfg(feature = "config")]
    fn layer_mut(&mut self, source: Source) -> &mut Patches {
        match source {
            Source::File => &mut self.file,
            Source::Env => &mut self.env,
        }
    }
}

/// A configured key that no breaker of the registry declares, with the closest declared names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKey {
    /// The configured key.
    pub key: String,
    /// Declared keys close to it, best first (empty when none is close).
    pub closest: Vec<String>,
}

impl std::fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut chars = self.key.chars();
        let head: String = chars.by_ref().take(40).collect();
        let more = if chars.next().is_some() { "…" } else { "" };
        write!(f, "no breaker `{head}{more}` is declared")?;
        match self.closest.as_slice() {
            [] => write!(
                f,
                "; the override applies if a breaker of that key is created later (a dynamic key or `Registry::breaker`)"
            ),
            names => {
                let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
                write!(f, "; did you mean {}?", names.join(" or "))
            }
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
    overrides: RwLock<Overrides>,
    /// The declared policy of each breaker that runs an overridden one (what a reload patches;
    /// a breaker not listed runs its declared policy). Written under `write`.
    declared: RwLock<HashMap<String, Policy, BuildHasherDefault<DefaultHasher>>>,
    /// Serializes creation, eviction and reconfiguration (never taken by calls on known keys).
    write: Mutex<()>,
    dynamic: AtomicUsize,
    /// Dynamic keys in creation order: the eviction clock hand walks it from the front (locked
    /// only under `write`).
    ring: Mutex<VecDeque<Key>>,
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
            overrides: RwLock::new(Overrides {
                file: HashMap::with_hasher(BuildHasherDefault::new()),
                env: HashMap::with_hasher(BuildHasherDefault::new()),
                configured: HashMap::with_hasher(BuildHasherDefault::new()),
            }),
            declared: RwLock::new(HashMap::with_hasher(BuildHasherDefault::new())),
            write: Mutex::new(()),
            dynamic: AtomicUsize::new(0),
            ring: Mutex::new(VecDeque::new()),
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

    /// The breaker registered under `key`: made by a call, by [`breaker`](Registry::breaker), or
    /// declared by a `#[circuit_breaker]` with this literal key and this registry (created here
    /// before its first call, with the declared policy). A dynamic key longer than
    /// [`MAX_KEY_LEN`] is found by its full text or its bounded form.
    pub fn get(&self, key: &str) -> Option<Breaker> {
        if let Some(found) = self.lookup(key) {
            return Some(found);
        }
        let declared = crate::declared::of(self).find(|d| d.key == key)?;
        Some(self.get_or_insert(key, declared.policy, || Key::from_static(declared.key)))
    }

    fn lookup(&self, key: &str) -> Option<Breaker> {
        let map = self.map().pin();
        match map.get(key) {
            Some(found) => Some(found.clone()),
            None => bounded_key(key).and_then(|bounded| map.get(bounded.as_str()).cloned()),
        }
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
        if let Some(existing) = self.lookup(key)
            && existing.core.is_pinned()
        {
            warn_if_different(self, &existing, policy);
            return existing;
        }
        let _write = self.lock();
        if let Some(existing) = self.lookup(key) {
            // A breaker a dynamic key made: from now on it is never evicted and leaves the cap.
            if existing.core.claim() {
                self.dynamic.fetch_sub(1, Ordering::AcqRel);
            }
            warn_if_different(self, &existing, policy);
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
        let patch = self
            .overrides
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .patch(key.as_str());
        let policy = match patch.is_empty() {
            true => declared,
            false => {
                let wanted = patch.apply(declared);
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
        };
        self.set_declared(key.as_str(), declared, &policy);
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
        if key.len() > MAX_KEY_LEN {
            return self.dynamic_long(key, policy);
        }
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

    /// A dynamic key over [`MAX_KEY_LEN`] bytes: looked up by its bounded form.
    #[cold]
    #[inline(never)]
    fn dynamic_long(&self, key: &str, policy: Policy) -> Breaker {
        let bounded = bounded_key(key).unwrap_or_else(|| key.to_owned());
        self.dynamic(&bounded, policy)
    }

    #[cold]
    fn insert_dynamic(&self, key: &str, policy: Policy) -> Arc<Core> {
        let _write = self.lock();
        if let Some(found) = self.lookup(key) {
            return found.core.current().clone();
        }
        if self.dynamic.load(Ordering::Acquire) >= self.max_keys.load(Ordering::Acquire) {
            self.sweep();
        }
        let breaker = self.create(Key::from(key), usable_policy(key, "", policy));
        breaker.core.set_pinned(false);
        breaker.core.mark_unused();
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
        self.ring
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(breaker.core.key().clone());
        self.map()
            .pin()
            .insert(breaker.core.key().clone(), breaker.clone());
        breaker.core
    }

    /// Advances the clock hand over at most [`SWEEP_STEP`] dynamic keys, evicting those that may
    /// go (caller holds the write lock). Claimed keys leave the ring as the hand meets them.
    fn sweep(&self) {
        let map = self.map().pin();
        let mut ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        for _ in 0..SWEEP_STEP.min(ring.len()) {
            let Some(key) = ring.pop_front() else { break };
            let Some(breaker) = map.get(&key) else {
                continue;
            };
            let core = breaker.core.current();
            if core.is_pinned() {
                continue; // claimed: no longer dynamic, already off the count
            }
            if core.evictable() {
                if map.remove(&key).is_some() {
                    self.dynamic.fetch_sub(1, Ordering::AcqRel);
                }
            } else {
                ring.push_back(key);
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

    /// Changes the fields `patch` names in the policy of `key`, before or after its first use;
    /// every other field keeps its value. A [`Policy`] converts into the patch of the fields it set
    /// explicitly, so `configure("payment", Policy::new().failure_rate(30))` changes
    /// `failure_rate` only. Successive calls add up (a later one wins on the fields both name);
    /// [`unconfigure`](Registry::unconfigure) forgets them.
    ///
    /// The patched policy is validated against the policy the code declares for `key` (and the
    /// live breaker's) first: an invalid one is refused with an error naming the key, the field
    /// and the allowed range, and nothing changes. How a live breaker takes the change is
    /// described in the README ("Operators"): an unchanged policy leaves it untouched; otherwise it
    /// keeps its state, its calls in flight and, when the window's kind and size are unchanged,
    /// its window.
    pub fn configure(&self, key: &str, patch: impl Into<PolicyPatch>) -> Result<(), PolicyError> {
        let _write = self.lock();
        let mut next = self.overrides().clone();
        let merged = next
            .configured
            .get(key)
            .copied()
            .unwrap_or_default()
            .then(patch.into());
        next.configured.insert(key.to_owned(), merged);
        self.validate_key(&next, key)?;
        let changed = self.commit(next, [key.to_owned()]);
        drop(_write);
        announce(changed);
        Ok(())
    }

    /// Forgets what [`configure`](Registry::configure) set for `key` (loaded overrides stay).
    pub fn unconfigure(&self, key: &str) -> Result<(), PolicyError> {
        let _write = self.lock();
        let mut next = self.overrides().clone();
        if next.configured.remove(key).is_none() {
            return Ok(());
        }
        self.validate_key(&next, key)?;
        let changed = self.commit(next, [key.to_owned()]);
        drop(_write);
        announce(changed);
        Ok(())
    }

    /// Records the declared policy of `key`'s breaker, which runs `running` (caller holds the
    /// write lock).
    fn set_declared(&self, key: &str, declared: Policy, running: &Policy) {
        let mut all = self.declared.write().unwrap_or_else(|p| p.into_inner());
        // Equal values with other explicit fields still patch differently: keep those too.
        if declared == *running && declared.explicit == running.explicit {
            all.remove(key);
        } else {
            all.insert(key.to_owned(), declared);
        }
    }

    /// The declared policy of `breaker` (before overrides).
    fn declared_of(&self, breaker: &Core) -> Policy {
        self.declared
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(breaker.key().as_str())
            .copied()
            .unwrap_or(*breaker.policy())
    }

    fn overrides(&self) -> std::sync::RwLockReadGuard<'_, Overrides> {
        self.overrides.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Validates the policy `overrides` give `key` against every policy declared for it: the live
    /// breaker's, the literal-key sites of this registry, or the default when nothing declares it.
    fn validate_key(&self, overrides: &Overrides, key: &str) -> Result<(), PolicyError> {
        let patch = overrides.patch(key);
        let mut bases: Vec<Policy> = self
            .lookup(key)
            .map(|b| self.declared_of(b.core.current()))
            .into_iter()
            .collect();
        bases.extend(
            crate::declared::of(self)
                .filter(|d| d.key == key)
                .map(|d| d.policy),
        );
        if bases.is_empty() {
            bases.push(Policy::DEFAULT);
        }
        for base in bases {
            patch.apply(base).validate().map_err(|e| e.for_key(key))?;
        }
        Ok(())
    }

    /// Installs `next` and brings the live breakers of `keys` to their new policies (caller holds
    /// the write lock and validated `next`). Returns the replacements and the state each replaced
    /// breaker was in, for [`announce`] once the lock is released.
    fn commit(
        &self,
        next: Overrides,
        keys: impl IntoIterator<Item = String>,
    ) -> Vec<(Arc<Core>, State)> {
        let mut changed = Vec::new();
        *self.overrides.write().unwrap_or_else(|p| p.into_inner()) = next;
        let overrides = self.overrides();
        let map = self.map().pin();
        for key in keys {
            let Some(existing) = map.get(key.as_str()) else {
                continue;
            };
            let old = existing.core.current();
            let declared = self.declared_of(old);
            let policy = overrides.patch(&key).apply(declared);
            if policy == *old.policy() {
                continue; // unchanged: the breaker and its window stay as they are
            }
            self.set_declared(&key, declared, &policy);
            let before = old.snapshot().state;
            #[cfg(feature = "redis")]
            let next = crate::redis::attach(self.store.get(), old.successor_with(policy));
            #[cfg(not(feature = "redis"))]
            let next = Arc::new(old.successor_with(policy));
            if old.retire(next.clone()).is_ok() {
                map.insert(old.key().clone(), Breaker { core: next.clone() });
                changed.push((next, before));
            }
        }
        changed
    }

    /// Replaces every override loaded from `source` with `layer`, after validating each key it
    /// touches; returns how many keys `layer` configures.
    #[cfg(feature = "config")]
    pub(crate) fn load_layer(&self, source: Source, layer: Patches) -> Result<usize, PolicyError> {
        let _write = self.lock();
        let mut next = self.overrides().clone();
        let old = std::mem::replace(next.layer_mut(source), layer);
        let touched: BTreeSet<String> = old
            .into_keys()
            .chain(next.layer_mut(source).keys().cloned())
            .collect();
        for key in &touched {
            self.validate_key(&next, key)?;
        }
        let n = next.layer_mut(source).len();
        let changed = self.commit(next, touched);
        drop(_write);
        announce(changed);
        for unknown in self.unknown_keys() {
            let key: String = unknown.key.chars().take(40).collect();
            tracing::warn!(target: "fusebox", key, "{unknown}");
        }
        Ok(n)
    }

    /// The configured keys (loaded or set with [`configure`](Registry::configure)) that no
    /// breaker of this registry declares and that no breaker exists for yet, each with the closest
    /// declared names. Loading warns about each (a `tracing` WARN) rather than failing, because a
    /// dynamic key or a breaker made with [`breaker`](Registry::breaker) may still claim it.
    pub fn unknown_keys(&self) -> Vec<UnknownKey> {
        let declared: BTreeSet<&'static str> = crate::declared::of(self).map(|d| d.key).collect();
        let overrides = self.overrides();
        let configured: BTreeSet<&String> = overrides
            .file
            .keys()
            .chain(overrides.env.keys())
            .chain(overrides.configured.keys())
            .collect();
        let map = self.map().pin();
        configured
            .into_iter()
            .filter(|key| !declared.contains(key.as_str()) && !map.contains_key(key.as_str()))
            .map(|key| UnknownKey {
                key: key.clone(),
                closest: crate::declared::closest(key, declared.iter().copied())
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
            })
            .collect()
    }

    /// Calls `hook` on every state change of every breaker of this registry, present or future.
    ///
    /// The hook runs on the thread that made the transition, after the new state is published and
    /// outside any lock: it may read breakers or call into the registry without deadlocking.
    ///
    /// A hook that panics is caught (`catch_unwind`): the panic is reported as a `tracing` ERROR
    /// (`hook_panicked`, with the key and the transition), the transition stands, the other hooks
    /// still run, and the call that made the transition carries on as if the hook had returned; no
    /// count or permit is affected, and a hook panicking while a body's panic unwinds does not abort
    /// the process.
    pub fn on_transition(&self, hook: impl Fn(&Transition<'_>) + Send + Sync + 'static) {
        self.hooks().add(Arc::new(hook));
    }

    /// Snapshots of every breaker, sorted by key: those already used and every breaker declared
    /// by a `#[circuit_breaker]` with a literal key and this registry (created here if no call made
    /// it yet).
    pub fn snapshot(&self) -> Vec<Snapshot> {
        for declared in crate::declared::of(self) {
            if self.lookup(declared.key).is_none() {
                self.get_or_insert(declared.key, declared.policy, || {
                    Key::from_static(declared.key)
                });
            }
        }
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

/// Emits the transitions reconfiguration made, outside the registry's lock (hooks may call into
/// the registry).
fn announce(changed: Vec<(Arc<Core>, State)>) {
    for (core, before) in changed {
        core.announce_handover(before);
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

/// Warns when a second declaration of `existing`'s key declares another policy (an operator's
/// override of the first does not count as a difference).
fn warn_if_different(registry: &Registry, existing: &Breaker, wanted: Policy) {
    if registry.declared_of(existing.core.current()) != wanted {
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
            r.dynamic(host, policy); // found again: in use
        }
        assert_eq!(r.len(), 3);
        // Full and everything is in use: the hand only clears the marks.
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

    #[test]
    fn the_clock_hand_looks_at_a_bounded_number_of_keys_per_miss() {
        let clock = crate::clock::FakeClock::new();
        let r = Registry::with_clock(clock.clone());
        let n = 3 * SWEEP_STEP;
        r.set_max_keys(n);
        let tripping = Policy::new().window(1).min_calls(1);
        for i in 0..n {
            r.dynamic(&format!("k{i}"), tripping)
                .try_acquire()
                .unwrap()
                .failure();
        }
        assert_eq!(r.get("k0").unwrap().state(), State::Open);
        // Within their wait none may go; one miss looks at SWEEP_STEP of them, not all.
        r.dynamic("x", tripping);
        assert!(r.get("x").is_none());
        let ring: Vec<String> = r
            .ring
            .lock()
            .unwrap()
            .iter()
            .map(|k| k.as_str().to_owned())
            .collect();
        assert_eq!(ring[0], format!("k{SWEEP_STEP}"), "the hand moved one step");
        assert_eq!(ring.len(), n);
        // Their wait is over: the next miss evicts what its step finds, and no more.
        clock.advance(Duration::from_secs(10));
        r.dynamic("y", tripping);
        assert!(r.get("y").is_some());
        assert_eq!(r.len(), n - SWEEP_STEP + 1);
        assert!(r.get(&format!("k{SWEEP_STEP}")).is_none());
        assert!(r.get("k0").is_some(), "outside this step");
    }

    #[test]
    fn long_keys_have_a_bounded_stable_form() {
        let long = "é".repeat(200); // 400 bytes, two per character
        let bounded = bounded_key(&long).unwrap();
        assert!(bounded.len() <= MAX_KEY_LEN);
        assert_eq!(bounded, bounded_key(&long).unwrap(), "stable");
        assert_ne!(bounded, bounded_key(&format!("{long}x")).unwrap());
        assert!(bounded_key(&"a".repeat(MAX_KEY_LEN)).is_none());
    }
}
