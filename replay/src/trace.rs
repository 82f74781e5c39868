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
//! | `outcome` | yes | `success`, `failure` (a counted failure), `ignored` (an error that does not count, or a cancelled call) or `rejected` |
//! | `latency_ns` | no | admission to report, in nanoseconds |
//! | `reason` | no | why a rejected call was rejected, `fusebox::Reason::code` (`open`, `half_open_full`, …) |
//! | `function` | no | the annotated function's path |
//!
//! Blank lines are skipped. Any other field is an error (with the field it was probably meant to
//! be), and so is a field given twice, so a misspelt or repeated field is never silently ignored. A
//! line longer than [`MAX_LINE`] bytes is an error naming it.
//!
//! [`Reader`] reads a trace as a stream, one line at a time. [`read`] keeps each call of the
//! replayed key as a 16-byte [`Event`] (a trace of ten million calls holds 160 MB of events,
//! whatever its lines' length); [`read_with`] hands each to a closure and keeps nothing, for a
//! caller that reads the file again for each pass; [`read_keys`] keeps every call of every key
//! (24 bytes each, [`KeyedEvent`]), for a replay of every key ([`crate::keyed`]).

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
    /// The breaker rejected the call: its body never ran, so its outcome is unknown.
    Rejected,
}

impl Outcome {
    /// The name used in traces.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Failure => "failure",
            Outcome::Ignored => "ignored",
            Outcome::Rejected => "rejected",
        }
    }

    /// Parses a trace's outcome name.
    #[must_use]
    pub fn parse(name: &str) -> Option<Outcome> {
        Some(match name {
            "success" => Outcome::Success,
            "failure" => Outcome::Failure,
            "ignored" => Outcome::Ignored,
            "rejected" => Outcome::Rejected,
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
    /// Why it was rejected, for a rejection.
    pub reason: Option<String>,
    /// The annotated function, when known.
    pub function: Option<String>,
}

impl Call {
    /// A call with no latency, reason or function.
    #[must_use]
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
    #[must_use]
    pub fn with_latency(mut self, latency_ns: u64) -> Call {
        self.latency_ns = Some(latency_ns);
        self
    }

    /// When the call was admitted: `at_ns - latency_ns` (the report time when the latency is unknown).
    #[must_use]
    pub fn admitted_ns(&self) -> u64 {
        self.at_ns.saturating_sub(self.latency_ns.unwrap_or(0))
    }

    /// The call as one trace line (without the newline).
    #[must_use]
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

/// The longest line a trace may have, in bytes (without its newline). A recorded line is about
/// 100 bytes; a longer line is an error naming it, so a file with no newline (`/dev/zero`, a binary
/// file) ends with an error instead of filling memory.
pub const MAX_LINE: usize = 64 * 1024;

/// The most distinct keys a trace's error messages list; further keys are counted, not kept.
pub const MAX_KEYS: usize = 1_000;

/// The longest latency a trace may give, in nanoseconds (2^61 - 1, about 73 years): an
/// [`Event`] keeps it in 61 bits.
pub const MAX_LATENCY_NS: u64 = (1 << 61) - 1;

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

fn check_order(call: &Call, last: u64, line: usize) -> Result<(), TraceError> {
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

/// One call of one key as the replay keeps it: 16 bytes (its report time, and its latency and
/// outcome packed in one word), whatever the length of its key or function name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    at_ns: u64,
    /// Bits 0..61: latency in nanoseconds; bit 61: a latency was recorded; bits 62..64: outcome.
    word: u64,
}

const TIMED: u64 = 1 << 61;

impl Event {
    /// An event reported at `at_ns`. A latency above [`MAX_LATENCY_NS`] is kept as that maximum.
    #[must_use]
    pub fn new(at_ns: u64, outcome: Outcome, latency_ns: Option<u64>) -> Event {
        let code = match outcome {
            Outcome::Success => 0u64,
            Outcome::Failure => 1,
            Outcome::Ignored => 2,
            Outcome::Rejected => 3,
        };
        let latency = latency_ns.map_or(0, |l| l.min(MAX_LATENCY_NS) | TIMED);
        Event {
            at_ns,
            word: latency | (code << 62),
        }
    }

    /// When the call was reported, in nanoseconds on the recording clock.
    #[must_use]
    pub const fn at_ns(&self) -> u64 {
        self.at_ns
    }

    /// How the call ended.
    #[must_use]
    pub const fn outcome(&self) -> Outcome {
        match self.word >> 62 {
            0 => Outcome::Success,
            1 => Outcome::Failure,
            2 => Outcome::Ignored,
            _ => Outcome::Rejected,
        }
    }

    /// Admission to report, when recorded.
    #[must_use]
    pub const fn latency_ns(&self) -> Option<u64> {
        if self.word & TIMED == 0 {
            None
        } else {
            Some(self.word & MAX_LATENCY_NS)
        }
    }

    /// When the call was admitted: `at_ns - latency_ns` (the report time when the latency is unknown).
    #[must_use]
    pub const fn admitted_ns(&self) -> u64 {
        match self.latency_ns() {
            Some(l) => self.at_ns.saturating_sub(l),
            None => self.at_ns,
        }
    }

    /// A success or a failure: an outcome the backend gave (not ignored, not rejected).
    #[must_use]
    pub const fn is_known(&self) -> bool {
        matches!(self.outcome(), Outcome::Success | Outcome::Failure)
    }
}

impl From<&Call> for Event {
    fn from(call: &Call) -> Event {
        Event::new(call.at_ns, call.outcome, call.latency_ns)
    }
}

/// The events of `calls` (one key's calls, in trace order).
#[must_use]
pub fn events<'a>(calls: impl IntoIterator<Item = &'a Call>) -> Vec<Event> {
    calls.into_iter().map(Event::from).collect()
}

/// The calls of one key of a trace, as read by [`read`].
#[derive(Debug, Clone)]
pub struct Trace {
    /// The key whose calls these are.
    pub key: String,
    /// Its calls, in trace order.
    pub events: Vec<Event>,
    /// Lines of the trace that held a call (of any key).
    pub lines: u64,
}

/// Why [`read`] gave no trace.
#[derive(Debug)]
pub enum ReadError {
    /// A line is not a call, or goes back in time.
    Line(TraceError),
    /// The input could not be read.
    Io(std::io::Error),
    /// `key` was given and no line has it; `keys` lists the trace's keys (at most [`MAX_KEYS`]).
    NoSuchKey {
        /// The key asked for.
        key: String,
        /// The trace's keys, sorted.
        keys: Vec<String>,
    },
    /// No key was given and the trace has several; `keys` lists them (at most [`MAX_KEYS`]).
    SeveralKeys(Vec<String>),
    /// The trace has no call.
    Empty,
    /// The trace has more keys than a replay of every key takes (the limit is given).
    TooManyKeys(usize),
}

fn key_list(keys: &[String]) -> String {
    let quoted: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
    let more = if keys.len() >= MAX_KEYS {
        format!(" and more (only the first {MAX_KEYS} are listed)")
    } else {
        String::new()
    };
    format!("{}{more}", quoted.join(", "))
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Line(e) => write!(f, "{e}"),
            ReadError::Io(e) => write!(f, "cannot read: {e}"),
            ReadError::NoSuchKey { key, keys } => write!(
                f,
                "the trace has no calls of key `{key}`; its keys are {}",
                key_list(keys)
            ),
            ReadError::SeveralKeys(keys) => write!(
                f,
                "the trace has several keys ({}); choose one with `--key`",
                key_list(keys)
            ),
            ReadError::Empty => write!(f, "the trace has no calls"),
            ReadError::TooManyKeys(limit) => write!(
                f,
                "the trace has more than {limit} keys; replay one with `--key`"
            ),
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Line(e) => Some(e),
            ReadError::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// A trace read one line at a time: at most one line of [`MAX_LINE`] bytes in memory.
#[derive(Debug)]
pub struct Reader<R> {
    input: R,
    buf: Vec<u8>,
    line: usize,
    last: u64,
}

impl<R: std::io::BufRead> Reader<R> {
    /// A reader of `input`.
    #[must_use]
    pub fn new(input: R) -> Self {
        Reader {
            input,
            buf: Vec::new(),
            line: 0,
            last: 0,
        }
    }

    /// The next call (blank lines skipped), `None` at the end.
    ///
    /// # Errors
    ///
    /// [`ReadError::Line`] for a line that does not parse, is longer than [`MAX_LINE`] or goes
    /// back in time; [`ReadError::Io`] when the input cannot be read.
    pub fn next_call(&mut self) -> Result<Option<Call>, ReadError> {
        use std::io::{BufRead as _, Read as _};
        loop {
            self.buf.clear();
            let n = self
                .input
                .by_ref()
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut self.buf)
                .map_err(ReadError::Io)?;
            if n == 0 {
                return Ok(None);
            }
            self.line += 1;
            let line = self.line;
            let buf = &mut self.buf;
            if buf.last() == Some(&b'\n') {
                buf.pop();
                if buf.last() == Some(&b'\r') {
                    buf.pop();
                }
            }
            if buf.len() > MAX_LINE {
                return Err(ReadError::Line(TraceError {
                    line,
                    field: None,
                    message: format!(
                        "longer than {MAX_LINE} bytes; a trace has one call per line (is this a trace?)"
                    ),
                }));
            }
            let Ok(raw) = std::str::from_utf8(buf) else {
                return Err(ReadError::Line(TraceError {
                    line,
                    field: None,
                    message: "not UTF-8 text; a trace is JSON lines".into(),
                }));
            };
            if raw.trim().is_empty() {
                continue;
            }
            let call = parse_line(raw, line).map_err(ReadError::Line)?;
            check_order(&call, self.last, line).map_err(ReadError::Line)?;
            self.last = call.at_ns;
            return Ok(Some(call));
        }
    }
}

/// Reads a trace line by line from `input`, keeping the calls of `key` (of the trace's only key
/// when `None`) as [`Event`]s: memory is 16 bytes per call of that key plus one line of at most
/// [`MAX_LINE`] bytes, whatever the input.
///
/// # Errors
///
/// A [`ReadError`]: the first line that does not parse, is longer than [`MAX_LINE`] or goes back
/// in time; a read error; a missing key, several keys and no `key`, or no call at all.
pub fn read(input: impl std::io::BufRead, key: Option<&str>) -> Result<Trace, ReadError> {
    let mut events = Vec::new();
    let mut trace = read_with(input, key, |e| events.push(e))?;
    trace.events = events;
    Ok(trace)
}

/// [`read`], handing each call of the key to `sink` instead of keeping it: the returned
/// [`Trace`]'s `events` is empty, and memory is one line whatever the trace.
///
/// # Errors
///
/// As [`read`].
pub fn read_with(
    input: impl std::io::BufRead,
    key: Option<&str>,
    mut sink: impl FnMut(Event),
) -> Result<Trace, ReadError> {
    let mut keys: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    let mut chosen: Option<String> = key.map(str::to_owned);
    let mut several = false;
    let mut found = false;
    let mut lines = 0u64;
    let mut reader = Reader::new(input);
    while let Some(call) = reader.next_call()? {
        lines += 1;
        if keys.len() < MAX_KEYS && !keys.contains(&call.key) {
            keys.insert(call.key.clone());
        }
        match &chosen {
            Some(k) if *k == call.key => {
                found = true;
                sink(Event::from(&call));
            }
            Some(_) => several |= key.is_none(),
            None => {
                found = true;
                sink(Event::from(&call));
                chosen = Some(call.key);
            }
        }
    }
    let keys: Vec<String> = keys.into_iter().collect();
    if several {
        return Err(ReadError::SeveralKeys(keys));
    }
    match chosen {
        None => Err(ReadError::Empty),
        Some(k) if !found => Err(ReadError::NoSuchKey { key: k, keys }),
        Some(k) => Ok(Trace {
            key: k,
            events: Vec::new(),
            lines,
        }),
    }
}

/// One call of a trace with many keys: the index of its key in [`KeyedTrace::keys`] and the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyedEvent {
    /// The index of the call's key in [`KeyedTrace::keys`].
    pub key: u32,
    /// The call.
    pub event: Event,
}

/// Every call of a trace, of every key, as read by [`read_keys`].
#[derive(Debug, Clone, Default)]
pub struct KeyedTrace {
    /// The trace's keys, in the order of their first call.
    pub keys: Vec<String>,
    /// Its calls, in trace order (24 bytes each).
    pub calls: Vec<KeyedEvent>,
}

impl KeyedTrace {
    /// The index of `key`, if the trace has it.
    #[must_use]
    pub fn index_of(&self, key: &str) -> Option<u32> {
        self.keys.iter().position(|k| k == key).map(|i| i as u32)
    }

    /// The calls of key number `key`, in trace order (a pass over every call).
    pub fn events_of(&self, key: u32) -> impl Iterator<Item = Event> + '_ {
        self.calls
            .iter()
            .filter(move |c| c.key == key)
            .map(|c| c.event)
    }
}

