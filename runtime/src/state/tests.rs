//! Unit tests of the state word: its layout, and the pure decisions called directly.

use super::*;

const MS: u64 = NANOS_PER_MS;

/// The clock at `now`, with the word's field read back at full width as the breaker would.
fn at(now: u64) -> impl Fn(Word) -> (u64, Option<u64>) {
    move |word: Word| (now, Some(word.time_ms()))
}

#[test]
fn admission_rejects_open_until_the_deadline_then_arms_a_probe() {
    let open = Word::INITIAL.to_open(0, 100 * MS);
    let decide = |now| admission(open, Recovery::Probes, 2, 10 * MS, at(now));
    assert_eq!(
        decide(40 * MS),
        Step::Keep(Admission::Reject(Reason::Open, 60 * MS))
    );
    let Step::Replace(next) = decide(100 * MS) else {
        panic!("the wait is over: the word must move");
    };
    assert_eq!((next.state(), next.issued()), (State::HalfOpen, 1));
    let progressive = Recovery::Progressive {
        phases: 4,
        min_passes: 1,
    };
    let Step::Replace(next) = admission(open, progressive, 2, 10 * MS, at(100 * MS)) else {
        panic!("the wait is over: the word must move");
    };
    assert_eq!((next.state(), next.passed()), (State::HalfOpen, 1));
    assert_eq!(
        admission(next, progressive, 2, 10 * MS, at(100 * MS)),
        Step::Keep(Admission::Share(4))
    );
}

#[test]
fn admission_in_half_open_takes_free_slots_then_rejects_until_the_lease_ends() {
    let armed = Word::INITIAL.to_half_open(0);
    let no_clock = |_: Word| -> (u64, Option<u64>) { panic!("a free slot needs no clock") };
    let Step::Replace(second) = admission(armed, Recovery::Probes, 2, 10 * MS, no_clock) else {
        panic!("a free probe slot is taken by moving the word");
    };
    assert_eq!(second.issued(), 2);
    assert_eq!(
        admission(second, Recovery::Probes, 2, 10 * MS, at(5 * MS)),
        Step::Keep(Admission::Reject(Reason::HalfOpenFull, NO_WAIT))
    );
    let Step::Replace(rearmed) = admission(second, Recovery::Probes, 2, 10 * MS, at(20 * MS))
    else {
        panic!("the lease is over: the probes are re-armed");
    };
    assert_eq!((rearmed.state(), rearmed.issued()), (State::HalfOpen, 1));
    for word in [Word::INITIAL, Word::INITIAL.to_disabled()] {
        assert_eq!(
            admission(word, Recovery::Probes, 2, 10 * MS, no_clock),
            Step::Keep(Admission::Admit)
        );
    }
    assert_eq!(
        admission(
            Word::INITIAL.to_forced_open(),
            Recovery::Probes,
            2,
            10 * MS,
            no_clock
        ),
        Step::Keep(Admission::Reject(Reason::ForcedOpen, NO_WAIT))
    );
}

#[test]
fn after_probe_counts_closes_reopens_releases_and_ignores_stale_reports() {
    let issued = Word::INITIAL.to_half_open(0);
    let reopen = |w: Word| w.to_open(0, 50 * MS);
    let pass = after_probe(issued, issued, Verdict::Success, 2, reopen);
    assert_eq!(pass, Step::Replace(issued.with_passed(1)));
    let second = issued.with_passed(1);
    assert_eq!(
        after_probe(second, issued, Verdict::Success, 2, reopen),
        Step::Replace(second.to_closed())
    );
    let Step::Replace(failed) = after_probe(issued, issued, Verdict::Failure, 2, reopen) else {
        panic!("a failed probe reopens");
    };
    assert_eq!(failed.state(), State::Open);
    assert_eq!(
        after_probe(issued, issued, Verdict::Ignored, 2, reopen),
        Step::Replace(issued.with_issued(0))
    );
    let later = issued.to_open(0, MS).to_half_open(MS);
    assert_eq!(
        after_probe(later, issued, Verdict::Success, 2, reopen),
        Step::Keep(()),
        "a report from an earlier half-open state is stale"
    );
}

#[test]
fn phase_k_of_n_admits_k_in_every_n_calls() {
    let phase2 = Word::INITIAL.to_phase(2, 0);
    let admitted = (0..8).filter(|&seq| phase2.in_share(seq, 4)).count();
    assert_eq!(admitted, 4);
}

