//! What operators see on a shared key, two registries (two replicas) sharing one real
//! `redis-server`: each replica's snapshot shows its own calls and the shared window (every
//! replica's outcomes, from the store's last answer, with its age), says the key is shared and
//! whether the store answers; a key that cannot be shared says so; each replica's metrics count
//! its shared calls, and its state gauge follows the state it mirrors from Redis.

use std::sync::LazyLock;
use std::time::Duration;

use crate::harness::{BackendError, RedisServer};
use fusebox::clock::FakeClock;
use fusebox::{Policy, Reason, Registry, Sharing, State, circuit_breaker};
use fusebox_redis::RedisStore;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Connects a store to `server` (a generous timeout: a busy host must not degrade these tests).
async fn store(server: &RedisServer) -> RedisStore {
    RedisStore::builder(&server.url())
        .timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap()
}

fn reason(result: Result<(), BackendError>) -> Option<Reason> {
    match result {
        Err(BackendError::Rejected(e)) => Some(e.reason()),
        _ => None,
    }
}

static CLOCK_A: LazyLock<FakeClock> = LazyLock::new(FakeClock::new);
static WINDOW_A: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(CLOCK_A.clone()));
static WINDOW_B: LazyLock<Registry> = LazyLock::new(Registry::new);

/// A window that does not trip on the calls below (20 calls before a rate is judged).
#[circuit_breaker(key = "window", registry = WINDOW_A, window = 20, min_calls = 20, open_for = "60s")]
async fn window_on_a(fail: bool) -> Result<(), BackendError> {
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

#[circuit_breaker(key = "window", registry = WINDOW_B, window = 20, min_calls = 20, open_for = "60s")]
async fn window_on_b(fail: bool) -> Result<(), BackendError> {
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

#[test]
fn each_replica_shows_its_own_calls_and_the_shared_window() {
    let server = RedisServer::start();
    runtime().block_on(async {
        WINDOW_A.share(store(&server).await);
        WINDOW_B.share(store(&server).await);
        // Replica A: three failures and two successes; then replica B: two failures, one success.
        for fail in [true, true, true, false, false] {
            let _ = window_on_a(fail).await;
        }
        for fail in [true, true, false] {
            let _ = window_on_b(fail).await;
        }
        let a = WINDOW_A.get("window").unwrap().snapshot();
        let b = WINDOW_B.get("window").unwrap().snapshot();
        assert_eq!(
            (a.sharing(), b.sharing()),
            (Sharing::Shared, Sharing::Shared)
        );
        assert!(!a.degraded() && !b.degraded());
        assert_eq!(
            (a.replica_calls(), a.replica_failures()),
            (5, 3),
            "replica a's own calls"
        );
        assert_eq!(
            (b.replica_calls(), b.replica_failures()),
            (3, 2),
            "replica b's own calls"
        );
        assert_eq!(
            (a.calls, b.calls),
            (0, 0),
            "nothing ran on the local breakers"
        );
        let shared = b.shared_window().expect("b has an answer of the store");
        assert_eq!(
            (shared.calls(), shared.failures()),
            (8, 5),
            "b's last answer came after every call of both replicas"
        );
        let shared = a.shared_window().expect("a has an answer of the store");
        assert_eq!(
            (shared.calls(), shared.failures()),
            (5, 3),
            "a's last answer came before b's calls"
        );
        // The age is on the registry's clock: a's answer is three seconds old.
        CLOCK_A.advance(Duration::from_secs(3));
        let a = WINDOW_A.get("window").unwrap().snapshot();
        assert_eq!(a.shared_window().unwrap().age(), Duration::from_secs(3));
        // A's next call brings the shared window up to date, b's calls included.
        assert!(window_on_a(false).await.is_ok());
        let a = WINDOW_A.get("window").unwrap().snapshot();
        let shared = a.shared_window().unwrap();
        assert_eq!(
            (shared.calls(), shared.failures(), shared.age()),
            (9, 5, Duration::ZERO)
        );
        assert_eq!((a.replica_calls(), a.replica_failures()), (6, 3));
        assert_eq!(a.state, State::Closed);
    });
    assert_eq!(
        server.command(&["HGET", "{fusebox:window}", "n"]),
        "$1",
        "redis holds the window the snapshots show"
    );
}

static TIMED_A: LazyLock<Registry> = LazyLock::new(Registry::new);
static TIMED_B: LazyLock<Registry> = LazyLock::new(Registry::new);

#[circuit_breaker(key = "timed", registry = TIMED_A, window = "60s", min_calls = 20, open_for = "60s")]
async fn timed_on_a(fail: bool) -> Result<(), BackendError> {
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

#[circuit_breaker(key = "timed", registry = TIMED_B, window = "60s", min_calls = 20, open_for = "60s")]
async fn timed_on_b(fail: bool) -> Result<(), BackendError> {
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

#[test]
fn a_shared_time_window_shows_its_counts_too() {
    let server = RedisServer::start();
    runtime().block_on(async {
        TIMED_A.share(store(&server).await);
        TIMED_B.share(store(&server).await);
        let _ = timed_on_a(true).await;
        let _ = timed_on_a(true).await;
        assert!(timed_on_b(false).await.is_ok());
        let b = TIMED_B.get("timed").unwrap().snapshot();
        let shared = b.shared_window().expect("b has an answer of the store");
        assert_eq!((shared.calls(), shared.failures()), (3, 2));
        assert_eq!((b.replica_calls(), b.replica_failures()), (1, 0));
    });
}

static SHARING: LazyLock<Registry> = LazyLock::new(Registry::new);
static UNSHARED: LazyLock<Registry> = LazyLock::new(Registry::new);

#[test]
fn a_key_that_cannot_be_shared_says_so() {
    let server = RedisServer::start();
    runtime().block_on(async {
        SHARING.share(store(&server).await);
        // A time window whose tenth (1000.1 ms) is not a whole number of milliseconds.
        let timed = Policy::new().time_window(Duration::from_millis(10_001));
        let unshareable = SHARING.breaker("timed", timed).unwrap().snapshot();
        assert_eq!(unshareable.sharing(), Sharing::Unshareable);
        assert_eq!(unshareable.shared_window(), None);
        let kept = SHARING
            .breaker("kept", Policy::new().shared(false))
            .unwrap()
            .snapshot();
        assert_eq!(kept.sharing(), Sharing::Local, "kept local on purpose");
        let shared = SHARING.breaker("shared", Policy::new()).unwrap().snapshot();
        assert_eq!(shared.sharing(), Sharing::Shared);
        assert_eq!(shared.shared_window(), None, "no answer of the store yet");
        let local = UNSHARED.breaker("timed", timed).unwrap().snapshot();
        assert_eq!(
            local.sharing(),
            Sharing::Local,
            "a registry without a store"
        );
    });
}

static STOPPED: LazyLock<Registry> = LazyLock::new(Registry::new);

#[circuit_breaker(key = "stopped", registry = STOPPED, window = 20, min_calls = 20, open_for = "60s")]
async fn stopped() -> Result<(), BackendError> {
    Ok(())
}

#[test]
fn a_replica_whose_store_does_not_answer_says_it_is_degraded() {
    let server = RedisServer::start();
    runtime().block_on(async {
        let store = RedisStore::builder(&server.url())
            .timeout(Duration::from_secs(1))
            .connect()
            .await
            .unwrap();
        STOPPED.share(store);
        assert!(stopped().await.is_ok());
        let breaker = STOPPED.get("stopped").unwrap();
        assert!(!breaker.snapshot().degraded());
        server.signal("-STOP");
        // The admission times out: the call is admitted per `Degrade::Local`.
        assert!(stopped().await.is_ok());
        let snapshot = breaker.snapshot();
        assert!(snapshot.degraded(), "{snapshot:?}");
        assert_eq!(snapshot.sharing(), Sharing::Shared);
        // The degraded call is this replica's: admitted from its view of the key (sent to the
        // store until it answers, and recorded locally when its report goes unanswered), or run
        // on the local breaker.
        assert!(
            snapshot.replica_calls() + u64::from(snapshot.calls) >= 2,
            "{snapshot:?}"
        );
        server.signal("-CONT");
        // Bounded: the connection may need a moment to come back.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while breaker.snapshot().degraded() {
            assert!(std::time::Instant::now() < deadline, "never answered again");
            let _ = stopped().await;
        }
        let replica_calls = breaker.snapshot().replica_calls();
        assert!(
            replica_calls >= 2,
            "the calls before and after the stop: {replica_calls}"
        );
    });
}

static METERED_A: LazyLock<Registry> = LazyLock::new(Registry::new);
static METERED_B: LazyLock<Registry> = LazyLock::new(Registry::new);

#[circuit_breaker(key = "metered", registry = METERED_A, window = 20, min_calls = 20, open_for = "60s")]
async fn metered_on_a(fail: bool) -> Result<(), BackendError> {
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

#[circuit_breaker(key = "metered", registry = METERED_B, window = 20, min_calls = 20, open_for = "60s")]
async fn metered_on_b(fail: bool) -> Result<(), BackendError> {
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

/// The value of the series `name{labels}` in a Prometheus rendering (`None` when absent).
fn series(handle: &PrometheusHandle, name: &str, labels: &str) -> Option<f64> {
    let text = handle.render();
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| labels.split(',').all(|label| l.contains(label)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn calls(handle: &PrometheusHandle, outcome: &str) -> Option<f64> {
    series(
        handle,
        "fusebox_calls_total",
        &format!("key=\"metered\",outcome=\"{outcome}\""),
    )
}

fn state_gauge(handle: &PrometheusHandle) -> Option<f64> {
    series(handle, "fusebox_state", "key=\"metered\"")
}

/// Each replica has a recorder of its own (as each process would): a replica's breaker is created,
/// and its calls run, inside its recorder's scope.
#[test]
fn metrics_count_shared_calls_and_the_gauge_follows_the_mirrored_state() {
    let server = RedisServer::start();
    let (recorder_a, recorder_b) = (
        PrometheusBuilder::new().build_recorder(),
        PrometheusBuilder::new().build_recorder(),
    );
    let (a, b) = (recorder_a.handle(), recorder_b.handle());
    let rt = runtime();
    let (store_a, store_b) = rt.block_on(async {
        let (store_a, store_b) = (store(&server).await, store(&server).await);
        METERED_A.share(store_a.clone());
        METERED_B.share(store_b.clone());
        (store_a, store_b)
    });
    metrics::with_local_recorder(&recorder_a, || {
        rt.block_on(async {
            for fail in [true, true, true, false, false] {
                let _ = metered_on_a(fail).await;
            }
        })
    });
    metrics::with_local_recorder(&recorder_b, || {
        rt.block_on(async {
            for fail in [true, true, false] {
                let _ = metered_on_b(fail).await;
            }
        })
    });
    assert_eq!(
        (calls(&a, "success"), calls(&a, "failure")),
        (Some(2.0), Some(3.0)),
        "{}",
        a.render()
    );
    assert_eq!(
        (calls(&b, "success"), calls(&b, "failure")),
        (Some(1.0), Some(2.0)),
        "{}",
        b.render()
    );

    // Replica A forces the key open in Redis; replica B's next call is rejected, and its
    // local breaker, its snapshot and its gauge follow.
    let policy = METERED_A.get("metered").unwrap().policy();
    metrics::with_local_recorder(&recorder_a, || {
        rt.block_on(store_a.force("metered", policy, State::ForcedOpen))
    })
    .unwrap();
    assert_eq!(state_gauge(&a), Some(3.0), "{}", a.render());
    let rejected = metrics::with_local_recorder(&recorder_b, || rt.block_on(metered_on_b(false)));
    assert_eq!(reason(rejected), Some(Reason::ForcedOpen));
    let on_b = METERED_B.get("metered").unwrap();
    assert_eq!(on_b.state(), State::ForcedOpen);
    assert_eq!(on_b.snapshot().state, State::ForcedOpen);
    assert_eq!(state_gauge(&b), Some(3.0), "{}", b.render());
    assert_eq!(calls(&b, "rejected"), Some(1.0), "{}", b.render());
    // B reads why the key moved (another replica forced it) off the call path: that read is
    // answered before the reset below, so B's next call, in its recorder's scope, is the one
    // that follows the reset.
    rt.block_on(store_b.flush());

    // A reset through A closes B on its next call, and B's gauge reads closed again.
    metrics::with_local_recorder(&recorder_a, || {
        rt.block_on(store_a.force("metered", policy, State::Closed))
    })
    .unwrap();
    metrics::with_local_recorder(&recorder_b, || {
        rt.block_on(async { assert!(metered_on_b(false).await.is_ok()) })
    });
    assert_eq!(on_b.state(), State::Closed);
    assert_eq!(state_gauge(&b), Some(0.0), "{}", b.render());
    assert_eq!(calls(&b, "success"), Some(2.0), "{}", b.render());
}
