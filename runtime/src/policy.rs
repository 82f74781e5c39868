//! Trip and recovery rules: the [`Policy`] of a breaker, built in `const` context and validated.

use std::fmt;
use std::time::Duration;

use crate::clock::duration_to_nanos;

/// The largest count window.
pub const MAX_WINDOW: u32 = 1_000_000;
/// The most probes a half-open circuit admits at once.
pub const MAX_HALF_OPEN: u32 = 127;
/// The shortest open wait.
pub const MIN_OPEN_FOR: Duration = Duration::from_millis(1);
/// The longest open wait.
pub const MAX_OPEN_FOR: Duration = Duration::from_secs(24 * 60 * 60);

/// When a circuit opens and how it recovers.
///
/// Built with `const fn` setters, so a policy can be a `const` shared by many functions:
///
/// ```
/// use std::time::Duration;
/// use fusebox::Policy;
///
/// const PAYMENT: Policy = Policy::new()
///     .window(20)
///     .min_calls(10)
///     .failure_rate(50)
///     .open_for(Duration::from_secs(30));
/// assert!(PAYMENT.validate().is_ok());
/// ```
///
/// Defaults: `window` 100 calls, `min_calls` 10, `failure_rate` 50 %, `open_for` 10 s, `half_open` 1.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub(crate) window: u32,
    pub(crate) min_calls: u32,
    pub(crate) failure_rate: u8,
    pub(crate) open_for_nanos: u64,
    pub(crate) half_open: u32,
}

impl Policy {
    /// The default policy (see the type's documentation).
    pub const DEFAULT: Policy = Policy {
        window: 100,
        min_calls: 10,
        failure_rate: 50,
        open_for_nanos: 10_000_000_000,
        half_open: 1,
    };

    /// The default policy.
    pub const fn new() -> Self {
        Self::DEFAULT
    }

    /// The count window: the last `calls` outcomes are considered (older ones are evicted).
    pub const fn window(mut self, calls: u32) -> Self {
        self.window = calls;
        self
    }

    /// The number of recorded calls below which the circuit never opens.
    pub const fn min_calls(mut self, calls: u32) -> Self {
        self.min_calls = calls;
        self
    }

    /// The failure rate, in percent of the window, at which the circuit opens (1..=100).
    pub const fn failure_rate(mut self, percent: u8) -> Self {
        self.failure_rate = percent;
        self
    }

    /// How long the circuit stays open before it admits probes.
    pub const fn open_for(mut self, wait: Duration) -> Self {
        self.open_for_nanos = duration_to_nanos(wait);
        self
    }

    /// How many probes a half-open circuit admits; all must succeed to close it.
    pub const fn half_open(mut self, probes: u32) -> Self {
        self.half_open = probes;
        self
    }

    /// The count window size.
    pub const fn window_len(&self) -> u32 {
        self.window
    }

    /// The minimum number of calls before the rate is evaluated.
    pub const fn min_calls_len(&self) -> u32 {
        self.min_calls
    }

    /// The failure rate threshold in percent.
    pub const fn failure_rate_percent(&self) -> u8 {
        self.failure_rate
    }

    /// The open wait.
    pub const fn open_duration(&self) -> Duration {
        Duration::from_nanos(self.open_for_nanos)
    }

    /// The number of half-open probes.
    pub const fn half_open_probes(&self) -> u32 {
        self.half_open
    }

    /// Checks every field; the first invalid one is reported with its allowed range.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.window == 0 || self.window > MAX_WINDOW {
            return Err(PolicyError::new(
                "window",
                format!("1..={MAX_WINDOW} calls"),
                self.window,
            ));
        }
        if self.min_calls == 0 || self.min_calls > self.window {
            return Err(PolicyError::new(
                "min_calls",
                format!("1..={} (at most `window`)", self.window),
                self.min_calls,
            ));
        }
        if self.failure_rate == 0 || self.failure_rate > 100 {
            return Err(PolicyError::new(
                "failure_rate",
                "1..=100 percent",
                self.failure_rate,
            ));
        }
        let open_for = self.open_duration();
        if open_for < MIN_OPEN_FOR || open_for > MAX_OPEN_FOR {
            return Err(PolicyError::new(
                "open_for",
                "1ms..=24h",
                format!("{open_for:?}"),
            ));
        }
        if self.half_open == 0 || self.half_open > MAX_HALF_OPEN {
            return Err(PolicyError::new(
                "half_open",
                format!("1..={MAX_HALF_OPEN} probes"),
                self.half_open,
            ));
        }
        Ok(())
    }
}

impl Default for Policy {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("window", &self.window)
            .field("min_calls", &self.min_calls)
            .field("failure_rate", &self.failure_rate)
            .field("open_for", &self.open_duration())
            .field("half_open", &self.half_open)
            .finish()
    }
}

/// A policy field outside its allowed range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    field: &'static str,
    allowed: String,
    found: String,
}

impl PolicyError {
    fn new(field: &'static str, allowed: impl Into<String>, found: impl fmt::Display) -> Self {
        PolicyError {
            field,
            allowed: allowed.into(),
            found: found.to_string(),
        }
    }

    /// The offending field, as spelled in the attribute.
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// The allowed range.
    pub fn allowed(&self) -> &str {
        &self.allowed
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid `{}` = {}; use a value in {}",
            self.field, self.found, self.allowed
        )
    }
}

impl std::error::Error for PolicyError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let p = Policy::new();
        assert_eq!(p.window_len(), 100);
        assert_eq!(p.min_calls_len(), 10);
        assert_eq!(p.failure_rate_percent(), 50);
        assert_eq!(p.open_duration(), Duration::from_secs(10));
        assert_eq!(p.half_open_probes(), 1);
        assert!(p.validate().is_ok());
    }

    #[test]
    fn validation_names_the_field_and_range() {
        let e = Policy::new()
            .window(10)
            .min_calls(11)
            .validate()
            .unwrap_err();
        assert_eq!(e.field(), "min_calls");
        assert_eq!(
            e.to_string(),
            "invalid `min_calls` = 11; use a value in 1..=10 (at most `window`)"
        );
        assert_eq!(
            Policy::new()
                .failure_rate(0)
                .validate()
                .unwrap_err()
                .field(),
            "failure_rate"
        );
        assert_eq!(
            Policy::new()
                .failure_rate(150)
                .validate()
                .unwrap_err()
                .field(),
            "failure_rate"
        );
        assert_eq!(
            Policy::new().window(0).validate().unwrap_err().field(),
            "window"
        );
        assert_eq!(
            Policy::new().half_open(0).validate().unwrap_err().field(),
            "half_open"
        );
        assert_eq!(
            Policy::new()
                .open_for(Duration::ZERO)
                .validate()
                .unwrap_err()
                .field(),
            "open_for"
        );
    }
}
