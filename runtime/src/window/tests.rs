//! Unit tests of the count and time windows, their fast paths, folds and copies.

use super::count::{BitRing, CountWindow, fastmod};
use super::stripes::{STRIPE_FOLD, stripe_count};
use super::time::{QUIET_INDEX_BITS, TimeWindow, split, tally_of};
use super::{Counts, Outcomes, Sample};
use crate::policy::Policy;
use crate::sync::Ordering;

const FAIL: Sample = Sample {
    failure: true,
    slow: false,
};
const OK: Sample = Sample {
    failure: false,
    slow: false,
};
const SLOW_OK: Sample = Sample {
    failure: false,
    slow: true,
};

#[test]
fn old_outcomes_are_evicted() {
    let w = CountWindow::new(10, false);
    for _ in 0..5 {
        w.record(FAIL);
    }
    for _ in 0..10 {
        w.record_fast_success(u32::MAX);
    }
    assert_eq!(
        w.counts(),
        Counts {
            calls: 10,
            failures: 0,
            slow: 0
        }
    );
    let mut last = Counts::default();
    for _ in 0..5 {
        last = w.record(FAIL);
    }
    assert_eq!(
        last,
        Counts {
            calls: 10,
            failures: 5,
            slow: 0
        }
    );
    let policy = Policy::new().window(10).min_calls(10);
    assert!(last.trips(&policy));
    assert!(!last.trips(&policy.failure_rate(51)));
}

#[test]
fn windows_longer_than_one_word_and_slow_ring() {
    let w = CountWindow::new(130, true);
    for i in 0..1000 {
        w.record(if i % 2 == 0 { FAIL } else { SLOW_OK });
    }
    assert_eq!(
        w.counts(),
        Counts {
            calls: 130,
            failures: 65,
            slow: 65
        }
    );
    w.reset();
    assert_eq!(w.counts(), Counts::default());
    assert_eq!(w.heap_bytes(), 48);
}

#[test]
fn min_calls_gate_and_slow_rate() {
    let w = CountWindow::new(10, true);
    let policy = Policy::new().window(10).min_calls(5);
    for _ in 0..4 {
        assert!(!w.record(FAIL).trips(&policy));
    }
    assert!(w.record(FAIL).trips(&policy));
    let slow_policy = Policy::new()
        .window(4)
        .min_calls(4)
        .rate_off()
        .slow(std::time::Duration::from_secs(1))
        .slow_rate(75);
    let w = CountWindow::new(4, true);
    w.record(OK);
    w.record(SLOW_OK);
    w.record(SLOW_OK);
    assert!(!w.counts().trips(&slow_policy));
    assert!(w.record(SLOW_OK).trips(&slow_policy));
}

#[test]
fn fastmod_matches_the_remainder() {
    for d in [1u32, 2, 3, 7, 10, 64, 100, 1000, 999_983, 1_000_000] {
        let magic = (u64::MAX / u64::from(d)).wrapping_add(1);
        for a in [0u32, 1, 2, 99, 100, 101, 12_345, u32::MAX - 1, u32::MAX] {
            assert_eq!(fastmod(a, magic, d), a % d, "{a} % {d}");
        }
    }
}

#[test]
fn time_window_rotates_lazily_and_forgets_after_its_span() {
    let s = 1_000_000_000u64; // window of 10 s, buckets of 1 s
    let w = TimeWindow::new(10 * s, false);
    for t in 0..10 {
        w.record(t * s, FAIL);
    }
    assert_eq!(
        w.counts(9 * s),
        Counts {
            calls: 10,
            failures: 10,
            slow: 0
        }
    );
    // One bucket later the oldest slice has left the window.
    assert_eq!(w.counts(10 * s).calls, 9);
    w.record(10 * s, OK);
    assert_eq!(
        w.counts(10 * s),
        Counts {
            calls: 10,
            failures: 9,
            slow: 0
        }
    );
    // A long idle: nothing left, and the next record starts a clean bucket.
    assert_eq!(w.counts(1_000 * s), Counts::default());
    assert_eq!(
        w.record(1_000 * s, FAIL),
        Counts {
            calls: 1,
            failures: 1,
            slow: 0
        }
    );
    w.reset();
    assert_eq!(w.counts(1_000 * s), Counts::default());
}

