//! Hedged calls (`hedge = "50ms"` or `hedge = "p95"`): when the first attempt has not answered
//! after the hedge delay, a second one starts beside it, and so on up to `hedge_max` attempts in
//! flight; the first to finish decides the call, and the others are dropped.
//!
//! Every attempt is admitted and reported by the breaker as a call of its own. A dropped attempt
//! is reported as cancelled (outcome `ignored`): it is neither a failure nor a success. A hedge is
//! sent only while the circuit is closed, only when the breaker admits it at once (a permit that
//! would wait for a shared key's store is not taken), and only when the key's hedge budget allows
//! it: at most [`Policy::hedge_budget`](crate::Policy::hedge_budget) (10 %) more calls over
//! the last 10 s. A delay learned from a percentile sends no hedge until the key's latencies
//! hold [`MIN_LATENCY_CALLS`](crate::limits::MIN_LATENCY_CALLS) calls of the last one or two
//! [`LATENCY_PERIOD`](crate::limits::LATENCY_PERIOD)s.
//!
//! The hedge delay is measured on tokio's clock (paused time in tests moves it); the budget and
//! the latency periods on the breaker's clock.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use super::attempts::{AttemptLimit, Settled, recording_of, settle_attempt};
use crate::breaker::{HedgeGate, Named, NamedPermit};
use crate::error::Error;
use crate::load::hedge::Hedge;

/// One attempt in flight: its permit (whatever the caller reports on) and its future.
type Racing<P, F> = (P, Pin<Box<F>>);

/// Runs a hedged call (see the module): `first` is the first attempt, admitted, and `more`
/// makes a hedge (admits it and starts its future), or gives `None` when the breaker does not
/// admit one. Returns the permit and output of the attempt that finished first, and whether it
/// was a hedge; the other attempts are dropped (never polled again), so each permit that reports
/// a drop reports a cancellation.
///
/// A hedge is asked of `more` only while `gate` allows one ([`HedgeGate::may_send`]), and taken
/// from the budget once `more` made it, through [`HedgeGate::attempt`]: admit the first attempt
/// through it too, so that on a key that tracks stacking the attempts are siblings. For an adapter: the attribute's `hedge` runs on it, the
/// reqwest middleware's `hedge` too.
///
/// ```
/// use std::time::Duration;
/// use fusebox::{Hedge, HedgeDelay, Policy, Registry};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let registry = Registry::new();
/// let breaker = registry.breaker("search", Policy::new()).unwrap();
/// for _ in 0..10 {
///     let _ = breaker.try_acquire(); // calls of the key: the budget allows a hedge
///     let _ = breaker.hedging().start(HedgeDelay::Fixed(Duration::ZERO));
/// }
/// let slow = |millis| async move {
///     tokio::time::sleep(Duration::from_millis(millis)).await;
///     millis
/// };
/// let hedge = Hedge::new(HedgeDelay::Fixed(Duration::from_millis(50)));
/// let first = (breaker.hedging().attempt(|| breaker.try_acquire()).unwrap(), Box::pin(slow(1_000)) as std::pin::Pin<Box<dyn std::future::Future<Output = u64>>>);
/// let (permit, took, by_hedge) = fusebox::hedged(breaker.hedging(), hedge, first, || {
///     Some((breaker.try_acquire().ok()?, Box::pin(slow(1)) as std::pin::Pin<Box<dyn std::future::Future<Output = u64>>>))
/// })
/// .await;
/// permit.success();
/// assert_eq!((took, by_hedge), (1, true));
/// # }
/// ```
pub async fn hedged<P, F: Future>(
    gate: HedgeGate<'_>,
    hedge: Hedge,
    first: (P, F),
    mut more: impl FnMut() -> Option<(P, F)>,
) -> (P, F::Output, bool) {
    let delay = gate.start(hedge.delay);
    let started = tokio::time::Instant::now();
    // The first attempt stays in this future (no allocation for a call that no hedge joins);
    // hedges are boxed beside it.
    let (first_permit, first) = first;
    let mut first = std::pin::pin!(first);
    let mut hedges: Vec<Racing<P, F>> = Vec::new();
    // The hedge timer starts once the attempts are pending: a call answered at its first poll
    // makes none.
    let mut armed = delay;
    let mut timer = None;
    let (winner, output) = loop {
        if let Some(done) = race(first.as_mut(), &mut hedges, &mut armed, &mut timer).await {
            break done;
        }
        if hedges.len() + 1 < hedge.max as usize
            && gate.may_send()
            && let Some((permit, attempt)) = gate.attempt(&mut more)
        {
            // Dropped unsent, it reports a cancellation.
            if gate.send() {
                hedges.push((permit, Box::pin(attempt)));
                if hedges.len() + 1 < hedge.max as usize {
                    armed = delay;
                }
            }
        }
    };
    gate.ended(started.elapsed(), winner.is_some());
    match winner {
        None => {
            cancel(hedges);
            (first_permit, output, false)
        }
        Some(index) => {
            let (permit, _) = hedges.swap_remove(index);
            cancel(hedges);
            // The first attempt is cancelled: it is never polled again, and its permit reports
            // the cancellation now.
            drop(first_permit);
            (permit, output, true)
        }
    }
}

