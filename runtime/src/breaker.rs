//! A circuit breaker: admission, outcome reporting, transitions and the handle operators use.
//!
//! All state is in atomics: the packed [`Word`](crate::state) and the count window. Admission on a
//! closed circuit is one atomic load and reads no clock; a report is one compare-and-swap on the
//! window cursor. Transitions are compare-and-swap loops around the pure functions of `state`, so
//! exactly one caller wins each transition and exactly the permitted number of probes get through.

use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::ClockSource;
use crate::error::{Error, Key, Reason};
use crate::observe::{Hooks, Transition, Trigger};
use crate::policy::{Policy, Recovery};
use crate::state::{State, TimeStamp, Word};
use crate::window::{Counts, Sample, Window};

/// Refusals since creation, and calls in flight (kept only with `max_concurrent`).
struct Counters {
    rejected: AtomicU64,
    /// Shared with the breakers that replace this one on reconfiguration, so calls admitted before
    /// a reload still count against the bulkhead after it.
    in_flight: SharedCount,
}

/// A counter shared along a chain of reconfigured breakers, allocated on first use (a breaker
/// without a bulkhead that is never reconfigured allocates nothing for it).
#[derive(Default)]
struct SharedCount(std::sync::OnceLock<Arc<AtomicU32>>);

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

/// A value alone on its cache line, so writes to it do not slow down readers of its neighbours.
#[repr(align(64))]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}

/// The annotated function's path, as a thin pointer (keeps permits small).
pub(crate) type FnName = &'static &'static str;

/// Bit 63 of a ticket's `start`: the call holds a bulkhead slot (times stay far below it).
const BULKHEAD_BIT: u64 = 1 << 63;

/// The shared body of a breaker.
pub(crate) struct Core {
    key: Key,
    policy: Policy,
    clock: ClockSource,
    hooks: Arc<Hooks>,
    state: AtomicU64,
    /// The full-width time of `state`'s open deadline or half-open arming (written on transitions).
    time: TimeStamp,
    /// Written by every recorded call: kept off the cache line of `state`, which every call reads.
    window: Padded<Window>,
    /// Counted failures in a row (only kept when `consecutive` is set).
    run: AtomicU32,
    /// Failed recoveries in a row: the exponent of `open_backoff`.
    reopens: AtomicU32,
    /// Progressive recovery: the phase's generation (low 16 bits), calls (next 24) and failures
    /// (top 24) it recorded.
    phase: AtomicU64,
    /// Progressive recovery: admissions asked for in the current phase (phase k admits k in n).
    phase_seq: AtomicU64,
    /// Calls in flight (only kept when `max_concurrent` is set).
    metrics_only: AtomicBool,
    /// Counters written by refused calls and by bulkhead calls, on their own cache line.
    counters: Padded<Counters>,
    /// Dynamic keys: set on use, cleared by the registry's eviction sweep (second-chance LRU).
    used: AtomicBool,
    /// Never evicted: created by a static call site or by hand.
    pinned: AtomicBool,
    /// Count window, no slow-call timing, no consecutive rule, no bulkhead: the fast paths apply.
    plain: bool,
    /// Set when `Registry::configure` replaced this breaker: calls move to the successor, and
    /// reports still arriving here change nothing.
    successor: std::sync::OnceLock<Arc<Core>>,
    /// The open episode: when the circuit last opened from closed (nanoseconds + 1; 0 when
    /// closed), and whether `circuit_stuck_open` was reported for it.
    episode: Episode,
    /// The last transition, for snapshots (written on transitions only).
    last: std::sync::Mutex<Option<Recorded>>,
    #[cfg(feature = "metrics")]
    meters: crate::observe::Meters,
    /// The store this breaker's state is shared through (only on a shared registry's keys).
    #[cfg(feature = "redis")]
    pub(crate) store: Option<Arc<crate::redis::Link>>,
}

/// The open episode of a breaker (see [`Core::episode`]).
#[derive(Default)]
struct Episode {
    since: AtomicU64,
    reported: AtomicBool,
}

/// A transition as a snapshot keeps it.
#[derive(Clone, Copy)]
struct Recorded {
    at: u64,
    from: State,
    to: State,
    trigger: Trigger,
    counts: Counts,
    function: &'static str,
}

/// How a call ended, as far as the breaker is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Success,
    Failure,
    /// Neither: a business error, or a call that was cancelled before it finished.
    Released,
}

impl Core {
    pub(crate) fn new(key: Key, policy: Policy, clock: ClockSource, hooks: Arc<Hooks>) -> Self {
        #[cfg(feature = "metrics")]
        let key_for_meters = &key.as_str().to_owned();
        Core {
            key,
            policy,
            clock,
            hooks,
            state: AtomicU64::new(Word::INITIAL.0),
            time: TimeStamp::new(),
            window: Padded(Window::new(&policy)),
            run: AtomicU32::new(0),
            reopens: AtomicU32::new(0),
            phase: AtomicU64::new(0),
            phase_seq: AtomicU64::new(0),
            metrics_only: AtomicBool::new(false),
            counters: Padded(Counters {
                rejected: AtomicU64::new(0),
                in_flight: SharedCount::default(),
            }),
            used: AtomicBool::new(true),
            pinned: AtomicBool::new(true),
            plain: matches!(policy.window, crate::policy::Window::Count(_))
                && policy.slow_nanos == 0
                && policy.consecutive == 0
                && policy.max_concurrent == 0,
            successor: std::sync::OnceLock::new(),
            episode: Episode::default(),
            last: std::sync::Mutex::new(None),
            #[cfg(feature = "metrics")]
            meters: crate::observe::Meters::new(key_for_meters),
            #[cfg(feature = "redis")]
            store: None,
        }
    }

    /// This breaker, sharing its state through `link`: its calls leave the local fast paths.
    #[cfg(feature = "redis")]
    pub(crate) fn with_store(mut self, link: Arc<crate::redis::Link>) -> Core {
        self.plain = false;
        self.store = Some(link);
        self
    }

