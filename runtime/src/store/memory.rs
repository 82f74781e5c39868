//! [`MemoryStore`]: the store seam implemented in one process, so a test runs several replicas
//! (several registries sharing one store) without Redis, with injectable delay and loss.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use super::{
    Admission, BoxFuture, CircuitRef, Counts, Link, Outcome, SharedKey, SharedTransition, Site,
    Store, Ticket, WeakCircuit,
};
use crate::breaker::{Breaker, OwnedPermit};
use crate::clock::Clock;
use crate::observe::Trigger;
use crate::registry::Registry;
use crate::state::{State, Verdict};

/// A store that keeps shared circuits in this process: every registry that
/// [shares](Registry::share) one `MemoryStore` (clones share it too) is a replica of the same
/// circuits. Made for tests of shared behaviour without Redis:
///
/// ```
/// use fusebox::{Policy, Registry, State};
/// use fusebox::store::MemoryStore;
///
/// let store = MemoryStore::new();
/// let (a, b) = (Registry::new(), Registry::new());
/// a.share(store.clone());
/// b.share(store.clone());
/// let policy = Policy::new().consecutive(2);
/// let on_a = a.breaker("payment", policy).unwrap();
/// let on_b = b.breaker("payment", policy).unwrap();
/// on_a.try_acquire().unwrap().failure();
/// on_a.try_acquire().unwrap().failure(); // replica A trips the shared circuit
/// assert!(on_b.try_acquire().is_err()); // replica B learns it on its next call
/// assert_eq!(on_b.state(), State::Open);
/// ```
///
/// **How.** Each key's shared circuit is a breaker of the store's own registry, on the store's
/// clock ([`MemoryStore::with_clock`]), created with the policy of the first replica that links
/// the key. A replica's call asks it for admission and reports its outcome to it, as a Redis
/// replica asks the script: the store admits, rejects, or grants a half-open probe; an outcome is
/// recorded only under the generation of the shared state it was admitted in (every transition
/// starts a new one), so an outcome that arrives after the circuit moved changes nothing. After
/// every answer the replica's local breaker follows the shared state and shared window, and the
/// replica whose call committed a transition announces it (its `tracing` event and hooks, with
/// `shared = true`); the others follow silently.
///
/// **Delay and loss.** [`MemoryStore::set_delay`] delays every admission an `async` caller awaits
/// and every report (recorded by a task after the delay; callers await the recording, as in
/// Redis's strict mode); a caller that cannot await (a sync function, `try_acquire`) is answered
/// at once. [`MemoryStore::set_loss`] loses that share of the store's calls, drawn from a
/// generator with a fixed seed (the same calls lose the same way on every run; `1.0` is a
/// partition): a lost admission is decided by the replica's local breaker, a lost report is
/// recorded on it, and the replica's snapshots say `degraded` until the store answers again.
///
/// **Replicas' names.** Each handle is one replica: [`MemoryStore::new`] names its handle
/// `memory-1`, and every clone takes the next number (`memory-2`, …), so registries that each
/// share a clone are told apart in the last transition their snapshots show
/// ([`LastTransition::replica`](crate::LastTransition::replica)): every replica's snapshot
/// names the rule, the counts, the instant and the replica of the shared circuit's last
/// transition ([`MemoryStore::replica`]).
pub struct MemoryStore {
    inner: Arc<Inner>,
    replica: Arc<str>,
}

impl Clone for MemoryStore {
    /// Another replica's handle on the same store, with the next name.
    fn clone(&self) -> Self {
        MemoryStore {
            inner: Arc::clone(&self.inner),
            replica: self.inner.next_replica(),
        }
    }
}

/// The shared circuits, and the faults injected into every call to them.
struct Inner {
    registry: Registry,
    keys: Mutex<HashMap<String, Arc<KeyState>>>,
    /// The delay of every call, in nanoseconds.
    delay: AtomicU64,
    /// The share of calls lost (an `f64`'s bits).
    loss: AtomicU64,
    draws: Mutex<fastrand::Rng>,
    /// Handles made so far (each names a replica).
    handles: AtomicU64,
}

