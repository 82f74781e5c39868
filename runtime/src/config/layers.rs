//! The layers one load brings, by [`Source`]: the tables of a TOML document, or the
//! `FUSEBOX__…` and `FUSEBOX_GROUPS__…` variables, as the patches of keys and of groups.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;

use toml::de::{DeTable, DeValue};

use super::fields::{Declared, GROUP_FIELDS, Raw, field_names, group_patch_of, patch_of};
use super::{ConfigError, ECHO, cut, echo};
use crate::groups::GroupPatch;
use crate::policy::PolicyPatch;

/// Where an override came from. Each load replaces everything the previous load from the same
/// source set; the sources apply in this order, a later one winning on the fields it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// `load_toml`.
    File,
    /// `load_env` / `load_vars`.
    Env,
}

/// Patches by key, as one load brings them.
pub(crate) type Layer =
    HashMap<String, PolicyPatch, std::hash::BuildHasherDefault<std::hash::DefaultHasher>>;

/// Patches of groups' settings by group name, as one load brings them.
pub(crate) type GroupLayer = BTreeMap<String, GroupPatch>;

/// What one load brings: the breakers' patches and the groups'.
#[derive(Debug, Default, Clone)]
pub(crate) struct Loaded {
    /// `[breakers.<key>]` / `FUSEBOX__<KEY>__<FIELD>`.
    pub(crate) breakers: Layer,
    /// `[groups.<name>]` / `FUSEBOX_GROUPS__<NAME>__<FIELD>`.
    pub(crate) groups: GroupLayer,
    /// The group each key's `group` field names (not `"none"`), by key: kept, and set in the
    /// key's patch, only once the load is accepted ([`Loaded::keep_names`]).
    pub(crate) members: BTreeMap<String, String>,
    /// The fault each key's `chaos` field declares (feature `chaos`), by key: injected only
    /// once the load is accepted.
    pub(crate) chaos: BTreeMap<String, Declared>,
}

impl Loaded {
    /// Keeps every group name this load brings, all or none ([`MAX_GROUP_NAMES`] at most in
    /// the process), and sets each key's group in its patch of `layer` (the key's patches once
    /// installed). Called once the load is otherwise accepted.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Field`] naming the key (or [`ConfigError::Group`] naming the group) whose
    /// name would be one too many; nothing is kept then.
    ///
    /// [`MAX_GROUP_NAMES`]: crate::groups::MAX_GROUP_NAMES
    pub(crate) fn keep_names(&self, layer: &mut Layer) -> Result<(), ConfigError> {
        let names = self
            .members
            .values()
            .chain(self.groups.keys())
            .map(String::as_str);
        crate::groups::names()
            .add_all(names, crate::groups::MAX_GROUP_NAMES)
            .map_err(|full| self.too_many(&full.name))?;
        for (key, name) in &self.members {
            if let Some(patch) = layer.get_mut(key) {
                *patch = patch.group(crate::groups::intern(name));
            }
        }
        Ok(())
    }

    /// Adds `key`'s patch, the group it names and the fault it declares.
    fn add(
        &mut self,
        key: &str,
        (patch, member, chaos): (PolicyPatch, Option<String>, Option<Declared>),
    ) {
        self.breakers.insert(key.to_owned(), patch);
        if let Some(group) = member {
            self.members.insert(key.to_owned(), group);
        }
        if let Some(declared) = chaos {
            self.chaos.insert(key.to_owned(), declared);
        }
    }

    /// The error of the group name `name`, one past [`MAX_GROUP_NAMES`](crate::groups::MAX_GROUP_NAMES).
    pub(super) fn too_many(&self, name: &str) -> ConfigError {
        let message = format!(
            "group `{}` would be one group name more than the {} a process keeps (names are \
             kept for the process's life); reuse a group's name, or give keys a group in code",
            echo(name),
            crate::groups::MAX_GROUP_NAMES
        );
        match self.members.iter().find(|(_, group)| *group == name) {
            Some((key, _)) => ConfigError::Field {
                key: echo(key),
                message: format!("`group`: {message}"),
            },
            None => ConfigError::Group {
                group: echo(name),
                field: String::new(),
                message,
            },
        }
    }
}

pub(super) const PREFIX: &str = "FUSEBOX__";
pub(super) const GROUP_PREFIX: &str = "FUSEBOX_GROUPS__";

