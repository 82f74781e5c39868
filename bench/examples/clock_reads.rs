//! Times the three clocks a time window could read (`MonotonicClock`: `CLOCK_MONOTONIC_COARSE`
//! through the vDSO; `PreciseClock`: the TSC through `quanta`; `std::time::Instant`), and the closed
//! path (`try_acquire` then `success`) over a count window and over a 10 s time window on the real
//! clock, in interleaved rounds of a plain loop. Relative figures only: a loop on a loaded machine
//! measures the machine too, and the real clock does not run under valgrind (see `window_paths`
//! for instruction counts).
//!
//! Run: `cargo run --release -p fusebox-bench --example clock_reads`

use std::hint::black_box;
use std::time::{Duration, Instant};

use fusebox::clock::{Clock, MonotonicClock, PreciseClock};
use fusebox::{Breaker, Policy, Registry};

/// Calls per round.
const CALLS: u32 = 10_000_000;

/// Nanoseconds per call of `f` over one round.
fn per_call(mut f: impl FnMut() -> u64) -> f64 {
    let start = Instant::now();
    let mut sum = 0u64;
    for _ in 0..CALLS {
        sum = sum.wrapping_add(black_box(f()));
    }
    black_box(sum);
    start.elapsed().as_nanos() as f64 / f64::from(CALLS)
}

/// One closed call through `breaker`.
fn closed(breaker: &Breaker) -> u64 {
    black_box(breaker)
        .try_acquire()
        .expect("the breaker stays closed")
        .success();
    1
}

fn main() {
    let origin = Instant::now();
    let registry = Registry::new();
    let count = registry
        .breaker("count", Policy::new())
        .expect("valid policy");
    let time = registry
        .breaker("time", Policy::new().time_window(Duration::from_secs(10)))
        .expect("valid policy");
    println!("round | coarse | quanta | Instant | count window | time window | time/count");
    for round in 0..5 {
        let coarse = per_call(|| MonotonicClock.now_nanos());
        let precise = per_call(|| PreciseClock.now_nanos());
        let instant = per_call(|| origin.elapsed().as_nanos() as u64);
        let count_ns = per_call(|| closed(&count));
        let time_ns = per_call(|| closed(&time));
        println!(
            "{round:5} | {coarse:6.2} | {precise:6.2} | {instant:7.2} | {count_ns:12.2} | {time_ns:11.2} | {:10.2}",
            time_ns / count_ns
        );
    }
}