/// The most keys [`read_keys`] replays at once: each is a breaker in the replay's registry.
pub const MAX_REPLAY_KEYS: usize = 100_000;

/// Reads a whole trace, every key kept: 24 bytes per call, and each key's name once.
///
/// # Errors
///
/// As [`read`] (without the key errors), and [`ReadError::TooManyKeys`] past
/// [`MAX_REPLAY_KEYS`] keys.
pub fn read_keys(input: impl std::io::BufRead) -> Result<KeyedTrace, ReadError> {
    let mut index: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
    let mut trace = KeyedTrace::default();
    let mut reader = Reader::new(input);
    while let Some(call) = reader.next_call()? {
        let event = Event::from(&call);
        let key = match index.get(&call.key) {
            Some(&k) => k,
            None => {
                if trace.keys.len() >= MAX_REPLAY_KEYS {
                    return Err(ReadError::TooManyKeys(MAX_REPLAY_KEYS));
                }
                let k = trace.keys.len() as u32;
                trace.keys.push(call.key.clone());
                index.insert(call.key, k);
                k
            }
        };
        trace.calls.push(KeyedEvent { key, event });
    }
    if trace.calls.is_empty() {
        return Err(ReadError::Empty);
    }
    Ok(trace)
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
                    "unknown field `{name}`; {hint}expected one of `at_ns`, `key`, `outcome`, `latency_ns`, `reason`, `function`"
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_16_bytes_and_keeps_what_the_replay_reads() {
        assert_eq!(std::mem::size_of::<Event>(), 16);
        for outcome in [
            Outcome::Success,
            Outcome::Failure,
            Outcome::Ignored,
            Outcome::Rejected,
        ] {
            let e = Event::new(u64::MAX, outcome, Some(MAX_LATENCY_NS));
            assert_eq!(
                (e.at_ns(), e.outcome(), e.latency_ns()),
                (u64::MAX, outcome, Some(MAX_LATENCY_NS))
            );
            let e = Event::new(7, outcome, None);
            assert_eq!((e.latency_ns(), e.admitted_ns()), (None, 7));
        }
    }

    #[test]
    fn read_keeps_one_key_and_names_the_others() {
        let text = "{\"at_ns\":1,\"key\":\"a\",\"outcome\":\"success\"}\n\n{\"at_ns\":2,\"key\":\"b\",\"outcome\":\"failure\",\"latency_ns\":1}\n";
        let t = read(text.as_bytes(), Some("b")).unwrap();
        assert_eq!((t.key.as_str(), t.lines), ("b", 2));
        assert_eq!(t.events, [Event::new(2, Outcome::Failure, Some(1))]);
        assert_eq!(
            read(text.as_bytes(), None).unwrap_err().to_string(),
            "the trace has several keys (`a`, `b`); choose one with `--key`"
        );
        assert_eq!(
            read(text.as_bytes(), Some("c")).unwrap_err().to_string(),
            "the trace has no calls of key `c`; its keys are `a`, `b`"
        );
        assert_eq!(
            read(&b""[..], None).unwrap_err().to_string(),
            "the trace has no calls"
        );
    }

    #[test]
    fn round_trips_a_line() {
        let call = Call::new(5, "k", Outcome::Failure).with_latency(3);
        assert_eq!(parse_line(&call.to_line(), 1).unwrap(), call);
    }

    #[test]
    fn read_keys_keeps_every_key_in_the_order_of_its_first_call() {
        let text = "{\"at_ns\":1,\"key\":\"b\",\"outcome\":\"success\"}\n{\"at_ns\":2,\"key\":\"a\",\"outcome\":\"failure\"}\n{\"at_ns\":3,\"key\":\"b\",\"outcome\":\"failure\"}\n";
        let t = read_keys(text.as_bytes()).unwrap();
        assert_eq!(t.keys, ["b", "a"]);
        assert_eq!(t.index_of("a"), Some(1));
        assert_eq!(
            t.events_of(0).collect::<Vec<_>>(),
            [
                Event::new(1, Outcome::Success, None),
                Event::new(3, Outcome::Failure, None)
            ]
        );
        assert_eq!(std::mem::size_of::<KeyedEvent>(), 24);
        assert_eq!(
            read_keys(&b""[..]).unwrap_err().to_string(),
            "the trace has no calls"
        );
    }
}
