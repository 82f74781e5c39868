//! Unit tests of the breaker's transitions on a fake clock.

use super::*;
use crate::clock::FakeClock;

fn breaker(policy: Policy) -> (Breaker, FakeClock) {
    let clock = FakeClock::new();
    let core = Circuit::new(
        Key::from_static("t"),
        policy,
        ClockSource::Custom(Arc::new(clock.clone())),
        Arc::default(),
    );
    (
        Breaker {
            core: Arc::new(core),
        },
        clock,
    )
}

#[test]
fn closed_open_half_open_closed() {
    let (b, clock) = breaker(
        Policy::new()
            .window(4)
            .min_calls(4)
            .open_for(Duration::from_secs(1)),
    );
    for _ in 0..2 {
        b.try_acquire().unwrap().success();
    }
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), State::Closed);
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), State::Open);
    let err = b.try_acquire().unwrap_err();
    assert_eq!(err.reason(), Reason::Open);
    assert_eq!(err.retry_after(), Some(Duration::from_secs(1)));
    clock.advance(Duration::from_millis(999));
    assert!(b.try_acquire().is_err());
    clock.advance(Duration::from_millis(1));
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    assert_eq!(b.state(), State::HalfOpen);
    assert_eq!(b.try_acquire().unwrap_err().reason(), Reason::HalfOpenFull);
    probe.success();
    assert_eq!(b.state(), State::Closed);
    let snap = b.snapshot();
    assert_eq!((snap.calls, snap.failures, snap.rejected), (0, 0, 3));
}

#[test]
fn failed_probe_reopens_and_cancelled_probe_frees_its_slot() {
    let (b, clock) = breaker(
        Policy::new()
            .window(2)
            .min_calls(1)
            .open_for(Duration::from_secs(1)),
    );
    b.try_acquire().unwrap().failure();
    clock.advance(Duration::from_secs(1));
    drop(b.try_acquire().unwrap()); // cancelled probe
    assert_eq!(b.state(), State::HalfOpen);
    let probe = b.try_acquire().expect("slot given back");
    probe.failure();
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.snapshot().retry_after, Some(Duration::from_secs(1)));
}

#[test]
fn stale_reports_change_nothing() {
    let (b, _clock) = breaker(Policy::new().window(2).min_calls(1));
    let old = b.try_acquire().unwrap();
    b.force_open();
    b.reset();
    old.failure();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().failures, 0);
}

