//! Time sources: the [`Clock`] trait, the real monotonic clock and the test [`FakeClock`].
//!
//! Breakers never sleep and never start timers; they read the clock on the request path when they
//! need to know whether an open circuit has waited long enough. Time is a `u64` count of nanoseconds
//! since an arbitrary, fixed origin.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
#[cfg(not(feature = "tsc"))]
use std::time::Instant;
use std::time::{Duration, SystemTime};

/// A source of monotonic time in nanoseconds since a fixed origin.
///
/// Implement it to drive breakers from your own time source; pass it to
/// [`Registry::with_clock`](crate::Registry::with_clock).
pub trait Clock: Send + Sync + 'static {
    /// Nanoseconds since this clock's origin. Must never go backwards.
    fn now_nanos(&self) -> u64;

    /// The wall-clock time now: what an HTTP-date `Retry-After` is measured against to become a
    /// wait (pushback, see [`RetryAfter`](crate::RetryAfter)). Nothing else reads it. The real
    /// clocks answer [`SystemTime::now`]; [`FakeClock`] answers the Unix epoch plus the time it
    /// was advanced by, so tests drive dates too.
    fn wall_time(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// The default real clock: cheap to read, with the resolution of the kernel's tick.
///
/// On Linux it reads `CLOCK_MONOTONIC_COARSE` (one vDSO read, about 5 ns here, against 12 ns for
/// the CPU's time-stamp counter and 25 to 31 ns for [`std::time::Instant::now`]); its resolution
/// is the kernel tick, 1 to 4 ms. Open waits and time-window buckets already have millisecond
/// granularity, and a slow-call threshold of tens of milliseconds or more is unaffected. For
/// slow-call thresholds of a few milliseconds, give the registry a [`PreciseClock`]. Elsewhere it
/// is the [`PreciseClock`].
#[derive(Debug, Clone, Copy, Default)]
pub struct MonotonicClock;

impl Clock for MonotonicClock {
    /// Always inlined in release builds: a time window's closed success reads it on every call.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn now_nanos(&self) -> u64 {
        #[cfg(target_os = "linux")]
        {
            let now = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
            (now.tv_sec as u64)
                .wrapping_mul(1_000_000_000)
                .wrapping_add(now.tv_nsec as u64)
        }
        #[cfg(not(target_os = "linux"))]
        {
            PreciseClock.now_nanos()
        }
    }
}

/// A nanosecond-resolution real clock, measured from its first read.
///
/// It reads [`std::time::Instant`] (on Linux `CLOCK_MONOTONIC` through the vDSO, 25 to 31 ns a
/// read here). With the feature `tsc` it reads the CPU's invariant time-stamp counter through
/// `quanta` instead (about 12 ns; the OS monotonic clock where the counter is not reliable),
/// calibrated once, on first use. Neither starts a thread.
///
/// ```
/// use fusebox::{clock::PreciseClock, Registry};
/// let registry = Registry::with_clock(PreciseClock);
/// # let _ = registry;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct PreciseClock;

#[cfg(feature = "tsc")]
struct Origin {
    clock: quanta::Clock,
    raw: u64,
}

#[cfg(feature = "tsc")]
static ORIGIN: LazyLock<Origin> = LazyLock::new(|| {
    let clock = quanta::Clock::new();
    let raw = clock.raw();
    Origin { clock, raw }
});

#[cfg(not(feature = "tsc"))]
static ORIGIN: LazyLock<Instant> = LazyLock::new(Instant::now);

impl Clock for PreciseClock {
    #[inline]
    fn now_nanos(&self) -> u64 {
        #[cfg(feature = "tsc")]
        {
            let origin = &*ORIGIN;
            origin.clock.delta_as_nanos(origin.raw, origin.clock.raw())
        }
        #[cfg(not(feature = "tsc"))]
        {
            duration_to_nanos(ORIGIN.elapsed())
        }
    }
}

