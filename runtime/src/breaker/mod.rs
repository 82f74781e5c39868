//! A circuit breaker: admission, outcome reporting, transitions and the handle operators use.
//!
//! All state is in atomics: the packed [`Word`](crate::state) and the count window. Admission on a
//! closed circuit is one atomic load and reads no clock; a report is one compare-and-swap on the
//! window cursor. Transitions are compare-and-swap loops around the pure functions of `state`, so
//! exactly one caller wins each transition and exactly the permitted number of probes get through.

use crate::sync::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering, Padded};
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::ClockSource;
use crate::error::{Error, Key, Reason};
use crate::observe::{Hooks, Trigger};
use crate::policy::{Concurrency, Policy, Recovery};
pub(crate) use crate::state::Verdict;
use crate::state::{NO_WAIT, State, Step, TimeStamp, Word};
use crate::window::{Counts, Outcomes, Sample};

mod adapter;
mod admission;
#[cfg(feature = "chaos")]
mod chaos;
mod controls;
mod hedging;
mod lifecycle;
mod limit;
mod linked;
mod member;
mod named;
mod owned;
mod permit;
#[cfg(feature = "store")]
mod quorum;
mod report;
mod retry;
#[cfg(feature = "store")]
pub(crate) mod seam;
mod snapshot;
mod stack;
#[cfg(feature = "store")]
mod store;
#[cfg(feature = "store")]
pub use store::{admit_shared, asks_store, flush_then, reports_to_store};
#[cfg(feature = "store")]
pub(crate) use {seam::*, store::*};
#[cfg(test)]
mod tests;

pub use adapter::{KeptBreaker, SiteId};
#[cfg(feature = "chaos")]
pub(crate) use chaos::reject_injected;
pub use hedging::HedgeGate;
pub(crate) use linked::SiteLink;
pub use linked::{Permitted, SitePermit};
pub use named::Named;
pub use owned::Recording;
pub use permit::{NamedPermit, OwnedPermit, Permit, RawPermit};
use permit::{Rejection, Ticket};
pub use snapshot::{LastTransition, SharedWindow, Sharing, Snapshot};
pub(crate) use stack::alone;

/// Rejections since creation (those of adaptive throttling apart too), retries rejected by the retry
/// budget, and calls in flight (kept only with `max_concurrent`).
pub(super) struct Counters {
    rejected: AtomicU64,
    /// Rejections by adaptive throttling (also in `rejected`), written only when `throttle` is set.
    throttled: AtomicU64,
    /// Retries the retry budget rejected since creation.
    retries_rejected: AtomicU64,
    /// Shared with the breakers that replace this one on reconfiguration, so calls admitted before
    /// a reload still count against the bulkhead after it.
    in_flight: SharedCount,
    /// The adaptive bulkhead's limit (only with `max_concurrent = "adaptive…"`).
    limiter: Option<Box<limit::Limiter>>,
}

/// A counter shared along a chain of reconfigured breakers, allocated on first use (a breaker
/// without a bulkhead that is never reconfigured allocates nothing for it).
#[derive(Default)]
pub(super) struct SharedCount(std::sync::OnceLock<Arc<AtomicU32>>);

impl SharedCount {
    fn cell(&self) -> &Arc<AtomicU32> {
        self.0.get_or_init(|| Arc::new(AtomicU32::new(0)))
    }

    fn fetch_add(&self, n: u32, order: Ordering) -> u32 {
        self.cell().fetch_add(n, order)
    }

    fn fetch_sub(&self, n: u32, order: Ordering) -> u32 {
        self.cell().fetch_sub(n, order)
    }

    fn load(&self, order: Ordering) -> u32 {
        self.0.get().map_or(0, |count| count.load(order))
    }

    /// A count sharing this one's value from now on.
    fn share(&self) -> SharedCount {
        SharedCount(std::sync::OnceLock::from(self.cell().clone()))
    }
}

/// [`Circuit::marks`]: a call found this dynamic breaker since the sweep last looked.
const USED: u8 = 1;
/// [`Circuit::marks`]: the sweep removed this dynamic breaker from its registry.
const EVICTED: u8 = 2;

/// The annotated function's path, as a thin pointer (keeps permits small).
pub(crate) type FnName = &'static &'static str;

