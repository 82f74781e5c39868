//! One circuit across a fleet of OS processes for every call shape: a real
//! `redis-server`, 2 and 4 replica processes of this test binary, 64 tasks each, the default
//! [`RedisStore`] settings (`RedisStore::connect(url)`), one key per scenario and shape.
//!
//! **Shapes** (each an annotated function of the replica process, or the tower layer): a plain
//! `async fn`, `retry = 3`, `timeout = "10s"`, a sync `fn` (called through `spawn_blocking`) and
//! a tower service (`fusebox_tower::CircuitBreakerLayer`, feature `tower`).
//!
//! **Scenarios**, each on its own keys, on one fleet per test (the processes are reused):
//! - *hand-off*: process A calls one after another until rejected; a fresh process B then calls:
//!   B reaches the backend 0 times (and A made exactly the 5 calls of the threshold where its
//!   calls await the store);
//! - *no outcome lost*: 64 tasks × 20 calls per process, one in four failing, on a window too
//!   large to trip: the shared window's `calls`/`failures` in Redis equal the backend's counts;
//! - *concurrent trip*: every task calls a failing backend until rejected: the fleet's backend
//!   calls stay within the in-flight bound (threshold + processes × 64 where calls await the
//!   store; twice that in-flight term where admission comes from a replica's view: sync
//!   functions and cached mode; in aggregated mode, one flush interval of calls per task and
//!   the calls until the trip reaches the replica),
//!   every task ends rejected, and exactly one `circuit_opened` is
//!   announced across the fleet;
//! - *probes under load*: `half_open = 3`, `open_for = "200ms"`, three trips and recoveries
//!   while a busy loop runs on every core: exactly 3 probes reach the backend per recovery and
//!   one `circuit_opened` per trip;
//! - *Redis faults*: `kill -9` and restart of Redis, then `SIGSTOP`/`SIGCONT`, each while the
//!   fleet calls; afterwards the circuit still trips once and recovers with exactly 3 probes.
//!
//! Probes are counted exactly, whatever the timing: a probe's backend holds until the test
//! releases it, and the test releases the probes only once every task of every process has
//! been admitted or rejected, so no call can be admitted by a circuit those probes closed.
//!
//! Every scenario's checks are collected, and each test fails once at its end with all of them,
//! each saying what was expected and what each process saw.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Condvar, LazyLock, Mutex};
use std::time::{Duration, Instant};

use crate::harness::{BackendError, RedisServer};
use fusebox::{Policy, Reason, Registry, State, circuit_breaker};
use fusebox_redis::{RedisStore, SharedState};

/// The replica's registry; every annotated function below is one of its breakers.
static FLEET: LazyLock<Registry> = LazyLock::new(Registry::new);
/// The replica's store (what it shares [`FLEET`] through), for its count of reports given up.
static STORE: std::sync::OnceLock<RedisStore> = std::sync::OnceLock::new();

const URL_VAR: &str = "FUSEBOX_FLEET_URL";
const MODE_VAR: &str = "FUSEBOX_FLEET_MODE";
/// Diagnosis only: the shapes to run (comma-separated; default all of [`SHAPES`]).
const SHAPES_VAR: &str = "FUSEBOX_FLEET_SHAPES";
/// Diagnosis only: a store timeout in ms instead of the default (to tell a harness fault from
/// a store that degrades under load).
const TIMEOUT_VAR: &str = "FUSEBOX_FLEET_STORE_TIMEOUT_MS";
/// Tasks per replica process.
const TASKS: u32 = 64;
/// Probes per recovery (`half_open`).
const PROBES: u64 = 3;
/// The lag allowed where admission comes from a replica's view in strict mode (sync functions):
/// each task may make this many more calls (of 1 ms each) after the trip was committed, before
/// its replica learns it (aggregated mode: `AGGREGATED_LAG_CALLS`).
const LAG_CALLS: u64 = 10;
/// Cached mode: the fewest failures that trip the concurrent trip's policy (20 calls, all failed):
/// once this many of a replica's failures are unanswered by the script, its view admits no call
/// alone, whatever the host's load.
const GATE: u64 = 20;
/// Aggregated mode's further lag: a replica sums its outcomes for one flush interval (20 ms by
/// default) before it sends them, so each task may make this many more calls of 1 ms.
const FLUSH_CALLS: u64 = 20;
/// Aggregated mode: the calls of 1 ms a task may make, past the flush interval, until its replica
/// learns the trip. The flush waits on a timer and the answer on a round trip, both run by the
/// replica's two runtime workers, which on a host whose cores are all busy wait behind the busy
/// loops and the 64 blocking callers: under double load a replica was seen still admitting 30 ms
/// past the flush interval (its tasks made every one of 50 calls), so this leaves 40.
const AGGREGATED_LAG_CALLS: u64 = 40;
/// Calls per task in the concurrent trip: more than every allowance above, so a replica that never
/// learned the trip would exceed its bound.
const TRIP_CALLS: u32 = 100;

/// Hand-off: five failures of five calls open, for a minute.
const HANDOFF: Policy = Policy::new()
    .window(5)
    .min_calls(5)
    .failure_rate(100)
    .open_for(Duration::from_secs(60));
/// Concurrent trip: twenty failures of twenty calls open, for a minute.
const TRIP: Policy = Policy::new()
    .window(20)
    .min_calls(20)
    .failure_rate(100)
    .open_for(Duration::from_secs(60));
/// No outcome lost: a window larger than every burst, so it never judges.
const TALLY: Policy = Policy::new()
    .window(100_000)
    .min_calls(100_000)
    .failure_rate(100)
    .open_for(Duration::from_secs(60));
