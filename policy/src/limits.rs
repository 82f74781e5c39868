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
/// The largest `throttle` factor (the K of adaptive throttling).
pub const MAX_THROTTLE: f64 = 100.0;
/// The largest `max_concurrent`, and the highest ceiling of an adaptive one.
pub const MAX_CONCURRENT: u32 = 1_000_000;
/// The floor of `max_concurrent = "adaptive"` written without its range.
pub const ADAPTIVE_FLOOR: u32 = 1;
/// The ceiling of `max_concurrent = "adaptive"` written without its range.
pub const ADAPTIVE_CEILING: u32 = 1000;
/// The limit an adaptive bulkhead starts at (within its floor and ceiling).
pub const ADAPTIVE_START: u32 = 20;
/// The fewest calls in a round of an adaptive bulkhead (a round is as many calls as the limit).
pub const ADAPTIVE_ROUND: u32 = 8;
/// The most calls in a round of an adaptive bulkhead.
pub const ADAPTIVE_MAX_ROUND: u32 = 1000;
/// An adaptive bulkhead shrinks when a round's mean latency exceeds the no-load latency by this
/// factor.
pub const ADAPTIVE_TOLERANCE: f64 = 1.1;
/// What an adaptive bulkhead's limit is multiplied by when it shrinks.
pub const ADAPTIVE_BACKOFF: f64 = 0.9;
/// After this many slow rounds in a row at its floor, an adaptive bulkhead takes the latency it
/// sees as the backend's new no-load latency (it got slower for good).
pub const ADAPTIVE_REBASE_ROUNDS: u32 = 32;
/// The span a retry budget counts attempts and retries over (Finagle's `ttl`), kept in one-second
/// buckets.
pub const RETRY_BUDGET_SPAN: Duration = Duration::from_secs(10);
/// The default hedge budget (`Policy::hedge_budget`): hedges are at most this many percent more
/// calls of the key over the last 10 s.
pub const DEFAULT_HEDGE_BUDGET: u8 = 10;
/// The most attempts a hedged call keeps in flight (`hedge_max`), the first one included.
pub const MAX_HEDGE: u32 = 5;
/// The largest ratio of a retry budget, in percent of first attempts.
pub const MAX_RETRY_PERCENT: u16 = 1000;
/// The largest floor of a retry budget, in retries per second.
pub const MAX_RETRY_FLOOR: u32 = 100_000;
/// The most replicas a shared circuit's quorum may ask for (`Policy::quorum`).
pub const MAX_QUORUM: u32 = 1000;
