//! Permits: the proof of admission a call carries until it reports ([`Permit`], [`OwnedPermit`],
//! whose methods are in `owned.rs`), and what a rejected admission hands back.
//!
//! A permit is its breaker, its admission (one word) and where it finds the function's name
//! ([`Named`]): the name itself (three words), or, in the attribute's attempt driver, a
//! zero-sized type that knows it (two words). The admission packs, low bits first:
//!
//! | bits   | admitted                                          | rejected                     |
//! |--------|---------------------------------------------------|-----------------------------|
//! | 0..14  | mode and generation of the state word it was admitted under (what a report must still match) | mode `INERT`, reason code (3..7) |
//! | 14     | holds a bulkhead slot                             | wait before the next probe, |
//! | 15     | admitted by the general path: reports by it too   | nanoseconds (7..64, all ones: none) |
//! | 16..64 | admission time, nanoseconds modulo 2^48           |                             |
//!
//! A call the closed fast path admitted carries neither bit 14 nor 15, so its report decides
//! from its own admission whether it takes the fast path: it reads no field of the breaker.
//!
//! A call's duration is measured modulo 2^48 ns (about 3.3 days): a call that lasts longer is
//! measured as its duration less a whole number of those spans (slow-call thresholds are at most
//! one day).

use super::*;
use crate::state::EPOCH_BITS;

/// Set in a permit's admission when the call holds a bulkhead slot.
pub(super) const BULKHEAD_BIT: u64 = 1 << EPOCH_BITS;
/// Set in the admission of every call the general path admitted (see the module docs).
pub(super) const GENERAL_BIT: u64 = 1 << (EPOCH_BITS + 1);
/// Where a permit's admission time starts.
const TIME_SHIFT: u32 = EPOCH_BITS + 2;
/// The admission time's field: nanoseconds modulo 2^48.
const TIME_MASK: u64 = u64::MAX >> TIME_SHIFT;
/// Where a rejected permit's wait starts (above the mode and the reason code).
const WAIT_SHIFT: u32 = 7;

/// The word of a call admitted under the state `word` at `start` (nanoseconds of the breaker's
/// clock, kept modulo 2^48; 0 when not timed), holding a bulkhead slot when `slot`: an admission
/// of the general path.
#[inline(always)]
pub(super) fn admitted(word: Word, start: u64, slot: bool) -> Word {
    Word(
        word.epoch().0
            | u64::from(slot) << EPOCH_BITS
            | GENERAL_BIT
            | (start & TIME_MASK) << TIME_SHIFT,
    )
}

/// [`admitted`] for a closed or disabled `word` (nothing above its mode and generation) and no
/// bulkhead slot; `start` from [`marked`] or 0.
#[inline(always)]
pub(super) fn admitted_closed(word: Word, start: u64) -> Word {
    debug_assert!(word.admits() && word == word.epoch() && start <= TIME_MASK);
    Word(word.0 | start << TIME_SHIFT)
}

/// An admission time that says "recorded" in a permit's admission: never 0 modulo 2^48.
#[inline(always)]
pub(super) fn marked(now: u64) -> u64 {
    (now & TIME_MASK).max(1)
}

/// The longest wait a rejected permit keeps: 2^56 - 1 ns, over two years (open waits are at most
/// one day).
const LONGEST_WAIT: u64 = (1 << (63 - WAIT_SHIFT)) - 1;

/// The word of a permit rejected with the reason `code`, `wait` nanoseconds before the next probe
/// ([`NO_WAIT`]: none; a longer wait than [`LONGEST_WAIT`] is kept as that).
#[inline(always)]
pub(super) fn rejected(code: u64, wait: u64) -> Word {
    let wait = if wait == NO_WAIT {
        u64::MAX >> WAIT_SHIFT
    } else {
        wait.min(LONGEST_WAIT)
    };
    Word(Word::rejected(code).0 | wait << WAIT_SHIFT)
}

/// [`rejected`] with a wait (never [`NO_WAIT`]).
#[inline(always)]
pub(super) fn rejected_for(code: u64, wait: u64) -> Word {
    Word(Word::rejected(code).0 | wait.min(LONGEST_WAIT) << WAIT_SHIFT)
}

/// The wait a rejected permit's admission carries, in nanoseconds ([`NO_WAIT`]: none): the field,
/// sign-extended (a real wait's top bit is clear; "none" is all ones).
#[inline(always)]
fn wait_of(word: Word) -> u64 {
    ((word.0 as i64) >> WAIT_SHIFT) as u64
}

