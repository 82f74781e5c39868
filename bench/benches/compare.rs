//! fusebox against failsafe 1.3 and recloser 1.4, in one run, on the same work.
//!
//! Every subject wraps the same inner work: `std::future::ready(Ok::<u64, u64>(1))` polled once
//! with `Waker::noop()` (no runtime) for async subjects, `|| Ok(1)` for sync ones. Every breaker
//! trips at 50 % over 100 calls (failsafe's consecutive policy at 50 consecutive failures) and stays
//! open for an hour once opened, so nothing leaves OPEN while it is measured. No tracing subscriber
//! is installed.
//!
//! Cases (one criterion group each):
//! - `baseline`: the inner work alone, as a closure/future and as a plain `fn`/`async fn`;
//! - `closed_success`: an admitted call that succeeds and is recorded;
//! - `open_rejected`: a rejected call (each open breaker is checked to reject before it is timed);
//! - `open_fallback`: a rejected call turned into `0` (fusebox: `fallback = …`; the others: a `match`);
//! - `two_threads`, `two_threads_open`: `closed_success` and `open_rejected` from two threads at once
//!   on one shared breaker; the time reported is wall time for all calls divided by their number;
//! - `closed_success` also times fusebox with a 1 s time window and with slow-call timing on;
//! - `time_window_10s`: an outside harness's shape, `window = "10s", min_calls = 10` against no
//!   window argument (the default count window), async and sync, in the time window's steady state;
//! - `dynamic_key`: fusebox's per-call key lookup (`key = host`, an `async fn` and a plain `fn`) at
//!   1, 1,000 and 100,000 keys, a bare `papaya` lookup of the same keys in the same run, that
//!   lookup followed by a literal key's closed call (the two with the breaker's lines in L1), and
//!   that lookup followed by one locked add on a counter in the map's entry, and the bare lookup
//!   of a map whose entries were made with a breaker-sized allocation between them (as each key's
//!   breaker spreads fusebox's own map over memory).
//!
//! Run: `cargo bench -p fusebox-bench --bench compare`

use std::future::ready;
use std::hint::black_box;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};

/// The open wait of every breaker: far longer than a run.
const OPEN_WAIT: Duration = Duration::from_secs(60 * 60);

use fusebox_bench::poll_once;

/// The sync inner work.
#[inline(always)]
fn sync_work() -> Result<u64, u64> {
    let work = || Ok::<u64, u64>(1);
    work()
}

/// fusebox subjects: the annotated async fn, the annotated sync fn and the manual permit API.
///
/// The annotated functions take `fail: bool` so that the set-up can open their breakers with real
/// failures; the benchmarks always pass `false`, which makes the inner work exactly `Ok(1)`.
mod fb {
    use std::future::ready;

    use fusebox::{Breaker, Cause, Policy, Reason, Snapshot, State};

    /// The error of the annotated functions (shared with the other benches).
    pub(crate) use fusebox_bench::BenchError;

    /// The policy the attributes below spell out, for the manual API.
    pub(crate) const POLICY: Policy = Policy::new()
        .window(100)
        .failure_rate(50)
        .open_for(super::OPEN_WAIT);

    /// The async inner work, failing when asked to.
    #[inline(always)]
    fn work_async(fail: bool) -> std::future::Ready<Result<u64, u64>> {
        ready(if fail { Err(0) } else { Ok(1) })
    }

    /// The sync inner work, failing when asked to.
    #[inline(always)]
    fn work_sync(fail: bool) -> Result<u64, u64> {
        if fail { Err(0) } else { super::sync_work() }
    }

    /// The same body as the annotated async functions, without the attribute.
    pub(crate) async fn bare_async(fail: bool) -> Result<u64, BenchError> {
        work_async(fail).await.map_err(BenchError::Inner)
    }

    /// The same body as the annotated sync functions, without the attribute.
    pub(crate) fn bare_sync(fail: bool) -> Result<u64, BenchError> {
        work_sync(fail).map_err(BenchError::Inner)
    }

