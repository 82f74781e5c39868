//! `checkout --replicas 2` as a real process tree: the demo's binary (which cargo builds, with
//! the test's features, before this test), its replicas and its front.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use crate::redis_harness::RedisServer;

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
    let mut child = Command::new(env!("CARGO_BIN_EXE_checkout"))
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
