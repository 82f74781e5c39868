//! Reading a trace as a stream: a [`Reader`] of one line at a time, and the calls of one key
//! ([`read`], [`read_with`]) or of every key ([`read_keys`]) kept as events.

use std::fmt;

use super::line::{check_order, parse_line};
use super::{Call, Event, MAX_KEYS, MAX_LINE, TraceError};

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

    /// The next call (blank lines and shadow policies' lines skipped), `None` at the end.
    ///
    /// # Errors
    ///
    /// As [`next_line`](Reader::next_line).
    pub fn next_call(&mut self) -> Result<Option<Call>, ReadError> {
        loop {
            match self.next_line()? {
                Some(call) if call.shadow.is_some() => continue,
                line => return Ok(line),
            }
        }
    }

    /// The next line (blank lines skipped): a call, or a shadow policy's verdict on the call
    /// before it ([`Call::shadow`]); `None` at the end.
    ///
    /// # Errors
    ///
    /// [`ReadError::Line`] for a line that does not parse, is longer than [`MAX_LINE`] or goes
    /// back in time; [`ReadError::Io`] when the input cannot be read.
    pub fn next_line(&mut self) -> Result<Option<Call>, ReadError> {
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
