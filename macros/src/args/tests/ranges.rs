//! Unit tests of the ranges of the arguments: counts, durations, rates and factors, at and past
//! their bounds, and the literals each accepts.

use super::*;

#[test]
fn new_ranges_of_the_policy() {
    for (tokens, expected) in [
        (
            quote!(key = "k", window = "0s"),
            "`window = \"0s\"` is out of range; use a duration from \"10ms\" to \"2h\" for a time window",
        ),
        (
            quote!(key = "k", window = "7200001ms"),
            "`window = \"7200001ms\"` is out of range",
        ),
        (
            quote!(key = "k", window = 2.5),
            "`window` takes an integer literal for a count window",
        ),
        (
            quote!(key = "k", slow = "0ms"),
            "`slow = \"0ms\"` is out of range",
        ),
        (
            quote!(key = "k", slow = "2s", slow_rate = 0),
            "`slow_rate = 0` is out of range",
        ),
        (
            quote!(key = "k", slow = "2s", slow_rate = 101),
            "`slow_rate = 101`",
        ),
        (
            quote!(key = "k", consecutive = 0),
            "`consecutive = 0` is out of range",
        ),
        (
            quote!(key = "k", consecutive = 1000001),
            "`consecutive = 1000001`",
        ),
        (
            quote!(key = "k", open_backoff = 0.5),
            "`open_backoff = 0.5` is below 1",
        ),
        (
            quote!(key = "k", open_backoff = 0),
            "`open_backoff = 0` is below 1",
        ),
        (
            quote!(key = "k", open_backoff = 101),
            "`open_backoff = 101` is out of range",
        ),
        (
            quote!(key = "k", open_backoff = "2"),
            "`open_backoff` takes a number literal",
        ),
        (
            quote!(key = "k", open_max = "25h"),
            "`open_max = \"25h\"` is out of range",
        ),
        (
            quote!(key = "k", half_open_lease = "0s"),
            "`half_open_lease = \"0s\"`",
        ),
        (
            quote!(key = "k", max_concurrent = 0),
            "`max_concurrent = 0` is out of range",
        ),
    ] {
        one_error(tokens, expected);
    }
}

#[test]
fn new_ranges_of_the_attempts() {
    for (tokens, expected) in [
        (
            quote!(key = "k", timeout = "0s"),
            "`timeout = \"0s\"` is out of range",
        ),
        (
            quote!(key = "k", timeout = 800),
            "`timeout` takes a duration string literal",
        ),
        (
            quote!(key = "k", retry = 0),
            "`retry = 0` is out of range; use a value in 1..=100",
        ),
        (quote!(key = "k", retry = 101), "`retry = 101`"),
        (
            quote!(key = "k", retry = 3, backoff = "31s"),
            "`backoff = \"31s\"` is out of range",
        ),
        (
            quote!(key = "k", retry = 3, deadline = "0s"),
            "`deadline = \"0s\"`",
        ),
    ] {
        one_error(tokens, expected);
    }
}

#[test]
fn new_ranges_accept_their_bounds() {
    for ok in [
        quote!(key = "k", window = "10ms"),
        quote!(key = "k", window = "1h", min_calls = 5000),
        quote!(key = "k", window = "2h"),
        quote!(key = "k", open_backoff = 1),
        quote!(key = "k", open_backoff = 100.0),
        quote!(key = "k", open_for = "1s", open_max = "1s"),
        quote!(key = "k", retry = 1),
        quote!(key = "k", timeout = "1ms"),
        quote!(key = "k", retry = 100, backoff = "30s", deadline = "24h"),
        quote!(key = "k", slow_rate = 50, policy = SLOW),
        quote!(key = "k", open_max = "1s", policy = BASE),
    ] {
        assert!(args(ok.clone()).is_ok(), "{ok}");
    }
}

