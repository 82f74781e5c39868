//! The checkout dashboard (`fusebox-admin`'s page) in a real browser: headless Debian `chromium`
//! driven through WebDriver (`chromedriver`, spoken to over its HTTP protocol). Loads `/`, trips
//! `checkout` through the API, and checks that the page shows `checkout` open with the rule that
//! tripped it and its history, `shipping` closed, without a reload; then a control is refused
//! without the operator token and accepted with it. Saves a screenshot to
//! `target/checkout-dashboard.png`. A page of its own serves a registry with a group of keys in
//! panic and checks the group's panel and its ejected member (`target/groups-dashboard.png`);
//! another, a key with a shadow policy that would have opened, shown beside its closed card
//! (`target/shadows-dashboard.png`); `browser_chaos.rs`, a key with an injected fault.
//! With the `redis` feature, also runs
//! `checkout --replicas 2` (a `redis-server` of its own) and checks one column per replica, both
//! showing `checkout` open (`target/checkout-replicas-dashboard.png`).
//!
//! Needs `chromium` and `chromedriver` on `PATH` (`apt-get install -y chromium chromium-driver`);
//! without them this test fails and says so.

use crate::app;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

const INSTALL: &str = "apt-get install -y chromium chromium-driver";

/// The workspace's `target/`, where the screenshots go.
fn workspace_target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

