//! [`Fault`]: what an injection does to a call (a failure, a `Retry-After` answer, latency or a
//! rejection) and when ([`Fault::rate`], [`Fault::when`]).

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// An error value built by the user's closure, type-erased until the injection point downcasts
/// it to the function's error type.
pub(crate) type Built = Box<dyn Any + Send>;

/// What a fault does to a call.
#[derive(Clone)]
pub(crate) enum Action {
    /// Returns the error the closure builds; `type_name` is its type's.
    Failure(Arc<dyn Fn() -> Built + Send + Sync>, &'static str),
    /// Returns the error the closure builds from the wait, which carries that wait.
    RetryAfter(
        Arc<dyn Fn(Duration) -> Built + Send + Sync>,
        Duration,
        &'static str,
    ),
    /// Delays the body.
    Latency(Duration),
    /// Rejects the call as if the circuit were open.
    Rejection,
}

impl Action {
    /// The value a failure or `Retry-After` fault builds for one call, with its type's name and
    /// the wait a `Retry-After` value carries; `None` for a latency or a rejection fault.
    pub(crate) fn build(&self) -> Option<(Built, &'static str, Option<Duration>)> {
        match self {
            Action::Failure(build, type_name) => Some((build(), type_name, None)),
            Action::RetryAfter(build, wait, type_name) => {
                Some((build(*wait), type_name, Some(*wait)))
            }
            Action::Latency(_) | Action::Rejection => None,
        }
    }
}

/// Which calls a fault hits.
#[derive(Clone)]
enum Trigger {
    /// This share of calls, drawn from the seed and the call's number.
    Rate { rate: f64, seed: u64 },
    /// The calls whose number (from 1) the predicate accepts.
    When(Arc<dyn Fn(u64) -> bool + Send + Sync>),
}

/// The kind of a [`Fault`], as the admin router and the events name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FaultKind {
    /// [`Fault::failure`].
    Failure,
    /// [`Fault::retry_after`].
    RetryAfter,
    /// [`Fault::latency`].
    Latency,
    /// [`Fault::rejection`].
    Rejection,
}

impl FaultKind {
    /// The kind's name in events and on the admin router: `failure`, `retry_after`, `latency`,
    /// `rejection`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Failure => "failure",
            FaultKind::RetryAfter => "retry_after",
            FaultKind::Latency => "latency",
            FaultKind::Rejection => "rejection",
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A fault to inject into the calls of one key ([`Injections::inject`](super::Injections::inject)):
/// what it does, and which calls it hits — every call unless [`rate`](Fault::rate) or
/// [`when`](Fault::when) says otherwise.
///
/// ```
/// use std::time::Duration;
/// use fusebox::chaos::Fault;
///
/// #[derive(Debug)]
/// enum PaymentError { Timeout, Busy(Duration) }
///
/// let _every_call = Fault::failure(|| PaymentError::Timeout);
/// let _half = Fault::latency(Duration::from_millis(300)).rate(0.5).seed(7);
/// let _every_third = Fault::retry_after(PaymentError::Busy, Duration::from_secs(2)).when(|n| n % 3 == 0);
/// let _rejected = Fault::rejection();
/// ```
#[derive(Clone)]
pub struct Fault {
    pub(crate) action: Action,
    trigger: Trigger,
}

impl Fault {
    fn every_call(action: Action) -> Self {
        Fault {
            action,
            trigger: Trigger::Rate { rate: 1.0, seed: 0 },
        }
    }

    /// The call returns `Err(build())` without running its body: the error goes through the
    /// function's classification, report, retries and fallback as a real one would. `E` must be
    /// the function's error type; a fault of another type is not injected (a WARN event names
    /// the key and both types, and the call runs normally).
    #[must_use]
    pub fn failure<E: Send + 'static>(build: impl Fn() -> E + Send + Sync + 'static) -> Self {
        Fault::every_call(Action::Failure(
            Arc::new(move || Box::new(build()) as Built),
            std::any::type_name::<E>(),
        ))
    }

