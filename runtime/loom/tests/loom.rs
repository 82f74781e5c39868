//! Model checks of the breaker's compare-and-swap transitions under every interleaving loom explores:
//! open → half-open probe admission, half-open close/reopen races, concurrent recording at the trip
//! point, a cancelled probe racing a new call, and windows judged while other callers record. No
//! transition is lost, no more probes than permitted are ever admitted, and no window is judged
//! with a failure whose call it does not count.
//!
//! Run with
//! `RUSTFLAGS="--cfg fusebox_loom" CARGO_TARGET_DIR=target/loom cargo test -p fusebox-loom --profile loom`
//! (the cfg switches the breaker's atomics to loom's; `cargo xtask test` runs it).
#![cfg(fusebox_loom)]

use std::time::Duration;

use fusebox::clock::FakeClock;
use fusebox::{Breaker, Policy, Reason, Registry, State};
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

const OPEN_FOR: Duration = Duration::from_millis(10);

/// Transitions seen by the registry's hook, by kind.
#[derive(Default)]
struct Transitions {
    opened: AtomicUsize,
    half_opened: AtomicUsize,
    closed: AtomicUsize,
}

impl Transitions {
    fn get(&self) -> (usize, usize, usize) {
        (
            self.opened.load(Ordering::SeqCst),
            self.half_opened.load(Ordering::SeqCst),
            self.closed.load(Ordering::SeqCst),
        )
    }
}

/// A registry on a fake clock with a transition counter, and one breaker in it.
fn setup(policy: Policy) -> (Registry, Breaker, FakeClock, Arc<Transitions>) {
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    let seen = Arc::new(Transitions::default());
    let hook = seen.clone();
    registry.on_transition(move |t| {
        let counter = match t.to {
            State::Open => &hook.opened,
            State::HalfOpen => &hook.half_opened,
            State::Closed => &hook.closed,
            _ => return,
        };
        counter.fetch_add(1, Ordering::SeqCst);
    });
    let breaker = registry.breaker("loom", policy).unwrap();
    (registry, breaker, clock, seen)
}

/// A breaker whose count window of `len` calls opens at `rate` % once it holds `len` calls.
fn count_window(len: u32, rate: u8) -> (Registry, Breaker, FakeClock, Arc<Transitions>) {
    setup(
        Policy::new()
            .window(len)
            .min_calls(len)
            .failure_rate(rate)
            .open_for(OPEN_FOR),
    )
}

/// Runs `calls` with a handle of `breaker` on a thread of the model.
fn on_thread(
    breaker: &Breaker,
    calls: impl FnOnce(Breaker) + Send + 'static,
) -> thread::JoinHandle<()> {
    let breaker = breaker.clone();
    thread::spawn(move || calls(breaker))
}

/// A breaker that opened on one failure and whose wait is over.
fn open_and_waited(policy: Policy) -> (Registry, Breaker, FakeClock, Arc<Transitions>) {
    let (registry, breaker, clock, seen) = setup(policy);
    breaker.try_acquire().unwrap().failure();
    assert_eq!(breaker.state(), State::Open);
    clock.advance(OPEN_FOR);
    (registry, breaker, clock, seen)
}

fn probes(half_open: u32) -> Policy {
    Policy::new()
        .window(1)
        .min_calls(1)
        .open_for(OPEN_FOR)
        .half_open(half_open)
}

/// Explores every interleaving (the models are small enough to be exhaustive).
fn model(f: impl Fn() + Sync + Send + 'static) {
    loom::model(f);
}

/// Three callers race after the open wait; each keeps its permit (never reports). Exactly
/// `half_open` of them are admitted, as probes, through exactly one open → half-open transition.
fn probe_admission(half_open: u32) {
    model(move || {
        let (_registry, breaker, _clock, seen) = open_and_waited(probes(half_open));
        let admitted = Arc::new(AtomicUsize::new(0));
        let call = {
            let (breaker, admitted) = (breaker.clone(), admitted.clone());
            move || match breaker.try_acquire() {
                Ok(permit) => {
                    assert!(permit.is_probe());
                    admitted.fetch_add(1, Ordering::SeqCst);
                    std::mem::forget(permit); // holds its slot for the rest of the model
                }
                Err(e) => assert_eq!(e.reason(), Reason::HalfOpenFull),
            }
        };
        let threads: Vec<_> = (0..2).map(|_| thread::spawn(call.clone())).collect();
        call();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(admitted.load(Ordering::SeqCst), half_open as usize);
        let snap = breaker.snapshot();
        assert_eq!(breaker.state(), State::HalfOpen);
        assert_eq!(snap.probes_in_flight, half_open);
        assert_eq!(seen.get(), (1, 1, 0), "(opened, half-opened, closed)");
    });
}

