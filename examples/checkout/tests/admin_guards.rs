//! `fusebox-admin`'s guards over real HTTP: requests a proxy forwarded, an unknown peer, opaque
//! and missing origins, the read hook, the bearer token, request values kept out of log
//! messages, and the page under `/ops` and `/ops/`. Requests are written by hand on a
//! `TcpStream`, so each header is exactly what the test says.

use std::net::SocketAddr;
use std::sync::{Arc, LazyLock, Mutex};

use fusebox::Registry;
use fusebox::clock::FakeClock;
use fusebox_admin::{self as admin, AdminConfig};

static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(FakeClock::new()));

/// Serves `admin::router(&REGISTRY, config)` nested at `/ops` on a free loopback port, recording
/// peer addresses when `connect_info`.
async fn serve(config: AdminConfig, connect_info: bool) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app: axum::Router = axum::Router::new().nest("/ops", admin::router(&REGISTRY, config));
    tokio::spawn(async move {
        if connect_info {
            let app = app.into_make_service_with_connect_info::<SocketAddr>();
            axum::serve(listener, app).await
        } else {
            axum::serve(listener, app).await
        }
    });
    addr
}

/// Sends `head` (the request line and headers, without the blank line) with `Connection: close`
/// and returns the status and the body (a blocking socket, off the runtime's thread).
async fn send(addr: SocketAddr, head: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let request = format!("{head}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    let answer = tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).unwrap();
        answer
    })
    .await
    .unwrap();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer[9..12].parse().expect("a status line");
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_owned())
}

/// `POST /ops/breakers/{key}/reset` with the CSRF header and `extra` header lines.
async fn reset(addr: SocketAddr, key: &str, extra: &str) -> (u16, String) {
    let head = format!(
        "POST /ops/breakers/{key}/reset HTTP/1.1\r\nHost: {addr}\r\nX-Fusebox-Csrf: 1{extra}"
    );
    send(addr, &head).await
}

#[tokio::test]
async fn allow_loopback_refuses_a_request_a_proxy_forwarded_and_says_so() {
    REGISTRY.breaker("proxied", fusebox::Policy::new()).unwrap();
    let addr = serve(AdminConfig::new().allow_loopback(), true).await;
    let (status, body) = reset(addr, "proxied", "").await;
    assert_eq!(status, 200, "a local operator: {body}");
    for header in [
        "X-Forwarded-For: 203.0.113.7",
        "Forwarded: for=203.0.113.7",
        "X-Real-IP: 203.0.113.7",
    ] {
        let (status, body) = reset(addr, "proxied", &format!("\r\n{header}")).await;
        assert_eq!(status, 403, "{header}: {body}");
        let name = header.split(':').next().unwrap().to_ascii_lowercase();
        assert!(
            body.contains(&format!("carries `{name}`, so a proxy forwarded it")),
            "{body}"
        );
        assert!(body.contains("`AdminConfig::allow_bearer`"), "{body}");
    }
}

#[tokio::test]
async fn allow_loopback_without_peer_addresses_names_the_fix() {
    REGISTRY.breaker("late", fusebox::Policy::new()).unwrap();
    let addr = serve(AdminConfig::new().allow_loopback(), false).await;
    let (status, body) = reset(addr, "late", "").await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("the peer is unknown"), "{body}");
    assert!(
        body.contains("`into_make_service_with_connect_info::<std::net::SocketAddr>()`"),
        "{body}"
    );
}

#[tokio::test]
async fn an_opaque_origin_or_a_foreign_one_without_host_is_refused() {
    REGISTRY.breaker("origins", fusebox::Policy::new()).unwrap();
    let addr = serve(AdminConfig::new().allow_loopback(), true).await;
    let (status, body) = reset(addr, "origins", "\r\nOrigin: null").await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("\"error\":\"csrf\""), "{body}");
    assert!(body.contains("`Origin: null`"), "{body}");
    // No `Host`: an absolute-form target carries the authority the origin is compared with.
    let absolute = |origin: &str| {
        format!(
            "POST http://{addr}/ops/breakers/origins/reset HTTP/1.1\r\nX-Fusebox-Csrf: 1\r\nOrigin: {origin}"
        )
    };
    let (status, body) = send(addr, &absolute("http://evil.example")).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains(&format!("another origin than `{addr}`")),
        "{body}"
    );
    let (status, body) = send(addr, &absolute(&format!("http://{addr}"))).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn allow_bearer_needs_the_token() {
    REGISTRY.breaker("bearer", fusebox::Policy::new()).unwrap();
    let addr = serve(AdminConfig::new().allow_bearer("s3cret"), true).await;
    let (status, body) = reset(addr, "bearer", "\r\nAuthorization: Bearer s3cret").await;
    assert_eq!(status, 200, "{body}");
    assert!(REGISTRY.get("bearer").is_some());
    for wrong in [
        "",
        "\r\nAuthorization: Bearer s3cre",
        "\r\nAuthorization: s3cret",
    ] {
        let (status, body) = reset(addr, "bearer", wrong).await;
        assert_eq!(status, 403, "{wrong:?}: {body}");
        assert!(body.contains("`Authorization: Bearer <token>`"), "{body}");
    }
    let addr = serve(AdminConfig::new().allow_bearer(""), true).await;
    let (status, _) = reset(addr, "bearer", "\r\nAuthorization: Bearer ").await;
    assert_eq!(status, 403, "an empty token allows nothing");
}

