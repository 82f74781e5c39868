//! A call's latency through an axum service that also serves `fusebox-admin`, with no
//! dashboard connection and with 500 idle `GET /events` connections held open.
//!
//! The service runs on a two-worker tokio runtime: `POST /call` runs an annotated `async fn`
//! (closed breaker, one success) and answers 200; the admin router is merged in. The clients of
//! the event stream run on a runtime of their own and read whatever arrives. Each measured
//! iteration is one HTTP/1.1 request on a kept-alive loopback connection, from the bench thread.
//! Criterion reports the mean; after each case the bench prints the median, p99 and max of every
//! call it timed, and the process's resident memory (`VmRSS`) with the connections open.
//!
//! Run: `cargo bench -p fusebox-bench --bench admin_sse` (a short run:
//! `-- --warm-up-time 1 --measurement-time 5`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use criterion::Criterion;
use fusebox::Registry;
use fusebox_admin::{self as admin, AdminConfig};
use fusebox_bench::BenchError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The registry the service's breaker lives in.
static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::new);

/// Event-stream connections of the loaded case.
const CONNECTIONS: usize = 500;

#[fusebox::circuit_breaker(key = "sse-bench", registry = REGISTRY, failure = [Inner])]
async fn checkout(x: u64) -> Result<u64, BenchError> {
    Ok(x + 1)
}

async fn call() -> &'static str {
    match checkout(1).await {
        Ok(_) => "ok",
        Err(_) => "rejected",
    }
}

/// Starts the service on `runtime`; returns its address.
fn serve(runtime: &tokio::runtime::Runtime) -> SocketAddr {
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = axum::Router::new()
            .route("/call", axum::routing::post(call))
            .merge(admin::router(&REGISTRY, AdminConfig::new()));
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    })
}

/// Opens `n` event-stream connections on `clients`, each reading (and dropping) what arrives;
/// returns once every one has received its first board.
fn hold_open(clients: &tokio::runtime::Runtime, addr: SocketAddr, n: usize) {
    let (ready, mut started) = tokio::sync::mpsc::channel::<()>(n);
    for _ in 0..n {
        let ready = ready.clone();
        clients.spawn(async move {
            let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            stream
                .write_all(b"GET /events HTTP/1.1\r\nhost: bench\r\n\r\n")
                .await
                .unwrap();
            let mut buffer = vec![0u8; 16 * 1024];
            let mut seen = Vec::new();
            let mut told = false;
            loop {
                let Ok(read) = stream.read(&mut buffer).await else {
                    return;
                };
                if read == 0 {
                    return;
                }
                if !told {
                    seen.extend_from_slice(&buffer[..read]);
                    if seen.windows(6).any(|w| w == b"data: ") {
                        assert!(seen.starts_with(b"HTTP/1.1 200"), "an event stream");
                        let _ = ready.send(()).await;
                        told = true;
                    }
                }
            }
        });
    }
    clients.block_on(async {
        for _ in 0..n {
            started.recv().await.unwrap();
        }
    });
}

/// One kept-alive HTTP/1.1 client.
struct Client {
    stream: TcpStream,
    buffer: Vec<u8>,
}

impl Client {
    fn new(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            stream,
            buffer: vec![0; 4096],
        }
    }

    /// `POST /call`, read to the end of its answer.
    fn call(&mut self) {
        self.stream
            .write_all(b"POST /call HTTP/1.1\r\nhost: bench\r\ncontent-length: 0\r\n\r\n")
            .unwrap();
        let mut got = 0;
        loop {
            got += self.stream.read(&mut self.buffer[got..]).unwrap();
            let text = &self.buffer[..got];
            if let Some(head) = text.windows(4).position(|w| w == b"\r\n\r\n")
                && got >= head + 4 + 2
            {
                assert!(text.starts_with(b"HTTP/1.1 200"), "a 200 answer");
                return;
            }
        }
    }
}

/// Resident memory of this process, in kB (0 where `/proc` is missing).
fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Prints the median, p99 and max of `times`.
fn report(case: &str, times: &mut [Duration]) {
    times.sort();
    let at = |q: f64| times[((times.len() as f64 - 1.0) * q) as usize];
    println!(
        "{case}: {} calls, median {:?}, p99 {:?}, max {:?}, VmRSS {} kB",
        times.len(),
        at(0.5),
        at(0.99),
        at(1.0),
        rss_kb()
    );
}

fn bench(c: &mut Criterion) {
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let clients = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let addr = serve(&server);
    let mut client = Client::new(addr);
    let mut group = c.benchmark_group("admin_sse");
    for (case, connections) in [("no connections", 0), ("500 connections", CONNECTIONS)] {
        if connections > 0 {
            let before = rss_kb();
            hold_open(&clients, addr, connections);
            println!(
                "{connections} event-stream connections open: VmRSS {before} kB -> {} kB",
                rss_kb()
            );
        }
        let times = Mutex::new(Vec::new());
        group.bench_function(format!("call, {case}"), |b| {
            b.iter_custom(|iterations| {
                let mut total = Duration::ZERO;
                let mut times = times.lock().unwrap();
                for _ in 0..iterations {
                    let start = Instant::now();
                    client.call();
                    let took = start.elapsed();
                    times.push(took);
                    total += took;
                }
                total
            })
        });
        report(case, &mut times.lock().unwrap());
    }
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bench(&mut criterion);
    criterion.final_summary();
}
