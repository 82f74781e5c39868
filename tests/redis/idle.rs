//! An idle replica's snapshots follow the shared state: a snapshot of a shared key whose store
//! answer is older than `fusebox::store::REFRESH_AFTER` asks the store, off the call path.

use std::time::{Duration, Instant};

use crate::harness::RedisServer;
use fusebox::{LastTransition, Policy, Registry, State, Trigger};
use fusebox_redis::{Mode, RedisStore};

/// Replica A trips the shared key and later an operator resets it; replica B makes no call at
/// all, and its snapshots follow both, in strict and in cached mode, within one round trip of a
/// snapshot, naming the rule, the counts, the instant and the replica of each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_replica_s_snapshots_follow_the_shared_state() {
    let server = RedisServer::start();
    for mode in [Mode::Strict, Mode::Cached] {
        let (a, b) = (Registry::new(), Registry::new());
        let mut names = Vec::new();
        for registry in [&a, &b] {
            let store = RedisStore::builder(&server.url())
                .mode(mode)
                .prefix(format!("{mode:?}"));
            let store = store.connect().await.unwrap();
            names.push(store.replica());
            assert!(registry.share(store));
        }
        let policy = Policy::new()
            .consecutive(3)
            .open_for(Duration::from_secs(60));
        let (on_a, on_b) = (
            a.breaker("idle", policy).unwrap(),
            b.breaker("idle", policy).unwrap(),
        );
        assert_eq!(on_b.snapshot().state, State::Closed);
        let tripped = Instant::now();
        for _ in 0..3 {
            on_a.try_acquire().unwrap().failure();
        }
        assert_eq!(
            followed(&b, State::Open).await,
            State::Open,
            "{mode:?}: B follows the trip"
        );
        // Why it opened travels with the shared state: B names A's rule, counts and replica.
        let last = explained(&b, State::Open).await;
        assert_eq!(
            (last.from, last.trigger, last.calls, last.failures),
            (State::Closed, Trigger::Consecutive, 3, 3),
            "{mode:?}"
        );
        assert_eq!(last.replica.as_deref(), Some(names[0].as_str()), "{mode:?}");
        assert_eq!(last.function, fusebox::store::ANOTHER_REPLICA, "{mode:?}");
        assert!(
            last.elapsed <= tripped.elapsed() + Duration::from_millis(50),
            "{mode:?}: the instant is the trip's ({:?})",
            last.elapsed
        );
        let on_a_last = a.get("idle").unwrap().snapshot().last_transition.unwrap();
        assert_eq!(on_a_last.replica.as_deref(), Some(names[0].as_str()));
        let store = RedisStore::builder(&server.url()).prefix(format!("{mode:?}"));
        let store = store.connect().await.unwrap();
        store.force("idle", policy, State::Closed).await.unwrap();
        assert_eq!(
            followed(&b, State::Closed).await,
            State::Closed,
            "{mode:?}: B follows the reset"
        );
        let last = explained(&b, State::Closed).await;
        assert_eq!(last.trigger, Trigger::Operator, "{mode:?}");
        assert_eq!(last.replica, Some(store.replica()), "{mode:?}");
    }
}

/// B's last transition once it names the move to `to` another replica committed, or after 5 s:
/// with the state it follows (strict mode's read), or one read later (cached mode's message).
async fn explained(b: &Registry, to: State) -> LastTransition {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let last = b.get("idle").unwrap().snapshot().last_transition;
        match last {
            Some(last) if last.to == to || Instant::now() > deadline => return last,
            None if Instant::now() > deadline => panic!("B's snapshot never said why it moved"),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
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
