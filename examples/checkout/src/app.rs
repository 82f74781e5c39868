//! The checkout service: an axum server whose payment and shipping calls go through fusebox
//! breakers, a simulated backend on its own port, and Prometheus metrics; the dashboard, the JSON
//! of every breaker, the operator controls and health are `fusebox-admin`'s router, merged in.
//!
//! `main.rs` runs it as `cargo run -p fusebox-checkout`; the package's tests (`tests/`) include
//! this file and start it in-process on port 0. In a test build the breakers read a
//! [`FakeClock`](fusebox::clock::FakeClock) (`CLOCK`, test builds only), so recovery is driven
//! without sleeping.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::Duration;

use axum::extract::State as Shared;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use fusebox::{Cause, Policy, Registry};
use fusebox_admin::AdminConfig;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// Key of the payment breaker (`POST /orders/demo`).
pub(crate) const CHECKOUT: &str = "checkout";
/// Key of the shipping breaker (`POST /shipping/demo`).
pub(crate) const SHIPPING: &str = "shipping";
/// Every key the service declares, in dashboard order.
pub(crate) const KEYS: [&str; 2] = [CHECKOUT, SHIPPING];

/// Header that picks the backend's behaviour; forwarded unchanged.
pub(crate) const MODE_HEADER: &str = "x-demo-backend-mode";
/// Header giving the failure percentage of the `flaky` mode (0..=100, default 50).
pub(crate) const FAIL_PERCENT_HEADER: &str = "x-demo-fail-percent";
/// Header naming the replica that answered.
pub(crate) const REPLICA_HEADER: &str = "x-replica-id";
/// The modes the backend understands.
pub(crate) const MODES: [&str; 5] = ["ok", "always_fail", "business_error", "slow", "flaky"];

/// Counted failures in a row that open a circuit.
pub(crate) const CONSECUTIVE: u32 = 5;
/// Calls in the window before the failure rate is looked at.
pub(crate) const MIN_CALLS: u32 = 10;
/// Failure rate (percent) of the window that opens a circuit.
pub(crate) const FAILURE_RATE: u8 = 50;

/// Policy of both breakers: open after 5 counted failures in a row, or when at least half of the
/// last 20 calls failed (once 10 calls are in the window); one probe after `open_for`
/// (10 s unless `CHECKOUT_OPEN_FOR` overrides it through `Registry::configure`).
pub(crate) const POLICY: Policy = Policy::new()
    .window(20)
    .min_calls(MIN_CALLS)
    .failure_rate(FAILURE_RATE)
    .consecutive(CONSECUTIVE);

/// The clock of [`REGISTRY`] in a test build: tests advance it instead of sleeping.
#[cfg(test)]
pub(crate) static CLOCK: LazyLock<fusebox::clock::FakeClock> =
    LazyLock::new(fusebox::clock::FakeClock::new);

/// The registry holding the service's breakers, which `fusebox-admin` serves.
pub(crate) static REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
    #[cfg(test)]
    let registry = Registry::with_clock(CLOCK.clone());
    #[cfg(not(test))]
    let registry = Registry::new();
    registry
});

/// The operator surface of [`REGISTRY`]: `checkout` is critical (no order without payment), both
/// keys form the group `orders`, one sample a second for two minutes of history. The controls
/// are allowed to loopback peers, or with `token` only to `Authorization: Bearer <token>`.
pub(crate) fn admin(token: Option<String>, instance: Option<String>) -> AdminConfig {
    let config = AdminConfig::new()
        .critical([CHECKOUT])
        .group("orders", KEYS)
        .history(Duration::from_secs(1), 120);
    let config = match instance {
        Some(id) => config.instance(id),
        None => config,
    };
    match token {
        None => config.allow_loopback(),
        Some(token) => config.authorize(move |request| {
            let sent = request.headers().get("authorization")?.to_str().ok()?;
            (sent.strip_prefix("Bearer ")? == token).then(|| match request.peer() {
                Some(peer) => format!("token holder at {peer}"),
                None => "token holder".to_owned(),
            })
        }),
    }
}

