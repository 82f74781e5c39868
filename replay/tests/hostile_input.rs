//! The command line on hostile input: huge time spans and tiny buckets, endless lines, a closed
//! pipe, duplicate fields; and `lint`, which checks a policy without a trace.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fusebox-replay"))
}

fn dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fusebox-replay-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `cmd`, failing the test if it has not ended within `limit` (it is killed then).
fn run_within(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn line(at_ns: u64, outcome: &str) -> String {
    format!("{{\"at_ns\":{at_ns},\"key\":\"k\",\"outcome\":\"{outcome}\"}}\n")
}

#[test]
fn a_trace_spanning_ten_exaseconds_widens_the_buckets_and_says_so() {
    let dir = dir("span");
    let trace = dir.join("span.jsonl");
    let mut text = line(1_000_000, "success");
    for k in 0..5 {
        text.push_str(&line(10_000_000_000_000_000_000 + k, "failure"));
    }
    std::fs::write(&trace, text).unwrap();
    let out = run_within(
        {
            let mut c = bin();
            c.arg(&trace)
                .args(["--policy", "consecutive=3", "--no-chart"]);
            c
        },
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.starts_with("note: `--bucket 1s` would cut the trace's ")
            && err.contains("buckets; using ")
            && err.contains("(at most 1000000)"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_zero_bucket_is_refused_and_a_one_nanosecond_bucket_widened() {
    let dir = dir("bucket");
    let trace = dir.join("outage.jsonl");
    assert!(
        bin()
            .args(["generate", "hard-outage", "-o"])
            .arg(&trace)
            .status()
            .unwrap()
            .success()
    );
    let out = run_within(
        {
            let mut c = bin();
            c.arg(&trace)
                .args(["--bucket", "0s", "--policy", "consecutive=3"]);
            c
        },
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out)
            .contains("a bucket of zero width cuts nothing; give a width such as `1s` or `500ms`"),
        "{}",
        stderr(&out)
    );
    let out = run_within(
        {
            let mut c = bin();
            c.arg(&trace)
                .args(["--bucket", "1ns", "--policy", "consecutive=3", "--no-chart"]);
            c
        },
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("note: `--bucket 1ns` would cut"),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_line_longer_than_the_bound_is_an_error_naming_it() {
    let dir = dir("long");
    let trace = dir.join("long.jsonl");
    let mut text = line(1, "success");
    text.push_str(&"x".repeat(100_000));
    text.push('\n');
    std::fs::write(&trace, text).unwrap();
    let out = bin()
        .arg(&trace)
        .args(["--policy", "consecutive=3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("line 2: longer than 65536 bytes; a trace has one call per line"),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(unix)]
#[test]
fn dev_zero_ends_with_the_long_line_error_not_out_of_memory() {
    let out = run_within(
        {
            let mut c = bin();
            c.args(["/dev/zero", "--policy", "consecutive=3"]);
            c
        },
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim(),
        "error: `/dev/zero` line 1: longer than 65536 bytes; a trace has one call per line (is this a trace?)"
    );
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let mut child = bin()
        .args(["generate", "brownout", "--repeat", "50"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 100];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout); // as `| head -c 100` does
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(err, "", "no panic message");
}

#[test]
fn a_field_given_twice_is_an_error_naming_the_line_and_field() {
    let dir = dir("twice");
    let trace = dir.join("twice.jsonl");
    let text = format!(
        "{}{}",
        line(1, "success"),
        "{\"at_ns\":2,\"key\":\"k\",\"outcome\":\"failure\",\"outcome\":\"success\"}\n"
    );
    std::fs::write(&trace, text).unwrap();
    let out = bin()
        .arg(&trace)
        .args(["--policy", "consecutive=3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("line 2: field `outcome`: given twice; write each field once"),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_progress_bar_stays_off_a_stderr_that_is_not_a_terminal() {
    let dir = dir("quiet");
    let trace = dir.join("outage.jsonl");
    assert!(
        bin()
            .args(["generate", "hard-outage", "-o"])
            .arg(&trace)
            .status()
            .unwrap()
            .success()
    );
    let out = bin()
        .arg(&trace)
        .args(["--search", "--policy", "consecutive=3", "--no-chart"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(stderr(&out), "");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lint_checks_a_policy_without_a_trace() {
    let out = bin()
        .args(["lint", "window=10,failure_rate=50"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ok: `p1`: `window=10,failure_rate=50`\n0 error(s), 0 warning(s)\n"
    );

    let out = bin()
        .args([
            "lint",
            "twitchy: min_calls=1,failure_rate=50,open_for=100ms",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "warnings alone pass");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("warning: `twitchy`: one failure can open it: it is 100% of `min_calls` = 1 calls, at or above `failure_rate` = 50; raise `min_calls`"),
        "{stdout}"
    );
    assert!(stdout.contains("warning: `twitchy`: `open_for` = 100ms sends a down backend a probe more than once a second"), "{stdout}");
    assert!(stdout.ends_with("0 error(s), 2 warning(s)\n"), "{stdout}");

    let out = bin()
        .args(["lint", "windw=10", "failure_rate=0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("error: --policy \"windw=10\": field `windw`: unknown policy field; did you mean `window`?"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "field `failure_rate`: invalid value `0`; expected a percentage from 1 to 100, or `off`"
        ),
        "{stdout}"
    );
    assert!(stdout.ends_with("2 error(s), 0 warning(s)\n"), "{stdout}");
}

#[test]
fn a_file_streamed_pass_by_pass_and_stdin_held_in_memory_give_the_same_report() {
    let dir = dir("same");
    let trace = dir.join("flapping.jsonl");
    assert!(
        bin()
            .args(["generate", "flapping", "--repeat", "3", "-o"])
            .arg(&trace)
            .status()
            .unwrap()
            .success()
    );
    let args = [
        "--policy",
        "consecutive=5,open_for=5s",
        "--policy",
        "window=10s,min_calls=5,failure_rate=50",
        "--policy",
        "numb: window=1s,min_calls=50",
    ];
    let from_file = bin()
        .arg(&trace)
        .args(args)
        .arg("--chart")
        .arg(dir.join("file.svg"))
        .output()
        .unwrap();
    assert!(from_file.status.success(), "{}", stderr(&from_file));
    let from_stdin = bin()
        .arg("-")
        .args(args)
        .arg("--chart")
        .arg(dir.join("stdin.svg"))
        .stdin(std::fs::File::open(&trace).unwrap())
        .output()
        .unwrap();
    assert!(from_stdin.status.success(), "{}", stderr(&from_stdin));
    let report = |o: &Output| {
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        text[..text.find("chart written").unwrap()].to_owned()
    };
    assert_eq!(report(&from_file), report(&from_stdin));
    assert!(
        report(&from_file).contains("Warnings:"),
        "{}",
        report(&from_file)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("file.svg")).unwrap(),
        std::fs::read_to_string(dir.join("stdin.svg")).unwrap()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
