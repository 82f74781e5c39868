//! A trace file is read again for each pass, so the replay's memory does not follow the trace:
//! 200,000 calls (16 MB of JSON lines) replay within 12 MB of resident memory, where reading the
//! whole text and parsing it into calls took over 60 MB. Measured with `/usr/bin/time` (skipped
//! where it is missing); BENCHMARKS.md has the 10-million-line figure.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_fusebox-replay");

#[test]
fn two_hundred_thousand_calls_replay_in_under_12_mb() {
    if !Path::new("/usr/bin/time").exists() {
        eprintln!("skipped: no /usr/bin/time");
        return;
    }
    let dir = std::env::temp_dir().join(format!("fusebox-replay-memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("long.jsonl");
    let status = Command::new(BIN)
        .args(["generate", "hard-outage", "--repeat", "167", "-o"])
        .arg(&trace)
        .status()
        .unwrap();
    assert!(status.success());
    assert!(std::fs::metadata(&trace).unwrap().len() > 16_000_000);
    let out = Command::new("/usr/bin/time")
        .args(["-f", "max_rss_kb=%M", BIN])
        .arg(&trace)
        .args([
            "--policy",
            "consecutive=5,open_for=5s",
            "--policy",
            "window=100",
            "--no-chart",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("200233 calls, "),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let kb: u64 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("max_rss_kb="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no figure in {stderr}"));
    assert!(kb < 12 * 1024, "max resident {kb} kB");
    let _ = std::fs::remove_dir_all(&dir);
}
