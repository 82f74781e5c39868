//! Bad input gets an error naming the line and the field; nothing panics.

use std::time::Duration;

use fusebox_replay::policy::{parse_policy_arg, parse_policy_file};
use fusebox_replay::trace::parse;

const GOOD: &str = r#"{"at_ns":1,"key":"k","outcome":"success"}"#;

fn error(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn a_malformed_line_is_named() {
    let e = error(&format!("{GOOD}\n{{\"at_ns\":2,\"key\":\"k\",\n"));
    assert!(e.starts_with("line 2: not a JSON object"), "{e}");
}

#[test]
fn time_going_backwards_names_the_line_and_field() {
    let e = error(&format!(
        "{GOOD}\n{}\n",
        r#"{"at_ns":0,"key":"k","outcome":"failure"}"#
    ));
    assert_eq!(
        e,
        "line 2: field `at_ns`: time goes backwards (0 after 1); a trace lists calls in the order they were reported"
    );
}

#[test]
fn an_unknown_outcome_names_the_line_and_field() {
    let e = error(&format!(
        "{GOOD}\n\n{}",
        r#"{"at_ns":3,"key":"k","outcome":"sucess"}"#
    ));
    assert_eq!(
        e,
        "line 3: field `outcome`: unknown outcome `sucess`; expected one of `success`, `failure`, `ignored`, `rejected`"
    );
}

#[test]
fn missing_and_mistyped_fields_are_named() {
    assert!(
        error(r#"{"key":"k","outcome":"success"}"#).starts_with("line 1: field `at_ns`: missing")
    );
    assert!(
        error(r#"{"at_ns":-4,"key":"k","outcome":"success"}"#)
            .starts_with("line 1: field `at_ns`: expected a whole number")
    );
    assert!(
        error(r#"{"at_ns":4,"key":7,"outcome":"success"}"#)
            .starts_with("line 1: field `key`: expected a string")
    );
    assert!(
        error(r#"{"at_ns":4,"key":"k","outcome":"success","latncy_ns":3}"#)
            .starts_with("line 1: unknown field `latncy_ns`")
    );
    assert!(
        error(r#"{"at_ns":4,"key":"k","outcome":"success","latency_ns":5}"#)
            .starts_with("line 1: field `latency_ns`")
    );
    assert!(error("[1,2]").starts_with("line 1: not a JSON object"));
}

#[test]
fn an_unknown_policy_field_is_named() {
    let e = parse_policy_arg("window=100,falure_rate=50", "p1")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("--policy \"window=100,falure_rate=50\": field `falure_rate`: unknown policy field; did you mean `failure_rate`? expected one of `window`, `min_calls`, `failure_rate`"),
        "{e}"
    );
    let e = parse_policy_arg("window=100,open_for=soon", "p1")
        .unwrap_err()
        .to_string();
    assert!(e.contains("field `open_for`: invalid value `soon`"), "{e}");
    let e = parse_policy_arg("window", "p1").unwrap_err().to_string();
    assert!(e.contains("field `window`: expected `field=value`"), "{e}");
    let e = parse_policy_arg("window=10,min_calls=50", "p1")
        .unwrap_err()
        .to_string();
    assert!(e.contains("`min_calls`"), "fusebox's own validation: {e}");
}

#[test]
fn an_unknown_field_in_a_policy_file_names_its_line() {
    let text =
        "[policies.fast]\nwindow = 20\n\n[policies.slow]\nwindow = 100\nopen_fro = \"30s\"\n";
    let e = parse_policy_file(text, "candidates.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "candidates.toml line 6 (`policies.slow`): field `open_fro`: unknown policy field"
        ),
        "{e}"
    );
    let ok = parse_policy_file(
        "[policies.fast]\nwindow = 20\nopen_for = \"5s\"\n[policies.timed]\nwindow = \"30s\"\nfailure_rate = 25\n",
        "c.toml",
    )
    .unwrap();
    assert_eq!(ok.len(), 2);
    assert_eq!(ok[1].policy_arg(), "window=30s,failure_rate=25");
    let e = parse_policy_file("window = 3\n", "c.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("no `[policies.<name>]` tables"), "{e}");
    let e = parse_policy_file("[policies.a\n", "c.toml")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("c.toml line 1: not valid TOML"), "{e}");
}

#[test]
fn random_lines_never_panic() {
    let mut rng = fastrand::Rng::with_seed(11);
    let pieces = [
        "{",
        "}",
        "\"at_ns\"",
        ":",
        "1",
        "-1",
        "1e99",
        "\"key\"",
        "\"k\"",
        ",",
        "\"outcome\"",
        "\"failure\"",
        "null",
        "[",
        "]",
        "\"latency_ns\"",
        "18446744073709551616",
        "\u{0}",
        "é",
    ];
    for _ in 0..5_000 {
        let line: String = (0..rng.usize(0..12))
            .map(|_| pieces[rng.usize(0..pieces.len())])
            .collect();
        let _ = parse(&line);
        let _ = parse_policy_arg(&line, "p");
        let _ = parse_policy_file(&line, "f");
    }
}

#[test]
fn the_command_line_reports_bad_input_without_panicking() {
    let dir = std::env::temp_dir().join(format!("fusebox-replay-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("bad.jsonl");
    std::fs::write(
        &trace,
        format!("{GOOD}\n{{\"at_ns\":2,\"key\":\"k\",\"outcome\":\"maybe\"}}\n"),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fusebox-replay"))
        .arg(&trace)
        .args(["--policy", "window=20", "--no-chart"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("line 2: field `outcome`: unknown outcome `maybe`"),
        "{stderr}"
    );
    std::fs::write(&trace, format!("{GOOD}\n")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fusebox-replay"))
        .arg(&trace)
        .args(["--policy", "windw=20"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("field `windw`: unknown policy field"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_rejected_call_is_written_and_read_rejected() {
    use fusebox_replay::trace::Outcome;
    assert_eq!(Outcome::Rejected.as_str(), "rejected");
    let calls = parse(r#"{"at_ns":1,"key":"k","outcome":"rejected","reason":"open"}"#).unwrap();
    assert_eq!(calls[0].outcome, Outcome::Rejected);
    let other = error(r#"{"at_ns":1,"key":"k","outcome":"refused"}"#);
    assert!(other.contains("outcome"), "{other}");
}

#[test]
fn a_field_given_twice_is_refused() {
    assert_eq!(
        error(r#"{"at_ns":4,"key":"k","outcome":"success","at_ns":5}"#),
        "line 1: field `at_ns`: given twice; write each field once"
    );
}

#[test]
fn an_unknown_trace_field_suggests_the_closest_one() {
    let e = error(r#"{"at_ns":4,"key":"k","outcome":"success","latncy_ns":3}"#);
    assert!(
        e.starts_with("line 1: unknown field `latncy_ns`; did you mean `latency_ns`?"),
        "{e}"
    );
}

/// A policy file reads every duration of the grammar table as the attribute, TOML and the
/// environment do (`fusebox::parse_duration`).
#[test]
fn policy_files_read_the_shared_duration_grammar() {
    let table = include_str!("../../policy/src/duration/grammar.txt");
    let mut read = 0;
    for text in table
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split('"').nth(1))
    {
        let found = parse_policy_file(&format!("[policies.p]\nopen_for = \"{text}\"\n"), "c.toml")
            .map(|candidates| candidates[0].policy.settings().open_for)
            .map_err(|e| e.to_string());
        match fusebox::parse_duration(text) {
            Ok(wait) if wait >= Duration::from_millis(1) && wait <= Duration::from_secs(86_400) => {
                assert_eq!(found, Ok(wait), "{text:?}");
                read += 1;
            }
            Ok(_) => assert!(found.is_err(), "{text:?}"),
            Err(_) => {
                let message = found.unwrap_err();
                assert!(
                    message.contains(fusebox::DURATION_UNITS),
                    "{text:?}: {message}"
                );
            }
        }
    }
    assert!(read > 20, "{read} texts read");
}
