//! A breaker shared through a store (feature `store`): the admissions of permits the store
//! admits, the store's answers turned into permits, and what the [seam](crate::store) lets a store
//! do to a breaker (the local mirror of the shared state, the announcement of a committed
//! transition, the shared window). Nothing here is on a local key's path.

use std::sync::Arc;
use std::time::Duration;

use super::seam::{Admission, BoxFuture, CircuitRef, Link, SharedKey, Site, Store, WeakCircuit};
use super::{Circuit, FnName, NamedPermit, RawPermit, Ticket, permit};
use crate::error::Reason;
use crate::observe::Trigger;
use crate::state::{NO_WAIT, State, Verdict, Word};
use crate::sync::Ordering;
use crate::window::Counts;
use std::sync::atomic::{AtomicBool, AtomicU64};

/// What a snapshot shows of a breaker's sharing ([`Circuit::shared`]): the shared window as the
/// store's last answer gave it, the outcomes of this replica's calls the store admitted, and
/// whether the key should have been shared but could not be. Written by shared calls and store
/// answers only: nothing on a local key's path touches it.
#[derive(Default)]
pub(crate) struct SharedView {
    /// The shared window of the store's last answer: `calls << 32 | failures`.
    window: AtomicU64,
    /// When that answer was applied, on the breaker's clock (nanoseconds + 1; 0: none yet).
    at: AtomicU64,
    /// Outcomes (successes and failures) of this replica's calls the store admitted.
    calls: AtomicU64,
    /// Failures among them.
    failures: AtomicU64,
    /// The registry shares its keys but this one's policy cannot be shared (it stays local).
    unshareable: AtomicBool,
}

/// A shared breaker's tie to its store: the store's side of the key, and this replica's own view
/// of a key with a quorum. One thin pointer in the breaker (its size does not change with it).
pub(crate) struct Linked {
    /// The store's side of the key.
    pub(crate) key: Box<dyn SharedKey>,
    /// This replica's own view of a key with a quorum ("open here only"); `None` without one.
    pub(super) here: Option<super::quorum::Here>,
}

impl std::ops::Deref for Linked {
    type Target = dyn SharedKey;

    fn deref(&self) -> &Self::Target {
        &*self.key
    }
}

impl Circuit {
    /// This replica's own view of a shared key with a quorum; `None` for any other key.
    #[inline]
    pub(super) fn here(&self) -> Option<&super::quorum::Here> {
        self.store.as_ref()?.here.as_ref()
    }
}

impl SharedView {
    /// Continues `old`'s view (a reconfigured breaker replaces `old`).
    pub(crate) fn copy_from(&self, old: &SharedView) {
        for (to, from) in [
            (&self.window, &old.window),
            (&self.at, &old.at),
            (&self.calls, &old.calls),
            (&self.failures, &old.failures),
        ] {
            to.store(from.load(Ordering::Acquire), Ordering::Release);
        }
    }
}

impl super::OwnedPermit {
    /// [`recording`](super::OwnedPermit::recording) with the `store` feature.
    #[inline(always)]
    pub(super) fn store_recording(&self) -> Option<BoxFuture<'static, ()>> {
        if !is_shared(self.admission) {
            return None;
        }
        self.shared_recording()
    }

    /// [`recording`](super::OwnedPermit::recording) of a permit the store admitted.
    #[inline(never)]
    fn shared_recording(&self) -> Option<BoxFuture<'static, ()>> {
        let core = self.core.clone();
        let store = core.store.as_ref()?;
        if !store.awaits_recording() {
            return None;
        }
        Some(Box::pin(async move {
            if let Some(store) = core.store.as_ref() {
                store.flush().await;
            }
        }))
    }
}

/// The rejection code of a permit that asks the store (beyond every [`Reason`]'s number).
pub(crate) const ASK_STORE: u64 = 15;

/// Mode bits of a permit admitted by the store: bit 3 marks a permit admitted without a known
/// shared generation (see [`unknown_shared_admission`]), bits 4..14 hold the generation modulo 2^10 (a
/// permit keeps 14 bits of the state word it was admitted under).
const SHARED_MODE: u64 = 5;

/// Bit 3 of a store's permit: admitted while the replica knew no generation of the key.
const UNKNOWN_GENERATION: u64 = 1 << 3;

/// The shared generation as a permit keeps it (the script compares it modulo the same).
const GENERATION_MASK: u64 = super::seam::Ticket::GENERATIONS - 1;