#[test]
fn time_window_tracks_slow_calls_only_when_asked() {
    let s = 1_000_000_000u64;
    let tracked = TimeWindow::new(10 * s, true);
    let untracked = TimeWindow::new(10 * s, false);
    for w in [&tracked, &untracked] {
        w.record(0, SLOW_OK);
        w.record(s, FAIL);
        w.record(2 * s, SLOW_OK);
    }
    assert_eq!(
        tracked.record(2 * s, OK),
        Counts {
            calls: 4,
            failures: 1,
            slow: 2
        }
    );
    assert_eq!(tracked.counts(3 * s), tracked.counts(2 * s));
    assert_eq!(
        untracked.counts(2 * s),
        Counts {
            calls: 3,
            failures: 1,
            slow: 0
        }
    );
}

#[test]
fn a_time_window_success_is_judged_only_at_min_calls_or_a_new_slice() {
    let s = 1_000_000_000u64;
    let w = TimeWindow::new(10 * s, false);
    let counts = |calls, failures| Counts {
        calls,
        failures,
        slow: 0,
    };
    assert_eq!(w.record(0, FAIL), counts(1, 1));
    // Mid-slice successes below and above `min_calls = 3` need no judgement.
    assert_eq!(w.record_fast_success(1, 3), None);
    assert_eq!(w.record_fast_success(2, 3), Some(counts(3, 1)));
    assert_eq!(w.record_fast_success(3, 3), None);
    // The first record of a slice is judged (older slices may have expired), then not again.
    assert_eq!(w.record_fast_success(s, 3), Some(counts(5, 1)));
    assert_eq!(w.record_fast_success(s + 1, 3), None);
    // Past the span the old slices have left: the first success judges what remains.
    assert_eq!(w.record(10 * s + 5, FAIL), counts(3, 1));
    assert_eq!(w.record_fast_success(11 * s, 3), Some(counts(2, 1)));
    assert_eq!(w.counts(11 * s), counts(2, 1));
}

#[test]
fn clearing_a_range_is_clearing_each_slot() {
    for len in [1u32, 3, 63, 64, 65, 130] {
        for start in 0..len {
            for count in [0, 1, 2, len - 1, len, len + 1, 2 * len + 3] {
                let (one_by_one, at_once) = (BitRing::new(len), BitRing::new(len));
                for ring in [&one_by_one, &at_once] {
                    for slot in 0..len {
                        if slot % 3 != 1 {
                            ring.write(slot, true);
                        }
                    }
                }
                for i in 0..count {
                    one_by_one.clear((start + i) % len);
                }
                at_once.clear_range(start, count, len);
                let bits = |ring: &BitRing| -> Vec<u64> {
                    ring.bits
                        .iter()
                        .map(|w| w.load(Ordering::Relaxed))
                        .collect()
                };
                assert_eq!(bits(&at_once), bits(&one_by_one), "{len} {start} {count}");
                assert_eq!(at_once.count(), one_by_one.count(), "{len} {start} {count}");
            }
        }
    }
}

