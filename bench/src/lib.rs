//! Measurement helpers shared by the fusebox benchmarks and the footprint report: the counting
//! allocator and thread count of `fusebox-measure` (re-exported), the benchmarks' error type, a
//! future polled once, and (feature `redis`) a `redis-server` of the benchmark's own.

pub use fusebox_measure::{CountingAlloc, live_bytes, os_threads, thread_allocations};

/// The error of the benchmarks' annotated functions: the inner `u64` error, or a rejected call
/// (`#[circuit_breaker]` without a fallback needs `From<fusebox::Error>`).
#[derive(Debug)]
pub enum BenchError {
    /// The inner work failed.
    Inner(u64),
    /// The breaker rejected the call.
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for BenchError {
    fn from(e: fusebox::Error) -> Self {
        BenchError::Rejected(e)
    }
}

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BenchError::Inner(code) => write!(f, "inner work failed with {code}"),
            BenchError::Rejected(e) => write!(f, "{e}"),
        }
    }
}

/// `REDIS_URL`, or a `redis-server` of the benchmark's own on a free loopback port (persistence
/// off), killed when the returned [`RedisServer`] is dropped.
///
/// # Panics
///
/// When `redis-server` cannot be started or does not accept connections within ten seconds.
#[cfg(feature = "redis")]
#[must_use]
pub fn redis_server() -> (String, Option<RedisServer>) {
    use std::time::{Duration, Instant};
    if let Ok(url) = std::env::var("REDIS_URL") {
        return (url, None);
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port();
    let child = std::process::Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("`redis-server` (install it with `apt-get install -y redis-server`, or set `REDIS_URL`)");
    let server = RedisServer(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    (format!("redis://127.0.0.1:{port}/"), Some(server))
}

/// A `redis-server` started by [`redis_server`]; killed on drop.
#[cfg(feature = "redis")]
#[derive(Debug)]
pub struct RedisServer(std::process::Child);

#[cfg(feature = "redis")]
impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Polls `fut` once with a no-op waker (no runtime), for benchmarked futures that are ready at
/// once; panics when one is not.
#[inline(always)]
pub fn poll_once<F: std::future::Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(out) => out,
        std::task::Poll::Pending => unreachable!("the benchmarked futures are ready at once"),
    }
}
