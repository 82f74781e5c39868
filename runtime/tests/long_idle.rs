//! A circuit left open (or half-open with a lost probe) for any length of time recovers on the next
//! call: the state word keeps its times modulo 2^36 ms (about 795 days), and the full-width time kept
//! beside it decides.

use std::time::Duration;

use fusebox::clock::FakeClock;
use fusebox::{Policy, Reason, Registry, State};

const DAY: Duration = Duration::from_secs(86_400);
/// 2^36 milliseconds: the period of the state word's time field.
const WRAP: Duration = Duration::from_millis(1 << 36);
const OPEN_FOR: Duration = Duration::from_secs(30);

fn idles() -> Vec<Duration> {
    vec![
        DAY * 398,
        DAY * 500,
        DAY * 795,
        DAY * 2_000,
        WRAP,
        WRAP - OPEN_FOR,
        WRAP + OPEN_FOR,
        WRAP * 2,
    ]
}

fn policy() -> Policy {
    Policy::new().window(2).min_calls(1).open_for(OPEN_FOR)
}

#[test]
fn an_open_circuit_idle_for_any_time_admits_a_probe() {
    for idle in idles() {
        let clock = FakeClock::new();
        clock.advance(DAY); // not at the clock's origin
        let registry = Registry::with_clock(clock.clone());
        let breaker = registry.breaker("idle", policy()).unwrap();
        breaker.try_acquire().unwrap().failure();
        assert_eq!(breaker.state(), State::Open);
        clock.advance(idle);
        assert_eq!(
            breaker.snapshot().retry_after,
            Some(Duration::ZERO),
            "idle {idle:?}"
        );
        let probe = breaker
            .try_acquire()
            .unwrap_or_else(|e| panic!("idle {idle:?}: rejected: {e}"));
        assert!(probe.is_probe());
        probe.success();
        assert_eq!(breaker.state(), State::Closed, "idle {idle:?}");
    }
}

#[test]
fn a_reopened_circuit_after_a_long_idle_waits_its_own_wait_again() {
    for idle in idles() {
        let clock = FakeClock::new();
        let registry = Registry::with_clock(clock.clone());
        let breaker = registry.breaker("idle", policy()).unwrap();
        breaker.try_acquire().unwrap().failure();
        clock.advance(idle);
        breaker.try_acquire().unwrap().failure(); // the probe fails: open again, for 30 s
        assert_eq!(breaker.state(), State::Open);
        let rejected = breaker.try_acquire().unwrap_err();
        assert_eq!(rejected.reason(), Reason::Open);
        assert_eq!(
            breaker.snapshot().retry_after,
            Some(OPEN_FOR),
            "idle {idle:?}"
        );
        clock.advance(OPEN_FOR);
        assert!(breaker.try_acquire().unwrap().is_probe(), "idle {idle:?}");
    }
}

#[test]
fn a_lost_probe_is_rearmed_after_any_idle() {
    for idle in idles() {
        let clock = FakeClock::new();
        let registry = Registry::with_clock(clock.clone());
        let breaker = registry
            .breaker("idle", policy().half_open_lease(Duration::from_secs(10)))
            .unwrap();
        breaker.try_acquire().unwrap().failure();
        clock.advance(OPEN_FOR);
        std::mem::forget(breaker.try_acquire().unwrap()); // a probe that never reports
        assert_eq!(breaker.state(), State::HalfOpen);
        clock.advance(idle);
        let probe = breaker
            .try_acquire()
            .unwrap_or_else(|e| panic!("idle {idle:?}: rejected: {e}"));
        assert!(probe.is_probe());
    }
}
