//! Groups of keys: outlier ejection relative to the members, the cap on open members (the panic
//! threshold), ejection backoff, and the choice of healthy members.
//!
//! A key whose policy names a group ([`Policy::group`](crate::Policy::group), `group = "search"`
//! in the attribute or in configuration) is a member of it; the group is created in the registry
//! with its first member. Each member is still its own breaker, with its own rules. The group adds:
//!
//! - **Relative rules**, evaluated lazily on the request path, at most once per
//!   [`interval`](GroupPolicy::interval): by the first counted failure of any member after the
//!   interval is over (one caller wins a compare-and-swap on the interval's stamp and makes the
//!   pass, O(members); every other failure pays one load of the stamp). A pass looks at the closed
//!   members with at least their own `min_calls` in their window and, when at least
//!   [`min_members`](GroupPolicy::min_members) of them qualify, ejects (opens, with the trigger
//!   [`Trigger::OutlierSuccessRate`] or
//!   [`Trigger::OutlierFailurePercentage`]) those whose
//!   success rate is below the mean of the qualifying members by more than
//!   [`success_rate`](GroupPolicy::success_rate) standard deviations, and those whose failure
//!   percentage is above [`failure_percentage`](GroupPolicy::failure_percentage).
//! - **The panic threshold**: at most [`max_ejection`](GroupPolicy::max_ejection) percent of the
//!   members (at least one) are open at once, whichever rule opened them, relative or the member's
//!   own. A member that would exceed it stays closed; the first rejection of an episode emits one
//!   `group_panic` WARN event (fields `group`, `key`, `members`, `open`, `max_ejection`), and [`GroupSnapshot::in_panic`] shows it until a pass finds no
//!   rejection since the previous one (`group_panic_over`, INFO).
//! - **Ejection backoff**: an ejected member stays open [`base`](GroupPolicy::ejection) × the times
//!   it was ejected, up to a maximum; after a [`healthy_span`](GroupPolicy::healthy_span) closed,
//!   the count starts again. The wait then goes through the member's own open-wait rules, as
//!   any opening of the key: capped by its `open_max` (never below its `open_for`), lengthened
//!   by pushback ([`RetryAfter`](crate::RetryAfter)), spread by its `open_jitter`. A failed
//!   probe reopens it for its own policy's wait.
//!
//! The success path of a member is the one of any key; a counted failure of a member reads the
//! clock and the group's stamp. Keys without a group never reach this module.
//!
//! On a shared registry (feature `redis`), the group is this replica's: the relative rules see
//! this replica's windows and run on the failures this replica records itself (a member whose
//! outcomes go to the store, a shared key, does not start a pass: per-host keys are usually kept
//! local with `shared = false`), the cap counts the opens this replica's breakers made, and an
//! open the store committed (from another replica) is not counted against it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use crate::breaker::Circuit;
use crate::clock::duration_to_nanos as nanos;
use crate::observe::Trigger;
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use crate::window::Counts;

