//! Corrupt, deleted and forged shared state. Whatever a breaker's key holds, the circuit still
//! trips and recovers, the script resets what it did not write with an ERROR event naming the key
//! and the field, and `RedisStore::force` repairs the key; a cached replica follows a key deleted
//! and created again, however many generations it had seen; a message forged on the transitions
//! channel decides no call; `RedisStore::state` never creates a key.

use std::io::{BufRead, BufReader};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::common::capture::Capture;
use crate::harness::{BackendError, RedisServer};
use fusebox::clock::FakeClock;
use fusebox::{Policy, Reason, Registry, State, circuit_breaker};
use fusebox_redis::{Mode, RedisStore, TRANSITIONS};
use tracing_subscriber::layer::SubscriberExt;

static CLOCK: LazyLock<FakeClock> = LazyLock::new(FakeClock::new);
static FUZZ: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(CLOCK.clone()));

/// A count window that trips on four failures in a row (every slot `r0..r3` is read on the way).
#[circuit_breaker(key = key, registry = FUZZ, window = 4, min_calls = 4, failure_rate = 100, open_for = "1s")]
async fn counted(key: &str, fail: bool) -> Result<(), BackendError> {
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

/// A time window (ten buckets `t0..t9`, all read on every outcome).
#[circuit_breaker(key = key, registry = FUZZ, window = "1s", min_calls = 4, failure_rate = 50, open_for = "1s")]
async fn timed(key: &str, fail: bool) -> Result<(), BackendError> {
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

/// The fields of a breaker's hash (`FIELDS` in `breaker.lua`).
const FIELDS: [&str; 18] = [
    "v", "st", "g", "dl", "iss", "pas", "arm", "n", "f", "s", "cur", "run", "ro", "w", "ph", "sq",
    "pf", "inc",
];

/// What the fuzz writes into a field.
const VALUES: [(&str, &str); 7] = [
    ("nan", "nan"),
    ("inf", "inf"),
    ("negative", "-1"),
    ("fraction", "1.5"),
    ("huge", "1e300"),
    ("digits", "99999999999999999999"),
    ("garbage", "garbage"),
];

/// How a scenario damages a key.
#[derive(Debug, Clone, Copy)]
enum Damage {
    /// The field set to the value.
    Set(&'static str, &'static str),
    /// The field deleted.
    Delete(&'static str),
    /// The whole key replaced by a list.
    List,
    /// The whole key replaced by a string.
    Text,
    /// The whole key deleted.
    Gone,
}

/// One scenario: which window, what damage, and the field the ERROR event must name (`None`: the
/// damage is not corruption, and no ERROR is expected).
#[derive(Debug, Clone, Copy)]
struct Scenario {
    timed: bool,
    damage: Damage,
    error: Option<&'static str>,
}

fn scenarios() -> Vec<Scenario> {
    let mut all = Vec::new();
    let count = |damage, error| Scenario {
        timed: false,
        damage,
        error,
    };
    for field in FIELDS {
        for (_, value) in VALUES {
            all.push(count(Damage::Set(field, value), Some(field)));
        }
        // A key written before incarnations has no `inc`: the script gives it one, silently.
        let error = (field != "inc").then_some(field);
        all.push(count(Damage::Delete(field), error));
    }
    // `q`: the replica's report sequence (`q<replica id>`); `pt`: the half-open probes' tokens
    // (read when the recovery grants its probe).
    for field in ["q", "pt", "r0", "r1", "r2", "r3"] {
        for (_, value) in VALUES {
            all.push(count(Damage::Set(field, value), Some(field)));
        }
        all.push(count(Damage::Delete(field), None));
    }
    for field in ["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"] {
        for (_, value) in VALUES {
            all.push(Scenario {
                timed: true,
                damage: Damage::Set(field, value),
                error: Some(field),
            });
        }
    }
    for timed in [false, true] {
        all.push(Scenario {
            timed,
            damage: Damage::List,
            error: Some("type"),
        });
        all.push(Scenario {
            timed,
            damage: Damage::Text,
            error: Some("type"),
        });
        all.push(Scenario {
            timed,
            damage: Damage::Gone,
            error: None,
        });
    }
    all
}

impl Scenario {
    /// The breaker key of this scenario (one per scenario, so no scenario sees another's data).
    fn key(&self) -> String {
        let window = if self.timed { "time" } else { "count" };
        let damage = match self.damage {
            Damage::Set(field, value) => {
                let label = VALUES.iter().find(|(_, v)| *v == value).unwrap().0;
                format!("{field}-{label}")
            }
            Damage::Delete(field) => format!("{field}-deleted"),
            Damage::List => "list".to_owned(),
            Damage::Text => "string".to_owned(),
            Damage::Gone => "gone".to_owned(),
        };
        format!("{window}-{damage}")
    }

    async fn call(&self, fail: bool) -> Result<(), BackendError> {
        if self.timed {
            timed(&self.key(), fail).await
        } else {
            counted(&self.key(), fail).await
        }
    }

    fn damage(&self, server: &RedisServer) {
        let key = format!("{{fuzz:{}}}", self.key());
        // The replica's report sequence is `q<replica id>`: the one field named `q…`.
        let sequence = || {
            let Reply::Array(fields) = query(server, &["HKEYS", &key]) else {
                return "q".to_owned();
            };
            fields
                .into_iter()
                .find_map(|f| match f {
                    Reply::Bulk(Some(f)) if f.starts_with('q') => Some(f),
                    _ => None,
                })
                .unwrap_or_else(|| "q".to_owned())
        };
        let reply = match self.damage {
            Damage::Set("q", value) => query(server, &["HSET", &key, &sequence(), value]),
            Damage::Delete("q") => query(server, &["HDEL", &key, &sequence()]),
            Damage::Set(field, value) => query(server, &["HSET", &key, field, value]),
            Damage::Delete(field) => query(server, &["HDEL", &key, field]),
            Damage::List => {
                query(server, &["DEL", &key]);
                query(server, &["RPUSH", &key, "a", "b"])
            }
            Damage::Text => query(server, &["SET", &key, "garbage"]),
            Damage::Gone => query(server, &["DEL", &key]),
        };
        assert!(!matches!(reply, Reply::Error(_)), "{self:?}: {reply:?}");
    }
}

fn rejection(result: &Result<(), BackendError>) -> Option<Reason> {
    match result {
        Err(BackendError::Rejected(e)) => Some(e.reason()),
        _ => None,
    }
}

/// Runs one scenario: damage, trip, recover, the ERROR event, then damage again and `force`.
async fn run(scenario: Scenario, server: &RedisServer, store: &RedisStore, events: &Capture) {
    let key = scenario.key();
    let hash = format!("{{fuzz:{key}}}");
    // The key exists with every field (and a window slot) written by the script.
    assert!(scenario.call(false).await.is_ok(), "{scenario:?}");
    assert_eq!(query(server, &["EXISTS", &hash]), Reply::Int(1));
    scenario.damage(server);

    // Still trips: a reset key is a new one, and the failures that follow open it.
    let mut failures = 0;
    loop {
        let result = scenario.call(true).await;
        match rejection(&result) {
            None => {
                assert!(matches!(result, Err(BackendError::Down)), "{scenario:?}");
                failures += 1;
                assert!(
                    failures <= 8,
                    "{scenario:?}: {failures} failures never tripped"
                );
            }
            Some(reason) => {
                assert_eq!(reason, Reason::Open, "{scenario:?}");
                break;
            }
        }
    }
    // And recovers: after the open wait, a probe that succeeds closes it.
    CLOCK.advance(Duration::from_millis(1_001));
    for _ in 0..2 {
        let result = scenario.call(false).await;
        assert!(result.is_ok(), "{scenario:?}: {result:?}");
    }
    let policy = FUZZ.get(&key).unwrap().policy();
    let shared = store.state(&key, policy).await.unwrap();
    assert_eq!(shared.state, State::Closed, "{scenario:?}");

    let named: Vec<String> = events
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|e| e.level == tracing::Level::ERROR && e.fields.get("key") == Some(&hash))
        .map(|e| e.fields.get("field").cloned().unwrap_or_default())
        .collect();
    match scenario.error {
        Some(field) => assert!(
            named
                .iter()
                .any(|f| f == field || (field == "q" && f.starts_with('q'))),
            "{scenario:?}: an ERROR event names `{hash}` and field `{field}`: {named:?}"
        ),
        None => assert!(named.is_empty(), "{scenario:?}: {named:?}"),
    }

    // `force` repairs whatever the key holds: the forced state is written cleanly.
    scenario.damage(server);
    store
        .force(&key, policy, State::ForcedOpen)
        .await
        .unwrap_or_else(|e| panic!("{scenario:?}: {e}"));
    assert_clean(server, &hash, &format!("{scenario:?}"));
    assert_eq!(
        rejection(&scenario.call(false).await),
        Some(Reason::ForcedOpen),
        "{scenario:?}"
    );
    scenario.damage(server);
    store.force(&key, policy, State::Closed).await.unwrap();
    assert_clean(server, &hash, &format!("{scenario:?}"));
    assert!(scenario.call(false).await.is_ok(), "{scenario:?}");
    let shared = store.state(&key, policy).await.unwrap();
    assert_eq!(
        (shared.state, shared.calls),
        (State::Closed, 1),
        "{scenario:?}"
    );
}

/// Asserts that `hash` holds exactly the fields the script writes, each as it writes them.
fn assert_clean(server: &RedisServer, hash: &str, scenario: &str) {
    let Reply::Array(items) = query(server, &["HGETALL", hash]) else {
        panic!("{scenario}: `{hash}` is not a hash");
    };
    let mut fields = Vec::new();
    for pair in items.chunks(2) {
        let [Reply::Bulk(Some(field)), Reply::Bulk(Some(value))] = pair else {
            panic!("{scenario}: {pair:?}");
        };
        if field == "lt" {
            // The last transition's provenance: nine numbers.
            let numbers: Vec<&str> = value.split(' ').collect();
            assert!(
                numbers.len() == 9
                    && numbers
                        .iter()
                        .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
                "{scenario}: field `lt` holds `{value}` after `force`"
            );
            continue;
        }
        if field == "v" {
            assert_eq!(value, "fb1", "{scenario}");
        } else {
            assert!(
                !value.is_empty() && value.len() <= 16 && value.bytes().all(|b| b.is_ascii_digit()),
                "{scenario}: field `{field}` holds `{value}` after `force`"
            );
        }
        fields.push(field.clone());
    }
    fields.sort();
    let mut expected: Vec<String> = FIELDS.iter().map(|f| (*f).to_owned()).collect();
    expected.sort();
    assert_eq!(fields, expected, "{scenario}: `force` writes the key anew");
}

/// Every field of the hash × {`nan`, `inf`, `-1`, `1.5`, `1e300`, too many digits, garbage,
/// deleted}, every window slot, and the whole key replaced by another type or deleted: the
/// circuit trips and recovers, an ERROR event names the key and the field, and `force` repairs
/// the key. One `redis-server`, one key per scenario, time from a fake clock.
#[test]
fn every_corrupt_field_is_reset_and_the_circuit_trips_recovers_and_is_repaired_by_force() {
    let server = RedisServer::start();
    let events = Capture::default();
    let subscriber = tracing_subscriber::registry().with(events.clone());
    let scenarios = scenarios();
    assert!(scenarios.len() > 200, "{}", scenarios.len());
    tracing::subscriber::with_default(subscriber, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let store = RedisStore::builder(&server.url())
                    .prefix("fuzz")
                    .timeout(Duration::from_secs(2))
                    .time_from(CLOCK.clone())
                    .connect()
                    .await
                    .unwrap();
                assert!(FUZZ.share(store.clone()));
                CLOCK.advance(Duration::from_secs(1_000));
                for scenario in scenarios {
                    run(scenario, &server, &store, &events).await;
                }
            });
    });
}

