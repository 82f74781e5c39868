//! Breaker keys: [`Key`], borrowed for literal keys and shared for keys made at run time.

use std::fmt;
use std::sync::Arc;

/// A breaker key: borrowed for keys written in the attribute, shared for keys made at run time.
///
/// Cloning never allocates. Equality, ordering and hashing are those of the string, so a map keyed
/// by `Key` can be searched with a `&str`. A key is two words: a shared key is one thin pointer
/// (to the string's own two words), which leaves room beside it for the borrowed key's pointer
/// and length, so [`Error`](crate::Error), which carries a key, stays three words.
#[derive(Clone)]
pub struct Key(KeyRepr);

#[derive(Clone)]
enum KeyRepr {
    Static(&'static str),
    /// `Arc<Box<str>>` rather than `Arc<str>`: a thin pointer, so the enum fits in the borrowed
    /// variant's two words.
    Shared(Arc<Box<str>>),
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
        Key(KeyRepr::Shared(Arc::new(Box::from(key))))
    }
}

impl From<String> for Key {
    fn from(key: String) -> Self {
        Key(KeyRepr::Shared(Arc::new(key.into_boxed_str())))
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
