//! `cargo xtask test`: installs what the test suite needs (`redis-server`, `time`, `chromium`,
//! `chromium-driver`) and runs the suite the way CI does: every crate but the benchmarks with every
//! feature (with cargo-nextest when it is installed, several tests at once, and the doc tests
//! beside them), and the loom model check. `cargo xtask build-cost`: what fusebox costs a user in compile time (see
//! `build_cost`). `cargo xtask public-api`: writes the published crates' public API to their
//! `public-api.txt` (`--check`: fails when one is stale; see `public_api`).

mod build_cost;
mod public_api;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

/// What the suite needs from Debian's packages: (binary, package, used by).
const NEEDS: [(&str, &str, &str); 4] = [
    ("redis-server", "redis-server", "tests/redis/"),
    ("/usr/bin/time", "time", "replay/tests/memory.rs"),
    ("chromium", "chromium", "examples/checkout/tests/browser.rs"),
    (
        "chromedriver",
        "chromium-driver",
        "examples/checkout/tests/browser.rs",
    ),
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("test") => test(&args[1..]),
        Some("build-cost") => build_cost::run(&args[1..]),
        Some("public-api") => public_api::run(&args[1..]),
        _ => {
            eprintln!(
                "usage: cargo xtask test [extra arguments of `cargo nextest run`, or of `cargo test` without nextest]"
            );
            eprintln!("       cargo xtask build-cost [--runs N] [--keep] [--offline]");
            eprintln!("       cargo xtask public-api [--check]");
            ExitCode::FAILURE
        }
    }
}

/// What every build and run of the suite selects: the workspace but `fusebox-bench`, whose benches
/// and examples hold no test and whose peers (criterion, failsafe, recloser, tower-resilience: 28
/// crates) the suite has no use for. CI's clippy (`--all-targets`) still checks that they build;
/// the allocation and thread tests are in `fusebox-measure`.
const SELECTED: [&str; 4] = [
    "--workspace",
    "--all-features",
    "--exclude",
    "fusebox-bench",
];

/// The loom model that takes longest (about 7 of its 17 s idle), run in a process of its own.
const LOOM_LONGEST: &str = "two_probes_are_admitted_among_three_racing_callers";

