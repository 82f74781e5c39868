//! A group's evaluation: its members and the places they hold under the cap (the panic
//! threshold), the relative rules' pass over the members, and each member's ejection backoff.
//!
//! The group reaches its members' breakers through [`MemberBreaker`], which the breaker
//! implements: the group names no breaker type.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock, Weak};

use super::GroupPolicy;
use crate::observe::Trigger;
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use crate::window::Counts;

/// What a group asks of a member's breaker: its counts for the relative rules, the ejection,
/// and its availability for [`Group`](super::Group)'s views.
pub(crate) trait MemberBreaker: Send + Sync {
    /// The newest breaker of this member (a successor replaces its predecessor).
    fn newest(self: Arc<Self>) -> Arc<dyn MemberBreaker>;
    /// The member's key.
    fn key_str(&self) -> &str;
    /// The counts of its window if it is closed now.
    fn closed_counts(&self, now: u64) -> Option<Counts>;
    /// The calls its window needs before a rule judges it.
    fn min_calls_of(&self) -> u32;
    /// Opens it for a relative rule's `trigger`: true when it opened.
    fn eject(&self, trigger: Trigger, now: u64) -> bool;
    /// Opened by a relative rule and open within that ejection's wait.
    fn ejected_now(&self) -> bool;
    /// Open within its wait, or forced open.
    fn unavailable_now(&self) -> bool;
}

/// A group as the registry holds it: its members, the count of open ones, its interval stamp.
pub(crate) struct GroupCore {
    pub(crate) name: &'static str,
    /// The settings code gave it ([`Registry::configure_group`](crate::Registry::configure_group);
    /// the defaults otherwise), before configuration's patches. Written under the lock of the
    /// registry's `Groups`.
    pub(crate) declared: Mutex<GroupPolicy>,
    /// The settings in force: `declared` with configuration's patches applied.
    pub(crate) policy: RwLock<GroupPolicy>,
    /// `policy`'s `max_ejection`, read by every trip without the lock.
    max_ejection: AtomicU32,
    /// The members by key: the newest breaker of each (a successor replaces its predecessor).
    pub(crate) members: Mutex<HashMap<String, Weak<dyn MemberBreaker>>>,
    /// Live members ([`Member`]s not dropped).
    pub(crate) size: AtomicU32,
    /// Members holding a place under the cap (open by any rule of this breaker).
    pub(crate) open: AtomicU32,
    /// The clock time from which the next pass may run.
    pub(crate) next_pass: AtomicU64,
    /// In panic: a trip was rejected by the cap and no pass since found the group calm.
    pub(crate) panic: AtomicBool,
    /// A trip was rejected since the last pass.
    rejected: AtomicBool,
    /// Trips the cap rejected since the group was created.
    pub(crate) rejections: AtomicU64,
    /// Ejections by the relative rules since the group was created.
    pub(crate) ejections: AtomicU64,
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
    pub(crate) fn new(
        name: &'static str,
        declared: GroupPolicy,
        policy: GroupPolicy,
        now: u64,
    ) -> Self {
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

    pub(crate) fn policy(&self) -> GroupPolicy {
        *self.policy.read().unwrap_or_else(|p| p.into_inner())
    }

    #[cfg(feature = "config")]
    pub(crate) fn declared(&self) -> GroupPolicy {
        *self.declared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Puts `policy` in force (under the lock of the registry's `Groups`).
    pub(crate) fn set_policy(&self, policy: GroupPolicy) {
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
        let qualifying: Vec<(Arc<dyn MemberBreaker>, Counts)> = self
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
    pub(crate) fn live(&self) -> Vec<Arc<dyn MemberBreaker>> {
        let mut members = self.members.lock().unwrap_or_else(|p| p.into_inner());
        members.retain(|_, weak| weak.strong_count() > 0);
        members
            .values()
            .filter_map(Weak::upgrade)
            .map(MemberBreaker::newest)
            .collect()
    }
}

/// The members `qualifying` (closed, with enough calls) that a relative rule ejects, with the rule.
fn outliers<'a>(
    qualifying: &'a [(Arc<dyn MemberBreaker>, Counts)],
    policy: &GroupPolicy,
) -> Vec<(&'a Arc<dyn MemberBreaker>, Trigger)> {
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
                >= u64::from(policy.failure_percentage) * u64::from(counts.calls)
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
