//! The defaults and bounds of the arguments, read from `fusebox-policy`, the crate whose
//! validation the runtime runs: they cannot drift apart.

use fusebox_policy::{Policy, Window, limits};

/// The default count window of `fusebox::Policy`.
pub(super) const DEFAULT_WINDOW: u64 = match Policy::DEFAULT.settings().window {
    Window::Count(n) => n as u64,
    _ => 0,
};
/// The default `open_for` of `fusebox::Policy`, in nanoseconds.
pub(super) const DEFAULT_OPEN_FOR_NANOS: u64 =
    Policy::DEFAULT.settings().open_for.as_nanos() as u64;
/// The default `open_max` of `fusebox::Policy`, in nanoseconds.
pub(super) const DEFAULT_OPEN_MAX_NANOS: u64 =
    Policy::DEFAULT.settings().open_max.as_nanos() as u64;
/// The largest count window, also the largest `consecutive` and `min_passes`.
pub(super) const MAX_WINDOW: u64 = limits::MAX_WINDOW as u64;
/// The most half-open probes.
pub(super) const MAX_HALF_OPEN: u64 = limits::MAX_HALF_OPEN as u64;
/// The most phases of progressive recovery.
pub(super) const MAX_PHASES: u64 = limits::MAX_PHASES as u64;
/// The largest `open_backoff` factor.
pub(super) const MAX_OPEN_BACKOFF: f64 = limits::MAX_OPEN_BACKOFF;
/// The largest `throttle` factor.
pub(super) const MAX_THROTTLE: f64 = limits::MAX_THROTTLE;
/// The largest `min_calls` (a time window bounds it only by the calls it holds).
pub(super) const MAX_CALLS: u64 = u32::MAX as u64;
/// The largest `max_concurrent`.
pub(super) const MAX_CONCURRENT: u64 = limits::MAX_CONCURRENT as u64;
/// The most attempts `retry` allows.
pub(super) const MAX_RETRY: u64 = 100;

/// The allowed durations of one argument, in nanoseconds, and how messages spell the bounds.
#[derive(Clone, Copy)]
pub(super) struct DurationRange {
    /// The shortest, in nanoseconds.
    pub(super) min: u128,
    /// The longest, in nanoseconds.
    pub(super) max: u128,
    /// The bounds as messages spell them.
    pub(super) text: &'static str,
}

/// `open_for`, `slow`, `open_max`, `half_open_lease`, `timeout`, `deadline`
/// (`fusebox::limits::MIN_OPEN_FOR..=fusebox::limits::MAX_OPEN_FOR`).
pub(super) const MS_TO_DAY: DurationRange = DurationRange {
    min: limits::MIN_OPEN_FOR.as_nanos(),
    max: limits::MAX_OPEN_FOR.as_nanos(),
    text: "from \"1ms\" to \"24h\"",
};

/// A time window (`fusebox::limits::MIN_TIME_WINDOW..=fusebox::limits::MAX_TIME_WINDOW`).
pub(super) const TIME_WINDOW: DurationRange = DurationRange {
    min: limits::MIN_TIME_WINDOW.as_nanos(),
    max: limits::MAX_TIME_WINDOW.as_nanos(),
    text: "from \"10ms\" to \"2h\" for a time window",
};

/// The base delay of `backoff` (the longest single delay is `fusebox::limits::MAX_BACKOFF`).
pub(super) const BACKOFF: DurationRange = DurationRange {
    min: 1_000_000,
    max: 30 * 1_000_000_000,
    text: "from \"1ms\" to \"30s\"",
};

/// The delay of `hedge` (a fixed one; a learned one comes from the key's latencies).
pub(super) const HEDGE_DELAY: DurationRange = DurationRange {
    min: 1_000_000,
    max: 60 * 1_000_000_000,
    text: "from \"1ms\" to \"60s\"",
};
