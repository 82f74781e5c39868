//! Unit tests of the configuration loader: every knob has its field, TOML and environment
//! layers, errors that name the key and the field.

use std::ffi::OsString;
use std::time::Duration;

use super::*;
use crate::policy::{Policy, PolicyPatch, Recovery, Window};
use crate::registry::Registry;

mod chaos;
mod durations;
mod shadows;

/// Every field of a configuration file is one of `KNOBS` (or one rule of `stuck_open`) and
/// reads a value into the patch of its name.
#[test]
fn every_field_reads_its_knob() {
    let layer = toml_layer(
        r#"
        [breakers.k]
        window = 20
        min_calls = 5
        failure_rate = 40
        consecutive = 3
        failure_count = 4
        slow = "2s"
        slow_rate = 80
        open_for = "30s"
        open_backoff = 2
        open_max = "5m"
        open_jitter = 20
        half_open = 2
        half_open_lease = "10s"
        recovery = { phases = 3, min_passes = 5 }
        max_concurrent = 8
        stuck_after_recoveries = 4
        stuck_after = "1m"
        shared = false
        quorum = 3
        others = "success"
        retry_budget = "25%, 3/s"
        group = "search"
        "#,
    )
    .unwrap();
    let declared = Policy::new()
        .window(20)
        .min_calls(5)
        .failure_rate(40)
        .consecutive(3)
        .failure_count(4)
        .slow(Duration::from_secs(2))
        .slow_rate(80)
        .open_for(Duration::from_secs(30))
        .open_backoff(2.0)
        .open_max(Duration::from_secs(300))
        .open_jitter(20)
        .half_open(2)
        .half_open_lease(Duration::from_secs(10))
        .progressive(3, 5)
        .max_concurrent(8)
        .stuck_open(4, Duration::from_secs(60))
        .shared(false)
        .quorum(3)
        .others(crate::policy::Others::Success)
        .retry_budget(25, 3)
        .group("search");
    // The group's name is set once the load is accepted (`Loaded::keep_names`).
    assert_eq!(layer.members["k"], "search");
    assert_eq!(
        layer.breakers["k"].group("search"),
        PolicyPatch::from(declared)
    );
    let names: Vec<&str> = field_names().collect();
    // `stuck_open` is two fields, `open_for_fn` none (configuration cannot name a function).
    assert_eq!(names.len(), fusebox_policy::KNOBS.len(), "{names:?}");
    for knob in fusebox_policy::KNOBS {
        assert!(
            ["stuck_open", "open_for_fn"].contains(knob) || names.contains(knob),
            "`{knob}`"
        );
    }
}

#[test]
fn toml_patches_apply_over_the_declared_policy() {
    let r = Registry::new();
    let live = r
        .breaker("search", Policy::new().window(20).min_calls(5))
        .unwrap();
    let n = r
        .load_toml(
            r#"
            [breakers.search]
            window = "1m"
            slow = "800ms"
            slow_rate = 60
            recovery = { phases = 3, min_passes = 5 }

            [breakers.payment]
            failure_rate = 30
            open_for = "30s"
            "#,
        )
        .unwrap();
    assert_eq!(n, 2);
    let p = live.policy();
    assert_eq!(p.settings().window, Window::Time(Duration::from_secs(60)));
    assert_eq!(
        p.settings().min_calls,
        5,
        "fields left out keep the declared value"
    );
    assert_eq!(p.settings().slow, Some(Duration::from_millis(800)));
    assert_eq!(
        p.settings().recovery,
        Recovery::Progressive {
            phases: 3,
            min_passes: 5
        }
    );
    let payment = r
        .breaker("payment", Policy::new().window(50))
        .unwrap()
        .policy();
    assert_eq!(
        (payment.settings().failure_rate, payment.settings().window),
        (Some(30), Window::Count(50))
    );
    assert_eq!(payment.settings().open_for, Duration::from_secs(30));
}