#[test]
fn unreported_probes_are_rearmed_after_the_lease() {
    let (b, clock) = breaker(
        Policy::new()
            .window(2)
            .min_calls(1)
            .open_for(Duration::from_secs(1)),
    );
    b.try_acquire().unwrap().failure();
    clock.advance(Duration::from_secs(1));
    let stuck = b.try_acquire().unwrap();
    std::mem::forget(stuck); // never reports, never drops
    assert!(b.try_acquire().is_err());
    clock.advance(Duration::from_secs(1));
    b.try_acquire().expect("re-armed").success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn manual_states() {
    let (b, _clock) = breaker(Policy::new().window(2).min_calls(1));
    b.force_open();
    assert_eq!(b.try_acquire().unwrap_err().reason(), Reason::ForcedOpen);
    b.disable();
    for _ in 0..10 {
        b.try_acquire().unwrap().failure();
    }
    assert_eq!(b.state(), State::Disabled);
    assert_eq!(b.snapshot().failures, 2);
    b.reset();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn business_errors_never_count() {
    let (b, _clock) = breaker(Policy::new().window(4).min_calls(1));
    for _ in 0..100 {
        let r = b.call(|| Err::<(), u8>(1), |_| false).unwrap();
        assert_eq!(r, Err(1));
    }
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().calls, 0);
}

const S: Duration = Duration::from_secs(1);

#[test]
fn consecutive_failures_trip_and_a_success_resets_the_run() {
    let (b, _clock) = breaker(Policy::new().rate_off().consecutive(3));
    for _ in 0..2 {
        b.try_acquire().unwrap().failure();
    }
    b.try_acquire().unwrap().success();
    for _ in 0..2 {
        b.try_acquire().unwrap().failure();
    }
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().consecutive_failures, 2);
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn slow_successes_count_as_slow_not_failed() {
    let policy = Policy::new()
        .window(4)
        .min_calls(4)
        .rate_off()
        .slow(2 * S)
        .slow_rate(50);
    let (b, clock) = breaker(policy);
    for slow in [false, true, false] {
        let p = b.try_acquire().unwrap();
        if slow {
            clock.advance(3 * S);
        }
        p.success();
    }
    let snap = b.snapshot();
    assert_eq!((snap.calls, snap.failures, snap.slow), (3, 0, 1));
    let p = b.try_acquire().unwrap();
    clock.advance(3 * S);
    p.success();
    assert_eq!(b.state(), State::Open, "2 slow of 4 reaches 50 %");
}

#[test]
fn time_window_trips_on_recent_failures_only() {
    let policy = Policy::new()
        .time_window(10 * S)
        .min_calls(4)
        .failure_rate(50);
    let (b, clock) = breaker(policy);
    for _ in 0..3 {
        b.try_acquire().unwrap().failure();
    }
    clock.advance(11 * S); // those failures left the window
    b.try_acquire().unwrap().success();
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().calls, 2);
    b.try_acquire().unwrap().failure();
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn time_window_trips_on_a_success_once_older_successes_expire() {
    let policy = Policy::new()
        .time_window(10 * S)
        .min_calls(4)
        .failure_rate(50);
    let (b, clock) = breaker(policy);
    for _ in 0..20 {
        b.try_acquire().unwrap().success();
    }
    clock.advance(5 * S);
    for _ in 0..3 {
        b.try_acquire().unwrap().failure(); // 3 in 23: far below the rate
    }
    b.try_acquire().unwrap().success();
    assert_eq!(b.state(), State::Closed);
    clock.advance(6 * S); // the 20 successes left the window; 3 failures in 4 calls remain
    b.try_acquire().unwrap().success();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn time_window_success_that_reaches_min_calls_trips() {
    let policy = Policy::new()
        .time_window(10 * S)
        .min_calls(4)
        .failure_rate(50);
    let (b, _clock) = breaker(policy);
    for _ in 0..3 {
        b.try_acquire().unwrap().failure();
    }
    assert_eq!(b.state(), State::Closed);
    b.try_acquire().unwrap().success(); // 3 failures in 4 calls, now judged
    assert_eq!(b.state(), State::Open);
}

#[test]
fn open_backoff_grows_per_failed_recovery_and_resets_on_close() {
    let policy = Policy::new()
        .window(1)
        .min_calls(1)
        .open_for(S)
        .open_backoff(2.0)
        .open_max(3 * S);
    let (b, clock) = breaker(policy);
    b.try_acquire().unwrap().failure();
    assert_eq!(b.snapshot().retry_after, Some(S));
    for expected in [2 * S, 3 * S, 3 * S] {
        clock.advance(b.snapshot().retry_after.unwrap());
        b.try_acquire().unwrap().failure(); // failed probe
        assert_eq!(b.snapshot().retry_after, Some(expected));
    }
    clock.advance(3 * S);
    b.try_acquire().unwrap().success();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().reopens, 0);
    b.try_acquire().unwrap().failure();
    assert_eq!(
        b.snapshot().retry_after,
        Some(S),
        "a close resets the backoff"
    );
}

#[test]
fn progressive_recovery_admits_a_growing_share() {
    let policy = Policy::new()
        .window(1)
        .min_calls(1)
        .open_for(S)
        .progressive(2, 4);
    let (b, clock) = breaker(policy);
    b.try_acquire().unwrap().failure();
    clock.advance(S);
    // Phase 1 of 2: the call that starts it, then one call in two, until 4 were recorded.
    let mut admitted = 0;
    let mut rejected = 0;
    while b.snapshot().phase == Some(1) || b.state() == State::Open {
        match b.try_acquire() {
            Ok(p) => {
                admitted += 1;
                p.success();
            }
            Err(e) => {
                assert_eq!(e.reason(), Reason::Recovering);
                rejected += 1;
            }
        }
    }
    assert_eq!((admitted, rejected), (4, 2));
    assert_eq!(b.snapshot().phase, Some(2));
    // Phase 2 of 2 admits everything; a failing phase reopens.
    for _ in 0..4 {
        b.try_acquire().unwrap().failure();
    }
    assert_eq!(b.state(), State::Open);
    clock.advance(S);
    for _ in 0..8 {
        if let Ok(p) = b.try_acquire() {
            p.success();
        }
    }
    for _ in 0..4 {
        b.try_acquire().unwrap().success();
    }
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn metrics_only_admits_what_it_would_reject() {
    let (b, _clock) = breaker(Policy::new().window(1).min_calls(1));
    b.metrics_only();
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), State::Open);
    let shadow = b.try_acquire().expect("metrics-only never rejects");
    shadow.failure();
    let snap = b.snapshot();
    assert_eq!(
        (snap.rejected, snap.metrics_only, snap.state),
        (1, true, State::Open)
    );
    b.reset();
    assert!(!b.snapshot().metrics_only);
}