/// True for the admission of a permit the store admitted.
#[inline(always)]
pub(crate) fn is_shared(word: Word) -> bool {
    word.0 & 0b111 == SHARED_MODE
}

/// The admission of a permit the store admitted under `generation`.
fn shared_admission(generation: u64) -> Word {
    Word(SHARED_MODE | (generation & GENERATION_MASK) << 4)
}

/// The admission of a permit admitted on a shared key while the store did not answer and the replica
/// knew no generation of the key (its first calls): its outcome still goes to the store.
fn unknown_shared_admission() -> Word {
    Word(SHARED_MODE | UNKNOWN_GENERATION)
}

/// The ticket of a store's permit: the generation (modulo 2^10) it was admitted under, or none.
fn ticket_of(word: Word) -> super::seam::Ticket {
    if word.0 & UNKNOWN_GENERATION != 0 {
        return super::seam::Ticket::unknown();
    }
    super::seam::Ticket::generation((word.0 >> 4) & GENERATION_MASK)
}

/// The admission word of a permit the store admitted with `ticket`.
fn admission_of(ticket: super::seam::Ticket) -> Word {
    match ticket.admitted_under() {
        Some(generation) => shared_admission(generation),
        None => unknown_shared_admission(),
    }
}

impl Circuit {
    /// The permit of the store's `answer` to the admission of a call of `site`.
    pub(crate) fn permit_of(&self, answer: Admission, site: FnName) -> NamedPermit<'_> {
        // A key with a quorum whose own wait here is over: the store's admission is one of this
        // replica's own probes, when one is left (taken only now, so a call cancelled while it
        // waited for the store holds none).
        // Only a call the store admitted and will report is one (a call this replica admits
        // alone, or the store does not record, is not judged here).
        if let Some(here) = self.here()
            && matches!(answer, Admission::Admitted(_))
            && self.local_state() == State::Closed
            && let Err((reason, wait)) = self.admit_here(here, site)
        {
            return self.store_rejection(reason, wait, site);
        }
        match answer {
            Admission::Admitted(ticket) => self.store_permit(admission_of(ticket), site),
            Admission::Unrecorded => self.store_permit(Word::SETTLED, site),
            Admission::Local => self.admit_local(site),
            Admission::Rejected {
                reason,
                retry_after,
            } => {
                let retry_after =
                    retry_after.map_or(NO_WAIT, |d| crate::policy::nanos(d).min(u64::MAX - 1));
                self.store_rejection(reason, retry_after, site)
            }
        }
    }

    /// An admitted permit carrying the store's `word`.
    fn store_permit(&self, word: Word, site: FnName) -> NamedPermit<'_> {
        let start = if self.timed() { self.now() } else { 0 };
        NamedPermit::new(self, permit::admitted(word, start, false), site)
    }

    /// A rejected permit with `reason` and the wait before the next probe, in nanoseconds
    /// ([`NO_WAIT`]: none).
    fn store_rejection(&self, reason: Reason, retry_after: u64, site: FnName) -> NamedPermit<'_> {
        let rejection = self.count_rejection(reason, retry_after);
        NamedPermit::new(
            self,
            permit::rejected(rejection.reason.bits(), rejection.retry_after),
            site,
        )
    }

    /// The local breaker's state (a shared key's mirror of the store's).
    pub(crate) fn local_state(&self) -> State {
        self.load().state()
    }

    /// What is left of the local breaker's open wait, in nanoseconds (0 unless it is open).
    pub(crate) fn open_remaining_nanos(&self) -> u64 {
        let word = self.load();
        if word.state() != State::Open {
            return 0;
        }
        let now = self.now();
        word.open_remaining_nanos(now, self.time_of(word, now))
    }

    /// Counts the outcome of a call the store admitted (ignored: an error that does not count,
    /// or a cancelled call) in the metrics and in this replica's calls, once, where its permit
    /// settles ([`Circuit::finish_general`]).
    pub(crate) fn count_shared(&self, outcome: Verdict) {
        #[cfg(feature = "metrics")]
        self.meters
            .call(outcome == Verdict::Success, outcome == Verdict::Failure);
        if outcome != Verdict::Ignored {
            self.shared.calls.fetch_add(1, Ordering::Relaxed);
            if outcome == Verdict::Failure {
                self.shared.failures.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Keeps the shared window the store's answer reported (`calls`, `failures`), for snapshots.
    pub(crate) fn observe_shared_window(&self, calls: u32, failures: u32) {
        self.shared.window.store(
            u64::from(calls) << 32 | u64::from(failures),
            Ordering::Relaxed,
        );
        self.shared
            .at
            .store(self.now().saturating_add(1), Ordering::Release);
    }

    /// The shared window of the store's last answer (empty before the first), which adaptive
    /// throttling draws from on a shared key.
    pub(crate) fn shared_counts(&self) -> Counts {
        let window = self.shared.window.load(Ordering::Relaxed);
        let (calls, failures) = ((window >> 32) as u32, window as u32);
        Counts {
            calls,
            failures: failures.min(calls),
            slow: 0,
        }
    }

    /// Marks a breaker whose registry shares its keys but whose policy the store cannot share:
    /// its snapshot says [`Sharing::Unshareable`](super::Sharing::Unshareable).
    pub(crate) fn set_unshareable(&self) {
        self.shared.unshareable.store(true, Ordering::Release);
    }

    /// How this breaker is shared, as a snapshot shows it: (sharing, the shared window with its
    /// age, degraded, this replica's calls and failures the store admitted).
    /// Asks the store for the shared state when its last answer is older than
    /// [`REFRESH_AFTER`](super::seam::REFRESH_AFTER) (or none came yet), before a snapshot: an idle
    /// replica's snapshots follow the shared state.
    pub(crate) fn refresh_shared(&self) {
        let Some(store) = self.store.as_ref() else {
            return;
        };
        let at = self.shared.at.load(Ordering::Acquire);
        let after = u64::try_from(super::seam::REFRESH_AFTER.as_nanos()).unwrap_or(u64::MAX);
        if at == 0 || self.now().saturating_sub(at - 1) >= after {
            store.refresh(CircuitRef(self));
        }
    }

    pub(crate) fn sharing(&self, now: u64) -> super::snapshot::SharingView {
        let view = &self.shared;
        let Some(store) = self.store.as_ref() else {
            return super::snapshot::SharingView {
                sharing: if view.unshareable.load(Ordering::Acquire) {
                    super::Sharing::Unshareable
                } else {
                    super::Sharing::Local
                },
                ..Default::default()
            };
        };
        let at = view.at.load(Ordering::Acquire);
        let window = view.window.load(Ordering::Relaxed);
        super::snapshot::SharingView {
            sharing: super::Sharing::Shared,
            window: (at != 0).then(|| super::SharedWindow {
                calls: (window >> 32) as u32,
                failures: window as u32,
                age: Duration::from_nanos(now.saturating_sub(at - 1)),
            }),
            degraded: store.degraded(),
            replica_calls: view.calls.load(Ordering::Relaxed),
            replica_failures: view.failures.load(Ordering::Relaxed),
            here_only: false,
        }
    }

    /// Seeds the local breaker with the state the store reported (no event: the transition was
    /// committed, and announced, by whichever replica made it). A forced-open or disabled local
    /// state is left by the store's closed state only when `release` (the store had forced it);
    /// an open state of the store replaces it.
    pub(crate) fn mirror(&self, state: State, open_remaining: Duration, release: bool) {
        let mut word = self.load();
        loop {
            let next = match (state, word.state()) {
                // `open_jitter`: a shared wait learned after this replica's own spread of an
                // earlier one ran out (a failed recovery) is spread again.
                (State::Open, State::Open)
                    if self.policy.settings().open_jitter != 0
                        && !open_remaining.is_zero()
                        && self.open_remaining_nanos() == 0 =>
                {
                    word.to_open(self.now(), self.jittered_wait(open_remaining))
                }
                (State::Open, State::Open)
                | (State::Closed, State::Closed)
                | (State::ForcedOpen, State::ForcedOpen)
                | (State::Disabled, State::Disabled) => return,
                (State::Open, _) => word.to_open(self.now(), self.jittered_wait(open_remaining)),
                (State::Closed, State::Open | State::HalfOpen) => word.to_closed(),
                (State::Closed, State::ForcedOpen | State::Disabled) if release => word.to_closed(),
                (State::ForcedOpen, _) => word.to_forced_open(),
                (State::Disabled, _) => word.to_disabled(),
                _ => return,
            };
            match self.cas(word, next) {
                Ok(()) => {
                    self.window.reset();
                    self.run.store(0, Ordering::Release);
                    // The shared state moved: this replica's own view starts again.
                    if let Some(here) = self.here() {
                        here.forget();
                    }
                    // The gauge follows the mirrored state (no transition is announced here).
                    #[cfg(feature = "metrics")]
                    crate::observe::Meters::state(self.key.as_str(), next.state());
                    return;
                }
                Err(seen) => word = seen,
            }
        }
    }

    /// The wait this replica holds its calls for when it learns the shared circuit open for
    /// `open_remaining`: that wait spread by this replica's own draw of `open_jitter` (the
    /// wait itself without it), so replicas that learn one shared opening ask for the probe at
    /// different instants, never before the shared deadline.
    fn jittered_wait(&self, open_remaining: Duration) -> u64 {
        let wait = u64::try_from(open_remaining.as_nanos()).unwrap_or(u64::MAX);
        crate::policy::jittered_nanos(&self.policy, wait)
    }

    /// Announces a transition this replica committed in the store, with the `trigger` the store
    /// reported (the rule that committed it).
    ///
    /// The script sends a rule with every transition it commits; only without one (`None`: a rule
    /// code this build does not know) is the trigger read off the states, a closed circuit that
    /// opened then being reported as tripped by its failure rate.
    pub(crate) fn emit_committed(
        &self,
        from: State,
        to: State,
        counts: Counts,
        site: FnName,
        trigger: Option<Trigger>,
    ) {
        let trigger = trigger.unwrap_or(match (from, to) {
            (State::Closed, State::Open) => Trigger::FailureRate,
            (State::HalfOpen, State::Open) => Trigger::ProbeFailed,
            (State::Open, State::HalfOpen) => Trigger::OpenWaitOver,
            (State::HalfOpen, State::Closed) => Trigger::ProbesPassed,
            (State::HalfOpen, State::HalfOpen) => Trigger::PhasePassed,
            _ => Trigger::Operator,
        });
        self.emit_as(from, to, counts, site, trigger, true);
    }

    /// Keeps a transition another replica committed in the store as this breaker's last
    /// transition (for snapshots; no event), dated `transition.age` before now.
    pub(crate) fn follow_transition(&self, transition: super::seam::SharedTransition) {
        let age = u64::try_from(transition.age.as_nanos()).unwrap_or(u64::MAX);
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(super::TransitionRecord {
            at: self.now().saturating_sub(age),
            from: transition.from,
            to: transition.to,
            trigger: transition.trigger,
            counts: transition.counts.into(),
            function: super::seam::ANOTHER_REPLICA,
            replica: Some(Arc::from(transition.replica)),
        });
    }

    /// Applies an outcome to the local breaker (the store could not be reached): as a call admitted
    /// under the current local state.
    pub(crate) fn report_locally(&self, outcome: Verdict, site: FnName) {
        if outcome == Verdict::Ignored {
            return;
        }
        let word = self.load();
        if word.records() {
            self.report_closed(
                Ticket {
                    admission: permit::admitted(word, self.now(), false),
                    site,
                },
                outcome,
            );
        }
    }
}

impl<'a> RawPermit<'a> {
    /// The breaker, when this permit asks its store for admission.
    pub(crate) fn asks_store(&self) -> Option<&'a Circuit> {
        (self.admission.rejection() == ASK_STORE).then_some(self.core)
    }

    /// Replaces a permit that asked the store with the store's answer.
    pub(crate) fn replace(&mut self, answer: NamedPermit<'a>) {
        let mut answer = answer;
        self.admission = answer.raw.admission;
        answer.raw.admission = Word::SETTLED;
    }
}

/// `core` linked to `store` ([`Store::link`]) when there is one: the breaker a registry keeps.
/// A key whose policy says `shared = false` stays local without asking the store.
pub(crate) fn attach(store: Option<&dyn Store>, core: Circuit) -> Arc<Circuit> {
    let Some(store) = store else {
        return Arc::new(core);
    };
    if !core.policy().settings().shared {
        return Arc::new(core);
    }
    let (key, policy) = (core.key().clone(), *core.policy());
    Arc::new_cyclic(
        |me| match store.link(WeakCircuit::new(me.clone(), key, policy)) {
            Link::Shared(shared) => core.with_store(shared),
            Link::Unshareable => {
                core.set_unshareable();
                core
            }
            _ => core,
        },
    )
}

impl Circuit {
    /// Reports the outcome of a call the store admitted (`word`) to the store.
    pub(super) fn report_shared(&self, word: Word, slow: bool, site: FnName, outcome: Verdict) {
        if let Some(store) = self.store.as_ref() {
            let outcome = super::seam::Outcome::new(outcome, slow);
            store.report(ticket_of(word), Site(site), outcome);
        }
    }

    /// Cached admission: the store's answer without awaiting it, as a permit (`None`: the store
    /// leaves the call to the breaker).
    pub(super) fn admit_now(&self, site: FnName, can_wait: bool) -> Option<NamedPermit<'_>> {
        let store = self.store.as_ref()?;
        let answer = store.admit_now(CircuitRef(self), Site(site), can_wait)?;
        Some(self.permit_of(answer, site))
    }
}

