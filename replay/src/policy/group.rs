//! A candidate's group: its settings as fields, the [`GroupSpec`] they build, and the code
//! that sets them.

use std::time::Duration;

use fusebox::GroupPolicy;

use super::{Candidate, GroupSpec, KeySet, PolicyError, Setting, Written, int, span, span_text};

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
pub(super) fn is_group_field(field: &str) -> bool {
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

/// setting without `group`.
pub(super) fn build_group(
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
    // The runtime's own check of a group's settings, as `configure_group` and a
    // `[groups.<name>]` table make it.
    if let Err(e) = policy.validate() {
        let s = policy.settings();
        let (field, message) = match e.field() {
            "ejection" if s.ejection_base >= Duration::from_millis(1) => (
                "ejection_max",
                format!(
                    "{} is shorter than `ejection_base` = {}; give the longest ejection at least the first one's wait",
                    span_text(s.ejection_max),
                    span_text(s.ejection_base)
                ),
            ),
            "ejection" => ("ejection_base", format!("{e}")),
            field => (field, format!("{e}")),
        };
        return Err(PolicyError {
            place: place.to_owned(),
            field: Some(field.to_owned()),
            message,
        });
    }
    Ok(Some(GroupSpec { name, keys, policy }))
}