#[test]
fn transitions_bump_the_generation_and_keep_fields_apart() {
    let w = Word::INITIAL;
    assert!(w.admits() && w.to_disabled().admits());
    assert!(
        !w.to_open(0, 1).admits() && !w.to_half_open(0).admits() && !w.to_forced_open().admits()
    );
    assert_eq!(w.state(), State::Closed);
    let open = w.to_open(5 * MS, 10 * MS);
    assert_eq!(open.state(), State::Open);
    assert!(!open.same_epoch(w));
    let half = open.to_half_open(20 * MS).with_issued(3).with_passed(2);
    assert_eq!(half.state(), State::HalfOpen);
    assert_eq!((half.issued(), half.passed()), (3, 2));
    assert!(half.same_epoch(open.to_half_open(20 * MS)));
    assert_eq!(half.to_closed().state(), State::Closed);
    assert_eq!(w.to_forced_open().state(), State::ForcedOpen);
    assert_eq!(w.to_disabled().state(), State::Disabled);
}

/// The full time of `word` as a breaker would resolve it, with the stamp written at `set_at`.
fn full(word: Word, set_at: u64, now: u64) -> Option<u64> {
    let stamp = TimeStamp::new();
    stamp.set(word, set_at);
    stamp.time_of(word, now, || word)
}

#[test]
fn open_deadline_is_rounded_up_and_counts_down() {
    let open = Word::INITIAL.to_open(MS / 2, 10 * MS);
    let left = |now| open.open_remaining(now, full(open, MS / 2, now));
    // deadline = ceil(10.5 ms) = 11 ms
    assert_eq!(left(MS / 2), Duration::from_nanos(10 * MS + MS / 2));
    assert_eq!(left(11 * MS - 1), Duration::from_nanos(1));
    assert_eq!(left(11 * MS), Duration::ZERO);
    assert_eq!(left(1_000 * MS), Duration::ZERO);
}

#[test]
fn time_comparisons_survive_wrapping() {
    let wrap = (1u64 << TIME_BITS) * MS;
    let open = Word::INITIAL.to_open(wrap - 2 * MS, 5 * MS);
    let left = |now| open.open_remaining(now, full(open, wrap - 2 * MS, now));
    assert_eq!(left(wrap - 2 * MS), Duration::from_millis(5));
    assert_eq!(left(wrap + 2 * MS), Duration::from_millis(1));
    assert_eq!(left(wrap + 3 * MS), Duration::ZERO);
    // Without its stamp (the instant after the transition) the field alone is read near `now`.
    let bare = |now| open.open_remaining(now, TimeStamp::new().time_of(open, now, || open));
    assert_eq!(bare(wrap - 2 * MS), Duration::from_millis(5));
    assert_eq!(bare(wrap + 2 * MS), Duration::from_millis(1));
}

#[test]
fn a_wait_over_long_ago_stays_over_whatever_the_idle() {
    let day = 86_400_000 * MS;
    let wrap = (1u64 << TIME_BITS) * MS;
    let open = Word::INITIAL.to_open(day, 30_000 * MS);
    for idle in [
        398 * day,
        500 * day,
        795 * day,
        2_000 * day,
        wrap,
        wrap - 30_000 * MS,
        2 * wrap,
    ] {
        let now = day + idle;
        assert_eq!(
            open.open_remaining(now, full(open, day, now)),
            Duration::ZERO,
            "idle {idle}"
        );
    }
    let half = Word::INITIAL.to_half_open(day);
    for idle in [398 * day, 795 * day, wrap, 2 * wrap + MS] {
        assert!(half.lease_expired(day + idle, 10_000 * MS, full(half, day, day + idle)));
    }
}

#[test]
fn a_stale_word_resolves_to_none() {
    let open = Word::INITIAL.to_open(0, 10 * MS);
    let newer = open.to_half_open(20 * MS);
    let stamp = TimeStamp::new();
    stamp.set(newer, 20 * MS);
    assert_eq!(stamp.time_of(open, 20 * MS, || newer), None);
    assert_eq!(open.open_remaining(20 * MS, None), Duration::ZERO);
    assert_eq!(stamp.time_of(newer, 20 * MS, || newer), Some(20));
}

#[test]
fn lease_expiry() {
    let half = Word::INITIAL.to_half_open(100 * MS);
    let expired = |now| half.lease_expired(now, 50 * MS, full(half, 100 * MS, now));
    assert!(!expired(100 * MS));
    assert!(!expired(149 * MS));
    assert!(expired(150 * MS));
}

#[test]
fn generation_wraps_without_touching_other_fields() {
    let mut w = Word::INITIAL;
    for _ in 0..(1 << GEN_BITS) + 3 {
        w = w.to_closed();
    }
    assert_eq!(w.state(), State::Closed);
    assert_eq!((w.issued(), w.passed()), (0, 0));
}