/// The tables under the top-level table `section` (`breakers` or `groups`) of a document.
pub(super) fn tables<'a>(
    section: &str,
    value: Option<&'a DeValue<'a>>,
) -> Result<Vec<(&'a str, &'a DeTable<'a>)>, ConfigError> {
    let single = if section == "groups" { "name" } else { "key" };
    let entries = match value {
        None => return Ok(Vec::new()),
        Some(DeValue::Table(t)) => t,
        Some(_) => {
            return Err(ConfigError::Syntax(format!(
                "`{section}` must be tables: `[{section}.<{single}>]`"
            )));
        }
    };
    let mut out = Vec::new();
    for (name, table) in entries {
        let name: &str = name.get_ref();
        let DeValue::Table(table) = table.get_ref() else {
            let message = format!(
                "`{section}.{}` must be a table: `[{section}.{}]`",
                echo(name),
                echo(name)
            );
            return Err(if section == "groups" {
                ConfigError::Group {
                    group: echo(name),
                    field: String::new(),
                    message,
                }
            } else {
                ConfigError::Field {
                    key: echo(name),
                    message,
                }
            });
        };
        out.push((name, table));
    }
    Ok(out)
}

/// The overrides of a TOML document: one patch per key, one per group (what
/// [`Registry::load_toml`](crate::Registry::load_toml) applies).
pub(crate) fn toml_layer(text: &str) -> Result<Loaded, ConfigError> {
    document_layer(parse(text)?)
}

/// The document `text`.
pub(super) fn parse(text: &str) -> Result<DeTable<'_>, ConfigError> {
    DeTable::parse(text)
        .map(|d| d.into_inner())
        .map_err(|e| ConfigError::Syntax(cut(e.message(), 4 * ECHO)))
}

/// The overrides of the table `name` of a larger TOML document, whose other tables are the
/// application's (what [`Registry::load_toml_table`](crate::Registry::load_toml_table)
/// applies).
pub(crate) fn toml_table_layer(text: &str, name: &str) -> Result<Loaded, ConfigError> {
    let mut document = parse(text)?;
    match document.remove(name).map(|t| t.into_inner()) {
        Some(DeValue::Table(table)) => document_layer(table),
        Some(_) => Err(ConfigError::Syntax(format!(
            "`{}` must be a table: `[{}]`",
            echo(name),
            echo(name)
        ))),
        None => Err(ConfigError::Syntax(format!(
            "no `[{0}]` table; write the overrides in `[{0}.breakers.<key>]` and \
             `[{0}.groups.<name>]` tables (an empty `[{0}]` loads none)",
            echo(name)
        ))),
    }
}

/// The overrides of a document's tables (`breakers`, `groups`; nothing else).
pub(super) fn document_layer(mut document: DeTable<'_>) -> Result<Loaded, ConfigError> {
    let breakers = document.remove("breakers").map(|b| b.into_inner());
    let groups = document.remove("groups").map(|g| g.into_inner());
    if let Some(other) = document.keys().next() {
        return Err(ConfigError::Syntax(format!(
            "unknown top-level table `{}`; overrides go in `[breakers.<key>]` tables, group \
             settings in `[groups.<name>]` tables (fusebox's table of an application's file \
             loads with `Registry::load_toml_table(text, \"fusebox\")`)",
            echo(other.get_ref())
        )));
    }
    let mut loaded = Loaded::default();
    for (key, table) in tables("breakers", breakers.as_ref())? {
        let fields = patch_of(
            key,
            table
                .iter()
                .map(|(f, v)| (f.get_ref().as_ref(), Raw::Toml(v.get_ref()))),
        )?;
        loaded.add(key, fields);
    }
    for (group, table) in tables("groups", groups.as_ref())? {
        let patch = group_patch_of(
            group,
            table
                .iter()
                .map(|(f, v)| (f.get_ref().as_ref(), Raw::Toml(v.get_ref()))),
        )?;
        loaded.groups.insert(group.to_owned(), patch);
    }
    Ok(loaded)
}

