//! Timeouts, retries and deadlines composed with the breaker, for `async fn`s that ask for them.
//!
//! Order per attempt: bulkhead → breaker → timeout → call, inside the retry loop. Every attempt
//! asks the breaker for admission and is reported on its own; on a breaker shared through a store
//! (feature `store`) every attempt is admitted by the store (or the replica's view of it, in cached
//! mode) and its outcome recorded there, as a plain `async fn`'s call is. No retry follows a rejection (the circuit
//! is open, half-open full or the bulkhead is full) or an error that is not a counted failure.
//!
//! With a retry budget (`Policy::retry_budget`), each attempt is counted in the key's budget and
//! each retry must be allowed by it; a retry it rejects ends the call with the last attempt's
//! outcome, as when the attempts run out.
//!
//! A timeout is never reported as a rejection: when a retry is rejected after an attempt timed out,
//! the call ends with that timeout (the backend was called, its result is unknown). A retry rejected
//! after counted failures ends with the rejection: no attempt's result is unknown.

use std::future::Future;
use std::time::Duration;

use crate::breaker::{Named, NamedPermit};
use crate::error::{Error, Reason};

/// The longest single backoff delay.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Attempt settings of one annotated function (`timeout`, `retry`, `backoff`, `deadline`).
///
/// The timeout and the deadline are types: an attempt without a timeout is awaited as is
/// ([`Unbounded`]), with one inside its timer (a [`Duration`]), and a call without a deadline
/// keeps no start time ([`NoDeadline`]); the driver's future holds only what the call uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempts<L = Unbounded, D = NoDeadline> {
    /// Bound on each attempt: [`Unbounded`] or a [`Duration`].
    pub timeout: L,
    /// Total attempts (at least 1).
    pub retry: u32,
    /// Base delay of the exponential backoff between attempts (full jitter); zero: retry at once.
    pub backoff: Duration,
    /// Budget shared by all attempts, checked before each one: [`NoDeadline`] or a [`Duration`].
    pub deadline: D,
}

impl Attempts {
    /// One attempt, no timeout.
    pub const ONCE: Attempts = Attempts {
        timeout: Unbounded,
        retry: 1,
        backoff: Duration::ZERO,
        deadline: NoDeadline,
    };
}

/// No timeout: each attempt is awaited as is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unbounded;

/// No deadline: the attempts keep no start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoDeadline;

/// The bound on each attempt: [`Unbounded`], or a [`Duration`] (the attempt runs inside a timer).
pub trait AttemptLimit: Copy {
    /// An attempt's future under this bound.
    type Bounded<F: Future>: Future;
    /// Bounds `attempt`.
    fn bound<F: Future>(self, attempt: F) -> Self::Bounded<F>;
    /// The attempt's output, or `None` when it ran out of time.
    fn finished<F: Future>(output: <Self::Bounded<F> as Future>::Output) -> Option<F::Output>;
}

impl AttemptLimit for Unbounded {
    type Bounded<F: Future> = F;

    #[inline(always)]
    fn bound<F: Future>(self, attempt: F) -> F {
        attempt
    }

    #[inline(always)]
    fn finished<F: Future>(output: F::Output) -> Option<F::Output> {
        Some(output)
    }
}

impl AttemptLimit for Duration {
    type Bounded<F: Future> = tokio::time::Timeout<F>;

    #[inline]
    fn bound<F: Future>(self, attempt: F) -> tokio::time::Timeout<F> {
        tokio::time::timeout(self, attempt)
    }

    #[inline(always)]
    fn finished<F: Future>(
        output: Result<F::Output, tokio::time::error::Elapsed>,
    ) -> Option<F::Output> {
        output.ok()
    }
}

/// The budget shared by all attempts: [`NoDeadline`], or a [`Duration`] from the first attempt.
pub trait AttemptBudget: Copy {
    /// What the budget keeps from the start of the call (nothing without a deadline).
    type Started: Copy;
    /// The start of the call.
    fn start(self) -> Self::Started;
    /// True when a retry after `delay` still starts within the budget.
    fn allows(self, started: Self::Started, delay: Duration) -> bool;
}