    /// A breaker for a new policy that continues this one's state: every state carries over
    /// (open keeps its deadline; half-open keeps its probes, whose reports reach the successor),
    /// except half-open under a different recovery mode, which becomes open with its wait already
    /// over (see [`Core::announce_handover`]). The window's outcomes carry over when its kind and
    /// size are unchanged, and calls in flight keep counting against the bulkhead.
    pub(crate) fn successor_with(&self, policy: Policy) -> Core {
        let mut next = Core::new(
            self.key.clone(),
            policy,
            self.clock.clone(),
            self.hooks.clone(),
        );
        next.counters.0.in_flight = self.counters.in_flight.share();
        let word = self.load();
        let carried = match word.state() {
            State::HalfOpen if policy.recovery != self.policy.recovery => {
                word.to_open(self.now(), 0)
            }
            _ => word,
        };
        if policy.window == self.policy.window {
            next.window.copy_from(&self.window);
        }
        if policy.consecutive != 0 && self.policy.consecutive != 0 {
            next.run
                .store(self.run.load(Ordering::Acquire), Ordering::Release);
        }
        if policy.recovery == self.policy.recovery {
            next.phase
                .store(self.phase.load(Ordering::Acquire), Ordering::Release);
            next.phase_seq
                .store(self.phase_seq.load(Ordering::Acquire), Ordering::Release);
        }
        if carried == word {
            next.time.copy_from(&self.time);
        } else {
            next.time.set(carried, self.now());
        }
        next.state.store(carried.0, Ordering::Release);
        next.metrics_only
            .store(self.metrics_only.load(Ordering::Acquire), Ordering::Release);
        next.counters.rejected.store(
            self.counters.rejected.load(Ordering::Acquire),
            Ordering::Release,
        );
        next.reopens
            .store(self.reopens.load(Ordering::Acquire), Ordering::Release);
        next.pinned
            .store(self.pinned.load(Ordering::Acquire), Ordering::Release);
        next.episode.since.store(
            self.episode.since.load(Ordering::Acquire),
            Ordering::Release,
        );
        next.episode.reported.store(
            self.episode.reported.load(Ordering::Acquire),
            Ordering::Release,
        );
        *next.last.lock().unwrap_or_else(|p| p.into_inner()) = self.last_recorded();
        next
    }

    /// Emits the transition a reconfiguration made (half-open to open when the recovery mode
    /// changed), so the event stream stays continuous. `before` is the replaced breaker's state.
    pub(crate) fn announce_handover(&self, before: State) {
        let now = self.load().state();
        if before != now {
            let counts = self.window.counts(self.now());
            self.emit(before, now, counts, &"operator", Trigger::Reconfigured);
        }
    }

    /// The newest breaker of this chain (itself unless reconfigured).
    #[inline]
    pub(crate) fn current(self: &Arc<Core>) -> &Arc<Core> {
        let mut core = self;
        while let Some(next) = core.successor.get() {
            core = next;
        }
        core
    }

    /// Retires this breaker in favour of `next`.
    pub(crate) fn retire(&self, next: Arc<Core>) -> Result<(), Arc<Core>> {
        self.successor.set(next)
    }

    /// Marks a dynamic breaker as used since the last sweep.
    #[inline]
    pub(crate) fn touch(&self) {
        if !self.used.load(Ordering::Relaxed) {
            self.used.store(true, Ordering::Relaxed);
        }
    }

    /// Clears the used mark: a new dynamic breaker counts as used once a second call finds it.
    pub(crate) fn mark_unused(&self) {
        self.used.store(false, Ordering::Relaxed);
    }

    /// Marks a breaker as created for a dynamic key (evictable) or not.
    pub(crate) fn set_pinned(&self, pinned: bool) {
        self.pinned.store(pinned, Ordering::Release);
    }

    /// Pins a breaker made for a dynamic key (now claimed by a literal key or by hand); true when
    /// it was not pinned before.
    pub(crate) fn claim(&self) -> bool {
        !self.pinned.swap(true, Ordering::AcqRel)
    }

    /// True when never evicted (see [`Core::claim`]).
    pub(crate) fn is_pinned(&self) -> bool {
        self.pinned.load(Ordering::Acquire)
    }

    /// The eviction sweep's question: may this breaker go? Nothing in flight, and either closed and
    /// not used since the previous look (the used mark is cleared as a second chance), or open with
    /// its wait over: it holds nothing the next probe would not find out again. An open circuit
    /// within its wait, half-open probing, and the operators' states are never evicted.
    pub(crate) fn evictable(&self) -> bool {
        if self.pinned.load(Ordering::Acquire) {
            return false;
        }
        let busy =
            self.policy.max_concurrent != 0 && self.counters.in_flight.load(Ordering::Acquire) != 0;
        if busy {
            return false;
        }
        let word = self.load();
        match word.state() {
            State::Closed => !self.used.swap(false, Ordering::AcqRel),
            State::Open => {
                // A stale word (`None`) changed under us: not evictable this time.
                let now = self.now();
                self.time_of(word, now)
                    .is_some_and(|t| word.open_remaining_nanos(now, Some(t)) == 0)
            }
            _ => false,
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
            .map_err(Word)?;
        if !new.same_epoch(current) {
            self.time.set(new, self.now());
        }
        Ok(())
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
        self.policy.slow_nanos != 0
    }

    /// Counts a refusal.
    #[cold]
    fn reject(&self, reason: Reason, retry_after: u64) -> Refusal {
        self.counters.rejected.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.meters.rejected();
        Refusal {
            reason,
            retry_after,
        }
    }

    /// Asks for admission: bulkhead first, then the circuit. Reads the clock only when the circuit
    /// is not closed or calls are timed. Never fails: a refused call gets an inert permit that says
    /// why ([`Permit::refusal`]), so the admitted path moves no `Result` around.
    #[inline(always)]
    pub(crate) fn enter(&self, site: FnName) -> Permit<'_> {
        self.enter_with::<false>(site)
    }

