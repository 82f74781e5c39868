//! A run recorded through the attribute (with the recording layer) and replayed gives exactly the
//! transitions the live breaker made.

use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use fusebox::clock::{Clock, FakeClock};
use fusebox::{Registry, State};
use fusebox_replay::policy::parse_policy_arg;
use fusebox_replay::record::{RecordLayer, outcomes};
use fusebox_replay::replay::{OutageRule, find_outages, replay};
use fusebox_replay::trace::{self, Outcome};
use tracing_subscriber::prelude::*;

static CLOCK: LazyLock<FakeClock> = LazyLock::new(FakeClock::new);
static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(CLOCK.clone()));

#[derive(Debug)]
enum CallError {
    Timeout,
    Declined,
    Rejected(#[allow(dead_code)] fusebox::Error),
}

impl From<fusebox::Error> for CallError {
    fn from(e: fusebox::Error) -> Self {
        CallError::Rejected(e)
    }
}

#[derive(Clone, Copy)]
enum Plan {
    Ok,
    Fail,
    Decline,
}

#[fusebox::circuit_breaker(key = "live", registry = REGISTRY, failure = [Timeout],
                           window = 10, min_calls = 5, failure_rate = 50, open_for = "2s")]
fn call(plan: Plan, latency_ms: u64) -> Result<(), CallError> {
    CLOCK.advance(Duration::from_millis(latency_ms));
    match plan {
        Plan::Ok => Ok(()),
        Plan::Fail => Err(CallError::Timeout),
        Plan::Decline => Err(CallError::Declined),
    }
}

use crate::support::memory::Memory;

#[test]
fn replaying_a_recorded_run_gives_the_live_transitions() {
    let memory = Memory::default();
    let (layer, recorder) = RecordLayer::new(memory.clone(), 100_000);
    let subscriber = tracing_subscriber::registry().with(layer.with_filter(outcomes()));
    let _guard = tracing::subscriber::set_default(subscriber);

    let live = Arc::new(Mutex::new(Vec::new()));
    {
        let live = live.clone();
        REGISTRY.on_transition(move |t| {
            live.lock().unwrap().push((CLOCK.now_nanos(), t.from, t.to));
        });
    }
    // Healthy, an outage with a failed recovery, recovery, a second outage, healthy again.
    let mut rng = fastrand::Rng::with_seed(7);
    let mut rejected = 0;
    for step in 0..600u64 {
        CLOCK.advance(Duration::from_millis(37));
        let down = (150..260).contains(&step) || (400..430).contains(&step);
        let plan = match (down, rng.u32(0..100)) {
            (true, r) if r < 90 => Plan::Fail,
            (false, r) if r < 3 => Plan::Fail,
            (_, r) if r >= 95 => Plan::Decline,
            _ => Plan::Ok,
        };
        if let Err(CallError::Rejected(_)) = call(plan, rng.u64(1..30)) {
            rejected += 1;
        }
    }
    recorder.flush().unwrap();
    assert_eq!(recorder.dropped(), 0);

    let text = String::from_utf8(memory.0.lock().unwrap().clone()).unwrap();
    let calls = trace::parse(&text).expect("the recorded trace parses");
    assert_eq!(
        calls.len(),
        600,
        "one line per call, rejected ones included"
    );
    let lines_rejected = calls
        .iter()
        .filter(|c| c.outcome == Outcome::Rejected)
        .count();
    assert_eq!(lines_rejected, rejected);
    assert!(calls.iter().any(|c| c.outcome == Outcome::Ignored));
    assert!(
        calls
            .iter()
            .filter(|c| c.outcome != Outcome::Rejected)
            .all(|c| c.latency_ns.is_some()),
        "latency is known for admitted calls"
    );
    let live = live.lock().unwrap().clone();
    assert!(
        live.iter().filter(|t| t.2 == State::Open).count() >= 3,
        "the run opened, failed a recovery and reopened: {live:?}"
    );

    let refs = fusebox_replay::trace::events(&calls);
    let outages = find_outages(&refs, OutageRule::default());
    let candidate =
        parse_policy_arg("window=10,min_calls=5,failure_rate=50,open_for=2s", "same").unwrap();
    let run = replay(&refs, &candidate, &outages);
    let replayed: Vec<_> = run
        .changes
        .iter()
        .map(|c| (c.at_ns, c.from, c.to))
        .collect();
    assert_eq!(
        replayed, live,
        "the replay makes the live breaker's transitions"
    );
    assert_eq!(run.rejected as usize, rejected);
    assert_eq!(run.assumed, 0);
}

#[test]
fn a_time_window_with_slow_calls_replays_exactly_too() {
    let memory = Memory::default();
    let (layer, recorder) = RecordLayer::new(memory.clone(), 100_000);
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::registry().with(layer.with_filter(outcomes())),
    );
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    let live = Arc::new(Mutex::new(Vec::new()));
    {
        let live = live.clone();
        let clock = clock.clone();
        registry
            .on_transition(move |t| live.lock().unwrap().push((clock.now_nanos(), t.from, t.to)));
    }
    let line =
        "window=2s,min_calls=5,failure_rate=50,slow=20ms,slow_rate=60,open_for=1s,half_open=2";
    let candidate = parse_policy_arg(line, "timed").unwrap();
    let breaker = registry.breaker("timed", candidate.policy).unwrap();
    let mut rng = fastrand::Rng::with_seed(3);
    for step in 0..800u64 {
        clock.advance(Duration::from_millis(rng.u64(5..60)));
        let Ok(permit) = breaker.try_acquire() else {
            continue;
        };
        let slow_phase = (200..320).contains(&step);
        let failing = (500..560).contains(&step);
        let latency = if slow_phase {
            rng.u64(10..40)
        } else {
            rng.u64(1..15)
        };
        clock.advance(Duration::from_millis(latency));
        match rng.u32(0..100) {
            r if failing && r < 80 => permit.failure(),
            r if r < 2 => permit.failure(),
            r if r < 4 => permit.ignore(),
            _ => permit.success(),
        }
    }
    recorder.flush().unwrap();
    let text = String::from_utf8(memory.0.lock().unwrap().clone()).unwrap();
    let calls = trace::parse(&text).unwrap();
    let live = live.lock().unwrap().clone();
    assert!(live.len() >= 4, "{live:?}");
    let refs = fusebox_replay::trace::events(&calls);
    let run = replay(
        &refs,
        &candidate,
        &find_outages(&refs, OutageRule::default()),
    );
    let replayed: Vec<_> = run
        .changes
        .iter()
        .map(|c| (c.at_ns, c.from, c.to))
        .collect();
    assert_eq!(replayed, live);
}