#[test]
fn invalid_configuration_names_key_and_field_and_applies_nothing() {
    let r = Registry::new();
    let b = r.breaker("a", Policy::new()).unwrap();
    let err = r
        .load_toml("[breakers.a]\nfailure_rate = 30\n[breakers.b]\nmin_calls = 500\nwindow = 100\n")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "breaker `b`: invalid `min_calls` = 500; use a value in 1..=100 (at most `window`)"
    );
    assert_eq!(
        b.policy().settings().failure_rate,
        Some(50),
        "`a` was not half-applied"
    );
    let err = r.load_toml("[breakers.a]\nfalure_rate = 30\n").unwrap_err();
    assert!(
        matches!(&err, ConfigError::Field { key, message } if key == "a" && message.contains("falure_rate")),
        "{err}"
    );
    let err = r
        .load_toml("[breakers.a]\nopen_for = \"10 parsecs\"\n")
        .unwrap_err();
    assert!(err.to_string().starts_with("breaker `a`: "), "{err}");
}

#[test]
fn environment_variables() {
    let r = Registry::new();
    let vars = [
        ("FUSEBOX__SHIPPING__FAILURE_RATE", "25"),
        ("FUSEBOX__SHIPPING__OPEN_FOR", "2m"),
        ("PATH", "/usr/bin"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()));
    assert_eq!(r.load_vars(vars).unwrap(), 1);
    let p = r.breaker("shipping", Policy::new()).unwrap().policy();
    assert_eq!(p.settings().failure_rate, Some(25));
    assert_eq!(p.settings().open_for, Duration::from_secs(120));
}

fn range_field(err: ConfigError) -> (Option<String>, &'static str) {
    // The policy error is the range error's source, and its message the range error's.
    let source = std::error::Error::source(&err).map(ToString::to_string);
    assert_eq!(source, Some(err.to_string()), "{err:?}");
    match err {
        ConfigError::Range(e) => (e.key().map(str::to_owned), e.field()),
        other => panic!("expected a range error, got {other}"),
    }
}

#[test]
fn zero_durations_are_out_of_range() {
    let r = Registry::new();
    for field in ["slow", "half_open_lease", "open_max"] {
        let err = r
            .load_toml(&format!("[breakers.a]\n{field} = \"0s\"\n"))
            .unwrap_err();
        assert_eq!(range_field(err), (Some("a".into()), field));
        let err = r
            .load_vars([(format!("FUSEBOX__A__{field}"), "0s".into())])
            .unwrap_err();
        assert_eq!(range_field(err), (Some("a".into()), field));
    }
    assert!(r.unknown_keys().is_empty(), "nothing was applied");
}

#[test]
fn an_env_value_is_one_value_not_a_document() {
    let r = Registry::new();
    let err = r
        .load_vars([(
            "FUSEBOX__X__FAILURE_RATE".into(),
            "30\n[breakers.x]\nwindow = 0".into(),
        )])
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("breaker `x`: `failure_rate` = \"30\\n[breakers.x]\\nwindow = 0\" is not"),
        "{err}"
    );
    let err = r
        .load_vars([(
            "FUSEBOX__X__RECOVERY".into(),
            "{ phases = 3, min_passes = 5 }\n[breakers.y]".into(),
        )])
        .unwrap_err();
    assert!(err.to_string().contains("`recovery`"), "{err}");
    assert_eq!(
        r.load_vars([(
            "FUSEBOX__X__RECOVERY".into(),
            "{ phases = 3, min_passes = 5 }".into()
        )])
        .unwrap(),
        1
    );
}

