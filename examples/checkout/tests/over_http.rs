//! The checkout demo over real HTTP on loopback: the scenarios of `examples/checkout/README.md`, as
//! curl would run them. The breakers read a `FakeClock` (`app::CLOCK`), so recovery is driven by
//! advancing it; each test starts its own service and backend on free ports.

use crate::app;

use std::net::SocketAddr;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;
use tokio::sync::MutexGuard;

struct Demo {
    base: String,
    backend: String,
    http: reqwest::Client,
    _serial: MutexGuard<'static, ()>,
}

/// One answer of the service.
struct Answer {
    status: StatusCode,
    retry_after: Option<String>,
    body: Value,
}

async fn demo() -> Demo {
    let (serial, running) = crate::start_app(app::Config {
        // generous, so that an `ok` call never times out on a loaded machine
        client_timeout: Duration::from_secs(2),
        slow_for: Duration::from_secs(60),
        ..app::Config::default()
    })
    .await;
    Demo {
        base: format!("http://{}", running.addr),
        backend: running.backend_url,
        http: reqwest::Client::new(),
        _serial: serial,
    }
}

impl Demo {
    async fn post(&self, path: &str, mode: &str) -> Answer {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .header("X-Demo-Backend-Mode", mode)
            .send()
            .await
            .expect("the service answers");
        let status = response.status();
        let retry_after = response
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        let body = response.json().await.expect("a JSON body");
        Answer {
            status,
            retry_after,
            body,
        }
    }

    async fn order(&self, mode: &str) -> Answer {
        self.post("/orders/demo", mode).await
    }

