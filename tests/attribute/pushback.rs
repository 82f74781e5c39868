//! Pushback through the attribute: an error type that implements `fusebox::RetryAfter` keeps the
//! circuit its failure opens open at least as long as it asked (capped by `open_max`), a failed
//! probe that asks reopens for as long, the open event says so, and a retry never starts before
//! the wait (tokio's paused clock). Error types without the trait are unaffected.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fusebox::{Cause, Reason, RetryAfter, State, circuit_breaker};
use tokio::time::Instant;

use crate::common::ApiError;
use crate::common::capture::capture;

/// A backend's error: busy with the wait it asked for, or down with none (`chaos.rs` injects it).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Backend {
    Busy(Duration),
    Down,
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for Backend {
    fn from(rejected: fusebox::Error) -> Self {
        Backend::Rejected(rejected)
    }
}

impl RetryAfter for Backend {
    fn retry_after(&self) -> Option<Duration> {
        match self {
            Backend::Busy(wait) => Some(*wait),
            _ => None,
        }
    }
}

fn rejection<T: std::fmt::Debug>(result: Result<T, Backend>) -> fusebox::Error {
    match result {
        Err(Backend::Rejected(rejected)) => rejected,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

const SECS: fn(f64) -> Duration = Duration::from_secs_f64;

// ---------------------------------------------------------------- the open wait

fake_registry!(OPEN_CLOCK, OPEN);
static OPEN_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "pushback-open", registry = OPEN, consecutive = 1, open_for = "1s", open_max = "30s")]
fn busy(wait: Duration) -> Result<(), Backend> {
    OPEN_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(Backend::Busy(wait))
}

#[test]
fn a_failure_that_asks_for_7_s_opens_for_7_s_then_a_probe_goes_out_and_open_max_caps_it() {
    let breaker = || OPEN.get("pushback-open").unwrap();
    assert_eq!(busy(SECS(7.0)), Err(Backend::Busy(SECS(7.0))));
    assert_eq!(breaker().state(), State::Open);
    assert_eq!(rejection(busy(SECS(7.0))).retry_after(), Some(SECS(7.0)));
    OPEN_CLOCK.advance(SECS(6.9));
    let rejected = rejection(busy(SECS(7.0)));
    assert_eq!(rejected.reason(), Reason::Open, "still open at 6.9 s");
    assert_eq!(OPEN_CALLS.load(Ordering::SeqCst), 1);
    OPEN_CLOCK.advance(SECS(0.1));
    // The probe goes out at 7 s, and fails asking for an hour: reopened for `open_max`.
    assert_eq!(busy(SECS(3_600.0)), Err(Backend::Busy(SECS(3_600.0))));
    assert_eq!(OPEN_CALLS.load(Ordering::SeqCst), 2, "probed after 7 s");
    assert_eq!(breaker().state(), State::Open, "the probe failed");
    assert_eq!(rejection(busy(SECS(1.0))).retry_after(), Some(SECS(30.0)));
    OPEN_CLOCK.advance(SECS(29.9));
    assert!(matches!(busy(SECS(1.0)), Err(Backend::Rejected(_))));
    OPEN_CLOCK.advance(SECS(0.1));
    // A probe that asks for less than the policy's wait: the policy's wait.
    assert_eq!(busy(SECS(0.2)), Err(Backend::Busy(SECS(0.2))));
    assert_eq!(OPEN_CALLS.load(Ordering::SeqCst), 3);
    assert_eq!(rejection(busy(SECS(0.2))).retry_after(), Some(SECS(1.0)));
}

// ---------------------------------------------------------------- the latest wait in the window

fake_registry!(WINDOW_CLOCK, WINDOW);

#[circuit_breaker(key = "pushback-window", registry = WINDOW, window = 3, min_calls = 3, failure_rate = 100, open_for = "1s")]
fn flaky(error: Backend) -> Result<(), Backend> {
    Err(error)
}

#[test]
fn the_latest_wait_any_failure_asked_for_holds_when_a_later_failure_trips() {
    assert!(flaky(Backend::Busy(SECS(9.0))).is_err());
    WINDOW_CLOCK.advance(SECS(2.0));
    assert!(flaky(Backend::Down).is_err());
    assert_eq!(
        WINDOW.get("pushback-window").unwrap().state(),
        State::Closed
    );
    assert!(flaky(Backend::Down).is_err(), "trips, asking for nothing");
    // Asked at 0 s for 9 s: open until 9 s, 7 s after the trip at 2 s.
    assert_eq!(
        rejection(flaky(Backend::Down)).retry_after(),
        Some(SECS(7.0))
    );
}

// ---------------------------------------------------------------- errors without the trait

fake_registry!(PLAIN_CLOCK, PLAIN);

#[circuit_breaker(key = "pushback-plain", registry = PLAIN, consecutive = 1, open_for = "1s")]
fn plain() -> Result<(), ApiError> {
    Err(ApiError::Unavailable { retry_in: 7 })
}

