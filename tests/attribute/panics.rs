//! Panics in user code run by the breaker (transition hooks, failure predicates, fallbacks, bodies)
//! never corrupt a count, release a permit twice, wedge the bulkhead or half-open probes, or abort
//! the process.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use crate::common::ApiError;
use fusebox::clock::FakeClock;
use fusebox::{Policy, Reason, Registry, State, circuit_breaker};

const S: Duration = Duration::from_secs(1);

/// A registry whose hook panics on every transition into `to`.
fn panicking_hook_registry(to: State) -> (Registry, FakeClock) {
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    registry.on_transition(move |t| {
        if t.to == to {
            panic!("hook refuses {} -> {}", t.from, t.to);
        }
    });
    (registry, clock)
}

#[test]
fn a_hook_panicking_on_open_leaves_the_bulkhead_count_right() {
    let (registry, clock) = panicking_hook_registry(State::Open);
    let policy = Policy::new()
        .window(2)
        .min_calls(2)
        .failure_rate(100)
        .max_concurrent(2)
        .open_for(S);
    let b = registry.breaker("bulk", policy).unwrap();
    b.try_acquire().unwrap().failure();
    // The tripping report runs the hook, which panics: the report still completes and returns.
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        b.snapshot().in_flight,
        0,
        "each permit released exactly once"
    );
    clock.advance(S);
    let probe = b
        .try_acquire()
        .expect("the probe is admitted after the wait");
    assert_eq!(b.snapshot().in_flight, 1);
    probe.success();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().in_flight, 0);
    let (p1, p2) = (b.try_acquire().unwrap(), b.try_acquire().unwrap());
    assert_eq!(b.try_acquire().unwrap_err().reason(), Reason::BulkheadFull);
    drop((p1, p2));
    b.reset();
    assert_eq!(b.snapshot().in_flight, 0);
    for _ in 0..5 {
        b.try_acquire().expect("admitted after reset").success();
    }
}

#[test]
fn a_hook_panicking_on_half_open_leaves_probes_and_bulkhead_free() {
    let (registry, clock) = panicking_hook_registry(State::HalfOpen);
    let policy = Policy::new()
        .window(1)
        .min_calls(1)
        .max_concurrent(1)
        .open_for(S);
    let b = registry.breaker("probe", policy).unwrap();
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), State::Open);
    clock.advance(S);
    // The admission that moves Open -> HalfOpen runs the panicking hook; the caller still gets
    // its probe permit.
    let probe = b
        .try_acquire()
        .expect("the probe is admitted despite the hook");
    assert_eq!(b.state(), State::HalfOpen);
    let snap = b.snapshot();
    assert_eq!((snap.in_flight, snap.probes_in_flight), (1, 1));
    probe.success();
    assert_eq!(b.state(), State::Closed);
    let snap = b.snapshot();
    assert_eq!((snap.in_flight, snap.probes_in_flight), (0, 0));
    b.reset();
    b.try_acquire().expect("admitted after reset").success();
    assert_eq!(b.snapshot().in_flight, 0);
}

#[test]
fn a_panicking_hook_is_reported_and_later_hooks_still_run() {
    let (registry, _clock) = panicking_hook_registry(State::ForcedOpen);
    static SEEN: AtomicU32 = AtomicU32::new(0);
    registry.on_transition(|_| {
        SEEN.fetch_add(1, Ordering::Relaxed);
    });
    let b = registry.breaker("report", Policy::new()).unwrap();
    b.force_open();
    assert_eq!(b.state(), State::ForcedOpen);
    assert_eq!(SEEN.load(Ordering::Relaxed), 1, "the second hook ran");
    b.reset();
    assert_eq!(b.state(), State::Closed);
}

fake_registry!(CLOCK, REGISTRY);
static HOOKED: std::sync::Once = std::sync::Once::new();

/// Installs, once, a hook on `REGISTRY` that panics whenever a circuit opens.
fn hook_panics_on_open() {
    HOOKED.call_once(|| {
        REGISTRY.on_transition(|t| {
            if t.to == State::Open {
                panic!("hook panics while {} opens", t.key);
            }
        });
    });
}

#[circuit_breaker(key = "body-panics", registry = REGISTRY, window = 2, min_calls = 2, max_concurrent = 2)]
fn body_panics(panic: bool) -> Result<u32, ApiError> {
    if panic {
        panic!("body panics");
    }
    Ok(1)
}

#[test]
fn a_body_panic_whose_trip_runs_a_panicking_hook_does_not_abort() {
    hook_panics_on_open();
    for _ in 0..2 {
        // The second panic trips the circuit from the permit's drop during unwinding; the hook
        // panics there. Without containment this is "panic in a destructor during cleanup".
        let unwound = catch_unwind(|| body_panics(true));
        assert!(unwound.is_err(), "the body's own panic keeps unwinding");
    }
    let b = REGISTRY.get("body-panics").unwrap();
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.snapshot().in_flight, 0);
    CLOCK.advance(Duration::from_secs(10));
    assert_eq!(body_panics(false).unwrap(), 1);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().in_flight, 0);
}

static PREDICATE_PANICS: AtomicBool = AtomicBool::new(false);

fn counts(e: &ApiError) -> bool {
    if PREDICATE_PANICS.load(Ordering::Relaxed) {
        panic!("predicate panics");
    }
    matches!(e, ApiError::Timeout)
}

fn fallback(_fail: bool, _cause: fusebox::Cause<ApiError>) -> Result<u32, ApiError> {
    panic!("fallback panics")
}

#[circuit_breaker(key = "pred-panics", registry = REGISTRY, window = 4, min_calls = 4, max_concurrent = 1, failure = counts, fallback = fallback)]
fn predicate_and_fallback(fail: bool) -> Result<u32, ApiError> {
    if fail { Err(ApiError::Timeout) } else { Ok(2) }
}

#[test]
fn a_panicking_predicate_or_fallback_releases_the_permit_once() {
    hook_panics_on_open();
    PREDICATE_PANICS.store(true, Ordering::Relaxed);
    assert!(catch_unwind(|| predicate_and_fallback(true)).is_err());
    PREDICATE_PANICS.store(false, Ordering::Relaxed);
    let b = REGISTRY.get("pred-panics").unwrap();
    let snap = b.snapshot();
    assert_eq!(
        (snap.in_flight, snap.failures),
        (0, 1),
        "a panic counts as one failure"
    );
    // The fallback panics after the permit was settled.
    assert!(catch_unwind(|| predicate_and_fallback(true)).is_err());
    assert_eq!(b.snapshot().in_flight, 0);
    assert_eq!(predicate_and_fallback(false).unwrap(), 2);
    let snap = b.snapshot();
    assert_eq!((snap.in_flight, snap.calls, snap.failures), (0, 3, 2));
    // A hand-held permit whose predicate panics in `Breaker::call`.
    let r = catch_unwind(AssertUnwindSafe(|| {
        b.call(|| Err::<(), _>(ApiError::Timeout), |_| panic!("predicate"))
    }));
    assert!(r.is_err());
    let snap = b.snapshot();
    assert_eq!(snap.in_flight, 0);
    assert_eq!(
        snap.state,
        State::Open,
        "the panic counted as the fourth call's failure"
    );
    b.reset();
    b.try_acquire()
        .expect("the bulkhead slot came back")
        .ignore();
}