#[test]
fn env_names_are_case_insensitive_and_case_twins_are_an_error() {
    let r = Registry::new();
    assert_eq!(
        r.load_vars([("fusebox__shipping__failure_rate".into(), "25".into())])
            .unwrap(),
        1
    );
    let p = r.breaker("shipping", Policy::new()).unwrap().policy();
    assert_eq!(p.settings().failure_rate, Some(25));
    let err = r
        .load_vars([
            ("FUSEBOX__SHIPPING__WINDOW".into(), "20".into()),
            ("fusebox__shipping__window".into(), "30".into()),
        ])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid fusebox configuration: `FUSEBOX__SHIPPING__WINDOW` and \
         `fusebox__shipping__window` both set `window` of breaker `shipping` (names are \
         case-insensitive); remove one"
    );
    assert_eq!(
        r.get("shipping").unwrap().policy().settings().window,
        crate::Window::Count(100),
        "nothing applied"
    );
}

#[cfg(unix)]
#[test]
fn non_utf8_variables_are_skipped_or_reported() {
    use std::os::unix::ffi::OsStringExt;
    let r = Registry::new();
    let bad = OsString::from_vec(vec![0xff, 0xfe]);
    let vars = [
        (OsString::from("LANG_X"), bad.clone()),
        (bad.clone(), OsString::from("1")),
        (
            OsString::from("FUSEBOX__A__FAILURE_RATE"),
            OsString::from("20"),
        ),
    ];
    assert_eq!(r.load_vars_os(vars).unwrap(), 1);
    let err = r
        .load_vars_os([(OsString::from("FUSEBOX__A__WINDOW"), bad)])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid fusebox configuration: `FUSEBOX__A__WINDOW` is not valid Unicode; fusebox \
         variables must be UTF-8"
    );
    // The real environment, whatever it holds, never panics.
    let _ = r.load_env();
}

#[test]
fn a_wrong_typed_window_names_the_key_and_field() {
    let r = Registry::new();
    let err = r.load_toml("[breakers.a]\nwindow = true\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "breaker `a`: `window` = true is not a window: an integer number of calls \
         (`window = 100`) or a duration string (`window = \"30s\"`)"
    );
    let err = r.load_toml("[breakers.a]\nwindow = -5\n").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("breaker `a`: `window` = -5 is not a window"),
        "{err}"
    );
    let err = r
        .load_vars([("FUSEBOX__A__WINDOW".into(), "ten".into())])
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("breaker `a`: `window` = \"ten\" is not a window"),
        "{err}"
    );
}

#[test]
fn error_messages_cut_echoed_input() {
    let r = Registry::new();
    let huge = "9".repeat(1_000_000);
    for err in [
        r.load_toml(&format!("[breakers.a]\nopen_for = \"{huge}\"\n"))
            .unwrap_err(),
        r.load_vars([("FUSEBOX__A__WINDOW".into(), huge.clone())])
            .unwrap_err(),
        r.load_vars([(format!("FUSEBOX__{huge}"), "1".into())])
            .unwrap_err(),
        r.load_toml(&format!("[breakers.a]\n{huge}x = 1\n"))
            .unwrap_err(),
        r.load_toml(&format!("[breakers.\"{huge}\"]\nwindow = true\n"))
            .unwrap_err(),
        r.load_toml(&format!("[breakers.a]\nwindow = \"{huge}\n"))
            .unwrap_err(),
        r.load_toml(&format!("[breakers.\"{huge}\"]\nwindow = 0\n"))
            .unwrap_err(),
    ] {
        let message = err.to_string();
        // The echoed input is cut to a few dozen characters; an unknown field's message also
        // lists every field (about 400 bytes), so 600 bytes leave room for both, not for the input.
        assert!(
            message.len() < 600,
            "{} bytes: {}",
            message.len(),
            &message[..600]
        );
    }
}

