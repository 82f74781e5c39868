//! Breaker keys: [`Key`], borrowed for literal keys and shared for keys made at run time, and
//! [`UnknownKey`], a configured key no breaker declares.

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
    #[must_use]
    pub const fn from_static(key: &'static str) -> Self {
        Key(KeyRepr::Static(key))
    }

    /// The key as a string.
    #[must_use]
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

/// Bytes of a key the registry's map holds inline (a longer key is one heap allocation).
pub(crate) const INLINE_KEY_BYTES: usize = 30;

/// A breaker key as the registry's map holds it: up to [`INLINE_KEY_BYTES`] bytes inside the map's
/// entry, so a lookup compares the key without following a pointer; a longer key is boxed.
///
/// Hashing and equality are those of the key's bytes; the map is searched with a [`KeyQuery`].
#[derive(Clone)]
pub(crate) enum MapKey {
    /// The key's length and its bytes (zero past the length).
    Inline(u8, [u8; INLINE_KEY_BYTES]),
    /// A key longer than [`INLINE_KEY_BYTES`].
    Boxed(Box<[u8]>),
}

impl MapKey {
    /// The key's bytes (valid UTF-8: made from a `&str`).
    #[inline(always)]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            MapKey::Inline(len, bytes) => &bytes[..usize::from(*len).min(INLINE_KEY_BYTES)],
            MapKey::Boxed(bytes) => bytes,
        }
    }
}

impl From<&str> for MapKey {
    fn from(key: &str) -> Self {
        let bytes = key.as_bytes();
        match u8::try_from(bytes.len()) {
            Ok(len) if bytes.len() <= INLINE_KEY_BYTES => {
                let mut inline = [0; INLINE_KEY_BYTES];
                inline[..bytes.len()].copy_from_slice(bytes);
                MapKey::Inline(len, inline)
            }
            _ => MapKey::Boxed(bytes.into()),
        }
    }
}

impl PartialEq for MapKey {
    fn eq(&self, other: &Self) -> bool {
        same_bytes(self.as_bytes(), other.as_bytes())
    }
}

impl Eq for MapKey {}

impl std::hash::Hash for MapKey {
    #[inline(always)]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        hash_bytes(self.as_bytes(), state);
    }
}

impl fmt::Debug for MapKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&String::from_utf8_lossy(self.as_bytes()), f)
    }
}

/// A `&str` searched for in the registry's map (hashes and compares as the [`MapKey`] made of it).
#[derive(Clone, Copy)]
pub(crate) struct KeyQuery<'a>(pub(crate) &'a str);

impl std::hash::Hash for KeyQuery<'_> {
    #[inline(always)]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        hash_bytes(self.0.as_bytes(), state);
    }
}

impl scc::Equivalent<MapKey> for KeyQuery<'_> {
    #[inline(always)]
    fn equivalent(&self, key: &MapKey) -> bool {
        same_bytes(self.0.as_bytes(), key.as_bytes())
    }
}

/// The one hash of a key's bytes that [`MapKey`] and [`KeyQuery`] share: one write of the bytes
/// (the map's hasher mixes in the length).
#[inline(always)]
fn hash_bytes<H: std::hash::Hasher>(bytes: &[u8], state: &mut H) {
    state.write(bytes);
}

/// `a == b`, compared in words inline (keys are short: a call to `memcmp` costs more). The last
/// word of a key of 8 bytes or more is loaded overlapping the one before it, so no byte is
/// compared alone.
#[inline(always)]
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let len = a.len();
    if len != b.len() {
        return false;
    }
    if len >= 8 {
        // A plain loop: iterator adapters here are not always inlined, and calls cost more
        // than the comparison.
        let mut at = 0;
        while at + 8 < len {
            if load8(&a[at..]) != load8(&b[at..]) {
                return false;
            }
            at += 8;
        }
        load8(&a[len - 8..]) == load8(&b[len - 8..])
    } else if len >= 4 {
        load4(a) == load4(b) && load4(&a[len - 4..]) == load4(&b[len - 4..])
    } else {
        let mut at = 0;
        while at < len {
            if a[at] != b[at] {
                return false;
            }
            at += 1;
        }
        true
    }
}

/// The first 8 bytes of `bytes` (which has at least 8) as one word: a single load.
#[inline(always)]
fn load8(bytes: &[u8]) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&bytes[..8]);
    u64::from_le_bytes(word)
}

/// The first 4 bytes of `bytes` (which has at least 4) as one word: a single load.
#[inline(always)]
fn load4(bytes: &[u8]) -> u32 {
    let mut word = [0; 4];
    word.copy_from_slice(&bytes[..4]);
    u32::from_le_bytes(word)
}

