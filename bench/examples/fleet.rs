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
//! cpu`), the time from the onset to the first refusal on every replica (p50/p99/max, with how
//! many replicas saw one), the hot key's backend calls admitted after the OPEN was committed,
//! and the calls the driver achieved.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fusebox::redis::{Mode, RedisStore};
use fusebox::{Policy, Registry};

/// The backend's error.
#[derive(Debug)]
struct Down;

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| {
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

const POLICY: Policy = Policy::new()
    .window(100)
    .min_calls(20)
    .failure_rate(50)
    .open_for(Duration::from_secs(60));

/// One replica: its registry (leaked: the fleet lives as long as the process).
struct Replica {
    registry: &'static Registry,
    /// Nanoseconds from the run's start to this replica's first refusal on the hot key (0: none).
    refused_at: AtomicU64,
    /// Nanoseconds from the run's start to when this replica's hot breaker was first seen open
    /// (polled every millisecond; 0: never).
    open_at: AtomicU64,
}

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
}

fn main() {
    let replicas = usize::try_from(arg("--replicas", 10)).unwrap().max(1);
    let rate = arg("--rate", 20_000).max(1);
    let seconds = arg("--seconds", 3).max(2);
    let (url, _server) = fusebox_bench::redis_server();
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut rows = Vec::new();
    for (mode, name) in [
        (Mode::Strict, "strict"),
        (Mode::Cached, "cached"),
        (Mode::Aggregated, "aggregated"),
    ] {
        let _: () = redis::cmd("FLUSHALL").query(&mut conn).unwrap();
        rows.push(rt.block_on(run(&url, &mut conn, mode, name, replicas, rate, seconds)));
    }
    println!(
        "\n{replicas} replicas, {rate} calls/s in all (90% on one hot key), onset after {} s; Redis on loopback",
        seconds - 1
    );
    println!(
        "| mode | script calls/s healthy | after the onset | Redis CPU | onset → OPEN committed | committed → open on every replica p50 / p99 / max | onset → first refusal p50 / p99 / max | hot calls admitted after OPEN committed | calls driven/s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in rows {
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
}

/// `replicas` replicas in `mode`, each with the hot and cold keys registered.
async fn start_fleet(
    url: &str,
    mode: Mode,
    replicas: usize,
) -> (Vec<Arc<Replica>>, Vec<RedisStore>) {
    let mut fleet = Vec::with_capacity(replicas);
    let mut stores = Vec::with_capacity(replicas);
    for _ in 0..replicas {
        let registry: &'static Registry = Box::leak(Box::new(Registry::new()));
        let store = RedisStore::builder(url)
            .mode(mode)
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
            refused_at: AtomicU64::new(0),
            open_at: AtomicU64::new(0),
        }));
    }
    (fleet, stores)
}

/// One replica's calls: `per_ms` a millisecond until `end`, one in ten on a cold key; the hot
/// key's backend fails once `failing` is set.
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
) {
    let hot = replica.registry.get("payment").unwrap();
    let cold: Vec<_> = (0..3)
        .map(|k| replica.registry.get(&format!("cold-{k}")).unwrap())
        .collect();
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
            let called = hot
                .call_async(async { if bad { Err(Down) } else { Ok(()) } }, |_| true)
                .await;
            let now = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            match called {
                Err(_) => {
                    let _ = replica.refused_at.compare_exchange(
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
}

/// p50 / p99 / max of `ms`, and how many of `of` replicas it covers when not all.
fn spread(ms: &[f64], of: usize) -> String {
    let mut sorted = ms.to_vec();
    sorted.sort_by(f64::total_cmp);
    let pick = |q: f64| {
        sorted
            .get(((sorted.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    let all = if sorted.len() == of {
        String::new()
    } else {
        format!(" ({} of {of})", sorted.len())
    };
    format!(
        "{:.1} / {:.1} / {:.1} ms{all}",
        pick(0.5),
        pick(0.99),
        pick(1.0)
    )
}

/// Polls every replica's hot breaker each millisecond until `end`, noting when each is first
/// seen open.
async fn watch(fleet: Vec<Arc<Replica>>, start: Instant, end: Instant) {
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    while Instant::now() < end {
        tick.tick().await;
        let now = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        for replica in &fleet {
            let breaker = replica.registry.get("payment").unwrap();
            if breaker.state() == fusebox::State::Open {
                let _ =
                    replica
                        .open_at
                        .compare_exchange(0, now, Ordering::AcqRel, Ordering::Acquire);
            }
        }
    }
}

async fn run(
    url: &str,
    conn: &mut redis::Connection,
    mode: Mode,
    name: &'static str,
    replicas: usize,
    rate: u64,
    seconds: u64,
) -> Row {
    let (fleet, stores) = start_fleet(url, mode, replicas).await;
    let start = Instant::now();
    let onset = Duration::from_secs(seconds - 1);
    let failing = Arc::new(AtomicBool::new(false));
    // Nanoseconds from the start to the OPEN the store committed (the first replica whose
    // transition hook saw it shared).
    let committed = Arc::new(AtomicU64::new(0));
    for replica in &fleet {
        let committed = committed.clone();
        replica.registry.on_transition(move |t| {
            if t.key == "payment" && t.to == fusebox::State::Open {
                let at = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
                let _ = committed.compare_exchange(0, at, Ordering::AcqRel, Ordering::Acquire);
            }
        });
    }
    let after_commit = Arc::new(AtomicU64::new(0));
    let driven = Arc::new(AtomicU64::new(0));
    // Warm-up: every replica learns every key.
    for replica in &fleet {
        for key in ["payment", "cold-0", "cold-1", "cold-2"] {
            let breaker = replica.registry.get(key).unwrap();
            let _ = breaker
                .call_async(async { Ok::<(), Down>(()) }, |_| true)
                .await;
        }
    }
    let calls_0 = script_calls(conn);
    let cpu_0 = redis_cpu(conn);
    let per_replica_ms = (rate as f64 / replicas as f64) / 1000.0;
    let end = start + Duration::from_secs(seconds);
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
    failing.store(true, Ordering::Release);
    let onset_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let monitor = tokio::spawn(watch(fleet.clone(), start, end));
    for task in tasks {
        task.await.unwrap();
    }
    monitor.await.unwrap();
    let committed_ns = committed.load(Ordering::Acquire);
    let reach_ms = fleet
        .iter()
        .map(|r| r.open_at.load(Ordering::Acquire))
        .filter(|&at| at > 0 && committed_ns > 0)
        .map(|at| at.saturating_sub(committed_ns) as f64 / 1e6)
        .collect();
    let total_s = start.elapsed().as_secs_f64();
    let calls_end = script_calls(conn);
    let cpu_end = redis_cpu(conn);
    let open_ms = fleet
        .iter()
        .map(|r| r.refused_at.load(Ordering::Acquire))
        .filter(|&at| at > onset_ns)
        .map(|at| (at - onset_ns) as f64 / 1e6)
        .collect();
    for store in &stores {
        // Sends what is summed, so the next mode starts from an idle Redis.
        store.flush().await;
    }
    Row {
        mode: name,
        healthy_calls_per_s: (calls_onset - calls_0) / healthy_s,
        failing_calls_per_s: (calls_end - calls_onset) / (total_s - healthy_s),
        cpu_per_s: (cpu_end - cpu_0) / total_s,
        open_ms,
        commit_ms: committed_ns.saturating_sub(onset_ns) as f64 / 1e6,
        reach_ms,
        replicas,
        after_commit: after_commit.load(Ordering::Relaxed),
        driven: driven.load(Ordering::Relaxed),
    }
}