    /// [`Core::enter`]; with `ASK_STORE`, a breaker shared through a store answers with a permit
    /// that asks the store (`crate::redis`), which an `async` caller then awaits.
    #[inline(always)]
    pub(crate) fn enter_with<const ASK_STORE: bool>(&self, site: FnName) -> Permit<'_> {
        let word = self.load();
        if self.plain && word.admits() {
            return Permit {
                core: self,
                word,
                start: if crate::record::enabled() {
                    self.now().max(1)
                } else {
                    0
                },
                site,
            };
        }
        // The other common case: an open circuit whose wait is not over refuses without leaving
        // this function (one clock read, one counter).
        if self.plain && word.is_open() {
            let now = self.now();
            let remaining = word.open_remaining_nanos(now, self.time_of(word, now));
            if remaining != 0 && !self.metrics_only.load(Ordering::Relaxed) {
                self.counters.rejected.fetch_add(1, Ordering::Relaxed);
                #[cfg(feature = "metrics")]
                self.meters.rejected();
                self.record_refusal(Reason::Open, site);
                return Permit {
                    core: self,
                    word: Word::refused(Reason::Open as u64 + 1),
                    start: remaining,
                    site,
                };
            }
        }
        self.enter_general::<ASK_STORE>(site)
    }

    #[inline(never)]
    pub(crate) fn enter_general<const ASK_STORE: bool>(&self, site: FnName) -> Permit<'_> {
        #[cfg(feature = "redis")]
        if let Some(link) = self.store.as_ref()
            && let Some(permit) = crate::redis::cached_admit(self, link, site, ASK_STORE)
        {
            return permit;
        }
        #[cfg(feature = "redis")]
        if ASK_STORE && self.store.is_some() {
            return Permit {
                core: self,
                word: Word::refused(crate::redis::ASK_STORE),
                start: NO_WAIT,
                site,
            };
        }
        match self.admit_general(site) {
            Ok((word, start)) => Permit {
                core: self,
                word,
                start,
                site,
            },
            Err(refusal) => {
                self.record_refusal(refusal.reason, site);
                Permit {
                    core: self,
                    word: Word::refused(refusal.reason as u64 + 1),
                    start: refusal.retry_after,
                    site,
                }
            }
        }
    }

    /// Emits the outcome event of a refused call, when a subscriber wants it.
    #[inline(always)]
    fn record_refusal(&self, reason: Reason, site: FnName) {
        if crate::record::enabled() {
            let outcome = crate::record::Recorded::Refused(reason);
            crate::record::emit(self.key.as_str(), self.now(), None, outcome, site);
        }
    }

    /// Emits the outcome event of a reported call admitted at `permit.start` (see [`Core::enter`]).
    #[cold]
    fn record_outcome(&self, permit: Ticket, outcome: Outcome) {
        let now = self.now();
        let latency = now.saturating_sub(permit.start & !BULKHEAD_BIT);
        let outcome = match outcome {
            Outcome::Success => crate::record::Recorded::Success,
            Outcome::Failure => crate::record::Recorded::Failure,
            Outcome::Released => crate::record::Recorded::Ignored,
        };
        crate::record::emit(self.key.as_str(), now, Some(latency), outcome, permit.site);
    }

    /// Asks for admission; a refusal is an [`Error`].
    #[inline]
    pub(crate) fn acquire(&self, site: FnName) -> Result<Permit<'_>, Error> {
        let permit = self.enter(site);
        match permit.refusal() {
            None => Ok(permit),
            Some(refused) => Err(refused),
        }
    }

    fn admit_general(&self, site: FnName) -> Result<(Word, u64), Refusal> {
        let bulkhead = self.policy.max_concurrent != 0;
        if bulkhead
            && self.counters.in_flight.fetch_add(1, Ordering::AcqRel) >= self.policy.max_concurrent
        {
            self.counters.in_flight.fetch_sub(1, Ordering::AcqRel);
            return Err(self.reject(Reason::BulkheadFull, NO_WAIT));
        }
        let word = self.load();
        let admitted = if word.admits() {
            Ok(word)
        } else {
            self.acquire_slow(word, site)
        };
        match admitted {
            Ok(word) => {
                let start = if self.timed() {
                    self.now()
                } else if crate::record::enabled() {
                    self.now().max(1)
                } else {
                    0
                };
                Ok((
                    word,
                    if bulkhead {
                        start | BULKHEAD_BIT
                    } else {
                        start
                    },
                ))
            }
            Err(refusal) => {
                if bulkhead {
                    self.counters.in_flight.fetch_sub(1, Ordering::AcqRel);
                }
                Err(refusal)
            }
        }
    }

    /// A refusal, or in metrics-only mode an admission whose outcome is not recorded.
    #[cold]
    fn refuse(&self, reason: Reason, retry_after: u64) -> Result<Word, Refusal> {
        let refusal = self.reject(reason, retry_after);
        if self.metrics_only.load(Ordering::Acquire) {
            Ok(Word::SHADOW)
        } else {
            Err(refusal)
        }
    }

    #[cold]
    fn acquire_slow(&self, mut word: Word, site: FnName) -> Result<Word, Refusal> {
        loop {
            let next = match word.state() {
                State::Closed | State::Disabled => return Ok(word),
                State::ForcedOpen => return self.refuse(Reason::ForcedOpen, NO_WAIT),
                State::Open => {
                    let now = self.now();
                    let remaining = word.open_remaining_nanos(now, self.time_of(word, now));
                    if remaining != 0 {
                        return self.refuse(Reason::Open, remaining);
                    }
                    match self.policy.recovery {
                        Recovery::Probes => word.to_half_open(now),
                        Recovery::Progressive { .. } => word.to_phase(1, now),
                    }
                }
                State::HalfOpen => match self.policy.recovery {
                    Recovery::Progressive { phases, .. } => {
                        // Phase k of n admits k out of every n calls.
                        let seq = self.phase_seq.fetch_add(1, Ordering::AcqRel);
                        return if seq % u64::from(phases) < u64::from(word.passed()) {
                            Ok(word)
                        } else {
                            self.refuse(Reason::Recovering, NO_WAIT)
                        };
                    }
                    Recovery::Probes if word.issued() < self.policy.half_open => {
                        word.with_issued(word.issued() + 1)
                    }
                    Recovery::Probes => {
                        let now = self.now();
                        let armed = self.time_of(word, now);
                        if !word.lease_expired(now, self.policy.lease_nanos(), armed) {
                            return self.refuse(Reason::HalfOpenFull, NO_WAIT);
                        }
                        // The probes never reported within their lease: re-arm.
                        word.to_half_open(now)
                    }
                },
            };
            match self.cas(word, next) {
                Ok(()) => {
                    if !next.same_epoch(word) {
                        self.enter_phase();
                        let now = self.now();
                        let counts = self.window.counts(now);
                        let trigger = if word.state() == State::HalfOpen {
                            Trigger::LeaseExpired
                        } else {
                            Trigger::OpenWaitOver
                        };
                        self.emit(word.state(), State::HalfOpen, counts, site, trigger);
                        self.check_stuck(now, site);
                    }
                    return Ok(next);
                }
                Err(seen) => word = seen,
            }
        }
    }

    /// Starts a new half-open phase's admission sequence. (Its counts need no reset: they are
    /// tagged with the phase's generation, see [`Core::count_in_phase`].)
    fn enter_phase(&self) {
        self.phase_seq.store(0, Ordering::Release);
    }

    /// Counts one outcome in the current progressive phase; returns the phase's (calls, failures),
    /// or `None` when the report is stale. Counts carry the phase's generation: the first report of
    /// a new phase replaces the old counts, and a late report from an older phase can never add to
    /// the new one (it re-checks the state after reading the counts, before writing them).
    fn count_in_phase(&self, issued: Word, failed: bool) -> Option<(u32, u32)> {
        const FIELD: u64 = (1 << 24) - 1;
        let tag = issued.generation();
        let mut current = self.phase.load(Ordering::Acquire);
        loop {
            if !self.load().same_epoch(issued) {
                return None;
            }
            let (calls, failures) = if current & 0xffff == tag {
                (
                    (current >> 16 & FIELD) + 1,
                    (current >> 40 & FIELD) + u64::from(failed),
                )
            } else {
                (1, u64::from(failed))
            };
            let next = tag | calls.min(FIELD) << 16 | failures.min(FIELD) << 40;
            match self
                .phase
                .compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some((calls as u32, failures as u32)),
                Err(seen) => current = seen,
            }
        }
    }

    /// Applies the outcome of a call admitted under `permit`.
    #[inline(always)]
    fn finish(&self, permit: Ticket, outcome: Outcome) {
        // The common case: a success on a closed circuit whose policy needs no timing, run or
        // bulkhead.
        if self.plain && outcome == Outcome::Success && permit.word.records() {
            if permit.start != 0 {
                // Admitted while outcome events were wanted (see `Core::enter`).
                self.record_outcome(permit, outcome);
            }
            let word = self.load();
            if word.same_epoch(permit.word) {
                #[cfg(feature = "metrics")]
                self.meters.call(true, false);
                if let Some(counts) = self.window.record_fast_success(0, self.policy.min_calls) {
                    self.judge(word, counts, permit.site);
                }
            }
            return;
        }
        self.finish_general(permit, outcome);
    }

    #[inline(never)]
    fn finish_general(&self, permit: Ticket, outcome: Outcome) {
        if permit.word.inert() {
            return;
        }
        #[cfg(feature = "redis")]
        if crate::redis::is_shared(permit.word) {
            let outcome = match outcome {
                Outcome::Success => Some(false),
                Outcome::Failure => Some(true),
                Outcome::Released => None,
            };
            return crate::redis::report(self, permit.word, permit.start, permit.site, outcome);
        }
        // Untimed calls carry an admission time only when outcome events were wanted then.
        let recorded = if self.timed() {
            crate::record::enabled()
        } else {
            permit.start & !BULKHEAD_BIT != 0
        };
        if recorded {
            self.record_outcome(permit, outcome);
        }
        if permit.start & BULKHEAD_BIT != 0 {
            self.counters.in_flight.fetch_sub(1, Ordering::AcqRel);
        }
        if let Some(next) = self.successor.get() {
            // Reconfigured: the newest breaker decides. The bulkhead slot, shared with it, was
            // released above.
            let mut newest = next;
            while let Some(later) = newest.successor.get() {
                newest = later;
            }
            let ticket = Ticket {
                start: permit.start & !BULKHEAD_BIT,
                ..permit
            };
            return newest.finish_general(ticket, outcome);
        }
        #[cfg(feature = "metrics")]
        self.meters
            .call(outcome == Outcome::Success, outcome == Outcome::Failure);
        match permit.word.state() {
            State::Closed | State::Disabled => self.report_closed(permit, outcome),
            State::HalfOpen => self.report_probe(permit, outcome),
            State::Open | State::ForcedOpen => {}
        }
    }

    #[inline]
    fn report_closed(&self, permit: Ticket, outcome: Outcome) {
        let word = self.load();
        if !word.same_epoch(permit.word) || outcome == Outcome::Released {
            return; // the circuit moved on, or the outcome does not count
        }
        let now = if self.timed() || self.window.needs_time() {
            self.now()
        } else {
            0
        };
        let slow = self.timed()
            && now.saturating_sub(permit.start & !BULKHEAD_BIT) >= self.policy.slow_nanos;
        let failure = outcome == Outcome::Failure;
        let consecutive = self.policy.consecutive;
        if !failure && !slow {
            if consecutive != 0 && self.run.load(Ordering::Relaxed) != 0 {
                self.run.store(0, Ordering::Relaxed);
            }
            if let Some(counts) = self.window.record_fast_success(now, self.policy.min_calls) {
                self.judge(word, counts, permit.site);
            }
            return;
        }
        let counts = self.window.record(now, Sample { failure, slow });
        let run_tripped = consecutive != 0
            && if failure {
                self.run.fetch_add(1, Ordering::AcqRel) + 1 >= consecutive
            } else {
                self.run.store(0, Ordering::Relaxed);
                false
            };
        if word.state() == State::Closed && (run_tripped || counts.trips(&self.policy)) {
            let trigger = if run_tripped {
                Trigger::Consecutive
            } else {
                self.rate_rule(counts)
            };
            self.trip(word, counts, permit.site, trigger);
        }
    }

    /// Trips the circuit when `counts` reach a rate rule (a closed, not retired breaker only).
    #[inline]
    fn judge(&self, word: Word, counts: Counts, site: FnName) {
        if word.state() == State::Closed
            && self.successor.get().is_none()
            && counts.trips(&self.policy)
        {
            self.trip(word, counts, site, self.rate_rule(counts));
        }
    }

    /// Which rate rule `counts` reached: the failure rate when it did, else the slow-call rate.
    fn rate_rule(&self, counts: Counts) -> Trigger {
        let rate = u64::from(self.policy.failure_rate);
        if rate != 0 && u64::from(counts.failures) * 100 >= rate * u64::from(counts.calls) {
            Trigger::FailureRate
        } else {
            Trigger::SlowRate
        }
    }

    #[cold]
    fn trip(&self, word: Word, counts: Counts, site: FnName, trigger: Trigger) {
        let now = self.now();
        let next = word.to_open(now, self.policy.open_wait_nanos(0));
        if self.cas(word, next).is_ok() {
            self.window.reset();
            self.run.store(0, Ordering::Release);
            self.episode
                .since
                .store(now.saturating_add(1), Ordering::Release);
            self.episode.reported.store(false, Ordering::Release);
            self.emit(State::Closed, State::Open, counts, site, trigger);
        }
    }

    #[cold]
    fn report_probe(&self, permit: Ticket, outcome: Outcome) {
        match self.policy.recovery {
            Recovery::Probes => self.report_single_probe(permit, outcome),
            Recovery::Progressive { phases, min_passes } => {
                self.report_phase(permit, outcome, phases, min_passes)
            }
        }
    }

    fn report_single_probe(&self, permit: Ticket, outcome: Outcome) {
        let mut word = self.load();
        loop {
            if word.state() != State::HalfOpen || !word.same_epoch(permit.word) {
                return;
            }
            let next = match outcome {
                Outcome::Success if word.passed() + 1 >= self.policy.half_open => word.to_closed(),
                Outcome::Success => word.with_passed(word.passed() + 1),
                Outcome::Failure => self.reopen(word),
                Outcome::Released => word.with_issued(word.issued().saturating_sub(1)),
            };
            match self.cas(word, next) {
                Ok(()) => {
                    if !next.same_epoch(word) {
                        let failures = u32::from(outcome == Outcome::Failure);
                        let probes = Counts {
                            calls: word.passed() + 1,
                            failures,
                            slow: 0,
                        };
                        let trigger = if next.state() == State::Open {
                            Trigger::ProbeFailed
                        } else {
                            Trigger::ProbesPassed
                        };
                        self.left_half_open(next, probes, permit.site, trigger);
                    }
                    return;
                }
                Err(seen) => word = seen,
            }
        }
    }

    fn report_phase(&self, permit: Ticket, outcome: Outcome, phases: u32, min_passes: u32) {
        let word = self.load();
        if word.state() != State::HalfOpen
            || !word.same_epoch(permit.word)
            || outcome == Outcome::Released
        {
            return;
        }
        let Some((calls, failures)) = self.count_in_phase(word, outcome == Outcome::Failure) else {
            return;
        };
        if calls < min_passes {
            return;
        }
        let threshold = u64::from(self.policy.failure_rate_percent().unwrap_or(50));
        let phase = word.passed();
        let next = if u64::from(failures) * 100 >= threshold * u64::from(calls) {
            self.reopen(word)
        } else if phase >= phases {
            word.to_closed()
        } else {
            word.to_phase(phase + 1, self.now())
        };
        if self.cas(word, next).is_ok() {
            self.enter_phase();
            let probes = Counts {
                calls,
                failures,
                slow: 0,
            };
            match next.state() {
                State::HalfOpen => self.emit(
                    State::HalfOpen,
                    State::HalfOpen,
                    probes,
                    permit.site,
                    Trigger::PhasePassed,
                ),
                State::Open => self.left_half_open(next, probes, permit.site, Trigger::ProbeFailed),
                _ => self.left_half_open(next, probes, permit.site, Trigger::ProbesPassed),
            }
        }
    }

    /// The word of a failed recovery: open again, for a wait grown by `open_backoff`.
    fn reopen(&self, word: Word) -> Word {
        let reopens = self.reopens.load(Ordering::Acquire).saturating_add(1);
        word.to_open(self.now(), self.policy.open_wait_nanos(reopens))
    }

    fn left_half_open(&self, next: Word, probes: Counts, site: FnName, trigger: Trigger) {
        let reopened = next.state() == State::Open;
        if reopened {
            self.reopens.fetch_add(1, Ordering::AcqRel);
        } else {
            self.reopens.store(0, Ordering::Release);
            self.episode.since.store(0, Ordering::Release);
        }
        self.window.reset();
        self.run.store(0, Ordering::Release);
        self.emit(State::HalfOpen, next.state(), probes, site, trigger);
        if reopened {
            self.check_stuck(self.now(), site);
        }
    }

    /// Emits `circuit_stuck_open` once per open episode, when recovery failed
    /// `stuck_open` times in a row or the circuit has been open longer than its span. Checked
    /// on recovery attempts (the first call after each wait) and failed recoveries: no timer.
    #[cold]
    fn check_stuck(&self, now: u64, site: FnName) {
        let since = self.episode.since.load(Ordering::Acquire);
        if since == 0 || self.episode.reported.load(Ordering::Acquire) {
            return;
        }
        let open_nanos = now.saturating_sub(since - 1);
        let failed = self.reopens.load(Ordering::Acquire);
        let (max_failed, max_nanos) = (self.policy.stuck_reopens, self.policy.stuck_open_nanos);
        let stuck = (max_failed != 0 && failed >= max_failed)
            || (max_nanos != 0 && open_nanos >= max_nanos);
        if stuck && !self.episode.reported.swap(true, Ordering::AcqRel) {
            let function: &'static str = site;
            let open_secs = Duration::from_nanos(open_nanos).as_secs_f64();
            let key = self.key.as_str();
            let _ = std::panic::catch_unwind(|| {
                tracing::warn!(
                    target: "fusebox",
                    event = "circuit_stuck_open",
                    key,
                    failed_recoveries = failed,
                    open_secs,
                    function,
                    "circuit_stuck_open"
                )
            });
        }
    }

    /// Moves to `target` by operator action, whatever the current state.
    fn force(&self, target: fn(Word) -> Word) {
        self.metrics_only.store(false, Ordering::Release);
        let mut word = self.load();
        loop {
            let next = target(word);
            match self.cas(word, next) {
                Ok(()) => {
                    let counts = self.window.counts(self.now());
                    self.window.reset();
                    self.run.store(0, Ordering::Release);
                    self.reopens.store(0, Ordering::Release);
                    self.episode.since.store(0, Ordering::Release);
                    self.enter_phase();
                    if word.state() != next.state() {
                        self.emit(
                            word.state(),
                            next.state(),
                            counts,
                            &"operator",
                            Trigger::Operator,
                        );
                    }
                    return;
                }
                Err(seen) => word = seen,
            }
        }
    }

    /// Records the transition for snapshots, then emits its event and runs the hooks. Nothing
    /// that user code does here (a hook or a `tracing` subscriber that panics) unwinds into the
    /// caller: the transition has been made and the caller's permit must still be settled.
    #[cold]
    fn emit(&self, from: State, to: State, counts: Counts, function: FnName, trigger: Trigger) {
        let function: &'static str = function;
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(Recorded {
            at: self.now(),
            from,
            to,
            trigger,
            counts,
            function,
        });
        let announce = || self.announce(from, to, counts, function, trigger);
        if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(announce)) {
            // A subscriber panicked; a second panic while reporting it is dropped too.
            let message = crate::observe::panic_message(payload.as_ref()).to_owned();
            let key = self.key.as_str();
            let _ = std::panic::catch_unwind(
                || tracing::error!(target: "fusebox", key, panic = message, "a panic while reporting a transition of `{key}` was caught; the transition stands"),
            );
        }
    }

    fn announce(&self, from: State, to: State, counts: Counts, function: &str, trigger: Trigger) {
        let key = self.key.as_str();
        let rule = trigger.as_str();
        let failure_rate = counts.failure_rate();
        let slow_rate = counts.slow_rate();
        let calls = counts.calls;
        let (from_name, to_name) = (from.as_str(), to.as_str());
        match to {
            State::Open | State::ForcedOpen => tracing::warn!(
                target: "fusebox",
                event = "circuit_opened",
                key, from = from_name, to = to_name, failure_rate, slow_rate, calls, function, trigger = rule,
                "circuit_opened"
            ),
            State::HalfOpen => tracing::info!(
                target: "fusebox",
                event = "circuit_half_open",
                key, from = from_name, to = to_name, failure_rate, slow_rate, calls, function, trigger = rule,
                "circuit_half_open"
            ),
            State::Closed | State::Disabled => tracing::info!(
                target: "fusebox",
                event = "circuit_closed",
                key, from = from_name, to = to_name, failure_rate, slow_rate, calls, function, trigger = rule,
                "circuit_closed"
            ),
        }
        #[cfg(feature = "metrics")]
        crate::observe::Meters::transition(key, from, to);
        self.hooks.call(&Transition {
            key,
            from,
            to,
            failure_rate,
            slow_rate,
            calls,
            function,
            trigger,
        });
    }

    fn last_recorded(&self) -> Option<Recorded> {
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

/// What the store (`crate::redis`) needs of a breaker; nothing here is on a local key's path.
#[cfg(feature = "redis")]
impl Core {
    /// An admitted permit carrying the store's `word` (see `crate::redis`).
    pub(crate) fn store_permit(&self, word: Word, site: FnName) -> Permit<'_> {
        let start = if self.timed() { self.now() } else { 0 };
        Permit {
            core: self,
            word,
            start,
            site,
        }
    }

    /// A refused permit with `reason` and the wait before the next probe.
    pub(crate) fn store_refusal(
        &self,
        reason: Reason,
        retry_after: Option<Duration>,
        site: FnName,
    ) -> Permit<'_> {
        let retry_after = retry_after.map_or(NO_WAIT, |d| {
            d.as_nanos().min(u128::from(u64::MAX - 1)) as u64
        });
        let refusal = self.reject(reason, retry_after);
        Permit {
            core: self,
            word: Word::refused(refusal.reason as u64 + 1),
            start: refusal.retry_after,
            site,
        }
    }

    /// The local state as the script's seed: (state code, open remaining in ms).
    pub(crate) fn seed(&self) -> (u64, u64) {
        let word = self.load();
        match word.state() {
            State::Open => {
                let now = self.now();
                let remaining = word.open_remaining_nanos(now, self.time_of(word, now));
                (1, remaining.div_ceil(1_000_000))
            }
            State::ForcedOpen => (3, 0),
            State::Disabled => (4, 0),
            _ => (0, 0),
        }
    }

    /// Elapsed nanoseconds since `start` (a permit's admission time), for slow-call timing.
    pub(crate) fn slow_since(&self, start: u64) -> bool {
        self.timed() && self.now().saturating_sub(start & !BULKHEAD_BIT) >= self.policy.slow_nanos
    }

    /// Seeds the local breaker with the state the store reported (no event: the transition was
    /// committed, and announced, by whichever replica made it).
    pub(crate) fn mirror(&self, state: State, open_remaining: Duration) {
        let mut word = self.load();
        loop {
            let next = match (state, word.state()) {
                (State::Open, State::Open) | (State::Closed, State::Closed) => return,
                (State::Open, _) => word.to_open(
                    self.now(),
                    u64::try_from(open_remaining.as_nanos()).unwrap_or(u64::MAX),
                ),
                (State::Closed, State::Open | State::HalfOpen) => word.to_closed(),
                _ => return,
            };
            match self.cas(word, next) {
                Ok(()) => {
                    self.window.reset();
                    self.run.store(0, Ordering::Release);
                    return;
                }
                Err(seen) => word = seen,
            }
        }
    }

    /// Announces a transition this replica committed in the store.
    pub(crate) fn emit_committed(
        &self,
        from: State,
        to: State,
        calls: u32,
        failures: u32,
        site: FnName,
    ) {
        let counts = Counts {
            calls,
            failures,
            slow: 0,
        };
        // The script reports the states, not the rule: the trigger is read off the states (a
        // closed circuit that opened is reported as tripped by its failure rate).
        let trigger = match (from, to) {
            (State::Closed, State::Open) => Trigger::FailureRate,
            (State::HalfOpen, State::Open) => Trigger::ProbeFailed,
            (State::Open, State::HalfOpen) => Trigger::OpenWaitOver,
            (State::HalfOpen, State::Closed) => Trigger::ProbesPassed,
            (State::HalfOpen, State::HalfOpen) => Trigger::PhasePassed,
            _ => Trigger::Operator,
        };
        self.emit(from, to, counts, site, trigger);
    }

    /// Applies an outcome to the local breaker (the store could not be reached): as a call admitted
    /// under the current local state.
    pub(crate) fn report_locally(&self, failure: Option<bool>, site: FnName) {
        let outcome = match failure {
            Some(true) => Outcome::Failure,
            Some(false) => Outcome::Success,
            None => return,
        };
        let word = self.load();
        if word.records() {
            self.report_closed(
                Ticket {
                    word,
                    start: self.now(),
                    site,
                },
                outcome,
            );
        }
    }
}

