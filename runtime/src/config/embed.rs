//! fusebox's settings inside an application's own configuration: [`Config`], a
//! `serde::Deserialize` type an application embeds as one field of its configuration struct.

use std::fmt;

use super::{ConfigError, Loaded, toml_layer};

/// fusebox's overrides as one field of an application's own configuration, read by any serde
/// format (`toml`, `serde_json`, `figment`, `config`, …): the same `breakers` and `groups`
/// tables [`Registry::load_toml`](crate::Registry::load_toml) reads, under whatever name the
/// application gives the field.
///
/// Deserializing checks each table and field as `load_toml` does (an unknown field, a value of
/// the wrong type or shape is a deserialization error naming the key and the field);
/// [`Registry::load_config`](crate::Registry::load_config) then validates every key against the
/// policy the program declares for it and applies all or nothing.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// #[derive(serde::Deserialize)]
/// struct AppConfig {
///     port: u16,
///     #[serde(default)]
///     fusebox: fusebox::config::Config,
/// }
///
/// let app: AppConfig = toml::from_str(
///     r#"
///     port = 8080
///
///     [fusebox.breakers.payment]
///     failure_rate = 30
///     open_for = "30s"
///
///     [fusebox.groups.search]
///     max_ejection = 20
///     "#,
/// )?;
/// let registry = fusebox::Registry::new();
/// assert_eq!(registry.load_config(&app.fusebox)?, 1, "one key configured");
/// let payment = registry.breaker("payment", fusebox::Policy::new())?;
/// assert_eq!(payment.policy().settings().failure_rate, Some(30));
/// assert_eq!(app.port, 8080);
///
/// // JSON (or any serde format) reads the same fields.
/// let json = r#"{ "breakers": { "payment": { "failure_rate": 150 } } }"#;
/// let config: fusebox::config::Config = serde_json::from_str(json)?;
/// let error = registry.load_config(&config).unwrap_err();
/// assert!(error.to_string().contains("invalid `failure_rate` = 150"), "{error}");
/// assert_eq!(payment.policy().settings().failure_rate, Some(30), "nothing applied");
///
/// // A mistake in the table is the application's deserialization error.
/// let error = serde_json::from_str::<fusebox::config::Config>(
///     r#"{ "breakers": { "payment": { "falure_rate": 30 } } }"#,
/// )
/// .unwrap_err();
/// assert!(error.to_string().contains("did you mean `failure_rate`?"), "{error}");
/// # Ok(())
/// # }
/// ```
///
/// The default (`#[serde(default)]`, or [`Config::default`]) configures nothing: loading it
/// takes back what the previous file load set.
#[derive(Default, Clone)]
pub struct Config {
    loaded: Loaded,
}

impl Config {
    /// The overrides of `text`, a TOML document of `[breakers.<key>]` and `[groups.<name>]`
    /// tables (what [`Registry::load_toml`](crate::Registry::load_toml) reads).
    ///
    /// # Errors
    ///
    /// As `load_toml`'s, for the shape and the types of the fields.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        Ok(Config {
            loaded: toml_layer(text)?,
        })
    }

    /// What loading it brings (a copy: loading replaces the previous load's).
    pub(crate) fn loaded(&self) -> Loaded {
        self.loaded.clone()
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("breakers", &self.loaded.breakers.len())
            .field("groups", &self.loaded.groups.len())
            .finish_non_exhaustive()
    }
}

/// Reads any serde format's map of `breakers` and `groups` tables, checked as `load_toml`
/// checks a document.
impl<'de> serde::Deserialize<'de> for Config {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let table = toml::Table::deserialize(deserializer)?;
        let text = toml::to_string(&table).map_err(D::Error::custom)?;
        Config::from_toml(&text).map_err(D::Error::custom)
    }
}
