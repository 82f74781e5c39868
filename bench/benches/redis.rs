//! Per-call latency on loopback, p50 and p99: a plain `PING` round trip, a strict-mode shared call
//! (admission and report: two script calls), and the in-memory breaker.
//!
//! `cargo bench -p fusebox-bench --bench redis --features redis` (starts its own `redis-server`,
//! or uses `REDIS_URL`). `FUSEBOX_BENCH_CALLS` sets the calls per row (default 20,000).

use std::hint::black_box;
use std::process::{Command, Stdio};
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

#[circuit_breaker(key = "bench", registry = SHARED, window = 100, open_for = "1h")]
async fn shared(x: u64) -> Result<u64, Failed> {
    Ok(black_box(x))
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
    let (url, mut server) = match std::env::var("REDIS_URL") {
        Ok(url) => (url, None),
        Err(_) => {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .stdout(Stdio::null())
                .spawn()
                .expect("`redis-server` (install it with `apt-get install -y redis-server`, or set `REDIS_URL`)");
            let deadline = Instant::now() + Duration::from_secs(10);
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(Instant::now() < deadline, "redis-server did not start");
                std::thread::sleep(Duration::from_millis(20));
            }
            (format!("redis://127.0.0.1:{port}/"), Some(child))
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = redis::Client::open(url.as_str()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let store = fusebox::redis::RedisStore::builder(&url)
            .prefix(format!("bench-{}", std::process::id()))
            .connect()
            .await
            .unwrap();
        SHARED.share(store);
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
            black_box(local(i as u64).await.unwrap());
            samples.push(start.elapsed());
        }
        rows.push(("in-memory", percentiles(samples)));
        println!("{calls} calls per row, loopback");
        println!("{:<30} {:>12} {:>12}", "path", "p50", "p99");
        for (name, (p50, p99)) in rows {
            println!("{name:<30} {:>12?} {:>12?}", p50, p99);
        }
    });
    if let Some(server) = server.as_mut() {
        let _ = server.kill();
        let _ = server.wait();
    }
}
