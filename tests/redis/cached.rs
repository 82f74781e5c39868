//! Cached mode against a real `redis-server`: transitions pushed by pub/sub, and the replica
//! strict while its subscription is down.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::harness::{BackendError, RedisServer};
use fusebox::{Reason, Registry, State, circuit_breaker};
use fusebox_redis::RedisStore;

static CACHED: LazyLock<Registry> = LazyLock::new(Registry::new);
static CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "payments", registry = CACHED, window = 5, min_calls = 5, open_for = "60s")]
async fn pay() -> Result<(), BackendError> {
    CALLS.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

/// One call: `None` when it reached the backend, else the rejection's reason.
async fn call() -> Option<Reason> {
    let before = CALLS.load(Ordering::SeqCst);
    match pay().await {
        Ok(()) => {
            assert_eq!(CALLS.load(Ordering::SeqCst), before + 1);
            None
        }
        Err(BackendError::Rejected(e)) => {
            assert_eq!(CALLS.load(Ordering::SeqCst), before, "a rejected call ran");
            Some(e.reason())
        }
        Err(BackendError::Down) => unreachable!("`pay` never fails"),
    }
}

/// Polls (bounded, 5 s) until `done` holds; true when it did.
async fn until<F: std::future::Future<Output = bool>>(done: impl FnMut() -> F) -> bool {
    crate::harness::until(Duration::from_secs(5), done).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pubsub_killed_strict_until_resynchronised() {
    let server = RedisServer::start();
    let store = server.cached_store().await;
    assert!(store.is_cached());
    assert!(CACHED.share(store.clone()));
    // An operator's connection of its own.
    let operator = RedisStore::connect(&server.url()).await.unwrap();
    assert_eq!(call().await, None);
    let policy = CACHED.get("payments").unwrap().policy();

    // Subscribed: a forced state reaches the replica by pub/sub, and it rejects locally.
    operator
        .force("payments", policy, State::ForcedOpen)
        .await
        .unwrap();
    assert!(
        until(|| async { call().await == Some(Reason::ForcedOpen) }).await,
        "the pushed forced-open state rejects"
    );
    operator
        .force("payments", policy, State::Closed)
        .await
        .unwrap();
    assert!(until(|| async { call().await.is_none() }).await);

    // The subscription is killed: the replica notices and is strict.
    assert!(
        server
            .command(&["CLIENT", "KILL", "TYPE", "pubsub"])
            .starts_with(':')
    );
    assert!(
        until(|| async { !store.is_cached() }).await,
        "the dropped subscription is noticed"
    );
    // A transition it cannot hear: its next call asks the script, and is rejected.
    operator
        .force("payments", policy, State::ForcedOpen)
        .await
        .unwrap();
    assert_eq!(call().await, Some(Reason::ForcedOpen));

    // Resubscribed (and resynchronised by its next call): cached again and still rejecting.
    assert!(
        until(|| async { store.is_cached() }).await,
        "the subscription comes back"
    );
    assert_eq!(call().await, Some(Reason::ForcedOpen));
    operator
        .force("payments", policy, State::Closed)
        .await
        .unwrap();
    assert!(
        until(|| async { call().await.is_none() }).await,
        "the pushed close admits again"
    );
}

static BATCHED: LazyLock<Registry> = LazyLock::new(Registry::new);

#[circuit_breaker(key = "batched", registry = BATCHED, window = 200, min_calls = 200, open_for = "60s")]
async fn batched() -> Result<(), BackendError> {
    Ok(())
}

/// Outcomes sent off the call path are pipelined; none is lost, even when Redis has forgotten the
/// script (`SCRIPT FLUSH`) and the pipeline is answered `NOSCRIPT`. One thread: the calls never
/// yield, so their 150 reports are all queued when the reporting task next runs.
#[tokio::test]
async fn batched_reports_all_counted_after_script_flush() {
    let server = RedisServer::start();
    let store = server.cached_store().await;
    assert!(BATCHED.share(store.clone()));
    batched().await.unwrap();
    assert!(server.command(&["SCRIPT", "FLUSH"]).starts_with("+OK"));
    // 150 calls admitted locally in one go: their reports queue up and go in one pipeline.
    for _ in 0..150 {
        batched().await.unwrap();
    }
    let policy = BATCHED.get("batched").unwrap().policy();
    assert!(
        until(|| async { store.state("batched", policy).await.map(|s| s.calls) == Ok(151) }).await,
        "151 outcomes counted, got {:?}",
        store.state("batched", policy).await
    );
}

static SYNC: LazyLock<Registry> = LazyLock::new(Registry::new);
static SYNC_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "sync", registry = SYNC, window = 50, min_calls = 50, open_for = "60s")]
fn pay_sync() -> Result<(), BackendError> {
    SYNC_CALLS.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

/// A sync function in cached mode: its first call starts a background read of the shared state;
/// from then on it admits from the view, its outcomes reach Redis off the call path, and a pushed
/// transition rejects it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_calls_use_the_cached_view() {
    let server = RedisServer::start();
    let store = server.cached_store().await;
    assert!(SYNC.share(store.clone()));
    let operator = RedisStore::connect(&server.url()).await.unwrap();
    assert!(pay_sync().is_ok());
    let policy = SYNC.get("sync").unwrap().policy();
    // Once the view is known, each sync call's outcome is counted in Redis.
    assert!(
        until(|| async {
            let _ = pay_sync();
            store.state("sync", policy).await.map(|s| s.calls >= 3) == Ok(true)
        })
        .await,
        "sync outcomes reach redis"
    );
    operator
        .force("sync", policy, State::ForcedOpen)
        .await
        .unwrap();
    assert!(
        until(|| async {
            matches!(pay_sync(), Err(BackendError::Rejected(e)) if e.reason() == Reason::ForcedOpen)
        })
        .await,
        "the pushed forced-open state rejects sync calls"
    );
    let before = SYNC_CALLS.load(Ordering::SeqCst);
    assert!(pay_sync().is_err());
    assert_eq!(
        SYNC_CALLS.load(Ordering::SeqCst),
        before,
        "a rejected sync call ran"
    );
}

