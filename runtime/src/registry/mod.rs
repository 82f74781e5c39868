//! The fuse box: breakers by key, sharing one clock, with bounded dynamic keys and live overrides.
//!
//! Attribute call sites with a literal key resolve their breaker once and cache it in a per-site
//! `static`, so the map is off their hot path. Dynamic keys (`key = expr`) are looked up per call in
//! a lock-free concurrent map (`scc::HashIndex`, chosen by the `keys` and `compare` benchmarks:
//! its entries sit in its buckets, so a lookup reads the key and the breaker's pointer without
//! following a pointer to an entry of its own); reads take no lock.
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

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, DefaultHasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use crate::breaker::{Breaker, Circuit, Snapshot};
use crate::clock::{Clock, ClockSource};
#[cfg(feature = "config")]
use crate::config::Source;
use crate::error::Key;
use crate::groups::{Group, GroupPolicy, GroupSnapshot};
use crate::key::{KeyQuery, MapKey};
use crate::observe::{Hooks, Transition};
use crate::policy::{Policy, PolicyError, PolicyPatch};
use crate::state::State;

mod dynamic;
mod groups;
#[cfg(feature = "config")]
mod load;
mod overrides;
#[cfg(test)]
mod tests;

pub use crate::key::UnknownKey;
use dynamic::bounded_key;
use overrides::Overrides;

/// Breakers by key; keys of up to [`INLINE_KEY_BYTES`](crate::key::INLINE_KEY_BYTES) bytes are held
/// inside the map's entries, so a lookup compares them without following a pointer.
type Map = scc::HashIndex<MapKey, Breaker, foldhash::fast::RandomState>;

/// A guard on this thread of the registries' maps: while it lives, no breaker a map held when it
/// was made is freed (removed or replaced ones included), so breakers can be borrowed from it.
pub(crate) struct Pinned(scc::Guard);

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

type Patches = HashMap<String, PolicyPatch, BuildHasherDefault<DefaultHasher>>;

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
    /// Fixed keys a tower layer or the reqwest middleware was built with, and the policy it
    /// creates their breaker with: declared like an annotated function's literal key, though
    /// their breaker may not exist yet (see [`Registry::declare`]).
    built: RwLock<BTreeMap<String, Policy>>,
    /// The unknown configured keys a load has warned about: each is warned about once.
    #[cfg(feature = "config")]
    warned: Mutex<BTreeSet<String>>,
    /// Loads refuse a key no breaker declares ([`Registry::set_strict_keys`]).
    #[cfg(feature = "config")]
    strict: std::sync::atomic::AtomicBool,
    /// Serializes creation, eviction and reconfiguration (never taken by calls on known keys).
    write: Mutex<()>,
    dynamic: AtomicUsize,
    /// Dynamic keys in creation order: the eviction clock hand walks it from the front (locked
    /// only under `write`).
    ring: Mutex<VecDeque<Key>>,
    max_keys: AtomicUsize,
    overflow: AtomicU64,
    /// The store every breaker of this registry shares its state through ([`Registry::share`]).
    #[cfg(feature = "store")]
    store: OnceLock<Box<dyn crate::breaker::Store>>,
    /// The groups of keys ([`Registry::group`]), created with their first member.
    groups: groups::Groups,
    /// The faults injected into this registry's calls ([`Registry::chaos`]).
    #[cfg(feature = "chaos")]
    pub(crate) chaos: crate::chaos::Injections,
}

impl Registry {
    /// An empty registry on the real monotonic clock.
    #[must_use]
    pub const fn new() -> Self {
        Self::build(ClockSource::Monotonic)
    }

