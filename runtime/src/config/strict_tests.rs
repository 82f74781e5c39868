//! Unit tests of misconfiguration that is said, not passed over: a variable with single
//! underscores gets a warning with the right name, and strict keys refuse a misspelt key.

use super::*;
use crate::policy::Policy;
use crate::registry::Registry;

/// The text of the `tracing` events `f` emits on this thread (through a file of its own).
fn events_of(f: impl FnOnce()) -> String {
    let path = std::env::temp_dir().join(format!("fusebox-strict-{}.log", std::process::id()));
    let file = std::fs::File::create(&path).unwrap();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(std::sync::Mutex::new(file))
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    text
}

#[test]
fn a_variable_with_single_underscores_is_named_with_the_right_name() {
    for (written, meant) in [
        ("FUSEBOX_PAYMENT_OPEN_FOR", "FUSEBOX__PAYMENT__OPEN_FOR"),
        ("fusebox_payment_open_for", "FUSEBOX__PAYMENT__OPEN_FOR"),
        (
            "FUSEBOX_MY_SERVICE_HALF_OPEN_LEASE",
            "FUSEBOX__MY_SERVICE__HALF_OPEN_LEASE",
        ),
        (
            "FUSEBOX_PAYMENT__FAILURE_RATE",
            "FUSEBOX__PAYMENT__FAILURE_RATE",
        ),
        (
            "FUSEBOX_GROUPS_SEARCH_MAX_EJECTION",
            "FUSEBOX_GROUPS__SEARCH__MAX_EJECTION",
        ),
    ] {
        assert_eq!(
            layers::near_miss(written).as_deref(),
            Some(meant),
            "{written}"
        );
    }
    for other in [
        "FUSEBOX_LOG",
        "FUSEBOXES_A_OPEN_FOR",
        "PATH",
        "FUSEBOX_OPEN_FOR",
    ] {
        assert_eq!(layers::near_miss(other), None, "{other}");
    }
    let r = Registry::new();
    let events = events_of(|| {
        let vars = [("FUSEBOX_PAYMENT_OPEN_FOR".to_owned(), "30s".to_owned())];
        assert_eq!(r.load_vars(vars).unwrap(), 0, "still not read");
    });
    assert!(
        events.contains(
            "`FUSEBOX_PAYMENT_OPEN_FOR` is not read: fusebox's variables separate the key and \
             the field with two underscores; did you mean `FUSEBOX__PAYMENT__OPEN_FOR`?"
        ),
        "{events}"
    );
}

#[test]
fn strict_keys_refuse_a_misspelt_key_and_apply_nothing() {
    let r = Registry::new();
    r.declare("payment", Policy::new());
    let lenient = "[breakers.payment]\nfailure_rate = 30\n[breakers.paymnet]\nhalf_open = 2\n";
    assert_eq!(
        r.load_toml(lenient).unwrap(),
        2,
        "by default, a warning only"
    );
    r.load_toml("").unwrap();
    r.set_strict_keys(true);
    let error = r.load_toml(lenient).unwrap_err();
    let ConfigError::UnknownKey(unknown) = &error else {
        panic!("{error:?}")
    };
    assert_eq!(
        (unknown.key.as_str(), unknown.closest.as_slice()),
        ("paymnet", &["payment".to_owned()][..])
    );
    assert_eq!(
        error.to_string(),
        "no breaker `paymnet` is declared; did you mean `payment`? (strict keys: a configured \
         key must be declared; declare a dynamic key with `Registry::declare` before loading)"
    );
    let payment = r.breaker("payment", Policy::new()).unwrap();
    assert_eq!(
        payment.policy().settings().failure_rate,
        Some(50),
        "nothing applied"
    );
    let vars = [("FUSEBOX__PAYMNET__HALF_OPEN".to_owned(), "2".to_owned())];
    assert!(matches!(r.load_vars(vars), Err(ConfigError::UnknownKey(_))));
    // A declared key, or one a breaker exists for, loads.
    r.breaker("search", Policy::new()).unwrap();
    r.load_toml("[breakers.payment]\nfailure_rate = 30\n[breakers.search]\nhalf_open = 2\n")
        .unwrap();
    assert_eq!(payment.policy().settings().failure_rate, Some(30));
}
