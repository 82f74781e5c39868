//! What a refused call becomes ([`Error`]) and why a fallback runs ([`Cause`]).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// A breaker key: borrowed for keys written in the attribute, shared for keys made at run time.
///
/// Cloning never allocates. Equality, ordering and hashing are those of the string, so a map keyed
/// by `Key` can be searched with a `&str`.
#[derive(Clone)]
pub struct Key(KeyRepr);

#[derive(Clone)]
enum KeyRepr {
    Static(&'static str),
    Shared(Arc<str>),
}

impl Key {
    /// A key from a string literal; never allocates.
    pub const fn from_static(key: &'static str) -> Self {
        Key(KeyRepr::Static(key))
    }

    /// The key as a string.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            KeyRepr::Static(s) => s,
            KeyRepr::Shared(s) => s,
        }
    }
}

impl From<&str> for Key {
    fn from(key: &str) -> Self {
        Key(KeyRepr::Shared(Arc::from(key)))
    }
}

impl From<String> for Key {
    fn from(key: String) -> Self {
        Key(KeyRepr::Shared(Arc::from(key)))
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl std::borrow::Borrow<str> for Key {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a call was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// The circuit is open: recent calls failed too often.
    Open,
    /// The circuit is half-open and every probe slot is taken.
    HalfOpenFull,
    /// The circuit is recovering progressively and this call fell outside the admitted share.
    Recovering,
    /// The circuit was forced open by an operator ([`Breaker::force_open`](crate::Breaker::force_open)).
    ForcedOpen,
    /// The per-key concurrency limit is reached.
    BulkheadFull,
    /// The call took longer than its timeout.
    TimedOut,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reason::Open => "open",
            Reason::HalfOpenFull => "half-open and every probe slot is taken",
            Reason::Recovering => "recovering and admitting only part of the traffic",
            Reason::ForcedOpen => "forced open",
            Reason::BulkheadFull => "at its concurrency limit",
            Reason::TimedOut => "timed out",
        })
    }
}

/// A call that the breaker refused (or, for [`Reason::TimedOut`], abandoned).
///
/// The function's error type receives it through `From<fusebox::Error>`, or the fallback receives
/// it as [`Cause::Rejected`]. It never allocates: building one on the rejection path is free.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    key: Key,
    reason: Reason,
    retry_after: Option<Duration>,
}

impl Error {
    pub(crate) fn new(key: Key, reason: Reason, retry_after: Option<Duration>) -> Self {
        Error {
            key,
            reason,
            retry_after,
        }
    }

    /// The key of the breaker that refused the call.
    pub fn key(&self) -> &str {
        self.key.as_str()
    }

    /// Why the call was refused.
    pub fn reason(&self) -> Reason {
        self.reason
    }

    /// When the circuit is open: how long until it admits a probe. `None` otherwise.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// True when the call never reached the backend because the circuit is open or probing.
    pub fn is_circuit_open(&self) -> bool {
        matches!(
            self.reason,
            Reason::Open | Reason::HalfOpenFull | Reason::ForcedOpen
        )
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("key", &self.key)
            .field("reason", &self.reason)
            .field("retry_after", &self.retry_after)
            .finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            Reason::TimedOut => write!(f, "call through circuit `{}` timed out", self.key)?,
            reason => write!(f, "circuit `{}` is {reason}", self.key)?,
        }
        if let Some(wait) = self.retry_after {
            write!(f, "; next probe in {wait:?}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// Why a fallback runs: the breaker refused the call, or the call failed with a counted failure.
///
/// A fallback takes the function's own parameters followed by a `Cause<E>`, where `E` is the
/// function's error type. Errors that do not count as failures never reach the fallback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause<E> {
    /// The call was refused before it started (the backend was not called).
    Rejected(Error),
    /// The call ran and failed with an error classified as a failure.
    Failed(E),
}

impl<E> Cause<E> {
    /// The refusal, when the call was refused.
    pub fn rejected(&self) -> Option<&Error> {
        match self {
            Cause::Rejected(e) => Some(e),
            Cause::Failed(_) => None,
        }
    }

    /// The error, when the call ran and failed.
    pub fn failed(&self) -> Option<&E> {
        match self {
            Cause::Failed(e) => Some(e),
            Cause::Rejected(_) => None,
        }
    }

    /// Turns the cause back into the function's error, using `From<fusebox::Error>` for refusals.
    pub fn into_error(self) -> E
    where
        E: From<Error>,
    {
        match self {
            Cause::Rejected(e) => E::from(e),
            Cause::Failed(e) => e,
        }
    }
}

impl<E: fmt::Display> fmt::Display for Cause<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Rejected(e) => fmt::Display::fmt(e, f),
            Cause::Failed(e) => write!(f, "call failed: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_lowercase_and_names_the_key() {
        let e = Error::new(
            Key::from_static("payment"),
            Reason::Open,
            Some(Duration::from_secs(3)),
        );
        assert_eq!(e.to_string(), "circuit `payment` is open; next probe in 3s");
        let e = Error::new(Key::from("search"), Reason::HalfOpenFull, None);
        assert_eq!(
            e.to_string(),
            "circuit `search` is half-open and every probe slot is taken"
        );
        assert!(e.is_circuit_open());
        let e = Error::new(Key::from("search"), Reason::TimedOut, None);
        assert_eq!(e.to_string(), "call through circuit `search` timed out");
        assert!(!e.is_circuit_open());
    }

    #[test]
    fn keys_compare_and_hash_as_strings() {
        use std::hash::BuildHasher;
        let hasher = std::collections::hash_map::RandomState::new();
        let (a, b) = (Key::from_static("payment"), Key::from("payment"));
        assert_eq!(a, b);
        assert_eq!(hasher.hash_one(&a), hasher.hash_one("payment"));
        assert_eq!(hasher.hash_one(&b), hasher.hash_one("payment"));
    }

    #[test]
    fn cause_accessors() {
        let c: Cause<u8> = Cause::Failed(3);
        assert_eq!(c.failed(), Some(&3));
        assert!(c.rejected().is_none());
    }
}