#[test]
fn one_probe_is_admitted_among_three_racing_callers() {
    probe_admission(1);
}

#[test]
fn two_probes_are_admitted_among_three_racing_callers() {
    probe_admission(2);
}

/// Two callers race into half-open (2 probes) and report: both succeed → closed exactly once;
/// one fails → open again (the other's success cannot close it), exactly one reopen.
fn probes_report(second_fails: bool) {
    model(move || {
        let (_registry, breaker, _clock, seen) = open_and_waited(probes(2));
        let spawn = |fail: bool| {
            let breaker = breaker.clone();
            thread::spawn(move || match breaker.try_acquire() {
                Ok(permit) if fail => permit.failure(),
                Ok(permit) => permit.success(),
                // Only possible once the other probe failed and reopened the circuit.
                Err(e) => assert_eq!(e.reason(), Reason::Open),
            })
        };
        let a = spawn(false);
        let b = spawn(second_fails);
        a.join().unwrap();
        b.join().unwrap();
        let snap = breaker.snapshot();
        if second_fails {
            assert_eq!(breaker.state(), State::Open);
            assert_eq!(snap.reopens, 1);
            assert_eq!(seen.get(), (2, 1, 0), "(opened, half-opened, closed)");
        } else {
            assert_eq!(breaker.state(), State::Closed);
            assert_eq!(snap.reopens, 0);
            assert_eq!(seen.get(), (1, 1, 1), "(opened, half-opened, closed)");
        }
    });
}

#[test]
fn two_successful_probes_close_exactly_once() {
    probes_report(false);
}

#[test]
fn a_failed_probe_reopens_even_when_the_other_succeeds() {
    probes_report(true);
}

/// Two callers each report a counted failure; together they reach the threshold. Exactly one
/// closed → open transition, and the circuit ends open.
fn trip_point(policy: Policy) {
    model(move || {
        let (_registry, breaker, _clock, seen) = setup(policy);
        let spawn = || {
            let breaker = breaker.clone();
            thread::spawn(move || breaker.try_acquire().unwrap().failure())
        };
        let a = spawn();
        let b = spawn();
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(breaker.state(), State::Open, "lost transition");
        assert_eq!(seen.get(), (1, 0, 0), "(opened, half-opened, closed)");
    });
}

#[test]
fn two_failures_reaching_the_consecutive_threshold_trip_once() {
    trip_point(
        Policy::new()
            .window(4)
            .min_calls(4)
            .rate_off()
            .consecutive(2)
            .open_for(OPEN_FOR),
    );
}

/// Pins a lost transition: the count window reports each record's `calls` as of its slot claim but
/// its `failures` as of its bit write, so with A claiming first and writing last, B sees
/// 1 failure in 2 calls (50 %) and A sees 1 call (below `min_calls`): nobody trips a window that
/// holds 2 failures in 2 calls.
#[test]
fn two_failures_reaching_the_rate_threshold_trip_once() {
    trip_point(
        Policy::new()
            .window(2)
            .min_calls(2)
            .failure_rate(100)
            .open_for(OPEN_FOR),
    );
}