impl AttemptBudget for NoDeadline {
    type Started = ();

    #[inline(always)]
    fn start(self) {}

    #[inline(always)]
    fn allows(self, (): (), _delay: Duration) -> bool {
        true
    }
}

impl AttemptBudget for Duration {
    type Started = tokio::time::Instant;

    #[inline]
    fn start(self) -> tokio::time::Instant {
        tokio::time::Instant::now()
    }

    #[inline]
    fn allows(self, started: tokio::time::Instant, delay: Duration) -> bool {
        started.elapsed() + delay < self
    }
}

/// How a call through [`run`] ended.
#[derive(Debug)]
pub enum Settled<T, E> {
    /// The call's own result: a success, or an error that does not count (passed through untouched).
    Done(Result<T, E>),
    /// The last attempt failed with a counted failure.
    Failed(E),
    /// The breaker rejected an attempt (a reason other than `TimedOut`: no attempt's result is
    /// unknown), or an attempt timed out and no later attempt succeeded (reason `TimedOut`: the
    /// call went out). `Cause::from_error` makes it the fallback's `Cause::Rejected` or
    /// `Cause::TimedOut`.
    Rejected(Error),
}

/// The wait for the recording of `permit`'s outcome in its breaker's store (strict mode), to be
/// made before the permit settles; nothing to wait for otherwise.
#[cfg(feature = "store")]
pub(super) fn recording_of<'a, N: Named>(
    permit: &NamedPermit<'a, N>,
) -> Option<crate::breaker::BoxFuture<'a, ()>> {
    crate::breaker::recording(permit.raw.core())
}

