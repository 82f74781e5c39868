//! A group's settings: [`GroupPolicy`] (with its plain view [`GroupSettings`]), the patch
//! configuration lays over them, and the interned names of groups.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use crate::clock::duration_to_nanos as nanos;

/// The settings of a group: its relative rules, its panic threshold and its ejection backoff.
/// The defaults are the values of Envoy's outlier detection, with the differences the groups
/// chapter of the guide lists ([`guide::groups`](crate::guide::groups)): the failure-percentage
/// rule is enforced (Envoy's `enforcing_failure_percentage` defaults to 0), and a member's own
/// `min_calls` is its request volume.
///
/// Each setter stores what it is given, as [`Policy`](crate::Policy)'s do; [`validate`]
/// checks every setting, and [`Registry::configure_group`](crate::Registry::configure_group),
/// configuration (`[groups.<name>]`) and `fusebox-replay` all refuse settings it refuses,
/// with its error: nothing is clamped in silence.
///
/// [`validate`]: GroupPolicy::validate
///
/// ```
/// use std::time::Duration;
/// use fusebox::GroupPolicy;
///
/// const SEARCH: GroupPolicy = GroupPolicy::new()
///     .max_ejection(20)
///     .ejection(Duration::from_secs(10), Duration::from_secs(120));
/// assert_eq!(SEARCH.settings().max_ejection, 20);
/// assert_eq!(GroupPolicy::new().settings().success_rate, Some(1.9));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupPolicy {
    pub(super) interval_nanos: u64,
    pub(super) stdev_milli: u32,
    /// `success_rate` as given (0: off), which [`GroupPolicy::validate`] checks.
    pub(super) stdev: f64,
    pub(super) min_members: u32,
    pub(super) failure_percentage: u8,
    pub(super) max_ejection: u8,
    pub(super) base_nanos: u64,
    pub(super) max_nanos: u64,
    pub(super) healthy_nanos: u64,
}

/// The value of every setting of a [`GroupPolicy`], each named as its setter and as its field
/// of a `[groups.<name>]` table (`ejection = { base, max }` as `ejection_base` and `ejection_max`).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct GroupSettings {
    /// The shortest time between two passes of the relative rules (default 10 s).
    pub interval: Duration,
    /// Success-rate ejection: how many standard deviations below the mean a member's success
    /// rate must be (default 1.9), or `None` when the rule is off.
    pub success_rate: Option<f64>,
    /// The qualifying members (closed, with at least their `min_calls` in their window) a pass
    /// needs before either relative rule applies (default 5).
    pub min_members: u32,
    /// Failure-percentage ejection: the failure percentage at or above which a member is ejected
    /// (default 85), or `None` when the rule is off.
    pub failure_percentage: Option<u8>,
    /// The most members open at once, in percent of the members (default 10; at least one
    /// member may always be open).
    pub max_ejection: u8,
    /// `ejection`'s `base`: the open wait of a first ejection; the n-th ejection in a row waits
    /// n times this (default 30 s).
    pub ejection_base: Duration,
    /// `ejection`'s `max`: the longest ejection wait (default 300 s); a member's own `open_max`
    /// caps its ejections too.
    pub ejection_max: Duration,
    /// How long an ejected member must stay closed before its ejection count starts again
    /// (default 300 s).
    pub healthy_span: Duration,
}

impl GroupPolicy {
    /// The defaults, Envoy's values where Envoy has the setting: a pass every 10 s, success-rate
    /// ejection at 1.9 standard deviations, failure-percentage ejection at 85 % or more
    /// (enforced, where Envoy's rule only detects by default), 5 qualifying members, at most
    /// 10 % open, ejections of 30 s × the times ejected up to 300 s, reset after 300 s closed.
    #[must_use]
    pub const fn new() -> Self {
        GroupPolicy {
            interval_nanos: 10_000_000_000,
            stdev_milli: 1900,
            stdev: 1.9,
            min_members: 5,
            failure_percentage: 85,
            max_ejection: 10,
            base_nanos: 30_000_000_000,
            max_nanos: 300_000_000_000,
            healthy_nanos: 300_000_000_000,
        }
    }

    /// The shortest time between two passes of the relative rules (at least 1 ms; see
    /// [`validate`](GroupPolicy::validate)).
    #[must_use]
    pub const fn interval(mut self, interval: Duration) -> Self {
        self.interval_nanos = nanos(interval);
        self
    }

