//! Stress test: many tasks on a two-thread runtime hammer one breaker through repeated trips and
//! recoveries while one task drives the fake clock, and the breaker's invariants are checked: no
//! more concurrent probes than `half_open`, every admitted call accounted for exactly once,
//! transitions that add up, and a consistent final state.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fusebox::clock::FakeClock;
use fusebox::{Policy, Reason, Registry, State};

const TASKS: u64 = 64;
const CALLS_PER_TASK: u64 = 8_000;
const HALF_OPEN: u32 = 3;
const MAX_CONCURRENT: u32 = 12;
const OPEN_MAX: Duration = Duration::from_millis(16);
/// Wall-clock cap: the test stops early rather than run long on a slow machine.
const WALL_CLOCK_CAP: Duration = Duration::from_secs(6);

const POLICY: Policy = Policy::new()
    .window(20)
    .min_calls(10)
    .failure_rate(50)
    .open_for(Duration::from_millis(2))
    .open_backoff(2.0)
    .open_max(OPEN_MAX)
    .half_open(HALF_OPEN)
    // Long enough that no probe is re-armed during the run: every probe reports.
    .half_open_lease(Duration::from_secs(3600))
    .max_concurrent(MAX_CONCURRENT);

#[derive(Default)]
struct Tally {
    attempts: AtomicU64,
    admitted: AtomicU64,
    rejected_open: AtomicU64,
    rejected_half_open_full: AtomicU64,
    rejected_bulkhead: AtomicU64,
    successes: AtomicU64,
    failures: AtomicU64,
    ignored: AtomicU64,
    cancelled: AtomicU64,
    probes_admitted: AtomicU64,
    /// Probes admitted and not yet reported, as counted here.
    probes_now: AtomicU32,
    probes_max: AtomicU32,
    /// Transitions seen by the hook: closed→open, half-open→open, open→half-open, half-open→closed.
    closed_to_open: AtomicU64,
    half_open_to_open: AtomicU64,
    open_to_half_open: AtomicU64,
    half_open_to_closed: AtomicU64,
    other_transitions: AtomicU64,
}

fn load(a: &AtomicU64) -> u64 {
    a.load(Ordering::SeqCst)
}