/// Permission to make one call, obtained from [`Breaker::try_acquire`].
///
/// Report how the call ended with [`success`](Permit::success), [`failure`](Permit::failure) or
/// [`ignore`](Permit::ignore). A permit dropped without a report counts as a failure when the thread
/// is panicking, and otherwise as a cancellation: its slot is given back and nothing is counted, so a
/// cancelled half-open probe never leaves the circuit stuck.
#[must_use = "report the outcome with `success()`, `failure()` or `ignore()`"]
pub struct Permit<'a>(pub(super) NamedPermit<'a>);

impl Permit<'_> {
    /// The call succeeded.
    #[inline(always)]
    pub fn success(self) {
        self.0.success();
    }

    /// The call failed in a way that counts against the circuit.
    #[inline]
    pub fn failure(self) {
        self.0.failure();
    }

    /// The call failed in a way that counts, and the server asked to be left alone for `wait`
    /// (pushback, see [`RetryAfter`](crate::RetryAfter)): when this failure opens the circuit,
    /// or one does before `wait` is over, it stays open at least until then (capped by
    /// `open_max`).
    #[inline]
    pub fn failure_after(self, wait: Duration) {
        self.0.failure_after(wait);
    }

    /// The call ended with an error that does not count as a failure (a business error): it
    /// does not affect the circuit, or counts as a success when the policy says
    /// [`Others::Success`](crate::Others::Success) ([`Policy::others`](crate::Policy::others)).
    #[inline]
    pub fn ignore(self) {
        self.0.ignore();
    }

    /// True when this call is a half-open probe.
    #[must_use]
    pub fn is_probe(&self) -> bool {
        self.0.is_probe()
    }
}

impl fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// A [`Permit`] that finds its function's name through `N` (see [`Named`]): the permit of the
/// attribute's expansion (named by the function's path for a single call, by a zero-sized type
/// of its call site in the attempt driver), and the one every admission path makes ([`Permit`]
/// wraps the one named by a plain path). Its public methods
/// are [`Permit`]'s. Not for use outside the expansion.
///
/// Its fields are public for the expansion alone, which builds it from a [`RawPermit`] and
/// reports through `raw` with functions that take the name as an argument: those are compiled
/// once per crate, while a function generic over `N` would be compiled again for each annotated
/// function. Only the drop (a cancelled or panicking call) asks `site` for the name.
#[must_use = "report the outcome with `success()`, `failure()` or `ignore()`"]
pub struct NamedPermit<'a, N: Named = FnName> {
    /// Where the permit finds its function's name. First: with the name in front of the breaker
    /// and the admission, `Breaker::try_acquire` returns its permit as it did when the three were
    /// fields of one struct (two register moves fewer on its closed path).
    #[doc(hidden)]
    pub site: N,
    /// The breaker and the admission.
    #[doc(hidden)]
    pub raw: RawPermit<'a>,
}

/// A permit without its name: the breaker that admitted (or rejected) the call and the admission.
/// Reports through it take the function's name as an argument (see [`NamedPermit`]); it has no
/// drop of its own, the [`NamedPermit`] around it reports a call dropped unreported. Not for use
/// outside the expansion.
pub struct RawPermit<'a> {
    pub(super) core: &'a Circuit,
    /// The admission (see the module docs): the mode and generation it was admitted
    /// under with its bulkhead bit and admission time, or a rejection with its wait. Inert once
    /// settled (or when rejected).
    pub(super) admission: Word,
}

impl<'a> RawPermit<'a> {
    /// The permit of `core` with `admission`.
    #[inline(always)]
    pub(super) fn new(core: &'a Circuit, admission: Word) -> Self {
        RawPermit { core, admission }
    }

    /// The breaker that issued this permit (read by the shared store's strict mode).
    #[inline(always)]
    #[cfg_attr(not(feature = "store"), allow(dead_code))]
    pub(crate) fn core(&self) -> &'a Circuit {
        self.core
    }

    /// The key of the breaker that issued this permit.
    pub(crate) fn key(&self) -> Key {
        self.core.key.clone()
    }

    /// This permit, naming its function through `site` (what the expansion builds).
    #[cfg(test)]
    pub(crate) fn named<N: Named>(self, site: N) -> NamedPermit<'a, N> {
        NamedPermit { site, raw: self }
    }
}

impl<'a, N: Named> NamedPermit<'a, N> {
    /// The permit of `core` with `admission`, naming its function through `site`.
    #[inline(always)]
    pub(super) fn new(core: &'a Circuit, admission: Word, site: N) -> Self {
        NamedPermit {
            raw: RawPermit::new(core, admission),
            site,
        }
    }