fn test(extra: &[String]) -> ExitCode {
    if let Err(message) = ensure_packages() {
        eprintln!("error: {message}");
        return ExitCode::FAILURE;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let cargo_in_root = || {
        let mut command = Command::new(&cargo);
        command.current_dir(root);
        command
    };
    // The loom model check builds and runs beside the tests' build and the tests (its output is
    // shown after theirs): its build fills the cores the tests' build leaves idle (the crates it
    // waits on one at a time, the links), its models the time the tests wait on other processes.
    // `fusebox-loom` (runtime/loom) holds the model check alone, so this build compiles fusebox's
    // normal dependencies and loom, none of fusebox's dev-dependencies; the profile `loom` (the
    // root Cargo.toml) optimises only what runs the models. The cfg reaches every crate (cargo has
    // no per-crate flags), hence a target directory of its own. The models run in two processes,
    // the longest model (`LOOM_LONGEST`) in one and the others one at a time in the other: each
    // model iteration maps and unmaps its threads' stacks, and two models at once in one process
    // spend more time in the kernel than the second thread saves (idle: 27 CPU-s in 18.9 s against
    // 17 CPU-s in 17.4 s), where two processes share nothing (8.5 s). The second cargo waits for
    // the first's build. A renamed model still runs: `--skip` of a name no test has skips nothing.
    let loom_part = |filter: [&str; 2]| {
        beside(
            cargo_in_root()
                .env("RUSTFLAGS", "--cfg fusebox_loom")
                .env("CARGO_TARGET_DIR", root.join("target/loom"))
                .args(["test", "-p", "fusebox-loom", "--test", "loom"])
                .args(["--profile", "loom", "--", "--test-threads", "1"])
                .args(filter),
        )
    };
    let loom = [
        loom_part(["--exact", LOOM_LONGEST]),
        loom_part(["--skip", LOOM_LONGEST]),
    ];
    let selected = SELECTED.join(" ");
    println!("== build: cargo test {selected} --no-run");
    let built = cargo_in_root()
        .arg("test")
        .args(SELECTED)
        .arg("--no-run")
        .args(extra)
        .status();
    if !matches!(built, Ok(s) if s.success()) {
        loom.into_iter().for_each(stop);
        return ExitCode::FAILURE;
    }
    let nextest = cargo_in_root()
        .args(["nextest", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let (tests, docs) = if nextest {
        // nextest runs every test in a process of its own, several at once and the longest first
        // (.config/nextest.toml); it does not run doc tests, which run beside it.
        // Extra arguments that pick test targets (`--test redis`) leave the doc tests out, as
        // they do with `cargo test`.
        let docs = (!picks_targets(extra)).then(|| {
            beside(
                cargo_in_root()
                    .arg("test")
                    .args(SELECTED)
                    .arg("--doc")
                    .args(extra),
            )
        });
        println!("== tests: cargo nextest run {selected}");
        let tests = cargo_in_root()
            .args(["nextest", "run"])
            .args(SELECTED)
            .args(extra)
            .status();
        let docs = match docs {
            Some(docs) => {
                println!("== doc tests: cargo test {selected} --doc");
                shown(docs, "the doc tests")
            }
            None => true,
        };
        (tests, docs)
    } else {
        println!(
            "== tests: cargo test {selected} (cargo-nextest is not installed, so the test binaries run one after another; `cargo install cargo-nextest --locked` runs them at once)"
        );
        let tests = cargo_in_root()
            .arg("test")
            .args(SELECTED)
            .args(extra)
            .status();
        (tests, true)
    };
    println!("== loom model check of the breaker's compare-and-swap transitions");
    let mut loom_passed = true;
    for part in loom {
        // Each part's output is shown, passed or not.
        loom_passed &= shown(part, "the loom model check");
    }
    if matches!(tests, Ok(s) if s.success()) && docs && loom_passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Whether `extra` picks test targets (the doc tests are not among them).
fn picks_targets(extra: &[String]) -> bool {
    const PICKS: [&str; 10] = [
        "--lib",
        "--bin",
        "--bins",
        "--example",
        "--examples",
        "--test",
        "--tests",
        "--bench",
        "--benches",
        "--all-targets",
    ];
    extra
        .iter()
        .take_while(|arg| *arg != "--")
        .any(|arg| PICKS.contains(&arg.split('=').next().unwrap_or(arg)))
}

/// A command running beside the tests, its output kept to be shown once it ends.
struct Beside {
    /// The command's process id.
    pid: u32,
    /// Waits for the command, reading its output meanwhile so that a full pipe never stops it.
    output: std::thread::JoinHandle<std::io::Result<std::process::Output>>,
}

/// `command` started with its output kept (see [`Beside`]); it stays in this process group, so
/// that Ctrl-C stops it too.
fn beside(command: &mut Command) -> std::io::Result<Beside> {
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let pid = child.id();
    let output = std::thread::spawn(move || child.wait_with_output());
    Ok(Beside { pid, output })
}

/// Stops a command started by [`beside`] (a cargo stopped so starts nothing more).
fn stop(beside: std::io::Result<Beside>) {
    if let Ok(Beside { pid, output }) = beside {
        let _ = Command::new("kill").arg(pid.to_string()).status();
        let _ = output.join();
    }
}

/// Waits for a command started by [`beside`], prints its output and tells whether it passed.
fn shown(beside: std::io::Result<Beside>, what: &str) -> bool {
    let output = beside.and_then(|b| {
        b.output
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("its reader panicked")))
    });
    match output {
        Ok(output) => {
            print!("{}", String::from_utf8_lossy(&output.stderr));
            print!("{}", String::from_utf8_lossy(&output.stdout));
            output.status.success()
        }
        Err(error) => {
            eprintln!("error: {what} did not run: {error}");
            false
        }
    }
}

/// Every binary of [`NEEDS`] on `PATH` or in `/usr/bin`, installed now with apt when missing and
/// this user can.
fn ensure_packages() -> Result<(), String> {
    let missing: Vec<&str> = NEEDS
        .iter()
        .filter(|(binary, _, _)| find(binary).is_none())
        .map(|(_, package, _)| *package)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let install = format!("apt-get install -y {}", missing.join(" "));
    let used_by: Vec<String> = NEEDS
        .iter()
        .filter(|(_, package, _)| missing.contains(package))
        .map(|(binary, _, test)| format!("`{binary}` ({test})"))
        .collect();
    println!("== installing {} ({install})", used_by.join(", "));
    let (program, prefix): (&str, &[&str]) = if is_root() {
        ("apt-get", &[])
    } else if which("sudo").is_some() {
        ("sudo", &["-n", "apt-get"])
    } else {
        return Err(format!(
            "{} missing and cannot be installed without root; install with `{install}` and run `cargo xtask test` again",
            used_by.join(", ")
        ));
    };
    let apt = |args: &[&str]| {
        Command::new(program)
            .args(prefix)
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success())
    };
    let _ = apt(&["update", "-qq"]);
    let mut args = vec!["install", "-y", "-qq"];
    args.extend(missing.iter().copied());
    if apt(&args) && NEEDS.iter().all(|(binary, _, _)| find(binary).is_some()) {
        Ok(())
    } else {
        Err(format!(
            "{} missing and `{install}` failed; install by hand with `{install}` and run `cargo xtask test` again",
            used_by.join(", ")
        ))
    }
}

/// `name` on `PATH`, or in `/usr/bin`.
fn find(name: &str) -> Option<PathBuf> {
    which(name).or_else(|| {
        let usr = Path::new("/usr/bin").join(name);
        usr.is_file().then_some(usr)
    })
}

fn which(name: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}