/// The TOML reader takes every integer form TOML allows, refuses duplicate keys, and echoes
/// arrays, tables and out-of-range integers back as TOML.
#[test]
fn toml_values_of_every_form_are_read_and_echoed() {
    let r = Registry::new();
    let live = r.breaker("forms", Policy::new()).unwrap();
    r.load_toml("[breakers.forms]\nwindow = 0x64\nmin_calls = 1_0\nfailure_rate = +25\n")
        .unwrap();
    let p = live.policy();
    assert_eq!(p.settings().window, Window::Count(100));
    assert_eq!(p.settings().min_calls, 10);
    assert_eq!(p.settings().failure_rate, Some(25));

    let err = r
        .load_toml("[breakers.forms]\nwindow = 5\nwindow = 6\n")
        .unwrap_err();
    assert!(matches!(err, ConfigError::Syntax(_)), "{err}");
    for (value, shown) in [
        ("[1, \"a\"]", "[1, \"a\"]"),
        ("{ a = 1, b = 2.5 }", "{ a = 1, b = 2.5 }"),
        ("99999999999999999999", "99999999999999999999"),
        ("0o17777777777777777777777", "0o17777777777777777777777"),
    ] {
        let err = r
            .load_toml(&format!("[breakers.forms]\nmin_calls = {value}\n"))
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("breaker `forms`: `min_calls` = {shown} is not")),
            "{err}"
        );
    }
}

#[test]
fn others_is_a_field_of_toml_and_of_the_environment() {
    use crate::policy::Others;
    let r = Registry::new();
    r.load_toml("[breakers.a]\nothers = \"success\"\n").unwrap();
    let a = r.breaker("a", Policy::new()).unwrap().policy();
    assert_eq!(a.settings().others, Others::Success);
    r.load_vars([("FUSEBOX__B__OTHERS".to_owned(), "success".to_owned())])
        .unwrap();
    let b = r.breaker("b", Policy::new()).unwrap().policy();
    assert_eq!(b.settings().others, Others::Success);
    let err = r
        .load_toml("[breakers.a]\nothers = \"maybe\"\n")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "breaker `a`: `others` = \"maybe\" is not `\"ignore\"` or `\"success\"`"
    );
}

/// Configuration cannot name an open-wait function: `open_for_fn`, or `open_for` given a path,
/// is an error that says where a function is set; `open_for` as a duration replaces a declared
/// function; `open_jitter` is read and validated.
#[test]
fn a_function_cannot_be_configured_and_a_duration_replaces_it() {
    fn by_recoveries(open: &crate::OpenContext) -> Duration {
        Duration::from_secs(u64::from(open.failed_recoveries()) + 1)
    }
    let r = Registry::new();
    let declared = Policy::new().open_for_fn(by_recoveries);
    r.breaker("wait", declared).unwrap();
    for toml in [
        "[breakers.wait]\nopen_for_fn = \"waits::by_recoveries\"\n",
        "[breakers.wait]\nopen_for = \"waits::by_recoveries\"\n",
    ] {
        let err = r.load_toml(toml).unwrap_err().to_string();
        assert!(
            err.starts_with("breaker `wait`: ")
                && err.contains("names a function, which configuration cannot")
                && err.contains("`Policy::open_for_fn`"),
            "{err}"
        );
    }
    let err = r
        .load_vars([("FUSEBOX__WAIT__OPEN_FOR_FN".into(), "by_recoveries".into())])
        .unwrap_err();
    assert!(err.to_string().contains("names a function"), "{err}");
    let err = r
        .load_toml("[breakers.wait]\nopen_jitter = 101\n")
        .unwrap_err();
    assert_eq!(range_field(err), (Some("wait".into()), "open_jitter"));
    assert!(
        r.breaker("wait", declared)
            .unwrap()
            .policy()
            .settings()
            .open_for_fn
            .is_some(),
        "nothing was applied"
    );
    r.load_toml("[breakers.wait]\nopen_for = \"30s\"\nopen_jitter = 10\n")
        .unwrap();
    let p = r.breaker("wait", declared).unwrap().policy();
    assert_eq!(
        p.settings().open_for_fn,
        None,
        "a duration replaces the function"
    );
    assert_eq!(p.settings().open_for, Duration::from_secs(30));
    assert_eq!(p.settings().open_jitter, 10);
}

