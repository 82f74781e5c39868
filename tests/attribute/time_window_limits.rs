//! Time windows at their limits (`fusebox::limits::MIN_TIME_WINDOW` and `MAX_TIME_WINDOW`): the
//! bucket arithmetic is exact at both ends, a bucket rotates exactly at its boundary, a long idle
//! empties the window, and the longest window costs no more memory than the shortest.

use std::time::Duration;

use fusebox::clock::FakeClock;
use fusebox::limits::{MAX_TIME_WINDOW, MIN_TIME_WINDOW, TIME_BUCKETS};
use fusebox::{Breaker, Policy, Registry, State};

const NS: Duration = Duration::from_nanos(1);

/// A breaker over a time window of `span` that never trips on the few calls these tests make.
fn breaker(clock: &FakeClock, key: &str, span: Duration) -> Breaker {
    let registry = Registry::with_clock(clock.clone());
    let policy = Policy::new().time_window(span).min_calls(1_000);
    registry.breaker(key, policy).expect("a valid policy")
}

fn fail(breaker: &Breaker) {
    breaker.try_acquire().expect("closed").failure();
}

fn pass(breaker: &Breaker) {
    breaker.try_acquire().expect("closed").success();
}

#[test]
fn the_limits_are_ten_milliseconds_and_two_hours() {
    assert_eq!(MIN_TIME_WINDOW, Duration::from_millis(10));
    assert_eq!(MAX_TIME_WINDOW, Duration::from_secs(2 * 60 * 60));
    assert_eq!(TIME_BUCKETS, 10);
    assert!(
        Policy::new()
            .time_window(MAX_TIME_WINDOW)
            .validate()
            .is_ok()
    );
    assert!(
        Policy::new()
            .time_window(MIN_TIME_WINDOW)
            .validate()
            .is_ok()
    );
    let over = Policy::new().time_window(MAX_TIME_WINDOW + NS).validate();
    assert_eq!(
        over.unwrap_err().to_string(),
        "invalid `window` = 7200.000000001s; use a value in \"10ms\"..=\"2h\" for a time window"
    );
    let under = Policy::new().time_window(MIN_TIME_WINDOW - NS).validate();
    assert_eq!(under.unwrap_err().field(), "window");
}

/// A call recorded at the start of a bucket counts for exactly one span: one nanosecond before
/// the span is over it is still in the window, at the span's end its bucket has rotated out.
fn exact_at(span: Duration) {
    let clock = FakeClock::new();
    let b = breaker(&clock, "exact", span);
    fail(&b);
    let bucket = span / TIME_BUCKETS;
    // Every other bucket of the window gets one success, at its first nanosecond.
    for _ in 1..TIME_BUCKETS {
        clock.advance(bucket);
        pass(&b);
    }
    let s = b.snapshot();
    assert_eq!((s.calls, s.failures), (10, 1), "{span:?}");
    clock.advance(bucket - NS);
    let s = b.snapshot();
    assert_eq!((s.calls, s.failures), (10, 1), "{span:?}, last nanosecond");
    clock.advance(NS);
    let s = b.snapshot();
    assert_eq!(
        (s.calls, s.failures),
        (9, 0),
        "{span:?}, first bucket rotated out"
    );
    // A record at the boundary lands in the new bucket and the sum stays exact.
    fail(&b);
    let s = b.snapshot();
    assert_eq!((s.calls, s.failures), (10, 1), "{span:?}, new bucket");
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn the_shortest_window_rotates_exactly_at_its_bucket_boundary() {
    exact_at(MIN_TIME_WINDOW);
}

#[test]
fn the_longest_window_rotates_exactly_at_its_bucket_boundary() {
    exact_at(MAX_TIME_WINDOW);
}

#[test]
fn after_a_long_idle_the_longest_window_sums_to_its_new_calls_only() {
    let clock = FakeClock::new();
    let b = breaker(&clock, "idle", MAX_TIME_WINDOW);
    for _ in 0..5 {
        fail(&b);
        clock.advance(Duration::from_secs(60));
    }
    assert_eq!(b.snapshot().failures, 5);
    // 30 days idle: far more than the window's span, every bucket is stale.
    clock.advance(Duration::from_secs(30 * 24 * 60 * 60));
    let s = b.snapshot();
    assert_eq!((s.calls, s.failures), (0, 0));
    pass(&b);
    fail(&b);
    let s = b.snapshot();
    assert_eq!((s.calls, s.failures), (2, 1));
    // One span after those two calls they are gone, wherever in their bucket they fell.
    clock.advance(MAX_TIME_WINDOW);
    assert_eq!(b.snapshot().calls, 0);
}

#[test]
fn the_longest_window_trips_on_failures_spread_over_two_hours() {
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    let policy = Policy::new()
        .time_window(MAX_TIME_WINDOW)
        .min_calls(10)
        .failure_rate(50);
    let b = registry.breaker("spread", policy).unwrap();
    // One call every 12 minutes (one per bucket), failing every other time: after 10 calls the
    // whole two hours are in the window and the rate is 50 %.
    for i in 0..10 {
        assert_eq!(b.state(), State::Closed, "call {i}");
        if i % 2 == 0 {
            fail(&b);
        } else {
            pass(&b);
        }
        clock.advance(Duration::from_secs(12 * 60));
    }
    assert_eq!(b.state(), State::Open);
}

#[test]
fn the_longest_window_costs_the_memory_of_the_shortest() {
    let clock = FakeClock::new();
    let short = breaker(&clock, "short", MIN_TIME_WINDOW);
    let long = breaker(&clock, "long", MAX_TIME_WINDOW);
    assert_eq!(short.footprint(), long.footprint());
}
