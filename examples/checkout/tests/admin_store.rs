//! `fusebox-admin` with a store (feature `redis`, a `redis-server` of its own): a control on a
//! local key (`shared = false`) moves this process's breaker only, and writes nothing to Redis;
//! on a shared key it moves the shared circuit.

use std::net::SocketAddr;
use std::sync::LazyLock;

use fusebox::Registry;
use fusebox::clock::FakeClock;
use fusebox_admin::{self as admin, AdminConfig};

use crate::redis_harness::RedisServer;

static SHARING: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(FakeClock::new()));

#[tokio::test]
async fn a_control_on_a_local_key_never_touches_the_store() {
    let redis = RedisServer::start();
    let store = fusebox_redis::RedisStore::connect(&redis.url())
        .await
        .unwrap();
    SHARING.share(store.clone());
    SHARING
        .breaker("admin-local", fusebox::Policy::new().shared(false))
        .unwrap();
    SHARING
        .breaker("admin-shared", fusebox::Policy::new())
        .unwrap();
    let config = AdminConfig::new().allow_loopback().store(store);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app: axum::Router = admin::router(&SHARING, config);
    let app = app.into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let http = reqwest::Client::new();
    for (key, action) in [
        ("admin-local", "force_open"),
        ("admin-local", "reset"),
        ("admin-shared", "force_open"),
    ] {
        let answer = http
            .post(format!("http://{addr}/breakers/{key}/{action}"))
            .header(fusebox_admin::CSRF_HEADER, "1")
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{key} {action}");
    }
    assert_eq!(
        SHARING.get("admin-local").unwrap().state(),
        fusebox::State::Closed
    );
    // `*n`: the number of keys matching.
    let local = redis.command(&["KEYS", "*admin-local*"]);
    assert_eq!(local, "*0", "a local key in Redis");
    let shared = redis.command(&["KEYS", "*admin-shared*"]);
    assert_eq!(shared, "*1", "the shared key moved in Redis");
}
