//! Trip and recovery rules: the [`Policy`] of a breaker, built in `const` context and validated.

use std::fmt;
use std::time::Duration;

use crate::clock::duration_to_nanos;

/// The largest count window.
pub const MAX_WINDOW: u32 = 1_000_000;
/// The number of buckets a time window is split into.
pub const TIME_BUCKETS: u32 = 10;
/// The shortest time window (one millisecond per bucket).
pub const MIN_TIME_WINDOW: Duration = Duration::from_millis(10);
/// The longest time window.
pub const MAX_TIME_WINDOW: Duration = Duration::from_secs(60 * 60);
/// The most probes a half-open circuit admits at once.
pub const MAX_HALF_OPEN: u32 = 127;
/// The most phases of progressive recovery.
pub const MAX_PHASES: u32 = 100;
/// The shortest open wait (and slow-call threshold, and half-open lease).
pub const MIN_OPEN_FOR: Duration = Duration::from_millis(1);
/// The longest open wait (and slow-call threshold, and half-open lease).
pub const MAX_OPEN_FOR: Duration = Duration::from_secs(24 * 60 * 60);
/// The largest `open_backoff` multiplier.
pub const MAX_OPEN_BACKOFF: f64 = 100.0;

const DEFAULT_OPEN_MAX_NANOS: u64 = 5 * 60 * 1_000_000_000;
const DEFAULT_MIN_CALLS: u32 = 10;
const DEFAULT_FAILURE_RATE: u8 = 50;

/// Bits of [`Policy::explicit`]: which setters were called.
mod set {
    pub(super) const WINDOW: u16 = 1 << 0;
    pub(super) const MIN_CALLS: u16 = 1 << 1;
    pub(super) const FAILURE_RATE: u16 = 1 << 2;
    pub(super) const SLOW: u16 = 1 << 3;
    pub(super) const SLOW_RATE: u16 = 1 << 4;
    pub(super) const CONSECUTIVE: u16 = 1 << 5;
    pub(super) const OPEN_FOR: u16 = 1 << 6;
    pub(super) const OPEN_BACKOFF: u16 = 1 << 7;
    pub(super) const OPEN_MAX: u16 = 1 << 8;
    pub(super) const HALF_OPEN: u16 = 1 << 9;
    pub(super) const HALF_OPEN_LEASE: u16 = 1 << 10;
    pub(super) const RECOVERY: u16 = 1 << 11;
    pub(super) const MAX_CONCURRENT: u16 = 1 << 12;
    pub(super) const STUCK_OPEN: u16 = 1 << 13;
    pub(super) const SHARED: u16 = 1 << 14;
}

/// Which outcomes the failure and slow-call rates are computed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// The last N recorded calls.
    Count(u32),
    /// The calls of the last span of time, kept in [`TIME_BUCKETS`] buckets rotated on the request path.
    Time(Duration),
}

/// How a circuit leaves half-open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// Admit `half_open` probes; all must succeed to close, any failure reopens (the default).
    Probes,
    /// Admit 1/phases of the traffic, then 2/phases, … Each phase needs `min_passes` recorded calls
    /// with a failure rate under the threshold to advance; otherwise the circuit reopens.
    Progressive {
        /// Number of phases (1..=100); the last one admits all traffic.
        phases: u32,
        /// Calls a phase must record before it is judged (at least 1).
        min_passes: u32,
    },
}

