//! Fault injection (`fusebox::chaos`, `chaos = true`): injected failures, `Retry-After` answers,
//! latency and rejections take the paths real ones take — the classification and the window,
//! the fallback's `Cause`, pushback, retries, `timeout`, `hedge` — at a seeded rate or by a predicate; a
//! function without `chaos = true` is never touched. FakeClock and tokio's paused clock.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use fusebox::chaos::{Fault, FaultKind};
use fusebox::{Cause, Reason, State, circuit_breaker};
use tokio::time::Instant;

use crate::common::ApiError;
use crate::common::capture::{capture, named};
use crate::pushback::Backend;

/// What a fallback saw.
#[derive(Debug, PartialEq)]
enum Seen {
    Failed(ApiError),
    Rejected(Reason),
    TimedOut,
}

fn seen(cause: Cause<ApiError>) -> Seen {
    match cause {
        Cause::Failed(error) => Seen::Failed(error),
        Cause::Rejected(error) => Seen::Rejected(error.reason()),
        Cause::TimedOut(_) => Seen::TimedOut,
    }
}

// ---------------------------------------------------------------- failures and the window

fake_registry!(FAIL_CLOCK, FAIL);
static FAIL_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "chaos-fail", registry = FAIL, window = 10, min_calls = 4, failure_rate = 50, failure = [Timeout], fallback = fail_fallback, chaos = true)]
async fn fail() -> Result<Result<u32, Seen>, ApiError> {
    FAIL_CALLS.fetch_add(1, Ordering::SeqCst);
    Ok(Ok(7))
}

async fn fail_fallback(cause: Cause<ApiError>) -> Result<Result<u32, Seen>, ApiError> {
    Ok(Err(seen(cause)))
}

#[tokio::test]
async fn an_injected_failure_reaches_the_fallback_as_failed_and_trips_the_breaker() {
    let chaos = FAIL.chaos();
    chaos.inject("chaos-fail", Fault::failure(|| ApiError::Timeout));
    for n in 1..=3 {
        assert_eq!(
            fail().await,
            Ok(Err(Seen::Failed(ApiError::Timeout))),
            "call {n}"
        );
    }
    let breaker = FAIL.get("chaos-fail").unwrap();
    assert_eq!(breaker.state(), State::Closed, "3 calls: under min_calls");
    assert_eq!(fail().await, Ok(Err(Seen::Failed(ApiError::Timeout))));
    assert_eq!(
        breaker.state(),
        State::Open,
        "4 counted failures of 4 calls"
    );
    assert_eq!(FAIL_CALLS.load(Ordering::SeqCst), 0, "the body never ran");
    assert_eq!(fail().await, Ok(Err(Seen::Rejected(Reason::Open))));
    // Cleared: the next probe runs the body and closes the circuit.
    assert!(chaos.clear("chaos-fail"));
    assert!(!chaos.clear("chaos-fail"), "cleared once");
    FAIL_CLOCK.advance(Duration::from_secs(60));
    assert_eq!(fail().await, Ok(Ok(7)));
    assert_eq!(FAIL_CALLS.load(Ordering::SeqCst), 1);
    assert_eq!(breaker.state(), State::Closed);
}

// ---------------------------------------------------------------- a function without `chaos`

fake_registry!(PLAIN_CLOCK, PLAIN);
static PLAIN_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "chaos-shared-key", registry = PLAIN)]
fn without_chaos() -> Result<u32, ApiError> {
    PLAIN_CALLS.fetch_add(1, Ordering::SeqCst);
    Ok(1)
}

#[circuit_breaker(key = "chaos-shared-key", registry = PLAIN, chaos = true)]
fn with_chaos() -> Result<u32, ApiError> {
    PLAIN_CALLS.fetch_add(1, Ordering::SeqCst);
    Ok(2)
}

