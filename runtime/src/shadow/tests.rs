//! Unit tests of shadow policies on a [`FakeClock`]: a tighter shadow would have opened while the
//! breaker in force admits every call, its recovery follows its own timing, the breaker in force
//! behaves the same with and without shadows, and a bad shadow text is a typed error.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::FakeClock;
use crate::policy::Policy;
use crate::registry::Registry;
use crate::state::State;

/// The events `f` emits on this thread, as text.
fn events_of(f: impl FnOnce()) -> String {
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let text = buffer.0.lock().unwrap().clone();
    String::from_utf8(text).unwrap()
}

/// In force: a window of 100 at 50 %; the shadow `tight`: 10 calls at 30 %, open 5 s.
fn payment() -> Policy {
    Policy::new()
        .window(100)
        .failure_rate(50)
        .shadow("tight: window = 10, failure_rate = 30, open_for = 5s")
}

/// Ten calls, the first four failing: 40 % of 10, which `tight` does not tolerate.
fn burst(breaker: &crate::Breaker) {
    for call in 0..10 {
        let permit = breaker
            .try_acquire()
            .expect("the policy in force admits it");
        if call < 4 {
            permit.failure()
        } else {
            permit.success()
        }
    }
}

#[test]
fn a_tighter_shadow_would_have_opened_while_the_breaker_admits_every_call() {
    let registry = Registry::with_clock(FakeClock::new());
    let breaker = registry.breaker("payment", payment()).unwrap();
    let events = events_of(|| burst(&breaker));
    let snapshot = breaker.snapshot();
    assert_eq!(
        snapshot.state,
        State::Closed,
        "40 % is below the 50 % in force"
    );
    assert_eq!(snapshot.calls, 10);
    let tight = &snapshot.shadows[0];
    assert_eq!(tight.name, "tight");
    assert_eq!(
        tight.state,
        State::Open,
        "the tenth call brought it to 10 calls at 40 %"
    );
    assert_eq!((tight.opened, tight.admitted, tight.rejected), (1, 10, 0));
    assert_eq!(
        tight.calls, 0,
        "as a breaker's, its window restarts empty when it opens"
    );
    assert!(events.contains("shadow_opened"), "{events}");
    assert!(
        events.contains("key=\"payment\"") && events.contains("shadow=\"tight\""),
        "{events}"
    );
    assert!(!events.contains("circuit_opened"), "{events}");
    for _ in 0..7 {
        breaker.try_acquire().expect("admitted").success();
    }
    let tight = &breaker.snapshot().shadows[0];
    assert_eq!(tight.rejected, 7, "each call it would have rejected ran");
    assert_eq!(tight.admitted, 10);
    assert_eq!(breaker.snapshot().rejected, 0);
}

#[test]
fn a_shadow_recovers_on_its_own_timing() {
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    let breaker = registry.breaker("payment", payment()).unwrap();
    burst(&breaker);
    clock.advance(Duration::from_millis(4_999));
    breaker.try_acquire().unwrap().success();
    let tight = breaker.snapshot().shadows[0].clone();
    assert_eq!(
        (tight.state, tight.rejected),
        (State::Open, 1),
        "its wait is 5 s"
    );
    assert_eq!(tight.retry_after, Some(Duration::from_millis(1)));
    clock.advance(Duration::from_millis(1));
    // Its probe fails: open again for another 5 s.
    let events = events_of(|| breaker.try_acquire().unwrap().failure());
    assert!(events.contains("shadow_half_open"), "{events}");
    let tight = breaker.snapshot().shadows[0].clone();
    assert_eq!(
        (tight.state, tight.admitted, tight.opened),
        (State::Open, 11, 1)
    );
    clock.advance(Duration::from_secs(5));
    let events = events_of(|| breaker.try_acquire().unwrap().success());
    assert!(events.contains("shadow_closed"), "{events}");
    assert!(events.contains("open_secs=10"), "{events}");
    assert!(events.contains("rejected=1"), "{events}");
    let tight = breaker.snapshot().shadows[0].clone();
    assert_eq!(tight.state, State::Closed);
    assert_eq!(
        tight.open_for,
        Duration::from_secs(10),
        "from opening to closing"
    );
    assert_eq!(
        (tight.calls, tight.failures),
        (0, 0),
        "a closing empties its window"
    );
    assert_eq!(breaker.state(), State::Closed);
}

