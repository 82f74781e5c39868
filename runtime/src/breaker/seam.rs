//! The store seam's types (feature `store`, documented as [`fusebox::store`](crate::store)): the
//! traits a store implements, what it answers and is told, and what it reaches of a breaker
//! ([`CircuitRef`]). Defined beside the breaker, which holds a [`SharedKey`]; nothing here names
//! a store.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::Circuit;
use crate::error::{Key, Reason};
use crate::observe::Trigger;
use crate::policy::Policy;
use crate::state::{State, Verdict};

/// How old the store's last answer about a key may be before a snapshot of the key asks the
/// store again ([`SharedKey::refresh`]).
pub const REFRESH_AFTER: Duration = Duration::from_secs(1);

/// A boxed future, as the seam's asynchronous methods return it.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A place breakers share their state through.
///
/// Implemented by a store (`fusebox_redis::RedisStore`, [`MemoryStore`](crate::store::MemoryStore)) and given to a registry
/// with [`Registry::share`](crate::Registry::share).
pub trait Store: Send + Sync + 'static {
    /// Links the breaker of `circuit`'s key to the store: the key the breaker calls from now on,
    /// or [`Link::Local`] / [`Link::Unshareable`] to keep it local. Called once per breaker (a
    /// reconfigured breaker is linked again), while the breaker is being built: `circuit` gives
    /// its key and policy, and reaches the breaker once it is built.
    fn link(&self, circuit: WeakCircuit) -> Link;
}

/// A store's answer to [`Store::link`].
#[non_exhaustive]
pub enum Link {
    /// The key is shared: the breaker calls this key's side of the store.
    Shared(Box<dyn SharedKey>),
    /// The key stays local (the store keeps it out of sharing by its settings or its policy).
    Local,
    /// The key stays local because the store cannot share its policy: its snapshot says
    /// [`Sharing::Unshareable`](crate::Sharing::Unshareable). The store says why in an event.
    Unshareable,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Link::Shared(_) => "Shared",
            Link::Local => "Local",
            Link::Unshareable => "Unshareable",
        })
    }
}

/// The store's side of one shared key.
pub trait SharedKey: Send + Sync + 'static {
    /// Admission without awaiting the store, from what the store already knows of the key: the
    /// answer, or `None` to let the breaker decide (the breaker then awaits [`SharedKey::admit`]
    /// when `can_wait`, and decides alone otherwise). The default decides nothing here.
    fn admit_now(&self, circuit: CircuitRef<'_>, site: Site, can_wait: bool) -> Option<Admission> {
        let _ = (circuit, site, can_wait);
        None
    }

    /// The store's admission of a call of `site`, awaited by the caller.
    fn admit<'a>(&'a self, circuit: CircuitRef<'a>, site: Site) -> BoxFuture<'a, Admission>;

    /// The outcome of a call the store admitted with `ticket` ([`Admission::Admitted`]), reported
    /// where its permit settles: record it off the call path.
    fn report(&self, ticket: Ticket, site: Site, outcome: Outcome);

    /// This replica opened its own view of the key alone ("open here only", a key with a
    /// [`quorum`](crate::Policy::quorum)), at a call of `site`: the store counts it toward the
    /// quorum, and opens the shared circuit once that many replicas did. The default does
    /// nothing.
    fn opened_alone(&self, site: Site) {
        let _ = site;
    }

    /// True when a caller should await the recording of its outcome ([`SharedKey::flush`]) before
    /// it returns. The default: never.
    fn awaits_recording(&self) -> bool {
        false
    }

    /// Waits until the outcomes reported so far are recorded (bounded by the store's own
    /// timeout). The default returns at once.
    fn flush(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }

    /// Asks the store for the key's shared state off the call path, so that the local breaker
    /// follows it (through `circuit`) without a call: a snapshot of a shared key calls it when the
    /// store's last answer is older than [`REFRESH_AFTER`], so an idle replica's snapshots,
    /// dashboard and health follow the shared state too. The default does nothing.
    fn refresh(&self, circuit: CircuitRef<'_>) {
        let _ = circuit;
    }

    /// True while the store does not answer (its calls degrade), as snapshots show it. The
    /// default: never.
    fn degraded(&self) -> bool {
        false
    }

    /// This replica's name in the store, which the last transition of a snapshot names when this
    /// replica committed it ([`LastTransition::replica`](crate::LastTransition::replica)); the
    /// store tells the other replicas with [`CircuitRef::follow_transition`]. The default: none.
    fn replica(&self) -> Option<String> {
        None
    }
}