#[test]
fn striped_successes_are_folded_in_before_every_decision() {
    let exact = CountWindow::new(10, true);
    let striped = CountWindow::new(10, true);
    let slow_fail = Sample {
        failure: true,
        slow: true,
    };
    for w in [&exact, &striped] {
        for _ in 0..10 {
            w.record(slow_fail);
        }
    }
    // The same outcomes, the successes of `striped` counted in its stripes.
    for _ in 0..7 {
        exact.record_fast_success(u32::MAX);
        striped.contended();
    }
    assert!(striped.stripes.get().is_some());
    assert_eq!(striped.record_fast_success(u32::MAX), None); // a stripe too, now
    exact.record_fast_success(u32::MAX);
    // A snapshot folds them in: 8 successes evicted 8 of the 10 failures.
    let expected = Counts {
        calls: 10,
        failures: 2,
        slow: 2,
    };
    assert_eq!(exact.counts(), expected);
    assert_eq!(striped.counts(), expected);
    // A failure folds them in before it is judged.
    for _ in 0..5 {
        exact.record_fast_success(u32::MAX);
        striped.record_fast_success(u32::MAX);
    }
    assert_eq!(exact.record(FAIL), striped.record(FAIL));
    assert_eq!(
        striped.counts(),
        Counts {
            calls: 10,
            failures: 1,
            slow: 0
        }
    );
    // So does a copy; a reset drops what the stripes hold.
    for _ in 0..10 {
        exact.record_fast_success(u32::MAX);
        striped.record_fast_success(u32::MAX);
    }
    let copy = Outcomes::Count(CountWindow::new(10, true));
    copy.copy_from(&Outcomes::Count(striped));
    assert_eq!(copy.counts(0), exact.counts());
    let reset = CountWindow::new(4, false);
    for _ in 0..4 {
        reset.record(FAIL);
    }
    reset.contended();
    reset.reset();
    assert_eq!(reset.counts(), Counts::default());
    assert_eq!(reset.heap_bytes(), 8 + stripe_count() * 64);
}

#[test]
fn a_full_pending_or_striped_count_is_folded_in_without_contention() {
    // Slow calls tracked: every success of the full window is counted, failures or not.
    let w = CountWindow::new(100, true);
    for _ in 0..100 {
        w.record(FAIL);
    }
    for _ in 0..STRIPE_FOLD + 10 {
        w.record_fast_success(u32::MAX);
    }
    // Folded once on the way, and no stripes for a window nobody contended for.
    assert!(w.stripes.get().is_none());
    assert_eq!(w.pending.load(Ordering::Relaxed), 10);
    assert_eq!(u64::from(w.failures.count()), 100 - STRIPE_FOLD);
    w.contended();
    for _ in 0..STRIPE_FOLD {
        w.record_fast_success(u32::MAX);
    }
    assert_eq!(w.stripes.get().unwrap().mine().load(Ordering::Relaxed), 1);
    assert_eq!(
        w.counts(),
        Counts {
            calls: 100,
            failures: 0,
            slow: 0
        }
    );
}

#[test]
fn a_success_on_a_full_window_without_failures_writes_nothing() {
    let w = CountWindow::new(4, false);
    for _ in 0..4 {
        assert_eq!(w.record_fast_success(u32::MAX), None);
    }
    let head = w.head.load(Ordering::Relaxed);
    for _ in 0..10 {
        w.record_fast_success(u32::MAX);
        w.contended(); // not even a contended one's stripe
    }
    // `contended` itself counts; the fast path did not.
    assert_eq!(w.stripes.get().unwrap().mine().load(Ordering::Relaxed), 10);
    assert_eq!(w.pending.load(Ordering::Relaxed), 0);
    assert_eq!(w.head.load(Ordering::Relaxed), head);
    // With a failure in the window a success counts again, and evicts it after four.
    let w = CountWindow::new(4, false);
    for _ in 0..4 {
        w.record(OK);
    }
    w.record(FAIL);
    for _ in 0..3 {
        w.record_fast_success(u32::MAX);
    }
    assert_eq!(w.pending.load(Ordering::Relaxed), 3);
    assert_eq!(w.counts().failures, 1);
    w.record_fast_success(u32::MAX);
    assert_eq!(w.counts().failures, 0);
    // A window that tracks slow calls counts every success (its slow ring is off the hot line).
    let timed = CountWindow::new(4, true);
    for _ in 0..5 {
        timed.record(OK);
    }
    timed.record_fast_success(u32::MAX);
    assert_eq!(timed.pending.load(Ordering::Relaxed), 1);
}

#[test]
fn a_failure_bit_left_set_under_a_zero_count_is_still_cleared_by_successes() {
    let w = CountWindow::new(2, false);
    for _ in 0..2 {
        w.record(OK);
    }
    // The state a reset racing a fold can leave: a bit set, the count 0.
    w.failures.bits[0].fetch_or(1, Ordering::AcqRel);
    for _ in 0..256 * 4 {
        w.record_fast_success(u32::MAX);
    }
    assert_eq!(w.counts().failures, 0);
    assert_eq!(w.failures.bits[0].load(Ordering::Relaxed) & 0b11, 0);
    w.record(FAIL);
    w.record(FAIL);
    assert_eq!(w.counts().failures, 2, "both failures counted");
}

