//! A circuit breaker: admission, outcome reporting, transitions and the handle operators use.
//!
//! All state is in atomics: the packed [`Word`](crate::state) and the count window. Admission on a
//! closed circuit is one atomic load and reads no clock; a report is one compare-and-swap on the
//! window cursor. Transitions are compare-and-swap loops around the pure functions of `state`, so
//! exactly one caller wins each transition and exactly the permitted number of probes get through.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::ClockSource;
use crate::error::{Error, Key, Reason};
use crate::policy::Policy;
use crate::state::{State, Word};
use crate::window::{CountWindow, Counts};

/// The shared body of a breaker.
pub(crate) struct Core {
    key: Key,
    policy: Policy,
    clock: ClockSource,
    state: AtomicU64,
    window: CountWindow,
    rejected: AtomicU64,
}

/// How a call ended, as far as the breaker is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Success,
    Failure,
    /// Neither: a business error, or a call that was cancelled before it finished.
    Released,
}

impl Core {
    pub(crate) fn new(key: Key, policy: Policy, clock: ClockSource) -> Self {
        Core {
            key,
            policy,
            clock,
            state: AtomicU64::new(Word::INITIAL.0),
            window: CountWindow::new(policy.window),
            rejected: AtomicU64::new(0),
        }
    }

    #[inline]
    fn load(&self) -> Word {
        Word(self.state.load(Ordering::Acquire))
    }

