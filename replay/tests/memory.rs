//! A trace file is read again for each pass, so the replay's memory does not follow the trace: a
//! trace of about 60,000 calls (5 MB of JSON lines) replays in as much resident memory as one of about
//! 2,400 calls, give or take 2 MB, and within 12 MB; reading the whole text and parsing it into calls
//! would hold the 5 MB and more. Measured with `/usr/bin/time` (Debian's package `time`, which
//! `cargo xtask test` installs); BENCHMARKS.md has the 10-million-line figure.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_fusebox-replay");

/// Generates `repeat` rounds of the hard-outage trace and replays it with two candidates:
/// (calls replayed, trace bytes, peak resident kB).
fn replay(dir: &Path, repeat: u32) -> (u64, u64, u64) {
    let trace = dir.join(format!("trace-{repeat}.jsonl"));
    let status = Command::new(BIN)
        .args([
            "generate",
            "hard-outage",
            "--repeat",
            &repeat.to_string(),
            "-o",
        ])
        .arg(&trace)
        .status()
        .unwrap();
    assert!(status.success());
    let bytes = std::fs::metadata(&trace).unwrap().len();
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
    let stdout = String::from_utf8_lossy(&out.stdout);
    let calls: u64 = stdout
        .split_once(" calls, ")
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no call count in {stdout}"));
    let kb: u64 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("max_rss_kb="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no figure in {stderr}"));
    (calls, bytes, kb)
}

#[test]
fn a_trace_25_times_longer_replays_in_the_same_memory_within_12_mb() {
    assert!(
        Path::new("/usr/bin/time").exists(),
        "/usr/bin/time is missing: install it with `apt-get install -y time` (or run `cargo xtask test`, which does)"
    );
    let dir = std::env::temp_dir().join(format!("fusebox-replay-memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (short_calls, _, short_kb) = replay(&dir, 2);
    let (long_calls, long_bytes, long_kb) = replay(&dir, 50);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!((short_calls, long_calls), (2_398, 59_950));
    assert!(
        long_bytes > 4_500_000,
        "the long trace is {long_bytes} bytes"
    );
    assert!(
        long_kb < short_kb + 2 * 1024 && long_kb < 12 * 1024,
        "{long_calls} calls took {long_kb} kB resident, {short_calls} took {short_kb} kB"
    );
}
