//! A fleet on one hot key: what Redis does, and how fast an outage reaches every replica, in
//! strict, cached and aggregated mode side by side.
//!
//! ```text
//! cargo run --release -p fusebox-bench --features redis --example fleet -- --replicas 50 --rate 20000
//! ```
//!
//! Starts its own `redis-server` (or uses `REDIS_URL`), then for each mode: `--replicas` R
//! simulated replicas in this process, each its own [`RedisStore`] (its own connection, reporting
//! task and, in cached and aggregated mode, subscription) and its own [`Registry`], calling one
//! hot key (`payment`, 90% of the calls) and three cold keys at `--rate` calls per second in all
//! for `--seconds` (default 3). The hot key's backend fails every call from one second before the
//! end (the onset); the cold keys' never do. Policy: a count window of 100 calls, 20 at least,
//! 50% failures open it for a minute.
//!
//! Prints per mode: the script calls per second while healthy and after the onset (`cmdstat_evalsha`
//! of `INFO commandstats`), Redis's CPU per second (`used_cpu_user` + `used_cpu_sys` of `INFO
//! cpu`), the time from the onset to the first rejection on every replica (p50/p99/max, with how
//! many replicas saw one), the hot key's backend calls admitted after the OPEN was committed,
//! and the calls the driver achieved.
//!
//! And the time OPEN takes once the threshold is crossed, against the target of one flush
//! interval plus two round trips:
//! - **crossed**: the instant the fleet's failures meet the rule on the shared window. Every hot
//!   call records when its backend answered and whether it failed; after the run, those
//!   outcomes, in the order they completed across the fleet, are replayed through the policy's
//!   count window (the last 100, at least 20, at least 50 % failures): the completion of the
//!   first failed call after the onset that makes the rule true is the crossing. (The store sees
//!   each replica's outcomes when they arrive, strict and cached mode one by one, aggregated
//!   mode in sums; this is the instant an ideal shared window would have tripped.)
//! - **OPEN committed**: the first replica that learns the OPEN it committed (its transition
//!   hook, run when the script's answer is applied).
//! - **open on every replica**: a thread outside the replicas' runtime reads every replica's hot
//!   breaker every 0.25 ms from the onset and notes when each is first open.
//! - **round trip**: a `PING` every 5 ms on a connection of its own, from a task of the
//!   replicas' runtime (so its figure includes that runtime's scheduling), p50 and p99 over the
//!   run; **timer late**: how late a task of that runtime that sleeps 5 ms at a time wakes (the
//!   scheduling delay every replica's flush timer pays too).
//! - **load**: the share of the run each worker thread of the replicas' runtime ran and how long
//!   it waited for a CPU while runnable, how long Redis waited for a CPU (`/proc/*/schedstat`),
//!   and the host's CPU pressure (`/proc/pressure/cpu`: the share of the run during which some
//!   runnable task waited for a CPU).
//! - **target**: the flush interval (0 in strict and cached mode) plus two round trips, at the
//!   `PING`'s p50 and at its p99 (a p99 latency against the round trips a p99 call meets);
//!   **met** when "crossed → open on every replica" at p99 is within it, for each.
//!
//! Options: `--replicas R` (10), `--rate N` calls a second in all (20,000), `--seconds S` (3),
//! `--modes strict,cached,aggregated` (all three, in that order), `--flush-ms F` aggregated
//! mode's flush interval (20), `--threads T` the replicas' runtime's worker threads (the
//! machine's cores).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fusebox::{Policy, Registry};
use fusebox_redis::{Mode, RedisStore};

/// The backend's error.
#[derive(Debug)]
struct Down;

/// The value after `name` on the command line.
fn text_arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn arg(name: &str, default: u64) -> u64 {
    text_arg(name).map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("`{name}` takes a number, got `{v}`"))
    })
}

