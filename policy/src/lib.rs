//! Trip and recovery rules: the [`Policy`] of a breaker, built in `const` context and validated.
//!
//! `lib.rs` holds the [`Policy`] type: its fields, setters, the rules between fields and the
//! getters; validation, patches, errors and limits have their own files. It is one concept, kept
//! in one file though it passes 600 lines: each knob's field, setter and getter side by side.
//!
//! This crate is the one definition of the policy knobs, their limits and their validation: the
//! `#[circuit_breaker]` attribute runs this validation when it expands, and the `fusebox` runtime
//! re-exports its policy items (`fusebox::Policy`, `fusebox::limits`, …; not the test lists `KNOBS`
//! and `NOT_ARGUMENTS`) and runs it when a policy is registered, configured or loaded. Use it through the `fusebox` crate.
//!
//! Adding a knob means:
//! 1. here, its field, its bit in `set` (a test fails when [`Policy::explicit`] has none
//!    left), its `const fn` setter and `get_` getter, its check in `validate.rs`, its
//!    [`PolicyPatch`] setter, and its name in [`KNOBS`];
//! 2. one row in the attribute's knob table (`with_knobs!` in `fusebox-macros`' `args.rs`: name,
//!    value type, reader, setter), from which the argument name, its reading, the setter call the
//!    expansion emits, the compile-time validation and the span of a refused value all follow; a
//!    knob the attribute does not take goes in [`NOT_ARGUMENTS`] instead, with the reason;
//! 3. one row in the configuration loader's `FIELDS` (`fusebox`'s `config.rs`: name and reader);
//! 4. its row and an example in the attribute reference (`fusebox`'s `doc/circuit_breaker.md`).
//!
//! Tests walk [`KNOBS`] and fail while the attribute's table, the loader's table or the
//! attribute reference misses a knob, or either table has a row that names none.
#![forbid(unsafe_code)]

use std::fmt;
use std::time::Duration;

use crate::limits::{MAX_OPEN_BACKOFF, MAX_OPEN_FOR, MIN_OPEN_FOR};

/// The name of every policy knob, as written in the attribute and in configuration files.
///
/// `window` covers both the count and the time window; `recovery` covers progressive recovery.
pub const KNOBS: [&str; 17] = [
    "window",
    "min_calls",
    "failure_rate",
    "failure_count",
    "slow",
    "slow_rate",
    "consecutive",
    "open_for",
    "open_backoff",
    "open_max",
    "half_open",
    "half_open_lease",
    "recovery",
    "max_concurrent",
    "stuck_open",
    "shared",
    "others",
];

/// The knobs of [`KNOBS`] that the `#[circuit_breaker]` attribute does not take as arguments, so
/// its argument table and its reference have no row for them: `stuck_open` is set on a `const`
/// policy named with `policy = …` ([`Policy::stuck_open`]) or in configuration.
pub const NOT_ARGUMENTS: [&str; 1] = ["stuck_open"];

/// True when `nanos` is within `MIN_OPEN_FOR..=MAX_OPEN_FOR`.
const fn in_ms_range(nanos: u64) -> bool {
    nanos >= duration_to_nanos(MIN_OPEN_FOR) && nanos <= duration_to_nanos(MAX_OPEN_FOR)
}

/// Converts a duration to nanoseconds, saturating at `u64::MAX` (about 584 years).
const fn duration_to_nanos(d: Duration) -> u64 {
    let n = d.as_nanos();
    if n > u64::MAX as u128 {
        u64::MAX
    } else {
        n as u64
    }
}

mod error;
pub mod limits;
mod patch;
#[cfg(test)]
mod tests;
mod validate;

pub use error::PolicyError;
pub use patch::PolicyPatch;

const DEFAULT_OPEN_MAX_NANOS: u64 = 5 * 60 * 1_000_000_000;
const DEFAULT_MIN_CALLS: u32 = 10;
const DEFAULT_FAILURE_RATE: u8 = 50;

