//! One circuit across replicas: real `redis-server`, separate processes and separate connections.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use crate::harness::{BackendError, RedisServer};
use fusebox::clock::FakeClock;
use fusebox::{Registry, State, circuit_breaker};
use fusebox_redis::{Mode, RedisStore};

static REPLICA: LazyLock<Registry> = LazyLock::new(Registry::new);
static BACKEND_CALLS: AtomicU32 = AtomicU32::new(0);

/// "5 failures open": a window of five calls, all five needed before the rate is judged.
#[circuit_breaker(key = "payments", registry = REPLICA, window = 5, min_calls = 5, open_for = "60s")]
async fn pay() -> Result<(), BackendError> {
    BACKEND_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(BackendError::Down)
}

/// The replica process: runs only when re-invoked by `replicas_table_across_two_processes`.
#[test]
fn replica_process() {
    let Ok(url) = std::env::var("FUSEBOX_REPLICA_URL") else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mode = match std::env::var("FUSEBOX_REPLICA_MODE").as_deref() {
            Ok("cached") => Mode::Cached,
            _ => Mode::Strict,
        };
        let store = RedisStore::builder(&url)
            .mode(mode)
            .connect()
            .await
            .expect("connect");
        assert!(REPLICA.share(store));
        let stdin = std::io::stdin();
        let mut out = std::io::stdout();
        for line in stdin.lock().lines() {
            let line = line.unwrap();
            if line == "wait-open" {
                // Waits (bounded) until this replica has learnt that the circuit is open.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
                while REPLICA.get("payments").map(|b| b.state()) != Some(State::Open)
                    && std::time::Instant::now() < deadline
                {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
                let state = REPLICA.get("payments").map(|b| b.state());
                writeln!(out, "REPLICA false waited {state:?}").unwrap();
                out.flush().unwrap();
                continue;
            }
            if line != "call" {
                break;
            }
            let before = BACKEND_CALLS.load(Ordering::SeqCst);
            let result = pay().await;
            let reached = BACKEND_CALLS.load(Ordering::SeqCst) > before;
            let what = match result {
                Err(BackendError::Down) => "failed".to_owned(),
                Err(BackendError::Rejected(e)) => format!("rejected:{:?}", e.reason()),
                Ok(()) => "ok".to_owned(),
            };
            let state = REPLICA.get("payments").map(|b| b.state());
            writeln!(out, "REPLICA {reached} {what} {state:?}").unwrap();
            out.flush().unwrap();
        }
    });
}

