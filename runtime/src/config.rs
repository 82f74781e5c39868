//! Operator overrides without recompiling: per-key policy patches from TOML or the environment.
//!
//! ```toml
//! [breakers.payment]
//! failure_rate = 30
//! open_for = "30s"
//!
//! [breakers.search]
//! window = "1m"          # a string is a time window, an integer a count window
//! slow = "800ms"
//! slow_rate = 60
//! recovery = { phases = 3, min_passes = 5 }
//! ```
//!
//! Each field left out keeps the value the code declares. Loading validates every key before
//! applying any: an error names the key, the field and the allowed range, and nothing changes.
//! Environment variables `FUSEBOX__<KEY>__<FIELD>=<value>` say the same (the key and field are
//! lowercased; keys with characters other than letters, digits and `_` need the TOML file).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use crate::policy::{Policy, PolicyError};
use crate::registry::{Override, Registry};

/// A window as written in configuration: an integer (count) or a duration string (time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum WindowSetting {
    /// The last N calls.
    Count(u32),
    /// The calls of the last span, e.g. `"30s"`.
    Time(#[serde(with = "humantime_serde")] Duration),
}

/// Progressive recovery as written in configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecoverySetting {
    /// Number of phases.
    pub phases: u32,
    /// Calls each phase must record before it is judged.
    pub min_passes: u32,
}

/// The fields of a [`Policy`] an operator may override; each one left out keeps the declared value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // each field is the `Policy` setter of the same name
pub struct PolicyPatch {
    pub window: Option<WindowSetting>,
    pub min_calls: Option<u32>,
    pub failure_rate: Option<u8>,
    #[serde(default, with = "humantime_serde")]
    pub slow: Option<Duration>,
    pub slow_rate: Option<u8>,
    pub consecutive: Option<u32>,
    #[serde(default, with = "humantime_serde")]
    pub open_for: Option<Duration>,
    pub open_backoff: Option<f64>,
    #[serde(default, with = "humantime_serde")]
    pub open_max: Option<Duration>,
    pub half_open: Option<u32>,
    #[serde(default, with = "humantime_serde")]
    pub half_open_lease: Option<Duration>,
    pub recovery: Option<RecoverySetting>,
    pub max_concurrent: Option<u32>,
}

impl PolicyPatch {
    /// `declared` with this patch's fields written over it.
    pub fn apply(&self, declared: Policy) -> Policy {
        let mut p = declared;
        match self.window {
            Some(WindowSetting::Count(n)) => p = p.window(n),
            Some(WindowSetting::Time(span)) => p = p.time_window(span),
            None => {}
        }
        if let Some(v) = self.min_calls {
            p = p.min_calls(v);
        }
        if let Some(v) = self.failure_rate {
            p = p.failure_rate(v);
        }
        if let Some(v) = self.slow {
            p = p.slow(v);
        }
        if let Some(v) = self.slow_rate {
            p = p.slow_rate(v);
        }
        if let Some(v) = self.consecutive {
            p = p.consecutive(v);
        }
        if let Some(v) = self.open_for {
            p = p.open_for(v);
        }
        if let Some(v) = self.open_backoff {
            p = p.open_backoff(v);
        }
        if let Some(v) = self.open_max {
            p = p.open_max(v);
        }
        if let Some(v) = self.half_open {
            p = p.half_open(v);
        }
        if let Some(v) = self.half_open_lease {
            p = p.half_open_lease(v);
        }
        if let Some(r) = self.recovery {
            p = p.progressive(r.phases, r.min_passes);
        }
        if let Some(v) = self.max_concurrent {
            p = p.max_concurrent(v);
        }
        p
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    breakers: BTreeMap<String, toml::Table>,
}

/// Configuration that could not be loaded; nothing was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The text is not TOML of the expected shape (`[breakers.<key>]` tables).
    Syntax(String),
    /// A key's table has an unknown field or a value of the wrong type.
    Field {
        /// The breaker key.
        key: String,
        /// What is wrong, naming the field.
        message: String,
    },
    /// A value is outside its allowed range.
    Range(PolicyError),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Syntax(m) => write!(f, "invalid fusebox configuration: {m}"),
            ConfigError::Field { key, message } => write!(f, "breaker `{key}`: {message}"),
            ConfigError::Range(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl std::error::Error for ConfigError {}

fn patch_of(key: &str, table: toml::Table) -> Result<PolicyPatch, ConfigError> {
    PolicyPatch::deserialize(toml::Value::Table(table)).map_err(|e| ConfigError::Field {
        key: key.to_owned(),
        message: e.to_string().trim().replace('\n', " "),
    })
}

impl Registry {
    /// Loads `[breakers.<key>]` overrides from TOML text; returns how many keys were configured.
    pub fn load_toml(&self, text: &str) -> Result<usize, ConfigError> {
        let file: File =
            toml::from_str(text).map_err(|e| ConfigError::Syntax(e.message().to_owned()))?;
        let mut all = Vec::new();
        for (key, table) in file.breakers {
            let patch = patch_of(&key, table)?;
            all.push((key, Override::Patch(patch)));
        }
        self.apply_overrides(all).map_err(ConfigError::Range)
    }

    /// Loads overrides from `FUSEBOX__<KEY>__<FIELD>` variables of this process's environment.
    pub fn load_env(&self) -> Result<usize, ConfigError> {
        self.load_vars(std::env::vars())
    }

    /// Loads overrides from `FUSEBOX__<KEY>__<FIELD>` pairs (what [`load_env`](Registry::load_env)
    /// reads from the environment).
    pub fn load_vars(
        &self,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<usize, ConfigError> {
        let mut tables: BTreeMap<String, toml::Table> = BTreeMap::new();
        for (name, raw) in vars {
            let Some(rest) = name.strip_prefix("FUSEBOX__") else {
                continue;
            };
            let Some((key, field)) = rest.split_once("__") else {
                return Err(ConfigError::Syntax(format!(
                    "`{name}` must be `FUSEBOX__<KEY>__<FIELD>`"
                )));
            };
            let value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or(toml::Value::String(raw));
            tables
                .entry(key.to_lowercase())
                .or_default()
                .insert(field.to_lowercase(), value);
        }
        let mut all = Vec::new();
        for (key, table) in tables {
            let patch = patch_of(&key, table)?;
            all.push((key, Override::Patch(patch)));
        }
        self.apply_overrides(all).map_err(ConfigError::Range)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Recovery, Window};

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
        assert_eq!(p.window_kind(), Window::Time(Duration::from_secs(60)));
        assert_eq!(
            p.min_calls_len(),
            5,
            "fields left out keep the declared value"
        );
        assert_eq!(p.slow_threshold(), Some(Duration::from_millis(800)));
        assert_eq!(
            p.recovery_mode(),
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
            (payment.failure_rate_percent(), payment.window_len()),
            (Some(30), Some(50))
        );
        assert_eq!(payment.open_duration(), Duration::from_secs(30));
    }

    #[test]
    fn invalid_configuration_names_key_and_field_and_applies_nothing() {
        let r = Registry::new();
        let b = r.breaker("a", Policy::new()).unwrap();
        let err = r
            .load_toml(
                "[breakers.a]\nfailure_rate = 30\n[breakers.b]\nmin_calls = 500\nwindow = 100\n",
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "breaker `b`: invalid `min_calls` = 500; use a value in 1..=100 (at most `window`)"
        );
        assert_eq!(
            b.policy().failure_rate_percent(),
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
        assert_eq!(p.failure_rate_percent(), Some(25));
        assert_eq!(p.open_duration(), Duration::from_secs(120));
    }
}
