//! The rules the script applies and the `trigger` it names: a shared key tripped by
//! `consecutive` or by `slow_rate` says so in its `circuit_opened` event and in its transition
//! hooks, as an in-memory breaker does, and so does a half-open probe re-armed after its lease; `failure_count` is counted in Redis, so replicas that each
//! saw fewer failures trip together.
#![cfg(feature = "redis")]

mod common;
mod redis_harness;

use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use common::capture::{capture, named};
use fusebox::clock::FakeClock;
use fusebox::redis::RedisStore;
use fusebox::{Registry, State, Trigger, circuit_breaker};
use redis_harness::RedisServer;

#[derive(Debug)]
enum BackendError {
    Down,
    Refused(#[allow(dead_code)] fusebox::Error),
}

impl From<fusebox::Error> for BackendError {
    fn from(e: fusebox::Error) -> Self {
        BackendError::Refused(e)
    }
}

static CLOCK: LazyLock<FakeClock> = LazyLock::new(FakeClock::new);
static SHARED: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(CLOCK.clone()));
static REPLICA_A: LazyLock<Registry> = LazyLock::new(Registry::new);
static REPLICA_B: LazyLock<Registry> = LazyLock::new(Registry::new);
static SEEN: Mutex<Vec<(String, State, State, Trigger)>> = Mutex::new(Vec::new());