    /// The same admission, naming its function through `site`; this permit is settled (it
    /// reports nothing).
    #[inline(always)]
    pub(crate) fn named<M: Named>(mut self, site: M) -> NamedPermit<'a, M> {
        let named = NamedPermit::new(self.raw.core, self.raw.admission, site);
        self.raw.admission = Word::SETTLED;
        named
    }

    /// This permit's admission; the permit is settled (it reports nothing).
    #[inline(always)]
    pub(super) fn into_admission(mut self) -> Word {
        let word = self.raw.admission;
        self.raw.admission = Word::SETTLED;
        word
    }
}

impl<N: Named> NamedPermit<'_, N> {
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

    /// The call failed in a way that counts, and the server asked to be left alone for `wait`
    /// (see [`Permit::failure_after`]).
    #[inline]
    pub fn failure_after(mut self, wait: Duration) {
        self.raw.failed_after(Some(wait), self.site.name());
    }

    /// The call ended with an error that does not count as a failure (a business error): it
    /// does not affect the circuit, or counts as a success when the policy says
    /// [`Others::Success`](crate::Others::Success) ([`Policy::others`](crate::Policy::others)).
    #[inline]
    pub fn ignore(mut self) {
        self.raw.ignored(self.site.name());
    }

    /// [`success`](Permit::success) in place (see [`RawPermit::succeeded`]).
    #[inline(always)]
    pub(crate) fn succeeded(&mut self) {
        self.raw.succeeded(self.site.name());
    }

    /// [`failure`](Permit::failure) in place (see [`RawPermit::succeeded`]).
    #[inline]
    pub(crate) fn failed(&mut self) {
        self.raw.failed(self.site.name());
    }

    /// [`ignored_outright`](RawPermit::ignored_outright), consuming the permit.
    #[inline]
    pub(crate) fn ignore_outright(mut self) {
        self.raw.ignored_outright(self.site.name());
    }

    /// Reports `result`: `Ok` is a success, an error `is_failure` accepts a failure, any other
    /// error does not count.
    pub(super) fn report<T, E>(self, result: &Result<T, E>, is_failure: impl FnOnce(&E) -> bool) {
        match result {
            Ok(_) => self.success(),
            Err(e) if is_failure(e) => self.failure(),
            Err(_) => self.ignore(),
        }
    }

    /// Reports `result` as `is_failure` judges it: accepted, a failure; otherwise a success for
    /// `Ok` and not counted for `Err`.
    pub(super) fn report_classified<T, E>(
        self,
        result: &Result<T, E>,
        is_failure: impl FnOnce(&Result<T, E>) -> bool,
    ) {
        match (is_failure(result), result) {
            (true, _) => self.failure(),
            (false, Ok(_)) => self.success(),
            (false, Err(_)) => self.ignore(),
        }
    }

    /// The key of the breaker that issued this permit.
    pub(crate) fn key(&self) -> Key {
        self.raw.key()
    }

    /// True when this call is a half-open probe.
    #[must_use]
    pub fn is_probe(&self) -> bool {
        self.raw.is_probe()
    }

    /// Why the call was rejected, when it was (see [`RawPermit::rejection`]).
    #[inline(always)]
    pub(crate) fn rejection(&self) -> Option<Error> {
        self.raw.rejection()
    }

    /// The rejection code of the permit's admission (0: admitted).
    #[inline(always)]
    pub(crate) fn rejection_code(&self) -> u64 {
        self.raw.admission.rejection()
    }

    #[inline(always)]
    pub(super) fn rejection_error(&self, code: u64) -> Error {
        self.raw.rejection_error(code)
    }
}

