//! `--replicas N`: N checkout processes sharing their circuits through Redis, behind a small
//! round-robin front.
//!
//! The parent process uses `REDIS_URL` or starts its own `redis-server` (loopback, free port,
//! persistence off), starts the simulated backend, spawns N copies of itself as replicas (each on
//! a free port, each calling [`Registry::share`](fusebox::Registry::share) before serving), and
//! serves the front on `PORT`: calls go to the replicas in turn, operator controls go to every
//! replica, `GET /breakers` gathers every replica's breakers and `GET /events` merges their event
//! streams, so the dashboard shows one column per replica. The replicas and the `redis-server` it
//! started are stopped when the front exits (Ctrl-C); a replica also exits when its parent dies.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::extract::{Path, Request, State as Shared};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use fusebox_redis::RedisStore;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use crate::app;

/// Set in a replica's environment: its id, sent back as `X-Replica-Id`.
pub(crate) const REPLICA_ENV: &str = "CHECKOUT_REPLICA_ID";
const REDIS_ENV: &str = "CHECKOUT_REDIS_URL";
const PREFIX_ENV: &str = "CHECKOUT_REDIS_PREFIX";
const BACKEND_ENV: &str = "CHECKOUT_BACKEND_URL";

/// Bound on each Redis call of a replica: generous, so a busy laptop does not degrade the demo to
/// local circuits (production services keep the 50 ms default or tune it to their latency).
const STORE_TIMEOUT: Duration = Duration::from_secs(1);

/// The most replicas the demo starts (ids `A` to `Z`).
const MAX_REPLICAS: u32 = 26;

fn env(name: &str) -> Result<String, String> {
    std::env::var(name)
        .map_err(|_| format!("`{name}` is not set; start replicas with `--replicas N`"))
}

/// Runs this process as replica `id`: shares [`app::REGISTRY`] through Redis, serves on a free
/// port, prints `listening http://…` on stdout and exits when its standard input closes.
pub(crate) async fn replica(id: String, config: app::Config) -> Result<(), String> {
    let url = env(REDIS_ENV)?;
    let store = RedisStore::builder(&url)
        .prefix(env(PREFIX_ENV)?)
        .timeout(STORE_TIMEOUT)
        .connect()
        .await
        .map_err(|e| format!("replica {id}: {e}"))?;
    app::REGISTRY.share(store.clone());
    let running = app::start(app::Config {
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        backend_url: Some(env(BACKEND_ENV)?),
        replica_id: Some(id),
        store: Some(store),
        ..config
    })
    .await?;
    let mut out = std::io::stdout();
    writeln!(out, "listening http://{}", running.addr).map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    // The parent holds our standard input: when it exits, so do we.
    let _ = tokio::task::spawn_blocking(|| std::io::stdin().read_to_end(&mut Vec::new())).await;
    Ok(())
}

/// What the front started: stopped (killed and reaped) on drop.
struct Processes {
    redis: Option<Child>,
    replicas: Vec<Child>,
}

impl Drop for Processes {
    fn drop(&mut self) {
        for child in self.replicas.iter_mut().chain(self.redis.as_mut()) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts `redis-server` on a free loopback port with persistence off and waits until it accepts
/// connections.
fn start_redis() -> Result<(String, Child), String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free loopback port for `redis-server`: {e}"))?
        .port();
    let mut child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| {
            format!(
                "cannot start `redis-server` ({e}); install it with `apt-get install -y redis-server`, \
                 or set `REDIS_URL` to a running Redis"
            )
        })?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "`redis-server` on port {port} did not start within 10 s"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((format!("redis://127.0.0.1:{port}/"), child))
}

/// Spawns replica `id` (this executable again) and waits for its address.
fn spawn_replica(
    id: &str,
    redis_url: &str,
    prefix: &str,
    backend_url: &str,
) -> Result<(Child, String), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let mut child = Command::new(exe)
        .env(REPLICA_ENV, id)
        .env(REDIS_ENV, redis_url)
        .env(PREFIX_ENV, prefix)
        .env(BACKEND_ENV, backend_url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start replica {id}: {e}"))?;
    // Its log lines, prefixed with its id.
    if let Some(stderr) = child.stderr.take() {
        let id = id.to_owned();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[replica {id}] {line}");
            }
        });
    }
    let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut line = String::new();
    let _ = stdout.read_line(&mut line);
    let Some(url) = line.trim().strip_prefix("listening ") else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!(
            "replica {id} exited before listening (its log is above)"
        ));
    };
    let url = url.to_owned();
    // Keep the pipe drained so the replica never blocks on a write.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    Ok((child, url))
}