    /// Stays closed: only successes.
    #[fusebox::circuit_breaker(
        key = "bench-closed-async",
        window = 100,
        failure_rate = 50,
        open_for = "1h"
    )]
    pub(crate) async fn closed_async(fail: bool) -> Result<u64, BenchError> {
        work_async(fail).await.map_err(BenchError::Inner)
    }

    /// `closed_async`'s twin (its own key, the same policy) for the `dynamic_key` reference, so
    /// that `closed_async` keeps its one call site and is inlined as before.
    #[fusebox::circuit_breaker(
        key = "bench-closed-async-twin",
        window = 100,
        failure_rate = 50,
        open_for = "1h"
    )]
    pub(crate) async fn closed_async_twin(fail: bool) -> Result<u64, BenchError> {
        work_async(fail).await.map_err(BenchError::Inner)
    }

    /// Stays closed: only successes.
    #[fusebox::circuit_breaker(
        key = "bench-closed-sync",
        window = 100,
        failure_rate = 50,
        open_for = "1h"
    )]
    pub(crate) fn closed_sync(fail: bool) -> Result<u64, BenchError> {
        work_sync(fail).map_err(BenchError::Inner)
    }

    /// Opened with failures before it is measured.
    #[fusebox::circuit_breaker(
        key = "bench-open-async",
        window = 100,
        failure_rate = 50,
        open_for = "1h"
    )]
    pub(crate) async fn open_async(fail: bool) -> Result<u64, BenchError> {
        work_async(fail).await.map_err(BenchError::Inner)
    }

    /// Opened with failures before it is measured.
    #[fusebox::circuit_breaker(
        key = "bench-open-sync",
        window = 100,
        failure_rate = 50,
        open_for = "1h"
    )]
    pub(crate) fn open_sync(fail: bool) -> Result<u64, BenchError> {
        work_sync(fail).map_err(BenchError::Inner)
    }

    /// Opened with failures before it is measured; failed and rejected calls go to [`zero_async`].
    #[fusebox::circuit_breaker(key = "bench-fallback-async", window = 100, failure_rate = 50, open_for = "1h", fallback = zero_async)]
    pub(crate) async fn fallback_async(fail: bool) -> Result<u64, BenchError> {
        work_async(fail).await.map_err(BenchError::Inner)
    }

    /// Opened with failures before it is measured; failed and rejected calls go to [`zero_sync`].
    #[fusebox::circuit_breaker(key = "bench-fallback-sync", window = 100, failure_rate = 50, open_for = "1h", fallback = zero_sync)]
    pub(crate) fn fallback_sync(fail: bool) -> Result<u64, BenchError> {
        work_sync(fail).map_err(BenchError::Inner)
    }

    /// The fallback of [`fallback_async`].
    pub(crate) async fn zero_async(
        _fail: bool,
        _cause: Cause<BenchError>,
    ) -> Result<u64, BenchError> {
        Ok(0)
    }

    /// The fallback of [`fallback_sync`].
    pub(crate) fn zero_sync(_fail: bool, _cause: Cause<BenchError>) -> Result<u64, BenchError> {
        Ok(0)
    }

    /// Stays closed, over a time window like failsafe's (1 s).
    #[fusebox::circuit_breaker(
        key = "bench-closed-time-window",
        window = "1s",
        min_calls = 100,
        failure_rate = 50,
        open_for = "1h"
    )]
    pub(crate) async fn closed_time_window(fail: bool) -> Result<u64, BenchError> {
        work_async(fail).await.map_err(BenchError::Inner)
    }

    /// The outside harness's time window: `window = "10s", min_calls = 10`, all else default.
    #[fusebox::circuit_breaker(key = "bench-10s-time-async", window = "10s", min_calls = 10)]
    pub(crate) async fn ten_s_time_async(fail: bool) -> Result<u64, BenchError> {
        work_async(fail).await.map_err(BenchError::Inner)
    }

    /// [`ten_s_time_async`]'s count-window reference: no window argument (the default window).
    #[fusebox::circuit_breaker(key = "bench-10s-count-async")]
    pub(crate) async fn ten_s_count_async(fail: bool) -> Result<u64, BenchError> {
        work_async(fail).await.map_err(BenchError::Inner)
    }

    /// The outside harness's time window, sync.
    #[fusebox::circuit_breaker(key = "bench-10s-time-sync", window = "10s", min_calls = 10)]
    pub(crate) fn ten_s_time_sync(fail: bool) -> Result<u64, BenchError> {
        work_sync(fail).map_err(BenchError::Inner)
    }

    /// [`ten_s_time_sync`]'s count-window reference.
    #[fusebox::circuit_breaker(key = "bench-10s-count-sync")]
    pub(crate) fn ten_s_count_sync(fail: bool) -> Result<u64, BenchError> {
        work_sync(fail).map_err(BenchError::Inner)
    }

    /// Stays closed, timing every call against a slow-call threshold.
    #[fusebox::circuit_breaker(
        key = "bench-closed-slow",
        window = 100,
        failure_rate = 50,
        slow = "1s",
        slow_rate = 50,
        open_for = "1h"
    )]
    pub(crate) async fn closed_slow(fail: bool) -> Result<u64, BenchError> {
        work_async(fail).await.map_err(BenchError::Inner)
    }

    /// The registry of the dynamic-key case, with room for every key.
    pub(crate) static HOSTS: std::sync::LazyLock<fusebox::Registry> =
        std::sync::LazyLock::new(|| {
            let registry = fusebox::Registry::new();
            registry.set_max_keys(200_000);
            registry
        });

    /// One breaker per host, looked up per call.
    #[fusebox::circuit_breaker(key = host, registry = HOSTS, window = 100, failure_rate = 50, open_for = "1h")]
    pub(crate) async fn per_host(host: &str, fail: bool) -> Result<u64, BenchError> {
        work_async(fail).await.map_err(BenchError::Inner)
    }

    /// The same breaker per host from a plain `fn` (it borrows its breaker from the map).
    #[fusebox::circuit_breaker(key = host, registry = HOSTS, window = 100, failure_rate = 50, open_for = "1h")]
    pub(crate) fn per_host_sync(host: &str, fail: bool) -> Result<u64, BenchError> {
        work_sync(fail).map_err(BenchError::Inner)
    }

    /// One call through the manual API, with the sync inner work.
    #[inline(always)]
    pub(crate) fn manual(breaker: &Breaker) -> Result<u64, BenchError> {
        let permit = breaker.try_acquire()?;
        let result = super::sync_work();
        match result {
            Ok(_) => permit.success(),
            Err(_) => permit.failure(),
        }
        result.map_err(BenchError::Inner)
    }

    /// A manual-API breaker under `key`.
    pub(crate) fn manual_breaker(key: &str) -> Breaker {
        fusebox::registry()
            .breaker(key, POLICY)
            .expect("valid policy")
    }

    /// Reports failures on a manual-API breaker until it opens.
    pub(crate) fn open_manual(breaker: &Breaker) {
        for _ in 0..1_000 {
            if breaker.state() == State::Open {
                return;
            }
            breaker
                .try_acquire()
                .expect("closed breakers admit")
                .failure();
        }
        panic!("breaker `{}` did not open", breaker.key());
    }

    /// The global registry's view of the breaker under `key` (found by scanning the snapshots).
    pub(crate) fn snapshot(key: &str) -> Snapshot {
        fusebox::registry()
            .snapshot()
            .into_iter()
            .find(|s| s.key.as_str() == key)
            .unwrap_or_else(|| {
                panic!("no breaker `{key}`: the attribute registers it on first call")
            })
    }

    /// Calls `fail_once` (an annotated function called with `fail = true`) until the breaker
    /// under `key` is open, and checks that it runs the same policy as the manual API.
    pub(crate) fn open_site(key: &str, mut fail_once: impl FnMut()) {
        for _ in 0..1_000 {
            fail_once();
            let snapshot = snapshot(key);
            if snapshot.state == State::Open {
                assert_eq!(
                    snapshot.policy, POLICY,
                    "the attribute and the manual API must run the same policy"
                );
                return;
            }
        }
        panic!("breaker `{key}` did not open");
    }

    /// True for a call rejected because the circuit is open.
    pub(crate) fn rejected<T>(r: &Result<T, BenchError>) -> bool {
        matches!(r, Err(BenchError::Rejected(e)) if e.reason() == Reason::Open)
    }
}