#[test]
fn an_error_type_without_retry_after_opens_for_the_policys_wait() {
    assert!(plain().is_err());
    let rejected = plain().unwrap_err();
    assert_eq!(rejected.rejection().unwrap().retry_after(), Some(SECS(1.0)));
}

// ---------------------------------------------------------------- generic error types

fake_registry!(GENERIC_CLOCK, GENERIC);

#[circuit_breaker(key = "pushback-generic", registry = GENERIC, consecutive = 1, open_for = "1s")]
fn generic<E: RetryAfter + From<fusebox::Error>>(error: E) -> Result<(), E> {
    Err(error)
}

#[test]
fn a_generic_error_type_bounded_by_retry_after_carries_its_wait() {
    assert!(generic(Backend::Busy(SECS(7.0))).is_err());
    assert_eq!(
        rejection(generic(Backend::Down)).retry_after(),
        Some(SECS(7.0))
    );
}

// ---------------------------------------------------------------- events and hooks

fake_registry!(EVENT_CLOCK, EVENTS);

#[circuit_breaker(key = "pushback-event", registry = EVENTS, consecutive = 1, open_for = "1s")]
fn announced(error: Backend) -> Result<(), Backend> {
    Err(error)
}

#[test]
fn the_open_event_and_the_transition_say_pushback_lengthened_the_wait() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hook = seen.clone();
    EVENTS.on_transition(move |t| {
        hook.lock().unwrap().push((t.to, t.trigger, t.pushback));
    });
    let events = capture(|| {
        assert!(announced(Backend::Busy(SECS(7.0))).is_err());
        EVENT_CLOCK.advance(SECS(7.0));
        // The probe fails asking for nothing: reopened for the policy's wait.
        assert!(announced(Backend::Down).is_err());
    });
    let opened: Vec<_> = events
        .iter()
        .filter(|e| e.message() == "circuit_opened")
        .map(|e| e.fields.get("pushback_secs").cloned())
        .collect();
    assert_eq!(opened, [Some("7.0".to_owned()), None]);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            (State::Open, fusebox::Trigger::Consecutive, Some(SECS(7.0))),
            (State::HalfOpen, fusebox::Trigger::OpenWaitOver, None),
            (State::Open, fusebox::Trigger::ProbeFailed, None),
        ]
    );
}

// ---------------------------------------------------------------- retries wait

fake_registry!(RETRY_CLOCK, RETRY);
static STARTS: Mutex<Vec<Instant>> = Mutex::new(Vec::new());

/// Busy asking for 7 s, then fine. The window never trips: the retry driver alone waits.
#[circuit_breaker(key = "pushback-retry", registry = RETRY, window = 100, min_calls = 100, retry = 2, backoff = "10ms")]
async fn busy_then_fine() -> Result<u32, Backend> {
    let mut starts = STARTS.lock().unwrap();
    starts.push(Instant::now());
    if starts.len() == 1 {
        Err(Backend::Busy(SECS(7.0)))
    } else {
        Ok(7)
    }
}

#[tokio::test(start_paused = true)]
async fn a_retry_starts_no_sooner_than_the_wait_the_failure_asked_for() {
    assert_eq!(busy_then_fine().await, Ok(7));
    let starts = STARTS.lock().unwrap().clone();
    assert_eq!(starts.len(), 2);
    let gap = starts[1] - starts[0];
    assert!(
        (SECS(7.0)..SECS(7.1)).contains(&gap),
        "the second attempt started {gap:?} after the first"
    );
    let snapshot = RETRY.get("pushback-retry").unwrap().snapshot();
    assert_eq!((snapshot.failures, snapshot.state), (1, State::Closed));
}

static DEADLINE_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "pushback-deadline", registry = RETRY, window = 100, min_calls = 100, retry = 3, deadline = "5s", fallback = gave_up)]
async fn busy_within_a_deadline(wait: Duration) -> Result<u32, Backend> {
    DEADLINE_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(Backend::Busy(wait))
}

async fn gave_up(_wait: Duration, cause: Cause<Backend>) -> Result<u32, Backend> {
    match cause {
        Cause::Failed(error) => Err(error),
        other => panic!("expected the failure, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_wait_the_deadline_has_no_room_for_ends_the_call_with_its_failure() {
    let started = Instant::now();
    assert_eq!(
        busy_within_a_deadline(SECS(7.0)).await,
        Err(Backend::Busy(SECS(7.0)))
    );
    assert_eq!(started.elapsed(), Duration::ZERO, "no retry, no wait");
    assert_eq!(DEADLINE_CALLS.load(Ordering::SeqCst), 1);
}

static LONG_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "pushback-long", registry = RETRY, window = 100, min_calls = 100, retry = 3)]
async fn busy_for_long() -> Result<u32, Backend> {
    LONG_CALLS.fetch_add(1, Ordering::SeqCst);
    Err(Backend::Busy(SECS(60.0)))
}

#[tokio::test(start_paused = true)]
async fn a_wait_longer_than_the_longest_backoff_ends_the_call() {
    let started = Instant::now();
    assert_eq!(busy_for_long().await, Err(Backend::Busy(SECS(60.0))));
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(LONG_CALLS.load(Ordering::SeqCst), 1);
}