/// A circuit: the state word, the outcome window, the policy and the counters of one breaker,
/// shared by every [`Breaker`] handle of its key (and replaced by a successor when reconfigured).
///
/// `#[repr(C)]` so the field order is the declared one: first the fields every closed call reads,
/// then the window, whose fast-path fields (those a success on a closed circuit reads and writes)
/// follow them on the same cache line (the hot line, at the struct's address); then the cold
/// fields. A closed call with a count window reads or writes no other line of the breaker, so a
/// breaker out of cache (one of many dynamic keys) costs it one line. A success on a full window
/// without failures writes nothing; on one that holds a failure, the hot line is written by every
/// uncontended success, and once callers contend for the window its successes go to striped
/// counters of their own. Otherwise the line is written only on transitions, by the eviction marks
/// and when the striped counts are folded in.
#[repr(C, align(64))]
pub(crate) struct Circuit {
    // The hot line: read by every call.
    state: AtomicU64,
    /// `policy.min_calls`, read by every recorded success while the window fills.
    min_calls: u32,
    general: AtomicU8, // 0: the closed fast path admits (see `Circuit::plain`)
    /// The policy has a retry budget (`budget` is set): the attempt driver counts its attempts.
    /// On the hot line, so reading it costs a call that already read the line nothing.
    budgeted: bool,
    /// Dynamic keys: [`USED`], set on use and cleared by the registry's eviction sweep
    /// (second-chance LRU), and [`EVICTED`], set when the sweep removed this breaker (a call
    /// site's cache of its last key stops handing it out).
    marks: AtomicU8,
    /// Set once `successor` is: every call reads this flag, on the hot line, and follows the
    /// successor (off the line) only when it is set.
    replaced: AtomicBool,
    /// Recorded calls: the fast-path fields of both shapes end on the hot line (see
    /// `a_closed_calls_fields_share_one_cache_line`).
    window: Outcomes,
    /// Read by a time window's record and by timed calls (a count window's closed call reads no
    /// clock).
    clock: ClockSource,
    /// The full-width time of `state`'s open deadline or half-open arming (written on transitions).
    time: TimeStamp,
    /// Set when `Registry::configure` replaced this breaker: calls move to the successor, and
    /// reports still arriving here change nothing.
    successor: std::sync::OnceLock<Arc<Circuit>>,
    /// Never evicted: created by a static call site or by hand.
    pinned: AtomicBool,
    /// Metrics-only mode: calls it would reject are admitted (and counted in `rejected`), and
    /// their outcomes are not recorded (read by rejections, off the closed path).
    metrics_only: AtomicBool,
    // Cold: read on transitions, events, snapshots and the general paths.
    key: Key,
    policy: Policy,
    /// The key's membership of its policy's group (`None` without one): read on a closed
    /// circuit's counted failures, trips and transitions only.
    pub(crate) member: Option<Arc<crate::groups::Member>>,
    hooks: Arc<Hooks>,
    /// Counted failures in a row (only kept when `consecutive` is set).
    run: AtomicU32,
    /// Failed recoveries in a row: the exponent of `open_backoff`.
    reopens: AtomicU32,
    /// Pushback: the latest time (nanoseconds of the clock) a counted failure asked to be left
    /// alone until; 0 when none. Read when the circuit opens (`Circuit::open_wait`).
    pushback: AtomicU64,
    /// The pushback deadline a failed recovery's reopen honoured (0: none), for its event.
    reopen_pushback: AtomicU64,
    /// Progressive recovery: the phase's generation (low 16 bits), calls (next 24) and failures
    /// (top 24) it recorded.
    phase: AtomicU64,
    /// Progressive recovery: admissions asked for in the current phase (phase k admits k in n).
    phase_seq: AtomicU64,
    /// The open episode: when the circuit last opened from closed (nanoseconds + 1; 0 when
    /// closed), and whether `circuit_stuck_open` was reported for it.
    episode: Episode,
    /// The retry budget, when the policy has one (`budgeted`).
    budget: Option<Box<crate::load::budget::Budget>>,
    /// Hedged calls' latency, budget and counts: made by the first hedged call of the key.
    hedging: std::sync::OnceLock<Box<crate::load::hedge::Hedging>>,
    /// Counters written by rejected calls and by bulkhead calls, on their own cache line.
    counters: Padded<Counters>,
    /// The last transition, for snapshots (written on transitions only).
    last: std::sync::Mutex<Option<TransitionRecord>>,
    /// The shadow policies judging this key's outcomes (the key then takes the general path).
    shadows: Option<Arc<crate::shadow::Shadows>>,
    stacking: stack::Stacking,
    #[cfg(feature = "metrics")]
    meters: crate::observe::Meters,
    /// The store this breaker's state is shared through (only on a shared registry's keys).
    #[cfg(feature = "store")]
    pub(crate) store: Option<Box<store::Linked>>,
    /// What snapshots show of the sharing: the shared window of the store's last answer, this
    /// replica's calls the store admitted, and whether the key could not be shared.
    #[cfg(feature = "store")]
    shared: store::SharedView,
}

