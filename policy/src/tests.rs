//! Unit tests of the policy rules, validation and patches.

use super::*;

#[test]
fn defaults() {
    let p = Policy::new();
    assert_eq!(p.settings().window, Window::Count(100));
    assert_eq!(p.settings().min_calls, 10);
    assert_eq!(p.settings().failure_rate, Some(50));
    assert_eq!(p.settings().open_for, Duration::from_secs(10));
    assert_eq!(p.settings().half_open, 1);
    assert_eq!(p.settings().recovery, Recovery::Probes);
    assert!(p.validate().is_ok());
}

#[test]
fn validation_names_the_field_and_range() {
    let e = Policy::new()
        .window(10)
        .min_calls(11)
        .validate()
        .unwrap_err();
    assert_eq!(e.field(), "min_calls");
    assert_eq!(
        e.to_string(),
        "invalid `min_calls` = 11; use a value in 1..=10 (at most `window`)"
    );
    let field = |p: Policy| p.validate().unwrap_err().field();
    assert_eq!(field(Policy::new().failure_rate(150)), "failure_rate");
    assert_eq!(field(Policy::new().window(0)), "window");
    assert_eq!(field(Policy::new().time_window(Duration::ZERO)), "window");
    assert_eq!(field(Policy::new().half_open(0)), "half_open");
    assert_eq!(field(Policy::new().open_for(Duration::ZERO)), "open_for");
    assert_eq!(
        field(Policy::new().slow(Duration::from_secs(1)).slow_rate(0)),
        "slow_rate"
    );
    assert_eq!(field(Policy::new().open_backoff(0.5)), "open_backoff");
    assert_eq!(
        field(
            Policy::new()
                .open_backoff(2.0)
                .open_for(Duration::from_secs(60))
                .open_max(Duration::from_secs(1))
        ),
        "open_max"
    );
    assert_eq!(field(Policy::new().progressive(0, 5)), "phases");
    assert_eq!(field(Policy::new().progressive(3, 0)), "min_passes");
    assert_eq!(field(Policy::new().rate_off()), "failure_rate");
    assert!(Policy::new().rate_off().consecutive(5).validate().is_ok());
    assert!(
        Policy::new()
            .time_window(Duration::from_secs(30))
            .min_calls(500)
            .validate()
            .is_ok()
    );
}

#[test]
fn rules_between_fields_are_decided_here_whatever_the_order() {
    let min_calls = |p: Policy| p.settings().min_calls;
    assert_eq!(min_calls(Policy::new().window(5)), 5);
    assert_eq!(min_calls(Policy::new().window(5).window(50)), 10);
    assert_eq!(min_calls(Policy::new().window(5).time_window(SECOND)), 10);
    assert_eq!(min_calls(Policy::new().min_calls(20).window(10)), 10);
    assert_eq!(
        Policy::new()
            .window(10)
            .min_calls(20)
            .validate()
            .unwrap_err()
            .field(),
        "min_calls"
    );
    assert!(Policy::new().window(5).validate().is_ok());

    let rate = |p: Policy| p.settings().failure_rate;
    assert_eq!(rate(Policy::new().consecutive(5)), None);
    assert_eq!(
        rate(Policy::new().consecutive(5).failure_rate(40)),
        Some(40)
    );
    assert_eq!(
        rate(Policy::new().failure_rate(40).consecutive(5)),
        Some(40)
    );
    assert_eq!(
        rate(Policy::new().failure_rate(50).consecutive(5)),
        Some(50)
    );
    assert_eq!(rate(Policy::new().consecutive(5).consecutive(0)), Some(50));
    assert!(Policy::new().consecutive(5).validate().is_ok());

    // Equality compares values, not which setters were called.
    assert_eq!(
        Policy::new().window(5),
        Policy::new().window(5).min_calls(5)
    );
}

const SECOND: Duration = Duration::from_secs(1);

