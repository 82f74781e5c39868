//! Point-in-time views of a breaker: [`Snapshot`] and [`LastTransition`].

use super::*;

impl Core {
    pub(super) fn last_recorded(&self) -> Option<Recorded> {
        *self.last.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        let word = self.load();
        let now = self.now();
        let counts = self.window.counts(now);
        let state = word.state();
        Snapshot {
            key: self.key.clone(),
            state,
            calls: counts.calls,
            failures: counts.failures,
            slow: counts.slow,
            failure_rate: counts.failure_rate(),
            slow_rate: counts.slow_rate(),
            consecutive_failures: self.run.load(Ordering::Acquire),
            rejected: self.counters.rejected.load(Ordering::Relaxed),
            retry_after: (state == State::Open)
                .then(|| word.open_remaining(now, self.time_of(word, now))),
            probes_in_flight: match (state, self.policy.recovery) {
                (State::HalfOpen, Recovery::Probes) => word.issued().saturating_sub(word.passed()),
                _ => 0,
            },
            phase: match (state, self.policy.recovery) {
                (State::HalfOpen, Recovery::Progressive { .. }) => Some(word.passed()),
                _ => None,
            },
            reopens: self.reopens.load(Ordering::Acquire),
            in_flight: self.counters.in_flight.load(Ordering::Acquire),
            metrics_only: self.metrics_only.load(Ordering::Acquire),
            policy: self.policy,
            last_transition: self.last_recorded().map(|r| LastTransition {
                from: r.from,
                to: r.to,
                trigger: r.trigger,
                elapsed: Duration::from_nanos(now.saturating_sub(r.at)),
                failure_rate: r.counts.failure_rate(),
                slow_rate: r.counts.slow_rate(),
                calls: r.counts.calls,
                failures: r.counts.failures,
                slow: r.counts.slow,
                function: r.function,
            }),
        }
    }
}

/// A point-in-time view of one breaker.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Snapshot {
    /// The breaker's key.
    pub key: Key,
    /// Its state.
    pub state: State,
    /// Outcomes in the current window.
    pub calls: u32,
    /// Failures among them.
    pub failures: u32,
    /// Slow calls among them.
    pub slow: u32,
    /// `failures / calls` in percent (0 when empty).
    pub failure_rate: f64,
    /// `slow / calls` in percent (0 when empty).
    pub slow_rate: f64,
    /// Counted failures in a row (kept when the policy sets `consecutive`).
    pub consecutive_failures: u32,
    /// Calls refused since the breaker was created (in metrics-only mode: calls it would have refused).
    pub rejected: u64,
    /// When open: time until the next probe is admitted.
    pub retry_after: Option<Duration>,
    /// When half-open with probes: probes admitted and not yet reported.
    pub probes_in_flight: u32,
    /// When recovering progressively: the current phase (1-based).
    pub phase: Option<u32>,
    /// Failed recoveries in a row (the exponent of `open_backoff`).
    pub reopens: u32,
    /// Calls in flight, when the policy sets `max_concurrent`.
    pub in_flight: u32,
    /// True in metrics-only mode.
    pub metrics_only: bool,
    /// The policy it runs.
    pub policy: Policy,
    /// The last state change, with what caused it and the counts that decided it (`None` before
    /// the first). A snapshot taken right after the circuit opens shows an empty window; this says
    /// why it opened.
    pub last_transition: Option<LastTransition>,
}

/// The last state change of a breaker, as kept in its [`Snapshot`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LastTransition {
    /// The state it left.
    pub from: State,
    /// The state it entered.
    pub to: State,
    /// What caused it: the rule that tripped, the recovery step, or an operator.
    pub trigger: Trigger,
    /// Time since it happened, on the registry's clock.
    pub elapsed: Duration,
    /// Failure rate of the window (or of the probes) that decided, in percent.
    pub failure_rate: f64,
    /// Slow-call rate of that window, in percent.
    pub slow_rate: f64,
    /// Calls in that window (or probes).
    pub calls: u32,
    /// Failures among them.
    pub failures: u32,
    /// Slow calls among them.
    pub slow: u32,
    /// Path of the annotated function whose call caused it (`"operator"` for manual controls).
    pub function: &'static str,
}
