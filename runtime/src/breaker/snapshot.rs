//! Point-in-time views of a breaker: [`Snapshot`] and [`LastTransition`], and what a snapshot
//! says of a key shared across replicas ([`Sharing`], [`SharedWindow`]).

use super::*;

impl Circuit {
    pub(super) fn last_transition_record(&self) -> Option<TransitionRecord> {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        #[cfg(feature = "store")]
        self.refresh_shared();
        let word = self.load();
        let now = self.now();
        let counts = self.window.counts(now);
        let state = word.state();
        #[cfg(feature = "store")]
        let sharing = self.sharing(now);
        #[cfg(not(feature = "store"))]
        let sharing = SharingView::default();
        // A key with a quorum open on this replica alone shows this replica's view.
        #[cfg(feature = "store")]
        let here = (state == State::Closed)
            .then(|| self.here()?.view(now))
            .flatten()
            .map(|view| (view.state, view.retry_after));
        #[cfg(not(feature = "store"))]
        let here: Option<(State, Option<Duration>)> = None;
        let (state, here_wait) = match here {
            Some((state, wait)) => (state, Some(wait)),
            None => (state, None),
        };
        let sharing = SharingView {
            here_only: here.is_some(),
            ..sharing
        };
        Snapshot {
            sharing,
            key: self.key.clone(),
            state,
            calls: counts.calls,
            failures: counts.failures,
            slow: counts.slow,
            failure_rate: counts.failure_rate(),
            slow_rate: counts.slow_rate(),
            consecutive_failures: self.run.load(Ordering::Acquire),
            rejected: self.counters.rejected.load(Ordering::Relaxed),
            throttled: self.counters.throttled.load(Ordering::Relaxed),
            retries_rejected: self.counters.retries_rejected.load(Ordering::Relaxed),
            retry_budget_balance: self.retry_balance(),
            retry_after: here_wait.unwrap_or_else(|| {
                (state == State::Open).then(|| word.open_remaining(now, self.time_of(word, now)))
            }),
            probes_in_flight: match (state, self.policy.settings().recovery) {
                (State::HalfOpen, Recovery::Probes) => word.issued().saturating_sub(word.passed()),
                _ => 0,
            },
            phase: match (state, self.policy.settings().recovery) {
                (State::HalfOpen, Recovery::Progressive { .. }) => Some(word.passed()),
                _ => None,
            },
            reopens: self.reopens.load(Ordering::Acquire),
            in_flight: self.counters.in_flight.load(Ordering::Acquire),
            concurrency_limit: self
                .policy
                .settings()
                .max_concurrent
                .map(|concurrency| self.concurrency_limit(concurrency)),
            metrics_only: self.metrics_only.load(Ordering::Acquire),
            hedges: self.hedging.get().map(|hedging| hedging.counts(now)),
            policy: self.policy,
            shadows: self
                .shadows
                .as_ref()
                .map_or_else(Vec::new, |shadows| shadows.snapshots(now)),
            last_transition: self.last_transition_record().map(|r| LastTransition {
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
                replica: r.replica.as_deref().map(str::to_owned),
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
    /// Calls rejected since the breaker was created, and in metrics-only mode the calls it would
    /// have rejected and ran instead (the metrics count those apart, as
    /// `fusebox_shadow_rejected_total`: see [`crate::metrics`]).
    pub rejected: u64,
    /// Calls adaptive throttling (`throttle`) rejected since the breaker was created, with the
    /// reason [`Reason::Throttled`]; they are counted in `rejected` too.
    pub throttled: u64,
    /// Retries the retry budget rejected since the breaker was created (0 without
    /// [`Policy::retry_budget`]).
    pub retries_rejected: u64,
    /// With [`Policy::retry_budget`]: the retries the budget allows now.
    pub retry_budget_balance: Option<u64>,
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
    /// The bulkhead's limit on calls in flight: `max_concurrent` when fixed, an adaptive
    /// one's current value (`max_concurrent = "adaptive…"`), `None` without a bulkhead.
    pub concurrency_limit: Option<u32>,
    /// True in metrics-only mode.
    pub metrics_only: bool,
    /// The key's hedged calls (`hedge = …`): hedges sent and won, the learned delay; `None`
    /// until the first hedged call.
    pub hedges: Option<crate::load::hedge::Hedges>,
    /// The policy it runs.
    pub policy: Policy,
    /// What each of its shadow policies ([`Policy::shadow`]) would have done so far, in the
    /// order the policy names them; empty without shadows.
    pub shadows: Vec<crate::shadow::ShadowSnapshot>,
    /// The last state change, with what caused it and the counts that decided it (`None` before
    /// the first). A snapshot taken right after the circuit opens shows an empty window; this says
    /// why it opened.
    pub last_transition: Option<LastTransition>,
    /// How the key is shared across replicas (see [`Snapshot::sharing`]).
    sharing: SharingView,
}

/// What a snapshot says of a key's sharing (see the getters of [`Snapshot`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct SharingView {
    pub(crate) sharing: Sharing,
    pub(crate) window: Option<SharedWindow>,
    pub(crate) degraded: bool,
    pub(crate) replica_calls: u64,
    pub(crate) replica_failures: u64,
    pub(crate) here_only: bool,
}

/// How a breaker's state is kept across replicas ([`Snapshot::sharing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Sharing {
    /// In this process only: the registry shares no store, or the key is kept local on purpose
    /// ([`Policy::shared`](crate::Policy::shared)`(false)`, a store's `local_key`).
    #[default]
    Local,
    /// One circuit across the replicas sharing the registry's store (feature `store`, [`Registry::share`](crate::Registry::share)).
    Shared,
    /// The registry shares its keys, but this key's policy cannot be shared (a time window the
    /// store does not support), so it runs in this process only; an ERROR event named the key
    /// when its breaker was created.
    Unshareable,
}

/// A shared key's window as the store's last answer to this replica reported it
/// ([`Snapshot::shared_window`]): every replica's outcomes, where a snapshot's own
/// [`calls`](Snapshot::calls) are this replica's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedWindow {
    pub(crate) calls: u32,
    pub(crate) failures: u32,
    pub(crate) age: Duration,
}

impl SharedWindow {
    /// Outcomes in the shared window (all replicas), as of the store's last answer. An open or
    /// half-open circuit starts an empty window: 0 there.
    #[must_use]
    pub fn calls(&self) -> u32 {
        self.calls
    }

