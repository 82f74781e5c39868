//! Candidate policies: `--policy "window=100,failure_rate=50,open_for=30s"` strings and TOML files
//! of named candidates, both read through one table of fields that mirrors the attribute's policy
//! arguments and the runtime's `[breakers.<key>]` configuration.
//!
//! ```toml
//! [policies.fast]
//! window = 20
//! failure_rate = 50
//! open_for = "10s"
//!
//! [policies.careful]
//! window = "30s"        # a string is a time window, an integer a count window
//! min_calls = 20
//! consecutive = 10
//! ```
//!
//! A candidate may put keys of a trace with many keys in a group (`group = "search"`, with
//! `group_keys` choosing the members and the [`fusebox::GroupPolicy`] settings `interval`,
//! `success_rate`, `min_members`, `failure_percentage`, `max_ejection`, `ejection_base`,
//! `ejection_max` and `healthy_span`, named as in the runtime's `[groups.<name>]` configuration,
//! whose `ejection = { base, max }` is `ejection_base` and `ejection_max` here): see [`GroupSpec`].
//!
//! ```toml
//! [policies.search]
//! window = 100
//! min_calls = 20
//! failure_rate = 90
//! group = "search"
//! group_keys = "search-*"  # `*` (every key, the default), `prefix*`, or `a|b|c`
//! max_ejection = 20
//! success_rate = 1.9
//! ```
//!
//! `open_jitter` replays: each replay draws its spread from a generator seeded the same way, so a
//! replay is reproducible. An open-wait function (`open_for = path` in the attribute) cannot be
//! named in a string: `open_for` takes a duration here, and `open_backoff`/`open_max` approximate
//! a function's growing waits.

use std::fmt;
use std::time::Duration;

use fusebox::{GroupPolicy, Policy};

/// A policy to replay, with the settings it was written with (to print it back).
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Its name (`p1`, `p2`, … for `--policy` strings without a `name:` prefix).
    pub name: String,
    /// The policy.
    pub policy: Policy,
    /// Attempts per call (`retry`, as the attribute's; 1: no retry). A replay retries a call
    /// that failed in the recording up to `retry - 1` times, each retry asking the policy's
    /// `retry_budget` first and assumed to fail as the call did.
    pub retry: u32,
    /// The settings as written, in order: `(field, value)`.
    pub settings: Vec<(&'static str, Setting)>,
    /// The group its keys join (`group`), with its members and settings; `None`: every key is
    /// judged alone.
    pub group: Option<GroupSpec>,
}

/// A candidate's group: its name, the keys of the trace that join it, and its settings.
///
/// A replay of a trace with many keys gives every key its own breaker in one registry, as the
/// registry does with a dynamic key; the keys `keys` matches run the candidate's policy with
/// [`Policy::group`], and the group has `policy` ([`fusebox::Registry::configure_group`]), so
/// the runtime's own group code ejects, caps and backs off.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupSpec {
    /// The group's name (`group = "search"`).
    pub name: &'static str,
    /// The keys that join it (`group_keys`).
    pub keys: KeySet,
    /// Its settings.
    pub policy: GroupPolicy,
}

/// The keys of a trace that join a candidate's group (`group_keys`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySet {
    /// Every key of the trace (`*`, the default).
    All,
    /// The keys matching one of the patterns (`search-*|cache-1`): a pattern ending in `*` is a
    /// prefix, any other is a whole key.
    Patterns(Vec<String>),
}

impl KeySet {
    /// Reads `*`, `prefix*`, or patterns separated by `|`.
    #[must_use]
    pub fn parse(raw: &str) -> Option<KeySet> {
        let patterns: Vec<String> = raw
            .split('|')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect();
        if patterns.is_empty() {
            return None;
        }
        if patterns.iter().any(|p| p == "*") {
            return Some(KeySet::All);
        }
        Some(KeySet::Patterns(patterns))
    }

    /// True when `key` joins the group.
    #[must_use]
    pub fn matches(&self, key: &str) -> bool {
        match self {
            KeySet::All => true,
            KeySet::Patterns(patterns) => patterns.iter().any(|p| match p.strip_suffix('*') {
                Some(prefix) => key.starts_with(prefix),
                None => key == p,
            }),
        }
    }
}

