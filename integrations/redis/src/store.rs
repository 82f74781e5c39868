//! The store: [`RedisStore`] (what a registry shares its breakers through, and the operator
//! calls `state` and `force`), and the two sides of fusebox's store seam: `RedisStore` links a
//! breaker's key, and the key's link is what the breaker calls. Its settings and connection are
//! in `builder.rs`.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use super::admit::{admit, flush};
use super::cached::cached_admit;
use super::link::{SharedKey, SharedStore};
use super::report::learn_later;
use super::report::{alone, report};
use super::script::{TIME_WINDOW, apply, call, counts_of, state_of, time_slice_ms};
use fusebox::State;
use fusebox::store::{
    Admission, BoxFuture, CircuitRef, Link, Outcome, SharedKey as Seam, Site, Ticket, WeakCircuit,
};
use fusebox::{Error, Reason};
use fusebox::{Policy, Recovery, Window};

/// A Redis store shared by the replicas of a service; hand it to [`Registry::share`](fusebox::Registry::share).
#[derive(Clone)]
pub struct RedisStore {
    pub(super) inner: Arc<SharedStore>,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.inner.prefix)
            .field("timeout", &self.inner.client.timeout())
            .finish()
    }
}

impl RedisStore {
    /// True while this store admits from its cached view: [`Mode::Cached`](super::Mode::Cached), the pub/sub
    /// subscription up and Redis answering. False in [`Mode::Strict`](super::Mode::Strict), and in cached mode while
    /// the subscription is down (calls are then strict until it is back).
    #[must_use]
    pub fn is_cached(&self) -> bool {
        let client = &self.inner.client;
        client.cached
            && client.subscribed.load(Ordering::Acquire)
            && client.healthy.load(Ordering::Acquire)
    }

    /// Outcomes this replica gave up sending: the store did not record them after every resend,
    /// or they overflowed the resend queue. With [`Degrade::Local`](super::Degrade::Local) they counted on this
    /// replica's local breaker only; with the other [`Degrade`](super::Degrade)s, nowhere. Each
    /// key's share is the metric `fusebox_store_dropped_total{key}` (fusebox's feature
    /// `metrics`). In cached and aggregated modes a key's successes wait summed, so what is given
    /// up past the resend queue is failures, slow calls and ignored outcomes first.
    #[must_use]
    pub fn dropped_reports(&self) -> u64 {
        self.inner.client.dropped.load(Ordering::Acquire)
    }

    /// Sends now what this replica has not sent yet (in [`Mode::Aggregated`](super::Mode::Aggregated), the outcomes summed
    /// since the last flush interval; in every mode, the reports queued), and waits until the
    /// store has recorded them, bounded by twice the store's timeout per key. For a graceful
    /// shutdown: outcomes summed and never sent are lost with the process.
    pub async fn flush(&self) {
        let links: Vec<Arc<SharedKey>> = {
            let links = self
                .inner
                .client
                .links
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            links
                .values()
                .flatten()
                .filter_map(std::sync::Weak::upgrade)
                .collect()
        };
        let Some(first) = links.first() else {
            return;
        };
        super::report::send_flush_now(first);
        for link in &links {
            super::admit::flush(link).await;
        }
    }

    /// This replica's id in the store: the name a shared key's last transition gives the
    /// replica that committed it ([`LastTransition::replica`](fusebox::LastTransition::replica)),
    /// on every replica's snapshot. Drawn at random when the store connects; log it at startup
    /// to tell which process it is.
    #[must_use]
    pub fn replica(&self) -> String {
        self.inner.client.replica.to_string()
    }

    /// The bound on the next store call (see
    /// [`RedisStoreBuilder::adaptive_timeout`](super::RedisStoreBuilder::adaptive_timeout)).
    #[must_use]
    pub fn timeout(&self) -> Duration {
        self.inner.client.timeout()
    }

    /// The Redis key name of breaker `key`.
    #[must_use]
    pub fn redis_key(&self, key: &str) -> String {
        format!("{{{}:{}}}", self.inner.prefix, key)
    }

