//! Sync functions on a shared registry: they admit from the replica's view of the shared state and
//! send their outcomes to Redis off the call path; the local breaker, which the store's answers
//! seed with the shared state, decides only while the view is unknown on a current-thread runtime
//! (which cannot wait for its own store task) or while the store does not answer; the outcomes of
//! the calls it admits then go to Redis all the same.

use std::sync::LazyLock;

use crate::harness::{BackendError, RedisServer};
use fusebox::{Reason, Registry, State, circuit_breaker};
use fusebox_redis::RedisStore;

static SYNC_ONLY: LazyLock<Registry> = LazyLock::new(Registry::new);
static MIXED: LazyLock<Registry> = LazyLock::new(Registry::new);
static LATE: LazyLock<Registry> = LazyLock::new(Registry::new);
static UNSUPPORTED: LazyLock<Registry> = LazyLock::new(Registry::new);
static FORCED: LazyLock<Registry> = LazyLock::new(Registry::new);

/// A time window whose tenth (1000.1 ms) is not a whole number of milliseconds.
#[circuit_breaker(key = "timed", registry = UNSUPPORTED, window = "10001ms", min_calls = 2, open_for = "60s")]
async fn timed() -> Result<(), BackendError> {
    Err(BackendError::Down)
}

#[circuit_breaker(key = "forced", registry = FORCED)]
async fn forced() -> Result<(), BackendError> {
    Ok(())
}

#[circuit_breaker(key = "late", registry = LATE, window = 5, min_calls = 5, open_for = "60s")]
async fn late() -> Result<(), BackendError> {
    Err(BackendError::Down)
}

#[circuit_breaker(key = "sync", registry = SYNC_ONLY, window = 5, min_calls = 5, open_for = "60s")]
fn sync_only() -> Result<(), BackendError> {
    Err(BackendError::Down)
}

#[circuit_breaker(key = "mixed", registry = MIXED, window = 5, min_calls = 5, open_for = "60s")]
async fn mixed_async() -> Result<(), BackendError> {
    Err(BackendError::Down)
}

#[circuit_breaker(key = "mixed", registry = MIXED, window = 5, min_calls = 5, open_for = "60s")]
fn mixed_sync() -> Result<(), BackendError> {
    Ok(())
}

fn reason(result: Result<(), BackendError>) -> Option<Reason> {
    match result {
        Err(BackendError::Rejected(e)) => Some(e.reason()),
        _ => None,
    }
}

/// On a current-thread runtime the first sync call cannot wait for the script: it runs on the
/// local breaker and starts a read of the shared state; once the runtime has run the store's task,
/// the view is known and every outcome goes to Redis.
#[tokio::test]
async fn sync_calls_on_a_current_thread_runtime_share_once_the_view_is_known() {
    let server = RedisServer::start();
    SYNC_ONLY.share(RedisStore::connect(&server.url()).await.unwrap());
    assert!(matches!(sync_only(), Err(BackendError::Down)));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    // Each failure is sent to the script by the store's task, which runs while this test sleeps.
    while reason(sync_only()).is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the shared circuit never opened"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(
        server.command(&["HGET", "{fusebox:sync}", "st"]),
        "$1",
        "the outcomes reached redis"
    );
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let policy = SYNC_ONLY.get("sync").unwrap().policy();
    assert_eq!(
        store.state("sync", policy).await.unwrap().state,
        State::Open,
        "the sync calls opened the shared circuit"
    );
}

#[tokio::test]
async fn sync_calls_see_the_shared_state_async_calls_brought_back() {
    let server = RedisServer::start();
    MIXED.share(RedisStore::connect(&server.url()).await.unwrap());
    // Admitted before the view is known (a current-thread runtime cannot wait for the script);
    // its success is sent to Redis all the same, so the window holds it: 4 failures of 5 calls
    // open the circuit (80% of `min_calls = 5`).
    assert!(mixed_sync().is_ok());
    for _ in 0..4 {
        assert!(matches!(mixed_async().await, Err(BackendError::Down)));
    }
    assert_eq!(MIXED.get("mixed").unwrap().state(), State::Open);
    assert_eq!(
        reason(mixed_sync()),
        Some(Reason::Open),
        "seeded with the shared OPEN"
    );
}

#[tokio::test]
async fn a_breaker_used_before_share_continues_its_state() {
    let server = RedisServer::start();
    for _ in 0..5 {
        assert!(matches!(late().await, Err(BackendError::Down)));
    }
    assert_eq!(LATE.get("late").unwrap().state(), State::Open);
    LATE.share(RedisStore::connect(&server.url()).await.unwrap());
    assert_eq!(
        reason(late().await),
        Some(Reason::Open),
        "still open once shared"
    );
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let shared = store
        .state("late", LATE.get("late").unwrap().policy())
        .await
        .unwrap();
    assert_eq!(
        shared.state,
        State::Open,
        "the open state was pushed to redis"
    );
}

#[tokio::test]
async fn a_policy_the_script_does_not_share_stays_local() {
    let server = RedisServer::start();
    UNSUPPORTED.share(RedisStore::connect(&server.url()).await.unwrap());
    for _ in 0..2 {
        assert!(matches!(timed().await, Err(BackendError::Down)));
    }
    assert_eq!(
        reason(timed().await),
        Some(Reason::Open),
        "the local breaker decides"
    );
    assert_eq!(
        server.command(&["EXISTS", "{fusebox:timed}"]),
        ":0",
        "nothing sent to redis"
    );
}

#[tokio::test]
async fn force_moves_every_replica() {
    let server = RedisServer::start();
    FORCED.share(RedisStore::connect(&server.url()).await.unwrap());
    assert!(forced().await.is_ok());
    let operator = RedisStore::connect(&server.url()).await.unwrap();
    let policy = FORCED.get("forced").unwrap().policy();
    operator
        .force("forced", policy, State::ForcedOpen)
        .await
        .unwrap();
    assert_eq!(reason(forced().await), Some(Reason::ForcedOpen));
    operator
        .force("forced", policy, State::Closed)
        .await
        .unwrap();
    assert!(forced().await.is_ok());
}
