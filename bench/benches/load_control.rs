//! What each load-control knob costs on the closed path, side by side with the same breaker
//! without it, in one run.
//!
//! Every subject is an annotated `async fn` on the compare bench's policy (a count window of 100,
//! 50 %, open for an hour) whose inner work is `std::future::ready(Ok(1))`, polled once with a
//! no-op waker (no runtime). Each pair differs by one argument:
//!
//! - `plain` against `open_jitter = 20` and `open_for = function` (both act only when the circuit
//!   opens: the closed path should not move);
//! - `plain` against `throttle = 2` (a closed call reads the window's counts and draws a number);
//! - `retry = 3` against `retry = 3, retry_budget = "20%"` (every first attempt is a deposit);
//! - `max_concurrent = 10` against `max_concurrent = "adaptive(2..200)"` (the adaptive limit reads
//!   the clock at admission and samples the latency at the report).
//!
//! - `plain` against `hedge = "50ms"` and `hedge = "p95"` (a hedged call answered at its first
//!   poll: the attempt driver, one boxed attempt and the latency histogram; no timer is made);
//!
//! - `key = host` against `key = host, group = "search"` (a group's rules run on a member's
//!   failures only, at most once per interval), and a member of a group of 10,000.
//!
//! Pushback acts only on counted failures that carry a wait, so it has no closed-path case.
//!
//! Run: `cargo bench -p fusebox-bench --bench load_control`

use std::future::ready;
use std::hint::black_box;
use std::time::Duration;

use criterion::Criterion;
use fusebox::OpenContext;
use fusebox_bench::BenchError;

use fusebox_bench::poll_once;

#[inline(always)]
async fn work() -> Result<u64, BenchError> {
    ready(Ok(1)).await
}

/// An open-wait function: ten seconds per failed recovery.
fn by_recoveries(open: &OpenContext) -> Duration {
    Duration::from_secs(10) * (open.failed_recoveries() + 1)
}

#[fusebox::circuit_breaker(key = "lc-plain", window = 100, failure_rate = 50, open_for = "1h")]
async fn plain() -> Result<u64, BenchError> {
    work().await
}

#[fusebox::circuit_breaker(
    key = "lc-jitter",
    window = 100,
    failure_rate = 50,
    open_for = "1h",
    open_jitter = 20
)]
async fn jitter() -> Result<u64, BenchError> {
    work().await
}

#[fusebox::circuit_breaker(
    key = "lc-open-fn",
    window = 100,
    failure_rate = 50,
    open_for = by_recoveries
)]
async fn open_fn() -> Result<u64, BenchError> {
    work().await
}

#[fusebox::circuit_breaker(
    key = "lc-throttle",
    window = 100,
    failure_rate = 50,
    open_for = "1h",
    throttle = 2.0
)]
async fn throttled() -> Result<u64, BenchError> {
    work().await
}

#[fusebox::circuit_breaker(
    key = "lc-retry",
    window = 100,
    failure_rate = 50,
    open_for = "1h",
    retry = 3
)]
async fn retried() -> Result<u64, BenchError> {
    work().await
}

#[fusebox::circuit_breaker(
    key = "lc-budget",
    window = 100,
    failure_rate = 50,
    open_for = "1h",
    retry = 3,
    retry_budget = "20%"
)]
async fn budgeted() -> Result<u64, BenchError> {
    work().await
}

#[fusebox::circuit_breaker(
    key = "lc-bulkhead",
    window = 100,
    failure_rate = 50,
    open_for = "1h",
    max_concurrent = 10
)]
async fn bulkhead() -> Result<u64, BenchError> {
    work().await
}

#[fusebox::circuit_breaker(
    key = "lc-adaptive",
    window = 100,
    failure_rate = 50,
    open_for = "1h",
    max_concurrent = "adaptive(2..200)"
)]
async fn adaptive() -> Result<u64, BenchError> {
    work().await
}

#[fusebox::circuit_breaker(key = host, window = 100, failure_rate = 50, open_for = "1h")]
async fn per_host(host: &str) -> Result<u64, BenchError> {
    let _ = host;
    work().await
}