    async fn get(&self, url: &str) -> Value {
        self.http
            .get(url)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Calls the payment backend received, read from its own `/hits` endpoint.
    async fn pay_hits(&self) -> u64 {
        self.get(&format!("{}/hits", self.backend)).await["pay"]
            .as_u64()
            .unwrap()
    }

    /// The card of `key` in `GET /breakers`.
    async fn breaker(&self, key: &str) -> Value {
        let all = self.get(&format!("{}/breakers", self.base)).await;
        all["breakers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["key"] == key)
            .unwrap_or_else(|| panic!("`{key}` in /breakers: {all}"))
            .clone()
    }

    async fn state(&self, key: &str) -> String {
        self.breaker(key).await["state"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    async fn trip_checkout(&self) {
        for _ in 0..5 {
            assert_eq!(self.order("always_fail").await.status, 502);
        }
        assert_eq!(self.state("checkout").await, "open");
    }
}

#[tokio::test]
async fn ok_is_200() {
    let demo = demo().await;
    let answer = demo.order("ok").await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body["status"], "ok");
    assert_eq!(demo.pay_hits().await, 1);
    assert_eq!(demo.breaker("checkout").await["calls"], 1);
}

#[tokio::test]
async fn five_failures_open_the_circuit_and_the_sixth_never_reaches_the_backend() {
    let demo = demo().await;
    // `rejected` counts over the breaker's life, across tests.
    let rejected_before = demo.breaker("checkout").await["rejected"].as_u64().unwrap();
    for i in 1..=5 {
        let answer = demo.order("always_fail").await;
        assert_eq!(answer.status, 502, "call {i}: {}", answer.body);
        assert_eq!(answer.body["error"], "backend_error");
    }
    assert_eq!(demo.pay_hits().await, 5);

    let rejected = demo.order("always_fail").await;
    assert_eq!(rejected.status, 503);
    assert_eq!(rejected.retry_after.as_deref(), Some("10"));
    assert_eq!(rejected.body["error"], "circuit_open");
    assert_eq!(rejected.body["key"], "checkout");
    assert_eq!(rejected.body["retry_after_ms"], 10_000);
    assert_eq!(demo.pay_hits().await, 5, "the rejected call went out");

    let card = demo.breaker("checkout").await;
    assert_eq!(card["state"], "open");
    assert_eq!(card["rejected"].as_u64().unwrap() - rejected_before, 1);
    // The live window restarted empty; `opened` keeps the window that decided.
    assert_eq!(card["calls"], 0);
    let opened = &card["opened"];
    assert_eq!(opened["rule"], "consecutive");
    assert_eq!(
        opened["text"],
        "5 counted failures in a row (`consecutive` = 5); the window held 5 calls, 5 failed (100%)"
    );
    let function = opened["function"].as_str().unwrap();
    assert!(function.ends_with("::charge"), "{function}");
}

#[tokio::test]
async fn half_of_the_window_failing_opens_it_too() {
    let demo = demo().await;
    for i in 1..=10 {
        let mode = if i % 2 == 0 { "always_fail" } else { "ok" };
        let expected = if i % 2 == 0 { 502 } else { 200 };
        assert_eq!(demo.order(mode).await.status, expected, "call {i}");
    }
    let card = demo.breaker("checkout").await;
    assert_eq!(card["state"], "open");
    assert_eq!(card["opened"]["rule"], "failure_rate");
    assert_eq!(
        card["opened"]["text"],
        "50% of 10 calls failed (`failure_rate` = 50%, `min_calls` = 10)"
    );
    assert_eq!(demo.order("ok").await.status, 503);
}

#[test]
fn open_for_accepts_seconds_milliseconds_and_minutes() {
    assert_eq!(app::parse_duration("10s"), Some(Duration::from_secs(10)));
    assert_eq!(app::parse_duration("7"), Some(Duration::from_secs(7)));
    assert_eq!(
        app::parse_duration("500ms"),
        Some(Duration::from_millis(500))
    );
    assert_eq!(app::parse_duration("2m"), Some(Duration::from_secs(120)));
    assert_eq!(app::parse_duration("soon"), None);
    assert_eq!(app::parse_duration("10h"), None);
    assert_eq!(app::parse_duration(""), None);
    assert_eq!(app::parse_duration("99999999999999999999m"), None);
}

#[test]
fn replicas_beyond_one_say_what_is_missing() {
    let args = |a: &[&str]| app::replicas(a.iter().map(|s| s.to_string()));
    assert_eq!(args(&[]), Ok(1));
    assert_eq!(args(&["--replicas", "1"]), Ok(1));
    assert_eq!(args(&["--replicas", "2"]), Ok(2));
    assert_eq!(
        args(&["--replicas", "0"]),
        Err("invalid `--replicas 0`; use a count such as 2".to_owned())
    );
    assert_eq!(
        args(&["--replicas"]),
        Err("`--replicas` needs a count, such as `--replicas 2`".to_owned())
    );
    assert_eq!(
        args(&["--port"]),
        Err("unknown argument `--port`; the only argument is `--replicas N`".to_owned())
    );
    assert_eq!(
        app::replicas_unavailable(2),
        "`--replicas 2` shares circuits between processes through the Redis store \
         (`fusebox_redis`), which this build does not have; run \
         `cargo run -p fusebox-checkout --features redis -- --replicas 2`, or \
         `cargo run -p fusebox-checkout` for one replica"
    );
}

#[tokio::test]
async fn a_second_instance_calls_the_same_backend_and_names_itself() {
    let demo = demo().await;
    let second = app::start(app::Config {
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        backend_url: Some(demo.backend.clone()),
        replica_id: Some("b".to_owned()),
        client_timeout: Duration::from_secs(2),
        ..app::Config::default()
    })
    .await
    .expect("the second instance starts");
    assert_eq!(second.backend_url, demo.backend);

    let from_second = demo
        .http
        .post(format!("http://{}/orders/demo", second.addr))
        .header("X-Demo-Backend-Mode", "ok")
        .send()
        .await
        .unwrap();
    assert_eq!(from_second.status(), 200);
    assert_eq!(from_second.headers()["x-replica-id"], "b");
    let from_first = demo
        .http
        .post(format!("{}/orders/demo", demo.base))
        .send()
        .await
        .unwrap();
    assert_eq!(from_first.status(), 200, "no mode header means `ok`");
    assert!(from_first.headers().get("x-replica-id").is_none());
    assert_eq!(
        demo.pay_hits().await,
        2,
        "both went to the first one's backend"
    );
}

#[tokio::test]
async fn business_errors_pass_through_and_never_open_the_circuit() {
    let demo = demo().await;
    for i in 1..=20 {
        let answer = demo.order("business_error").await;
        assert_eq!(answer.status, 400, "call {i}: {}", answer.body);
        assert_eq!(answer.body["backend"]["error"], "card_declined");
    }
    assert_eq!(demo.pay_hits().await, 20);
    let card = demo.breaker("checkout").await;
    assert_eq!(card["state"], "closed");
    assert_eq!(card["failures"], 0);
    assert_eq!(demo.order("ok").await.status, 200);
}

#[tokio::test]
async fn a_tripped_checkout_leaves_shipping_closed() {
    let demo = demo().await;
    demo.trip_checkout().await;
    let shipped = demo.post("/shipping/demo", "ok").await;
    assert_eq!(shipped.status, 200, "{}", shipped.body);
    assert_eq!(shipped.body["key"], "shipping");
    assert_eq!(demo.state("shipping").await, "closed");
    assert_eq!(demo.order("ok").await.status, 503);
}

#[tokio::test]
async fn after_the_wait_an_ok_probe_closes_the_circuit() {
    let demo = demo().await;
    demo.trip_checkout().await;
    app::CLOCK.advance(Duration::from_millis(9_999));
    let early = demo.order("ok").await;
    assert_eq!(early.status, 503);
    assert_eq!(early.body["retry_after_ms"], 1);
    assert_eq!(demo.pay_hits().await, 5);

    app::CLOCK.advance(Duration::from_millis(1));
    let probe = demo.order("ok").await;
    assert_eq!(probe.status, 200, "{}", probe.body);
    assert_eq!(demo.pay_hits().await, 6);
    let card = demo.breaker("checkout").await;
    assert_eq!(card["state"], "closed");
    let path: Vec<String> = card["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            format!(
                "{}->{}",
                t["from"].as_str().unwrap(),
                t["to"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        path,
        ["closed->open", "open->half_open", "half_open->closed"]
    );
}

#[tokio::test]
async fn slow_counts_as_a_failure() {
    let demo = demo().await;
    // Five slow calls at once: each runs into the client's timeout.
    let calls: Vec<_> = (0..5)
        .map(|_| {
            let http = demo.http.clone();
            let url = format!("{}/orders/demo", demo.base);
            tokio::spawn(async move {
                let response = http
                    .post(url)
                    .header("X-Demo-Backend-Mode", "slow")
                    .send()
                    .await
                    .unwrap();
                let status = response.status();
                let body: Value = response.json().await.unwrap();
                (status, body)
            })
        })
        .collect();
    for call in calls {
        let (status, body) = call.await.unwrap();
        assert_eq!(status, 502, "{body}");
        assert_eq!(body["error"], "backend_timeout");
    }
    let card = demo.breaker("checkout").await;
    assert_eq!(card["state"], "open");
    assert_eq!(card["transitions"][0]["calls"], 5);
    assert_eq!(card["transitions"][0]["failure_rate"], 100.0);
    assert_eq!(demo.order("ok").await.status, 503);
}

#[tokio::test]
async fn operator_controls() {
    let demo = demo().await;
    let post = |path: &str| {
        demo.http
            .post(format!("{}{path}", demo.base))
            .header("x-fusebox-csrf", "1")
            .send()
    };

    let forced = post("/breakers/shipping/force_open").await.unwrap();
    assert_eq!(forced.status(), 200);
    let rejected = demo.post("/shipping/demo", "ok").await;
    assert_eq!(rejected.status, 503);
    assert_eq!(rejected.body["reason"], "forced_open");
    assert_eq!(rejected.body["retry_after_ms"], Value::Null);
    assert_eq!(rejected.retry_after, None);
    let shipping = demo.breaker("shipping").await;
    let text = shipping["opened"]["text"].as_str().unwrap();
    assert!(
        text.starts_with("forced open by loopback 127.0.0.1:"),
        "{text}"
    );
    assert_eq!(shipping["actions"][0]["action"], "force_open");
    assert_eq!(
        shipping["transitions"][0]["by"],
        shipping["actions"][0]["by"]
    );

    post("/breakers/shipping/reset").await.unwrap();
    assert_eq!(demo.state("shipping").await, "closed");
    assert_eq!(demo.post("/shipping/demo", "ok").await.status, 200);

    post("/breakers/checkout/disable").await.unwrap();
    for _ in 0..8 {
        assert_eq!(demo.order("always_fail").await.status, 502);
    }
    assert_eq!(demo.state("checkout").await, "disabled");

    post("/breakers/checkout/reset").await.unwrap();
    post("/breakers/checkout/metrics_only").await.unwrap();
    let rejected_before = demo.breaker("checkout").await["rejected"].as_u64().unwrap();
    for _ in 0..7 {
        assert_eq!(demo.order("always_fail").await.status, 502);
    }
    let card = demo.breaker("checkout").await;
    assert_eq!(card["metrics_only"], true);
    assert_eq!(card["state"], "open");
    assert_eq!(
        card["rejected"].as_u64().unwrap() - rejected_before,
        2,
        "{card}"
    );
    assert_eq!(demo.pay_hits().await, 15, "metrics-only admits every call");

    let unknown = post("/breakers/inventory/reset").await.unwrap();
    assert_eq!(unknown.status(), 404);
    let body: Value = unknown.json().await.unwrap();
    assert_eq!(
        body["message"],
        "no breaker `inventory` in this registry; `GET breakers` lists the keys"
    );
    let bad = post("/breakers/checkout/explode").await.unwrap();
    assert_eq!(bad.status(), 404);
    let body: Value = bad.json().await.unwrap();
    assert_eq!(body["error"], "unknown_action");
}

#[tokio::test]
async fn a_control_without_the_csrf_header_or_from_another_origin_is_refused() {
    let demo = demo().await;
    let bare = demo
        .http
        .post(format!("{}/breakers/checkout/force_open", demo.base))
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), 403);
    let body: Value = bare.json().await.unwrap();
    assert_eq!(body["error"], "csrf");
    let foreign = demo
        .http
        .post(format!("{}/breakers/checkout/force_open", demo.base))
        .header("x-fusebox-csrf", "1")
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    assert_eq!(demo.state("checkout").await, "closed");
}

#[tokio::test]
async fn with_a_token_a_control_needs_it() {
    let demo = demo().await;
    let guarded = app::start(app::Config {
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        backend_url: Some(demo.backend.clone()),
        admin_token: Some("s3cret".to_owned()),
        ..app::Config::default()
    })
    .await
    .expect("the second instance starts");
    let control = |token: Option<&str>| {
        let mut request = demo
            .http
            .post(format!("http://{}/breakers/shipping/disable", guarded.addr))
            .header("x-fusebox-csrf", "1");
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    let refused = control(None).await.unwrap();
    assert_eq!(refused.status(), 403);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"], "unauthorized");
    assert_eq!(control(Some("guess")).await.unwrap().status(), 403);
    assert_eq!(demo.state("shipping").await, "closed");
    let done = control(Some("s3cret")).await.unwrap();
    assert_eq!(done.status(), 200);
    let card: Value = done.json().await.unwrap();
    assert_eq!(card["state"], "disabled");
    let by = card["actions"][0]["by"].as_str().unwrap();
    assert!(by.starts_with("token holder at 127.0.0.1:"), "{by}");
}

#[tokio::test]
async fn one_breaker_by_key_and_an_unknown_key_is_a_json_404() {
    let demo = demo().await;
    let card = demo.get(&format!("{}/breakers/checkout", demo.base)).await;
    assert_eq!(card["key"], "checkout");
    assert_eq!(card["critical"], true);
    assert_eq!(card["group"], "orders");
    let missing = demo
        .http
        .get(format!("{}/breakers/inventory", demo.base))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["error"], "unknown_key");
}

#[tokio::test]
async fn health_is_down_only_while_the_critical_key_is_open() {
    let demo = demo().await;
    let health = || async {
        let answer = demo
            .http
            .get(format!("{}/health", demo.base))
            .send()
            .await
            .unwrap();
        let status = answer.status().as_u16();
        let body: Value = answer.json().await.unwrap();
        (status, body)
    };
    assert_eq!(health().await.0, 200);
    for _ in 0..5 {
        assert_eq!(demo.post("/shipping/demo", "always_fail").await.status, 502);
    }
    let (status, body) = health().await;
    assert_eq!((status, &body["status"]), (200, &"UP".into()), "{body}");
    assert_eq!(body["open"], serde_json::json!(["shipping"]));
    demo.trip_checkout().await;
    let (status, body) = health().await;
    assert_eq!((status, &body["status"]), (503, &"DOWN".into()), "{body}");
    assert_eq!(body["down"], serde_json::json!(["checkout"]));
    app::CLOCK.advance(Duration::from_secs(10));
    assert_eq!(
        health().await.0,
        200,
        "the wait is over: up, so a call can probe"
    );
}

#[tokio::test]
async fn unknown_mode_is_refused_before_the_backend() {
    let demo = demo().await;
    let answer = demo.order("sideways").await;
    assert_eq!(answer.status, 400);
    assert_eq!(answer.body["error"], "bad_demo_header");
    let message = answer.body["message"].as_str().unwrap();
    assert!(message.starts_with("unknown `X-Demo-Backend-Mode` `sideways`; use one of `ok`"));
    assert_eq!(demo.pay_hits().await, 0);
    assert_eq!(demo.breaker("checkout").await["calls"], 0);
}

#[tokio::test]
async fn flaky_fails_the_given_percentage() {
    let demo = demo().await;
    let flaky = |percent: &str| {
        demo.http
            .post(format!("{}/orders/demo", demo.base))
            .header("X-Demo-Backend-Mode", "flaky")
            .header("X-Demo-Fail-Percent", percent)
            .send()
    };
    for _ in 0..3 {
        assert_eq!(flaky("0").await.unwrap().status(), 200);
        assert_eq!(flaky("100").await.unwrap().status(), 502);
    }
    let bad = flaky("150").await.unwrap();
    assert_eq!(bad.status(), 400);
    let body: Value = bad.json().await.unwrap();
    assert_eq!(
        body["message"],
        "invalid `X-Demo-Fail-Percent` `150`; use a whole number in 0..=100"
    );
    assert_eq!(demo.pay_hits().await, 6);
}

#[tokio::test]
async fn metrics_are_prometheus_text() {
    let demo = demo().await;
    demo.order("ok").await;
    demo.order("always_fail").await;
    let text = demo
        .http
        .get(format!("{}/metrics", demo.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("# TYPE fusebox_calls_total counter"),
        "{text}"
    );
    let line = |outcome: &str| {
        text.lines()
            .find(|l| {
                l.starts_with("fusebox_calls_total")
                    && l.contains("key=\"checkout\"")
                    && l.contains(&format!("outcome=\"{outcome}\""))
            })
            .map(str::to_owned)
    };
    assert!(line("success").is_some(), "{text}");
    assert!(line("failure").is_some(), "{text}");
}

#[tokio::test]
async fn the_event_stream_pushes_a_board_on_every_change() {
    let demo = demo().await;
    let mut events = demo
        .http
        .get(format!("{}/events", demo.base))
        .send()
        .await
        .unwrap();
    assert_eq!(
        events.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let mut buffer = String::new();
    // The board sent on connect.
    let first = next_board(&mut events, &mut buffer).await;
    assert_eq!(card_of(&first, "checkout")["state"], "closed");
    assert_eq!(card_of(&first, "shipping")["state"], "closed");

    demo.trip_checkout().await;
    // Later boards follow the calls; one after the trip shows `checkout` open, `shipping` closed.
    let wait = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let board = next_board(&mut events, &mut buffer).await;
            if card_of(&board, "checkout")["state"] == "open" {
                return board;
            }
        }
    });
    let board = wait.await.expect("an event showing `checkout` open");
    assert_eq!(card_of(&board, "shipping")["state"], "closed");
    assert_eq!(card_of(&board, "checkout")["opened"]["rule"], "consecutive");
    assert!(card_of(&board, "checkout")["history"]["failure_rate"].is_array());
}

/// Reads the stream until one whole `board` event is in `buffer`, and returns its data.
async fn next_board(events: &mut reqwest::Response, buffer: &mut String) -> Value {
    loop {
        if let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            if let Some(data) = event
                .strip_prefix("event: board\n")
                .and_then(|rest| rest.strip_prefix("data: "))
            {
                return serde_json::from_str(data.trim_end()).expect("a JSON board");
            }
            continue; // a keep-alive comment
        }
        let chunk = events
            .chunk()
            .await
            .unwrap()
            .expect("the stream stays open");
        buffer.push_str(std::str::from_utf8(&chunk).unwrap());
    }
}

fn card_of<'b>(board: &'b Value, key: &str) -> &'b Value {
    board["breakers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["key"] == key)
        .unwrap_or_else(|| panic!("`{key}` in {board}"))
}
