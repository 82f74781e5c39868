//! Hedged calls (`hedge = "50ms"` or `hedge = "p95"`): when the first attempt has not answered
//! after the hedge delay, a second one starts beside it, and so on up to `hedge_max` attempts in
//! flight; the first to finish decides the call, and the others are dropped.
//!
//! Every attempt is admitted and reported by the breaker as a call of its own. A dropped attempt
//! is reported as cancelled (outcome `ignored`): it is neither a failure nor a success. A hedge is
//! sent only while the circuit is closed, only when the breaker admits it at once (a permit that
//! would wait for a shared key's store is not taken), and only when the key's hedge budget allows
//! it: at most [`HEDGE_BUDGET_PERCENT`](crate::limits::HEDGE_BUDGET_PERCENT) % more calls over
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
use crate::breaker::{Named, NamedPermit};
use crate::error::Error;
use crate::load::hedge::Hedging;

/// When a hedged call sends its next attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HedgeDelay {
    /// After this long without an answer (`hedge = "50ms"`).
    Fixed(Duration),
    /// After the latency this percentile (1–99) of the key's recent calls stayed under
    /// (`hedge = "p95"`).
    Percentile(u8),
}

/// The hedging of one annotated function: `hedge` and `hedge_max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hedge {
    /// When the next attempt starts.
    pub delay: HedgeDelay,
    /// Attempts in flight at most, the first one included (at least 2).
    pub max: u32,
}

/// One attempt in flight: its permit and its future.
type Racing<'a, N, B> = (NamedPermit<'a, N>, Pin<Box<B>>);

/// Runs `attempt` as a hedged call (see the module): `admit` asks the breaker for each attempt's
/// permit, `timeout` bounds each attempt, and `is_failure`, `is_failed_ok` and `retry_after`
/// judge the attempt that decides, as the attempt driver's do.
#[expect(
    clippy::manual_async_fn,
    reason = "an `async fn` would hold a moved copy of each argument beside the captured one"
)]
pub fn run<'a, T, E, F, Fut, L: AttemptLimit, N: Named>(
    admit: impl Fn() -> Result<NamedPermit<'a, N>, Error>,
    hedge: &Hedge,
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
        #[cfg(feature = "store")]
        let admitted = match crate::breaker::attempt_admission(admit()) {
            Ok(admitted) => admitted,
            Err(asking) => asking.await,
        };
        #[cfg(not(feature = "store"))]
        let admitted = admit();
        let permit = match admitted {
            Ok(permit) => permit,
            Err(rejected) => return Settled::Rejected(rejected),
        };
        let core = permit.raw.core();
        let hedging = core.hedging();
        hedging.call(core.clock_now());
        let started = tokio::time::Instant::now();
        let delay = match hedge.delay {
            HedgeDelay::Fixed(delay) => Some(delay),
            HedgeDelay::Percentile(p) => hedging.learned(core.clock_now(), p),
        };
        let mut racing: Vec<Racing<'a, N, L::Bounded<Fut>>> =
            vec![(permit, Box::pin(timeout.bound(attempt())))];
        // The hedge timer starts once the attempts are pending: a call answered at its first
        // poll makes none.
        let mut armed = delay;
        let mut timer = None;
        let (first, output) = loop {
            match race(&mut racing, &mut armed, &mut timer).await {
                Some(done) => break done,
                None => {
                    if let Some(hedged) = hedge_permit(&admit, hedging, core, &racing, hedge) {
                        racing.push((hedged, Box::pin(timeout.bound(attempt()))));
                        if racing.len() < hedge.max as usize {
                            armed = delay;
                        }
                    }
                }
            }
        };
        let (permit, _) = racing.swap_remove(first);
        // The other attempts are cancelled: their futures and permits are dropped here, and each
        // permit reports a cancellation.
        drop(racing);
        hedging.ended(core.clock_now(), started.elapsed(), first > 0);
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

/// Polls the attempts in flight and the hedge timer: the index and output of the first attempt
/// that finished, or `None` when the timer fired first. An `armed` delay starts the timer once
/// every attempt is pending.
async fn race<N: Named, B: Future>(
    racing: &mut [Racing<'_, N, B>],
    armed: &mut Option<Duration>,
    timer: &mut Option<Pin<Box<tokio::time::Sleep>>>,
) -> Option<(usize, B::Output)> {
    std::future::poll_fn(|cx| {
        for (index, (_, attempt)) in racing.iter_mut().enumerate() {
            if let Poll::Ready(output) = attempt.as_mut().poll(cx) {
                return Poll::Ready(Some((index, output)));
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

/// The permit of a hedge, when one may be sent now: fewer than `hedge.max` attempts in flight,
/// the circuit closed, the budget allowing it, and the breaker admitting it at once.
fn hedge_permit<'a, N: Named, B>(
    admit: &impl Fn() -> Result<NamedPermit<'a, N>, Error>,
    hedging: &Hedging,
    core: &crate::breaker::Circuit,
    racing: &[Racing<'a, N, B>],
    hedge: &Hedge,
) -> Option<NamedPermit<'a, N>> {
    if racing.len() >= hedge.max as usize || !core.is_closed() {
        return None;
    }
    #[cfg(feature = "store")]
    let permit = crate::breaker::attempt_admission(admit()).ok()?.ok()?;
    #[cfg(not(feature = "store"))]
    let permit = admit().ok()?;
    // Asked last: a hedge the breaker would not admit takes nothing from the budget. A permit
    // dropped here reports a cancellation.
    hedging.send(core.clock_now()).then_some(permit)
}