/// `field` of `INFO section`, summed over the lines that start with it.
fn info(conn: &mut redis::Connection, section: &str, field: &str) -> f64 {
    let text: String = redis::cmd("INFO").arg(section).query(conn).unwrap();
    text.lines()
        .filter_map(|line| line.strip_prefix(field))
        .filter_map(|rest| {
            let value = rest.trim_start_matches(':').trim_start_matches("calls=");
            value.split(',').next()?.trim().parse::<f64>().ok()
        })
        .sum()
}

fn script_calls(conn: &mut redis::Connection) -> f64 {
    info(conn, "commandstats", "cmdstat_evalsha:calls=")
}

fn redis_cpu(conn: &mut redis::Connection) -> f64 {
    info(conn, "cpu", "used_cpu_user:") + info(conn, "cpu", "used_cpu_sys:")
}

/// The policy's count window, `min_calls` and failure rate (%), also replayed to find the
/// crossing.
const WINDOW: usize = 100;
const MIN_CALLS: usize = 20;
const FAILURE_RATE: usize = 50;

const POLICY: Policy = Policy::new()
    .window(WINDOW as u32)
    .min_calls(MIN_CALLS as u32)
    .failure_rate(FAILURE_RATE as u8)
    .open_for(Duration::from_secs(60));

/// One replica: its registry (leaked: the fleet lives as long as the process).
struct Replica {
    registry: &'static Registry,
    /// Nanoseconds from the run's start to this replica's first rejection on the hot key (0: none).
    rejected_at: AtomicU64,
    /// Nanoseconds from the run's start to when this replica's hot breaker was first seen open
    /// (polled every 0.25 ms; 0: never).
    open_at: AtomicU64,
}

/// A hot call's outcome: nanoseconds from the run's start to when its backend answered, and
/// whether it failed.
type Outcome = (u64, bool);

/// One mode's figures.
struct Row {
    mode: &'static str,
    healthy_calls_per_s: f64,
    failing_calls_per_s: f64,
    cpu_per_s: f64,
    open_ms: Vec<f64>,
    /// From the onset to the OPEN the store committed.
    commit_ms: f64,
    /// From the commit to each replica's breaker seen open.
    reach_ms: Vec<f64>,
    replicas: usize,
    after_commit: u64,
    driven: u64,
    /// From the onset to the crossing of the threshold (`None`: never crossed).
    crossed_ms: Option<f64>,
    /// From the crossing to the OPEN committed.
    crossed_commit_ms: f64,
    /// From the crossing to each replica's breaker seen open.
    crossed_reach_ms: Vec<f64>,
    /// The `PING` round trips (ms).
    rtt_ms: Vec<f64>,
    /// How late the timer task woke (ms).
    late_ms: Vec<f64>,
    /// The flush interval (ms), 0 outside aggregated mode.
    flush_ms: f64,
    /// How the host ran the replicas and Redis.
    load: Load,
}

