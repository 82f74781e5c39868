//! `open_jitter` on a shared key: each replica spreads the shared open wait it learns by its
//! own draw, so keys (and replicas) opened at the same instant ask for their probes at different
//! instants, never before the shared deadline; the probe count stays the script's.

use std::sync::LazyLock;
use std::time::Duration;

use crate::harness::RedisServer;
use fusebox::clock::FakeClock;
use fusebox::{Policy, Reason, Registry, State};
use fusebox_redis::RedisStore;

static CLOCK: LazyLock<FakeClock> = LazyLock::new(FakeClock::new);
static REPLICA: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(CLOCK.clone()));

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_keys_opened_at_one_instant_ask_for_probes_over_the_jitter_span() {
    let server = RedisServer::start();
    CLOCK.advance(Duration::from_secs(1_000));
    let store = RedisStore::builder(&server.url()).time_from(CLOCK.clone());
    REPLICA.share(store.connect().await.unwrap());
    let policy = Policy::new()
        .window(1)
        .min_calls(1)
        .open_for(Duration::from_secs(10))
        .open_jitter(50);
    let breakers: Vec<_> = (0..20)
        .map(|i| {
            REPLICA
                .breaker(&format!("shared-jitter-{i}"), policy)
                .unwrap()
        })
        .collect();
    for breaker in &breakers {
        let failed = breaker
            .call_async(async { Err::<(), ()>(()) }, |_| true)
            .await;
        assert_eq!(failed.expect("closed"), Err(()));
    }
    let (wait, span) = (Duration::from_secs(10), Duration::from_secs(5));
    let mut waits = Vec::new();
    for breaker in &breakers {
        // The first rejection learns the shared opening; this replica rejects locally from then
        // on, until its own deadline.
        let waited = loop {
            match breaker.try_acquire() {
                Err(rejected) if rejected.reason() == Reason::Open => {
                    break rejected.retry_after().expect("open: a wait");
                }
                Err(other) => panic!("{other}"),
                Ok(unused) => {
                    drop(unused);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        };
        waits.push(waited);
    }
    assert!(
        waits
            .iter()
            .all(|w| (wait - Duration::from_millis(50)..=wait + span).contains(w)),
        "{waits:?}"
    );
    let (low, high) = (*waits.iter().min().unwrap(), *waits.iter().max().unwrap());
    assert!(
        high - low >= Duration::from_secs(2),
        "spread {low:?}..{high:?}"
    );
    // Past the shared deadline and every replica's own: each key admits its one probe.
    CLOCK.advance(wait + span);
    for breaker in &breakers {
        let probed = breaker
            .call_async(async { Ok::<(), ()>(()) }, |_| true)
            .await;
        assert_eq!(probed.expect("the probe"), Ok(()));
    }
    // The probes' reports close the shared circuits; the next admission learns it.
    for breaker in &breakers {
        let mut tries = 0;
        while breaker.state() != State::Closed {
            tries += 1;
            assert!(tries < 400, "`{}` never closed", breaker.key());
            drop(breaker.try_acquire());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