/// A clock that panics while `PANIC` is set: user code that can unwind out of a report.
struct PanickingClock(FakeClock, Arc<AtomicBool>);

impl crate::clock::Clock for PanickingClock {
    fn now_nanos(&self) -> u64 {
        if self.1.load(Ordering::Relaxed) {
            panic!("clock panics");
        }
        self.0.now_nanos()
    }
}

#[test]
fn a_report_that_unwinds_releases_its_bulkhead_slot_exactly_once() {
    let panics = Arc::new(AtomicBool::new(false));
    let core = Circuit::new(
        Key::from_static("t"),
        Policy::new().max_concurrent(2).slow(S),
        ClockSource::Custom(Arc::new(PanickingClock(FakeClock::new(), panics.clone()))),
        Arc::default(),
    );
    let b = Breaker {
        core: Arc::new(core),
    };
    let permit = b.try_acquire().unwrap();
    panics.store(true, Ordering::Relaxed);
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| permit.success()));
    panics.store(false, Ordering::Relaxed);
    assert!(unwound.is_err());
    assert_eq!(b.snapshot().in_flight, 0, "released once, not twice");
    let held = (b.try_acquire().unwrap(), b.try_acquire().unwrap());
    assert_eq!(b.try_acquire().unwrap_err().reason(), Reason::BulkheadFull);
    drop(held);
}

#[test]
fn bulkhead_rejects_over_the_limit_and_frees_slots() {
    let (b, _clock) = breaker(Policy::new().max_concurrent(2));
    let first = b.try_acquire().unwrap();
    let second = b.try_acquire().unwrap();
    assert_eq!(b.try_acquire().unwrap_err().reason(), Reason::BulkheadFull);
    assert_eq!(b.snapshot().in_flight, 2);
    first.success();
    drop(second); // cancelled
    assert_eq!(b.snapshot().in_flight, 0);
    let (a, c) = (b.try_acquire().unwrap(), b.try_acquire().unwrap());
    a.failure();
    c.ignore();
    let snap = b.snapshot();
    assert_eq!(
        (snap.calls, snap.failures, snap.rejected),
        (2, 1, 1),
        "rejection not recorded"
    );
}

