//! The tower layer's closed-path overhead over the bare service, next to tower-resilience 0.13's
//! circuit breaker on the same service, and the attribute's closed path, in one run.
//!
//! Every subject wraps the same inner service, `service_fn(|x| ready(Ok::<u64, Infallible>(x)))`.
//! One iteration is what a caller of a tower service does: `poll_ready` (polled once), `call`,
//! and one poll of the response future, with `Waker::noop()` inside a current-thread tokio
//! runtime's context (tower-resilience takes a tokio mutex; no future here ever waits). Every
//! breaker trips at 50 % over 100 calls and stays closed (only successes). No tracing subscriber
//! is installed.
//!
//! Cases (group `tower_closed`):
//! - `bare_service`: the inner service alone;
//! - `fusebox_layer`: `fusebox_tower::CircuitBreakerLayer::new(key)`;
//! - `fusebox_layer_key_fn`: the layer with a key taken from each request (one key);
//! - `tower_resilience`: `tower_resilience::circuitbreaker::CircuitBreakerLayer`;
//! - `bare_async_fn` and `attribute`: the same work as an `async fn`, bare and under
//!   `#[fusebox::circuit_breaker]` (the attribute's closed path, for comparison).
//!
//! Overhead of a subject = its time minus `bare_service` (`bare_async_fn` for the attribute).
//!
//! Run: `cargo bench -p fusebox-bench --bench tower`

use std::hint::black_box;
use std::time::Duration;

use criterion::Criterion;

#[path = "../common/tower.rs"]
mod subjects;

use subjects::{
    KEYS, attribute, bare_async_fn, fusebox_layer, fusebox_layer_key_fn, inner, poll_once, request,
    tower_resilience,
};

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(1_000))
        .measurement_time(Duration::from_millis(3_000))
        .sample_size(50)
        .configure_from_args();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    let _context = runtime.enter();

    let mut bare = inner();
    let mut layer = fusebox_layer();
    let mut layer_key_fn = fusebox_layer_key_fn();
    let mut resilience = tower_resilience();

    // Each subject answers before it is timed.
    assert_eq!(request(&mut bare, 1).unwrap(), 1);
    assert_eq!(request(&mut layer, 2).unwrap(), 2);
    assert_eq!(request(&mut layer_key_fn, 3).unwrap(), 3);
    assert_eq!(request(&mut resilience, 4).unwrap(), 4);
    assert_eq!(poll_once(attribute(5)).unwrap(), 5);

    let mut group = c.benchmark_group("tower_closed");
    group.bench_function("bare_service", |b| {
        b.iter(|| request(&mut bare, black_box(1)))
    });
    group.bench_function("fusebox_layer", |b| {
        b.iter(|| request(&mut layer, black_box(1)))
    });
    group.bench_function("fusebox_layer_key_fn", |b| {
        b.iter(|| request(&mut layer_key_fn, black_box(1)))
    });
    group.bench_function("tower_resilience", |b| {
        b.iter(|| request(&mut resilience, black_box(1)))
    });
    group.bench_function("bare_async_fn", |b| {
        b.iter(|| poll_once(bare_async_fn(black_box(1))))
    });
    group.bench_function("attribute", |b| {
        b.iter(|| poll_once(attribute(black_box(1))))
    });
    group.finish();

    for key in KEYS {
        let breaker = fusebox::registry()
            .get(key)
            .expect("registered by its subject");
        assert_eq!(
            breaker.state(),
            fusebox::State::Closed,
            "`{key}` stayed closed"
        );
    }
    c.final_summary();
}
