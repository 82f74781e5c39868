//! What a rejected call becomes ([`Error`]) and why a fallback runs ([`Cause`]).

use std::fmt;
use std::time::Duration;

pub use crate::key::Key;

/// Why a call did not run or did not finish: rejected before it started (every reason but
/// one), or, for [`Reason::TimedOut`], abandoned after it went out. [`Reason::code`] is its
/// stable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// The circuit is open: recent calls failed too often.
    Open,
    /// The circuit is half-open and every probe slot is taken.
    HalfOpenFull,
    /// The circuit is recovering progressively and this call fell outside the admitted share.
    Recovering,
    /// The circuit was forced open by an operator ([`Breaker::force_open`](crate::Breaker::force_open)).
    ForcedOpen,
    /// The per-key concurrency limit is reached.
    BulkheadFull,
    /// The call took longer than its timeout (`timeout = "…"`, after every retry). Unlike every
    /// other reason, the backend **was** called: the call went out and its result is unknown.
    TimedOut,
    /// Adaptive throttling (`throttle = 2.0`) rejected the call while the circuit is closed: the
    /// window's recent calls succeed too rarely, and this call fell in the share shed by the
    /// rejection probability `max(0, (requests − k × accepts) / (requests + 1))`. The next call
    /// may go out: it carries no wait.
    Throttled,
}

impl Reason {
    /// The reason's stable code: `open`, `half_open_full`, `recovering`, `forced_open`,
    /// `bulkhead_full`, `timed_out` or `throttled`.
    ///
    /// These strings are stable (a new reason adds a code, none changes), so log queries, HTTP
    /// bodies, dashboards and traces can match on them: the per-call outcome event's `reason`
    /// field and the axum layer's 503 body use them. [`Display`](fmt::Display) is a sentence for
    /// people and may change.
    ///
    /// ```
    /// assert_eq!(fusebox::Reason::HalfOpenFull.code(), "half_open_full");
    /// ```
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            Reason::Open => "open",
            Reason::HalfOpenFull => "half_open_full",
            Reason::Recovering => "recovering",
            Reason::ForcedOpen => "forced_open",
            Reason::BulkheadFull => "bulkhead_full",
            Reason::TimedOut => "timed_out",
            Reason::Throttled => "throttled",
        }
    }

    /// The reason's number in a rejected permit's word: `1..=7`, never 0 (which means "not
    /// rejected"). Explicit so reordering the variants cannot change what a stored number means.
    #[inline(always)]
    pub(crate) const fn bits(self) -> u64 {
        match self {
            Reason::Open => 1,
            Reason::HalfOpenFull => 2,
            Reason::Recovering => 3,
            Reason::ForcedOpen => 4,
            Reason::BulkheadFull => 5,
            Reason::TimedOut => 6,
            Reason::Throttled => 7,
        }
    }

    /// The reason of a number made by [`Reason::bits`] (`None` for any other number).
    #[inline(always)]
    pub(crate) const fn from_bits(code: u64) -> Option<Reason> {
        Some(match code {
            1 => Reason::Open,
            2 => Reason::HalfOpenFull,
            3 => Reason::Recovering,
            4 => Reason::ForcedOpen,
            5 => Reason::BulkheadFull,
            6 => Reason::TimedOut,
            7 => Reason::Throttled,
            _ => return None,
        })
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reason::Open => "open",
            Reason::HalfOpenFull => "half-open and every probe slot is taken",
            Reason::Recovering => "recovering and admitting only part of the traffic",
            Reason::ForcedOpen => "forced open",
            Reason::BulkheadFull => "at its concurrency limit",
            Reason::TimedOut => "timed out",
            Reason::Throttled => "throttling calls while recent ones fail",
        })
    }
}

/// A call that the breaker rejected, or (for [`Reason::TimedOut`]) abandoned after it went out.
///
/// The function's error type receives it through `From<fusebox::Error>`; a fallback receives it as
/// [`Cause::Rejected`] (rejected: the backend was never called) or [`Cause::TimedOut`] (the call went
/// out and its result is unknown). Without a fallback, [`Error::is_rejected`] makes the same
/// distinction. It never allocates: building one on the rejection path is free.
///
/// It is three words (24 bytes on 64-bit targets): the key, and one word packing the reason with
/// the wait, so a user's error enum that wraps it, and every `Result` carrying one, stays small.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    key: Key,
    /// The reason's code ([`Reason::bits`]) in the top [`REASON_BITS`] bits; below it the wait
    /// in nanoseconds, or [`NO_WAIT`] for none.
    packed: u64,
}

