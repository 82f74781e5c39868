//! `throttle` on a shared key: each replica draws from the shared window of the store's last
//! answer, so the failures one replica saw shed the calls of another, whose own window is empty,
//! and a shed call never reaches the store.

use std::sync::LazyLock;
use std::time::Duration;

use crate::harness::{RedisServer, reply_on};
use fusebox::{Reason, Registry, Sharing, circuit_breaker};
use fusebox_redis::RedisStore;

#[derive(Debug)]
enum CallError {
    Down,
    /// Not a counted failure: it leaves every window as it is.
    Declined,
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for CallError {
    fn from(e: fusebox::Error) -> Self {
        CallError::Rejected(e)
    }
}

static THROTTLE_A: LazyLock<Registry> = LazyLock::new(Registry::new);
static THROTTLE_B: LazyLock<Registry> = LazyLock::new(Registry::new);

/// `outcome`: 0 succeeds, 1 fails, 2 is declined (not counted).
fn backend(outcome: u8) -> Result<(), CallError> {
    match outcome {
        0 => Ok(()),
        1 => Err(CallError::Down),
        _ => Err(CallError::Declined),
    }
}

#[circuit_breaker(key = "throttle", registry = THROTTLE_A, failure = [Down], window = 10,
                  min_calls = 10, failure_rate = 100, throttle = 1, open_for = "60s")]
async fn on_a(outcome: u8) -> Result<(), CallError> {
    backend(outcome)
}

#[circuit_breaker(key = "throttle", registry = THROTTLE_B, failure = [Down], window = 10,
                  min_calls = 10, failure_rate = 100, throttle = 1, open_for = "60s")]
async fn on_b(outcome: u8) -> Result<(), CallError> {
    backend(outcome)
}

#[test]
fn a_replica_sheds_from_the_shared_window_the_others_filled() {
    fastrand::seed(25);
    let server = RedisServer::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = || async {
            RedisStore::builder(&server.url())
                .timeout(Duration::from_secs(2))
                .connect()
                .await
                .unwrap()
        };
        THROTTLE_A.share(store().await);
        THROTTLE_B.share(store().await);
        // Replica A: one success, then nine failures; the shared window is 9 failures in 10.
        assert!(on_a(0).await.is_ok());
        for _ in 0..9 {
            assert!(matches!(on_a(1).await, Err(CallError::Down)));
        }
        // Replica B's first call has no answer of the store to draw from: it goes out, and its
        // answer carries the shared window.
        assert!(matches!(on_b(2).await, Err(CallError::Declined)));
        let b = THROTTLE_B.get("throttle").unwrap();
        let snapshot = b.snapshot();
        assert_eq!(snapshot.sharing(), Sharing::Shared);
        let shared = snapshot.shared_window().expect("an answer of the store");
        assert_eq!((shared.calls(), shared.failures()), (10, 9));
        assert_eq!(snapshot.calls, 0, "b's local window is empty");
        // p = (10 - 1) / 11 from the shared window.
        let mut shed = 0;
        for _ in 0..200 {
            match on_b(2).await {
                Err(CallError::Rejected(e)) => {
                    assert_eq!(e.reason(), Reason::Throttled);
                    shed += 1;
                }
                Err(CallError::Declined) => {}
                other => panic!("{other:?}"),
            }
        }
        assert!(
            (130..=190).contains(&shed),
            "{shed} of 200 shed at p = 9/11"
        );
        assert_eq!(b.snapshot().throttled, shed);
        assert_eq!(b.state(), fusebox::State::Closed);
    });
    // The shed calls never reached the store: the shared window holds A's ten calls.
    let n = reply_on(server.port, &["HGET", "{fusebox:throttle}", "n"]);
    assert_eq!(n.first().map(String::as_str), Some("10"), "{n:?}");
}