#[tokio::test]
async fn the_read_hook_guards_every_read_route_but_health() {
    REGISTRY.breaker("read", fusebox::Policy::new()).unwrap();
    let config = AdminConfig::new().authorize_read(|r| r.headers().contains_key("x-reader"));
    let addr = serve(config, true).await;
    for path in ["/ops", "/ops/breakers", "/ops/breakers/read", "/ops/events"] {
        let (status, body) = send(addr, &format!("GET {path} HTTP/1.1\r\nHost: {addr}")).await;
        assert_eq!(status, 403, "{path}: {body}");
        assert!(body.contains("`AdminConfig::authorize_read`"), "{body}");
        let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nX-Reader: 1");
        if path != "/ops/events" {
            assert_eq!(send(addr, &head).await.0, 200, "{path}");
        }
    }
    let (status, _) = send(addr, &format!("GET /ops/health HTTP/1.1\r\nHost: {addr}")).await;
    assert_eq!(status, 200);
    // Without a read hook every read is answered.
    let addr = serve(AdminConfig::new(), true).await;
    let (status, _) = send(addr, &format!("GET /ops/breakers HTTP/1.1\r\nHost: {addr}")).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn nested_as_a_service_the_page_is_served_with_and_without_the_trailing_slash() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = admin::router(&REGISTRY, AdminConfig::new());
    let app: axum::Router = axum::Router::new().nest_service("/ops", router);
    tokio::spawn(async move { axum::serve(listener, app).await });
    for path in ["/ops", "/ops/"] {
        let (status, body) = send(addr, &format!("GET {path} HTTP/1.1\r\nHost: {addr}")).await;
        assert_eq!(status, 200, "{path}");
        assert!(body.contains("EventSource"), "{path}: {body}");
    }
    let (status, body) = send(addr, &format!("GET /ops/breakers HTTP/1.1\r\nHost: {addr}")).await;
    assert_eq!(status, 200, "{body}");
}

/// Every line `tracing` writes in this test binary (a global subscriber: a thread-local one
/// misses events whose callsite another thread registered first).
fn log() -> &'static Mutex<Vec<u8>> {
    static LOG: LazyLock<Arc<Mutex<Vec<u8>>>> = LazyLock::new(|| {
        let log = Arc::new(Mutex::new(Vec::new()));
        let writer = Captured(log.clone());
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("no other global subscriber");
        log
    });
    &LOG
}

/// A `tracing` writer into a shared buffer.
#[derive(Clone)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_key_or_an_action_from_the_request_cannot_forge_a_log_line() {
    let log = log();
    REGISTRY
        .breaker("forge-pay", fusebox::Policy::new())
        .unwrap();
    let addr = serve(AdminConfig::new().allow_loopback(), true).await;
    let forged =
        "forge-pay%0A2026-01-01T00:00:00Z%20%20WARN%20fusebox:%20operator%20admin%20ran%20reset";
    // Refused twice (no CSRF header; then an unknown action carrying a line break), and run once.
    let head = format!("POST /ops/breakers/{forged}/force_open HTTP/1.1\r\nHost: {addr}");
    assert_eq!(send(addr, &head).await.0, 403);
    let head = format!(
        "POST /ops/breakers/forge-pay/x%0D%0AFORGED HTTP/1.1\r\nHost: {addr}\r\nX-Fusebox-Csrf: 1"
    );
    assert_eq!(send(addr, &head).await.0, 404);
    assert_eq!(reset(addr, "forge-pay", "").await.0, 200);
    let log = String::from_utf8(log.lock().unwrap().clone()).unwrap();
    // Every line is an event of its own: none starts with what the request carried.
    for line in log.lines() {
        assert!(
            !line.starts_with("2026-01-01T00:00:00Z"),
            "a forged line: {line:?}"
        );
        assert!(!line.starts_with("FORGED"), "a forged line: {line:?}");
    }
    let ours: Vec<&str> = log.lines().filter(|l| l.contains("forge-pay")).collect();
    assert_eq!(ours.len(), 3, "{log}");
    assert!(
        ours[0].contains(r#"key="forge-pay\n2026-01-01T00:00:00Z"#),
        "{log}"
    );
    assert!(ours[1].contains(r#"action="x\r\nFORGED""#), "{log}");
    assert!(ours[2].contains("event=\"operator_action\""), "{log}");
}
