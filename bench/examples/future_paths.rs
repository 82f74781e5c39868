//! Polls annotated `async fn`s once per call (closed, rejected, closed with a fallback, closed
//! with `retry`, with `hedge` answered at its first poll), or calls an annotated plain `fn` (closed, `sync`), a fixed number of times on a `FakeClock` registry, for instruction counts under
//! `valgrind --tool=callgrind`: what the expansion's shape (the body run in place, the fallback
//! awaited after the call settled, the attempt driver) costs per call.
//!
//! Run: `cargo build --release -p fusebox-bench --example future_paths` then
//! `valgrind --tool=callgrind target/release/examples/future_paths <path> 1000000` with `<path>`
//! one of `closed`, `open`, `fallback`, `retry`, `hedge`, `sync`, `none`; subtract the count of `none` (set-up
//! only) and divide by the call count.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::LazyLock;
use std::task::{Context, Poll, Waker};

use fusebox::clock::FakeClock;
use fusebox::{Cause, Registry, circuit_breaker};

/// A fake clock: `rustix`'s vDSO lookup of the real clock does not run under valgrind.
static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(FakeClock::new()));

#[derive(Debug)]
struct Failed;

impl From<fusebox::Error> for Failed {
    fn from(_: fusebox::Error) -> Self {
        Failed
    }
}

/// The inner future every body awaits (not inlined, so each body awaits a real call).
#[inline(never)]
async fn backend(n: u64) -> Result<u64, Failed> {
    Ok(black_box(n))
}

#[circuit_breaker(key = "future-paths.closed", registry = REGISTRY)]
async fn closed(n: u64) -> Result<u64, Failed> {
    backend(n).await
}

#[circuit_breaker(key = "future-paths.open", registry = REGISTRY)]
async fn open(n: u64) -> Result<u64, Failed> {
    backend(n).await
}

async fn fallback(n: u64, _cause: Cause<Failed>) -> Result<u64, Failed> {
    Ok(n + 1)
}

#[circuit_breaker(key = "future-paths.fallback", registry = REGISTRY, fallback = fallback)]
async fn with_fallback(n: u64) -> Result<u64, Failed> {
    backend(n).await
}

#[circuit_breaker(key = "future-paths.retry", registry = REGISTRY, retry = 3)]
async fn with_retry(n: u64) -> Result<u64, Failed> {
    backend(n).await
}

#[circuit_breaker(key = "future-paths.hedge", registry = REGISTRY, hedge = "50ms")]
async fn with_hedge(n: u64) -> Result<u64, Failed> {
    backend(n).await
}

/// The inner call of the plain `fn` (not inlined, as `backend`).
#[inline(never)]
fn backend_sync(n: u64) -> Result<u64, Failed> {
    Ok(black_box(n))
}

#[circuit_breaker(key = "future-paths.sync", registry = REGISTRY)]
fn closed_sync(n: u64) -> Result<u64, Failed> {
    backend_sync(n)
}

/// Makes a future where it is polled, as `.await` on a call does, and polls it once with a
/// no-op waker: true when it finished. (Taking the future by value instead adds a copy of it per
/// call, whose cost follows the future's size and layout rather than the expansion.)
#[inline(never)]
fn poll_once<F: Future>(make: impl FnOnce() -> F) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    let future = pin!(make());
    matches!(future.poll(&mut cx), Poll::Ready(_))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_default();
    let calls: u64 = args
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    // Every site resolves its breaker before the counted calls.
    poll_once(|| closed(1));
    poll_once(|| open(1));
    poll_once(|| with_fallback(1));
    poll_once(|| with_retry(1));
    let _ = closed_sync(1);
    poll_once(|| with_hedge(1));
    if let Some(breaker) = REGISTRY.get("future-paths.open") {
        breaker.force_open();
    }
    let mut finished = 0u64;
    for i in 0..calls {
        let done = match path.as_str() {
            "closed" => poll_once(|| closed(black_box(i))),
            "open" => poll_once(|| open(black_box(i))),
            "fallback" => poll_once(|| with_fallback(black_box(i))),
            "retry" => poll_once(|| with_retry(black_box(i))),
            "sync" => closed_sync(black_box(i)).is_ok(),
            "hedge" => poll_once(|| with_hedge(black_box(i))),
            _ => true,
        };
        finished += u64::from(done);
    }
    println!("{finished} of {calls} calls finished in one poll");
}