/// The open episode of a breaker (see [`Circuit::episode`]).
#[derive(Default)]
pub(super) struct Episode {
    since: AtomicU64,
    reported: AtomicBool,
}

/// A transition as a snapshot keeps it.
#[derive(Clone)]
pub(super) struct TransitionRecord {
    at: u64,
    from: State,
    to: State,
    trigger: Trigger,
    counts: Counts,
    function: &'static str,
    /// The replica that committed it in the store (a shared key's transition).
    replica: Option<Arc<str>>,
}

impl Circuit {
    #[inline]
    fn load(&self) -> Word {
        Word(self.state.load(Ordering::Acquire))
    }

    #[inline]
    fn cas(&self, current: Word, new: Word) -> Result<(), Word> {
        self.state
            .compare_exchange(current.0, new.0, Ordering::AcqRel, Ordering::Acquire)
            .map_err(Word)?;
        if !new.same_epoch(current) {
            self.time.set(new, self.now());
        }
        Ok(())
    }

    /// Replaces the state word by what `decide` makes of it, starting from `word` (a recent load).
    ///
    /// `decide` sees the current word and either keeps it (`Err((word, result))`) or names its
    /// successor; the first compare-and-swap from the word it was shown to that successor wins
    /// (`Ok((from, to))`), and on contention it decides again on the word it lost to. So `decide`
    /// must only read: it can run several times, and the winning transition is exactly one.
    #[inline(always)]
    fn update<T>(
        &self,
        mut word: Word,
        mut decide: impl FnMut(Word) -> Step<T>,
    ) -> Result<(Word, Word), (Word, T)> {
        loop {
            match decide(word) {
                Step::Keep(kept) => return Err((word, kept)),
                Step::Replace(next) => match self.cas(word, next) {
                    Ok(()) => return Ok((word, next)),
                    Err(seen) => word = seen,
                },
            }
        }
    }

    /// The full-width time of `word`'s field (`None` when `word` is no longer the state).
    #[inline]
    fn time_of(&self, word: Word, now: u64) -> Option<u64> {
        self.time.time_of(word, now, || self.load())
    }

    #[inline]
    fn now(&self) -> u64 {
        self.clock.now_nanos()
    }

    /// True when calls are timed (slow-call tracking).
    #[inline]
    fn timed(&self) -> bool {
        self.policy.settings().slow.is_some()
    }

    /// The bulkhead's limit now: the fixed one, or the adaptive one's current value.
    #[inline]
    fn concurrency_limit(&self, concurrency: Concurrency) -> u32 {
        match concurrency {
            Concurrency::Fixed(max) => max,
            _ => self
                .counters
                .limiter
                .as_ref()
                .map_or(u32::MAX, |l| l.limit()),
        }
    }

    /// Records the transition for snapshots, then announces it (see [`crate::observe::emit`]).
    #[cold]
    fn emit(&self, from: State, to: State, counts: Counts, function: FnName, trigger: Trigger) {
        self.emit_as(from, to, counts, function, trigger, false);
    }

    /// [`Circuit::emit`]; `shared`: the transition was committed in the store for every replica
    /// (false: decided by this breaker alone, as every transition of a local key and those a
    /// shared key's local breaker makes while its store does not answer).
    #[cold]
    pub(crate) fn emit_as(
        &self,
        from: State,
        to: State,
        counts: Counts,
        function: FnName,
        trigger: Trigger,
        shared: bool,
    ) {
        self.emit_pushed(from, to, counts, function, trigger, shared, None);
    }