#[cfg(feature = "redis")]
impl<'a> Permit<'a> {
    /// The breaker, when this permit asks its store for admission.
    pub(crate) fn asks_store(&self) -> Option<&'a Core> {
        (self.word.refusal() == crate::redis::ASK_STORE).then_some(self.core)
    }

    /// The breaker that issued this permit.
    pub(crate) fn core(&self) -> &'a Core {
        self.core
    }

    /// The annotated function's path.
    pub(crate) fn site(&self) -> FnName {
        self.site
    }

    /// Replaces a permit that asked the store with the store's answer.
    pub(crate) fn replace(&mut self, answer: Permit<'a>) {
        let mut answer = answer;
        self.word = answer.word;
        self.start = answer.start;
        answer.word = Word::SETTLED;
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
    /// The state word it was admitted under; inert once settled (or when refused).
    word: Word,
    /// Admission time when calls are timed, and [`BULKHEAD_BIT`] when the call holds a slot; for a
    /// refused permit, the wait before the next probe in nanoseconds (`u64::MAX`: none).
    start: u64,
    site: FnName,
}

impl Permit<'_> {
    /// The call succeeded.
    #[inline(always)]
    pub fn success(mut self) {
        self.succeeded();
    }

    /// The call failed in a way that counts against the circuit.
    #[inline]
    pub fn failure(mut self) {
        self.failed();
    }

    /// The call ended in a way that must not affect the circuit (a business error).
    #[inline]
    pub fn ignore(mut self) {
        self.ignored();
    }

    /// [`success`](Permit::success) in place: the attribute's expansion reports through these, so
    /// the permit is never moved (a move of a value just written costs a store-forwarding stall).
    /// Reporting twice is harmless: the second report does nothing.
    #[doc(hidden)]
    #[inline(always)]
    pub fn succeeded(&mut self) {
        self.settle(Outcome::Success);
    }

    /// [`failure`](Permit::failure) in place (see [`succeeded`](Permit::succeeded)).
    #[doc(hidden)]
    #[inline]
    pub fn failed(&mut self) {
        self.settle(Outcome::Failure);
    }

    /// [`ignore`](Permit::ignore) in place (see [`succeeded`](Permit::succeeded)).
    #[doc(hidden)]
    #[inline]
    pub fn ignored(&mut self) {
        self.settle(Outcome::Released);
    }

    /// What the breaker needs back to account for the call, as plain values (the permit's own
    /// address never escapes, so it stays in registers on the hot path).
    #[inline(always)]
    fn ticket(&self) -> Ticket {
        Ticket {
            word: self.word,
            start: self.start,
            site: self.site,
        }
    }

    /// Reports `result`: `Ok` is a success, an error `is_failure` accepts a failure, any other
    /// error does not count.
    fn report<T, E>(self, result: &Result<T, E>, is_failure: impl FnOnce(&E) -> bool) {
        match result {
            Ok(_) => self.success(),
            Err(e) if is_failure(e) => self.failure(),
            Err(_) => self.ignore(),
        }
    }

    /// The key of the breaker that issued this permit.
    pub(crate) fn key(&self) -> Key {
        self.core.key.clone()
    }

    /// True when this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.word.state() == State::HalfOpen && !self.word.inert()
    }

    /// Why the call was refused, when it was. Permits handed out by
    /// [`Breaker::try_acquire`] are never refused; the attribute's expansion asks this instead of
    /// matching a `Result`, which keeps the admitted path free of moves.
    #[doc(hidden)]
    #[inline(always)]
    pub fn refusal(&self) -> Option<Error> {
        match self.word.refusal() {
            0 => None,
            code => Some(self.refusal_error(code)),
        }
    }

    #[inline(always)]
    fn refusal_error(&self, code: u64) -> Error {
        refusal_error(&self.core.key, code, self.start)
    }

    #[inline(always)]
    fn settle(&mut self, outcome: Outcome) {
        if !self.word.inert() {
            // Settled before the report runs: whatever unwinds out of it, the drop that follows
            // does not report (or release a bulkhead slot) a second time.
            let ticket = self.ticket();
            self.word = Word::SETTLED;
            self.core.finish(ticket, outcome);
        }
    }
}