    /// The shared state of breaker `key` under `policy`, as Redis holds it. Reading never creates
    /// the key: a key Redis does not hold reads as closed, generation 0, no calls (a key holding
    /// data fusebox did not write is deleted, with an ERROR event, and reads the same).
    ///
    /// # Errors
    ///
    /// An [`Error`] with reason `TimedOut` when Redis does not answer within the store timeout.
    pub async fn state(&self, key: &str, policy: Policy) -> Result<SharedState, Error> {
        let link = self.key_link(key, policy);
        let answer = call(&self.inner.client, &link, "read", &[])
            .await
            .map_err(|_| Error::new(fusebox::Key::from(key), Reason::TimedOut, None))?;
        Ok(SharedState {
            state: state_of(answer.state),
            generation: answer.generation,
            calls: answer.calls as u32,
            failures: answer.failures as u32,
        })
    }

    /// Moves breaker `key` to `state` in Redis for every replica (operator action): `Closed`
    /// resets, `ForcedOpen` rejects every call, `Disabled` admits every call and never opens.
    ///
    /// The transition is announced once, by this replica: its breaker for `key` (one a registry
    /// sharing this store has created) emits it (`trigger = "operator"`, `function = "operator"`,
    /// the counts of the window it ended) to the `tracing` events and to its registry's
    /// `on_transition` hooks, and its local breaker follows the new state (`Breaker::state`
    /// shows it). Without such a breaker on this replica, only the `tracing` event is emitted.
    /// Moving a key to the state it is in starts a new window and announces nothing.
    ///
    /// Forcing repairs the key: whatever it holds (fields or window slots fusebox did not write,
    /// another type of key), the forced state is written anew under the next generation.
    ///
    /// Other replicas announce nothing: they learn the new state, and their local breakers
    /// follow it, from the next answer of the script to one of their calls on `key` (strict
    /// mode), or from the subscription's message (cached mode), before any later call of theirs
    /// is admitted from the view.
    ///
    /// A key whose `policy` is not shared ([`Policy::shared`](fusebox::Policy::shared)`(false)`)
    /// is never in the store: forcing it writes nothing to Redis and announces nothing (its
    /// breakers' own handles move it, on each replica).
    ///
    /// # Errors
    ///
    /// An [`Error`] with reason `TimedOut` when Redis does not answer within the store timeout.
    pub async fn force(&self, key: &str, policy: Policy, state: State) -> Result<(), Error> {
        if !policy.settings().shared {
            return Ok(());
        }
        let target = match state {
            State::ForcedOpen => 3,
            State::Disabled => 4,
            _ => 0,
        };
        let link = self.key_link(key, policy);
        let answer = call(
            &self.inner.client,
            &link,
            "force",
            &[target, self.inner.client.replica],
        )
        .await
        .map_err(|_| Error::new(fusebox::Key::from(key), Reason::TimedOut, None))?;
        let operator = Site::new(&"operator");
        let breakers: Vec<Arc<SharedKey>> = self
            .inner
            .client
            .links
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&link.hash)
            .map(|links| links.iter().filter_map(std::sync::Weak::upgrade).collect())
            .unwrap_or_default();
        let mut announced = false;
        for shared in breakers {
            if let Some(core) = shared.circuit() {
                // A forced state's answer comes from this replica's own call: nothing to learn.
                let _ = apply(&shared, core.get(), &answer, operator);
                announced = true;
            }
        }
        if !announced && answer.committed_from >= 0 {
            fusebox::store::announce_unheld(
                key,
                state_of(answer.committed_from),
                state_of(answer.state),
                counts_of(&answer),
                operator,
            );
        }
        Ok(())
    }

    pub(super) fn key_link(&self, key: &str, policy: Policy) -> SharedKey {
        let settings = policy.settings();
        let open_for = nanos(settings.open_for);
        let open_max = nanos(settings.open_max).max(open_for);
        let ms = |nanos: u64| nanos.div_ceil(1_000_000).max(1);
        let args = [
            self.inner.ttl_ms,
            match settings.window {
                Window::Time(span) => TIME_WINDOW + time_slice_ms(span),
                Window::Count(n) => u64::from(n),
                // The enum is non-exhaustive; a later kind is added here.
                _ => 0,
            },
            u64::from(settings.min_calls),
            settings.failure_rate.map_or(0, u64::from),
            if settings.slow.is_some() {
                u64::from(settings.slow_rate)
            } else {
                0
            },
            settings.consecutive.map_or(0, u64::from),
            ms(open_for),
            // The factor in thousandths, as the policy holds it (the division is exact to undo).
            (settings.open_backoff * 1000.0).round() as u64,
            ms(open_max),
            match settings.recovery {
                Recovery::Progressive { phases, min_passes } => {
                    TIME_WINDOW + (u64::from(phases) << 20) + u64::from(min_passes)
                }
                // `Recovery::Probes` (the enum is non-exhaustive).
                _ => u64::from(settings.half_open),
            },
            ms(lease_nanos(&policy)),
            // The quorum rides in the upper half of the failure count's argument.
            settings.failure_count.map_or(0, u64::from) + (quorum_code(settings.quorum) << 32),
        ];
        SharedKey {
            hash: self.redis_key(key),
            args,
            unconfirmed: AtomicU64::new(0),
            // Aggregated mode's bound is its flush interval: gating its views would send every
            // call to the script while a backend fails often without tripping.
            gate: if self.inner.client.flush.is_some() {
                u64::MAX
            } else {
                fewest_failures_to_trip(&policy)
            },
            store: self.inner.clone(),
            pending: AtomicU64::new(0),
            applied: AtomicU64::new(0),
            done: tokio::sync::Notify::new(),
            core: None,
            view: AtomicU64::new(0),
            known: std::sync::Mutex::default(),
            learning: AtomicBool::new(false),
            told: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            warned: AtomicU64::new(0),
            forced: AtomicBool::new(false),
            delta: std::sync::Mutex::default(),
            successes: AtomicU64::new(0),
        }
    }
}