#[test]
fn zero_durations_set_explicitly_are_invalid() {
    let field = |p: Policy| p.validate().unwrap_err().field();
    assert_eq!(field(Policy::new().slow(Duration::ZERO)), "slow");
    assert_eq!(
        field(Policy::new().half_open_lease(Duration::ZERO)),
        "half_open_lease"
    );
    assert_eq!(field(Policy::new().open_max(Duration::ZERO)), "open_max");
    assert_eq!(
        field(Policy::new().open_max(Duration::from_micros(999))),
        "open_max"
    );
}

#[test]
fn a_policy_is_the_patch_of_the_fields_it_set() {
    let declared = Policy::new().window(20).open_for(Duration::from_secs(30));
    let patched = PolicyPatch::from(Policy::new().failure_rate(30)).apply(declared);
    assert_eq!(patched, declared.failure_rate(30));
    assert_eq!(patched.settings().open_for, Duration::from_secs(30));
    assert!(PolicyPatch::from(Policy::new()).is_empty());
    assert_eq!(
        PolicyPatch::new()
            .window(5)
            .then(PolicyPatch::new().window(8).half_open(2)),
        PolicyPatch::new().window(8).half_open(2)
    );
    // A patched field follows the same rules: a smaller window lowers `min_calls`.
    assert_eq!(
        PolicyPatch::new()
            .window(5)
            .apply(declared)
            .settings()
            .min_calls,
        5
    );
}

#[test]
fn failure_count_replaces_the_rate_alone_and_stays_within_a_count_window() {
    let rate = |p: Policy| p.settings().failure_rate;
    assert_eq!(rate(Policy::new().failure_count(5)), None);
    assert_eq!(
        rate(Policy::new().failure_count(5).failure_rate(40)),
        Some(40)
    );
    assert_eq!(
        rate(Policy::new().failure_count(5).failure_count(0)),
        Some(50)
    );
    assert_eq!(
        rate(
            Policy::new()
                .failure_count(5)
                .consecutive(3)
                .failure_count(0)
        ),
        None,
        "`consecutive` still replaces the rate"
    );
    assert_eq!(
        Policy::new().failure_count(5).settings().failure_count,
        Some(5)
    );
    assert_eq!(Policy::new().settings().failure_count, None);
    assert!(Policy::new().failure_count(5).validate().is_ok());
    assert!(
        Policy::new()
            .time_window(SECOND)
            .failure_count(1_000_000)
            .validate()
            .is_ok()
    );
    let e = Policy::new()
        .window(10)
        .failure_count(11)
        .validate()
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid `failure_count` = 11; use a value in 1..=10 (at most a count `window`)"
    );
    let e = Policy::new()
        .time_window(SECOND)
        .failure_count(1_000_001)
        .validate()
        .unwrap_err();
    assert_eq!(e.field(), "failure_count");
    // Values, patches and equality carry the field.
    assert_ne!(
        Policy::new().failure_count(5),
        Policy::new().failure_count(6)
    );
    let patch = PolicyPatch::from(Policy::new().failure_count(7));
    assert_eq!(patch, PolicyPatch::new().failure_count(7));
    assert_eq!(patch.apply(Policy::new()).settings().failure_count, Some(7));
    assert!(format!("{:?}", Policy::new().failure_count(7)).contains("failure_count: Some(7)"));
}

/// Every setter records its knob: the patch of a policy carries the knobs it set, and applying
/// it to the default policy gives that policy back.
#[test]
fn a_policy_is_rebuilt_from_its_patch() {
    let policies = [
        Policy::new().window(5).min_calls(3).failure_rate(40),
        Policy::new()
            .time_window(SECOND)
            .consecutive(4)
            .failure_count(9),
        Policy::new().slow(SECOND).slow_rate(70).rate_off(),
        Policy::new()
            .open_for(SECOND)
            .open_backoff(2.5)
            .open_max(60 * SECOND),
        Policy::new()
            .half_open(3)
            .half_open_lease(2 * SECOND)
            .progressive(3, 5),
        Policy::new()
            .recovery(Recovery::Probes)
            .max_concurrent(8)
            .stuck_open(2, SECOND)
            .shared(false)
            .others(Others::Success),
        Policy::new().adaptive_concurrency(2, 200),
        Policy::new().adaptive_concurrency(2, 200).max_concurrent(8),
    ];
    for policy in policies {
        let patch = PolicyPatch::from(policy);
        assert!(!patch.is_empty());
        assert_eq!(patch.apply(Policy::DEFAULT), policy, "{policy:?}");
        assert_eq!(
            PolicyPatch::from(patch.apply(Policy::DEFAULT)),
            patch,
            "the same knobs are explicit"
        );
    }
    assert_eq!(KNOBS.len(), 17);
    assert_eq!(KNOBS[0], "window");
}