/// failsafe 1.3 subjects: `consecutive_failures` and `success_rate_over_time_window`.
mod fs {
    use std::time::Duration;

    use failsafe::backoff::{self, Constant};
    use failsafe::failure_policy::{
        ConsecutiveFailures, SuccessRateOverTimeWindow, consecutive_failures,
        success_rate_over_time_window,
    };
    use failsafe::{Config, StateMachine};

    /// A breaker that opens after 50 consecutive failures (50 % of a 100-call window).
    pub(crate) type Consecutive = StateMachine<ConsecutiveFailures<Constant>, ()>;
    /// A breaker that opens below a 50 % success rate over at least 100 calls in a time window.
    pub(crate) type TimeWindow = StateMachine<SuccessRateOverTimeWindow<Constant>, ()>;

    /// failsafe's time window: its shortest (the policy truncates it to whole seconds).
    pub(crate) const TIME_WINDOW: Duration = Duration::from_secs(1);

    /// A closed consecutive-failures breaker.
    pub(crate) fn consecutive() -> Consecutive {
        Config::new()
            .failure_policy(consecutive_failures(
                50,
                backoff::constant(super::OPEN_WAIT),
            ))
            .build()
    }

    /// A closed success-rate breaker (it cannot open before [`TIME_WINDOW`] has passed).
    pub(crate) fn time_window() -> TimeWindow {
        Config::new()
            .failure_policy(success_rate_over_time_window(
                0.5,
                100,
                TIME_WINDOW,
                backoff::constant(super::OPEN_WAIT),
            ))
            .build()
    }