/// When a circuit opens and how it recovers.
///
/// Built with `const fn` setters, so a policy can be a `const` shared by many functions and
/// named in the attribute (`policy = PAYMENT`):
///
/// ```
/// use std::time::Duration;
/// use fusebox::Policy;
///
/// const PAYMENT: Policy = Policy::new()
///     .window(20)
///     .min_calls(10)
///     .failure_rate(50)
///     .open_for(Duration::from_secs(30));
/// assert!(PAYMENT.validate().is_ok());
/// ```
///
/// | field | default | |
/// |---|---|---|
/// | `window` | 100 calls | [`Policy::window`], [`Policy::time_window`] |
/// | `min_calls` | 10, or a smaller count window | no decision below this many recorded calls |
/// | `failure_rate` | 50 %, off with `consecutive` alone | [`Policy::failure_rate`]; [`Policy::rate_off`] disables the rule |
/// | `slow`, `slow_rate` | off, 100 % | [`Policy::slow`], [`Policy::slow_rate`] |
/// | `consecutive` | off | [`Policy::consecutive`] |
/// | `open_for` | 10 s | [`Policy::open_for`] |
/// | `open_backoff`, `open_max` | 1 (none), 5 min | [`Policy::open_backoff`], [`Policy::open_max`] |
/// | `half_open`, `half_open_lease` | 1 probe, = `open_for` | [`Policy::half_open`], [`Policy::half_open_lease`] |
/// | `recovery` | probes | [`Policy::progressive`] |
/// | `max_concurrent` | unlimited | [`Policy::max_concurrent`] |
/// | `stuck_open` | 3 failed recoveries or 5 min | [`Policy::stuck_open`] (the `circuit_stuck_open` event) |
///
/// Two rules connect fields, and they are decided here once for every way a policy is set (the
/// attribute, this builder, [`Registry::configure`](crate::Registry::configure) and the
/// configuration files all go through these setters):
///
/// - **`min_calls` never exceeds the count window.** While `min_calls` is not set explicitly it is
///   10, or the count window when that is smaller: `Policy::new().window(5)` decides after 5 calls.
///   Setting a count window lowers a larger explicit `min_calls` to it (`BASE.window(2)` of a
///   `BASE` with `min_calls(4)` decides after 2 calls); setting `min_calls` above the window is
///   invalid.
/// - **`consecutive` alone replaces the rate rule.** While `failure_rate` is not set explicitly
///   (by [`Policy::failure_rate`] or [`Policy::rate_off`]) it is 50 %, or off when `consecutive` is
///   set: `Policy::new().consecutive(5)` opens on 5 failures in a row only. With `failure_rate` set
///   too, both rules apply and either may trip.
///
/// Two policies are equal
/// when every field has the same value, whichever fields were set explicitly.
#[derive(Clone, Copy)]
pub struct Policy {
    pub(crate) window: Window,
    pub(crate) min_calls: u32,
    /// Percent; 0 when the rate rule is off.
    pub(crate) failure_rate: u8,
    /// Nanoseconds; 0 when slow calls are not tracked.
    pub(crate) slow_nanos: u64,
    pub(crate) slow_rate: u8,
    /// 0 when the rule is off.
    pub(crate) consecutive: u32,
    pub(crate) open_for_nanos: u64,
    /// Multiplier in thousandths (1000 = no backoff).
    pub(crate) open_backoff_milli: u32,
    pub(crate) open_max_nanos: u64,
    pub(crate) half_open: u32,
    /// 0: the lease is `open_for`.
    pub(crate) half_open_lease_nanos: u64,
    pub(crate) recovery: Recovery,
    /// 0: unlimited.
    pub(crate) max_concurrent: u32,
    /// Failed recoveries in a row that make an open circuit "stuck"; 0: not by count.
    pub(crate) stuck_reopens: u32,
    /// Nanoseconds open (since it opened from closed) that make it "stuck"; 0: not by time.
    pub(crate) stuck_open_nanos: u64,
    /// The fields whose setter was called (bits of `set`); the others follow the rules above.
    pub(crate) explicit: u16,
    /// False: the key stays local on a registry shared through a store.
    pub(crate) shared: bool,
}

impl Policy {
    /// The default policy (see the type's documentation).
    pub const DEFAULT: Policy = Policy {
        window: Window::Count(100),
        min_calls: 10,
        failure_rate: 50,
        slow_nanos: 0,
        slow_rate: 100,
        consecutive: 0,
        open_for_nanos: 10_000_000_000,
        open_backoff_milli: 1000,
        open_max_nanos: DEFAULT_OPEN_MAX_NANOS,
        half_open: 1,
        half_open_lease_nanos: 0,
        recovery: Recovery::Probes,
        max_concurrent: 0,
        stuck_reopens: 3,
        stuck_open_nanos: 5 * 60 * 1_000_000_000,
        explicit: 0,
        shared: true,
    };

    /// The default policy.
    pub const fn new() -> Self {
        Self::DEFAULT
    }

    /// A count window: the last `calls` recorded outcomes (older ones are evicted).
    ///
    /// A `min_calls` above `calls` is lowered to it (see the rules in the type's documentation).
    pub const fn window(mut self, calls: u32) -> Self {
        self.window = Window::Count(calls);
        if self.min_calls > calls {
            self.min_calls = calls;
        }
        self.mark(set::WINDOW)
    }

    /// A time window: the outcomes recorded during the last `span`.
    pub const fn time_window(mut self, span: Duration) -> Self {
        self.window = Window::Time(span);
        self.mark(set::WINDOW)
    }

    /// The number of recorded calls below which the circuit never opens on a rate (at most a
    /// count window; without this setter it is 10, or the count window when smaller).
    pub const fn min_calls(mut self, calls: u32) -> Self {
        self.min_calls = calls;
        self.mark(set::MIN_CALLS)
    }

    /// The failure rate, in percent of the window, at which the circuit opens (1..=100). Set
    /// explicitly, it stays on next to [`consecutive`](Policy::consecutive).
    pub const fn failure_rate(mut self, percent: u8) -> Self {
        self.failure_rate = percent;
        self.mark(set::FAILURE_RATE)
    }

    /// Turns the failure-rate rule off (for a policy that trips on `consecutive` or `slow` only).
    pub const fn rate_off(mut self) -> Self {
        self.failure_rate = 0;
        self.mark(set::FAILURE_RATE)
    }

    /// A recorded call slower than `threshold` counts as slow (a slow success is slow, not failed).
    pub const fn slow(mut self, threshold: Duration) -> Self {
        self.slow_nanos = duration_to_nanos(threshold);
        self.mark(set::SLOW)
    }

    /// The slow-call rate, in percent of the window, at which the circuit opens (1..=100; default 100).
    pub const fn slow_rate(mut self, percent: u8) -> Self {
        self.slow_rate = percent;
        self.mark(set::SLOW_RATE)
    }