#[test]
fn max_concurrent_takes_a_fixed_or_an_adaptive_bulkhead_in_toml_and_the_environment() {
    use crate::policy::Concurrency;
    let adaptive = |floor, ceiling| Some(Concurrency::Adaptive { floor, ceiling });
    let r = Registry::new();
    r.load_toml("[breakers.a]\nmax_concurrent = \"adaptive(2..200)\"\n[breakers.b]\nmax_concurrent = \"adaptive\"\n")
        .unwrap();
    let a = r.breaker("a", Policy::new().max_concurrent(8)).unwrap();
    assert_eq!(a.policy().settings().max_concurrent, adaptive(2, 200));
    assert_eq!(a.snapshot().concurrency_limit, Some(20), "starts at 20");
    let b = r.breaker("b", Policy::new()).unwrap().policy();
    assert_eq!(b.settings().max_concurrent, adaptive(1, 1000));
    r.load_vars([
        (
            "FUSEBOX__C__MAX_CONCURRENT".to_owned(),
            "adaptive(4..=40)".to_owned(),
        ),
        ("FUSEBOX__D__MAX_CONCURRENT".to_owned(), " 12 ".to_owned()),
    ])
    .unwrap();
    let c = r.breaker("c", Policy::new()).unwrap().policy();
    assert_eq!(c.settings().max_concurrent, adaptive(4, 40));
    // A fixed limit over a declared adaptive one replaces it.
    let d = r
        .breaker("d", Policy::new().adaptive_concurrency(2, 200))
        .unwrap();
    assert_eq!(
        d.policy().settings().max_concurrent,
        Some(Concurrency::Fixed(12))
    );
    assert_eq!(d.snapshot().concurrency_limit, Some(12));

    let err = r
        .load_toml("[breakers.a]\nmax_concurrent = \"adaptive(50..20)\"\n")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "breaker `a`: invalid `max_concurrent` = \"adaptive(50..20)\"; use a value in \
         \"adaptive(floor..ceiling)\" with 1 <= floor <= ceiling <= 1000000, like \"adaptive(2..200)\""
    );
    for bad in ["\"auto\"", "true", "\"adaptive(2)\""] {
        let err = r
            .load_toml(&format!("[breakers.a]\nmax_concurrent = {bad}\n"))
            .unwrap_err();
        assert!(
            err.to_string().starts_with(&format!(
                "breaker `a`: `max_concurrent` = {bad} is not a bulkhead: a whole number of calls in flight"
            )),
            "{err}"
        );
    }
    assert_eq!(
        a.policy().settings().max_concurrent,
        adaptive(2, 200),
        "nothing applied"
    );
}

#[test]
fn quorum_is_a_field_of_toml_and_of_the_environment() {
    use crate::policy::Quorum;
    let r = Registry::new();
    r.load_toml("[breakers.a]\nquorum = \"50%\"\n[breakers.b]\nquorum = 2\n")
        .unwrap();
    let a = r.breaker("a", Policy::new()).unwrap();
    assert_eq!(a.policy().settings().quorum, Some(Quorum::Share(50)));
    let b = r.breaker("b", Policy::new()).unwrap();
    assert_eq!(b.policy().settings().quorum, Some(Quorum::Replicas(2)));
    r.load_vars([("FUSEBOX__C__QUORUM".to_owned(), "3".to_owned())])
        .unwrap();
    let c = r.breaker("c", Policy::new().quorum(5)).unwrap();
    assert_eq!(c.policy().settings().quorum, Some(Quorum::Replicas(3)));
    // `"off"` takes a declared quorum away.
    r.load_vars([("FUSEBOX__C__QUORUM".to_owned(), "off".to_owned())])
        .unwrap();
    assert_eq!(r.get("c").unwrap().policy().settings().quorum, None);
    for bad in [
        "quorum = 1",
        "quorum = \"150%\"",
        "quorum = \"half\"",
        "quorum = true",
    ] {
        let err = r
            .load_toml(&format!("[breakers.a]\n{bad}\n"))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("breaker `a`: `quorum` = ") && err.contains("2..=1000 replicas"),
            "{bad}: {err}"
        );
    }
    assert_eq!(
        r.get("a").unwrap().policy().settings().quorum,
        Some(Quorum::Share(50)),
        "nothing applied"
    );
}

