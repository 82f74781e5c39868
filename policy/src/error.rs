//! [`PolicyError`]: a policy field outside its allowed range.

use std::fmt;

/// A policy field outside its allowed range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    key: Option<String>,
    field: &'static str,
    allowed: String,
    found: String,
}

impl PolicyError {
    /// An error for `field`, which must be in `allowed` and is `found`.
    pub(crate) fn new(
        field: &'static str,
        allowed: impl Into<String>,
        found: impl fmt::Display,
    ) -> Self {
        PolicyError {
            key: None,
            field,
            allowed: allowed.into(),
            found: found.to_string(),
        }
    }

    /// An error of the `shadow` field: the shadow `name` (`None`: the text as a whole) and what
    /// is wrong with it.
    pub(crate) fn shadow(name: Option<&str>, error: &crate::text::TextError) -> Self {
        let found = match (name, &error.field) {
            (Some(name), Some(field)) => format!("`{name}`: field `{field}`"),
            (Some(name), None) => format!("`{name}`"),
            (None, _) => "the text".to_owned(),
        };
        PolicyError::new(
            "shadow",
            format!("a shadow's policy text: {}", error.message),
            found,
        )
    }

    /// This error, naming the breaker key the policy was meant for.
    pub(crate) fn for_key(mut self, key: &str) -> Self {
        self.key = Some(key.to_owned());
        self
    }

    /// The breaker key the policy was meant for, when known.
    #[must_use]
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The offending field, as spelled in the attribute.
    #[must_use]
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// The allowed range.
    #[must_use]
    pub fn allowed(&self) -> &str {
        &self.allowed
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(key) = &self.key {
            // A key can come from configuration: repeat a few dozen characters of it at most.
            let mut chars = key.chars();
            let head: String = chars.by_ref().take(40).collect();
            let more = if chars.next().is_some() { "…" } else { "" };
            write!(f, "breaker `{head}{more}`: ")?;
        }
        write!(
            f,
            "invalid `{}` = {}; use a value in {}",
            self.field, self.found, self.allowed
        )
    }
}

impl std::error::Error for PolicyError {}
