//! One hot key called from one and from two threads at once: fusebox (count window and time
//! window) against failsafe 1.3 and recloser 1.4, closed, sync, in one run.
//!
//! Every subject wraps `|| Ok::<u64, u64>(1)` and only ever succeeds, so every breaker stays
//! closed. Each sample starts its threads on a spin barrier (no thread sleeps between the barrier
//! and its first call), and each thread takes the time of its first and its last call. The time
//! reported is the wall time from the earliest start to the latest end divided by the number of
//! calls of all threads: aggregate nanoseconds per call. After each subject the bench prints how
//! much its threads overlapped: the mean over samples of the time all threads ran at once divided
//! by the time any of them ran (1.0: perfectly overlapped; at 1 thread, trivially 1.0). A ratio
//! taken from runs that barely overlapped says nothing about contention.
//!
//! Run: `cargo bench -p fusebox-bench --bench contention` (a short run:
//! `-- --warm-up-time 1 --measurement-time 3`).

use std::hint::black_box;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::Criterion;

/// The open wait of every breaker: far longer than a run.
const OPEN_WAIT: Duration = Duration::from_secs(60 * 60);

/// The inner work of every subject.
#[inline(always)]
fn work() -> Result<u64, u64> {
    let work = || Ok::<u64, u64>(1);
    work()
}

/// fusebox subjects: annotated sync functions over a count and a time window.
mod fb {
    /// The error of the annotated functions (shared with the other benches).
    pub(crate) use fusebox_bench::BenchError;

    /// A count window of 100 calls.
    #[fusebox::circuit_breaker(
        key = "contention-count",
        window = 100,
        failure_rate = 50,
        open_for = "1h"
    )]
    pub(crate) fn count() -> Result<u64, BenchError> {
        super::work().map_err(BenchError::Inner)
    }

    /// A time window of 10 s.
    #[fusebox::circuit_breaker(
        key = "contention-time",
        window = "10s",
        failure_rate = 50,
        open_for = "1h"
    )]
    pub(crate) fn time() -> Result<u64, BenchError> {
        super::work().map_err(BenchError::Inner)
    }
}

/// A failsafe breaker that opens after 50 consecutive failures.
fn failsafe_breaker() -> failsafe::StateMachine<
    failsafe::failure_policy::ConsecutiveFailures<failsafe::backoff::Constant>,
    (),
> {
    failsafe::Config::new()
        .failure_policy(failsafe::failure_policy::consecutive_failures(
            50,
            failsafe::backoff::constant(OPEN_WAIT),
        ))
        .build()
}

/// A recloser breaker: 50 % over a 100-call ring.
fn recloser_breaker() -> recloser::Recloser {
    recloser::Recloser::custom()
        .error_rate(0.5)
        .closed_len(100)
        .open_wait(OPEN_WAIT)
        .build()
}

/// Waits until `threads` threads arrived, spinning.
fn spin_barrier(arrived: &AtomicUsize, threads: usize) {
    arrived.fetch_add(1, Ordering::AcqRel);
    while arrived.load(Ordering::Acquire) < threads {
        std::hint::spin_loop();
    }
}

/// Time all threads ran at once over time any ran.
fn overlap(spans: &[(Instant, Instant)]) -> f64 {
    let first = spans.iter().map(|s| s.0).min().expect("a span");
    let last = spans.iter().map(|s| s.1).max().expect("a span");
    let latest_start = spans.iter().map(|s| s.0).max().expect("a span");
    let earliest_end = spans.iter().map(|s| s.1).min().expect("a span");
    let union = (last - first).as_secs_f64();
    let both = earliest_end.saturating_duration_since(latest_start);
    if union == 0.0 {
        1.0
    } else {
        both.as_secs_f64() / union
    }
}

/// Benchmarks `call` from `threads` threads at once, then prints their mean overlap.
fn bench<R>(c: &mut Criterion, threads: usize, id: &str, call: impl Fn() -> R + Sync) {
    let overlaps = Mutex::new(Vec::new());
    c.benchmark_group(format!("contention/{threads}-thread"))
        .bench_function(id, |b| {
            b.iter_custom(|iters| {
                let arrived = AtomicUsize::new(0);
                let per_thread = iters.div_ceil(threads as u64).max(1);
                let spans: Vec<(Instant, Instant)> = std::thread::scope(|scope| {
                    let workers: Vec<_> = (0..threads)
                        .map(|_| {
                            let (call, arrived) = (&call, &arrived);
                            scope.spawn(move || {
                                spin_barrier(arrived, threads);
                                let start = Instant::now();
                                for _ in 0..per_thread {
                                    black_box(call());
                                }
                                (start, Instant::now())
                            })
                        })
                        .collect();
                    workers
                        .into_iter()
                        .map(|w| w.join().expect("worker panicked"))
                        .collect()
                });
                overlaps.lock().expect("overlap list").push(overlap(&spans));
                let first = spans.iter().map(|s| s.0).min().expect("a span");
                let last = spans.iter().map(|s| s.1).max().expect("a span");
                // Aggregate: the wall time of `per_thread * threads` calls, scaled to `iters`.
                (last - first).mul_f64(iters as f64 / (per_thread * threads as u64) as f64)
            })
        });
    let overlaps = overlaps.into_inner().expect("overlap list");
    let mean = overlaps.iter().sum::<f64>() / overlaps.len().max(1) as f64;
    let least = overlaps.iter().copied().fold(f64::INFINITY, f64::min);
    eprintln!(
        "contention/{threads}-thread/{id}: threads overlapped {:.1} % of the time (mean of {} samples, least {:.1} %)",
        mean * 100.0,
        overlaps.len(),
        least * 100.0
    );
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(1_000))
        .measurement_time(Duration::from_millis(3_000))
        .sample_size(30)
        .configure_from_args();
    let failsafe = failsafe_breaker();
    let recloser = recloser_breaker();
    for threads in [1, 2] {
        bench(&mut c, threads, "fusebox-count", fb::count);
        bench(&mut c, threads, "fusebox-time", fb::time);
        bench(&mut c, threads, "failsafe", || {
            failsafe::CircuitBreaker::call(&failsafe, work)
        });
        bench(&mut c, threads, "recloser", || recloser.call(work));
    }
    c.final_summary();
}