    /// Sync failures until `cb` rejects.
    pub(crate) fn open<P, I>(cb: &StateMachine<P, I>)
    where
        P: failsafe::FailurePolicy,
        I: failsafe::Instrument,
    {
        for _ in 0..1_000 {
            if !cb.is_call_permitted() {
                return;
            }
            let _ = failsafe::CircuitBreaker::call(cb, || Err::<u64, u64>(0));
        }
        panic!("failsafe breaker did not open");
    }

    /// Async failures (through the futures API) until `cb` rejects.
    pub(crate) fn open_async<P, I>(cb: &StateMachine<P, I>)
    where
        P: failsafe::FailurePolicy + Send + Sync,
        I: failsafe::Instrument + Send + Sync,
    {
        for _ in 0..1_000 {
            if !cb.is_call_permitted() {
                return;
            }
            let _ = super::poll_once(failsafe::futures::CircuitBreaker::call(
                cb,
                std::future::ready(Err::<u64, u64>(0)),
            ));
        }
        panic!("failsafe breaker did not open");
    }
}

/// recloser 1.4 subjects: `Recloser` (sync) and `AsyncRecloser`.
mod rc {
    use recloser::{AsyncRecloser, Recloser};

    /// A closed recloser: 50 % over a 100-call ring.
    pub(crate) fn sync() -> Recloser {
        Recloser::custom()
            .error_rate(0.5)
            .closed_len(100)
            .open_wait(super::OPEN_WAIT)
            .build()
    }

    /// The async wrapper of a closed recloser with the same settings.
    pub(crate) fn async_() -> AsyncRecloser {
        AsyncRecloser::from(sync())
    }

    /// Sync failures until `r` rejects.
    pub(crate) fn open(r: &Recloser) {
        for _ in 0..1_000 {
            if matches!(r.call(|| Ok::<u64, u64>(1)), Err(recloser::Error::Rejected)) {
                return;
            }
            let _ = r.call(|| Err::<u64, u64>(0));
        }
        panic!("recloser did not open");
    }

    /// Async failures until `r` rejects.
    pub(crate) fn open_async(r: &AsyncRecloser) {
        for _ in 0..1_000 {
            let probe = super::poll_once(r.call(std::future::ready(Ok::<u64, u64>(1))));
            if matches!(probe, Err(recloser::Error::Rejected)) {
                return;
            }
            let _ = super::poll_once(r.call(std::future::ready(Err::<u64, u64>(0))));
        }
        panic!("recloser did not open");
    }
}

/// Every breaker of the run, in the state its case needs.
struct Subjects {
    fb_manual_closed: fusebox::Breaker,
    fb_manual_open: fusebox::Breaker,
    fs_cons_closed: fs::Consecutive,
    fs_cons_open: fs::Consecutive,
    fs_cons_async_closed: fs::Consecutive,
    fs_cons_async_open: fs::Consecutive,
    fs_time_closed: fs::TimeWindow,
    fs_time_open: fs::TimeWindow,
    fs_time_async_closed: fs::TimeWindow,
    fs_time_async_open: fs::TimeWindow,
    rc_closed: recloser::Recloser,
    rc_open: recloser::Recloser,
    rc_async_closed: recloser::AsyncRecloser,
    rc_async_open: recloser::AsyncRecloser,
}

impl Subjects {
    /// Builds every breaker, opens the ones the open cases use and checks each state.
    fn new() -> Self {
        let s = Subjects {
            fb_manual_closed: fb::manual_breaker("bench-manual-closed"),
            fb_manual_open: fb::manual_breaker("bench-manual-open"),
            fs_cons_closed: fs::consecutive(),
            fs_cons_open: fs::consecutive(),
            fs_cons_async_closed: fs::consecutive(),
            fs_cons_async_open: fs::consecutive(),
            fs_time_closed: fs::time_window(),
            fs_time_open: fs::time_window(),
            fs_time_async_closed: fs::time_window(),
            fs_time_async_open: fs::time_window(),
            rc_closed: rc::sync(),
            rc_open: rc::sync(),
            rc_async_closed: rc::async_(),
            rc_async_open: rc::async_(),
        };

        // fusebox: the first call registers each annotated site's breaker; then failures open it.
        assert!(poll_once(fb::closed_async(false)).is_ok());
        assert!(fb::closed_sync(false).is_ok());
        fb::open_site("bench-open-async", || drop(poll_once(fb::open_async(true))));
        fb::open_site("bench-open-sync", || drop(fb::open_sync(true)));
        fb::open_site("bench-fallback-async", || {
            drop(poll_once(fb::fallback_async(true)))
        });
        fb::open_site("bench-fallback-sync", || drop(fb::fallback_sync(true)));
        assert!(fb::manual(&s.fb_manual_closed).is_ok());
        fb::open_manual(&s.fb_manual_open);

        fs::open(&s.fs_cons_open);
        fs::open_async(&s.fs_cons_async_open);
        rc::open(&s.rc_open);
        rc::open_async(&s.rc_async_open);
        // failsafe's success-rate policy only trips once its window has elapsed.
        std::thread::sleep(fs::TIME_WINDOW + Duration::from_millis(100));
        fs::open(&s.fs_time_open);
        fs::open_async(&s.fs_time_async_open);

        s.check();
        s
    }

