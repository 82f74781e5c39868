//! Policy text: `window = 50, failure_rate = 30, open_for = 30s`, the one grammar a policy is
//! written in where it is a string — the attribute's `shadow` argument, the configuration's
//! `shadow` field and `fusebox-replay`'s `--policy` strings.
//!
//! A text is fields separated by commas, each `field = value` (spaces and quotes around a value
//! are optional), named as the attribute's policy arguments; a retry budget's floor after its
//! comma stays with it (`retry_budget = 20%, 10/s`). [`read_field`] reads one field into a
//! [`Setting`] and applies it; [`policy_of_text`] reads a whole text into a validated [`Policy`];
//! [`shadows_of_text`] reads a `shadow` argument: `name: fields; name: fields`.

use std::time::Duration;

use crate::{Concurrency, DURATION_UNITS, Policy, RetryBudget, parse_duration};

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
    Budget(RetryBudget),
    /// A name or a pattern (a group's name), kept for the process's life by whoever reads it.
    Name(&'static str),
}

/// The whole number of `s` (0 for another kind).
#[must_use]
pub fn int(s: Setting) -> u32 {
    match s {
        Setting::Int(n) => n,
        _ => 0,
    }
}

/// The duration of `s` (zero for another kind).
#[must_use]
pub fn span(s: Setting) -> Duration {
    match s {
        Setting::Span(d) => d,
        _ => Duration::ZERO,
    }
}

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
}

/// One policy field: its name, what it accepts and the `Policy` builder call it becomes.
struct Field {
    name: &'static str,
    kind: Kind,
    apply: fn(Policy, Setting) -> Policy,
}

/// The fields a text may set, each the `Policy` builder method of the same name.
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
    Field {
        name: "hedge_budget",
        kind: Kind::Percent,
        apply: |p, s| p.hedge_budget(int(s) as u8),
    },
    Field {
        name: "retry_budget",
        kind: Kind::Budget,
        apply: |p, s| match s {
            Setting::Budget(b) => p.retry_budget(b.percent, b.floor),
            _ => p,
        },
    },
];

/// The names of the fields a policy text may set, in the table's order.
pub fn field_names() -> impl Iterator<Item = &'static str> + Clone {
    FIELDS.iter().map(|f| f.name)
}

/// Splits `field = value, field = value` into `(field, value)` pairs, trimmed and unquoted; a
/// retry budget's floor after its comma stays with it.
///
/// # Errors
///
/// The part that is not `field = value`.
pub fn split_fields(body: &str) -> Result<Vec<(String, String)>, String> {
    let mut fields: Vec<(String, String)> = Vec::new();
    for part in body.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        // `retry_budget=20%, 10/s`: the floor after the comma belongs to the budget.
        if let Some(budget) = fields
            .last_mut()
            .filter(|(f, _)| f == "retry_budget" && !part.contains('='))
        {
            budget.1 = format!("{}, {part}", budget.1);
            continue;
        }
        let Some((field, value)) = part.split_once('=') else {
            return Err(part.to_owned());
        };
        fields.push((
            field.trim().to_owned(),
            value.trim().trim_matches('"').to_owned(),
        ));
    }
    Ok(fields)
}

/// Reads `raw` as the value of the policy field `field` and applies it to `policy`: `None` when
/// `field` is not a policy field, else the policy with it set and the value read, or what is
/// wrong with the value and what to write instead.
#[must_use]
pub fn read_field(
    policy: Policy,
    field: &str,
    raw: &str,
) -> Option<Result<(Policy, Setting), String>> {
    let field = FIELDS.iter().find(|f| f.name == field)?;
    Some(read_value(field, raw).map(|setting| ((field.apply)(policy, setting), setting)))
}

/// Reads one field's value (`raw` as written, without quotes).
fn read_value(field: &Field, raw: &str) -> Result<Setting, String> {
    let raw = raw.trim();
    let as_int = || raw.parse::<u32>().ok();
    let as_span = || parse_duration(raw).ok();
    if field.name == "open_for" && raw.contains("::") {
        return Err(format!(
            "`{raw}` names a function, which a policy text cannot; give `open_for` a \
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
            match Concurrency::from_text(raw.trim_matches('"')) {
                Ok(Concurrency::Adaptive { floor, ceiling }) => {
                    Some(Setting::Adaptive(floor, ceiling))
                }
                _ => None,
            }
        }),
        Kind::Budget => raw.parse::<RetryBudget>().ok().map(Setting::Budget),
    };
    setting.ok_or_else(|| {
        let span_expected =
            format!("a duration such as `500ms`, `30s` or `1m 30s` (units {DURATION_UNITS})");
        let expected = match field.kind {
            Kind::CountOrSpan => "a number of calls (`100`) or a span (`30s`)",
            Kind::Count => "a whole number",
            Kind::Percent => "a percentage from 1 to 100",
            Kind::PercentOrOff => "a percentage from 1 to 100, or `off`",
            Kind::Span => span_expected.as_str(),
            Kind::Factor => "a number such as `2.0`",
            Kind::Bulkhead => {
                "a number of calls in flight (`10`), or `adaptive` / `adaptive(floor..ceiling)` (`adaptive(2..200)`)"
            }
            Kind::Budget => "a retry budget such as `20%` or `20%, 10/s`",
        };
        format!("invalid value `{raw}`; expected {expected}")
    })
}

