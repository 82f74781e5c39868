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
//! others = "success"     # errors `failure` does not count are successes ("ignore": nothing)
//! max_concurrent = "adaptive(2..200)"  # an integer is a fixed bulkhead
//! retry_budget = "20%, 10/s"  # retries: 20 % of first attempts + 10/s over 10 s ("off": none)
//! hedge_budget = 5       # hedged calls (`hedge`): at most 5 % more calls over 10 s
//! quorum = 2             # a shared key opens for all when 2 replicas failed ("50%", "off")
//! ```
//!
//! Each field left out keeps the value the code declares; each field named goes through the
//! [`Policy`](crate::Policy) setter of the same name, so it follows the same rules as in code. Loading validates
//! every key against the policy the program declares for it before applying any: an error names
//! the key, the field and the allowed range, and nothing changes. Each `load_toml` replaces the
//! overrides of the previous `load_toml` (a key it no longer names returns to its declared
//! policy); each `load_env`/`load_vars` likewise replaces the previous environment load.
//!
//! Environment variables `FUSEBOX__<KEY>__<FIELD>=<value>` say the same (the prefix, key and
//! field are read case-insensitively and lowercased; keys with characters other than letters,
//! digits and `_` need the TOML file). Each value is one value, never a TOML document: an integer,
//! a number, a duration such as `30s`, or for `recovery` an inline table
//! `{ phases = 3, min_passes = 5 }`. A variable with single underscores that ends in a field's
//! name (`FUSEBOX_PAYMENT_OPEN_FOR`) is not read, with a `tracing` warning naming the variable
//! it meant (`FUSEBOX__PAYMENT__OPEN_FOR`).
//!
//! A key that no breaker declares is reported (a warning, and
//! [`Registry::unknown_keys`](crate::Registry::unknown_keys)), not refused, unless
//! [`Registry::set_strict_keys`](crate::Registry::set_strict_keys) is on: then it is a
//! [`ConfigError::UnknownKey`] and nothing of the load applies.
//!
//! The same tables can live in the application's own configuration: as a [`Config`] field of
//! its config struct, read by serde ([`Registry::load_config`](crate::Registry::load_config)),
//! or as the `[fusebox]` table of a larger TOML file
//! ([`Registry::load_toml_table`](crate::Registry::load_toml_table)).
//!
//! # Groups of keys
//!
//! A `[groups.<name>]` table sets the settings of the group of keys `name` (see
//! [`guide::groups`](crate::guide::groups)), one field per
//! [`GroupPolicy`](crate::GroupPolicy) setter, of the same name:
//!
//! ```toml
//! [groups.search]
//! interval = "10s"           # the shortest time between two passes of the relative rules
//! success_rate = 1.9         # standard deviations below the mean (0: the rule is off)
//! failure_percentage = 85    # failures at or above which a member is ejected (0: off)
//! min_members = 5            # qualifying members a pass needs
//! max_ejection = 10          # the most members open at once, in percent (at least one)
//! ejection = { base = "30s", max = "5m" }  # base × times ejected, at most max
//! healthy_span = "5m"        # closed this long, a member's ejection count starts again
//! ```
//!
//! The variables `FUSEBOX_GROUPS__<NAME>__<FIELD>=<value>` say the same
//! (`FUSEBOX_GROUPS__SEARCH__MAX_EJECTION=20`, `FUSEBOX_GROUPS__SEARCH__EJECTION={ base = "10s",
//! max = "2m" }`), read as the breakers' are. Each field named changes that setting only, over
//! the settings code gave the group
//! ([`Registry::configure_group`](crate::Registry::configure_group), or the defaults): the
//! file's patch first, then the environment's; each load replaces its source's previous patches
//! (a group it no longer names returns to the others). A group named here is created if no
//! member created it yet, so its first members find their settings. Each field is checked as it
//! is read (`interval` and `ejection`'s `base` at least 1 ms, `ejection`'s `max` at least its
//! `base`, percentages 0 ..= 100, `min_members` at least 1, `success_rate` at least 0 and below
//! 1000): an error is a [`ConfigError::Group`] naming the group and the field, and nothing of
//! the load applies, neither to the keys nor to the groups.
//!
//! A group's name (a table's, or a breaker's `group = "…"`) is checked first and kept for the
//! process's life only when its load is accepted: a refused load keeps no name it mentions. At
//! most [`MAX_GROUP_NAMES`](crate::limits::MAX_GROUP_NAMES) distinct names are kept; a load
//! that would keep more is refused, naming the key (or the group) and the field.
//!
//! # Fault injection
//!
//! With the feature `chaos` ([`fusebox::chaos`](crate::chaos), for tests and staging), a key's
//! table may declare a fault to inject into its calls (those of functions with `chaos = true`,
//! and of the tower layers and reqwest middlewares that opted in):
//!
//! ```toml
//! [breakers.payment]
//! chaos = { fault = "rejection", rate = 0.1, seed = 7 }    # 10 % of calls rejected as if open
//!
//! [breakers.search]
//! chaos = { fault = "latency", delay = "300ms" }           # every call 300 ms late
//!
//! [breakers.inventory]
//! chaos = { registered = "inventory-timeouts", rate = 0.2 } # a fault registered in code
//! ```
//!
//! `FUSEBOX__PAYMENT__CHAOS={ fault = "rejection", rate = 0.1 }` says the same. A failure or a
//! `Retry-After` answer needs its typed error built in code: register it
//! ([`Injections::register`](crate::chaos::Injections::register)) before loading and name it with
//! `registered`; `rate` and `seed` replace its own. Each field is checked as it is read, and a
//! `registered` name when the load is checked: a mistake is a [`ConfigError::Field`] naming the
//! key and `chaos`, and nothing of the load applies. An accepted load injects its faults (each
//! a WARN event `chaos_switched` named `configuration`) and clears the ones the previous load
//! from the same source injected that it no longer declares, unless code or an operator
//! replaced them since; a key's fault is the last one injected, whoever injected it. Without
//! the feature `chaos`, a `chaos` field is a [`ConfigError::Field`] that says the feature is
//! needed, so a file meant for a staging build is never silently ignored.
//!
//! ```
//! # #[cfg(feature = "chaos")] {
//! let registry = fusebox::Registry::new();
//! registry.breaker("payment", fusebox::Policy::new()).unwrap();
//! registry.load_toml("[breakers.payment]\nchaos = { fault = \"rejection\", rate = 0.1 }\n").unwrap();
//! let fault = registry.chaos().fault("payment").unwrap();
//! assert_eq!(fault.to_string(), "rejections on 10 % of calls");
//! registry.load_toml("").unwrap();
//! assert!(registry.chaos().fault("payment").is_none(), "the file no longer declares it");
//! # }
//! ```