proptest::proptest! {
    /// Any sequence of fast successes, recorded successes and failures leaves a count window
    /// with the counts of the last `len` outcomes, whether or not its successes wrote anything.
    #[test]
    fn a_count_window_holds_the_last_outcomes(
        len in 1u32..12,
        ops in proptest::collection::vec(0u8..4, 0..80),
    ) {
        let w = CountWindow::new(len, false);
        let mut model = std::collections::VecDeque::new();
        for op in ops {
            match op {
                0 | 1 => {
                    w.record_fast_success(u32::MAX);
                }
                2 => {
                    w.record(OK);
                }
                _ => {
                    w.record(FAIL);
                }
            }
            model.push_back(op == 3);
            if model.len() > len as usize {
                model.pop_front();
            }
            let expected = Counts {
                calls: model.len() as u32,
                failures: model.iter().filter(|f| **f).count() as u32,
                slow: 0,
            };
            proptest::prop_assert_eq!(w.counts(), expected);
        }
    }
}

#[test]
fn a_contended_time_window_folds_deferred_successes_into_their_slice() {
    let s = 1_000_000_000u64;
    let w = TimeWindow::new(10 * s, false);
    let counts = |calls, failures| Counts {
        calls,
        failures,
        slow: 0,
    };
    for _ in 0..4 {
        w.record(0, OK);
    }
    assert_eq!(w.record(0, FAIL), counts(5, 1));
    // Slice 2: its first record sums slice 1, which holds `min_calls = 3` on its own.
    assert_eq!(w.record_fast_success(s, 3), Some(counts(6, 1)));
    w.contended(2); // as if a compare-and-swap had failed
    for _ in 0..3 {
        assert_eq!(w.record_fast_success(s + 1, 3), None);
    }
    assert_eq!(
        w.stripes.get().unwrap().mine().load(Ordering::Relaxed),
        2 << 32 | 4
    );
    // Every reading folds them in: a snapshot, a failure's judgement.
    assert_eq!(w.counts(s + 2), counts(10, 1));
    w.record_fast_success(s + 3, 3);
    assert_eq!(w.record(s + 4, FAIL), counts(12, 2));
    w.record_fast_success(2 * s, 3); // slice 3's first record: judged, not deferred
    w.record_fast_success(2 * s, 3);
    w.record_fast_success(2 * s + 1, 3);
    w.record(2 * s + 2, OK); // no stripe: a direct record
    assert_eq!(w.counts(2 * s + 3), counts(16, 2));
    // A deferral for a newer slice hands the stripe's older successes to their bucket.
    w.record_fast_success(2 * s + 4, 3);
    let mine = w.stripes.get().unwrap().mine();
    w.defer(mine, 4);
    assert_eq!(mine.load(Ordering::Relaxed), 4 << 32 | 1);
    assert_eq!(w.sum(3, 3), counts(5, 0));
    // Deferred successes of a slice that expired leave with it.
    assert_eq!(w.counts(13 * s), counts(0, 0));
    w.record_fast_success(13 * s, 3);
    w.reset();
    assert_eq!(w.counts(13 * s), Counts::default());
    assert_eq!(w.heap_bytes(), 10 * 24 + stripe_count() * 64);
}

#[test]
fn a_tally_keeps_calls_and_failures_apart() {
    let mut tally = 0u64;
    for failure in [true, false, true, true] {
        tally += tally_of(failure);
    }
    assert_eq!(split(tally), (4, 3));
    assert_eq!(split(u64::from(u32::MAX) | 7 << 32), (u32::MAX, 7));
}

/// A success on a full count window reads the tag, `full`, `untimed`, the failure count,
/// `pending` and `stripes`: all within
/// the window's first 48 bytes, which the breaker keeps on its hot line (see `Circuit`).
#[test]
fn a_full_windows_success_reads_one_cache_line() {
    let window = Outcomes::Count(CountWindow::new(100, true));
    assert!(
        window.fast_fields_end() <= 48,
        "the fast-path fields end at byte {}",
        window.fast_fields_end()
    );
}

