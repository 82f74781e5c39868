//! [`PolicyPatch`]: the fields an operator's override names, applied through the setters of
//! [`Policy`].

use std::time::Duration;

use crate::{Others, Policy, Recovery, Window, set};

/// Changes to some fields of a [`Policy`]: what an operator's override names, and nothing else.
///
/// It has the setters of [`Policy`]; [`apply`](PolicyPatch::apply) calls the same setters on a
/// policy, so a field set through a patch follows the same rules as one set in code (see
/// [`Policy`]). A [`Policy`] converts into the patch of the fields it set explicitly, so
/// `registry.configure("payment", Policy::new().failure_rate(30))` changes `failure_rate` only.
///
/// ```
/// use std::time::Duration;
/// # use fusebox_policy as fusebox;
/// use fusebox::{Policy, PolicyPatch};
///
/// let declared = Policy::new().window(20).open_for(Duration::from_secs(30));
/// let patched = PolicyPatch::new().failure_rate(30).apply(declared);
/// assert_eq!(patched.get_failure_rate(), Some(30));
/// assert_eq!(patched.get_open_for(), Duration::from_secs(30), "fields not named are kept");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PolicyPatch {
    window: Option<Window>,
    min_calls: Option<u32>,
    /// 0: [`Policy::rate_off`].
    failure_rate: Option<u8>,
    slow: Option<Duration>,
    slow_rate: Option<u8>,
    consecutive: Option<u32>,
    failure_count: Option<u32>,
    open_for: Option<Duration>,
    open_backoff: Option<f64>,
    open_max: Option<Duration>,
    half_open: Option<u32>,
    half_open_lease: Option<Duration>,
    recovery: Option<Recovery>,
    max_concurrent: Option<u32>,
    stuck_after_recoveries: Option<u32>,
    stuck_after: Option<Duration>,
    shared: Option<bool>,
    others: Option<Others>,
}

impl PolicyPatch {
    /// A patch that changes nothing.
    pub const fn new() -> Self {
        PolicyPatch {
            window: None,
            min_calls: None,
            failure_rate: None,
            slow: None,
            slow_rate: None,
            consecutive: None,
            failure_count: None,
            open_for: None,
            open_backoff: None,
            open_max: None,
            half_open: None,
            half_open_lease: None,
            recovery: None,
            max_concurrent: None,
            stuck_after_recoveries: None,
            stuck_after: None,
            shared: None,
            others: None,
        }
    }

    /// See [`Policy::stuck_open`] (both of its rules).
    pub const fn stuck_open(mut self, failed_recoveries: u32, open_longer_than: Duration) -> Self {
        self.stuck_after_recoveries = Some(failed_recoveries);
        self.stuck_after = Some(open_longer_than);
        self
    }

    /// The count rule of [`Policy::stuck_open`] alone: failed recoveries in a row (0: off).
    pub const fn stuck_after_recoveries(mut self, failed_recoveries: u32) -> Self {
        self.stuck_after_recoveries = Some(failed_recoveries);
        self
    }

    /// The time rule of [`Policy::stuck_open`] alone: the open span (zero: off).
    pub const fn stuck_after(mut self, open_longer_than: Duration) -> Self {
        self.stuck_after = Some(open_longer_than);
        self
    }

    /// See [`Policy::shared`].
    pub const fn shared(mut self, shared: bool) -> Self {
        self.shared = Some(shared);
        self
    }

    /// See [`Policy::others`].
    pub const fn others(mut self, others: Others) -> Self {
        self.others = Some(others);
        self
    }

    /// See [`Policy::window`].
    pub const fn window(mut self, calls: u32) -> Self {
        self.window = Some(Window::Count(calls));
        self
    }

    /// See [`Policy::time_window`].
    pub const fn time_window(mut self, span: Duration) -> Self {
        self.window = Some(Window::Time(span));
        self
    }

    /// See [`Policy::min_calls`].
    pub const fn min_calls(mut self, calls: u32) -> Self {
        self.min_calls = Some(calls);
        self
    }

    /// See [`Policy::failure_rate`].
    pub const fn failure_rate(mut self, percent: u8) -> Self {
        self.failure_rate = Some(percent);
        self
    }

    /// See [`Policy::rate_off`].
    pub const fn rate_off(mut self) -> Self {
        self.failure_rate = Some(0);
        self
    }

    /// See [`Policy::slow`].
    pub const fn slow(mut self, threshold: Duration) -> Self {
        self.slow = Some(threshold);
        self
    }

    /// See [`Policy::slow_rate`].
    pub const fn slow_rate(mut self, percent: u8) -> Self {
        self.slow_rate = Some(percent);
        self
    }

    /// See [`Policy::consecutive`].
    pub const fn consecutive(mut self, failures: u32) -> Self {
        self.consecutive = Some(failures);
        self
    }

    /// See [`Policy::failure_count`].
    pub const fn failure_count(mut self, failures: u32) -> Self {
        self.failure_count = Some(failures);
        self
    }

    /// See [`Policy::open_for`].
    pub const fn open_for(mut self, wait: Duration) -> Self {
        self.open_for = Some(wait);
        self
    }

    /// See [`Policy::open_backoff`].
    pub const fn open_backoff(mut self, factor: f64) -> Self {
        self.open_backoff = Some(factor);
        self
    }

    /// See [`Policy::open_max`].
    pub const fn open_max(mut self, wait: Duration) -> Self {
        self.open_max = Some(wait);
        self
    }

    /// See [`Policy::half_open`].
    pub const fn half_open(mut self, probes: u32) -> Self {
        self.half_open = Some(probes);
        self
    }

    /// See [`Policy::half_open_lease`].
    pub const fn half_open_lease(mut self, lease: Duration) -> Self {
        self.half_open_lease = Some(lease);
        self
    }