/// Bits of [`Error::packed`] above the wait that hold the reason's code (codes are `1..=7`).
const REASON_BITS: u32 = 3;
/// Bits of [`Error::packed`] that hold the wait.
const WAIT_BITS: u32 = u64::BITS - REASON_BITS;
/// The wait field's value for "no wait"; a longer wait (over 73 years) is clamped below it.
const NO_WAIT: u64 = (1 << WAIT_BITS) - 1;

impl Error {
    /// The error of a call of `key` that fusebox did not let through or that ran out of time, for
    /// `reason`, with the wait the caller is told: what a store or an adapter returns in
    /// fusebox's own terms (a store that does not answer in time says [`Reason::TimedOut`]).
    #[must_use]
    pub fn new(key: Key, reason: Reason, retry_after: Option<Duration>) -> Self {
        let wait = retry_after.map_or(u64::MAX, |wait| {
            u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX - 1)
        });
        Error::from_code(key, reason.bits(), wait)
    }

    /// The error of a rejected permit: `code` from [`Reason::bits`], `wait` in nanoseconds
    /// (`u64::MAX`: none), packed as they come.
    #[inline(always)]
    pub(crate) fn from_code(key: Key, code: u64, wait: u64) -> Self {
        let wait = if wait == u64::MAX {
            NO_WAIT
        } else {
            wait.min(NO_WAIT - 1)
        };
        Error {
            key,
            packed: (code << WAIT_BITS) | wait,
        }
    }

    /// The error of a rejected permit: `code` from [`Reason::bits`], `wait` in nanoseconds below
    /// 2^61 - 1, or `u64::MAX` for none (the permit keeps waits far shorter: nothing to clamp).
    #[inline(always)]
    pub(crate) fn from_permit(key: Key, code: u64, wait: u64) -> Self {
        Error {
            key,
            packed: (code << WAIT_BITS) | (wait & NO_WAIT),
        }
    }

    /// The same key with `reason` and no wait (a retry rejected after a timed-out attempt ends
    /// with that timeout, whose key is the rejection's).
    pub(crate) fn with_reason(self, reason: Reason) -> Self {
        Error::new(self.key, reason, None)
    }

    /// The key of the breaker that rejected the call.
    #[must_use]
    pub fn key(&self) -> &str {
        self.key.as_str()
    }

    /// Why the call was rejected, or [`Reason::TimedOut`] when it went out and ran out of time.
    #[must_use]
    pub fn reason(&self) -> Reason {
        // Every `Error` is made by `Error::new` from a `Reason`, so the code is always valid.
        Reason::from_bits(self.packed >> WAIT_BITS).unwrap_or(Reason::Open)
    }

    /// When the circuit is open: how long until it admits a probe. `None` otherwise.
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        match self.packed & NO_WAIT {
            NO_WAIT => None,
            nanos => Some(Duration::from_nanos(nanos)),
        }
    }

    /// [`retry_after`](Error::retry_after) in whole seconds, for an HTTP `Retry-After` header
    /// (the axum integration and the checkout example send it). The rule: the wait rounded up to
    /// the next second, except that a part of a second of at most
    /// [`RETRY_AFTER_SLACK`](Error::RETRY_AFTER_SLACK) (10 ms) is dropped, and never less than 1.
    /// An open deadline is kept in whole milliseconds, rounded up, so the first rejection of a
    /// circuit open for 2 s can read a wait of 2.0005 s: that is `2`, not `3`. A client that
    /// waits this long comes back at most 10 ms before the next probe is admitted (and then
    /// gets `1`), and never a whole second after it. `None` when the rejection carries no wait
    /// (a circuit forced open, a full bulkhead).
    ///
    /// ```
    /// use std::time::Duration;
    /// use fusebox::{Breaker, Policy, clock::FakeClock, Registry};
    ///
    /// let clock = FakeClock::new();
    /// let registry = Registry::with_clock(clock.clone());
    /// let policy = Policy::new().consecutive(1).open_for(Duration::from_secs(2));
    /// let breaker = registry.breaker("payment", policy).unwrap();
    /// clock.advance(Duration::from_micros(500)); // not on a whole millisecond
    /// breaker.try_acquire().unwrap().failure();
    /// let rejected = breaker.try_acquire().unwrap_err();
    /// assert!(rejected.retry_after().unwrap() > Duration::from_secs(2));
    /// assert_eq!(rejected.retry_after_secs(), Some(2));
    /// clock.advance(Duration::from_millis(1500));
    /// assert_eq!(breaker.try_acquire().unwrap_err().retry_after_secs(), Some(1));
    /// ```
    #[must_use]
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after().map(whole_seconds)
    }

    /// The part of a second a [`retry_after_secs`](Error::retry_after_secs) drops instead of
    /// rounding up.
    pub const RETRY_AFTER_SLACK: Duration = Duration::from_millis(10);

    /// True when the breaker rejected the call before it started: the backend was never called,
    /// so queueing the call or sending it elsewhere cannot do the work twice. False only for
    /// [`Reason::TimedOut`], where the call went out and may have done its work. The same
    /// distinction as [`Cause::Rejected`] against [`Cause::TimedOut`].
    #[must_use]
    pub fn is_rejected(&self) -> bool {
        self.reason() != Reason::TimedOut
    }

    /// True when the call never reached the backend because the circuit is open or probing.
    #[must_use]
    pub fn is_circuit_open(&self) -> bool {
        matches!(
            self.reason(),
            Reason::Open | Reason::HalfOpenFull | Reason::ForcedOpen
        )
    }
}

