//! Unit tests of fusebox's settings inside an application's configuration: [`Config`] read by
//! serde, and a `[fusebox]` table of a larger TOML file.

use super::*;
use crate::policy::Policy;
use crate::registry::Registry;

const APP: &str = r#"
[shop]
currency = "EUR"

[fusebox.breakers.payment]
failure_rate = 30
open_for = "30s"
recovery = { phases = 3, min_passes = 5 }

[fusebox.groups.search]
max_ejection = 20
"#;

/// The same table read three ways (a `[fusebox]` table of the app's file, a `Config` from that
/// file through serde, a `Config` from JSON) applies the same policies as `load_toml`.
#[test]
fn a_table_of_the_app_s_file_and_a_serde_field_load_as_load_toml_does() {
    let own = Registry::new();
    own.load_toml(
        "[breakers.payment]\nfailure_rate = 30\nopen_for = \"30s\"\n\
         recovery = { phases = 3, min_passes = 5 }\n[groups.search]\nmax_ejection = 20\n",
    )
    .unwrap();
    #[derive(serde::Deserialize)]
    struct App {
        fusebox: Config,
    }
    let from_toml: App = toml::from_str(APP).unwrap();
    let from_json: Config = serde_json::from_str(
        r#"{"breakers": {"payment": {"failure_rate": 30, "open_for": "30s",
            "recovery": {"phases": 3, "min_passes": 5}}},
            "groups": {"search": {"max_ejection": 20}}}"#,
    )
    .unwrap();
    let table = Registry::new();
    table.load_toml_table(APP, "fusebox").unwrap();
    let serde_toml = Registry::new();
    serde_toml.load_config(&from_toml.fusebox).unwrap();
    let serde_json = Registry::new();
    serde_json.load_config(&from_json).unwrap();
    let expected = own.breaker("payment", Policy::new()).unwrap().policy();
    for r in [&table, &serde_toml, &serde_json] {
        assert_eq!(
            r.breaker("payment", Policy::new()).unwrap().policy(),
            expected
        );
        assert_eq!(
            r.group("search").unwrap().policy().settings().max_ejection,
            20
        );
    }
    // `load_toml` still refuses the app's tables.
    let error = own.load_toml(APP).unwrap_err().to_string();
    assert!(
        error.contains("unknown top-level table `fusebox`"),
        "{error}"
    );
    assert!(
        error.contains("`Registry::load_toml_table(text, \"fusebox\")`"),
        "{error}"
    );
}

/// A missing or misshapen `[fusebox]` table is an error that says what to write; so is a
/// mistake inside it; nothing applies.
#[test]
fn a_missing_table_or_a_mistake_in_it_is_refused_and_nothing_applies() {
    let r = Registry::new();
    r.load_toml_table(APP, "fusebox").unwrap();
    let error = r.load_toml_table("[shop]\n", "fusebox").unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid fusebox configuration: no `[fusebox]` table; write the overrides in \
         `[fusebox.breakers.<key>]` and `[fusebox.groups.<name>]` tables (an empty `[fusebox]` \
         loads none)"
    );
    assert!(r.load_toml_table("fusebox = 3\n", "fusebox").is_err());
    let error = r
        .load_toml_table(
            "[fusebox.breakers.payment]\nfailure_rate = 150\n",
            "fusebox",
        )
        .unwrap_err();
    assert!(matches!(error, ConfigError::Range(_)), "{error:?}");
    let payment = r.breaker("payment", Policy::new()).unwrap();
    assert_eq!(
        payment.policy().settings().failure_rate,
        Some(30),
        "nothing applied"
    );
    // An empty table loads nothing: the previous file load is taken back.
    assert_eq!(r.load_toml_table("[fusebox]\n", "fusebox").unwrap(), 0);
    assert_eq!(
        r.get("payment").unwrap().policy().settings().failure_rate,
        Some(50)
    );
    let error = serde_json::from_str::<Config>(r#"{"breakers": {"payment": {"window": true}}}"#)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("breaker `payment`: `window` = true is not a window"),
        "{error}"
    );
    assert_eq!(r.load_config(&Config::default()).unwrap(), 0);
}