    #[inline]
    fn cas(&self, current: Word, new: Word) -> Result<(), Word> {
        self.state
            .compare_exchange(current.0, new.0, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(Word)
    }

    #[cold]
    fn reject(&self, reason: Reason, retry_after: Option<Duration>) -> Error {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        Error::new(self.key.clone(), reason, retry_after)
    }

    /// Asks for admission. Reads the clock only when the circuit is not closed.
    #[inline]
    pub(crate) fn acquire(&self, site: &'static str) -> Result<Permit<'_>, Error> {
        let word = self.load();
        if matches!(word.state(), State::Closed | State::Disabled) {
            return Ok(Permit {
                core: self,
                word,
                site,
            });
        }
        self.acquire_slow(word, site)
    }

    #[cold]
    fn acquire_slow(&self, mut word: Word, site: &'static str) -> Result<Permit<'_>, Error> {
        loop {
            let next = match word.state() {
                State::Closed | State::Disabled => {
                    return Ok(Permit {
                        core: self,
                        word,
                        site,
                    });
                }
                State::ForcedOpen => return Err(self.reject(Reason::ForcedOpen, None)),
                State::Open => {
                    let now = self.clock.now_nanos();
                    let remaining = word.open_remaining(now);
                    if !remaining.is_zero() {
                        return Err(self.reject(Reason::Open, Some(remaining)));
                    }
                    word.to_half_open(now)
                }
                State::HalfOpen => {
                    if word.issued() < self.policy.half_open {
                        word.with_issued(word.issued() + 1)
                    } else {
                        let now = self.clock.now_nanos();
                        if !word.lease_expired(now, self.policy.open_for_nanos) {
                            return Err(self.reject(Reason::HalfOpenFull, None));
                        }
                        // The probes never reported within their lease: re-arm.
                        word.to_half_open(now)
                    }
                }
            };
            match self.cas(word, next) {
                Ok(()) => {
                    if !next.same_epoch(word) {
                        self.emit(word.state(), State::HalfOpen, self.window.counts(), site);
                    }
                    return Ok(Permit {
                        core: self,
                        word: next,
                        site,
                    });
                }
                Err(seen) => word = seen,
            }
        }
    }

    /// Applies the outcome of a call admitted under `issued`.
    fn report(&self, issued: Word, outcome: Outcome, site: &'static str) {
        match issued.state() {
            State::Closed | State::Disabled => self.report_closed(issued, outcome, site),
            State::HalfOpen => self.report_probe(issued, outcome, site),
            State::Open | State::ForcedOpen => {}
        }
    }

    #[inline]
    fn report_closed(&self, issued: Word, outcome: Outcome, site: &'static str) {
        let word = self.load();
        if !word.same_epoch(issued) {
            return; // the circuit moved on; this result belongs to an older state
        }
        match outcome {
            Outcome::Success => self.window.record_success(),
            Outcome::Failure => {
                let counts = self.window.record_failure();
                if word.state() == State::Closed
                    && counts.trips(self.policy.min_calls, self.policy.failure_rate)
                {
                    self.trip(word, counts, site);
                }
            }
            Outcome::Released => {}
        }
    }

    #[cold]
    fn trip(&self, word: Word, counts: Counts, site: &'static str) {
        let next = word.to_open(self.clock.now_nanos(), self.policy.open_for_nanos);
        if self.cas(word, next).is_ok() {
            self.window.reset();
            self.emit(State::Closed, State::Open, counts, site);
        }
    }

    #[cold]
    fn report_probe(&self, issued: Word, outcome: Outcome, site: &'static str) {
        let mut word = self.load();
        loop {
            if word.state() != State::HalfOpen || !word.same_epoch(issued) {
                return;
            }
            let next = match outcome {
                Outcome::Success if word.passed() + 1 >= self.policy.half_open => word.to_closed(),
                Outcome::Success => word.with_passed(word.passed() + 1),
                Outcome::Failure => {
                    word.to_open(self.clock.now_nanos(), self.policy.open_for_nanos)
                }
                Outcome::Released => word.with_issued(word.issued().saturating_sub(1)),
            };
            match self.cas(word, next) {
                Ok(()) => {
                    if !next.same_epoch(word) {
                        let probes = Counts {
                            calls: word.passed() + 1,
                            failures: u32::from(outcome == Outcome::Failure),
                        };
                        if next.state() == State::Open {
                            self.window.reset();
                        }
                        self.emit(State::HalfOpen, next.state(), probes, site);
                    }
                    return;
                }
                Err(seen) => word = seen,
            }
        }
    }

    /// Moves to `target` by operator action, whatever the current state.
    fn force(&self, target: fn(Word) -> Word, site: &'static str) {
        let mut word = self.load();
        loop {
            let next = target(word);
            match self.cas(word, next) {
                Ok(()) => {
                    let counts = self.window.counts();
                    self.window.reset();
                    if word.state() != next.state() {
                        self.emit(word.state(), next.state(), counts, site);
                    }
                    return;
                }
                Err(seen) => word = seen,
            }
        }
    }

    #[cold]
    fn emit(&self, from: State, to: State, counts: Counts, function: &'static str) {
        let key = self.key.as_str();
        let failure_rate = counts.failure_rate();
        let calls = counts.calls;
        let (from, to) = (from.as_str(), to.as_str());
        match to {
            "open" | "forced_open" => tracing::warn!(
                target: "fusebox",
                event = "circuit_opened",
                key, from, to, failure_rate, calls, function,
                "circuit_opened"
            ),
            "half_open" => tracing::info!(
                target: "fusebox",
                event = "circuit_half_open",
                key, from, to, failure_rate, calls, function,
                "circuit_half_open"
            ),
            _ => tracing::info!(
                target: "fusebox",
                event = "circuit_closed",
                key, from, to, failure_rate, calls, function,
                "circuit_closed"
            ),
        }
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        let word = self.load();
        let counts = self.window.counts();
        let retry_after = match word.state() {
            State::Open => Some(word.open_remaining(self.clock.now_nanos())),
            _ => None,
        };
        Snapshot {
            key: self.key.clone(),
            state: word.state(),
            calls: counts.calls,
            failures: counts.failures,
            failure_rate: counts.failure_rate(),
            rejected: self.rejected.load(Ordering::Relaxed),
            retry_after,
            probes_in_flight: if word.state() == State::HalfOpen {
                word.issued() - word.passed().min(word.issued())
            } else {
                0
            },
            policy: self.policy,
        }
    }

    pub(crate) fn policy(&self) -> &Policy {
        &self.policy
    }

    pub(crate) fn key(&self) -> &Key {
        &self.key
    }

    /// Bytes this breaker occupies: the shared struct and the window's bits.
    pub(crate) fn footprint(&self) -> usize {
        std::mem::size_of::<Self>() + self.window.heap_bytes()
    }
}

/// Permission to make one call, obtained from [`Breaker::try_acquire`].
///
/// Report how the call ended with [`success`](Permit::success), [`failure`](Permit::failure) or
/// [`ignore`](Permit::ignore). A permit dropped without a report counts as a failure when the thread
/// is panicking, and otherwise as a cancellation: its slot is given back and nothing is counted, so a
/// cancelled half-open probe never leaves the circuit stuck.
#[must_use = "report the outcome with `success()`, `failure()` or `ignore()`"]
pub struct Permit<'a> {
    core: &'a Core,
    word: Word,
    site: &'static str,
}

impl Permit<'_> {
    /// The call succeeded.
    #[inline]
    pub fn success(self) {
        self.settle(Outcome::Success);
    }

    /// The call failed in a way that counts against the circuit.
    #[inline]
    pub fn failure(self) {
        self.settle(Outcome::Failure);
    }

    /// The call ended in a way that must not affect the circuit (a business error).
    #[inline]
    pub fn ignore(self) {
        self.settle(Outcome::Released);
    }

    /// True when this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.word.state() == State::HalfOpen
    }

