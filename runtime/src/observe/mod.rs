//! Watching breakers: transition hooks registered on a [`Registry`](crate::Registry); the
//! per-call record (`record.rs`) and the metric names (`metrics.rs`, feature `metrics`, public as
//! `fusebox::metrics`) live beside them.
//!
//!
//! Hooks run on the thread that made the transition, after it is published and outside any lock, so
//! a hook may read the breaker (or even trip another one) without deadlocking anything. A hook that
//! panics is caught: the panic is reported as a `tracing` ERROR naming the key and the transition,
//! the transition stands, and the other hooks still run.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use crate::state::State;
use crate::window::Counts;

#[cfg(feature = "metrics")]
pub mod metrics;
pub(crate) mod record;

/// One state change of one breaker.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Transition<'a> {
    /// The breaker's key.
    pub key: &'a str,
    /// The state it left.
    pub from: State,
    /// The state it entered.
    pub to: State,
    /// Failure rate of the window (or of the probes) that decided, in percent.
    pub failure_rate: f64,
    /// Slow-call rate of that window, in percent.
    pub slow_rate: f64,
    /// Calls in that window (or probes).
    pub calls: u32,
    /// Path of the annotated function whose call caused it (`"operator"` for manual controls).
    pub function: &'a str,
    /// What caused it.
    pub trigger: Trigger,
    /// An open whose wait a counted failure's pushback lengthened ([`RetryAfter`](crate::RetryAfter),
    /// an HTTP `Retry-After`): the wait it opened for (at most `open_max`). `None`: the policy's wait.
    pub pushback: Option<std::time::Duration>,
}

/// What caused a transition: the rule that tripped, the recovery step, or an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Trigger {
    /// Closed → open: failures reached `failure_rate` of the window.
    FailureRate,
    /// Closed → open: slow calls reached `slow_rate` of the window.
    SlowRate,
    /// Closed → open: `consecutive` counted failures in a row.
    Consecutive,
    /// Closed → open: `failure_count` counted failures within the window.
    FailureCount,
    /// Open → half-open: the open wait is over and a call arrived.
    OpenWaitOver,
    /// Half-open → half-open: the probes did not report within `half_open_lease`; re-armed.
    LeaseExpired,
    /// Half-open → open: a probe failed (or a progressive phase reached the failure rate).
    ProbeFailed,
    /// Half-open → closed: every probe (or the last progressive phase) passed.
    ProbesPassed,
    /// Half-open → half-open: a progressive phase passed and the next one began.
    PhasePassed,
    /// `force_open`, `disable` or `reset` by an operator.
    Operator,
    /// A new policy was applied to the breaker.
    Reconfigured,
    /// Closed → open: the group's success-rate rule ejected the member (its success rate was
    /// below the group's mean by more than the policy's standard deviations).
    OutlierSuccessRate,
    /// Closed → open: the group's failure-percentage rule ejected the member.
    OutlierFailurePercentage,
    /// Closed → open on this replica only ("open here only"): a shared key with a
    /// [`quorum`](crate::Policy::quorum) whose own outcomes on this replica reached a rule while
    /// fewer replicas than the quorum failed; the shared circuit stays closed for the others.
    /// Its recovery (open → half-open → closed or open) is this replica's own too, with the
    /// usual triggers.
    HereOnly,
    /// Closed → open for every replica: as many replicas as the key's
    /// [`quorum`](crate::Policy::quorum) opened alone within the window (each one's own outcomes
    /// reached a rule).
    Quorum,
}

impl Trigger {
    /// Which rate rule `counts` reached under `policy`: the failure rate when it did, else the
    /// slow-call rate.
    pub(crate) fn rate_rule(policy: &crate::policy::Policy, counts: Counts) -> Trigger {
        let rate = policy.settings().failure_rate.map_or(0, u64::from);
        if rate != 0 && u64::from(counts.failures) * 100 >= rate * u64::from(counts.calls) {
            Trigger::FailureRate
        } else {
            Trigger::SlowRate
        }
    }

    /// The rule a recorded outcome (`failure`: it failed) trips under `policy`, with the window's
    /// `counts` after it and `run` counted failures in a row, checked in the breaker's order:
    /// `consecutive`, `failure_count` (the window's failures, whatever the rate and `min_calls`),
    /// then the rates. `None` when none does. The breaker, a replica open alone and a shadow
    /// policy judge by it.
    #[inline]
    pub(crate) fn tripped(
        policy: &crate::policy::Policy,
        counts: Counts,
        failure: bool,
        run: u32,
    ) -> Option<Trigger> {
        let settings = policy.settings();
        if settings.consecutive.is_some_and(|n| n != 0 && run >= n) {
            Some(Trigger::Consecutive)
        } else if failure && settings.failure_count.is_some_and(|n| counts.failures >= n) {
            Some(Trigger::FailureCount)
        } else if counts.trips(policy) {
            Some(Trigger::rate_rule(policy, counts))
        } else {
            None
        }
    }

