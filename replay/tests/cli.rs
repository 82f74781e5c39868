//! The command line end to end: generate a trace, replay the example candidates, write the chart;
//! the crate's README (`replay/README.md`) shows this very output.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fusebox-replay"))
}

#[test]
fn the_readme_walk_through_is_what_the_tool_prints() {
    let dir = std::env::temp_dir().join(format!("fusebox-replay-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("outage.jsonl");
    let chart = dir.join("replay.svg");
    let out = bin()
        .args(["generate", "hard-outage", "-o"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let candidates = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/candidates.toml");
    let out = bin()
        .arg(&trace)
        .args(["--policies", candidates, "--chart"])
        .arg(&chart)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("Counterfactual limits:"), "{stdout}");
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let shown: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("| ") || l.starts_with("- "))
        .collect();
    assert!(shown.len() >= 8, "{stdout}");
    for line in shown {
        assert!(readme.contains(line), "README lacks `{line}`");
    }
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(svg.starts_with("<svg"));
    for name in ["default", "quick", "per_second", "jumpy"] {
        assert!(svg.contains(&format!(
            "{name}: closed (green), open (red), half-open (orange)"
        )));
    }
    assert!(svg.contains("#E53935"), "open spans are drawn in red");

    let out = bin()
        .arg(&trace)
        .args(["--search", "--no-chart"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    for line in stdout
        .lines()
        .filter(|l| l.starts_with("| ") || l.contains("--policy"))
    {
        assert!(readme.contains(line), "README lacks `{line}`");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unknown_scenario_is_an_error_listing_the_scenarios() {
    let out = bin().args(["generate", "meltdown"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "error: unknown scenario `meltdown`; expected one of `hard-outage`, `brownout`, `latency-spike`, `flapping`, `low-traffic`, `degraded-host`, `broken-client`, `noisy-hosts`"
    );
}

#[test]
fn a_trace_with_several_keys_replays_every_key_or_the_one_key_given() {
    let dir = std::env::temp_dir().join(format!("fusebox-replay-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("two.jsonl");
    let mut text = String::new();
    for i in 1..=20u64 {
        let key = if i % 2 == 0 { "a" } else { "b" };
        text.push_str(&format!(
            "{{\"at_ns\":{},\"key\":\"{key}\",\"outcome\":\"failure\"}}\n",
            i * 1_000_000
        ));
    }
    std::fs::write(&trace, &text).unwrap();
    let out = bin()
        .arg(&trace)
        .args(["--policy", "consecutive=3", "--no-chart"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.starts_with("20 calls of 2 keys, each key on its own breaker; 2 outage(s)"),
        "{stdout}"
    );
    // Each key opens at its own third failure: two openings in all.
    assert!(
        stdout.contains("| p1 | 0.00s / 0.00s | 0 | 6 | 2 |"),
        "{stdout}"
    );
    assert!(stdout.contains("| p1 | `a` | 10 |"), "{stdout}");
    assert!(stdout.contains("| p1 | `b` | 10 |"), "{stdout}");
    // The same from stdin.
    let mut child = bin()
        .arg("-")
        .args(["--policy", "consecutive=3", "--no-chart"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), text.as_bytes()).unwrap();
    let piped = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8(piped.stdout).unwrap(), stdout);
    let out = bin()
        .arg(&trace)
        .args(["--key", "a", "--policy", "consecutive=3", "--no-chart"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.starts_with("10 calls, 1 outage(s)"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_readme_groups_walk_through_is_what_the_tool_prints() {
    let dir = std::env::temp_dir().join(format!("fusebox-replay-groups-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let run = |scenario: &str, args: &[&str]| -> String {
        let trace = dir.join(format!("{scenario}.jsonl"));
        let out = bin()
            .args(["generate", scenario, "-o"])
            .arg(&trace)
            .output()
            .unwrap();
        assert!(out.status.success());
        let out = bin().arg(&trace).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let host = "window=100,min_calls=20,failure_rate=90";
    let degraded = run(
        "degraded-host",
        &[
            "--policy",
            &format!("alone: {host}"),
            "--policy",
            &format!("search: {host},group=search"),
            "--no-chart",
        ],
    );
    let broken = run(
        "broken-client",
        &[
            "--policy",
            "search: window=100,min_calls=20,failure_rate=40,group=search",
            "--policy",
            "loose: window=100,min_calls=20,failure_rate=40,group=search,max_ejection=50",
            "--no-chart",
        ],
    );
    let searched = run(
        "noisy-hosts",
        &[
            "--search",
            "--policy",
            &format!("search: {host},group=search"),
            "--no-chart",
        ],
    );
    let groups_of_broken: Vec<&str> = broken
        .lines()
        .skip_while(|l| !l.starts_with("| policy | group"))
        .take_while(|l| l.starts_with('|'))
        .collect();
    assert_eq!(groups_of_broken.len(), 4, "{broken}");
    let front: Vec<&str> = searched
        .lines()
        .skip_while(|l| !l.starts_with("| time to detect (total)"))
        .take_while(|l| l.starts_with('|'))
        .collect();
    assert!(front.len() >= 4, "{searched}");
    let shown = degraded
        .lines()
        .filter(|l| l.starts_with("| ") || l.starts_with("- "))
        .chain(groups_of_broken)
        .chain(front);
    for line in shown {
        assert!(readme.contains(line), "README lacks `{line}`");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