/// One field's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Setting {
    /// A whole number (a count window, a percentage, a number of calls).
    Int(u32),
    /// A duration (a time window, a wait).
    Span(Duration),
    /// A factor (`open_backoff`, `throttle`).
    Factor(f64),
    /// `off` (`failure_rate = off`).
    Off,
    /// An adaptive bulkhead (`max_concurrent = adaptive(2..200)`): its floor and ceiling.
    Adaptive(u32, u32),
    /// A retry budget (`retry_budget = "20%, 10/s"`).
    Budget(fusebox::RetryBudget),
    /// A name or a pattern (`group = "search"`, `group_keys = "search-*"`), kept once per
    /// distinct text for the process's life.
    Name(&'static str),
}

/// `text` as a `&'static str`, kept once per distinct text (group names and key patterns: few).
fn intern(text: &str) -> &'static str {
    static NAMES: std::sync::Mutex<Option<std::collections::HashSet<&'static str>>> =
        std::sync::Mutex::new(None);
    let mut names = NAMES.lock().unwrap_or_else(|p| p.into_inner());
    let names = names.get_or_insert_with(std::collections::HashSet::new);
    if let Some(known) = names.get(text) {
        return known;
    }
    let leaked: &'static str = Box::leak(text.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}

/// A duration as the attribute writes it: one integer and the largest unit that divides it
/// (`1500ms`, `30s`, `2m`).
#[must_use]
pub fn span_text(d: Duration) -> String {
    let nanos = d.as_nanos();
    const UNITS: [(&str, u128); 6] = [
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
        ("ns", 1),
    ];
    for (unit, size) in UNITS {
        if nanos != 0 && nanos.is_multiple_of(size) {
            return format!("{}{unit}", nanos / size);
        }
    }
    "0s".into()
}

impl Setting {
    fn text(&self) -> String {
        match self {
            Setting::Int(n) => n.to_string(),
            Setting::Span(d) => span_text(*d),
            Setting::Factor(f) => f.to_string(),
            Setting::Off => "off".into(),
            Setting::Adaptive(floor, ceiling) => format!("adaptive({floor}..{ceiling})"),
            Setting::Budget(b) => b.to_string(),
            Setting::Name(n) => (*n).to_owned(),
        }
    }

    /// The value as the attribute or a TOML file writes it (durations quoted).
    fn literal(&self) -> String {
        match self {
            Setting::Span(_)
            | Setting::Off
            | Setting::Adaptive(..)
            | Setting::Budget(_)
            | Setting::Name(_) => {
                format!("\"{}\"", self.text())
            }
            _ => self.text(),
        }
    }
}

impl Candidate {
    /// The candidate as a `--policy` string: `window=100,failure_rate=50,open_for=30s`.
    #[must_use]
    pub fn policy_arg(&self) -> String {
        let fields: Vec<String> = self
            .settings
            .iter()
            .map(|(f, v)| format!("{f}={}", v.text()))
            .collect();
        fields.join(",")
    }

    /// The candidate as attribute arguments: `window = 100, failure_rate = 50, open_for = "30s"`
    /// (with `group = "search"`, but without the group's settings and members: see
    /// [`Candidate::group_code`]).
    #[must_use]
    pub fn attribute_args(&self) -> String {
        let fields: Vec<String> = self
            .settings
            .iter()
            .filter(|(f, v)| *v != Setting::Off && !is_group_field(f))
            .map(|(f, v)| format!("{f} = {}", v.literal()))
            .collect();
        fields.join(", ")
    }
}

impl Candidate {
    /// The group's settings as the code that sets them, when the candidate has a group:
    /// `registry().configure_group("search", GroupPolicy::new().max_ejection(20))`. Only the
    /// settings the candidate wrote are called.
    #[must_use]
    pub fn group_code(&self) -> Option<String> {
        let group = self.group.as_ref()?;
        let mut calls = String::new();
        let mut base_and_max = false;
        for (field, value) in &self.settings {
            let call = match (*field, value) {
                ("interval", v) => format!(".interval({})", duration_code(span(*v))),
                ("success_rate", Setting::Factor(f)) => format!(".success_rate({f:?})"),
                ("min_members", v) => format!(".min_members({})", v.text()),
                ("failure_percentage", Setting::Off) => ".failure_percentage(0)".into(),
                ("failure_percentage", v) => format!(".failure_percentage({})", v.text()),
                ("max_ejection", v) => format!(".max_ejection({})", v.text()),
                ("ejection_base" | "ejection_max", _) if !base_and_max => {
                    base_and_max = true;
                    let s = group.policy.settings();
                    format!(
                        ".ejection({}, {})",
                        duration_code(s.ejection_base),
                        duration_code(s.ejection_max)
                    )
                }
                ("healthy_span", v) => format!(".healthy_span({})", duration_code(span(*v))),
                _ => continue,
            };
            calls.push_str(&call);
        }
        Some(format!(
            "registry().configure_group(\"{}\", GroupPolicy::new(){calls})",
            group.name
        ))
    }
}

