//! Runs one benchmarked path a fixed number of times, for instruction counts under
//! `valgrind --tool=callgrind` (which, unlike wall time, does not depend on machine load).
//!
//! Run: `cargo build --release -p fusebox-bench --example paths` then
//! `valgrind --tool=callgrind target/release/examples/paths <path> 1000000` with `<path>` one of
//! `fusebox-closed`, `fusebox-open`, `failsafe-closed`, `failsafe-open`, `recloser-closed`,
//! `recloser-open`; divide the total instructions by the call count (set-up is under 1 %).

use std::hint::black_box;
use std::time::Duration;

use failsafe::CircuitBreaker as _;
use fusebox::{Policy, Registry, State};

const OPEN_WAIT: Duration = Duration::from_secs(60 * 60);

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("a path name");
    let calls: u64 = args
        .next()
        .map_or(1_000_000, |n| n.parse().expect("a call count"));

    let registry = Registry::new();
    let fusebox = registry
        .breaker(
            "paths",
            Policy::new()
                .window(100)
                .failure_rate(50)
                .open_for(OPEN_WAIT),
        )
        .expect("valid policy");
    let failsafe = failsafe::Config::new()
        .failure_policy(failsafe::failure_policy::consecutive_failures(
            50,
            failsafe::backoff::constant(OPEN_WAIT),
        ))
        .build();
    let recloser = recloser::Recloser::custom()
        .error_rate(0.5)
        .closed_len(100)
        .open_wait(OPEN_WAIT)
        .build();
    if path.ends_with("-open") {
        while fusebox.state() != State::Open {
            fusebox.try_acquire().expect("closed").failure();
        }
        for _ in 0..100 {
            let _ = failsafe.call(|| Err::<u64, u64>(0));
            let _ = recloser.call(|| Err::<u64, u64>(0));
        }
    }

    let mut sum = 0u64;
    for _ in 0..calls {
        sum += match path.as_str() {
            "fusebox-closed" | "fusebox-open" => match fusebox.try_acquire() {
                Ok(permit) => {
                    permit.success();
                    1
                }
                Err(_) => 0,
            },
            "failsafe-closed" | "failsafe-open" => failsafe.call(|| Ok::<u64, u64>(1)).unwrap_or(0),
            "recloser-closed" | "recloser-open" => recloser.call(|| Ok::<u64, u64>(1)).unwrap_or(0),
            other => panic!("unknown path `{other}`"),
        };
        black_box(sum);
    }
    println!("{path}: {sum} of {calls} calls admitted");
}
