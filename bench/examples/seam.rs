//! The store seam's cost on a local key: an annotated `async fn` and a sync fn, closed and open,
//! run a fixed number of times, for instruction counts under `valgrind --tool=callgrind`.
//!
//! Build it without and with the `redis` feature and compare the instructions per call:
//! `cargo build --release -p fusebox-bench --example seam [--features redis]`, then
//! `valgrind --tool=callgrind target/release/examples/seam <path> 1000000` with `<path>` one of
//! `async-closed`, `async-open`, `sync-closed`, `sync-open`.

use std::hint::black_box;

use std::sync::LazyLock;

use fusebox::clock::FakeClock;
use fusebox::{Registry, circuit_breaker};

/// A fake clock: `rustix`'s vDSO lookup of the real clock does not run under valgrind.
static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(FakeClock::new()));

#[derive(Debug)]
struct Failed;

impl From<fusebox::Error> for Failed {
    fn from(_: fusebox::Error) -> Self {
        Failed
    }
}

#[circuit_breaker(key = "seam-async-closed", registry = REGISTRY, window = 100, open_for = "1h")]
async fn async_closed(x: u64) -> Result<u64, Failed> {
    Ok(black_box(x))
}

#[circuit_breaker(key = "seam-async-open", registry = REGISTRY, window = 100, open_for = "1h")]
async fn async_open(x: u64) -> Result<u64, Failed> {
    if x == u64::MAX {
        Err(Failed)
    } else {
        Ok(black_box(x))
    }
}

#[circuit_breaker(key = "seam-sync-closed", registry = REGISTRY, window = 100, open_for = "1h")]
fn sync_closed(x: u64) -> Result<u64, Failed> {
    Ok(black_box(x))
}

#[circuit_breaker(key = "seam-sync-open", registry = REGISTRY, window = 100, open_for = "1h")]
fn sync_open(x: u64) -> Result<u64, Failed> {
    if x == u64::MAX {
        Err(Failed)
    } else {
        Ok(black_box(x))
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("a path name");
    let calls: u64 = args
        .next()
        .map_or(1_000_000, |n| n.parse().expect("a call count"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        // Trip the "open" breakers (10 failures: the default `min_calls` at 100 % failures).
        for _ in 0..10 {
            let _ = async_open(u64::MAX).await;
            let _ = sync_open(u64::MAX);
        }
        for key in ["seam-async-open", "seam-sync-open"] {
            assert_eq!(REGISTRY.get(key).unwrap().state(), fusebox::State::Open);
        }
        let mut sum = 0u64;
        // One loop per path, so each loop holds only its own function's future.
        match path.as_str() {
            "async-closed" => {
                for i in 0..calls {
                    sum = sum.wrapping_add(async_closed(i).await.unwrap_or(0));
                }
            }
            "async-open" => {
                for i in 0..calls {
                    sum = sum.wrapping_add(async_open(i).await.unwrap_or(1));
                }
            }
            "sync-closed" => {
                for i in 0..calls {
                    sum = sum.wrapping_add(sync_closed(i).unwrap_or(0));
                }
            }
            "sync-open" => {
                for i in 0..calls {
                    sum = sum.wrapping_add(sync_open(i).unwrap_or(1));
                }
            }
            other => panic!("unknown path `{other}`"),
        }
        black_box(sum);
    });
}
