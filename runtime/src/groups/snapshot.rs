//! The views of a group: [`Group`], the handle the registry hands out, and [`GroupSnapshot`].

use std::sync::{Arc, Weak};

use super::GroupPolicy;
use super::evaluation::{GroupCore, MemberBreaker};
use crate::sync::Ordering;

/// A group of keys in a registry: see [`Registry::group`](crate::Registry::group) and the
/// module's documentation in the guide (`fusebox::guide::groups`).
#[derive(Clone)]
pub struct Group {
    pub(crate) core: Arc<GroupCore>,
}

impl Group {
    /// The group's name.
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.core.name
    }

    /// The group's settings.
    #[must_use]
    pub fn policy(&self) -> GroupPolicy {
        self.core.policy()
    }

    /// True when `key` is a member of the group that is ejected now: opened by one of the
    /// group's relative rules
    /// ([`Trigger::OutlierSuccessRate`](crate::Trigger::OutlierSuccessRate),
    /// [`Trigger::OutlierFailurePercentage`](crate::Trigger::OutlierFailurePercentage)) and open
    /// within that ejection's wait. A member opened by its own rules or forced open is not ejected
    /// (though [`healthy`](Group::healthy) skips it too), nor is a member whose wait is over (its
    /// next call probes it), nor a key the group does not know.
    #[must_use]
    pub fn is_ejected(&self, key: &str) -> bool {
        self.member_is(key, |circuit| circuit.ejected_now())
    }

    /// True when `key` is a member whose circuit `test` holds for.
    fn member_is(&self, key: &str, test: impl Fn(&dyn MemberBreaker) -> bool) -> bool {
        let members = self.core.members.lock().unwrap_or_else(|p| p.into_inner());
        members
            .get(key)
            .and_then(Weak::upgrade)
            .is_some_and(|circuit| test(&*circuit.newest()))
    }

    /// The candidates whose breaker lets calls through now, in their order: what a load
    /// balancer picks from. It skips the members open within their wait, whether the group
    /// ejected them ([`is_ejected`](Group::is_ejected)) or their own rules opened them, and those
    /// forced open; a member whose wait is over is kept (its next call is its probe).
    ///
    /// ```
    /// use fusebox::{Policy, Registry};
    ///
    /// let registry = Registry::new();
    /// let host = Policy::new().group("search").consecutive(1);
    /// for key in ["a", "b", "c"] {
    ///     registry.breaker(key, host).unwrap();
    /// }
    /// registry.get("b").unwrap().force_open();
    /// let search = registry.group("search").unwrap();
    /// let healthy: Vec<&str> = search.healthy(["a", "b", "c"]).collect();
    /// assert_eq!(healthy, ["a", "c"]);
    /// ```
    pub fn healthy<K: AsRef<str>>(
        &self,
        candidates: impl IntoIterator<Item = K>,
    ) -> impl Iterator<Item = K> {
        let group = self.clone();
        candidates
            .into_iter()
            .filter(move |key| !group.member_is(key.as_ref(), |c| c.unavailable_now()))
    }

    /// A view of the group now: its members, those ejected, whether it is in panic.
    #[must_use]
    pub fn snapshot(&self) -> GroupSnapshot {
        let core = &self.core;
        let live = core.live();
        let mut ejected: Vec<String> = live
            .iter()
            .filter(|c| c.ejected_now())
            .map(|c| c.key_str().to_owned())
            .collect();
        ejected.sort();
        let size = core.size.load(Ordering::Acquire);
        let policy = core.policy();
        GroupSnapshot {
            name: core.name,
            members: live.len(),
            ejected,
            open: core.open.load(Ordering::Acquire),
            max_open: GroupCore::cap(size, policy.max_ejection),
            in_panic: core.panic.load(Ordering::Acquire),
            rejected: core.rejections.load(Ordering::Relaxed),
            ejections: core.ejections.load(Ordering::Relaxed),
            policy,
        }
    }
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group").field("name", &self.name()).finish()
    }
}

/// A point-in-time view of a group ([`Group::snapshot`], [`Registry::groups`](crate::Registry::groups)).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GroupSnapshot {
    /// The group's name.
    pub name: &'static str,
    /// Its members (breakers alive in the registry or in use).
    pub members: usize,
    /// The keys of the members ejected now, sorted: opened by one of the group's relative rules
    /// and open within that ejection's wait (see [`Group::is_ejected`]). A member opened by its
    /// own rules or forced open is not listed.
    pub ejected: Vec<String>,
    /// The places taken under the cap: members this replica's trips opened that have not closed
    /// since (open or half-open).
    pub open: u32,
    /// The cap: the most members open at once (`max_ejection` percent of the members, at least 1).
    pub max_open: u32,
    /// True while in panic: the cap kept a member closed, and no pass since found none kept.
    pub in_panic: bool,
    /// Trips the cap rejected since the group was created.
    pub rejected: u64,
    /// Ejections by the relative rules since the group was created.
    pub ejections: u64,
    /// The group's settings.
    pub policy: GroupPolicy,
}
