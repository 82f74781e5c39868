//! Loading operator overrides into a [`Registry`]: from TOML text, the environment, or pairs.
//!
//! Parsing text into per-key [`PolicyPatch`](crate::PolicyPatch)es is [`crate::config`]'s job;
//! this file only hands each parsed layer to [`Registry::load_layer`], which validates every key
//! against its declared policy before applying any.

use std::ffi::OsString;

use super::{Registry, Source};
use crate::config::{self, ConfigError};

impl Registry {
    /// Loads `[breakers.<key>]` overrides and `[groups.<name>]` group settings from TOML text;
    /// returns how many keys were configured (the groups are not counted).
    ///
    /// Replaces every override the previous `load_toml` set (a key this text does not name
    /// returns to its declared policy, with the environment's and `configure`'s overrides still
    /// applied on top; a group it does not name returns to the settings
    /// [`configure_group`](Registry::configure_group) gave it, or the defaults, with the
    /// environment's on top). A group's settings apply to the group now (a group the text
    /// names is created if absent, so its first members find them; see [`crate::config`] for the
    /// fields). A key no breaker declares is not an error (a dynamic key may claim it later): it
    /// is reported with a `tracing` warning naming the closest declared keys, and by
    /// [`Registry::unknown_keys`].
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the text is not TOML of this shape, a field is unknown or of the
    /// wrong type, or a value is out of range for the key's declared policy
    /// ([`ConfigError::Group`] for a group's table); nothing changes then, neither in the keys
    /// nor in the groups.
    #[cfg_attr(docsrs, doc(cfg(feature = "config")))]
    pub fn load_toml(&self, text: &str) -> Result<usize, ConfigError> {
        let loaded = config::toml_layer(text)?;
        self.load_layer(Source::File, loaded)
    }

    /// Strict keys: when `strict`, a load ([`load_toml`](Registry::load_toml),
    /// [`load_toml_table`](Registry::load_toml_table), [`load_config`](Registry::load_config),
    /// [`load_env`](Registry::load_env), [`load_vars`](Registry::load_vars)) that configures a
    /// key no breaker declares is refused with [`ConfigError::UnknownKey`] naming it and the
    /// closest declared keys, and nothing of it applies, where by default such a key is only
    /// reported ([`unknown_keys`](Registry::unknown_keys) and a `tracing` warning) because a
    /// dynamic key may claim it later. Declared keys are those of `#[circuit_breaker]` with a
    /// literal key, of the tower layers and reqwest middlewares built for this registry, of
    /// [`declare`](Registry::declare), and every key a breaker exists for.
    ///
    /// ```
    /// use fusebox::{Policy, Registry, config::ConfigError};
    ///
    /// let registry = Registry::new();
    /// registry.declare("payment", Policy::new());
    /// registry.set_strict_keys(true);
    /// let error = registry.load_toml("[breakers.paymnet]\nfailure_rate = 30\n").unwrap_err();
    /// assert!(matches!(error, ConfigError::UnknownKey(_)));
    /// assert!(error.to_string().starts_with("no breaker `paymnet` is declared; did you mean `payment`?"));
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "config")))]
    pub fn set_strict_keys(&self, strict: bool) {
        self.strict
            .store(strict, std::sync::atomic::Ordering::Release);
    }

    /// Loads the `[<table>.breakers.<key>]` overrides and `[<table>.groups.<name>]` group
    /// settings of a larger TOML document, the application's own configuration file, whose
    /// other tables are the application's: as [`load_toml`](Registry::load_toml) loads a
    /// document of its own (the same source: each replaces what the previous one set).
    ///
    /// ```
    /// # fn main() -> Result<(), fusebox::config::ConfigError> {
    /// let text = r#"
    ///     [shop]
    ///     currency = "EUR"
    ///
    ///     [fusebox.breakers.payment]
    ///     failure_rate = 30
    /// "#;
    /// let registry = fusebox::Registry::new();
    /// assert_eq!(registry.load_toml_table(text, "fusebox")?, 1);
    /// let payment = registry.breaker("payment", fusebox::Policy::new()).unwrap();
    /// assert_eq!(payment.policy().settings().failure_rate, Some(30));
    /// // `load_toml` reads a document of fusebox's own, and refuses the application's tables.
    /// assert!(registry.load_toml(text).is_err());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`load_toml`](Registry::load_toml)'s, for the table; a
    /// [`ConfigError::Syntax`] when the document is not TOML, has no table `table`, or has
    /// one that is not a table. Nothing changes then.
    #[cfg_attr(docsrs, doc(cfg(feature = "config")))]
    pub fn load_toml_table(&self, text: &str, table: &str) -> Result<usize, ConfigError> {
        let loaded = config::toml_table_layer(text, table)?;
        self.load_layer(Source::File, loaded)
    }

    /// Loads the overrides of a [`Config`](config::Config), fusebox's field of an
    /// application's own configuration (read with serde), as [`load_toml`](Registry::load_toml)
    /// loads a document (the same source: each replaces what the previous one set); every key
    /// is validated against the policy the program declares for it, and nothing applies
    /// unless all of it does. See [`Config`](config::Config) for an example.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the key and the field when a value is out of range for the
    /// key's declared policy (or a group's name is one too many); nothing changes then.
    #[cfg_attr(docsrs, doc(cfg(feature = "config")))]
    pub fn load_config(&self, config: &config::Config) -> Result<usize, ConfigError> {
        self.load_layer(Source::File, config.loaded())
    }

    /// Loads overrides from `FUSEBOX__<KEY>__<FIELD>` variables of this process's environment,
    /// and group settings from `FUSEBOX_GROUPS__<NAME>__<FIELD>` variables.
    ///
    /// Variables that are not valid Unicode are skipped, unless their name starts with one
    /// of the prefixes, which is an error. Replaces every override the previous environment load set.
    ///
    /// # Errors
    ///
    /// As [`load_vars`](Registry::load_vars), and when a fusebox variable is not valid Unicode.
    #[cfg_attr(docsrs, doc(cfg(feature = "config")))]
    pub fn load_env(&self) -> Result<usize, ConfigError> {
        self.load_vars_os(std::env::vars_os())
    }

    /// [`load_env`](Registry::load_env) over the given variables.
    pub(crate) fn load_vars_os(
        &self,
        vars: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Result<usize, ConfigError> {
        let loaded = config::vars_os_layer(vars)?;
        self.load_layer(Source::Env, loaded)
    }

    /// Loads overrides from `FUSEBOX__<KEY>__<FIELD>` pairs and group settings from
    /// `FUSEBOX_GROUPS__<NAME>__<FIELD>` pairs (what [`load_env`](Registry::load_env) reads from
    /// the environment). The prefix, key (or group) and field are case-insensitive; two names
    /// that differ only in case are an error.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when a name is not `FUSEBOX__<KEY>__<FIELD>` (or
    /// `FUSEBOX_GROUPS__<NAME>__<FIELD>`), two names differ only in case, a field is unknown, or
    /// a value does not parse or is out of range; nothing changes then.
    #[cfg_attr(docsrs, doc(cfg(feature = "config")))]
    pub fn load_vars(
        &self,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<usize, ConfigError> {
        let loaded = config::vars_layer(vars)?;
        self.load_layer(Source::Env, loaded)
    }
}