    /// An empty registry reading `clock` (a [`FakeClock`](crate::clock::FakeClock) in tests).
    #[must_use]
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
            built: RwLock::new(BTreeMap::new()),
            #[cfg(feature = "config")]
            warned: Mutex::new(BTreeSet::new()),
            #[cfg(feature = "config")]
            strict: std::sync::atomic::AtomicBool::new(false),
            write: Mutex::new(()),
            dynamic: AtomicUsize::new(0),
            ring: Mutex::new(VecDeque::new()),
            max_keys: AtomicUsize::new(DEFAULT_MAX_KEYS),
            overflow: AtomicU64::new(0),
            #[cfg(feature = "store")]
            store: OnceLock::new(),
            groups: groups::Groups::new(),
            #[cfg(feature = "chaos")]
            chaos: crate::chaos::Injections::new(),
        }
    }

    /// `core` with its membership of its policy's group: `old`'s (the breaker it succeeds) when
    /// the group is the same, a new one (the group created with its first member) otherwise.
    pub(super) fn with_membership(&self, mut core: Circuit, old: Option<&Circuit>) -> Circuit {
        let Some(name) = core.policy().settings().group else {
            return core;
        };
        if let Some(member) = old.and_then(Circuit::member)
            && member.group_name() == name
        {
            core.member = Some(member.clone());
            return core;
        }
        let group = self
            .groups
            .get_or_create(name, None, self.clock.now_nanos());
        core.member = Some(crate::groups::Member::new(group));
        core
    }

    /// The group `name`, once a member (or [`configure_group`](Registry::configure_group))
    /// created it. See the guide's chapter on groups (`fusebox::guide::groups`).
    ///
    /// ```
    /// use fusebox::{Policy, Registry};
    ///
    /// let registry = Registry::new();
    /// assert!(registry.group("search").is_none());
    /// registry.breaker("search-1:9200", Policy::new().group("search")).unwrap();
    /// let search = registry.group("search").unwrap();
    /// assert_eq!(search.snapshot().members, 1);
    /// ```
    #[must_use]
    pub fn group(&self, name: &str) -> Option<Group> {
        self.groups.get(name).map(|core| Group { core })
    }

    /// Sets the settings of the group `name` (creating it, so its first members find them),
    /// and returns it. The group's members are the keys whose policy names it. Settings loaded
    /// from configuration (`[groups.<name>]` in [`load_toml`](Registry::load_toml),
    /// `FUSEBOX_GROUPS__<NAME>__<FIELD>` in [`load_env`](Registry::load_env), feature `config`)
    /// apply on top of these, field by field.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fusebox::{GroupPolicy, Registry};
    ///
    /// let registry = Registry::new();
    /// let search = registry.configure_group("search", GroupPolicy::new().max_ejection(30))?;
    /// assert_eq!(search.policy().settings().max_ejection, 30);
    /// let error = registry
    ///     .configure_group("search", GroupPolicy::new().interval(Duration::ZERO))
    ///     .unwrap_err();
    /// assert_eq!(error.field(), "interval");
    /// assert_eq!(search.policy().settings().max_ejection, 30, "nothing changed");
    /// # Ok::<(), fusebox::GroupPolicyError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A [`GroupPolicyError`](crate::GroupPolicyError) naming the group and the setting when
    /// `policy` is invalid ([`GroupPolicy::validate`]), the field `group` when `name` is not a
    /// name [`Policy::group`] accepts or would be one more than
    /// [`MAX_GROUP_NAMES`](crate::limits::MAX_GROUP_NAMES); nothing changes then.
    pub fn configure_group(
        &self,
        name: &str,
        policy: GroupPolicy,
    ) -> Result<Group, crate::groups::GroupPolicyError> {
        policy.validate().map_err(|e| e.for_group(name))?;
        let name = crate::groups::keep_name(name)?;
        let core = self
            .groups
            .get_or_create(name, Some(policy), self.clock.now_nanos());
        Ok(Group { core })
    }

    /// Snapshots of every group, sorted by name.
    #[must_use]
    pub fn groups(&self) -> Vec<GroupSnapshot> {
        self.groups
            .all()
            .into_iter()
            .map(|core| Group { core }.snapshot())
            .collect()
    }

    #[inline]
    pub(super) fn map(&self) -> &Map {
        self.map
            .get_or_init(|| scc::HashIndex::with_hasher(foldhash::fast::RandomState::default()))
    }

    pub(super) fn hooks(&self) -> &Arc<Hooks> {
        self.hooks.get_or_init(Arc::default)
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.write
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// This registry's address: what a declaration's registry check compares.
    pub(crate) fn address(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// The breaker registered under `key`: made by a call, by [`breaker`](Registry::breaker), or
    /// declared by a `#[circuit_breaker]` with this literal key and this registry (created here
    /// before its first call, with the declared policy). A dynamic key longer than
    /// [`MAX_KEY_LEN`] is found by its full text or its bounded form.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<Breaker> {
        if let Some(found) = self.lookup(key) {
            return Some(found);
        }
        let declared = crate::declared::of(self.address()).find(|d| d.key == key)?;
        Some(self.get_or_insert(key, declared.policy, || Key::from_static(declared.key)))
    }

    pub(super) fn lookup(&self, key: &str) -> Option<Breaker> {
        self.found(key)
            .or_else(|| bounded_key(key).and_then(|bounded| self.found(&bounded)))
    }

    /// The breaker the map holds under exactly `key`.
    fn found(&self, key: &str) -> Option<Breaker> {
        self.map()
            .peek_with(&KeyQuery(key), |_, found| found.clone())
    }

    /// Puts `breaker` in the map under `key`, in place of the one there (caller holds the write
    /// lock). A call that read the one replaced keeps it until it is done.
    pub(super) fn put(&self, key: MapKey, breaker: Breaker) {
        match self.map().entry_sync(key) {
            scc::hash_index::Entry::Occupied(mut there) => there.update(breaker),
            scc::hash_index::Entry::Vacant(free) => {
                free.insert_entry(breaker);
            }
        }
    }

    /// Every breaker the map holds.
    pub(super) fn all(&self) -> Vec<Breaker> {
        let guard = scc::Guard::new();
        self.map()
            .iter(&guard)
            .map(|(_, breaker)| breaker.clone())
            .collect()
    }

    /// The breaker under `key`, created with `policy` if it does not exist yet.
    ///
    /// The first registration fixes the policy (an operator's [`configure`](Registry::configure)
    /// aside): a later call with a different policy gets the existing breaker and a `tracing`
    /// warning naming the key. An invalid `policy` is refused with an error naming the key, the
    /// field and its allowed range; nothing is registered then.
    ///
    /// # Errors
    ///
    /// A [`PolicyError`] naming the key, the field and its allowed range when `policy` is invalid.
    pub fn breaker(&self, key: &str, policy: Policy) -> Result<Breaker, PolicyError> {
        policy.validate_for(key)?;
        Ok(self.get_or_insert(key, policy, || Key::from(key)))
    }

    /// The breaker of a fixed key that an adapter built (the tower layer, the reqwest
    /// middleware): like [`breaker`](Registry::breaker), created with `policy` on first use and
    /// never evicted, but `policy` is not validated again: pass one that
    /// [`usable_policy`] gave.
    pub fn fixed(&self, key: &str, policy: Policy) -> Breaker {
        self.get_or_insert(key, policy, || Key::from(key))
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
        self.put(MapKey::from(breaker.core.key().as_str()), breaker.clone());
        breaker
    }

    /// A breaker made under the write lock, with the operator's override applied when valid.
    pub(super) fn create(&self, key: Key, declared: Policy) -> Breaker {
        let patch = self
            .overrides
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .patch(key.as_str());
        let policy = match patch.is_empty() {
            true => declared,
            false => {
                let wanted = patch.apply(declared);
                match wanted.validate_for(key.as_str()) {
                    Ok(()) => wanted,
                    Err(error) => {
                        let field = error.field();
                        tracing::error!(
                            target: "fusebox",
                            key = key.as_str(),
                            field,
                            "{error}; the override is ignored and the declared policy applies",
                        );
                        declared
                    }
                }
            }
        };
        self.set_declared(key.as_str(), declared, &policy);
        let core = Circuit::new(key, policy, self.clock.clone(), self.hooks().clone());
        let core = self.with_membership(core, None);
        #[cfg(feature = "store")]
        let core = crate::breaker::attach(self.store.get().map(|store| &**store), core);
        #[cfg(not(feature = "store"))]
        let core = Arc::new(core);
        groups::join(&core);
        Breaker { core }
    }

    /// Makes every breaker of this registry, present and future, one circuit across the processes
    /// that share `store` (keys the store keeps local aside). Breakers already in use continue
    /// their state locally and take the shared state from their next call on. Sharing is set once:
    /// a second call returns `false` and changes nothing.
    ///
    /// ```
    /// let store = fusebox::store::MemoryStore::new();
    /// let replica = fusebox::Registry::new();
    /// assert!(replica.share(store.clone()));
    /// ```
    ///
    /// A Redis store (`fusebox_redis::RedisStore`) is shared the same way.
    #[cfg(feature = "store")]
    #[cfg_attr(docsrs, doc(cfg(feature = "store")))]
    pub fn share(&self, store: impl crate::breaker::Store) -> bool {
        let _write = self.lock();
        if self.store.set(Box::new(store)).is_err() {
            return false;
        }
        for breaker in self.all() {
            let old = breaker.core.current();
            let next = self.with_membership(old.successor_with(*old.policy()), Some(&**old));
            let next = crate::breaker::attach(self.store.get().map(|store| &**store), next);
            if old.retire(next.clone()).is_ok() {
                groups::join(&next);
                self.put(MapKey::from(old.key().as_str()), Breaker { core: next });
            }
        }
        true
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
    #[must_use]
    pub fn snapshot(&self) -> Vec<Snapshot> {
        for declared in crate::declared::of(self.address()) {
            if self.lookup(declared.key).is_none() {
                self.get_or_insert(declared.key, declared.policy, || {
                    Key::from_static(declared.key)
                });
            }
        }
        let mut all: Vec<Snapshot> = self.all().iter().map(Breaker::snapshot).collect();
        all.sort_by(|a, b| a.key.cmp(&b.key));
        all
    }

    /// The number of registered breakers.
    #[must_use]
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// True when no breaker exists yet.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `policy` when it is valid for `key`; otherwise [`Policy::DEFAULT`], with an ERROR event
/// naming the key, the field and `function` (the adapter or function that uses it). What an
/// adapter built with a policy at run time (the tower layer, the reqwest middleware) does before
/// its first breaker; literal attribute arguments are checked at compile time, and a
/// `policy = CONST` here.
#[must_use]
pub fn usable_policy(key: &str, function: &str, policy: Policy) -> Policy {
    match policy.validate_for(key) {
        Ok(()) => policy,
        Err(error) => {
            let field = error.field();
            tracing::error!(
                target: "fusebox",
                key,
                field,
                function,
                error = ?error.to_string(),
                "a breaker's policy is invalid (see the `error` field); it runs the default policy instead",
            );
            Policy::DEFAULT
        }
    }
}

/// Warns when a second declaration of `existing`'s key declares another policy (an operator's
/// override of the first does not count as a difference).
pub(super) fn warn_if_different(registry: &Registry, existing: &Breaker, wanted: Policy) {
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

/// The global registry (see [`registry`]); the expansion names it as `&__private::GLOBAL`, a
/// place rather than a call.
pub static GLOBAL: Registry = Registry::new();

/// The global registry, used by every `#[circuit_breaker]` without `registry = …`.
#[must_use]
pub fn registry() -> &'static Registry {
    &GLOBAL
}

#[cfg(feature = "chaos")]
impl Registry {
    /// The faults injected into this registry's calls (feature `chaos`; see [`crate::chaos`]).
    #[must_use]
    pub fn chaos(&self) -> &crate::chaos::Injections {
        &self.chaos
    }
}
