//! The Redis store under faults: Redis killed, restarted, hung, and garbage under a breaker's key.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use crate::harness::{BackendError, RedisServer};
use fusebox::{Reason, Registry, State, circuit_breaker};
use fusebox_redis::RedisStore;

/// Generous bound for "answered within the store timeout" on a loaded machine (timeout: 50 ms).
const BOUND: Duration = Duration::from_secs(2);

macro_rules! backend {
    ($registry:ident, $call:ident, $calls:ident) => {
        static $registry: LazyLock<Registry> = LazyLock::new(Registry::new);
        static $calls: AtomicU32 = AtomicU32::new(0);

        #[circuit_breaker(key = "payments", registry = $registry, window = 5, min_calls = 5, open_for = "60s")]
        async fn $call(fail: bool) -> Result<(), BackendError> {
            $calls.fetch_add(1, Ordering::SeqCst);
            if fail { Err(BackendError::Down) } else { Ok(()) }
        }
    };
}

backend!(KILLED, killed_call, KILLED_CALLS);
backend!(HUNG, hung_call, HUNG_CALLS);
backend!(GARBAGE, garbage_call, GARBAGE_CALLS);
backend!(RESTART, restart_call, RESTART_CALLS);
backend!(OPENS, fail_open_call, FAIL_OPEN_CALLS);
backend!(CLOSES, fail_closed_call, FAIL_CLOSED_CALLS);

async fn timed<T>(f: impl std::future::Future<Output = T>) -> (T, Duration) {
    let start = Instant::now();
    let out = f.await;
    (out, start.elapsed())
}

