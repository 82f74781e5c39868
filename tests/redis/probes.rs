//! Half-open probes across replicas: a probe lease re-arms the probes of a replica that died.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::harness::{BackendError, RedisServer};
use fusebox::clock::FakeClock;
use fusebox::{Reason, Registry, State, circuit_breaker};
use fusebox_redis::RedisStore;

static CLOCK: LazyLock<FakeClock> = LazyLock::new(FakeClock::new);
static DYING: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(CLOCK.clone()));
static SURVIVOR: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(CLOCK.clone()));
static STARTED: AtomicBool = AtomicBool::new(false);

#[circuit_breaker(key = "lease", registry = DYING, window = 5, min_calls = 5, open_for = "100ms", half_open = 1)]
async fn on_dying(fail: bool, hang: bool) -> Result<(), BackendError> {
    STARTED.store(true, Ordering::SeqCst);
    if hang {
        std::future::pending::<()>().await;
    }
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

#[circuit_breaker(key = "lease", registry = SURVIVOR, window = 5, min_calls = 5, open_for = "100ms", half_open = 1)]
async fn on_survivor(fail: bool) -> Result<(), BackendError> {
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

fn reason(result: Result<(), BackendError>) -> Option<Reason> {
    match result {
        Err(BackendError::Rejected(e)) => Some(e.reason()),
        _ => None,
    }
}

#[tokio::test]
async fn a_probe_lease_re_arms_the_probe_of_a_dead_replica() {
    let server = RedisServer::start();
    CLOCK.advance(Duration::from_secs(1_000));
    for registry in [&DYING, &SURVIVOR] {
        let store = RedisStore::builder(&server.url()).time_from(CLOCK.clone());
        registry.share(store.connect().await.unwrap());
    }
    for _ in 0..5 {
        assert!(matches!(on_survivor(true).await, Err(BackendError::Down)));
    }
    assert_eq!(reason(on_dying(false, false).await), Some(Reason::Open));
    CLOCK.advance(Duration::from_millis(100));

    // The dying replica takes the only probe, then never reports (its future is leaked).
    let mut probe = Box::pin(on_dying(false, true));
    while !STARTED.load(Ordering::SeqCst) {
        tokio::select! {
            biased;
            _ = &mut probe => unreachable!("the probe hangs"),
            _ = tokio::time::sleep(Duration::from_millis(1)) => {}
        }
    }
    std::mem::forget(probe);
    assert_eq!(reason(on_survivor(false).await), Some(Reason::HalfOpenFull));
    CLOCK.advance(Duration::from_millis(99));
    assert_eq!(reason(on_survivor(false).await), Some(Reason::HalfOpenFull));

    // The lease (here `open_for`) ran out: the survivor's call is the re-armed probe, and closes.
    CLOCK.advance(Duration::from_millis(1));
    assert!(on_survivor(false).await.is_ok());
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let policy = SURVIVOR.get("lease").unwrap().policy();
    assert_eq!(
        store.state("lease", policy).await.unwrap().state,
        State::Closed
    );
}

static SLOW_CLOCK: LazyLock<FakeClock> = LazyLock::new(FakeClock::new);
static SLOW: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(SLOW_CLOCK.clone()));

/// Every call takes `took` ms of fake time; `slow = "10ms"`, half of the calls slow opens.
#[circuit_breaker(key = "slow", registry = SLOW, window = 4, min_calls = 2, slow = "10ms", slow_rate = 50, open_for = "1s")]
async fn slow_call(took: u64) -> Result<(), BackendError> {
    SLOW_CLOCK.advance(Duration::from_millis(took));
    Ok(())
}

#[tokio::test]
async fn slow_calls_are_timed_locally_and_counted_in_redis() {
    let server = RedisServer::start();
    let store = RedisStore::builder(&server.url()).time_from(SLOW_CLOCK.clone());
    SLOW.share(store.connect().await.unwrap());
    assert!(slow_call(1).await.is_ok());
    assert!(slow_call(2).await.is_ok());
    let operator = RedisStore::connect(&server.url()).await.unwrap();
    let policy = SLOW.get("slow").unwrap().policy();
    assert_eq!(
        operator.state("slow", policy).await.unwrap().state,
        State::Closed
    );
    assert!(
        slow_call(11).await.is_ok(),
        "slow (over 10 ms), but a success"
    );
    assert!(slow_call(25).await.is_ok());
    // 2 slow of 4 calls: 50 % reaches `slow_rate`.
    assert_eq!(
        operator.state("slow", policy).await.unwrap().state,
        State::Open
    );
    assert_eq!(reason(slow_call(1).await), Some(Reason::Open));
}
