//! Permits: the proof of admission a call carries until it reports ([`Permit`], [`OwnedPermit`]),
//! and what a refused admission hands back.

use super::*;

/// Permission to make one call, obtained from [`Breaker::try_acquire`].
///
/// Report how the call ended with [`success`](Permit::success), [`failure`](Permit::failure) or
/// [`ignore`](Permit::ignore). A permit dropped without a report counts as a failure when the thread
/// is panicking, and otherwise as a cancellation: its slot is given back and nothing is counted, so a
/// cancelled half-open probe never leaves the circuit stuck.
#[must_use = "report the outcome with `success()`, `failure()` or `ignore()`"]
pub struct Permit<'a> {
    pub(super) core: &'a Core,
    /// The state word it was admitted under; inert once settled (or when refused).
    pub(super) word: Word,
    /// One word read two ways (kept as one so a permit stays three words). Admitted: the admission
    /// time in nanoseconds when calls are timed or outcome events are wanted (0 otherwise), with
    /// [`BULKHEAD_BIT`] set when the call holds a bulkhead slot; read it through
    /// [`Ticket::admitted_at`] and [`Ticket::holds_slot`]. Refused: the wait before the next probe
    /// in nanoseconds ([`NO_WAIT`]: none), read by [`refusal_error`].
    pub(super) stamp: u64,
    pub(super) site: FnName,
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
    #[inline(always)]
    pub(crate) fn succeeded(&mut self) {
        self.settle(Verdict::Success);
    }

    /// [`failure`](Permit::failure) in place (see [`succeeded`](Permit::succeeded)).
    #[inline]
    pub(crate) fn failed(&mut self) {
        self.settle(Verdict::Failure);
    }

    /// [`ignore`](Permit::ignore) in place (see [`succeeded`](Permit::succeeded)).
    #[inline]
    pub(crate) fn ignored(&mut self) {
        self.settle(Verdict::Released);
    }

    /// What the breaker needs back to account for the call, as plain values (the permit's own
    /// address never escapes, so it stays in registers on the hot path).
    #[inline(always)]
    pub(super) fn ticket(&self) -> Ticket {
        Ticket {
            word: self.word,
            stamp: self.stamp,
            site: self.site,
        }
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
        self.core.key.clone()
    }

    /// True when this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.word.state() == State::HalfOpen && !self.word.inert()
    }

    /// Why the call was refused, when it was. Permits handed out by
    /// [`Breaker::try_acquire`] are never refused; the attribute's expansion asks this instead of
    /// matching a `Result`, which keeps the admitted path free of moves.
    #[inline(always)]
    pub(crate) fn refusal(&self) -> Option<Error> {
        match self.word.refusal() {
            0 => None,
            code => Some(self.refusal_error(code)),
        }
    }

    /// True when the call was refused ([`refusal`](Permit::refusal) is `Some`).
    #[inline(always)]
    pub(crate) fn is_refused(&self) -> bool {
        self.word.refusal() != 0
    }

    #[inline(always)]
    pub(super) fn refusal_error(&self, code: u64) -> Error {
        refusal_error(&self.core.key, code, self.stamp)
    }

    #[inline(always)]
    pub(super) fn settle(&mut self, outcome: Verdict) {
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
    pub(super) fn abandon(&mut self) {
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
    pub(super) core: Arc<Core>,
    pub(super) word: Word,
    pub(super) stamp: u64,
    pub(super) site: FnName,
}

impl OwnedPermit {
    /// The call succeeded.
    #[inline]
    pub fn success(mut self) {
        self.settle(Verdict::Success);
    }

    /// The call failed in a way that counts against the circuit.
    #[inline]
    pub fn failure(mut self) {
        self.settle(Verdict::Failure);
    }

    /// The call ended in a way that must not affect the circuit (a business error).
    #[inline]
    pub fn ignore(mut self) {
        self.settle(Verdict::Released);
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
            code => Some(refusal_error(&self.core.key, code, self.stamp)),
        }
    }

    /// Dropped unreported, in place: a failure when the thread is panicking, else a cancellation.
    #[inline]
    pub(crate) fn abandon(&mut self) {
        self.settle(abandoned());
    }

    /// Reports `outcome` in place; reporting twice is harmless (the second does nothing).
    #[inline]
    pub(crate) fn settle(&mut self, outcome: Verdict) {
        if !self.word.inert() {
            let ticket = Ticket {
                word: self.word,
                stamp: self.stamp,
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

/// The error of a permit refused with `code` (see [`Word::refused`]); `stamp` is the wait before
/// the next probe in nanoseconds, or [`NO_WAIT`].
#[inline(always)]
pub(super) fn refusal_error(key: &Key, code: u64, stamp: u64) -> Error {
    // Only `Word::refused(reason.code())` makes a refused word, so `code` is a reason's code.
    const { assert!(NO_WAIT == u64::MAX) };
    Error::from_code(key.clone(), code, stamp)
}

/// The admission time a permit's `stamp` carries (the bulkhead bit cleared).
#[inline(always)]
pub(super) fn admitted_at(stamp: u64) -> u64 {
    stamp & !BULKHEAD_BIT
}

/// How a permit dropped without a report ends: a panic is a failure, anything else a cancellation.
pub(super) fn abandoned() -> Verdict {
    if std::thread::panicking() {
        Verdict::Failure
    } else {
        Verdict::Released
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
pub(super) struct Ticket {
    pub(super) word: Word,
    /// The permit's `stamp` (see [`Permit`]): admission time and bulkhead bit.
    pub(super) stamp: u64,
    pub(super) site: FnName,
}

impl Ticket {
    /// When the call was admitted, in nanoseconds of the breaker's clock (0: not timed).
    #[inline(always)]
    pub(super) fn admitted_at(self) -> u64 {
        admitted_at(self.stamp)
    }

    /// True when the call holds a bulkhead slot, to give back when it reports.
    #[inline(always)]
    pub(super) fn holds_slot(self) -> bool {
        self.stamp & BULKHEAD_BIT != 0
    }
}

/// Why admission failed (turned into an [`Error`] only when someone asks).
#[derive(Debug, Clone, Copy)]
pub(super) struct Refusal {
    pub(super) reason: Reason,
    /// Nanoseconds until the next probe; [`NO_WAIT`] when the reason has none.
    pub(super) retry_after: u64,
}