fn rejection(result: &Result<(), BackendError>) -> Option<Reason> {
    match result {
        Err(BackendError::Rejected(e)) => Some(e.reason()),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_keeps_answering_from_local_state_and_an_open_circuit_stays_open() {
    let server = RedisServer::start();
    KILLED.share(RedisStore::connect(&server.url()).await.unwrap());
    for _ in 0..5 {
        assert!(matches!(killed_call(true).await, Err(BackendError::Down)));
    }
    assert_eq!(rejection(&killed_call(true).await), Some(Reason::Open));
    server.kill();
    for _ in 0..5 {
        let (result, took) = timed(killed_call(true)).await;
        assert_eq!(
            rejection(&result),
            Some(Reason::Open),
            "an open circuit stays open"
        );
        assert!(took < BOUND, "answered in {took:?}");
    }
    assert_eq!(KILLED_CALLS.load(Ordering::SeqCst), 5);
    assert_eq!(KILLED.get("payments").unwrap().state(), State::Open);
}

// Current-thread: the store's reporting task runs on this thread too, so its events are captured.
#[tokio::test]
async fn a_hung_redis_is_bounded_by_the_timeout() {
    let server = RedisServer::start();
    events();
    let store = RedisStore::builder(&server.url())
        .prefix("hung")
        .connect()
        .await;
    HUNG.share(store.unwrap());
    assert!(hung_call(false).await.is_ok());
    server.signal("-STOP");
    for _ in 0..3 {
        let (result, took) = timed(hung_call(false)).await;
        // Degraded to the local breaker (closed): the call is admitted.
        assert!(result.is_ok(), "{result:?}");
        assert!(took < BOUND, "answered in {took:?}");
    }
    server.signal("-CONT");
    // Back: the next answer ends the degradation.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !events_of("{hung:payments}")
        .iter()
        .any(|e| e.starts_with("INFO") && e.contains("answers again"))
    {
        assert!(
            Instant::now() < deadline,
            "no recovery event: {:?}",
            events_of("{hung:payments}")
        );
        let _ = hung_call(false).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let events = events_of("{hung:payments}");
    let warnings: Vec<_> = events.iter().filter(|e| e.starts_with("WARN")).collect();
    assert!(!warnings.is_empty(), "a WARN on degrading: {events:?}");
    assert!(warnings[0].contains("unavailable"), "{warnings:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_on_the_same_port_reloads_the_script_and_pushes_the_open_state_back() {
    let server = RedisServer::start();
    RESTART.share(RedisStore::connect(&server.url()).await.unwrap());
    for _ in 0..5 {
        assert!(matches!(restart_call(true).await, Err(BackendError::Down)));
    }
    assert_eq!(rejection(&restart_call(true).await), Some(Reason::Open));
    let port = server.kill();
    let server = RedisServer::start_on(port);
    assert_eq!(
        server.command(&["EXISTS", "{fusebox:payments}"]),
        ":0",
        "state lost"
    );
    // The first calls may still find the old connection broken; the store reconnects and, on
    // `NOSCRIPT`, loads the script again. Every call meanwhile is rejected: the circuit stays open.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert_eq!(rejection(&restart_call(true).await), Some(Reason::Open));
        if server.command(&["EXISTS", "{fusebox:payments}"]) == ":1" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the store never wrote to the restarted redis"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The open state was pushed back, with its remaining wait.
    assert_eq!(server.command(&["HGET", "{fusebox:payments}", "st"]), "$1");
    assert_eq!(RESTART_CALLS.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn garbage_under_a_key_is_reset_with_an_error_event_never_a_panic() {
    let server = RedisServer::start();
    events();
    let store = RedisStore::builder(&server.url())
        .prefix("garbage")
        .connect()
        .await;
    GARBAGE.share(store.unwrap());
    // Not a hash at all.
    assert_eq!(
        server.command(&["SET", "{garbage:payments}", "garbage"]),
        "+OK"
    );
    assert!(garbage_call(false).await.is_ok());
    // A hash with fields fusebox did not write.
    server.command(&["DEL", "{garbage:payments}"]);
    server.command(&["HSET", "{garbage:payments}", "v", "fb1", "st", "banana"]);
    assert!(garbage_call(false).await.is_ok());
    let errors: Vec<String> = events_of("{garbage:payments}")
        .into_iter()
        .filter(|e| e.starts_with("ERROR"))
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("did not write"), "{errors:?}");
    assert!(errors[1].contains("did not write"), "{errors:?}");
    assert_eq!(server.command(&["TYPE", "{garbage:payments}"]), "+hash");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_and_fail_closed_when_redis_is_down() {
    let server = RedisServer::start();
    let open = RedisStore::builder(&server.url()).degrade(fusebox_redis::Degrade::FailOpen);
    OPENS.share(open.connect().await.unwrap());
    let closed = RedisStore::builder(&server.url()).degrade(fusebox_redis::Degrade::FailClosed);
    CLOSES.share(closed.connect().await.unwrap());
    server.kill();
    for _ in 0..6 {
        let (result, took) = timed(fail_open_call(true)).await;
        assert!(
            matches!(result, Err(BackendError::Down)),
            "fail open admits: {result:?}"
        );
        assert!(took < BOUND);
        let (result, took) = timed(fail_closed_call(false)).await;
        assert_eq!(
            rejection(&result),
            Some(Reason::Open),
            "fail closed rejects"
        );
        assert!(took < BOUND);
    }
    assert_eq!(FAIL_OPEN_CALLS.load(Ordering::SeqCst), 6);
    assert_eq!(FAIL_CLOSED_CALLS.load(Ordering::SeqCst), 0);
}

/// `LEVEL key message` of every `fusebox` event of this test binary (a global subscriber: a
/// thread-local one misses events whose callsite another thread registered first).
pub(crate) fn events() -> &'static Mutex<Vec<String>> {
    use tracing_subscriber::layer::SubscriberExt;
    static EVENTS: LazyLock<&'static Mutex<Vec<String>>> = LazyLock::new(|| {
        let events: &'static Mutex<Vec<String>> = Box::leak(Box::new(Mutex::new(Vec::new())));
        struct Collect(&'static Mutex<Vec<String>>);
        impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Collect {
            fn on_event(
                &self,
                event: &tracing::Event<'_>,
                _: tracing_subscriber::layer::Context<'_, S>,
            ) {
                let meta = event.metadata();
                if meta.target() != "fusebox" {
                    return;
                }
                #[derive(Default)]
                struct Fields(String, String);
                impl tracing::field::Visit for Fields {
                    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                        if field.name() == "key" {
                            self.0 = value.to_owned();
                        }
                    }
                    fn record_debug(
                        &mut self,
                        field: &tracing::field::Field,
                        value: &dyn std::fmt::Debug,
                    ) {
                        if field.name() == "message" {
                            self.1 = format!("{value:?}");
                        }
                    }
                }
                let mut fields = Fields::default();
                event.record(&mut fields);
                self.0
                    .lock()
                    .unwrap()
                    .push(format!("{} {} {}", meta.level(), fields.0, fields.1));
            }
        }
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(Collect(events)),
        )
        .expect("the only global subscriber of this test binary");
        events
    });
    *EVENTS
}

/// The events of Redis key `key`.
pub(crate) fn events_of(key: &str) -> Vec<String> {
    events()
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.split(' ').nth(1) == Some(key))
        .cloned()
        .collect()
}