fn main() {
    let replicas = usize::try_from(arg("--replicas", 10)).unwrap().max(1);
    let rate = arg("--rate", 20_000).max(1);
    let seconds = arg("--seconds", 3).max(2);
    let flush = Duration::from_millis(arg("--flush-ms", 20).max(1));
    let threads = usize::try_from(arg("--threads", 0)).unwrap();
    let modes = text_arg("--modes").unwrap_or_else(|| "strict,cached,aggregated".to_owned());
    let modes: Vec<(Mode, &'static str)> = modes
        .split(',')
        .map(|name| match name.trim() {
            "strict" => (Mode::Strict, "strict"),
            "cached" => (Mode::Cached, "cached"),
            "aggregated" => (Mode::Aggregated, "aggregated"),
            other => panic!("`--modes` takes `strict`, `cached` and `aggregated`, got `{other}`"),
        })
        .collect();
    let (url, _server) = fusebox_bench::redis_server();
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if threads > 0 {
        builder.worker_threads(threads);
    }
    let rt = builder.enable_all().build().unwrap();
    let mut rows = Vec::new();
    for (mode, name) in modes {
        let _: () = redis::cmd("FLUSHALL").query(&mut conn).unwrap();
        let setup = Setup {
            url: &url,
            mode,
            name,
            replicas,
            rate,
            seconds,
            flush,
        };
        rows.push(rt.block_on(run(&setup, &mut conn)));
    }
    println!(
        "\n{replicas} replicas, {rate} calls/s in all (90% on one hot key), onset after {} s; Redis on loopback; {} worker threads; flush interval {} ms",
        seconds - 1,
        rt.metrics().num_workers(),
        flush.as_millis()
    );
    println!(
        "| mode | script calls/s healthy | after the onset | Redis CPU | onset → OPEN committed | committed → open on every replica p50 / p99 / max | onset → first rejection p50 / p99 / max | hot calls admitted after OPEN committed | calls driven/s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in &rows {
        println!(
            "| {} | {:.0} | {:.0} | {:.0}% | {:.1} ms | {} | {} | {} | {:.0} |",
            row.mode,
            row.healthy_calls_per_s,
            row.failing_calls_per_s,
            row.cpu_per_s * 100.0,
            row.commit_ms,
            spread(&row.reach_ms, row.replicas),
            spread(&row.open_ms, row.replicas),
            row.after_commit,
            row.driven as f64 / seconds as f64,
        );
    }
    println!(
        "\n| mode | onset → crossed | crossed → OPEN committed | crossed → open on every replica p50 / p99 / max | round trip (PING) p50 / p99 | timer late p50 / p99 | worker threads busy / waiting for a CPU | Redis waiting for a CPU | host CPU pressure | target: flush + 2 round trips at p50 / p99 | p99 within it |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for row in &rows {
        let Some(crossed) = row.crossed_ms else {
            println!("| {} | never crossed | | | | | | | | | |", row.mode);
            continue;
        };
        let rtt_50 = quantile(&row.rtt_ms, 0.5);
        let rtt_99 = quantile(&row.rtt_ms, 0.99);
        let target = row.flush_ms + 2.0 * rtt_50;
        let target_99 = row.flush_ms + 2.0 * rtt_99;
        let p99 = if row.crossed_reach_ms.len() == row.replicas {
            quantile(&row.crossed_reach_ms, 0.99)
        } else {
            f64::INFINITY
        };
        println!(
            "| {} | {crossed:.1} ms | {:.1} ms | {} | {rtt_50:.2} / {:.2} ms | {:.2} / {:.2} ms | {:.0}% / {:.0} ms/s | {:.0} ms/s | {:.0}% | {target:.1} / {target_99:.1} ms | {} / {} |",
            row.mode,
            row.crossed_commit_ms,
            spread(&row.crossed_reach_ms, row.replicas),
            rtt_99,
            quantile(&row.late_ms, 0.5),
            quantile(&row.late_ms, 0.99),
            row.load.busy * 100.0,
            row.load.wait_ms_per_s,
            row.load.redis_wait_ms_per_s,
            row.load.pressure * 100.0,
            if p99 <= target { "met" } else { "missed" },
            if p99 <= target_99 { "met" } else { "missed" },
        );
    }
}

/// Nanoseconds the tokio worker threads of this process ran and spent runnable but waiting for a
/// CPU (the first two fields of `/proc/self/task/*/schedstat`), and how many there are; `None`
/// where the kernel does not say.
fn cpu_wait() -> Option<(u64, u64, usize)> {
    let mut ran = 0;
    let mut waited = 0;
    let mut workers = 0;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let path = task.path();
        let is_worker = std::fs::read_to_string(path.join("comm"))
            .is_ok_and(|name| name.starts_with("tokio-rt-worker"));
        if !is_worker {
            continue;
        }
        if let Some((run, wait)) = schedstat(&path.join("schedstat")) {
            ran += run;
            waited += wait;
            workers += 1;
        }
    }
    (workers > 0).then_some((ran, waited, workers))
}

/// Microseconds some runnable task of the host waited for a CPU (`total` of the `some` line of
/// `/proc/pressure/cpu`); `None` where the kernel does not say.
fn cpu_pressure() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    let some = text.lines().find(|line| line.starts_with("some"))?;
    some.split_whitespace()
        .find_map(|field| field.strip_prefix("total="))?
        .parse()
        .ok()
}

