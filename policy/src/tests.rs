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
            .failure_count(9)
            .throttle(1.5),
        Policy::new().slow(SECOND).slow_rate(70).rate_off(),
        Policy::new()
            .open_for(SECOND)
            .open_backoff(2.5)
            .open_max(60 * SECOND),
        Policy::new().open_for_fn(ten_per_recovery).open_jitter(20),
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
        Policy::new().retry_budget(20, 10),
        Policy::new().retry_budget(20, 10).no_retry_budget(),
        Policy::new().hedge_budget(5),
        Policy::new().quorum(2),
        Policy::new().quorum_share(50).no_quorum(),
        Policy::new().group("search"),
        Policy::new().shadow("tight: window = 20"),
        Policy::new().shadow("tight: window = 20").no_shadow(),
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
    assert_eq!(KNOBS.len(), 25);
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
    assert_eq!(s.throttle, None);
    assert!(s.shared);
    assert_eq!(s.others, Others::Ignore);
    assert_eq!(s.half_open_lease, s.open_for);
}

fn ten_per_recovery(open: &OpenContext) -> Duration {
    Duration::from_secs(10) * (open.failed_recoveries() + 1)
}

#[test]
fn an_open_wait_function_is_set_replaced_and_validated() {
    const P: Policy = Policy::new().open_for_fn(ten_per_recovery);
    assert!(P.validate().is_ok());
    let function = P.settings().open_for_fn.expect("set");
    assert_eq!(
        function.call(&OpenContext::new(2, 10, 5, 0)),
        Duration::from_secs(30)
    );
    assert_eq!(function, OpenForFn::new(ten_per_recovery));
    assert_eq!(Policy::new().settings().open_for_fn, None);
    // A later `open_for` replaces it, in code and through a patch.
    let fixed = P.open_for(Duration::from_secs(3));
    assert_eq!(fixed.settings().open_for_fn, None);
    let patched = PolicyPatch::new().open_for(Duration::from_secs(3)).apply(P);
    assert_eq!(patched.settings().open_for_fn, None);
    assert_eq!(patched.settings().open_for, Duration::from_secs(3));
    let configured = PolicyPatch::from(Policy::new().open_for(Duration::from_secs(3))).apply(P);
    assert_eq!(configured.settings().open_for_fn, None);
    // A patch that names other knobs keeps it.
    let kept = PolicyPatch::new().failure_rate(30).apply(P);
    assert_eq!(kept.settings().open_for_fn, Some(function));
    // The function grows the wait itself: no `open_backoff` beside it.
    let e = P.open_backoff(2.0).validate().unwrap_err();
    assert_eq!(e.field(), "open_backoff");
    assert!(e.to_string().contains("with an `open_for` function"), "{e}");
}

#[test]
fn open_jitter_is_a_percentage_of_the_wait() {
    assert_eq!(Policy::new().settings().open_jitter, 0);
    assert_eq!(Policy::new().open_jitter(20).settings().open_jitter, 20);
    assert!(Policy::new().open_jitter(100).validate().is_ok());
    let e = Policy::new().open_jitter(101).validate().unwrap_err();
    assert_eq!(e.field(), "open_jitter");
    assert_eq!(
        e.to_string(),
        "invalid `open_jitter` = 101; use a value in 0..=100 percent of the open wait (0: no spread)"
    );
}

#[test]
fn throttle_takes_a_factor_from_one_to_a_hundred_and_zero_turns_it_off() {
    let k = |p: Policy| p.settings().throttle;
    assert_eq!(k(Policy::new()), None);
    assert_eq!(k(Policy::new().throttle(2.0)), Some(2.0));
    assert_eq!(k(Policy::new().throttle(1.5)), Some(1.5));
    assert_eq!(k(Policy::new().throttle(2.0).throttle(0.0)), None);
    for ok in [1.0, 2.0, 100.0] {
        assert!(Policy::new().throttle(ok).validate().is_ok(), "{ok}");
    }
    for bad in [0.999, 0.5, 0.0001, -1.0, f64::NAN, 100.01, f64::INFINITY] {
        let error = Policy::new().throttle(bad).validate().unwrap_err();
        assert_eq!(error.field(), "throttle", "{bad}");
        assert!(
            error.to_string().contains("use a value in 1..=100"),
            "{error}"
        );
    }
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
        (Policy::new().retry_budget(0, 0), "rejects every retry"),
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