/// Trips by `consecutive` only: the failure rate needs 10 failures in 10 calls.
#[circuit_breaker(key = "run", registry = SHARED, window = 10, min_calls = 10, failure_rate = 100, consecutive = 3, open_for = "60s")]
async fn run(fail: bool) -> Result<(), BackendError> {
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

/// Trips by `slow_rate` only: every call succeeds, and a slow one takes 200 ms of fake time.
#[circuit_breaker(key = "slow", registry = SHARED, window = 4, min_calls = 4, slow = "100ms", slow_rate = 50, open_for = "60s")]
async fn slow(slow: bool) -> Result<(), BackendError> {
    if slow {
        CLOCK.advance(Duration::from_millis(200));
    }
    Ok(())
}

/// Signalled by a call of [`lease`] that holds its permit forever.
static HOLDING: LazyLock<tokio::sync::Notify> = LazyLock::new(tokio::sync::Notify::new);

/// One probe, re-armed when it does not report within its 5 s lease. `hang`: the body never
/// returns, as on a replica that died holding the probe.
#[circuit_breaker(key = "lease", registry = SHARED, window = 2, min_calls = 2, open_for = "1s", half_open_lease = "5s")]
async fn lease(fail: bool, hang: bool) -> Result<(), BackendError> {
    if hang {
        HOLDING.notify_one();
        std::future::pending::<()>().await;
    }
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

/// Trips by `failure_count` only (it replaces the rate rule): three failures in the window.
#[circuit_breaker(key = "count", registry = REPLICA_A, window = 10, min_calls = 10, failure_count = 3, open_for = "60s")]
async fn count_on_a(fail: bool) -> Result<(), BackendError> {
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

#[circuit_breaker(key = "count", registry = REPLICA_B, window = 10, min_calls = 10, failure_count = 3, open_for = "60s")]
async fn count_on_b(fail: bool) -> Result<(), BackendError> {
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

fn seen(key: &str) -> Vec<(State, State, Trigger)> {
    SEEN.lock()
        .unwrap()
        .iter()
        .filter(|(k, ..)| k == key)
        .map(|(_, from, to, trigger)| (*from, *to, *trigger))
        .collect()
}

/// Runs `f` on a current-thread runtime with the events of this thread captured.
fn on_runtime(f: impl std::future::Future<Output = ()>) -> Vec<common::capture::Captured> {
    capture(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    })
}

#[test]
fn a_shared_key_names_the_rule_that_tripped_it() {
    let server = RedisServer::start();
    SHARED.on_transition(|t| {
        SEEN.lock()
            .unwrap()
            .push((t.key.to_owned(), t.from, t.to, t.trigger));
    });
    let events = on_runtime(async {
        let store = RedisStore::builder(&server.url())
            .timeout(Duration::from_secs(2))
            .time_from(CLOCK.clone())
            .connect()
            .await
            .unwrap();
        SHARED.share(store);
        CLOCK.advance(Duration::from_secs(1_000));
        // Consecutive: one success, then three failures in a row.
        assert!(run(false).await.is_ok());
        for _ in 0..3 {
            assert!(matches!(run(true).await, Err(BackendError::Down)));
        }
        assert!(matches!(run(false).await, Err(BackendError::Refused(_))));
        // Slow rate: two fast calls, two slow ones (50 % of 4).
        for is_slow in [false, false, true, true] {
            assert!(slow(is_slow).await.is_ok());
        }
        assert!(matches!(slow(false).await, Err(BackendError::Refused(_))));
        // Lease: the probe's holder never reports; after the lease the probe is re-armed.
        for _ in 0..2 {
            assert!(matches!(lease(true, false).await, Err(BackendError::Down)));
        }
        CLOCK.advance(Duration::from_secs(1));
        let held = tokio::spawn(lease(false, true));
        HOLDING.notified().await;
        assert!(matches!(
            lease(false, false).await,
            Err(BackendError::Refused(_))
        ));
        CLOCK.advance(Duration::from_secs(5));
        assert!(lease(false, false).await.is_ok());
        assert!(!held.is_finished());
    });
    assert_eq!(
        seen("lease"),
        [
            (State::Closed, State::Open, Trigger::FailureRate),
            (State::Open, State::HalfOpen, Trigger::OpenWaitOver),
            (State::HalfOpen, State::HalfOpen, Trigger::LeaseExpired),
            (State::HalfOpen, State::Closed, Trigger::ProbesPassed),
        ]
    );
    assert_eq!(
        seen("run"),
        [(State::Closed, State::Open, Trigger::Consecutive)]
    );
    assert_eq!(
        seen("slow"),
        [(State::Closed, State::Open, Trigger::SlowRate)]
    );
    let opened = named(&events, "circuit_opened");
    let fields: Vec<(&str, &str, &str)> = opened
        .iter()
        .map(|e| {
            (
                e.fields["key"].as_str(),
                e.fields["trigger"].as_str(),
                e.fields["slow_rate"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        fields,
        [
            ("run", "consecutive", "0.0"),
            ("slow", "slow_rate", "50.0"),
            ("lease", "failure_rate", "0.0")
        ]
    );
}

#[test]
fn replicas_sharing_a_key_trip_together_on_failure_count() {
    let server = RedisServer::start();
    REPLICA_B.on_transition(|t| {
        SEEN.lock()
            .unwrap()
            .push((format!("b:{}", t.key), t.from, t.to, t.trigger));
    });
    let events = on_runtime(async {
        for replica in [&REPLICA_A, &REPLICA_B] {
            let store = RedisStore::builder(&server.url())
                .timeout(Duration::from_secs(2))
                .connect()
                .await
                .unwrap();
            replica.share(store);
        }
        // Neither replica sees three failures; together they do, and the third trips the key.
        assert!(matches!(count_on_a(true).await, Err(BackendError::Down)));
        assert!(matches!(count_on_b(true).await, Err(BackendError::Down)));
        assert!(count_on_a(false).await.is_ok());
        assert!(matches!(count_on_b(true).await, Err(BackendError::Down)));
        assert!(matches!(
            count_on_a(false).await,
            Err(BackendError::Refused(_))
        ));
        assert!(matches!(
            count_on_b(false).await,
            Err(BackendError::Refused(_))
        ));
    });
    assert_eq!(
        server.command(&["EXISTS", "{fusebox:count}"]),
        ":1",
        "the key is in redis"
    );
    assert_eq!(
        seen("b:count"),
        [(State::Closed, State::Open, Trigger::FailureCount)],
        "the replica whose failure reached the count announces it"
    );
    let errors: Vec<&str> = events
        .iter()
        .filter(|e| e.level == tracing::Level::ERROR)
        .map(|e| e.message())
        .collect();
    assert!(errors.is_empty(), "the key is shared: {errors:?}");
    let opened = named(&events, "circuit_opened");
    assert_eq!(opened.len(), 1, "{opened:?}");
    assert_eq!(
        (
            opened[0].fields["key"].as_str(),
            opened[0].fields["trigger"].as_str(),
            opened[0].fields["calls"].as_str()
        ),
        ("count", "failure_count", "4")
    );
}
