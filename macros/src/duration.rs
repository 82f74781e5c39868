//! Duration strings of the attribute (`open_for = "10s"`): an integer followed by a unit.

/// The accepted units, with their length in nanoseconds, longest name first so `ms` wins over `m`.
const UNITS: [(&str, u128); 6] = [
    ("ns", 1),
    ("us", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60 * 1_000_000_000),
    ("h", 60 * 60 * 1_000_000_000),
];

/// The units as the error messages list them.
pub(crate) const UNIT_LIST: &str = "`ns`, `us`, `ms`, `s`, `m` or `h`";

/// Why a duration string was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DurationError {
    /// Not `<integer><unit>`.
    Syntax,
    /// Well formed, but too large for nanoseconds in a `u128`.
    Overflow,
}

/// Parses `"250ms"`, `"10s"`, `"5m"`, `"1h"`, `"1_500us"` (spaces around and between allowed) into
/// nanoseconds.
pub(crate) fn parse_nanos(text: &str) -> Result<u128, DurationError> {
    let text = text.trim();
    let digits_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '_'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    let number: String = number.chars().filter(|&c| c != '_').collect();
    if number.is_empty() {
        return Err(DurationError::Syntax);
    }
    let unit = unit.trim_start();
    let scale = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|&(_, scale)| scale)
        .ok_or(DurationError::Syntax)?;
    let number: u128 = number.parse().map_err(|_| DurationError::Overflow)?;
    number.checked_mul(scale).ok_or(DurationError::Overflow)
}

/// `nanos` as a duration string, in the largest unit that divides it (`"90s"`, `"5m"`, `"1500us"`).
pub(crate) fn show(nanos: u64) -> String {
    if nanos == 0 {
        return "\"0s\"".to_owned();
    }
    let nanos = u128::from(nanos);
    let (name, scale) = UNITS
        .iter()
        .rev()
        .find(|&&(_, scale)| nanos % scale == 0)
        .copied()
        .unwrap_or(UNITS[0]);
    format!("\"{}{name}\"", nanos / scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit() {
        assert_eq!(parse_nanos("7ns"), Ok(7));
        assert_eq!(parse_nanos("1500us"), Ok(1_500_000));
        assert_eq!(parse_nanos("250ms"), Ok(250_000_000));
        assert_eq!(parse_nanos("10s"), Ok(10_000_000_000));
        assert_eq!(parse_nanos("5m"), Ok(300_000_000_000));
        assert_eq!(parse_nanos("1h"), Ok(3_600_000_000_000));
    }

    #[test]
    fn separators_and_spaces() {
        assert_eq!(parse_nanos("1_500ms"), Ok(1_500_000_000));
        assert_eq!(parse_nanos(" 10 s "), Ok(10_000_000_000));
    }

    #[test]
    fn refuses_other_shapes() {
        for text in [
            "",
            "s",
            "10",
            "10 parsecs",
            "1.5s",
            "-1s",
            "10sec",
            "ms10",
            "10 m s",
        ] {
            assert_eq!(parse_nanos(text), Err(DurationError::Syntax), "{text:?}");
        }
    }

    #[test]
    fn shows_in_the_largest_exact_unit() {
        assert_eq!(show(0), "\"0s\"");
        assert_eq!(show(10_000_000_000), "\"10s\"");
        assert_eq!(show(300_000_000_000), "\"5m\"");
        assert_eq!(show(90_000_000_000), "\"90s\"");
        assert_eq!(show(1_500_000), "\"1500us\"");
        assert_eq!(show(7), "\"7ns\"");
    }

    #[test]
    fn overflow() {
        assert_eq!(
            parse_nanos("999999999999999999999999999999999999999999h"),
            Err(DurationError::Overflow)
        );
    }
}
