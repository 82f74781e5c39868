//! The resend queue while Redis is away (aggregated mode): a key's successes wait summed, as one
//! `count` whatever the calls, and reach the shared window once Redis is back; outcomes past the
//! queue (failures, which wait one by one) are counted in `fusebox_store_dropped_total{key}` and
//! named by one WARN per key.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use crate::faults::{events, events_of};
use crate::harness::RedisServer;
use fusebox::{Breaker, Policy, Registry};
use fusebox_redis::{Mode, RedisStore};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};

/// The recorder of this test's runtime threads (the store's reporting task counts its drops on
/// them) and of its own thread.
static RECORDER: LazyLock<&'static PrometheusRecorder> =
    LazyLock::new(|| Box::leak(Box::new(PrometheusBuilder::new().build_recorder())));

/// A time window that never judges (its `min_calls` is never reached): it only counts.
fn counting() -> Policy {
    Policy::new()
        .time_window(Duration::from_secs(60))
        .min_calls(1_000_000)
        .open_for(Duration::from_secs(60))
}

const SUCCESSES: u64 = 50_000;
const FAILURES: u64 = 6_000;

/// Waits until `done`, polling, for at most `within`.
async fn until(within: Duration, mut done: impl AsyncFnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if done().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// The shared window's calls of `key`.
async fn shared_calls(store: &RedisStore, key: &str) -> u64 {
    store
        .state(key, counting())
        .await
        .map_or(0, |state| u64::from(state.calls))
}

fn dropped_metric(key: &str) -> Option<u64> {
    let text = RECORDER.handle().render();
    let prefix = format!("fusebox_store_dropped_total{{key=\"{key}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|value| value.parse().ok())
}

/// Aggregated mode, Redis stopped (`SIGSTOP`): 50,000 successes on one key wait summed and all
/// reach the shared window after `SIGCONT`, none given up; 6,000 failures on another key, which
/// wait one by one, overflow the resend queue: what is given up is counted in the key's metric
/// and named by one WARN.
#[test]
fn successes_wait_summed_while_redis_is_away_and_what_overflows_is_counted_and_named() {
    let _recorder = metrics::set_default_local_recorder(*RECORDER);
    events();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(|| std::mem::forget(metrics::set_default_local_recorder(*RECORDER)))
        .build()
        .unwrap();
    rt.block_on(async {
        let server = RedisServer::start();
        let connect = || async {
            let builder = RedisStore::builder(&server.url()).prefix("outage");
            builder.mode(Mode::Aggregated).connect().await.unwrap()
        };
        let store = connect().await;
        let registry = Registry::new();
        assert!(registry.share(store.clone()));
        let (ok, failing) = (
            registry.breaker("outage-ok", counting()).unwrap(),
            registry.breaker("outage-failing", counting()).unwrap(),
        );
        for breaker in [&ok, &failing] {
            breaker.try_acquire().unwrap().success();
        }
        store.flush().await;
        assert_eq!(shared_calls(&store, "outage-ok").await, 1);

        // Redis stops answering; the store notices on its next call (the fold sent by `flush`).
        server.signal("-STOP");
        ok.try_acquire().unwrap().success();
        store.flush().await;
        let degraded = until(Duration::from_secs(30), async || ok.snapshot().degraded()).await;
        assert!(degraded, "the store never noticed that Redis stopped");
        settle(&ok, SUCCESSES, false);
        settle(&failing, FAILURES, true);
        // The failures, one by one, overflow the resend queue (4,096) while Redis is stopped.
        let overflowed = until(Duration::from_secs(30), async || {
            store.dropped_reports() > 0
        })
        .await;
        assert!(
            overflowed,
            "failures past the resend queue were not given up"
        );
        server.signal("-CONT");

        successes_arrived(&store).await;
        failures_counted(&store).await;
    });
}

/// Every success of `outage-ok` arrives, summed, once: none was given up.
async fn successes_arrived(store: &RedisStore) {
    let ok_total = SUCCESSES + 2;
    let arrived = until(Duration::from_secs(30), async || {
        shared_calls(store, "outage-ok").await >= ok_total
    })
    .await;
    assert!(
        arrived,
        "the summed successes never reached the shared window"
    );
    assert_eq!(shared_calls(store, "outage-ok").await, ok_total);
    // What was given up is failures only: the successes waited as one count per key.
    assert!(
        store.dropped_reports() <= FAILURES + 1,
        "{} outcomes given up: successes among them",
        store.dropped_reports()
    );
    assert_eq!(dropped_metric("outage-ok"), None, "no success given up");
    assert!(
        events_of("{outage:outage-ok}")
            .iter()
            .all(|e| !e.contains("did not record")),
        "no success given up"
    );
}

/// Each failure of `outage-failing` is recorded at most once, and what was given up is counted,
/// in the metric and one WARN (a call given up may still have run: Redis only paused, and ran
/// what was sent before it stopped once it went on).
async fn failures_counted(store: &RedisStore) {
    let (dropped, failing_total) = (store.dropped_reports(), FAILURES + 1);
    let settled = until(Duration::from_secs(30), async || {
        shared_calls(store, "outage-failing").await + dropped >= failing_total
    })
    .await;
    let recorded = shared_calls(store, "outage-failing").await;
    assert!(settled, "{dropped} dropped, {recorded} recorded");
    assert!(recorded <= failing_total, "{recorded} recorded: one twice");
    assert_eq!(dropped_metric("outage-failing"), Some(dropped));
    let warnings: Vec<String> = events_of("{outage:outage-failing}")
        .into_iter()
        .filter(|e| e.starts_with("WARN") && e.contains("did not record"))
        .collect();
    assert_eq!(
        warnings.len(),
        1,
        "one WARN per key and outage: {warnings:?}"
    );
}

/// `n` calls on `breaker`, each a failure when `fail`.
fn settle(breaker: &Breaker, n: u64, fail: bool) {
    for _ in 0..n {
        let permit = breaker.try_acquire().unwrap();
        if fail {
            permit.failure();
        } else {
            permit.success();
        }
    }
}

/// The script's `count` of `n` successes leaves a key as a `report` of `n` digits `1` does:
/// closed (count and time windows, below, at and past `min_calls`, tripping or not) and half-open
/// (probes, progressive recovery), after every prefix of failures.
#[test]
fn a_count_of_successes_is_recorded_as_that_many_success_digits() {
    const SCRIPT: &str = include_str!("../../integrations/redis/src/breaker.lua");
    const TIME: u64 = 1 << 40;
    let server = RedisServer::start();
    let port = server.port;
    // EVAL of `op` on `key` at `now` (ms) with the policy `policy` and the op's own arguments;
    // the answer without the incarnation (drawn from Redis `TIME` when a key is created).
    let eval = |key: &str, now: u64, policy: &[u64; 12], op: &str, rest: &[String]| {
        let mut args: Vec<String> = ["EVAL", SCRIPT, "1", key, op].map(str::to_owned).to_vec();
        args.push(now.to_string());
        args.extend(policy.iter().map(u64::to_string));
        args.extend(rest.iter().cloned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut answer = crate::harness::reply_on(port, &args);
        assert!(answer.len() >= 14, "{op}: {answer:?}");
        answer.remove(10);
        answer
    };
    let mut scenario = 0;
    for window in [10, TIME + 100] {
        for (min_calls, recovery) in [(1, 1), (4, 2), (6, TIME + (2 << 20) + 3), (20, 1)] {
            // ttl, window, min_calls, rate, slow rate, consecutive, open_for, backoff, open_max,
            // probes, lease, failure count
            let policy = [
                60_000, window, min_calls, 50, 0, 0, 1_000, 1_000, 1_000, recovery, 60_000, 0,
            ];
            for failures in 0..6 {
                for n in [1u64, 2, 3, 7, 25] {
                    scenario += 1;
                    let (digits, counted) = (format!("d{scenario}"), format!("c{scenario}"));
                    let mut answers = Vec::new();
                    for (key, count) in [(&digits, false), (&counted, true)] {
                        let mut now = 10_000_000;
                        let mut generation = 1024;
                        let mut seq = 1;
                        let report = |now: u64, generation: u64, codes: String, seq: &mut u64| {
                            *seq += 1;
                            let rest = [generation.to_string(), codes, "7".into(), seq.to_string()];
                            eval(key, now, &policy, "report", &rest)
                        };
                        if failures > 0 {
                            let tripped = report(now, generation, "2".repeat(failures), &mut seq);
                            if tripped[1] == "1" {
                                // Open: the wait ends, and an admission takes a probe.
                                now += 1_000;
                                let rest = ["0", "0", "7", "1"].map(str::to_owned);
                                let admitted = eval(key, now, &policy, "admit", &rest);
                                generation = admitted[2].parse::<u64>().unwrap() % 1024;
                            }
                        }
                        let answer = if count {
                            seq += 1;
                            let rest = [
                                generation.to_string(),
                                n.to_string(),
                                "7".into(),
                                seq.to_string(),
                            ];
                            eval(key, now, &policy, "count", &rest)
                        } else {
                            report(now, generation, "1".repeat(n as usize), &mut seq)
                        };
                        let read = eval(key, now, &policy, "state", &[]);
                        answers.push((answer, read[..13].to_vec()));
                    }
                    assert_eq!(
                        answers[0], answers[1],
                        "window {window}, min_calls {min_calls}, recovery {recovery}, {failures} failures, {n} successes"
                    );
                }
            }
        }
    }
}