    /// Asserts that every closed subject admits and every open subject rejects.
    fn check(&self) {
        use failsafe::Error as Fs;
        use recloser::Error as Rc;

        assert!(poll_once(fb::closed_async(false)).is_ok());
        assert!(fb::closed_sync(false).is_ok());
        assert!(fb::manual(&self.fb_manual_closed).is_ok());
        assert!(fb::rejected(&poll_once(fb::open_async(false))));
        assert!(fb::rejected(&fb::open_sync(false)));
        assert!(fb::rejected(&fb::manual(&self.fb_manual_open)));
        assert_eq!(poll_once(fb::fallback_async(false)).ok(), Some(0));
        assert_eq!(fb::fallback_sync(false).ok(), Some(0));
        for key in [
            "bench-closed-async",
            "bench-closed-sync",
            "bench-manual-closed",
        ] {
            assert_eq!(
                fb::snapshot(key).state,
                fusebox::State::Closed,
                "`{key}` is closed"
            );
        }
        for key in [
            "bench-open-async",
            "bench-open-sync",
            "bench-fallback-async",
            "bench-fallback-sync",
            "bench-manual-open",
        ] {
            assert_eq!(
                fb::snapshot(key).state,
                fusebox::State::Open,
                "`{key}` is open"
            );
        }

        assert!(fs_sync(&self.fs_cons_closed).is_ok());
        assert!(fs_async(&self.fs_cons_async_closed).is_ok());
        assert!(fs_sync(&self.fs_time_closed).is_ok());
        assert!(fs_async(&self.fs_time_async_closed).is_ok());
        assert!(matches!(fs_sync(&self.fs_cons_open), Err(Fs::Rejected)));
        assert!(matches!(
            fs_async(&self.fs_cons_async_open),
            Err(Fs::Rejected)
        ));
        assert!(matches!(fs_sync(&self.fs_time_open), Err(Fs::Rejected)));
        assert!(matches!(
            fs_async(&self.fs_time_async_open),
            Err(Fs::Rejected)
        ));

        assert!(rc_sync(&self.rc_closed).is_ok());
        assert!(rc_async(&self.rc_async_closed).is_ok());
        assert!(matches!(rc_sync(&self.rc_open), Err(Rc::Rejected)));
        assert!(matches!(rc_async(&self.rc_async_open), Err(Rc::Rejected)));
    }
}

/// One call through failsafe's sync API.
#[inline(always)]
fn fs_sync<P, I>(cb: &failsafe::StateMachine<P, I>) -> Result<u64, failsafe::Error<u64>>
where
    P: failsafe::FailurePolicy,
    I: failsafe::Instrument,
{
    failsafe::CircuitBreaker::call(cb, sync_work)
}

/// One call through failsafe's futures API, polled once.
#[inline(always)]
fn fs_async<P, I>(cb: &failsafe::StateMachine<P, I>) -> Result<u64, failsafe::Error<u64>>
where
    P: failsafe::FailurePolicy + Send + Sync,
    I: failsafe::Instrument + Send + Sync,
{
    poll_once(failsafe::futures::CircuitBreaker::call(
        cb,
        ready(Ok::<u64, u64>(1)),
    ))
}

/// One call through recloser's sync API.
#[inline(always)]
fn rc_sync(r: &recloser::Recloser) -> Result<u64, recloser::Error<u64>> {
    r.call(sync_work)
}

/// One call through `AsyncRecloser`, polled once.
#[inline(always)]
fn rc_async(r: &recloser::AsyncRecloser) -> Result<u64, recloser::Error<u64>> {
    poll_once(r.call(ready(Ok::<u64, u64>(1))))
}

/// failsafe's result with the fallback a caller writes by hand: `0` when rejected or failed.
#[inline(always)]
fn fs_or_zero(r: Result<u64, failsafe::Error<u64>>) -> u64 {
    match r {
        Ok(v) => v,
        Err(failsafe::Error::Rejected) => 0,
        Err(failsafe::Error::Inner(_)) => 0,
    }
}

/// recloser's result with the fallback a caller writes by hand: `0` when rejected or failed.
#[inline(always)]
fn rc_or_zero(r: Result<u64, recloser::Error<u64>>) -> u64 {
    match r {
        Ok(v) => v,
        Err(recloser::Error::Rejected) => 0,
        Err(recloser::Error::Inner(_)) => 0,
    }
}

