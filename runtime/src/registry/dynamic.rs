//! Dynamic keys (`key = expr`): one lock-free lookup per call, breakers created on first use
//! within the cap, and the clock-hand sweep that evicts idle ones (see the module docs of
//! [`registry`](super)).

use super::*;

/// The bounded form of a dynamic key longer than [`MAX_KEY_LEN`] (`None` when it fits).
pub(super) fn bounded_key(key: &str) -> Option<String> {
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

impl Registry {
    /// The breaker of a dynamic key, as `key = expr` finds it: one lock-free lookup, created
    /// with `policy` on first use, and evicted when idle if the registry holds more than
    /// [`set_max_keys`](Registry::set_max_keys) keys. `policy` should be valid for the key (see
    /// [`usable_policy`]); a long key is bounded (cut, with a hash of the whole).
    #[inline]
    pub fn dynamic(&self, key: &str, policy: Policy) -> Breaker {
        if key.len() > MAX_KEY_LEN {
            return self.dynamic_long(key, policy);
        }
        if let Some(found) = self.find_dynamic(key) {
            return found;
        }
        Breaker {
            core: self.insert_dynamic(key, policy),
        }
    }

    /// The registered breaker of a dynamic key of at most [`MAX_KEY_LEN`] bytes, marked used
    /// (`None` when the key is longer, or not registered).
    #[inline]
    pub(crate) fn find_dynamic(&self, key: &str) -> Option<Breaker> {
        if key.len() > MAX_KEY_LEN {
            return None;
        }
        let guard = scc::Guard::new();
        let found = self.map().peek(&KeyQuery(key), &guard)?;
        let core = found.core.current();
        core.touch();
        Some(Breaker { core: core.clone() })
    }

    /// The registered breaker of a dynamic key of at most [`MAX_KEY_LEN`] bytes, borrowed from
    /// `pinned` (a guard of this registry's map, from [`Registry::pinned`]) and marked used
    /// (`None` when the key is longer, or not registered). The borrow takes no reference count:
    /// the map frees what it removes only once every guard that could see it has been dropped.
    #[inline]
    pub(crate) fn find_dynamic_in<'g>(
        &'static self,
        key: &str,
        pinned: &'g Pinned,
    ) -> Option<&'g Breaker> {
        if key.len() > MAX_KEY_LEN {
            return None;
        }
        let found = self.map().peek(&KeyQuery(key), &pinned.0)?;
        found.core.current().touch();
        Some(found)
    }

    /// A guard of this registry's map for [`Registry::find_dynamic_in`]: while it lives, no
    /// breaker the map held when it was made is freed (evicted or replaced ones included).
    #[inline]
    pub(crate) fn pinned(&'static self) -> Pinned {
        Pinned(scc::Guard::new())
    }

    /// A dynamic key over [`MAX_KEY_LEN`] bytes: looked up by its bounded form.
    #[cold]
    #[inline(never)]
    pub(super) fn dynamic_long(&self, key: &str, policy: Policy) -> Breaker {
        let bounded = bounded_key(key).unwrap_or_else(|| key.to_owned());
        self.dynamic(&bounded, policy)
    }

    #[cold]
    pub(super) fn insert_dynamic(&self, key: &str, policy: Policy) -> Arc<Circuit> {
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
                    "registry holds its maximum of dynamic breakers and none is idle: this call (the key is in the event's `key` field) is not protected; raise the cap with `Registry::set_max_keys`"
                );
            }
            return breaker.core;
        }
        self.dynamic.fetch_add(1, Ordering::AcqRel);
        self.ring
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(breaker.core.key().clone());
        self.put(MapKey::from(key), breaker.clone());
        breaker.core
    }

    /// Advances the clock hand over at most [`SWEEP_STEP`] dynamic keys, evicting those that may
    /// go (caller holds the write lock). Claimed keys leave the ring as the hand meets them.
    pub(super) fn sweep(&self) {
        let map = self.map();
        let mut ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        for _ in 0..SWEEP_STEP.min(ring.len()) {
            let Some(key) = ring.pop_front() else { break };
            let query = KeyQuery(key.as_str());
            let Some(breaker) = self.found(key.as_str()) else {
                continue;
            };
            let core = breaker.core.current();
            if core.is_pinned() {
                continue; // claimed: no longer dynamic, already off the count
            }
            if core.evictable() {
                if map.remove_sync(&query) {
                    core.mark_evicted();
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
    #[must_use]
    pub fn overflow_count(&self) -> u64 {
        self.overflow.load(Ordering::Relaxed)
    }
}
