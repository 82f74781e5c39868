//! `cargo xtask test`: installs what the test suite needs (`redis-server`) and runs the suite the
//! way CI does: every crate with every feature, then the loom model check.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The line that installs `redis-server` on Debian and Ubuntu.
const INSTALL: &str = "apt-get install -y redis-server";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("test") => test(&args[1..]),
        _ => {
            eprintln!("usage: cargo xtask test [extra `cargo test` arguments]");
            ExitCode::FAILURE
        }
    }
}

fn test(extra: &[String]) -> ExitCode {
    if let Err(message) = ensure_redis() {
        eprintln!("error: {message}");
        return ExitCode::FAILURE;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    println!("== tests: cargo test --workspace --all-features");
    let tests = Command::new(&cargo)
        .current_dir(root)
        .args(["test", "--workspace", "--all-features"])
        .args(extra)
        .status();
    if !matches!(tests, Ok(s) if s.success()) {
        return ExitCode::FAILURE;
    }
    println!("== loom model check of the breaker's compare-and-swap transitions");
    let loom = Command::new(&cargo)
        .current_dir(root)
        .env("RUSTFLAGS", "--cfg fusebox_loom")
        .env("CARGO_TARGET_DIR", root.join("target/loom"))
        .args(["test", "-p", "fusebox", "--test", "loom", "--release"])
        .status();
    if matches!(loom, Ok(s) if s.success()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `redis-server` on `PATH`, in `/usr/bin`, or installed now with apt when this user can.
fn ensure_redis() -> Result<(), String> {
    if find_redis().is_some() {
        return Ok(());
    }
    println!("== installing redis-server ({INSTALL})");
    let root = is_root();
    let (program, prefix): (&str, &[&str]) = if root {
        ("apt-get", &[])
    } else if which("sudo").is_some() {
        ("sudo", &["-n", "apt-get"])
    } else {
        return Err(format!(
            "`redis-server` is missing and cannot be installed without root; install it with `{INSTALL}` and run `cargo xtask test` again"
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
    let _ = apt(&["update"]);
    if apt(&["install", "-y", "redis-server"]) && find_redis().is_some() {
        Ok(())
    } else {
        Err(format!(
            "`redis-server` is missing and `{INSTALL}` failed; install it by hand with `{INSTALL}` and run `cargo xtask test` again"
        ))
    }
}

fn find_redis() -> Option<PathBuf> {
    which("redis-server").or_else(|| {
        let usr = PathBuf::from("/usr/bin/redis-server");
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
