//! An idle replica's snapshots follow the shared state: a snapshot of a shared key whose store
//! answer is older than `fusebox::store::REFRESH_AFTER` asks the store, off the call path.

use std::time::{Duration, Instant};

use crate::harness::RedisServer;
use fusebox::{Policy, Registry, State};
use fusebox_redis::{Mode, RedisStore};

/// Replica A trips the shared key and later resets it; replica B makes no call at all, and its
/// snapshots follow both, in strict and in cached mode, within one round trip of a snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_replica_s_snapshots_follow_the_shared_state() {
    let server = RedisServer::start();
    for mode in [Mode::Strict, Mode::Cached] {
        let (a, b) = (Registry::new(), Registry::new());
        for registry in [&a, &b] {
            let store = RedisStore::builder(&server.url())
                .mode(mode)
                .prefix(format!("{mode:?}"));
            assert!(registry.share(store.connect().await.unwrap()));
        }
        let policy = Policy::new()
            .consecutive(3)
            .open_for(Duration::from_secs(60));
        let (on_a, on_b) = (
            a.breaker("idle", policy).unwrap(),
            b.breaker("idle", policy).unwrap(),
        );
        assert_eq!(on_b.snapshot().state, State::Closed);
        for _ in 0..3 {
            on_a.try_acquire().unwrap().failure();
        }
        assert_eq!(
            followed(&b, State::Open).await,
            State::Open,
            "{mode:?}: B follows the trip"
        );
        let store = RedisStore::builder(&server.url()).prefix(format!("{mode:?}"));
        let store = store.connect().await.unwrap();
        store.force("idle", policy, State::Closed).await.unwrap();
        assert_eq!(
            followed(&b, State::Closed).await,
            State::Closed,
            "{mode:?}: B follows the reset"
        );
    }
}

/// B's state as its snapshots show it, once they show `want` or after 5 s: each snapshot whose
/// store answer is older than `REFRESH_AFTER` asks the store again.
async fn followed(b: &Registry, want: State) -> State {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let state = b.get("idle").unwrap().snapshot().state;
        if state == want || Instant::now() > deadline {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
