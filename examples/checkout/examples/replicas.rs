//! Two replicas, one circuit: calls alternate between two processes that share their breaker
//! through Redis, against a backend that fails every call. Prints the table call by call.
//!
//! ```sh
//! cargo run -p fusebox-checkout --example replicas --features redis   # starts its own redis-server
//! REDIS_URL=redis://127.0.0.1:6379/ cargo run -p fusebox-checkout --example replicas --features redis
//! ```

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use fusebox::{Registry, circuit_breaker};

#[derive(Debug)]
enum BackendError {
    Down,
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for BackendError {
    fn from(e: fusebox::Error) -> Self {
        BackendError::Rejected(e)
    }
}

static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::new);
static BACKEND_CALLS: AtomicU32 = AtomicU32::new(0);

/// "5 failures open".
#[circuit_breaker(key = "payments", registry = REGISTRY, window = 5, min_calls = 5, open_for = "60s")]
async fn pay() -> Result<(), BackendError> {
    BACKEND_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(BackendError::Down)
}

fn main() {
    if let Ok(url) = std::env::var("FUSEBOX_REPLICA_OF") {
        replica(&url);
        return;
    }
    let (url, mut server) = match std::env::var("REDIS_URL") {
        Ok(url) => (url, None),
        Err(_) => {
            let (url, child) = start_redis();
            (url, Some(child))
        }
    };
    // Each run uses a fresh key prefix, so an existing Redis keeps no state from the last run.
    let prefix = format!("replicas-example-{}", std::process::id());
    let mut replicas = [spawn(&url, &prefix), spawn(&url, &prefix)];
    println!("call  replica  backend reached  outcome          circuit (as that replica sees it)");
    for call in 1..=10 {
        let r = (call - 1) % 2;
        writeln!(replicas[r].0.stdin.as_mut().unwrap(), "call").unwrap();
        let line = replicas[r].1.next().expect("replica answered").unwrap();
        let mut parts = line.splitn(3, '\t');
        let reached = parts.next().unwrap_or("");
        let outcome = parts.next().unwrap_or("");
        let state = parts.next().unwrap_or("");
        println!(
            "{call:>4}  {:>7}  {reached:>15}  {outcome:<15}  {state}",
            ["A", "B"][r]
        );
    }
    for (mut child, _) in replicas {
        drop(child.stdin.take());
        let _ = child.wait();
    }
    if let Some(server) = server.as_mut() {
        let _ = server.kill();
        let _ = server.wait();
    }
}

type Lines = std::io::Lines<BufReader<std::process::ChildStdout>>;

fn spawn(url: &str, prefix: &str) -> (Child, Lines) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env("FUSEBOX_REPLICA_OF", url)
        .env("FUSEBOX_REPLICA_PREFIX", prefix)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start a replica");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // The replica says `ready` once it shares the store.
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    (child, lines)
}

fn replica(url: &str) {
    let prefix = std::env::var("FUSEBOX_REPLICA_PREFIX").unwrap_or_else(|_| "fusebox".into());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = fusebox_redis::RedisStore::builder(url)
            .prefix(prefix)
            .connect()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        REGISTRY.share(store);
        let mut out = std::io::stdout();
        writeln!(out, "ready").unwrap();
        out.flush().unwrap();
        for line in std::io::stdin().lock().lines() {
            if line.unwrap() != "call" {
                break;
            }
            let before = BACKEND_CALLS.load(Ordering::SeqCst);
            let result = pay().await;
            let reached = if BACKEND_CALLS.load(Ordering::SeqCst) > before {
                "yes"
            } else {
                "no"
            };
            let outcome = match result {
                Err(BackendError::Down) => "failed".to_owned(),
                Err(BackendError::Rejected(e)) => {
                    format!("rejected ({})", e.reason())
                }
                Ok(()) => "ok".to_owned(),
            };
            let state = REGISTRY
                .get("payments")
                .map_or("-".into(), |b| b.state().to_string());
            writeln!(out, "{reached}\t{outcome}\t{state}").unwrap();
            out.flush().unwrap();
        }
    });
}

/// Starts `redis-server` on a free loopback port, persistence off, and waits for it.
fn start_redis() -> (String, Child) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot start `redis-server` ({e}): install it with `apt-get install -y redis-server`, or set `REDIS_URL`")
        });
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (format!("redis://127.0.0.1:{port}/"), child)
}