    /// The call returns `Err(build(wait))` without running its body: an error that carries the
    /// wait as its [`RetryAfter`](crate::RetryAfter) reads it, so a counted one pushes the
    /// circuit's next probe back and the attempt driver's next attempt waits for it.
    #[must_use]
    pub fn retry_after<E: Send + 'static>(
        build: impl Fn(Duration) -> E + Send + Sync + 'static,
        wait: Duration,
    ) -> Self {
        Fault::every_call(Action::RetryAfter(
            Arc::new(move |wait| Box::new(build(wait)) as Built),
            wait,
            std::any::type_name::<E>(),
        ))
    }

    /// The body starts `delay` late: a `tokio::time::sleep` inside the attempt of an `async fn`
    /// (so `timeout` and `hedge` see it), a `std::thread::sleep` before the body of a plain `fn`.
    #[must_use]
    pub fn latency(delay: Duration) -> Self {
        Fault::every_call(Action::Latency(delay))
    }

    /// The call is rejected as if the circuit were open: admitted, then turned into a rejection
    /// (reason [`Reason::Open`](crate::Reason::Open), no wait) before its body runs, so the
    /// fallback gets [`Cause::Rejected`](crate::Cause::Rejected) and the key's rejected count
    /// and metrics count it; the circuit's own state is left as it was.
    #[must_use]
    pub fn rejection() -> Self {
        Fault::every_call(Action::Rejection)
    }

    /// Hits this share of calls (`0.0..=1.0`, clamped), drawn from the seed ([`seed`](Fault::seed),
    /// 0 unless set) and the call's number: the same seed hits the same calls in every run.
    #[must_use]
    pub fn rate(mut self, rate: f64) -> Self {
        let seed = match self.trigger {
            Trigger::Rate { seed, .. } => seed,
            Trigger::When(_) => 0,
        };
        let rate = if rate.is_nan() {
            0.0
        } else {
            rate.clamp(0.0, 1.0)
        };
        self.trigger = Trigger::Rate { rate, seed };
        self
    }

    /// The seed [`rate`](Fault::rate) draws from.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        let rate = match self.trigger {
            Trigger::Rate { rate, .. } => rate,
            Trigger::When(_) => 1.0,
        };
        self.trigger = Trigger::Rate { rate, seed };
        self
    }

    /// Hits the calls whose number (1 for the first call that reaches the injection after
    /// [`inject`](super::Injections::inject)) `hit` accepts; replaces a rate.
    #[must_use]
    pub fn when(mut self, hit: impl Fn(u64) -> bool + Send + Sync + 'static) -> Self {
        self.trigger = Trigger::When(Arc::new(hit));
        self
    }

    /// What the fault does.
    #[must_use]
    pub fn kind(&self) -> FaultKind {
        match self.action {
            Action::Failure(..) => FaultKind::Failure,
            Action::RetryAfter(..) => FaultKind::RetryAfter,
            Action::Latency(_) => FaultKind::Latency,
            Action::Rejection => FaultKind::Rejection,
        }
    }

    /// True when the call numbered `n` (from 1) is hit.
    pub(crate) fn hits(&self, n: u64) -> bool {
        match &self.trigger {
            Trigger::Rate { rate, seed } => {
                // splitmix64 of the seed and the call's number: a uniform draw in [0, 1).
                let mut z = seed.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^= z >> 31;
                #[allow(clippy::cast_precision_loss)]
                let draw = (z >> 11) as f64 / (1u64 << 53) as f64;
                draw < *rate
            }
            Trigger::When(hit) => hit(n),
        }
    }
}

impl fmt::Debug for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("Fault");
        out.field("kind", &self.kind());
        match &self.action {
            Action::Latency(delay) => out.field("delay", delay),
            Action::RetryAfter(_, wait, _) => out.field("wait", wait),
            _ => &mut out,
        };
        match &self.trigger {
            Trigger::Rate { rate, seed } => out.field("rate", rate).field("seed", seed),
            Trigger::When(_) => out.field("when", &"fn(u64) -> bool"),
        };
        out.finish()
    }
}

/// What the fault does and to which calls, as the admin dashboard shows it: `failures on 10 %
/// of calls`, `latency 300ms on every call`, `rejections on the calls a predicate picks`.
impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.action {
            Action::Failure(..) => f.write_str("failures")?,
            Action::RetryAfter(_, wait, _) => write!(f, "Retry-After {wait:?} answers")?,
            Action::Latency(delay) => write!(f, "latency {delay:?}")?,
            Action::Rejection => f.write_str("rejections")?,
        }
        match &self.trigger {
            Trigger::Rate { rate, .. } if *rate >= 1.0 => f.write_str(" on every call"),
            Trigger::Rate { rate, .. } => {
                write!(f, " on {} % of calls", (rate * 10_000.0).round() / 100.0)
            }
            Trigger::When(_) => f.write_str(" on the calls a predicate picks"),
        }
    }
}
