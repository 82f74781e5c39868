//! Every call shape shares a key: the attempt driver (`retry`), sync functions,
//! `Breaker::try_acquire` and the tower layer, each used from two registries ("replicas", each
//! with its own store and connection) against one real `redis-server`. Replica A calls until it is
//! rejected; replica B, fresh, must then be rejected without reaching the backend. Also: a replica
//! whose store stops answering runs no half-open of its own, and outcomes whose report timed out
//! while Redis was busy are sent again and recorded exactly once.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::harness::{BackendError, RedisServer};
use fusebox::{Policy, Reason, Registry, State, circuit_breaker};
use fusebox_redis::RedisStore;

static RETRY_A: LazyLock<Registry> = LazyLock::new(Registry::new);
static RETRY_B: LazyLock<Registry> = LazyLock::new(Registry::new);
static RETRY_CALLS: AtomicU32 = AtomicU32::new(0);

/// Five failures open it; every call makes up to three attempts.
#[circuit_breaker(key = "shape-retry", registry = RETRY_A, window = 5, min_calls = 5, open_for = "60s", retry = 3)]
async fn retry_a() -> Result<(), BackendError> {
    RETRY_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(BackendError::Down)
}

#[circuit_breaker(key = "shape-retry", registry = RETRY_B, window = 5, min_calls = 5, open_for = "60s", retry = 3)]
async fn retry_b() -> Result<(), BackendError> {
    RETRY_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(BackendError::Down)
}

static SYNC_A: LazyLock<Registry> = LazyLock::new(Registry::new);
static SYNC_B: LazyLock<Registry> = LazyLock::new(Registry::new);
static SYNC_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "shape-sync", registry = SYNC_A, window = 5, min_calls = 5, open_for = "60s")]
fn sync_a() -> Result<(), BackendError> {
    SYNC_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(BackendError::Down)
}

#[circuit_breaker(key = "shape-sync", registry = SYNC_B, window = 5, min_calls = 5, open_for = "60s")]
fn sync_b() -> Result<(), BackendError> {
    SYNC_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(BackendError::Down)
}

static HALF_A: LazyLock<Registry> = LazyLock::new(Registry::new);
static HALF_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "shape-degraded", registry = HALF_A, window = 2, min_calls = 2, open_for = "300ms")]
async fn degraded_call() -> Result<(), BackendError> {
    HALF_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(BackendError::Down)
}

static ONCE_A: LazyLock<Registry> = LazyLock::new(Registry::new);

