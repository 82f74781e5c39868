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

mod group;
mod parse;
mod table;

use group::is_group_field;
pub use parse::{parse_policy_arg, parse_policy_file};

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

pub use fusebox_policy::text::Setting;

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

use fusebox_policy::text::{int, span};

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

/// A setting as written back: in a `--policy` string (`text`) or as the attribute or a TOML file
/// writes it (`literal`).
pub(crate) trait Written {
    fn text(&self) -> String;
    fn literal(&self) -> String;
}

impl Written for Setting {
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
            e.contains("use a number of standard deviations, at least 0"),
            "{e}"
        );
        let e = parse_policy_arg("group=g,ejection_base=1m,ejection_max=10s", "p")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("field `ejection_max`: 10s is shorter than `ejection_base` = 1m"),
            "{e}"
        );
        let e = parse_policy_arg("group=g,max_ejection=300", "p")
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected a whole number of percent"), "{e}");
    }

    /// A field given twice is refused, as in a trace line, never silently overwritten.
    #[test]
    fn a_field_given_twice_is_refused() {
        let e = parse_policy_arg("consecutive=3,consecutive=5", "p").unwrap_err();
        assert_eq!(
            e.to_string(),
            "--policy \"consecutive=3,consecutive=5\": field `consecutive`: given twice; write each field once"
        );
        let e = parse_policy_arg("p: window=100, group=a, window=100", "x").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("window"));
        // A budget's floor after its comma is the same field's value, not a second one.
        parse_policy_arg("retry_budget=20%, 10/s,window=50", "p").unwrap();
    }

    /// A group's settings go through the runtime's own check (`GroupPolicy::validate`): the
    /// values `configure_group` and a `[groups.<name>]` table refuse are refused here too, with
    /// its message, and those they accept are accepted.
    #[test]
    fn group_settings_are_checked_as_the_runtime_checks_them() {
        for (arg, field) in [
            ("interval=0s", "interval"),
            ("min_members=0", "min_members"),
            ("max_ejection=101", "max_ejection"),
            ("failure_percentage=150", "failure_percentage"),
            ("success_rate=1000", "success_rate"),
            ("ejection_base=0s", "ejection_base"),
        ] {
            let e = parse_policy_arg(&format!("group=g,{arg}"), "p").unwrap_err();
            assert_eq!(e.field.as_deref(), Some(field), "{arg}: {e}");
            let policy = GroupPolicy::new();
            let runtime = match field {
                "interval" => policy.interval(Duration::ZERO),
                "min_members" => policy.min_members(0),
                "max_ejection" => policy.max_ejection(101),
                "failure_percentage" => policy.failure_percentage(150),
                "success_rate" => policy.success_rate(1000.0),
                _ => policy.ejection(Duration::ZERO, Duration::from_secs(300)),
            };
            let refused = runtime.validate().unwrap_err().to_string();
            assert!(e.message.contains(&refused), "{arg}: {e} / {refused}");
        }
        let c = parse_policy_arg("group=g,max_ejection=0,failure_percentage=0", "p").unwrap();
        let s = c.group.unwrap().policy.settings();
        assert_eq!((s.max_ejection, s.failure_percentage), (0, None));
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