/// Without the `store` feature no outcome is recorded elsewhere.
#[cfg(not(feature = "store"))]
pub(super) fn recording_of<N: Named>(_permit: &NamedPermit<'_, N>) {}

/// The delay `retry` with `backoff = base` waits before attempt `attempt + 1` (`attempt` ≥ 1):
/// uniform in `0 ..= min(base × 2^(attempt-1), MAX_BACKOFF)` ("full jitter"), for an adapter
/// that retries as the attribute does (the reqwest middleware).
///
/// ```
/// use std::time::Duration;
/// let delay = fusebox::backoff(Duration::from_millis(100), 3);
/// assert!(delay <= Duration::from_millis(400));
/// ```
#[must_use]
pub fn backoff(base: Duration, attempt: u32) -> Duration {
    backoff_delay(&mut fastrand::Rng::new(), base, attempt)
}

/// [`backoff`] with the caller's random numbers.
pub(crate) fn backoff_delay(rng: &mut fastrand::Rng, base: Duration, attempt: u32) -> Duration {
    if base.is_zero() {
        return Duration::ZERO;
    }
    let exp = 1u32 << attempt.saturating_sub(1).min(20);
    let ceiling = base.saturating_mul(exp).min(MAX_BACKOFF);
    let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(rng.u64(0..=nanos))
}

/// Runs `attempt` under `cfg`, asking `admit` for a permit before each try; `is_failure` says
/// which errors count, `is_failed_ok` which `Ok` values do (`failure_if`; `|_| false` without it),
/// and `retry_after` the wait a counted error asked for (pushback, [`RetryAfter`](crate::load::pushback::RetryAfter);
/// `|_| None` for an error type without it).
///
/// Pushback: a counted error that asked for a wait reports it to the breaker, and the next
/// attempt starts no sooner than that wait (the delay is the larger of the backoff and the
/// wait). When the deadline leaves no room for it, or it is longer than [`MAX_BACKOFF`], the
/// call ends with that error instead of retrying early.
///
/// An `Ok` value that counts is a counted failure like a counted error: it is reported as one and
/// retried while attempts are left; when none is (or the deadline leaves no room) it is returned
/// as it is, in `Settled::Done`. A retry rejected after it ends with the rejection, as after a
/// counted error.
///
/// A plain function returning an `async move` block rather than an `async fn`: the block uses its
/// captured arguments in place, where an `async fn` would also hold a moved copy of each. Each
/// attempt's permit, result and outcome live in a block of their own, so the backoff's timer is
/// the only thing held across the wait between attempts. The timeout and the deadline are types
/// ([`AttemptLimit`], [`AttemptBudget`]), so without them the future holds neither a timer around
/// the attempt nor a start time.
#[expect(
    clippy::manual_async_fn,
    reason = "an `async fn` would hold a moved copy of each argument beside the captured one"
)]
pub fn run<'a, T, E, F, Fut, L: AttemptLimit, D: AttemptBudget, N: Named>(
    admit: impl Fn() -> Result<NamedPermit<'a, N>, Error>,
    cfg: &Attempts<L, D>,
    mut attempt: F,
    is_failure: impl Fn(&E) -> bool,
    is_failed_ok: impl Fn(&T) -> bool,
    retry_after: impl Fn(&E) -> Option<Duration>,
) -> impl Future<Output = Settled<T, E>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    async move {
        let started = cfg.deadline.start();
        let attempts = cfg.retry.max(1);
        let mut n = 0;
        // True once an attempt timed out (its error is rebuilt from the rejection's key: one
        // breaker key for every attempt, and a flag where an `Error` would be three words).
        let mut timed_out = false;
        loop {
            n += 1;
            // Only the delay's value crosses into the wait: a `Duration` borrowed before the
            // `.await` (`is_zero`) would be kept in the future across it.
            let delay = {
                // A shared breaker: the store admits every attempt (strict mode, or a cached view
                // that must ask). The admission is never borrowed here, so the future does not keep
                // it across the attempt.
                #[cfg(feature = "store")]
                let admitted = match crate::breaker::attempt_admission(admit()) {
                    Ok(admitted) => admitted,
                    Err(asking) => asking.await,
                };
                #[cfg(not(feature = "store"))]
                let admitted = admit();
                // The permit and the attempt's result live in a block of their own, which ends
                // before the recording is awaited: neither is kept across that wait.
                // Pushback: the wait the attempt's counted error asked for.
                let (failed, pushback, recording, budget) = {
                    let permit = match admitted {
                        Ok(permit) => permit,
                        Err(rejected) => return rejected_after(rejected, timed_out),
                    };
                    let result = L::finished::<Fut>(cfg.timeout.bound(attempt()).await);
                    // A key with a retry budget counts the attempt once it is over, so the future
                    // keeps nothing more across it (`None` without a budget).
                    let budget = permit.count_attempt();
                    // Strict mode: the wait for this attempt's recording, made before the permit
                    // settles (it reads what was reported when first polled), awaited after.
                    #[cfg_attr(not(feature = "store"), allow(clippy::let_unit_value))]
                    let recording = recording_of(&permit);
                    timed_out |= result.is_none();
                    let (failed, pushback) =
                        settle_attempt(permit, result, &is_failure, &is_failed_ok, &retry_after);
                    (failed, pushback, recording, budget)
                };
                // Strict mode: the attempt's outcome is recorded in the store before the call
                // returns or the next attempt asks for admission.
                #[cfg(feature = "store")]
                let failed = crate::breaker::after_recording(recording, failed).await;
                #[cfg(not(feature = "store"))]
                let () = recording;
                let (failed, counted) = failed;
                if !counted || n >= attempts {
                    return failed;
                }
                // The key's retry budget, asked last, may reject the retry: the call ends with
                // this attempt's outcome (`Cause::retry_rejected` tells).
                let retry_allowed = || budget.is_none_or(|budget| budget.allows_retry());
                let Some(delay) = retry_wait(cfg, n, started, pushback, retry_allowed) else {
                    return failed;
                };
                (!delay.is_zero()).then_some(delay)
            };
            if let Some(delay) = delay {
                tokio::time::sleep(delay).await;
            }
        }
    }
}

