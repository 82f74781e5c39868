//! A shared circuit gated by a quorum of replicas (`quorum = 2`, `quorum = "50%"`): four replica
//! processes on one real `redis-server`, the store's default settings. One replica whose calls
//! all fail opens alone ("open here only") while the others keep calling; when two of four fail,
//! the fleet opens once. The same traffic without a quorum opens the fleet: the control.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{LazyLock, Mutex};

use crate::harness::{BackendError, RedisServer};
use fusebox::{Registry, State, Trigger, circuit_breaker};
use fusebox_redis::RedisStore;

static REPLICA: LazyLock<Registry> = LazyLock::new(Registry::new);
static REACHED: AtomicU32 = AtomicU32::new(0);

/// Per key: the openings of this replica alone, and the shared openings this replica committed.
static OPENINGS: LazyLock<Mutex<HashMap<String, (u32, u32)>>> = LazyLock::new(Mutex::default);

async fn backend(fail: bool) -> Result<(), BackendError> {
    REACHED.fetch_add(1, Ordering::SeqCst);
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

// A rate of 20 % over at least 10 calls: one failing replica of four (25 %) reaches it.
#[circuit_breaker(key = "quorum-two", registry = REPLICA, window = 40, min_calls = 10, failure_rate = 20, open_for = "60s", quorum = 2)]
async fn two(fail: bool) -> Result<(), BackendError> {
    backend(fail).await
}

#[circuit_breaker(key = "quorum-two-again", registry = REPLICA, window = 40, min_calls = 10, failure_rate = 20, open_for = "60s", quorum = 2)]
async fn two_again(fail: bool) -> Result<(), BackendError> {
    backend(fail).await
}

#[circuit_breaker(key = "quorum-half", registry = REPLICA, window = "60s", min_calls = 10, failure_rate = 20, open_for = "60s", quorum = "50%")]
async fn half(fail: bool) -> Result<(), BackendError> {
    backend(fail).await
}

#[circuit_breaker(key = "quorum-none", registry = REPLICA, window = 40, min_calls = 10, failure_rate = 20, open_for = "60s")]
async fn none(fail: bool) -> Result<(), BackendError> {
    backend(fail).await
}

async fn call(key: &str, fail: bool) -> Result<(), BackendError> {
    match key {
        "quorum-two" => two(fail).await,
        "quorum-two-again" => two_again(fail).await,
        "quorum-half" => half(fail).await,
        _ => none(fail).await,
    }
}

/// The replica process: runs only when re-invoked by the tests below. `run KEY fail|ok N` makes
/// N calls one after another and answers with what they did and the key's snapshot.
#[test]
fn quorum_replica() {
    let Ok(url) = std::env::var("FUSEBOX_QUORUM_URL") else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = RedisStore::connect(&url).await.expect("connect");
        assert!(REPLICA.share(store));
        REPLICA.on_transition(|t| {
            let mut openings = OPENINGS.lock().unwrap();
            let entry = openings.entry(t.key.to_owned()).or_default();
            match (t.from, t.to, t.trigger) {
                (State::Closed, State::Open, Trigger::HereOnly) => entry.0 += 1,
                (State::Closed, State::Open, _) => entry.1 += 1,
                _ => {}
            }
        });
        let mut out = std::io::stdout();
        for line in std::io::stdin().lock().lines() {
            let line = line.unwrap();
            let words: Vec<&str> = line.split_whitespace().collect();
            let ["run", key, how, n] = words.as_slice() else {
                break;
            };
            let (mut reached, mut rejected) = (0, 0);
            for _ in 0..n.parse::<u32>().unwrap() {
                let before = REACHED.load(Ordering::SeqCst);
                if let Err(BackendError::Rejected(_)) = call(key, *how == "fail").await {
                    rejected += 1;
                }
                reached += REACHED.load(Ordering::SeqCst) - before;
            }
            let snapshot = REPLICA.get(key).unwrap().snapshot();
            let (here, shared) = OPENINGS
                .lock()
                .unwrap()
                .get(*key)
                .copied()
                .unwrap_or_default();
            writeln!(
                out,
                "QUORUM {reached} {rejected} {:?} {} {here} {shared}",
                snapshot.state,
                snapshot.open_here_only()
            )
            .unwrap();
            out.flush().unwrap();
        }
    });
}

/// What a replica answered to one `run`, and its totals so far.
#[derive(Debug, Default, Clone)]
struct Seen {
    reached: u32,
    rejected: u32,
    state: String,
    here_only: bool,
    opened_here: u32,
    opened_shared: u32,
}

