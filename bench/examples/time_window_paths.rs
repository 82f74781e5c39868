//! The time window's closed path in the outside harness's shape: an annotated `async fn` (polled
//! once with a no-op waker) and a sync `fn` that always succeed, on the global registry and the
//! default clock (`MonotonicClock`), with `window = "10s", min_calls = 10` against the same
//! functions with the default count window; and the same four on a `FakeClock` registry. Before
//! the counted calls each path's breaker gets calls in two slices of its window (a 10 s
//! window's slice is 1 s: the set-up sleeps 1.1 s, or advances the fake clock), so its other
//! slices hold `min_calls`: the steady state of a long run.
//!
//! - wall time: `target/release/examples/time_window_paths wall` times the default-clock paths
//!   in interleaved rounds of a plain loop (relative figures only: a loop on a loaded machine
//!   measures the machine too); `perf stat -e task-clock` of `<path> N` minus `none 0` gives CPU
//!   time per call, less sensitive to the load;
//! - instructions per call: `valgrind --tool=callgrind target/release/examples/time_window_paths
//!   <path> 1000000` (add `--cache-sim=yes --LL=8388608,16,64` for cache misses), minus the run
//!   of `none`, divided by the call count, with `<path>` one of `count-async`, `time-async`,
//!   `count-sync`, `time-sync`, `clock` (the clock's read alone), `open-async`, `open-sync`
//!   (rejected calls) or the `fake-` versions of the first four on the `FakeClock` registry. valgrind gives the program no vDSO: glibc reads the clock by the
//!   `clock_gettime` system call, whose kernel side callgrind does not count, so its counts of
//!   the default clock's time paths leave the vDSO's instructions out. `bench/step_count.py`
//!   single-steps a call under gdb and counts them too.

use std::hint::black_box;
use std::time::Instant;

use std::sync::LazyLock;
use std::time::Duration;

use fusebox::clock::{Clock, FakeClock, MonotonicClock};
use fusebox::{Registry, circuit_breaker};
use fusebox_bench::{BenchError, poll_once};

/// The fake clock of [`FAKE`].
static CLOCK: LazyLock<FakeClock> = LazyLock::new(FakeClock::new);

/// A registry on [`CLOCK`], for instruction counts of the time window under valgrind.
static FAKE: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(CLOCK.clone()));

/// The outside harness's time window.
#[circuit_breaker(key = "time-window-paths.time-async", window = "10s", min_calls = 10)]
async fn time_async() -> Result<u64, BenchError> {
    Ok(black_box(1))
}

/// The same function on the default count window.
#[circuit_breaker(key = "time-window-paths.count-async")]
async fn count_async() -> Result<u64, BenchError> {
    Ok(black_box(1))
}

/// The outside harness's time window, sync.
#[circuit_breaker(key = "time-window-paths.time-sync", window = "10s", min_calls = 10)]
fn time_sync() -> Result<u64, BenchError> {
    Ok(black_box(1))
}

/// The same function on the default count window, sync.
#[circuit_breaker(key = "time-window-paths.count-sync")]
fn count_sync() -> Result<u64, BenchError> {
    Ok(black_box(1))
}

/// The time window on the fake clock.
#[circuit_breaker(key = "time-window-paths.fake-time-async", registry = FAKE, window = "10s", min_calls = 10)]
async fn fake_time_async() -> Result<u64, BenchError> {
    Ok(black_box(1))
}

/// The count window on the fake clock.
#[circuit_breaker(key = "time-window-paths.fake-count-async", registry = FAKE)]
async fn fake_count_async() -> Result<u64, BenchError> {
    Ok(black_box(1))
}

/// The time window on the fake clock, sync.
#[circuit_breaker(key = "time-window-paths.fake-time-sync", registry = FAKE, window = "10s", min_calls = 10)]
fn fake_time_sync() -> Result<u64, BenchError> {
    Ok(black_box(1))
}

/// The count window on the fake clock, sync.
#[circuit_breaker(key = "time-window-paths.fake-count-sync", registry = FAKE)]
fn fake_count_sync() -> Result<u64, BenchError> {
    Ok(black_box(1))
}

/// Opened by failures in the set-up: each call after it is rejected (the open path reads the
/// clock to know whether its wait is over).
#[circuit_breaker(
    key = "time-window-paths.open-async",
    window = 10,
    min_calls = 5,
    open_for = "1h"
)]
async fn open_async(fail: bool) -> Result<u64, BenchError> {
    if fail {
        Err(BenchError::Inner(0))
    } else {
        Ok(black_box(1))
    }
}

/// Opened by failures in the set-up, sync.
#[circuit_breaker(
    key = "time-window-paths.open-sync",
    window = 10,
    min_calls = 5,
    open_for = "1h"
)]
fn open_sync(fail: bool) -> Result<u64, BenchError> {
    if fail {
        Err(BenchError::Inner(0))
    } else {
        Ok(black_box(1))
    }
}

/// The default-clock paths, timed by `wall`.
const PATHS: [&str; 5] = [
    "count-async",
    "time-async",
    "count-sync",
    "time-sync",
    "clock",
];

/// `calls` calls of `path`; the path is matched once, outside the loop.
#[inline(never)]
fn run(path: &str, calls: u64) -> u64 {
    macro_rules! repeat {
        ($call:expr) => {{
            let mut sum = 0u64;
            for _ in 0..calls {
                sum = sum.wrapping_add(black_box($call));
            }
            sum
        }};
    }
    match path {
        "time-async" => repeat!(poll_once(time_async()).unwrap_or(0)),
        "count-async" => repeat!(poll_once(count_async()).unwrap_or(0)),
        "time-sync" => repeat!(time_sync().unwrap_or(0)),
        "count-sync" => repeat!(count_sync().unwrap_or(0)),
        "clock" => repeat!(MonotonicClock.now_nanos()),
        "fake-time-async" => repeat!(poll_once(fake_time_async()).unwrap_or(0)),
        "fake-count-async" => repeat!(poll_once(fake_count_async()).unwrap_or(0)),
        "fake-time-sync" => repeat!(fake_time_sync().unwrap_or(0)),
        "fake-count-sync" => repeat!(fake_count_sync().unwrap_or(0)),
        "open-async" => repeat!(poll_once(open_async(false)).unwrap_or(0)),
        "open-sync" => repeat!(open_sync(false).unwrap_or(0)),
        _ => 0,
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_default();
    for _ in 0..10 {
        let _ = poll_once(open_async(true));
        let _ = open_sync(true);
    }
    let warmed: Vec<&str> = if path == "wall" {
        PATHS.to_vec()
    } else {
        vec![path.as_str()]
    };
    // Every site resolves its breaker and fills its window past `min_calls`, in two slices.
    for round in 0..2 {
        if round == 1 {
            if path.starts_with("fake-") {
                CLOCK.advance(Duration::from_millis(1100));
            } else if path != "none" {
                std::thread::sleep(Duration::from_millis(1100));
            }
        }
        for name in &warmed {
            black_box(run(name, 200));
        }
    }
    if path == "wall" {
        const CALLS: u64 = 20_000_000;
        println!("round | {}", PATHS.join(" | "));
        for round in 0..5 {
            let figures: Vec<String> = PATHS
                .iter()
                .map(|name| {
                    let start = Instant::now();
                    black_box(run(name, CALLS));
                    format!("{:.2}", start.elapsed().as_nanos() as f64 / CALLS as f64)
                })
                .collect();
            println!("{round:5} | {}", figures.join(" | "));
        }
        return;
    }
    let calls: u64 = args
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    println!("{path}: {}", run(&path, calls));
}