use std::fmt;

use crate::policy::PolicyError;

/// The longest piece of input an error message repeats.
const ECHO: usize = 40;

/// `text` cut to a few dozen characters for an error message.
pub(crate) fn echo(text: &str) -> String {
    cut(text, ECHO)
}

/// `text` cut to `max` characters, with `…` when something was left out.
fn cut(text: &str, max: usize) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(max).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

/// Configuration that could not be loaded; nothing was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The text is not TOML of the expected shape (`[breakers.<key>]` and `[groups.<name>]`
    /// tables), or an environment variable's name or encoding is wrong.
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
    /// A group's table (`[groups.<name>]`, or a `FUSEBOX_GROUPS__<NAME>__<FIELD>` variable) has
    /// an unknown field, a value of the wrong type or out of its range, or the group's name is
    /// not one a policy can name.
    Group {
        /// The group's name.
        group: String,
        /// The field at fault (empty when the name itself is).
        field: String,
        /// What is wrong and how to fix it, naming the field.
        message: String,
    },
    /// Under [`Registry::set_strict_keys`](crate::Registry::set_strict_keys), a configured key
    /// that no breaker declares (a misspelt `[breakers.paymnet]`), with the closest declared keys.
    UnknownKey(crate::key::UnknownKey),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Syntax(m) => write!(f, "invalid fusebox configuration: {m}"),
            ConfigError::Field { key, message } => write!(f, "breaker `{key}`: {message}"),
            ConfigError::Range(e) => fmt::Display::fmt(e, f),
            ConfigError::Group { group, message, .. } => write!(f, "group `{group}`: {message}"),
            ConfigError::UnknownKey(unknown) => write!(
                f,
                "{unknown} (strict keys: a configured key must be declared; declare a dynamic \
                 key with `Registry::declare` before loading)"
            ),
        }
    }
}

/// [`Range`](ConfigError::Range)'s source is its [`PolicyError`] (whose `key` and `field` say
/// what to fix); its message is that error's, so a log line with `{e}` needs nothing else.
impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::Range(e) => Some(e),
            ConfigError::Syntax(_)
            | ConfigError::Field { .. }
            | ConfigError::Group { .. }
            | ConfigError::UnknownKey(_) => None,
        }
    }
}

mod embed;
mod fields;
mod layers;

pub use embed::Config;

#[cfg(test)]
use fields::field_names;
#[cfg(feature = "chaos")]
pub(crate) use fields::{Declared, What};
pub(crate) use layers::{Loaded, Source, toml_layer, toml_table_layer, vars_layer, vars_os_layer};

#[cfg(test)]
mod embed_tests;
#[cfg(test)]
mod names_tests;
#[cfg(test)]
mod strict_tests;
#[cfg(test)]
mod tests;
