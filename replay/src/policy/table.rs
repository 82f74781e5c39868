//! The fields a candidate may set — the policy knobs, read and applied by the policy text grammar
//! (`fusebox_policy::text`, which the attribute's `shadow` and the configuration read too), and
//! the replay's own (`retry`, a group) — and the [`Candidate`] built from them.

use fusebox::Policy;
use fusebox_policy::text;

use super::group::build_group;
use super::{Candidate, KeySet, PolicyError, Setting, Written, intern};

/// What a replay-only field accepts (the policy knobs are read by `fusebox_policy::text`).
#[derive(Clone, Copy)]
enum Kind {
    Count,
    Span,
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

/// The fields a candidate may set besides the policy knobs: read by `build` into the candidate
/// (`retry`: attempts per call, the attribute's `retry`; a group and its settings, which the
/// replay gives the keys that join it), never applied to the `Policy`.
const REPLAY_FIELDS: &[(&str, Kind)] = &[
    ("retry", Kind::Count),
    ("group", Kind::Name),
    ("group_keys", Kind::Keys),
    ("interval", Kind::Span),
    ("success_rate", Kind::Stdev),
    ("min_members", Kind::Count),
    ("failure_percentage", Kind::GroupPercent),
    ("max_ejection", Kind::GroupPercent),
    ("ejection_base", Kind::Span),
    ("ejection_max", Kind::Span),
    ("healthy_span", Kind::Span),
];

/// Every field a candidate may set: the policy text's, then the replay's own.
fn all_fields() -> impl Iterator<Item = &'static str> + Clone {
    text::field_names().chain(REPLAY_FIELDS.iter().map(|(name, _)| *name))
}

fn field_names() -> String {
    let names: Vec<String> = all_fields().map(|f| format!("`{f}`")).collect();
    names.join(", ")
}

/// Reads one replay-only field's value (`raw` as written, without quotes).
fn read_value(name: &str, kind: Kind, raw: &str) -> Result<Setting, String> {
    let raw = raw.trim();
    let setting = match kind {
        Kind::Count => raw.parse::<u32>().ok().map(Setting::Int),
        Kind::Span => fusebox::parse_duration(raw).ok().map(Setting::Span),
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
        Kind::GroupPercent if raw == "off" && name == "failure_percentage" => Some(Setting::Off),
        Kind::GroupPercent => raw.parse::<u8>().ok().map(|n| Setting::Int(u32::from(n))),
    };
    setting.ok_or_else(|| {
        let span_expected = format!(
            "a duration such as `500ms`, `30s` or `1m 30s` (units {})",
            fusebox::DURATION_UNITS
        );
        let expected = match kind {
            Kind::Count => "a whole number",
            Kind::Span => span_expected.as_str(),
            Kind::Name => {
                "a group's name: 1 to 64 ASCII letters, digits, `_`, `-`, `.` or `:` (`search`)"
            }
            Kind::Keys => {
                "the keys that join the group: `*` (every key), a prefix (`search-*`) or keys and prefixes separated by `|` (`a|b|cache-*`)"
            }
            Kind::Stdev => "a number of standard deviations such as `1.9` (0 turns the rule off)",
            Kind::GroupPercent if name == "failure_percentage" => {
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
        let error = |message: String| PolicyError {
            place: at.clone(),
            field: Some(field_name.clone()),
            message,
        };
        let Some(name) = all_fields().find(|f| f == field_name) else {
            return Err(error(format!(
                "unknown policy field; {}expected one of {}",
                crate::trace::closest(field_name, all_fields())
                    .map_or(String::new(), |n| format!("did you mean `{n}`? ")),
                field_names()
            )));
        };
        // As in a trace line: a field given twice is refused, never silently overwritten.
        if settings.iter().any(|(f, _)| *f == name) {
            return Err(error("given twice; write each field once".into()));
        }
        let setting = match text::read_field(policy, name, raw) {
            Some(read) => {
                let (next, setting) = read.map_err(error)?;
                policy = next;
                setting
            }
            None => {
                let kind = REPLAY_FIELDS
                    .iter()
                    .find(|(f, _)| *f == name)
                    .map(|(_, k)| *k);
                read_value(name, kind.unwrap_or(Kind::Count), raw).map_err(error)?
            }
        };
        settings.push((name, setting));
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