/// How the host ran the replicas and Redis during a run (NaN where the kernel does not say).
#[derive(Clone, Copy)]
struct Load {
    /// The share of the run each worker thread of the replicas' runtime ran.
    busy: f64,
    /// Milliseconds per second each worker thread of the replicas' runtime waited for a CPU
    /// while runnable.
    wait_ms_per_s: f64,
    /// Milliseconds per second Redis's main thread waited for a CPU while runnable.
    redis_wait_ms_per_s: f64,
    /// The share of the run during which some runnable task of the host waited for a CPU.
    pressure: f64,
}

/// The counters [`Load`] is the difference of, read at a run's start.
struct LoadStart {
    at: Instant,
    workers: Option<(u64, u64, usize)>,
    redis: u32,
    redis_times: Option<(u64, u64)>,
    pressure: Option<u64>,
}

impl LoadStart {
    fn now(conn: &mut redis::Connection) -> LoadStart {
        let redis = redis_pid(conn);
        LoadStart {
            at: Instant::now(),
            workers: cpu_wait(),
            redis,
            redis_times: sched_times(redis),
            pressure: cpu_pressure(),
        }
    }

    /// The load since the start.
    fn since(&self) -> Load {
        let seconds = self.at.elapsed().as_secs_f64();
        let ms_per_s = |ns: u64| ns as f64 / 1e6 / seconds;
        let (busy, wait_ms_per_s) = match (self.workers, cpu_wait()) {
            (Some((ran_0, waited_0, _)), Some((ran, waited, workers))) => (
                ms_per_s(ran.saturating_sub(ran_0)) / 1e3 / workers as f64,
                ms_per_s(waited.saturating_sub(waited_0)) / workers as f64,
            ),
            _ => (f64::NAN, f64::NAN),
        };
        let redis_wait_ms_per_s = match (self.redis_times, sched_times(self.redis)) {
            (Some((_, before)), Some((_, after))) => ms_per_s(after.saturating_sub(before)),
            _ => f64::NAN,
        };
        let pressure = match (self.pressure, cpu_pressure()) {
            (Some(before), Some(after)) => after.saturating_sub(before) as f64 / 1e6 / seconds,
            _ => f64::NAN,
        };
        Load {
            busy,
            wait_ms_per_s,
            redis_wait_ms_per_s,
            pressure,
        }
    }
}

/// What one mode's run is given.
struct Setup<'a> {
    url: &'a str,
    mode: Mode,
    name: &'static str,
    replicas: usize,
    rate: u64,
    seconds: u64,
    flush: Duration,
}

impl Setup<'_> {
    /// The flush interval in milliseconds, 0 outside aggregated mode.
    fn flush_ms(&self) -> f64 {
        if matches!(self.mode, Mode::Aggregated) {
            self.flush.as_secs_f64() * 1e3
        } else {
            0.0
        }
    }
}

/// `replicas` replicas in `mode`, each with the hot and cold keys registered.
async fn start_fleet(setup: &Setup<'_>) -> (Vec<Arc<Replica>>, Vec<RedisStore>) {
    let mut fleet = Vec::with_capacity(setup.replicas);
    let mut stores = Vec::with_capacity(setup.replicas);
    for _ in 0..setup.replicas {
        let registry: &'static Registry = Box::leak(Box::new(Registry::new()));
        let store = RedisStore::builder(setup.url)
            .mode(setup.mode)
            .flush_interval(setup.flush)
            .connect()
            .await
            .expect("connect");
        registry.share(store.clone());
        stores.push(store);
        for key in ["payment", "cold-0", "cold-1", "cold-2"] {
            registry.breaker(key, POLICY).unwrap();
        }
        fleet.push(Arc::new(Replica {
            registry,
            rejected_at: AtomicU64::new(0),
            open_at: AtomicU64::new(0),
        }));
    }
    (fleet, stores)
}

