//! The `trigger` of a shared key's transitions names the rule the script applied: a shared key
//! tripped by `consecutive` or by `slow_rate` says so in its `circuit_opened` event and in its
//! transition hooks, as an in-memory breaker does.
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
    });
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
        [("run", "consecutive", "0.0"), ("slow", "slow_rate", "50.0")]
    );
}