    #[inline]
    fn settle(self, outcome: Outcome) {
        let this = std::mem::ManuallyDrop::new(self);
        this.core.report(this.word, outcome, this.site);
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let outcome = if std::thread::panicking() {
            Outcome::Failure
        } else {
            Outcome::Released
        };
        self.core.report(self.word, outcome, self.site);
    }
}

impl fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("key", &self.core.key)
            .field("probe", &self.is_probe())
            .finish()
    }
}

/// A handle to one breaker. Cheap to clone; clones share the breaker.
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
///     .unwrap_or_else(|refused| Err(refused));
/// assert_eq!(stock, Ok(7));
/// ```
#[derive(Clone)]
pub struct Breaker {
    pub(crate) core: Arc<Core>,
}

impl Breaker {
    /// Asks for admission; report the outcome on the returned permit.
    #[inline]
    pub fn try_acquire(&self) -> Result<Permit<'_>, Error> {
        self.core.acquire("")
    }

    /// Runs `f` through the breaker; `is_failure` says which errors count.
    ///
    /// Returns `Err(refusal)` without calling `f` when the circuit refuses the call, and
    /// `Ok(f's result)` otherwise.
    pub fn call<T, E>(
        &self,
        f: impl FnOnce() -> Result<T, E>,
        is_failure: impl FnOnce(&E) -> bool,
    ) -> Result<Result<T, E>, Error> {
        let permit = self.try_acquire()?;
        let result = f();
        match &result {
            Ok(_) => permit.success(),
            Err(e) if is_failure(e) => permit.failure(),
            Err(_) => permit.ignore(),
        }
        Ok(result)
    }

    /// Awaits `fut` through the breaker; `is_failure` says which errors count. Cancelling the
    /// returned future gives the permit back without counting anything.
    pub async fn call_async<T, E>(
        &self,
        fut: impl Future<Output = Result<T, E>>,
        is_failure: impl FnOnce(&E) -> bool,
    ) -> Result<Result<T, E>, Error> {
        let permit = self.try_acquire()?;
        let result = fut.await;
        match &result {
            Ok(_) => permit.success(),
            Err(e) if is_failure(e) => permit.failure(),
            Err(_) => permit.ignore(),
        }
        Ok(result)
    }

    /// The current state. Does not move an open circuit to half-open (only calls do).
    pub fn state(&self) -> State {
        self.core.load().state()
    }

    /// A consistent-enough view of the breaker's counters.
    pub fn snapshot(&self) -> Snapshot {
        self.core.snapshot()
    }

    /// The breaker's key.
    pub fn key(&self) -> &str {
        self.core.key().as_str()
    }

    /// The policy the breaker runs.
    pub fn policy(&self) -> Policy {
        *self.core.policy()
    }

    /// Refuses every call until [`reset`](Breaker::reset) (reason [`Reason::ForcedOpen`]).
    pub fn force_open(&self) {
        self.core.force(Word::to_forced_open, "operator");
    }

    /// Admits every call and keeps recording, but never opens, until [`reset`](Breaker::reset).
    pub fn disable(&self) {
        self.core.force(Word::to_disabled, "operator");
    }

    /// Back to closed with an empty window, from any state.
    pub fn reset(&self) {
        self.core.force(Word::to_closed, "operator");
    }

    /// Bytes this breaker occupies in memory (struct and window).
    pub fn footprint(&self) -> usize {
        self.core.footprint()
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
    /// `failures / calls` in percent (0 when empty).
    pub failure_rate: f64,
    /// Calls refused since the breaker was created.
    pub rejected: u64,
    /// When open: time until the next probe is admitted.
    pub retry_after: Option<Duration>,
    /// When half-open: probes admitted and not yet reported.
    pub probes_in_flight: u32,
    /// The policy it runs.
    pub policy: Policy,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;

    fn breaker(policy: Policy) -> (Breaker, FakeClock) {
        let clock = FakeClock::new();
        let core = Core::new(
            Key::from_static("t"),
            policy,
            ClockSource::Custom(Arc::new(clock.clone())),
        );
        (
            Breaker {
                core: Arc::new(core),
            },
            clock,
        )
    }

    #[test]
    fn closed_open_half_open_closed() {
        let (b, clock) = breaker(
            Policy::new()
                .window(4)
                .min_calls(4)
                .open_for(Duration::from_secs(1)),
        );
        for _ in 0..2 {
            b.try_acquire().unwrap().success();
        }
        b.try_acquire().unwrap().failure();
        assert_eq!(b.state(), State::Closed);
        b.try_acquire().unwrap().failure();
        assert_eq!(b.state(), State::Open);
        let err = b.try_acquire().unwrap_err();
        assert_eq!(err.reason(), Reason::Open);
        assert_eq!(err.retry_after(), Some(Duration::from_secs(1)));
        clock.advance(Duration::from_millis(999));
        assert!(b.try_acquire().is_err());
        clock.advance(Duration::from_millis(1));
        let probe = b.try_acquire().unwrap();
        assert!(probe.is_probe());
        assert_eq!(b.state(), State::HalfOpen);
        assert_eq!(b.try_acquire().unwrap_err().reason(), Reason::HalfOpenFull);
        probe.success();
        assert_eq!(b.state(), State::Closed);
        let snap = b.snapshot();
        assert_eq!((snap.calls, snap.failures, snap.rejected), (0, 0, 3));
    }

    #[test]
    fn failed_probe_reopens_and_cancelled_probe_frees_its_slot() {
        let (b, clock) = breaker(
            Policy::new()
                .window(2)
                .min_calls(1)
                .open_for(Duration::from_secs(1)),
        );
        b.try_acquire().unwrap().failure();
        clock.advance(Duration::from_secs(1));
        drop(b.try_acquire().unwrap()); // cancelled probe
        assert_eq!(b.state(), State::HalfOpen);
        let probe = b.try_acquire().expect("slot given back");
        probe.failure();
        assert_eq!(b.state(), State::Open);
        assert_eq!(b.snapshot().retry_after, Some(Duration::from_secs(1)));
    }

    #[test]
    fn stale_reports_change_nothing() {
        let (b, _clock) = breaker(Policy::new().window(2).min_calls(1));
        let old = b.try_acquire().unwrap();
        b.force_open();
        b.reset();
        old.failure();
        assert_eq!(b.state(), State::Closed);
        assert_eq!(b.snapshot().failures, 0);
    }

    #[test]
    fn unreported_probes_are_rearmed_after_the_lease() {
        let (b, clock) = breaker(
            Policy::new()
                .window(2)
                .min_calls(1)
                .open_for(Duration::from_secs(1)),
        );
        b.try_acquire().unwrap().failure();
        clock.advance(Duration::from_secs(1));
        let stuck = b.try_acquire().unwrap();
        std::mem::forget(stuck); // never reports, never drops
        assert!(b.try_acquire().is_err());
        clock.advance(Duration::from_secs(1));
        b.try_acquire().expect("re-armed").success();
        assert_eq!(b.state(), State::Closed);
    }

    #[test]
    fn manual_states() {
        let (b, _clock) = breaker(Policy::new().window(2).min_calls(1));
        b.force_open();
        assert_eq!(b.try_acquire().unwrap_err().reason(), Reason::ForcedOpen);
        b.disable();
        for _ in 0..10 {
            b.try_acquire().unwrap().failure();
        }
        assert_eq!(b.state(), State::Disabled);
        assert_eq!(b.snapshot().failures, 2);
        b.reset();
        assert_eq!(b.state(), State::Closed);
    }

    #[test]
    fn business_errors_never_count() {
        let (b, _clock) = breaker(Policy::new().window(4).min_calls(1));
        for _ in 0..100 {
            let r = b.call(|| Err::<(), u8>(1), |_| false).unwrap();
            assert_eq!(r, Err(1));
        }
        assert_eq!(b.state(), State::Closed);
        assert_eq!(b.snapshot().calls, 0);
    }
}
