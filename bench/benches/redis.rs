//! Per-call latency on loopback, p50 and p99: a plain `PING` round trip, a strict-mode shared call
//! (admission and report: two script calls), a cached-mode call on a closed circuit, and the
//! in-memory breaker; and, in cached mode, how long after one replica's tripping call returns
//! another replica rejects (the OPEN committed by the first one's report, pushed by pub/sub).
//!
//! `cargo bench -p fusebox-bench --bench redis --features redis` (starts its own `redis-server`,
//! or uses `REDIS_URL`). `FUSEBOX_BENCH_CALLS` sets the calls per row (default 20,000).

use std::hint::black_box;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use fusebox::{Registry, circuit_breaker};

#[derive(Debug)]
struct Failed;

impl From<fusebox::Error> for Failed {
    fn from(_: fusebox::Error) -> Self {
        Failed
    }
}

static SHARED: LazyLock<Registry> = LazyLock::new(Registry::new);
static LOCAL: LazyLock<Registry> = LazyLock::new(Registry::new);
static CACHED: LazyLock<Registry> = LazyLock::new(Registry::new);
static REPLICA_A: LazyLock<Registry> = LazyLock::new(Registry::new);
static REPLICA_B: LazyLock<Registry> = LazyLock::new(Registry::new);

#[circuit_breaker(key = "bench", registry = CACHED, window = 100, open_for = "1h")]
async fn cached(x: u64) -> Result<u64, Failed> {
    Ok(black_box(x))
}

/// Replica A's call to a failing backend: "5 failures open".
#[circuit_breaker(key = "push", registry = REPLICA_A, window = 5, min_calls = 5, open_for = "1h")]
async fn failing() -> Result<(), Failed> {
    Err(Failed)
}

/// Replica B's handle on the same key (only its state is read).
#[circuit_breaker(key = "push", registry = REPLICA_B, window = 5, min_calls = 5, open_for = "1h")]
async fn idle() -> Result<(), Failed> {
    Ok(())
}

#[circuit_breaker(key = "bench", registry = SHARED, window = 100, open_for = "1h")]
async fn shared(x: u64) -> Result<u64, Failed> {
    Ok(black_box(x))
}

#[circuit_breaker(key = "bench-quorum", registry = SHARED, window = 100, open_for = "1h", quorum = 2)]
async fn shared_quorum(x: u64) -> Result<u64, Failed> {
    Ok(x)
}

#[circuit_breaker(key = "bench-quorum", registry = CACHED, window = 100, open_for = "1h", quorum = 2)]
async fn cached_quorum(x: u64) -> Result<u64, Failed> {
    Ok(x)
}

#[circuit_breaker(key = "bench", registry = LOCAL, window = 100, open_for = "1h")]
async fn local(x: u64) -> Result<u64, Failed> {
    Ok(black_box(x))
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    (at(0.50), at(0.99))
}

// One benchmark run, row after row, printed as one table; not a call path.
#[allow(clippy::too_many_lines)]
fn main() {
    // `cargo bench` passes `--bench`; `cargo test` runs benches with no such flag: do one call each.
    let benching = std::env::args().any(|a| a == "--bench");
    let calls: usize = if benching {
        std::env::var("FUSEBOX_BENCH_CALLS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(20_000)
    } else {
        10
    };
    let (url, server) = fusebox_bench::redis_server();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = redis::Client::open(url.as_str()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let store = fusebox_redis::RedisStore::builder(&url)
            .prefix(format!("bench-{}", std::process::id()))
            .connect()
            .await
            .unwrap();
        SHARED.share(store);
        let prefix = format!("bench-cached-{}", std::process::id());
        let cached_store = |prefix: String| {
            fusebox_redis::RedisStore::builder(&url)
                .prefix(prefix)
                .mode(fusebox_redis::Mode::Cached)
                .connect()
        };
        CACHED.share(cached_store(prefix.clone()).await.unwrap());
        REPLICA_A.share(cached_store(prefix.clone()).await.unwrap());
        REPLICA_B.share(cached_store(prefix.clone()).await.unwrap());
        let operator = fusebox_redis::RedisStore::builder(&url)
            .prefix(prefix)
            .connect()
            .await
            .unwrap();
        let mut rows = Vec::new();
        let mut samples = Vec::with_capacity(calls);
        for _ in 0..calls {
            let start = Instant::now();
            let _: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
            samples.push(start.elapsed());
        }
        rows.push(("PING round trip", percentiles(std::mem::take(&mut samples))));
        for i in 0..calls {
            let start = Instant::now();
            black_box(shared(i as u64).await.unwrap());
            samples.push(start.elapsed());
        }
        rows.push((
            "strict (admission + report)",
            percentiles(std::mem::take(&mut samples)),
        ));
        for i in 0..calls {
            let start = Instant::now();
            black_box(shared_quorum(i as u64).await.unwrap());
            samples.push(start.elapsed());
        }
        rows.push((
            "strict, quorum = 2",
            percentiles(std::mem::take(&mut samples)),
        ));
        // The first call learns the key's state from the script; the rest admit locally.
        black_box(cached(0).await.unwrap());
        for i in 0..calls {
            let start = Instant::now();
            black_box(cached(i as u64).await.unwrap());
            samples.push(start.elapsed());
        }
        rows.push((
            "cached, closed path",
            percentiles(std::mem::take(&mut samples)),
        ));
        black_box(cached_quorum(0).await.unwrap());
        for i in 0..calls {
            let start = Instant::now();
            black_box(cached_quorum(i as u64).await.unwrap());
            samples.push(start.elapsed());
        }
        rows.push((
            "cached, closed, quorum = 2",
            percentiles(std::mem::take(&mut samples)),
        ));
        for i in 0..calls {
            let start = Instant::now();
            black_box(local(i as u64).await.unwrap());
            samples.push(start.elapsed());
        }
        rows.push(("in-memory", percentiles(std::mem::take(&mut samples))));
        // Cached mode, two replicas (two connections and subscriptions): A makes the five failing
        // calls; the clock runs from A's fifth call returning to B rejecting (its local state open).
        let _ = idle().await;
        let policy = REPLICA_A.get("push").unwrap().policy();
        let state = |r: &Registry| r.get("push").map(|b| b.state());
        let rounds = if benching { (calls / 20).max(10) } else { 3 };
        for _ in 0..rounds {
            operator
                .force("push", policy, fusebox::State::Closed)
                .await
                .unwrap();
            while state(&REPLICA_A) != Some(fusebox::State::Closed)
                || state(&REPLICA_B) != Some(fusebox::State::Closed)
            {
                tokio::task::yield_now().await;
            }
            for _ in 0..4 {
                let _ = failing().await;
            }
            let _ = failing().await;
            let start = Instant::now();
            let deadline = start + Duration::from_secs(5);
            while state(&REPLICA_B) != Some(fusebox::State::Open) {
                assert!(Instant::now() < deadline, "replica B never learnt OPEN");
                tokio::task::yield_now().await;
            }
            samples.push(start.elapsed());
        }
        rows.push(("cached: OPEN reaches replica B", percentiles(samples)));
        println!("{calls} calls per row, loopback");
        println!("{:<30} {:>12} {:>12}", "path", "p50", "p99");
        for (name, (p50, p99)) in rows {
            println!("{name:<30} {:>12?} {:>12?}", p50, p99);
        }
    });
    drop(server);
}