/// The last transition of a shared key as the store keeps it with the shared state: what every
/// replica's snapshot shows as its last transition ([`CircuitRef::follow_transition`]).
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedTransition {
    /// The state it left.
    pub from: State,
    /// The state it entered.
    pub to: State,
    /// What caused it.
    pub trigger: Trigger,
    /// The window (or the probes) that decided it.
    pub counts: Counts,
    /// How long before the store's answer it was committed.
    pub age: Duration,
    /// The name of the replica that committed it ([`SharedKey::replica`]).
    pub replica: String,
}

impl SharedTransition {
    /// A transition from `from` to `to` by `trigger`, decided by `counts`, committed `age` before
    /// the store's answer by `replica`.
    #[must_use]
    pub fn new(
        from: State,
        to: State,
        trigger: Trigger,
        counts: Counts,
        age: Duration,
        replica: String,
    ) -> Self {
        SharedTransition {
            from,
            to,
            trigger,
            counts,
            age,
            replica,
        }
    }
}

/// The function a snapshot's last transition names when another replica committed it (its
/// function is that replica's).
pub const ANOTHER_REPLICA: &str = "another replica";

/// What a store answers to an admission.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Admitted by the store: the outcome is reported to it with this ticket.
    Admitted(Ticket),
    /// Admitted without recording the outcome anywhere (a store that fails open).
    Unrecorded,
    /// Decided by the breaker's local state alone, as a local key's call (a store that cannot
    /// answer and degrades to the local breaker); its outcome is recorded locally.
    Local,
    /// Rejected, with the reason and the wait before the next call may be admitted.
    Rejected {
        /// Why.
        reason: Reason,
        /// The wait the caller is told, when the store knows it.
        retry_after: Option<Duration>,
    },
}

impl Admission {
    /// A rejection for `reason`, with the wait the caller is told.
    #[must_use]
    pub fn rejected(reason: Reason, retry_after: Option<Duration>) -> Self {
        Admission::Rejected {
            reason,
            retry_after,
        }
    }
}

/// What a permit the store admitted carries back to it with its outcome: the generation of the
/// store's state it was admitted under (kept modulo [`Ticket::GENERATIONS`]), or none known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket(u16);

impl Ticket {
    /// How many generations a ticket tells apart: it keeps a generation modulo this.
    pub const GENERATIONS: u64 = 1 << 10;

    /// A ticket for a call admitted under `generation` (kept modulo [`Ticket::GENERATIONS`]).
    #[must_use]
    pub const fn generation(generation: u64) -> Self {
        Ticket((generation % Self::GENERATIONS) as u16)
    }

    /// A ticket for a call admitted while the replica knew no generation of the key.
    #[must_use]
    pub const fn unknown() -> Self {
        Ticket(Self::GENERATIONS as u16)
    }

    /// The generation modulo [`Ticket::GENERATIONS`], or `None` for [`Ticket::unknown`].
    #[must_use]
    pub const fn admitted_under(self) -> Option<u64> {
        if self.0 as u64 == Self::GENERATIONS {
            None
        } else {
            Some(self.0 as u64)
        }
    }
}

/// The outcome of a call the store admitted: its verdict, and whether slow-call timing found it
/// slow.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Success, failure, or ignored (an error that does not count, a cancelled call).
    pub verdict: Verdict,
    /// The call took longer than the policy's slow-call threshold.
    pub slow: bool,
}

