//! Operators' overrides: one meaning per setting whichever front end sets it, validation against
//! the declared policy at load time, patches that change only what they name, and reloads that
//! keep what they can (the window, the state, calls in flight).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::ApiError;
use fusebox::{Policy, PolicyPatch, Reason, Recovery, Registry, State, circuit_breaker};

fn outcome(fail: bool) -> Result<(), ApiError> {
    if fail { Err(ApiError::Timeout) } else { Ok(()) }
}

/// The policy a fresh registry gives `key` after loading `toml`, and after loading `vars`.
fn loaded(toml: &str, vars: &[(&str, &str)]) -> (Policy, Policy) {
    let from_file = Registry::new();
    from_file.load_toml(toml).unwrap();
    let from_env = Registry::new();
    from_env
        .load_vars(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
        .unwrap();
    (
        from_file.breaker("k", Policy::new()).unwrap().policy(),
        from_env.breaker("k", Policy::new()).unwrap().policy(),
    )
}

// ------------------------------------------------------- one meaning per setting

fake_registry!(FRONT_CLOCK, FRONT);

#[circuit_breaker(key = "front-window", registry = FRONT, window = 5, failure = [Timeout])]
fn front_window(fail: bool) -> Result<(), ApiError> {
    outcome(fail)
}

#[circuit_breaker(key = "front-consecutive", registry = FRONT, consecutive = 5, failure = [Timeout])]
fn front_consecutive(fail: bool) -> Result<(), ApiError> {
    outcome(fail)
}

#[circuit_breaker(key = "front-both", registry = FRONT, consecutive = 3, failure_rate = 40, window = "30s", slow = "2s", open_for = "30s", half_open = 2, failure = [Timeout])]
fn front_both(fail: bool) -> Result<(), ApiError> {
    outcome(fail)
}

#[test]
fn the_same_settings_give_the_same_policy_through_attribute_builder_toml_and_env() {
    let _ = (
        front_window(false),
        front_consecutive(false),
        front_both(false),
    );
    let attribute = |key: &str| FRONT.get(key).unwrap().policy();

    // `window = 5` alone: `min_calls` follows the smaller window.
    let builder = Policy::new().window(5);
    let (file, env) = loaded("[breakers.k]\nwindow = 5\n", &[("FUSEBOX__K__WINDOW", "5")]);
    assert_eq!(builder.validate(), Ok(()));
    assert_eq!(builder.settings().min_calls, 5);
    for policy in [attribute("front-window"), file, env] {
        assert_eq!(policy, builder);
    }

    // `consecutive = 5` alone: the rate rule is off.
    let builder = Policy::new().consecutive(5);
    let (file, env) = loaded(
        "[breakers.k]\nconsecutive = 5\n",
        &[("FUSEBOX__K__CONSECUTIVE", "5")],
    );
    assert_eq!(builder.settings().failure_rate, None);
    for policy in [attribute("front-consecutive"), file, env] {
        assert_eq!(policy, builder);
    }

    // With `failure_rate` written too, both rules apply, in whatever order they are set.
    let builder = Policy::new()
        .consecutive(3)
        .failure_rate(40)
        .time_window(Duration::from_secs(30))
        .slow(Duration::from_secs(2))
        .open_for(Duration::from_secs(30))
        .half_open(2);
    let (file, env) = loaded(
        "[breakers.k]\nfailure_rate = 40\nconsecutive = 3\nwindow = \"30s\"\nslow = \"2s\"\nopen_for = \"30s\"\nhalf_open = 2\n",
        &[
            ("FUSEBOX__K__FAILURE_RATE", "40"),
            ("FUSEBOX__K__CONSECUTIVE", "3"),
            ("FUSEBOX__K__WINDOW", "30s"),
            ("FUSEBOX__K__SLOW", "2s"),
            ("FUSEBOX__K__OPEN_FOR", "30s"),
            ("FUSEBOX__K__HALF_OPEN", "2"),
        ],
    );
    assert_eq!(builder.settings().failure_rate, Some(40));
    assert_eq!(builder.settings().min_calls, 10);
    for policy in [attribute("front-both"), file, env] {
        assert_eq!(policy, builder);
    }
}

// ------------------------------------------------------- validated against the declaration

fake_registry!(DECLARED_CLOCK, DECLARED);

#[circuit_breaker(key = "declared-small", registry = DECLARED, window = 5, failure = [Timeout])]
fn declared_small(fail: bool) -> Result<(), ApiError> {
    outcome(fail)
}

#[circuit_breaker(key = "payment", registry = DECLARED, open_for = "30s", failure = [Timeout])]
fn declared_payment(fail: bool) -> Result<(), ApiError> {
    outcome(fail)
}

#[test]
fn an_override_is_validated_against_the_declared_policy_before_the_first_call() {
    let err = DECLARED
        .load_toml("[breakers.declared-small]\nmin_calls = 50\n")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "breaker `declared-small`: invalid `min_calls` = 50; use a value in 1..=5 (at most `window`)"
    );
    declared_small(true).unwrap_err();
    assert_eq!(
        DECLARED.get("declared-small").unwrap().policy(),
        Policy::new().window(5)
    );
}