#[test]
fn a_permit_is_three_words() {
    // The breaker, its admission (one word: state, bulkhead slot and admission time, or the
    // rejection and its wait) and the function's name: an annotated future holds one of these.
    assert_eq!(size_of::<Permit<'_>>(), 3 * size_of::<usize>());
    // The owned permit holds its breaker by a reference count or by a plain reference (a
    // circuit kept for the life of the process), one more word.
    assert_eq!(size_of::<OwnedPermit>(), 4 * size_of::<usize>());
}

/// 2^48 ns, about 3.3 days: the span over which a permit times its call.
const TIMED_SPAN: u64 = 1 << 48;

#[test]
fn a_call_is_timed_across_the_wrap_of_its_admission_time() {
    let policy = Policy::new()
        .window(2)
        .min_calls(2)
        .rate_off()
        .slow(2 * S)
        .slow_rate(100);
    let (b, clock) = breaker(policy);
    // Admitted 1 s before the admission time's field wraps, reported 1.5 s and 2.5 s later.
    clock.advance(Duration::from_nanos(TIMED_SPAN) - S);
    let quick = b.try_acquire().unwrap();
    let slow = b.try_acquire().unwrap();
    clock.advance(S + S / 2);
    quick.success();
    clock.advance(S);
    slow.success();
    let snap = b.snapshot();
    assert_eq!(
        (snap.calls, snap.slow),
        (2, 1),
        "1.5 s is quick, 2.5 s is slow"
    );
}

#[test]
fn a_call_longer_than_the_timed_span_is_measured_modulo_it() {
    let policy = Policy::new()
        .window(2)
        .min_calls(2)
        .rate_off()
        .slow(2 * S)
        .slow_rate(100);
    let (b, clock) = breaker(policy);
    let permit = b.try_acquire().unwrap();
    // 3.3 days and 1 s: measured as 1 s, so not slow (documented in the permit's module docs
    // and "Time" in `guide::semantics`).
    clock.advance(Duration::from_nanos(TIMED_SPAN) + S);
    permit.success();
    let snap = b.snapshot();
    assert_eq!((snap.calls, snap.slow), (1, 0));
}

#[test]
fn an_outcome_event_of_a_call_admitted_at_a_multiple_of_the_span_has_no_latency() {
    // Admitted at 0 modulo 2^48 while events are wanted: the word carries 1 (0 means "no time").
    let ticket = Ticket {
        admission: permit::admitted(Word::INITIAL, permit::marked(0), false),
        site: &"",
    };
    assert!(ticket.stamped());
    assert_eq!(ticket.latency(0), 0);
    assert_eq!(ticket.latency(TIMED_SPAN), 0);
    assert_eq!(ticket.latency(5), 4, "1 ns off at most, never 3.3 days");
    let later = Ticket {
        admission: permit::admitted(Word::INITIAL, permit::marked(TIMED_SPAN - 3), false),
        site: &"",
    };
    assert_eq!(later.latency(TIMED_SPAN + 4), 7);
}

#[test]
fn a_rejection_keeps_its_wait_up_to_the_longest_open_wait() {
    let day = Duration::from_secs(24 * 60 * 60);
    let (b, clock) = breaker(Policy::new().window(1).min_calls(1).open_for(day));
    b.try_acquire().unwrap().failure();
    assert_eq!(b.try_acquire().unwrap_err().retry_after(), Some(day));
    clock.advance(day - Duration::from_nanos(1));
    let rejected = b.try_acquire().unwrap_err();
    assert_eq!(
        (rejected.reason(), rejected.retry_after()),
        (Reason::Open, Some(Duration::from_nanos(1)))
    );
    clock.advance(Duration::from_nanos(1));
    let probe = b.try_acquire().unwrap();
    let full = b.try_acquire().unwrap_err();
    assert_eq!(
        (full.reason(), full.retry_after()),
        (Reason::HalfOpenFull, None)
    );
    drop(probe);
    // The word of a rejected permit packs the reason with the wait, and keeps "no wait" apart.
    for (code, wait) in [(1, 0), (1, u64::MAX - 1), (2, NO_WAIT), (15, 12_345)] {
        let word = permit::rejected(code, wait);
        assert!(word.inert());
        assert_eq!(word.rejection(), code);
        let error = permit::error_for_rejection(&Key::from_static("t"), 1, word);
        let kept = match wait {
            NO_WAIT => None,
            wait => Some(Duration::from_nanos(wait.min((1 << 56) - 1))),
        };
        assert_eq!(error.retry_after(), kept, "{code} {wait}");
    }
}

#[test]
fn a_bulkhead_permit_keeps_its_admission_time_apart_from_its_slot() {
    let (b, clock) = breaker(Policy::new().max_concurrent(1).slow(2 * S).rate_off());
    clock.advance(Duration::from_nanos(TIMED_SPAN - 1));
    let permit = b.try_acquire().unwrap();
    assert_eq!(b.snapshot().in_flight, 1);
    clock.advance(3 * S);
    permit.success();
    let snap = b.snapshot();
    assert_eq!((snap.in_flight, snap.calls, snap.slow), (0, 1, 1));
}

/// A name known to its type, as the attribute's expansion declares one per call site.
struct SiteName;

impl Named for SiteName {
    fn name(&self) -> &'static &'static str {
        &"app::charge"
    }
}

#[test]
fn a_permit_named_by_its_type_is_two_words() {
    // What an annotated function holds across its body's await: the breaker and the word of
    // admission; the name comes from the type.
    assert_eq!(
        size_of::<NamedPermit<'_, SiteName>>(),
        2 * size_of::<usize>()
    );
}

#[test]
fn a_permit_named_by_its_type_names_its_function_in_events_when_it_reports_or_drops() {
    let (b, _clock) = breaker(Policy::new().consecutive(1));
    let core = b.core.current();
    core.enter(SiteName).failure();
    let last = b.snapshot().last_transition.expect("tripped");
    assert_eq!((last.to, last.function), (State::Open, "app::charge"));
    // Dropped unreported while panicking: a failure, named the same way.
    b.reset();
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _permit = core.enter(SiteName);
        panic!("the body panicked");
    }));
    assert!(unwound.is_err());
    let last = b.snapshot().last_transition.expect("tripped again");
    assert_eq!((last.to, last.function), (State::Open, "app::charge"));
    // Rejected: its rejection carries the breaker's key, and it reports nothing when dropped.
    let rejected = core.acquire(SiteName).unwrap_err();
    assert_eq!((rejected.key(), rejected.reason()), ("t", Reason::Open));
    assert_eq!(
        b.snapshot().failures,
        0,
        "the open circuit's window was reset"
    );
}