/// One key's shared circuit.
struct KeyState {
    breaker: Breaker,
    /// Bumped by every transition of the shared circuit.
    generation: AtomicU64,
    /// The last transition, as a replica that committed it announces it.
    last: Mutex<Option<(State, State, Counts, Trigger)>>,
    /// The generation the last transition started, and the replica whose call committed it.
    committed_by: Mutex<Option<(u64, Arc<str>)>>,
    /// The half-open probes granted and not yet reported, with the generation that granted them.
    probes: Mutex<Vec<(u64, OwnedPermit)>>,
}

/// A replica's side of one shared key.
struct MemoryKey(Arc<Replica>);

/// What a replica keeps of a key it shares.
struct Replica {
    store: Arc<Inner>,
    /// The name of the replica (its handle's).
    name: Arc<str>,
    /// The generation of the last transition told to the replica's breaker (+ 1; 0: none).
    told: AtomicU64,
    state: Arc<KeyState>,
    circuit: WeakCircuit,
    degraded: AtomicBool,
    pending: AtomicU64,
    applied: AtomicU64,
    done: tokio::sync::Notify,
}

/// The seed of the loss draws.
const LOSS_SEED: u64 = 0x5eed;

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// A store whose circuits run on the monotonic clock.
    #[must_use]
    pub fn new() -> Self {
        Self::build(Registry::new())
    }

    /// A store whose circuits run on `clock`: give it the [`FakeClock`](crate::clock::FakeClock)
    /// the replicas' registries read, so open waits end for all of them at once.
    #[must_use]
    pub fn with_clock(clock: impl Clock) -> Self {
        Self::build(Registry::with_clock(clock))
    }

    fn build(registry: Registry) -> Self {
        let inner = Arc::new_cyclic(|me: &Weak<Inner>| {
            let me = me.clone();
            registry.on_transition(move |transition| {
                let Some(inner) = me.upgrade() else { return };
                let Some(state) = inner.key(transition.key) else {
                    return;
                };
                let failures = f64::from(transition.calls) * transition.failure_rate / 100.0;
                let slow = f64::from(transition.calls) * transition.slow_rate / 100.0;
                let counts = Counts::new(transition.calls, failures.round() as u32, slow as u32);
                let last = (transition.from, transition.to, counts, transition.trigger);
                *state.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(last);
                state.generation.fetch_add(1, Ordering::AcqRel);
            });
            Inner {
                registry,
                keys: Mutex::default(),
                delay: AtomicU64::new(0),
                loss: AtomicU64::new(0f64.to_bits()),
                draws: Mutex::new(fastrand::Rng::with_seed(LOSS_SEED)),
                handles: AtomicU64::new(0),
            }
        });
        let replica = inner.next_replica();
        MemoryStore { inner, replica }
    }

    /// The name of this handle's replica (`memory-1`, `memory-2`, …), as snapshots' last
    /// transitions name it.
    #[must_use]
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// Delays every call to the store by `delay` from now on (`Duration::ZERO`, the default,
    /// answers at once).
    pub fn set_delay(&self, delay: Duration) {
        let nanos = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
        self.inner.delay.store(nanos, Ordering::Release);
    }

    /// Loses `ratio` of the calls to the store from now on (clamped to `0.0..=1.0`; `1.0` cuts
    /// every replica off, `0.0`, the default, loses nothing).
    pub fn set_loss(&self, ratio: f64) {
        let ratio = if ratio.is_nan() {
            0.0
        } else {
            ratio.clamp(0.0, 1.0)
        };
        self.inner.loss.store(ratio.to_bits(), Ordering::Release);
    }

    /// The shared state of `key` (`None` before a replica linked it).
    #[must_use]
    pub fn state(&self, key: &str) -> Option<State> {
        self.inner.key(key).map(|state| state.breaker.state())
    }
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("replica", &self.replica)
            .field("keys", &self.inner.registry.len())
            .field("delay", &self.inner.delay())
            .finish_non_exhaustive()
    }
}

impl Inner {
    /// The name of the next handle's replica.
    fn next_replica(&self) -> Arc<str> {
        let n = self.handles.fetch_add(1, Ordering::AcqRel) + 1;
        Arc::from(format!("memory-{n}"))
    }

    fn key(&self, key: &str) -> Option<Arc<KeyState>> {
        let keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        keys.get(key).cloned()
    }

    fn delay(&self) -> Duration {
        Duration::from_nanos(self.delay.load(Ordering::Acquire))
    }

