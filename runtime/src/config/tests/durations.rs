//! TOML and the environment read every duration of the grammar table as the attribute does
//! (`fusebox-policy`'s `parse_duration`).

use super::*;
use fusebox_policy::{DURATION_UNITS, parse_duration};

/// `open_for` read from `text` in TOML and in the environment: the wait, or the error's message.
fn read(text: &str) -> [Result<Duration, String>; 2] {
    let open_for = |loaded: Result<usize, ConfigError>, r: Registry| {
        loaded.map_err(|e| e.to_string())?;
        Ok(r.breaker("k", Policy::new())
            .unwrap()
            .policy()
            .settings()
            .open_for)
    };
    let toml = Registry::new();
    let loaded = toml.load_toml(&format!("[breakers.k]\nopen_for = \"{text}\"\n"));
    let from_toml = open_for(loaded, toml);
    let env = Registry::new();
    let loaded = env.load_vars([("FUSEBOX__K__OPEN_FOR".to_owned(), text.to_owned())]);
    [from_toml, open_for(loaded, env)]
}

#[test]
fn toml_and_the_environment_read_the_shared_grammar() {
    let table = include_str!("../../../../policy/src/duration/grammar.txt");
    let mut read_ok = 0;
    for text in table
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split('"').nth(1))
    {
        let expected = parse_duration(text);
        for found in read(text) {
            match &expected {
                Ok(wait)
                    if (Duration::from_millis(1)..=Duration::from_secs(86_400)).contains(wait) =>
                {
                    assert_eq!(found.as_ref(), Ok(wait), "{text:?}");
                    read_ok += 1;
                }
                Ok(_) => assert!(
                    found.unwrap_err().contains("invalid `open_for`"),
                    "{text:?}"
                ),
                Err(_) => {
                    let message = found.unwrap_err();
                    assert!(message.contains(DURATION_UNITS), "{text:?}: {message}");
                }
            }
        }
    }
    assert!(read_ok > 40, "{read_ok} texts read");
}
