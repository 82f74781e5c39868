//! `RedisStore::connect` checks what the store relies on before handing it out: a server that
//! wants a password refuses a store without it (or with a wrong one) at connect, as
//! `StoreErrorKind::Authentication`, never as a later `TimedOut`; something that is not Redis is
//! `NotRedis`, a closed port `Unreachable`; and no error shows the password it was given.

use std::error::Error as _;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::LazyLock;
use std::time::Duration;

use crate::harness::{BackendError, RedisServer};
use fusebox::{Registry, State, circuit_breaker};
use fusebox_redis::{RedisStore, StoreError, StoreErrorKind};

const PASSWORD: &str = "s3cr3t-hunter2";

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

fn protected() -> RedisServer {
    RedisServer::start_with(&["--requirepass", PASSWORD])
}

/// Connects to `url`, expecting a refusal.
fn refused(url: &str) -> StoreError {
    match block_on(RedisStore::connect(url)) {
        Ok(store) => panic!("`connect({url})` succeeded: {store:?}"),
        Err(e) => e,
    }
}

/// The error's own text and every source's, joined.
fn full_text(e: &StoreError) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(" / ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text.push_str(&format!(" / {e:?}"));
    text
}

#[test]
fn a_password_protected_server_refuses_a_store_without_its_password() {
    let server = protected();
    let e = refused(&server.url());
    assert_eq!(e.kind(), StoreErrorKind::Authentication, "{e}");
    let text = e.to_string();
    assert!(
        text.contains("password"),
        "the message says the fix: {text}"
    );
    assert!(text.starts_with(char::is_lowercase), "lowercase: {text}");
    assert!(e.source().is_some(), "the redis error is the source: {e:?}");
}

#[test]
fn a_wrong_password_is_refused_and_never_shown() {
    let server = protected();
    for url in [
        format!("redis://:{PASSWORD}-wrong@127.0.0.1:{}/", server.port),
        format!(
            "redis://default:{PASSWORD}-wrong@127.0.0.1:{}/0",
            server.port
        ),
    ] {
        let e = refused(&url);
        assert_eq!(e.kind(), StoreErrorKind::Authentication, "{e}");
        let text = full_text(&e);
        assert!(!text.contains(PASSWORD), "the password leaks: {text}");
        assert!(
            e.to_string().contains(":***@127.0.0.1"),
            "the url is shown redacted: {e}"
        );
    }
}

static REPLICA_A: LazyLock<Registry> = LazyLock::new(Registry::new);
static REPLICA_B: LazyLock<Registry> = LazyLock::new(Registry::new);

#[circuit_breaker(key = "authed", registry = REPLICA_A, window = 4, min_calls = 4, open_for = "60s")]
async fn call_on_a(fail: bool) -> Result<(), BackendError> {
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

#[circuit_breaker(key = "authed", registry = REPLICA_B, window = 4, min_calls = 4, open_for = "60s")]
async fn call_on_b(fail: bool) -> Result<(), BackendError> {
    if fail {
        Err(BackendError::Down)
    } else {
        Ok(())
    }
}

#[test]
fn the_right_password_connects_and_the_circuit_is_shared() {
    let server = protected();
    let url = format!("redis://:{PASSWORD}@127.0.0.1:{}/", server.port);
    block_on(async {
        for replica in [&REPLICA_A, &REPLICA_B] {
            let store = RedisStore::builder(&url)
                .timeout(Duration::from_secs(2))
                .connect()
                .await
                .expect("the right password connects");
            assert!(replica.share(store));
        }
        // Two failures on each replica: four of four in the shared window trip it.
        for _ in 0..2 {
            assert!(matches!(call_on_a(true).await, Err(BackendError::Down)));
            assert!(matches!(call_on_b(true).await, Err(BackendError::Down)));
        }
        let rejected = call_on_a(false).await;
        assert!(
            matches!(&rejected, Err(BackendError::Rejected(e)) if e.reason() == fusebox::Reason::Open),
            "{rejected:?}"
        );
        assert_eq!(
            REPLICA_A.get("authed").map(|b| b.state()),
            Some(State::Open)
        );
    });
}

#[test]
fn a_server_that_is_not_redis_is_not_redis() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // An HTTP server: whatever it is sent, it answers 400 and closes.
    let http = std::thread::spawn(move || {
        listener.set_nonblocking(false).unwrap();
        for stream in listener.incoming().take(4) {
            let Ok(mut stream) = stream else { break };
            let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
            let mut buf = [0u8; 512];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
        }
    });
    let e = refused(&format!("redis://127.0.0.1:{port}/"));
    assert_eq!(e.kind(), StoreErrorKind::NotRedis, "{e}");
    assert!(
        e.to_string().contains("point the url at a redis server"),
        "the message says the fix: {e}"
    );
    drop(http);
}

#[test]
fn a_server_that_refuses_scripts_refuses_the_store() {
    let server = RedisServer::start_with(&["--rename-command", "SCRIPT", ""]);
    let e = refused(&server.url());
    assert_eq!(e.kind(), StoreErrorKind::ScriptRefused, "{e}");
    assert!(
        e.to_string().contains("+@scripting"),
        "the message says the fix: {e}"
    );
}

#[test]
fn a_closed_port_is_unreachable() {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let e = refused(&format!("redis://:{PASSWORD}@127.0.0.1:{port}/"));
    assert_eq!(e.kind(), StoreErrorKind::Unreachable, "{e}");
    assert!(!full_text(&e).contains(PASSWORD), "{e:?}");
    assert!(e.to_string().contains("start it"), "{e}");
}

#[test]
fn an_invalid_url_is_refused_without_its_password() {
    let e = refused(&format!("http://:{PASSWORD}@127.0.0.1:1/"));
    assert_eq!(e.kind(), StoreErrorKind::InvalidUrl, "{e}");
    assert!(!full_text(&e).contains(PASSWORD), "{e:?}");
}