    /// Success-rate ejection at `factor` standard deviations below the mean (0 turns it off;
    /// otherwise at least 0.001 and below 1000).
    #[must_use]
    pub const fn success_rate(mut self, factor: f64) -> Self {
        self.stdev = factor;
        self.stdev_milli = if factor >= 0.001 && factor < 1000.0 {
            (factor * 1000.0 + 0.5) as u32
        } else {
            0
        };
        self
    }

    /// Failure-percentage ejection at `percent` failures or more, as Envoy's
    /// `failure_percentage_threshold` (0 turns it off; at most 100).
    #[must_use]
    pub const fn failure_percentage(mut self, percent: u8) -> Self {
        self.failure_percentage = percent;
        self
    }

    /// The qualifying members a pass needs before either relative rule applies (at least 1).
    #[must_use]
    pub const fn min_members(mut self, members: u32) -> Self {
        self.min_members = members;
        self
    }

    /// The most members open at once, in percent of the members (at most 100; at least one
    /// member may always be open).
    #[must_use]
    pub const fn max_ejection(mut self, percent: u8) -> Self {
        self.max_ejection = percent;
        self
    }

    /// The ejection backoff: `base` × the times ejected in a row, at most `max` (`base` at
    /// least 1 ms, `max` at least `base`). Each member's
    /// own `open_max` caps its ejections too (default 5 minutes, as `max`'s default), and its
    /// `open_jitter` spreads them: raise a member's `open_max` with `max`.
    #[must_use]
    pub const fn ejection(mut self, base: Duration, max: Duration) -> Self {
        self.base_nanos = nanos(base);
        self.max_nanos = nanos(max);
        self
    }

    /// How long an ejected member must stay closed before its ejection count starts again.
    #[must_use]
    pub const fn healthy_span(mut self, span: Duration) -> Self {
        self.healthy_nanos = nanos(span);
        self
    }

    /// The value of every setting.
    #[must_use]
    pub const fn settings(&self) -> GroupSettings {
        GroupSettings {
            interval: Duration::from_nanos(self.interval_nanos),
            success_rate: if self.stdev == 0.0 {
                None
            } else {
                Some(self.stdev)
            },
            min_members: self.min_members,
            failure_percentage: if self.failure_percentage == 0 {
                None
            } else {
                Some(self.failure_percentage)
            },
            max_ejection: self.max_ejection,
            ejection_base: Duration::from_nanos(self.base_nanos),
            ejection_max: Duration::from_nanos(self.max_nanos),
            healthy_span: Duration::from_nanos(self.healthy_nanos),
        }
    }

    /// The wait of the `times`-th ejection in a row (1 for the first), in nanoseconds.
    pub(super) fn wait_nanos(&self, times: u32) -> u64 {
        let max = self.max_nanos.max(1_000_000);
        self.base_nanos
            .max(1_000_000)
            .saturating_mul(u64::from(times.max(1)))
            .min(max.max(self.base_nanos))
    }
}

impl Default for GroupPolicy {
    fn default() -> Self {
        GroupPolicy::new()
    }
}

/// Changes to a group's settings read from configuration (a `[groups.<name>]` table or
/// `FUSEBOX_GROUPS__<NAME>__<FIELD>` variables): each field named goes through the
/// [`GroupPolicy`] setter of the same name; a field left out keeps the group's value.
#[cfg(feature = "config")]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct GroupPatch {
    pub(crate) interval: Option<Duration>,
    pub(crate) success_rate: Option<f64>,
    pub(crate) failure_percentage: Option<u8>,
    pub(crate) min_members: Option<u32>,
    pub(crate) max_ejection: Option<u8>,
    pub(crate) ejection: Option<(Duration, Duration)>,
    pub(crate) healthy_span: Option<Duration>,
}

#[cfg(feature = "config")]
impl GroupPatch {
    /// This patch, then `later` (which wins on the fields both name).
    pub(crate) fn then(self, later: GroupPatch) -> GroupPatch {
        GroupPatch {
            interval: later.interval.or(self.interval),
            success_rate: later.success_rate.or(self.success_rate),
            failure_percentage: later.failure_percentage.or(self.failure_percentage),
            min_members: later.min_members.or(self.min_members),
            max_ejection: later.max_ejection.or(self.max_ejection),
            ejection: later.ejection.or(self.ejection),
            healthy_span: later.healthy_span.or(self.healthy_span),
        }
    }

