//! What a shadow policy costs: the closed path of a key without shadows beside the same key's
//! policy with one shadow (`shadow = "window = 50, failure_rate = 30"`) and with two, on the same
//! inner work as `compare` (`std::future::ready(Ok(1))` polled once, no runtime), and the manual
//! permit API on a key with and without a shadow. A key with shadows leaves the closed fast path
//! and reads the clock once per call; each shadow takes its lock and records the outcome. No
//! tracing subscriber is installed.
//!
//! Run: `cargo bench -p fusebox-bench --bench shadows`

use std::future::ready;
use std::hint::black_box;
use std::time::Duration;

use criterion::Criterion;
use fusebox_bench::poll_once;

#[derive(Debug)]
enum BenchError {
    Inner(#[allow(dead_code)] u64),
    Rejected(#[allow(dead_code)] fusebox::Error),
}

impl From<fusebox::Error> for BenchError {
    fn from(e: fusebox::Error) -> Self {
        BenchError::Rejected(e)
    }
}

#[fusebox::circuit_breaker(key = "shadows-none", window = 100, failure_rate = 50)]
async fn no_shadow() -> Result<u64, BenchError> {
    ready(Ok::<u64, u64>(black_box(1)))
        .await
        .map_err(BenchError::Inner)
}

#[fusebox::circuit_breaker(
    key = "shadows-one",
    window = 100,
    failure_rate = 50,
    shadow = "window = 50, failure_rate = 30"
)]
async fn one_shadow() -> Result<u64, BenchError> {
    ready(Ok::<u64, u64>(black_box(1)))
        .await
        .map_err(BenchError::Inner)
}

#[fusebox::circuit_breaker(
    key = "shadows-two",
    window = 100,
    failure_rate = 50,
    shadow = "tight: window = 50, failure_rate = 30; loose: window = 200, failure_rate = 70"
)]
async fn two_shadows() -> Result<u64, BenchError> {
    ready(Ok::<u64, u64>(black_box(1)))
        .await
        .map_err(BenchError::Inner)
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(1_000))
        .measurement_time(Duration::from_millis(3_000))
        .sample_size(50)
        .configure_from_args();
    let mut group = c.benchmark_group("closed_success_shadows");
    group.bench_function("fusebox_async_no_shadow", |b| {
        b.iter(|| poll_once(no_shadow()))
    });
    group.bench_function("fusebox_async_one_shadow", |b| {
        b.iter(|| poll_once(one_shadow()))
    });
    group.bench_function("fusebox_async_two_shadows", |b| {
        b.iter(|| poll_once(two_shadows()))
    });
    let registry = fusebox::Registry::new();
    let plain = fusebox::Policy::new();
    let without = registry.breaker("manual-none", plain).unwrap();
    let with = registry
        .breaker("manual-one", plain.shadow("window = 50, failure_rate = 30"))
        .unwrap();
    group.bench_function("fusebox_manual_no_shadow", |b| {
        b.iter(|| without.try_acquire().map(|p| p.success()))
    });
    group.bench_function("fusebox_manual_one_shadow", |b| {
        b.iter(|| with.try_acquire().map(|p| p.success()))
    });
    group.finish();
    assert_eq!(
        registry.get("manual-one").unwrap().snapshot().shadows[0].state,
        fusebox::State::Closed
    );
    c.final_summary();
}