/// One caller takes the only probe and cancels it while another asks for admission. The slot is
/// never lost: afterwards a probe is in flight (the second caller's) or a new call gets the slot.
#[test]
fn a_cancelled_probe_gives_its_slot_back_to_a_racing_caller() {
    model(|| {
        let (_registry, breaker, _clock, seen) = open_and_waited(probes(1));
        let cancelling = {
            let breaker = breaker.clone();
            thread::spawn(move || {
                if let Ok(permit) = breaker.try_acquire() {
                    assert!(permit.is_probe());
                    drop(permit); // cancelled
                }
            })
        };
        let held = match breaker.try_acquire() {
            Ok(permit) => {
                assert!(permit.is_probe());
                std::mem::forget(permit);
                true
            }
            Err(e) => {
                assert_eq!(e.reason(), Reason::HalfOpenFull);
                false
            }
        };
        cancelling.join().unwrap();
        assert_eq!(breaker.state(), State::HalfOpen);
        assert_eq!(breaker.snapshot().probes_in_flight, u32::from(held));
        match breaker.try_acquire() {
            Ok(permit) => {
                assert!(!held, "two probes admitted with half_open = 1");
                permit.success();
                assert_eq!(breaker.state(), State::Closed);
                assert_eq!(seen.get(), (1, 1, 1), "(opened, half-opened, closed)");
            }
            Err(e) => {
                assert!(held, "the cancelled probe's slot was lost");
                assert_eq!(e.reason(), Reason::HalfOpenFull);
                assert_eq!(seen.get(), (1, 1, 0), "(opened, half-opened, closed)");
            }
        }
    });
}

/// Progressive recovery, 2 phases of 2 calls at 50 %. A failure reported by a phase-1 call races
/// with the success that completes phase 1: either it counts in phase 1 (which then fails and
/// reopens), or it is stale and phase 2 starts from empty counters. It never counts in phase 2.
#[test]
fn a_stale_phase_report_never_counts_in_the_next_phase() {
    model(|| {
        let policy = Policy::new()
            .window(1)
            .min_calls(1)
            .failure_rate(50)
            .open_for(OPEN_FOR)
            .progressive(2, 2);
        let (_registry, breaker, _clock, _seen) = open_and_waited(policy);
        breaker.try_acquire().unwrap().success(); // opens phase 1; 1 of 2 calls recorded
        let late = breaker.try_acquire().unwrap(); // admitted in phase 1 (1 call in 2)
        assert_eq!(
            breaker.try_acquire().unwrap_err().reason(),
            Reason::Recovering
        );
        let completing = {
            let breaker = breaker.clone();
            // Admitted in phase 1 unless the late failure already reopened the circuit.
            thread::spawn(move || match breaker.try_acquire() {
                Ok(permit) => permit.success(),
                Err(e) => assert_eq!(e.reason(), Reason::Open),
            })
        };
        late.failure();
        completing.join().unwrap();
        match breaker.snapshot().phase {
            None => assert_eq!(breaker.state(), State::Open),
            Some(phase) => {
                assert_eq!(phase, 2);
                // Phase 2 is empty: one success is below min_passes, two close the circuit.
                breaker.try_acquire().unwrap().success();
                assert_eq!(breaker.snapshot().phase, Some(2), "a stale failure counted");
                breaker.try_acquire().unwrap().success();
                assert_eq!(
                    breaker.state(),
                    State::Closed,
                    "phase 2 judged 2 successes as failing: a stale phase-1 failure counted"
                );
            }
        }
    });
}

/// Two callers each record a success, then a counted failure, on a window that judges from its
/// first call (`min_calls = 1`) at 60 %. Every caller records its success before its failure, so
/// the window never holds more failures than successes: no consistent reading reaches 60 %. A
/// reading that takes a failure without its call (the calls counted before another caller's
/// record, the failures after it) would see 1 failure in 1 call and open the circuit.
///
/// Explored with at most `preemptions` preemptions (`None`: exhaustively): a misreading needs one
/// (a caller stopped between its two reads while the other records), and a time window's first
/// records each sum ten buckets, too many interleavings for an exhaustive search.
fn never_judges_a_failure_without_its_call(policy: Policy, preemptions: Option<usize>) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = preemptions;
    builder.check(move || {
        let (_registry, breaker, _clock, seen) = setup(policy.min_calls(1).failure_rate(60));
        let spawn = || {
            let breaker = breaker.clone();
            thread::spawn(move || {
                breaker.try_acquire().unwrap().success();
                if let Ok(permit) = breaker.try_acquire() {
                    permit.failure();
                }
            })
        };
        let a = spawn();
        let b = spawn();
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(breaker.state(), State::Closed, "opened below its threshold");
        assert_eq!(seen.get(), (0, 0, 0), "(opened, half-opened, closed)");
    });
}

