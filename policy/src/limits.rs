//! The bounds [`Policy::validate`](crate::Policy::validate) checks.

use std::time::Duration;

/// The largest count window.
pub const MAX_WINDOW: u32 = 1_000_000;
/// The number of buckets a time window is split into.
pub const TIME_BUCKETS: u32 = 10;
/// The shortest time window (one millisecond per bucket).
pub const MIN_TIME_WINDOW: Duration = Duration::from_millis(10);
/// The longest time window.
pub const MAX_TIME_WINDOW: Duration = Duration::from_secs(2 * 60 * 60);
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
/// The span a retry budget counts attempts and retries over (Finagle's `ttl`), kept in one-second
/// buckets.
pub const RETRY_BUDGET_SPAN: Duration = Duration::from_secs(10);
/// The largest ratio of a retry budget, in percent of first attempts.
pub const MAX_RETRY_PERCENT: u16 = 1000;
/// The largest floor of a retry budget, in retries per second.
pub const MAX_RETRY_FLOOR: u32 = 100_000;