/// Probes and faults: ten failures open for 200 ms, then three probes. The lease outlives any
/// wait of the test's release, so a held probe is never re-armed.
const PROBE: Policy = Policy::new()
    .window(10)
    .min_calls(10)
    .failure_rate(100)
    .open_for(Duration::from_millis(200))
    .half_open(3)
    .half_open_lease(Duration::from_secs(30));

// ---------------------------------------------------------------- the replica's side

/// What the backend does with one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// Fails at once (a counted failure).
    Fail,
    /// Fails after 1 ms.
    SlowFail,
    /// Succeeds at once.
    Succeed,
    /// Succeeds after 2 ms.
    Slow,
    /// Succeeds once the test releases the held calls (a probe).
    Hold,
}

/// A gate the held calls wait on, from async tasks and from blocking threads.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
    notify: tokio::sync::Notify,
}

impl Gate {
    fn set(&self, open: bool) {
        *self.open.lock().unwrap() = open;
        if open {
            self.opened.notify_all();
            self.notify.notify_waiters();
        }
    }

    async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            if *self.open.lock().unwrap() {
                return;
            }
            notified.await;
        }
    }

    fn wait_blocking(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }
}

/// One key's backend in one replica: counts the calls that reach it.
#[derive(Default)]
struct Backend {
    calls: AtomicU32,
    failures: AtomicU32,
    held: AtomicU32,
    gate: Gate,
}

impl Backend {
    fn enter(&self, how: How) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match how {
            How::Fail | How::SlowFail => {
                self.failures.fetch_add(1, Ordering::SeqCst);
            }
            How::Hold => {
                self.held.fetch_add(1, Ordering::SeqCst);
            }
            How::Succeed | How::Slow => {}
        }
    }

    async fn run(&self, how: How) -> Result<(), BackendError> {
        self.enter(how);
        match how {
            How::Slow => tokio::time::sleep(Duration::from_millis(2)).await,
            How::SlowFail => tokio::time::sleep(Duration::from_millis(1)).await,
            How::Hold => self.gate.wait().await,
            How::Fail | How::Succeed => {}
        }
        Self::result(how)
    }

    fn run_blocking(&self, how: How) -> Result<(), BackendError> {
        self.enter(how);
        match how {
            How::Slow => std::thread::sleep(Duration::from_millis(2)),
            How::SlowFail => std::thread::sleep(Duration::from_millis(1)),
            How::Hold => self.gate.wait_blocking(),
            How::Fail | How::Succeed => {}
        }
        Self::result(how)
    }

    fn result(how: How) -> Result<(), BackendError> {
        match how {
            How::Fail | How::SlowFail => Err(BackendError::Down),
            How::Succeed | How::Slow | How::Hold => Ok(()),
        }
    }
}

/// How one call ended, as the caller saw it.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    Ok,
    Failed,
    Rejected(Reason, Option<Duration>),
    /// Anything else (a `TimedOut`, an unexpected error).
    Other,
}

impl From<Result<(), BackendError>> for Outcome {
    fn from(result: Result<(), BackendError>) -> Self {
        match result {
            Ok(()) => Outcome::Ok,
            Err(BackendError::Down) => Outcome::Failed,
            Err(BackendError::Rejected(e)) if e.is_rejected() => {
                Outcome::Rejected(e.reason(), e.retry_after())
            }
            Err(BackendError::Rejected(_)) => Outcome::Other,
        }
    }
}

/// The call shapes, in the order of each scenario's `KEYS` and `BACKENDS`.
const SHAPES: [&str; 5] = ["plain", "retry", "timeout", "sync", "tower"];

/// The shapes this build runs (the tower layer needs feature `tower`), or those `SHAPES_VAR` names.
fn shapes() -> Vec<&'static str> {
    let chosen = std::env::var(SHAPES_VAR).ok();
    SHAPES
        .into_iter()
        .filter(|s| cfg!(feature = "tower") || *s != "tower")
        .filter(|s| {
            chosen
                .as_deref()
                .is_none_or(|c| c.split(',').any(|c| c == *s))
        })
        .collect()
}

fn shape_index(shape: &str) -> usize {
    SHAPES
        .iter()
        .position(|s| *s == shape)
        .unwrap_or_else(|| panic!("unknown shape `{shape}`"))
}

/// One scenario's breakers: a key per shape, a backend per shape, and `call`, which makes one
/// call through the given shape.
macro_rules! scenario {
    ($name:ident, $policy:ident, $plain:tt, $retry:tt, $timeout:tt, $sync:tt, $tower:tt) => {
        mod $name {
            use super::*;

            #[allow(dead_code)] // read by the replica role only
            pub(super) const POLICY: Policy = $policy;
            pub(super) const KEYS: [&str; 5] = [$plain, $retry, $timeout, $sync, $tower];
            pub(super) static BACKENDS: LazyLock<[Backend; 5]> = LazyLock::new(Default::default);

            #[circuit_breaker(key = $plain, registry = FLEET, policy = $policy, failure = [Down])]
            async fn plain(b: &'static Backend, how: How) -> Result<(), BackendError> {
                b.run(how).await
            }

            #[circuit_breaker(key = $retry, registry = FLEET, policy = $policy, retry = 3, failure = [Down])]
            async fn retry(b: &'static Backend, how: How) -> Result<(), BackendError> {
                b.run(how).await
            }

            #[circuit_breaker(key = $timeout, registry = FLEET, policy = $policy, timeout = "10s", failure = [Down])]
            async fn timeout(b: &'static Backend, how: How) -> Result<(), BackendError> {
                b.run(how).await
            }

            #[circuit_breaker(key = $sync, registry = FLEET, policy = $policy, failure = [Down])]
            fn sync(b: &'static Backend, how: How) -> Result<(), BackendError> {
                b.run_blocking(how)
            }

            /// One call through `shape`.
            pub(super) async fn call(shape: usize, how: How) -> Outcome {
                let b = &BACKENDS[shape];
                match SHAPES[shape] {
                    "plain" => plain(b, how).await.into(),
                    "retry" => retry(b, how).await.into(),
                    "timeout" => timeout(b, how).await.into(),
                    "sync" => tokio::task::spawn_blocking(move || sync(b, how))
                        .await
                        .expect("the sync call panicked")
                        .into(),
                    #[cfg(feature = "tower")]
                    "tower" => tower_call(KEYS[shape], POLICY, b, how).await,
                    other => panic!("shape `{other}` is not built"),
                }
            }
        }
    };
}