/// `wait` in whole seconds as [`Error::retry_after_secs`] rounds it: up, unless the part of a
/// second is at most [`Error::RETRY_AFTER_SLACK`]; at least 1.
pub(crate) fn whole_seconds(wait: Duration) -> u64 {
    let slack = Error::RETRY_AFTER_SLACK.as_nanos() as u32;
    let secs = wait
        .as_secs()
        .saturating_add(u64::from(wait.subsec_nanos() > slack));
    secs.max(1)
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("key", &self.key)
            .field("reason", &self.reason())
            .field("retry_after", &self.retry_after())
            .finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason() {
            Reason::TimedOut => write!(f, "call through circuit `{}` timed out", self.key)?,
            reason => write!(f, "circuit `{}` is {reason}", self.key)?,
        }
        if let Some(wait) = self.retry_after() {
            write!(f, "; next probe in {wait:?}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// Why a fallback runs: the breaker rejected the call, the call timed out, or it failed with a
/// counted failure.
///
/// A fallback takes the function's own parameters followed by a `Cause<E>`, where `E` is the
/// function's error type. Errors that do not count as failures never reach the fallback.
///
/// The variants say what the backend saw, which decides what the fallback may safely do:
///
/// | variant | backend called? | result |
/// |---|---|---|
/// | [`Rejected`](Cause::Rejected) | no (with `retry`: no attempt whose result is unknown) | nothing happened: safe to queue or send elsewhere |
/// | [`TimedOut`](Cause::TimedOut) | yes | unknown: the work may have been done |
/// | [`Failed`](Cause::Failed) | yes | the last attempt failed with a counted failure |
///
/// The enum is deliberately exhaustive, so a `match` that forgets the timed-out case does not
/// compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause<E> {
    /// The breaker rejected the call before it started (open, half-open full, recovering, forced
    /// open, bulkhead full, throttled): the backend was never called. With `retry`, the breaker rejected the
    /// first attempt, or rejected a retry after attempts that failed with counted failures (whose
    /// results are known); never after a timed-out attempt.
    Rejected(Error),
    /// The call went out and ran out of time (`timeout`; with `retry`, the last attempt timed out,
    /// or a retry was rejected after one did): the backend was called and its result is unknown.
    /// The error's reason is [`Reason::TimedOut`].
    TimedOut(Error),
    /// The call ran and failed with an error classified as a failure (with `retry`, the last
    /// attempt's error; earlier attempts ran too, and one of them may have timed out).
    Failed(E),
}

impl<E> Cause<E> {
    /// The cause of a fusebox [`Error`]: [`Cause::TimedOut`] for [`Reason::TimedOut`],
    /// [`Cause::Rejected`] for every rejection.
    #[must_use]
    pub fn from_error(error: Error) -> Self {
        if error.is_rejected() {
            Cause::Rejected(error)
        } else {
            Cause::TimedOut(error)
        }
    }

    /// The rejection, when the breaker rejected the call (the backend was never called).
    #[must_use]
    pub fn rejected(&self) -> Option<&Error> {
        match self {
            Cause::Rejected(e) => Some(e),
            Cause::TimedOut(_) | Cause::Failed(_) => None,
        }
    }

    /// The timeout, when the call went out and ran out of time (its result is unknown).
    #[must_use]
    pub fn timed_out(&self) -> Option<&Error> {
        match self {
            Cause::TimedOut(e) => Some(e),
            Cause::Rejected(_) | Cause::Failed(_) => None,
        }
    }

    /// The error, when the call ran and failed.
    #[must_use]
    pub fn failed(&self) -> Option<&E> {
        match self {
            Cause::Failed(e) => Some(e),
            Cause::Rejected(_) | Cause::TimedOut(_) => None,
        }
    }

    /// True when the call ended because the key's retry budget
    /// ([`Policy::retry_budget`](crate::Policy::retry_budget)) rejected a retry: the cause is
    /// the last attempt's ([`Failed`](Cause::Failed) with its error, or
    /// [`TimedOut`](Cause::TimedOut)), and attempts were left. False for
    /// [`Rejected`](Cause::Rejected) and for a call whose attempts ran out.
    ///
    /// It reads a mark the attempt driver leaves on the thread and tokio task when the call
    /// ends, which the next admission of an annotated function on that thread clears (the
    /// rules of "Nested breakers" in [`guide::semantics`](crate::guide::semantics)): ask it in
    /// the fallback, before the fallback calls another annotated function.
    ///
    /// ```
    /// use fusebox::{Cause, Policy, Registry, clock::FakeClock};
    /// use std::sync::LazyLock;
    ///
    /// static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(FakeClock::new()));
    /// // 0 % of first attempts and 1 retry per second: 10 retries over the 10 s span.
    /// const BUDGET: Policy = Policy::new().retry_budget(0, 1).consecutive(1_000);
    ///
    /// #[derive(Debug, PartialEq)]
    /// struct Down;
    /// impl From<fusebox::Error> for Down {
    ///     fn from(_: fusebox::Error) -> Self { Down }
    /// }
    ///
    /// #[fusebox::circuit_breaker(key = "doc-budget", policy = BUDGET, retry = 3,
    ///                            registry = REGISTRY, fallback = why)]
    /// async fn fetch() -> Result<&'static str, Down> {
    ///     Err(Down)
    /// }
    ///
    /// async fn why(cause: Cause<Down>) -> Result<&'static str, Down> {
    ///     Ok(if cause.retry_rejected() { "budget" } else { "attempts" })
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// // 5 calls take 2 retries each: the budget's 10 retries.
    /// for _ in 0..5 {
    ///     assert_eq!(fetch().await, Ok("attempts"));
    /// }
    /// assert_eq!(fetch().await, Ok("budget"), "no retry left: one attempt only");
    /// # });
    /// ```
    #[must_use]
    pub fn retry_rejected(&self) -> bool {
        self.went_out() && crate::nested::budget_rejected()
    }

    /// True when the backend was called ([`TimedOut`](Cause::TimedOut) or
    /// [`Failed`](Cause::Failed)); false only for [`Rejected`](Cause::Rejected).
    #[must_use]
    pub fn went_out(&self) -> bool {
        !matches!(self, Cause::Rejected(_))
    }

    /// Turns the cause back into the function's error, using `From<fusebox::Error>` for rejections
    /// and timeouts (whose [`Error::reason`] tells them apart). A rejection's error is marked like
    /// the attribute's own conversion, so the breaker of an enclosing annotated function does not
    /// count it (see "Nested breakers" in [`guide::semantics`](crate::guide::semantics)).
    #[must_use]
    pub fn into_error(self) -> E
    where
        E: From<Error>,
    {
        match self {
            Cause::Rejected(e) => {
                let error = E::from(e);
                crate::nested::mark();
                error
            }
            Cause::TimedOut(e) => E::from(e),
            Cause::Failed(e) => e,
        }
    }
}

impl<E: fmt::Display> fmt::Display for Cause<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Rejected(e) | Cause::TimedOut(e) => fmt::Display::fmt(e, f),
            Cause::Failed(e) => write!(f, "call failed: {e}"),
        }
    }
}

/// A cause is an error too, so a fallback can return it boxed or wrap it: its
/// [`source`](std::error::Error::source) is the error it carries, the rejection or timeout's
/// [`Error`], or the function's own error `E`.
impl<E: std::error::Error + 'static> std::error::Error for Cause<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Cause::Rejected(e) | Cause::TimedOut(e) => Some(e),
            Cause::Failed(e) => Some(e),
        }
    }
}

#[cfg(test)]
mod tests;