/// Nanoseconds since `start`.
fn nanos_since(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// One replica's calls: `per_ms` a millisecond until `end`, one in ten on a cold key; the hot
/// key's backend fails once `failing` is set. Returns the hot calls' outcomes (those whose
/// backend was called).
#[allow(clippy::too_many_arguments)]
async fn drive(
    replica: Arc<Replica>,
    i: u64,
    per_ms: f64,
    end: Instant,
    start: Instant,
    failing: Arc<AtomicBool>,
    committed: Arc<AtomicU64>,
    after_commit: Arc<AtomicU64>,
    driven: Arc<AtomicU64>,
) -> Vec<Outcome> {
    let hot = replica.registry.get("payment").unwrap();
    let cold: Vec<_> = (0..3)
        .map(|k| replica.registry.get(&format!("cold-{k}")).unwrap())
        .collect();
    let mut outcomes = Vec::new();
    let mut owed = 0.0;
    let mut n = i;
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while Instant::now() < end {
        tick.tick().await;
        owed += per_ms;
        while owed >= 1.0 {
            owed -= 1.0;
            n += 1;
            driven.fetch_add(1, Ordering::Relaxed);
            if n.is_multiple_of(10) {
                let breaker = &cold[(n / 10 % 3) as usize];
                let _ = breaker
                    .call_async(async { Ok::<(), Down>(()) }, |_| true)
                    .await;
                continue;
            }
            let bad = failing.load(Ordering::Acquire);
            let mut answered = None;
            let called = hot
                .call_async(
                    async {
                        // The backend answers now.
                        answered = Some(nanos_since(start));
                        if bad { Err(Down) } else { Ok(()) }
                    },
                    |_| true,
                )
                .await;
            if let Some(at) = answered {
                outcomes.push((at, bad));
            }
            let now = nanos_since(start);
            match called {
                Err(_) => {
                    let _ = replica.rejected_at.compare_exchange(
                        0,
                        now,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                }
                Ok(_) => {
                    let at = committed.load(Ordering::Acquire);
                    if at != 0 && now > at {
                        after_commit.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
    }
    outcomes
}

/// Milliseconds from `from` to each of `instants` (nanoseconds from the run's start).
fn ms_from(from: u64, instants: &[u64]) -> Vec<f64> {
    instants
        .iter()
        .map(|&at| (at as f64 - from as f64) / 1e6)
        .collect()
}

/// The `q` quantile of `values` (NaN when empty).
fn quantile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted
        .get(((sorted.len() as f64 - 1.0) * q).round() as usize)
        .copied()
        .unwrap_or(f64::NAN)
}

/// p50 / p99 / max of `ms`, and how many of `of` replicas it covers when not all.
fn spread(ms: &[f64], of: usize) -> String {
    let all = if ms.len() == of {
        String::new()
    } else {
        format!(" ({} of {of})", ms.len())
    };
    format!(
        "{:.1} / {:.1} / {:.1} ms{all}",
        quantile(ms, 0.5),
        quantile(ms, 0.99),
        quantile(ms, 1.0)
    )
}

/// The instant (nanoseconds from the start) the fleet's failures first meet the policy's rule on
/// an ideal shared count window, after `onset`: `outcomes` replayed in the order they
/// completed, the completion of the first failed call after which the last [`WINDOW`] outcomes
/// hold at least [`MIN_CALLS`] calls and [`FAILURE_RATE`] % failures.
fn crossing(mut outcomes: Vec<Outcome>, onset: u64) -> Option<u64> {
    outcomes.sort_unstable();
    let mut window = VecDeque::with_capacity(WINDOW);
    let mut failures = 0;
    for (at, failed) in outcomes {
        if window.len() == WINDOW && window.pop_front() == Some(true) {
            failures -= 1;
        }
        window.push_back(failed);
        failures += usize::from(failed);
        if failed
            && at >= onset
            && window.len() >= MIN_CALLS
            && failures * 100 >= FAILURE_RATE * window.len()
        {
            return Some(at);
        }
    }
    None
}

/// Reads every replica's hot breaker every 0.25 ms until `end`, on a thread of its own, noting
/// when each is first seen open.
fn watch(fleet: Vec<Arc<Replica>>, start: Instant, end: Instant) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let hot: Vec<_> = fleet
            .iter()
            .map(|replica| replica.registry.get("payment").unwrap())
            .collect();
        while Instant::now() < end {
            let now = nanos_since(start);
            for (replica, breaker) in fleet.iter().zip(&hot) {
                if replica.open_at.load(Ordering::Relaxed) == 0
                    && breaker.state() == fusebox::State::Open
                {
                    replica.open_at.store(now, Ordering::Release);
                }
            }
            std::thread::sleep(Duration::from_micros(250));
        }
    })
}

/// Sends a `PING` every 5 ms until `end` on a connection of its own; the round trips, in
/// milliseconds.
async fn ping(url: String, end: Instant) -> Vec<f64> {
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut rtt = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(5));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while Instant::now() < end {
        tick.tick().await;
        let sent = Instant::now();
        let _: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
        rtt.push(sent.elapsed().as_secs_f64() * 1e3);
    }
    rtt
}

/// Sleeps 5 ms at a time until `end`; how late each sleep ended, in milliseconds (the
/// scheduling delay of a timer of the replicas' runtime).
async fn timer(end: Instant) -> Vec<f64> {
    let mut late = Vec::new();
    let mut due = tokio::time::Instant::now();
    while Instant::now() < end {
        due += Duration::from_millis(5);
        tokio::time::sleep_until(due).await;
        late.push(due.elapsed().as_secs_f64() * 1e3);
        due = due.max(tokio::time::Instant::now());
    }
    late
}

/// Redis's process id (`process_id` of `INFO server`).
fn redis_pid(conn: &mut redis::Connection) -> u32 {
    info(conn, "server", "process_id:") as u32
}

/// Nanoseconds process `pid`'s main thread ran and waited for a CPU while runnable (its
/// `/proc/<pid>/schedstat`); `None` where the kernel does not say (or Redis runs elsewhere).
fn sched_times(pid: u32) -> Option<(u64, u64)> {
    schedstat(std::path::Path::new(&format!("/proc/{pid}/schedstat")))
}

/// The first two fields of a `schedstat` file: nanoseconds run, nanoseconds runnable and waiting.
fn schedstat(path: &std::path::Path) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(path).ok()?;
    let mut fields = stat.split_whitespace().map(str::parse::<u64>);
    Some((fields.next()?.ok()?, fields.next()?.ok()?))
}

