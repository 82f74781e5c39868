//! The policy types, defined once in the `fusebox-policy` crate (which the attribute validates
//! with too) and re-exported here under the paths the runtime and its users name; and the
//! readings of a policy the runtime makes in the unit of its state word, nanoseconds.

use std::time::Duration;

pub(crate) use fusebox_policy::limits::TIME_BUCKETS;
pub use fusebox_policy::{
    Others, Policy, PolicyError, PolicyPatch, PolicySettings, Recovery, RetryBudget, Window,
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

/// The open wait of `policy` after `reopens` consecutive failed recoveries, in nanoseconds:
/// `open_for` multiplied by `open_backoff` once per failed recovery, capped at `open_max` (or
/// `open_for`, when larger).
#[inline]
pub(crate) fn open_wait_nanos(policy: &Policy, reopens: u32) -> u64 {
    let settings = policy.settings();
    let open_for = nanos(settings.open_for);
    if reopens == 0 || settings.open_backoff <= 1.0 {
        return open_for;
    }
    let cap = nanos(settings.open_max).max(open_for);
    let wait = open_for as f64 * settings.open_backoff.powi(reopens.min(4096) as i32);
    if wait >= cap as f64 { cap } else { wait as u64 }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Policy, open_wait_nanos};

    #[test]
    fn backoff_multiplies_and_caps() {
        let p = Policy::new()
            .open_for(Duration::from_secs(10))
            .open_backoff(2.0)
            .open_max(Duration::from_secs(60));
        let secs = |n| Duration::from_nanos(open_wait_nanos(&p, n)).as_secs();
        assert_eq!(
            [secs(0), secs(1), secs(2), secs(3), secs(100)],
            [10, 20, 40, 60, 60]
        );
        assert_eq!(
            open_wait_nanos(&Policy::new(), 7),
            10_000_000_000,
            "no backoff by default"
        );
    }
}
