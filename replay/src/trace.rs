//! The trace format: one JSON object per line, one line per call, in the order calls were reported.
//!
//! ```text
//! {"at_ns":1500000000,"key":"payment","outcome":"success","latency_ns":42000000}
//! {"at_ns":1600000000,"key":"payment","outcome":"rejected","reason":"open"}
//! ```
//!
//! | field | required | meaning |
//! |---|---|---|
//! | `at_ns` | yes | when the call was reported (or rejected), nanoseconds on the recording registry's clock; never decreasing from line to line |
//! | `key` | yes | the breaker's key |
//! | `outcome` | yes | `success`, `failure` (a counted failure), `ignored` (an error that does not count, or a cancelled call) or `rejected` (traces written before fusebox used that word say `refused`, which is read the same) |
//! | `latency_ns` | no | admission to report, in nanoseconds |
//! | `reason` | no | why a rejected call was rejected, `fusebox::Reason::code` (`open`, `half_open_full`, …) |
//! | `function` | no | the annotated function's path |
//!
//! Blank lines are skipped. Any other field is an error, so a misspelt field is never silently
//! ignored.

use std::fmt;

/// How a recorded call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The call succeeded.
    Success,
    /// The call failed in a way that counts against the circuit.
    Failure,
    /// The call ended in an error that does not count (or was cancelled).
    Ignored,
    /// The breaker refused the call: its body never ran, so its outcome is unknown.
    Refused,
}

impl Outcome {
    /// The name used in traces.
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failure => "failure",
            Outcome::Ignored => "ignored",
            Outcome::Refused => "rejected",
        }
    }

    /// Parses a trace's outcome name.
    pub fn parse(name: &str) -> Option<Outcome> {
        Some(match name {
            "success" => Outcome::Success,
            "failure" => Outcome::Failure,
            "ignored" => Outcome::Ignored,
            // `refused`: the word of older traces.
            "rejected" | "refused" => Outcome::Refused,
            _ => return None,
        })
    }
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// When it was reported, in nanoseconds on the recording clock.
    pub at_ns: u64,
    /// The breaker's key.
    pub key: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Admission to report, when known.
    pub latency_ns: Option<u64>,
    /// Why it was refused, for a refusal.
    pub reason: Option<String>,
    /// The annotated function, when known.
    pub function: Option<String>,
}

impl Call {
    /// A call with no latency, reason or function.
    pub fn new(at_ns: u64, key: &str, outcome: Outcome) -> Call {
        Call {
            at_ns,
            key: key.to_owned(),
            outcome,
            latency_ns: None,
            reason: None,
            function: None,
        }
    }

    /// This call with a latency.
    pub fn with_latency(mut self, latency_ns: u64) -> Call {
        self.latency_ns = Some(latency_ns);
        self
    }

    /// When the call was admitted: `at_ns - latency_ns` (the report time when the latency is unknown).
    pub fn admitted_ns(&self) -> u64 {
        self.at_ns.saturating_sub(self.latency_ns.unwrap_or(0))
    }

    /// The call as one trace line (without the newline).
    pub fn to_line(&self) -> String {
        let mut map = serde_json::Map::new();
        map.insert("at_ns".into(), self.at_ns.into());
        map.insert("key".into(), self.key.clone().into());
        map.insert("outcome".into(), self.outcome.as_str().into());
        if let Some(latency) = self.latency_ns {
            map.insert("latency_ns".into(), latency.into());
        }
        if let Some(reason) = &self.reason {
            map.insert("reason".into(), reason.clone().into());
        }
        if let Some(function) = &self.function {
            map.insert("function".into(), function.clone().into());
        }
        serde_json::Value::Object(map).to_string()
    }
}

/// A trace that could not be read: the line (1-based), the field when one is to blame, and what
/// to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    /// The 1-based line number.
    pub line: usize,
    /// The field at fault, when one is.
    pub field: Option<&'static str>,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.field {
            Some(field) => write!(f, "line {}: field `{}`: {}", self.line, field, self.message),
            None => write!(f, "line {}: {}", self.line, self.message),
        }
    }
}

impl std::error::Error for TraceError {}

const FIELDS: [&str; 6] = [
    "at_ns",
    "key",
    "outcome",
    "latency_ns",
    "reason",
    "function",
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
        last = call.at_ns;
        calls.push(call);
    }
    Ok(calls)
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
    let value: serde_json::Value = serde_json::from_str(raw).map_err(|e| {
        err(
            None,
            format!("not a JSON object ({e}); each line is one call, e.g. {{\"at_ns\":0,\"key\":\"payment\",\"outcome\":\"success\"}}"),
        )
    })?;
    let serde_json::Value::Object(map) = value else {
        return Err(err(
            None,
            "not a JSON object; each line is one call, e.g. {\"at_ns\":0,\"key\":\"payment\",\"outcome\":\"success\"}".into(),
        ));
    };
    if let Some(unknown) = map.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(TraceError {
            line,
            field: None,
            message: format!(
                "unknown field `{unknown}`; expected one of `at_ns`, `key`, `outcome`, `latency_ns`, `reason`, `function`"
            ),
        });
    }
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
    Ok(Call {
        at_ns,
        key,
        outcome,
        latency_ns,
        reason: text("reason")?,
        function: text("function")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_a_line() {
        let call = Call::new(5, "k", Outcome::Failure).with_latency(3);
        assert_eq!(parse_line(&call.to_line(), 1).unwrap(), call);
    }
}