impl Outcome {
    /// An outcome.
    #[must_use]
    pub const fn new(verdict: Verdict, slow: bool) -> Self {
        Outcome { verdict, slow }
    }
}

/// The place a call was made from: the annotated function's name, or the name an adapter gives.
/// Two sites are equal when they are the same `static` (compared by address, not by name).
#[derive(Clone, Copy, Debug)]
pub struct Site(pub(crate) &'static &'static str);

impl PartialEq for Site {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for Site {}

impl std::hash::Hash for Site {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::ptr::hash(self.0, state);
    }
}

impl Site {
    /// A site named `name` (a `static` holding the name: sites are compared by address).
    #[must_use]
    pub const fn new(name: &'static &'static str) -> Self {
        Site(name)
    }

    /// The site's name.
    #[must_use]
    pub fn name(self) -> &'static str {
        self.0
    }
}

/// The counts a transition carries in its event: the window (or the probes) that decided it.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Calls counted.
    pub calls: u32,
    /// Failures among them.
    pub failures: u32,
    /// Slow calls among them.
    pub slow: u32,
}

impl Counts {
    /// Counts of `calls`, `failures` and `slow` calls.
    #[must_use]
    pub const fn new(calls: u32, failures: u32, slow: u32) -> Self {
        Counts {
            calls,
            failures,
            slow,
        }
    }
}

/// Announces a transition the store committed on `key` while no breaker of this process holds
/// the key (an operator's command): the event a breaker's transition gives, with `shared = true`.
pub fn announce_unheld(
    key: &str,
    from: crate::state::State,
    to: crate::state::State,
    counts: Counts,
    site: Site,
) {
    crate::observe::emit(
        &crate::observe::Hooks::default(),
        key,
        from,
        to,
        counts.into(),
        site.0,
        crate::observe::Trigger::Operator,
        true,
        None,
    );
}

impl From<Counts> for crate::window::Counts {
    fn from(counts: Counts) -> Self {
        crate::window::Counts {
            calls: counts.calls,
            failures: counts.failures,
            slow: counts.slow,
        }
    }
}

/// A shared breaker, borrowed for one call into the store.
#[derive(Clone, Copy)]
pub struct CircuitRef<'a>(pub(crate) &'a Circuit);

/// A shared breaker, held: what a store keeps while it works for the breaker off the call path
/// (a queued report), so the breaker outlives that work.
#[derive(Clone)]
pub struct CircuitHandle(Arc<Circuit>);

/// A shared breaker as its key's side of the store keeps it ([`Store::link`]):
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

    /// Records `transition`, committed in the store by another replica, as the local breaker's
    /// last transition (no event: that replica announced it), so this replica's snapshot says
    /// why the shared circuit moved: its [`function`](crate::LastTransition::function) is
    /// [`ANOTHER_REPLICA`].
    pub fn follow_transition(self, transition: SharedTransition) {
        self.0.follow_transition(transition);
    }

    /// Keeps the shared window the store's last answer gave (`calls`, `failures`), which
    /// snapshots show and adaptive throttling draws from.
    pub fn observe_window(self, calls: u32, failures: u32) {
        self.0.observe_shared_window(calls, failures);
    }

    /// Counts `outcomes` outcomes of this key the store gave up recording (past its resend bound
    /// or queue): `fusebox_store_dropped_total{key}` with the feature `metrics`.
    pub fn dropped(self, outcomes: u64) {
        #[cfg(feature = "metrics")]
        crate::observe::Meters::dropped(self.key(), outcomes);
        #[cfg(not(feature = "metrics"))]
        let _ = outcomes;
    }

    /// Records `verdict` on the local breaker, as a call admitted under its current state (the
    /// store could not record it).
    pub fn record_locally(self, verdict: Verdict, site: Site) {
        self.0.report_locally(verdict, site.0);
    }
}