/// The same calls on two breakers, one with shadows: the same admissions, states and counts.
#[test]
fn the_breaker_in_force_behaves_the_same_with_and_without_shadows() {
    let run = |policy: Policy| {
        let clock = FakeClock::new();
        let registry = Registry::with_clock(clock.clone());
        let breaker = registry.breaker("payment", policy).unwrap();
        let mut seen = Vec::new();
        for call in 0u32..400 {
            clock.advance(Duration::from_millis(250));
            let admitted = match breaker.try_acquire() {
                Ok(permit) if call % 5 < 2 || call > 300 => {
                    permit.success();
                    "success"
                }
                Ok(permit) => {
                    permit.failure();
                    "failure"
                }
                Err(rejected) => {
                    seen.push(format!("{call} rejected {:?}", rejected.reason()));
                    continue;
                }
            };
            let s = breaker.snapshot();
            seen.push(format!(
                "{call} {admitted} {:?} {} {} {}",
                s.state, s.calls, s.failures, s.rejected
            ));
        }
        seen
    };
    let base = Policy::new()
        .window(20)
        .failure_rate(50)
        .open_for(Duration::from_secs(3));
    let with = base.shadow("a: window = 5, consecutive = 2; b: window = 50, failure_rate = 20");
    let (without, with) = (run(base), run(with));
    assert!(
        without.iter().any(|line| line.contains("rejected")),
        "the run opens"
    );
    assert_eq!(without, with);
}

#[test]
fn a_bad_shadow_is_an_error_naming_the_key_the_shadow_and_the_field() {
    let registry = Registry::new();
    let policy = Policy::new().shadow("tight: window = 10, failure_rate = 300");
    let error = registry.breaker("payment", policy).unwrap_err();
    assert_eq!((error.key(), error.field()), (Some("payment"), "shadow"));
    let text = error.to_string();
    assert!(text.contains("`tight`: field `failure_rate`"), "{text}");
    assert!(text.contains("a percentage from 1 to 100"), "{text}");
    let error = Policy::new()
        .shadow("window = 10, colour = red")
        .validate()
        .unwrap_err();
    assert!(
        error.to_string().contains("unknown policy field"),
        "{error}"
    );
}

#[test]
fn reconfiguring_with_the_same_shadows_keeps_their_state() {
    let registry = Registry::with_clock(FakeClock::new());
    let breaker = registry.breaker("payment", payment()).unwrap();
    burst(&breaker);
    registry
        .configure("payment", Policy::new().failure_rate(60))
        .unwrap();
    let live = registry.get("payment").unwrap();
    assert_eq!(live.policy().settings().failure_rate, Some(60));
    assert_eq!(live.snapshot().shadows[0].state, State::Open);
    registry
        .configure("payment", Policy::new().shadow("loose: window = 200"))
        .unwrap();
    let shadows = registry.get("payment").unwrap().snapshot().shadows;
    assert_eq!((shadows.len(), shadows[0].name), (1, "loose"));
    assert_eq!(shadows[0].state, State::Closed);
}

#[cfg(feature = "metrics")]
#[test]
fn metrics_count_by_key_and_shadow() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let registry = Registry::with_clock(FakeClock::new());
        let breaker = registry.breaker("payment", payment()).unwrap();
        burst(&breaker);
        breaker.try_acquire().unwrap().success();
    });
    let metrics = snapshotter.snapshot().into_vec();
    let value = |name: &str| {
        metrics
            .iter()
            .find(|(key, ..)| {
                key.key().name() == name
                    && key
                        .key()
                        .labels()
                        .any(|l| l.key() == "shadow" && l.value() == "tight")
                    && key
                        .key()
                        .labels()
                        .any(|l| l.key() == "key" && l.value() == "payment")
            })
            .map(|(.., value)| format!("{value:?}"))
    };
    use crate::observe::metrics as m;
    let counter = |n: u64| Some(format!("{:?}", DebugValue::Counter(n)));
    assert_eq!(value(m::SHADOW_POLICY_ADMITTED_TOTAL), counter(10));
    assert_eq!(value(m::SHADOW_POLICY_REJECTED_TOTAL), counter(1));
    assert_eq!(value(m::SHADOW_POLICY_TRANSITIONS_TOTAL), counter(1));
    assert_eq!(value(m::SHADOW_POLICY_STATE).as_deref(), Some("Gauge(1.0)"));
}