static CACHED: LazyLock<Registry> = LazyLock::new(Registry::new);
static CACHED_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "recreated", registry = CACHED, window = 5, min_calls = 5, open_for = "60s")]
async fn recreated(fail: bool) -> Result<(), BackendError> {
    CACHED_CALLS.fetch_add(1, Ordering::SeqCst);
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

/// Polls (bounded, 10 s) until `done` holds; true when it did.
async fn until<F: std::future::Future<Output = bool>>(done: impl FnMut() -> F) -> bool {
    crate::harness::until(Duration::from_secs(10), done).await
}

/// Cached mode: the replica's view has learnt a generation thousands above the one a new key
/// starts at; the key is then deleted (and, the second time, Redis is flushed). The key the next
/// report creates is another incarnation, so the view follows it, and failing calls trip it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_replica_follows_a_key_deleted_or_flushed_after_thousands_of_generations() {
    let server = RedisServer::start();
    let store = RedisStore::builder(&server.url())
        .mode(Mode::Cached)
        .timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap();
    assert!(store.is_cached());
    assert!(CACHED.share(store.clone()));
    let operator = RedisStore::connect(&server.url()).await.unwrap();
    assert!(recreated(false).await.is_ok());
    let policy = CACHED.get("recreated").unwrap().policy();
    for wipe in [["DEL", "{fusebox:recreated}"], ["FLUSHALL", "SYNC"]] {
        // Thousands of transitions, then two more the replica hears of.
        let generation = operator
            .state("recreated", policy)
            .await
            .unwrap()
            .generation;
        let high = (generation + 5_000).to_string();
        assert_eq!(
            query(&server, &["HSET", "{fusebox:recreated}", "g", &high]),
            Reply::Int(0)
        );
        for _ in 0..2 {
            operator
                .force("recreated", policy, State::Closed)
                .await
                .unwrap();
        }
        // The replica admits under the high generation: its outcomes are counted.
        assert!(
            until(|| async {
                recreated(false).await.is_ok()
                    && operator.state("recreated", policy).await.unwrap().calls >= 1
            })
            .await,
            "the replica learns the high generation"
        );
        assert!(
            operator
                .state("recreated", policy)
                .await
                .unwrap()
                .generation
                > generation + 5_000
        );

        assert!(query(&server, &wipe).is_ok(), "{wipe:?}");
        let before = CACHED_CALLS.load(Ordering::SeqCst);
        assert!(
            until(|| async { rejection(&recreated(true).await) == Some(Reason::Open) }).await,
            "{wipe:?}: failing calls on the recreated key never trip it ({} reached the backend)",
            CACHED_CALLS.load(Ordering::SeqCst) - before
        );
        let shared = operator.state("recreated", policy).await.unwrap();
        assert_eq!(shared.state, State::Open, "{wipe:?}");

        operator
            .force("recreated", policy, State::Closed)
            .await
            .unwrap();
        assert!(
            until(|| async { recreated(false).await.is_ok() }).await,
            "{wipe:?}: closed again"
        );
    }
}