/// `duration` in nanoseconds, saturating at `u64::MAX`.
fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// The half-open lease of `policy` in nanoseconds.
fn lease_nanos(policy: &Policy) -> u64 {
    nanos(policy.settings().half_open_lease)
}

/// The fewest failures that can open `policy`'s circuit from an empty window (its `consecutive`,
/// its `failure_count`, or its rate's share of `min_calls`; `u64::MAX` when only the slow-call
/// rule trips it): a replica with this many failures the script has not answered admits no more
/// calls from its view ([`SharedKey::gate`]).
fn fewest_failures_to_trip(policy: &Policy) -> u64 {
    let settings = policy.settings();
    let min_calls = match settings.window {
        Window::Count(n) => settings.min_calls.min(n),
        _ => settings.min_calls,
    };
    [
        settings.consecutive.map(u64::from),
        settings.failure_count.map(u64::from),
        settings
            .failure_rate
            .map(|rate| (u64::from(min_calls) * u64::from(rate)).div_ceil(100)),
    ]
    .into_iter()
    .flatten()
    .map(|failures| failures.max(1))
    .min()
    .unwrap_or(u64::MAX)
}

/// A breaker's state as Redis holds it ([`RedisStore::state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedState {
    /// The shared state.
    pub state: State,
    /// The generation, bumped by every transition (0 when Redis holds no key).
    pub generation: u64,
    /// Outcomes in the current window.
    pub calls: u32,
    /// Failures among them.
    pub failures: u32,
}

/// The store shares every key of a registry but those [`RedisStoreBuilder::local_key`](super::RedisStoreBuilder::local_key) names and
/// those whose window the script does not support.
impl fusebox::store::Store for RedisStore {
    fn link(&self, circuit: WeakCircuit) -> Link {
        let key = circuit.key();
        if self.inner.local.iter().any(|k| k == key) {
            return Link::Local;
        }
        let policy = *circuit.policy();
        if matches!(policy.settings().window, Window::Time(span) if time_slice_ms(span) == 0) {
            tracing::error!(
                target: "fusebox",
                key,
                field = "window",
                "a breaker uses a `window` the redis store does not share; it stays local (use a time window whose tenth is a whole number of milliseconds (`window = \"1s\"`) to share it)"
            );
            return Link::Unshareable;
        }
        if policy.settings().open_for_fn.is_some() {
            tracing::warn!(
                target: "fusebox",
                key,
                field = "open_for",
                "a breaker computes its open wait with a function, which the redis store cannot run: on this shared key every opening waits `open_for` (then this replica's `open_jitter`); keep the key local (`shared = false`) to use the function"
            );
        }
        let mut link = self.key_link(key, policy);
        let hash = link.hash.clone();
        link.core = Some(circuit);
        let link = Arc::new(link);
        let mut links = self
            .inner
            .client
            .links
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Breakers dropped (evicted dynamic keys, reconfigured ones) leave dead entries: swept
        // whenever the map doubles, so it stays proportional to the live breakers.
        if links.len().is_power_of_two() {
            links.retain(|_, entry| {
                entry.retain(|l| l.strong_count() > 0);
                !entry.is_empty()
            });
        }
        let entry = links.entry(hash).or_default();
        entry.retain(|l| l.strong_count() > 0);
        entry.push(Arc::downgrade(&link));
        Link::Shared(Box::new(KeyLink(link)))
    }
}