/// The first file called `name` on `PATH`.
fn find(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The `chromedriver` process; killed when dropped.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A WebDriver session.
pub(crate) struct Session {
    http: reqwest::Client,
    url: String,
}

impl Session {
    /// Takes a screenshot of the page, checks it is a PNG, and saves it as `file` in the
    /// workspace's `target/`.
    pub(crate) async fn save_screenshot(&self, file: &str) {
        let png = self
            .command(reqwest::Method::GET, "/screenshot", None)
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().unwrap())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
        let target = workspace_target();
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join(file), &png).unwrap();
    }

    pub(crate) async fn command(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Value {
        let mut request = self.http.request(method, format!("{}{path}", self.url));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("chromedriver answers");
        let status = response.status();
        let answer: Value = response.json().await.expect("a WebDriver JSON answer");
        assert!(status.is_success(), "WebDriver `{path}` failed: {answer}");
        answer["value"].clone()
    }

    pub(crate) async fn script(&self, source: &str) -> Value {
        self.command(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({ "script": source, "args": [] })),
        )
        .await
    }

    /// Runs `source` until it returns `expected`, for at most 15 s (the page updates by itself).
    pub(crate) async fn wait_for(&self, source: &str, expected: Value) {
        let start = Instant::now();
        let mut last = Value::Null;
        while start.elapsed() < Duration::from_secs(15) {
            last = self.script(source).await;
            if last == expected {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("`{source}` returned {last}, expected {expected}");
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

const CARD_STATE: &str = "return [...document.querySelectorAll('.card')].map(c => c.dataset.key + '=' + c.querySelector('.state').textContent).join(' ');";

/// A headless chromium under `chromedriver` with one WebDriver session.
pub(crate) struct Browser {
    _driver: Driver,
    pub(crate) session: std::sync::Arc<Session>,
    profile: PathBuf,
}

impl Browser {
    /// Runs `scenario` in its own task, then closes the browser (also when the scenario failed)
    /// and passes the failure on.
    pub(crate) async fn run<F>(self, scenario: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let outcome = tokio::spawn(scenario).await;
        self.session
            .command(reqwest::Method::DELETE, "", None)
            .await;
        let _ = std::fs::remove_dir_all(&self.profile);
        if let Err(failed) = outcome {
            std::panic::resume_unwind(failed.into_panic());
        }
    }
}

/// Starts `chromedriver` and a headless `chromium` of `width`×`height` pixels.
pub(crate) async fn browser(name: &str, width: u32, height: u32) -> Browser {
    let chromium = find("chromium")
        .unwrap_or_else(|| panic!("`chromium` is not installed; install it with `{INSTALL}`"));
    let chromedriver = find("chromedriver")
        .unwrap_or_else(|| panic!("`chromedriver` is not installed; install it with `{INSTALL}`"));
    let port = free_port();
    let driver = Driver(
        Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `{}`: {e}", chromedriver.display())),
    );
    let http = reqwest::Client::new();
    let driver_url = format!("http://127.0.0.1:{port}");
    let start = Instant::now();
    loop {
        let ready = http.get(format!("{driver_url}/status")).send().await;
        if let Ok(r) = ready {
            let status: Value = r.json().await.unwrap_or_default();
            if status["value"]["ready"] == true {
                break;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "`chromedriver` did not become ready on port {port}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let profile =
        std::env::temp_dir().join(format!("checkout-chromium-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&profile);
    let created = http
        .post(format!("{driver_url}/session"))
        .json(&json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.display()),
                ],
            },
        }}}))
        .send()
        .await
        .expect("chromedriver answers");
    let created: Value = created.json().await.unwrap();
    let id = created["value"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no WebDriver session: {created}"))
        .to_owned();
    let session = Session {
        http: http.clone(),
        url: format!("{driver_url}/session/{id}"),
    };
    Browser {
        _driver: driver,
        session: std::sync::Arc::new(session),
        profile,
    }
}

#[tokio::test]
async fn dashboard_shows_checkout_open_and_shipping_closed_without_a_reload() {
    let (_app, running) = crate::start_app(app::Config {
        client_timeout: Duration::from_secs(2),
        // not the policy's 10 s: applied through `Registry::configure`, as `CHECKOUT_OPEN_FOR` is
        open_for: Duration::from_secs(30),
        admin_token: Some("s3cret".to_owned()),
        ..app::Config::default()
    })
    .await;
    let base = format!("http://{}", running.addr);
    let browser = browser("one", 1100, 760).await;
    let session = browser.session.clone();
    browser
        .run(scenario(session, reqwest::Client::new(), base))
        .await;
}

/// Loads the dashboard, trips `checkout` through the API and checks the page; saves a screenshot.
async fn scenario(session: std::sync::Arc<Session>, http: reqwest::Client, base: String) {
    session
        .command(
            reqwest::Method::POST,
            "/url",
            Some(json!({ "url": format!("{base}/") })),
        )
        .await;
    // The cards exist only once the first server-sent event arrived.
    session
        .wait_for(CARD_STATE, json!("checkout=closed shipping=closed"))
        .await;
    session
        .script("window.notReloaded = true; return null;")
        .await;

    // Trip `checkout` through the API, one order at a time, and reject one more.
    for _ in 0..5 {
        let r = http
            .post(format!("{base}/orders/demo"))
            .header("X-Demo-Backend-Mode", "always_fail")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 502);
    }
    let rejected = http
        .post(format!("{base}/orders/demo"))
        .header("X-Demo-Backend-Mode", "ok")
        .send()
        .await
        .unwrap();
    assert_eq!(rejected.status(), 503);
    let shipped = http
        .post(format!("{base}/shipping/demo"))
        .header("X-Demo-Backend-Mode", "ok")
        .send()
        .await
        .unwrap();
    assert_eq!(shipped.status(), 200);

    session
        .wait_for(CARD_STATE, json!("checkout=open shipping=closed"))
        .await;
    assert_eq!(
        session.script("return window.notReloaded === true;").await,
        true,
        "the page was reloaded"
    );
    session
        .wait_for(
            "return document.querySelector('[data-key=checkout] .rejected').textContent;",
            json!("1"),
        )
        .await;
    // The breakers read a fake clock that does not move: the last event carried the whole wait,
    // which the page counts down by itself.
    assert_eq!(
        session
            .script(
                "return document.querySelector('[data-key=checkout] .probe').dataset.retryAfterMs;"
            )
            .await,
        "30000"
    );
    let shown = session
        .script("return document.querySelector('[data-key=checkout] .probe').textContent;")
        .await;
    let shown = shown.as_str().unwrap();
    assert!(
        shown.ends_with(" s") && shown.starts_with(['2', '3']),
        "{shown}"
    );
    let why = session
        .script("return document.querySelector('[data-key=checkout] .why').textContent;")
        .await;
    let why = why.as_str().unwrap();
    assert!(why.starts_with("last opened "), "{why}");
    assert!(
        why.contains("5 counted failures in a row (`consecutive` = 5)"),
        "{why}"
    );
    history_and_controls(&session).await;

    session.save_screenshot("checkout-dashboard.png").await;
}

/// On the tripped page: `checkout`'s history and marks, then a control refused without the
/// operator token and one accepted with it.
async fn history_and_controls(session: &Session) {
    // The history: samples of the window (one a second, and one after the transition), with the
    // open samples shaded.
    session
        .wait_for(
            "return Number(document.querySelector('[data-key=checkout] .spark.failure').dataset.points) >= 2;",
            json!(true),
        )
        .await;
    session
        .wait_for(
            "return document.querySelectorAll('[data-key=checkout] .spark.failure rect').length > 0;",
            json!(true),
        )
        .await;
    let badges = session
        .script("return document.querySelector('[data-key=checkout] .badges').textContent;")
        .await;
    assert_eq!(badges, "criticalgroup orders");

    // A control without the operator token is refused, and says why.
    session
        .script("document.querySelector('[data-key=checkout] button[data-action=reset]').click(); return null;")
        .await;
    session
        .wait_for(
            "return document.querySelector('[data-key=checkout] .result').textContent.slice(0, 15);",
            json!("refused (403): "),
        )
        .await;
    assert_eq!(
        session.script(CARD_STATE).await,
        "checkout=open shipping=closed"
    );
    // With the token typed in, the same page's control is accepted.
    session
        .script(
            "const t = document.getElementById('token'); t.value = 's3cret'; \
             t.dispatchEvent(new Event('change')); \
             document.querySelector('[data-key=shipping] button[data-action=force_open]').click(); return null;",
        )
        .await;
    session
        .wait_for(CARD_STATE, json!("checkout=open shipping=forced open"))
        .await;
    session
        .wait_for(
            "return document.querySelector('[data-key=shipping] .timeline').textContent.includes('force_open by token holder at 127.0.0.1:');",
            json!(true),
        )
        .await;
}

/// The registry the group scenario's dashboard serves: its own, so the checkout's cards stay
/// as the other scenarios expect.
static GROUPS: std::sync::LazyLock<fusebox::Registry> =
    std::sync::LazyLock::new(|| fusebox::Registry::with_clock(fusebox::clock::FakeClock::new()));

#[tokio::test]
async fn dashboard_shows_a_group_in_panic_with_its_open_member() {
    // Three members of `search`: the cap is one open member. `search-1` opens and takes it;
    // `search-2`'s trip is kept closed by the cap, which puts the group in panic. `search-1` was
    // opened by its own rule, not ejected by the group's: the panel counts it open, not ejected.
    let member = fusebox::Policy::new().group("search").consecutive(1);
    for key in ["search-1", "search-2", "search-3"] {
        GROUPS.breaker(key, member).unwrap();
    }
    for key in ["search-1", "search-2"] {
        GROUPS.get(key).unwrap().try_acquire().unwrap().failure();
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router: axum::Router = fusebox_admin::router(&GROUPS, fusebox_admin::AdminConfig::new());
    tokio::spawn(async move { axum::serve(listener, router).await });
    let browser = browser("groups", 1100, 760).await;
    let session = browser.session.clone();
    browser
        .run(async move {
            session
                .command(
                    reqwest::Method::POST,
                    "/url",
                    Some(json!({ "url": format!("http://{addr}/") })),
                )
                .await;
            session
                .wait_for(
                    "return document.querySelectorAll('.group[data-group=search] tr').length;",
                    json!(3),
                )
                .await;
            let group = session
                .script(
                    "const g = document.querySelector('.group[data-group=search]'); \
                     return [g.dataset.panic, g.querySelector('.panic').hidden, \
                     g.querySelector('.counts').textContent, \
                     [...g.querySelectorAll('tr')].map(r => r.dataset.key + '=' + r.dataset.ejected).join(' ')];",
                )
                .await;
            assert_eq!(
                group,
                json!([
                    "true",
                    false,
                    "3 members · 0 ejected · 1 open of at most 1 (10%) · 0 ejections by the group's rules · 1 trip kept closed by the cap",
                    "search-1=false search-2=false search-3=false"
                ])
            );
            let badges = session
                .script("return document.querySelector('.card[data-key=\"search-1\"] .badges').textContent;")
                .await;
            assert_eq!(badges, "member of search");
            session.save_screenshot("groups-dashboard.png").await;
        })
        .await;
}

/// The registry of the shadow page: a key whose shadow policy `tight` would have opened.
static SHADOWED: std::sync::LazyLock<fusebox::Registry> =
    std::sync::LazyLock::new(|| fusebox::Registry::with_clock(fusebox::clock::FakeClock::new()));

#[tokio::test]
async fn dashboard_shows_a_shadow_policy_beside_the_real_card() {
    // In force: 50 % of 100 calls; `tight`: 30 % of 10. Four failures in ten calls open `tight`
    // only; the next three calls run and `tight` counts them as calls it would have rejected.
    let policy = fusebox::Policy::new()
        .window(100)
        .failure_rate(50)
        .shadow("tight: window = 10, failure_rate = 30, open_for = 30s");
    let breaker = SHADOWED.breaker("payment", policy).unwrap();
    for call in 0..13 {
        let permit = breaker.try_acquire().unwrap();
        if call < 4 {
            permit.failure()
        } else {
            permit.success()
        }
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router: axum::Router = fusebox_admin::router(&SHADOWED, fusebox_admin::AdminConfig::new());
    tokio::spawn(async move { axum::serve(listener, router).await });
    let browser = browser("shadows", 900, 560).await;
    let session = browser.session.clone();
    browser
        .run(async move {
            let url = json!({ "url": format!("http://{addr}/") });
            session.command(reqwest::Method::POST, "/url", Some(url)).await;
            let card = "document.querySelector('.card[data-key=payment]')";
            session
                .wait_for(&format!("return {card}.querySelectorAll('.shadow').length;"), json!(1))
                .await;
            let shown = session
                .script(&format!(
                    "const c = {card}; const w = c.querySelector('.shadow'); \
                     return [c.dataset.state, w.dataset.shadow, w.dataset.state, w.textContent];"
                ))
                .await;
            assert_eq!(
                shown,
                json!([
                    "closed",
                    "tight",
                    "open",
                    "shadow tight would be open · opened 1× · open 0.0 s · would have rejected 3, let through 10 · 0% of 0"
                ])
            );
            session.save_screenshot("shadows-dashboard.png").await;
        })
        .await;
}

/// Every card as `replica/key=state`, in page order.
#[cfg(feature = "redis")]
const REPLICA_CARD_STATE: &str = "return [...document.querySelectorAll('.card')].map(c => c.dataset.instance + '/' + c.dataset.key + '=' + c.querySelector('.state').textContent).join(' ');";

#[cfg(feature = "redis")]
#[tokio::test]
async fn replicas_dashboard_shows_both_replicas_open_without_a_reload() {
    let redis = crate::redis_harness::RedisServer::start();
    let demo = crate::support::start(&redis);
    let front = demo.front.clone();
    let browser = browser("replicas", 1100, 900).await;
    let session = browser.session.clone();
    browser
        .run(async move {
            session
                .command(
                    reqwest::Method::POST,
                    "/url",
                    Some(json!({ "url": format!("{front}/") })),
                )
                .await;
            session
                .wait_for(
                    REPLICA_CARD_STATE,
                    json!("A/checkout=closed A/shipping=closed B/checkout=closed B/shipping=closed"),
                )
                .await;
            session
                .script("window.notReloaded = true; return null;")
                .await;
            let headings = session
                .script("return [...document.querySelectorAll('.instance > h2')].map(h => h.textContent).join(', ');")
                .await;
            assert_eq!(headings, "instance A, instance B");

            // Five failures alternate between the replicas; the sixth call is rejected.
            let http = reqwest::Client::new();
            for expected in [502, 502, 502, 502, 502, 503] {
                let r = http
                    .post(format!("{front}/orders/demo"))
                    .header("X-Demo-Backend-Mode", "always_fail")
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), expected);
            }
            session
                .wait_for(
                    REPLICA_CARD_STATE,
                    json!("A/checkout=open A/shipping=closed B/checkout=open B/shipping=closed"),
                )
                .await;
            assert_eq!(
                session.script("return window.notReloaded === true;").await,
                true,
                "the page was reloaded"
            );
            session.save_screenshot("checkout-replicas-dashboard.png").await;
        })
        .await;
    drop(demo);
}

/// The registry of the quorum page: one replica of a shared key with `quorum = 2`.
#[cfg(feature = "redis")]
static ALONE: std::sync::LazyLock<fusebox::Registry> =
    std::sync::LazyLock::new(fusebox::Registry::new);

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_says_open_here_only_for_a_replica_open_alone() {
    // One replica's ten failures reach the rules; a quorum of two replicas is not met, so the
    // shared circuit stays closed and this replica opens alone.
    let redis = crate::redis_harness::RedisServer::start();
    let store = fusebox_redis::RedisStore::connect(&redis.url())
        .await
        .unwrap();
    assert!(ALONE.share(store));
    let policy = fusebox::Policy::new().window(10).quorum(2);
    let breaker = ALONE.breaker("payment", policy).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router: axum::Router = fusebox_admin::router(&ALONE, fusebox_admin::AdminConfig::new());
    tokio::spawn(async move { axum::serve(listener, router).await });
    for _ in 0..10 {
        breaker.try_acquire().unwrap().failure();
    }
    assert!(
        breaker.snapshot().open_here_only(),
        "{:?}",
        breaker.snapshot()
    );
    let browser = browser("quorum", 900, 560).await;
    let session = browser.session.clone();
    browser
        .run(async move {
            let url = json!({ "url": format!("http://{addr}/") });
            session
                .command(reqwest::Method::POST, "/url", Some(url))
                .await;
            let card = "document.querySelector('.card[data-key=payment]')";
            session
                .wait_for(
                    &format!("return {card}.querySelector('.state').textContent;"),
                    json!("open here only"),
                )
                .await;
            let why = session
                .script(&format!("return {card}.querySelector('.why').textContent;"))
                .await;
            assert!(
                why.as_str()
                    .unwrap()
                    .contains("open here only: this replica's own calls"),
                "{why}"
            );
            session.save_screenshot("quorum-dashboard.png").await;
        })
        .await;
    drop(redis);
}