/// A configured key that no breaker of the registry declares, with the closest declared names.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnknownKey {
    /// The configured key.
    pub key: String,
    /// Declared keys close to it, best first (empty when none is close).
    pub closest: Vec<String>,
}

impl std::fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut chars = self.key.chars();
        let head: String = chars.by_ref().take(40).collect();
        let more = if chars.next().is_some() { "…" } else { "" };
        write!(f, "no breaker `{head}{more}` is declared")?;
        match self.closest.as_slice() {
            [] => write!(
                f,
                "; the override applies if a breaker of that key is created later (a dynamic key or `Registry::breaker`)"
            ),
            names => {
                let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
                write!(f, "; did you mean {}?", names.join(" or "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::hash::{BuildHasher, Hash};

    use super::{INLINE_KEY_BYTES, KeyQuery, MapKey, same_bytes};
    use scc::Equivalent;

    fn hash(value: impl Hash, state: &foldhash::fast::RandomState) -> u64 {
        state.hash_one(value)
    }

    #[test]
    fn map_keys_are_inline_up_to_the_limit_and_boxed_past_it() {
        let fits = "k".repeat(INLINE_KEY_BYTES);
        let long = "k".repeat(INLINE_KEY_BYTES + 1);
        assert!(matches!(MapKey::from(fits.as_str()), MapKey::Inline(..)));
        assert!(matches!(MapKey::from(long.as_str()), MapKey::Boxed(_)));
        assert!(matches!(MapKey::from(""), MapKey::Inline(0, _)));
    }

    #[test]
    fn a_query_hashes_and_compares_as_the_key_made_of_it() {
        let state = foldhash::fast::RandomState::default();
        let fits = "k".repeat(INLINE_KEY_BYTES);
        let long = "k".repeat(INLINE_KEY_BYTES + 1);
        let keys = ["", "a", "host-1.internal:443", "héllo", &fits, &long];
        for key in keys {
            let stored = MapKey::from(key);
            assert_eq!(stored.as_bytes(), key.as_bytes());
            assert_eq!(hash(KeyQuery(key), &state), hash(&stored, &state), "{key}");
            for other in keys {
                assert_eq!(
                    KeyQuery(other).equivalent(&stored),
                    other == key,
                    "{other} vs {key}"
                );
                assert_eq!(MapKey::from(other) == stored, other == key);
            }
        }
    }

    #[test]
    fn a_map_finds_inline_and_boxed_keys_by_query() {
        let map = scc::HashIndex::with_hasher(foldhash::fast::RandomState::default());
        let long = "h".repeat(200);
        let keys: Vec<String> = (0..1_000)
            .map(|i| format!("host-{i}.internal:443"))
            .chain([long.clone(), String::new()])
            .collect();
        for (at, key) in keys.iter().enumerate() {
            assert!(map.insert_sync(MapKey::from(key.as_str()), at).is_ok());
        }
        let guard = scc::Guard::new();
        for (at, key) in keys.iter().enumerate() {
            assert_eq!(map.peek(&KeyQuery(key), &guard), Some(&at), "{key}");
        }
        assert_eq!(map.peek(&KeyQuery("host-1000.internal:443"), &guard), None);
        assert_eq!(map.peek(&KeyQuery(&long[1..]), &guard), None);
    }

    #[test]
    fn keys_compare_by_bytes() {
        for (a, b) in [
            ("", ""),
            ("a", "a"),
            ("host-1.internal:443", "host-1.internal:443"),
            ("abcd", "abcd"),
            ("abcdefgh", "abcdefgh"),
        ] {
            assert!(same_bytes(a.as_bytes(), b.as_bytes()));
        }
        for (a, b) in [
            ("", "a"),
            ("abcdefgh1", "abcdefgh2"),
            ("xbcdefgh1", "abcdefgh1"),
            ("abc", "abd"),
            ("abcde", "abcdf"),
            ("abcde", "xbcde"),
            ("abcdefghijklmnop", "abcdefghijklmnoq"),
            ("host-1.internal:443", "host-1.internal:444"),
            ("host-1.internal:443", "host-2.internal:443"),
        ] {
            assert!(!same_bytes(a.as_bytes(), b.as_bytes()));
        }
    }

    #[test]
    fn keys_differing_in_any_one_byte_compare_unequal() {
        for len in 0..=40 {
            let key: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            assert!(same_bytes(&key, &key.clone()), "{len}");
            for at in 0..len {
                let mut other = key.clone();
                other[at] = b'#';
                assert!(!same_bytes(&key, &other), "{len} at {at}");
            }
        }
    }
}