#[test]
fn a_quiet_slice_takes_successes_without_judgement() {
    let s = 1_000_000_000u64;
    let counts = |calls, failures| Counts {
        calls,
        failures,
        slow: 0,
    };
    let quiet = |w: &TimeWindow| w.quiet.load(Ordering::Relaxed);
    let w = TimeWindow::new(10 * s, false);
    for _ in 0..3 {
        w.record(0, OK);
    }
    assert_eq!(quiet(&w), 0, "the first slice's other slices hold nothing");
    // Slice 2: its first record sums slice 1 (3 calls, `min_calls = 3`) and is judged; the next
    // publishes the slice as quiet (slice 2, bucket 2).
    assert_eq!(w.record_fast_success(s, 3), Some(counts(4, 0)));
    assert_eq!(w.record_fast_success(s + 1, 3), None);
    assert_eq!(quiet(&w), 2 << QUIET_INDEX_BITS | 2);
    for i in 2..12 {
        assert_eq!(w.record_fast_success(s + i, 3), None);
    }
    assert_eq!(w.counts(s + 12), counts(15, 0));
    // A failure in the quiet slice is judged as ever, with every success before it.
    assert_eq!(w.record(s + 13, FAIL), counts(16, 1));
    assert_eq!(w.record_fast_success(s + 14, 3), None);
    // Past the slice, the next slice's first record is judged again, then quiet in turn.
    assert_eq!(w.record_fast_success(2 * s, 3), Some(counts(18, 1)));
    assert_eq!(w.record_fast_success(2 * s + 1, 3), None);
    assert_eq!(quiet(&w), 3 << QUIET_INDEX_BITS | 3);
    assert_eq!(w.sum(2, 2), counts(14, 1));
    assert_eq!(w.sum(3, 3), counts(2, 0));
    // A reset unpublishes it: the window is empty, so no slice is quiet.
    w.reset();
    assert_eq!(quiet(&w), 0);
    assert_eq!(w.record_fast_success(2 * s + 2, 3), Some(counts(1, 0)));
    assert_eq!(w.record_fast_success(2 * s + 3, 3), None);
    assert_eq!(quiet(&w), 0, "the other slices are empty after the reset");
    assert_eq!(w.record_fast_success(2 * s + 4, 3), Some(counts(3, 0)));
    // A copy into a reconfigured breaker's window keeps the outcomes but not the quiet slice.
    let copy = TimeWindow::new(10 * s, false);
    w.record_fast_success(3 * s, 3);
    w.record_fast_success(3 * s + 1, 3);
    assert_ne!(quiet(&w), 0);
    copy.copy_from(&w);
    assert_eq!(quiet(&copy), 0);
    assert_eq!(copy.counts(3 * s + 2), w.counts(3 * s + 2));
}

#[test]
fn a_quiet_slice_is_never_a_slice_whose_others_are_below_min_calls() {
    let s = 1_000_000_000u64;
    let w = TimeWindow::new(10 * s, false);
    w.record(0, FAIL);
    w.record(0, FAIL);
    // Slice 2: the other slices hold 2 calls, below `min_calls = 4`: every success is counted by
    // `fetch_add`, and the one that brings the window to 4 is judged (50 % failures).
    assert!(w.record_fast_success(s, 4).is_some());
    assert_eq!(w.record_fast_success(s + 1, 4).map(|c| c.calls), Some(4));
    assert_eq!(w.record_fast_success(s + 2, 4), None);
    assert_eq!(w.quiet.load(Ordering::Relaxed), 0);
}

/// A success in the quiet slice reads the tag, `quiet`, `slice_nanos`, `buckets` and
/// `stripes`: all within the window's first 48 bytes, which the breaker keeps on its hot line.
#[test]
fn a_quiet_slices_success_reads_one_cache_line() {
    let window = Outcomes::Time(TimeWindow::new(10_000_000_000, true));
    assert!(
        window.fast_fields_end() <= 48,
        "the fast-path fields end at byte {}",
        window.fast_fields_end()
    );
}
