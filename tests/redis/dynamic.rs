//! A dynamic key (`key = expr`) on a shared registry: an `async fn`'s admission asks the store, so
//! a circuit one replica opened under a per-host key rejects the same host on another replica.

use std::sync::LazyLock;

use crate::harness::{BackendError, RedisServer};
use fusebox::{Reason, Registry, State, circuit_breaker};
use fusebox_redis::RedisStore;

static A: LazyLock<Registry> = LazyLock::new(Registry::new);
static B: LazyLock<Registry> = LazyLock::new(Registry::new);

#[circuit_breaker(key = host, registry = A, window = 5, min_calls = 5, open_for = "60s")]
async fn fetch_a(host: &str, down: bool) -> Result<(), BackendError> {
    tokio::task::yield_now().await;
    if down {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

#[circuit_breaker(key = host, registry = B, window = 5, min_calls = 5, open_for = "60s")]
async fn fetch_b(host: &str) -> Result<(), BackendError> {
    tokio::task::yield_now().await;
    Ok(())
}

fn rejected(result: Result<(), BackendError>) -> Option<Reason> {
    match result {
        Err(BackendError::Rejected(e)) => Some(e.reason()),
        _ => None,
    }
}

#[tokio::test]
async fn a_dynamic_key_opened_on_one_replica_rejects_on_the_other() {
    let server = RedisServer::start();
    assert!(A.share(RedisStore::connect(&server.url()).await.unwrap()));
    assert!(B.share(RedisStore::connect(&server.url()).await.unwrap()));

    // Twice the same host in a row: the second and later calls may be served by the call
    // site's cache, which must ask the store just the same.
    for _ in 0..5 {
        assert_eq!(rejected(fetch_a("db-1.internal", true).await), None);
    }
    assert_eq!(
        rejected(fetch_a("db-1.internal", true).await),
        Some(Reason::Open)
    );
    assert_eq!(A.get("db-1.internal").unwrap().state(), State::Open);
    assert_eq!(server.command(&["EXISTS", "{fusebox:db-1.internal}"]), ":1");

    // Replica B's first call with that host is rejected by the shared circuit; another host
    // is not.
    assert_eq!(rejected(fetch_b("db-1.internal").await), Some(Reason::Open));
    assert_eq!(rejected(fetch_b("db-2.internal").await), None);
    assert_eq!(rejected(fetch_a("db-2.internal", false).await), None);
}