/// Puts every breaker back to closed with an empty window and its declared policy (tests start
/// each scenario from here; each service started has a history of its own).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn reset_all() {
    // The recorder first: a breaker registers its metrics when it is created.
    let _ = prometheus();
    for key in KEYS {
        // What a previous `start` applied (`Config::open_for`).
        let _ = REGISTRY.unconfigure(key);
        if let Some(b) = REGISTRY.get(key) {
            b.reset();
        }
    }
}

/// How the service is started.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// Address of the checkout service (port 0 picks a free one).
    pub addr: SocketAddr,
    /// Address of the simulated backend (port 0 picks a free one).
    pub backend_addr: SocketAddr,
    /// Base URL of a backend that is already running (another replica's): when set, no backend is
    /// started and `backend_addr` is unused.
    pub backend_url: Option<String>,
    /// How long an opened circuit rejects calls before one probe is let through.
    pub open_for: Duration,
    /// The HTTP client's timeout for one backend call.
    pub client_timeout: Duration,
    /// How long the backend's `slow` mode waits before answering (longer than `client_timeout`).
    pub slow_for: Duration,
    /// Sent back as `X-Replica-Id` when set, and the dashboard's instance name.
    pub replica_id: Option<String>,
    /// When set, the operator controls need `Authorization: Bearer <token>` (from any peer);
    /// otherwise they are allowed to loopback peers only.
    pub admin_token: Option<String>,
    /// The Redis store [`REGISTRY`] shares its circuits through (`--replicas N`): the operator
    /// controls `force_open`, `disable` and `reset` then move the shared circuit with
    /// [`RedisStore::force`](fusebox_redis::RedisStore::force) as well as the local breaker.
    #[cfg(feature = "redis")]
    pub store: Option<fusebox_redis::RedisStore>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            addr: SocketAddr::from(([127, 0, 0, 1], 8081)),
            backend_addr: SocketAddr::from(([127, 0, 0, 1], 8082)),
            backend_url: None,
            open_for: Duration::from_secs(10),
            client_timeout: Duration::from_secs(1),
            slow_for: Duration::from_secs(2),
            replica_id: None,
            admin_token: None,
            #[cfg(feature = "redis")]
            store: None,
        }
    }
}

/// Parses a duration such as `10s`, `500ms`, `2m` or a bare number of seconds.
pub(crate) fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().ok()?;
    match unit.trim() {
        "" | "s" => Some(Duration::from_secs(n)),
        "ms" => Some(Duration::from_millis(n)),
        "m" => n.checked_mul(60).map(Duration::from_secs),
        _ => None,
    }
}

/// The replica count of the command line: `--replicas N` (default 1).
pub(crate) fn replicas(args: impl IntoIterator<Item = String>) -> Result<u32, String> {
    let mut args = args.into_iter();
    let mut replicas = 1;
    while let Some(arg) = args.next() {
        if arg != "--replicas" {
            return Err(format!(
                "unknown argument `{arg}`; the only argument is `--replicas N`"
            ));
        }
        let Some(n) = args.next() else {
            return Err("`--replicas` needs a count, such as `--replicas 2`".to_owned());
        };
        replicas = match n.parse::<u32>() {
            Ok(n) if n >= 1 => n,
            _ => return Err(format!("invalid `--replicas {n}`; use a count such as 2")),
        };
    }
    Ok(replicas)
}

/// Why `--replicas N` with N > 1 does not run in a build without the `redis` feature.
#[cfg_attr(feature = "redis", allow(dead_code))]
pub(crate) fn replicas_unavailable(n: u32) -> String {
    format!(
        "`--replicas {n}` shares circuits between processes through the Redis store \
         (`fusebox_redis`), which this build does not have; run \
         `cargo run -p fusebox-checkout --features redis -- --replicas {n}`, or \
         `cargo run -p fusebox-checkout` for one replica"
    )
}