    /// Opens after `failures` counted failures in a row (any success resets the run). Unless
    /// [`failure_rate`](Policy::failure_rate) or [`rate_off`](Policy::rate_off) was called, this
    /// turns the rate rule off (`consecutive(0)` turns it back on).
    pub const fn consecutive(mut self, failures: u32) -> Self {
        self.consecutive = failures;
        self.mark(set::CONSECUTIVE)
    }

    /// How long the circuit stays open before it admits probes.
    pub const fn open_for(mut self, wait: Duration) -> Self {
        self.open_for_nanos = duration_to_nanos(wait);
        self.mark(set::OPEN_FOR)
    }

    /// Each consecutive re-open (a failed recovery) multiplies the wait by `factor` (≥ 1), up to
    /// [`open_max`](Policy::open_max). A successful close resets it.
    pub const fn open_backoff(mut self, factor: f64) -> Self {
        self.open_backoff_milli = if factor <= 0.0 {
            0
        } else if factor >= MAX_OPEN_BACKOFF * 10.0 {
            u32::MAX
        } else {
            (factor * 1000.0 + 0.5) as u32
        };
        self.mark(set::OPEN_BACKOFF)
    }

    /// The longest wait `open_backoff` can grow to (default 5 minutes, never below `open_for`).
    pub const fn open_max(mut self, wait: Duration) -> Self {
        self.open_max_nanos = duration_to_nanos(wait);
        self.mark(set::OPEN_MAX)
    }

    /// How many probes a half-open circuit admits; all must succeed to close it.
    pub const fn half_open(mut self, probes: u32) -> Self {
        self.half_open = probes;
        self.mark(set::HALF_OPEN)
    }

    /// How long half-open probes may stay unreported before their slots are re-armed
    /// (default: `open_for`).
    pub const fn half_open_lease(mut self, lease: Duration) -> Self {
        self.half_open_lease_nanos = duration_to_nanos(lease);
        self.mark(set::HALF_OPEN_LEASE)
    }

    /// Progressive recovery: see [`Recovery::Progressive`].
    pub const fn progressive(mut self, phases: u32, min_passes: u32) -> Self {
        self.recovery = Recovery::Progressive { phases, min_passes };
        self.mark(set::RECOVERY)
    }

    /// At most `calls` calls in flight for this key; the next one is refused at once
    /// (reason [`BulkheadFull`](crate::Reason::BulkheadFull)) and not counted as a failure.
    pub const fn max_concurrent(mut self, calls: u32) -> Self {
        self.max_concurrent = calls;
        self.mark(set::MAX_CONCURRENT)
    }

    /// On a registry shared across replicas (`Registry::share`, feature `redis`): `false` keeps
    /// this key's breaker local to the replica (per-host dynamic keys, for instance). Default
    /// `true`; on a registry that is not shared it changes nothing.
    pub const fn shared(mut self, shared: bool) -> Self {
        self.shared = shared;
        self.mark(set::SHARED)
    }

    /// False when [`Policy::shared`] keeps the key local.
    pub const fn is_shared(&self) -> bool {
        self.shared
    }

    /// Probe recovery (the default) or progressive recovery; see [`Recovery`].
    pub const fn recovery(mut self, recovery: Recovery) -> Self {
        self.recovery = recovery;
        self.mark(set::RECOVERY)
    }

    /// Records that `field` was set explicitly and recomputes the fields that follow the rules in
    /// the type's documentation.
    const fn mark(mut self, field: u16) -> Self {
        self.explicit |= field;
        if self.explicit & set::MIN_CALLS == 0 {
            self.min_calls = match self.window {
                Window::Count(n) if n < DEFAULT_MIN_CALLS => n,
                _ => DEFAULT_MIN_CALLS,
            };
        }
        if self.explicit & set::FAILURE_RATE == 0 {
            self.failure_rate = if self.consecutive != 0 {
                0
            } else {
                DEFAULT_FAILURE_RATE
            };
        }
        self
    }

    /// When an open circuit counts as stuck: after `failed_recoveries` failed recoveries in a
    /// row, or once it has been open for `open_longer_than` since it opened from closed, whichever
    /// comes first. A stuck circuit emits one `circuit_stuck_open` WARN event per open episode (an
    /// episode ends when the circuit closes or an operator changes its state). The time rule is
    /// checked on recovery attempts (the first call after each open wait), since breakers run no
    /// timers. `0` (or a zero duration) turns that rule off. Default: 3 failed recoveries or 5 min.
    pub const fn stuck_open(mut self, failed_recoveries: u32, open_longer_than: Duration) -> Self {
        self.stuck_reopens = failed_recoveries;
        self.stuck_open_nanos = duration_to_nanos(open_longer_than);
        self.mark(set::STUCK_OPEN)
    }

    /// The `stuck_open` rule: failed recoveries in a row (0: off) and the open span (zero: off).
    pub const fn stuck_open_after(&self) -> (u32, Duration) {
        (
            self.stuck_reopens,
            Duration::from_nanos(self.stuck_open_nanos),
        )
    }

    /// True when `field` (a bit of `set`) was set explicitly.
    pub(crate) const fn is_explicit(&self, field: u16) -> bool {
        self.explicit & field != 0
    }

    /// The window.
    pub const fn window_kind(&self) -> Window {
        self.window
    }