impl RawPermit<'_> {
    /// [`success`](Permit::success) in place, for the function named `site`: the attribute's
    /// expansion reports through these, so the permit is never moved (a move of a value just
    /// written costs a store-forwarding stall). Reporting twice is harmless: the second report
    /// does nothing.
    #[inline(always)]
    pub(crate) fn succeeded(&mut self, site: FnName) {
        self.settle(Verdict::Success, site);
    }

    /// [`failure`](Permit::failure) in place (see [`succeeded`](RawPermit::succeeded)).
    #[inline]
    pub(crate) fn failed(&mut self, site: FnName) {
        self.settle(Verdict::Failure, site);
    }

    /// [`failure_after`](Permit::failure_after) in place, or [`failed`](RawPermit::failed)
    /// without a wait.
    #[inline]
    pub(crate) fn failed_after(&mut self, wait: Option<Duration>, site: FnName) {
        if let Some(wait) = wait
            && !self.admission.inert()
        {
            self.core.push_back(wait);
        }
        self.failed(site);
    }

    /// [`ignore`](Permit::ignore) in place (see [`succeeded`](RawPermit::succeeded)).
    #[inline]
    pub(crate) fn ignored(&mut self, site: FnName) {
        let verdict = self.core.uncounted();
        self.settle(verdict, site);
    }

    /// Reports the call as ignored (neither a success nor a failure), whatever
    /// [`Policy::others`](crate::Policy::others) says: its error was converted from an inner
    /// breaker's rejection.
    #[inline]
    pub(crate) fn ignored_outright(&mut self, site: FnName) {
        self.settle(Verdict::Ignored, site);
    }

    /// True when this call is a half-open probe.
    fn is_probe(&self) -> bool {
        self.admission.state() == State::HalfOpen && !self.admission.inert()
    }

    /// Why the call was rejected, when it was. Permits handed out by
    /// [`Breaker::try_acquire`] are never rejected; the attribute's expansion asks this instead of
    /// matching a `Result`, which keeps the admitted path free of moves.
    #[inline(always)]
    pub(crate) fn rejection(&self) -> Option<Error> {
        match self.admission.rejection() {
            0 => None,
            code => Some(self.rejection_error(code)),
        }
    }

    /// True when the call was rejected ([`rejection`](RawPermit::rejection) is `Some`).
    #[inline(always)]
    pub(crate) fn is_rejected(&self) -> bool {
        self.admission.rejection() != 0
    }

    #[inline(always)]
    pub(super) fn rejection_error(&self, code: u64) -> Error {
        error_for_rejection(&self.core.key, code, self.admission)
    }

    /// Reports `outcome` in place for the function named `site` (see [`settle_admission`]).
    #[inline(always)]
    pub(super) fn settle(&mut self, outcome: Verdict, site: FnName) {
        settle_admission(self.core, &mut self.admission, site, outcome);
    }

    /// The error of this permit's rejection, or an open circuit's (with no wait) when it was
    /// admitted.
    #[inline(always)]
    pub(crate) fn rejection_or_open(&self) -> Error {
        error_of_admission(self.core, self.admission)
    }
}

/// Reports `outcome` for the call admitted with `word` by `core`, named `site`, unless `word` is
/// inert (rejected or settled), and settles `word`. `inline(always)` only without
/// `debug_assertions` (ARCHITECTURE.md, "Inlining").
#[cfg_attr(debug_assertions, inline)]
#[cfg_attr(not(debug_assertions), inline(always))]
fn settle_admission(core: &Circuit, word: &mut Word, site: FnName, outcome: Verdict) {
    if !word.inert() {
        // Settled before the report runs: whatever unwinds out of it, the drop that follows
        // does not report (or release a bulkhead slot) a second time.
        let ticket = Ticket {
            admission: *word,
            site,
        };
        *word = Word::SETTLED;
        core.finish(ticket, outcome);
    }
}

/// The error of the rejection `word` carries, or an open circuit's (with no wait) when `word` was
/// admitted. `inline(always)` only without `debug_assertions` (ARCHITECTURE.md, "Inlining").
#[cfg_attr(debug_assertions, inline)]
#[cfg_attr(not(debug_assertions), inline(always))]
fn error_of_admission(core: &Circuit, word: Word) -> Error {
    match word.rejection() {
        0 => Error::new(core.key.clone(), Reason::Open, None),
        code => error_for_rejection(&core.key, code, word),
    }
}

impl<N: Named> Drop for NamedPermit<'_, N> {
    #[inline(always)]
    fn drop(&mut self) {
        if !self.raw.admission.inert() {
            // Values, not the permit's address: the permit stays in registers on the hot path,
            // where the check above folds away after a report.
            let ticket = Ticket {
                admission: self.raw.admission,
                site: self.site.name(),
            };
            self.raw.admission = Word::SETTLED;
            abandon(self.raw.core, ticket);
        }
    }
}

/// Reports the admission of a permit dropped without a report (one copy, whatever the permit's
/// [`Named`]): a panic counts as a failure, anything else is a cancellation.
#[cold]
#[inline(never)]
pub(super) fn abandon(core: &Circuit, ticket: Ticket) {
    core.finish(ticket, abandoned());
}