scenario!(
    handoff,
    HANDOFF,
    "handoff-plain",
    "handoff-retry",
    "handoff-timeout",
    "handoff-sync",
    "handoff-tower"
);
scenario!(
    trip,
    TRIP,
    "trip-plain",
    "trip-retry",
    "trip-timeout",
    "trip-sync",
    "trip-tower"
);
scenario!(
    tally,
    TALLY,
    "tally-plain",
    "tally-retry",
    "tally-timeout",
    "tally-sync",
    "tally-tower"
);
scenario!(
    probe,
    PROBE,
    "probe-plain",
    "probe-retry",
    "probe-timeout",
    "probe-sync",
    "probe-tower"
);
scenario!(
    fault,
    PROBE,
    "fault-plain",
    "fault-retry",
    "fault-timeout",
    "fault-sync",
    "fault-tower"
);

/// A tower service on `key`, the layer in front of the backend, and one request through it.
#[cfg(feature = "tower")]
async fn tower_call(key: &'static str, policy: Policy, b: &'static Backend, how: How) -> Outcome {
    use fusebox_tower::CircuitBreakerLayer;
    use tower::{Layer, ServiceExt, service_fn};
    let svc = CircuitBreakerLayer::new(key)
        .registry(&FLEET)
        .policy(policy)
        .layer(service_fn(move |how: How| async move {
            b.run(how).await.map_err(|_| String::from("down"))
        }));
    match svc.oneshot(how).await {
        Ok(()) => Outcome::Ok,
        Err(e) => match e.downcast_ref::<fusebox::Error>() {
            Some(rejection) if rejection.is_rejected() => {
                Outcome::Rejected(rejection.reason(), rejection.retry_after())
            }
            Some(_) => Outcome::Other,
            None => Outcome::Failed,
        },
    }
}