static FORGED: LazyLock<Registry> = LazyLock::new(Registry::new);
static FORGED_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "forged", registry = FORGED, window = 5, min_calls = 5, open_for = "60s")]
async fn forged() -> Result<(), BackendError> {
    FORGED_CALLS.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

/// A key forced by a real operator, so the test knows when the messages before it were handled.
#[circuit_breaker(key = "sentinel", registry = FORGED, window = 5, min_calls = 5, open_for = "60s")]
async fn sentinel() -> Result<(), BackendError> {
    Ok(())
}

/// One call of [`forged`]: true when it reached the backend.
async fn reaches() -> bool {
    let before = FORGED_CALLS.load(Ordering::SeqCst);
    let result = forged().await;
    assert!(result.is_ok() || rejection(&result).is_some(), "{result:?}");
    FORGED_CALLS.load(Ordering::SeqCst) == before + 1
}

/// Publishes `message` on the transitions channel, then forces the sentinel key and waits until
/// the replica follows it: messages arrive in order, so the forged one has been handled.
async fn forge(server: &RedisServer, operator: &RedisStore, message: &str) {
    assert_eq!(
        query(server, &["PUBLISH", TRANSITIONS, message]),
        Reply::Int(1)
    );
    let sentinel = FORGED.get("sentinel").unwrap();
    let to = if sentinel.state() == State::Disabled {
        State::Closed
    } else {
        State::Disabled
    };
    operator
        .force("sentinel", sentinel.policy(), to)
        .await
        .unwrap();
    assert!(
        until(|| async { sentinel.state() == to }).await,
        "the sentinel's message arrives"
    );
}

/// Forged messages on the transitions channel (another format, a huge generation, another
/// incarnation, and a chain of plausible next generations) never decide a call: the script's
/// state (closed) wins, and `RedisStore::force(Closed)` undoes whatever a forgery left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_message_decides_no_call() {
    let server = RedisServer::start();
    let store = RedisStore::builder(&server.url())
        .mode(Mode::Cached)
        .timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap();
    assert!(FORGED.share(store.clone()));
    let operator = RedisStore::connect(&server.url()).await.unwrap();
    assert!(reaches().await);
    assert!(sentinel().await.is_ok());
    let policy = FORGED.get("forged").unwrap().policy();
    let hash = "{fusebox:forged}";
    let incarnation = || match query(&server, &["HGET", hash, "inc"]) {
        Reply::Bulk(Some(inc)) => inc.parse::<u64>().unwrap_or(0),
        _ => 0,
    };
    let generation = || async { operator.state("forged", policy).await.unwrap().generation };

    let huge = 999_999_999_999u64;
    let inc = incarnation();
    let next = generation().await + 1;
    for message in [
        format!("3 {huge} 0 {hash}"),
        format!("3 {huge} 0 {inc} {hash}"),
        format!("3 {next} 0 {} {hash}", inc + 1),
        format!("7 {next} 0 {inc} {hash}"),
    ] {
        forge(&server, &operator, &message).await;
        assert_ne!(
            FORGED.get("forged").unwrap().state(),
            State::ForcedOpen,
            "{message}"
        );
        assert!(reaches().await, "`{message}` rejected a call");
    }

    // The next generations of the right incarnation look like the script's own messages: the
    // replica's local breaker may follow them, but no call is decided before the script answers.
    for chain in 0..2 {
        let g = generation().await;
        for step in 1..=3 {
            let message = format!("3 {} 0 {} {hash}", g + step, incarnation());
            forge(&server, &operator, &message).await;
        }
        if chain == 0 {
            assert!(reaches().await, "a forged chain rejected a call");
        } else {
            operator
                .force("forged", policy, State::Closed)
                .await
                .unwrap();
        }
        assert!(
            until(|| async {
                reaches().await && FORGED.get("forged").unwrap().state() == State::Closed
            })
            .await,
            "the replica follows the script's state again"
        );
    }
    let shared = operator.state("forged", policy).await.unwrap();
    assert_eq!(shared.state, State::Closed);
}

