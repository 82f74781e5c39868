//! What a store reaches of a shared breaker: its key and policy, its local state, and the ways
//! the store keeps that state in line with the shared one.

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{Counts, Site};
use crate::breaker::Circuit;
use crate::{Key, Policy, State, Trigger, Verdict};

/// A shared breaker, borrowed for one call into the store.
#[derive(Clone, Copy)]
pub struct CircuitRef<'a>(pub(crate) &'a Circuit);

/// A shared breaker, held: what a store keeps while it works for the breaker off the call path
/// (a queued report), so the breaker outlives that work.
#[derive(Clone)]
pub struct CircuitHandle(Arc<Circuit>);

/// A shared breaker as its key's side of the store keeps it ([`Store::link`](super::Store::link)):
/// it does not keep the breaker alive (the breaker holds the key's side), and it gives the key
/// and policy even while the breaker is being built.
#[derive(Clone)]
pub struct WeakCircuit {
    circuit: Weak<Circuit>,
    key: Key,
    policy: Policy,
}

impl WeakCircuit {
    pub(crate) fn new(circuit: Weak<Circuit>, key: Key, policy: Policy) -> Self {
        WeakCircuit {
            circuit,
            key,
            policy,
        }
    }

    /// The breaker's key.
    #[must_use]
    pub fn key(&self) -> &str {
        self.key.as_str()
    }

    /// The breaker's policy.
    #[must_use]
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The breaker, while it lives.
    #[must_use]
    pub fn upgrade(&self) -> Option<CircuitHandle> {
        self.circuit.upgrade().map(CircuitHandle)
    }
}

impl CircuitHandle {
    /// The breaker, borrowed.
    #[must_use]
    pub fn get(&self) -> CircuitRef<'_> {
        CircuitRef(&self.0)
    }
}

impl std::fmt::Debug for CircuitRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CircuitRef")
            .field("key", &self.key())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for CircuitHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

impl std::fmt::Debug for WeakCircuit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeakCircuit")
            .field("key", &self.key())
            .finish_non_exhaustive()
    }
}

impl<'a> CircuitRef<'a> {
    /// The breaker's key.
    #[must_use]
    pub fn key(self) -> &'a str {
        self.0.key().as_str()
    }

    /// The breaker's policy.
    #[must_use]
    pub fn policy(self) -> &'a Policy {
        self.0.policy()
    }

    /// The local breaker's state: the shared state as the store last made it follow, or its own
    /// while the store does not answer.
    #[must_use]
    pub fn state(self) -> State {
        self.0.local_state()
    }

    /// What is left of the local breaker's open wait (zero unless it is open).
    #[must_use]
    pub fn open_remaining(self) -> Duration {
        Duration::from_nanos(self.0.open_remaining_nanos())
    }

    /// Makes the local breaker follow the shared `state` (open for `open_remaining` more), without
    /// an event: the transition was announced by whichever process committed it. A forced-open or
    /// disabled local breaker leaves that state for a shared closed one only when `release` (the
    /// store had forced it); a shared open state replaces it. The local breaker's own
    /// `open_jitter` spreads a shared open wait.
    pub fn follow(self, state: State, open_remaining: Duration, release: bool) {
        self.0.mirror(state, open_remaining, release);
    }

    /// Announces a transition this process committed in the store, with the counts that decided
    /// it and the rule that did (`None`: read off the states).
    pub fn announce(
        self,
        from: State,
        to: State,
        counts: Counts,
        site: Site,
        rule: Option<Trigger>,
    ) {
        self.0.emit_committed(from, to, counts.into(), site.0, rule);
    }

    /// Keeps the shared window the store's last answer gave (`calls`, `failures`), which
    /// snapshots show and adaptive throttling draws from.
    pub fn observe_window(self, calls: u32, failures: u32) {
        self.0.observe_shared_window(calls, failures);
    }

    /// Records `verdict` on the local breaker, as a call admitted under its current state (the
    /// store could not record it).
    pub fn record_locally(self, verdict: Verdict, site: Site) {
        self.0.report_locally(verdict, site.0);
    }
}