#[test]
fn a_count_window_never_judges_a_failure_without_its_call() {
    never_judges_a_failure_without_its_call(Policy::new().window(4).open_for(OPEN_FOR), None);
}

#[test]
fn a_time_window_never_judges_a_failure_without_its_call() {
    never_judges_a_failure_without_its_call(
        Policy::new()
            .time_window(Duration::from_secs(30))
            .open_for(OPEN_FOR),
        Some(2),
    );
}

/// A full count window whose successes meet contention: a success that loses the pending count's
/// compare-and-swap goes to a striped counter, and every decision folds both in first. The window
/// of 5 holds S S F S S (20 %, judged when it filled); then one caller records a success while
/// another records two successes then a failure. Whichever of the first caller's success is
/// counted, the failure is judged with its own caller's two successes before it, over S S S S F at
/// worst: 20 %, below the 40 % that opens. A failure judged while its own caller's successes sat
/// unfolded in a stripe would see F S S S F (the other caller's success folded, not its own): 40 %,
/// and open. Afterwards the window (a snapshot folds too) holds exactly one failure in 5 calls:
/// no success was lost or counted twice by a fold.
#[test]
fn a_contended_count_window_folds_every_success_before_judging_a_failure() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(|| {
        let (_registry, breaker, _clock, seen) = count_window(5, 40);
        for failure in [false, false, true, false, false] {
            let permit = breaker.try_acquire().unwrap();
            if failure {
                permit.failure();
            } else {
                permit.success();
            }
        }
        assert_eq!(breaker.state(), State::Closed);
        let other = on_thread(&breaker, |b| b.try_acquire().unwrap().success());
        let own = on_thread(&breaker, |b| {
            b.try_acquire().unwrap().success();
            b.try_acquire().unwrap().success();
            b.try_acquire().unwrap().failure();
        });
        other.join().unwrap();
        own.join().unwrap();
        assert_eq!(seen.get(), (0, 0, 0), "(opened, half-opened, closed)");
        let snapshot = breaker.snapshot();
        assert_eq!((snapshot.calls, snapshot.failures), (5, 1));
    });
}

/// A full count window without failures takes a success without writing anything: the success
/// is as if it came before any failure it raced with. The window (2 calls) holds S S; one caller
/// reports a success while another reports a failure, then a last failure follows. In the order
/// success, failure, failure the window ends F F (it opens: 100 % of 2); in failure, success,
/// failure it ends S F (it stays closed). Any other ending (no failure counted, or the success
/// lost after the first failure, so F F without the open) would be a window that is not the
/// last two outcomes of some order of the calls. It guards against a lost or doubled failure;
/// a success that wrongly wrote nothing would end in an order this model accepts.
#[test]
fn a_success_that_writes_nothing_is_ordered_before_a_racing_failure() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(|| {
        let (_registry, breaker, _clock, seen) = count_window(2, 100);
        for _ in 0..2 {
            breaker.try_acquire().unwrap().success();
        }
        let success = on_thread(&breaker, |b| b.try_acquire().unwrap().success());
        let failure = on_thread(&breaker, |b| b.try_acquire().unwrap().failure());
        success.join().unwrap();
        failure.join().unwrap();
        if let Ok(permit) = breaker.try_acquire() {
            permit.failure();
        }
        let snapshot = breaker.snapshot();
        match (seen.get(), snapshot.calls, snapshot.failures) {
            ((1, 0, 0), ..) => assert_eq!(breaker.state(), State::Open),
            ((0, 0, 0), 2, 1) => assert_eq!(breaker.state(), State::Closed),
            other => panic!(
                "(transitions, calls, failures) {other:?}: not the last two outcomes of an order"
            ),
        }
    });
}