#[test]
fn a_key_nothing_declares_is_reported_with_the_closest_declared_names() {
    let registry = Registry::new();
    assert!(registry.unknown_keys().is_empty());
    DECLARED
        .load_vars([(
            "FUSEBOX__PAYMNET__FAILURE_RATE".to_string(),
            "30".to_string(),
        )])
        .unwrap();
    let unknown = DECLARED.unknown_keys();
    assert_eq!(unknown.len(), 1);
    assert_eq!(unknown[0].key, "paymnet");
    assert_eq!(unknown[0].closest, ["payment"]);
    assert_eq!(
        unknown[0].to_string(),
        "no breaker `paymnet` is declared; did you mean `payment`?"
    );
    // The next environment load replaces this one: the stray key is gone.
    DECLARED.load_vars(Vec::new()).unwrap();
    assert!(DECLARED.unknown_keys().is_empty());
}

/// The WARN events of `events` that name an unknown key `key`.
fn unknown_key_warnings(events: &[crate::common::capture::Captured], key: &str) -> usize {
    events
        .iter()
        .filter(|e| {
            e.level == tracing::Level::WARN
                && e.fields.get("key").map(String::as_str) == Some(key)
                && e.message().contains("is declared")
        })
        .count()
}

#[test]
fn an_unknown_key_is_warned_about_once_across_loads() {
    let registry = Registry::new();
    let events = crate::common::capture::capture(|| {
        // The guide's order (`guide::operators`): the file, then the environment (and a reload of the file).
        let toml = "[breakers.stray-file-key]\nfailure_rate = 30\n";
        registry.load_toml(toml).unwrap();
        registry
            .load_vars([(
                "FUSEBOX__STRAY-ENV-KEY__FAILURE_RATE".to_string(),
                "30".to_string(),
            )])
            .unwrap();
        registry.load_toml(toml).unwrap();
    });
    assert_eq!(unknown_key_warnings(&events, "stray-file-key"), 1);
    assert_eq!(unknown_key_warnings(&events, "stray-env-key"), 1);
    assert_eq!(registry.unknown_keys().len(), 2, "still listed");
}

#[test]
fn configure_changes_only_the_fields_it_names() {
    DECLARED
        .configure("payment", Policy::new().failure_rate(30))
        .unwrap();
    let policy = DECLARED.get("payment").unwrap().policy();
    assert_eq!(policy.settings().failure_rate, Some(30));
    assert_eq!(
        policy.settings().open_for,
        Duration::from_secs(30),
        "the declared `open_for` stays"
    );
    DECLARED
        .configure("payment", PolicyPatch::new().half_open(3))
        .unwrap();
    let policy = DECLARED.get("payment").unwrap().policy();
    assert_eq!(
        (policy.settings().failure_rate, policy.settings().half_open),
        (Some(30), 3),
        "successive calls add up"
    );
    DECLARED.unconfigure("payment").unwrap();
    assert_eq!(
        DECLARED.get("payment").unwrap().policy(),
        Policy::new().open_for(Duration::from_secs(30))
    );
    let _ = declared_payment(false);
}

// ------------------------------------------------------- snapshots and duplicate declarations

fake_registry!(LISTED_CLOCK, LISTED);

#[circuit_breaker(key = "listed", registry = LISTED, window = 20, failure = [Timeout])]
fn listed(fail: bool) -> Result<(), ApiError> {
    outcome(fail)
}

#[circuit_breaker(key = "twin", registry = LISTED, window = 8, failure = [Timeout])]
fn twin_a(fail: bool) -> Result<(), ApiError> {
    outcome(fail)
}

