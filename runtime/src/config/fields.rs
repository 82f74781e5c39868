//! Reading one field: each field of a key's table (the knob table's `config` column) or of a
//! group's table, from TOML or an environment variable's text, into a patch.

use std::time::Duration;

use toml::de::{DeTable, DeValue};

mod chaos;

pub(crate) use chaos::Declared;
#[cfg(feature = "chaos")]
pub(crate) use chaos::What;

use super::{ConfigError, ECHO, echo};
use crate::groups::GroupPatch;
use crate::policy::{Concurrency, Others, PolicyPatch, Quorum, Recovery, RetryBudget};
use fusebox_policy::{DURATION_UNITS, parse_duration};

/// How one field's value becomes a patch.
pub(super) type Reader = fn(&Field<'_>) -> Result<PolicyPatch, ConfigError>;

/// What a count field expects.
pub(super) const COUNT: &str = "a whole number";
/// What a percentage field expects.
pub(super) const PERCENT: &str = "a whole number of percent (1..=100)";
/// What a duration field expects: the grammar the attribute reads too.
fn duration_expected() -> String {
    format!("a duration like \"30s\", \"800ms\" or \"1m 30s\" (units {DURATION_UNITS})")
}
/// The empty patch each row sets its field on.
pub(super) const P: PolicyPatch = PolicyPatch::new();

/// Makes [`FIELDS`] from the `config` column of the knob table (`fusebox-policy`'s
/// `knobs.rs`): each field's name and its reader.
macro_rules! fields {
    ($($field:ident: $read:expr,)*) => {
        /// The fields a key's table may set, one row each: the name and how its value becomes a
        /// patch, through the [`PolicyPatch`] setter of the same name, in the order of the knob
        /// table. A knob is one field, except `stuck_open`, whose two rules are set one by one.
        const FIELDS: &[(&str, Reader)] = &[$((stringify!($field), $read)),*];
    };
}
fusebox_policy::with_knobs!(@config fields);

/// The names of [`FIELDS`], in its order.
pub(super) fn field_names() -> impl Iterator<Item = &'static str> + Clone {
    FIELDS.iter().map(|(name, _)| *name)
}

/// One written value: from a TOML document, or an environment variable's text.
#[derive(Clone, Copy)]
pub(super) enum Raw<'a> {
    Toml(&'a DeValue<'a>),
    Env(&'a str),
}

/// A TOML value written back as TOML (inline), for messages.
pub(super) fn toml_text(value: &DeValue<'_>) -> String {
    match value {
        DeValue::String(s) => format!("{s:?}"),
        DeValue::Integer(n) => toml_int(value).map_or_else(|| n.to_string(), |n| n.to_string()),
        DeValue::Float(n) => n.to_string(),
        DeValue::Boolean(b) => b.to_string(),
        DeValue::Datetime(d) => d.to_string(),
        DeValue::Array(items) => {
            let items: Vec<String> = items.iter().map(|v| toml_text(v.get_ref())).collect();
            format!("[{}]", items.join(", "))
        }
        DeValue::Table(table) => {
            let fields: Vec<String> = table
                .iter()
                .map(|(k, v)| format!("{} = {}", k.get_ref(), toml_text(v.get_ref())))
                .collect();
            format!("{{ {} }}", fields.join(", "))
        }
    }
}

/// A TOML integer's value, if it is one that fits an `i64`.
pub(super) fn toml_int(value: &DeValue<'_>) -> Option<i64> {
    match value {
        DeValue::Integer(n) => i64::from_str_radix(n.as_str(), n.radix()).ok(),
        _ => None,
    }
}

/// A TOML float or integer as an `f64` (`None`: neither, or not readable).
pub(super) fn toml_float(value: &DeValue<'_>) -> Option<f64> {
    match value {
        DeValue::Float(n) => n.as_str().parse::<f64>().ok(),
        DeValue::Integer(_) => toml_int(value).map(|n| n as f64),
        _ => None,
    }
}

impl Raw<'_> {
    /// The value as written, cut short, for messages.
    fn shown(&self) -> String {
        match self {
            Raw::Toml(v) => echo(&toml_text(v)),
            Raw::Env(s) => {
                let head: String = s.chars().take(ECHO).collect();
                let more = if head.len() < s.len() { "…" } else { "" };
                format!("{head:?}{more}")
            }
        }
    }
}

/// Reads one field of one key (or of one group's table).
pub(super) struct Field<'a> {
    /// The breaker key, or the group's name when `group` is set.
    key: &'a str,
    name: &'a str,
    raw: Raw<'a>,
    /// A field of a `[groups.<name>]` table: its errors are [`ConfigError::Group`].
    group: bool,
}

