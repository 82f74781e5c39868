//! Loopback HTTP fixtures for the tower tests: an axum server on its own runtime thread, and a
//! minimal blocking HTTP/1.1 client that shows exactly what went over the wire.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Serves `app` on `127.0.0.1:0` from a background thread; returns the bound address.
pub(crate) fn serve(app: axum::Router) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for the test server");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind a loopback port");
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the test server started")
}

/// One response as received.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    /// Header names in lowercase.
    pub headers: HashMap<String, String>,
    pub body: String,
}

/// `GET path` over a fresh connection (`Connection: close`), read to the end.
pub(crate) fn get(addr: SocketAddr, path: &str) -> Reply {
    let mut stream = TcpStream::connect(addr).expect("connect to the test server");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).expect("read the response");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a header block");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}
