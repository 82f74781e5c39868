//! `shared = false` (attribute, config, `Policy::shared`) keeps a key local on a shared registry.

use std::sync::LazyLock;

use crate::harness::{BackendError, RedisServer};
use fusebox::{Reason, Registry, State, circuit_breaker};
use fusebox_redis::RedisStore;

static A: LazyLock<Registry> = LazyLock::new(Registry::new);
static B: LazyLock<Registry> = LazyLock::new(Registry::new);

#[circuit_breaker(key = "per-host", registry = A, window = 5, min_calls = 5, open_for = "60s", shared = false)]
async fn host_a() -> Result<(), BackendError> {
    Err(BackendError::Down)
}

#[circuit_breaker(key = "per-host", registry = B, window = 5, min_calls = 5, open_for = "60s", shared = false)]
async fn host_b() -> Result<(), BackendError> {
    Ok(())
}

#[circuit_breaker(key = "configured", registry = A, window = 5, min_calls = 5, open_for = "60s")]
async fn configured_a() -> Result<(), BackendError> {
    Err(BackendError::Down)
}

#[circuit_breaker(key = "configured", registry = B, window = 5, min_calls = 5, open_for = "60s")]
async fn configured_b() -> Result<(), BackendError> {
    Ok(())
}

fn rejected(result: Result<(), BackendError>) -> Option<Reason> {
    match result {
        Err(BackendError::Rejected(e)) => Some(e.reason()),
        _ => None,
    }
}

#[tokio::test]
async fn shared_false_keeps_the_key_local() {
    let server = RedisServer::start();
    assert!(A.share(RedisStore::connect(&server.url()).await.unwrap()));
    assert!(B.share(RedisStore::connect(&server.url()).await.unwrap()));

    // The attribute: replica A trips on its own; replica B never hears of it, and Redis holds
    // no key for it.
    for _ in 0..5 {
        assert_eq!(rejected(host_a().await), None);
    }
    assert_eq!(rejected(host_a().await), Some(Reason::Open));
    assert_eq!(A.get("per-host").unwrap().state(), State::Open);
    assert_eq!(rejected(host_b().await), None);
    assert_eq!(B.get("per-host").unwrap().state(), State::Closed);
    assert_eq!(server.command(&["EXISTS", "{fusebox:per-host}"]), ":0");

    // Config: a shared key turned local by `shared = false` in a config table, on both replicas.
    assert_eq!(rejected(configured_a().await), None);
    assert_eq!(server.command(&["EXISTS", "{fusebox:configured}"]), ":1");
    let toml = "[breakers.configured]\nshared = false\n";
    A.load_toml(toml).unwrap();
    B.load_toml(toml).unwrap();
    assert!(!A.get("configured").unwrap().policy().settings().shared);
    assert_eq!(server.command(&["DEL", "{fusebox:configured}"]), ":1");
    for _ in 0..5 {
        let _ = configured_a().await;
    }
    assert_eq!(rejected(configured_a().await), Some(Reason::Open));
    assert_eq!(rejected(configured_b().await), None);
    assert_eq!(server.command(&["EXISTS", "{fusebox:configured}"]), ":0");

    // An operator's force of a local key writes nothing to Redis.
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let policy = A.get("per-host").unwrap().policy();
    store
        .force("per-host", policy, State::ForcedOpen)
        .await
        .unwrap();
    assert_eq!(server.command(&["EXISTS", "{fusebox:per-host}"]), ":0");
}

#[test]
fn shared_in_config_takes_a_boolean() {
    let registry = Registry::new();
    let error = registry
        .load_toml("[breakers.k]\nshared = 1\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("`true` or `false`"), "{error}");
}
