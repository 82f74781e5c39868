//! Dynamic-key lookup: the concurrent maps fusebox could use, at 1, 1,000 and 100,000 keys, each
//! lookup followed by a read through the value found (as a call reads the breaker its key finds).
//! The registry's per-call lookup of a dynamic key (the crate-private `Registry::dynamic`) is built
//! on the fastest lock-free one, `scc::HashIndex`: it keeps each entry in its bucket, where
//! `papaya` boxes each entry apart, so a read through the value follows one pointer fewer
//! (BENCHMARKS.md, "Dynamic keys").
//!
//! Run: `cargo bench -p fusebox-bench --bench keys`

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::hint::black_box;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_main};

type Hasher = foldhash::fast::RandomState;

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("host-{i}.internal:443")).collect()
}

fn maps(c: &mut Criterion) {
    let mut group = c.benchmark_group("dynamic key lookup");
    group
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500));
    for n in [1usize, 1_000, 100_000] {
        let keys = keys(n);
        let probe: Vec<&str> = (0..1024).map(|i| keys[(i * 7919) % n].as_str()).collect();

        let rw: RwLock<HashMap<String, Arc<u64>, Hasher>> =
            RwLock::new(keys.iter().map(|k| (k.clone(), Arc::new(1))).collect());
        group.bench_with_input(
            BenchmarkId::new("RwLock<HashMap>", n),
            &probe,
            |b, probe| {
                let mut i = 0;
                b.iter(|| {
                    i = (i + 1) & 1023;
                    let map = rw.read().unwrap();
                    black_box(map.get(probe[i]).map(|v| **v))
                })
            },
        );

        let dash: dashmap::DashMap<String, Arc<u64>, Hasher> =
            keys.iter().map(|k| (k.clone(), Arc::new(1))).collect();
        group.bench_with_input(BenchmarkId::new("dashmap", n), &probe, |b, probe| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & 1023;
                black_box(dash.get(probe[i]).map(|v| **v))
            })
        });

        let pap: papaya::HashMap<String, Arc<u64>, Hasher> =
            papaya::HashMap::with_hasher(Hasher::default());
        for k in &keys {
            pap.pin().insert(k.clone(), Arc::new(1));
        }
        group.bench_with_input(BenchmarkId::new("papaya", n), &probe, |b, probe| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & 1023;
                black_box(pap.pin().get(probe[i]).map(|v| **v))
            })
        });
        let index: scc::HashIndex<String, Arc<u64>, Hasher> =
            scc::HashIndex::with_hasher(Hasher::default());
        for k in &keys {
            assert!(index.insert_sync(k.clone(), Arc::new(1)).is_ok());
        }
        group.bench_with_input(BenchmarkId::new("scc-HashIndex", n), &probe, |b, probe| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & 1023;
                let guard = scc::Guard::new();
                black_box(index.peek(probe[i], &guard).map(|v| **v))
            })
        });
        let _ = Hasher::default().hash_one(0u8);
    }
    group.finish();
}

/// The benchmark group (what `criterion_group!` would define, with a doc comment).
fn benches() {
    let mut criterion = Criterion::default().configure_from_args();
    maps(&mut criterion);
}

criterion_main!(benches);
