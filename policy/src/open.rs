//! Open-wait functions: [`OpenContext`], what a function set with
//! [`Policy::open_for_fn`](crate::Policy::open_for_fn) is given, and [`OpenForFn`], the function
//! as a policy holds it.

use std::fmt;
use std::time::Duration;

/// What an open-wait function is given when a circuit opens: the failed recoveries so far and the
/// window that opened it (Polly's `BreakDurationGeneratorArguments`, Resilience4j's interval
/// function's attempt).
///
/// When the circuit trips from closed, the window is the one that tripped it and
/// [`failed_recoveries`](OpenContext::failed_recoveries) is 0; when a recovery fails (a probe
/// fails, or a progressive phase fails its rate), the window is the recovery's calls (the probes
/// or the phase) and `failed_recoveries` counts this one too (1 after the first failed recovery).
///
/// More figures may come: the struct cannot be built by field outside this crate; tests of a
/// function build one with [`OpenContext::new`].
///
/// ```
/// # use fusebox_policy as fusebox;
/// use std::time::Duration;
/// use fusebox::OpenContext;
///
/// /// 5 s, doubled per failed recovery; 30 s when nearly every call failed.
/// fn wait(open: &OpenContext) -> Duration {
///     if open.failure_rate() >= 90.0 {
///         return Duration::from_secs(30);
///     }
///     Duration::from_secs(5) * 2u32.saturating_pow(open.failed_recoveries().min(10))
/// }
///
/// assert_eq!(wait(&OpenContext::new(2, 20, 10, 0)), Duration::from_secs(20));
/// assert_eq!(wait(&OpenContext::new(0, 20, 19, 0)), Duration::from_secs(30));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct OpenContext {
    failed_recoveries: u32,
    calls: u32,
    failures: u32,
    slow: u32,
}

impl OpenContext {
    /// The context of an opening after `failed_recoveries` failed recoveries in a row, on a
    /// window of `calls` recorded calls of which `failures` failed and `slow` were slow (to test
    /// an open-wait function; the breaker builds its own).
    #[must_use]
    pub const fn new(failed_recoveries: u32, calls: u32, failures: u32, slow: u32) -> Self {
        OpenContext {
            failed_recoveries,
            calls,
            failures,
            slow,
        }
    }

    /// Failed recoveries in a row, this opening included: 0 when the circuit trips from closed,
    /// 1 when the first recovery after it fails, and so on (a close resets it).
    #[must_use]
    pub const fn failed_recoveries(&self) -> u32 {
        self.failed_recoveries
    }

    /// The calls recorded in the window that opened the circuit (the probes, or the phase's
    /// calls, when a recovery failed).
    #[must_use]
    pub const fn calls(&self) -> u32 {
        self.calls
    }

    /// The counted failures among [`calls`](OpenContext::calls).
    #[must_use]
    pub const fn failures(&self) -> u32 {
        self.failures
    }

    /// The slow calls among [`calls`](OpenContext::calls) (0 unless the policy sets `slow`).
    #[must_use]
    pub const fn slow(&self) -> u32 {
        self.slow
    }

    /// The failure rate of the window in percent (0.0..=100.0; 0.0 for an empty window).
    #[must_use]
    pub fn failure_rate(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            f64::from(self.failures) * 100.0 / f64::from(self.calls)
        }
    }
}

/// An open-wait function as a [`Policy`](crate::Policy) holds it (see
/// [`Policy::open_for_fn`](crate::Policy::open_for_fn)): a plain `fn` pointer, so a policy stays
/// `Copy` and `const`. Two are equal when they are the same function (by address).
#[derive(Clone, Copy)]
pub struct OpenForFn(fn(&OpenContext) -> Duration);

impl OpenForFn {
    /// Wraps `function`.
    #[must_use]
    pub const fn new(function: fn(&OpenContext) -> Duration) -> Self {
        OpenForFn(function)
    }

    /// The function.
    #[must_use]
    pub const fn function(self) -> fn(&OpenContext) -> Duration {
        self.0
    }

    /// Calls the function on `context` (the wait before the policy's floor and cap).
    #[must_use]
    pub fn call(self, context: &OpenContext) -> Duration {
        (self.0)(context)
    }
}

impl PartialEq for OpenForFn {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::fn_addr_eq(self.0, other.0)
    }
}

impl Eq for OpenForFn {}

impl fmt::Debug for OpenForFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpenForFn({:p})", self.0)
    }
}
