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
        Policy::new().retry_budget(20, 10),
        Policy::new().retry_budget(20, 10).no_retry_budget(),
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
    assert_eq!(KNOBS.len(), 18);
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
fn a_retry_budget_is_validated_with_its_limits() {
    use crate::RetryBudget;
    assert_eq!(Policy::new().settings().retry_budget, None);
    let ok = Policy::new().retry_budget(20, 10);
    assert!(ok.validate().is_ok());
    assert_eq!(
        ok.settings().retry_budget,
        Some(RetryBudget {
            percent: 20,
            floor: 10
        })
    );
    assert!(Policy::new().retry_budget(0, 5).validate().is_ok());
    assert!(Policy::new().retry_budget(1000, 0).validate().is_ok());
    for (bad, says) in [
        (Policy::new().retry_budget(1001, 10), "1000%"),
        (Policy::new().retry_budget(20, 100_001), "100000/s"),
        (Policy::new().retry_budget(0, 0), "refuses every retry"),
    ] {
        let error = bad.validate_for("payment").unwrap_err();
        assert_eq!(error.field(), "retry_budget");
        let text = error.to_string();
        assert!(
            text.contains("retry_budget") && text.contains(says),
            "{text}"
        );
    }
}