    /// See [`Policy::progressive`].
    pub const fn progressive(mut self, phases: u32, min_passes: u32) -> Self {
        self.recovery = Some(Recovery::Progressive { phases, min_passes });
        self
    }

    /// See [`Policy::recovery`].
    pub const fn recovery(mut self, recovery: Recovery) -> Self {
        self.recovery = Some(recovery);
        self
    }

    /// See [`Policy::max_concurrent`].
    pub const fn max_concurrent(mut self, calls: u32) -> Self {
        self.max_concurrent = Some(calls);
        self
    }

    /// True when the patch names no field.
    pub fn is_empty(&self) -> bool {
        *self == PolicyPatch::new()
    }

    /// This patch with every field `later` names taken from `later`.
    pub fn then(self, later: PolicyPatch) -> PolicyPatch {
        PolicyPatch {
            window: later.window.or(self.window),
            min_calls: later.min_calls.or(self.min_calls),
            failure_rate: later.failure_rate.or(self.failure_rate),
            slow: later.slow.or(self.slow),
            slow_rate: later.slow_rate.or(self.slow_rate),
            consecutive: later.consecutive.or(self.consecutive),
            failure_count: later.failure_count.or(self.failure_count),
            open_for: later.open_for.or(self.open_for),
            open_backoff: later.open_backoff.or(self.open_backoff),
            open_max: later.open_max.or(self.open_max),
            half_open: later.half_open.or(self.half_open),
            half_open_lease: later.half_open_lease.or(self.half_open_lease),
            recovery: later.recovery.or(self.recovery),
            max_concurrent: later.max_concurrent.or(self.max_concurrent),
            stuck_after_recoveries: later.stuck_after_recoveries.or(self.stuck_after_recoveries),
            stuck_after: later.stuck_after.or(self.stuck_after),
            shared: later.shared.or(self.shared),
            others: later.others.or(self.others),
        }
    }

    /// `policy` with each field this patch names set through its [`Policy`] setter.
    pub fn apply(&self, policy: Policy) -> Policy {
        let mut p = policy;
        match self.window {
            Some(Window::Count(n)) => p = p.window(n),
            Some(Window::Time(span)) => p = p.time_window(span),
            None => {}
        }
        if let Some(v) = self.min_calls {
            p = p.min_calls(v);
        }
        match self.failure_rate {
            Some(0) => p = p.rate_off(),
            Some(v) => p = p.failure_rate(v),
            None => {}
        }
        if let Some(v) = self.slow {
            p = p.slow(v);
        }
        if let Some(v) = self.slow_rate {
            p = p.slow_rate(v);
        }
        if let Some(v) = self.consecutive {
            p = p.consecutive(v);
        }
        if let Some(v) = self.failure_count {
            p = p.failure_count(v);
        }
        if let Some(v) = self.open_for {
            p = p.open_for(v);
        }
        if let Some(v) = self.open_backoff {
            p = p.open_backoff(v);
        }
        if let Some(v) = self.open_max {
            p = p.open_max(v);
        }
        if let Some(v) = self.half_open {
            p = p.half_open(v);
        }
        if let Some(v) = self.half_open_lease {
            p = p.half_open_lease(v);
        }
        if let Some(v) = self.recovery {
            p = p.recovery(v);
        }
        if let Some(v) = self.max_concurrent {
            p = p.max_concurrent(v);
        }
        if let Some(v) = self.others {
            p = p.others(v);
        }
        if let Some(v) = self.shared {
            p = p.shared(v);
        }
        if self.stuck_after_recoveries.is_some() || self.stuck_after.is_some() {
            let (reopens, open) = p.get_stuck_open();
            p = p.stuck_open(
                self.stuck_after_recoveries.unwrap_or(reopens),
                self.stuck_after.unwrap_or(open),
            );
        }
        p
    }
}

impl From<Policy> for PolicyPatch {
    /// The fields `policy` set explicitly (see [`Policy`]).
    fn from(policy: Policy) -> Self {
        let named = |field: u32| policy.is_explicit(field);
        let nanos = |nanos: u64| Duration::from_nanos(nanos);
        PolicyPatch {
            window: named(set::WINDOW).then_some(policy.window),
            min_calls: named(set::MIN_CALLS).then_some(policy.min_calls),
            failure_rate: named(set::FAILURE_RATE).then_some(policy.failure_rate),
            slow: named(set::SLOW).then_some(nanos(policy.slow_nanos)),
            slow_rate: named(set::SLOW_RATE).then_some(policy.slow_rate),
            consecutive: named(set::CONSECUTIVE).then_some(policy.consecutive),
            failure_count: named(set::FAILURE_COUNT).then_some(policy.failure_count),
            open_for: named(set::OPEN_FOR).then_some(nanos(policy.open_for_nanos)),
            open_backoff: named(set::OPEN_BACKOFF)
                .then_some(f64::from(policy.open_backoff_milli) / 1000.0),
            open_max: named(set::OPEN_MAX).then_some(nanos(policy.open_max_nanos)),
            half_open: named(set::HALF_OPEN).then_some(policy.half_open),
            half_open_lease: named(set::HALF_OPEN_LEASE)
                .then_some(nanos(policy.half_open_lease_nanos)),
            recovery: named(set::RECOVERY).then_some(policy.recovery),
            max_concurrent: named(set::MAX_CONCURRENT).then_some(policy.max_concurrent),
            stuck_after_recoveries: named(set::STUCK_OPEN).then_some(policy.stuck_reopens),
            stuck_after: named(set::STUCK_OPEN).then_some(nanos(policy.stuck_open_nanos)),
            shared: named(set::SHARED).then_some(policy.shared),
            others: named(set::OTHERS).then_some(policy.others),
        }
    }
}
