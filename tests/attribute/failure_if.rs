//! `failure_if`: an `Ok` value that counts as a failure. A real HTTP client (reqwest) against a
//! loopback axum server answering 503: the response comes back as `Ok(response)`, the predicate
//! counts it, and the circuit opens; the call still returns the response itself, with or without
//! a fallback. `Breaker::call_classified` does the same without the attribute.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use fusebox::{Cause, Reason, State};

fake_registry!(CLOCK, REGISTRY);

/// A loopback server answering `status` to every request, and its hit counter.
fn server(status: StatusCode) -> (SocketAddr, Arc<AtomicU32>) {
    let hits = Arc::new(AtomicU32::new(0));
    let counter = hits.clone();
    let app = Router::new().route(
        "/",
        get(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            async move { status }
        }),
    );
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
    let addr = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the test server started");
    (addr, hits)
}

#[derive(Debug)]
enum FetchError {
    Http(reqwest::Error),
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for FetchError {
    fn from(error: fusebox::Error) -> Self {
        FetchError::Rejected(error)
    }
}

/// A response whose status says the server is unavailable.
fn is_unavailable(response: &reqwest::Response) -> bool {
    response.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE
}

#[fusebox::circuit_breaker(
    key = "failure-if-http",
    registry = REGISTRY,
    failure_if = is_unavailable,
    window = 3,
    failure_rate = 100,
    open_for = "30s"
)]
async fn fetch(client: &reqwest::Client, url: &str) -> Result<reqwest::Response, FetchError> {
    client.get(url).send().await.map_err(FetchError::Http)
}

#[tokio::test]
async fn a_503_returned_as_ok_opens_the_circuit_and_is_returned_as_is() {
    let (addr, hits) = server(StatusCode::SERVICE_UNAVAILABLE);
    let client = reqwest::Client::new();
    let url = format!("http://{addr}/");
    for call in 1..=3 {
        let response = fetch(&client, &url).await.expect("an `Ok` response");
        assert_eq!(response.status(), reqwest::StatusCode::SERVICE_UNAVAILABLE);
        let expected = if call < 3 { State::Closed } else { State::Open };
        let breaker = REGISTRY.get("failure-if-http").unwrap();
        assert_eq!(breaker.state(), expected, "after call {call}");
        assert_eq!(breaker.snapshot().failures, if call < 3 { call } else { 0 });
    }
    let rejected = fetch(&client, &url).await.unwrap_err();
    let FetchError::Rejected(error) = rejected else {
        panic!("rejected by the open circuit, got {rejected:?}")
    };
    assert_eq!(error.reason(), Reason::Open);
    assert_eq!(hits.load(Ordering::SeqCst), 3, "the rejection sent nothing");
}

#[fusebox::circuit_breaker(
    key = "failure-if-http-ok",
    registry = REGISTRY,
    failure_if = is_unavailable,
    window = 3,
    failure_rate = 100
)]
async fn fetch_ok(client: &reqwest::Client, url: &str) -> Result<reqwest::Response, FetchError> {
    client.get(url).send().await.map_err(FetchError::Http)
}

#[tokio::test]
async fn responses_the_predicate_rejects_are_successes() {
    let (addr, hits) = server(StatusCode::OK);
    let client = reqwest::Client::new();
    let url = format!("http://{addr}/");
    for _ in 0..5 {
        let response = fetch_ok(&client, &url).await.expect("an `Ok` response");
        assert_eq!(response.status(), reqwest::StatusCode::OK);
    }
    let snapshot = REGISTRY.get("failure-if-http-ok").unwrap().snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (3, 0));
    assert_eq!(snapshot.state, State::Closed);
    assert_eq!(hits.load(Ordering::SeqCst), 5);
    // Errors still count as `failure` says (every `Err` here): a refused connection.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gone = format!("http://{}/", closed.local_addr().unwrap());
    drop(closed);
    match fetch_ok(&client, &gone).await {
        Err(FetchError::Http(error)) => assert!(error.is_connect(), "{error}"),
        other => panic!("a connection error, got {other:?}"),
    }
    let snapshot = REGISTRY.get("failure-if-http-ok").unwrap().snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (3, 1));
}

