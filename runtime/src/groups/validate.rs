//! [`GroupPolicy::validate`]: the one check of a group's settings, which code
//! ([`Registry::configure_group`](crate::Registry::configure_group)), configuration
//! (`[groups.<name>]`) and `fusebox-replay` share, and its error, [`GroupPolicyError`].

use std::fmt;
use std::time::Duration;

use super::GroupPolicy;

/// What `interval` (and `ejection`'s `base`) allows.
pub(crate) const INTERVAL: &str = "a duration of at least 1 ms, like \"10s\"";
/// What `success_rate` allows.
pub(crate) const SUCCESS_RATE: &str =
    "a number of standard deviations, at least 0 (off) and below 1000, like 1.9";
/// What `failure_percentage` allows.
pub(crate) const FAILURE_PERCENTAGE: &str =
    "a whole number of percent (0..=100; 0 turns the rule off)";
/// What `min_members` allows.
pub(crate) const MIN_MEMBERS: &str = "a whole number of members, at least 1";
/// What `max_ejection` allows.
pub(crate) const MAX_EJECTION: &str =
    "a whole number of percent (0..=100; at least one member may always be open)";
/// What `ejection` allows.
pub(crate) const EJECTION: &str = "a `base` of at least 1 ms and a `max` of at least `base`";

/// A group's setting outside its allowed range, or a group's name that cannot be one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupPolicyError {
    group: Option<String>,
    field: &'static str,
    allowed: &'static str,
    found: String,
}

impl GroupPolicyError {
    /// An error for `field`, which must be `allowed` and is `found`.
    pub(crate) fn new(field: &'static str, allowed: &'static str, found: String) -> Self {
        GroupPolicyError {
            group: None,
            field,
            allowed,
            found,
        }
    }

    /// This error, naming the group the settings were meant for.
    #[must_use]
    pub(crate) fn for_group(mut self, name: &str) -> Self {
        self.group = Some(name.chars().take(40).collect());
        self
    }

    /// The group the settings were meant for, when known (cut to 40 characters).
    #[must_use]
    pub fn group(&self) -> Option<&str> {
        self.group.as_deref()
    }

    /// The offending setting, named as its [`GroupPolicy`] setter and its field of a
    /// `[groups.<name>]` table (`group` for the group's name).
    #[must_use]
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// What the setting allows.
    #[must_use]
    pub fn allowed(&self) -> &'static str {
        self.allowed
    }
}

impl fmt::Display for GroupPolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(group) = &self.group {
            write!(f, "group `{group}`: ")?;
        }
        write!(
            f,
            "invalid `{}` = {}; use {}",
            self.field, self.found, self.allowed
        )
    }
}

impl std::error::Error for GroupPolicyError {}

impl GroupPolicy {
    /// Checks every setting, in the order of the setters: `interval` at least 1 ms,
    /// `success_rate` 0 (off) or 0.001 to below 1000, the percentages 0 ..= 100, `min_members`
    /// at least 1, `ejection`'s `base` at least 1 ms and its `max` at least `base`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fusebox::GroupPolicy;
    ///
    /// assert!(GroupPolicy::new().validate().is_ok());
    /// let error = GroupPolicy::new().min_members(0).validate().unwrap_err();
    /// assert_eq!(error.field(), "min_members");
    /// assert_eq!(
    ///     error.to_string(),
    ///     "invalid `min_members` = 0; use a whole number of members, at least 1"
    /// );
    /// assert!(GroupPolicy::new().interval(Duration::ZERO).validate().is_err());
    /// ```
    ///
    /// # Errors
    ///
    /// The first setting outside its range.
    pub fn validate(&self) -> Result<(), GroupPolicyError> {
        let ms = Duration::from_millis(1);
        let s = self.settings();
        let factor = self.stdev;
        if s.interval < ms {
            return Err(GroupPolicyError::new(
                "interval",
                INTERVAL,
                format!("{:?}", s.interval),
            ));
        }
        if !(factor == 0.0 || (0.001..1000.0).contains(&factor)) {
            return Err(GroupPolicyError::new(
                "success_rate",
                SUCCESS_RATE,
                factor.to_string(),
            ));
        }
        let percent = |field, allowed, value: u8| match value {
            0..=100 => Ok(()),
            _ => Err(GroupPolicyError::new(field, allowed, value.to_string())),
        };
        percent(
            "failure_percentage",
            FAILURE_PERCENTAGE,
            self.failure_percentage,
        )?;
        if self.min_members == 0 {
            return Err(GroupPolicyError::new(
                "min_members",
                MIN_MEMBERS,
                "0".into(),
            ));
        }
        percent("max_ejection", MAX_EJECTION, self.max_ejection)?;
        if s.ejection_base < ms || s.ejection_max < s.ejection_base {
            return Err(GroupPolicyError::new(
                "ejection",
                EJECTION,
                format!(
                    "{{ base = {:?}, max = {:?} }}",
                    s.ejection_base, s.ejection_max
                ),
            ));
        }
        Ok(())
    }
}