/// True when `permit` (rejected) asks the store for admission: its breaker is shared.
#[inline(always)]
#[must_use]
pub fn asks_store(permit: &RawPermit<'_>) -> bool {
    permit.asks_store().is_some()
}

/// True when `permit`'s breaker is shared through a store that wants its callers to await the
/// recording of their outcomes (strict mode).
#[inline(always)]
#[must_use]
pub fn reports_to_store(permit: &RawPermit<'_>) -> bool {
    permit
        .core()
        .store
        .as_ref()
        .is_some_and(|store| store.awaits_recording())
}

/// Completes the admission of an `async fn` call on a shared key (the function named `name`):
/// awaits the store's answer and turns `permit` into it. Returns the rejection, if any.
pub fn admit_shared<'p, 'a>(
    permit: &'p mut RawPermit<'a>,
    name: FnName,
) -> BoxFuture<'p, Option<crate::error::Error>> {
    let Some((core, store)) = permit
        .asks_store()
        .and_then(|core| Some((core, core.store.as_ref()?)))
    else {
        return Box::pin(std::future::ready(None));
    };
    let answer = store.admit(CircuitRef(core), Site(name));
    Box::pin(async move {
        let answer = core.permit_of(answer.await, name);
        permit.replace(answer);
        permit.rejection()
    })
}