/// What the fallback returns: never an HTTP response, so the tests can tell them apart.
#[derive(Debug, PartialEq)]
enum Page {
    Live(u16),
    Cached(&'static str),
}

fn is_unavailable_page(page: &Page) -> bool {
    matches!(page, Page::Live(503))
}

async fn cached(
    _client: &reqwest::Client,
    _url: &str,
    cause: Cause<FetchError>,
) -> Result<Page, FetchError> {
    match cause {
        Cause::Rejected(_) => Ok(Page::Cached("rejected")),
        Cause::Failed(_) => Ok(Page::Cached("failed")),
        Cause::TimedOut(_) => Ok(Page::Cached("timed out")),
    }
}

#[fusebox::circuit_breaker(
    key = "failure-if-fallback",
    registry = REGISTRY,
    failure_if = is_unavailable_page,
    fallback = cached,
    consecutive = 2
)]
async fn page(client: &reqwest::Client, url: &str) -> Result<Page, FetchError> {
    let response = client.get(url).send().await.map_err(FetchError::Http)?;
    Ok(Page::Live(response.status().as_u16()))
}

#[tokio::test]
async fn with_a_fallback_the_counted_ok_value_is_still_returned_and_rejections_fall_back() {
    let (addr, hits) = server(StatusCode::SERVICE_UNAVAILABLE);
    let client = reqwest::Client::new();
    let url = format!("http://{addr}/");
    assert_eq!(page(&client, &url).await.unwrap(), Page::Live(503));
    assert_eq!(page(&client, &url).await.unwrap(), Page::Live(503));
    let breaker = REGISTRY.get("failure-if-fallback").unwrap();
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(
        page(&client, &url).await.unwrap(),
        Page::Cached("rejected"),
        "the fallback runs for the rejection"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 2);
}

fn is_server_error(status: &u16) -> bool {
    *status >= 500
}

#[fusebox::circuit_breaker(
    key = "failure-if-sync",
    registry = REGISTRY,
    failure_if = is_server_error,
    window = 4,
    failure_rate = 50
)]
fn status(code: u16) -> Result<u16, FetchError> {
    Ok(code)
}

#[test]
fn a_sync_function_counts_its_ok_values_by_the_predicate() {
    for code in [200, 503, 200] {
        assert_eq!(status(code).unwrap(), code);
    }
    let breaker = REGISTRY.get("failure-if-sync").unwrap();
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().failures, 1);
    assert_eq!(status(500).unwrap(), 500);
    assert_eq!(breaker.state(), State::Open, "2 failures of 4 calls: 50 %");
    assert!(matches!(status(200), Err(FetchError::Rejected(_))));
}

#[tokio::test]
async fn the_manual_api_judges_the_whole_result() {
    let (addr, hits) = server(StatusCode::SERVICE_UNAVAILABLE);
    let client = reqwest::Client::new();
    let url = format!("http://{addr}/");
    let breaker = REGISTRY
        .breaker("failure-if-manual", fusebox::Policy::new().consecutive(2))
        .unwrap();
    let unavailable = |result: &Result<reqwest::Response, reqwest::Error>| {
        result.as_ref().map_or(true, is_unavailable)
    };
    for _ in 0..2 {
        let response = breaker
            .call_async_classified(client.get(&url).send(), unavailable)
            .await
            .expect("admitted")
            .expect("an `Ok` response");
        assert_eq!(response.status(), reqwest::StatusCode::SERVICE_UNAVAILABLE);
    }
    assert_eq!(breaker.state(), State::Open);
    let rejected = breaker
        .call_async_classified(client.get(&url).send(), unavailable)
        .await
        .unwrap_err();
    assert_eq!(rejected.reason(), Reason::Open);
    assert_eq!(hits.load(Ordering::SeqCst), 2);
    // An `Err` the classifier does not accept is not counted.
    let other = REGISTRY
        .breaker(
            "failure-if-manual-err",
            fusebox::Policy::new().consecutive(1),
        )
        .unwrap();
    let result = other.call_classified(|| Err::<u16, &str>("declined"), |r| matches!(r, Ok(503)));
    assert_eq!(result, Ok(Err("declined")));
    assert_eq!(other.state(), State::Closed);
    assert_eq!(other.snapshot().calls, 0);
}

#[fusebox::circuit_breaker(
    key = "failure-if-retry",
    registry = REGISTRY,
    failure_if = is_unavailable,
    retry = 3,
    window = 10,
    failure_rate = 100
)]
async fn fetch_retried(
    client: &reqwest::Client,
    url: &str,
) -> Result<reqwest::Response, FetchError> {
    client.get(url).send().await.map_err(FetchError::Http)
}

