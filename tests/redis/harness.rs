//! A `redis-server` of the test's own: a free loopback port, persistence off, killed on drop.
//!
//! When the binary is missing the test fails with the install line; it never skips.
//! Also the error type the Redis tests' annotated functions return ([`BackendError`]).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The name libtest gives the test `name` of the module `module` (its `module_path!()`): what a
/// test passes with `--exact` to run that one test of this binary in a child process.
pub(crate) fn this_test(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_crate, path)) => format!("{path}::{name}"),
        None => name.to_owned(),
    }
}

/// The install line printed when `redis-server` is missing.
pub(crate) const INSTALL: &str = "apt-get install -y redis-server";

/// A running `redis-server`.
pub(crate) struct RedisServer {
    child: Child,
    pub port: u16,
}

/// The `redis-server` binary: `$REDIS_SERVER`, then `PATH`, then `/usr/bin`.
pub(crate) fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("REDIS_SERVER") {
        return PathBuf::from(path);
    }
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .unwrap_or_default();
    for dir in on_path
        .iter()
        .map(PathBuf::as_path)
        .chain([std::path::Path::new("/usr/bin")])
    {
        let candidate = dir.join("redis-server");
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "`redis-server` not found on PATH or in /usr/bin: the redis tests need a real Redis; install it with `{INSTALL}` (or run `cargo xtask test`, which does), or point `REDIS_SERVER` at the binary"
    );
}

impl RedisServer {
    /// Starts a server on a free loopback port and waits until it answers `PING`.
    pub(crate) fn start() -> RedisServer {
        Self::start_with(&[])
    }

    /// Starts a server on `port` (a restart on the same port).
    pub(crate) fn start_on(port: u16) -> RedisServer {
        Self::launch(port, &[]).unwrap_or_else(|| {
            panic!("`redis-server` could not listen on port {port} again (another process took it)")
        })
    }

