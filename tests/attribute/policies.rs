//! Every trip and recovery rule, written in the attribute and driven by a fake clock: time windows,
//! slow calls, consecutive failures, open backoff, progressive recovery, half-open leases, the
//! bulkhead, `policy = CONST` with overrides, and dynamic keys.

use std::future::Future;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::common::ApiError;
use fusebox::{Policy, Reason, Recovery, State, circuit_breaker};

/// The rejection inside `result`, or a panic naming what came instead.
fn rejection<T: std::fmt::Debug>(result: Result<T, ApiError>) -> fusebox::Error {
    match result {
        Err(ApiError::Rejected(error)) => error,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

/// Polls `future` once: `Some(output)` when it finished at once.
fn poll_once<F: Future + Unpin>(future: &mut F) -> Option<F::Output> {
    match std::pin::Pin::new(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

/// Runs an async function that never waits.
fn now<F: Future>(future: F) -> F::Output {
    let mut future = Box::pin(future);
    poll_once(&mut future).expect("finished without waiting")
}

fn outcome(fail: bool) -> Result<(), ApiError> {
    if fail { Err(ApiError::Timeout) } else { Ok(()) }
}

const SECOND: Duration = Duration::from_secs(1);

// ---------------------------------------------------------------- time window

fake_registry!(TIME_CLOCK, TIME);

#[circuit_breaker(key = "time-window", registry = TIME, window = "10s", min_calls = 4, failure_rate = 50, failure = [Timeout])]
fn timed(fail: bool) -> Result<(), ApiError> {
    outcome(fail)
}

#[test]
fn a_time_window_forgets_failures_older_than_the_window() {
    for _ in 0..3 {
        assert_eq!(timed(true), Err(ApiError::Timeout));
    }
    let breaker = TIME.get("time-window").unwrap();
    assert!(
        matches!(breaker.policy().settings().window, fusebox::Window::Time(_)),
        "a time window"
    );
    assert_eq!(breaker.state(), State::Closed, "3 calls: below min_calls");
    TIME_CLOCK.advance(11 * SECOND);
    assert_eq!(
        breaker.snapshot().calls,
        0,
        "the three failures left the window"
    );
    // Had they stayed, this would be 4 failures in 7 calls and open the circuit.
    assert_eq!(timed(true), Err(ApiError::Timeout));
    for _ in 0..3 {
        timed(false).unwrap();
    }
    let snapshot = breaker.snapshot();
    assert_eq!(
        (snapshot.state, snapshot.calls, snapshot.failures),
        (State::Closed, 4, 1)
    );
    // Within the window, failures add up: 3 of 6 is 50 %.
    TIME_CLOCK.advance(2 * SECOND);
    timed(true).unwrap_err();
    assert_eq!(breaker.state(), State::Closed);
    timed(true).unwrap_err();
    assert_eq!(breaker.state(), State::Open);
}

// ---------------------------------------------------------------- slow calls

fake_registry!(SLOW_CLOCK, SLOW);

/// Takes `millis` of fake time, then succeeds.
#[circuit_breaker(key = "slow", registry = SLOW, window = 4, min_calls = 4, slow = "2s", slow_rate = 50, failure = [Timeout])]
fn slow_call(millis: u64) -> Result<(), ApiError> {
    SLOW_CLOCK.advance(Duration::from_millis(millis));
    Ok(())
}

#[test]
fn slow_successes_count_as_slow_and_trip_at_slow_rate() {
    slow_call(10).unwrap();
    slow_call(1_999).unwrap();
    slow_call(3_000).unwrap();
    let breaker = SLOW.get("slow").unwrap();
    let snapshot = breaker.snapshot();
    assert_eq!(
        (snapshot.calls, snapshot.slow, snapshot.failures),
        (3, 1, 0)
    );
    assert_eq!(snapshot.state, State::Closed);
    // Slower than `slow`: 2 s and 1 ms (a call of exactly 2 s is not slow).
    slow_call(2_001).unwrap();
    assert_eq!(breaker.state(), State::Open, "2 slow calls of 4: 50 %");
    let error = rejection(slow_call(0));
    assert_eq!(error.reason(), Reason::Open);
}

// ---------------------------------------------------------------- consecutive failures

fake_registry!(RUN_CLOCK, RUN);

/// `consecutive` alone: the rate rule is off, so 2 failures of 2 calls do not trip it.
#[circuit_breaker(key = "in-a-row", registry = RUN, window = 10, min_calls = 2, consecutive = 3, failure = [Timeout])]
fn in_a_row(fail: bool) -> Result<(), ApiError> {
    outcome(fail)
}

/// `consecutive` with `failure_rate`: either rule trips.
#[circuit_breaker(key = "either", registry = RUN, window = 4, min_calls = 4, failure_rate = 50, consecutive = 3, failure = [Timeout])]
fn either(fail: bool) -> Result<(), ApiError> {
    outcome(fail)
}

#[test]
fn consecutive_alone_trips_after_n_in_a_row_and_a_success_resets_the_run() {
    let breaker = || RUN.get("in-a-row").unwrap();
    in_a_row(true).unwrap_err();
    in_a_row(true).unwrap_err();
    assert_eq!(
        breaker().policy().settings().failure_rate,
        None,
        "rate rule off"
    );
    assert_eq!(
        breaker().state(),
        State::Closed,
        "100 % of 2 calls, but only 2 in a row"
    );
    assert_eq!(breaker().snapshot().consecutive_failures, 2);
    in_a_row(false).unwrap();
    assert_eq!(
        breaker().snapshot().consecutive_failures,
        0,
        "a success resets the run"
    );
    in_a_row(true).unwrap_err();
    in_a_row(true).unwrap_err();
    assert_eq!(breaker().state(), State::Closed);
    in_a_row(true).unwrap_err();
    assert_eq!(breaker().state(), State::Open, "three in a row");
}

#[test]
fn consecutive_with_a_rate_trips_on_either_rule() {
    let _ = either(false);
    let breaker = || RUN.get("either").unwrap();
    assert_eq!(breaker().policy().settings().failure_rate, Some(50));
    breaker().reset();
    // The run: three in a row before min_calls is reached.
    for _ in 0..3 {
        either(true).unwrap_err();
    }
    assert_eq!(
        breaker().state(),
        State::Open,
        "3 in a row, with 3 calls under min_calls"
    );
    breaker().reset();
    // The rate: alternate, never two in a row, until 2 of 4 failed.
    for fail in [false, true, false] {
        let _ = either(fail);
        assert_eq!(breaker().state(), State::Closed);
    }
    either(true).unwrap_err();
    assert_eq!(breaker().state(), State::Open, "50 % of 4 calls");
}

// ---------------------------------------------------------------- open backoff

fake_registry!(BACKOFF_CLOCK, BACKOFF);

#[circuit_breaker(key = "backoff", registry = BACKOFF, window = 1, min_calls = 1, failure_rate = 100, open_for = "10s", open_backoff = 2, open_max = "35s", failure = [Timeout])]
fn backing_off(fail: bool) -> Result<(), ApiError> {
    outcome(fail)
}

#[test]
fn each_failed_recovery_doubles_the_wait_up_to_open_max_and_a_close_resets_it() {
    let retry_after = || rejection(backing_off(false)).retry_after();
    backing_off(true).unwrap_err();
    let mut waits = vec![retry_after()];
    for _ in 0..3 {
        BACKOFF_CLOCK.advance(waits.last().copied().flatten().unwrap());
        assert_eq!(backing_off(true), Err(ApiError::Timeout), "the probe fails");
        waits.push(retry_after());
    }
    let secs = |s: u64| Some(Duration::from_secs(s));
    assert_eq!(waits, [secs(10), secs(20), secs(35), secs(35)]);
    assert_eq!(BACKOFF.get("backoff").unwrap().snapshot().reopens, 3);
    BACKOFF_CLOCK.advance(Duration::from_secs(35));
    backing_off(false).unwrap();
    assert_eq!(BACKOFF.get("backoff").unwrap().state(), State::Closed);
    backing_off(true).unwrap_err();
    assert_eq!(
        retry_after(),
        secs(10),
        "a successful close resets the backoff"
    );
}

// ---------------------------------------------------------------- progressive recovery

fake_registry!(PHASE_CLOCK, PHASE);

#[circuit_breaker(key = "progressive", registry = PHASE, window = 2, min_calls = 1, open_for = "5s", recovery = progressive(phases = 4, min_passes = 4), failure = [Timeout])]
fn recovering(fail: bool) -> Result<(), ApiError> {
    outcome(fail)
}

#[test]
fn progressive_recovery_admits_a_growing_share_then_closes() {
    // Declared at link time: the breaker exists, closed, before the first call.
    assert_eq!(
        PHASE.get("progressive").map(|b| b.state()),
        Some(State::Closed)
    );
    recovering(true).unwrap_err();
    let breaker = PHASE.get("progressive").unwrap();
    assert_eq!(
        breaker.policy().settings().recovery,
        Recovery::Progressive {
            phases: 4,
            min_passes: 4
        }
    );
    assert_eq!(breaker.state(), State::Open);
    PHASE_CLOCK.advance(5 * SECOND);
    // Calls made in each phase until it advanced, and how many were admitted.
    let mut phases: Vec<(u32, u32, u32)> = Vec::new();
    for _ in 0..100 {
        let before = breaker.snapshot();
        if before.state == State::Closed {
            break;
        }
        // The first call after `open_for` moves the circuit to phase 1 (and is admitted).
        let phase = match before.state {
            State::Open => 1,
            _ => before.phase.expect("half-open and progressive"),
        };
        let admitted = match recovering(false) {
            Ok(()) => 1,
            Err(error) => {
                assert_eq!(
                    error.rejection().map(|e| e.reason()),
                    Some(Reason::Recovering)
                );
                0
            }
        };
        match phases.last_mut() {
            Some((p, calls, passed)) if *p == phase => {
                *calls += 1;
                *passed += admitted;
            }
            _ => phases.push((phase, 1, admitted)),
        }
    }
    assert_eq!(breaker.state(), State::Closed);
    // Phase k admits k of every 4 calls; each phase needs 4 admitted calls. Phase 1 also admits
    // the call that opened it: that one, then 1 of every 4.
    assert_eq!(phases, [(1, 10, 4), (2, 6, 4), (3, 5, 4), (4, 4, 4)]);
}

// ---------------------------------------------------------------- half-open lease

fake_registry!(LEASE_CLOCK, LEASE);
static LEASE_GATE: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(0);

#[circuit_breaker(key = "lease", registry = LEASE, window = 1, min_calls = 1, open_for = "5s", half_open_lease = "2s", failure = [Timeout])]
async fn leased(fail: bool, hang: bool) -> Result<(), ApiError> {
    if hang {
        LEASE_GATE.acquire().await.expect("open semaphore").forget();
    }
    outcome(fail)
}

#[test]
fn a_probe_that_never_reports_is_re_armed_after_the_lease() {
    now(leased(true, false)).unwrap_err();
    LEASE_CLOCK.advance(5 * SECOND);
    let mut stuck = Box::pin(leased(false, true));
    assert!(
        poll_once(&mut stuck).is_none(),
        "the probe is admitted and hangs"
    );
    assert_eq!(
        rejection(now(leased(false, false))).reason(),
        Reason::HalfOpenFull
    );
    LEASE_CLOCK.advance(SECOND);
    assert_eq!(
        rejection(now(leased(false, false))).reason(),
        Reason::HalfOpenFull,
        "still within the 2 s lease"
    );
    LEASE_CLOCK.advance(SECOND);
    now(leased(false, false)).unwrap();
    assert_eq!(
        LEASE.get("lease").unwrap().state(),
        State::Closed,
        "the re-armed probe closed it"
    );
    drop(stuck);
}

// ---------------------------------------------------------------- bulkhead

fake_registry!(BULK_CLOCK, BULK);

#[circuit_breaker(key = "bulkhead-sync", registry = BULK, max_concurrent = 2, failure = [Timeout])]
fn blocking(entered: Option<&Barrier>, release: Option<&Barrier>) -> Result<u32, ApiError> {
    if let (Some(entered), Some(release)) = (entered, release) {
        entered.wait();
        release.wait();
    }
    Ok(7)
}

#[test]
fn max_concurrent_on_a_sync_fn_rejects_the_third_thread_and_frees_its_slots() {
    for _ in 0..2 {
        let (entered, release) = (Barrier::new(3), Barrier::new(3));
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..2)
                .map(|_| scope.spawn(|| blocking(Some(&entered), Some(&release))))
                .collect();
            entered.wait();
            assert_eq!(BULK.get("bulkhead-sync").unwrap().snapshot().in_flight, 2);
            assert_eq!(
                rejection(blocking(None, None)).reason(),
                Reason::BulkheadFull
            );
            release.wait();
            for worker in workers {
                assert_eq!(worker.join().unwrap(), Ok(7));
            }
        });
        let snapshot = BULK.get("bulkhead-sync").unwrap().snapshot();
        assert_eq!((snapshot.in_flight, snapshot.failures), (0, 0));
        assert_eq!(blocking(None, None), Ok(7), "capacity is back");
    }
}

static BULK_GATE: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(0);

#[circuit_breaker(key = "bulkhead-async", registry = BULK, max_concurrent = 2, failure = [Timeout])]
async fn waiting() -> Result<u32, ApiError> {
    BULK_GATE.acquire().await.expect("open semaphore").forget();
    Ok(8)
}

#[test]
fn max_concurrent_on_an_async_fn_rejects_the_third_call_and_cancellation_frees_slots() {
    let mut first = Box::pin(waiting());
    let mut second = Box::pin(waiting());
    assert!(poll_once(&mut first).is_none() && poll_once(&mut second).is_none());
    let mut third = Box::pin(waiting());
    let rejected = poll_once(&mut third).expect("rejected at once");
    assert_eq!(rejection(rejected).reason(), Reason::BulkheadFull);
    drop(first);
    drop(second);
    assert_eq!(BULK.get("bulkhead-async").unwrap().snapshot().in_flight, 0);
    BULK_GATE.add_permits(2);
    assert_eq!(now(waiting()), Ok(8));
    assert_eq!(now(waiting()), Ok(8));
}

// ---------------------------------------------------------------- policy = CONST

fake_registry!(BASE_CLOCK, BASE_REGISTRY);

/// Opens when all of the last 4 calls failed.
const STRICT: Policy = Policy::new()
    .window(4)
    .min_calls(4)
    .failure_rate(100)
    .open_for(Duration::from_secs(30));

#[circuit_breaker(key = "base-only", registry = BASE_REGISTRY, policy = STRICT, failure = [Timeout])]
fn base_only(fail: bool) -> Result<(), ApiError> {
    outcome(fail)
}

#[circuit_breaker(key = "base-overridden", registry = BASE_REGISTRY, policy = STRICT, failure_rate = 50, failure = [Timeout])]
fn base_overridden(fail: bool) -> Result<(), ApiError> {
    outcome(fail)
}

#[circuit_breaker(key = "base-small-window", registry = BASE_REGISTRY, policy = STRICT, window = 2, failure = [Timeout])]
fn base_small_window(fail: bool) -> Result<(), ApiError> {
    outcome(fail)
}

#[test]
fn a_const_policy_is_shared_and_single_fields_are_overridden() {
    for fail in [true, false, true, true] {
        let _ = base_only(fail);
        let _ = base_overridden(fail);
    }
    let state = |key: &str| BASE_REGISTRY.get(key).unwrap().state();
    assert_eq!(state("base-only"), State::Closed, "3 of 4 is under 100 %");
    assert_eq!(state("base-overridden"), State::Open, "3 of 4 is over 50 %");
    assert_eq!(BASE_REGISTRY.get("base-only").unwrap().policy(), STRICT);
    assert_eq!(
        BASE_REGISTRY.get("base-overridden").unwrap().policy(),
        STRICT.failure_rate(50)
    );
    let retry_after = rejection(base_overridden(false)).retry_after();
    assert_eq!(
        retry_after,
        Some(Duration::from_secs(30)),
        "`open_for` of the base"
    );
    // A smaller window lowers the base's `min_calls` with it.
    base_small_window(true).unwrap_err();
    base_small_window(true).unwrap_err();
    let breaker = BASE_REGISTRY.get("base-small-window").unwrap();
    assert_eq!(breaker.policy(), STRICT.window(2).min_calls(2));
    assert_eq!(breaker.state(), State::Open);
}

// ---------------------------------------------------------------- dynamic keys

fake_registry!(HOST_CLOCK, HOSTS);
static HOST_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = host, registry = HOSTS, window = 2, min_calls = 2, failure_rate = 100, open_for = "10s", failure = [Connect])]
fn fetch(host: &str, down: bool) -> Result<String, ApiError> {
    HOST_CALLS.fetch_add(1, Ordering::SeqCst);
    if down {
        return Err(ApiError::Connect(503));
    }
    Ok(format!("page from {host}"))
}

#[test]
fn a_dynamic_key_gives_one_breaker_per_host() {
    for _ in 0..2 {
        assert_eq!(fetch("a.example", true), Err(ApiError::Connect(503)));
    }
    assert_eq!(HOSTS.get("a.example").unwrap().state(), State::Open);
    let error = rejection(fetch("a.example", false));
    assert_eq!((error.key(), error.reason()), ("a.example", Reason::Open));
    assert_eq!(
        HOST_CALLS.load(Ordering::SeqCst),
        2,
        "the open host is not called"
    );
    assert_eq!(fetch("b.example", false).unwrap(), "page from b.example");
    assert_eq!(
        fetch(&String::from("b.example"), true),
        Err(ApiError::Connect(503))
    );
    assert_eq!(
        HOSTS.get("b.example").unwrap().state(),
        State::Closed,
        "1 failure of 2 calls"
    );
    HOST_CLOCK.advance(10 * SECOND);
    assert_eq!(fetch("a.example", false).unwrap(), "page from a.example");
    assert_eq!(HOSTS.get("a.example").unwrap().state(), State::Closed);
}
