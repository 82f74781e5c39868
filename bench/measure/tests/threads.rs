//! Breakers cost no threads: creating 10,000 of them leaves the process's OS thread count as it was.

use std::time::Duration;

use fusebox::{Policy, Registry, State};
use fusebox_measure::os_threads;

#[test]
fn ten_thousand_breakers_start_no_thread() {
    let before = os_threads().expect("/proc/self/status is readable");
    let registry = Registry::new();
    let policy = Policy::new()
        .window(100)
        .failure_rate(50)
        .open_for(Duration::from_secs(60 * 60));
    for i in 0..10_000 {
        let breaker = registry.breaker(&format!("k{i}"), policy).unwrap();
        if i % 2 == 0 {
            // Open half of them: an open circuit schedules nothing either.
            while breaker.state() != State::Open {
                breaker.try_acquire().unwrap().failure();
            }
        }
    }
    let after = os_threads().expect("/proc/self/status is readable");
    assert!(after <= before, "threads grew from {before} to {after}");
}