static GATED: LazyLock<Registry> = LazyLock::new(Registry::new);
static GATED_CALLS: AtomicU32 = AtomicU32::new(0);
static GATED_FAILS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Five failures in a row open it: the fewest failures that can.
#[circuit_breaker(key = "gated", registry = GATED, consecutive = 5, open_for = "60s")]
async fn gated() -> Result<(), BackendError> {
    GATED_CALLS.fetch_add(1, Ordering::SeqCst);
    if GATED_FAILS.load(Ordering::SeqCst) {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

/// A busy Redis (every client paused for 300 ms, shorter than the store's timeout) while a cached
/// replica's calls fail: its view admits alone only until as many of its failures as open the
/// circuit (5) are unanswered; the next call waits for the script, and the circuit opens after at
/// most one more backend call. Without the gate all twenty calls would reach the backend while
/// Redis sleeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_redis_gates_the_view_after_the_failures_that_can_open_it() {
    let server = RedisServer::start();
    let store = server.cached_store().await;
    assert!(GATED.share(store.clone()));
    // The first call learns the closed view; the next ones are admitted by it.
    assert!(gated().await.is_ok());
    let policy = GATED.get("gated").unwrap().policy();
    assert!(
        until(|| async { store.state("gated", policy).await.map(|s| s.calls) == Ok(1) }).await,
        "the first outcome is recorded"
    );
    GATED_FAILS.store(true, Ordering::SeqCst);
    assert_eq!(server.command(&["CLIENT", "PAUSE", "300", "ALL"]), "+OK");
    let before = GATED_CALLS.load(Ordering::SeqCst);
    let mut rejected = None;
    for _ in 0..20 {
        if let Err(BackendError::Rejected(e)) = gated().await {
            rejected = Some(e.reason());
            break;
        }
    }
    let reached = GATED_CALLS.load(Ordering::SeqCst) - before;
    assert_eq!(rejected, Some(Reason::Open), "the circuit opened");
    assert!(
        (5..=6).contains(&reached),
        "5 failures admitted by the view, then at most one by the script; {reached} reached the backend"
    );
    assert_eq!(store.dropped_reports(), 0);
}
