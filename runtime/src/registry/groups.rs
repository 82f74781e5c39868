//! The groups of one registry, by name: created with their first member or their settings,
//! with the patches configuration lays over their declared settings.

use std::sync::{Arc, Mutex, Weak};

use crate::breaker::Circuit;
#[cfg(feature = "config")]
use crate::config::Source;
#[cfg(feature = "config")]
use crate::groups::GroupPatch;
#[cfg(feature = "config")]
use crate::groups::intern;
use crate::groups::{GroupCore, GroupPolicy, MemberBreaker};

/// The groups of one registry, by name (few: a linear search).
#[derive(Default)]
pub(crate) struct Groups {
    inner: Mutex<GroupsInner>,
}

/// What [`Groups`] holds under its lock.
#[derive(Default)]
struct GroupsInner {
    list: Vec<Arc<GroupCore>>,
    /// The patches of the last `load_toml`, by group name.
    #[cfg(feature = "config")]
    file: std::collections::BTreeMap<String, GroupPatch>,
    /// The patches of the last `load_env`/`load_vars`, by group name.
    #[cfg(feature = "config")]
    env: std::collections::BTreeMap<String, GroupPatch>,
}

impl GroupsInner {
    fn find(&self, name: &str) -> Option<&Arc<GroupCore>> {
        self.list.iter().find(|g| g.name == name)
    }

    /// The settings in force for the group `name` declared with `declared`: the file's patch,
    /// then the environment's, applied on top.
    fn effective(&self, name: &str, declared: GroupPolicy) -> GroupPolicy {
        #[cfg(feature = "config")]
        {
            let patch = [&self.file, &self.env]
                .into_iter()
                .filter_map(|layer| layer.get(name).copied())
                .fold(GroupPatch::default(), GroupPatch::then);
            patch.apply(declared)
        }
        #[cfg(not(feature = "config"))]
        {
            let _ = name;
            declared
        }
    }

    /// The group `name`, created (declared with `declared`, the defaults when `None`) if absent;
    /// an existing group's declared settings become `declared` when given.
    fn get_or_create(
        &mut self,
        name: &'static str,
        declared: Option<GroupPolicy>,
        now: u64,
    ) -> Arc<GroupCore> {
        if let Some(group) = self.find(name).cloned() {
            if let Some(declared) = declared {
                *group.declared.lock().unwrap_or_else(|p| p.into_inner()) = declared;
                group.set_policy(self.effective(name, declared));
            }
            return group;
        }
        let declared = declared.unwrap_or_default();
        // Made with the settings in force, so its first pass is one of their intervals away.
        let policy = self.effective(name, declared);
        let group = Arc::new(GroupCore::new(name, declared, policy, now));
        self.list.push(group.clone());
        group
    }
}

impl Groups {
    pub(crate) const fn new() -> Self {
        Groups {
            inner: Mutex::new(GroupsInner {
                list: Vec::new(),
                #[cfg(feature = "config")]
                file: std::collections::BTreeMap::new(),
                #[cfg(feature = "config")]
                env: std::collections::BTreeMap::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GroupsInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The group `name`, if any member or setting created it.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<GroupCore>> {
        self.lock().find(name).cloned()
    }

    /// The group `name`, created with the default settings if absent; `policy`, when given,
    /// becomes the settings code declares for it (configuration's patches still apply on top).
    pub(crate) fn get_or_create(
        &self,
        name: &'static str,
        policy: Option<GroupPolicy>,
        now: u64,
    ) -> Arc<GroupCore> {
        self.lock().get_or_create(name, policy, now)
    }

    /// Replaces the patches the previous load from `source` set with `layer`, and puts the result in force in every group either names (creating
    /// those that do not exist yet, so their first members find their settings). A group the
    /// new layer no longer names returns to its declared settings (with the other source's patch).
    #[cfg(feature = "config")]
    pub(crate) fn load(
        &self,
        source: Source,
        layer: std::collections::BTreeMap<String, GroupPatch>,
        now: u64,
    ) {
        let mut inner = self.lock();
        let slot = match source {
            Source::File => &mut inner.file,
            Source::Env => &mut inner.env,
        };
        let old = std::mem::replace(slot, layer);
        let touched: std::collections::BTreeSet<String> =
            old.into_keys().chain(slot.keys().cloned()).collect();
        for name in touched {
            let group = inner.get_or_create(intern(&name), None, now);
            group.set_policy(inner.effective(group.name, group.declared()));
        }
    }

    /// Every group, sorted by name.
    pub(crate) fn all(&self) -> Vec<Arc<GroupCore>> {
        let mut all = self.lock().list.clone();
        all.sort_by_key(|g| g.name);
        all
    }
}

/// Adds `circuit` (a new breaker, or the successor of one) to its member's group under its key.
pub(crate) fn join(circuit: &Arc<Circuit>) {
    if let Some(member) = circuit.member() {
        let mut members = member
            .group
            .members
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let weak: Weak<Circuit> = Arc::downgrade(circuit);
        members.insert(
            circuit.key().as_str().to_owned(),
            weak as Weak<dyn MemberBreaker>,
        );
    }
}

#[cfg(all(test, not(fusebox_loom)))]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::sync::Ordering;

    #[test]
    fn a_group_made_with_its_settings_takes_its_first_pass_one_of_their_intervals_away() {
        let s = 1_000_000_000;
        let groups = Groups::new();
        let fast = GroupPolicy::new().interval(Duration::from_secs(1));
        let group = groups.get_or_create("first-pass-fast", Some(fast), 5 * s);
        assert_eq!(group.next_pass.load(Ordering::Relaxed), 6 * s);
        let slow = GroupPolicy::new().interval(Duration::from_secs(60));
        let group = groups.get_or_create("first-pass-slow", Some(slow), 5 * s);
        assert_eq!(group.next_pass.load(Ordering::Relaxed), 65 * s);
        // A member's lookup (no settings) finds it as it is.
        let found = groups.get_or_create("first-pass-slow", None, 7 * s);
        assert!(Arc::ptr_eq(&found, &group));
        assert_eq!(found.policy().settings().interval, Duration::from_secs(60));
    }
}