/// The manual API's result with the fallback a caller writes by hand: `0` when rejected or failed.
#[inline(always)]
fn fb_or_zero(r: Result<u64, fb::BenchError>) -> u64 {
    match r {
        Ok(v) => v,
        Err(fb::BenchError::Rejected(_)) => 0,
        Err(fb::BenchError::Inner(_)) => 0,
    }
}

/// Times `call` on one thread.
fn one<R>(group: &mut BenchmarkGroup<'_, WallTime>, id: &str, call: impl Fn() -> R) {
    group.bench_function(id, |b| b.iter(|| black_box(call())));
}

/// Times `call` on two threads sharing one breaker: each thread makes half of the calls; the
/// result is the wall time from a common start until both finish.
fn two<R>(group: &mut BenchmarkGroup<'_, WallTime>, id: &str, call: impl Fn() -> R + Sync) {
    group.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let start = Barrier::new(2);
            let halves = [iters / 2, iters - iters / 2];
            std::thread::scope(|scope| {
                let workers = halves.map(|n| {
                    let (call, start) = (&call, &start);
                    scope.spawn(move || {
                        start.wait();
                        let t0 = Instant::now();
                        for _ in 0..n {
                            black_box(call());
                        }
                        (t0, Instant::now())
                    })
                });
                let spans = workers.map(|w| w.join().expect("worker panicked"));
                let begin = spans.iter().map(|s| s.0).min().expect("two spans");
                let end = spans.iter().map(|s| s.1).max().expect("two spans");
                end - begin
            })
        })
    });
}

fn baseline(c: &mut Criterion) {
    let mut g = c.benchmark_group("baseline");
    one(&mut g, "ready-future", || {
        poll_once(ready(Ok::<u64, u64>(1)))
    });
    one(&mut g, "sync-closure", sync_work);
    one(&mut g, "bare-async-fn", || poll_once(fb::bare_async(false)));
    one(&mut g, "bare-sync-fn", || fb::bare_sync(false));
    g.finish();
}

fn closed_success(c: &mut Criterion, s: &Subjects) {
    let mut g = c.benchmark_group("closed_success");
    one(&mut g, "fusebox/attr-async", || {
        poll_once(fb::closed_async(false))
    });
    one(&mut g, "fusebox/attr-sync", || fb::closed_sync(false));
    one(&mut g, "fusebox/manual", || fb::manual(&s.fb_manual_closed));
    one(&mut g, "failsafe-consecutive/sync", || {
        fs_sync(&s.fs_cons_closed)
    });
    one(&mut g, "failsafe-consecutive/async", || {
        fs_async(&s.fs_cons_async_closed)
    });
    one(&mut g, "failsafe-timewindow/sync", || {
        fs_sync(&s.fs_time_closed)
    });
    one(&mut g, "failsafe-timewindow/async", || {
        fs_async(&s.fs_time_async_closed)
    });
    one(&mut g, "recloser/sync", || rc_sync(&s.rc_closed));
    one(&mut g, "recloser/async", || rc_async(&s.rc_async_closed));
    one(&mut g, "fusebox/attr-async-time-window", || {
        poll_once(fb::closed_time_window(false))
    });
    one(&mut g, "fusebox/attr-async-slow-timing", || {
        poll_once(fb::closed_slow(false))
    });
    g.finish();
}

/// The outside harness's shape: a 10 s time window with `min_calls = 10` against the default
/// count window, the global registry and the default clock, async and sync. Before timing, each
/// breaker gets calls in two slices of its window (a slice of a 10 s window is 1 s), so the time
/// window's other slices hold `min_calls`: the steady state of a long run, which criterion's
/// warm-up alone would reach only after its first second.
fn time_window_10s(c: &mut Criterion) {
    for round in 0..2 {
        if round == 1 {
            std::thread::sleep(Duration::from_millis(1_100));
        }
        for _ in 0..100 {
            assert!(poll_once(fb::ten_s_time_async(false)).is_ok());
            assert!(poll_once(fb::ten_s_count_async(false)).is_ok());
            assert!(fb::ten_s_time_sync(false).is_ok());
            assert!(fb::ten_s_count_sync(false).is_ok());
        }
    }
    let mut g = c.benchmark_group("time_window_10s");
    one(&mut g, "fusebox/attr-async-count-window", || {
        poll_once(fb::ten_s_count_async(false))
    });
    one(&mut g, "fusebox/attr-async-time-window", || {
        poll_once(fb::ten_s_time_async(false))
    });
    one(&mut g, "fusebox/attr-sync-count-window", || {
        fb::ten_s_count_sync(false)
    });
    one(&mut g, "fusebox/attr-sync-time-window", || {
        fb::ten_s_time_sync(false)
    });
    g.finish();
    for key in [
        "bench-10s-time-async",
        "bench-10s-count-async",
        "bench-10s-time-sync",
        "bench-10s-count-sync",
    ] {
        assert_eq!(
            fb::snapshot(key).state,
            fusebox::State::Closed,
            "`{key}` is closed"
        );
    }
}

