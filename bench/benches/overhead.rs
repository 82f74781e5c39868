//! Cost of `#[circuit_breaker]` on one call: a bare async fn against the same fn annotated (closed),
//! a rejected call (open), and the manual permit API. Each future is polled once, without a runtime.
//!
//! Run: `cargo bench -p fusebox-bench --bench overhead`

use std::hint::black_box;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use criterion::{Criterion, criterion_main};
use fusebox::{Policy, Registry, circuit_breaker};
use fusebox_bench::poll_once;

#[derive(Debug)]
enum BenchError {
    Timeout,
    /// Carried like a real client would, never inspected here.
    #[allow(dead_code)]
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for BenchError {
    fn from(e: fusebox::Error) -> Self {
        BenchError::Rejected(e)
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

const TIME_WINDOW: Policy = Policy::new().time_window(Duration::from_secs(30));
const SLOW: Policy = Policy::new().slow(Duration::from_secs(2)).slow_rate(80);

#[inline(never)]
#[circuit_breaker(key = "bench-time", policy = TIME_WINDOW, failure = [Timeout])]
async fn guarded_time_window(x: u64) -> Result<u64, BenchError> {
    if x == u64::MAX {
        Err(BenchError::Timeout)
    } else {
        Ok(x + 1)
    }
}

#[inline(never)]
#[circuit_breaker(key = "bench-slow", policy = SLOW, failure = [Timeout])]
async fn guarded_slow(x: u64) -> Result<u64, BenchError> {
    if x == u64::MAX {
        Err(BenchError::Timeout)
    } else {
        Ok(x + 1)
    }
}

static HOSTS: LazyLock<Registry> = LazyLock::new(|| {
    let registry = Registry::new();
    registry.set_max_keys(200_000);
    registry
});

#[inline(never)]
#[circuit_breaker(key = host, registry = HOSTS, failure = [Timeout])]
async fn guarded_host(host: &str, x: u64) -> Result<u64, BenchError> {
    if x == u64::MAX {
        Err(BenchError::Timeout)
    } else {
        Ok(x + 1)
    }
}

fn overhead(c: &mut Criterion) {
    // Open the `bench-open` circuit and check that it rejects before timing it.
    let _ = poll_once(guarded_open(u64::MAX));
    assert!(matches!(
        poll_once(guarded_open(1)),
        Err(BenchError::Rejected(_))
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
    group.bench_function("annotated async fn, closed, time window 30s", |b| {
        b.iter(|| poll_once(guarded_time_window(black_box(1))).is_ok())
    });
    group.bench_function("annotated async fn, closed, slow-call timing", |b| {
        b.iter(|| poll_once(guarded_slow(black_box(1))).is_ok())
    });
    group.finish();

    let mut group = c.benchmark_group("dynamic key");
    let mut created = 0;
    for keys in [1usize, 1_000, 100_000] {
        let hosts: Vec<String> = (0..keys)
            .map(|i| format!("host-{i}.internal:443"))
            .collect();
        for host in &hosts[created.min(keys)..] {
            assert!(poll_once(guarded_host(host, 1)).is_ok());
        }
        created = keys;
        assert_eq!(HOSTS.len(), keys);
        // Visit the keys in a scattered order, as traffic to many hosts would.
        let order: Vec<&str> = (0..4096)
            .map(|i| hosts[(i * 7919) % keys].as_str())
            .collect();
        group.bench_function(format!("annotated async fn, {keys} keys"), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & 4095;
                poll_once(guarded_host(black_box(order[i]), black_box(1))).is_ok()
            })
        });
        // The reference in the same run: a bare `papaya` lookup of the same `&str`s, same order.
        let bare: papaya::HashMap<String, Arc<u64>, foldhash::fast::RandomState> =
            papaya::HashMap::with_hasher(foldhash::fast::RandomState::default());
        for host in &hosts {
            bare.pin().insert(host.clone(), Arc::new(1));
        }
        group.bench_function(format!("bare papaya lookup, {keys} keys"), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & 4095;
                black_box(bare.pin().get(black_box(order[i])).map(|v| **v))
            })
        });
    }
    group.finish();
}

/// The benchmark group (what `criterion_group!` would define, with a doc comment).
fn benches() {
    let mut criterion = Criterion::default().configure_from_args();
    overhead(&mut criterion);
}

criterion_main!(benches);