/// Reports one attempt's `result` (`None`: it timed out) on its permit: the call's outcome if
/// it ends here, true for a counted failure (an error, a timeout, or an `Ok` value
/// `is_failed_ok` counts: the only outcome that may be retried), and the wait a counted error
/// asked for (pushback).
#[inline]
pub(super) fn settle_attempt<T, E, N: Named>(
    permit: NamedPermit<'_, N>,
    result: Option<Result<T, E>>,
    is_failure: impl Fn(&E) -> bool,
    is_failed_ok: impl Fn(&T) -> bool,
    retry_after: impl Fn(&E) -> Option<Duration>,
) -> ((Settled<T, E>, bool), Option<Duration>) {
    let settled = match result {
        Some(Ok(value)) => {
            let counted = is_failed_ok(&value);
            if counted {
                permit.failure();
            } else {
                permit.success();
            }
            (Settled::Done(Ok(value)), counted)
        }
        Some(Err(error)) if is_failure(&error) => {
            let pushback = retry_after(&error);
            let mut permit = permit;
            let name = permit.site.name();
            permit.raw.failed_after(pushback, name);
            return ((Settled::Failed(error), true), pushback);
        }
        // Not counted: an inner breaker's rejection counts as nothing; any other
        // error as `Policy::others` says.
        Some(Err(error)) => {
            if crate::nested::rejected_inside::<true>() {
                permit.ignore_outright();
            } else {
                permit.ignore();
            }
            (Settled::Done(Err(error)), false)
        }
        None => {
            let error = Error::new(permit.key(), Reason::TimedOut, None);
            permit.failure();
            (Settled::Rejected(error), true)
        }
    };
    (settled, None)
}

/// The call's outcome when an attempt is rejected, after a timed-out attempt or not: a retry
/// rejected after a timed-out attempt ends the call as timed out (that attempt went out), never
/// as rejected.
fn rejected_after<T, E>(rejected: Error, timed_out: bool) -> Settled<T, E> {
    if timed_out {
        Settled::Rejected(rejected.with_reason(Reason::TimedOut))
    } else {
        Settled::Rejected(rejected)
    }
}

/// The wait before the attempt after attempt `n`, a counted failure, or `None` when the call ends
/// with it: a pushback past [`MAX_BACKOFF`] (ended as one the deadline leaves no room for), a
/// wait the deadline leaves no room for, or a retry `retry_allowed` rejects (asked last).
fn retry_wait<L, D: AttemptBudget>(
    cfg: &Attempts<L, D>,
    n: u32,
    started: D::Started,
    pushback: Option<Duration>,
    retry_allowed: impl FnOnce() -> bool,
) -> Option<Duration> {
    // Seeded per delay: a generator held across the attempts would grow the future.
    let delay = backoff_delay(&mut fastrand::Rng::new(), cfg.backoff, n);
    // Pushback: never sooner than the server asked.
    let delay = match pushback {
        Some(wait) if wait > MAX_BACKOFF => return None,
        Some(wait) => delay.max(wait),
        None => delay,
    };
    (cfg.deadline.allows(started, delay) && retry_allowed()).then_some(delay)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_jitter_stays_within_its_exponential_ceiling() {
        let mut rng = fastrand::Rng::with_seed(7);
        let base = Duration::from_millis(100);
        for attempt in 1..=12u32 {
            let ceiling = (base * 2u32.pow(attempt - 1)).min(MAX_BACKOFF);
            let mut max_seen = Duration::ZERO;
            for _ in 0..2_000 {
                let d = backoff_delay(&mut rng, base, attempt);
                assert!(d <= ceiling, "attempt {attempt}: {d:?} > {ceiling:?}");
                max_seen = max_seen.max(d);
            }
            // Full jitter uses the whole range: the largest of 2000 draws is near the ceiling.
            assert!(
                max_seen >= ceiling.mul_f64(0.95),
                "attempt {attempt}: {max_seen:?}"
            );
        }
        assert_eq!(backoff_delay(&mut rng, Duration::ZERO, 3), Duration::ZERO);
    }
}
