//! Fault injection switched over real HTTP (feature `chaos`): `POST /chaos/{key}/{fault}` and
//! `POST /faults/{name}/{on,off}` behind the controls' CSRF guard and authorisation hook, each
//! switch a WARN event `chaos_switched`, and the calls of a function with `chaos = true` see it.
#![cfg(feature = "chaos")]

use std::net::SocketAddr;
use std::sync::{Arc, LazyLock, Mutex};

use fusebox::Registry;
use fusebox::chaos::Fault;
use fusebox::clock::FakeClock;
use fusebox_admin::{self as admin, AdminConfig};
use tracing_subscriber::layer::SubscriberExt;

static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(FakeClock::new()));

#[derive(Debug, PartialEq)]
enum SearchError {
    Unavailable,
    Rejected(fusebox::Reason),
}

impl From<fusebox::Error> for SearchError {
    fn from(error: fusebox::Error) -> Self {
        SearchError::Rejected(error.reason())
    }
}

#[fusebox::circuit_breaker(key = "staging-search", registry = REGISTRY, failure = [Unavailable], chaos = true)]
fn search() -> Result<u32, SearchError> {
    Ok(1)
}

/// Serves `admin::router(&REGISTRY, config)` on a free loopback port.
async fn serve(config: AdminConfig) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app: axum::Router = axum::Router::new().nest("/ops", admin::router(&REGISTRY, config));
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// `POST /ops/{path}` with `headers` (lines without the final CRLF): the status and the body.
async fn post(addr: SocketAddr, path: &str, headers: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let request = format!(
        "POST /ops/{path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\nContent-Length: 0\r\n\r\n"
    );
    // A blocking socket, off the runtime's thread, where the server runs.
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

/// The messages and fields of the WARN events `f` emits on this thread.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Text(String);
        impl tracing::field::Visit for Text {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!("{}={value:?} ", field.name()));
            }
        }
        if *event.metadata().level() == tracing::Level::WARN {
            let mut text = Text(String::new());
            event.record(&mut text);
            self.0.lock().unwrap().push(text.0);
        }
    }
}

const CSRF: &str = "X-Fusebox-Csrf: 1\r\n";
const TOKEN: &str = "Authorization: Bearer staging-token\r\n";

#[tokio::test]
async fn an_operator_switches_a_rejection_on_and_off_behind_the_controls_guards() {
    let warnings = Warnings::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(warnings.clone()));
    let addr = serve(AdminConfig::new().allow_bearer("staging-token")).await;
    assert_eq!(search(), Ok(1));

    let (status, body) = post(addr, "chaos/staging-search/rejection", TOKEN).await;
    assert_eq!(status, 403, "no CSRF header: {body}");
    assert!(body.contains("\"error\":\"csrf\""), "{body}");
    let (status, body) = post(addr, "chaos/staging-search/rejection", CSRF).await;
    assert_eq!(status, 403, "no token: {body}");
    assert!(body.contains("\"error\":\"unauthorized\""), "{body}");
    let wrong = "Authorization: Bearer guess\r\n";
    let (status, _) = post(
        addr,
        "chaos/staging-search/rejection",
        &format!("{CSRF}{wrong}"),
    )
    .await;
    assert_eq!(status, 403, "a wrong token");
    assert_eq!(search(), Ok(1), "nothing was injected");
    assert!(REGISTRY.chaos().injected().is_empty());
    assert!(
        !warnings
            .0
            .lock()
            .unwrap()
            .iter()
            .any(|w| w.contains("chaos_switched"))
    );

    let (status, body) = post(
        addr,
        "chaos/staging-search/rejection",
        &format!("{CSRF}{TOKEN}"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"fault\":\"rejection\""), "{body}");
    assert_eq!(search(), Err(SearchError::Rejected(fusebox::Reason::Open)));
    {
        let warned = warnings.0.lock().unwrap();
        let switched: Vec<_> = warned
            .iter()
            .filter(|w| w.contains("chaos_switched"))
            .collect();
        assert_eq!(switched.len(), 1, "{warned:?}");
        assert!(
            switched[0].contains("key=\"staging-search\""),
            "{}",
            switched[0]
        );
        assert!(
            switched[0].contains("fault=\"rejection\""),
            "{}",
            switched[0]
        );
        assert!(switched[0].contains("on=true"), "{}", switched[0]);
    }

    let (status, body) = post(
        addr,
        "chaos/staging-search/latency?ms=abc",
        &format!("{CSRF}{TOKEN}"),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = post(
        addr,
        "chaos/staging-search/meteor",
        &format!("{CSRF}{TOKEN}"),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = post(
        addr,
        "chaos/staging-search/clear",
        &format!("{CSRF}{TOKEN}"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"cleared\":true"), "{body}");
    assert_eq!(search(), Ok(1));
    let warned = warnings.0.lock().unwrap().clone();
    let off = warned
        .iter()
        .filter(|w| w.contains("chaos_switched") && w.contains("on=false"));
    assert_eq!(off.count(), 1, "{warned:?}");
    a_fault_registered_in_code_is_switched_by_name(addr).await;
}

/// A fault that needs a typed error: registered in code, switched by name (run by the test
/// above: one test, so the WARN events' callsites are registered under its subscriber).
async fn a_fault_registered_in_code_is_switched_by_name(addr: SocketAddr) {
    REGISTRY.chaos().register(
        "search-down",
        "staging-search",
        Fault::failure(|| SearchError::Unavailable),
    );
    let (status, body) = post(addr, "faults/search-down/on", CSRF).await;
    assert_eq!(status, 403, "no token: {body}");
    let (status, body) = post(addr, "faults/search-down/on", &format!("{CSRF}{TOKEN}")).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"fault\":\"failure\""), "{body}");
    assert_eq!(search(), Err(SearchError::Unavailable));
    assert_eq!(
        REGISTRY.chaos().injected(),
        [(
            "staging-search".to_owned(),
            fusebox::chaos::FaultKind::Failure
        )]
    );
    let (status, _) = post(addr, "faults/search-down/off", &format!("{CSRF}{TOKEN}")).await;
    assert_eq!(status, 200);
    assert!(REGISTRY.chaos().injected().is_empty());
    assert_eq!(search(), Ok(1));
    let (status, body) = post(addr, "faults/nothing/on", &format!("{CSRF}{TOKEN}")).await;
    assert_eq!(status, 404, "{body}");
}