impl Drop for Permit<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if !self.word.inert() {
            self.abandon();
        }
    }
}

impl Permit<'_> {
    /// Dropped without a report: a panic counts as a failure, anything else is a cancellation.
    #[cold]
    fn abandon(&mut self) {
        let ticket = self.ticket();
        self.word = Word::SETTLED;
        self.core.finish(ticket, abandoned());
    }
}

/// A [`Permit`] that holds its breaker, for futures that outlive the [`Breaker`] handle (the
/// tower layer's response future). Reports and drops exactly like a [`Permit`]: dropped without a
/// report, it counts as a failure when the thread is panicking and otherwise gives its slot back.
#[must_use = "report the outcome with `success()`, `failure()` or `ignore()`"]
pub struct OwnedPermit {
    core: Arc<Core>,
    word: Word,
    start: u64,
    site: FnName,
}

impl OwnedPermit {
    /// The call succeeded.
    #[inline]
    pub fn success(mut self) {
        self.settle(Outcome::Success);
    }

    /// The call failed in a way that counts against the circuit.
    #[inline]
    pub fn failure(mut self) {
        self.settle(Outcome::Failure);
    }

    /// The call ended in a way that must not affect the circuit (a business error).
    #[inline]
    pub fn ignore(mut self) {
        self.settle(Outcome::Released);
    }

