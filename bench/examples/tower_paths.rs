//! Runs one path of `benches/tower.rs` a fixed number of times, for instruction counts under
//! `valgrind --tool=callgrind` (which, unlike wall time, does not depend on machine load).
//!
//! Run: `cargo build --release -p fusebox-bench --example tower_paths` then
//! `valgrind --tool=callgrind target/release/examples/tower_paths <path> 100000` with `<path>`
//! one of `bare-service`, `layer`, `layer-key-fn`, `tower-resilience`, `bare-async-fn`,
//! `attribute`; divide the total instructions by the call count, after subtracting a run with
//! 0 calls (the set-up).

use std::borrow::Cow;
use std::convert::Infallible;
use std::future::{Future, ready};
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use fusebox::Policy;
use tower::{Layer, Service, service_fn};

const OPEN_WAIT: Duration = Duration::from_secs(60 * 60);

const POLICY: Policy = Policy::new()
    .window(100)
    .failure_rate(50)
    .open_for(OPEN_WAIT);

#[inline(always)]
fn poll_once<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => unreachable!("every future here is ready at once"),
    }
}

#[inline(always)]
fn request<S: Service<u64>>(svc: &mut S, x: u64) -> Result<S::Response, S::Error> {
    let mut cx = Context::from_waker(Waker::noop());
    match svc.poll_ready(&mut cx) {
        Poll::Ready(Ok(())) => {}
        _ => unreachable!("every service here is always ready"),
    }
    poll_once(svc.call(x))
}

fn inner() -> impl Service<u64, Response = u64, Error = Infallible, Future: Send> + Clone + Send {
    service_fn(|x: u64| ready(Ok::<u64, Infallible>(x)))
}

/// The attribute's error type.
#[derive(Debug)]
enum AttrError {
    /// The breaker refused the call.
    Refused,
}

impl From<fusebox::Error> for AttrError {
    fn from(_: fusebox::Error) -> Self {
        AttrError::Refused
    }
}

async fn bare_async_fn(x: u64) -> Result<u64, AttrError> {
    ready(Ok(x)).await
}

#[fusebox::circuit_breaker(
    key = "paths-tower-attribute",
    window = 100,
    failure_rate = 50,
    open_for = "1h"
)]
async fn attribute(x: u64) -> Result<u64, AttrError> {
    ready(Ok(x)).await
}

/// Runs `f` `calls` times.
fn run<T>(calls: u64, mut f: impl FnMut(u64) -> T) {
    for i in 0..calls {
        black_box(f(black_box(i)));
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("a path name");
    let calls: u64 = args
        .next()
        .map_or(100_000, |n| n.parse().expect("a call count"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    let _context = runtime.enter();
    match path.as_str() {
        "bare-service" => {
            let mut svc = inner();
            run(calls, |x| request(&mut svc, x))
        }
        "layer" => {
            let mut svc = fusebox::tower::CircuitBreakerLayer::new("paths-tower-layer")
                .policy(POLICY)
                .layer(inner());
            run(calls, |x| request(&mut svc, x))
        }
        "layer-key-fn" => {
            let mut svc = fusebox::tower::CircuitBreakerLayer::new("unused")
                .policy(POLICY)
                .key_fn(|_: &u64| Cow::Borrowed("paths-tower-layer-key-fn"))
                .layer(inner());
            run(calls, |x| request(&mut svc, x))
        }
        "tower-resilience" => {
            let mut svc = tower_resilience::circuitbreaker::CircuitBreakerLayer::builder()
                .failure_rate_threshold(0.5)
                .sliding_window_size(100)
                .minimum_number_of_calls(10)
                .wait_duration_in_open(OPEN_WAIT)
                .build()
                .expect("a valid tower-resilience configuration")
                .layer(inner());
            run(calls, |x| request(&mut svc, x))
        }
        "bare-async-fn" => run(calls, |x| poll_once(bare_async_fn(x))),
        "attribute" => run(calls, |x| poll_once(attribute(x))),
        other => panic!("unknown path `{other}`"),
    }
}