    /// True when this call to the store is lost.
    fn lost(&self) -> bool {
        let ratio = f64::from_bits(self.loss.load(Ordering::Acquire));
        ratio > 0.0
            && self
                .draws
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .f64()
                < ratio
    }
}

impl Store for MemoryStore {
    fn link(&self, circuit: WeakCircuit) -> Link {
        if circuit.policy().settings().quorum.is_some() {
            tracing::warn!(
                target: "fusebox",
                key = circuit.key(),
                field = "quorum",
                "a breaker sets a `quorum`, which the memory store does not count; it stays local (share it through fusebox-redis, or leave `quorum` out)"
            );
            return Link::Unshareable;
        }
        let state = {
            let mut keys = self
                .inner
                .keys
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let state = keys.entry(circuit.key().to_owned()).or_insert_with(|| {
                Arc::new(KeyState {
                    breaker: self.inner.registry.fixed(circuit.key(), *circuit.policy()),
                    generation: AtomicU64::new(0),
                    last: Mutex::new(None),
                    committed_by: Mutex::new(None),
                    probes: Mutex::new(Vec::new()),
                })
            });
            Arc::clone(state)
        };
        Link::Shared(Box::new(MemoryKey(Arc::new(Replica {
            store: Arc::clone(&self.inner),
            name: Arc::clone(&self.replica),
            told: AtomicU64::new(0),
            state,
            circuit,
            degraded: AtomicBool::new(false),
            pending: AtomicU64::new(0),
            applied: AtomicU64::new(0),
            done: tokio::sync::Notify::new(),
        }))))
    }
}

impl Replica {
    /// True when this call reaches the store (it is not lost); the replica says `degraded` until
    /// one does.
    fn reaches_store(&self) -> bool {
        let lost = self.store.lost();
        self.degraded.store(lost, Ordering::Release);
        !lost
    }

    /// The shared circuit's answer to an admission, the replica's breaker following it.
    fn decide(&self, circuit: CircuitRef<'_>, site: Site) -> Admission {
        if !self.reaches_store() {
            return Admission::Local;
        }
        let before = self.state.generation.load(Ordering::Acquire);
        let mut permit = self.state.breaker.admit(site.0);
        let generation = self.state.generation.load(Ordering::Acquire);
        let answer = if let Some(error) = permit.rejection() {
            Admission::rejected(error.reason(), error.retry_after())
        } else {
            if permit.is_probe() {
                self.state.probes().push((generation, permit));
            } else {
                // A closed circuit's call is recorded when its report arrives.
                permit.abandon();
            }
            Admission::Admitted(Ticket::generation(generation))
        };
        self.follow(circuit, site, before);
        answer
    }

    /// Records `outcome` of a call admitted with `ticket` on the shared circuit, unless the
    /// circuit moved since (another generation).
    fn record(&self, ticket: Ticket, site: Site, outcome: Outcome) {
        let circuit = self.circuit.upgrade();
        if !self.reaches_store() {
            if let Some(circuit) = &circuit {
                circuit.get().record_locally(outcome.verdict, site);
            }
            return;
        }
        let before = self.state.generation.load(Ordering::Acquire);
        let current = Ticket::generation(before);
        let shared = self.state.breaker.state();
        match ticket.admitted_under() {
            Some(_) if ticket != current => return,
            None if !matches!(shared, State::Closed | State::Disabled) => return,
            _ => {}
        }
        let probe = self.state.take_probe(before);
        match (probe, outcome.verdict) {
            (Some(mut probe), verdict) => probe.settle(verdict),
            (None, Verdict::Ignored) => {}
            (None, verdict) => {
                let mut permit = self.state.breaker.admit(site.0);
                if !permit.is_rejected() {
                    permit.settle(verdict);
                }
            }
        }
        if let Some(circuit) = &circuit {
            self.follow(circuit.get(), site, before);
        }
    }