    /// [`Circuit::emit_as`] of an open whose wait `pushback` lengthened to what a failure asked
    /// for (`None`: the policy's wait).
    #[cold]
    #[allow(clippy::too_many_arguments)] // one argument per field of the event
    pub(crate) fn emit_pushed(
        &self,
        from: State,
        to: State,
        counts: Counts,
        function: FnName,
        trigger: Trigger,
        shared: bool,
        pushback: Option<Duration>,
    ) {
        let function: &'static str = function;
        if let Some(member) = &self.member
            && matches!(to, State::Closed | State::Disabled)
        {
            member.released(self.now());
        }
        #[cfg(feature = "store")]
        let replica = self
            .store
            .as_ref()
            .filter(|_| shared)
            .and_then(|store| store.replica())
            .map(Arc::from);
        #[cfg(not(feature = "store"))]
        let replica = None;
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(TransitionRecord {
            at: self.now(),
            from,
            to,
            trigger,
            counts,
            function,
            replica,
        });
        crate::observe::emit(
            &self.hooks,
            self.key.as_str(),
            from,
            to,
            counts,
            function,
            trigger,
            shared,
            pushback,
        );
    }

    pub(crate) fn policy(&self) -> &Policy {
        &self.policy
    }

    pub(crate) fn key(&self) -> &Key {
        &self.key
    }

    /// Bytes this breaker occupies: the shared struct and the window.
    pub(crate) fn footprint(&self) -> usize {
        std::mem::size_of::<Self>() + self.window.heap_bytes()
    }
}

/// A handle on one key's breaker: admission, reports, its state and an operator's controls.
///
/// Get one from [`Registry::breaker`](crate::Registry::breaker) or
/// [`Registry::get`](crate::Registry::get). Use it without the attribute through
/// [`call`](Breaker::call), [`call_async`](Breaker::call_async) or
/// [`try_acquire`](Breaker::try_acquire):
///
/// ```
/// use fusebox::{Registry, Policy};
///
/// let registry = Registry::new();
/// let breaker = registry.breaker("inventory", Policy::new()).unwrap();
/// let stock: Result<u32, fusebox::Error> = breaker
///     .call(|| Ok::<u32, fusebox::Error>(7), |_err| true)
///     .unwrap_or_else(|rejected| Err(rejected));
/// assert_eq!(stock, Ok(7));
/// ```
#[derive(Clone)]
pub struct Breaker {
    pub(crate) core: Arc<Circuit>,
}

