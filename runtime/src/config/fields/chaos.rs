//! `chaos`: a fault injection a key's table declares (feature `chaos`), read into a
//! [`Declared`] that the load turns into a [`Fault`](crate::chaos::Fault) once it is accepted.
//! Without the feature the field is an error that says so.

#[cfg(feature = "chaos")]
use toml::de::{DeTable, DeValue};

use super::Field;
use crate::config::ConfigError;

/// What `chaos` expects.
#[cfg(feature = "chaos")]
const EXPECTED: &str = "a table like `{ fault = \"rejection\", rate = 0.1 }`, `{ fault = \"latency\", delay = \"300ms\" }` or `{ registered = \"<a fault registered in code>\" }` (each with `rate` from 0 to 1 and `seed` if wanted)";

/// A fault a key's table declares: what it does, and at which rate and seed.
#[cfg(feature = "chaos")]
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Declared {
    pub(crate) what: What,
    pub(crate) rate: Option<f64>,
    pub(crate) seed: Option<u64>,
}

/// What a declared fault does.
#[cfg(feature = "chaos")]
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum What {
    /// `fault = "rejection"`.
    Rejection,
    /// `fault = "latency", delay = "300ms"`.
    Latency(std::time::Duration),
    /// `registered = "name"`: the fault registered in code under that name
    /// ([`Injections::register`](crate::chaos::Injections::register)).
    Registered(String),
}

/// Without the feature no fault can be declared.
#[cfg(not(feature = "chaos"))]
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Declared {}

impl Field<'_> {
    /// `chaos = { … }`: the fault the key's table declares.
    #[cfg(not(feature = "chaos"))]
    pub(super) fn chaos(&self) -> Result<Declared, ConfigError> {
        Err(self.error(
            "`chaos` declares a fault injection, which needs fusebox's feature `chaos` \
             (`fusebox = { version = \"0.1\", features = [\"chaos\"] }`, in a test or staging \
             build); build with the feature, or remove the field"
                .to_owned(),
        ))
    }

    /// `chaos = { … }`: the fault the key's table declares.
    #[cfg(feature = "chaos")]
    pub(super) fn chaos(&self) -> Result<Declared, ConfigError> {
        self.table(EXPECTED, |table| Some(declared(table)))?
            .map_err(|message| self.error(format!("`chaos`: {message}; write {EXPECTED}")))
    }
}

/// The fault a `chaos` table declares, or what is wrong with it.
#[cfg(feature = "chaos")]
fn declared(table: &DeTable<'_>) -> Result<Declared, String> {
    let (mut fault, mut delay, mut registered, mut rate, mut seed) = (None, None, None, None, None);
    for (name, value) in table {
        let value = value.get_ref();
        let shown = super::toml_text(value);
        let text = match value {
            DeValue::String(s) => Some(s.as_ref()),
            _ => None,
        };
        match name.get_ref().as_ref() {
            "fault" => fault = Some(text.ok_or(format!("`fault` = {shown} is not a string"))?),
            "registered" => {
                registered = Some(text.ok_or(format!("`registered` = {shown} is not a string"))?);
            }
            "delay" => {
                let parsed = text.and_then(|t| fusebox_policy::parse_duration(t).ok());
                delay = Some(parsed.ok_or(format!(
                    "`delay` = {shown} is not a duration like \"300ms\""
                ))?);
            }
            "rate" => {
                let n = super::toml_float(value).filter(|n| (0.0..=1.0).contains(n));
                rate = Some(n.ok_or(format!("`rate` = {shown} is not a share from 0 to 1"))?);
            }
            "seed" => {
                let n = super::toml_int(value).and_then(|n| u64::try_from(n).ok());
                seed = Some(n.ok_or(format!("`seed` = {shown} is not a whole number"))?);
            }
            other => {
                return Err(format!(
                    "unknown field `{}`; expected `fault`, `delay`, `registered`, `rate` or `seed`",
                    crate::config::echo(other)
                ));
            }
        }
    }
    let what = match (fault, registered, delay) {
        (Some("rejection"), None, None) => What::Rejection,
        (Some("latency"), None, Some(delay)) => What::Latency(delay),
        (Some("latency"), None, None) => return Err("`fault = \"latency\"` needs a `delay`".into()),
        (Some("rejection"), None, Some(_)) => {
            return Err("`delay` is for `fault = \"latency\"`".into());
        }
        (None, Some(name), None) => What::Registered(name.to_owned()),
        (Some(_), Some(_), _) => return Err("`fault` and `registered` exclude each other".into()),
        (None, Some(_), Some(_)) => return Err("`delay` is for `fault = \"latency\"`".into()),
        (Some(other), None, _) => {
            return Err(format!(
                "unknown fault `{}`: configuration declares `rejection` and `latency`; a failure \
                 or `Retry-After` fault needs its typed error built in code: register it \
                 (`Injections::register`) and name it with `registered`",
                crate::config::echo(other)
            ));
        }
        (None, None, _) => return Err("no `fault` or `registered`".into()),
    };
    Ok(Declared { what, rate, seed })
}