/// Bits of [`Policy::explicit`]: which setters were called.
mod set {
    pub(super) const WINDOW: u32 = 1 << 0;
    pub(super) const MIN_CALLS: u32 = 1 << 1;
    pub(super) const FAILURE_RATE: u32 = 1 << 2;
    pub(super) const SLOW: u32 = 1 << 3;
    pub(super) const SLOW_RATE: u32 = 1 << 4;
    pub(super) const CONSECUTIVE: u32 = 1 << 5;
    pub(super) const OPEN_FOR: u32 = 1 << 6;
    pub(super) const OPEN_BACKOFF: u32 = 1 << 7;
    pub(super) const OPEN_MAX: u32 = 1 << 8;
    pub(super) const HALF_OPEN: u32 = 1 << 9;
    pub(super) const HALF_OPEN_LEASE: u32 = 1 << 10;
    pub(super) const RECOVERY: u32 = 1 << 11;
    pub(super) const MAX_CONCURRENT: u32 = 1 << 12;
    pub(super) const STUCK_OPEN: u32 = 1 << 13;
    pub(super) const SHARED: u32 = 1 << 14;
    pub(super) const FAILURE_COUNT: u32 = 1 << 15;
    pub(super) const OTHERS: u32 = 1 << 16;
}

/// Which outcomes the failure and slow-call rates are computed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// The last N recorded calls.
    Count(u32),
    /// The calls of the last span of time, kept in [`TIME_BUCKETS`](limits::TIME_BUCKETS) buckets rotated on the request path.
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

/// What an error that the classification does not count as a failure (an error not listed in
/// `failure = [...]`, or one its predicate rejects) does to the window.
///
/// fusebox's default is [`Others::Ignore`]: such an error (a declined card, a 404) passes through
/// and does not affect the circuit at all. Resilience4j, Polly, gobreaker, Sentinel and
/// tower-resilience count it as a success instead, which dilutes the failure rate;
/// [`Others::Success`] does the same. Either way the error passes through untouched, is not
/// retried and never reaches the fallback. A cancelled call, and an error converted from the
/// refusal of an inner fusebox breaker (see "Nested breakers" in `fusebox::guide::semantics`), count
/// as neither.
///
/// ```
/// # use fusebox_policy as fusebox;
/// use fusebox::{Others, Policy};
///
/// const LIKE_RESILIENCE4J: Policy = Policy::new().others(Others::Success);
/// assert_eq!(LIKE_RESILIENCE4J.get_others(), Others::Success);
/// assert_eq!(Policy::new().get_others(), Others::Ignore);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Others {
    /// Not counted: the call leaves the window, the failure run and a half-open probe's
    /// verdict as they were (a probe's slot is given back). The default.
    #[default]
    Ignore,
    /// Counted as a success: the window records a successful call, a run of consecutive
    /// failures ends, and a half-open probe passes.
    Success,
}

impl Others {
    /// The name written in the attribute and in configuration (`"ignore"`, `"success"`).
    pub const fn name(self) -> &'static str {
        match self {
            Others::Ignore => "ignore",
            Others::Success => "success",
        }
    }

    /// The value named `name` (`"ignore"` or `"success"`, as [`name`](Others::name) writes
    /// them); `None` for any other name.
    pub fn from_name(name: &str) -> Option<Others> {
        match name {
            "ignore" => Some(Others::Ignore),
            "success" => Some(Others::Success),
            _ => None,
        }
    }
}

