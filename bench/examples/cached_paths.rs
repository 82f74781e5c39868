//! Cached mode's closed path next to the in-memory one: an annotated `async fn` called a fixed
//! number of times on a closed circuit, for instruction counts under `valgrind --tool=callgrind`.
//!
//! Run: `cargo build --release -p fusebox-bench --features redis --example cached_paths`, then
//! `valgrind --tool=callgrind target/release/examples/cached_paths <path> 100000` with `<path>`
//! `local` (the in-memory breaker) or `cached` (cached mode; the process ends before the reporting
//! task sends the outcomes, so only the call path is counted); divide the total instructions by
//! the call count, after subtracting a run with 0 calls. Starts its own `redis-server` (not
//! traced), or uses `REDIS_URL`.

use std::hint::black_box;
use std::sync::LazyLock;

use fusebox::clock::FakeClock;
use fusebox::{Registry, circuit_breaker};

/// Fake clocks: `rustix`'s vDSO lookup of the real clock does not run under valgrind.
static LOCAL: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(FakeClock::new()));
static CACHED: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(FakeClock::new()));

#[derive(Debug)]
struct Failed;

impl From<fusebox::Error> for Failed {
    fn from(_: fusebox::Error) -> Self {
        Failed
    }
}

#[circuit_breaker(key = "paths", registry = LOCAL, window = 100, open_for = "1h")]
async fn local(x: u64) -> Result<u64, Failed> {
    Ok(black_box(x))
}

#[circuit_breaker(key = "paths", registry = CACHED, window = 100, open_for = "1h")]
async fn cached(x: u64) -> Result<u64, Failed> {
    Ok(black_box(x))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("a path name");
    let calls: u64 = args
        .next()
        .map_or(100_000, |n| n.parse().expect("a call count"));
    let (url, _server) = fusebox_bench::redis_server();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    rt.block_on(async {
        let store = fusebox_redis::RedisStore::builder(&url)
            .prefix(format!("cached-paths-{}", std::process::id()))
            .mode(fusebox_redis::Mode::Cached)
            .connect()
            .await
            .expect("the store connects");
        assert!(CACHED.share(store));
        // The first call learns the key's state from the script; the rest admit locally.
        black_box(cached(0).await.expect("closed"));
        black_box(local(0).await.expect("closed"));
        match path.as_str() {
            "local" => {
                for i in 0..calls {
                    black_box(local(black_box(i)).await.expect("closed"));
                }
            }
            "cached" => {
                for i in 0..calls {
                    black_box(cached(black_box(i)).await.expect("closed"));
                }
            }
            other => panic!("unknown path `{other}`"),
        }
    });
}