    /// The count window size, or `None` for a time window.
    pub const fn window_len(&self) -> Option<u32> {
        match self.window {
            Window::Count(n) => Some(n),
            Window::Time(_) => None,
        }
    }

    /// The minimum number of calls before the rates are evaluated.
    pub const fn min_calls_len(&self) -> u32 {
        self.min_calls
    }

    /// The failure rate threshold in percent, or `None` when the rule is off.
    pub const fn failure_rate_percent(&self) -> Option<u8> {
        if self.failure_rate == 0 {
            None
        } else {
            Some(self.failure_rate)
        }
    }

    /// The slow-call threshold, when slow calls are tracked.
    pub const fn slow_threshold(&self) -> Option<Duration> {
        if self.slow_nanos == 0 {
            None
        } else {
            Some(Duration::from_nanos(self.slow_nanos))
        }
    }

    /// The open wait.
    pub const fn open_duration(&self) -> Duration {
        Duration::from_nanos(self.open_for_nanos)
    }

    /// The number of half-open probes.
    pub const fn half_open_probes(&self) -> u32 {
        self.half_open
    }

    /// The recovery mode.
    pub const fn recovery_mode(&self) -> Recovery {
        self.recovery
    }

    /// The bulkhead limit, when there is one.
    pub const fn concurrency_limit(&self) -> Option<u32> {
        if self.max_concurrent == 0 {
            None
        } else {
            Some(self.max_concurrent)
        }
    }

    pub(crate) const fn lease_nanos(&self) -> u64 {
        if self.half_open_lease_nanos == 0 {
            self.open_for_nanos
        } else {
            self.half_open_lease_nanos
        }
    }

    /// The open wait after `reopens` consecutive failed recoveries.
    pub(crate) fn open_wait_nanos(&self, reopens: u32) -> u64 {
        if reopens == 0 || self.open_backoff_milli <= 1000 {
            return self.open_for_nanos;
        }
        let cap = self.open_max_nanos.max(self.open_for_nanos);
        let factor = f64::from(self.open_backoff_milli) / 1000.0;
        let wait = self.open_for_nanos as f64 * factor.powi(reopens.min(4096) as i32);
        if wait >= cap as f64 { cap } else { wait as u64 }
    }

    /// Checks every field; the first invalid one is reported with its allowed range.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let range =
            |field, allowed: &str, found: String| Err(PolicyError::new(field, allowed, found));
        let in_ms_range = |nanos: u64| {
            (duration_to_nanos(MIN_OPEN_FOR)..=duration_to_nanos(MAX_OPEN_FOR)).contains(&nanos)
        };
        match self.window {
            Window::Count(n) if n == 0 || n > MAX_WINDOW => {
                return range("window", &format!("1..={MAX_WINDOW} calls"), n.to_string());
            }
            Window::Time(span) if span < MIN_TIME_WINDOW || span > MAX_TIME_WINDOW => {
                return range(
                    "window",
                    "\"10ms\"..=\"1h\" for a time window",
                    format!("{span:?}"),
                );
            }
            _ => {}
        }
        if let Window::Count(n) = self.window
            && (self.min_calls == 0 || self.min_calls > n)
        {
            return range(
                "min_calls",
                &format!("1..={n} (at most `window`)"),
                self.min_calls.to_string(),
            );
        }
        if self.min_calls == 0 {
            return range("min_calls", "at least 1", "0".into());
        }
        if self.failure_rate > 100 {
            return range(
                "failure_rate",
                "1..=100 percent",
                self.failure_rate.to_string(),
            );
        }
        if (self.slow_nanos != 0 || self.is_explicit(set::SLOW)) && !in_ms_range(self.slow_nanos) {
            return range(
                "slow",
                "\"1ms\"..=\"24h\"",
                format!("{:?}", Duration::from_nanos(self.slow_nanos)),
            );
        }
        if self.slow_rate == 0 || self.slow_rate > 100 {
            return range("slow_rate", "1..=100 percent", self.slow_rate.to_string());
        }
        if self.consecutive > MAX_WINDOW {
            return range(
                "consecutive",
                &format!("1..={MAX_WINDOW} failures"),
                self.consecutive.to_string(),
            );
        }
        if self.failure_rate == 0 && self.consecutive == 0 && self.slow_nanos == 0 {
            return range(
                "failure_rate",
                "1..=100 percent (or set `consecutive` or `slow`: a policy needs a rule that trips)",
                "off".into(),
            );
        }
        if !in_ms_range(self.open_for_nanos) {
            return range(
                "open_for",
                "\"1ms\"..=\"24h\"",
                format!("{:?}", self.open_duration()),
            );
        }
        if self.open_backoff_milli < 1000
            || f64::from(self.open_backoff_milli) > MAX_OPEN_BACKOFF * 1000.0
        {
            return range(
                "open_backoff",
                "1..=100 (a multiplier; 1 means no backoff)",
                format!("{}", f64::from(self.open_backoff_milli) / 1000.0),
            );
        }
        if !in_ms_range(self.open_max_nanos) {
            return range(
                "open_max",
                "\"1ms\"..=\"24h\" (and at least `open_for` with `open_backoff`)",
                format!("{:?}", Duration::from_nanos(self.open_max_nanos)),
            );
        }
        if self.open_backoff_milli > 1000 && self.open_max_nanos < self.open_for_nanos {
            return range(
                "open_max",
                &format!("at least `open_for` ({:?})", self.open_duration()),
                format!("{:?}", Duration::from_nanos(self.open_max_nanos)),
            );
        }
        if self.half_open == 0 || self.half_open > MAX_HALF_OPEN {
            return range(
                "half_open",
                &format!("1..={MAX_HALF_OPEN} probes"),
                self.half_open.to_string(),
            );
        }
        if (self.half_open_lease_nanos != 0 || self.is_explicit(set::HALF_OPEN_LEASE))
            && !in_ms_range(self.half_open_lease_nanos)
        {
            return range(
                "half_open_lease",
                "\"1ms\"..=\"24h\"",
                format!("{:?}", Duration::from_nanos(self.half_open_lease_nanos)),
            );
        }
        if let Recovery::Progressive { phases, min_passes } = self.recovery {
            if phases == 0 || phases > MAX_PHASES {
                return range("phases", &format!("1..={MAX_PHASES}"), phases.to_string());
            }
            if min_passes == 0 || min_passes > MAX_WINDOW {
                return range(
                    "min_passes",
                    &format!("1..={MAX_WINDOW}"),
                    min_passes.to_string(),
                );
            }
        }
        Ok(())
    }
}