    /// Failures among them.
    #[must_use]
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// `failures / calls` in percent (0 when empty).
    #[must_use]
    pub fn failure_rate(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            f64::from(self.failures) * 100.0 / f64::from(self.calls)
        }
    }

    /// Time since that answer, on the registry's clock: how stale these counts may be (other
    /// replicas' calls since are not in them).
    #[must_use]
    pub fn age(&self) -> Duration {
        self.age
    }
}

impl Snapshot {
    /// Whether this key is one circuit across replicas ([`Sharing::Shared`]), local
    /// ([`Sharing::Local`]), or should have been shared but could not be
    /// ([`Sharing::Unshareable`]).
    #[must_use]
    pub fn sharing(&self) -> Sharing {
        self.sharing.sharing
    }

    /// A shared key's window, every replica's outcomes, as the store's last answer to this
    /// replica reported it, with its age; `None` for a key that is not shared, or before the
    /// store first answered about it.
    ///
    /// On a shared key the snapshot's own fields describe this replica's local breaker, which
    /// mirrors the shared state: [`state`](Snapshot::state) is the shared state (open, closed,
    /// forced open, disabled as the store last reported it), while [`calls`](Snapshot::calls)
    /// and [`failures`](Snapshot::failures) hold only the outcomes recorded locally (calls made
    /// while the store did not answer); this replica's calls the store admitted are
    /// [`replica_calls`](Snapshot::replica_calls).
    #[must_use]
    pub fn shared_window(&self) -> Option<SharedWindow> {
        self.sharing.window
    }

    /// True while this replica's store does not answer: a shared key's calls degrade (per the
    /// store's `Degrade` setting) until it answers again. Always false on a key that is not shared.
    #[must_use]
    pub fn degraded(&self) -> bool {
        self.sharing.degraded
    }

    /// Outcomes (successes and failures) of this replica's calls on a shared key that were
    /// admitted under the shared state (by the store, or by this replica's view of it while the
    /// store did not answer), since the breaker was created (carried over a reconfiguration).
    /// Such a call whose report the store did not answer is also recorded on the local breaker,
    /// in [`calls`](Snapshot::calls), as is a call the local breaker admitted alone; cancelled
    /// calls and errors that do not count (ignored outcomes) are in neither. 0 on a key that is
    /// not shared.
    #[must_use]
    pub fn replica_calls(&self) -> u64 {
        self.sharing.replica_calls
    }

    /// True while this replica holds its calls alone on a shared key with a
    /// [`quorum`](crate::Policy::quorum) ("open here only"): its own outcomes reached the
    /// policy's rules, fewer replicas than the quorum failed, and the shared circuit stays closed
    /// for the others. [`state`](Snapshot::state) is then this replica's view (open, or
    /// half-open while its own probes run) and [`retry_after`](Snapshot::retry_after) its own
    /// wait. Always false on a key without a quorum.
    #[must_use]
    pub fn open_here_only(&self) -> bool {
        self.sharing.here_only
    }

    /// Failures among [`replica_calls`](Snapshot::replica_calls).
    #[must_use]
    pub fn replica_failures(&self) -> u64 {
        self.sharing.replica_failures
    }
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
    /// Path of the annotated function whose call caused it (`"operator"` for manual controls,
    /// `"another replica"` for a shared key's transition another replica committed).
    pub function: &'static str,
    /// On a shared key, the name of the replica that committed it in the store (`None` for a
    /// transition this breaker decided alone): every replica's snapshot names the replica that
    /// tripped the shared circuit, with its rule and counts.
    pub replica: Option<String>,
}