/// One breaker per key: the per-call lookup at 1, 1,000 and 100,000 keys (fusebox only: the other
/// crates have no registry), from an `async fn` and a plain `fn`, visiting 4,096 keys in a
/// scattered order as traffic to many hosts would; each followed by a bare `papaya` lookup of the
/// same keys in the same order (the reference) and by that lookup then a literal key's closed
/// call (the floor: a breaker whose lines are in L1).
/// The spacer before each entry of `bare-papaya-lookup-spread`: with the entry, its `String` and
/// its `Arc`, about 830 heap bytes a key, as fusebox's map with its breakers takes (828 a key,
/// BENCHMARKS.md, "Memory").
const SPREAD_BYTES: usize = 700;

fn dynamic_keys(c: &mut Criterion) {
    let mut g = c.benchmark_group("dynamic_key");
    let hosts: Vec<String> = (0..100_000)
        .map(|i| format!("host-{i}.internal:443"))
        .collect();
    let mut created = 0;
    for keys in [1usize, 1_000, 100_000] {
        for host in &hosts[created..keys] {
            assert!(poll_once(fb::per_host(host, false)).is_ok());
        }
        created = keys;
        assert_eq!(fb::HOSTS.len(), keys);
        let order: Vec<&str> = (0..4096)
            .map(|i| hosts[(i * 7919) % keys].as_str())
            .collect();
        g.bench_function(format!("fusebox/attr-async/{keys}-keys"), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & 4095;
                black_box(poll_once(fb::per_host(black_box(order[i]), false)))
            })
        });
        g.bench_function(format!("fusebox/attr-sync/{keys}-keys"), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & 4095;
                black_box(fb::per_host_sync(black_box(order[i]), false))
            })
        });
        // The reference in the same run: a bare `papaya` lookup of the same `&str`s, same order.
        let bare: papaya::HashMap<String, std::sync::Arc<u64>, foldhash::fast::RandomState> =
            papaya::HashMap::with_hasher(foldhash::fast::RandomState::default());
        for host in &hosts[..keys] {
            bare.pin().insert(host.clone(), std::sync::Arc::new(1));
        }
        g.bench_function(format!("bare-papaya-lookup/{keys}-keys"), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & 4095;
                black_box(bare.pin().get(black_box(order[i])).map(|v| **v))
            })
        });
        // The same lookup in a map laid out as fusebox's is: each key's entry made after a spacer
        // the size of a breaker with its window, kept alive, so the entries lie as far apart as
        // fusebox's and the visited keys span as many pages.
        let spread: papaya::HashMap<String, std::sync::Arc<u64>, foldhash::fast::RandomState> =
            papaya::HashMap::with_hasher(foldhash::fast::RandomState::default());
        let spacers: Vec<Vec<u8>> = hosts[..keys]
            .iter()
            .map(|host| {
                let spacer = vec![1u8; SPREAD_BYTES];
                spread.pin().insert(host.clone(), std::sync::Arc::new(1));
                spacer
            })
            .collect();
        g.bench_function(format!("bare-papaya-lookup-spread/{keys}-keys"), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & 4095;
                black_box(spread.pin().get(black_box(order[i])).map(|v| **v))
            })
        });
        drop(spacers);
        // The lookup, then one locked add on a counter held in the map's entry: what a call whose
        // per-key state lived inline in the map's value would add to the lookup.
        let counted: papaya::HashMap<String, AtomicU64, foldhash::fast::RandomState> =
            papaya::HashMap::with_hasher(foldhash::fast::RandomState::default());
        for host in &hosts[..keys] {
            counted.pin().insert(host.clone(), AtomicU64::new(0));
        }
        g.bench_function(format!("bare-papaya-then-add/{keys}-keys"), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & 4095;
                let map = counted.pin();
                let found = map.get(black_box(order[i]));
                black_box(found.map(|v| v.fetch_add(1, Ordering::AcqRel)))
            })
        });
        // What a lookup followed by a closed call costs when the breaker's lines are in L1: the
        // same bare lookup, then the annotated `async fn` of a literal key (same policy).
        g.bench_function(format!("bare-papaya-then-literal-key/{keys}-keys"), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & 4095;
                black_box(bare.pin().get(black_box(order[i])).map(|v| **v));
                black_box(poll_once(fb::closed_async_twin(false)))
            })
        });
    }
    g.finish();
}