#[test]
fn retry_budget_is_a_field_of_toml_and_of_the_environment() {
    use crate::policy::RetryBudget;
    let r = Registry::new();
    r.load_toml("[breakers.a]\nretry_budget = \"20%\"\n")
        .unwrap();
    let a = r.breaker("a", Policy::new()).unwrap();
    assert_eq!(
        a.policy().settings().retry_budget,
        Some(RetryBudget {
            percent: 20,
            floor: 10
        })
    );
    assert_eq!(
        a.snapshot().retry_budget_balance,
        Some(100),
        "the floor's reserve"
    );
    r.load_vars([("FUSEBOX__B__RETRY_BUDGET".to_owned(), "5%, 0/s".to_owned())])
        .unwrap();
    let b = r.breaker("b", Policy::new().retry_budget(50, 50)).unwrap();
    assert_eq!(
        b.policy().settings().retry_budget,
        Some(RetryBudget {
            percent: 5,
            floor: 0
        })
    );
    // `"off"` takes a declared budget away.
    r.load_vars([("FUSEBOX__B__RETRY_BUDGET".to_owned(), "off".to_owned())])
        .unwrap();
    let b = r.get("b").unwrap();
    assert_eq!(b.policy().settings().retry_budget, None);
    assert_eq!(b.snapshot().retry_budget_balance, None);
    assert!(b.try_retry(), "no budget: every retry is allowed");
    let err = r
        .load_toml("[breakers.a]\nretry_budget = 20\n")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "breaker `a`: `retry_budget` = 20 is not a retry budget like \"20%\" or \"20%, 10/s\" (or \"off\")"
    );
    let err = r
        .load_toml("[breakers.a]\nretry_budget = \"0%, 0/s\"\n")
        .unwrap_err();
    assert!(
        err.to_string().contains("invalid `retry_budget`")
            && err.to_string().contains("rejects every retry"),
        "{err}"
    );
}