#[circuit_breaker(key = "twin", registry = LISTED, window = 8, failure = [Timeout])]
fn twin_b(fail: bool) -> Result<(), ApiError> {
    outcome(fail)
}

#[test]
fn the_snapshot_lists_every_declared_breaker_before_its_first_call() {
    let keys: Vec<_> = LISTED.snapshot().into_iter().map(|s| s.key).collect();
    assert!(keys.iter().any(|k| k.as_str() == "listed"), "{keys:?}");
    assert!(keys.iter().any(|k| k.as_str() == "twin"), "{keys:?}");
    assert_eq!(
        LISTED.get("listed").unwrap().snapshot().calls,
        0,
        "nothing was called"
    );
    let _ = listed(false);
}

#[test]
fn identical_declarations_after_an_override_do_not_warn() {
    let events = crate::common::capture::capture(|| {
        LISTED
            .load_toml("[breakers.twin]\nfailure_rate = 25\n")
            .unwrap();
        twin_a(false).unwrap();
        twin_b(false).unwrap();
    });
    let warnings: Vec<&str> = events
        .iter()
        .filter(|e| e.level <= tracing::Level::WARN)
        .map(crate::common::capture::Captured::message)
        .collect();
    assert_eq!(warnings, Vec::<&str>::new());
    assert_eq!(
        LISTED.get("twin").unwrap().policy().settings().failure_rate,
        Some(25)
    );
}

// ------------------------------------------------------- reloads

/// A registry on a fake clock with one breaker of `policy` under `key`.
fn fixture(policy: Policy) -> (fusebox::clock::FakeClock, Registry, fusebox::Breaker) {
    let clock = fusebox::clock::FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    let breaker = registry.breaker("r", policy).unwrap();
    (clock, registry, breaker)
}

#[test]
fn reloading_an_unchanged_document_keeps_the_window_so_a_failing_dependency_still_trips() {
    let (_clock, registry, breaker) = fixture(Policy::new().window(10));
    let document = "[breakers.r]\nopen_for = \"30s\"\n";
    let mut calls = 0;
    while calls < 100 && breaker.state() == State::Closed {
        if calls % 7 == 0 {
            registry.load_toml(document).unwrap();
        }
        let permit = breaker.try_acquire().unwrap();
        if calls % 2 == 0 {
            permit.failure()
        } else {
            permit.success()
        }
        calls += 1;
    }
    assert_eq!(breaker.state(), State::Open, "after {calls} calls");
    assert!(calls <= 12, "opened after {calls} calls");
}

#[test]
fn a_changed_reload_keeps_the_window_of_the_same_shape_and_the_state() {
    let (_clock, registry, breaker) = fixture(Policy::new().window(10).failure_rate(80));
    for _ in 0..4 {
        breaker.try_acquire().unwrap().failure();
    }
    registry
        .load_toml("[breakers.r]\nopen_for = \"30s\"\n")
        .unwrap();
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (4, 4));
    assert_eq!(
        breaker.policy().settings().open_for,
        Duration::from_secs(30)
    );
    // A window of another size starts empty.
    registry.load_toml("[breakers.r]\nwindow = 20\n").unwrap();
    assert_eq!(breaker.snapshot().calls, 0);
}

#[test]
fn a_changed_reload_keeps_a_time_window_and_its_ageing() {
    let (clock, registry, breaker) = fixture(
        Policy::new()
            .time_window(Duration::from_secs(10))
            .failure_rate(90),
    );
    for _ in 0..3 {
        breaker.try_acquire().unwrap().failure();
    }
    clock.advance(Duration::from_secs(5));
    breaker.try_acquire().unwrap().success();
    registry
        .load_toml("[breakers.r]\nopen_for = \"30s\"\n")
        .unwrap();
    assert_eq!(breaker.snapshot().calls, 4);
    // The three failures still leave the window when their time is up, not later.
    clock.advance(Duration::from_secs(6));
    let snapshot = breaker.snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (1, 0));
}

#[test]
fn a_reload_keeps_calls_in_flight_against_the_bulkhead() {
    let (_clock, registry, breaker) = fixture(Policy::new().max_concurrent(2));
    let first = breaker.try_acquire().unwrap();
    let second = breaker.try_acquire().unwrap();
    registry
        .configure("r", PolicyPatch::new().failure_rate(30))
        .unwrap();
    assert_eq!(breaker.snapshot().in_flight, 2);
    assert_eq!(
        breaker.try_acquire().unwrap_err().reason(),
        Reason::BulkheadFull
    );
    first.success();
    second.success();
    assert_eq!(breaker.snapshot().in_flight, 0);
    let _a = breaker.try_acquire().unwrap();
    let _b = breaker.try_acquire().unwrap();
    assert_eq!(
        breaker.try_acquire().unwrap_err().reason(),
        Reason::BulkheadFull
    );
}