#[test]
fn a_function_without_chaos_is_not_touched_by_an_injection_on_its_key() {
    PLAIN
        .chaos()
        .inject("chaos-shared-key", Fault::failure(|| ApiError::Connect(1)));
    assert_eq!(with_chaos(), Err(ApiError::Connect(1)));
    assert_eq!(without_chaos(), Ok(1));
    PLAIN.chaos().inject("chaos-shared-key", Fault::rejection());
    assert!(with_chaos().unwrap_err().rejection().is_some());
    assert_eq!(without_chaos(), Ok(1));
    PLAIN.chaos().clear_all();
    assert_eq!(with_chaos(), Ok(2));
    assert_eq!(PLAIN_CALLS.load(Ordering::SeqCst), 3);
    let _ = &PLAIN_CLOCK;
}

// ---------------------------------------------------------------- rejections

fake_registry!(REJECT_CLOCK, REJECT);
static REJECT_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "chaos-reject", registry = REJECT, fallback = reject_fallback, chaos = true)]
async fn reject() -> Result<Result<u32, Seen>, ApiError> {
    REJECT_CALLS.fetch_add(1, Ordering::SeqCst);
    Ok(Ok(1))
}

async fn reject_fallback(cause: Cause<ApiError>) -> Result<Result<u32, Seen>, ApiError> {
    Ok(Err(seen(cause)))
}

#[circuit_breaker(key = "chaos-reject-retried", registry = REJECT, retry = 3, backoff = "10ms", chaos = true)]
async fn reject_retried() -> Result<u32, ApiError> {
    REJECT_CALLS.fetch_add(1, Ordering::SeqCst);
    Ok(2)
}

#[tokio::test(start_paused = true)]
async fn an_injected_rejection_is_rejected_as_open_without_calling_the_body() {
    REJECT
        .chaos()
        .inject("chaos-reject", Fault::rejection().when(|n| n % 2 == 1));
    assert_eq!(reject().await, Ok(Err(Seen::Rejected(Reason::Open))));
    assert_eq!(reject().await, Ok(Ok(1)));
    assert_eq!(reject().await, Ok(Err(Seen::Rejected(Reason::Open))));
    assert_eq!(REJECT_CALLS.load(Ordering::SeqCst), 1, "the body ran once");
    let snapshot = REJECT.get("chaos-reject").unwrap().snapshot();
    assert_eq!(snapshot.rejected, 2, "counted as rejected");
    assert_eq!(
        (snapshot.state, snapshot.calls, snapshot.failures),
        (State::Closed, 1, 0)
    );
    // Through the attempt driver: the first attempt is rejected, as an open circuit's would be.
    REJECT
        .chaos()
        .inject("chaos-reject-retried", Fault::rejection());
    let error = reject_retried().await.unwrap_err();
    assert_eq!(
        error.rejection().map(fusebox::Error::reason),
        Some(Reason::Open)
    );
    assert_eq!(REJECT_CALLS.load(Ordering::SeqCst), 1);
    REJECT.chaos().clear("chaos-reject-retried");
    assert_eq!(reject_retried().await, Ok(2));
    let _ = &REJECT_CLOCK;
}

// ---------------------------------------------------------------- latency and `timeout`

fake_registry!(SLOW_CLOCK, SLOW);

#[circuit_breaker(key = "chaos-slow", registry = SLOW, timeout = "100ms", fallback = slow_fallback, chaos = true)]
async fn slow() -> Result<Result<u32, Seen>, ApiError> {
    Ok(Ok(3))
}

async fn slow_fallback(cause: Cause<ApiError>) -> Result<Result<u32, Seen>, ApiError> {
    Ok(Err(seen(cause)))
}

