//! Shadow policies in configuration: a `shadow` text or a `[breakers.<key>.shadow.<name>]` table
//! per shadow, read by the policy text grammar, and errors that name the key, the shadow and its
//! field.

use super::*;

#[test]
fn a_table_per_shadow_and_a_text_read_the_same() {
    let r = Registry::new();
    let b = r.breaker("payment", Policy::new()).unwrap();
    r.load_toml(
        "[breakers.payment.shadow.tight]\nwindow = 20\nfailure_rate = 30\nopen_for = \"5s\"\n\
         [breakers.payment.shadow.loose]\nwindow = 200\n",
    )
    .unwrap();
    let live = r.get("payment").unwrap();
    let shadows = live.snapshot().shadows;
    let names: Vec<&str> = shadows.iter().map(|s| s.name).collect();
    assert_eq!(names.len(), 2);
    assert!(
        names.contains(&"tight") && names.contains(&"loose"),
        "{names:?}"
    );
    let tight = shadows.iter().find(|s| s.name == "tight").unwrap();
    assert_eq!(tight.policy.settings().window, Window::Count(20));
    assert_eq!(tight.policy.settings().open_for, Duration::from_secs(5));
    assert_eq!(
        b.snapshot().shadows.len(),
        2,
        "a handle from before the load follows it"
    );

    r.load_toml("[breakers.payment]\nshadow = \"tight: window = 20, failure_rate = 30\"\n")
        .unwrap();
    let shadows = r.get("payment").unwrap().snapshot().shadows;
    assert_eq!((shadows.len(), shadows[0].name), (1, "tight"));

    r.load_toml("[breakers.payment]\nshadow = \"none\"\n")
        .unwrap();
    assert!(r.get("payment").unwrap().snapshot().shadows.is_empty());
}

#[test]
fn a_bad_shadow_names_the_key_the_shadow_and_the_field_and_applies_nothing() {
    let r = Registry::new();
    r.breaker("payment", Policy::new()).unwrap();
    let err = r
        .load_toml("[breakers.payment.shadow.tight]\nwindow = 20\nfailure_rate = 300\n")
        .unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(&err, ConfigError::Field { key, .. } if key == "payment"),
        "{err}"
    );
    assert!(
        text.contains("`shadow` `tight`: field `failure_rate`"),
        "{text}"
    );
    assert!(text.contains("a percentage from 1 to 100"), "{text}");
    assert!(r.get("payment").unwrap().snapshot().shadows.is_empty());
    let err = r.load_toml("[breakers.payment]\nshadow = 3\n").unwrap_err();
    assert!(
        err.to_string().contains("shadow policies: a text like"),
        "{err}"
    );
}