#[test]
fn group_is_a_field_of_toml_and_of_the_environment() {
    let r = Registry::new();
    r.load_toml("[breakers.a]\ngroup = \"search\"\n").unwrap();
    let a = r.breaker("a", Policy::new()).unwrap();
    assert_eq!(a.policy().settings().group, Some("search"));
    assert_eq!(r.group("search").unwrap().snapshot().members, 1);
    r.load_vars([("FUSEBOX__B__GROUP".to_owned(), "none".to_owned())])
        .unwrap();
    let b = r.breaker("b", Policy::new().group("search")).unwrap();
    assert_eq!(
        b.policy().settings().group,
        None,
        "`none` takes a declared group away"
    );
    let error = r
        .load_toml("[breakers.c]\ngroup = \"two words\"\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("`group`"), "{error}");
}

#[test]
fn a_group_table_sets_every_group_setting_and_applies_to_members_created_later() {
    let r = Registry::new();
    let n = r
        .load_toml(
            r#"
            [groups.search]
            interval = "5s"
            success_rate = 2.5
            failure_percentage = 70
            min_members = 3
            max_ejection = 30
            ejection = { base = "10s", max = "2m" }
            healthy_span = "1m"
            "#,
        )
        .unwrap();
    assert_eq!(n, 0, "groups are not counted as keys");
    let expected = crate::GroupPolicy::new()
        .interval(Duration::from_secs(5))
        .success_rate(2.5)
        .failure_percentage(70)
        .min_members(3)
        .max_ejection(30)
        .ejection(Duration::from_secs(10), Duration::from_secs(120))
        .healthy_span(Duration::from_secs(60));
    let search = r.group("search").expect("a group's table creates it");
    assert_eq!(search.policy(), expected);
    // A member created afterwards joins the configured group.
    r.breaker("s1", Policy::new().group("search")).unwrap();
    let snapshot = search.snapshot();
    assert_eq!((snapshot.members, snapshot.policy), (1, expected));
}

#[test]
fn group_patches_layer_over_the_declared_settings_and_a_reload_takes_them_back() {
    let r = Registry::new();
    let declared = crate::GroupPolicy::new().max_ejection(40).min_members(2);
    r.configure_group("g", declared).unwrap();
    r.load_toml("[groups.g]\nmax_ejection = 20\n").unwrap();
    r.load_vars([(
        "FUSEBOX_GROUPS__G__EJECTION".to_owned(),
        r#"{ base = "1s", max = "4s" }"#.to_owned(),
    )])
    .unwrap();
    let settings = r.group("g").unwrap().policy().settings();
    assert_eq!(settings.max_ejection, 20, "the file's patch");
    assert_eq!(
        settings.min_members, 2,
        "the declared value of a field not named"
    );
    assert_eq!(
        (settings.ejection_base, settings.ejection_max),
        (Duration::from_secs(1), Duration::from_secs(4)),
        "the environment's patch"
    );
    // Code declaring again keeps the loaded patches on top.
    r.configure_group("g", declared.max_ejection(50).min_members(4))
        .unwrap();
    let settings = r.group("g").unwrap().policy().settings();
    assert_eq!((settings.max_ejection, settings.min_members), (20, 4));
    // A load that no longer names the group takes its patch back.
    r.load_toml("").unwrap();
    r.load_vars([]).unwrap();
    assert_eq!(
        r.group("g").unwrap().policy(),
        declared.max_ejection(50).min_members(4)
    );
}

#[test]
fn group_settings_come_from_the_environment_in_the_breakers_style() {
    let r = Registry::new();
    r.load_vars([
        (
            "FUSEBOX_GROUPS__SEARCH__MAX_EJECTION".to_owned(),
            "25".to_owned(),
        ),
        (
            "fusebox_groups__search__interval".to_owned(),
            "2s".to_owned(),
        ),
        (
            "FUSEBOX_GROUPS__SEARCH__SUCCESS_RATE".to_owned(),
            "0".to_owned(),
        ),
        ("FUSEBOX__S1__GROUP".to_owned(), "search".to_owned()),
    ])
    .unwrap();
    let settings = r.group("search").unwrap().policy().settings();
    assert_eq!(settings.max_ejection, 25);
    assert_eq!(settings.interval, Duration::from_secs(2));
    assert_eq!(settings.success_rate, None, "0 turns the rule off");
    let error = r
        .load_vars([("FUSEBOX_GROUPS__SEARCH".to_owned(), "25".to_owned())])
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid fusebox configuration: `FUSEBOX_GROUPS__SEARCH` must be `FUSEBOX_GROUPS__<NAME>__<FIELD>`"
    );
    let error = r
        .load_vars([
            (
                "FUSEBOX_GROUPS__SEARCH__MIN_MEMBERS".to_owned(),
                "2".to_owned(),
            ),
            (
                "FUSEBOX_GROUPS__search__min_members".to_owned(),
                "3".to_owned(),
            ),
        ])
        .unwrap_err();
    assert!(error.to_string().contains("of group `search`"), "{error}");
}

/// The error of loading `toml` into a registry whose group `g` has settings: the group's
/// settings and the breaker `k`'s policy are unchanged.
fn group_error(toml: &str) -> ConfigError {
    let r = Registry::new();
    let before = r
        .configure_group("g", crate::GroupPolicy::new().max_ejection(40))
        .unwrap();
    let k = r.breaker("k", Policy::new()).unwrap();
    let error = r
        .load_toml(&format!("[breakers.k]\nconsecutive = 3\n\n{toml}"))
        .unwrap_err();
    assert_eq!(before.policy(), crate::GroupPolicy::new().max_ejection(40));
    assert_eq!(
        r.get("k").unwrap().policy(),
        k.policy(),
        "nothing applied: {error}"
    );
    assert!(r.group("other").is_none(), "no group created: {error}");
    error
}