#[test]
fn settings_read_every_knob() {
    let s = Policy::new()
        .stuck_open(0, SECOND)
        .open_backoff(1.5)
        .settings();
    assert_eq!(s.stuck_open, (0, SECOND));
    assert!((s.open_backoff - 1.5).abs() < f64::EPSILON);
    assert_eq!(s.slow, None);
    assert_eq!(s.max_concurrent, None);
    assert!(s.shared);
    assert_eq!(s.others, Others::Ignore);
    assert_eq!(s.half_open_lease, s.open_for);
}

#[test]
fn adaptive_concurrency_reads_validates_and_is_replaced_by_a_fixed_limit() {
    use crate::Concurrency;
    let adaptive = Policy::new().adaptive_concurrency(2, 200);
    assert_eq!(
        adaptive.settings().max_concurrent,
        Some(Concurrency::Adaptive {
            floor: 2,
            ceiling: 200
        })
    );
    assert!(adaptive.validate().is_ok());
    // A fixed limit set afterwards replaces the adaptive one, and the other way round.
    let fixed = adaptive.max_concurrent(8);
    assert_eq!(fixed.settings().max_concurrent, Some(Concurrency::Fixed(8)));
    assert_eq!(fixed, Policy::new().max_concurrent(8));
    assert_eq!(fixed.adaptive_concurrency(2, 200), adaptive);
    // Through a patch too.
    let patched = PolicyPatch::new().max_concurrent(8).apply(adaptive);
    assert_eq!(
        patched.settings().max_concurrent,
        Some(Concurrency::Fixed(8))
    );

    for (floor, ceiling) in [(0, 10), (11, 10), (1, 1_000_001), (5, 0), (0, 0)] {
        let error = Policy::new()
            .adaptive_concurrency(floor, ceiling)
            .validate_for("search")
            .unwrap_err();
        assert_eq!(error.field(), "max_concurrent");
        let text = error.to_string();
        assert!(
            text.contains(&format!("\"adaptive({floor}..{ceiling})\""))
                && text.contains("1 <= floor <= ceiling <= 1000000"),
            "{text}"
        );
    }
    assert!(Policy::new().adaptive_concurrency(5, 5).validate().is_ok());
}

#[test]
fn concurrency_text_reads_the_adaptive_spellings() {
    use crate::Concurrency;
    let adaptive = |floor, ceiling| Ok(Concurrency::Adaptive { floor, ceiling });
    assert_eq!(Concurrency::from_text("adaptive"), adaptive(1, 1000));
    assert_eq!(
        Concurrency::from_text(" adaptive(2..200) "),
        adaptive(2, 200)
    );
    assert_eq!(
        Concurrency::from_text("adaptive(2..=200)"),
        adaptive(2, 200)
    );
    assert_eq!(
        Concurrency::from_text("adaptive( 2 .. 200 )"),
        adaptive(2, 200)
    );
    for bad in [
        "adaptiv",
        "adaptive(2)",
        "adaptive(a..3)",
        "adaptive(2..200",
        "10",
        "auto",
    ] {
        let error = Concurrency::from_text(bad).unwrap_err();
        assert!(error.contains("adaptive(floor..ceiling)"), "{bad}: {error}");
    }
    assert_eq!(Concurrency::Fixed(8).to_string(), "8");
    assert_eq!(
        Concurrency::Adaptive {
            floor: 2,
            ceiling: 200
        }
        .to_string(),
        "adaptive(2..200)"
    );
}
