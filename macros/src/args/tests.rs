//! Unit tests of argument parsing and checking: every argument, conflicts, shapes and
//! suggestions; the ranges in `args/tests/ranges.rs`.

mod ranges;

use super::*;
use quote::quote;

use super::suggest::closest;
use fusebox_policy::Window;

fn args(tokens: TokenStream) -> syn::Result<Args> {
    parse(tokens).args
}

fn messages(tokens: TokenStream) -> Vec<String> {
    match args(tokens) {
        Ok(_) => Vec::new(),
        Err(error) => error.into_iter().map(|e| e.to_string()).collect(),
    }
}

/// The knob table's arguments are argument names, listed once, between the other arguments and
/// the attempts.
#[test]
fn every_knob_argument_is_an_argument_name() {
    assert_eq!(&NAMES[OTHER_NAMES.len()..][..KNOB_NAMES.len()], KNOB_NAMES);
    for (i, name) in NAMES.iter().enumerate() {
        assert!(!NAMES[i + 1..].contains(name), "`{name}` listed twice");
    }
    for row in KNOB_NAMES {
        assert!(fusebox_policy::KNOBS.contains(row));
    }
    assert!(!KNOB_NAMES.contains(&"stuck_open"));
}

/// A policy the argument checks let through is still judged by `Policy::validate`, at the
/// token of the argument that set the refused field.
#[test]
fn the_runtime_validation_runs_on_the_arguments() {
    let plain = args(quote!(key = "k", window = 10, consecutive = 5)).unwrap();
    let policy = crate::validate::policy_of(&plain.policy).unwrap();
    assert_eq!(policy.settings().window, Window::Count(10));
    assert_eq!(policy.settings().consecutive, Some(5));
    assert_eq!(policy.settings().failure_rate, None);
    assert!(crate::validate::check(&plain.policy).is_ok());
    let base = args(quote!(key = "k", policy = BASE, window = 10)).unwrap();
    assert!(crate::validate::policy_of(&base.policy).is_none());
}