/// One replica as the front sees it.
struct Replica {
    id: String,
    url: String,
}

/// The front's state.
struct Front {
    replicas: Vec<Replica>,
    next: AtomicUsize,
    http: reqwest::Client,
    backend: Arc<app::Backend>,
}

/// Runs the front of `n` replicas on `config.addr` until Ctrl-C.
pub(crate) async fn run(n: u32, config: app::Config) -> Result<(), String> {
    if n > MAX_REPLICAS {
        return Err(format!(
            "invalid `--replicas {n}`; the demo runs at most {MAX_REPLICAS} replicas"
        ));
    }
    let mut processes = Processes {
        redis: None,
        replicas: Vec::new(),
    };
    let (redis_url, started) = match std::env::var("REDIS_URL") {
        Ok(url) => (url, false),
        Err(_) => {
            let (url, child) = tokio::task::spawn_blocking(start_redis)
                .await
                .map_err(|e| e.to_string())??;
            processes.redis = Some(child);
            (url, true)
        }
    };
    // A fresh key prefix per run: a long-lived Redis keeps no circuit from the last run.
    let prefix = format!("checkout-demo-{}", std::process::id());
    let (backend, backend_addr) = app::start_backend(config.backend_addr, config.slow_for).await?;
    let backend_url = format!("http://{backend_addr}");
    let mut replicas = Vec::new();
    for id in (b'A'..).take(n as usize).map(|c| char::from(c).to_string()) {
        let (redis_url, prefix, backend_url) =
            (redis_url.clone(), prefix.clone(), backend_url.clone());
        let spawned = tokio::task::spawn_blocking(move || {
            spawn_replica(&id, &redis_url, &prefix, &backend_url).map(|(c, url)| (id, c, url))
        })
        .await
        .map_err(|e| e.to_string())?;
        let (id, child, url) = spawned?;
        processes.replicas.push(child);
        replicas.push(Replica { id, url });
    }
    let listener = TcpListener::bind(config.addr)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.addr))?;
    let at = listener.local_addr().map_err(|e| e.to_string())?;
    let http = reqwest::Client::builder()
        .build()
        .map_err(|e| e.to_string())?;
    println!(
        "redis    at {redis_url}{}",
        if started {
            "  (started here, persistence off, stopped on exit)"
        } else {
            "  (REDIS_URL)"
        }
    );
    println!("backend  on {backend_url}/hits");
    for r in &replicas {
        println!("replica {} on {}/", r.id, r.url);
    }
    println!(
        "front    on http://{at}/  (dashboard; round-robin over {n} replicas; open_for = {:?})",
        config.open_for
    );
    println!();
    println!("curl -i -X POST {at}/orders/demo -H 'X-Demo-Backend-Mode: always_fail'");
    println!("curl -s {at}/breakers");
    println!("curl -X POST {at}/breakers/checkout/reset -H 'X-Fusebox-Csrf: 1'");
    let _ = std::io::stdout().flush();
    let front = Arc::new(Front {
        replicas,
        next: AtomicUsize::new(0),
        http,
        backend,
    });
    let routes = Router::new()
        .route("/", get(dashboard))
        .route("/breakers", get(breakers))
        .route("/breakers/{key}/{action}", post(control))
        .route("/events", get(events))
        .route("/orders/demo", post(forward))
        .route("/shipping/demo", post(forward))
        .route("/metrics", get(forward))
        .with_state(front);
    tokio::select! {
        served = axum::serve(listener, routes) => served.map_err(|e| e.to_string())?,
        _ = tokio::signal::ctrl_c() => {}
    }
    drop(processes);
    Ok(())
}

/// The library's dashboard page: it shows one column per `instance` of the merged boards.
async fn dashboard() -> Html<&'static str> {
    Html(fusebox_admin::dashboard_html())
}

fn unreachable(replica: &Replica, e: reqwest::Error) -> Response {
    (
        StatusCode::BAD_GATEWAY,
        Json(json!({
            "error": "replica_unreachable",
            "replica": replica.id,
            "message": format!("replica {} at {} did not answer: {e}", replica.id, replica.url),
        })),
    )
        .into_response()
}

