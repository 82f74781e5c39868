//! The dashboard in a real browser (the harness of `browser.rs`): a key with an injected fault
//! (`fusebox-admin`'s feature `chaos`) says so on its card, a key without one does not
//! (`target/chaos-dashboard.png`).

use serde_json::json;

use crate::browser::browser;

/// The registry of the fault injection page: a key with an injected fault.
static INJECTED: std::sync::LazyLock<fusebox::Registry> =
    std::sync::LazyLock::new(|| fusebox::Registry::with_clock(fusebox::clock::FakeClock::new()));

#[tokio::test]
async fn dashboard_shows_a_key_s_injected_fault_on_its_card() {
    INJECTED.breaker("payment", fusebox::Policy::new()).unwrap();
    INJECTED
        .breaker("shipping", fusebox::Policy::new())
        .unwrap();
    let fault = fusebox::chaos::Fault::failure(|| "timeout")
        .rate(0.1)
        .seed(7);
    INJECTED.chaos().inject("payment", fault);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router: axum::Router = fusebox_admin::router(&INJECTED, fusebox_admin::AdminConfig::new());
    tokio::spawn(async move { axum::serve(listener, router).await });
    let browser = browser("chaos", 900, 560).await;
    let session = browser.session.clone();
    browser
        .run(async move {
            let url = json!({ "url": format!("http://{addr}/") });
            session.command(reqwest::Method::POST, "/url", Some(url)).await;
            let chaos = |key: &str| {
                format!(
                    "const c = document.querySelector('.card[data-key={key}] .chaos'); \
                     return c && [c.textContent, c.dataset.fault, getComputedStyle(c).display !== 'none'];"
                )
            };
            session
                .wait_for(
                    &chaos("payment"),
                    json!(["fault injection: failures on 10 % of calls", "failure", true]),
                )
                .await;
            assert_eq!(
                session.script(&chaos("shipping")).await,
                json!(["", "", false]),
                "a key without a fault shows none"
            );
            session.save_screenshot("chaos-dashboard.png").await;
        })
        .await;
}