/// The fields a closed call reads, and those of the window a success writes, share the
/// breaker's first cache line (a dynamic key's call misses no other line of its breaker), and the
/// counters written by rejections are on lines of their own.
#[test]
fn a_closed_calls_fields_share_one_cache_line() {
    use std::mem::{align_of, offset_of, size_of};
    assert_eq!(
        align_of::<Circuit>(),
        64,
        "a breaker starts on a cache line"
    );
    let hot = [
        ("state", offset_of!(Circuit, state), size_of::<AtomicU64>()),
        (
            "min_calls",
            offset_of!(Circuit, min_calls),
            size_of::<u32>(),
        ),
        ("general", offset_of!(Circuit, general), 1),
        ("budgeted", offset_of!(Circuit, budgeted), 1),
        ("marks", offset_of!(Circuit, marks), 1),
        ("replaced", offset_of!(Circuit, replaced), 1),
    ];
    for (name, offset, size) in hot {
        assert!(offset + size <= 64, "`{name}` ends off the hot line");
    }
    for policy in [
        Policy::new(),
        Policy::new().time_window(Duration::from_secs(10)),
    ] {
        let (b, _clock) = breaker(policy);
        let core = &*b.core;
        let window = std::ptr::from_ref(&core.window).addr() - std::ptr::from_ref(core).addr();
        let end = window + core.window.fast_fields_end();
        assert!(end <= 64, "the window's fast-path fields end at byte {end}");
    }
    let counters = offset_of!(Circuit, counters);
    assert!(counters >= 64, "the counters share the hot line");
}

#[test]
fn a_call_of_exactly_slow_is_not_slow_and_one_nanosecond_more_is() {
    let policy = Policy::new()
        .window(2)
        .min_calls(2)
        .rate_off()
        .slow(2 * S)
        .slow_rate(100);
    let (b, clock) = breaker(policy);
    // Away from time 0, whose admission is carried as 1 ns.
    clock.advance(S);
    let exact = b.try_acquire().unwrap();
    clock.advance(2 * S);
    exact.success();
    let snap = b.snapshot();
    assert_eq!(
        (snap.calls, snap.slow),
        (1, 0),
        "exactly `slow` is not slow"
    );
    let longer = b.try_acquire().unwrap();
    clock.advance(2 * S + Duration::from_nanos(1));
    longer.success();
    let snap = b.snapshot();
    assert_eq!((snap.calls, snap.slow), (2, 1), "`slow` + 1 ns is slow");
    assert_eq!(b.state(), State::Closed, "1 slow call of 2 is under 100 %");
}

#[test]
fn pushback_lengthens_the_open_wait_never_shortens_it_and_is_spent_by_the_open() {
    let secs = Duration::from_secs;
    let (b, clock) = breaker(Policy::new().consecutive(2).open_for(secs(5)));
    // A wait that is over before the trip counts for nothing.
    b.try_acquire().unwrap().failure_after(secs(3));
    clock.advance(secs(4));
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.try_acquire().unwrap_err().retry_after(), Some(secs(5)));
    // Reset: a wait asked for while closed, then spent by the open it lengthened.
    b.reset();
    b.try_acquire().unwrap().failure_after(secs(20));
    b.try_acquire().unwrap().failure_after(secs(8));
    assert_eq!(
        b.try_acquire().unwrap_err().retry_after(),
        Some(secs(20)),
        "the latest moment asked for"
    );
    clock.advance(secs(20));
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    probe.failure();
    assert_eq!(
        b.try_acquire().unwrap_err().retry_after(),
        Some(secs(5)),
        "the trip spent the pushback: the reopen waits the policy's wait"
    );
}