/// `d` as the code that makes it: `Duration::from_secs(30)`, `from_millis`, or `from_nanos`.
fn duration_code(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos.is_multiple_of(1_000_000_000) {
        format!("Duration::from_secs({})", d.as_secs())
    } else if nanos.is_multiple_of(1_000_000) {
        format!("Duration::from_millis({})", d.as_millis())
    } else {
        format!("Duration::from_nanos({nanos})")
    }
}

/// True for the fields that are a group's settings (not a `Policy` knob).
fn is_group_setting(field: &str) -> bool {
    GROUP_FIELDS.iter().any(|(f, _)| *f == field)
}

/// True for a group's settings and `group_keys`: the fields that need a `group`.
fn is_group_field(field: &str) -> bool {
    is_group_setting(field) || field == "group_keys"
}

/// A group's setting: its field and the [`GroupPolicy`] call it makes.
type GroupField = (&'static str, fn(GroupPolicy, Setting) -> GroupPolicy);

/// The group's settings.
const GROUP_FIELDS: &[GroupField] = &[
    ("interval", |g, s| g.interval(span(s))),
    ("success_rate", |g, s| match s {
        Setting::Factor(f) => g.success_rate(f),
        _ => g,
    }),
    ("min_members", |g, s| g.min_members(int(s))),
    ("failure_percentage", |g, s| match s {
        Setting::Off => g.failure_percentage(0),
        s => g.failure_percentage(int(s) as u8),
    }),
    ("max_ejection", |g, s| g.max_ejection(int(s) as u8)),
    ("ejection_base", |g, s| {
        let max = g.settings().ejection_max;
        g.ejection(span(s), max)
    }),
    ("ejection_max", |g, s| {
        let base = g.settings().ejection_base;
        g.ejection(base, span(s))
    }),
    ("healthy_span", |g, s| g.healthy_span(span(s))),
];

/// A policy that could not be read: where, which field, and what to write instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    /// Where: `--policy "…"`, or `file.toml line 4`.
    pub place: String,
    /// The field at fault, when one is.
    pub field: Option<String>,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{}: field `{field}`: {}", self.place, self.message),
            None => write!(f, "{}: {}", self.place, self.message),
        }
    }
}

impl std::error::Error for PolicyError {}

/// What a field accepts.
#[derive(Clone, Copy)]
enum Kind {
    /// A count (integer) or a span (duration).
    CountOrSpan,
    Count,
    Percent,
    /// A percentage or `off`.
    PercentOrOff,
    Span,
    Factor,
    /// A count (a fixed bulkhead) or `adaptive` / `adaptive(floor..ceiling)`.
    Bulkhead,
    /// A retry budget: `20%` or `20%, 10/s`.
    Budget,
    /// A group's name (`search`).
    Name,
    /// The keys joining a group: `*`, `prefix*`, or `a|b|c`.
    Keys,
    /// A factor of 0 or more (`success_rate`; 0 turns the rule off).
    Stdev,
}

/// One policy field: its name, what it accepts and the `Policy` builder call it becomes.
struct Field {
    name: &'static str,
    kind: Kind,
    apply: fn(Policy, Setting) -> Policy,
}

/// A field read by `build` into the candidate, not a `Policy` knob: applying it changes nothing.
const fn inert(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        kind,
        apply: |p, _| p,
    }
}

fn int(s: Setting) -> u32 {
    match s {
        Setting::Int(n) => n,
        _ => 0,
    }
}

fn span(s: Setting) -> Duration {
    match s {
        Setting::Span(d) => d,
        _ => Duration::ZERO,
    }
}