    /// True when this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.word.state() == State::HalfOpen && !self.word.inert()
    }

    /// True when the breaker refused the call (see [`Breaker::enter_owned`]).
    #[cfg(feature = "tower")]
    #[inline]
    pub(crate) fn is_refused(&self) -> bool {
        self.word.refusal() != 0
    }

    /// Why the call was refused, when it was (see [`Breaker::enter_owned`]).
    #[inline]
    pub(crate) fn refusal(&self) -> Option<Error> {
        match self.word.refusal() {
            0 => None,
            code => Some(refusal_error(&self.core.key, code, self.start)),
        }
    }

    /// Dropped unreported, in place: a failure when the thread is panicking, else a cancellation.
    #[inline]
    pub(crate) fn abandon(&mut self) {
        self.settle(abandoned());
    }

    /// Reports `outcome` in place; reporting twice is harmless (the second does nothing).
    #[inline]
    pub(crate) fn settle(&mut self, outcome: Outcome) {
        if !self.word.inert() {
            let ticket = Ticket {
                word: self.word,
                start: self.start,
                site: self.site,
            };
            // Settled before the report runs, so nothing unwinding out of it releases twice.
            self.word = Word::SETTLED;
            self.core.finish(ticket, outcome);
        }
    }
}

impl Drop for OwnedPermit {
    #[inline]
    fn drop(&mut self) {
        if !self.word.inert() {
            self.abandon();
        }
    }
}