    /// Makes the replica's breaker follow the shared circuit, and announces the transition its
    /// own call committed (the generation moved past `before`), or keeps the one another
    /// replica committed as its breaker's last transition.
    fn follow(&self, circuit: CircuitRef<'_>, site: Site, before: u64) {
        let snapshot = self.state.breaker.snapshot();
        circuit.observe_window(snapshot.calls, snapshot.failures);
        let generation = self.state.generation.load(Ordering::Acquire);
        if generation == before {
            self.tell(circuit, &snapshot, generation);
        } else {
            *self.state.committed_by() = Some((generation, Arc::clone(&self.name)));
            let last = *self
                .state
                .last
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some((from, to, counts, trigger)) = last {
                circuit.announce(from, to, counts, site, Some(trigger));
            }
        }
        let open_remaining = snapshot.retry_after.unwrap_or_default();
        circuit.follow(snapshot.state, open_remaining, false);
    }

    /// Keeps the shared circuit's last transition (of `generation`, from its `snapshot`) as the
    /// breaker's, when another replica committed it and the breaker was not told yet.
    fn tell(&self, circuit: CircuitRef<'_>, snapshot: &crate::Snapshot, generation: u64) {
        let Some((committed, by)) = self.state.committed_by().clone() else {
            return;
        };
        let Some(last) = &snapshot.last_transition else {
            return;
        };
        if committed != generation
            || by == self.name
            || self.told.swap(generation + 1, Ordering::AcqRel) == generation + 1
        {
            return;
        }
        circuit.follow_transition(SharedTransition::new(
            last.from,
            last.to,
            last.trigger,
            Counts::new(last.calls, last.failures, last.slow),
            last.elapsed,
            by.to_string(),
        ));
    }

    fn report_done(&self) {
        self.applied.fetch_add(1, Ordering::AcqRel);
        self.done.notify_waiters();
    }
}

impl KeyState {
    fn committed_by(&self) -> std::sync::MutexGuard<'_, Option<(u64, Arc<str>)>> {
        self.committed_by
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn probes(&self) -> std::sync::MutexGuard<'_, Vec<(u64, OwnedPermit)>> {
        self.probes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A probe granted under `generation`; probes of older generations (the circuit moved before
    /// they were reported) are given up.
    fn take_probe(&self, generation: u64) -> Option<OwnedPermit> {
        let mut probes = self.probes();
        probes.retain_mut(|(granted, probe)| {
            if *granted == generation {
                return true;
            }
            probe.abandon();
            false
        });
        probes.pop().map(|(_, probe)| probe)
    }
}

impl SharedKey for MemoryKey {
    fn admit_now(&self, circuit: CircuitRef<'_>, site: Site, can_wait: bool) -> Option<Admission> {
        // An `async` caller awaits the delay; one that cannot await is answered at once.
        if can_wait && !self.0.store.delay().is_zero() {
            return None;
        }
        Some(self.0.decide(circuit, site))
    }

    fn admit<'a>(&'a self, circuit: CircuitRef<'a>, site: Site) -> BoxFuture<'a, Admission> {
        Box::pin(async move {
            tokio::time::sleep(self.0.store.delay()).await;
            self.0.decide(circuit, site)
        })
    }

    fn report(&self, ticket: Ticket, site: Site, outcome: Outcome) {
        let replica = Arc::clone(&self.0);
        replica.pending.fetch_add(1, Ordering::AcqRel);
        let delay = replica.store.delay();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if !delay.is_zero() => {
                runtime.spawn(async move {
                    tokio::time::sleep(delay).await;
                    replica.record(ticket, site, outcome);
                    replica.report_done();
                });
            }
            _ => {
                replica.record(ticket, site, outcome);
                replica.report_done();
            }
        }
    }

    fn awaits_recording(&self) -> bool {
        !self.0.store.delay().is_zero()
    }

    fn flush(&self) -> BoxFuture<'_, ()> {
        let replica = &self.0;
        let target = replica.pending.load(Ordering::Acquire);
        Box::pin(async move {
            loop {
                let notified = replica.done.notified();
                if replica.applied.load(Ordering::Acquire) >= target {
                    return;
                }
                notified.await;
            }
        })
    }

    fn refresh(&self, circuit: CircuitRef<'_>) {
        let replica = &self.0;
        if !replica.reaches_store() {
            return;
        }
        let generation = replica.state.generation.load(Ordering::Acquire);
        replica.follow(circuit, Site::new(&"snapshot"), generation);
    }

    fn degraded(&self) -> bool {
        self.0.degraded.load(Ordering::Acquire)
    }

    fn replica(&self) -> Option<String> {
        Some(self.0.name.to_string())
    }
}