/// Nanoseconds from `start` to the OPEN the store committed on the hot key (the first replica
/// whose transition hook sees it), 0 until then.
fn commits(fleet: &[Arc<Replica>], start: Instant) -> Arc<AtomicU64> {
    let committed = Arc::new(AtomicU64::new(0));
    for replica in fleet {
        let committed = committed.clone();
        replica.registry.on_transition(move |t| {
            if t.key == "payment" && t.to == fusebox::State::Open {
                let at = nanos_since(start);
                let _ = committed.compare_exchange(0, at, Ordering::AcqRel, Ordering::Acquire);
            }
        });
    }
    committed
}

/// Warm-up: every replica calls every key once, so it knows them all; the hot calls' outcomes.
async fn warm_up(fleet: &[Arc<Replica>], start: Instant) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    for replica in fleet {
        for key in ["payment", "cold-0", "cold-1", "cold-2"] {
            let breaker = replica.registry.get(key).unwrap();
            let _ = breaker
                .call_async(async { Ok::<(), Down>(()) }, |_| true)
                .await;
            if key == "payment" {
                outcomes.push((nanos_since(start), false));
            }
        }
    }
    outcomes
}

async fn run(setup: &Setup<'_>, conn: &mut redis::Connection) -> Row {
    let (fleet, stores) = start_fleet(setup).await;
    let seconds = setup.seconds;
    let start = Instant::now();
    let onset = Duration::from_secs(seconds - 1);
    let failing = Arc::new(AtomicBool::new(false));
    let committed = commits(&fleet, start);
    let after_commit = Arc::new(AtomicU64::new(0));
    let driven = Arc::new(AtomicU64::new(0));
    let mut outcomes = warm_up(&fleet, start).await;
    let calls_0 = script_calls(conn);
    let cpu_0 = redis_cpu(conn);
    let load = LoadStart::now(conn);
    let per_replica_ms = (setup.rate as f64 / setup.replicas as f64) / 1000.0;
    let end = start + Duration::from_secs(seconds);
    let pinger = tokio::spawn(ping(setup.url.to_owned(), end));
    let timing = tokio::spawn(timer(end));
    let mut tasks = Vec::new();
    for (i, replica) in fleet.iter().enumerate() {
        let replica = replica.clone();
        let (failing, committed, after_commit, driven) = (
            failing.clone(),
            committed.clone(),
            after_commit.clone(),
            driven.clone(),
        );
        tasks.push(tokio::spawn(drive(
            replica,
            i as u64,
            per_replica_ms,
            end,
            start,
            failing,
            committed,
            after_commit,
            driven,
        )));
    }
    tokio::time::sleep_until((start + onset).into()).await;
    let healthy_s = start.elapsed().as_secs_f64();
    let calls_onset = script_calls(conn);
    let onset_ns = nanos_since(start);
    failing.store(true, Ordering::Release);
    let monitor = watch(fleet.clone(), start, end);
    for task in tasks {
        outcomes.extend(task.await.unwrap());
    }
    let rtt_ms = pinger.await.unwrap();
    let late_ms = timing.await.unwrap();
    monitor.join().unwrap();
    // `None` when no replica saw the OPEN committed.
    let committed_ns = Some(committed.load(Ordering::Acquire)).filter(|&at| at > 0);
    let opened: Vec<u64> = fleet
        .iter()
        .map(|r| r.open_at.load(Ordering::Acquire))
        .filter(|&at| at > 0)
        .collect();
    let reach_ms = committed_ns.map_or_else(Vec::new, |at| ms_from(at, &opened));
    let crossed_ns = crossing(outcomes, onset_ns);
    let crossed_reach_ms = crossed_ns.map_or_else(Vec::new, |at| ms_from(at, &opened));
    let total_s = start.elapsed().as_secs_f64();
    let load = load.since();
    let calls_end = script_calls(conn);
    let cpu_end = redis_cpu(conn);
    let rejected: Vec<u64> = fleet
        .iter()
        .map(|r| r.rejected_at.load(Ordering::Acquire))
        .filter(|&at| at > onset_ns)
        .collect();
    let open_ms = ms_from(onset_ns, &rejected);
    for store in &stores {
        // Sends what is summed, so the next mode starts from an idle Redis.
        store.flush().await;
    }
    Row {
        mode: setup.name,
        healthy_calls_per_s: (calls_onset - calls_0) / healthy_s,
        failing_calls_per_s: (calls_end - calls_onset) / (total_s - healthy_s),
        cpu_per_s: (cpu_end - cpu_0) / total_s,
        open_ms,
        commit_ms: committed_ns.map_or(f64::NAN, |at| at.saturating_sub(onset_ns) as f64 / 1e6),
        reach_ms,
        replicas: setup.replicas,
        after_commit: after_commit.load(Ordering::Relaxed),
        driven: driven.load(Ordering::Relaxed),
        crossed_ms: crossed_ns.map(|at| at.saturating_sub(onset_ns) as f64 / 1e6),
        crossed_commit_ms: crossed_ns
            .zip(committed_ns)
            .map_or(f64::NAN, |(at, committed)| {
                (committed as f64 - at as f64) / 1e6
            }),
        crossed_reach_ms,
        rtt_ms,
        late_ms,
        load,
        flush_ms: setup.flush_ms(),
    }
}