impl fmt::Debug for OwnedPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit")
            .field("key", &self.core.key)
            .field("probe", &self.is_probe())
            .finish()
    }
}

/// The error of a permit refused with `code` (see [`Word::refused`]); `start` is the wait before
/// the next probe in nanoseconds, or [`NO_WAIT`].
#[inline(always)]
fn refusal_error(key: &Key, code: u64, start: u64) -> Error {
    let reason = match code - 1 {
        0 => Reason::Open,
        1 => Reason::HalfOpenFull,
        2 => Reason::Recovering,
        3 => Reason::ForcedOpen,
        4 => Reason::BulkheadFull,
        _ => Reason::TimedOut,
    };
    let retry_after = (start != NO_WAIT).then(|| Duration::from_nanos(start));
    Error::new(key.clone(), reason, retry_after)
}

/// How a permit dropped without a report ends: a panic is a failure, anything else a cancellation.
fn abandoned() -> Outcome {
    if std::thread::panicking() {
        Outcome::Failure
    } else {
        Outcome::Released
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

/// A permit's admission, handed back when it reports.
#[derive(Clone, Copy)]
struct Ticket {
    word: Word,
    start: u64,
    site: FnName,
}

/// A refusal's `retry_after` when there is no probe to wait for.
const NO_WAIT: u64 = u64::MAX;

/// Why admission failed (turned into an [`Error`] only when someone asks).
#[derive(Debug, Clone, Copy)]
struct Refusal {
    reason: Reason,
    /// Nanoseconds until the next probe; [`NO_WAIT`] when the reason has none.
    retry_after: u64,
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
        self.core.current().acquire(&"")
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
        permit.report(&result, is_failure);
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
        permit.report(&result, is_failure);
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
    #[inline]
    pub fn try_acquire_owned(&self) -> Result<OwnedPermit, Error> {
        self.acquire_owned(&"")
    }

    /// [`try_acquire_owned`](Breaker::try_acquire_owned) on behalf of `site` (named in events).
    #[inline]
    pub(crate) fn acquire_owned(&self, site: FnName) -> Result<OwnedPermit, Error> {
        let permit = self.enter_owned(site);
        match permit.refusal() {
            None => Ok(permit),
            Some(refused) => Err(refused),
        }
    }

    /// Asks for admission on behalf of `site`; a refused call gets an inert permit whose
    /// [`OwnedPermit::refusal`] says why (like the attribute's admission, no `Result` to move).
    #[inline(always)]
    pub(crate) fn enter_owned(&self, site: FnName) -> OwnedPermit {
        let core = self.core.current();
        let mut permit = core.enter(site);
        let owned = OwnedPermit {
            core: core.clone(),
            word: permit.word,
            start: permit.start,
            site,
        };
        // The owned permit now carries the report; the borrowed one must not.
        permit.word = Word::SETTLED;
        owned
    }

    /// The current state. Does not move an open circuit to half-open (only calls do).
    pub fn state(&self) -> State {
        self.core.current().load().state()
    }

    /// A consistent-enough view of the breaker's counters.
    pub fn snapshot(&self) -> Snapshot {
        self.core.current().snapshot()
    }

    /// The breaker's key.
    pub fn key(&self) -> &str {
        self.core.current().key().as_str()
    }

    /// The policy the breaker runs.
    pub fn policy(&self) -> Policy {
        *self.core.current().policy()
    }

    /// Refuses every call until [`reset`](Breaker::reset) (reason [`Reason::ForcedOpen`]).
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
    /// would refuse is admitted instead (and counted in `rejected`, its outcome not recorded). For
    /// trying a policy on live traffic. Ended by [`reset`](Breaker::reset), [`force_open`](Breaker::force_open)
    /// or [`disable`](Breaker::disable).
    pub fn metrics_only(&self) {
        self.core
            .current()
            .metrics_only
            .store(true, Ordering::Release);
    }

    /// Bytes this breaker occupies in memory (struct and window).
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
            Arc::default(),
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

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn consecutive_failures_trip_and_a_success_resets_the_run() {
        let (b, _clock) = breaker(Policy::new().rate_off().consecutive(3));
        for _ in 0..2 {
            b.try_acquire().unwrap().failure();
        }
        b.try_acquire().unwrap().success();
        for _ in 0..2 {
            b.try_acquire().unwrap().failure();
        }
        assert_eq!(b.state(), State::Closed);
        assert_eq!(b.snapshot().consecutive_failures, 2);
        b.try_acquire().unwrap().failure();
        assert_eq!(b.state(), State::Open);
    }

    #[test]
    fn slow_successes_count_as_slow_not_failed() {
        let policy = Policy::new()
            .window(4)
            .min_calls(4)
            .rate_off()
            .slow(2 * S)
            .slow_rate(50);
        let (b, clock) = breaker(policy);
        for slow in [false, true, false] {
            let p = b.try_acquire().unwrap();
            if slow {
                clock.advance(2 * S);
            }
            p.success();
        }
        let snap = b.snapshot();
        assert_eq!((snap.calls, snap.failures, snap.slow), (3, 0, 1));
        let p = b.try_acquire().unwrap();
        clock.advance(3 * S);
        p.success();
        assert_eq!(b.state(), State::Open, "2 slow of 4 reaches 50 %");
    }

    #[test]
    fn time_window_trips_on_recent_failures_only() {
        let policy = Policy::new()
            .time_window(10 * S)
            .min_calls(4)
            .failure_rate(50);
        let (b, clock) = breaker(policy);
        for _ in 0..3 {
            b.try_acquire().unwrap().failure();
        }
        clock.advance(11 * S); // those failures left the window
        b.try_acquire().unwrap().success();
        b.try_acquire().unwrap().failure();
        assert_eq!(b.state(), State::Closed);
        assert_eq!(b.snapshot().calls, 2);
        b.try_acquire().unwrap().failure();
        b.try_acquire().unwrap().failure();
        assert_eq!(b.state(), State::Open);
    }

    #[test]
    fn open_backoff_grows_per_failed_recovery_and_resets_on_close() {
        let policy = Policy::new()
            .window(1)
            .min_calls(1)
            .open_for(S)
            .open_backoff(2.0)
            .open_max(3 * S);
        let (b, clock) = breaker(policy);
        b.try_acquire().unwrap().failure();
        assert_eq!(b.snapshot().retry_after, Some(S));
        for expected in [2 * S, 3 * S, 3 * S] {
            clock.advance(b.snapshot().retry_after.unwrap());
            b.try_acquire().unwrap().failure(); // failed probe
            assert_eq!(b.snapshot().retry_after, Some(expected));
        }
        clock.advance(3 * S);
        b.try_acquire().unwrap().success();
        assert_eq!(b.state(), State::Closed);
        assert_eq!(b.snapshot().reopens, 0);
        b.try_acquire().unwrap().failure();
        assert_eq!(
            b.snapshot().retry_after,
            Some(S),
            "a close resets the backoff"
        );
    }

    #[test]
    fn progressive_recovery_admits_a_growing_share() {
        let policy = Policy::new()
            .window(1)
            .min_calls(1)
            .open_for(S)
            .progressive(2, 4);
        let (b, clock) = breaker(policy);
        b.try_acquire().unwrap().failure();
        clock.advance(S);
        // Phase 1 of 2: the call that starts it, then one call in two, until 4 were recorded.
        let mut admitted = 0;
        let mut refused = 0;
        while b.snapshot().phase == Some(1) || b.state() == State::Open {
            match b.try_acquire() {
                Ok(p) => {
                    admitted += 1;
                    p.success();
                }
                Err(e) => {
                    assert_eq!(e.reason(), Reason::Recovering);
                    refused += 1;
                }
            }
        }
        assert_eq!((admitted, refused), (4, 2));
        assert_eq!(b.snapshot().phase, Some(2));
        // Phase 2 of 2 admits everything; a failing phase reopens.
        for _ in 0..4 {
            b.try_acquire().unwrap().failure();
        }
        assert_eq!(b.state(), State::Open);
        clock.advance(S);
        for _ in 0..8 {
            if let Ok(p) = b.try_acquire() {
                p.success();
            }
        }
        for _ in 0..4 {
            b.try_acquire().unwrap().success();
        }
        assert_eq!(b.state(), State::Closed);
    }

    #[test]
    fn metrics_only_admits_what_it_would_refuse() {
        let (b, _clock) = breaker(Policy::new().window(1).min_calls(1));
        b.metrics_only();
        b.try_acquire().unwrap().failure();
        assert_eq!(b.state(), State::Open);
        let shadow = b.try_acquire().expect("metrics-only never refuses");
        shadow.failure();
        let snap = b.snapshot();
        assert_eq!(
            (snap.rejected, snap.metrics_only, snap.state),
            (1, true, State::Open)
        );
        b.reset();
        assert!(!b.snapshot().metrics_only);
    }

    /// A clock that panics while `PANIC` is set: user code that can unwind out of a report.
    struct PanickingClock(FakeClock, Arc<AtomicBool>);

    impl crate::clock::Clock for PanickingClock {
        fn now_nanos(&self) -> u64 {
            if self.1.load(Ordering::Relaxed) {
                panic!("clock panics");
            }
            self.0.now_nanos()
        }
    }

    #[test]
    fn a_report_that_unwinds_releases_its_bulkhead_slot_exactly_once() {
        let panics = Arc::new(AtomicBool::new(false));
        let core = Core::new(
            Key::from_static("t"),
            Policy::new().max_concurrent(2).slow(S),
            ClockSource::Custom(Arc::new(PanickingClock(FakeClock::new(), panics.clone()))),
            Arc::default(),
        );
        let b = Breaker {
            core: Arc::new(core),
        };
        let permit = b.try_acquire().unwrap();
        panics.store(true, Ordering::Relaxed);
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| permit.success()));
        panics.store(false, Ordering::Relaxed);
        assert!(unwound.is_err());
        assert_eq!(b.snapshot().in_flight, 0, "released once, not twice");
        let held = (b.try_acquire().unwrap(), b.try_acquire().unwrap());
        assert_eq!(b.try_acquire().unwrap_err().reason(), Reason::BulkheadFull);
        drop(held);
    }

    #[test]
    fn bulkhead_refuses_over_the_limit_and_frees_slots() {
        let (b, _clock) = breaker(Policy::new().max_concurrent(2));
        let first = b.try_acquire().unwrap();
        let second = b.try_acquire().unwrap();
        assert_eq!(b.try_acquire().unwrap_err().reason(), Reason::BulkheadFull);
        assert_eq!(b.snapshot().in_flight, 2);
        first.success();
        drop(second); // cancelled
        assert_eq!(b.snapshot().in_flight, 0);
        let (a, c) = (b.try_acquire().unwrap(), b.try_acquire().unwrap());
        a.failure();
        c.ignore();
        let snap = b.snapshot();
        assert_eq!(
            (snap.calls, snap.failures, snap.rejected),
            (2, 1, 1),
            "refusal not recorded"
        );
    }
}