struct Replica {
    child: std::process::Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Replica {
    fn spawn(url: &str, mode: &str) -> Replica {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .arg(crate::harness::this_test(module_path!(), "replica_process"))
            .args(["--exact", "--nocapture", "--test-threads=1"])
            .env("FUSEBOX_REPLICA_URL", url)
            .env("FUSEBOX_REPLICA_MODE", mode)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Replica { child, lines }
    }

    /// One call; returns (reached the backend, outcome).
    fn call(&mut self) -> (bool, String) {
        self.send("call")
    }

    /// Sends `command`; returns (reached the backend, outcome or state).
    fn send(&mut self, command: &str) -> (bool, String) {
        writeln!(self.child.stdin.as_mut().unwrap(), "{command}").unwrap();
        loop {
            let line = self.lines.next().expect("replica answered").unwrap();
            // libtest may have written `test replicas::replica_process ... ` on the same line first.
            if let Some(at) = line.find("REPLICA ") {
                let rest = &line[at + "REPLICA ".len()..];
                let mut parts = rest.splitn(3, ' ');
                let reached = parts.next().unwrap() == "true";
                let what = parts.next().unwrap().to_owned();
                if what == "waited" {
                    return (reached, parts.next().unwrap().to_owned());
                }
                return (reached, what);
            }
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

#[test]
fn replicas_table_across_two_processes() {
    replicas_table("strict");
}

/// Cached mode: the same table once the OPEN committed by call 5 has been pushed to both
/// replicas (each waits, bounded, until it has learnt it; that push is the gap cached mode gives
/// up, measured by `bench/benches/redis.rs`).
#[test]
fn replicas_table_across_two_processes_cached() {
    replicas_table("cached");
}

fn replicas_table(mode: &str) {
    let server = RedisServer::start();
    let mut replicas = [
        Replica::spawn(&server.url(), mode),
        Replica::spawn(&server.url(), mode),
    ];
    let mut table = Vec::new();
    for call in 1..=12 {
        let replica = (call - 1) % 2;
        let (reached, outcome) = replicas[replica].call();
        table.push(format!(
            "call {call:>2} replica {replica}: reached={reached} {outcome}"
        ));
        if call == 5 && mode == "cached" {
            for (r, replica) in replicas.iter_mut().enumerate() {
                let (_, state) = replica.send("wait-open");
                assert_eq!(state, "Some(Open)", "replica {r} learnt OPEN");
            }
        }
        if call <= 5 {
            assert!(reached && outcome == "failed", "{}", table.join("\n"));
        } else {
            assert!(
                !reached && outcome == "rejected:Open",
                "{}",
                table.join("\n")
            );
        }
    }
}

/// Four replicas in one process, each a registry with its own connection, and an annotated
/// `async fn` per replica (the expansion's own path to the store).
macro_rules! replicas {
    ($($registry:ident $call:ident $clock:ident),*) => {$(
        static $registry: LazyLock<Registry> =
            LazyLock::new(|| Registry::with_clock($clock.clone()));

        #[circuit_breaker(key = "exact", registry = $registry, window = 20, min_calls = 20, failure_rate = 50, open_for = "300ms", half_open = 3)]
        async fn $call(admitted: &AtomicUsize, hold: bool) -> Result<(), BackendError> {
            admitted.fetch_add(1, Ordering::SeqCst);
            if hold {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            Err(BackendError::Down)
        }
    )*};
}

replicas!(
    R0 call0 STRICT, R1 call1 STRICT, R2 call2 STRICT, R3 call3 STRICT, R4 call4 STRICT,
    R5 call5 STRICT, R6 call6 CACHED, R7 call7 CACHED, R8 call8 CACHED, R9 call9 CACHED
);

/// The time of the strict replicas (0 to 5) and of the cached ones (6 to 9), for the breakers and
/// the script alike: the open wait passes when the test says so, not when a busy host has taken
/// 300 ms over the calls made meanwhile. One clock per test, as the two tests run at once.
static STRICT: LazyLock<FakeClock> = LazyLock::new(far_from_zero);
static CACHED: LazyLock<FakeClock> = LazyLock::new(far_from_zero);

fn far_from_zero() -> FakeClock {
    let clock = FakeClock::new();
    clock.advance(std::time::Duration::from_secs(1_000));
    clock
}

fn clock_of(replica: usize) -> &'static FakeClock {
    if replica < 6 { &STRICT } else { &CACHED }
}

async fn call_on(replica: usize, admitted: &AtomicUsize, hold: bool) {
    let _ = match replica {
        0 => call0(admitted, hold).await,
        1 => call1(admitted, hold).await,
        2 => call2(admitted, hold).await,
        3 => call3(admitted, hold).await,
        4 => call4(admitted, hold).await,
        5 => call5(admitted, hold).await,
        6 => call6(admitted, hold).await,
        7 => call7(admitted, hold).await,
        8 => call8(admitted, hold).await,
        _ => call9(admitted, hold).await,
    };
}

fn registry_of(replica: usize) -> &'static Registry {
    [&R0, &R1, &R2, &R3, &R4, &R5, &R6, &R7, &R8, &R9][replica]
}

const PROBES: usize = 3;

/// Waits (bounded, polling) until `done` holds; false when it never did.
async fn until(mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !done() {
        if std::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    true
}

#[allow(clippy::too_many_lines)] // one scenario, step after step; a test, not a call path
async fn exactness(replicas: &'static [usize], prefix: &str, mode: Mode) {
    let server = RedisServer::start();
    let committed = Arc::new(Mutex::new(Vec::new()));
    for &r in replicas {
        let store = RedisStore::builder(&server.url())
            .prefix(prefix)
            .mode(mode)
            .time_from(clock_of(r).clone())
            .connect()
            .await
            .unwrap();
        assert_eq!(store.is_cached(), mode == Mode::Cached);
        let registry = registry_of(r);
        assert!(registry.share(store));
        let committed = committed.clone();
        registry.on_transition(move |t| {
            committed
                .lock()
                .unwrap()
                .push((r, t.from, t.to, t.calls, t.failure_rate))
        });
    }
    // 64 concurrent callers on a brand-new key, every call failing.
    let admitted = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for caller in 0..64 {
        let admitted = admitted.clone();
        tasks.push(tokio::spawn(async move {
            call_on(replicas[caller % replicas.len()], &admitted, false).await
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    if mode == Mode::Cached {
        // Outcomes travel off the call path: wait until the trip is committed and every replica
        // has learnt it.
        assert!(
            until(|| committed.lock().unwrap().iter().any(|t| t.2 == State::Open)).await,
            "OPEN committed"
        );
        assert!(
            until(|| replicas
                .iter()
                .all(|&r| registry_of(r).get("exact").map(|b| b.state()) == Some(State::Open)))
            .await,
            "every replica learnt OPEN"
        );
    }
    let opened: Vec<_> = committed
        .lock()
        .unwrap()
        .iter()
        .filter(|t| t.2 == State::Open)
        .cloned()
        .collect();
    assert_eq!(
        opened.len(),
        1,
        "exactly one replica reports committing OPEN: {opened:?}"
    );
    // The report that reached the threshold committed it: 20 calls, 20 failures counted in Redis,
    // none lost to a concurrent write.
    assert_eq!(
        (opened[0].3, opened[0].4),
        (20, 100.0),
        "calls and failure rate at the trip"
    );
    assert!(admitted.load(Ordering::SeqCst) >= 20);
    // Every report after the trip was made under the older generation: it changed nothing (the
    // new generation's window is empty).
    let policy = registry_of(replicas[0]).get("exact").unwrap().policy();
    let store = RedisStore::builder(&server.url())
        .prefix(prefix)
        .time_from(clock_of(replicas[0]).clone())
        .connect()
        .await
        .unwrap();
    let shared = store.state("exact", policy).await.unwrap();
    assert_eq!(
        (shared.state, shared.calls, shared.failures),
        (State::Open, 0, 0)
    );
    // Strict mode: once OPEN is committed, no replica admits a call (cached mode: once every
    // replica has learnt it).
    let late = Arc::new(AtomicUsize::new(0));
    for caller in 0..64 {
        call_on(replicas[caller % replicas.len()], &late, false).await;
    }
    assert_eq!(
        late.load(Ordering::SeqCst),
        0,
        "calls admitted after OPEN was committed"
    );

    // After the wait, exactly N probes are admitted across all replicas.
    clock_of(replicas[0]).advance(std::time::Duration::from_millis(400));
    let probes = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for caller in 0..64 {
        let probes = probes.clone();
        tasks.push(tokio::spawn(async move {
            call_on(replicas[caller % replicas.len()], &probes, true).await
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        probes.load(Ordering::SeqCst),
        PROBES,
        "probes admitted across replicas"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_across_two_and_four_replicas() {
    // Each registry is a `static`, shared once: two of them, then four others.
    exactness(&[4, 5], "two", Mode::Strict).await;
    exactness(&[0, 1, 2, 3], "four", Mode::Strict).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_across_four_replicas_cached() {
    exactness(&[6, 7, 8, 9], "cached", Mode::Cached).await;
}

static BURST: LazyLock<Registry> = LazyLock::new(Registry::new);
static BURST_CALLS: AtomicU32 = AtomicU32::new(0);

/// Every one of 64 outcomes is needed to trip: a lost outcome leaves the circuit closed.
#[circuit_breaker(key = "burst", registry = BURST, window = 64, min_calls = 64, failure_rate = 100, open_for = "60s")]
async fn burst() -> Result<(), BackendError> {
    BURST_CALLS.fetch_add(1, Ordering::SeqCst);
    tokio::task::yield_now().await;
    Err(BackendError::Down)
}

/// A burst replica: runs only when re-invoked by `exact_across_separate_processes`. Connects,
/// says `READY`, waits for `go`, makes `FUSEBOX_BURST_CALLERS` concurrent calls, reports, then
/// makes as many more one after another (all must be rejected) and reports again.
#[test]
fn burst_process() {
    let Ok(url) = std::env::var("FUSEBOX_BURST_URL") else {
        return;
    };
    let callers: usize = std::env::var("FUSEBOX_BURST_CALLERS")
        .unwrap()
        .parse()
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = RedisStore::connect(&url).await.expect("connect");
        assert!(BURST.share(store));
        let committed = Arc::new(Mutex::new(Vec::new()));
        let seen = committed.clone();
        BURST.on_transition(move |t| {
            seen.lock()
                .unwrap()
                .push((t.from, t.to, t.calls, t.failure_rate))
        });
        let mut out = std::io::stdout();
        writeln!(out, "BURST READY").unwrap();
        out.flush().unwrap();
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).unwrap();
        let tasks: Vec<_> = (0..callers).map(|_| tokio::spawn(burst())).collect();
        for task in tasks {
            let _ = task.await.unwrap();
        }
        let admitted = BURST_CALLS.load(Ordering::SeqCst);
        let opened: Vec<_> = committed
            .lock()
            .unwrap()
            .iter()
            .filter(|t| t.1 == State::Open)
            .map(|t| format!("{}/{}", t.2, t.3))
            .collect();
        writeln!(out, "BURST {admitted} {}", opened.join(",")).unwrap();
        out.flush().unwrap();
        line.clear();
        std::io::stdin().read_line(&mut line).unwrap();
        for _ in 0..callers {
            let _ = burst().await;
        }
        let late = BURST_CALLS.load(Ordering::SeqCst) - admitted;
        writeln!(out, "BURST {late} late").unwrap();
        out.flush().unwrap();
    });
}

/// Separate OS processes, 64 concurrent callers in total on a brand-new key: every outcome is
/// counted (the 64th report commits OPEN with 64 failures), exactly one replica commits it, and
/// no call is admitted after it (strict mode).
#[test]
fn exact_across_separate_processes() {
    const PROCESSES: usize = 2;
    let server = RedisServer::start();
    let mut children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            let mut child = Command::new(std::env::current_exe().unwrap())
                .arg(crate::harness::this_test(module_path!(), "burst_process"))
                .args(["--exact", "--nocapture", "--test-threads=1"])
                .env("FUSEBOX_BURST_URL", server.url())
                .env("FUSEBOX_BURST_CALLERS", (64 / PROCESSES).to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let lines = BufReader::new(child.stdout.take().unwrap()).lines();
            (child, lines)
        })
        .collect();
    let next = |lines: &mut std::io::Lines<BufReader<std::process::ChildStdout>>| loop {
        let line = lines.next().expect("burst replica answered").unwrap();
        if let Some(at) = line.find("BURST ") {
            return line[at + "BURST ".len()..].to_owned();
        }
    };
    for (_, lines) in &mut children {
        assert_eq!(next(lines), "READY");
    }
    for (child, _) in &mut children {
        writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
    }
    let mut admitted = 0;
    let mut opened = Vec::new();
    for (_, lines) in &mut children {
        let report = next(lines);
        let (count, commits) = report.split_once(' ').unwrap_or((&report, ""));
        admitted += count.parse::<u32>().unwrap();
        opened.extend(
            commits
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_owned),
        );
    }
    assert_eq!(
        admitted, 64,
        "every caller admitted while the window filled"
    );
    assert_eq!(
        opened,
        ["64/100"],
        "exactly one replica commits OPEN, with all 64 failures counted"
    );
    for (child, _) in &mut children {
        writeln!(child.stdin.as_mut().unwrap(), "again").unwrap();
    }
    for (_, lines) in &mut children {
        assert_eq!(
            next(lines),
            "0 late",
            "a call admitted after OPEN was committed"
        );
    }
    for (mut child, _) in children {
        drop(child.stdin.take());
        assert!(child.wait().unwrap().success());
    }
}