#[test]
fn every_argument() {
    let parsed = args(quote!(
        key = "payment",
        failure = [Timeout, PaymentError::Connect],
        fallback = Self::cached,
        registry = crate::REGISTRY,
        crate = ::fusebox,
        window = 20,
        min_calls = 5,
        failure_rate = 40,
        open_for = "30s",
        half_open = 3,
        policy = BASE,
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(&parsed.key, Key::Literal(key) if key.value() == "payment"));
    let Some(Failure::Variants(variants)) = &parsed.failure else {
        panic!("variants")
    };
    assert!(matches!(&variants[0], Variant::Bare(id) if id == "Timeout"));
    assert!(matches!(&variants[1], Variant::Path(_)));
    assert!(parsed.fallback.is_some() && parsed.registry.is_some() && parsed.krate.is_some());
    let policy = &parsed.policy;
    assert!(policy.base.is_some());
    assert!(matches!(policy.window, Some(WindowArg::Count(w)) if w.value == 20));
    assert_eq!(policy.min_calls.map(|w| w.value), Some(5));
    assert_eq!(policy.failure_rate.map(|w| w.value), Some(40));
    assert!(matches!(policy.open_for, Some(OpenForArg::Wait(w)) if w.value == 30_000_000_000));
    assert_eq!(policy.half_open.map(|w| w.value), Some(3));
}

#[test]
fn every_new_argument() {
    let parsed = args(quote!(
        key = "k",
        window = "30s",
        min_calls = 500,
        consecutive = 5,
        slow = "2s",
        slow_rate = 80,
        open_backoff = 2.5,
        open_max = "5m",
        half_open_lease = "30s",
        recovery = progressive(phases = 3, min_passes = 5),
        max_concurrent = 10,
        timeout = "800ms",
        retry = 3,
        backoff = "100ms",
        deadline = "2s",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let policy = &parsed.policy;
    assert!(matches!(policy.window, Some(WindowArg::Time(w)) if w.value == 30_000_000_000));
    assert_eq!(policy.min_calls.map(|w| w.value), Some(500));
    assert_eq!(policy.consecutive.map(|w| w.value), Some(5));
    assert_eq!(policy.slow.map(|w| w.value), Some(2_000_000_000));
    assert_eq!(policy.slow_rate.map(|w| w.value), Some(80));
    assert_eq!(policy.open_backoff.map(|w| w.value), Some(2.5));
    assert_eq!(policy.open_max.map(|w| w.value), Some(300_000_000_000));
    assert_eq!(
        policy.half_open_lease.map(|w| w.value),
        Some(30_000_000_000)
    );
    assert!(matches!(
        policy.recovery,
        Some(RecoveryArg::Progressive { phases, min_passes })
            if phases.value == 3 && min_passes.value == 5
    ));
    assert!(matches!(policy.max_concurrent, Some(ConcurrencyArg::Fixed(w)) if w.value == 10));
    let attempts = &parsed.attempts;
    assert!(attempts.any());
    assert_eq!(attempts.timeout.map(|w| w.value), Some(800_000_000));
    assert_eq!(attempts.retry.map(|w| w.value), Some(3));
    assert_eq!(attempts.backoff.map(|w| w.value), Some(100_000_000));
    assert_eq!(attempts.deadline.map(|w| w.value), Some(2_000_000_000));
    assert_eq!(attempts.written.len(), 4);
    assert!(matches!(
        args(quote!(key = "k", recovery = probes, open_backoff = 2))
            .unwrap()
            .policy,
        PolicyArgs {
            recovery: Some(RecoveryArg::Probes),
            open_backoff: Some(Spanned { value: 2.0, .. }),
            ..
        }
    ));
    assert!(
        !args(quote!(key = "k", max_concurrent = 1))
            .unwrap()
            .attempts
            .any()
    );
    assert_eq!(
        parse(quote!(key = "k", retry = 0, timeout = x, window = 3))
            .attempt_names
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>(),
        ["retry", "timeout"]
    );
}

/// The single error of `tokens`, which must start with `expected`.
fn one_error(tokens: TokenStream, expected: &str) {
    let found = messages(tokens.clone());
    assert!(
        found.len() == 1 && found[0].starts_with(expected),
        "{tokens}: {found:?}"
    );
}

#[test]
fn conflicts() {
    for (tokens, expected) in [
        (
            quote!(key = "k", slow_rate = 80),
            "`slow_rate` has no effect without `slow`; add `slow = \"2s\"`",
        ),
        (
            quote!(key = "k", open_max = "5s"),
            "`open_max` (\"5s\") is shorter than `open_for` (\"10s\", the default)",
        ),
        (
            quote!(key = "k", open_for = "2m", open_max = "90s"),
            "`open_max` (\"90s\") is shorter than `open_for` (\"2m\")",
        ),
        (
            quote!(key = "k", open_for = "10m", open_backoff = 2),
            "`open_backoff` grows the wait up to `open_max` (\"5m\", the default), which is \
             shorter than `open_for` (\"10m\")",
        ),
        (
            quote!(key = "k", backoff = "100ms"),
            "`backoff` has no effect without `retry`",
        ),
        (
            quote!(key = "k", retry = 1, backoff = "100ms"),
            "`backoff` has no effect with `retry = 1`",
        ),
        (
            quote!(key = "k", timeout = "1s", deadline = "2s"),
            "`deadline` has no effect without `retry`",
        ),
        (
            quote!(key = "k", policy = BASE, recovery = probes),
            "`recovery = probes` cannot override",
        ),
        (
            quote!(key = "k", window = 10, min_calls = 11),
            "`min_calls` (11)",
        ),
    ] {
        one_error(tokens, expected);
    }
    // A time window sets no bound on `min_calls`; a refused `retry` is not reported twice.
    assert!(args(quote!(key = "k", window = "1s", min_calls = 1000)).is_ok());
    assert_eq!(
        messages(quote!(key = "k", retry = 0, backoff = "1s")).len(),
        1
    );
}

#[test]
fn recovery_shapes() {
    for (tokens, expected) in [
        (
            quote!(
                key = "k",
                recovery = progressive(phases = 0, min_passes = 5)
            ),
            "`phases = 0` is out of range; use a value in 1..=100",
        ),
        (
            quote!(
                key = "k",
                recovery = progressive(phases = 101, min_passes = 5)
            ),
            "`phases = 101` is out of range",
        ),
        (
            quote!(
                key = "k",
                recovery = progressive(phases = 3, min_passes = 0)
            ),
            "`min_passes = 0` is out of range",
        ),
        (
            quote!(key = "k", recovery = progressive(phases = 3)),
            "`progressive` needs `min_passes`; add `min_passes = 5`",
        ),
        (
            quote!(
                key = "k",
                recovery = progressive(phases = 3, min_passes = 5, phase = 2)
            ),
            "unknown setting `phase` of `progressive`; expected `phases` or `min_passes`",
        ),
        (
            quote!(
                key = "k",
                recovery = progressive(phases = 3, phases = 4, min_passes = 5)
            ),
            "duplicate `phases`",
        ),
        (
            quote!(key = "k", recovery = progressive(3)),
            "expected `phases = N` or `min_passes = N`",
        ),
        (
            quote!(key = "k", recovery = progressive),
            "`progressive` needs its settings",
        ),
        (
            quote!(key = "k", recovery = gradual(phases = 3)),
            "`recovery` takes `probes`",
        ),
        (
            quote!(key = "k", recovery = "probes"),
            "`recovery` takes `probes`",
        ),
    ] {
        one_error(tokens, expected);
    }
}

#[test]
fn predicate() {
    let parsed = args(quote!(key = "k", failure = errors::is_transient)).unwrap();
    assert!(matches!(parsed.failure, Some(Failure::Predicate(_))));
}

#[test]
fn collects_every_error() {
    let found = messages(quote!(
        falure = [Timeout],
        window = SIZE,
        window = 10,
        failure_rate = 0,
    ));
    assert_eq!(found.len(), 5, "{found:?}");
    assert!(found[0].starts_with("unknown argument `falure`; expected one of `key`, "));
    assert!(found[0].ends_with("did you mean `failure`?"));
    assert!(found[1].starts_with("`window` takes an integer literal for a count window"));
    assert_eq!(found[2], "duplicate argument `window`; remove one");
    assert!(found[3].starts_with("`failure_rate = 0` is out of range"));
    assert!(found[4].starts_with("missing `key`"));
}

#[test]
fn key_shapes() {
    assert!(matches!(
        args(quote!(key = url.host())).unwrap().key,
        Key::Dynamic(_)
    ));
    assert!(messages(quote!(key = 42))[0].starts_with("`key` takes a string literal"));
    assert!(messages(quote!(key = ""))[0].starts_with("`key` must not be empty"));
    assert!(messages(quote!(key))[0].starts_with("expected `=` after `key`"));
}

#[test]
fn failure_shapes() {
    assert!(messages(quote!(key = "k", failure = []))[0].starts_with("`failure = []`"));
    assert!(
        messages(quote!(key = "k", failure = [Timeout, Timeout]))[0]
            .starts_with("`Timeout` is listed twice")
    );
    assert!(
        messages(quote!(key = "k", failure = [Timeout(_)]))[0]
            .starts_with("expected a variant name")
    );
    assert!(messages(quote!(key = "k", failure = "Timeout"))[0].starts_with("`failure` takes"));
}

#[test]
fn suggestions() {
    assert_eq!(closest("falure"), Some("failure"));
    assert_eq!(closest("windw"), Some("window"));
    assert_eq!(closest("min_call"), Some("min_calls"));
    assert_eq!(closest("fallbak"), Some("fallback"));
    assert_eq!(closest("timeout"), None);
    assert_eq!(closest("retries"), None);
    assert_eq!(closest("rety"), Some("retry"));
    assert_eq!(closest("consecutiv"), Some("consecutive"));
    assert_eq!(closest("max_concurent"), Some("max_concurrent"));
    assert_eq!(closest("slow_rat"), Some("slow_rate"));
}

/// The names users bring from other breakers get fusebox's name for the same setting, not the
/// closest spelling (`open_after` is no typo of `open_jitter`).
#[test]
fn suggestions_by_meaning() {
    let suggested = |written: &str| {
        let name = Ident::new(written, proc_macro2::Span::call_site());
        messages(quote!(key = "k", #name = 1)).remove(0)
    };
    for (written, argument) in [
        ("open_after", "consecutive"),
        ("wait_duration", "open_for"),
        ("waitDurationInOpenState", "open_for"),
        ("break_duration", "open_for"),
        ("sliding_window_size", "window"),
        ("sampling_duration", "window"),
        ("minimum_number_of_calls", "min_calls"),
        ("minimum_throughput", "min_calls"),
        ("permitted_calls_in_half_open", "half_open"),
        ("slow_call_duration_threshold", "slow"),
        ("failure_rate_threshold", "failure_rate"),
        ("failure_ratio", "failure_rate"),
        ("timeout_ms", "timeout"),
        ("wait_duration_in_millis", "open_for"),
        ("max_retries", "retry"),
        ("max_concurrent_calls", "max_concurrent"),
        ("openFor", "open_for"),
    ] {
        let message = suggested(written);
        assert!(
            message.contains(&format!("did you mean `{argument}`?")),
            "{written}: {message}"
        );
    }
    assert!(suggested("failure_ratio").contains("`failure_ratio = 0.5` is `failure_rate = 50`"));
    assert!(suggested("timeout_ms").contains("`timeout = \"800ms\"`"));
    assert!(suggested("max_retries").contains("`max_retries = 2` is `retry = 3`"));
    assert!(suggested("falure").ends_with("did you mean `failure`?"));
    assert!(
        !suggested("retry_ms").contains("did you mean"),
        "`retry` takes no duration"
    );
    for (argument, aliases, _) in super::suggest::MEANINGS {
        assert!(NAMES.contains(&argument), "{argument}");
        for alias in aliases {
            assert!(!NAMES.contains(alias), "{alias} is an argument");
        }
    }
}

#[test]
fn failure_if_takes_a_path_and_goes_with_the_attempt_arguments() {
    let parsed = args(quote!(key = "k", failure_if = http::is_unavailable)).unwrap();
    let path = parsed.failure_if.expect("a predicate");
    assert_eq!(quote!(#path).to_string(), "http :: is_unavailable");
    assert!(args(quote!(key = "k")).unwrap().failure_if.is_none());
    one_error(
        quote!(key = "k", failure_if = 503),
        "`failure_if` takes the path of a `fn(&T) -> bool` on the `Ok` value",
    );
    // With the attempt arguments: `Ok` values it counts are retried like counted errors.
    for attempts in [quote!(timeout = "1s"), quote!(retry = 3, backoff = "10ms")] {
        let parsed = args(quote!(key = "k", failure_if = is_unavailable, #attempts)).unwrap();
        assert!(parsed.failure_if.is_some() && parsed.attempts.any());
    }
}

/// The attribute's rustdoc in this crate names every argument the attribute accepts.
#[test]
fn the_attribute_rustdoc_names_every_argument() {
    let doc: String = include_str!("../lib.rs")
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("///"))
        .collect::<Vec<_>>()
        .join(" ");
    for name in NAMES {
        assert!(
            doc.contains(&format!("`{name}`")),
            "the `circuit_breaker` rustdoc of fusebox-macros does not name `{name}`"
        );
    }
}

#[test]
fn others_takes_ignore_or_success() {
    let parsed = args(quote!(key = "k", others = "success")).unwrap();
    let policy = crate::validate::policy_of(&parsed.policy).unwrap();
    assert_eq!(policy.settings().others, fusebox_policy::Others::Success);
    let parsed = args(quote!(key = "k", others = "ignore")).unwrap();
    let policy = crate::validate::policy_of(&parsed.policy).unwrap();
    assert_eq!(policy.settings().others, fusebox_policy::Others::Ignore);
    one_error(
        quote!(key = "k", others = "maybe"),
        "unknown `others` value \"maybe\"; write `others = \"ignore\"` (the default: errors \
         `failure` does not count leave the circuit as it was) or `others = \"success\"` (they \
         count as successes in the window)",
    );
    one_error(
        quote!(key = "k", others = success),
        "`others` takes a string; write `others = \"ignore\"`",
    );
}

#[test]
fn retry_budget_takes_a_share_and_a_floor() {
    let parsed = args(quote!(key = "k", retry_budget = "20%")).unwrap();
    let policy = crate::validate::policy_of(&parsed.policy).unwrap();
    assert_eq!(
        policy.settings().retry_budget,
        Some(fusebox_policy::RetryBudget {
            percent: 20,
            floor: 10
        })
    );
    one_error(
        quote!(key = "k", retry_budget = "20"),
        "invalid `retry_budget` \"20\": write a percentage of first attempts and an optional \
         floor in retries per second, like \"20%\" or \"20%, 10/s\"",
    );
    one_error(
        quote!(key = "k", retry_budget = "2000%"),
        "invalid `retry_budget` \"2000%\": the ratio 2000% is above 1000%; the ratio is \
         0..=1000% and the floor 0..=100000/s, like `retry_budget = \"20%\"`",
    );
    one_error(
        quote!(key = "k", retry_budget = "0%, 0/s"),
        "invalid `retry_budget` \"0%, 0/s\": `0%, 0/s` rejects every retry (use one attempt: no \
         `retry`)",
    );
    one_error(
        quote!(key = "k", retry_budget = 20),
        "`retry_budget` takes a string, like `retry_budget = \"20%\"`",
    );
}

#[test]
fn raw_identifiers_name_the_same_arguments() {
    let parsed = args(quote!(r#key = "k", r#window = 4, r#fallback = use_cached)).unwrap();
    assert!(matches!(parsed.key, Key::Literal(_)));
    assert_eq!(
        parsed.policy.window.map(|window| match window {
            WindowArg::Count(count) => count.value,
            WindowArg::Time(_) => 0,
        }),
        Some(4)
    );
    assert!(parsed.fallback.is_some());
    one_error(
        quote!(key = "k", r#key = "j"),
        "duplicate argument `key`; remove one",
    );
}