impl Default for Policy {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl PartialEq for Policy {
    /// Equal when every field has the same value (which fields were set explicitly is not compared).
    fn eq(&self, other: &Self) -> bool {
        let Policy {
            window,
            min_calls,
            failure_rate,
            slow_nanos,
            slow_rate,
            consecutive,
            open_for_nanos,
            open_backoff_milli,
            open_max_nanos,
            half_open,
            half_open_lease_nanos,
            recovery,
            max_concurrent,
            stuck_reopens,
            stuck_open_nanos,
            explicit: _,
            shared,
        } = *self;
        (
            window,
            min_calls,
            failure_rate,
            slow_nanos,
            slow_rate,
            consecutive,
        ) == (
            other.window,
            other.min_calls,
            other.failure_rate,
            other.slow_nanos,
            other.slow_rate,
            other.consecutive,
        ) && (
            open_for_nanos,
            open_backoff_milli,
            open_max_nanos,
            half_open,
        ) == (
            other.open_for_nanos,
            other.open_backoff_milli,
            other.open_max_nanos,
            other.half_open,
        ) && (half_open_lease_nanos, recovery, max_concurrent)
            == (
                other.half_open_lease_nanos,
                other.recovery,
                other.max_concurrent,
            )
            && (stuck_reopens, stuck_open_nanos) == (other.stuck_reopens, other.stuck_open_nanos)
            && shared == other.shared
    }
}

impl Eq for Policy {}

/// Changes to some fields of a [`Policy`]: what an operator's override names, and nothing else.
///
/// It has the setters of [`Policy`]; [`apply`](PolicyPatch::apply) calls the same setters on a
/// policy, so a field set through a patch follows the same rules as one set in code (see
/// [`Policy`]). A [`Policy`] converts into the patch of the fields it set explicitly, so
/// `registry.configure("payment", Policy::new().failure_rate(30))` changes `failure_rate` only.
///
/// ```
/// use std::time::Duration;
/// use fusebox::{Policy, PolicyPatch};
///
/// let declared = Policy::new().window(20).open_for(Duration::from_secs(30));
/// let patched = PolicyPatch::new().failure_rate(30).apply(declared);
/// assert_eq!(patched.failure_rate_percent(), Some(30));
/// assert_eq!(patched.open_duration(), Duration::from_secs(30), "fields not named are kept");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PolicyPatch {
    window: Option<Window>,
    min_calls: Option<u32>,
    /// 0: [`Policy::rate_off`].
    failure_rate: Option<u8>,
    slow: Option<Duration>,
    slow_rate: Option<u8>,
    consecutive: Option<u32>,
    open_for: Option<Duration>,
    open_backoff: Option<f64>,
    open_max: Option<Duration>,
    half_open: Option<u32>,
    half_open_lease: Option<Duration>,
    recovery: Option<Recovery>,
    max_concurrent: Option<u32>,
    stuck_after_recoveries: Option<u32>,
    stuck_after: Option<Duration>,
    shared: Option<bool>,
}

impl PolicyPatch {
    /// A patch that changes nothing.
    pub const fn new() -> Self {
        PolicyPatch {
            window: None,
            min_calls: None,
            failure_rate: None,
            slow: None,
            slow_rate: None,
            consecutive: None,
            open_for: None,
            open_backoff: None,
            open_max: None,
            half_open: None,
            half_open_lease: None,
            recovery: None,
            max_concurrent: None,
            stuck_after_recoveries: None,
            stuck_after: None,
            shared: None,
        }
    }

    /// See [`Policy::stuck_open`] (both of its rules).
    pub const fn stuck_open(mut self, failed_recoveries: u32, open_longer_than: Duration) -> Self {
        self.stuck_after_recoveries = Some(failed_recoveries);
        self.stuck_after = Some(open_longer_than);
        self
    }

    /// The count rule of [`Policy::stuck_open`] alone: failed recoveries in a row (0: off).
    pub const fn stuck_after_recoveries(mut self, failed_recoveries: u32) -> Self {
        self.stuck_after_recoveries = Some(failed_recoveries);
        self
    }