impl<'a> Field<'a> {
    fn wrong(&self, expected: &str) -> ConfigError {
        self.error(format!(
            "`{}` = {} is not {expected}",
            self.name,
            self.raw.shown()
        ))
    }

    /// An unknown field: the closest of `names` as a hint, and every one of them.
    fn unknown(&self, names: impl Iterator<Item = &'static str> + Clone) -> ConfigError {
        let hint = crate::declared::closest(self.name, names.clone())
            .first()
            .map(|f| format!("did you mean `{f}`? "))
            .unwrap_or_default();
        self.error(format!(
            "unknown field `{}`; {hint}expected one of {}",
            echo(self.name),
            names
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }

    /// This field's error saying `message`: a group's field or a breaker's.
    fn error(&self, message: String) -> ConfigError {
        if self.group {
            ConfigError::Group {
                group: echo(self.key),
                field: echo(self.name),
                message,
            }
        } else {
            ConfigError::Field {
                key: echo(self.key),
                message,
            }
        }
    }

    fn int<T: TryFrom<i64>>(&self, expected: &str) -> Result<T, ConfigError> {
        let n = match self.raw {
            Raw::Toml(v) => toml_int(v),
            Raw::Env(s) => s.trim().parse::<i64>().ok(),
        };
        n.and_then(|n| T::try_from(n).ok())
            .ok_or_else(|| self.wrong(expected))
    }

    fn duration(&self) -> Result<Duration, ConfigError> {
        let text = match self.raw {
            Raw::Toml(DeValue::String(s)) => s.as_ref(),
            Raw::Toml(_) => return Err(self.wrong(&duration_expected())),
            Raw::Env(s) => s,
        };
        parse_duration(text).map_err(|_| self.wrong(&duration_expected()))
    }

    /// `open_for`: a duration. A function cannot be named here: a value that looks like a path
    /// says so.
    fn open_for(&self) -> Result<PolicyPatch, ConfigError> {
        let text = match self.raw {
            Raw::Toml(DeValue::String(s)) => s.as_ref(),
            Raw::Env(s) => s,
            Raw::Toml(_) => "",
        };
        if text.contains("::") {
            return Err(self.function());
        }
        Ok(P.open_for(self.duration()?))
    }

    /// The error of a field that would name a function (`open_for_fn`, or `open_for` given a
    /// path): configuration holds values, and a function is named in code.
    fn function(&self) -> ConfigError {
        ConfigError::Field {
            key: echo(self.key),
            message: format!(
                "`{}` = {} names a function, which configuration cannot; set the function in \
                 code (`open_for = path` in the attribute, or `Policy::open_for_fn`), or set \
                 `open_for` to a duration like \"30s\" here (it replaces the function)",
                self.name,
                self.raw.shown()
            ),
        }
    }

    fn boolean(&self) -> Result<bool, ConfigError> {
        match self.raw {
            Raw::Toml(DeValue::Boolean(b)) => Ok(*b),
            Raw::Env(s) if s.trim() == "true" => Ok(true),
            Raw::Env(s) if s.trim() == "false" => Ok(false),
            _ => Err(self.wrong("`true` or `false`")),
        }
    }

    /// `"ignore"` or `"success"` (see [`Others`]).
    fn others(&self) -> Result<Others, ConfigError> {
        let text = match self.raw {
            Raw::Toml(DeValue::String(s)) => s.as_ref(),
            Raw::Env(s) => s.trim(),
            Raw::Toml(_) => "",
        };
        Others::from_name(text).ok_or_else(|| self.wrong("`\"ignore\"` or `\"success\"`"))
    }

    /// A retry budget, `"20%"` or `"20%, 10/s"` (see [`RetryBudget`]), or `"off"`: the patch
    /// that sets it.
    fn retry_budget(&self) -> Result<PolicyPatch, ConfigError> {
        let text = match self.raw {
            Raw::Toml(DeValue::String(s)) => s.as_ref(),
            Raw::Env(s) => s.trim(),
            Raw::Toml(_) => "",
        };
        if text.trim() == "off" {
            return Ok(P.no_retry_budget());
        }
        text.parse::<RetryBudget>()
            .map(|b| P.retry_budget(b.percent, b.floor))
            .map_err(|_| self.wrong("a retry budget like \"20%\" or \"20%, 10/s\" (or \"off\")"))
    }

    /// A group's name (`group = "search"`), or `"none"`, checked as [`Policy::group`]'s.
    ///
    /// [`Policy::group`]: crate::Policy::group
    fn group_text(&self) -> Result<&'a str, ConfigError> {
        let text = match self.raw {
            Raw::Toml(DeValue::String(s)) => s.as_ref(),
            Raw::Env(s) => s.trim(),
            Raw::Toml(_) => return Err(self.wrong("a group's name as a string, like \"search\"")),
        };
        if text != "none" {
            crate::policy::Policy::validate_group_name(text)
                .map_err(|e| self.error(format!("{e}; or \"none\" for no group")))?;
        }
        Ok(text)
    }

    /// A group's name, or `"none"`: the patch that sets it. A name is kept for the process's
    /// life ([`crate::groups::intern`]) only once its load is accepted: until then the patch
    /// sets it only if the name is kept already, and [`patch_of`] says which name it is.
    fn group(&self) -> Result<PolicyPatch, ConfigError> {
        match self.group_text()? {
            "none" => Ok(P.no_group()),
            name => Ok(crate::groups::names()
                .get(name)
                .map_or(P, |kept| P.group(kept))),
        }
    }

    /// `shadow = "tight: window = 20"`, `"none"`, or one table per shadow
    /// (`[breakers.<key>.shadow.<name>]`, written as the text `name: field = value, …`): read
    /// by the policy text grammar (`fusebox_policy::text`) and kept for the process's life.
    fn shadow(&self) -> Result<PolicyPatch, ConfigError> {
        const EXPECTED: &str = "shadow policies: a text like \"tight: window = 20, failure_rate = 30\", \"none\", or a table per shadow like `[breakers.<key>.shadow.tight]`";
        let text = match self.raw {
            Raw::Toml(DeValue::String(s)) => s.to_string(),
            Raw::Env(s) => s.trim().to_owned(),
            Raw::Toml(DeValue::Table(shadows)) => {
                let mut parts = Vec::new();
                for (name, fields) in shadows.iter() {
                    let DeValue::Table(fields) = fields.get_ref() else {
                        return Err(self.wrong(EXPECTED));
                    };
                    let fields: Vec<String> = fields
                        .iter()
                        .map(|(f, v)| format!("{} = {}", f.get_ref(), toml_text(v.get_ref())))
                        .collect();
                    parts.push(format!("{}: {}", name.get_ref(), fields.join(", ")));
                }
                parts.join("; ")
            }
            Raw::Toml(_) => return Err(self.wrong(EXPECTED)),
        };
        if text == "none" {
            return Ok(P.no_shadow());
        }
        if let Err(e) = fusebox_policy::text::shadows_of_text(&text) {
            let (which, error) = (
                e.shadow.map_or(String::new(), |s| format!(" `{s}`")),
                e.error,
            );
            return Err(self.error(format!("`shadow`{which}: {error}; write {EXPECTED}")));
        }
        Ok(P.shadow(crate::shadow::keep_text(&text)))
    }

    fn float(&self) -> Result<f64, ConfigError> {
        let n = match self.raw {
            Raw::Toml(v) => toml_float(v),
            Raw::Env(s) => s.trim().parse::<f64>().ok(),
        };
        n.filter(|n| n.is_finite())
            .ok_or_else(|| self.wrong("a number like 2 or 1.5"))
    }

    fn window(&self) -> Result<PolicyPatch, ConfigError> {
        const EXPECTED: &str = "a window: an integer number of calls (`window = 100`) or a duration string (`window = \"30s\"`)";
        let as_count = match self.raw {
            Raw::Toml(DeValue::Integer(_)) => true,
            Raw::Toml(DeValue::String(_)) => false,
            Raw::Toml(_) => return Err(self.wrong(EXPECTED)),
            Raw::Env(s) => s.trim().bytes().all(|b| b.is_ascii_digit()),
        };
        if as_count {
            Ok(PolicyPatch::new().window(self.int(EXPECTED)?))
        } else {
            let span = self.duration().map_err(|_| self.wrong(EXPECTED))?;
            Ok(PolicyPatch::new().time_window(span))
        }
    }

    /// `max_concurrent`: an integer (a fixed limit) or `"adaptive"` / `"adaptive(2..200)"` (see
    /// [`Concurrency::from_text`]).
    fn concurrency(&self) -> Result<PolicyPatch, ConfigError> {
        const EXPECTED: &str = "a bulkhead: a whole number of calls in flight (`max_concurrent = 10`) or `\"adaptive\"` / `\"adaptive(floor..ceiling)\"` (`max_concurrent = \"adaptive(2..200)\"`)";
        let text = match self.raw {
            Raw::Toml(DeValue::Integer(_)) => return Ok(P.max_concurrent(self.int(EXPECTED)?)),
            Raw::Toml(DeValue::String(s)) => s.as_ref(),
            Raw::Toml(_) => return Err(self.wrong(EXPECTED)),
            Raw::Env(s) if s.trim().bytes().all(|b| b.is_ascii_digit()) => {
                return Ok(P.max_concurrent(self.int(EXPECTED)?));
            }
            Raw::Env(s) => s,
        };
        match Concurrency::from_text(text) {
            Ok(Concurrency::Adaptive { floor, ceiling }) => {
                Ok(P.adaptive_concurrency(floor, ceiling))
            }
            _ => Err(self.wrong(EXPECTED)),
        }
    }

    /// A shared circuit's quorum: a number of replicas (`quorum = 2`), a share of them
    /// (`quorum = "50%"`), or `"off"`, checked as [`Quorum::problem`] checks it.
    fn quorum(&self) -> Result<PolicyPatch, ConfigError> {
        const EXPECTED: &str = "a quorum: 2..=1000 replicas (`quorum = 2`) or 1%..=100% of them (`quorum = \"50%\"`), or \"off\"";
        // The text of a string (`None`: a TOML integer, read as a number of replicas).
        let text = match self.raw {
            Raw::Toml(DeValue::Integer(_)) => None,
            Raw::Toml(DeValue::String(s)) => Some(s.as_ref()),
            Raw::Toml(_) => return Err(self.wrong(EXPECTED)),
            Raw::Env(s) => Some(s),
        };
        let quorum = match text {
            None => Quorum::Replicas(self.int(EXPECTED)?),
            Some(text) if text.trim() == "off" => return Ok(P.no_quorum()),
            Some(text) => text.parse().map_err(|_| self.wrong(EXPECTED))?,
        };
        match quorum {
            _ if quorum.problem().is_some() => Err(self.wrong(EXPECTED)),
            Quorum::Replicas(n) => Ok(P.quorum(n)),
            Quorum::Share(percent) => Ok(P.quorum_share(percent)),
            _ => Err(self.wrong(EXPECTED)),
        }
    }

    /// This field's value as one table (a TOML table, or in the environment one inline table on
    /// one line), read by `read`; `expected` says what the value should be when it is not a
    /// table or `read` finds nothing.
    fn table<T>(
        &self,
        expected: &str,
        read: impl FnOnce(&DeTable<'_>) -> Option<T>,
    ) -> Result<T, ConfigError> {
        let parsed;
        let table = match self.raw {
            Raw::Toml(DeValue::Table(t)) => t,
            Raw::Toml(_) => return Err(self.wrong(expected)),
            Raw::Env(s) => {
                // One inline table, never a document: no line breaks.
                if s.contains(['\n', '\r']) {
                    return Err(self.wrong(expected));
                }
                parsed = DeValue::parse(s)
                    .ok()
                    .and_then(|v| match v.into_inner() {
                        DeValue::Table(t) => Some(t),
                        _ => None,
                    })
                    .ok_or_else(|| self.wrong(expected))?;
                &parsed
            }
        };
        read(table).ok_or_else(|| self.wrong(expected))
    }

    fn recovery(&self) -> Result<Recovery, ConfigError> {
        const EXPECTED: &str = "a table `{ phases = 3, min_passes = 5 }`";
        match self.raw {
            Raw::Toml(DeValue::String(s)) if s == "probes" => return Ok(Recovery::Probes),
            Raw::Env(s) if s.trim() == "probes" => return Ok(Recovery::Probes),
            _ => {}
        }
        self.table(EXPECTED, |table| {
            let get = |name: &str| {
                table
                    .get(name)
                    .and_then(|v| toml_int(v.get_ref()))
                    .and_then(|n| u32::try_from(n).ok())
            };
            match (get("phases"), get("min_passes"), table.len()) {
                (Some(phases), Some(min_passes), 2) => {
                    Some(Recovery::Progressive { phases, min_passes })
                }
                _ => None,
            }
        })
    }

    /// This field as a patch.
    fn patch(&self) -> Result<PolicyPatch, ConfigError> {
        if let Some((_, read)) = FIELDS.iter().find(|(name, _)| *name == self.name) {
            return read(self);
        }
        if self.name == "open_for_fn" {
            // A knob of the table that configuration cannot set.
            return Err(self.function());
        }
        Err(self.unknown(field_names().chain(["chaos"])))
    }
}

/// The fields of a group's table (`[groups.<name>]`), each named as the [`GroupPolicy`] setter
/// its value goes through.
///
/// [`GroupPolicy`]: crate::GroupPolicy
pub(super) const GROUP_FIELDS: [&str; 7] = [
    "interval",
    "success_rate",
    "failure_percentage",
    "min_members",
    "max_ejection",
    "ejection",
    "healthy_span",
];

/// What `ejection` expects, as configuration writes it.
pub(super) const EJECTION: &str =
    "a table `{ base = \"30s\", max = \"5m\" }` (`base` at least 1 ms, `max` at least `base`)";

impl Field<'_> {
    /// `ejection = { base = "30s", max = "5m" }`: the ejection backoff's base and maximum.
    fn ejection(&self) -> Result<(Duration, Duration), ConfigError> {
        self.table(EJECTION, |table| {
            let get = |name: &str| match table.get(name).map(|v| v.get_ref()) {
                Some(DeValue::String(s)) => parse_duration(s).ok(),
                _ => None,
            };
            match (get("base"), get("max"), table.len()) {
                (Some(base), Some(max), 2) => Some((base, max)),
                _ => None,
            }
        })
    }

    /// This field of a group's table as a patch of that field alone: its value's type is
    /// checked here, its range by [`GroupPolicy::validate`](crate::GroupPolicy::validate).
    fn group_field(&self) -> Result<GroupPatch, ConfigError> {
        use crate::groups::validate::{
            FAILURE_PERCENTAGE, INTERVAL, MAX_EJECTION, MIN_MEMBERS, SUCCESS_RATE,
        };
        let mut patch = GroupPatch::default();
        match self.name {
            "interval" => {
                patch.interval = Some(self.duration().map_err(|_| self.wrong(INTERVAL))?);
            }
            "success_rate" => {
                patch.success_rate = Some(self.float().map_err(|_| self.wrong(SUCCESS_RATE))?);
            }
            "failure_percentage" => {
                patch.failure_percentage = Some(self.int(FAILURE_PERCENTAGE)?);
            }
            "min_members" => patch.min_members = Some(self.int(MIN_MEMBERS)?),
            "max_ejection" => patch.max_ejection = Some(self.int(MAX_EJECTION)?),
            "ejection" => patch.ejection = Some(self.ejection()?),
            "healthy_span" => {
                patch.healthy_span = Some(
                    self.duration()
                        .map_err(|_| self.wrong("a duration like \"5m\""))?,
                );
            }
            _ => return Err(self.unknown(GROUP_FIELDS.into_iter())),
        }
        // The field alone over the defaults: the check code and the replay make.
        match patch.apply(crate::groups::GroupPolicy::new()).validate() {
            Ok(()) => Ok(patch),
            Err(e) if e.field() == "ejection" => Err(self.wrong(EJECTION)),
            Err(e) => Err(self.wrong(e.allowed())),
        }
    }
}

/// The patch of one group from its fields; the group's name must be one a policy can name.
pub(super) fn group_patch_of<'a>(
    group: &str,
    fields: impl IntoIterator<Item = (&'a str, Raw<'a>)>,
) -> Result<GroupPatch, ConfigError> {
    if let Err(error) = crate::policy::Policy::validate_group_name(group) {
        return Err(ConfigError::Group {
            group: echo(group),
            field: String::new(),
            message: format!("not a group name a policy can name: {error}"),
        });
    }
    let mut patch = GroupPatch::default();
    for (name, raw) in fields {
        let field = Field {
            key: group,
            name,
            raw,
            group: true,
        };
        patch = patch.then(field.group_field()?);
    }
    Ok(patch)
}

/// The patch of one key from its fields, the group it names (`group = "search"`), which
/// the patch sets only once the load is accepted ([`Loaded::keep_names`]), and the fault its
/// `chaos` field declares.
///
/// [`Loaded::keep_names`]: super::Loaded::keep_names
pub(super) fn patch_of<'a>(
    key: &str,
    fields: impl IntoIterator<Item = (&'a str, Raw<'a>)>,
) -> Result<(PolicyPatch, Option<String>, Option<Declared>), ConfigError> {
    let mut patch = PolicyPatch::new();
    let mut member = None;
    let mut chaos = None;
    for (name, raw) in fields {
        let field = Field {
            key,
            name,
            raw,
            group: false,
        };
        if name == "chaos" {
            chaos = Some(field.chaos()?);
            continue;
        }
        patch = patch.then(field.patch()?);
        if name == "group" {
            member = Some(field.group_text()?)
                .filter(|text| *text != "none")
                .map(str::to_owned);
        }
    }
    Ok((patch, member, chaos))
}
