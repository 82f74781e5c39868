//! Unit tests of the registry: keys, caps, eviction and overrides.

use super::*;
use crate::State;
use std::time::Duration;

#[test]
fn same_key_same_breaker_and_first_policy_wins() {
    let r = Registry::new();
    let a = r
        .breaker("k", Policy::new().window(5).min_calls(5))
        .unwrap();
    let b = r.breaker("k", Policy::new()).unwrap();
    assert_eq!(b.policy().settings().window, crate::Window::Count(5));
    a.force_open();
    assert_eq!(b.state(), State::ForcedOpen);
    assert_eq!(r.len(), 1);
    assert!(r.get("other").is_none());
}

#[test]
fn invalid_policy_registers_nothing() {
    let r = Registry::new();
    let err = r.breaker("k", Policy::new().failure_rate(150)).unwrap_err();
    assert_eq!(err.field(), "failure_rate");
    assert_eq!(err.key(), Some("k"));
    assert!(r.is_empty());
}

#[test]
fn configure_before_and_after_first_use() {
    let r = Registry::new();
    r.configure("early", Policy::new().window(7).min_calls(7))
        .unwrap();
    let early = r.breaker("early", Policy::new()).unwrap();
    assert_eq!(early.policy().settings().window, crate::Window::Count(7));

    let late = r
        .breaker("late", Policy::new().window(2).min_calls(1))
        .unwrap();
    late.try_acquire().unwrap().failure();
    assert_eq!(late.state(), State::Open);
    r.configure(
        "late",
        Policy::new()
            .window(3)
            .min_calls(3)
            .open_for(Duration::from_secs(1)),
    )
    .unwrap();
    // The old handle follows the replacement, which kept the open state.
    assert_eq!(late.policy().settings().window, crate::Window::Count(3));
    assert_eq!(late.state(), State::Open);
    assert_eq!(
        r.get("late").unwrap().policy().settings().window,
        crate::Window::Count(3)
    );

    let err = r.configure("late", Policy::new().window(0)).unwrap_err();
    assert_eq!((err.key(), err.field()), (Some("late"), "window"));
    assert_eq!(
        late.policy().settings().window,
        crate::Window::Count(3),
        "nothing half-applied"
    );
}

#[test]
fn dynamic_keys_are_capped_and_idle_ones_evicted() {
    let r = Registry::new();
    r.set_max_keys(3);
    let policy = Policy::new();
    for host in ["a", "b", "c"] {
        r.dynamic(host, policy).try_acquire().unwrap().success();
        r.dynamic(host, policy); // found again: in use
    }
    assert_eq!(r.len(), 3);
    // Full and everything is in use: the hand only clears the marks.
    r.dynamic("d", policy).try_acquire().unwrap().success();
    assert_eq!(r.len(), 3);
    assert!(r.get("d").is_none());
    assert_eq!(r.overflow_count(), 1);
    // `a` is used again; `b` and `c` stay idle and go at the next sweep.
    r.dynamic("a", policy).try_acquire().unwrap().success();
    r.dynamic("e", policy).try_acquire().unwrap().success();
    assert!(r.get("a").is_some() && r.get("e").is_some());
    assert!(r.get("b").is_none() && r.get("c").is_none());
    // Literal keys are never evicted.
    r.breaker("pinned", policy).unwrap();
    assert!(r.len() <= 3 + 1);
}

#[test]
fn the_clock_hand_looks_at_a_bounded_number_of_keys_per_miss() {
    let clock = crate::clock::FakeClock::new();
    let r = Registry::with_clock(clock.clone());
    let n = 3 * SWEEP_STEP;
    r.set_max_keys(n);
    let tripping = Policy::new().window(1).min_calls(1);
    for i in 0..n {
        r.dynamic(&format!("k{i}"), tripping)
            .try_acquire()
            .unwrap()
            .failure();
    }
    assert_eq!(r.get("k0").unwrap().state(), State::Open);
    // Within their wait none may go; one miss looks at SWEEP_STEP of them, not all.
    r.dynamic("x", tripping);
    assert!(r.get("x").is_none());
    let ring: Vec<String> = r
        .ring
        .lock()
        .unwrap()
        .iter()
        .map(|k| k.as_str().to_owned())
        .collect();
    assert_eq!(ring[0], format!("k{SWEEP_STEP}"), "the hand moved one step");
    assert_eq!(ring.len(), n);
    // Their wait is over: the next miss evicts what its step finds, and no more.
    clock.advance(Duration::from_secs(10));
    r.dynamic("y", tripping);
    assert!(r.get("y").is_some());
    assert_eq!(r.len(), n - SWEEP_STEP + 1);
    assert!(r.get(&format!("k{SWEEP_STEP}")).is_none());
    assert!(r.get("k0").is_some(), "outside this step");
}

#[test]
fn long_keys_have_a_bounded_stable_form() {
    let long = "é".repeat(200); // 400 bytes, two per character
    let bounded = bounded_key(&long).unwrap();
    assert!(bounded.len() <= MAX_KEY_LEN);
    assert_eq!(bounded, bounded_key(&long).unwrap(), "stable");
    assert_ne!(bounded, bounded_key(&format!("{long}x")).unwrap());
    assert!(bounded_key(&"a".repeat(MAX_KEY_LEN)).is_none());
}

/// A setter stores what it is given; `validate` refuses what is out of range, and
/// `configure_group` refuses it with that error, naming the group, changing nothing.
#[test]
fn settings_out_of_range_are_refused_never_clamped() {
    use std::time::Duration;
    let policy = crate::groups::GroupPolicy::new();
    for (bad, field) in [
        (policy.interval(Duration::ZERO), "interval"),
        (policy.success_rate(-1.0), "success_rate"),
        (policy.success_rate(1000.0), "success_rate"),
        (policy.failure_percentage(101), "failure_percentage"),
        (policy.min_members(0), "min_members"),
        (policy.max_ejection(200), "max_ejection"),
        (
            policy.ejection(Duration::from_secs(60), Duration::from_secs(30)),
            "ejection",
        ),
    ] {
        assert_eq!(bad.validate().unwrap_err().field(), field);
        let registry = Registry::new();
        let error = registry.configure_group("g", bad).unwrap_err();
        assert_eq!((error.field(), error.group()), (field, Some("g")));
        assert!(
            error
                .to_string()
                .starts_with(&format!("group `g`: invalid `{field}`"))
        );
        assert!(registry.group("g").is_none(), "nothing created");
    }
    assert_eq!(
        policy.min_members(0).settings().min_members,
        0,
        "kept as given"
    );
    assert_eq!(policy.max_ejection(200).settings().max_ejection, 200);
    assert_eq!(policy.success_rate(0.0).settings().success_rate, None);
    let error = Registry::new()
        .configure_group("two words", policy)
        .unwrap_err();
    assert_eq!(error.field(), "group");
}