/// A large window that never trips: it only counts.
#[circuit_breaker(key = "shape-once", registry = ONCE_A, window = 1000, min_calls = 1000, failure_rate = 100)]
fn counted(fail: bool) -> Result<(), BackendError> {
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

static ORDER_A: LazyLock<Registry> = LazyLock::new(Registry::new);

/// A large window that never trips, on its own registry: it only counts.
#[circuit_breaker(key = "shape-order", registry = ORDER_A, window = 10000, min_calls = 10000, failure_rate = 100)]
fn tallied(fail: bool) -> Result<(), BackendError> {
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

/// Keeps Redis busy for 400 ms.
const BUSY_400_MS: &str = "local s = redis.call('TIME') local t0 = s[1] * 1000000 + s[2] \
    while true do local n = redis.call('TIME') \
    if n[1] * 1000000 + n[2] - t0 > 400000 then break end end return 1";

/// Two registries ("replicas"), each sharing `server` through a store of its own.
async fn two_replicas(server: &RedisServer) -> (&'static Registry, &'static Registry) {
    let replica = async || {
        let registry: &'static Registry = Box::leak(Box::new(Registry::new()));
        registry.share(RedisStore::connect(&server.url()).await.unwrap());
        registry
    };
    (replica().await, replica().await)
}

fn reason<T>(result: &Result<T, BackendError>) -> Option<Reason> {
    match result {
        Err(BackendError::Rejected(e)) => Some(e.reason()),
        _ => None,
    }
}

/// Replica A calls until rejected; then a fresh replica B's first call is rejected and reaches
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_shares_the_circuit_across_replicas() {
    let server = RedisServer::start();
    RETRY_A.share(RedisStore::connect(&server.url()).await.unwrap());
    RETRY_B.share(RedisStore::connect(&server.url()).await.unwrap());
    let mut rejected = false;
    for _ in 0..10 {
        if reason(&retry_a().await).is_some() {
            rejected = true;
            break;
        }
    }
    assert!(
        rejected,
        "replica A is rejected once the shared circuit opened"
    );
    let before = RETRY_CALLS.load(Ordering::SeqCst);
    assert_eq!(before, 5, "five attempts in all open the shared circuit");
    assert_eq!(reason(&retry_b().await), Some(Reason::Open));
    assert_eq!(
        RETRY_CALLS.load(Ordering::SeqCst),
        before,
        "replica B reached the backend after the shared circuit opened"
    );
    assert_eq!(
        server.command(&["HGET", "{fusebox:shape-retry}", "st"]),
        "$1",
        "the key exists in redis (its state is a one-character field)"
    );
}

/// The same hand-off with sync functions, called from a multi-threaded runtime's task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_functions_share_the_circuit_across_replicas() {
    let server = RedisServer::start();
    SYNC_A.share(RedisStore::connect(&server.url()).await.unwrap());
    SYNC_B.share(RedisStore::connect(&server.url()).await.unwrap());
    // Sync calls cannot await their outcome's recording: it travels off the call path, and the
    // replica learns the shared state from the script's answers, so a few calls may be admitted
    // after the fifth failure, until its answer arrives (a bounded wait).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while reason(&sync_a()).is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "replica A's sync calls are rejected once the circuit opened"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let policy = SYNC_A.get("shape-sync").unwrap().policy();
    let shared = store.state("shape-sync", policy).await.unwrap();
    assert_eq!(
        shared.state,
        State::Open,
        "sync outcomes opened the shared circuit"
    );
    let before = SYNC_CALLS.load(Ordering::SeqCst);
    assert_eq!(reason(&sync_b()), Some(Reason::Open));
    assert_eq!(
        SYNC_CALLS.load(Ordering::SeqCst),
        before,
        "replica B's first sync call reached the backend"
    );
}

/// `Breaker::try_acquire` from a plain thread (no runtime) asks the shared state too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_acquire_sees_the_shared_state_from_a_plain_thread() {
    let server = RedisServer::start();
    let (a, b) = two_replicas(&server).await;
    let policy = Policy::new()
        .window(3)
        .min_calls(3)
        .open_for(Duration::from_secs(60));
    let on_a = a.breaker("shape-acquire", policy).unwrap();
    let on_b = b.breaker("shape-acquire", policy).unwrap();
    let opened = std::thread::spawn(move || {
        for _ in 0..3 {
            on_a.try_acquire().expect("closed").failure();
        }
        // The third report commits OPEN; a later call learns it from the script's answers.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            match on_a.try_acquire() {
                Err(rejected) => return rejected.reason(),
                Ok(permit) => permit.ignore(),
            }
            assert!(
                std::time::Instant::now() < deadline,
                "replica A never rejected"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    })
    .join()
    .unwrap();
    assert_eq!(opened, Reason::Open);
    let fresh = std::thread::spawn(move || on_b.try_acquire().map(|p| p.ignore()))
        .join()
        .unwrap();
    assert_eq!(
        fresh.map_err(|e| e.reason()),
        Err(Reason::Open),
        "replica B's first admission knows the shared circuit is open"
    );
}

/// The tower layer awaits the store's admission in its response future.
#[cfg(feature = "tower")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tower_layer_shares_the_circuit_across_replicas() {
    use std::sync::Arc;
    use tower::{Layer, Service, ServiceExt, service_fn};

    let server = RedisServer::start();
    let (a, b) = two_replicas(&server).await;
    let calls = Arc::new(AtomicU32::new(0));
    let backend = {
        let calls = calls.clone();
        service_fn(move |_: u32| {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err::<u32, &'static str>("down") }
        })
    };
    let policy = Policy::new()
        .window(4)
        .min_calls(4)
        .open_for(Duration::from_secs(60));
    let layer = |registry| {
        fusebox_tower::CircuitBreakerLayer::new("shape-tower")
            .registry(registry)
            .policy(policy)
    };
    let mut on_a = layer(a).layer(backend.clone());
    let mut rejected = None;
    for _ in 0..10 {
        let err = on_a.ready().await.unwrap().call(1).await.unwrap_err();
        if let Some(e) = err.downcast_ref::<fusebox::Error>() {
            rejected = Some(e.reason());
            break;
        }
    }
    assert_eq!(
        rejected,
        Some(Reason::Open),
        "replica A's layer is rejected"
    );
    // Outcomes are sent off the call path: a call admitted before the fourth report was
    // recorded may reach the backend too.
    // Strict mode: each call awaits its outcome's recording, so the fifth is rejected.
    let reached = calls.load(Ordering::SeqCst);
    assert_eq!(reached, 4, "four failures opened it");
    let mut on_b = layer(b).layer(backend);
    let err = on_b.ready().await.unwrap().call(1).await.unwrap_err();
    assert_eq!(
        err.downcast_ref::<fusebox::Error>()
            .map(fusebox::Error::reason),
        Some(Reason::Open),
        "replica B's layer asks the store before calling the service"
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        reached,
        "replica B reached the backend"
    );
}