/// `RedisStore::state` on a key Redis does not hold reads closed, generation 0, and leaves it
/// missing.
#[tokio::test]
async fn reading_a_missing_key_leaves_it_missing() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let shared = store.state("absent", Policy::new()).await.unwrap();
    assert_eq!(
        (
            shared.state,
            shared.generation,
            shared.calls,
            shared.failures
        ),
        (State::Closed, 0, 0, 0)
    );
    assert_eq!(
        query(&server, &["EXISTS", "{fusebox:absent}"]),
        Reply::Int(0)
    );
}

/// A reply of Redis, read whole (the harness's `command` keeps only its first line).
#[derive(Debug, PartialEq)]
enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<String>),
    Array(Vec<Reply>),
}

impl Reply {
    fn is_ok(&self) -> bool {
        matches!(self, Reply::Status(s) if s == "OK") || matches!(self, Reply::Int(_))
    }
}

/// Sends one command to `server` and reads its whole reply.
fn query(server: &RedisServer, args: &[&str]) -> Reply {
    read_reply(&mut BufReader::new(crate::harness::send_command(
        server.port,
        args,
    )))
}

fn read_reply(reader: &mut impl BufRead) -> Reply {
    let mut line = String::new();
    reader.read_line(&mut line).expect("a reply");
    let line = line.trim_end_matches("\r\n");
    let (kind, rest) = line.split_at(1);
    match kind {
        "+" => Reply::Status(rest.to_owned()),
        "-" => Reply::Error(rest.to_owned()),
        ":" => Reply::Int(rest.parse().unwrap()),
        "$" => {
            let Ok(len) = usize::try_from(rest.parse::<i64>().unwrap()) else {
                return Reply::Bulk(None);
            };
            let mut buf = vec![0; len + 2];
            reader.read_exact(&mut buf).unwrap();
            Reply::Bulk(Some(String::from_utf8_lossy(&buf[..len]).into_owned()))
        }
        "*" => {
            let n = rest.parse::<i64>().unwrap().max(0);
            Reply::Array((0..n).map(|_| read_reply(reader)).collect())
        }
        _ => panic!("unexpected reply `{line}`"),
    }
}