    /// `policy` with the fields this patch names set.
    pub(crate) fn apply(&self, mut policy: GroupPolicy) -> GroupPolicy {
        if let Some(interval) = self.interval {
            policy = policy.interval(interval);
        }
        if let Some(factor) = self.success_rate {
            policy = policy.success_rate(factor);
        }
        if let Some(percent) = self.failure_percentage {
            policy = policy.failure_percentage(percent);
        }
        if let Some(members) = self.min_members {
            policy = policy.min_members(members);
        }
        if let Some(percent) = self.max_ejection {
            policy = policy.max_ejection(percent);
        }
        if let Some((base, max)) = self.ejection {
            policy = policy.ejection(base, max);
        }
        if let Some(span) = self.healthy_span {
            policy = policy.healthy_span(span);
        }
        policy
    }
}

/// The interned names of groups: each kept once, for the process's life, at most
/// [`MAX_GROUP_NAMES`] of them.
#[derive(Default)]
pub(crate) struct Names {
    set: BTreeSet<&'static str>,
}

/// A load would keep more than [`MAX_GROUP_NAMES`] distinct group names: `name` is the first
/// new one past the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TooManyNames {
    pub(crate) name: String,
}

impl Names {
    /// The kept name equal to `name`, if any.
    pub(crate) fn get(&self, name: &str) -> Option<&'static str> {
        self.set.get(name).copied()
    }

    /// How many names are kept.
    pub(crate) fn len(&self) -> usize {
        self.set.len()
    }

    /// `name` kept (once).
    fn add(&mut self, name: &str) -> &'static str {
        if let Some(known) = self.get(name) {
            return known;
        }
        let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
        self.set.insert(leaked);
        leaked
    }

    /// Every name of `names` kept, or none of them when that would keep more than `max`.
    pub(crate) fn add_all<'a>(
        &mut self,
        names: impl IntoIterator<Item = &'a str> + Clone,
        max: usize,
    ) -> Result<(), TooManyNames> {
        let mut fresh: BTreeSet<&str> = BTreeSet::new();
        for name in names.clone() {
            if self.get(name).is_none() && fresh.insert(name) && self.len() + fresh.len() > max {
                return Err(TooManyNames {
                    name: name.to_owned(),
                });
            }
        }
        for name in names {
            self.add(name);
        }
        Ok(())
    }
}

/// The most distinct group names a process keeps (a name read from configuration or given to
/// [`Registry::configure_group`](crate::Registry::configure_group) is kept for the process's
/// life, at most 64 bytes each): a load or a call that would keep more is refused.
pub const MAX_GROUP_NAMES: usize = 1024;

/// The process's group names.
pub(crate) fn names() -> std::sync::MutexGuard<'static, Names> {
    static NAMES: Mutex<Names> = Mutex::new(Names {
        set: BTreeSet::new(),
    });
    NAMES.lock().unwrap_or_else(|p| p.into_inner())
}

/// `name` kept, for code ([`Registry::configure_group`](crate::Registry::configure_group)):
/// checked as [`Policy::group`](crate::Policy::group) checks it, and refused when it would be
/// one more than [`MAX_GROUP_NAMES`].
pub(crate) fn keep_name(name: &str) -> Result<&'static str, super::GroupPolicyError> {
    let refused = |allowed| {
        let found = format!("{:?}", name.chars().take(40).collect::<String>());
        Err(super::GroupPolicyError::new("group", allowed, found).for_group(name))
    };
    if crate::policy::Policy::validate_group_name(name).is_err() {
        return refused(
            "1..=64 characters among ASCII letters, digits, `-`, `_`, `.`, `:` (like \"search-eu\")",
        );
    }
    let mut names = names();
    if names.add_all([name], MAX_GROUP_NAMES).is_err() {
        return refused("one of at most 1024 distinct group names in a process (reuse a name)");
    }
    Ok(names.add(name))
}

/// `name` as the `&'static str` kept for it, once it was accepted (a name a load or
/// `configure_group` kept with [`Names::add_all`]); a name not kept yet is kept now.
#[cfg(feature = "config")]
pub(crate) fn intern(name: &str) -> &'static str {
    names().add(name)
}