impl fmt::Display for Others {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// When a circuit opens and how it recovers.
///
/// Built with `const fn` setters, so a policy can be a `const` shared by many functions and
/// named in the attribute (`policy = PAYMENT`):
///
/// ```
/// use std::time::Duration;
/// # use fusebox_policy as fusebox;
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
/// | `failure_rate` | 50 %, off with `consecutive` or `failure_count` alone | [`Policy::failure_rate`]; [`Policy::rate_off`] disables the rule |
/// | `failure_count` | off | [`Policy::failure_count`] |
/// | `slow`, `slow_rate` | off, 100 % | [`Policy::slow`], [`Policy::slow_rate`] |
/// | `consecutive` | off | [`Policy::consecutive`] |
/// | `open_for` | 10 s | [`Policy::open_for`] |
/// | `open_backoff`, `open_max` | 1 (none), 5 min | [`Policy::open_backoff`], [`Policy::open_max`] |
/// | `half_open`, `half_open_lease` | 1 probe, = `open_for` | [`Policy::half_open`], [`Policy::half_open_lease`] |
/// | `recovery` | probes | [`Policy::progressive`] |
/// | `max_concurrent` | unlimited | [`Policy::max_concurrent`] |
/// | `stuck_open` | 3 failed recoveries or 5 min | [`Policy::stuck_open`] (the `circuit_stuck_open` event) |
/// | `others` | ignore | [`Policy::others`]: uncounted errors ignored, or counted as successes |
///
/// Two rules connect fields, and they are decided here once for every way a policy is set (the
/// attribute, this builder, [`Registry::configure`](https://docs.rs/fusebox/latest/fusebox/struct.Registry.html#method.configure) and the
/// configuration files all go through these setters):
///
/// - **`min_calls` never exceeds the count window.** While `min_calls` is not set explicitly it is
///   10, or the count window when that is smaller: `Policy::new().window(5)` decides after 5 calls.
///   Setting a count window lowers a larger explicit `min_calls` to it (`BASE.window(2)` of a
///   `BASE` with `min_calls(4)` decides after 2 calls); setting `min_calls` above the window is
///   invalid.
/// - **`consecutive` or `failure_count` alone replaces the rate rule.** While `failure_rate` is
///   not set explicitly (by [`Policy::failure_rate`] or [`Policy::rate_off`]) it is 50 %, or off
///   when `consecutive` or `failure_count` is set: `Policy::new().consecutive(5)` opens on 5
///   failures in a row only. With `failure_rate` set too, every rule set applies and any may trip.
///
/// Two policies are equal
/// when every field has the same value, whichever fields were set explicitly.
///
/// The fields are public but hidden: the `fusebox` runtime reads them on its request path. They
/// are not part of the API; read a policy through its `get_` methods.
#[derive(Clone, Copy)]
pub struct Policy {
    #[doc(hidden)]
    pub window: Window,
    #[doc(hidden)]
    pub min_calls: u32,
    /// Percent; 0 when the rate rule is off.
    #[doc(hidden)]
    pub failure_rate: u8,
    /// Nanoseconds; 0 when slow calls are not tracked.
    #[doc(hidden)]
    pub slow_nanos: u64,
    #[doc(hidden)]
    pub slow_rate: u8,
    /// 0 when the rule is off.
    #[doc(hidden)]
    pub consecutive: u32,
    /// Counted failures in the window that open the circuit; 0 when the rule is off.
    #[doc(hidden)]
    pub failure_count: u32,
    #[doc(hidden)]
    pub open_for_nanos: u64,
    /// Multiplier in thousandths (1000 = no backoff).
    #[doc(hidden)]
    pub open_backoff_milli: u32,
    #[doc(hidden)]
    pub open_max_nanos: u64,
    #[doc(hidden)]
    pub half_open: u32,
    /// 0: the lease is `open_for`.
    #[doc(hidden)]
    pub half_open_lease_nanos: u64,
    #[doc(hidden)]
    pub recovery: Recovery,
    /// 0: unlimited.
    #[doc(hidden)]
    pub max_concurrent: u32,
    /// Failed recoveries in a row that make an open circuit "stuck"; 0: not by count.
    #[doc(hidden)]
    pub stuck_reopens: u32,
    /// Nanoseconds open (since it opened from closed) that make it "stuck"; 0: not by time.
    #[doc(hidden)]
    pub stuck_open_nanos: u64,
    /// The fields whose setter was called (bits of `set`); the others follow the rules above.
    /// Read when a policy is built, patched or compared on reconfiguration, never on the call
    /// path.
    #[doc(hidden)]
    pub explicit: u32,
    /// False: the key stays local on a registry shared through a store.
    #[doc(hidden)]
    pub shared: bool,
    /// What an error the classification does not count does to the window.
    #[doc(hidden)]
    pub others: Others,
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
        failure_count: 0,
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
        others: Others::Ignore,
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
    /// Strictly slower: a call that takes exactly `threshold` is not slow, one that takes a
    /// nanosecond more is.
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

