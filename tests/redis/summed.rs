//! Outcomes settled faster than one round trip each reach Redis summed: the store's reporting task
//! sends what its replica settled meanwhile as one script call per key, so the script's load
//! follows the round trips, not the calls, and every outcome is still counted once.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::harness::{BackendError, RedisServer, reply_on};
use fusebox::{Policy, Registry, circuit_breaker};

static SUMMED: LazyLock<Registry> = LazyLock::new(Registry::new);
static CALLS: AtomicU32 = AtomicU32::new(0);

/// A window larger than the test's calls, so it never judges: it only counts.
const COUNTING: Policy = Policy::new()
    .window(100_000)
    .min_calls(100_000)
    .open_for(Duration::from_secs(60));

/// One call in four fails.
#[circuit_breaker(key = "summed", registry = SUMMED, policy = COUNTING)]
async fn summed() -> Result<(), BackendError> {
    let n = CALLS.fetch_add(1, Ordering::SeqCst);
    if n.is_multiple_of(4) {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

/// `calls` of `cmdstat_evalsha` in `INFO commandstats`.
fn script_calls(server: &RedisServer) -> u64 {
    reply_on(server.port, &["INFO", "commandstats"])
        .iter()
        .find_map(|line| line.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|calls| calls.parse().ok())
        .unwrap_or(0)
}

/// The shared window's `n` and `f` of `key`.
fn window(server: &RedisServer, key: &str) -> (u64, u64) {
    let field = |name: &str| {
        reply_on(server.port, &["HGET", &format!("{{fusebox:{key}}}"), name])
            .first()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("n"), field("f"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outcomes_settled_faster_than_round_trips_are_summed_and_all_counted() {
    const TASKS: u32 = 32;
    const EACH: u32 = 250;
    let server = RedisServer::start();
    let store = server.cached_store().await;
    assert!(SUMMED.share(store));
    // The view is learnt first, so every call is admitted from it without a round trip.
    let _ = summed().await;
    let before = script_calls(&server);
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            tokio::spawn(async {
                for _ in 0..EACH {
                    let _ = summed().await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let outcomes = u64::from(TASKS * EACH) + 1;
    let failures = outcomes.div_ceil(4);
    let deadline = Instant::now() + Duration::from_secs(10);
    while window(&server, "summed").0 < outcomes && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        window(&server, "summed"),
        (outcomes, failures),
        "every outcome counted once in the shared window"
    );
    let sent = script_calls(&server) - before;
    eprintln!("{outcomes} outcomes reached Redis in {sent} script calls");
    assert!(
        sent * 4 < outcomes,
        "{outcomes} outcomes reached Redis in {sent} script calls: they were not summed"
    );
}

static RESUMED: LazyLock<Registry> = LazyLock::new(Registry::new);

#[circuit_breaker(key = "resumed", registry = RESUMED, policy = COUNTING)]
async fn resumed() -> Result<(), BackendError> {
    Ok(())
}

/// Cached mode, circuit closed: while Redis is stopped (`SIGSTOP`) the calls go on from the view
/// and their outcomes wait; after `SIGCONT`, recording resumes within the store's timeout ceiling
/// (1 s) and the pause between resends (100 ms), and every outcome is counted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recording_resumes_soon_after_redis_is_continued() {
    let server = RedisServer::start();
    let store = server.cached_store().await;
    assert!(RESUMED.share(store));
    let calls = std::sync::Arc::new(AtomicU32::new(0));
    let _ = resumed().await;
    calls.fetch_add(1, Ordering::SeqCst);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let caller = {
        let (calls, stop) = (calls.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let _ = resumed().await;
                calls.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.signal("-STOP");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let during = calls.load(Ordering::SeqCst);
    server.signal("-CONT");
    let continued = Instant::now();
    // Recording has resumed once every call made before the CONT is counted.
    let mut lag = None;
    while continued.elapsed() < Duration::from_secs(10) {
        if window(&server, "resumed").0 >= u64::from(during) {
            lag = Some(continued.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop.store(true, Ordering::SeqCst);
    caller.await.unwrap();
    let lag = lag.expect("the outcomes of the calls made while Redis was stopped never reached it");
    eprintln!("recording resumed {lag:?} after SIGCONT");
    assert!(
        lag < Duration::from_millis(2500),
        "recording resumed {lag:?} after SIGCONT; the store's timeout ceiling and the resend pause bound it at about 1.1 s"
    );
    let total = u64::from(calls.load(Ordering::SeqCst));
    let deadline = Instant::now() + Duration::from_secs(10);
    while window(&server, "resumed").0 < total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        window(&server, "resumed").0,
        total,
        "every outcome counted once"
    );
}

static FOLDED: LazyLock<Registry> = LazyLock::new(Registry::new);

/// Transitions of [`FOLDED`]: key, trigger, calls that decided them and their failure rate (%).
static FOLDED_SEEN: std::sync::Mutex<Vec<(String, fusebox::Trigger, u32, u32)>> =
    std::sync::Mutex::new(Vec::new());

/// Half the last ten calls fail: open.
#[circuit_breaker(key = "fold-rate", registry = FOLDED, window = 10, min_calls = 10, failure_rate = 50, open_for = "60s")]
async fn fold_rate(fail: bool) -> Result<(), BackendError> {
    outcome(fail)
}

/// Three failures in a row: open (the rate rule needs 100 calls).
#[circuit_breaker(key = "fold-run", registry = FOLDED, window = 100, min_calls = 100, consecutive = 3, open_for = "60s")]
async fn fold_run(fail: bool) -> Result<(), BackendError> {
    outcome(fail)
}

/// A window of four calls that opens only when all four fail.
#[circuit_breaker(key = "fold-short", registry = FOLDED, window = 4, min_calls = 4, failure_rate = 100, open_for = "60s")]
async fn fold_short(fail: bool) -> Result<(), BackendError> {
    outcome(fail)
}

/// A time window: half of five calls in ten seconds.
#[circuit_breaker(key = "fold-time", registry = FOLDED, window = "10s", min_calls = 5, failure_rate = 50, open_for = "60s")]
async fn fold_time(fail: bool) -> Result<(), BackendError> {
    outcome(fail)
}

/// A window that only counts, for the script calls of a burst.
#[circuit_breaker(key = "fold-burst", registry = FOLDED, policy = COUNTING)]
async fn fold_burst(fail: bool) -> Result<(), BackendError> {
    outcome(fail)
}

fn outcome(fail: bool) -> Result<(), BackendError> {
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

/// Shared state of `key` as Redis holds it.
async fn shared_state(store: &fusebox_redis::RedisStore, key: &str) -> fusebox::State {
    let policy = FOLDED.get(key).unwrap().policy();
    store.state(key, policy).await.unwrap().state
}

fn folded_seen(key: &str) -> Vec<(fusebox::Trigger, u32, u32)> {
    FOLDED_SEEN
        .lock()
        .unwrap()
        .iter()
        .filter(|seen| seen.0 == key)
        .map(|seen| (seen.1, seen.2, seen.3))
        .collect()
}

/// Aggregated mode with a flush interval of a minute: outcomes reach Redis only on
/// `RedisStore::flush`, so each fold is exactly the calls made between two flushes. Each fold is
/// judged whole: its counts, the runs of failures across folds, a fold longer than a count
/// window, a time window; and a burst of calls is one script call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregated_mode_folds_outcomes_and_judges_each_fold_whole() {
    use fusebox::{State, Trigger};
    let server = RedisServer::start();
    let store = fusebox_redis::RedisStore::builder(&server.url())
        .mode(fusebox_redis::Mode::Aggregated)
        .flush_interval(Duration::from_secs(60))
        .connect()
        .await
        .unwrap();
    assert!(FOLDED.share(store.clone()));
    FOLDED.on_transition(|t| {
        let seen = (
            t.key.to_owned(),
            t.trigger,
            t.calls,
            t.failure_rate.round() as u32,
        );
        FOLDED_SEEN.lock().unwrap().push(seen);
    });

    // The rate rule, on the ten calls of one fold: nothing reaches Redis until the flush.
    for fail in [
        true, false, true, false, true, false, true, true, false, true,
    ] {
        assert!(!matches!(
            fold_rate(fail).await,
            Err(BackendError::Rejected(_))
        ));
    }
    assert_eq!(
        window(&server, "fold-rate"),
        (0, 0),
        "nothing sent before the flush"
    );
    store.flush().await;
    assert_eq!(shared_state(&store, "fold-rate").await, State::Open);
    assert_eq!(folded_seen("fold-rate"), [(Trigger::FailureRate, 10, 60)]);
    assert!(
        matches!(fold_rate(false).await, Err(BackendError::Rejected(_))),
        "the replica follows the open circuit"
    );

    // Runs of failures: two at the end of one fold and one at the start of the next make three.
    for fail in [false, true, true] {
        let _ = fold_run(fail).await;
    }
    store.flush().await;
    assert_eq!(shared_state(&store, "fold-run").await, State::Closed);
    for fail in [true, false] {
        let _ = fold_run(fail).await;
    }
    store.flush().await;
    assert_eq!(shared_state(&store, "fold-run").await, State::Open);
    assert_eq!(folded_seen("fold-run")[0].0, Trigger::Consecutive);

    // Ten calls, half failing, in a window of four: the window holds four, half failing.
    for i in 0..10 {
        let _ = fold_short(i % 2 == 0).await;
    }
    store.flush().await;
    assert_eq!(window(&server, "fold-short"), (4, 2));

    // A time window takes the whole fold into its current bucket.
    for fail in [true, false, true, false, true, false] {
        let _ = fold_time(fail).await;
    }
    store.flush().await;
    assert_eq!(shared_state(&store, "fold-time").await, State::Open);
    assert_eq!(folded_seen("fold-time"), [(Trigger::FailureRate, 6, 50)]);

    // A burst of calls from many tasks: one script call carries it all.
    let _ = fold_burst(false).await;
    store.flush().await;
    let before = script_calls(&server);
    let tasks: Vec<_> = (0..16)
        .map(|t| {
            tokio::spawn(async move {
                for i in 0..250u32 {
                    let _ = fold_burst((t + i) % 4 == 0).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    store.flush().await;
    let sent = script_calls(&server) - before;
    assert_eq!(window(&server, "fold-burst"), (4_001, 1_000));
    assert_eq!(sent, 1, "4,000 outcomes in {sent} script calls");
    assert_eq!(store.dropped_reports(), 0);
}

static ORDERED: LazyLock<Registry> = LazyLock::new(Registry::new);

/// Two failures in a row open; the rate rule never judges (it needs 100 calls).
#[circuit_breaker(key = "ordered", registry = ORDERED, window = 100, min_calls = 100, consecutive = 2, open_for = "60s")]
async fn ordered(fail: bool) -> Result<(), BackendError> {
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

/// Cached mode sums a closed view's successes on the replica, and a failure sends the sum ahead
/// of itself: the script sees the outcomes in their order. On a current-thread runtime nothing is
/// sent while the calls run (none of them waits), so summed successes that jumped ahead of the
/// failures would make three failures in a row and open the circuit.
#[tokio::test]
async fn summed_successes_reach_the_script_in_their_order_among_failures() {
    let server = RedisServer::start();
    let store = server.cached_store().await;
    assert!(ORDERED.share(store.clone()));
    let _ = ordered(false).await;
    for _ in 0..3 {
        for fail in [false, false, true] {
            let _ = ordered(fail).await;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while window(&server, "ordered").0 < 10 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        window(&server, "ordered"),
        (10, 3),
        "every outcome counted once"
    );
    let policy = ORDERED.get("ordered").unwrap().policy();
    assert_eq!(
        store.state("ordered", policy).await.unwrap().state,
        fusebox::State::Closed,
        "no two failures in a row reached the script"
    );
}
