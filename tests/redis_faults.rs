//! The Redis store under faults: Redis killed, restarted, hung, and garbage under a breaker's key.
#![cfg(feature = "redis")]

mod redis_harness;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use fusebox::redis::RedisStore;
use fusebox::{Reason, Registry, State, circuit_breaker};
use redis_harness::RedisServer;

#[derive(Debug)]
enum BackendError {
    Down,
    Refused(fusebox::Error),
}

impl From<fusebox::Error> for BackendError {
    fn from(e: fusebox::Error) -> Self {
        BackendError::Refused(e)
    }
}

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

async fn timed<T>(f: impl std::future::Future<Output = T>) -> (T, Duration) {
    let start = Instant::now();
    let out = f.await;
    (out, start.elapsed())
}

fn refusal(result: &Result<(), BackendError>) -> Option<Reason> {
    match result {
        Err(BackendError::Refused(e)) => Some(e.reason()),
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
    assert_eq!(refusal(&killed_call(true).await), Some(Reason::Open));
    server.kill();
    for _ in 0..5 {
        let (result, took) = timed(killed_call(true)).await;
        assert_eq!(
            refusal(&result),
            Some(Reason::Open),
            "an open circuit stays open"
        );
        assert!(took < BOUND, "answered in {took:?}");
    }
    assert_eq!(KILLED_CALLS.load(Ordering::SeqCst), 5);
    assert_eq!(KILLED.get("payments").unwrap().state(), State::Open);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_redis_is_bounded_by_the_timeout() {
    let server = RedisServer::start();
    HUNG.share(RedisStore::connect(&server.url()).await.unwrap());
    assert!(hung_call(false).await.is_ok());
    server.signal("-STOP");
    for _ in 0..3 {
        let (result, took) = timed(hung_call(false)).await;
        // Degraded to the local breaker (closed): the call is admitted.
        assert!(result.is_ok(), "{result:?}");
        assert!(took < BOUND, "answered in {took:?}");
    }
    server.signal("-CONT");
    assert_eq!(HUNG_CALLS.load(Ordering::SeqCst), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_on_the_same_port_reloads_the_script() {
    let server = RedisServer::start();
    RESTART.share(RedisStore::connect(&server.url()).await.unwrap());
    assert!(restart_call(true).await.is_err());
    let port = server.kill();
    let server = RedisServer::start_on(port);
    // The first calls may still find the old connection broken; the store reconnects and, on
    // `NOSCRIPT`, loads the script again.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let _ = restart_call(true).await;
        if server.command(&["EXISTS", "{fusebox:payments}"]) == ":1" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the store never wrote to the restarted redis"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_under_a_key_is_reset_with_an_error_event_never_a_panic() {
    let server = RedisServer::start();
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let _guard = capture_errors(errors.clone());
    GARBAGE.share(RedisStore::connect(&server.url()).await.unwrap());
    // Not a hash at all.
    assert_eq!(
        server.command(&["SET", "{fusebox:payments}", "garbage"]),
        "+OK"
    );
    assert!(garbage_call(false).await.is_ok());
    // A hash with fields fusebox did not write.
    server.command(&["DEL", "{fusebox:payments}"]);
    server.command(&["HSET", "{fusebox:payments}", "v", "fb1", "st", "banana"]);
    assert!(garbage_call(false).await.is_ok());
    let errors = errors.lock().unwrap();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("did not write"), "{errors:?}");
    assert_eq!(server.command(&["TYPE", "{fusebox:payments}"]), "+hash");
}

/// Collects the messages of ERROR events from `fusebox` while the guard lives.
fn capture_errors(into: Arc<Mutex<Vec<String>>>) -> tracing::subscriber::DefaultGuard {
    use tracing_subscriber::layer::SubscriberExt;
    struct Collect(Arc<Mutex<Vec<String>>>);
    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Collect {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            if *event.metadata().level() == tracing::Level::ERROR {
                struct Message(String);
                impl tracing::field::Visit for Message {
                    fn record_debug(
                        &mut self,
                        field: &tracing::field::Field,
                        value: &dyn std::fmt::Debug,
                    ) {
                        if field.name() == "message" {
                            self.0 = format!("{value:?}");
                        }
                    }
                }
                let mut message = Message(String::new());
                event.record(&mut message);
                self.0.lock().unwrap().push(message.0);
            }
        }
    }
    tracing::subscriber::set_default(tracing_subscriber::registry().with(Collect(into)))
}
