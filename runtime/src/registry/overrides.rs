//! Operator overrides: `configure`/`unconfigure`, the layers that `load_toml` and `load_env` replace,
//! validation against the declared policies, and the reload that hands each changed breaker to
//! its successor.

use super::*;

/// Operators' overrides, by source. A breaker runs its declared policy with the file's patch,
/// then the environment's, then `configure`'s applied on top.
#[derive(Default, Clone)]
pub(super) struct Overrides {
    pub(super) file: Patches,
    pub(super) env: Patches,
    pub(super) configured: Patches,
}

impl Overrides {
    pub(super) fn patch(&self, key: &str) -> PolicyPatch {
        [&self.file, &self.env, &self.configured]
            .into_iter()
            .filter_map(|layer| layer.get(key).copied())
            .fold(PolicyPatch::new(), PolicyPatch::then)
    }

    #[cfg(feature = "config")]
    pub(super) fn layer_mut(&mut self, source: Source) -> &mut Patches {
        match source {
            Source::File => &mut self.file,
            Source::Env => &mut self.env,
        }
    }
}

/// Emits the transitions reconfiguration made, outside the registry's lock (hooks may call into
/// the registry).
pub(super) fn announce(changed: Vec<(Arc<Circuit>, State)>) {
    for (core, before) in changed {
        core.announce_handover(before);
    }
}

impl Registry {
    /// Changes the fields `patch` names in the policy of `key`, before or after its first use;
    /// every other field keeps its value. A [`Policy`] converts into the patch of the fields it set
    /// explicitly, so `configure("payment", Policy::new().failure_rate(30))` changes
    /// `failure_rate` only. Successive calls add up (a later one wins on the fields both name);
    /// [`unconfigure`](Registry::unconfigure) forgets them.
    ///
    /// The patched policy is validated against the policy the code declares for `key` (and the
    /// live breaker's) first: an invalid one is refused with an error naming the key, the field
    /// and the allowed range, and nothing changes. How a live breaker takes the change is
    /// described in [`guide::operators`](crate::guide::operators): an unchanged policy leaves it untouched; otherwise it
    /// keeps its state, its calls in flight and, when the window's kind and size are unchanged,
    /// its window.
    ///
    /// # Errors
    ///
    /// A [`PolicyError`] naming the key, the field and its allowed range when the patched policy
    /// is invalid; nothing changes then.
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
    ///
    /// # Errors
    ///
    /// A [`PolicyError`] when the policy `key` returns to is invalid (a loaded override that no
    /// longer fits); nothing changes then.
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
    pub(super) fn set_declared(&self, key: &str, declared: Policy, running: &Policy) {
        let mut all = self.declared.write().unwrap_or_else(|p| p.into_inner());
        // Equal values with other explicit fields still patch differently: keep those too.
        if declared == *running && PolicyPatch::from(declared) == PolicyPatch::from(*running) {
            all.remove(key);
        } else {
            all.insert(key.to_owned(), declared);
        }
    }

    /// The declared policy of `breaker` (before overrides).
    pub(super) fn declared_of(&self, breaker: &Circuit) -> Policy {
        self.declared
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(breaker.key().as_str())
            .copied()
            .unwrap_or(*breaker.policy())
    }

    pub(super) fn overrides(&self) -> std::sync::RwLockReadGuard<'_, Overrides> {
        self.overrides.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Validates the policy `overrides` give `key` against every policy declared for it: the live
    /// breaker's, the literal-key sites of this registry, or the default when nothing declares it.
    pub(super) fn validate_key(&self, overrides: &Overrides, key: &str) -> Result<(), PolicyError> {
        let patch = overrides.patch(key);
        let mut bases: Vec<Policy> = self
            .lookup(key)
            .map(|b| self.declared_of(b.core.current()))
            .into_iter()
            .collect();
        bases.extend(
            crate::declared::of(self.address())
                .filter(|d| d.key == key)
                .map(|d| d.policy),
        );
        bases.extend(self.built_policy(key));
        if bases.is_empty() {
            bases.push(Policy::DEFAULT);
        }
        for base in bases {
            patch.apply(base).validate_for(key)?;
        }
        Ok(())
    }