    /// The time rule of [`Policy::stuck_open`] alone: the open span (zero: off).
    pub const fn stuck_after(mut self, open_longer_than: Duration) -> Self {
        self.stuck_after = Some(open_longer_than);
        self
    }

    /// See [`Policy::window`].
    pub const fn window(mut self, calls: u32) -> Self {
        self.window = Some(Window::Count(calls));
        self
    }

    /// See [`Policy::time_window`].
    pub const fn time_window(mut self, span: Duration) -> Self {
        self.window = Some(Window::Time(span));
        self
    }

    /// See [`Policy::min_calls`].
    pub const fn min_calls(mut self, calls: u32) -> Self {
        self.min_calls = Some(calls);
        self
    }

    /// See [`Policy::failure_rate`].
    pub const fn failure_rate(mut self, percent: u8) -> Self {
        self.failure_rate = Some(percent);
        self
    }

    /// See [`Policy::rate_off`].
    pub const fn rate_off(mut self) -> Self {
        self.failure_rate = Some(0);
        self
    }

    /// See [`Policy::slow`].
    pub const fn slow(mut self, threshold: Duration) -> Self {
        self.slow = Some(threshold);
        self
    }

    /// See [`Policy::slow_rate`].
    pub const fn slow_rate(mut self, percent: u8) -> Self {
        self.slow_rate = Some(percent);
        self
    }

    /// See [`Policy::consecutive`].
    pub const fn consecutive(mut self, failures: u32) -> Self {
        self.consecutive = Some(failures);
        self
    }

    /// See [`Policy::open_for`].
    pub const fn open_for(mut self, wait: Duration) -> Self {
        self.open_for = Some(wait);
        self
    }

    /// See [`Policy::open_backoff`].
    pub const fn open_backoff(mut self, factor: f64) -> Self {
        self.open_backoff = Some(factor);
        self
    }

    /// See [`Policy::open_max`].
    pub const fn open_max(mut self, wait: Duration) -> Self {
        self.open_max = Some(wait);
        self
    }

    /// See [`Policy::half_open`].
    pub const fn half_open(mut self, probes: u32) -> Self {
        self.half_open = Some(probes);
        self
    }

    /// See [`Policy::half_open_lease`].
    pub const fn half_open_lease(mut self, lease: Duration) -> Self {
        self.half_open_lease = Some(lease);
        self
    }

    /// See [`Policy::progressive`].
    pub const fn progressive(mut self, phases: u32, min_passes: u32) -> Self {
        self.recovery = Some(Recovery::Progressive { phases, min_passes });
        self
    }

    /// See [`Policy::recovery`].
    pub const fn recovery(mut self, recovery: Recovery) -> Self {
        self.recovery = Some(recovery);
        self
    }

    /// See [`Policy::max_concurrent`].
    pub const fn max_concurrent(mut self, calls: u32) -> Self {
        self.max_concurrent = Some(calls);
        self
    }

    /// See [`Policy::shared`].
    pub const fn shared(mut self, shared: bool) -> Self {
        self.shared = Some(shared);
        self
    }

    /// True when the patch names no field.
    pub fn is_empty(&self) -> bool {
        *self == PolicyPatch::new()
    }

    /// This patch with every field `later` names taken from `later`.
    pub fn then(self, later: PolicyPatch) -> PolicyPatch {
        PolicyPatch {
            window: later.window.or(self.window),
            min_calls: later.min_calls.or(self.min_calls),
            failure_rate: later.failure_rate.or(self.failure_rate),
            slow: later.slow.or(self.slow),
            slow_rate: later.slow_rate.or(self.slow_rate),
            consecutive: later.consecutive.or(self.consecutive),
            open_for: later.open_for.or(self.open_for),
            open_backoff: later.open_backoff.or(self.open_backoff),
            open_max: later.open_max.or(self.open_max),
            half_open: later.half_open.or(self.half_open),
            half_open_lease: later.half_open_lease.or(self.half_open_lease),
            recovery: later.recovery.or(self.recovery),
            max_concurrent: later.max_concurrent.or(self.max_concurrent),
            stuck_after_recoveries: later.stuck_after_recoveries.or(self.stuck_after_recoveries),
            stuck_after: later.stuck_after.or(self.stuck_after),
            shared: later.shared.or(self.shared),
        }
    }

