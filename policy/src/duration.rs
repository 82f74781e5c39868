//! The duration grammar every source reads: the attribute (`open_for = "30s"`), TOML, the
//! environment, and fusebox-replay's policies and flags.
//!
//! A duration is one or more terms, each a whole number (digits, `_` allowed between them)
//! followed by a unit, with spaces allowed around and between them: `"30s"`, `"30 sec"`,
//! `"30 seconds"`, `"1m 30s"`, `"1h30m"`, `"1_500ms"`. The terms add up. A unit is written in
//! lower case, singular or plural; months and years (whose length varies) and fractions
//! (`"1.5s"`; write `"1500ms"`) are refused.

use std::fmt;
use std::time::Duration;

/// The units, each with its length in nanoseconds; the first name is the one messages print.
const UNITS: [(&[&str], u128); 7] = [
    (
        &["ns", "nsec", "nsecs", "nanos", "nanosecond", "nanoseconds"],
        1,
    ),
    (
        &[
            "us",
            "µs",
            "usec",
            "usecs",
            "micros",
            "microsecond",
            "microseconds",
        ],
        1_000,
    ),
    (
        &[
            "ms",
            "msec",
            "msecs",
            "millis",
            "millisecond",
            "milliseconds",
        ],
        1_000_000,
    ),
    (&["s", "sec", "secs", "second", "seconds"], 1_000_000_000),
    (
        &["m", "min", "mins", "minute", "minutes"],
        60 * 1_000_000_000,
    ),
    (
        &["h", "hr", "hrs", "hour", "hours"],
        60 * 60 * 1_000_000_000,
    ),
    (&["d", "day", "days"], 24 * 60 * 60 * 1_000_000_000),
];

/// The units as every message about a duration lists them.
pub const DURATION_UNITS: &str = "`ns`, `us`, `ms`, `s`, `m`, `h` or `d`, also spelled out: \
     `nsec`, `micros`, `msec`, `millis`, `sec`, `seconds`, `min`, `minutes`, `hr`, `hours`, `days`, …";

/// Why [`parse_duration`] refused a text.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DurationError {
    /// Not a sequence of `<whole number><unit>` terms.
    Syntax,
    /// Well formed, but longer than a [`Duration`] holds.
    Overflow,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Syntax => write!(
                f,
                "write a whole number followed by a unit ({DURATION_UNITS}), like \"30s\", \
                 \"250ms\" or \"1m 30s\""
            ),
            Self::Overflow => f.write_str("the duration is too long; write a shorter one"),
        }
    }
}

impl std::error::Error for DurationError {}

/// Parses a duration written in fusebox's one grammar (see the module's documentation):
/// `"30s"`, `"30 sec"`, `"30 seconds"`, `"250ms"`, `"1m 30s"`, `"1_500us"`.
///
/// ```
/// # use std::time::Duration;
/// # use fusebox_policy::parse_duration;
/// assert_eq!(parse_duration("30 sec"), Ok(Duration::from_secs(30)));
/// assert_eq!(parse_duration("1m 30s"), Ok(Duration::from_secs(90)));
/// assert!(parse_duration("1.5s").is_err());
/// ```
///
/// # Errors
///
/// [`DurationError::Syntax`] for any other shape (no unit, an unknown unit, a fraction, a sign),
/// [`DurationError::Overflow`] for a duration longer than a [`Duration`] holds.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(DurationError::Syntax);
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let (nanos, after) = term(rest)?;
        total = total.checked_add(nanos).ok_or(DurationError::Overflow)?;
        rest = after.trim_start();
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| DurationError::Overflow)?;
    // The remainder is below 10^9, so it fits.
    let subsec = u32::try_from(total % 1_000_000_000).unwrap_or(0);
    Ok(Duration::new(secs, subsec))
}

/// The first term of `text` (which starts with a non-space) in nanoseconds, and what follows it.
fn term(text: &str) -> Result<(u128, &str), DurationError> {
    let digits_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '_'))
        .unwrap_or(text.len());
    let (number, after) = text.split_at(digits_end);
    if !number.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(DurationError::Syntax);
    }
    let after = after.trim_start();
    let unit_end = after
        .find(|c: char| !c.is_alphabetic())
        .unwrap_or(after.len());
    let (unit, after) = after.split_at(unit_end);
    let scale = UNITS
        .iter()
        .find(|(names, _)| names.contains(&unit))
        .map(|&(_, scale)| scale)
        .ok_or(DurationError::Syntax)?;
    let number: String = number.chars().filter(|&c| c != '_').collect();
    let number: u128 = number.parse().map_err(|_| DurationError::Overflow)?;
    let nanos = number.checked_mul(scale).ok_or(DurationError::Overflow)?;
    Ok((nanos, after))
}

#[cfg(test)]
mod tests;