/// The fields a candidate may set, each the `fusebox::Policy` builder method of the same name.
const FIELDS: &[Field] = &[
    Field {
        name: "window",
        kind: Kind::CountOrSpan,
        apply: |p, s| match s {
            Setting::Span(d) => p.time_window(d),
            s => p.window(int(s)),
        },
    },
    Field {
        name: "min_calls",
        kind: Kind::Count,
        apply: |p, s| p.min_calls(int(s)),
    },
    Field {
        name: "failure_rate",
        kind: Kind::PercentOrOff,
        apply: |p, s| match s {
            Setting::Off => p.rate_off(),
            s => p.failure_rate(int(s) as u8),
        },
    },
    Field {
        name: "consecutive",
        kind: Kind::Count,
        apply: |p, s| p.consecutive(int(s)),
    },
    Field {
        name: "failure_count",
        kind: Kind::Count,
        apply: |p, s| p.failure_count(int(s)),
    },
    Field {
        name: "throttle",
        kind: Kind::Factor,
        apply: |p, s| match s {
            Setting::Factor(k) => p.throttle(k),
            _ => p,
        },
    },
    Field {
        name: "slow",
        kind: Kind::Span,
        apply: |p, s| p.slow(span(s)),
    },
    Field {
        name: "slow_rate",
        kind: Kind::Percent,
        apply: |p, s| p.slow_rate(int(s) as u8),
    },
    Field {
        name: "open_for",
        kind: Kind::Span,
        apply: |p, s| p.open_for(span(s)),
    },
    Field {
        name: "open_backoff",
        kind: Kind::Factor,
        apply: |p, s| match s {
            Setting::Factor(f) => p.open_backoff(f),
            _ => p,
        },
    },
    Field {
        name: "open_max",
        kind: Kind::Span,
        apply: |p, s| p.open_max(span(s)),
    },
    Field {
        name: "open_jitter",
        kind: Kind::Percent,
        apply: |p, s| p.open_jitter(int(s) as u8),
    },
    Field {
        name: "half_open",
        kind: Kind::Count,
        apply: |p, s| p.half_open(int(s)),
    },
    Field {
        name: "half_open_lease",
        kind: Kind::Span,
        apply: |p, s| p.half_open_lease(span(s)),
    },
    Field {
        name: "max_concurrent",
        kind: Kind::Bulkhead,
        apply: |p, s| match s {
            Setting::Adaptive(floor, ceiling) => p.adaptive_concurrency(floor, ceiling),
            _ => p.max_concurrent(int(s)),
        },
    },
    // Attempts per call: not a `Policy` knob (the attribute's `retry`); read into
    // `Candidate::retry` by `build`.
    inert("retry", Kind::Count),
    Field {
        name: "retry_budget",
        kind: Kind::Budget,
        apply: |p, s| match s {
            Setting::Budget(b) => p.retry_budget(b.percent, b.floor),
            _ => p,
        },
    },
    // A group and its settings: read into `Candidate::group` by `build`; the replay gives the
    // keys that join it `Policy::group`.
    inert("group", Kind::Name),
    inert("group_keys", Kind::Keys),
    inert("interval", Kind::Span),
    inert("success_rate", Kind::Stdev),
    inert("min_members", Kind::Count),
    inert("failure_percentage", Kind::PercentOrOff),
    inert("max_ejection", Kind::Percent),
    inert("ejection_base", Kind::Span),
    inert("ejection_max", Kind::Span),
    inert("healthy_span", Kind::Span),
];

fn field_names() -> String {
    let names: Vec<String> = FIELDS.iter().map(|f| format!("`{}`", f.name)).collect();
    names.join(", ")
}