    /// `policy` with each field this patch names set through its [`Policy`] setter.
    pub fn apply(&self, policy: Policy) -> Policy {
        let mut p = policy;
        match self.window {
            Some(Window::Count(n)) => p = p.window(n),
            Some(Window::Time(span)) => p = p.time_window(span),
            None => {}
        }
        if let Some(v) = self.min_calls {
            p = p.min_calls(v);
        }
        match self.failure_rate {
            Some(0) => p = p.rate_off(),
            Some(v) => p = p.failure_rate(v),
            None => {}
        }
        if let Some(v) = self.slow {
            p = p.slow(v);
        }
        if let Some(v) = self.slow_rate {
            p = p.slow_rate(v);
        }
        if let Some(v) = self.consecutive {
            p = p.consecutive(v);
        }
        if let Some(v) = self.open_for {
            p = p.open_for(v);
        }
        if let Some(v) = self.open_backoff {
            p = p.open_backoff(v);
        }
        if let Some(v) = self.open_max {
            p = p.open_max(v);
        }
        if let Some(v) = self.half_open {
            p = p.half_open(v);
        }
        if let Some(v) = self.half_open_lease {
            p = p.half_open_lease(v);
        }
        if let Some(v) = self.recovery {
            p = p.recovery(v);
        }
        if let Some(v) = self.max_concurrent {
            p = p.max_concurrent(v);
        }
        if let Some(v) = self.shared {
            p = p.shared(v);
        }
        if self.stuck_after_recoveries.is_some() || self.stuck_after.is_some() {
            let (reopens, open) = p.stuck_open_after();
            p = p.stuck_open(
                self.stuck_after_recoveries.unwrap_or(reopens),
                self.stuck_after.unwrap_or(open),
            );
        }
        p
    }
}

impl From<Policy> for PolicyPatch {
    /// The fields `policy` set explicitly (see [`Policy`]).
    fn from(policy: Policy) -> Self {
        let named = |field: u16| policy.is_explicit(field);
        let nanos = |nanos: u64| Duration::from_nanos(nanos);
        PolicyPatch {
            window: named(set::WINDOW).then_some(policy.window),
            min_calls: named(set::MIN_CALLS).then_some(policy.min_calls),
            failure_rate: named(set::FAILURE_RATE).then_some(policy.failure_rate),
            slow: named(set::SLOW).then_some(nanos(policy.slow_nanos)),
            slow_rate: named(set::SLOW_RATE).then_some(policy.slow_rate),
            consecutive: named(set::CONSECUTIVE).then_some(policy.consecutive),
            open_for: named(set::OPEN_FOR).then_some(nanos(policy.open_for_nanos)),
            open_backoff: named(set::OPEN_BACKOFF)
                .then_some(f64::from(policy.open_backoff_milli) / 1000.0),
            open_max: named(set::OPEN_MAX).then_some(nanos(policy.open_max_nanos)),
            half_open: named(set::HALF_OPEN).then_some(policy.half_open),
            half_open_lease: named(set::HALF_OPEN_LEASE)
                .then_some(nanos(policy.half_open_lease_nanos)),
            recovery: named(set::RECOVERY).then_some(policy.recovery),
            max_concurrent: named(set::MAX_CONCURRENT).then_some(policy.max_concurrent),
            stuck_after_recoveries: named(set::STUCK_OPEN).then_some(policy.stuck_reopens),
            stuck_after: named(set::STUCK_OPEN).then_some(nanos(policy.stuck_open_nanos)),
            shared: named(set::SHARED).then_some(policy.shared),
        }
    }
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("window", &self.window)
            .field("min_calls", &self.min_calls)
            .field("failure_rate", &self.failure_rate_percent())
            .field("slow", &self.slow_threshold())
            .field("slow_rate", &self.slow_rate)
            .field("consecutive", &self.consecutive)
            .field("open_for", &self.open_duration())
            .field(
                "open_backoff",
                &(f64::from(self.open_backoff_milli) / 1000.0),
            )
            .field("open_max", &Duration::from_nanos(self.open_max_nanos))
            .field("half_open", &self.half_open)
            .field("half_open_lease", &Duration::from_nanos(self.lease_nanos()))
            .field("recovery", &self.recovery)
            .field("max_concurrent", &self.concurrency_limit())
            .field("stuck_open", &self.stuck_open_after())
            .field("shared", &self.shared)
            .finish()
    }
}

/// A policy field outside its allowed range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    key: Option<String>,
    field: &'static str,
    allowed: String,
    found: String,
}

impl PolicyError {
    pub(crate) fn new(
        field: &'static str,
        allowed: impl Into<String>,
        found: impl fmt::Display,
    ) -> Self {
        PolicyError {
            key: None,
            field,
            allowed: allowed.into(),
            found: found.to_string(),
        }
    }

    pub(crate) fn for_key(mut self, key: &str) -> Self {
        self.key = Some(key.to_owned());
        self
    }

    /// The breaker key the policy was meant for, when known.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The offending field, as spelled in the attribute.
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// The allowed range.
    pub fn allowed(&self) -> &str {
        &self.allowed
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(key) = &self.key {
            // A key can come from configuration: repeat a few dozen characters of it at most.
            let mut chars = key.chars();
            let head: String = chars.by_ref().take(40).collect();
            let more = if chars.next().is_some() { "…" } else { "" };
            write!(f, "breaker `{head}{more}`: ")?;
        }
        write!(
            f,
            "invalid `{}` = {}; use a value in {}",
            self.field, self.found, self.allowed
        )
    }
}

