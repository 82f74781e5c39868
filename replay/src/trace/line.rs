//! One line of a trace read into a [`Call`]: its fields checked by name, each given once, and
//! the order of a trace's lines.

use std::fmt;

use super::{Call, MAX_LATENCY_NS, Outcome, TraceError};

const FIELDS: [&str; 7] = [
    "at_ns",
    "key",
    "outcome",
    "latency_ns",
    "reason",
    "function",
    "shadow",
];

/// Reads a whole trace. Every line must parse and times must never decrease.
///
/// # Errors
///
/// A [`TraceError`] naming the first line that does not parse, or whose time goes back.
pub fn parse(text: &str) -> Result<Vec<Call>, TraceError> {
    let mut calls = Vec::new();
    let mut last = 0u64;
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let call = parse_line(raw, line)?;
        check_order(&call, last, line)?;
        last = call.at_ns;
        calls.push(call);
    }
    Ok(calls)
}

pub(super) fn check_order(call: &Call, last: u64, line: usize) -> Result<(), TraceError> {
    if call.at_ns < last {
        return Err(TraceError {
            line,
            field: Some("at_ns"),
            message: format!(
                "time goes backwards ({} after {}); a trace lists calls in the order they were reported",
                call.at_ns, last
            ),
        });
    }
    Ok(())
}

/// The members of a JSON object in the order written, duplicates kept (a `serde_json::Map`
/// would keep only the last of a repeated member).
struct Members(Vec<(String, serde_json::Value)>);

impl<'de> serde::Deserialize<'de> for Members {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Members;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Members, A::Error> {
                let mut members = Vec::with_capacity(4);
                while let Some(entry) = map.next_entry::<String, serde_json::Value>()? {
                    members.push(entry);
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// The closest of `names` to `name`, when one is close enough to be a misspelling.
#[must_use]
pub fn closest<'a>(name: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    names
        .into_iter()
        .map(|n| (strsim::damerau_levenshtein(name, n), n))
        .filter(|(d, n)| *d <= (n.len() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

/// Reads one line (`line` is its 1-based number, for errors).
///
/// # Errors
///
/// A [`TraceError`] naming the line and the field that does not parse.
pub fn parse_line(raw: &str, line: usize) -> Result<Call, TraceError> {
    let err = |field: Option<&'static str>, message: String| TraceError {
        line,
        field,
        message,
    };
    let map = fields_of(raw, line)?;
    let nanos = |field: &'static str| -> Result<Option<u64>, TraceError> {
        match map.get(field) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                err(
                    Some(field),
                    format!("expected a whole number of nanoseconds (0 or more), found `{v}`"),
                )
            }),
        }
    };
    let text = |field: &'static str| -> Result<Option<String>, TraceError> {
        match map.get(field) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(err(Some(field), format!("expected a string, found `{v}`"))),
        }
    };
    let at_ns = nanos("at_ns")?.ok_or_else(|| {
        err(
            Some("at_ns"),
            "missing; give the report time in nanoseconds".into(),
        )
    })?;
    let key =
        text("key")?.ok_or_else(|| err(Some("key"), "missing; give the breaker's key".into()))?;
    let outcome_name = text("outcome")?.ok_or_else(|| {
        err(
            Some("outcome"),
            "missing; expected one of `success`, `failure`, `ignored`, `rejected`".into(),
        )
    })?;
    let outcome = Outcome::parse(&outcome_name).ok_or_else(|| {
        err(
            Some("outcome"),
            format!(
                "unknown outcome `{outcome_name}`; expected one of `success`, `failure`, `ignored`, `rejected`"
            ),
        )
    })?;
    let latency_ns = nanos("latency_ns")?;
    if let Some(latency) = latency_ns.filter(|l| *l > at_ns) {
        return Err(err(
            Some("latency_ns"),
            format!(
                "{latency} is longer than the time since the clock's origin ({at_ns}); the call would start before time 0"
            ),
        ));
    }
    if let Some(latency) = latency_ns.filter(|l| *l > MAX_LATENCY_NS) {
        return Err(err(
            Some("latency_ns"),
            format!(
                "{latency} is longer than {MAX_LATENCY_NS} ns (73 years); give the latency in nanoseconds"
            ),
        ));
    }
    Ok(Call {
        at_ns,
        key,
        outcome,
        latency_ns,
        reason: text("reason")?,
        function: text("function")?,
        shadow: text("shadow")?,
    })
}

/// The fields of one line (`line` is its 1-based number, for errors): a JSON object whose
/// members are each a trace field, given once.
fn fields_of(
    raw: &str,
    line: usize,
) -> Result<serde_json::Map<String, serde_json::Value>, TraceError> {
    let err = |field: Option<&'static str>, message: String| TraceError {
        line,
        field,
        message,
    };
    let example =
        "each line is one call, e.g. {\"at_ns\":0,\"key\":\"payment\",\"outcome\":\"success\"}";
    let members: Members = serde_json::from_str(raw)
        .map_err(|e| err(None, format!("not a JSON object ({e}); {example}")))?;
    let mut map = serde_json::Map::new();
    for (name, value) in members.0 {
        let Some(&field) = FIELDS.iter().find(|f| **f == name) else {
            let hint =
                closest(&name, FIELDS).map_or(String::new(), |n| format!("did you mean `{n}`? "));
            return Err(TraceError {
                line,
                field: None,
                message: format!(
                    "unknown field `{name}`; {hint}expected one of `at_ns`, `key`, `outcome`, `latency_ns`, `reason`, `function`, `shadow`"
                ),
            });
        };
        if map.contains_key(field) {
            return Err(err(
                Some(field),
                "given twice; write each field once".into(),
            ));
        }
        map.insert(name, value);
    }
    Ok(map)
}