/// `POST /orders/demo`, `POST /shipping/demo` and `GET /metrics` go to the next replica in turn:
/// method, path, `X-Demo-*` headers and body forwarded; status, `Retry-After`, `X-Replica-Id` and
/// body returned.
async fn forward(Shared(front): Shared<Arc<Front>>, request: Request) -> Response {
    let replica =
        &front.replicas[front.next.fetch_add(1, Ordering::Relaxed) % front.replicas.len()];
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, 1 << 20).await {
        Ok(body) => body,
        Err(e) => {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                Json(json!({"error": "bad_body", "message": format!("cannot read the body: {e}; send at most 1 MiB")})),
            )
                .into_response();
        }
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut request = front
        .http
        .request(parts.method, format!("{}{path}", replica.url))
        .timeout(Duration::from_secs(30))
        .body(body);
    for (name, value) in &parts.headers {
        if name.as_str().starts_with("x-demo-") || name == header::CONTENT_TYPE {
            request = request.header(name, value);
        }
    }
    let answer = match request.send().await {
        Ok(answer) => answer,
        Err(e) => return unreachable(replica, e),
    };
    let status = answer.status();
    let mut headers = HeaderMap::new();
    for name in [header::RETRY_AFTER, header::CONTENT_TYPE] {
        if let Some(value) = answer.headers().get(&name) {
            headers.insert(name, value.clone());
        }
    }
    if let Some(value) = answer.headers().get(app::REPLICA_HEADER) {
        headers.insert(app::REPLICA_HEADER, value.clone());
    }
    match answer.bytes().await {
        Ok(body) => (status, headers, body).into_response(),
        Err(e) => unreachable(replica, e),
    }
}

/// `GET /breakers`: every replica's breakers, and the backend's hit counts.
async fn breakers(Shared(front): Shared<Arc<Front>>) -> Response {
    let mut all = Vec::new();
    for replica in &front.replicas {
        let answer = front
            .http
            .get(format!("{}/breakers", replica.url))
            .send()
            .await;
        let body: Value = match answer {
            Ok(answer) => answer.json().await.unwrap_or(Value::Null),
            Err(e) => return unreachable(replica, e),
        };
        all.push(json!({
            "replica": replica.id,
            "url": replica.url,
            "breakers": body["breakers"],
        }));
    }
    Json(json!({"replicas": all, "backend_hits": front.backend.hits()})).into_response()
}

/// `POST /breakers/{key}/{action}`: sent to every replica (each moves the shared circuit in Redis
/// and its own breaker) with the request's CSRF and `Authorization` headers, which each replica
/// checks; answers with every replica's card.
async fn control(
    Shared(front): Shared<Arc<Front>>,
    Path((key, action)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let mut cards = Vec::new();
    let mut status = StatusCode::OK;
    for replica in &front.replicas {
        let url = format!("{}/breakers/{key}/{action}", replica.url);
        let mut request = front.http.post(url);
        for name in [fusebox_admin::CSRF_HEADER, "authorization"] {
            if let Some(value) = headers.get(name) {
                request = request.header(name, value);
            }
        }
        let answer = match request.send().await {
            Ok(answer) => answer,
            Err(e) => return unreachable(replica, e),
        };
        if !answer.status().is_success() {
            status = answer.status();
        }
        let card: Value = answer.json().await.unwrap_or(Value::Null);
        cards.push(json!({"replica": replica.id, "card": card}));
    }
    (status, Json(json!({"replicas": cards}))).into_response()
}

/// `GET /events`: every replica's `board` events merged into one stream, each carrying its
/// `instance` (the replica's id) and the backend's current hit counts.
async fn events(
    Shared(front): Shared<Arc<Front>>,
) -> Sse<impl tokio_stream::Stream<Item = Result<Event, std::convert::Infallible>>> {
    let (sender, receiver) = tokio::sync::mpsc::channel::<String>(64);
    for replica in &front.replicas {
        tokio::spawn(relay(front.clone(), replica.url.clone(), sender.clone()));
    }
    let stream =
        ReceiverStream::new(receiver).map(|data| Ok(Event::default().event("board").data(data)));
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// Reads one replica's event stream and passes each board on, until either side goes away.
async fn relay(front: Arc<Front>, url: String, sender: tokio::sync::mpsc::Sender<String>) {
    let Ok(mut answer) = front.http.get(format!("{url}/events")).send().await else {
        return;
    };
    let mut buffer: Vec<u8> = Vec::new();
    loop {
        let chunk = tokio::select! {
            _ = sender.closed() => return,
            chunk = answer.chunk() => chunk,
        };
        let Ok(Some(chunk)) = chunk else { return };
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = buffer.drain(..end + 2).collect();
            for line in String::from_utf8_lossy(&block).lines() {
                let Some(data) = line.strip_prefix("data:") else {
                    continue;
                };
                let Ok(mut board) = serde_json::from_str::<Value>(data.trim_start()) else {
                    continue;
                };
                board["backend_hits"] = front.backend.hits();
                if sender.send(board.to_string()).await.is_err() {
                    return;
                }
            }
        }
    }
}
