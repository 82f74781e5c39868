//! The rules the script applies and the `trigger` it names: a shared key tripped by
//! `consecutive` or by `slow_rate` says so in its `circuit_opened` event and in its transition
//! hooks, as an in-memory breaker does, and so does a half-open probe re-armed after its lease; `failure_count` is counted in Redis, so replicas that each
//! saw fewer failures trip together. A state forced through `RedisStore::force` is announced
//! (`trigger = "operator"`) by the replica that forced it, whose local breaker follows; the other
//! replicas follow it silently, on their next call (strict) or from the subscription (cached).

use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use crate::common::capture::{capture, named};
use crate::harness::{BackendError, RedisServer};
use fusebox::clock::FakeClock;
use fusebox::{Registry, State, Trigger, circuit_breaker};
use fusebox_redis::{Mode, RedisStore};

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
fn on_runtime(f: impl std::future::Future<Output = ()>) -> Vec<crate::common::capture::Captured> {
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
        assert!(matches!(run(false).await, Err(BackendError::Rejected(_))));
        // Slow rate: two fast calls, two slow ones (50 % of 4).
        for is_slow in [false, false, true, true] {
            assert!(slow(is_slow).await.is_ok());
        }
        assert!(matches!(slow(false).await, Err(BackendError::Rejected(_))));
        // Lease: the probe's holder never reports; after the lease the probe is re-armed.
        for _ in 0..2 {
            assert!(matches!(lease(true, false).await, Err(BackendError::Down)));
        }
        CLOCK.advance(Duration::from_secs(1));
        let held = tokio::spawn(lease(false, true));
        HOLDING.notified().await;
        assert!(matches!(
            lease(false, false).await,
            Err(BackendError::Rejected(_))
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
    // Committed in the store: announced as shared transitions.
    assert!(
        opened.iter().all(|e| e.fields["shared"] == "true"),
        "every transition committed in redis says `shared = true`"
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
            Err(BackendError::Rejected(_))
        ));
        assert!(matches!(
            count_on_b(false).await,
            Err(BackendError::Rejected(_))
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

static OPS_A: LazyLock<Registry> = LazyLock::new(Registry::new);
static OPS_B: LazyLock<Registry> = LazyLock::new(Registry::new);

#[circuit_breaker(key = "ops", registry = OPS_A, window = 4, min_calls = 4, open_for = "60s")]
async fn ops_on_a() -> Result<(), BackendError> {
    Ok(())
}

#[circuit_breaker(key = "ops", registry = OPS_B, window = 4, min_calls = 4, open_for = "60s")]
async fn ops_on_b() -> Result<(), BackendError> {
    Ok(())
}

/// A sync function on replica B's key: it runs on the local breaker.
#[circuit_breaker(key = "ops", registry = OPS_B, window = 4, min_calls = 4, open_for = "60s")]
fn ops_sync_on_b() -> Result<(), BackendError> {
    Ok(())
}

/// Records the transitions of `registry` in [`SEEN`] as `{tag}:{key}`.
fn record(registry: &Registry, tag: &'static str) {
    registry.on_transition(move |t| {
        SEEN.lock()
            .unwrap()
            .push((format!("{tag}:{}", t.key), t.from, t.to, t.trigger));
    });
}

fn state(registry: &Registry, key: &str) -> Option<State> {
    registry.get(key).map(|b| b.state())
}

/// The `key`, `from`, `to`, `trigger`, `function` and `calls` of every transition event of `key`.
fn transitions(events: &[crate::common::capture::Captured], key: &str) -> Vec<[String; 6]> {
    events
        .iter()
        .filter(|e| {
            e.fields.contains_key("trigger") && e.fields.get("key").is_some_and(|k| k == key)
        })
        .map(|e| ["key", "from", "to", "trigger", "function", "calls"].map(|f| e.fields[f].clone()))
        .collect()
}

fn row(key: &str, from: &str, to: &str, calls: &str) -> [String; 6] {
    [key, from, to, "operator", "operator", calls].map(str::to_owned)
}

#[test]
fn a_forced_shared_key_is_announced_by_the_replica_that_forced_it() {
    let server = RedisServer::start();
    record(&OPS_A, "a");
    record(&OPS_B, "b");
    let events = on_runtime(async {
        let mut stores = Vec::new();
        for replica in [&OPS_A, &OPS_B] {
            let store = RedisStore::builder(&server.url())
                .timeout(Duration::from_secs(2))
                .connect()
                .await
                .unwrap();
            replica.share(store.clone());
            stores.push(store);
        }
        assert!(ops_on_a().await.is_ok());
        assert!(ops_on_b().await.is_ok());
        let policy = OPS_A.get("ops").unwrap().policy();

        // Replica A forces the key open: its local breaker follows at once.
        stores[0]
            .force("ops", policy, State::ForcedOpen)
            .await
            .unwrap();
        assert_eq!(state(&OPS_A, "ops"), Some(State::ForcedOpen));
        // Replica B (strict) has not asked Redis since: it still shows closed, and its next
        // call's answer moves it (rejected), silently.
        assert_eq!(state(&OPS_B, "ops"), Some(State::Closed));
        let rejected = ops_on_b().await;
        assert!(
            matches!(&rejected, Err(BackendError::Rejected(e)) if e.reason() == fusebox::Reason::ForcedOpen),
            "{rejected:?}"
        );
        assert_eq!(state(&OPS_B, "ops"), Some(State::ForcedOpen));
        // Its sync calls, which run on the local breaker, are rejected too.
        let rejected = ops_sync_on_b();
        assert!(
            matches!(&rejected, Err(BackendError::Rejected(e)) if e.reason() == fusebox::Reason::ForcedOpen),
            "{rejected:?}"
        );
        assert!(matches!(ops_on_a().await, Err(BackendError::Rejected(_))));

        // Replica A resets it: A closes at once, B on its next call.
        stores[0].force("ops", policy, State::Closed).await.unwrap();
        assert_eq!(state(&OPS_A, "ops"), Some(State::Closed));
        assert_eq!(state(&OPS_B, "ops"), Some(State::ForcedOpen));
        assert!(ops_on_b().await.is_ok());
        assert_eq!(state(&OPS_B, "ops"), Some(State::Closed));
        assert!(ops_on_a().await.is_ok());

        // Forcing the state the key is in commits no transition: nothing is announced.
        stores[0].force("ops", policy, State::Closed).await.unwrap();

        // A handle's own forced state is local: Redis, closed, admits replica B's async calls
        // and does not undo it.
        OPS_B.get("ops").unwrap().force_open();
        assert!(ops_on_b().await.is_ok());
        assert_eq!(state(&OPS_B, "ops"), Some(State::ForcedOpen));
    });
    assert_eq!(
        seen("a:ops"),
        [
            (State::Closed, State::ForcedOpen, Trigger::Operator),
            (State::ForcedOpen, State::Closed, Trigger::Operator),
        ],
        "the replica that forced the key announces it to its hooks"
    );
    assert_eq!(
        seen("b:ops"),
        [(State::Closed, State::ForcedOpen, Trigger::Operator)],
        "the other replica announces only its handle's own control"
    );
    let rows = transitions(&events, "ops");
    assert_eq!(
        rows[..2],
        [
            row("ops", "closed", "forced_open", "2"),
            row("ops", "forced_open", "closed", "0"),
        ],
        "one event per transition, with the window it ended"
    );
    assert_eq!(rows.len(), 3, "{rows:?}");
}

static CACHED_A: LazyLock<Registry> = LazyLock::new(Registry::new);
static CACHED_B: LazyLock<Registry> = LazyLock::new(Registry::new);

#[circuit_breaker(key = "cached", registry = CACHED_A, window = 4, min_calls = 4, open_for = "60s")]
async fn cached_on_a() -> Result<(), BackendError> {
    Ok(())
}

#[circuit_breaker(key = "cached", registry = CACHED_B, window = 4, min_calls = 4, open_for = "60s")]
async fn cached_on_b() -> Result<(), BackendError> {
    Ok(())
}

/// Polls (bounded, five seconds) until `registry`'s breaker `key` shows `want`; true when it did.
async fn shows(registry: &Registry, key: &str, want: State) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while state(registry, key) != Some(want) {
        if std::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    true
}

#[test]
fn cached_replicas_follow_a_forced_key_from_the_subscription_silently() {
    let server = RedisServer::start();
    record(&CACHED_A, "ca");
    record(&CACHED_B, "cb");
    let events = on_runtime(async {
        let mut stores = Vec::new();
        for replica in [&CACHED_A, &CACHED_B] {
            let store = RedisStore::builder(&server.url())
                .timeout(Duration::from_secs(2))
                .mode(Mode::Cached)
                .connect()
                .await
                .unwrap();
            assert!(store.is_cached());
            replica.share(store.clone());
            stores.push(store);
        }
        // An operator's store that no registry shares: it has no breaker to follow.
        let operator = RedisStore::connect(&server.url()).await.unwrap();
        assert!(cached_on_a().await.is_ok());
        assert!(cached_on_b().await.is_ok());
        let policy = CACHED_A.get("cached").unwrap().policy();
        // Cached outcomes are sent off the call path: both are in the window before it is forced.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while operator.state("cached", policy).await.unwrap().calls < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "the outcomes reach redis"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }

        stores[0]
            .force("cached", policy, State::Disabled)
            .await
            .unwrap();
        assert_eq!(state(&CACHED_A, "cached"), Some(State::Disabled));
        assert!(
            shows(&CACHED_B, "cached", State::Disabled).await,
            "replica B learns the forced state from the subscription, without a call"
        );

        operator
            .force("cached", policy, State::Closed)
            .await
            .unwrap();
        assert!(shows(&CACHED_A, "cached", State::Closed).await);
        assert!(shows(&CACHED_B, "cached", State::Closed).await);
    });
    assert_eq!(
        seen("ca:cached"),
        [(State::Closed, State::Disabled, Trigger::Operator)],
        "replica A announces the state it forced, and only that one"
    );
    assert_eq!(seen("cb:cached"), [], "replica B announces nothing");
    assert_eq!(
        transitions(&events, "cached"),
        [
            row("cached", "closed", "disabled", "2"),
            row("cached", "disabled", "closed", "0"),
        ],
        "the operator's store, with no breaker of the key, still emits the event"
    );
}