    /// Starts a server on a free loopback port with more `redis-server` arguments
    /// (`["--requirepass", "secret"]`), and waits until it answers (`PONG`, or an error such as
    /// `NOAUTH` when it wants a password).
    ///
    /// A port found free may be taken before the server binds it (by another test's server, or
    /// a connection's local port): the server then exits, and another port is tried.
    pub(crate) fn start_with(args: &[&str]) -> RedisServer {
        for _ in 0..10 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free loopback port")
                .port();
            if let Some(server) = Self::launch(port, args) {
                return server;
            }
        }
        panic!("`redis-server` could not listen on any of ten free loopback ports");
    }

    /// The server on `port`, once it answers; `None` when it exited (the port was taken).
    fn launch(port: u16, args: &[&str]) -> Option<RedisServer> {
        let child = Command::new(binary())
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start `redis-server`: {e}; install it with `{INSTALL}`")
            });
        let mut server = RedisServer { child, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if server.child.try_wait().ok().flatten().is_some() {
                return None;
            }
            if server.answers() && server.is_ours(args.is_empty()) {
                return Some(server);
            }
            assert!(
                Instant::now() < deadline,
                "`redis-server` on port {port} never answered PING"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// True when the server answering on the port is this one's child (checked by its
    /// `process_id` when `INFO` needs no password; otherwise by the child still running).
    fn is_ours(&mut self, check_pid: bool) -> bool {
        if self.child.try_wait().ok().flatten().is_some() {
            return false;
        }
        if !check_pid {
            return true;
        }
        let pid = format!("process_id:{}", self.child.id());
        reply_on(self.port, &["INFO", "server"])
            .iter()
            .any(|line| line.trim() == pid)
    }

    /// A store in cached mode on this server, with the other settings at their defaults.
    pub(crate) async fn cached_store(&self) -> fusebox_redis::RedisStore {
        fusebox_redis::RedisStore::builder(&self.url())
            .mode(fusebox_redis::Mode::Cached)
            .connect()
            .await
            .expect("connect in cached mode")
    }

    /// The server's URL.
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// True when the server answers `PING` with `PONG`.
    pub(crate) fn pings(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        if stream.write_all(b"*1\r\n$4\r\nPING\r\n").is_err() {
            return false;
        }
        let mut buf = [0u8; 7];
        stream.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    /// True when the server answers `PING` at all: `+PONG`, or an error reply (`-NOAUTH …`).
    pub(crate) fn answers(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        if stream.write_all(b"*1\r\n$4\r\nPING\r\n").is_err() {
            return false;
        }
        let mut first = [0u8; 1];
        stream.read_exact(&mut first).is_ok() && matches!(&first, b"+" | b"-")
    }

    /// Sends one command (arguments as given) and returns the raw reply's first line.
    pub(crate) fn command(&self, args: &[&str]) -> String {
        command_on(self.port, args)
    }

    /// Sends `signal` (`-9`, `-STOP`, `-CONT`) to the server.
    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// `kill -9` and reap.
    pub(crate) fn kill(mut self) -> u16 {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.port
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The error of the Redis tests' annotated functions: the backend is down, or the breaker rejected
/// the call (`#[circuit_breaker]` without a fallback needs `From<fusebox::Error>`).
#[derive(Debug)]
pub(crate) enum BackendError {
    /// The backend failed.
    Down,
    /// The breaker rejected the call.
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for BackendError {
    fn from(e: fusebox::Error) -> Self {
        BackendError::Rejected(e)
    }
}

/// Sends one command to the server on `port` and returns the raw reply's first line.
pub(crate) fn command_on(port: u16, args: &[&str]) -> String {
    let mut stream = send_command(port, args);
    let mut reply = Vec::new();
    let mut byte = [0u8; 1];
    while stream.read_exact(&mut byte).is_ok() {
        reply.push(byte[0]);
        if reply.ends_with(b"\r\n") {
            break;
        }
    }
    String::from_utf8_lossy(&reply).trim_end().to_owned()
}

/// Sends one command (arguments as given) to the server on `port` over a new connection, whose
/// reply is then read from the returned stream (a five-second read timeout).
pub(crate) fn send_command(port: u16, args: &[&str]) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    stream.write_all(out.as_bytes()).unwrap();
    stream
}

/// Polls `done` every millisecond until it holds or `within` has passed; true when it held.
pub(crate) async fn until<F: std::future::Future<Output = bool>>(
    within: Duration,
    mut done: impl FnMut() -> F,
) -> bool {
    let deadline = Instant::now() + within;
    while !done().await {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    true
}

/// Sends one command to the server on `port` and returns its whole reply: an array's elements, a
/// bulk string's lines, or a simple reply's one line.
pub(crate) fn reply_on(port: u16, args: &[&str]) -> Vec<String> {
    let mut stream = BufReader::new(send_command(port, args));
    let read_line = |stream: &mut BufReader<TcpStream>| {
        let mut line = String::new();
        stream.read_line(&mut line).expect("a reply line");
        line.trim_end().to_owned()
    };
    let bulk = |stream: &mut BufReader<TcpStream>, head: &str| -> Option<String> {
        let len: i64 = head[1..].parse().ok()?;
        if len < 0 {
            return None;
        }
        let mut body = vec![0u8; len as usize + 2];
        stream.read_exact(&mut body).expect("a bulk string");
        body.truncate(len as usize);
        Some(String::from_utf8_lossy(&body).into_owned())
    };
    let head = read_line(&mut stream);
    match head.as_bytes().first() {
        Some(b'*') => {
            let count: i64 = head[1..].parse().unwrap_or(0);
            (0..count.max(0))
                .filter_map(|_| {
                    let head = read_line(&mut stream);
                    if head.starts_with('$') {
                        bulk(&mut stream, &head)
                    } else {
                        Some(head[1..].to_owned())
                    }
                })
                .collect()
        }
        Some(b'$') => bulk(&mut stream, &head)
            .map(|text| text.lines().map(str::to_owned).collect())
            .unwrap_or_default(),
        _ => vec![head.get(1..).unwrap_or_default().to_owned()],
    }
}