/// A scenario's keys and backends, by name.
struct Scenario {
    keys: [&'static str; 5],
    backends: &'static LazyLock<[Backend; 5]>,
}

fn scenario(name: &str) -> Scenario {
    match name {
        "handoff" => Scenario {
            keys: handoff::KEYS,
            backends: &handoff::BACKENDS,
        },
        "trip" => Scenario {
            keys: trip::KEYS,
            backends: &trip::BACKENDS,
        },
        "tally" => Scenario {
            keys: tally::KEYS,
            backends: &tally::BACKENDS,
        },
        "probe" => Scenario {
            keys: probe::KEYS,
            backends: &probe::BACKENDS,
        },
        "fault" => Scenario {
            keys: fault::KEYS,
            backends: &fault::BACKENDS,
        },
        other => panic!("unknown scenario `{other}`"),
    }
}

async fn call(scenario: &str, shape: usize, how: How) -> Outcome {
    match scenario {
        "handoff" => handoff::call(shape, how).await,
        "trip" => trip::call(shape, how).await,
        "tally" => tally::call(shape, how).await,
        "probe" => probe::call(shape, how).await,
        "fault" => fault::call(shape, how).await,
        other => panic!("unknown scenario `{other}`"),
    }
}

/// What this replica's `tracing` events said, per key: `circuit_opened` of a closed circuit (a
/// trip; a reopen after a failed probe is not one) with `shared = true`, `shared = false`,
/// without a `shared` field; and how often the store degraded.
#[derive(Default)]
struct Seen {
    opened: HashMap<String, [u32; 3]>,
    degraded: u32,
}

static SEEN: LazyLock<Mutex<Seen>> = LazyLock::new(Mutex::default);

/// A `tracing` layer that counts the events [`Seen`] holds.
struct CountEvents;

#[derive(Default)]
struct Fields {
    event: String,
    key: String,
    from: String,
    shared: Option<bool>,
    message: String,
}

impl tracing::field::Visit for Fields {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        match field.name() {
            "event" => self.event = value.to_owned(),
            "key" => self.key = value.to_owned(),
            "from" => self.from = value.to_owned(),
            "message" => self.message = value.to_owned(),
            _ => {}
        }
    }

    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        if field.name() == "shared" {
            self.shared = Some(value);
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for CountEvents {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() != "fusebox" {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let mut seen = SEEN.lock().unwrap();
        if fields.event == "circuit_opened" && fields.from == "closed" {
            let slot = match fields.shared {
                Some(true) => 0,
                Some(false) => 1,
                None => 2,
            };
            seen.opened.entry(fields.key).or_default()[slot] += 1;
        } else if fields.message.starts_with("redis store unavailable") {
            seen.degraded += 1;
        }
    }
}

/// Tallies of one shape's calls in one command.
#[derive(Default)]
struct Tally {
    ok: AtomicU32,
    failed: AtomicU32,
    open: AtomicU32,
    full: AtomicU32,
    other_rejection: AtomicU32,
    other: AtomicU32,
    /// The shortest `retry_after` of an open rejection, in ms (`u32::MAX`: none).
    retry_ms: AtomicU32,
}

impl Tally {
    fn new() -> Arc<Tally> {
        let tally = Arc::new(Tally::default());
        tally.retry_ms.store(u32::MAX, Ordering::SeqCst);
        tally
    }

    /// Counts `outcome`; true when it was a rejection.
    fn count(&self, outcome: Outcome) -> bool {
        match outcome {
            Outcome::Ok => self.ok.fetch_add(1, Ordering::SeqCst),
            Outcome::Failed => self.failed.fetch_add(1, Ordering::SeqCst),
            Outcome::Other => self.other.fetch_add(1, Ordering::SeqCst),
            Outcome::Rejected(reason, wait) => {
                if let Some(wait) = wait {
                    let ms = u32::try_from(wait.as_millis()).unwrap_or(u32::MAX);
                    self.retry_ms.fetch_min(ms, Ordering::SeqCst);
                }
                match reason {
                    Reason::Open => self.open.fetch_add(1, Ordering::SeqCst),
                    Reason::HalfOpenFull => self.full.fetch_add(1, Ordering::SeqCst),
                    _ => self.other_rejection.fetch_add(1, Ordering::SeqCst),
                };
                return true;
            }
        };
        false
    }

    fn rejected(&self) -> u32 {
        self.open.load(Ordering::SeqCst)
            + self.full.load(Ordering::SeqCst)
            + self.other_rejection.load(Ordering::SeqCst)
    }

    fn fields(&self) -> String {
        let retry = self.retry_ms.load(Ordering::SeqCst);
        format!(
            "ok={} failed={} rejected={} open={} full={} other_rejection={} other={} retry_ms={}",
            self.ok.load(Ordering::SeqCst),
            self.failed.load(Ordering::SeqCst),
            self.rejected(),
            self.open.load(Ordering::SeqCst),
            self.full.load(Ordering::SeqCst),
            self.other_rejection.load(Ordering::SeqCst),
            self.other.load(Ordering::SeqCst),
            if retry == u32::MAX { 0 } else { retry },
        )
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "FLEET {line}").unwrap();
    out.flush().unwrap();
}

/// The replica process: runs only when re-invoked by a fleet test (with `FUSEBOX_FLEET_URL`).
/// A tokio multi-thread runtime sharing [`FLEET`] through `RedisStore::connect(url)` (or the
/// cached mode), driven by one command per line on stdin; each command's answer is one
/// `FLEET <shape> field=value…` line per shape, then `FLEET END`.
///
/// - `run SCENARIO SHAPES TASKS MAX STOP FAIL_EVERY SLOW`: per shape, `TASKS` tasks each make up
///   to `MAX` calls (stopping at the first rejection when `STOP` is 1); call `g` of the command fails
///   when `g % FAIL_EVERY == 0` (never when 0), the others succeed; when `SLOW` is 1 a failure
///   takes 1 ms and a success 2 ms.
///   Says `FLEET STARTED` once the tasks are spawned.
/// - `probe SCENARIO SHAPES TASKS`: per shape, `TASKS` tasks make one call each, whose backend
///   holds; answers once every task was admitted or rejected, then waits for `release`, releases
///   the held calls, and answers again once they returned.
/// - `events SCENARIO SHAPES`: the `circuit_opened` events this process announced per key.
#[test]
fn fleet_replica() {
    let Ok(url) = std::env::var(URL_VAR) else {
        return;
    };
    use tracing_subscriber::layer::SubscriberExt;
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(CountEvents))
        .expect("the replica's subscriber");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mode = std::env::var(MODE_VAR).unwrap_or_default();
        let cached = mode == "cached" || mode == "aggregated";
        let timeout = std::env::var(TIMEOUT_VAR)
            .ok()
            .map(|ms| ms.parse().unwrap());
        let store = if !cached && timeout.is_none() {
            // What the issue holds the store to: the default settings.
            RedisStore::connect(&url).await
        } else {
            let mut builder = RedisStore::builder(&url);
            if mode == "cached" {
                builder = builder.mode(fusebox_redis::Mode::Cached);
            }
            if mode == "aggregated" {
                builder = builder.mode(fusebox_redis::Mode::Aggregated);
            }
            if let Some(ms) = timeout {
                builder = builder.timeout(Duration::from_millis(ms));
            }
            builder.connect().await
        }
        .expect("connect");
        let _ = STORE.set(store.clone());
        assert!(FLEET.share(store));
        say("READY");
        let stdin = std::io::stdin();
        let mut lines = stdin.lock().lines();
        while let Some(Ok(line)) = lines.next() {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["run", scenario, shapes, args @ ..] => {
                    let n: Vec<u32> = args.iter().map(|a| a.parse().unwrap()).collect();
                    run(scenario, shapes, n[0], n[1], n[2] == 1, n[3], n[4] == 1).await;
                }
                ["probe", scenario, shapes, tasks] => {
                    probe_round(scenario, shapes, tasks.parse().unwrap(), &mut lines).await;
                }
                ["events", scenario, shapes] => events(scenario, shapes),
                _ => break,
            }
            say("END");
        }
    });
}

