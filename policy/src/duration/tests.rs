//! The parser against the grammar table every source shares.

use std::time::Duration;

use super::*;

/// The grammar table: each text, and the duration it reads as (`Err` when refused).
fn grammar() -> Vec<(String, Result<Duration, DurationError>)> {
    let table = include_str!("grammar.txt");
    table
        .lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let (text, expected) = line.rsplit_once(" = ").expect("`\"text\" = value`");
            let text = text.strip_prefix('"').and_then(|t| t.strip_suffix('"'));
            let expected = match expected {
                "refused" => Err(DurationError::Syntax),
                "too long" => Err(DurationError::Overflow),
                nanos => Ok(Duration::from_nanos(nanos.parse().expect("nanoseconds"))),
            };
            (text.expect("a quoted text").to_owned(), expected)
        })
        .collect()
}

#[test]
fn reads_the_grammar_table() {
    let table = grammar();
    assert!(table.len() > 40);
    for (text, expected) in table {
        assert_eq!(parse_duration(&text), expected, "{text:?}");
    }
}

#[test]
fn the_message_lists_the_units() {
    let message = DurationError::Syntax.to_string();
    for (names, _) in UNITS {
        assert!(message.contains(&format!("`{}`", names[0])), "{message}");
    }
    assert!(message.contains("`sec`") && message.contains("`minutes`"));
}