/// The overrides of environment variables that may not be Unicode: the non-Unicode ones are
/// skipped, unless their name starts with one of the prefixes, which is an error.
pub(crate) fn vars_os_layer(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> Result<Loaded, ConfigError> {
    let mut utf8 = Vec::new();
    for (name, value) in vars {
        let ours = [PREFIX, GROUP_PREFIX].iter().any(|prefix| {
            name.as_encoded_bytes()
                .get(..prefix.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(prefix.as_bytes()))
        });
        match (name.into_string(), value.into_string()) {
            (Ok(name), Ok(value)) => utf8.push((name, value)),
            (name, _) if ours => {
                let name = name.unwrap_or_else(|n| n.to_string_lossy().into_owned());
                return Err(ConfigError::Syntax(format!(
                    "`{}` is not valid Unicode; fusebox variables must be UTF-8",
                    echo(&name)
                )));
            }
            _ => {}
        }
    }
    vars_layer(utf8)
}

/// Fields by owner (a key or a group), each with the variable's name as written and its value.
pub(super) type Owners = BTreeMap<String, BTreeMap<String, (String, String)>>;

/// Adds the variable `name` = `raw` (after `prefix`) to `owners`: `<OWNER>__<FIELD>`,
/// lowercased; `what` names the owner in messages (`breaker`, `group`).
pub(super) fn add_var(
    owners: &mut Owners,
    prefix: &str,
    what: &str,
    name: String,
    raw: String,
) -> Result<(), ConfigError> {
    let rest = &name[prefix.len()..];
    let Some((owner, field)) = rest
        .split_once("__")
        .filter(|(o, f)| !o.is_empty() && !f.is_empty())
    else {
        let shape = if what == "group" {
            "FUSEBOX_GROUPS__<NAME>__<FIELD>"
        } else {
            "FUSEBOX__<KEY>__<FIELD>"
        };
        return Err(ConfigError::Syntax(format!(
            "`{}` must be `{shape}`",
            echo(&name)
        )));
    };
    let (owner, field) = (owner.to_lowercase(), field.to_lowercase());
    let fields = owners.entry(owner.clone()).or_default();
    if let Some((earlier, _)) = fields.get(&field) {
        return Err(ConfigError::Syntax(format!(
            "`{}` and `{}` both set `{}` of {what} `{}` (names are case-insensitive); remove one",
            echo(earlier),
            echo(&name),
            echo(&field),
            echo(&owner)
        )));
    }
    fields.insert(field, (name, raw));
    Ok(())
}

/// The overrides of `FUSEBOX__<KEY>__<FIELD>` pairs, one patch per key, and of
/// `FUSEBOX_GROUPS__<NAME>__<FIELD>` pairs, one per group (what
/// [`Registry::load_vars`](crate::Registry::load_vars) applies).
pub(crate) fn vars_layer(
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<Loaded, ConfigError> {
    let mut keys = Owners::new();
    let mut groups = Owners::new();
    for (name, raw) in vars {
        let starts = |prefix: &str| {
            name.get(..prefix.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(prefix))
        };
        if starts(PREFIX) {
            add_var(&mut keys, PREFIX, "breaker", name, raw)?;
        } else if starts(GROUP_PREFIX) {
            add_var(&mut groups, GROUP_PREFIX, "group", name, raw)?;
        } else if let Some(right) = near_miss(&name) {
            let name = echo(&name);
            tracing::warn!(
                target: "fusebox",
                event = "variable_ignored",
                variable = name,
                meant = right,
                "`{name}` is not read: fusebox's variables separate the key and the field with \
                 two underscores; did you mean `{right}`?"
            );
        }
    }
    let mut loaded = Loaded::default();
    for (key, fields) in &keys {
        let fields = patch_of(
            key,
            fields
                .iter()
                .map(|(f, (_, v))| (f.as_str(), Raw::Env(v.as_str()))),
        )?;
        loaded.add(key, fields);
    }
    for (group, fields) in &groups {
        let patch = group_patch_of(
            group,
            fields
                .iter()
                .map(|(f, (_, v))| (f.as_str(), Raw::Env(v.as_str()))),
        )?;
        loaded.groups.insert(group.clone(), patch);
    }
    Ok(loaded)
}

/// The fusebox variable `name` was probably meant to be, when it starts with `FUSEBOX_` (in any
/// case) but not with either prefix, and ends in a field's name after an underscore
/// (`FUSEBOX_PAYMENT_OPEN_FOR` → `FUSEBOX__PAYMENT__OPEN_FOR`, `FUSEBOX_GROUPS_SEARCH_INTERVAL`
/// → `FUSEBOX_GROUPS__SEARCH__INTERVAL`).
pub(super) fn near_miss(name: &str) -> Option<String> {
    let head = name.get(..PREFIX.len() - 1)?;
    if !head.eq_ignore_ascii_case(&PREFIX[..PREFIX.len() - 1]) {
        return None;
    }
    let rest = name[head.len()..].trim_start_matches('_');
    let upper = rest.to_ascii_uppercase();
    let (prefix, fields, rest): (&str, Vec<&str>, &str) = match upper.strip_prefix("GROUPS") {
        Some(after) if after.starts_with('_') => (
            GROUP_PREFIX,
            GROUP_FIELDS.to_vec(),
            after.trim_start_matches('_'),
        ),
        _ => (PREFIX, field_names().collect(), upper.as_str()),
    };
    fields
        .into_iter()
        .filter_map(|field| {
            let owner = rest.strip_suffix(&field.to_ascii_uppercase())?;
            let owner = owner.strip_suffix('_')?.trim_end_matches('_');
            (!owner.is_empty()).then(|| format!("{prefix}{owner}__{}", field.to_ascii_uppercase()))
        })
        // The longest field that fits (`HALF_OPEN_LEASE`, not `LEASE`'s shorter neighbours).
        .min_by_key(String::len)
}
