//! Runs the closed path of a count window, a time window or a time window with slow-call tracking
//! (one counted failure in ten calls), or the rejected path of an open circuit, a fixed number of
//! times on a `FakeClock`, for instruction counts under `valgrind --tool=callgrind` (the real clock's
//! vDSO set-up does not run under valgrind here; the fake clock also makes the count exact).
//!
//! Run: `cargo build --release -p fusebox-bench --example window_paths` then
//! `valgrind --tool=callgrind target/release/examples/window_paths <path> 100000` with `<path>` one
//! of `count`, `time`, `slow`, `open`; subtract the count of a run with 0 calls and divide by the
//! call count.

use std::hint::black_box;
use std::time::Duration;

use fusebox::clock::FakeClock;
use fusebox::{Breaker, Policy, Registry};

#[inline(never)]
fn closed(breaker: &Breaker, calls: u64) {
    for i in 0..calls {
        let permit = breaker.try_acquire().expect("closed");
        if i % 10 == 0 {
            permit.failure();
        } else {
            permit.success();
        }
    }
}

#[inline(never)]
fn rejected(breaker: &Breaker, calls: u64) {
    for _ in 0..calls {
        assert!(breaker.try_acquire().is_err());
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("a path name");
    let calls: u64 = args
        .next()
        .map_or(100_000, |n| n.parse().expect("a call count"));
    let registry = Registry::with_clock(FakeClock::new());
    let policy = match path.as_str() {
        "count" => Policy::new(),
        "time" => Policy::new().time_window(Duration::from_secs(30)),
        "slow" => Policy::new()
            .time_window(Duration::from_secs(30))
            .slow(Duration::from_secs(2))
            .slow_rate(80),
        "open" => {
            let breaker = registry
                .breaker("open", Policy::new().window(1).min_calls(1))
                .expect("valid policy");
            breaker.try_acquire().expect("closed").failure();
            rejected(&breaker, calls);
            return;
        }
        other => panic!("unknown path `{other}`"),
    };
    let breaker = registry
        .breaker(path.as_str(), policy.failure_rate(100))
        .expect("valid policy");
    closed(&breaker, calls);
    black_box(&breaker);
}
