//! `fusebox::admin` beyond the checkout demo: the event stream's connection cap, and the Grafana
//! dashboard of `docs/grafana/fusebox.json` against the series fusebox exports.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::LazyLock;
use std::time::Duration;

use fusebox::Registry;
use fusebox::admin::{self, AdminConfig};
use fusebox::clock::FakeClock;
use serde_json::Value;

static CLOCK: LazyLock<FakeClock> = LazyLock::new(FakeClock::new);
static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(CLOCK.clone()));

/// Serves `admin::router(&REGISTRY, config)` on a free loopback port.
async fn serve(config: AdminConfig) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app: axum::Router = axum::Router::new().nest("/ops", admin::router(&REGISTRY, config));
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// Opens `GET /ops/events` and reads until the first whole event (or the whole refusal);
/// returns the response while it streams, its status code and what was read.
async fn open_events(addr: SocketAddr) -> (Option<reqwest::Response>, u16, String) {
    let mut response = reqwest::get(format!("http://{addr}/ops/events"))
        .await
        .unwrap();
    let status = response.status().as_u16();
    let mut text = String::new();
    while status == 200 && !(text.contains("data:") && text.contains("\n\n")) {
        let chunk = tokio::time::timeout(Duration::from_secs(10), response.chunk())
            .await
            .expect("an event within 10 s")
            .unwrap()
            .expect("the stream stays open");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    if status != 200 {
        return (None, status, response.text().await.unwrap());
    }
    (Some(response), status, text)
}

/// The JSON data of the first `board` event in `text`.
fn first_board(text: &str) -> Value {
    let data = text
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .expect("a data line");
    serde_json::from_str(data).expect("a JSON board")
}

#[tokio::test]
async fn connections_past_the_cap_are_refused_and_all_read_one_board() {
    REGISTRY.breaker("capped", fusebox::Policy::new()).unwrap();
    let addr = serve(AdminConfig::new().max_connections(3)).await;
    let mut open = Vec::new();
    let mut boards = BTreeSet::new();
    for _ in 0..3 {
        let (stream, status, text) = open_events(addr).await;
        assert_eq!(status, 200, "{text}");
        let board = first_board(&text);
        assert!(
            board["breakers"]
                .as_array()
                .unwrap()
                .iter()
                .any(|b| b["key"] == "capped")
        );
        boards.insert(board.to_string());
        open.push(stream);
    }
    assert_eq!(boards.len(), 1, "every connection reads the same board");
    let (_, status, text) = open_events(addr).await;
    assert_eq!(status, 503, "{text}");
    assert!(
        text.contains("\"error\":\"too_many_connections\""),
        "{text}"
    );
    assert!(text.contains("`AdminConfig::max_connections`"), "{text}");
}

#[tokio::test]
async fn the_router_nests_anywhere_and_serves_the_page() {
    let addr = serve(AdminConfig::new()).await;
    let page = reqwest::get(format!("http://{addr}/ops")).await.unwrap();
    assert_eq!(page.status(), 200);
    let text = page.text().await.unwrap();
    assert!(text.contains("new EventSource(`${base}events`)"));
}

/// Every metric name in a PromQL expression: the identifiers starting with `fusebox_`.
fn series_in(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("fusebox_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        names.push(name);
    }
    names
}

/// Every `expr` of a Grafana dashboard (panels' targets and annotations), with where it is.
fn exprs(value: &Value, at: &str, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (name, v) in map {
                if name == "expr" {
                    out.push((at.to_owned(), v.as_str().expect("a string expr").to_owned()));
                } else {
                    exprs(v, &format!("{at}.{name}"), out);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                exprs(v, &format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn the_grafana_dashboard_queries_only_series_fusebox_exports() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/grafana/fusebox.json"
    );
    let text = std::fs::read_to_string(path).expect("docs/grafana/fusebox.json");
    let dashboard: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    assert_eq!(dashboard["uid"], "fusebox");
    let exported = [
        fusebox::metrics::CALLS_TOTAL,
        fusebox::metrics::SHADOW_REJECTED_TOTAL,
        fusebox::metrics::STATE,
        fusebox::metrics::TRANSITIONS_TOTAL,
    ];
    let mut all = Vec::new();
    exprs(&dashboard, "", &mut all);
    assert!(all.len() >= 6, "{all:?}");
    let mut used = BTreeSet::new();
    for (at, expr) in &all {
        let names = series_in(expr);
        assert!(
            !names.is_empty(),
            "`{at}` queries no fusebox series: {expr}"
        );
        for name in names {
            assert!(
                exported.contains(&name.as_str()),
                "`{at}` queries `{name}`, which fusebox does not export (it exports {exported:?})"
            );
            used.insert(name);
        }
        for label in ["outcome=\"", "outcome=~\""] {
            if let Some(at_label) = expr.find(label) {
                let values = &expr[at_label + label.len()..];
                let values = &values[..values.find('"').unwrap()];
                for value in values.split('|') {
                    assert!(
                        ["success", "failure", "ignored", "rejected"].contains(&value),
                        "unknown outcome `{value}` in {expr}"
                    );
                }
            }
        }
    }
    assert_eq!(
        used.len(),
        exported.len(),
        "every exported series has a panel: {used:?}"
    );
    // The panels the dashboard promises.
    let titles: Vec<&str> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    for wanted in ["State per key", "Calls by outcome", "Transitions"] {
        assert!(titles.contains(&wanted), "{titles:?}");
    }
}

#[test]
fn health_is_up_with_no_critical_key_open() {
    let _ = &CLOCK;
    let report = admin::health(&REGISTRY).check();
    assert_eq!(report.status(), admin::Status::Up);
}
