//! Same behaviour as in memory: random sequences of calls and clock steps, run one at a time
//! against an in-memory breaker and a Redis-backed one on the same policy and the same fake time,
//! reach the same admissions, states and window counts at every step, through the same
//! transitions with the same triggers.
//!
//! The script normally reads Redis `TIME`; here the store is built with
//! `RedisStoreBuilder::time_from`, so both breakers read the same `FakeClock`.

use std::sync::LazyLock;
use std::time::Duration;

use crate::harness::{BackendError, RedisServer};
use fusebox::clock::FakeClock;
use fusebox::{Registry, State, Trigger, circuit_breaker};
use fusebox_redis::{Mode, RedisStore};

static CLOCK: LazyLock<FakeClock> = LazyLock::new(FakeClock::new);
static MEMORY: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(CLOCK.clone()));
static SHARED: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(CLOCK.clone()));
static AGGREGATED: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(CLOCK.clone()));

/// Every transition of each registry: key, from, to, trigger.
type Transitions = std::sync::Mutex<Vec<(String, State, State, Trigger)>>;
static MEMORY_SEEN: Transitions = std::sync::Mutex::new(Vec::new());
static SHARED_SEEN: Transitions = std::sync::Mutex::new(Vec::new());
static AGGREGATED_SEEN: Transitions = std::sync::Mutex::new(Vec::new());

fn transitions(seen: &Transitions, key: &str) -> Vec<(State, State, Trigger)> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|(k, ..)| k == key)
        .map(|(_, from, to, trigger)| (*from, *to, *trigger))
        .collect()
}

/// The same policy on three registries: in memory, shared in strict mode, shared in aggregated
/// mode (its own key prefix).
macro_rules! three {
    ($memory:ident, $redis:ident, $aggregated:ident, $($policy:tt)*) => {
        #[circuit_breaker(registry = MEMORY, $($policy)*)]
        async fn $memory(fail: bool) -> Result<(), BackendError> {
            outcome(fail)
        }

        #[circuit_breaker(registry = SHARED, $($policy)*)]
        async fn $redis(fail: bool) -> Result<(), BackendError> {
            outcome(fail)
        }

        #[circuit_breaker(registry = AGGREGATED, $($policy)*)]
        async fn $aggregated(fail: bool) -> Result<(), BackendError> {
            outcome(fail)
        }
    };
}

