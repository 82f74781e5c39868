//! Loading operator overrides into a [`Registry`]: from TOML text, the environment, or pairs.
//!
//! Parsing text into per-key [`PolicyPatch`](crate::PolicyPatch)es is [`crate::config`]'s job;
//! this file only hands each parsed layer to [`Registry::load_layer`], which validates every key
//! against its declared policy before applying any.

use std::ffi::OsString;

use super::{Registry, Source};
use crate::config::{self, ConfigError};

impl Registry {
    /// Loads `[breakers.<key>]` overrides from TOML text; returns how many keys were configured.
    ///
    /// Replaces every override the previous `load_toml` set (a key this text does not name
    /// returns to its declared policy, with the environment's and `configure`'s overrides still
    /// applied on top). A key no breaker declares is not an error (a dynamic key may claim it
    /// later): it is reported with a `tracing` warning naming the closest declared keys, and by
    /// [`Registry::unknown_keys`].
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the text is not TOML of this shape, a field is unknown or of the
    /// wrong type, or a value is out of range for the key's declared policy; nothing changes then.
    #[cfg_attr(docsrs, doc(cfg(feature = "config")))]
    pub fn load_toml(&self, text: &str) -> Result<usize, ConfigError> {
        let layer = config::toml_layer(text)?;
        self.load_layer(Source::File, layer)
            .map_err(ConfigError::Range)
    }

    /// Loads overrides from `FUSEBOX__<KEY>__<FIELD>` variables of this process's environment.
    ///
    /// Variables that are not valid Unicode are skipped, unless their name starts with the
    /// prefix, which is an error. Replaces every override the previous environment load set.
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
        let layer = config::vars_os_layer(vars)?;
        self.load_layer(Source::Env, layer)
            .map_err(ConfigError::Range)
    }

    /// Loads overrides from `FUSEBOX__<KEY>__<FIELD>` pairs (what [`load_env`](Registry::load_env)
    /// reads from the environment). The prefix, key and field are case-insensitive; two names
    /// that differ only in case are an error.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when a name is not `FUSEBOX__<KEY>__<FIELD>`, two names differ only in
    /// case, a field is unknown, or a value does not parse or is out of range; nothing changes then.
    #[cfg_attr(docsrs, doc(cfg(feature = "config")))]
    pub fn load_vars(
        &self,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<usize, ConfigError> {
        let layer = config::vars_layer(vars)?;
        self.load_layer(Source::Env, layer)
            .map_err(ConfigError::Range)
    }
}
