//! How the attribute's messages print a duration (`"90s"`, `"5m"`); `fusebox-policy`'s
//! `parse_duration` reads them.

/// The units a duration is printed in, with their length in nanoseconds.
const UNITS: [(&str, u128); 6] = [
    ("ns", 1),
    ("us", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60 * 1_000_000_000),
    ("h", 60 * 60 * 1_000_000_000),
];

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
    fn shows_in_the_largest_exact_unit() {
        assert_eq!(show(0), "\"0s\"");
        assert_eq!(show(10_000_000_000), "\"10s\"");
        assert_eq!(show(300_000_000_000), "\"5m\"");
        assert_eq!(show(90_000_000_000), "\"90s\"");
        assert_eq!(show(1_500_000), "\"1500us\"");
        assert_eq!(show(7), "\"7ns\"");
    }
}