impl Breaker {
    /// Asks for admission; report the outcome on the returned permit.
    ///
    /// # Errors
    ///
    /// The rejection, an [`Error`] with its [`Reason`], when the circuit or the bulkhead
    /// rejects the call.
    #[inline]
    pub fn try_acquire(&self) -> Result<Permit<'_>, Error> {
        self.core.current().acquire(&"").map(Permit)
    }

    /// Runs `f` through the breaker; `is_failure` says which errors count.
    ///
    /// Returns `Err(rejection)` without calling `f` when the circuit rejects the call, and
    /// `Ok(f's result)` otherwise.
    ///
    /// # Errors
    ///
    /// The rejection as an [`Error`] when the circuit or the bulkhead rejects the call (`f` is
    /// not called then).
    pub fn call<T, E>(
        &self,
        f: impl FnOnce() -> Result<T, E>,
        is_failure: impl FnOnce(&E) -> bool,
    ) -> Result<Result<T, E>, Error> {
        let permit = self.try_acquire()?;
        let result = f();
        permit.0.report(&result, is_failure);
        Ok(result)
    }

    /// Awaits `fut` through the breaker; `is_failure` says which errors count. Cancelling the
    /// returned future gives the permit back without counting anything.
    ///
    /// # Errors
    ///
    /// The rejection as an [`Error`] when the circuit or the bulkhead rejects the call (`fut` is
    /// not polled then).
    pub async fn call_async<T, E>(
        &self,
        fut: impl Future<Output = Result<T, E>>,
        is_failure: impl FnOnce(&E) -> bool,
    ) -> Result<Result<T, E>, Error> {
        let permit = self.try_acquire()?;
        let result = fut.await;
        permit.0.report(&result, is_failure);
        Ok(result)
    }

    /// Runs `f` through the breaker; `is_failure` judges the whole result, so an `Ok` value can
    /// count as a failure too (the attribute's `failure_if`). A result it accepts is a counted
    /// failure; any other `Ok` is a success and any other `Err` is not counted. The result is
    /// returned as is either way.
    ///
    /// ```
    /// let registry = fusebox::Registry::new();
    /// let policy = fusebox::Policy::new().consecutive(1);
    /// let breaker = registry.breaker("status", policy).unwrap();
    /// let status = breaker.call_classified(|| Ok::<u16, ()>(503), |r| matches!(r, Ok(503..)));
    /// assert_eq!(status, Ok(Ok(503)), "the `Ok` value comes back");
    /// assert_eq!(breaker.state(), fusebox::State::Open, "and counted as a failure");
    /// ```
    ///
    /// # Errors
    ///
    /// As [`call`](Breaker::call).
    pub fn call_classified<T, E>(
        &self,
        f: impl FnOnce() -> Result<T, E>,
        is_failure: impl FnOnce(&Result<T, E>) -> bool,
    ) -> Result<Result<T, E>, Error> {
        let permit = self.try_acquire()?;
        let result = f();
        permit.0.report_classified(&result, is_failure);
        Ok(result)
    }

    /// [`call_classified`](Breaker::call_classified) for a future: `is_failure` judges its whole
    /// result. Cancelling the returned future gives the permit back without counting anything.
    ///
    /// # Errors
    ///
    /// As [`call_async`](Breaker::call_async).
    pub async fn call_async_classified<T, E>(
        &self,
        fut: impl Future<Output = Result<T, E>>,
        is_failure: impl FnOnce(&Result<T, E>) -> bool,
    ) -> Result<Result<T, E>, Error> {
        let permit = self.try_acquire()?;
        let result = fut.await;
        permit.0.report_classified(&result, is_failure);
        Ok(result)
    }

    /// Asks for admission like [`try_acquire`](Breaker::try_acquire); the permit holds the
    /// breaker, so it can live in a `'static` future.
    ///
    /// ```
    /// let registry = fusebox::Registry::new();
    /// let breaker = registry.breaker("ledger", fusebox::Policy::new()).unwrap();
    /// let permit = breaker.try_acquire_owned().unwrap();
    /// let task = std::thread::spawn(move || permit.success());
    /// task.join().unwrap();
    /// assert_eq!(breaker.snapshot().calls, 1);
    /// ```
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Breaker::try_acquire).
    #[inline]
    pub fn try_acquire_owned(&self) -> Result<OwnedPermit, Error> {
        self.acquire_owned(&"")
    }

    /// [`try_acquire_owned`](Breaker::try_acquire_owned) on behalf of `site` (named in events).
    #[inline]
    pub(crate) fn acquire_owned(&self, site: FnName) -> Result<OwnedPermit, Error> {
        let permit = self.admit(site);
        match permit.rejection() {
            None => Ok(permit),
            Some(rejected) => Err(rejected),
        }
    }

    /// The current state. Does not move an open circuit to half-open (only calls do).
    #[must_use]
    pub fn state(&self) -> State {
        self.core.current().load().state()
    }

    /// A consistent-enough view of the breaker's counters.
    #[must_use]
    pub fn snapshot(&self) -> Snapshot {
        self.core.current().snapshot()
    }

    /// The breaker's key.
    #[must_use]
    pub fn key(&self) -> &str {
        self.core.current().key().as_str()
    }

    /// The policy the breaker runs.
    #[must_use]
    pub fn policy(&self) -> Policy {
        *self.core.current().policy()
    }

    /// Rejects every call until [`reset`](Breaker::reset) (reason [`Reason::ForcedOpen`]).
    /// Clears metrics-only mode.
    pub fn force_open(&self) {
        self.core.current().force(Word::to_forced_open);
    }

    /// Admits every call and keeps recording, but never opens, until [`reset`](Breaker::reset).
    /// Clears metrics-only mode.
    pub fn disable(&self) {
        self.core.current().force(Word::to_disabled);
    }

    /// Back to closed with an empty window and no backoff, from any state; clears metrics-only mode.
    pub fn reset(&self) {
        self.core.current().force(Word::to_closed);
    }

    /// Metrics-only mode: the circuit keeps recording, deciding and emitting events, but a call it
    /// would reject is admitted instead: its outcome is not recorded in the window, and it is
    /// counted in the snapshot's `rejected` and (feature `metrics`) in
    /// `fusebox_shadow_rejected_total`, while `fusebox_calls_total` counts what the call did. For
    /// trying a policy on live traffic. Ended by [`reset`](Breaker::reset), [`force_open`](Breaker::force_open)
    /// or [`disable`](Breaker::disable).
    pub fn metrics_only(&self) {
        self.core
            .current()
            .metrics_only
            .store(true, Ordering::Release);
    }

    /// Bytes this breaker occupies in memory (struct and window).
    #[must_use]
    pub fn footprint(&self) -> usize {
        self.core.current().footprint()
    }
}

impl fmt::Debug for Breaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("key", self.core.key())
            .field("state", &self.state())
            .finish()
    }
}