/// The settings of a group: its relative rules, its panic threshold and its ejection backoff.
/// The defaults are Envoy's outlier detection's.
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
    interval_nanos: u64,
    stdev_milli: u32,
    min_members: u32,
    failure_percentage: u8,
    max_ejection: u8,
    base_nanos: u64,
    max_nanos: u64,
    healthy_nanos: u64,
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
    /// Failure-percentage ejection: the failure percentage above which a member is ejected
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
    /// Envoy's defaults: a pass every 10 s, success-rate ejection at 1.9 standard deviations,
    /// failure-percentage ejection above 85 %, 5 qualifying members, at most 10 % open, ejections
    /// of 30 s × the times ejected up to 300 s, reset after 300 s closed.
    #[must_use]
    pub const fn new() -> Self {
        GroupPolicy {
            interval_nanos: 10_000_000_000,
            stdev_milli: 1900,
            min_members: 5,
            failure_percentage: 85,
            max_ejection: 10,
            base_nanos: 30_000_000_000,
            max_nanos: 300_000_000_000,
            healthy_nanos: 300_000_000_000,
        }
    }

    /// The shortest time between two passes of the relative rules (at least 1 ms).
    #[must_use]
    pub const fn interval(mut self, interval: Duration) -> Self {
        self.interval_nanos = nanos(interval);
        self
    }

    /// Success-rate ejection at `factor` standard deviations below the mean (0 turns it off).
    #[must_use]
    pub const fn success_rate(mut self, factor: f64) -> Self {
        self.stdev_milli = if factor > 0.0 && factor < 1000.0 {
            (factor * 1000.0) as u32
        } else {
            0
        };
        self
    }

    /// Failure-percentage ejection above `percent` failures (0 turns it off; at most 100).
    #[must_use]
    pub const fn failure_percentage(mut self, percent: u8) -> Self {
        self.failure_percentage = if percent > 100 { 100 } else { percent };
        self
    }

    /// The qualifying members a pass needs before either relative rule applies (at least 1).
    #[must_use]
    pub const fn min_members(mut self, members: u32) -> Self {
        self.min_members = if members == 0 { 1 } else { members };
        self
    }

    /// The most members open at once, in percent of the members (at most 100; at least one
    /// member may always be open).
    #[must_use]
    pub const fn max_ejection(mut self, percent: u8) -> Self {
        self.max_ejection = if percent > 100 { 100 } else { percent };
        self
    }

    /// The ejection backoff: `base` × the times ejected in a row, at most `max`. Each member's
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
            success_rate: if self.stdev_milli == 0 {
                None
            } else {
                Some(self.stdev_milli as f64 / 1000.0)
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
    fn wait_nanos(&self, times: u32) -> u64 {
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

/// A group as the registry holds it: its members, the count of open ones, its interval stamp.
pub(crate) struct GroupCore {
    name: &'static str,
    /// The settings code gave it ([`Registry::configure_group`](crate::Registry::configure_group);
    /// the defaults otherwise), before configuration's patches. Written under the [`Groups`] lock.
    declared: Mutex<GroupPolicy>,
    /// The settings in force: `declared` with configuration's patches applied.
    policy: RwLock<GroupPolicy>,
    /// `policy`'s `max_ejection`, read by every trip without the lock.
    max_ejection: AtomicU32,
    /// The members by key: the newest breaker of each (a successor replaces its predecessor).
    members: Mutex<HashMap<String, Weak<Circuit>>>,
    /// Live members ([`Member`]s not dropped).
    size: AtomicU32,
    /// Members holding a place under the cap (open by any rule of this breaker).
    open: AtomicU32,
    /// The clock time from which the next pass may run.
    next_pass: AtomicU64,
    /// In panic: a trip was rejected by the cap and no pass since found the group calm.
    panic: AtomicBool,
    /// A trip was rejected since the last pass.
    rejected: AtomicBool,
    /// Trips the cap rejected since the group was created.
    rejections: AtomicU64,
    /// Ejections by the relative rules since the group was created.
    ejections: AtomicU64,
}

/// A breaker's membership: its group, the places it holds under the cap, its ejection count.
/// Shared by a breaker and its successors.
pub(crate) struct Member {
    pub(crate) group: Arc<GroupCore>,
    /// Places held under the group's cap (one per open episode this breaker's trips started).
    held: AtomicU32,
    /// Ejections by a relative rule in a row (reset after a healthy span).
    ejected: AtomicU32,
    /// When the member last closed after holding a place (nanoseconds + 1; 0: never).
    healthy_since: AtomicU64,
}

impl Drop for Member {
    fn drop(&mut self) {
        let held = self.held.swap(0, Ordering::AcqRel);
        if held != 0 {
            self.group.open.fetch_sub(held, Ordering::AcqRel);
        }
        self.group.size.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a trip may do under the cap ([`Member::hold`]).
pub(crate) enum Hold {
    /// A place was taken for it: give it back with [`Member::unhold`] if the trip loses its race.
    Taken,
    /// The cap is reached: the member stays closed.
    Rejected,
}

impl GroupCore {
    fn new(name: &'static str, declared: GroupPolicy, policy: GroupPolicy, now: u64) -> Self {
        GroupCore {
            name,
            declared: Mutex::new(declared),
            policy: RwLock::new(policy),
            max_ejection: AtomicU32::new(u32::from(policy.max_ejection)),
            members: Mutex::new(HashMap::new()),
            size: AtomicU32::new(0),
            open: AtomicU32::new(0),
            next_pass: AtomicU64::new(now.saturating_add(policy.interval_nanos)),
            panic: AtomicBool::new(false),
            rejected: AtomicBool::new(false),
            rejections: AtomicU64::new(0),
            ejections: AtomicU64::new(0),
        }
    }

    fn policy(&self) -> GroupPolicy {
        *self.policy.read().unwrap_or_else(|p| p.into_inner())
    }

    #[cfg(feature = "config")]
    fn declared(&self) -> GroupPolicy {
        *self.declared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Puts `policy` in force (under the [`Groups`] lock).
    fn set_policy(&self, policy: GroupPolicy) {
        *self.policy.write().unwrap_or_else(|p| p.into_inner()) = policy;
        self.max_ejection
            .store(u32::from(policy.max_ejection), Ordering::Release);
    }

    /// The most members open at once for `size` members and `percent`: at least one.
    pub(crate) fn cap(size: u32, percent: u8) -> u32 {
        (u64::from(size) * u64::from(percent) / 100).max(1) as u32
    }

    /// Takes one place under the cap if one is free (compare-and-swap: never more than the cap,
    /// whatever the number of threads).
    fn try_take(&self) -> bool {
        let percent = self.max_ejection.load(Ordering::Acquire) as u8;
        let cap = Self::cap(self.size.load(Ordering::Acquire), percent);
        let mut open = self.open.load(Ordering::Acquire);
        loop {
            if open >= cap {
                return false;
            }
            match self.open.compare_exchange_weak(
                open,
                open + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(seen) => open = seen,
            }
        }
    }

    /// A trip of `key` the cap rejected: counted, and announced once per episode.
    #[cold]
    fn reject(&self, key: &str) {
        self.rejections.fetch_add(1, Ordering::Relaxed);
        self.rejected.store(true, Ordering::Release);
        if !self.panic.swap(true, Ordering::AcqRel) {
            let (group, max_ejection) = (self.name, self.max_ejection.load(Ordering::Acquire));
            let members = self.size.load(Ordering::Acquire);
            let open = self.open.load(Ordering::Acquire);
            // A subscriber that panics does not unwind into the breaker.
            let _ = std::panic::catch_unwind(|| {
                tracing::warn!(
                    target: "fusebox",
                    event = "group_panic",
                    group,
                    key,
                    members,
                    open,
                    max_ejection,
                    "group_panic"
                )
            });
        }
    }

    /// The relative rules, if the interval is over: one load of the stamp, and the pass for the
    /// caller that wins the compare-and-swap on it.
    #[inline]
    pub(crate) fn tick(&self, now: u64) {
        let due = self.next_pass.load(Ordering::Acquire);
        if now >= due {
            self.pass(due, now);
        }
    }

    #[cold]
    #[inline(never)]
    fn pass(&self, due: u64, now: u64) {
        let policy = self.policy();
        if self
            .next_pass
            .compare_exchange(
                due,
                now.saturating_add(policy.interval_nanos.max(1_000_000)),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            return; // another caller makes this pass
        }
        if !self.rejected.swap(false, Ordering::AcqRel) && self.panic.swap(false, Ordering::AcqRel)
        {
            let group = self.name;
            let _ = std::panic::catch_unwind(|| {
                tracing::info!(
                    target: "fusebox",
                    event = "group_panic_over",
                    group,
                    "group_panic_over"
                )
            });
        }
        let qualifying: Vec<(Arc<Circuit>, Counts)> = self
            .live()
            .into_iter()
            .filter_map(|circuit| {
                let counts = circuit.closed_counts(now)?;
                (counts.calls > 0 && counts.calls >= circuit.min_calls_of())
                    .then_some((circuit, counts))
            })
            .collect();
        for (circuit, trigger) in outliers(&qualifying, &policy) {
            if circuit.eject(trigger, now) {
                self.ejections.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The newest breaker of every live member (dead ones are dropped from the list).
    fn live(&self) -> Vec<Arc<Circuit>> {
        let mut members = self.members.lock().unwrap_or_else(|p| p.into_inner());
        members.retain(|_, weak| weak.strong_count() > 0);
        members
            .values()
            .filter_map(Weak::upgrade)
            .map(|circuit| circuit.current().clone())
            .collect()
    }
}

/// The members `qualifying` (closed, with enough calls) that a relative rule ejects, with the rule.
fn outliers<'a>(
    qualifying: &'a [(Arc<Circuit>, Counts)],
    policy: &GroupPolicy,
) -> Vec<(&'a Arc<Circuit>, Trigger)> {
    let mut out = Vec::new();
    if qualifying.is_empty() || (qualifying.len() as u64) < u64::from(policy.min_members) {
        return out;
    }
    let rates: Vec<f64> = qualifying
        .iter()
        .map(|(_, c)| 1.0 - f64::from(c.failures) / f64::from(c.calls))
        .collect();
    let n = rates.len() as f64;
    let mean = rates.iter().sum::<f64>() / n;
    let stdev = (rates.iter().map(|r| (r - mean) * (r - mean)).sum::<f64>() / n).sqrt();
    let threshold = mean - f64::from(policy.stdev_milli) / 1000.0 * stdev;
    for ((circuit, counts), rate) in qualifying.iter().zip(&rates) {
        if policy.stdev_milli != 0 && *rate < threshold {
            out.push((circuit, Trigger::OutlierSuccessRate));
        } else if policy.failure_percentage != 0
            && u64::from(counts.failures) * 100
                > u64::from(policy.failure_percentage) * u64::from(counts.calls)
        {
            out.push((circuit, Trigger::OutlierFailurePercentage));
        }
    }
    out
}

impl Member {
    /// A new member of `group` (counted in its size).
    pub(crate) fn new(group: Arc<GroupCore>) -> Arc<Member> {
        group.size.fetch_add(1, Ordering::AcqRel);
        Arc::new(Member {
            group,
            held: AtomicU32::new(0),
            ejected: AtomicU32::new(0),
            healthy_since: AtomicU64::new(0),
        })
    }

    /// Asks the group for a place under its cap before a trip of `key`.
    pub(crate) fn hold(&self, key: &str) -> Hold {
        if self.group.try_take() {
            self.held.fetch_add(1, Ordering::AcqRel);
            Hold::Taken
        } else {
            self.group.reject(key);
            Hold::Rejected
        }
    }

    /// Gives back the place a trip took and did not use (it lost its compare-and-swap).
    pub(crate) fn unhold(&self) {
        self.release_one();
    }

    /// The member closed (or was disabled): its place under the cap is free again.
    pub(crate) fn released(&self, now: u64) {
        if self.release_one() {
            self.healthy_since
                .store(now.saturating_add(1), Ordering::Release);
        }
    }

    fn release_one(&self) -> bool {
        let released = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_sub(1)
            })
            .is_ok();
        if released {
            self.group.open.fetch_sub(1, Ordering::AcqRel);
        }
        released
    }

    /// The wait of this member's next ejection, in nanoseconds, and the count it will have:
    /// the count restarts after a healthy span.
    pub(crate) fn next_ejection(&self, now: u64) -> (u64, u32) {
        let policy = self.group.policy();
        let since = self.healthy_since.load(Ordering::Acquire);
        let mut times = self.ejected.load(Ordering::Acquire);
        if since != 0 && now.saturating_sub(since - 1) >= policy.healthy_nanos {
            times = 0;
        }
        let times = times.saturating_add(1);
        (policy.wait_nanos(times), times)
    }

    /// Records that the member was ejected for the `times`-th time in a row.
    pub(crate) fn ejected(&self, times: u32) {
        self.ejected.store(times, Ordering::Release);
    }

    /// The name of the member's group.
    pub(crate) fn group_name(&self) -> &'static str {
        self.group.name
    }
}

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
        source: crate::registry::Source,
        layer: std::collections::BTreeMap<String, GroupPatch>,
        now: u64,
    ) {
        let mut inner = self.lock();
        let slot = match source {
            crate::registry::Source::File => &mut inner.file,
            crate::registry::Source::Env => &mut inner.env,
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
        members.insert(circuit.key().as_str().to_owned(), Arc::downgrade(circuit));
    }
}

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
    /// group's relative rules ([`Trigger::OutlierSuccessRate`],
    /// [`Trigger::OutlierFailurePercentage`]) and open within that ejection's wait. A member
    /// opened by its own rules or forced open is not ejected (though [`healthy`](Group::healthy)
    /// skips it too), nor is a member whose wait is over (its next call probes it), nor a key
    /// the group does not know.
    #[must_use]
    pub fn is_ejected(&self, key: &str) -> bool {
        self.member_is(key, |circuit| circuit.ejected_now())
    }

    /// True when `key` is a member whose circuit `test` holds for.
    fn member_is(&self, key: &str, test: impl Fn(&Circuit) -> bool) -> bool {
        let members = self.core.members.lock().unwrap_or_else(|p| p.into_inner());
        members
            .get(key)
            .and_then(Weak::upgrade)
            .is_some_and(|circuit| test(circuit.current()))
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
            .map(|c| c.key().as_str().to_owned())
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

/// `name` as a `&'static str`, kept once per distinct name for the process's life (names read
/// from configuration; a group's name is short and names are few).
pub(crate) fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut names = NAMES.lock().unwrap_or_else(|p| p.into_inner());
    let names = names.get_or_insert_with(HashSet::new);
    if let Some(known) = names.get(name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}

#[cfg(all(test, not(fusebox_loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_a_share_of_the_members_and_at_least_one() {
        assert_eq!(GroupCore::cap(10, 10), 1);
        assert_eq!(GroupCore::cap(3, 10), 1);
        assert_eq!(GroupCore::cap(100, 10), 10);
        assert_eq!(GroupCore::cap(10, 100), 10);
        assert_eq!(GroupCore::cap(0, 10), 1);
    }

    #[test]
    fn ejection_waits_grow_with_the_times_ejected_up_to_the_max() {
        let policy = GroupPolicy::new();
        let s = 1_000_000_000;
        assert_eq!(policy.wait_nanos(1), 30 * s);
        assert_eq!(policy.wait_nanos(2), 60 * s);
        assert_eq!(policy.wait_nanos(10), 300 * s);
        assert_eq!(policy.wait_nanos(11), 300 * s);
    }

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
        assert_eq!(found.policy().interval_nanos, 60 * s);
    }

    #[test]
    fn interned_names_are_kept_once() {
        let a = intern("search");
        let b = intern(&String::from("search"));
        assert!(std::ptr::eq(a, b));
    }
}