impl std::error::Error for PolicyError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let p = Policy::new();
        assert_eq!(p.window_len(), Some(100));
        assert_eq!(p.min_calls_len(), 10);
        assert_eq!(p.failure_rate_percent(), Some(50));
        assert_eq!(p.open_duration(), Duration::from_secs(10));
        assert_eq!(p.half_open_probes(), 1);
        assert_eq!(p.recovery_mode(), Recovery::Probes);
        assert!(p.validate().is_ok());
    }

    #[test]
    fn validation_names_the_field_and_range() {
        let e = Policy::new()
            .window(10)
            .min_calls(11)
            .validate()
            .unwrap_err();
        assert_eq!(e.field(), "min_calls");
        assert_eq!(
            e.to_string(),
            "invalid `min_calls` = 11; use a value in 1..=10 (at most `window`)"
        );
        let field = |p: Policy| p.validate().unwrap_err().field();
        assert_eq!(field(Policy::new().failure_rate(150)), "failure_rate");
        assert_eq!(field(Policy::new().window(0)), "window");
        assert_eq!(field(Policy::new().time_window(Duration::ZERO)), "window");
        assert_eq!(field(Policy::new().half_open(0)), "half_open");
        assert_eq!(field(Policy::new().open_for(Duration::ZERO)), "open_for");
        assert_eq!(
            field(Policy::new().slow(Duration::from_secs(1)).slow_rate(0)),
            "slow_rate"
        );
        assert_eq!(field(Policy::new().open_backoff(0.5)), "open_backoff");
        assert_eq!(
            field(
                Policy::new()
                    .open_backoff(2.0)
                    .open_for(Duration::from_secs(60))
                    .open_max(Duration::from_secs(1))
            ),
            "open_max"
        );
        assert_eq!(field(Policy::new().progressive(0, 5)), "phases");
        assert_eq!(field(Policy::new().progressive(3, 0)), "min_passes");
        assert_eq!(field(Policy::new().rate_off()), "failure_rate");
        assert!(Policy::new().rate_off().consecutive(5).validate().is_ok());
        assert!(
            Policy::new()
                .time_window(Duration::from_secs(30))
                .min_calls(500)
                .validate()
                .is_ok()
        );
    }

    #[test]
    fn backoff_multiplies_and_caps() {
        let p = Policy::new()
            .open_for(Duration::from_secs(10))
            .open_backoff(2.0)
            .open_max(Duration::from_secs(60));
        let secs = |n| Duration::from_nanos(p.open_wait_nanos(n)).as_secs();
        assert_eq!(
            [secs(0), secs(1), secs(2), secs(3), secs(100)],
            [10, 20, 40, 60, 60]
        );
        assert_eq!(
            Policy::new().open_wait_nanos(7),
            10_000_000_000,
            "no backoff by default"
        );
    }

    #[test]
    fn rules_between_fields_are_decided_here_whatever_the_order() {
        let min_calls = |p: Policy| p.min_calls_len();
        assert_eq!(min_calls(Policy::new().window(5)), 5);
        assert_eq!(min_calls(Policy::new().window(5).window(50)), 10);
        assert_eq!(min_calls(Policy::new().window(5).time_window(SECOND)), 10);
        assert_eq!(min_calls(Policy::new().min_calls(20).window(10)), 10);
        assert_eq!(
            Policy::new()
                .window(10)
                .min_calls(20)
                .validate()
                .unwrap_err()
                .field(),
            "min_calls"
        );
        assert!(Policy::new().window(5).validate().is_ok());

        let rate = |p: Policy| p.failure_rate_percent();
        assert_eq!(rate(Policy::new().consecutive(5)), None);
        assert_eq!(
            rate(Policy::new().consecutive(5).failure_rate(40)),
            Some(40)
        );
        assert_eq!(
            rate(Policy::new().failure_rate(40).consecutive(5)),
            Some(40)
        );
        assert_eq!(
            rate(Policy::new().failure_rate(50).consecutive(5)),
            Some(50)
        );
        assert_eq!(rate(Policy::new().consecutive(5).consecutive(0)), Some(50));
        assert!(Policy::new().consecutive(5).validate().is_ok());

        // Equality compares values, not which setters were called.
        assert_eq!(
            Policy::new().window(5),
            Policy::new().window(5).min_calls(5)
        );
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn zero_durations_set_explicitly_are_invalid() {
        let field = |p: Policy| p.validate().unwrap_err().field();
        assert_eq!(field(Policy::new().slow(Duration::ZERO)), "slow");
        assert_eq!(
            field(Policy::new().half_open_lease(Duration::ZERO)),
            "half_open_lease"
        );
        assert_eq!(field(Policy::new().open_max(Duration::ZERO)), "open_max");
        assert_eq!(
            field(Policy::new().open_max(Duration::from_micros(999))),
            "open_max"
        );
    }

    #[test]
    fn a_policy_is_the_patch_of_the_fields_it_set() {
        let declared = Policy::new().window(20).open_for(Duration::from_secs(30));
        let patched = PolicyPatch::from(Policy::new().failure_rate(30)).apply(declared);
        assert_eq!(patched, declared.failure_rate(30));
        assert_eq!(patched.open_duration(), Duration::from_secs(30));
        assert!(PolicyPatch::from(Policy::new()).is_empty());
        assert_eq!(
            PolicyPatch::new()
                .window(5)
                .then(PolicyPatch::new().window(8).half_open(2)),
            PolicyPatch::new().window(8).half_open(2)
        );
        // A patched field follows the same rules: a smaller window lowers `min_calls`.
        assert_eq!(
            PolicyPatch::new().window(5).apply(declared).min_calls_len(),
            5
        );
    }
}