#[test]
fn an_invalid_group_field_is_a_typed_error_naming_the_group_and_the_field_and_nothing_applies() {
    let error = group_error("[groups.g]\nmin_members = 3\n[groups.other]\nmax_ejection = 150\n");
    assert_eq!(
        error,
        ConfigError::Group {
            group: "other".to_owned(),
            field: "max_ejection".to_owned(),
            message: "`max_ejection` = 150 is not a whole number of percent (0..=100; at least \
                      one member may always be open)"
                .to_owned(),
        }
    );
    assert_eq!(
        error.to_string(),
        "group `other`: `max_ejection` = 150 is not a whole number of percent (0..=100; at least \
         one member may always be open)"
    );
    for (toml, field) in [
        ("interval = \"0s\"", "interval"),
        ("success_rate = -1", "success_rate"),
        ("failure_percentage = 101", "failure_percentage"),
        ("min_members = 0", "min_members"),
        ("ejection = { base = \"1m\", max = \"30s\" }", "ejection"),
        ("ejection = { base = \"1m\" }", "ejection"),
    ] {
        let error = group_error(&format!("[groups.g]\n{toml}\n"));
        let ConfigError::Group {
            group,
            field: named,
            message,
        } = &error
        else {
            panic!("{toml}: {error:?}");
        };
        assert_eq!((group.as_str(), named.as_str()), ("g", field), "{toml}");
        assert!(message.starts_with(&format!("`{field}` = ")), "{message}");
    }
}

#[test]
fn an_unknown_group_field_names_the_closest_and_every_field() {
    let error = group_error("[groups.g]\nmax_ejections = 20\n");
    assert_eq!(
        error.to_string(),
        "group `g`: unknown field `max_ejections`; did you mean `max_ejection`? expected one of \
         `interval`, `success_rate`, `failure_percentage`, `min_members`, `max_ejection`, \
         `ejection`, `healthy_span`"
    );
    let ConfigError::Group { field, .. } = error else {
        panic!("{error:?}")
    };
    assert_eq!(field, "max_ejections");
}

#[test]
fn a_group_field_of_the_wrong_type_says_what_it_expects() {
    for (toml, message) in [
        (
            "interval = 10",
            "group `g`: `interval` = 10 is not a duration of at least 1 ms, like \"10s\"",
        ),
        (
            "max_ejection = \"20%\"",
            "group `g`: `max_ejection` = \"20%\" is not a whole number of percent (0..=100; at \
             least one member may always be open)",
        ),
        (
            "ejection = \"30s\"",
            "group `g`: `ejection` = \"30s\" is not a table `{ base = \"30s\", max = \"5m\" }` \
             (`base` at least 1 ms, `max` at least `base`)",
        ),
        (
            "success_rate = \"high\"",
            "group `g`: `success_rate` = \"high\" is not a number of standard deviations, at \
             least 0 (off) and below 1000, like 1.9",
        ),
    ] {
        assert_eq!(
            group_error(&format!("[groups.g]\n{toml}\n")).to_string(),
            message
        );
    }
    assert_eq!(
        Registry::new()
            .load_toml("groups = 3\n")
            .unwrap_err()
            .to_string(),
        "invalid fusebox configuration: `groups` must be tables: `[groups.<name>]`"
    );
    assert_eq!(
        group_error("[groups]\ng = 3\n").to_string(),
        "group `g`: `groups.g` must be a table: `[groups.g]`"
    );
    let error = group_error("[groups.\"two words\"]\nmax_ejection = 20\n").to_string();
    assert!(
        error.starts_with("group `two words`: not a group name a policy can name: invalid `group`"),
        "{error}"
    );
}