#[test]
#[allow(clippy::too_many_lines)] // one stress scenario, phase after phase; a test, not a call path
fn many_tasks_through_trips_and_recoveries() {
    let started = Instant::now();
    let clock = FakeClock::new();
    let registry = Arc::new(Registry::with_clock(clock.clone()));
    let tally = Arc::new(Tally::default());
    {
        let tally = tally.clone();
        registry.on_transition(move |t| {
            let counter = match (t.from, t.to) {
                (State::Closed, State::Open) => &tally.closed_to_open,
                (State::HalfOpen, State::Open) => &tally.half_open_to_open,
                (State::Open, State::HalfOpen) => &tally.open_to_half_open,
                (State::HalfOpen, State::Closed) => &tally.half_open_to_closed,
                _ => &tally.other_transitions,
            };
            counter.fetch_add(1, Ordering::SeqCst);
        });
    }
    let breaker = registry.breaker("stress", POLICY).unwrap();

    // Calls hold a read guard from admission to report; the clock moves under the write guard, so
    // time never passes while a call is in flight. That keeps every probe in the half-open episode
    // it was admitted in, which makes "at most HALF_OPEN probes at once" an exact invariant.
    let gate = Arc::new(tokio::sync::RwLock::new(()));
    let done = Arc::new(AtomicBool::new(false));

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    runtime.block_on(async {
        let advancer = {
            let (clock, gate, done) = (clock.clone(), gate.clone(), done.clone());
            tokio::spawn(async move {
                let mut rng = fastrand::Rng::with_seed(7);
                while !done.load(Ordering::SeqCst) {
                    {
                        let _exclusive = gate.write().await;
                        clock.advance(Duration::from_micros(rng.u64(100..=3_000)));
                    }
                    for _ in 0..rng.usize(1..=8) {
                        tokio::task::yield_now().await;
                    }
                }
            })
        };
        let workers: Vec<_> = (0..TASKS)
            .map(|task| {
                let (breaker, clock, gate, tally) =
                    (breaker.clone(), clock.clone(), gate.clone(), tally.clone());
                tokio::spawn(async move {
                    let mut rng = fastrand::Rng::with_seed(task);
                    for _ in 0..CALLS_PER_TASK {
                        if started.elapsed() > WALL_CLOCK_CAP {
                            break;
                        }
                        // The backend alternates between healthy and failing periods of 20 ms.
                        let failing = (clock.elapsed().as_millis() / 20) % 2 == 1;
                        let shared = gate.read().await;
                        tally.attempts.fetch_add(1, Ordering::SeqCst);
                        let permit = match breaker.try_acquire() {
                            Ok(permit) => permit,
                            Err(e) => {
                                let counter = match e.reason() {
                                    Reason::Open => &tally.rejected_open,
                                    Reason::HalfOpenFull => &tally.rejected_half_open_full,
                                    Reason::BulkheadFull => &tally.rejected_bulkhead,
                                    other => panic!("unexpected rejection {other:?}"),
                                };
                                counter.fetch_add(1, Ordering::SeqCst);
                                drop(shared);
                                tokio::task::yield_now().await;
                                continue;
                            }
                        };
                        tally.admitted.fetch_add(1, Ordering::SeqCst);
                        let probe = permit.is_probe();
                        if probe {
                            tally.probes_admitted.fetch_add(1, Ordering::SeqCst);
                            let now = tally.probes_now.fetch_add(1, Ordering::SeqCst) + 1;
                            tally.probes_max.fetch_max(now, Ordering::SeqCst);
                            assert!(
                                now <= HALF_OPEN,
                                "{now} probes in flight, half_open = {HALF_OPEN}"
                            );
                        }
                        if rng.u8(..3) == 0 {
                            tokio::task::yield_now().await;
                        }
                        // Give the probe slot back in our count before the breaker can reuse it.
                        if probe {
                            tally.probes_now.fetch_sub(1, Ordering::SeqCst);
                        }
                        let roll = rng.u8(..100);
                        let fail_below = if failing { 80 } else { 5 };
                        if roll < fail_below {
                            tally.failures.fetch_add(1, Ordering::SeqCst);
                            permit.failure();
                        } else if roll < 90 {
                            tally.successes.fetch_add(1, Ordering::SeqCst);
                            permit.success();
                        } else if roll < 95 {
                            tally.ignored.fetch_add(1, Ordering::SeqCst);
                            permit.ignore();
                        } else {
                            tally.cancelled.fetch_add(1, Ordering::SeqCst);
                            drop(permit);
                        }
                        drop(shared);
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.await.unwrap();
        }
        done.store(true, Ordering::SeqCst);
        advancer.await.unwrap();
    });

    let t = &*tally;
    let rejected =
        load(&t.rejected_open) + load(&t.rejected_half_open_full) + load(&t.rejected_bulkhead);
    let snap = breaker.snapshot();
    eprintln!(
        "{} attempts, {} admitted ({} probes, at most {} at once), {rejected} rejected \
         ({} open, {} half-open full, {} bulkhead); transitions: {} closed→open, {} half-open→open, \
         {} open→half-open, {} half-open→closed; fake time {:?}; wall {:?}",
        load(&t.attempts),
        load(&t.admitted),
        load(&t.probes_admitted),
        t.probes_max.load(Ordering::SeqCst),
        load(&t.rejected_open),
        load(&t.rejected_half_open_full),
        load(&t.rejected_bulkhead),
        load(&t.closed_to_open),
        load(&t.half_open_to_open),
        load(&t.open_to_half_open),
        load(&t.half_open_to_closed),
        clock.elapsed(),
        started.elapsed(),
    );

    // Counts are conserved.
    assert_eq!(load(&t.attempts), load(&t.admitted) + rejected);
    assert_eq!(
        load(&t.admitted),
        load(&t.successes) + load(&t.failures) + load(&t.ignored) + load(&t.cancelled)
    );
    assert_eq!(snap.rejected, rejected, "the breaker's count of rejections");
    assert_eq!(snap.in_flight, 0, "every bulkhead slot was given back");
    assert_eq!(snap.probes_in_flight, 0, "every probe reported");
    assert!(t.probes_max.load(Ordering::SeqCst) <= HALF_OPEN);

    // The run went through trips and recoveries.
    let opened = load(&t.closed_to_open);
    let reopened = load(&t.half_open_to_open);
    let half_opened = load(&t.open_to_half_open);
    let closed = load(&t.half_open_to_closed);
    assert!(
        opened >= 3 && closed >= 3 && reopened >= 1,
        "too few cycles to mean anything"
    );
    assert_eq!(load(&t.other_transitions), 0);

    // Transitions add up to the final state: none lost, none doubled.
    let state = breaker.state();
    assert_eq!(
        opened - closed,
        u64::from(state != State::Closed),
        "closed→open vs half-open→closed, ending {state:?}"
    );
    assert_eq!(
        half_opened - reopened - closed,
        u64::from(state == State::HalfOpen),
        "open→half-open vs half-open→open/closed, ending {state:?}"
    );
    assert_eq!(
        opened + reopened - half_opened,
        u64::from(state == State::Open),
        "entries into and exits from open, ending {state:?}"
    );

    // Final state: once the longest wait has passed, successful probes close the circuit.
    if state == State::Open {
        // The deadline is rounded up to the next whole millisecond (`guide::semantics`, "Time"), and this
        // clock moves in microseconds: the wait left is at most the longest wait plus 1 ms.
        let left = snap.retry_after.unwrap();
        assert!(left <= OPEN_MAX + Duration::from_millis(1), "{left:?}");
    }
    clock.advance(OPEN_MAX + Duration::from_millis(1));
    let was_closed = state == State::Closed;
    for _ in 0..HALF_OPEN {
        if breaker.state() == State::Closed {
            break;
        }
        let permit = breaker
            .try_acquire()
            .expect("admitted after the longest wait");
        assert!(permit.is_probe());
        permit.success();
    }
    assert_eq!(breaker.state(), State::Closed);
    let snap = breaker.snapshot();
    assert_eq!(snap.reopens, 0, "a close resets the backoff");
    if !was_closed {
        assert_eq!(snap.calls, 0, "closing empties the window");
    }
    breaker.try_acquire().unwrap().success();
    assert_eq!(breaker.state(), State::Closed);
}

/// Threads and calls per thread of the window-consistency runs.
const WINDOW_THREADS: usize = 12;
const WINDOW_CALLS: usize = 100;
/// Wall-clock budget of each window-consistency test: repetitions stop when it is spent.
const WINDOW_BUDGET: Duration = Duration::from_secs(3);
/// Repetitions at most; `FUSEBOX_WINDOW_RUNS` raises it (the budget still applies unless raised too
/// with `FUSEBOX_WINDOW_SECS`).
const WINDOW_RUNS: usize = 2_000;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs `WINDOW_THREADS` threads of `WINDOW_CALLS` calls on a fresh breaker of `policy`, each
/// thread cycling success, counted failure, ignored error, with the clock standing still. Every
/// thread records its success before its failure, so at any instant at most half of the recorded
/// outcomes are failures: a 60 % rule can never be reached by a consistent reading of the window.
/// Returns the number of runs in which the breaker opened anyway, and the number of runs.
fn opened_below_threshold(policy: Policy) -> (usize, usize) {
    let runs = env_or("FUSEBOX_WINDOW_RUNS", WINDOW_RUNS);
    let budget = Duration::from_secs(env_or("FUSEBOX_WINDOW_SECS", WINDOW_BUDGET.as_secs()));
    let started = Instant::now();
    let mut opened = 0;
    let mut done = 0;
    while done < runs && started.elapsed() < budget {
        let registry = Registry::with_clock(FakeClock::new());
        let breaker = registry.breaker("window", policy).unwrap();
        let barrier = std::sync::Barrier::new(WINDOW_THREADS);
        std::thread::scope(|scope| {
            for _ in 0..WINDOW_THREADS {
                scope.spawn(|| {
                    barrier.wait();
                    for call in 0..WINDOW_CALLS {
                        let Ok(permit) = breaker.try_acquire() else {
                            continue;
                        };
                        match call % 3 {
                            0 => permit.success(),
                            1 => permit.failure(),
                            _ => permit.ignore(),
                        }
                    }
                });
            }
        });
        if breaker.state() != State::Closed {
            opened += 1;
        }
        done += 1;
    }
    (opened, done)
}

#[test]
fn a_time_window_never_opens_below_its_threshold_under_concurrency() {
    let policy = Policy::new()
        .time_window(Duration::from_secs(30))
        .min_calls(3)
        .failure_rate(60);
    let (opened, runs) = opened_below_threshold(policy);
    assert_eq!(
        opened, 0,
        "opened in {opened} of {runs} runs at a 50 % failure rate"
    );
}

#[test]
fn a_count_window_never_opens_below_its_threshold_under_concurrency() {
    // `min_calls` below the window: the success that brings the window to it judges the counts.
    let policy = Policy::new().window(2_000).min_calls(1).failure_rate(60);
    let (opened, runs) = opened_below_threshold(policy);
    assert_eq!(
        opened, 0,
        "opened in {opened} of {runs} runs at a 50 % failure rate"
    );
}
