//! The table of fields a candidate may set, each read into a [`Setting`] and applied as the
//! `fusebox::Policy` builder call of the same name, and the [`Candidate`] built from them.

use fusebox::Policy;

use super::group::build_group;
use super::{Candidate, KeySet, PolicyError, Setting, int, intern, span};

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
    /// A group's number of standard deviations (`success_rate`; 0 turns the rule off): any
    /// finite number, whose range `GroupPolicy::validate` checks.
    Stdev,
    /// A group's whole number of percent, 0 ..= 255 (its range `GroupPolicy::validate` checks),
    /// or `off` when `off` is given.
    GroupPercent,
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
    inert("failure_percentage", Kind::GroupPercent),
    inert("max_ejection", Kind::GroupPercent),
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
            .filter(|f| f.is_finite())
            .map(Setting::Factor),
        Kind::GroupPercent if raw == "off" && field.name == "failure_percentage" => {
            Some(Setting::Off)
        }
        Kind::GroupPercent => raw.parse::<u8>().ok().map(|n| Setting::Int(u32::from(n))),
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
            Kind::GroupPercent if field.name == "failure_percentage" => {
                "a whole number of percent (0..=100; 0 or `off` turns the rule off)"
            }
            Kind::GroupPercent => {
                "a whole number of percent (0..=100; at least one member may always be open)"
            }
        };
        format!("invalid value `{raw}`; expected {expected}")
    })
}

/// Builds a candidate from `(field, raw value, place)` triples; `place` names where each was written.
pub(super) fn build(
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
        // As in a trace line: a field given twice is refused, never silently overwritten.
        if settings.iter().any(|(f, _)| *f == field.name) {
            return Err(PolicyError {
                place: at.clone(),
                field: Some(field_name.clone()),
                message: "given twice; write each field once".into(),
            });
        }
        let setting = read_value(field, raw).map_err(|message| PolicyError {
            place: at.clone(),
            field: Some(field_name.clone()),
            message,
        })?;
        settings.push((field.name, setting));
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