/// A clock that only moves when told to, for deterministic tests.
///
/// Clones share one time, so a test keeps a clone while the registry owns another:
///
/// ```
/// use std::time::Duration;
/// use fusebox::clock::{Clock, FakeClock};
///
/// let clock = FakeClock::new();
/// let shared = clock.clone();
/// clock.advance(Duration::from_millis(250));
/// assert_eq!(shared.now_nanos(), 250_000_000);
/// ```
#[derive(Debug, Clone, Default)]
pub struct FakeClock {
    nanos: Arc<AtomicU64>,
}

impl FakeClock {
    /// A clock standing at zero.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves time forward by `by` (saturating at `u64::MAX` nanoseconds).
    pub fn advance(&self, by: Duration) {
        let by = duration_to_nanos(by);
        let _ = self
            .nanos
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                Some(now.saturating_add(by))
            });
    }

    /// The time since this clock's origin.
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Acquire))
    }
}

impl Clock for FakeClock {
    #[inline]
    fn now_nanos(&self) -> u64 {
        self.nanos.load(Ordering::Acquire)
    }

    /// The Unix epoch plus [`elapsed`](FakeClock::elapsed): `Thu, 01 Jan 1970 00:00:07 GMT`
    /// once advanced by 7 seconds.
    fn wall_time(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + self.elapsed()
    }
}

/// The clock a registry reads: the monotonic clock without dynamic dispatch, or any other.
#[derive(Clone)]
pub(crate) enum ClockSource {
    Monotonic,
    Custom(Arc<dyn Clock>),
}

impl ClockSource {
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn now_nanos(&self) -> u64 {
        match self {
            ClockSource::Monotonic => MonotonicClock.now_nanos(),
            ClockSource::Custom(clock) => clock.now_nanos(),
        }
    }

    /// The clock's wall time ([`Clock::wall_time`]).
    pub(crate) fn wall_time(&self) -> SystemTime {
        match self {
            ClockSource::Monotonic => MonotonicClock.wall_time(),
            ClockSource::Custom(clock) => clock.wall_time(),
        }
    }
}

impl std::fmt::Debug for ClockSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClockSource::Monotonic => f.write_str("MonotonicClock"),
            ClockSource::Custom(_) => f.write_str("CustomClock"),
        }
    }
}

/// Converts a duration to nanoseconds, saturating at `u64::MAX` (about 584 years).
pub(crate) const fn duration_to_nanos(d: Duration) -> u64 {
    let n = d.as_nanos();
    if n > u64::MAX as u128 {
        u64::MAX
    } else {
        n as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_clock_clones_share_time() {
        let a = FakeClock::new();
        let b = a.clone();
        a.advance(Duration::from_secs(3));
        b.advance(Duration::from_millis(5));
        assert_eq!(a.now_nanos(), 3_005_000_000);
        assert_eq!(b.elapsed(), Duration::from_millis(3005));
    }

    #[test]
    fn fake_clock_wall_time_is_the_epoch_plus_its_time() {
        let clock = FakeClock::new();
        clock.advance(Duration::from_secs(7));
        assert_eq!(
            clock.wall_time(),
            SystemTime::UNIX_EPOCH + Duration::from_secs(7)
        );
    }

    #[test]
    fn fake_clock_saturates() {
        let a = FakeClock::new();
        a.advance(Duration::MAX);
        a.advance(Duration::from_secs(1));
        assert_eq!(a.now_nanos(), u64::MAX);
    }

    fn follows_real_time(clock: impl Clock) {
        let first = clock.now_nanos();
        let started = std::time::Instant::now();
        while started.elapsed() < Duration::from_millis(40) {
            std::hint::spin_loop();
        }
        let elapsed = clock.now_nanos() - first;
        // At least the 40 ms that passed, less one tick of the coarse clock; the upper bound only
        // guards against a clock that runs wild (a loaded machine may stall the thread for long).
        assert!(
            (30_000_000..60_000_000_000).contains(&elapsed),
            "{elapsed} ns"
        );
    }

    #[test]
    fn real_clocks_follow_real_time() {
        follows_real_time(MonotonicClock);
        follows_real_time(PreciseClock);
    }
}