/// What is wrong with a policy text: the field at fault (when one is) and what to write instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextError {
    /// The field at fault, as written.
    pub field: Option<String>,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl std::fmt::Display for TextError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.field {
            Some(field) => write!(f, "field `{field}`: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for TextError {}

/// Reads a policy text (`window = 50, failure_rate = 30`) over `Policy::new()`'s defaults; as in
/// the attribute, `consecutive` without `failure_rate` turns the failure-rate rule off. The policy
/// is validated.
///
/// ```
/// # use fusebox_policy as fusebox;
/// let policy = fusebox::text::policy_of_text("window = 50, failure_rate = 30").unwrap();
/// assert_eq!(policy.settings().failure_rate, Some(30));
/// let error = fusebox::text::policy_of_text("window = 50, falure_rate = 30").unwrap_err();
/// assert!(error.to_string().contains("did you mean `failure_rate`?"), "{error}");
/// ```
///
/// # Errors
///
/// A [`TextError`] naming the field when a field is unknown, given twice, its value does not
/// read, or the policy is invalid.
pub fn policy_of_text(text: &str) -> Result<Policy, TextError> {
    let fields = split_fields(text).map_err(|part| TextError {
        field: Some(part),
        message: "expected `field = value`, e.g. `window = 100`".into(),
    })?;
    let mut policy = Policy::new();
    let mut seen: Vec<&str> = Vec::new();
    for (field, raw) in &fields {
        let err = |message: String| TextError {
            field: Some(field.clone()),
            message,
        };
        if seen.contains(&field.as_str()) {
            return Err(err("given twice; write each field once".into()));
        }
        policy = match read_field(policy, field, raw) {
            None => return Err(err(unknown_field(field, field_names()))),
            Some(read) => read.map_err(err)?.0,
        };
        seen.push(field);
    }
    if seen.contains(&"consecutive") && !seen.contains(&"failure_rate") {
        policy = policy.rate_off();
    }
    policy.validate().map_err(|e| TextError {
        field: Some(e.field().to_owned()),
        message: e.to_string(),
    })?;
    Ok(policy)
}

/// "unknown policy field; did you mean `x`? expected one of …" for `field` among `names`.
#[must_use]
pub fn unknown_field<'a>(field: &str, names: impl Iterator<Item = &'a str> + Clone) -> String {
    let close = names
        .clone()
        .map(|n| (edit_distance(field, n), n))
        .filter(|(d, n)| *d <= (n.len() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map_or(String::new(), |(_, n)| format!("did you mean `{n}`? "));
    let all: Vec<String> = names.map(|n| format!("`{n}`")).collect();
    format!(
        "unknown policy field; {close}expected one of {}",
        all.join(", ")
    )
}

/// The edit distance between `a` and `b` (insertions, deletions, substitutions, transpositions
/// of neighbours).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

/// What is wrong with a `shadow` text: the shadow at fault (`None`: the text as a whole) and
/// its error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowError {
    /// The shadow's name, when one is at fault.
    pub shadow: Option<String>,
    /// What is wrong with it.
    pub error: TextError,
}

impl std::fmt::Display for ShadowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.shadow {
            Some(shadow) => write!(f, "shadow `{shadow}`: {}", self.error),
            None => write!(f, "{}", self.error),
        }
    }
}

impl std::error::Error for ShadowError {}

/// The name a shadow written without one gets (`shadow = "window = 50"`).
pub const DEFAULT_SHADOW: &str = "shadow";

/// Reads a `shadow` argument: one or more candidate policies separated by `;`, each
/// `name: fields` or, for a single one, just its fields (named [`DEFAULT_SHADOW`]). A name is 1
/// to 64 ASCII letters, digits, `-`, `_`, `.` or `:`, and names differ. A shadow's fields cannot
/// name `shadow` (a shadow has none of its own).
///
/// ```
/// # use fusebox_policy as fusebox;
/// let shadows = fusebox::text::shadows_of_text("tight: window = 20, failure_rate = 30; loose: window = 200")
///     .unwrap();
/// assert_eq!(shadows[0].0, "tight");
/// assert_eq!(shadows[1].1.settings().window, fusebox::Window::Count(200));
/// ```
///
/// # Errors
///
/// A [`ShadowError`]: the shadow's name (`None`: the text as a whole) and what is wrong with it.
pub fn shadows_of_text(text: &str) -> Result<Vec<(&str, Policy)>, ShadowError> {
    let parts: Vec<&str> = text
        .split(';')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    let whole = |message: &str| {
        let error = TextError {
            field: None,
            message: message.into(),
        };
        ShadowError {
            shadow: None,
            error,
        }
    };
    if parts.is_empty() {
        return Err(whole(
            "no shadow policy; write one, like \"window = 50, failure_rate = 30\"",
        ));
    }
    let mut out: Vec<(&str, Policy)> = Vec::new();
    for part in &parts {
        let (name, body) = match part.split_once(':') {
            Some((name, body)) if !name.contains('=') => (name.trim(), body),
            _ if parts.len() == 1 => (DEFAULT_SHADOW, *part),
            _ => {
                return Err(whole(
                    "several shadows need names; write `name: fields; name: fields`, like \"tight: window = 20; loose: window = 200\"",
                ));
            }
        };
        let named = |error: TextError| ShadowError {
            shadow: Some(name.to_owned()),
            error,
        };
        if crate::group_name_problem(name).is_some() {
            return Err(named(TextError {
                field: None,
                message: "a shadow's name is 1 to 64 ASCII letters, digits, `-`, `_`, `.` or `:` (like `tight`)".into(),
            }));
        }
        if out.iter().any(|(n, _)| *n == name) {
            return Err(named(TextError {
                field: None,
                message: "two shadows with this name; give each its own".into(),
            }));
        }
        out.push((name, policy_of_text(body).map_err(named)?));
    }
    Ok(out)
}