/// The attempt driver's admission: `Ok` with `admitted` as it is, or, when its permit asks the
/// store, `Err` with the wait for the store's answer (the permit admitted, or its rejection). Takes
/// `admitted` by value, so the driver never borrows it and does not keep it across the attempt.
#[allow(clippy::type_complexity)]
pub(crate) fn attempt_admission<'a, N: super::Named + 'a>(
    admitted: Result<NamedPermit<'a, N>, crate::error::Error>,
) -> Result<
    Result<NamedPermit<'a, N>, crate::error::Error>,
    std::pin::Pin<
        Box<
            impl std::future::Future<Output = Result<NamedPermit<'a, N>, crate::error::Error>> + 'a,
        >,
    >,
> {
    match admitted {
        Ok(mut permit) if asks_store(&permit.raw) => Err(Box::pin(async move {
            let name = permit.site.name();
            match admit_shared(&mut permit.raw, name).await {
                None => Ok(permit),
                Some(rejected) => Err(rejected),
            }
        })),
        other => Ok(other),
    }
}

/// Gives back `out` once `recording` (when there is one) is done. One pointer in the caller's
/// future while it waits.
pub(crate) fn after_recording<'a, T: 'a>(
    recording: Option<BoxFuture<'a, ()>>,
    out: T,
) -> std::pin::Pin<Box<impl std::future::Future<Output = T> + 'a>> {
    Box::pin(async move {
        if let Some(recording) = recording {
            recording.await;
        }
        out
    })
}

/// Waits until the outcome reported on `permit` is recorded in the store (strict mode, bounded by
/// the store's timeout), then gives back `out` (the call's result, moved into this boxed future so
/// the caller's own future holds nothing of it across the await).
pub fn flush_then<'p, T: 'p>(
    permit: &'p RawPermit<'_>,
    out: T,
) -> std::pin::Pin<Box<impl std::future::Future<Output = T> + 'p>> {
    after_recording(recording(permit.core()), out)
}

/// The wait for the recording of the outcomes reported so far on `core`, when its calls await it
/// (a breaker shared in strict mode); `None` otherwise.
pub(crate) fn recording(core: &Circuit) -> Option<BoxFuture<'_, ()>> {
    let store = core.store.as_ref()?;
    store.awaits_recording().then(|| store.flush())
}