#[tokio::test]
async fn with_retry_a_counted_ok_value_is_retried_and_the_last_one_returned() {
    let (addr, hits) = server(StatusCode::SERVICE_UNAVAILABLE);
    let client = reqwest::Client::new();
    let url = format!("http://{addr}/");
    let response = fetch_retried(&client, &url)
        .await
        .expect("the last attempt's `Ok` response");
    assert_eq!(response.status(), reqwest::StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(hits.load(Ordering::SeqCst), 3, "every attempt went out");
    let snapshot = REGISTRY.get("failure-if-retry").unwrap().snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (3, 3));
    assert_eq!(snapshot.state, State::Closed, "3 calls of a window of 10");
}

/// The statuses a scripted backend answers, one per call, and the calls it got.
struct Script {
    statuses: &'static [u16],
    calls: AtomicU32,
}

impl Script {
    const fn new(statuses: &'static [u16]) -> Self {
        Script {
            statuses,
            calls: AtomicU32::new(0),
        }
    }

    fn next(&self) -> u16 {
        let call = self.calls.fetch_add(1, Ordering::SeqCst) as usize;
        self.statuses[call.min(self.statuses.len() - 1)]
    }
}

fn is_unavailable_status(status: &u16) -> bool {
    *status == 503
}

#[fusebox::circuit_breaker(
    key = "failure-if-retry-mixed",
    registry = REGISTRY,
    failure_if = is_unavailable_status,
    retry = 3,
    window = 10,
    failure_rate = 100
)]
async fn scripted(script: &Script) -> Result<u16, FetchError> {
    tokio::task::yield_now().await;
    Ok(script.next())
}

#[tokio::test]
async fn with_retry_a_good_ok_value_ends_the_attempts() {
    static SCRIPT: Script = Script::new(&[503, 200, 503]);
    assert_eq!(scripted(&SCRIPT).await.unwrap(), 200);
    assert_eq!(
        SCRIPT.calls.load(Ordering::SeqCst),
        2,
        "no attempt after the good one"
    );
    let snapshot = REGISTRY.get("failure-if-retry-mixed").unwrap().snapshot();
    assert_eq!((snapshot.calls, snapshot.failures), (2, 1));
}

async fn scripted_fallback(_script: &Script, cause: Cause<FetchError>) -> Result<u16, FetchError> {
    match cause {
        Cause::Rejected(_) => Ok(0),
        _ => Ok(1),
    }
}

#[fusebox::circuit_breaker(
    key = "failure-if-retry-open",
    registry = REGISTRY,
    failure_if = is_unavailable_status,
    fallback = scripted_fallback,
    retry = 3,
    consecutive = 2
)]
async fn scripted_open(script: &Script) -> Result<u16, FetchError> {
    Ok(script.next())
}

#[tokio::test]
async fn with_retry_a_circuit_opened_by_counted_ok_values_rejects_the_next_attempt() {
    static SCRIPT: Script = Script::new(&[503]);
    // Two counted `Ok` values open the circuit: the third attempt is rejected, as after two
    // counted errors, and the fallback gets the rejection.
    assert_eq!(scripted_open(&SCRIPT).await.unwrap(), 0);
    assert_eq!(SCRIPT.calls.load(Ordering::SeqCst), 2);
    let breaker = REGISTRY.get("failure-if-retry-open").unwrap();
    assert_eq!(breaker.state(), State::Open);
}

#[fusebox::circuit_breaker(
    key = "failure-if-timeout",
    registry = REGISTRY,
    failure_if = is_unavailable_status,
    timeout = "1s",
    consecutive = 5
)]
async fn scripted_timeout(script: &Script) -> Result<u16, FetchError> {
    Ok(script.next())
}

#[tokio::test]
async fn with_timeout_alone_a_counted_ok_value_counts_once() {
    static SCRIPT: Script = Script::new(&[503]);
    assert_eq!(scripted_timeout(&SCRIPT).await.unwrap(), 503);
    assert_eq!(SCRIPT.calls.load(Ordering::SeqCst), 1);
    let snapshot = REGISTRY.get("failure-if-timeout").unwrap().snapshot();
    assert_eq!(snapshot.failures, 1);
}