/// A replica whose store stops answering keeps a shared circuit open past its wait: the store
/// grants probes, so no replica probes alone (within `local_recovery_after`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_degraded_replica_runs_no_half_open_of_its_own() {
    let server = RedisServer::start();
    let store = RedisStore::builder(&server.url())
        .timeout(Duration::from_millis(100))
        .connect()
        .await
        .unwrap();
    HALF_A.share(store);
    for _ in 0..2 {
        assert!(matches!(degraded_call().await, Err(BackendError::Down)));
    }
    assert_eq!(reason(&degraded_call().await), Some(Reason::Open));
    let before = HALF_CALLS.load(Ordering::SeqCst);
    server.signal("-STOP");
    // The open wait (300 ms) passes while Redis does not answer.
    tokio::time::sleep(Duration::from_millis(400)).await;
    for _ in 0..5 {
        assert_eq!(
            reason(&degraded_call().await),
            Some(Reason::Open),
            "a degraded replica stays open"
        );
    }
    assert_eq!(
        HALF_CALLS.load(Ordering::SeqCst),
        before,
        "no local probe reached the backend"
    );
    assert_eq!(HALF_A.get("shape-degraded").unwrap().state(), State::Open);
    server.signal("-CONT");
    // Once Redis answers, the store grants the probe.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while HALF_CALLS.load(Ordering::SeqCst) == before {
        assert!(
            std::time::Instant::now() < deadline,
            "no probe after Redis came back"
        );
        let _ = degraded_call().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(HALF_CALLS.load(Ordering::SeqCst), before + 1, "one probe");
}

static UNHEARD_ASYNC: LazyLock<Registry> = LazyLock::new(Registry::new);
static UNHEARD_SYNC: LazyLock<Registry> = LazyLock::new(Registry::new);
static UNHEARD_DROPPED: LazyLock<Registry> = LazyLock::new(Registry::new);
/// The backend calls of each: the three tests run at once.
static UNHEARD_ASYNC_CALLS: AtomicU32 = AtomicU32::new(0);
static UNHEARD_SYNC_CALLS: AtomicU32 = AtomicU32::new(0);
static UNHEARD_DROPPED_CALLS: AtomicU32 = AtomicU32::new(0);

/// One probe; a lost probe is re-armed only after 60 s, far past the test.
#[circuit_breaker(key = "shape-unheard-async", registry = UNHEARD_ASYNC, window = 2, min_calls = 2, open_for = "300ms", half_open_lease = "60s")]
async fn unheard_async() -> Result<(), BackendError> {
    UNHEARD_ASYNC_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(BackendError::Down)
}

#[circuit_breaker(key = "shape-unheard-sync", registry = UNHEARD_SYNC, window = 2, min_calls = 2, open_for = "300ms", half_open_lease = "60s")]
fn unheard_sync() -> Result<(), BackendError> {
    UNHEARD_SYNC_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(BackendError::Down)
}

#[circuit_breaker(key = "shape-unheard-dropped", registry = UNHEARD_DROPPED, window = 2, min_calls = 2, open_for = "300ms", half_open_lease = "60s")]
async fn unheard_dropped() -> Result<(), BackendError> {
    UNHEARD_DROPPED_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(BackendError::Down)
}

