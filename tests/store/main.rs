//! The store seam, proven with a second store: replicas in one process sharing circuits through
//! `fusebox::store::MemoryStore`, with the attribute, the handle API, delay and loss.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fusebox::clock::FakeClock;
use fusebox::store::MemoryStore;
use fusebox::{Breaker, Policy, Reason, Registry, Sharing, State, circuit_breaker};

/// The backend's error, or the breaker's rejection.
#[derive(Debug)]
enum BackendError {
    Down,
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for BackendError {
    fn from(e: fusebox::Error) -> Self {
        BackendError::Rejected(e)
    }
}

fn reason(result: &Result<(), BackendError>) -> Option<Reason> {
    match result {
        Err(BackendError::Rejected(e)) => Some(e.reason()),
        _ => None,
    }
}

fn backend(fail: bool) -> Result<(), BackendError> {
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

static CLOCK: LazyLock<FakeClock> = LazyLock::new(FakeClock::new);
static STORE: LazyLock<MemoryStore> = LazyLock::new(|| MemoryStore::with_clock(CLOCK.clone()));
static A: LazyLock<Registry> = LazyLock::new(|| shared_replica(&STORE));
static B: LazyLock<Registry> = LazyLock::new(|| shared_replica(&STORE));

/// Two replicas (registries on one fake clock) sharing `key` with `policy` through one store.
struct Replicas {
    clock: FakeClock,
    store: MemoryStore,
    on_a: Breaker,
    on_b: Breaker,
    _registries: (Registry, Registry),
}

fn replicas(key: &str, policy: Policy) -> Replicas {
    let clock = FakeClock::new();
    let store = MemoryStore::with_clock(clock.clone());
    let (a, b) = (
        Registry::with_clock(clock.clone()),
        Registry::with_clock(clock.clone()),
    );
    assert!(a.share(store.clone()) && b.share(store.clone()));
    Replicas {
        on_a: a.breaker(key, policy).unwrap(),
        on_b: b.breaker(key, policy).unwrap(),
        clock,
        store,
        _registries: (a, b),
    }
}

fn shared_replica(store: &MemoryStore) -> Registry {
    let registry = Registry::with_clock(CLOCK.clone());
    assert!(registry.share(store.clone()));
    registry
}

#[circuit_breaker(key = "pay", registry = A, window = 4, min_calls = 4, open_for = "1s", half_open = 1)]
async fn pay_on_a(fail: bool) -> Result<(), BackendError> {
    backend(fail)
}

#[circuit_breaker(key = "pay", registry = B, window = 4, min_calls = 4, open_for = "1s", half_open = 1)]
async fn pay_on_b(fail: bool) -> Result<(), BackendError> {
    backend(fail)
}

/// Replica A's failures open the circuit for B, one half-open probe is granted across both, and
/// its success closes the circuit for both; only A, whose calls committed the transitions,
/// announces them.
#[tokio::test]
async fn attribute_calls_on_two_replicas_share_one_circuit_and_one_probe() {
    let announced = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = announced.clone();
    B.on_transition(move |_| {
        seen.fetch_add(1, Ordering::SeqCst);
    });
    for _ in 0..4 {
        assert!(matches!(pay_on_a(true).await, Err(BackendError::Down)));
    }
    assert_eq!(STORE.state("pay"), Some(State::Open));
    assert_eq!(reason(&pay_on_b(false).await), Some(Reason::Open));
    assert_eq!(B.get("pay").unwrap().state(), State::Open);
    let snapshot = B.get("pay").unwrap().snapshot();
    assert_eq!(snapshot.sharing(), Sharing::Shared);
    assert_eq!(
        snapshot.shared_window().map(|w| w.calls()),
        Some(0),
        "a new window after opening"
    );

    CLOCK.advance(Duration::from_secs(1));
    // The probe is B's; A finds the one probe taken while B's call runs.
    let probe = B.get("pay").unwrap().try_acquire_owned().unwrap();
    assert_eq!(reason(&pay_on_a(false).await), Some(Reason::HalfOpenFull));
    probe.success();
    assert_eq!(STORE.state("pay"), Some(State::Closed));
    assert!(pay_on_a(false).await.is_ok());
    assert_eq!(A.get("pay").unwrap().state(), State::Closed);
    // B committed open→half-open and half-open→closed; the opening was A's.
    assert_eq!(announced.load(Ordering::SeqCst), 2);
}

/// An outcome admitted before another replica tripped the circuit changes nothing: it belongs
/// to an older generation.
#[test]
fn an_outcome_admitted_before_the_circuit_moved_changes_nothing() {
    let policy = Policy::new()
        .consecutive(2)
        .open_for(Duration::from_secs(1));
    let Replicas {
        clock,
        store,
        on_a,
        on_b,
        ..
    } = replicas("k", policy);
    let late = on_a.try_acquire_owned().unwrap();
    on_b.try_acquire().unwrap().failure();
    on_b.try_acquire().unwrap().failure();
    assert_eq!(store.state("k"), Some(State::Open));
    clock.advance(Duration::from_secs(1));
    let probe = on_b.try_acquire_owned().unwrap();
    // A's failure was admitted while closed: it neither fails the probe nor reopens.
    late.failure();
    assert_eq!(store.state("k"), Some(State::HalfOpen));
    probe.success();
    assert_eq!(store.state("k"), Some(State::Closed));
}

/// A half-open probe whose call is cancelled (its future dropped) gives its slot back at once:
/// the next call is the probe.
#[tokio::test]
async fn a_cancelled_probe_does_not_wedge_the_shared_circuit() {
    let clock = FakeClock::new();
    let store = MemoryStore::with_clock(clock.clone());
    let replica = Registry::with_clock(clock.clone());
    replica.share(store.clone());
    let policy = Policy::new()
        .consecutive(1)
        .open_for(Duration::from_secs(1))
        .half_open(1);
    let breaker = replica.breaker("probe", policy).unwrap();
    breaker.try_acquire().unwrap().failure();
    clock.advance(Duration::from_secs(1));
    let probe = breaker.try_acquire_owned().unwrap();
    assert_eq!(
        breaker.try_acquire().err().map(|e| e.reason()),
        Some(Reason::HalfOpenFull),
        "one probe"
    );
    drop(probe);
    assert_eq!(store.state("probe"), Some(State::HalfOpen));
    let next = breaker.try_acquire_owned().expect("the slot came back");
    next.success();
    assert_eq!(store.state("probe"), Some(State::Closed));
}

static SLOW_CLOCK: LazyLock<FakeClock> = LazyLock::new(FakeClock::new);
static SLOW_STORE: LazyLock<MemoryStore> =
    LazyLock::new(|| MemoryStore::with_clock(SLOW_CLOCK.clone()));
static SLOW: LazyLock<Registry> = LazyLock::new(|| {
    let registry = Registry::with_clock(SLOW_CLOCK.clone());
    registry.share(SLOW_STORE.clone());
    registry
});

#[circuit_breaker(key = "slow", registry = SLOW, window = 10, min_calls = 10)]
async fn through_a_slow_store(fail: bool) -> Result<(), BackendError> {
    backend(fail)
}

/// With a delay, an `async fn` awaits the store's admission and the recording of its outcome:
/// when it returns, the shared window holds its outcome.
#[tokio::test(start_paused = true)]
async fn a_delayed_store_is_awaited_for_admission_and_recording() {
    SLOW_STORE.set_delay(Duration::from_millis(50));
    let started = tokio::time::Instant::now();
    assert!(matches!(
        through_a_slow_store(true).await,
        Err(BackendError::Down)
    ));
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(100),
        "admission + recording"
    );
    let shared = SLOW
        .get("slow")
        .unwrap()
        .snapshot()
        .shared_window()
        .unwrap();
    assert_eq!((shared.calls(), shared.failures()), (1, 1));
    SLOW_STORE.set_delay(Duration::ZERO);
    let started = tokio::time::Instant::now();
    assert!(through_a_slow_store(false).await.is_ok());
    assert_eq!(started.elapsed(), Duration::ZERO);
}

/// While the store loses every call, each replica decides alone on its local breaker, records
/// its outcomes there and says `degraded`; once the store answers, the shared circuit decides
/// again.
#[test]
fn a_lost_store_degrades_to_the_local_breaker_and_recovers() {
    let clock = FakeClock::new();
    let store = MemoryStore::with_clock(clock.clone());
    let replica = Registry::with_clock(clock.clone());
    replica.share(store.clone());
    let policy = Policy::new().consecutive(3);
    let breaker = replica.breaker("lost", policy).unwrap();
    breaker.try_acquire().unwrap().success();
    store.set_loss(1.0);
    breaker.try_acquire().unwrap().failure();
    breaker.try_acquire().unwrap().failure();
    let snapshot = breaker.snapshot();
    assert!(snapshot.degraded());
    assert_eq!(
        (snapshot.calls, snapshot.failures),
        (2, 2),
        "recorded locally"
    );
    assert_eq!(
        store.state("lost"),
        Some(State::Closed),
        "the store saw none of them"
    );
    store.set_loss(0.0);
    breaker.try_acquire().unwrap().failure();
    assert!(!breaker.snapshot().degraded());
    assert_eq!(
        store.state("lost"),
        Some(State::Closed),
        "one shared failure"
    );
}

/// A replica that makes no call follows the shared state in its snapshots: the snapshot asks the
/// store when its last answer is older than `REFRESH_AFTER`.
#[test]
fn an_idle_replica_s_snapshot_follows_the_shared_state() {
    let policy = Policy::new()
        .consecutive(2)
        .open_for(Duration::from_secs(60));
    let Replicas {
        clock, on_a, on_b, ..
    } = replicas("idle", policy);
    assert_eq!(on_b.snapshot().state, State::Closed);
    on_a.try_acquire().unwrap().failure();
    on_a.try_acquire().unwrap().failure();
    assert_eq!(
        on_b.snapshot().state,
        State::Closed,
        "B's last answer is recent"
    );
    clock.advance(fusebox::store::REFRESH_AFTER);
    let snapshot = on_b.snapshot();
    assert_eq!(
        snapshot.state,
        State::Open,
        "an older answer is asked again"
    );
    assert_eq!(snapshot.shared_window().map(|w| w.calls()), Some(0));
}

/// Why the shared circuit opened travels with it: an idle replica's snapshot names the rule, the
/// counts, the instant and the replica of the trip another replica committed, as the replica
/// that committed it does.
#[test]
fn an_idle_replica_s_snapshot_names_the_trip_of_another_replica() {
    let policy = Policy::new()
        .consecutive(2)
        .open_for(Duration::from_secs(60));
    let Replicas {
        clock, on_a, on_b, ..
    } = replicas("why", policy);
    assert_eq!(on_b.snapshot().last_transition, None);
    on_a.try_acquire().unwrap().failure();
    on_a.try_acquire().unwrap().failure();
    let on_a_last = on_a.snapshot().last_transition.expect("A tripped");
    let tripped_by = on_a_last.replica.clone().expect("A names itself");
    clock.advance(fusebox::store::REFRESH_AFTER);
    let last = on_b
        .snapshot()
        .last_transition
        .expect("B's snapshot says why the shared circuit opened");
    assert_eq!((last.from, last.to), (State::Closed, State::Open));
    assert_eq!(last.trigger, fusebox::Trigger::Consecutive);
    assert_eq!((last.calls, last.failures), (2, 2));
    assert_eq!(last.elapsed, fusebox::store::REFRESH_AFTER);
    assert_eq!(last.replica.as_deref(), Some(tripped_by.as_str()));
    assert_eq!(last.function, fusebox::store::ANOTHER_REPLICA);
}