/// A running service.
#[derive(Debug, Clone)]
pub(crate) struct Running {
    /// Where the checkout service listens.
    pub addr: SocketAddr,
    /// Base URL of the backend it calls (`GET {backend_url}/hits` counts the calls).
    pub backend_url: String,
}

/// Starts the backend and the checkout service on the current tokio runtime.
///
/// Installs the Prometheus recorder (once per process), applies `config.open_for` to both keys as
/// an operator override and registers both breakers, so the dashboard shows them before the first
/// call.
pub(crate) async fn start(config: Config) -> Result<Running, String> {
    let _ = prometheus();
    for key in KEYS {
        if config.open_for != POLICY.settings().open_for {
            REGISTRY
                .configure(key, POLICY.open_for(config.open_for))
                .map_err(|e| e.to_string())?;
        }
        REGISTRY.breaker(key, POLICY).map_err(|e| e.to_string())?;
    }
    // The backend this process runs, if any, serves its own `GET /hits`.
    let backend_url = match config.backend_url {
        Some(url) => url,
        None => {
            let (_, addr) = start_backend(config.backend_addr, config.slow_for).await?;
            format!("http://{addr}")
        }
    };
    let http = reqwest::Client::builder()
        .timeout(config.client_timeout)
        .build()
        .map_err(|e| e.to_string())?;
    let app = Arc::new(App {
        client: BackendClient {
            http,
            base: backend_url.clone(),
        },
        replica_id: config.replica_id.clone(),
    });
    let admin = admin(config.admin_token.clone(), config.replica_id.clone());
    #[cfg(feature = "redis")]
    let admin = match config.store.clone() {
        Some(store) => admin.store(store),
        None => admin,
    };
    let listener = TcpListener::bind(config.addr)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.addr))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    // The dashboard, `/breakers`, `/events`, `/health` and the controls: the library's router.
    let routes = Router::new()
        .route("/orders/demo", post(order))
        .route("/shipping/demo", post(ship))
        .route("/metrics", get(metrics))
        .with_state(app)
        .merge(fusebox_admin::router(&REGISTRY, admin));
    let service = routes.into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, service).await });
    Ok(Running { addr, backend_url })
}

/// Starts the simulated backend on `addr` (port 0 picks a free one) and returns it with its
/// address.
pub(crate) async fn start_backend(
    addr: SocketAddr,
    slow_for: Duration,
) -> Result<(Arc<Backend>, SocketAddr), String> {
    let backend = Arc::new(Backend {
        pay_hits: AtomicU64::new(0),
        ship_hits: AtomicU64::new(0),
        slow_for,
    });
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr} (backend): {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let routes = Router::new()
        .route("/pay", post(backend_call))
        .route("/ship", post(backend_call))
        .route("/hits", get(backend_hits))
        .with_state(backend.clone());
    tokio::spawn(async move { axum::serve(listener, routes).await });
    Ok((backend, addr))
}

// ---------------------------------------------------------------------------------------------
// The simulated backend

/// The simulated payment and shipping backend: counts its hits and behaves as the mode header says.
pub(crate) struct Backend {
    pay_hits: AtomicU64,
    ship_hits: AtomicU64,
    slow_for: Duration,
}

impl Backend {
    /// The hit counts, as `GET /hits` serves them: `{"pay": …, "ship": …}`.
    pub(crate) fn hits(&self) -> Value {
        json!({
            "pay": self.pay_hits.load(Ordering::Relaxed),
            "ship": self.ship_hits.load(Ordering::Relaxed),
        })
    }
}