    /// Installs `next` and brings the live breakers of `keys` to their new policies (caller holds
    /// the write lock and validated `next`). Returns the replacements and the state each replaced
    /// breaker was in, for [`announce`] once the lock is released.
    pub(super) fn commit(
        &self,
        next: Overrides,
        keys: impl IntoIterator<Item = String>,
    ) -> Vec<(Arc<Circuit>, State)> {
        let mut changed = Vec::new();
        *self.overrides.write().unwrap_or_else(|p| p.into_inner()) = next;
        let overrides = self.overrides();
        for key in keys {
            let Some(existing) = self.found(&key) else {
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
            // A shared registry's replacement shares its state too (unless `shared = false`).
            let next = self.with_membership(old.successor_with(policy), Some(&**old));
            #[cfg(feature = "store")]
            let next = crate::breaker::attach(self.store.get().map(|store| &**store), next);
            #[cfg(not(feature = "store"))]
            let next = Arc::new(next);
            if old.retire(next.clone()).is_ok() {
                groups::join(&next);
                self.put(
                    MapKey::from(old.key().as_str()),
                    Breaker { core: next.clone() },
                );
                changed.push((next, before));
            }
        }
        changed
    }

    /// Replaces every override loaded from `source` with `loaded`'s, after validating each key
    /// it touches (the groups' patches were validated field by field when read), keeping the
    /// group names it brings only then; returns how many keys `loaded` configures.
    #[cfg(feature = "config")]
    pub(crate) fn load_layer(
        &self,
        source: Source,
        mut loaded: crate::config::Loaded,
    ) -> Result<usize, crate::config::ConfigError> {
        let _write = self.lock();
        let mut next = self.overrides().clone();
        let old = std::mem::replace(next.layer_mut(source), std::mem::take(&mut loaded.breakers));
        let touched: BTreeSet<String> = old
            .into_keys()
            .chain(next.layer_mut(source).keys().cloned())
            .collect();
        for key in &touched {
            self.validate_key(&next, key)
                .map_err(crate::config::ConfigError::Range)?;
        }
        if self.strict.load(Ordering::Acquire)
            && let Some(unknown) = self
                .unknown_among(next.layer_mut(source).keys())
                .into_iter()
                .next()
        {
            return Err(crate::config::ConfigError::UnknownKey(unknown));
        }
        // The faults it declares, resolved before anything applies.
        #[cfg(feature = "chaos")]
        let faults = self.chaos.resolve(&loaded.chaos)?;
        // Accepted: only now are the group names it brings kept.
        loaded.keep_names(next.layer_mut(source))?;
        let n = next.layer_mut(source).len();
        self.groups
            .load(source, loaded.groups, self.clock.now_nanos());
        let changed = self.commit(next, touched);
        #[cfg(feature = "chaos")]
        self.chaos.configure(source, faults);
        drop(_write);
        announce(changed);
        let mut warned = self.warned.lock().unwrap_or_else(|p| p.into_inner());
        for unknown in self.unknown_keys() {
            // Once per key: `load_toml` then `load_env` (each layer's load lists every layer's
            // keys) or a reload would repeat it otherwise.
            if warned.insert(unknown.key.clone()) {
                let key: String = unknown.key.chars().take(40).collect();
                tracing::warn!(target: "fusebox", key, "{unknown}");
            }
        }
        Ok(n)
    }

    /// Declares a fixed key that an adapter (the tower layer, the reqwest middleware) will use
    /// with `policy`: like an annotated function's literal key, its overrides are validated
    /// against that policy and it is not an unknown key, though its breaker is created on
    /// first use.
    pub fn declare(&self, key: &str, policy: Policy) {
        self.built
            .write()
            .unwrap_or_else(|p| p.into_inner())
            // An invalid policy is replaced by the default when the breaker is created.
            .insert(
                key.to_owned(),
                if policy.validate().is_ok() {
                    policy
                } else {
                    Policy::DEFAULT
                },
            );
    }

    /// The policy a layer or middleware declared for `key` ([`Registry::declare`]).
    fn built_policy(&self, key: &str) -> Option<Policy> {
        self.built
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .copied()
    }

    /// The configured keys (loaded or set with [`configure`](Registry::configure)) that no
    /// breaker of this registry declares and that no breaker exists for yet, each with the closest
    /// declared names. Declared keys are those of `#[circuit_breaker]` with a literal key and the
    /// fixed keys of the tower layers (`CircuitBreakerLayer::new`) and reqwest middlewares
    /// (`CircuitBreakerMiddleware::new`) built for this registry. Loading warns about each unknown
    /// key once (a `tracing` WARN, at the first load that finds it) rather than failing, because
    /// a dynamic key or a breaker made with [`breaker`](Registry::breaker) may still claim it.
    #[must_use]
    pub fn unknown_keys(&self) -> Vec<UnknownKey> {
        let overrides = self.overrides();
        self.unknown_among(
            overrides
                .file
                .keys()
                .chain(overrides.env.keys())
                .chain(overrides.configured.keys()),
        )
    }

    /// The keys of `configured` that no breaker of this registry declares and no breaker
    /// exists for yet, sorted, each with the closest declared names.
    fn unknown_among<'a>(&self, configured: impl Iterator<Item = &'a String>) -> Vec<UnknownKey> {
        let built = self.built.read().unwrap_or_else(|p| p.into_inner());
        let declared: BTreeSet<&str> = crate::declared::of(self.address())
            .map(|d| d.key)
            .chain(built.keys().map(String::as_str))
            .collect();
        let configured: BTreeSet<&String> = configured.collect();
        let map = self.map();
        configured
            .into_iter()
            .filter(|key| !declared.contains(key.as_str()) && !map.contains(&KeyQuery(key)))
            .map(|key| UnknownKey {
                key: key.clone(),
                closest: crate::declared::closest(key, declared.iter().copied())
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
            })
            .collect()
    }
}
