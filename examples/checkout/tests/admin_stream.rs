//! `fusebox-admin`'s event stream under a reader that never reads: a connection holds at most
//! one board, so a stuck reader that resumes gets the board it was sent and then the latest,
//! never the boards in between. Real sockets with small kernel buffers, so what waits is the
//! server's.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::LazyLock;
use std::time::Duration;

use fusebox::Registry;
use fusebox::clock::FakeClock;
use fusebox_admin::{self as admin, AdminConfig};

static STUCK: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(FakeClock::new()));

/// The boards' keys: 150 long ones, so a board (~200 KB) dwarfs the kernel's buffers.
fn key(i: usize) -> String {
    format!("stuck-{i:03}-{}", "k".repeat(180))
}

/// Serves the router on a loopback listener whose accepted sockets send through a 4 KiB buffer.
async fn serve() -> SocketAddr {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_send_buffer_size(4096).unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(64).unwrap();
    let addr = listener.local_addr().unwrap();
    let config = AdminConfig::new().min_interval(Duration::from_millis(10));
    let app: axum::Router = admin::router(&STUCK, config);
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// A `GET /events` connection that receives through a 4 KiB buffer and reads nothing yet.
async fn stuck_reader(addr: SocketAddr) -> std::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(addr).await.unwrap().into_std().unwrap();
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut writer = &stream;
    writer
        .write_all(format!("GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .unwrap();
    stream
}

/// Reads `stream` until a board shows `key` forced open; returns how many boards it read.
fn boards_until_forced(mut stream: std::net::TcpStream, key: String) -> usize {
    let mut text = Vec::new();
    let mut buffer = vec![0; 64 * 1024];
    let wanted = format!("\"key\":\"{key}\"");
    loop {
        let n = stream.read(&mut buffer).expect("the stream answers");
        assert!(n > 0, "the stream ended");
        text.extend_from_slice(&buffer[..n]);
        let seen = String::from_utf8_lossy(&text);
        let boards: Vec<&str> = seen
            .split("event: board\ndata: ")
            .skip(1)
            .filter(|b| b.contains("\n\n"))
            .collect();
        let done = boards.last().is_some_and(|board| {
            let card = &board[board.find(&wanted).unwrap()..];
            card.find("\"state\":")
                .is_some_and(|at| card[at..].starts_with("\"state\":\"forced_open\""))
        });
        if done {
            return boards.len();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_never_reads_holds_one_board_not_every_board_since() {
    for i in 0..150 {
        STUCK.breaker(&key(i), fusebox::Policy::new()).unwrap();
    }
    let addr = serve().await;
    let stuck = stuck_reader(addr).await;
    // A reader that keeps up: it sees each change, so each is a board of its own.
    let mut follower = reqwest::get(format!("http://{addr}/events")).await.unwrap();
    let mut seen = String::new();
    for i in 0..8 {
        STUCK.get(&key(i)).unwrap().force_open();
        loop {
            let chunk = tokio::time::timeout(Duration::from_secs(10), follower.chunk())
                .await
                .expect("a board within 10 s")
                .unwrap()
                .expect("the stream stays open");
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.ends_with("\n\n") && last_board_forced(&seen) == i + 1 {
                break;
            }
        }
        seen.clear();
    }
    // The stuck reader resumes: the board it was sent at first, then the latest.
    let last = key(7);
    let boards = tokio::task::spawn_blocking(move || boards_until_forced(stuck, last))
        .await
        .unwrap();
    assert!(
        boards <= 2,
        "a stuck connection queued {} boards between its first and the latest",
        boards - 2
    );
}

/// How many keys the last whole board in `seen` shows forced open.
fn last_board_forced(seen: &str) -> usize {
    let board = seen
        .trim_end()
        .rsplit("event: board\ndata: ")
        .next()
        .unwrap_or_default();
    board.matches("\"state\":\"forced_open\"").count()
}