#[test]
fn a_reload_keeps_half_open_and_its_probe_or_announces_the_change() {
    let (clock, registry, breaker) =
        fixture(Policy::new().window(2).open_for(Duration::from_secs(1)));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    registry.on_transition(move |t| log.lock().unwrap().push((t.from, t.to)));
    breaker.try_acquire().unwrap().failure();
    breaker.try_acquire().unwrap().failure();
    clock.advance(Duration::from_secs(1));
    let probe = breaker.try_acquire().unwrap();
    assert_eq!(breaker.state(), State::HalfOpen);
    registry
        .configure("r", PolicyPatch::new().open_for(Duration::from_secs(2)))
        .unwrap();
    assert_eq!(breaker.state(), State::HalfOpen, "the probe is still out");
    probe.success();
    assert_eq!(
        breaker.state(),
        State::Closed,
        "its report reached the new breaker"
    );

    // A new recovery mode cannot keep the probes: the circuit reopens, and says so.
    breaker.try_acquire().unwrap().failure();
    breaker.try_acquire().unwrap().failure();
    clock.advance(Duration::from_secs(2));
    let _probe = breaker.try_acquire().unwrap();
    registry
        .configure("r", PolicyPatch::new().progressive(2, 2))
        .unwrap();
    assert_eq!(breaker.state(), State::Open);
    let seen = seen.lock().unwrap().clone();
    for pair in seen.windows(2) {
        assert_eq!(pair[0].1, pair[1].0, "events are continuous: {seen:?}");
    }
    assert_eq!(seen.last(), Some(&(State::HalfOpen, State::Open)));
    assert_eq!(
        breaker.policy().settings().recovery,
        Recovery::Progressive {
            phases: 2,
            min_passes: 2
        }
    );
}

#[test]
fn loads_replace_the_previous_load_whether_or_not_the_breaker_existed() {
    let declared = Policy::new().window(20);
    let early = Registry::new();
    let existing = early.breaker("k", declared).unwrap();
    let late = Registry::new();
    for registry in [&early, &late] {
        registry
            .load_toml("[breakers.k]\nfailure_rate = 30\n")
            .unwrap();
        registry
            .load_toml("[breakers.k]\nopen_for = \"30s\"\n")
            .unwrap();
    }
    let created = late.breaker("k", declared).unwrap();
    assert_eq!(existing.policy(), created.policy());
    assert_eq!(existing.policy().settings().failure_rate, Some(50));
    assert_eq!(
        existing.policy().settings().open_for,
        Duration::from_secs(30)
    );
    // The environment is its own source, applied over the file.
    early
        .load_vars([("FUSEBOX__K__FAILURE_RATE".to_string(), "20".to_string())])
        .unwrap();
    early
        .load_toml("[breakers.k]\nfailure_rate = 40\n")
        .unwrap();
    assert_eq!(existing.policy().settings().failure_rate, Some(20));
    assert_eq!(
        existing.policy().settings().open_for,
        Duration::from_secs(10),
        "the file no longer sets `open_for`"
    );
}

#[test]
fn a_hook_may_call_into_the_registry_during_a_reload() {
    let clock = fusebox::clock::FakeClock::new();
    let registry: &'static Registry = Box::leak(Box::new(Registry::with_clock(clock.clone())));
    let breaker = registry
        .breaker(
            "r",
            Policy::new().window(1).open_for(Duration::from_secs(1)),
        )
        .unwrap();
    registry.on_transition(move |t| {
        if t.function == "operator" {
            // Creating a breaker takes the registry's lock: the reload must not hold it here.
            registry.breaker("made-by-hook", Policy::new()).unwrap();
        }
    });
    breaker.try_acquire().unwrap().failure();
    clock.advance(Duration::from_secs(1));
    let _probe = breaker.try_acquire().unwrap();
    registry
        .configure("r", PolicyPatch::new().progressive(2, 2))
        .unwrap();
    assert!(registry.get("made-by-hook").is_some());
}
