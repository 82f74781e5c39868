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
//! | `shadow` | no | on a line of its own after its call's: a shadow policy's name, and `outcome` (and `reason`) its verdict on that call, `rejected` when it would have rejected it (see [`crate::shadows`]) |
//!
//! Blank lines are skipped. Any other field is an error (with the field it was probably meant to
//! be), and so is a field given twice, so a misspelt or repeated field is never silently ignored. A
//! line longer than [`MAX_LINE`] bytes is an error naming it.
//!
//! [`Reader`] reads a trace as a stream, one line at a time. [`read()`] keeps each call of the
//! replayed key as a 16-byte [`Event`] (a trace of ten million calls holds 160 MB of events,
//! whatever its lines' length); [`read_with`] hands each to a closure and keeps nothing, for a
//! caller that reads the file again for each pass; [`read_keys`] keeps every call of every key
//! (24 bytes each, [`KeyedEvent`]), for a replay of every key ([`crate::keyed`]).

use std::fmt;

mod line;
mod read;

pub use line::{closest, parse, parse_line};
pub use read::{
    KeyedEvent, KeyedTrace, MAX_REPLAY_KEYS, ReadError, Reader, Trace, read, read_keys, read_with,
};

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
    /// On a shadow policy's line: its name (the line is its verdict on the call before it, not a
    /// call: the readers of calls skip it).
    pub shadow: Option<String>,
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
            shadow: None,
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
        if let Some(shadow) = &self.shadow {
            map.insert("shadow".into(), shadow.clone().into());
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

/// The longest line a trace may have, in bytes (without its newline). A recorded line is about
/// 100 bytes; a longer line is an error naming it, so a file with no newline (`/dev/zero`, a binary
/// file) ends with an error instead of filling memory.
pub const MAX_LINE: usize = 64 * 1024;

/// The most distinct keys a trace's error messages list; further keys are counted, not kept.
pub const MAX_KEYS: usize = 1_000;

/// The longest latency a trace may give, in nanoseconds (2^61 - 1, about 73 years): an
/// [`Event`] keeps it in 61 bits.
pub const MAX_LATENCY_NS: u64 = (1 << 61) - 1;

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

/// The events of `calls` (one key's calls, in trace order; shadow policies' lines are skipped).
#[must_use]
pub fn events<'a>(calls: impl IntoIterator<Item = &'a Call>) -> Vec<Event> {
    calls
        .into_iter()
        .filter(|call| call.shadow.is_none())
        .map(Event::from)
        .collect()
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
