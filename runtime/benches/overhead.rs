//! Cost of `#[circuit_breaker]` on one call: a bare async fn against the same fn annotated (closed),
//! a refused call (open), and the manual permit API. Each future is polled once, without a runtime.
//!
//! Run: `cargo bench -p fusebox --bench overhead`

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use criterion::{Criterion, criterion_group, criterion_main};
use fusebox::{Policy, circuit_breaker};

#[derive(Debug)]
enum BenchError {
    Timeout,
    Refused(fusebox::Error),
}

impl From<fusebox::Error> for BenchError {
    fn from(e: fusebox::Error) -> Self {
        BenchError::Refused(e)
    }
}

#[inline(never)]
async fn bare(x: u64) -> Result<u64, BenchError> {
    if x == u64::MAX {
        Err(BenchError::Timeout)
    } else {
        Ok(x + 1)
    }
}

#[inline(never)]
#[circuit_breaker(key = "bench-closed", failure = [Timeout])]
async fn guarded(x: u64) -> Result<u64, BenchError> {
    if x == u64::MAX {
        Err(BenchError::Timeout)
    } else {
        Ok(x + 1)
    }
}

#[inline(never)]
#[circuit_breaker(key = "bench-open", window = 1, min_calls = 1, open_for = "24h", failure = [Timeout])]
async fn guarded_open(x: u64) -> Result<u64, BenchError> {
    if x == u64::MAX {
        Err(BenchError::Timeout)
    } else {
        Ok(x + 1)
    }
}

#[inline(never)]
#[circuit_breaker(key = "bench-sync", failure = [Timeout])]
fn guarded_sync(x: u64) -> Result<u64, BenchError> {
    if x == u64::MAX {
        Err(BenchError::Timeout)
    } else {
        Ok(x + 1)
    }
}

fn poll_once<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => unreachable!("the benchmarked futures are ready at once"),
    }
}

fn overhead(c: &mut Criterion) {
    // Open the `bench-open` circuit and check that it refuses before timing it.
    let _ = poll_once(guarded_open(u64::MAX));
    assert!(matches!(
        poll_once(guarded_open(1)),
        Err(BenchError::Refused(_))
    ));
    assert!(poll_once(guarded(1)).is_ok());

    let mut group = c.benchmark_group("overhead");
    group.bench_function("bare async fn", |b| {
        b.iter(|| poll_once(bare(black_box(1))).is_ok())
    });
    group.bench_function("annotated async fn, closed", |b| {
        b.iter(|| poll_once(guarded(black_box(1))).is_ok())
    });
    group.bench_function("annotated async fn, open (rejected)", |b| {
        b.iter(|| poll_once(guarded_open(black_box(1))).is_err())
    });
    group.bench_function("annotated sync fn, closed", |b| {
        b.iter(|| guarded_sync(black_box(1)).is_ok())
    });
    let breaker = fusebox::registry()
        .breaker("bench-manual", Policy::new())
        .expect("valid policy");
    group.bench_function("manual permit, closed", |b| {
        b.iter(|| match breaker.try_acquire() {
            Ok(permit) => permit.success(),
            Err(e) => panic!("{e}"),
        })
    });
    group.finish();
}

criterion_group!(benches, overhead);
criterion_main!(benches);
