//! The policy types, defined once in the `fusebox-policy` crate (which the attribute validates
//! with too) and re-exported here under the paths the runtime and its users name; and the
//! readings of a policy the runtime makes in the unit of its state word, nanoseconds.

use std::time::Duration;

pub(crate) use fusebox_policy::limits::TIME_BUCKETS;
use fusebox_policy::limits::{MAX_OPEN_FOR, MIN_OPEN_FOR};
pub use fusebox_policy::{
    Concurrency, DURATION_UNITS, DurationError, OpenContext, OpenForFn, Others, Policy,
    PolicyError, PolicyPatch, PolicySettings, Quorum, Recovery, RetryBudget, Window,
    parse_duration,
};

/// `duration` in nanoseconds, saturating at `u64::MAX` (a policy's durations come from
/// nanoseconds, so they never saturate).
#[inline]
pub(crate) fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// The slow-call threshold of `policy` in nanoseconds; 0 when slow calls are not tracked.
#[inline]
pub(crate) fn slow_nanos(policy: &Policy) -> u64 {
    policy.settings().slow.map_or(0, nanos)
}

/// The half-open lease of `policy` in nanoseconds (`open_for` unless set).
#[inline]
pub(crate) fn lease_nanos(policy: &Policy) -> u64 {
    nanos(policy.settings().half_open_lease)
}

/// The longest open wait of `policy` in nanoseconds: `open_max`, or `open_for` when larger.
#[inline]
pub(crate) fn open_cap_nanos(policy: &Policy) -> u64 {
    let settings = policy.settings();
    nanos(settings.open_max).max(nanos(settings.open_for))
}

/// The open wait of `policy` in nanoseconds, for an opening described by `open` (the failed
/// recoveries so far and the window that opened the circuit), before any jitter:
///
/// - with an open-wait function ([`Policy::open_for_fn`]), what it returns, floored at
///   [`MIN_OPEN_FOR`] (1 ms) and capped at `open_max` (or
///   `open_for`, when larger); a function that panics gives the wait without it (the panic is
///   reported as an ERROR event);
/// - else `open_for` multiplied by `open_backoff` once per failed recovery, capped at `open_max`
///   (or `open_for`, when larger).
#[cold]
pub(crate) fn open_wait_nanos(policy: &Policy, open: &OpenContext) -> u64 {
    let settings = policy.settings();
    let open_for = nanos(settings.open_for);
    let cap = open_cap_nanos(policy);
    if let Some(function) = settings.open_for_fn {
        match std::panic::catch_unwind(|| function.call(open)) {
            Ok(wait) => return nanos(wait).clamp(nanos(MIN_OPEN_FOR), cap),
            Err(_) => {
                let _ = std::panic::catch_unwind(|| {
                    tracing::error!(
                        target: "fusebox",
                        event = "open_for_fn_panicked",
                        "the `open_for` function panicked; this opening waits `open_for` (grown by `open_backoff`) instead"
                    )
                });
            }
        }
    }
    let reopens = open.failed_recoveries();
    if reopens == 0 || settings.open_backoff <= 1.0 {
        return open_for;
    }
    let wait = open_for as f64 * settings.open_backoff.powi(reopens.min(4096) as i32);
    if wait >= cap as f64 { cap } else { wait as u64 }
}

/// `wait` (nanoseconds) spread by `policy`'s `open_jitter`: plus a part of up to `open_jitter`
/// percent of it, drawn at random on each call (so each opening of each key, in each replica,
/// draws its own), capped at [`MAX_OPEN_FOR`] plus its
/// spread. Never shorter than `wait`. `wait` itself when the jitter is off.
#[cold]
pub(crate) fn jittered_nanos(policy: &Policy, wait: u64) -> u64 {
    let percent = policy.settings().open_jitter;
    if percent == 0 {
        return wait;
    }
    let wait = wait.min(nanos(MAX_OPEN_FOR));
    let span = wait / 100 * u64::from(percent) + wait % 100 * u64::from(percent) / 100;
    wait + fastrand::u64(0..=span)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{OpenContext, Policy, jittered_nanos, open_wait_nanos};

    /// The context of an opening after `reopens` failed recoveries (the window does not matter
    /// to a fixed wait).
    fn after(reopens: u32) -> OpenContext {
        OpenContext::new(reopens, 10, 5, 0)
    }

    #[test]
    fn backoff_multiplies_and_caps() {
        let p = Policy::new()
            .open_for(Duration::from_secs(10))
            .open_backoff(2.0)
            .open_max(Duration::from_secs(60));
        let secs = |n| Duration::from_nanos(open_wait_nanos(&p, &after(n))).as_secs();
        assert_eq!(
            [secs(0), secs(1), secs(2), secs(3), secs(100)],
            [10, 20, 40, 60, 60]
        );
        assert_eq!(
            open_wait_nanos(&Policy::new(), &after(7)),
            10_000_000_000,
            "no backoff by default"
        );
    }

    fn by_failures(open: &OpenContext) -> Duration {
        Duration::from_secs(u64::from(open.failures()))
    }

    fn panics(_: &OpenContext) -> Duration {
        panic!("a user's bug")
    }

    #[test]
    fn a_function_gives_the_wait_floored_and_capped() {
        let p = Policy::new()
            .open_for_fn(by_failures)
            .open_max(Duration::from_secs(60));
        let wait = |failures| {
            Duration::from_nanos(open_wait_nanos(&p, &OpenContext::new(0, 100, failures, 0)))
        };
        assert_eq!(wait(7), Duration::from_secs(7));
        assert_eq!(wait(90), Duration::from_secs(60), "capped by `open_max`");
        assert_eq!(wait(0), Duration::from_millis(1), "floored at 1 ms");
        let p = Policy::new().open_for_fn(panics);
        assert_eq!(
            open_wait_nanos(&p, &after(1)),
            10_000_000_000,
            "a panicking function gives `open_for`"
        );
    }

    #[test]
    fn jitter_lengthens_the_wait_by_up_to_its_share() {
        let wait = 10_000_000_000;
        assert_eq!(jittered_nanos(&Policy::new(), wait), wait, "off by default");
        let p = Policy::new().open_jitter(20);
        let draws: Vec<u64> = (0..1000).map(|_| jittered_nanos(&p, wait)).collect();
        assert!(draws.iter().all(|&d| (wait..=wait + wait / 5).contains(&d)));
        let (low, high) = (draws.iter().min().unwrap(), draws.iter().max().unwrap());
        assert!(
            high - low > wait / 5 * 9 / 10,
            "spread over the span: {low}..{high}"
        );
        assert_eq!(jittered_nanos(&Policy::new().open_jitter(100), 0), 0);
    }
}