    /// Lowercase name used in events (`failure_rate`, `probe_failed`, `operator`, …).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Trigger::FailureRate => "failure_rate",
            Trigger::SlowRate => "slow_rate",
            Trigger::Consecutive => "consecutive",
            Trigger::FailureCount => "failure_count",
            Trigger::OpenWaitOver => "open_wait_over",
            Trigger::LeaseExpired => "lease_expired",
            Trigger::ProbeFailed => "probe_failed",
            Trigger::ProbesPassed => "probes_passed",
            Trigger::PhasePassed => "phase_passed",
            Trigger::Operator => "operator",
            Trigger::Reconfigured => "reconfigured",
            Trigger::OutlierSuccessRate => "outlier_success_rate",
            Trigger::OutlierFailurePercentage => "outlier_failure_percentage",
            Trigger::HereOnly => "here_only",
            Trigger::Quorum => "quorum",
        }
    }
}

impl std::fmt::Display for Trigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

type Hook = Arc<dyn Fn(&Transition<'_>) + Send + Sync>;

/// The hooks of one registry, shared with its breakers.
#[derive(Default)]
pub(crate) struct Hooks {
    any: AtomicBool,
    list: RwLock<Vec<Hook>>,
}

impl Hooks {
    pub(crate) fn add(&self, hook: Hook) {
        self.list
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(hook);
        self.any.store(true, Ordering::Release);
    }

    pub(crate) fn call(&self, transition: &Transition<'_>) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        // Copy the list out so no lock is held while user code runs.
        let hooks: Vec<Hook> = self.list.read().unwrap_or_else(|p| p.into_inner()).clone();
        for hook in hooks {
            // A hook is user code: its panic must not unwind into the breaker (a permit being
            // settled, an admission half done) nor out of a permit dropped during another panic.
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| hook(transition))) {
                report_hook_panic(transition, payload.as_ref());
            }
        }
    }
}

/// Announces a transition: its `tracing` event, its metrics and the hooks. Nothing that user code
/// does here (a hook or a `tracing` subscriber that panics) unwinds into the caller: the transition
/// has been made and the caller's permit must still be settled.
#[cold]
#[allow(clippy::too_many_arguments)] // one argument per field of the event
pub(crate) fn emit(
    hooks: &Hooks,
    key: &str,
    from: State,
    to: State,
    counts: Counts,
    function: &'static str,
    trigger: Trigger,
    shared: bool,
    pushback: Option<std::time::Duration>,
) {
    let announce = || {
        announce(
            hooks, key, from, to, counts, function, trigger, shared, pushback,
        )
    };
    if let Err(payload) = catch_unwind(AssertUnwindSafe(announce)) {
        // A subscriber panicked; a second panic while reporting it is dropped too.
        let message = panic_message(payload.as_ref()).to_owned();
        let _ = catch_unwind(
            || tracing::error!(target: "fusebox", key, panic = message, "a panic while reporting a transition was caught; the transition stands"),
        );
    }
}

/// The `tracing` event, metrics and hooks of one transition.
#[allow(clippy::too_many_arguments)] // one argument per field of the event
fn announce(
    hooks: &Hooks,
    key: &str,
    from: State,
    to: State,
    counts: Counts,
    function: &str,
    trigger: Trigger,
    shared: bool,
    pushback: Option<std::time::Duration>,
) {
    let rule = trigger.as_str();
    // Present only on an open that pushback lengthened.
    let pushback_secs = pushback.map(|wait| wait.as_secs_f64());
    let failure_rate = counts.failure_rate();
    let slow_rate = counts.slow_rate();
    let calls = counts.calls;
    let (from_name, to_name) = (from.as_str(), to.as_str());
    match to {
        State::Open | State::ForcedOpen => tracing::warn!(
            target: "fusebox",
            event = "circuit_opened",
            key, from = from_name, to = to_name, failure_rate, slow_rate, calls, function, trigger = rule, shared, pushback_secs,
            "circuit_opened"
        ),
        State::HalfOpen => tracing::info!(
            target: "fusebox",
            event = "circuit_half_open",
            key, from = from_name, to = to_name, failure_rate, slow_rate, calls, function, trigger = rule, shared,
            "circuit_half_open"
        ),
        State::Closed | State::Disabled => tracing::info!(
            target: "fusebox",
            event = "circuit_closed",
            key, from = from_name, to = to_name, failure_rate, slow_rate, calls, function, trigger = rule, shared,
            "circuit_closed"
        ),
    }
    #[cfg(feature = "metrics")]
    crate::observe::Meters::transition(key, from, to);
    hooks.call(&Transition {
        key,
        from,
        to,
        failure_rate,
        slow_rate,
        calls,
        function,
        trigger,
        pushback,
    });
}