/// A contended time window: once the other slices alone hold `min_calls`, a success that loses
/// its bucket's compare-and-swap is deferred in a stripe tagged with its slice, and every reading
/// folds the stripes in first. Slice 1 holds S S S F (25 %, judged when it reached `min_calls`),
/// slice 2 one S; then one caller records a success while another records two successes then a
/// failure. Whichever of the first caller's success is counted, the failure is judged with its own
/// caller's two successes: 2 failures in at least 8 calls, 25 %, below the 28 % that opens. A
/// failure judged while its own caller's successes sat unfolded would see 2 in 7 at most (29 %)
/// and open. Afterwards the window holds all 9 calls and 2 failures.
#[test]
fn a_contended_time_window_folds_every_success_before_judging_a_failure() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.check(|| {
        let policy = Policy::new()
            .time_window(Duration::from_secs(30))
            .min_calls(4)
            .failure_rate(28)
            .open_for(OPEN_FOR);
        let (_registry, breaker, clock, seen) = setup(policy);
        for failure in [false, false, false, true] {
            let permit = breaker.try_acquire().unwrap();
            if failure {
                permit.failure();
            } else {
                permit.success();
            }
        }
        clock.advance(Duration::from_secs(3)); // the next slice
        breaker.try_acquire().unwrap().success();
        assert_eq!(breaker.state(), State::Closed);
        let other = on_thread(&breaker, |b| b.try_acquire().unwrap().success());
        let own = on_thread(&breaker, |b| {
            b.try_acquire().unwrap().success();
            b.try_acquire().unwrap().success();
            b.try_acquire().unwrap().failure();
        });
        other.join().unwrap();
        own.join().unwrap();
        assert_eq!(seen.get(), (0, 0, 0), "(opened, half-opened, closed)");
        let snapshot = breaker.snapshot();
        assert_eq!((snapshot.calls, snapshot.failures), (9, 2));
    });
}

/// A snapshot that folds in a success taking a failure's slot while an operator resets the
/// breaker: whichever runs first, the window holds no failure afterwards, and the next failure
/// counts as one (a reset between the slot's clearing and the count's update once wrapped the
/// count to `u32::MAX`, a full window of failures). Explored with at most two preemptions:
/// the wrap needs one (the reset run between the clearing and the count's update).
#[test]
fn a_reset_racing_a_cleared_failure_leaves_an_exact_count() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.check(|| {
        let policy = Policy::new()
            .window(2)
            .min_calls(2)
            .failure_rate(100)
            .open_for(OPEN_FOR);
        let (_registry, breaker, _clock, _seen) = setup(policy);
        breaker.try_acquire().unwrap().failure();
        breaker.try_acquire().unwrap().success();
        // The window is full: this success waits to be folded in, over the failure's slot.
        breaker.try_acquire().unwrap().success();
        let operator = {
            let breaker = breaker.clone();
            thread::spawn(move || breaker.reset())
        };
        let _ = breaker.snapshot();
        operator.join().unwrap();
        assert_eq!(breaker.snapshot().failures, 0);
        breaker.try_acquire().unwrap().failure();
        assert_eq!(breaker.snapshot().failures, 1);
    });
}

/// Two members of a group whose cap is one (three members, 10 %) trip at once: exactly one opens,
/// the other stays closed, and the group counts one place taken. The cap is one
/// compare-and-swap counter, taken before the state word's compare-and-swap and given back when
/// that one loses.
#[test]
fn two_members_tripping_at_once_never_exceed_the_group_cap() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.check(|| {
        let registry = Registry::with_clock(FakeClock::new());
        let policy = Policy::new()
            .group("loom")
            .consecutive(1)
            .open_for(OPEN_FOR);
        let a = registry.breaker("a", policy).unwrap();
        let b = registry.breaker("b", policy).unwrap();
        let _c = registry.breaker("c", policy).unwrap();
        let other = {
            let a = a.clone();
            thread::spawn(move || {
                let _ = a.try_acquire().map(|permit| permit.failure());
            })
        };
        let _ = b.try_acquire().map(|permit| permit.failure());
        other.join().unwrap();
        let open = [&a, &b]
            .iter()
            .filter(|breaker| breaker.state() == State::Open)
            .count();
        assert_eq!(open, 1, "the cap is one member");
        let group = registry.group("loom").unwrap().snapshot();
        assert_eq!((group.open, group.max_open), (1, 1));
        assert!(group.in_panic);
    });
}