fn outcome(fail: bool) -> Result<(), BackendError> {
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

three!(
    in_memory,
    in_redis,
    in_aggregated,
    key = "model",
    window = 4,
    min_calls = 2,
    failure_rate = 50,
    open_for = "100ms",
    half_open = 2
);
// The second policy: `consecutive` (the rate rule needs 10 failures in 10), and a backoff of the
// open wait.
three!(
    run_in_memory,
    run_in_redis,
    run_in_aggregated,
    key = "model-run",
    window = 10,
    min_calls = 10,
    failure_rate = 100,
    consecutive = 3,
    open_for = "100ms",
    open_backoff = 2.0,
    open_max = "400ms"
);
// The third policy: a time window of one second (ten slices of 100 ms).
three!(
    time_in_memory,
    time_in_redis,
    time_in_aggregated,
    key = "model-time",
    window = "1s",
    min_calls = 3,
    failure_rate = 50,
    open_for = "100ms"
);
// The fourth policy: progressive recovery in three phases of two calls each.
three!(
    phases_in_memory,
    phases_in_redis,
    phases_in_aggregated,
    key = "model-phases",
    window = 4,
    min_calls = 2,
    failure_rate = 50,
    open_for = "100ms",
    recovery = progressive(phases = 3, min_passes = 2)
);
// The fifth and sixth policies: `failure_count` (three failures in the window, the rate rule
// replaced), on a count window and on a time window.
three!(
    count_in_memory,
    count_in_redis,
    count_in_aggregated,
    key = "model-count",
    window = 6,
    min_calls = 6,
    failure_count = 3,
    open_for = "100ms"
);
three!(
    count_time_in_memory,
    count_time_in_redis,
    count_time_in_aggregated,
    key = "model-count-time",
    window = "1s",
    failure_count = 3,
    open_for = "100ms"
);

fn admitted(result: &Result<(), BackendError>) -> bool {
    !matches!(result, Err(BackendError::Rejected(_)))
}

#[tokio::test]
async fn random_sequences_reach_the_same_states_and_counts() {
    let server = RedisServer::start();
    // A generous bound: this test compares behaviour, not the timeout, on a loaded machine.
    let store = RedisStore::builder(&server.url())
        .timeout(Duration::from_secs(2))
        .time_from(CLOCK.clone())
        .connect()
        .await
        .unwrap();
    SHARED.share(store.clone());
    // Aggregated mode, flushed after every call: each fold carries one outcome, so every rule is
    // judged after every call, as in memory.
    let aggregated = RedisStore::builder(&server.url())
        .timeout(Duration::from_secs(2))
        .time_from(CLOCK.clone())
        .mode(Mode::Aggregated)
        .prefix("aggregated")
        .connect()
        .await
        .unwrap();
    AGGREGATED.share(aggregated.clone());
    AGGREGATED.on_transition(|t| {
        let seen = (t.key.to_owned(), t.from, t.to, t.trigger);
        AGGREGATED_SEEN.lock().unwrap().push(seen);
    });
    MEMORY.on_transition(|t| {
        let seen = (t.key.to_owned(), t.from, t.to, t.trigger);
        MEMORY_SEEN.lock().unwrap().push(seen);
    });
    SHARED.on_transition(|t| {
        let seen = (t.key.to_owned(), t.from, t.to, t.trigger);
        SHARED_SEEN.lock().unwrap().push(seen);
    });
    // Start the clock where a real one could be, far from zero.
    CLOCK.advance(Duration::from_secs(1_000));
    // Half-open is seen between the two probes of the first policy; the second has one probe.
    run_model(&store, &aggregated, "model", 0, 3).await;
    run_model(&store, &aggregated, "model-run", 1, 2).await;
    run_model(&store, &aggregated, "model-time", 2, 2).await;
    run_model(&store, &aggregated, "model-phases", 3, 3).await;
    run_model(&store, &aggregated, "model-count", 4, 2).await;
    run_model(&store, &aggregated, "model-count-time", 5, 2).await;
    // The sequences compared the triggers of every rule and recovery step these policies have.
    let triggers: std::collections::HashSet<Trigger> = MEMORY_SEEN
        .lock()
        .unwrap()
        .iter()
        .map(|seen| seen.3)
        .collect();
    for trigger in [
        Trigger::FailureRate,
        Trigger::Consecutive,
        Trigger::FailureCount,
        Trigger::OpenWaitOver,
        Trigger::ProbeFailed,
        Trigger::ProbesPassed,
        Trigger::PhasePassed,
    ] {
        assert!(triggers.contains(&trigger), "{trigger} in {triggers:?}");
    }
}

/// One call of `policy`'s function on each registry: in memory, strict, aggregated.
async fn call(policy: usize, fail: bool) -> (Outcome, Outcome, Outcome) {
    match policy {
        0 => (
            in_memory(fail).await,
            in_redis(fail).await,
            in_aggregated(fail).await,
        ),
        1 => (
            run_in_memory(fail).await,
            run_in_redis(fail).await,
            run_in_aggregated(fail).await,
        ),
        2 => (
            time_in_memory(fail).await,
            time_in_redis(fail).await,
            time_in_aggregated(fail).await,
        ),
        3 => (
            phases_in_memory(fail).await,
            phases_in_redis(fail).await,
            phases_in_aggregated(fail).await,
        ),
        4 => (
            count_in_memory(fail).await,
            count_in_redis(fail).await,
            count_in_aggregated(fail).await,
        ),
        _ => (
            count_time_in_memory(fail).await,
            count_time_in_redis(fail).await,
            count_time_in_aggregated(fail).await,
        ),
    }
}

type Outcome = Result<(), BackendError>;

async fn run_model(
    store: &RedisStore,
    aggregated: &RedisStore,
    key: &str,
    policy: usize,
    states: usize,
) {
    let mut reopens = 0;
    let mut seed: u64 = 0x5eed_f00d;
    let mut next = move |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut trace = Vec::new();
    let mut states_seen = std::collections::HashSet::new();
    for step in 0..600 {
        let op = next(10);
        if op < 7 {
            let fail = next(100) < 55;
            let (memory, redis, folded) = call(policy, fail).await;
            aggregated.flush().await;
            trace.push(format!(
                "{step}: call fail={fail} memory={} redis={} aggregated={}",
                admitted(&memory),
                admitted(&redis),
                admitted(&folded)
            ));
            assert_eq!(admitted(&memory), admitted(&redis), "{}", trace.join("\n"));
            assert_eq!(admitted(&memory), admitted(&folded), "{}", trace.join("\n"));
        } else {
            let ms = [1, 10, 50, 99, 100, 150][next(6) as usize];
            CLOCK.advance(Duration::from_millis(ms));
            trace.push(format!("{step}: advance {ms} ms"));
        }
        let breaker = MEMORY.get(key).unwrap();
        let memory = breaker.snapshot();
        let shared = store.state(key, breaker.policy()).await.unwrap();
        let folded = aggregated.state(key, breaker.policy()).await.unwrap();
        assert_eq!(
            memory.state,
            folded.state,
            "aggregated: {}",
            trace.join("\n")
        );
        // The in-memory breaker moves from open to half-open on the first call after the wait;
        // so does the script: both report the state the last call left.
        assert_eq!(memory.state, shared.state, "{}", trace.join("\n"));
        if memory.state == State::Closed {
            assert_eq!(
                (memory.calls, memory.failures),
                (shared.calls, shared.failures),
                "{}",
                trace.join("\n")
            );
            assert_eq!(
                (memory.calls, memory.failures),
                (folded.calls, folded.failures),
                "aggregated: {}",
                trace.join("\n")
            );
        }
        // The replica that committed each transition announces it with the rule that made it.
        assert_eq!(
            transitions(&MEMORY_SEEN, key),
            transitions(&SHARED_SEEN, key),
            "{}",
            trace.join("\n")
        );
        assert_eq!(
            transitions(&MEMORY_SEEN, key),
            transitions(&AGGREGATED_SEEN, key),
            "aggregated: {}",
            trace.join("\n")
        );
        states_seen.insert(format!("{:?}", memory.state));
        reopens = reopens.max(memory.reopens);
    }
    // The sequence visited every state the policy has.
    assert_eq!(states_seen.len(), states, "{states_seen:?}");
    // Failed recoveries in a row happened, so the backoff's longer waits were compared too.
    assert!(reopens >= 2, "{reopens}");
}