async fn backend_call(
    Shared(backend): Shared<Arc<Backend>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    if uri.path() == "/pay" {
        backend.pay_hits.fetch_add(1, Ordering::Relaxed);
    } else {
        backend.ship_hits.fetch_add(1, Ordering::Relaxed);
    }
    let mode = header_str(&headers, MODE_HEADER).unwrap_or("ok");
    match mode {
        "always_fail" => (
            StatusCode::BAD_GATEWAY,
            Json(json!({"error": "backend_down"})),
        )
            .into_response(),
        "business_error" => (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "card_declined", "code": 51})),
        )
            .into_response(),
        "slow" => {
            tokio::time::sleep(backend.slow_for).await;
            Json(json!({"status": "ok", "slow": true})).into_response()
        }
        "flaky" => {
            let percent = header_str(&headers, FAIL_PERCENT_HEADER)
                .and_then(|p| p.parse::<u32>().ok())
                .unwrap_or(50);
            if fastrand::u32(0..100) < percent {
                (
                    StatusCode::BAD_GATEWAY,
                    Json(json!({"error": "backend_flaked"})),
                )
                    .into_response()
            } else {
                Json(json!({"status": "ok"})).into_response()
            }
        }
        _ => Json(json!({"status": "ok"})).into_response(),
    }
}

async fn backend_hits(Shared(backend): Shared<Arc<Backend>>) -> Json<Value> {
    Json(backend.hits())
}

// ---------------------------------------------------------------------------------------------
// The calls through the breakers

/// How a backend call went wrong.
#[derive(Debug)]
pub(crate) enum PayError {
    /// No answer within the client's timeout: counted.
    Timeout,
    /// The backend could not be reached: counted.
    Connect(String),
    /// The backend answered with a 5xx status: counted.
    Upstream(u16),
    /// The backend refused the request (a 4xx, such as a declined card): a business error, not counted.
    Declined(u16, Value),
    /// The breaker rejected the call; the backend was not called.
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for PayError {
    fn from(e: fusebox::Error) -> Self {
        PayError::Rejected(e)
    }
}

/// What the caller asked the backend to do.
#[derive(Debug, Clone)]
pub(crate) struct Demo {
    mode: String,
    fail_percent: Option<String>,
}

impl Demo {
    fn from_headers(headers: &HeaderMap) -> Result<Demo, String> {
        let mode = header_str(headers, MODE_HEADER).unwrap_or("ok");
        if !MODES.contains(&mode) {
            return Err(format!(
                "unknown `X-Demo-Backend-Mode` `{mode}`; use one of {}",
                MODES.map(|m| format!("`{m}`")).join(", ")
            ));
        }
        let fail_percent = header_str(headers, FAIL_PERCENT_HEADER).map(str::to_owned);
        let out_of_range = |p: &&str| !p.parse::<u8>().is_ok_and(|n| n <= 100);
        if let Some(p) = fail_percent.as_deref().filter(out_of_range) {
            return Err(format!(
                "invalid `X-Demo-Fail-Percent` `{p}`; use a whole number in 0..=100"
            ));
        }
        Ok(Demo {
            mode: mode.to_owned(),
            fail_percent,
        })
    }
}

/// The HTTP client of the backend.
struct BackendClient {
    http: reqwest::Client,
    base: String,
}

impl BackendClient {
    async fn send(&self, route: &str, demo: &Demo) -> Result<Value, PayError> {
        let mut request = self
            .http
            .post(format!("{}/{route}", self.base))
            .header(MODE_HEADER, &demo.mode);
        if let Some(p) = &demo.fail_percent {
            request = request.header(FAIL_PERCENT_HEADER, p);
        }
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let body: Value = response.json().await.map_err(transport)?;
        match status.as_u16() {
            200..=299 => Ok(body),
            code @ 400..=499 => Err(PayError::Declined(code, body)),
            code => Err(PayError::Upstream(code)),
        }
    }
}

fn transport(e: reqwest::Error) -> PayError {
    if e.is_timeout() {
        PayError::Timeout
    } else {
        PayError::Connect(e.to_string())
    }
}

/// Charges the order: a timeout, a connection failure or a 5xx counts against `checkout`; a
/// declined card passes through and never opens the circuit.
#[fusebox::circuit_breaker(key = "checkout", registry = REGISTRY, policy = POLICY, failure = [Timeout, Connect, Upstream], fallback = unavailable)]
async fn charge(client: &BackendClient, demo: &Demo) -> Result<Value, PayError> {
    client.send("pay", demo).await
}

/// Books the shipment: the same classification, under its own key `shipping`.
#[fusebox::circuit_breaker(key = "shipping", registry = REGISTRY, policy = POLICY, failure = [Timeout, Connect, Upstream], fallback = unavailable)]
async fn book_shipping(client: &BackendClient, demo: &Demo) -> Result<Value, PayError> {
    client.send("ship", demo).await
}

/// The fallback of both calls: a rejected call becomes [`PayError::Rejected`] (answered with 503), a
/// counted failure stays what it was (answered with 502).
async fn unavailable(
    client: &BackendClient,
    demo: &Demo,
    cause: Cause<PayError>,
) -> Result<Value, PayError> {
    let _ = (client, demo);
    if let Some(rejection) = cause.rejected() {
        tracing::debug!(
            key = rejection.key(),
            "rejected without calling the backend"
        );
    }
    Err(cause.into_error())
}

// ---------------------------------------------------------------------------------------------
// The HTTP surface

struct App {
    client: BackendClient,
    replica_id: Option<String>,
}

fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

async fn order(Shared(app): Shared<Arc<App>>, headers: HeaderMap) -> Response {
    guarded(&app, CHECKOUT, &headers).await
}

async fn ship(Shared(app): Shared<Arc<App>>, headers: HeaderMap) -> Response {
    guarded(&app, SHIPPING, &headers).await
}

async fn guarded(app: &App, key: &str, headers: &HeaderMap) -> Response {
    let mut response = match Demo::from_headers(headers) {
        Err(message) => (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "bad_demo_header", "message": message})),
        )
            .into_response(),
        Ok(demo) => {
            let result = if key == CHECKOUT {
                charge(&app.client, &demo).await
            } else {
                book_shipping(&app.client, &demo).await
            };
            respond(key, result)
        }
    };
    if let Some(value) = app
        .replica_id
        .as_deref()
        .and_then(|id| HeaderValue::from_str(id).ok())
    {
        response.headers_mut().insert(REPLICA_HEADER, value);
    }
    response
}