#[test]
fn adaptive_bulkhead_ranges_and_spellings() {
    for (tokens, expected) in [
        (
            quote!(key = "k", max_concurrent = "adaptive(5..2)"),
            "`max_concurrent = \"adaptive(5..2)\"` is out of range; the floor must be at least 1",
        ),
        (
            quote!(key = "k", max_concurrent = "adaptive(0..2)"),
            "`max_concurrent = \"adaptive(0..2)\"` is out of range",
        ),
        (
            quote!(key = "k", max_concurrent = "adaptve"),
            "invalid `max_concurrent`: unknown bulkhead \"adaptve\"",
        ),
        (
            quote!(key = "k", max_concurrent = adaptive),
            "`max_concurrent` takes an integer literal for a fixed limit",
        ),
    ] {
        one_error(tokens, expected);
    }
    for ok in [
        quote!(key = "k", max_concurrent = "adaptive"),
        quote!(key = "k", max_concurrent = "adaptive(1..1000000)"),
        quote!(key = "k", max_concurrent = "adaptive(5..=5)"),
    ] {
        assert!(args(ok.clone()).is_ok(), "{ok}");
    }
}

#[test]
fn ranges() {
    for (tokens, expected) in [
        (
            quote!(key = "k", window = 0),
            "`window = 0` is out of range",
        ),
        (quote!(key = "k", window = 1000001), "`window = 1000001`"),
        (quote!(key = "k", failure_rate = 0), "`failure_rate = 0`"),
        (
            quote!(key = "k", failure_rate = 150),
            "`failure_rate = 150`",
        ),
        (
            quote!(key = "k", failure_rate = 100000),
            "`failure_rate = 100000`",
        ),
        (quote!(key = "k", half_open = 0), "`half_open = 0`"),
        (quote!(key = "k", half_open = 128), "`half_open = 128`"),
        (quote!(key = "k", min_calls = 0), "`min_calls = 0`"),
        (
            quote!(key = "k", window = 10, min_calls = 11),
            "`min_calls` (11) is greater than `window` (10)",
        ),
        (
            quote!(key = "k", min_calls = 101),
            "`min_calls` (101) is greater than `window` (100, the default)",
        ),
    ] {
        let found = messages(tokens.clone());
        assert!(
            found.len() == 1 && found[0].starts_with(expected),
            "{tokens}: {found:?}"
        );
    }
    for ok in [
        quote!(key = "k", window = 1),
        quote!(key = "k", window = 1000000, min_calls = 1000000),
        quote!(key = "k", failure_rate = 100, half_open = 127),
        quote!(key = "k", min_calls = 500, policy = BIG),
    ] {
        assert!(args(ok.clone()).is_ok(), "{ok}");
    }
}

#[test]
fn durations() {
    let nanos = |tokens| match args(tokens).unwrap().policy.open_for.unwrap() {
        OpenForArg::Wait(wait) => wait.value,
        OpenForArg::Function(_) => unreachable!("a duration was written"),
    };
    assert_eq!(nanos(quote!(key = "k", open_for = "1ms")), 1_000_000);
    assert_eq!(nanos(quote!(key = "k", open_for = "1500us")), 1_500_000);
    assert_eq!(
        nanos(quote!(key = "k", open_for = "24h")),
        86_400_000_000_000
    );
    for (tokens, expected) in [
        (
            quote!(key = "k", open_for = "10 parsecs"),
            "invalid duration \"10 parsecs\"",
        ),
        (
            quote!(key = "k", open_for = "999us"),
            "`open_for = \"999us\"` is out of range",
        ),
        (
            quote!(key = "k", open_for = "25h"),
            "`open_for = \"25h\"` is out of range",
        ),
        (
            quote!(key = "k", open_for = 10),
            "`open_for` takes a duration string",
        ),
    ] {
        let found = messages(tokens.clone());
        assert!(
            found.len() == 1 && found[0].starts_with(expected),
            "{tokens}: {found:?}"
        );
    }
}

#[test]
fn failure_count_is_a_count_of_failures_within_the_window() {
    let parsed = args(quote!(key = "k", window = 20, failure_count = 5)).unwrap();
    assert_eq!(parsed.policy.failure_count.map(|n| n.value), Some(5));
    let policy = crate::validate::policy_of(&parsed.policy).unwrap();
    assert_eq!(policy.settings().failure_count, Some(5));
    assert_eq!(policy.settings().failure_rate, None);
    one_error(
        quote!(key = "k", failure_count = 0),
        "`failure_count = 0` is out of range",
    );
    // More than a count window holds: the policy's own validation, at the value.
    let error = args(quote!(key = "k", window = 10, failure_count = 11)).unwrap();
    let refused = crate::validate::check(&error.policy).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "invalid `failure_count` = 11; use a value in 1..=10 (at most a count `window`)"
    );
}

