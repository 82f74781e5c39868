//! The round trip of the Redis store's script call, as a fleet sees it: for choosing the default
//! store timeout (`fusebox_redis::DEFAULT_TIMEOUT`).
//!
//! Starts its own `redis-server` (or uses `REDIS_URL`), then `FUSEBOX_RTT_PROCESSES` (default 4)
//! processes of itself, each a tokio multi-thread runtime with `FUSEBOX_RTT_TASKS` (default 64)
//! tasks that call the script back to back on one key for `FUSEBOX_RTT_SECS` (default 5)
//! seconds, after a one-second warm-up. Each call is `RedisStore::state` (one `EVALSHA` of the
//! breaker script, the same connection and script as a breaker's admission and report), on a
//! store whose timeout is 10 s, so the slow tail is measured rather than cut off. Prints the
//! round trip's p50, p99, p99.9 and max over every process's calls, and how many took longer
//! than 50 ms (today's default timeout: a shared breaker's call degrades), 100 ms, 250 ms and 1 s.
//!
//! Idle, then with a busy loop on every core:
//! ```text
//! cargo run -p fusebox-bench --features redis --example redis_rtt
//! ../shared/tools/under-load cargo run -p fusebox-bench --features redis --example redis_rtt
//! ```

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fusebox::Policy;
use fusebox_redis::RedisStore;

const CHILD_VAR: &str = "FUSEBOX_RTT_URL";

fn var(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("`{name}` must be a number, got `{v}`"))
    })
}

fn main() {
    if let Ok(url) = std::env::var(CHILD_VAR) {
        child(&url);
        return;
    }
    let processes = var("FUSEBOX_RTT_PROCESSES", 4);
    let tasks = var("FUSEBOX_RTT_TASKS", 64);
    let secs = var("FUSEBOX_RTT_SECS", 5);
    let (url, server) = fusebox_bench::redis_server();
    let children: Vec<_> = (0..processes)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .env(CHILD_VAR, &url)
                .env("FUSEBOX_RTT_TASKS", tasks.to_string())
                .env("FUSEBOX_RTT_SECS", secs.to_string())
                .stdout(Stdio::piped())
                .spawn()
                .expect("a measuring process")
        })
        .collect();
    let mut micros: Vec<u64> = Vec::new();
    let mut errors = 0u64;
    for mut child in children {
        let out = BufReader::new(child.stdout.take().unwrap());
        for line in out.lines() {
            let line = line.unwrap();
            if let Some(rest) = line.strip_prefix("RTT ") {
                micros.extend(rest.split_whitespace().map(|n| n.parse::<u64>().unwrap()));
            } else if let Some(n) = line.strip_prefix("ERRORS ") {
                errors += n.parse::<u64>().unwrap();
            }
        }
        assert!(
            child.wait().unwrap().success(),
            "a measuring process failed"
        );
    }
    drop(server);
    micros.sort_unstable();
    assert!(!micros.is_empty(), "no call was measured");
    let at = |q: f64| {
        let i = ((micros.len() as f64 * q).ceil() as usize).clamp(1, micros.len()) - 1;
        ms(micros[i])
    };
    let over = |limit_ms: u64| micros.iter().filter(|&&m| m > limit_ms * 1000).count();
    println!(
        "script round trip, {processes} processes x {tasks} tasks, {secs} s, {} calls ({} failed): p50 {} p99 {} p99.9 {} max {}",
        micros.len(),
        errors,
        at(0.50),
        at(0.99),
        at(0.999),
        ms(*micros.last().unwrap()),
    );
    println!(
        "calls over 50 ms: {} ({:.3}%), over 100 ms: {}, over 250 ms: {}, over 1 s: {}",
        over(50),
        over(50) as f64 * 100.0 / micros.len() as f64,
        over(100),
        over(250),
        over(1000),
    );
}

fn ms(micros: u64) -> String {
    format!("{:.2} ms", micros as f64 / 1000.0)
}

/// One measuring process: prints `RTT <µs>…` (every measured call) and `ERRORS <n>`.
fn child(url: &str) {
    let tasks = var("FUSEBOX_RTT_TASKS", 64);
    let secs = var("FUSEBOX_RTT_SECS", 5);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (micros, errors) = rt.block_on(async {
        let store = RedisStore::builder(url)
            .timeout(Duration::from_secs(10))
            .connect()
            .await
            .expect("connect");
        let policy = Policy::new().window(100).half_open(3);
        let warm_until = Instant::now() + Duration::from_secs(1);
        let until = warm_until + Duration::from_secs(secs);
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move {
                    let (mut micros, mut errors) = (Vec::new(), 0u64);
                    loop {
                        let start = Instant::now();
                        if start >= until {
                            return (micros, errors);
                        }
                        let answered = store.state("rtt", policy).await.is_ok();
                        if start >= warm_until {
                            micros.push(start.elapsed().as_micros() as u64);
                            errors += u64::from(!answered);
                        }
                    }
                })
            })
            .collect();
        let (mut micros, mut errors) = (Vec::new(), 0);
        for h in handles {
            let (m, e) = h.await.unwrap();
            micros.extend(m);
            errors += e;
        }
        (micros, errors)
    });
    let line: Vec<String> = micros.iter().map(u64::to_string).collect();
    println!("RTT {}", line.join(" "));
    println!("ERRORS {errors}");
}