fn respond(key: &str, result: Result<Value, PayError>) -> Response {
    let failed = |error: &str, detail: Value| {
        (
            StatusCode::BAD_GATEWAY,
            Json(json!({"error": error, "key": key, "detail": detail})),
        )
            .into_response()
    };
    match result {
        Ok(body) => Json(json!({"status": "ok", "key": key, "backend": body})).into_response(),
        Err(PayError::Timeout) => failed("backend_timeout", Value::Null),
        Err(PayError::Connect(why)) => failed("backend_unreachable", json!(why)),
        Err(PayError::Upstream(code)) => failed("backend_error", json!(code)),
        Err(PayError::Declined(code, body)) => (
            StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST),
            Json(json!({"error": "declined", "key": key, "backend": body})),
        )
            .into_response(),
        Err(PayError::Rejected(e)) => {
            let retry_after = e.retry_after();
            let mut response = (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({
                    "error": "circuit_open",
                    "key": e.key(),
                    "reason": e.reason().code(),
                    "retry_after_ms": retry_after.map(|d| d.as_millis() as u64),
                })),
            )
                .into_response();
            // Whole seconds (`Error::retry_after_secs`): a client that waits this long finds
            // the probe admitted, give or take 10 ms.
            if let Some(secs) = e.retry_after_secs()
                && let Ok(value) = HeaderValue::from_str(&secs.to_string())
            {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            response
        }
    }
}

/// The process-wide Prometheus recorder, installed on first use (`None` if another recorder was
/// installed first).
fn prometheus() -> Option<&'static PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| PrometheusBuilder::new().install_recorder().ok())
        .as_ref()
}

async fn metrics() -> Response {
    match prometheus() {
        Some(handle) => (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            handle.render(),
        )
            .into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "another `metrics` recorder is installed in this process; `/metrics` cannot read it\n",
        )
            .into_response(),
    }
}