#[test]
fn throttle_is_a_factor_from_one_to_a_hundred() {
    for (tokens, k) in [(quote!(throttle = 2), 2.0), (quote!(throttle = 1.25), 1.25)] {
        let parsed = args(quote!(key = "k", #tokens)).unwrap();
        assert_eq!(parsed.policy.throttle.map(|k| k.value), Some(k));
        let policy = crate::validate::policy_of(&parsed.policy).unwrap();
        assert_eq!(policy.settings().throttle, Some(k));
    }
    one_error(
        quote!(key = "k", throttle = 0.5),
        "`throttle = 0.5` is below 1: it would shed load while every call succeeds",
    );
    one_error(quote!(key = "k", throttle = 0), "`throttle = 0` is below 1");
    one_error(
        quote!(key = "k", throttle = 101),
        "`throttle = 101` is out of range; use a factor from 1",
    );
    one_error(
        quote!(key = "k", throttle = "2"),
        "`throttle` takes a number literal like `throttle = 2`",
    );
    one_error(
        quote!(key = "k", throttle = K),
        "`throttle` takes a number literal",
    );
}

#[test]
fn counts_refuse_floats_and_float_suffixes() {
    for name in [
        "min_calls",
        "window",
        "consecutive",
        "failure_count",
        "half_open",
        "max_concurrent",
        "retry",
        "failure_rate",
        "slow_rate",
    ] {
        let name = syn::Ident::new(name, proc_macro2::Span::call_site());
        // `window = 1.0` is refused as neither a count nor a duration (`ranges`).
        let floats = if name == "window" {
            vec![quote!(1f64), quote!(1f32)]
        } else {
            vec![quote!(1f64), quote!(1f32), quote!(1.0), quote!(1e3)]
        };
        for value in floats {
            let found = messages(quote!(key = "k", #name = #value));
            assert!(
                found.iter().any(|message| message
                    .starts_with(&format!("`{name}` takes an integer literal, not `"))
                    && message.contains("without a fraction, exponent or float suffix")),
                "{name} = {value}: {found:?}"
            );
        }
    }
    // An integer suffix is an integer.
    let parsed = args(quote!(key = "k", window = 10u32, min_calls = 5usize)).unwrap();
    assert_eq!(parsed.policy.min_calls.map(|n| n.value), Some(5));
    let recovery = messages(quote!(
        key = "k",
        recovery = progressive(phases = 2f64, min_passes = 5)
    ));
    assert!(
        recovery[0].starts_with("`phases` takes an integer literal, not `2f64`"),
        "{recovery:?}"
    );
}

/// The attribute reads every duration of the grammar table as `fusebox-policy`'s parser does:
/// the same texts accepted with the same length, the same refused, with the units listed.
#[test]
fn durations_read_the_shared_grammar() {
    let table = include_str!("../../../../policy/src/duration/grammar.txt");
    let texts = table
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split('"').nth(1));
    let mut read = 0;
    for text in texts {
        let found = match args(quote!(key = "k", open_for = #text)) {
            Ok(args) => match args.policy.open_for {
                Some(OpenForArg::Wait(wait)) => Ok(wait.value),
                _ => unreachable!("a duration was written"),
            },
            Err(error) => Err(error.to_string()),
        };
        match fusebox_policy::parse_duration(text) {
            Ok(wait) if (1_000_000..=86_400_000_000_000).contains(&wait.as_nanos()) => {
                assert_eq!(
                    found,
                    Ok(u64::try_from(wait.as_nanos()).unwrap()),
                    "{text:?}"
                );
                read += 1;
            }
            Err(fusebox_policy::DurationError::Syntax) => {
                let message = found.unwrap_err();
                assert!(
                    message.starts_with("invalid duration"),
                    "{text:?}: {message}"
                );
                assert!(
                    message.contains(fusebox_policy::DURATION_UNITS),
                    "{message}"
                );
            }
            _ => assert!(found.unwrap_err().contains("is out of range"), "{text:?}"),
        }
    }
    assert!(read > 20, "{read} texts read");
}
