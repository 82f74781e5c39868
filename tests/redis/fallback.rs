//! The fallback of an `async fn` on a shared key: awaited after the call settled and its outcome
//! was recorded in the store, so a failure handed to the fallback on one replica is already the
//! shared circuit's when the fallback runs, and another replica's rejection reaches its fallback.

use std::sync::LazyLock;
use std::sync::Mutex;

use crate::harness::{BackendError, RedisServer};
use fusebox::{Cause, Registry, State, circuit_breaker};
use fusebox_redis::RedisStore;

static A: LazyLock<Registry> = LazyLock::new(Registry::new);
static B: LazyLock<Registry> = LazyLock::new(Registry::new);

/// What each fallback saw: the cause, and the shared state of the circuit when it ran.
static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());

async fn on_a(attempt: u32, cause: Cause<BackendError>) -> Result<u32, BackendError> {
    note("a", attempt, &cause, &A);
    Ok(0)
}

async fn on_b(attempt: u32, cause: Cause<BackendError>) -> Result<u32, BackendError> {
    note("b", attempt, &cause, &B);
    Ok(0)
}

fn note(replica: &str, attempt: u32, cause: &Cause<BackendError>, registry: &Registry) {
    let why = match cause {
        Cause::Failed(_) => "failed",
        Cause::Rejected(_) => "rejected",
        Cause::TimedOut(_) => "timed out",
    };
    let state = registry.get("shared-fallback").map(|b| b.state());
    SEEN.lock()
        .unwrap()
        .push(format!("{replica}{attempt}:{why}:{state:?}"));
}

#[circuit_breaker(key = "shared-fallback", registry = A, window = 2, min_calls = 2, open_for = "60s", fallback = on_a)]
async fn call_a(attempt: u32) -> Result<u32, BackendError> {
    let _ = attempt;
    Err(BackendError::Down)
}

#[circuit_breaker(key = "shared-fallback", registry = B, window = 2, min_calls = 2, open_for = "60s", fallback = on_b)]
async fn call_b(attempt: u32) -> Result<u32, BackendError> {
    Ok(attempt)
}

#[tokio::test]
async fn a_shared_failure_is_recorded_before_the_fallback_runs_and_a_shared_rejection_reaches_it() {
    let server = RedisServer::start();
    assert!(A.share(RedisStore::connect(&server.url()).await.unwrap()));
    assert!(B.share(RedisStore::connect(&server.url()).await.unwrap()));
    assert_eq!(call_b(7).await.unwrap(), 7);
    // B's success and A's failure trip the shared circuit (one failure in two calls): the
    // failure is recorded, and the circuit open, before `on_a` runs.
    assert_eq!(call_a(1).await.unwrap(), 0);
    // Both replicas are rejected by the shared circuit, and their fallbacks get the rejection.
    assert_eq!(call_a(2).await.unwrap(), 0);
    assert_eq!(call_b(3).await.unwrap(), 0);
    assert_eq!(B.get("shared-fallback").unwrap().state(), State::Open);
    assert_eq!(
        *SEEN.lock().unwrap(),
        [
            "a1:failed:Some(Open)",
            "a2:rejected:Some(Open)",
            "b3:rejected:Some(Open)"
        ]
    );
}