#[test]
fn an_operator_reset_forgets_pushback() {
    let secs = Duration::from_secs;
    let (b, _clock) = breaker(Policy::new().consecutive(2).open_for(secs(5)));
    b.try_acquire().unwrap().failure_after(secs(60));
    b.reset();
    b.try_acquire().unwrap().failure();
    b.try_acquire().unwrap().failure();
    assert_eq!(b.try_acquire().unwrap_err().retry_after(), Some(secs(5)));
}

#[test]
fn throttle_probability_follows_the_formula() {
    let counts = |calls, failures| Counts {
        calls,
        failures,
        slow: 0,
    };
    let p = |c: Counts, k| c.throttle_probability(k, 10);
    // (100 - 2 × 50) / 101 = 0: half the calls succeed, K = 2 sheds nothing.
    assert_eq!(p(counts(100, 50), 2.0), 0.0);
    // (100 - 2 × 20) / 101
    assert!((p(counts(100, 80), 2.0) - 60.0 / 101.0).abs() < 1e-12);
    // (100 - 1.5 × 50) / 101
    assert!((p(counts(100, 50), 1.5) - 25.0 / 101.0).abs() < 1e-12);
    // Every call failed: all but one in `requests + 1`.
    assert!((p(counts(100, 100), 2.0) - 100.0 / 101.0).abs() < 1e-12);
    // Below `min_calls`, nothing is shed; an empty window neither.
    assert_eq!(p(counts(9, 9), 1.0), 0.0);
    assert_eq!(counts(0, 0).throttle_probability(1.0, 0), 0.0);
    // Failures never exceed calls in the formula.
    assert!(p(counts(10, 20), 1.0) <= 10.0 / 11.0);
}

#[test]
fn a_throttling_breaker_leaves_the_fast_path_and_a_plain_one_keeps_it() {
    let (plain, _) = breaker(Policy::new());
    assert!(plain.core.plain());
    let (throttled, _) = breaker(Policy::new().throttle(2.0));
    assert!(!throttled.core.plain());
}

#[test]
fn throttling_sheds_a_closed_circuit_s_calls_with_their_own_reason() {
    fastrand::seed(7);
    let (b, _) = breaker(
        Policy::new()
            .window(10)
            .min_calls(10)
            .throttle(1.0)
            .rate_off()
            .consecutive(1000),
    );
    // Ten failures: p = 10 / 11 for the next calls.
    for _ in 0..10 {
        b.try_acquire().unwrap().failure();
    }
    assert_eq!(b.state(), State::Closed);
    let mut shed = 0;
    for _ in 0..1000 {
        match b.try_acquire() {
            // Admitted calls are not reported: the window stays as it is.
            Ok(permit) => permit.ignore(),
            Err(e) => {
                assert_eq!(e.reason(), Reason::Throttled);
                assert_eq!(e.retry_after(), None);
                shed += 1;
            }
        }
    }
    assert!(
        (850..=960).contains(&shed),
        "{shed} of 1000 shed at p = 10/11"
    );
    let snapshot = b.snapshot();
    assert_eq!(snapshot.throttled, shed);
    assert_eq!(snapshot.rejected, shed);
    assert_eq!(snapshot.calls, 10, "a shed call is not recorded");
    // A disabled breaker admits everything; an open one rejects with its own reason.
    b.disable();
    for _ in 0..10 {
        b.try_acquire().unwrap().failure();
    }
    for _ in 0..100 {
        b.try_acquire().unwrap().ignore();
    }
    b.force_open();
    assert_eq!(b.try_acquire().unwrap_err().reason(), Reason::ForcedOpen);
}

#[test]
fn metrics_only_mode_runs_the_calls_throttling_would_shed() {
    let (b, _) = breaker(
        Policy::new()
            .window(10)
            .min_calls(10)
            .throttle(1.0)
            .rate_off()
            .consecutive(1000),
    );
    for _ in 0..10 {
        b.try_acquire().unwrap().failure();
    }
    b.metrics_only();
    for _ in 0..100 {
        b.try_acquire().unwrap().failure();
    }
    let snapshot = b.snapshot();
    assert_eq!(snapshot.throttled, 0, "nothing was rejected");
    assert!(
        snapshot.rejected > 50,
        "the calls it would have shed are counted"
    );
}
