//! The headline example, run on tokio's paused clock so its timings are exact.

#[allow(dead_code)]
#[path = "../../examples/basic/retry_vs_breaker.rs"]
mod example;

use example::{ATTEMPTS, REQUESTS, Report, TIMEOUT};

#[tokio::test(start_paused = true)]
async fn breaker_cuts_backend_calls_from_60_to_5_and_finishes_sooner() {
    let retry = example::run(false).await;
    assert_eq!(
        retry,
        Report {
            backend_calls: REQUESTS * ATTEMPTS,
            successes: 0,
            fast_errors: 0,
            timeouts: REQUESTS,
            elapsed: TIMEOUT * 60,
        }
    );
    let breaker = example::run(true).await;
    assert_eq!(breaker.backend_calls, 5);
    assert_eq!(breaker.successes, 0);
    // Request 1 times out three times; request 2 twice, then the circuit is open: its third attempt
    // and every later request are rejected at once.
    assert_eq!(breaker.timeouts, 1);
    assert_eq!(breaker.fast_errors, REQUESTS - 1);
    assert_eq!(breaker.elapsed, TIMEOUT * 5);
    assert!(breaker.elapsed < retry.elapsed);
    let table = example::table(&retry, &breaker);
    assert!(
        table.contains("| retry alone           |            60 |"),
        "{table}"
    );
    assert!(
        table.contains("| retry through breaker |             5 |"),
        "{table}"
    );
    let snapshot = fusebox::registry().get("backend").unwrap().snapshot();
    assert_eq!(snapshot.state, fusebox::State::Open);
    assert_eq!(snapshot.rejected, u64::from(REQUESTS - 1));
}

/// The README's first command, `cargo run --example retry_vs_breaker` from the workspace root,
/// builds a package whose only dependencies are fusebox and tokio (not the suite's axum,
/// reqwest, trybuild or Prometheus exporter), and finds it as the only default member: a
/// virtual manifest without `default-members` selects every member, and cargo unifies the
/// features of every selected package, so the suite's fusebox features (`admin`, `metrics`,
/// `config`) would be built for this example too.
#[test]
fn the_headline_example_is_the_only_default_member_and_depends_on_fusebox_and_tokio_only() {
    let output = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(workspace_root())
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "{output:?}");
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let packages = metadata["packages"].as_array().unwrap();
    let owners: Vec<&serde_json::Value> = packages
        .iter()
        .filter(|p| {
            p["targets"].as_array().unwrap().iter().any(|t| {
                t["name"] == "retry_vs_breaker" && t["kind"].as_array().unwrap()[0] == "example"
            })
        })
        .collect();
    assert_eq!(owners.len(), 1, "one package has the example");
    let owner = owners[0];
    let mut deps: Vec<&str> = owner["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    deps.sort_unstable();
    assert_eq!(deps, ["fusebox", "tokio"], "{}", owner["name"]);
    let defaults = metadata["workspace_default_members"].as_array().unwrap();
    assert_eq!(
        defaults,
        &[owner["id"].clone()],
        "`cargo run --example retry_vs_breaker` from the root builds the default members' features"
    );
}

/// The workspace's root, where the README's commands run: cargo run in `tests/` selects the
/// suite, whatever `default-members` says.
fn workspace_root() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the suite lives in the workspace")
}

/// What `fusebox` with its default features builds, as resolved by `cargo tree`: the attribute,
/// the registry and the coarse clock, and no TOML parser (feature `config`), no TSC clock
/// (feature `tsc`), and nothing of HTTP or TLS (features `tower`, `axum`, `reqwest`, `admin`,
/// `redis`).
#[test]
fn fusebox_default_features_bring_no_toml_http_tls_or_tsc() {
    let output = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "fusebox",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
            "--offline",
        ])
        .current_dir(workspace_root())
        .output()
        .expect("cargo tree runs");
    assert!(output.status.success(), "{output:?}");
    let tree = String::from_utf8(output.stdout).unwrap();
    let crates: Vec<&str> = tree
        .lines()
        .filter_map(|line| line.split(' ').next())
        .collect();
    assert!(crates.contains(&"fusebox-macros"), "{tree}");
    let heavy = [
        "toml",
        "toml_parser",
        "humantime",
        "quanta",
        "raw-cpuid",
        "http",
        "hyper",
        "axum",
        "reqwest",
        "tower",
        "redis",
        "rustls",
        "native-tls",
        "openssl",
        "serde_json",
    ];
    let found: Vec<&&str> = heavy.iter().filter(|name| crates.contains(name)).collect();
    assert!(
        found.is_empty(),
        "default features bring {found:?}:\n{tree}"
    );
}