#[tokio::test(start_paused = true)]
async fn injected_latency_past_the_timeout_times_the_call_out() {
    SLOW.chaos()
        .inject("chaos-slow", Fault::latency(Duration::from_secs(1)));
    let started = Instant::now();
    assert_eq!(slow().await, Ok(Err(Seen::TimedOut)));
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(100),
        "cut at the timeout"
    );
    SLOW.chaos()
        .inject("chaos-slow", Fault::latency(Duration::from_millis(40)));
    let started = Instant::now();
    assert_eq!(slow().await, Ok(Ok(3)));
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(40),
        "delayed, within the timeout"
    );
    let snapshot = SLOW.get("chaos-slow").unwrap().snapshot();
    assert_eq!(
        (snapshot.calls, snapshot.failures),
        (2, 1),
        "the timed-out call counts"
    );
    let _ = &SLOW_CLOCK;
}

// ---------------------------------------------------------------- `Retry-After` answers

fake_registry!(BUSY_CLOCK, BUSY);
static BUSY_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "chaos-busy", registry = BUSY, consecutive = 1, open_for = "1s", chaos = true)]
fn busy() -> Result<u32, Backend> {
    BUSY_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(Backend::Down)
}

#[circuit_breaker(key = "chaos-busy-retried", registry = BUSY, retry = 2, failure = [Busy], chaos = true)]
async fn busy_retried() -> Result<u32, Backend> {
    BUSY_CALLS.fetch_add(1, Ordering::SeqCst);
    Ok(4)
}

#[test]
fn an_injected_retry_after_answer_keeps_the_circuit_open_that_long() {
    let wait = Duration::from_secs(7);
    BUSY.chaos()
        .inject("chaos-busy", Fault::retry_after(Backend::Busy, wait));
    assert_eq!(busy(), Err(Backend::Busy(wait)));
    assert_eq!(BUSY_CALLS.load(Ordering::SeqCst), 0);
    let rejected = match busy() {
        Err(Backend::Rejected(rejected)) => rejected,
        other => panic!("expected a rejection, got {other:?}"),
    };
    assert_eq!(
        rejected.retry_after(),
        Some(wait),
        "open for the wait asked, not `open_for`"
    );
    BUSY_CLOCK.advance(Duration::from_millis(6_900));
    assert!(
        matches!(busy(), Err(Backend::Rejected(_))),
        "still open at 6.9 s"
    );
}

#[tokio::test(start_paused = true)]
async fn an_injected_retry_after_answer_makes_the_retry_wait() {
    let wait = Duration::from_secs(3);
    BUSY.chaos().inject(
        "chaos-busy-retried",
        Fault::retry_after(Backend::Busy, wait).when(|n| n == 1),
    );
    let started = Instant::now();
    assert_eq!(
        busy_retried().await,
        Ok(4),
        "the second attempt runs the body"
    );
    assert!(
        started.elapsed() >= wait,
        "{:?}: the retry waited",
        started.elapsed()
    );
}

// ---------------------------------------------------------------- a seeded rate

fake_registry!(RATE_CLOCK, RATE);

/// A declined card is a business error: never counted, so the circuit stays closed.
#[circuit_breaker(key = "chaos-rate", registry = RATE, failure = [Timeout], chaos = true)]
fn rated() -> Result<u32, ApiError> {
    Ok(5)
}

/// Which of 1,000 calls the fault hit.
fn hits() -> Vec<bool> {
    (0..1_000)
        .map(|_| matches!(rated(), Err(ApiError::Declined { .. })))
        .collect()
}

#[test]
fn a_seeded_rate_hits_the_same_calls_every_time() {
    let fault = || {
        Fault::failure(|| ApiError::Declined { code: 1 })
            .rate(0.5)
            .seed(42)
    };
    RATE.chaos().inject("chaos-rate", fault());
    let first = hits();
    RATE.chaos().inject("chaos-rate", fault());
    assert_eq!(hits(), first, "the same seed hits the same calls");
    let share = first.iter().filter(|hit| **hit).count();
    assert!((450..=550).contains(&share), "{share} of 1000 at 0.5");
    RATE.chaos().inject("chaos-rate", fault().seed(43));
    assert_ne!(hits(), first, "another seed, other calls");
    RATE.chaos().inject("chaos-rate", fault().rate(0.0));
    assert!(hits().iter().all(|hit| !hit));
    let _ = &RATE_CLOCK;
}