struct Replica {
    child: std::process::Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Replica {
    fn spawn(url: &str) -> Replica {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .arg(crate::harness::this_test(module_path!(), "quorum_replica"))
            .args(["--exact", "--nocapture", "--test-threads=1"])
            .env("FUSEBOX_QUORUM_URL", url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Replica { child, lines }
    }

    fn run(&mut self, key: &str, fail: bool, calls: u32) -> Seen {
        let how = if fail { "fail" } else { "ok" };
        writeln!(
            self.child.stdin.as_mut().unwrap(),
            "run {key} {how} {calls}"
        )
        .unwrap();
        loop {
            let line = self.lines.next().expect("the replica answered").unwrap();
            let Some(at) = line.find("QUORUM ") else {
                continue;
            };
            let f: Vec<&str> = line[at + "QUORUM ".len()..].split(' ').collect();
            return Seen {
                reached: f[0].parse().unwrap(),
                rejected: f[1].parse().unwrap(),
                state: f[2].to_owned(),
                here_only: f[3] == "true",
                opened_here: f[4].parse().unwrap(),
                opened_shared: f[5].parse().unwrap(),
            };
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// Rounds of five calls on each replica in turn, the replicas in `failing` failing every call;
/// per replica, the sums of the rounds (and the last answer's state and openings).
fn rounds(replicas: &mut [Replica], key: &str, failing: &[usize], rounds: u32) -> Vec<Seen> {
    let mut seen = vec![Seen::default(); replicas.len()];
    for _ in 0..rounds {
        for (r, replica) in replicas.iter_mut().enumerate() {
            let answer = replica.run(key, failing.contains(&r), 5);
            let total = &mut seen[r];
            *total = Seen {
                reached: total.reached + answer.reached,
                rejected: total.rejected + answer.rejected,
                ..answer
            };
        }
    }
    seen
}

/// The shared state of `key` in Redis (the hash's `st`: 0 closed, 1 open).
fn shared_state(server: &RedisServer, key: &str) -> String {
    crate::harness::reply_on(server.port, &["HGET", &format!("{{fusebox:{key}}}"), "st"]).join("")
}

#[test]
fn one_failing_replica_of_four_opens_alone_and_two_open_the_fleet_once() {
    let server = RedisServer::start();
    let mut replicas: Vec<Replica> = (0..4).map(|_| Replica::spawn(&server.url())).collect();

    // One replica of four fails every call: it opens alone after its own ten calls; the
    // shared window (25 % failures) reached the rate, but one replica is not the quorum.
    let seen = rounds(&mut replicas, "quorum-two", &[0], 4);
    let table = format!("{seen:#?}");
    assert!(seen[0].here_only && seen[0].state == "Open", "{table}");
    assert_eq!(
        (seen[0].opened_here, seen[0].opened_shared),
        (1, 0),
        "{table}"
    );
    assert_eq!((seen[0].reached, seen[0].rejected), (10, 10), "{table}");
    for other in &seen[1..] {
        assert_eq!((other.reached, other.rejected), (20, 0), "{table}");
        assert!(other.state == "Closed" && !other.here_only, "{table}");
        assert_eq!((other.opened_here, other.opened_shared), (0, 0), "{table}");
    }
    assert_eq!(shared_state(&server, "quorum-two"), "0", "{table}");

    // The control: the same traffic without a quorum opens the whole fleet.
    let seen = rounds(&mut replicas, "quorum-none", &[0], 4);
    let table = format!("{seen:#?}");
    assert_eq!(
        seen.iter().map(|s| s.opened_shared).sum::<u32>(),
        1,
        "{table}"
    );
    assert!(seen[1..].iter().all(|s| s.rejected > 0), "{table}");
    assert_eq!(shared_state(&server, "quorum-none"), "1", "{table}");

    // Two replicas of four fail: the quorum is met and the fleet opens, once.
    let seen = rounds(&mut replicas, "quorum-two-again", &[0, 1], 4);
    let table = format!("{seen:#?}");
    assert_eq!(
        seen.iter().map(|s| s.opened_shared).sum::<u32>(),
        1,
        "{table}"
    );
    assert_eq!(
        seen.iter().map(|s| s.opened_here).sum::<u32>(),
        0,
        "{table}"
    );
    for s in &seen {
        assert!(
            s.state == "Open" && !s.here_only && s.rejected > 0,
            "{table}"
        );
    }
    assert_eq!(shared_state(&server, "quorum-two-again"), "1", "{table}");
}

#[test]
fn a_share_of_the_active_replicas_is_a_quorum_too() {
    let server = RedisServer::start();
    let mut replicas: Vec<Replica> = (0..4).map(|_| Replica::spawn(&server.url())).collect();

    // A share counts the replicas active in the window: all four call first.
    let seen = rounds(&mut replicas, "quorum-half", &[], 1);
    assert!(seen.iter().all(|s| s.reached == 5), "{seen:#?}");
    // `quorum = "50%"` of four active replicas is two: one failing replica opens alone.
    let seen = rounds(&mut replicas, "quorum-half", &[0], 3);
    let table = format!("{seen:#?}");
    assert!(seen[0].here_only && seen[0].opened_here == 1, "{table}");
    assert!(
        seen[1..]
            .iter()
            .all(|s| s.rejected == 0 && s.state == "Closed"),
        "{table}"
    );
    assert_eq!(shared_state(&server, "quorum-half"), "0", "{table}");

    // A second replica fails too: two of four is the quorum, and the fleet opens once.
    let seen = rounds(&mut replicas, "quorum-half", &[0, 1], 3);
    let table = format!("{seen:#?}");
    assert_eq!(
        seen.iter().map(|s| s.opened_shared).sum::<u32>(),
        1,
        "{table}"
    );
    assert!(
        seen[2..]
            .iter()
            .all(|s| s.state == "Open" && s.rejected > 0),
        "{table}"
    );
    assert_eq!(shared_state(&server, "quorum-half"), "1", "{table}");
}

mod recovery {
    //! A replica open alone recovers with its own probes, on the registries' fake clock: a
    //! cancelled probe is given back, a failed one reopens it alone, passed ones close it; the
    //! shared circuit stays closed throughout.

    use std::sync::LazyLock;
    use std::task::{Context, Waker};
    use std::time::Duration;

    use crate::harness::{BackendError, RedisServer};
    use fusebox::clock::FakeClock;
    use fusebox::{Reason, Registry, State, Trigger, circuit_breaker};
    use fusebox_redis::RedisStore;

    static CLOCK: LazyLock<FakeClock> = LazyLock::new(FakeClock::new);
    static ALONE: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(CLOCK.clone()));
    static FLEET: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(CLOCK.clone()));

    #[derive(Clone, Copy, PartialEq)]
    enum How {
        Ok,
        Fail,
        Hang,
    }

    async fn backend(how: How) -> Result<(), BackendError> {
        match how {
            How::Ok => Ok(()),
            How::Fail => Err(BackendError::Down),
            How::Hang => std::future::pending().await,
        }
    }

    #[circuit_breaker(key = "quorum-recovery", registry = ALONE, window = 10, min_calls = 10, open_for = "100ms", half_open = 2, quorum = 2)]
    async fn on_alone(how: How) -> Result<(), BackendError> {
        backend(how).await
    }

    #[circuit_breaker(key = "quorum-recovery", registry = FLEET, window = 10, min_calls = 10, open_for = "100ms", half_open = 2, quorum = 2)]
    async fn on_fleet(how: How) -> Result<(), BackendError> {
        backend(how).await
    }

    fn reason(result: Result<(), BackendError>) -> Option<Reason> {
        match result {
            Err(BackendError::Rejected(e)) => Some(e.reason()),
            _ => None,
        }
    }

    fn alone() -> fusebox::Snapshot {
        ALONE.get("quorum-recovery").unwrap().snapshot()
    }

    #[tokio::test]
    async fn a_replica_open_alone_recovers_with_its_own_probes() {
        let server = RedisServer::start();
        CLOCK.advance(Duration::from_secs(1_000));
        for registry in [&ALONE, &FLEET] {
            let store = RedisStore::builder(&server.url()).time_from(CLOCK.clone());
            registry.share(store.connect().await.unwrap());
        }
        for _ in 0..10 {
            assert!(on_fleet(How::Ok).await.is_ok());
        }
        // Ten failures of one replica: the shared window is all failures, but one replica is
        // not the quorum; it opens alone.
        for _ in 0..10 {
            assert!(matches!(on_alone(How::Fail).await, Err(BackendError::Down)));
        }
        let s = alone();
        assert!(s.open_here_only() && s.state == State::Open, "{s:?}");
        assert_eq!(
            s.last_transition.as_ref().map(|t| t.trigger),
            Some(Trigger::HereOnly)
        );
        assert_eq!(s.retry_after, Some(Duration::from_millis(100)));
        assert_eq!(reason(on_alone(How::Ok).await), Some(Reason::Open));
        assert!(on_fleet(How::Ok).await.is_ok(), "the others keep calling");

        // The wait over: its first probe fails and reopens it alone, for the same wait.
        CLOCK.advance(Duration::from_millis(100));
        assert!(matches!(on_alone(How::Fail).await, Err(BackendError::Down)));
        let s = alone();
        assert!(s.open_here_only() && s.state == State::Open, "{s:?}");
        assert_eq!(
            s.last_transition.as_ref().map(|t| t.trigger),
            Some(Trigger::ProbeFailed)
        );
        assert_eq!(reason(on_alone(How::Ok).await), Some(Reason::Open));

        // A probe cancelled while its backend hangs is given back: both probes are left, and
        // when they pass it follows the shared circuit again.
        CLOCK.advance(Duration::from_millis(100));
        {
            let mut hung = std::pin::pin!(on_alone(How::Hang));
            let mut cx = Context::from_waker(Waker::noop());
            // The store's answer comes from another process: on a busy host it can take many
            // polls, so poll until the probe is taken (or a generous bound passes).
            let start = std::time::Instant::now();
            while alone().state != State::HalfOpen && start.elapsed() < Duration::from_secs(20) {
                assert!(hung.as_mut().poll(&mut cx).is_pending());
                tokio::task::yield_now().await;
            }
            assert_eq!(alone().state, State::HalfOpen, "the probe was admitted");
        }
        assert!(on_alone(How::Ok).await.is_ok());
        assert!(on_alone(How::Ok).await.is_ok());
        let s = alone();
        assert!(!s.open_here_only() && s.state == State::Closed, "{s:?}");
        assert_eq!(
            s.last_transition.as_ref().map(|t| t.trigger),
            Some(Trigger::ProbesPassed)
        );
        assert_eq!(FLEET.get("quorum-recovery").unwrap().state(), State::Closed);
    }
}