fn open_rejected(c: &mut Criterion, s: &Subjects) {
    s.check();
    let mut g = c.benchmark_group("open_rejected");
    one(&mut g, "fusebox/attr-async", || {
        poll_once(fb::open_async(false))
    });
    one(&mut g, "fusebox/attr-sync", || fb::open_sync(false));
    one(&mut g, "fusebox/manual", || fb::manual(&s.fb_manual_open));
    one(&mut g, "failsafe-consecutive/sync", || {
        fs_sync(&s.fs_cons_open)
    });
    one(&mut g, "failsafe-consecutive/async", || {
        fs_async(&s.fs_cons_async_open)
    });
    one(&mut g, "failsafe-timewindow/sync", || {
        fs_sync(&s.fs_time_open)
    });
    one(&mut g, "failsafe-timewindow/async", || {
        fs_async(&s.fs_time_async_open)
    });
    one(&mut g, "recloser/sync", || rc_sync(&s.rc_open));
    one(&mut g, "recloser/async", || rc_async(&s.rc_async_open));
    g.finish();
}

fn open_fallback(c: &mut Criterion, s: &Subjects) {
    s.check();
    let mut g = c.benchmark_group("open_fallback");
    one(&mut g, "fusebox/attr-async", || {
        poll_once(fb::fallback_async(false))
    });
    one(&mut g, "fusebox/attr-sync", || fb::fallback_sync(false));
    one(&mut g, "fusebox/manual", || {
        fb_or_zero(fb::manual(&s.fb_manual_open))
    });
    one(&mut g, "failsafe-consecutive/sync", || {
        fs_or_zero(fs_sync(&s.fs_cons_open))
    });
    one(&mut g, "failsafe-consecutive/async", || {
        fs_or_zero(fs_async(&s.fs_cons_async_open))
    });
    one(&mut g, "failsafe-timewindow/sync", || {
        fs_or_zero(fs_sync(&s.fs_time_open))
    });
    one(&mut g, "failsafe-timewindow/async", || {
        fs_or_zero(fs_async(&s.fs_time_async_open))
    });
    one(&mut g, "recloser/sync", || rc_or_zero(rc_sync(&s.rc_open)));
    one(&mut g, "recloser/async", || {
        rc_or_zero(rc_async(&s.rc_async_open))
    });
    g.finish();
}

fn two_threads(c: &mut Criterion, s: &Subjects) {
    let mut g = c.benchmark_group("two_threads");
    two(&mut g, "fusebox/attr-async", || {
        poll_once(fb::closed_async(false))
    });
    two(&mut g, "fusebox/attr-sync", || fb::closed_sync(false));
    two(&mut g, "fusebox/manual", || fb::manual(&s.fb_manual_closed));
    two(&mut g, "failsafe-consecutive/sync", || {
        fs_sync(&s.fs_cons_closed)
    });
    two(&mut g, "failsafe-consecutive/async", || {
        fs_async(&s.fs_cons_async_closed)
    });
    two(&mut g, "failsafe-timewindow/sync", || {
        fs_sync(&s.fs_time_closed)
    });
    two(&mut g, "failsafe-timewindow/async", || {
        fs_async(&s.fs_time_async_closed)
    });
    two(&mut g, "recloser/sync", || rc_sync(&s.rc_closed));
    two(&mut g, "recloser/async", || rc_async(&s.rc_async_closed));
    g.finish();
}

fn two_threads_open(c: &mut Criterion, s: &Subjects) {
    s.check();
    let mut g = c.benchmark_group("two_threads_open");
    two(&mut g, "fusebox/attr-async", || {
        poll_once(fb::open_async(false))
    });
    two(&mut g, "fusebox/attr-sync", || fb::open_sync(false));
    two(&mut g, "failsafe-consecutive/sync", || {
        fs_sync(&s.fs_cons_open)
    });
    two(&mut g, "failsafe-timewindow/sync", || {
        fs_sync(&s.fs_time_open)
    });
    two(&mut g, "recloser/sync", || rc_sync(&s.rc_open));
    two(&mut g, "recloser/async", || rc_async(&s.rc_async_open));
    g.finish();
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(1_000))
        .measurement_time(Duration::from_millis(3_000))
        .sample_size(50)
        .configure_from_args();
    let subjects = Subjects::new();
    baseline(&mut c);
    closed_success(&mut c, &subjects);
    time_window_10s(&mut c);
    open_rejected(&mut c, &subjects);
    open_fallback(&mut c, &subjects);
    two_threads(&mut c, &subjects);
    two_threads_open(&mut c, &subjects);
    dynamic_keys(&mut c);
    subjects.check();
    c.final_summary();
}