    /// Opens after `failures` counted failures within the window, whatever their rate (Sentinel's
    /// exception count: 50 failures a minute matter at a 0.5 % rate). The count is the window's:
    /// the last N calls of a count window, the last span of a time window. It is not gated by
    /// [`min_calls`](Policy::min_calls) (the count is its own minimum), and at most a count
    /// window. Unless [`failure_rate`](Policy::failure_rate) or [`rate_off`](Policy::rate_off) was
    /// called, this turns the rate rule off (`failure_count(0)` turns the count rule off and, with
    /// no `consecutive`, the rate rule back on).
    ///
    /// ```
    /// # use fusebox_policy as fusebox;
    /// use std::time::Duration;
    /// use fusebox::Policy;
    ///
    /// // 50 failures within a minute open the circuit, and so does a 50 % rate.
    /// const SEARCH: Policy = Policy::new()
    ///     .time_window(Duration::from_secs(60))
    ///     .failure_count(50)
    ///     .failure_rate(50);
    /// assert_eq!(SEARCH.get_failure_count(), Some(50));
    /// assert_eq!(SEARCH.get_failure_rate(), Some(50));
    /// // Alone, it replaces the rate rule.
    /// assert_eq!(Policy::new().failure_count(5).get_failure_rate(), None);
    /// ```
    pub const fn failure_count(mut self, failures: u32) -> Self {
        self.failure_count = failures;
        self.mark(set::FAILURE_COUNT)
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
    /// (reason `BulkheadFull`) and not counted as a failure.
    pub const fn max_concurrent(mut self, calls: u32) -> Self {
        self.max_concurrent = calls;
        self.mark(set::MAX_CONCURRENT)
    }

    /// Probe recovery (the default) or progressive recovery; see [`Recovery`].
    pub const fn recovery(mut self, recovery: Recovery) -> Self {
        self.recovery = recovery;
        self.mark(set::RECOVERY)
    }

    /// Records that `field` was set explicitly and recomputes the fields that follow the rules in
    /// the type's documentation.
    const fn mark(mut self, field: u32) -> Self {
        self.explicit |= field;
        if self.explicit & set::MIN_CALLS == 0 {
            self.min_calls = match self.window {
                Window::Count(n) if n < DEFAULT_MIN_CALLS => n,
                _ => DEFAULT_MIN_CALLS,
            };
        }
        if self.explicit & set::FAILURE_RATE == 0 {
            self.failure_rate = if self.consecutive != 0 || self.failure_count != 0 {
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

    /// On a registry shared across replicas (`Registry::share`, feature `redis`): `false` keeps
    /// this key's breaker local to the replica (per-host dynamic keys, for instance). Default
    /// `true`; on a registry that is not shared it changes nothing.
    pub const fn shared(mut self, shared: bool) -> Self {
        self.shared = shared;
        self.mark(set::SHARED)
    }

    /// What an error that the classification does not count as a failure does: nothing
    /// ([`Others::Ignore`], the default) or a success in the window ([`Others::Success`], as
    /// Resilience4j, Polly and Sentinel count it). See [`Others`].
    pub const fn others(mut self, others: Others) -> Self {
        self.others = others;
        self.mark(set::OTHERS)
    }

    /// True when `field` (a bit of `set`) was set explicitly.
    #[doc(hidden)]
    #[inline]
    pub const fn is_explicit(&self, field: u32) -> bool {
        self.explicit & field != 0
    }

    // One getter per knob, named `get_` + the knob (the plain names are the setters). The getters
    // and the hidden helpers below are `#[inline]`: the runtime calls them across the crate
    // boundary on its request path, where they were same-crate calls before this crate existed.

    /// `window`: a count or a time window.
    #[inline]
    pub const fn get_window(&self) -> Window {
        self.window
    }

    /// `min_calls`: the number of recorded calls below which the rates are not evaluated.
    #[inline]
    pub const fn get_min_calls(&self) -> u32 {
        self.min_calls
    }

    /// `failure_rate`: the threshold in percent, or `None` when the rule is off.
    #[inline]
    pub const fn get_failure_rate(&self) -> Option<u8> {
        if self.failure_rate == 0 {
            None
        } else {
            Some(self.failure_rate)
        }
    }

    /// `slow`: the slow-call threshold, or `None` when slow calls are not tracked.
    #[inline]
    pub const fn get_slow(&self) -> Option<Duration> {
        if self.slow_nanos == 0 {
            None
        } else {
            Some(Duration::from_nanos(self.slow_nanos))
        }
    }

    /// `slow_rate`: the slow-call rate threshold in percent (it applies with `slow` only).
    #[inline]
    pub const fn get_slow_rate(&self) -> u8 {
        self.slow_rate
    }

    /// `consecutive`: the counted failures in a row that open the circuit, or `None` when the
    /// rule is off.
    #[inline]
    pub const fn get_consecutive(&self) -> Option<u32> {
        if self.consecutive == 0 {
            None
        } else {
            Some(self.consecutive)
        }
    }

    /// `failure_count`: the counted failures within the window that open the circuit, or `None`
    /// when the rule is off.
    #[inline]
    pub const fn get_failure_count(&self) -> Option<u32> {
        if self.failure_count == 0 {
            None
        } else {
            Some(self.failure_count)
        }
    }

    /// `open_for`: the open wait (before any backoff).
    #[inline]
    pub const fn get_open_for(&self) -> Duration {
        Duration::from_nanos(self.open_for_nanos)
    }

    /// `open_backoff`: the multiplier of the wait per failed recovery (1: no backoff).
    #[inline]
    pub fn get_open_backoff(&self) -> f64 {
        f64::from(self.open_backoff_milli) / 1000.0
    }

    /// `open_max`: the longest wait `open_backoff` grows to.
    #[inline]
    pub const fn get_open_max(&self) -> Duration {
        Duration::from_nanos(self.open_max_nanos)
    }

    /// `half_open`: the number of half-open probes.
    #[inline]
    pub const fn get_half_open(&self) -> u32 {
        self.half_open
    }

    /// `half_open_lease`: how long a probe may stay unreported (`open_for` unless set).
    #[inline]
    pub const fn get_half_open_lease(&self) -> Duration {
        Duration::from_nanos(self.lease_nanos())
    }

    /// `recovery`: probes or progressive recovery.
    #[inline]
    pub const fn get_recovery(&self) -> Recovery {
        self.recovery
    }

    /// `max_concurrent`: the bulkhead limit, or `None` when calls in flight are unlimited.
    #[inline]
    pub const fn get_max_concurrent(&self) -> Option<u32> {
        if self.max_concurrent == 0 {
            None
        } else {
            Some(self.max_concurrent)
        }
    }

    /// `shared`: false when [`Policy::shared`] keeps the key local.
    #[inline]
    pub const fn is_shared(&self) -> bool {
        self.shared
    }

    /// `others`: what an error the classification does not count does (see [`Others`]).
    #[inline]
    pub const fn get_others(&self) -> Others {
        self.others
    }

    /// `stuck_open`: failed recoveries in a row (0: off) and the open span (zero: off).
    #[inline]
    pub const fn get_stuck_open(&self) -> (u32, Duration) {
        (
            self.stuck_reopens,
            Duration::from_nanos(self.stuck_open_nanos),
        )
    }

    /// The half-open lease in nanoseconds (`open_for` unless set).
    #[doc(hidden)]
    #[inline]
    pub const fn lease_nanos(&self) -> u64 {
        if self.half_open_lease_nanos == 0 {
            self.open_for_nanos
        } else {
            self.half_open_lease_nanos
        }
    }

    /// The open wait after `reopens` consecutive failed recoveries.
    #[doc(hidden)]
    #[inline]
    pub fn open_wait_nanos(&self, reopens: u32) -> u64 {
        if reopens == 0 || self.open_backoff_milli <= 1000 {
            return self.open_for_nanos;
        }
        let cap = self.open_max_nanos.max(self.open_for_nanos);
        let factor = f64::from(self.open_backoff_milli) / 1000.0;
        let wait = self.open_for_nanos as f64 * factor.powi(reopens.min(4096) as i32);
        if wait >= cap as f64 { cap } else { wait as u64 }
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
            failure_count,
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
            others,
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
            && (stuck_reopens, stuck_open_nanos, failure_count)
                == (
                    other.stuck_reopens,
                    other.stuck_open_nanos,
                    other.failure_count,
                )
            && shared == other.shared
            && others == other.others
    }
}

impl Eq for Policy {}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("window", &self.window)
            .field("min_calls", &self.min_calls)
            .field("failure_rate", &self.get_failure_rate())
            .field("slow", &self.get_slow())
            .field("slow_rate", &self.slow_rate)
            .field("consecutive", &self.consecutive)
            .field("failure_count", &self.get_failure_count())
            .field("open_for", &self.get_open_for())
            .field(
                "open_backoff",
                &(f64::from(self.open_backoff_milli) / 1000.0),
            )
            .field("open_max", &Duration::from_nanos(self.open_max_nanos))
            .field("half_open", &self.half_open)
            .field("half_open_lease", &Duration::from_nanos(self.lease_nanos()))
            .field("recovery", &self.recovery)
            .field("max_concurrent", &self.get_max_concurrent())
            .field("stuck_open", &self.get_stuck_open())
            .field("shared", &self.shared)
            .field("others", &self.others)
            .finish()
    }
}