// ---------------------------------------------------------------- a fault of another type

fake_registry!(TYPE_CLOCK, TYPED);

#[circuit_breaker(key = "chaos-typed", registry = TYPED, chaos = true)]
fn typed() -> Result<u32, ApiError> {
    Ok(6)
}

#[test]
fn a_fault_of_another_error_type_is_a_warning_and_the_call_runs() {
    TYPED
        .chaos()
        .inject("chaos-typed", Fault::failure(|| Backend::Down));
    let events = capture(|| assert_eq!(typed(), Ok(6)));
    let warned = named(&events, "chaos_type_mismatch");
    assert_eq!(warned.len(), 1, "{events:?}");
    let fields = &warned[0].fields;
    assert_eq!(warned[0].level, tracing::Level::WARN);
    assert_eq!(fields["key"], "chaos-typed");
    assert!(fields["injected"].ends_with("Backend"), "{fields:?}");
    assert!(fields["expected"].ends_with("ApiError"), "{fields:?}");
    let _ = &TYPE_CLOCK;
}

// ---------------------------------------------------------------- named faults

fake_registry!(NAMED_CLOCK, NAMED);

#[circuit_breaker(key = "chaos-named", registry = NAMED, chaos = true)]
fn named_fault() -> Result<u32, ApiError> {
    Ok(8)
}

#[test]
fn a_named_fault_is_switched_on_and_off_with_a_warning() {
    let chaos = NAMED.chaos();
    chaos.register(
        "payments-down",
        "chaos-named",
        Fault::failure(|| ApiError::Connect(503)),
    );
    assert_eq!(named_fault(), Ok(8), "registered, switched off");
    let events = capture(|| chaos.switch("payments-down", true).unwrap());
    assert_eq!(named_fault(), Err(ApiError::Connect(503)));
    assert_eq!(
        chaos.injected(),
        [("chaos-named".to_owned(), FaultKind::Failure)]
    );
    let switched = named(&events, "chaos_switched");
    assert_eq!(switched.len(), 1);
    assert_eq!(switched[0].level, tracing::Level::WARN);
    assert_eq!(
        (
            &*switched[0].fields["key"],
            &*switched[0].fields["fault"],
            &*switched[0].fields["on"]
        ),
        ("chaos-named", "failure", "true")
    );
    chaos.switch("payments-down", false).unwrap();
    assert_eq!(named_fault(), Ok(8));
    assert!(chaos.switch("nothing", true).is_err());
    let _ = &NAMED_CLOCK;
}

// ---------------------------------------------------------------- latency and `hedge`

fake_registry!(HEDGE_CLOCK, HEDGED);

#[circuit_breaker(key = "chaos-hedged", registry = HEDGED, hedge = "50ms", chaos = true)]
async fn hedged() -> Result<u32, ApiError> {
    Ok(9)
}

#[tokio::test(start_paused = true)]
async fn injected_latency_on_the_first_attempt_is_answered_by_the_hedge() {
    // Hedges draw on a budget of 10 % more calls: calls first.
    for _ in 0..30 {
        assert_eq!(hedged().await, Ok(9));
    }
    let slow_first = Fault::latency(Duration::from_secs(1)).when(|n| n == 1);
    HEDGED.chaos().inject("chaos-hedged", slow_first);
    let started = Instant::now();
    assert_eq!(hedged().await, Ok(9));
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(50),
        "the hedge answered"
    );
    let hedges = HEDGED
        .get("chaos-hedged")
        .unwrap()
        .snapshot()
        .hedges
        .unwrap();
    assert_eq!((hedges.sent, hedges.won), (1, 1));
    let _ = &HEDGE_CLOCK;
}