/// Reads one field's value (`raw` as written, without quotes).
fn read_value(field: &Field, raw: &str) -> Result<Setting, String> {
    let raw = raw.trim();
    let as_int = || raw.parse::<u32>().ok();
    let as_span = || humantime::parse_duration(raw).ok();
    if field.name == "open_for" && raw.contains("::") {
        return Err(format!(
            "`{raw}` names a function, which a replayed policy cannot; give `open_for` a \
             duration (with `open_backoff` and `open_max` to approximate the function's waits)"
        ));
    }
    let setting = match field.kind {
        Kind::CountOrSpan => as_int()
            .map(Setting::Int)
            .or_else(|| as_span().map(Setting::Span)),
        Kind::Count => as_int().map(Setting::Int),
        Kind::Percent => as_int().filter(|n| (1..=100).contains(n)).map(Setting::Int),
        Kind::PercentOrOff if raw == "off" => Some(Setting::Off),
        Kind::PercentOrOff => as_int().filter(|n| (1..=100).contains(n)).map(Setting::Int),
        Kind::Span => as_span().map(Setting::Span),
        Kind::Factor => raw
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(Setting::Factor),
        Kind::Bulkhead => as_int().map(Setting::Int).or_else(|| {
            match fusebox::Concurrency::from_text(raw.trim_matches('"')) {
                Ok(fusebox::Concurrency::Adaptive { floor, ceiling }) => {
                    Some(Setting::Adaptive(floor, ceiling))
                }
                _ => None,
            }
        }),
        Kind::Budget => raw
            .parse::<fusebox::RetryBudget>()
            .ok()
            .map(Setting::Budget),
        Kind::Name => fusebox::Policy::new()
            .group(intern(raw))
            .validate()
            .ok()
            .map(|()| Setting::Name(intern(raw))),
        Kind::Keys => KeySet::parse(raw).map(|_| Setting::Name(intern(raw))),
        Kind::Stdev => raw
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite() && (0.0..1000.0).contains(f))
            .map(Setting::Factor),
    };
    setting.ok_or_else(|| {
        let expected = match field.kind {
            Kind::CountOrSpan => "a number of calls (`100`) or a span (`30s`)",
            Kind::Count => "a whole number",
            Kind::Percent => "a percentage from 1 to 100",
            Kind::PercentOrOff => "a percentage from 1 to 100, or `off`",
            Kind::Span => "a duration such as `500ms`, `30s` or `2m`",
            Kind::Factor => "a number such as `2.0`",
            Kind::Bulkhead => {
                "a number of calls in flight (`10`), or `adaptive` / `adaptive(floor..ceiling)` (`adaptive(2..200)`)"
            }
            Kind::Budget => "a retry budget such as `20%` or `20%, 10/s`",
            Kind::Name => {
                "a group's name: 1 to 64 ASCII letters, digits, `_`, `-`, `.` or `:` (`search`)"
            }
            Kind::Keys => {
                "the keys that join the group: `*` (every key), a prefix (`search-*`) or keys and prefixes separated by `|` (`a|b|cache-*`)"
            }
            Kind::Stdev => "a number of standard deviations such as `1.9` (0 turns the rule off)",
        };
        format!("invalid value `{raw}`; expected {expected}")
    })
}

/// Builds a candidate from `(field, raw value, place)` triples; `place` names where each was written.
fn build(
    name: &str,
    fields: &[(String, String, String)],
    place: &str,
) -> Result<Candidate, PolicyError> {
    let mut policy = Policy::new();
    let mut settings = Vec::new();
    for (field_name, raw, at) in fields {
        let Some(field) = FIELDS.iter().find(|f| f.name == field_name) else {
            return Err(PolicyError {
                place: at.clone(),
                field: Some(field_name.clone()),
                message: format!(
                    "unknown policy field; {}expected one of {}",
                    crate::trace::closest(field_name, FIELDS.iter().map(|f| f.name))
                        .map_or(String::new(), |n| format!("did you mean `{n}`? ")),
                    field_names()
                ),
            });
        };
        let setting = read_value(field, raw).map_err(|message| PolicyError {
            place: at.clone(),
            field: Some(field_name.clone()),
            message,
        })?;
        if let Some(slot) = settings.iter_mut().find(|(f, _)| *f == field.name) {
            slot.1 = setting;
        } else {
            settings.push((field.name, setting));
        }
        policy = (field.apply)(policy, setting);
    }
    // As in the attribute: `consecutive` without `failure_rate` is the simple policy, with the
    // failure-rate rule off.
    let has = |name: &str| settings.iter().any(|(f, _)| *f == name);
    if has("consecutive") && !has("failure_rate") {
        policy = policy.rate_off();
    }
    let retry = match settings.iter().find(|(f, _)| *f == "retry") {
        Some((_, Setting::Int(n))) if (1..=100).contains(n) => *n,
        Some((_, other)) => {
            return Err(PolicyError {
                place: place.to_owned(),
                field: Some("retry".into()),
                message: format!(
                    "invalid value `{}`; expected 1..=100 attempts",
                    other.text()
                ),
            });
        }
        None => 1,
    };
    policy.validate().map_err(|e| PolicyError {
        place: place.to_owned(),
        field: Some(e.field().to_owned()),
        message: format!("{e}"),
    })?;
    let group = build_group(&settings, place)?;
    Ok(Candidate {
        name: name.to_owned(),
        policy,
        retry,
        settings,
        group,
    })
}