async fn run(
    scenario_name: &str,
    shapes: &str,
    tasks: u32,
    max: u32,
    stop: bool,
    fail_every: u32,
    slow: bool,
) {
    let scenario_name: &'static str = Box::leak(scenario_name.to_owned().into_boxed_str());
    let sc = scenario(scenario_name);
    let mut running = Vec::new();
    for shape in shapes.split(',').map(shape_index) {
        let b = &sc.backends[shape];
        let before = (
            b.calls.load(Ordering::SeqCst),
            b.failures.load(Ordering::SeqCst),
        );
        let tally = Tally::new();
        let handles: Vec<_> = (0..tasks)
            .map(|task| {
                let tally = tally.clone();
                tokio::spawn(async move {
                    for i in 0..max {
                        let g = task * max + i;
                        let how = if fail_every != 0 && g.is_multiple_of(fail_every) {
                            if slow { How::SlowFail } else { How::Fail }
                        } else if slow {
                            How::Slow
                        } else {
                            How::Succeed
                        };
                        let rejected = tally.count(call(scenario_name, shape, how).await);
                        if rejected && stop {
                            break;
                        }
                    }
                })
            })
            .collect();
        running.push((shape, before, tally, handles));
    }
    say("STARTED");
    for (shape, before, tally, handles) in running {
        for h in handles {
            h.await.expect("a calling task panicked");
        }
        let b = &sc.backends[shape];
        say(&format!(
            "{} backend={} backend_failures={} {} dropped_reports={}",
            SHAPES[shape],
            b.calls.load(Ordering::SeqCst) - before.0,
            b.failures.load(Ordering::SeqCst) - before.1,
            tally.fields(),
            STORE.get().map_or(0, RedisStore::dropped_reports),
        ));
    }
}

async fn probe_round(
    scenario_name: &str,
    shapes: &str,
    tasks: u32,
    lines: &mut std::io::Lines<std::io::StdinLock<'_>>,
) {
    let scenario_name: &'static str = Box::leak(scenario_name.to_owned().into_boxed_str());
    let sc = scenario(scenario_name);
    let mut running = Vec::new();
    for shape in shapes.split(',').map(shape_index) {
        let b = &sc.backends[shape];
        b.gate.set(false);
        b.held.store(0, Ordering::SeqCst);
        let tally = Tally::new();
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let tally = tally.clone();
                tokio::spawn(
                    async move { tally.count(call(scenario_name, shape, How::Hold).await) },
                )
            })
            .collect();
        running.push((shape, tally, handles));
    }
    // Bounded: every call is admitted (and holds) or rejected within the store timeout.
    let deadline = Instant::now() + Duration::from_secs(30);
    for (shape, tally, _) in &running {
        let b = &sc.backends[*shape];
        while b.held.load(Ordering::SeqCst) + tally.rejected() + tally.other.load(Ordering::SeqCst)
            < tasks
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    for (shape, tally, _) in &running {
        say(&format!(
            "{} held={} {}",
            SHAPES[*shape],
            sc.backends[*shape].held.load(Ordering::SeqCst),
            tally.fields()
        ));
    }
    say("END");
    let release = lines.next().and_then(Result::ok);
    assert_eq!(release.as_deref(), Some("release"), "the test's release");
    for (shape, tally, handles) in running {
        sc.backends[shape].gate.set(true);
        for h in handles {
            h.await.expect("a probing task panicked");
        }
        say(&format!("{} {}", SHAPES[shape], tally.fields()));
    }
}

fn events(scenario_name: &str, shapes: &str) {
    let sc = scenario(scenario_name);
    let seen = SEEN.lock().unwrap();
    for shape in shapes.split(',').map(shape_index) {
        let [shared, local, unmarked] =
            seen.opened.get(sc.keys[shape]).copied().unwrap_or_default();
        say(&format!(
            "{} opened={} shared={shared} local={local} unmarked={unmarked} degraded={}",
            SHAPES[shape],
            shared + local + unmarked,
            seen.degraded
        ));
    }
}

// ---------------------------------------------------------------- the test's side

/// The fleet's `circuit_opened` of closed circuits of `shape` not marked `shared = false`.
fn shared_trips(events: &Answers, shape: &str) -> u64 {
    events.sum(shape, "shared") + events.sum(shape, "unmarked")
}