/// Cancels the hedges that did not decide the call: each future, then its permit (which reports
/// the cancellation), is dropped.
fn cancel<P, F>(hedges: Vec<Racing<P, F>>) {
    for (permit, attempt) in hedges {
        drop(attempt);
        drop(permit);
    }
}

/// The attribute's hedged call (`hedge`): each attempt admitted by `admit` and bounded by
/// `timeout`, the one that decides judged by `is_failure`, `is_failed_ok` and `retry_after` as
/// the attempt driver's are.
#[expect(
    clippy::manual_async_fn,
    reason = "an `async fn` would hold a moved copy of each argument beside the captured one"
)]
pub fn run<'a, T, E, F, Fut, L: AttemptLimit, N: Named>(
    admit: impl Fn() -> Result<NamedPermit<'a, N>, Error>,
    hedge: Hedge,
    timeout: L,
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
        // The attempts of a hedged call are siblings, not calls inside each other.
        let sibling = || crate::breaker::alone(&admit);
        #[cfg(feature = "store")]
        let admitted = match crate::breaker::attempt_admission(sibling()) {
            Ok(admitted) => admitted,
            Err(asking) => asking.await,
        };
        #[cfg(not(feature = "store"))]
        let admitted = sibling();
        let permit = match admitted {
            Ok(permit) => permit,
            Err(rejected) => return Settled::Rejected(rejected),
        };
        let gate = permit.raw.core().hedge_gate();
        let first = (permit, timeout.bound(attempt()));
        let (permit, output, _) = hedged(gate, hedge, first, || {
            // A hedge is admitted at once or not sent: a permit that must ask a shared key's
            // store first is dropped (a cancellation).
            #[cfg(feature = "store")]
            let permit = crate::breaker::attempt_admission(admit()).ok()?.ok()?;
            #[cfg(not(feature = "store"))]
            let permit = admit().ok()?;
            Some((permit, timeout.bound(attempt())))
        })
        .await;
        let result = L::finished::<Fut>(output);
        #[cfg_attr(not(feature = "store"), allow(clippy::let_unit_value))]
        let recording = recording_of(&permit);
        let ((settled, _), _) =
            settle_attempt(permit, result, &is_failure, &is_failed_ok, &retry_after);
        #[cfg(feature = "store")]
        let settled = crate::breaker::after_recording(recording, settled).await;
        #[cfg(not(feature = "store"))]
        let () = recording;
        settled
    }
}

/// Polls the first attempt, the hedges and the hedge timer: the output of the first attempt that
/// finished (with the hedge's index, `None` for the first attempt), or `None` when the timer
/// fired first. An `armed` delay starts the timer once every attempt is pending.
async fn race<P, F: Future>(
    mut first: Pin<&mut F>,
    hedges: &mut [Racing<P, F>],
    armed: &mut Option<Duration>,
    timer: &mut Option<Pin<Box<tokio::time::Sleep>>>,
) -> Option<(Option<usize>, F::Output)> {
    std::future::poll_fn(|cx| {
        if let Poll::Ready(output) = first.as_mut().poll(cx) {
            return Poll::Ready(Some((None, output)));
        }
        for (index, (_, attempt)) in hedges.iter_mut().enumerate() {
            if let Poll::Ready(output) = attempt.as_mut().poll(cx) {
                return Poll::Ready(Some((Some(index), output)));
            }
        }
        if let Some(delay) = armed.take() {
            *timer = Some(Box::pin(tokio::time::sleep(delay)));
        }
        match timer.as_mut().map(|timer| timer.as_mut().poll(cx)) {
            Some(Poll::Ready(())) => {
                *timer = None;
                Poll::Ready(None)
            }
            _ => Poll::Pending,
        }
    })
    .await
}
