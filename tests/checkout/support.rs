//! `checkout --replicas 2` as a real process tree: the example's binary, its replicas and its
//! front, for the tests under `tests/checkout/`.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::redis_harness::RedisServer;

/// The example's binary, built next to this test's binary.
fn example_binary() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_owned());
    let status = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "build",
            "--quiet",
            "-p",
            "fusebox-suite",
            "--example",
            "checkout",
        ])
        .arg("--all-features")
        .status()
        .expect("run `cargo build -p fusebox-suite --example checkout`");
    assert!(
        status.success(),
        "`cargo build -p fusebox-suite --example checkout --all-features` failed"
    );
    // target/debug/deps/<this test>-… → target/debug/examples/checkout
    let exe = std::env::current_exe().expect("this test's path");
    let profile = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>");
    let binary = profile.join("examples").join("checkout");
    assert!(
        binary.is_file(),
        "no example binary at {}",
        binary.display()
    );
    binary
}

/// The running demo: killed on drop (its replicas exit when their standard input closes).
pub(crate) struct Demo {
    child: Child,
    /// The front's base URL (`http://127.0.0.1:port`).
    pub front: String,
    /// The backend's base URL.
    pub backend: String,
    /// Each replica's id and base URL.
    pub replicas: Vec<(String, String)>,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn url_in(line: &str) -> String {
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in `{line}`"));
    url.trim_end_matches("/hits")
        .trim_end_matches('/')
        .to_owned()
}

/// Starts `checkout --replicas 2` on free ports, sharing through `redis`, and waits for its front.
pub(crate) fn start(redis: &RedisServer) -> Demo {
    let mut child = Command::new(example_binary())
        .args(["--replicas", "2"])
        .env("PORT", "0")
        .env("BACKEND_PORT", "0")
        .env("REDIS_URL", redis.url())
        .env("CHECKOUT_OPEN_FOR", "60s")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start `checkout --replicas 2`");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut demo = Demo {
        child,
        front: String::new(),
        backend: String::new(),
        replicas: Vec::new(),
    };
    let mut lines = BufReader::new(stdout).lines();
    for line in lines.by_ref() {
        let line = line.expect("the demo's output");
        if line.starts_with("backend ") {
            demo.backend = url_in(&line);
        } else if let Some(rest) = line.strip_prefix("replica ") {
            let id = rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned();
            demo.replicas.push((id, url_in(&line)));
        } else if line.starts_with("front ") {
            demo.front = url_in(&line);
            break;
        }
    }
    // Keep reading, so the demo never writes to a closed pipe.
    std::thread::spawn(move || lines.for_each(drop));
    assert!(
        !demo.front.is_empty(),
        "`checkout --replicas 2` exited before printing its front (its log is above)"
    );
    demo
}