/// How an [`OwnedPermit`] holds its breaker: a reference count, or, for a circuit kept for the
/// life of the process (the one a fixed-key tower layer wraps, see [`Circuit::kept`]), a plain
/// reference, which costs a call no atomic read-modify-write to take and to give back.
#[derive(Clone)]
pub(crate) enum Holder {
    /// A counted reference.
    Counted(Arc<Circuit>),
    /// A circuit that is never freed (only the tower layer makes one).
    Kept(&'static Circuit),
}

impl std::ops::Deref for Holder {
    type Target = Circuit;

    #[inline(always)]
    fn deref(&self) -> &Circuit {
        match self {
            Holder::Counted(core) => core,
            Holder::Kept(core) => core,
        }
    }
}

/// A [`Permit`] that holds its breaker, for futures that outlive the [`Breaker`] handle (the
/// tower layer's response future). Reports and drops exactly like a [`Permit`]: dropped without a
/// report, it counts as a failure when the thread is panicking and otherwise gives its slot back.
#[must_use = "report the outcome with `success()`, `failure()` or `ignore()`"]
pub struct OwnedPermit {
    pub(super) core: Holder,
    /// As [`Permit`]'s.
    pub(super) admission: Word,
    pub(super) site: FnName,
}

/// The error of a permit rejected with `code` (see [`rejected`]), whose `word` carries the wait
/// before the next probe. `inline(always)` only without `debug_assertions` (ARCHITECTURE.md,
/// "Inlining").
#[cfg_attr(debug_assertions, inline)]
#[cfg_attr(not(debug_assertions), inline(always))]
pub(super) fn error_for_rejection(key: &Key, code: u64, word: Word) -> Error {
    // Only `rejected(reason.bits(), …)` makes a rejected admission, so `code` is a reason's number.
    const { assert!(NO_WAIT == u64::MAX) };
    Error::from_permit(key.clone(), code, wait_of(word))
}

/// How a permit dropped without a report ends: a panic is a failure, anything else a cancellation.
pub(super) fn abandoned() -> Verdict {
    if std::thread::panicking() {
        Verdict::Failure
    } else {
        Verdict::Ignored
    }
}

impl<N: Named> fmt::Debug for NamedPermit<'_, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.raw, f)
    }
}

impl fmt::Debug for RawPermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("key", &self.core.key)
            .field("probe", &self.is_probe())
            .finish()
    }
}

/// A permit's admission, handed back when it reports.
#[derive(Clone, Copy)]
pub(super) struct Ticket {
    /// The permit's admission (see the module docs).
    pub(super) admission: Word,
    pub(super) site: FnName,
}

impl Ticket {
    /// When the call was admitted, in nanoseconds of the breaker's clock modulo 2^48 (0: not
    /// timed).
    #[inline(always)]
    pub(super) fn admitted_at(self) -> u64 {
        self.admission.0 >> TIME_SHIFT
    }

    /// True when the call carries an admission time (timed, or outcome events were wanted).
    #[inline(always)]
    pub(super) fn stamped(self) -> bool {
        self.admission.0 >> TIME_SHIFT != 0
    }

    /// How long the call took until `now`, modulo 2^48 ns (about 3.3 days).
    #[inline(always)]
    pub(super) fn elapsed(self, now: u64) -> u64 {
        now.wrapping_sub(self.admitted_at()) & TIME_MASK
    }

    /// [`elapsed`](Ticket::elapsed) for an outcome event. A call admitted at a time that is 0
    /// modulo 2^48 carries 1 (see [`marked`]): reported in the same nanosecond, it took 0 ns, not
    /// 2^48 - 1.
    #[inline]
    pub(super) fn latency(self, now: u64) -> u64 {
        match self.elapsed(now) {
            TIME_MASK => 0,
            elapsed => elapsed,
        }
    }

    /// True when the call holds a bulkhead slot, to give back when it reports.
    #[inline(always)]
    pub(super) fn holds_slot(self) -> bool {
        self.admission.0 & BULKHEAD_BIT != 0
    }

    /// The same admission without its bulkhead slot (given back already).
    #[inline(always)]
    pub(super) fn without_slot(self) -> Ticket {
        Ticket {
            admission: Word(self.admission.0 & !BULKHEAD_BIT),
            ..self
        }
    }
}

/// Why admission failed (turned into an [`Error`] only when someone asks).
#[derive(Debug, Clone, Copy)]
pub(super) struct Rejection {
    pub(super) reason: Reason,
    /// Nanoseconds until the next probe; [`NO_WAIT`] when the reason has none.
    pub(super) retry_after: u64,
}