/// The candidate's group from its settings: `None` without `group`; an error for a group
/// setting without `group`.
fn build_group(
    settings: &[(&'static str, Setting)],
    place: &str,
) -> Result<Option<GroupSpec>, PolicyError> {
    let name = settings.iter().find_map(|(f, v)| match (*f, v) {
        ("group", Setting::Name(n)) => Some(*n),
        _ => None,
    });
    let Some(name) = name else {
        if let Some((field, _)) = settings.iter().find(|(f, _)| is_group_field(f)) {
            return Err(PolicyError {
                place: place.to_owned(),
                field: Some((*field).to_owned()),
                message: "a group's setting, and the candidate has no group; name it with `group=…` (e.g. `group=search`)".into(),
            });
        }
        return Ok(None);
    };
    let keys = settings
        .iter()
        .find_map(|(f, v)| match (*f, v) {
            ("group_keys", Setting::Name(raw)) => KeySet::parse(raw),
            _ => None,
        })
        .unwrap_or(KeySet::All);
    let mut policy = GroupPolicy::new();
    for (field, value) in settings {
        if let Some((_, apply)) = GROUP_FIELDS.iter().find(|(f, _)| f == field) {
            policy = apply(policy, *value);
        }
    }
    let s = policy.settings();
    if s.ejection_max < s.ejection_base {
        return Err(PolicyError {
            place: place.to_owned(),
            field: Some("ejection_max".into()),
            message: format!(
                "{} is shorter than `ejection_base` = {}; give the longest ejection at least the first one's wait",
                span_text(s.ejection_max),
                span_text(s.ejection_base)
            ),
        });
    }
    Ok(Some(GroupSpec { name, keys, policy }))
}

/// Reads a `--policy` string: `[name:] field=value, field=value, …`. Fields left out keep
/// `fusebox::Policy::new()`'s defaults, and, as in the attribute, `consecutive` without
/// `failure_rate` turns the failure-rate rule off; `default_name` names it when no `name:` is given.
///
/// # Errors
///
/// A [`PolicyError`] naming the field when a field is unknown, a value does not parse, or the
/// policy is invalid.
pub fn parse_policy_arg(arg: &str, default_name: &str) -> Result<Candidate, PolicyError> {
    let place = format!("--policy \"{arg}\"");
    let (name, body) = match arg.split_once(':') {
        Some((name, body)) if !name.contains('=') => (name.trim(), body),
        _ => (default_name, arg),
    };
    let mut fields = Vec::new();
    for part in body.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        // `retry_budget=20%, 10/s`: the floor after the comma belongs to the budget.
        if let Some(budget) =
            fields
                .last_mut()
                .filter(|(f, _, _): &&mut (String, String, String)| {
                    f == "retry_budget" && !part.contains('=')
                })
        {
            budget.1 = format!("{}, {part}", budget.1);
            continue;
        }
        let Some((field, value)) = part.split_once('=') else {
            return Err(PolicyError {
                place,
                field: Some(part.to_owned()),
                message: "expected `field=value`, e.g. `window=100`".into(),
            });
        };
        fields.push((
            field.trim().to_owned(),
            value.trim().trim_matches('"').to_owned(),
            place.clone(),
        ));
    }
    build(name, &fields, &place)
}

/// Reads a TOML file of named candidates (`[policies.<name>]` tables); `file` names it in errors.
///
/// # Errors
///
/// A [`PolicyError`] naming the file, the candidate and the field when the TOML does not
/// parse, a field is unknown or a policy is invalid.
pub fn parse_policy_file(text: &str, file: &str) -> Result<Vec<Candidate>, PolicyError> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| PolicyError {
        place: format!("{file}{}", line_of_span(text, e.span())),
        field: None,
        message: format!("not valid TOML: {}", e.message()),
    })?;
    let whole = |message: String| PolicyError {
        place: file.to_owned(),
        field: None,
        message,
    };
    let policies = match table.get("policies") {
        Some(toml::Value::Table(t)) => t,
        _ => {
            return Err(whole(
                "no `[policies.<name>]` tables; write one per candidate, e.g. `[policies.fast]` then `window = 20`".into(),
            ));
        }
    };
    if let Some(other) = table.keys().find(|k| *k != "policies") {
        return Err(whole(format!(
            "unknown top-level entry `{other}`; candidates go in `[policies.<name>]` tables"
        )));
    }
    let mut out = Vec::new();
    for (name, body) in policies {
        let toml::Value::Table(body) = body else {
            return Err(whole(format!(
                "`policies.{name}` must be a table: `[policies.{name}]`"
            )));
        };
        let mut fields = Vec::new();
        for (field, value) in body {
            let raw = match value {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                other => other.to_string(),
            };
            let line = find_field_line(text, name, field);
            let at = match line {
                Some(line) => format!("{file} line {line} (`policies.{name}`)"),
                None => format!("{file} (`policies.{name}`)"),
            };
            fields.push((line.unwrap_or(usize::MAX), field.clone(), raw, at));
        }
        // Tables come sorted by name: keep the order the file wrote them in.
        fields.sort_by_key(|f| f.0);
        let fields: Vec<_> = fields.into_iter().map(|(_, f, r, a)| (f, r, a)).collect();
        let header = find_header_line(text, name).unwrap_or(usize::MAX);
        out.push((
            header,
            build(name, &fields, &format!("{file} (`policies.{name}`)"))?,
        ));
    }
    out.sort_by_key(|c| c.0);
    let out: Vec<Candidate> = out.into_iter().map(|(_, c)| c).collect();
    if out.is_empty() {
        return Err(whole("no candidates in `[policies]`".into()));
    }
    Ok(out)
}