/// The script's code of a quorum (`breaker.lua`, `ARGV[14]`): 0 for none, the replicas, or
/// 2^16 + a share in percent.
fn quorum_code(quorum: Option<fusebox::Quorum>) -> u64 {
    match quorum {
        Some(fusebox::Quorum::Replicas(n)) => u64::from(n),
        Some(fusebox::Quorum::Share(percent)) => (1 << 16) + u64::from(percent),
        // `None`, and a later kind of the non-exhaustive enum (none is sent).
        _ => 0,
    }
}

/// A shared breaker's link, as the breaker holds it: its key's side of the store.
struct KeyLink(Arc<SharedKey>);

/// A shared breaker's link is its key's side of the store.
impl Seam for KeyLink {
    fn admit_now(&self, core: CircuitRef<'_>, site: Site, can_wait: bool) -> Option<Admission> {
        cached_admit(core, &self.0, site, can_wait)
    }

    fn admit<'a>(&'a self, core: CircuitRef<'a>, site: Site) -> BoxFuture<'a, Admission> {
        admit(&self.0, core, site)
    }

    fn report(&self, ticket: Ticket, site: Site, outcome: Outcome) {
        report(&self.0, ticket, site, outcome);
    }

    fn awaits_recording(&self) -> bool {
        // While the store does not answer, a call does not wait for a recording that cannot
        // come (its outcome is resent by the reporting task). A cached call awaits it while the
        // view is gated (too many of this replica's failures unanswered).
        let link = &self.0;
        (!link.caches() || link.gated()) && link.store.client.healthy.load(Ordering::Acquire)
    }

    fn flush(&self) -> BoxFuture<'_, ()> {
        flush(&self.0)
    }

    fn opened_alone(&self, site: Site) {
        alone(&self.0, site);
    }

    fn refresh(&self, _circuit: CircuitRef<'_>) {
        // A read of the key by the reporting task; its answer makes the local breaker follow.
        learn_later(&self.0, Site::new(&"snapshot"));
    }

    fn degraded(&self) -> bool {
        !self.0.store.client.healthy.load(Ordering::Acquire)
    }

    fn replica(&self) -> Option<String> {
        Some(self.0.store.client.replica.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::fewest_failures_to_trip;
    use fusebox::Policy;
    use std::time::Duration;

    #[test]
    fn the_gate_is_the_fewest_failures_any_rule_trips_on() {
        // The default: half of 10 calls.
        assert_eq!(fewest_failures_to_trip(&Policy::new()), 5);
        assert_eq!(fewest_failures_to_trip(&Policy::new().consecutive(3)), 3);
        assert_eq!(
            fewest_failures_to_trip(&Policy::new().failure_count(50).failure_rate(10)),
            1
        );
        // `min_calls` above a count window is the window.
        assert_eq!(
            fewest_failures_to_trip(&Policy::new().window(4).min_calls(10).failure_rate(50)),
            2
        );
        assert_eq!(
            fewest_failures_to_trip(
                &Policy::new()
                    .time_window(Duration::from_secs(10))
                    .min_calls(20)
                    .failure_rate(100)
            ),
            20
        );
        // Only the slow-call rule trips: no gate.
        assert_eq!(
            fewest_failures_to_trip(&Policy::new().rate_off().slow(Duration::from_secs(1))),
            u64::MAX
        );
    }
}