#[fusebox::circuit_breaker(
    key = host,
    group = "search",
    window = 100,
    failure_rate = 50,
    open_for = "1h"
)]
async fn grouped(host: &str) -> Result<u64, BenchError> {
    let _ = host;
    work().await
}

#[fusebox::circuit_breaker(
    key = host,
    group = "large",
    window = 100,
    failure_rate = 50,
    open_for = "1h"
)]
async fn grouped_large(host: &str) -> Result<u64, BenchError> {
    let _ = host;
    work().await
}

#[fusebox::circuit_breaker(
    key = "lc-hedge-fixed",
    window = 100,
    failure_rate = 50,
    open_for = "1h",
    hedge = "50ms"
)]
async fn hedged_fixed() -> Result<u64, BenchError> {
    work().await
}

#[fusebox::circuit_breaker(
    key = "lc-hedge-p95",
    window = 100,
    failure_rate = 50,
    open_for = "1h",
    hedge = "p95"
)]
async fn hedged_p95() -> Result<u64, BenchError> {
    work().await
}

macro_rules! subject {
    ($group:ident, $name:literal, $f:ident) => {
        assert_eq!(poll_once($f()).ok(), Some(1), "{} succeeds", $name);
        $group.bench_function($name, |b| b.iter(|| black_box(poll_once($f()))));
    };
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(1_000))
        .measurement_time(Duration::from_millis(3_000))
        .sample_size(50)
        .configure_from_args();
    {
        let mut g = c.benchmark_group("opening_knobs");
        subject!(g, "plain", plain);
        subject!(g, "open_jitter", jitter);
        subject!(g, "open_for_fn", open_fn);
        g.finish();
    }
    {
        let mut g = c.benchmark_group("throttle");
        subject!(g, "plain", plain);
        subject!(g, "throttle", throttled);
        g.finish();
    }
    {
        let mut g = c.benchmark_group("retry_budget");
        subject!(g, "retry", retried);
        subject!(g, "retry_budget", budgeted);
        g.finish();
    }
    {
        let mut g = c.benchmark_group("hedge");
        subject!(g, "plain", plain);
        subject!(g, "hedge_fixed", hedged_fixed);
        subject!(g, "hedge_p95", hedged_p95);
        g.finish();
    }
    {
        let mut g = c.benchmark_group("bulkhead");
        subject!(g, "fixed", bulkhead);
        subject!(g, "adaptive", adaptive);
        g.finish();
    }
    {
        let mut g = c.benchmark_group("group");
        assert_eq!(poll_once(per_host("search-1:9200")).ok(), Some(1));
        assert_eq!(poll_once(grouped("search-2:9200")).ok(), Some(1));
        g.bench_function("per_host", |b| {
            b.iter(|| black_box(poll_once(per_host(black_box("search-1:9200")))))
        });
        g.bench_function("per_host_grouped", |b| {
            b.iter(|| black_box(poll_once(grouped(black_box("search-2:9200")))))
        });
        // A group of 10,000 members, each with a call in its window.
        fusebox::registry().set_max_keys(20_000);
        for i in 0..10_000 {
            assert_eq!(
                poll_once(grouped_large(&format!("large-{i}:9200"))).ok(),
                Some(1)
            );
        }
        g.bench_function("per_host_grouped_10000", |b| {
            b.iter(|| black_box(poll_once(grouped_large(black_box("large-0:9200")))))
        });
        g.finish();
    }
    assert!(
        fusebox::registry().group("search").is_some(),
        "the grouped key is a member of its group"
    );
    assert_eq!(
        fusebox::registry()
            .group("large")
            .map(|g| g.snapshot().members),
        Some(10_000),
        "the large group holds its 10,000 members"
    );
    for (key, expected) in [
        ("lc-plain", false),
        ("lc-throttle", false),
        ("lc-budget", false),
        ("lc-adaptive", false),
    ] {
        let breaker = fusebox::registry().get(key).expect("registered");
        assert_eq!(
            breaker.snapshot().rejected > 0,
            expected,
            "{key}: no call rejected while measuring"
        );
    }
    c.final_summary();
}