/// The text of a panic payload (`panic!` with a literal or a formatted message), when it has one.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "a non-string payload"
    }
}

#[cold]
fn report_hook_panic(transition: &Transition<'_>, payload: &(dyn std::any::Any + Send)) {
    let message = panic_message(payload);
    tracing::error!(
        target: "fusebox",
        event = "hook_panicked",
        key = transition.key,
        from = transition.from.as_str(),
        to = transition.to.as_str(),
        panic = message,
        "an `on_transition` hook panicked; the transition stands and the breaker keeps working; catch the panic inside the hook",
    );
}

/// `metrics` crate instruments of one breaker (feature `metrics`); the names, labels and values
/// are documented in [`crate::metrics`].
///
/// Handles are registered when the breaker is created, so install the recorder before first use.
#[cfg(feature = "metrics")]
pub(crate) struct Meters {
    success: ::metrics::Counter,
    failure: ::metrics::Counter,
    ignored: ::metrics::Counter,
    rejected: ::metrics::Counter,
    shadow_rejected: ::metrics::Counter,
    throttled: ::metrics::Counter,
}

#[cfg(feature = "metrics")]
impl Meters {
    pub(crate) fn new(key: &str) -> Self {
        metrics::late::registered(key);
        let counter = |outcome: &'static str| ::metrics::counter!(crate::observe::metrics::CALLS_TOTAL, "key" => key.to_owned(), "outcome" => outcome);
        ::metrics::gauge!(crate::observe::metrics::STATE, "key" => key.to_owned()).set(0.0);
        Meters {
            success: counter("success"),
            failure: counter("failure"),
            ignored: counter("ignored"),
            rejected: counter("rejected"),
            shadow_rejected: ::metrics::counter!(crate::observe::metrics::SHADOW_REJECTED_TOTAL, "key" => key.to_owned()),
            throttled: ::metrics::counter!(crate::observe::metrics::THROTTLED_TOTAL, "key" => key.to_owned()),
        }
    }

    #[inline]
    pub(crate) fn call(&self, success: bool, failure: bool) {
        metrics::late::check();
        match (success, failure) {
            (true, _) => self.success.increment(1),
            (_, true) => self.failure.increment(1),
            _ => self.ignored.increment(1),
        }
    }

    #[inline]
    pub(crate) fn rejected(&self) {
        metrics::late::check();
        self.rejected.increment(1);
    }

    /// A call adaptive throttling rejected (counted as rejected too).
    #[inline]
    pub(crate) fn throttled(&self) {
        self.throttled.increment(1);
    }

    /// A call that metrics-only mode admitted instead of rejecting.
    #[inline]
    pub(crate) fn shadow_rejected(&self) {
        self.shadow_rejected.increment(1);
    }

    pub(crate) fn transition(key: &str, from: State, to: State) {
        ::metrics::counter!(
            crate::observe::metrics::TRANSITIONS_TOTAL,
            "key" => key.to_owned(), "from" => from.as_str(), "to" => to.as_str()
        )
        .increment(1);
        Self::state(key, to);
    }

    /// Adds `outcomes` to `fusebox_store_dropped_total{key}`: outcomes of a shared key its store
    /// gave up recording (only a store reports it).
    #[cfg(feature = "store")]
    pub(crate) fn dropped(key: &str, outcomes: u64) {
        ::metrics::counter!(crate::observe::metrics::STORE_DROPPED_TOTAL, "key" => key.to_owned())
            .increment(outcomes);
    }

    /// Sets `fusebox_state{key}` to `state` (a transition, or a shared key's local breaker
    /// following the state the store reported).
    pub(crate) fn state(key: &str, state: State) {
        let code = crate::observe::metrics::state_value(state);
        ::metrics::gauge!(crate::observe::metrics::STATE, "key" => key.to_owned()).set(code);
    }
}