/// One replica process and the lines it said.
struct Proc {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

/// One shape's answer from one process: its fields.
type Answer = BTreeMap<String, u64>;

/// How long a replica may take to answer one command (generous: a loaded 2-core machine).
const ANSWER_WITHIN: Duration = Duration::from_secs(90);

impl Proc {
    fn spawn(url: &str, mode: &str) -> Proc {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .arg(crate::harness::this_test(module_path!(), "fleet_replica"))
            .args(["--exact", "--nocapture", "--test-threads=1"])
            .env(URL_VAR, url)
            .env(MODE_VAR, mode)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // libtest may have written `test fleet::fleet_replica ... ` on the same line first.
                if let Some(at) = line.find("FLEET ")
                    && tx.send(line[at + "FLEET ".len()..].to_owned()).is_err()
                {
                    break;
                }
            }
        });
        let mut proc = Proc {
            child,
            stdin,
            lines,
        };
        proc.expect("READY");
        proc
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("the replica is alive");
        self.stdin.flush().unwrap();
    }

    fn next(&mut self) -> String {
        match self.lines.recv_timeout(ANSWER_WITHIN) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => {
                panic!("a replica said nothing for {ANSWER_WITHIN:?}")
            }
            Err(RecvTimeoutError::Disconnected) => panic!(
                "a replica exited: {:?} (its panic is above)",
                self.child.wait()
            ),
        }
    }

    fn expect(&mut self, what: &str) {
        let line = self.next();
        assert_eq!(line, what, "the replica's protocol");
    }

    /// Reads one answer: a line per shape until `END` (skipping `STARTED`).
    fn answer(&mut self) -> BTreeMap<String, Answer> {
        let mut answer = BTreeMap::new();
        loop {
            let line = self.next();
            if line == "END" {
                return answer;
            }
            if line == "STARTED" {
                continue;
            }
            let mut words = line.split_whitespace();
            let shape = words.next().unwrap().to_owned();
            let fields = words
                .map(|w| {
                    let (k, v) = w.split_once('=').unwrap();
                    (k.to_owned(), v.parse().unwrap())
                })
                .collect();
            answer.insert(shape, fields);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every process's answer to one command, per shape: `[process] -> fields`.
#[derive(Debug)]
struct Answers(Vec<BTreeMap<String, Answer>>);

impl Answers {
    /// `field` of `shape` in every process.
    fn each(&self, shape: &str, field: &str) -> Vec<u64> {
        self.0
            .iter()
            .map(|a| {
                a.get(shape)
                    .and_then(|f| f.get(field))
                    .copied()
                    .unwrap_or_else(|| panic!("no `{field}` for `{shape}` in {a:?}"))
            })
            .collect()
    }

    fn sum(&self, shape: &str, field: &str) -> u64 {
        self.each(shape, field).iter().sum()
    }

    /// `shape`'s fields in every process, for messages.
    fn show(&self, shape: &str) -> String {
        self.0
            .iter()
            .enumerate()
            .map(|(p, a)| {
                let fields: Vec<String> = a
                    .get(shape)
                    .map(|f| f.iter().map(|(k, v)| format!("{k}={v}")).collect())
                    .unwrap_or_default();
                format!("process {p}: {}", fields.join(" "))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The replica processes of one test, the server they share, and the checks that failed.
struct Fleet {
    procs: Vec<Proc>,
    server: RedisServer,
    mode: &'static str,
    shapes: Vec<&'static str>,
    failed: Vec<String>,
    /// A runtime of the test's own, for reading the shared state.
    rt: tokio::runtime::Runtime,
}

impl Fleet {
    fn start(processes: usize, mode: &'static str) -> Fleet {
        let server = RedisServer::start();
        let procs = (0..processes)
            .map(|_| Proc::spawn(&server.url(), mode))
            .collect();
        Fleet {
            procs,
            server,
            mode,
            shapes: shapes(),
            failed: Vec::new(),
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap(),
        }
    }

    fn csv(&self) -> String {
        self.shapes.join(",")
    }

    /// Sends `command` to every process, then reads every answer.
    fn all(&mut self, command: &str) -> Answers {
        for p in &mut self.procs {
            p.send(command);
        }
        Answers(self.procs.iter_mut().map(Proc::answer).collect())
    }

    /// Sends `command` to every process and waits until each has started it.
    fn start_all(&mut self, command: &str) {
        for p in &mut self.procs {
            p.send(command);
        }
        for p in &mut self.procs {
            p.expect("STARTED");
        }
    }

    fn check(&mut self, holds: bool, message: impl FnOnce() -> String) {
        if !holds {
            self.failed
                .push(format!("[{} mode] {}", self.mode, message()));
        }
    }

    /// Does the calls of this shape await the store (strict mode, an awaiting shape)?
    fn awaits(&self, shape: &str) -> bool {
        self.mode == "strict" && shape != "sync"
    }

    /// The shared state of `key` as Redis holds it (`None`: Redis did not answer).
    fn shared(&self, key: &str, policy: Policy) -> Option<SharedState> {
        let url = self.server.url();
        self.rt.block_on(async {
            let store = RedisStore::connect(&url).await.ok()?;
            store.state(key, policy).await.ok()
        })
    }

    /// Polls (bounded) the shared state of `key` until `done` holds; the last state read.
    fn shared_until(
        &self,
        key: &str,
        policy: Policy,
        mut done: impl FnMut(&SharedState) -> bool,
    ) -> Option<SharedState> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let state = self.shared(key, policy);
            if state.as_ref().is_some_and(&mut done) || Instant::now() > deadline {
                return state;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The shared state of `key`, polled (bounded) until its `calls` reach `calls` or stop
    /// moving for a second (outcomes may travel off the call path).
    fn shared_settled(&self, key: &str, policy: Policy, calls: u64) -> Option<SharedState> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last = (None, Instant::now());
        loop {
            let state = self.shared(key, policy);
            let seen = state.map(|s| u64::from(s.calls));
            if seen != last.0 {
                last = (seen, Instant::now());
            }
            if seen >= Some(calls)
                || last.1.elapsed() > Duration::from_secs(3)
                || Instant::now() > deadline
            {
                return state;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The `circuit_opened` events of `scenario` announced so far, polled (bounded) until each
    /// shape has at least `expected` across the fleet.
    fn events(&mut self, scenario: &str, expected: u64) -> Answers {
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            let events = self.all(&format!("events {scenario} {}", self.csv()));
            let shapes = self.shapes.clone();
            if shapes.iter().all(|s| shared_trips(&events, s) >= expected)
                || Instant::now() > deadline
            {
                return events;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The fleet's announcements of shared trips of `shape` must be `expected`: one per trip
    /// committed in Redis. A trip a replica's local breaker decided alone, while its store did not
    /// answer, is announced with `shared = false` and is not one of them.
    fn check_opened(&mut self, what: &str, events: &Answers, shape: &str, expected: u64) {
        self.check(shared_trips(events, shape) == expected, || {
            format!(
                "{what}, {shape}: expected {expected} shared `circuit_opened` across the fleet, saw {} ({})",
                shared_trips(events, shape),
                events.show(shape)
            )
        });
    }

    /// Hand-off: process 0 calls until rejected; a fresh process then reaches the backend 0 times.
    fn handoff(&mut self) {
        let csv = self.csv();
        let a = Answers(vec![{
            let p = &mut self.procs[0];
            p.send(&format!("run handoff {csv} 1 200 1 1 1"));
            p.answer()
        }]);
        let mut fresh = Proc::spawn(&self.server.url(), self.mode);
        fresh.send(&format!("run handoff {csv} 1 5 1 1 1"));
        let b = Answers(vec![fresh.answer()]);
        drop(fresh);
        for shape in self.shapes.clone() {
            let (a_calls, a_rejected) = (a.sum(shape, "backend"), a.sum(shape, "rejected"));
            let exact = self.awaits(shape);
            self.check(
                a_rejected == 1 && if exact { a_calls == 5 } else { a_calls >= 5 },
                || {
                    format!(
                        "hand-off, {shape}: expected process A to reach the backend {} 5 times, then be rejected; saw {}",
                        if exact { "exactly" } else { "at least" },
                        a.show(shape)
                    )
                },
            );
            self.check(
                b.sum(shape, "backend") == 0 && b.sum(shape, "rejected") == 1,
                || {
                    format!(
                        "hand-off, {shape}: expected a fresh process B to reach the backend 0 times and be rejected at once (A reached it {a_calls} times); saw B {}",
                        b.show(shape)
                    )
                },
            );
        }
    }

    /// The fields of `key`'s hash in Redis but its window slots (`r*`, `t*`), for a failure's
    /// message.
    fn fields(&self, key: &str) -> String {
        let words = crate::harness::reply_on(
            self.server.port,
            &["HGETALL", &format!("{{fusebox:{key}}}")],
        );
        words
            .chunks(2)
            .filter(|kv| !kv[0].starts_with('r') && !kv[0].starts_with('t'))
            .map(|kv| kv.join("="))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// No outcome lost: the shared window's counts equal the backend's.
    fn tally(&mut self) {
        let answers = self.all(&format!("run tally {} {TASKS} 20 0 4 0", self.csv()));
        for (i, shape) in self.shapes.clone().into_iter().enumerate() {
            let key = tally::KEYS[shape_index(shape)];
            let calls = answers.sum(shape, "backend");
            let failures = answers.sum(shape, "backend_failures");
            let shared = self.shared_settled(key, TALLY, calls);
            let seen = shared.map(|s| (u64::from(s.calls), u64::from(s.failures)));
            let fields = self.fields(key);
            self.check(seen == Some((calls, failures)), || {
                format!(
                    "no outcome lost, {shape} (key `{key}`, shape {i}): expected Redis's window to hold (calls, failures) = ({calls}, {failures}), the backend's counts; saw {seen:?} (backend per process: {}; the key's fields but its window slots: {fields})",
                    answers.show(shape)
                )
            });
        }
    }

    /// Concurrent trip: the in-flight bound, every task rejected, one `circuit_opened`.
    fn trip(&mut self) {
        let processes = self.procs.len() as u64;
        let answers = self.all(&format!(
            "run trip {} {TASKS} {TRIP_CALLS} 1 1 1",
            self.csv()
        ));
        let events = self.events("trip", 1);
        for shape in self.shapes.clone() {
            let in_flight = processes * u64::from(TASKS);
            let (bound, allowance) = if self.awaits(shape) {
                (20 + in_flight, format!("{in_flight} in flight"))
            } else if self.mode == "aggregated" {
                (
                    20 + (AGGREGATED_LAG_CALLS + FLUSH_CALLS) * in_flight,
                    format!(
                        "{FLUSH_CALLS} calls of 1 ms per task for the flush interval + {AGGREGATED_LAG_CALLS} while its replica learns the trip"
                    ),
                )
            } else if self.mode == "cached" {
                (
                    20 + processes * GATE + 2 * in_flight,
                    format!(
                        "{GATE} unanswered failures per process, after which its view admits nothing alone, and 2 calls per task (one in flight, one the script admits before the reports arrive)"
                    ),
                )
            } else {
                (
                    20 + LAG_CALLS * in_flight,
                    format!("{LAG_CALLS} calls of 1 ms per task while its replica learns the trip"),
                )
            };
            let calls = answers.sum(shape, "backend");
            self.check(calls <= bound, || {
                format!(
                    "concurrent trip, {shape}: expected at most {bound} backend calls across {processes} processes (threshold 20 + {allowance}), saw {calls} ({})",
                    answers.show(shape)
                )
            });
            self.check(answers.sum(shape, "rejected") == in_flight, || {
                format!(
                    "concurrent trip, {shape}: expected every one of the {in_flight} tasks to end rejected, saw {}",
                    answers.show(shape)
                )
            });
            self.check_opened("concurrent trip", &events, shape, 1);
        }
    }

    /// Trips the circuit of every pending shape of `scenario` (every task calls a failing
    /// backend until rejected).
    fn trip_all(&mut self, scenario: &str, shapes: &[&str]) -> Answers {
        self.all(&format!(
            "run {scenario} {} {TASKS} 50 1 1 1",
            shapes.join(",")
        ))
    }

    /// One recovery of every shape of `scenario`: probe rounds (every task of every process
    /// calls once, the admitted calls hold until all are decided) until Redis says closed. The
    /// probes that reached the backend, per shape, and what each round saw.
    fn recover(&mut self, scenario: &str, policy: Policy) -> BTreeMap<&'static str, (u64, String)> {
        let keys = self::scenario(scenario).keys;
        let mut pending = self.shapes.clone();
        let mut probes: BTreeMap<&'static str, (u64, String)> = BTreeMap::new();
        for _round in 0..50 {
            if pending.is_empty() {
                break;
            }
            let decided = self.all(&format!("probe {scenario} {} {TASKS}", pending.join(",")));
            let returned = self.all("release");
            let mut wait_ms = 250;
            let everyone = self.procs.len() as u64 * u64::from(TASKS);
            for shape in pending.clone() {
                let held = decided.sum(shape, "held");
                let entry = probes.entry(shape).or_default();
                if held == everyone {
                    // Every call was admitted: the circuit was closed everywhere before this
                    // round (a breaker that recovered on its own); these calls are no probes.
                    entry
                        .1
                        .push_str(&format!("[closed: all {everyone} admitted] "));
                    pending.retain(|s| *s != shape);
                    continue;
                }
                entry.0 += held;
                if held > 0 {
                    entry.1.push_str(&format!(
                        "[{} | then {}] ",
                        decided.show(shape),
                        returned.show(shape)
                    ));
                }
                // Outcomes may travel off the call path: wait (bounded) until the half-open
                // state is decided before the next round, so it cannot meet a closed circuit.
                let key = keys[shape_index(shape)];
                let state = self.shared_until(key, policy, |s| s.state != State::HalfOpen);
                if entry.0 > 0 && state.is_some_and(|s| s.state == State::Closed) {
                    pending.retain(|s| *s != shape);
                } else {
                    for ms in decided.each(shape, "retry_ms") {
                        if ms > 0 {
                            wait_ms = wait_ms.min(ms);
                        }
                    }
                }
            }
            if !pending.is_empty() {
                // The open wait has to pass: this is the scenario's time, not a guess at
                // propagation (a round before it ends admits nothing and is repeated).
                std::thread::sleep(Duration::from_millis(wait_ms.clamp(5, 250)));
            }
        }
        for shape in pending {
            let entry = probes.entry(shape).or_default();
            entry.1.push_str("(never closed in 50 rounds) ");
        }
        probes
    }

    /// `recoveries` trips and recoveries of `scenario`: one `circuit_opened` per trip and
    /// exactly `PROBES` probes per recovery, for every shape.
    fn trips_and_recoveries(
        &mut self,
        what: &str,
        scenario: &str,
        policy: Policy,
        trips_before: u64,
        recoveries: u64,
    ) {
        let mut per_shape: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
        let mut details: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for n in 0..recoveries {
            let shapes = self.shapes.clone();
            let tripped = self.trip_all(scenario, &shapes);
            let events = self.events(scenario, trips_before + n + 1);
            for shape in &shapes {
                let tripped_each = tripped.show(shape);
                self.check_opened(
                    &format!("{what}, trip {} (trip: {tripped_each})", n + 1),
                    &events,
                    shape,
                    trips_before + n + 1,
                );
            }
            for (shape, (count, detail)) in self.recover(scenario, policy) {
                per_shape.entry(shape).or_default().push(count);
                details.entry(shape).or_default().push(detail);
            }
        }
        for shape in self.shapes.clone() {
            let seen = per_shape.get(shape).cloned().unwrap_or_default();
            let expected = vec![PROBES; recoveries as usize];
            self.check(seen == expected, || {
                format!(
                    "{what}, {shape}: expected exactly {PROBES} probes per recovery across the fleet, {expected:?}; saw {seen:?}; rounds with probes: {:?}",
                    details.get(shape)
                )
            });
        }
    }

    /// Exactly `half_open` probes per recovery while every core is busy.
    fn probes_under_load(&mut self) {
        let _burner = Burner::start();
        self.trips_and_recoveries("probes under load", "probe", PROBE, 0, 3);
    }

    /// Redis killed and restarted, then stopped and continued, while the fleet calls; after
    /// each, one trip and one recovery with exactly `half_open` probes.
    fn faults(&mut self) {
        let run = format!("run fault {} {TASKS} 30 0 0 1", self.csv());
        self.start_all(&run);
        // `kill -9` (and reap, so the port is free) while the fleet calls; a placeholder server
        // holds the field until Redis comes back on the same port.
        let port = std::mem::replace(&mut self.server, RedisServer::start()).kill();
        self.server = RedisServer::start_on(port);
        let during = Answers(self.procs.iter_mut().map(Proc::answer).collect());
        for shape in self.shapes.clone() {
            self.check(during.sum(shape, "other") == 0, || {
                format!(
                    "kill -9, {shape}: expected every call during the restart to succeed or be rejected, saw {}",
                    during.show(shape)
                )
            });
        }
        self.trips_and_recoveries("after kill -9", "fault", PROBE, 0, 1);

        self.start_all(&run);
        self.server.signal("-STOP");
        // Redis hangs for 300 ms while the fleet calls: the fault itself, not a wait.
        std::thread::sleep(Duration::from_millis(300));
        self.server.signal("-CONT");
        let during = Answers(self.procs.iter_mut().map(Proc::answer).collect());
        for shape in self.shapes.clone() {
            self.check(during.sum(shape, "other") == 0, || {
                format!(
                    "SIGSTOP, {shape}: expected every call while Redis hung to succeed or be rejected, saw {}",
                    during.show(shape)
                )
            });
        }
        self.trips_and_recoveries("after SIGSTOP/SIGCONT", "fault", PROBE, 1, 1);
    }

    fn finish(self) {
        assert!(
            self.failed.is_empty(),
            "{} of the fleet's checks failed:\n{}",
            self.failed.len(),
            self.failed.join("\n")
        );
    }
}

/// One busy loop per core, for as long as it lives.
struct Burner {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Burner {
    fn start() -> Burner {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        let threads = (0..cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut spins = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        spins = std::hint::black_box(spins.wrapping_add(1));
                    }
                })
            })
            .collect();
        Burner { stop, threads }
    }
}

impl Drop for Burner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Every scenario on one fleet: the hand-off, no outcome lost, the concurrent trip, probes under
/// load and the Redis faults.
fn fleet(processes: usize, mode: &'static str) {
    // One fleet at a time: each loads the machine on its own (the probes scenario with a busy
    // loop per core), and its figures should be its own.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut fleet = Fleet::start(processes, mode);
    fleet.handoff();
    fleet.tally();
    fleet.trip();
    fleet.probes_under_load();
    fleet.faults();
    fleet.finish();
}

#[test]
fn fleet_of_two_processes() {
    fleet(2, "strict");
}

#[test]
fn fleet_of_four_processes() {
    fleet(4, "strict");
}

#[test]
fn fleet_of_two_processes_cached() {
    fleet(2, "cached");
}

#[test]
fn fleet_of_two_processes_aggregated() {
    fleet(2, "aggregated");
}
