//! `fusebox-admin`'s dashboard page under hostile names, in headless Chromium (the harness of
//! `browser.rs`): an instance name, a dashboard group and keys carrying markup and quotes are
//! shown as text, no script of theirs runs, and the page's Content-Security-Policy refuses an
//! inline handler even when markup gets in.

use std::net::SocketAddr;
use std::sync::{Arc, LazyLock};

use fusebox::Registry;
use fusebox::clock::FakeClock;
use fusebox_admin::{self as admin, AdminConfig};
use serde_json::{Value, json};

use crate::browser::{Session, browser};

static HOSTILE: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(FakeClock::new()));

/// An instance name and a dashboard group that are markup running a script.
const INSTANCE: &str = "<img src=x onerror=window.pwned=1>";
const GROUP: &str = "<img src=x onerror=window.pwned=2>";
/// An instance name with a quote, which ends a selector built from it.
const QUOTED: &str = r#"east" ]"#;
const KEYS: [&str; 2] = [r#"pay"ment"#, r#"<b onclick="x">bold</b>"#];

/// Serves the hostile registry's router, named `instance`, at the root of a free loopback port.
async fn serve(instance: &str) -> SocketAddr {
    for key in KEYS {
        let _ = HOSTILE.breaker(key, fusebox::Policy::new());
    }
    let config = AdminConfig::new().instance(instance).group(GROUP, KEYS);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router: axum::Router = admin::router(&HOSTILE, config);
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

/// Serves the router named `instance`, opens its page in a headless Chromium of its own
/// (`name`), waits until `ready` returns `expected`, then runs `check` on the page.
async fn on_page<F, Fut>(instance: &str, name: &str, ready: (&'static str, Value), check: F)
where
    F: FnOnce(Arc<Session>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let addr = serve(instance).await;
    let browser = browser(name, 1100, 760).await;
    let session = browser.session.clone();
    browser
        .run(async move {
            let url = format!("http://{addr}/");
            session
                .command(reqwest::Method::POST, "/url", Some(json!({ "url": url })))
                .await;
            session.wait_for(ready.0, ready.1).await;
            check(session).await;
        })
        .await;
}

/// The page is ready once it shows both cards.
const TWO_CARDS: &str = "return document.querySelectorAll('.card').length;";

#[tokio::test]
async fn hostile_names_are_shown_as_text_and_run_nothing() {
    on_page(INSTANCE, "hostile", (TWO_CARDS, json!(2)), |session| async move {
            let shown = session
                .script(
                    "return [document.querySelector('.instance > h2').textContent, \
                     [...document.querySelectorAll('.card')].map(c => c.querySelector('.key').textContent).sort(), \
                     document.querySelector('.card .badges .group').textContent, \
                     document.querySelectorAll('#columns img, #columns b').length];",
                )
                .await;
            let mut keys = KEYS.map(str::to_owned).to_vec();
            keys.sort();
            assert_eq!(
                shown,
                json!([format!("instance {INSTANCE}"), keys, format!("group {GROUP}"), 0])
            );
            assert_eq!(
                session.script("return window.pwned === undefined;").await,
                true,
                "a name's script ran"
            );
    })
    .await;
}

#[tokio::test]
async fn an_instance_name_with_a_quote_shows_its_cards() {
    // No selector is built from the name: both cards appear, in its column.
    let cards =
        "return [...document.querySelectorAll('.instance .card')].map(c => c.dataset.instance);";
    on_page(
        QUOTED,
        "quoted",
        (cards, json!([QUOTED, QUOTED])),
        |_| async {},
    )
    .await;
}

#[tokio::test]
async fn the_page_s_policy_refuses_an_inline_handler_that_got_in() {
    let addr = serve(INSTANCE).await;
    let page = reqwest::get(format!("http://{addr}/")).await.unwrap();
    let policy = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(policy.contains("script-src 'sha256-"), "{policy}");
    assert!(!policy.contains("unsafe-inline"), "{policy}");
    on_page(
        INSTANCE,
        "policy",
        (TWO_CARDS, json!(2)),
        |session| async move {
            // Markup that got in by any way: its inline handler must not run. The test's own
            // listener, added after it, runs after it would have.
            session
                .script(
                    "const probe = document.createElement('img'); \
                     probe.setAttribute('onerror', 'window.inline = 1'); \
                     probe.addEventListener('error', () => { window.failed = true; }); \
                     probe.src = 'x'; document.body.appendChild(probe); return null;",
                )
                .await;
            session
                .wait_for("return window.failed === true;", json!(true))
                .await;
            assert_eq!(
                session.script("return window.inline === undefined;").await,
                true,
                "an inline handler ran: the policy is missing"
            );
        },
    )
    .await;
}