/// An admission whose answer is never read (`unheard`, while Redis is busy for 400 ms) is run by
/// Redis all the same, once it is free: the probe it grants is given back, so the next call is
/// the probe (not rejected with `HalfOpenFull` until the lease runs out). `calls` counts the
/// backend calls of `call`.
async fn unheard_admission_gives_its_probe_back(
    registry: &'static Registry,
    key: &str,
    calls: &AtomicU32,
    store_timeout: Duration,
    call: impl AsyncFn() -> Result<(), BackendError>,
    unheard: impl AsyncFn(),
) {
    let server = RedisServer::start();
    let store = RedisStore::builder(&server.url())
        .timeout(store_timeout)
        .connect()
        .await
        .unwrap();
    registry.share(store);
    for _ in 0..2 {
        assert!(matches!(call().await, Err(BackendError::Down)));
    }
    assert_eq!(reason(&call().await), Some(Reason::Open));
    // The open wait (300 ms) passes; Redis then runs a script for 400 ms.
    tokio::time::sleep(Duration::from_millis(350)).await;
    let port = server.port;
    let sleeper =
        std::thread::spawn(move || crate::harness::command_on(port, &["EVAL", BUSY_400_MS, "0"]));
    std::thread::sleep(Duration::from_millis(50));
    let before = calls.load(Ordering::SeqCst);
    // Redis runs the admission once it is free, granting the probe to nobody.
    unheard().await;
    sleeper.join().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while calls.load(Ordering::SeqCst) == before {
        assert!(std::time::Instant::now() < deadline, "no probe in 10 s");
        let rejected = reason(&call().await);
        assert_ne!(
            rejected,
            Some(Reason::HalfOpenFull),
            "the unheard admission's probe is held"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(calls.load(Ordering::SeqCst), before + 1, "one probe");
    assert_eq!(
        registry.get(key).unwrap().state(),
        State::Open,
        "the probe failed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_admission_that_timed_out_gives_its_probe_back() {
    // The admission times out (100 ms): the call is rejected, as the store grants probes.
    unheard_admission_gives_its_probe_back(
        &UNHEARD_ASYNC,
        "shape-unheard-async",
        &UNHEARD_ASYNC_CALLS,
        Duration::from_millis(100),
        async || unheard_async().await,
        async || assert_eq!(reason(&unheard_async().await), Some(Reason::Open)),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_admission_that_timed_out_gives_its_probe_back() {
    unheard_admission_gives_its_probe_back(
        &UNHEARD_SYNC,
        "shape-unheard-sync",
        &UNHEARD_SYNC_CALLS,
        Duration::from_millis(100),
        async || unheard_sync(),
        async || assert_eq!(reason(&unheard_sync()), Some(Reason::Open)),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_dropped_by_its_caller_gives_its_probe_back() {
    // The store would wait (2 s), but the caller gives up after 100 ms and drops the call.
    unheard_admission_gives_its_probe_back(
        &UNHEARD_DROPPED,
        "shape-unheard-dropped",
        &UNHEARD_DROPPED_CALLS,
        Duration::from_secs(2),
        async || unheard_dropped().await,
        async || {
            let dropped = tokio::time::timeout(Duration::from_millis(100), unheard_dropped()).await;
            assert!(dropped.is_err(), "the call was still waiting: {dropped:?}");
        },
    )
    .await;
}

/// Outcomes whose report timed out while Redis was busy (a script that runs for 400 ms) are sent
/// again; the script records each exactly once, though it ran the first copy too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_that_timed_out_are_resent_and_recorded_once() {
    let server = RedisServer::start();
    let store = RedisStore::builder(&server.url())
        .timeout(Duration::from_millis(100))
        .connect()
        .await
        .unwrap();
    ONCE_A.share(store.clone());
    // The view is learnt by a first call.
    assert!(counted(false).is_ok());
    let port = server.port;
    // A script that keeps Redis busy for 400 ms: every report sent meanwhile times out, and
    // runs once Redis is free again.
    let sleeper =
        std::thread::spawn(move || crate::harness::command_on(port, &["EVAL", BUSY_400_MS, "0"]));
    std::thread::sleep(Duration::from_millis(50));
    let mut made = 1u32;
    let mut failed = 0u32;
    for i in 0..40 {
        let fail = i % 3 == 0;
        let _ = counted(fail);
        made += 1;
        failed += u32::from(fail);
        tokio::task::yield_now().await;
    }
    sleeper.join().unwrap();
    let policy = ONCE_A.get("shape-once").unwrap().policy();
    assert_recorded(&store, "shape-once", policy, (made, failed)).await;
    // Nothing more arrives later (a copy recorded twice would show here).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let shared = store.state("shape-once", policy).await.unwrap();
    assert_eq!((shared.calls, shared.failures), (made, failed));
    assert_eq!(store.dropped_reports(), 0);
}

/// Sync calls on eight threads at once: their reports reach the reporting task in any order, and
/// every one of them is recorded (none taken for a copy of another).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_queued_by_many_threads_at_once_are_all_recorded() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    ORDER_A.share(store.clone());
    let (threads, calls) = (8u32, 300u32);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..calls {
                    let _ = tallied((t + i) % 4 == 0);
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    let made = threads * calls;
    let failed = (0..threads)
        .map(|t| (0..calls).filter(|i| (t + i) % 4 == 0).count() as u32)
        .sum::<u32>();
    let policy = ORDER_A.get("shape-order").unwrap().policy();
    assert_recorded(&store, "shape-order", policy, (made, failed)).await;
}

/// Waits (at most 20 s) until Redis's window of `key` holds as many calls as `expected`, then
/// asserts it holds exactly `expected` (calls, failures): every outcome recorded once.
async fn assert_recorded(store: &RedisStore, key: &str, policy: Policy, expected: (u32, u32)) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let shared = store.state(key, policy).await.unwrap();
        if shared.calls >= expected.0 || std::time::Instant::now() > deadline {
            assert_eq!(
                (shared.calls, shared.failures),
                expected,
                "every outcome recorded exactly once"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