fn line_of_span(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    match span {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!(" line {line}")
        }
        None => String::new(),
    }
}

/// The 1-based line of the `[policies.<name>]` header.
fn find_header_line(text: &str, name: &str) -> Option<usize> {
    text.lines()
        .position(|line| {
            let header = line.trim().trim_matches(|c| c == '[' || c == ']').trim();
            line.trim().starts_with('[')
                && (header == format!("policies.{name}")
                    || header == format!("policies.\"{name}\""))
        })
        .map(|i| i + 1)
}

/// The 1-based line of `field = …` inside `[policies.<name>]`, found by scanning the text.
fn find_field_line(text: &str, name: &str, field: &str) -> Option<usize> {
    let mut inside = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') {
            let header = t.trim_matches(|c| c == '[' || c == ']').trim();
            inside =
                header == format!("policies.{name}") || header == format!("policies.\"{name}\"");
            continue;
        }
        if inside
            && t.split_once('=')
                .is_some_and(|(k, _)| k.trim().trim_matches('"') == field)
        {
            return Some(i + 1);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_string_becomes_builder_calls() {
        let c = parse_policy_arg("window=20, failure_rate=50, open_for=30s", "p1").unwrap();
        assert_eq!(c.policy.settings().window, fusebox::Window::Count(20));
        assert_eq!(c.policy.settings().open_for, Duration::from_secs(30));
        assert_eq!(c.policy_arg(), "window=20,failure_rate=50,open_for=30s");
        assert_eq!(
            c.attribute_args(),
            "window = 20, failure_rate = 50, open_for = \"30s\""
        );
    }

    #[test]
    fn consecutive_alone_turns_the_rate_rule_off_as_in_the_attribute() {
        let alone = parse_policy_arg("consecutive=5", "p").unwrap();
        assert_eq!(alone.policy.settings().failure_rate, None);
        let both = parse_policy_arg("consecutive=5,failure_rate=40", "p").unwrap();
        assert_eq!(both.policy.settings().failure_rate, Some(40));
    }

    #[test]
    fn throttle_is_a_factor_as_in_the_attribute() {
        let c = parse_policy_arg("window=100,throttle=1.5", "p").unwrap();
        assert_eq!(c.policy.settings().throttle, Some(1.5));
        assert_eq!(c.attribute_args(), "window = 100, throttle = 1.5");
        let error = parse_policy_arg("throttle=fast", "p").unwrap_err();
        assert!(error.message.contains("a number such as `2.0`"), "{error}");
    }

    #[test]
    fn failure_count_is_a_field_as_in_the_attribute() {
        let c = parse_policy_arg("window=\"1m\",failure_count=50", "p").unwrap();
        assert_eq!(c.policy.settings().failure_count, Some(50));
        assert_eq!(
            c.policy.settings().failure_rate,
            None,
            "alone it replaces the rate rule"
        );
        assert_eq!(c.attribute_args(), "window = \"1m\", failure_count = 50");
    }

    #[test]
    fn spans_print_as_the_attribute_writes_them() {
        assert_eq!(span_text(Duration::from_millis(1500)), "1500ms");
        assert_eq!(span_text(Duration::from_secs(120)), "2m");
        assert_eq!(span_text(Duration::from_secs(30)), "30s");
    }

    #[test]
    fn zero_and_out_of_range_rates_get_one_message() {
        for value in ["0", "150"] {
            let e = parse_policy_arg(&format!("failure_rate={value}"), "p")
                .unwrap_err()
                .to_string();
            assert_eq!(
                e,
                format!(
                    "--policy \"failure_rate={value}\": field `failure_rate`: invalid value `{value}`; expected a percentage from 1 to 100, or `off`"
                )
            );
        }
        let e = parse_policy_arg("slow=1s,slow_rate=0", "p")
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("expected a percentage from 1 to 100"), "{e}");
    }

    #[test]
    fn an_unknown_field_suggests_the_closest_one() {
        let e = parse_policy_arg("window=100,falure_rate=50", "p")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown policy field; did you mean `failure_rate`? expected one of"),
            "{e}"
        );
        let e = parse_policy_arg("colour=red", "p").unwrap_err().to_string();
        assert!(e.contains("unknown policy field; expected one of"), "{e}");
    }

    #[test]
    fn a_named_string_keeps_its_name() {
        let c = parse_policy_arg("fast: consecutive=5", "p1").unwrap();
        assert_eq!(c.name, "fast");
    }

    #[test]
    fn a_group_and_its_settings_are_fields() {
        let c = parse_policy_arg(
            "window=100,group=search,group_keys=host-*|cache-1,max_ejection=20,success_rate=2.5,ejection_base=10s,ejection_max=1m,failure_percentage=off",
            "p",
        )
        .unwrap();
        let group = c.group.as_ref().unwrap();
        assert_eq!(group.name, "search");
        assert!(group.keys.matches("host-3") && group.keys.matches("cache-1"));
        assert!(!group.keys.matches("cache-2"));
        let s = group.policy.settings();
        assert_eq!(s.max_ejection, 20);
        assert_eq!(s.success_rate, Some(2.5));
        assert_eq!(s.failure_percentage, None);
        assert_eq!(
            (s.ejection_base, s.ejection_max),
            (Duration::from_secs(10), Duration::from_secs(60))
        );
        assert_eq!(
            c.policy.settings().group,
            None,
            "the replay gives the members their group"
        );
        assert_eq!(c.attribute_args(), "window = 100, group = \"search\"");
        assert_eq!(
            c.group_code().unwrap(),
            "registry().configure_group(\"search\", GroupPolicy::new().max_ejection(20).success_rate(2.5).ejection(Duration::from_secs(10), Duration::from_secs(60)).failure_percentage(0))"
        );
        assert_eq!(
            parse_policy_arg(&c.policy_arg(), "p").unwrap().group,
            c.group,
            "the `--policy` string reads back"
        );
        let every = parse_policy_arg("group=search", "p").unwrap();
        assert_eq!(every.group.unwrap().keys, KeySet::All);
    }

    #[test]
    fn group_settings_without_a_group_or_out_of_range_are_errors_that_say_the_fix() {
        let e = parse_policy_arg("max_ejection=20", "p")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "--policy \"max_ejection=20\": field `max_ejection`: a group's setting, and the candidate has no group; name it with `group=…` (e.g. `group=search`)"
        );
        let e = parse_policy_arg("group=no spaces", "p")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("field `group`: invalid value `no spaces`; expected a group's name"),
            "{e}"
        );
        let e = parse_policy_arg("group=g,success_rate=-1", "p")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("expected a number of standard deviations"),
            "{e}"
        );
        let e = parse_policy_arg("group=g,ejection_base=1m,ejection_max=10s", "p")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("field `ejection_max`: 10s is shorter than `ejection_base` = 1m"),
            "{e}"
        );
        let e = parse_policy_arg("group=g,max_ejection=0", "p")
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("expected a percentage from 1 to 100"), "{e}");
    }

    #[test]
    fn a_policy_file_takes_a_group() {
        let text = "[policies.search]\nwindow = 100\ngroup = \"search\"\ngroup_keys = \"host-*\"\nsuccess_rate = 2.5\nmax_ejection = 20\nfailure_percentage = \"off\"\nejection_base = \"10s\"\n";
        let c = &parse_policy_file(text, "groups.toml").unwrap()[0];
        let group = c.group.as_ref().unwrap();
        assert_eq!(group.keys, KeySet::Patterns(vec!["host-*".into()]));
        let s = group.policy.settings();
        assert_eq!(
            (s.success_rate, s.max_ejection, s.failure_percentage),
            (Some(2.5), 20, None)
        );
        assert_eq!(s.ejection_base, Duration::from_secs(10));
        let e = parse_policy_file("[policies.p]\nmax_ejecton = 20\n", "groups.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean `max_ejection`?"), "{e}");
    }
}
