//! The checkout demo with `--replicas 2`, as a newcomer runs it: the package's own binary (which
//! cargo builds with the test's features), two replica processes sharing their circuits through
//! a real `redis-server` (started by the test, persistence off), the round-robin front and the
//! backend, all over real HTTP on loopback.
//!
//! When `redis-server` is missing the test fails with the install line; it never skips.

use crate::redis_harness::RedisServer;
use crate::support::{Demo, start};
use reqwest::StatusCode;
use serde_json::Value;

/// One answer of the front.
struct Answer {
    status: StatusCode,
    replica: String,
    retry_after: Option<String>,
    body: Value,
}

async fn order(http: &reqwest::Client, demo: &Demo, mode: &str) -> Answer {
    let response = http
        .post(format!("{}/orders/demo", demo.front))
        .header("X-Demo-Backend-Mode", mode)
        .send()
        .await
        .expect("the front answers");
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let replica = header("x-replica-id").expect("an `X-Replica-Id` header");
    let retry_after = header("retry-after");
    Answer {
        status: response.status(),
        replica,
        retry_after,
        body: response.json().await.expect("a JSON body"),
    }
}

async fn get(http: &reqwest::Client, url: String) -> Value {
    http.get(url)
        .send()
        .await
        .expect("an answer")
        .json()
        .await
        .expect("JSON")
}

async fn pay_hits(http: &reqwest::Client, demo: &Demo) -> u64 {
    get(http, format!("{}/hits", demo.backend)).await["pay"]
        .as_u64()
        .expect("a pay count")
}

/// The state of `key` in a `{"breakers": [...]}` document.
fn state_of(breakers: &Value, key: &str) -> String {
    breakers["breakers"]
        .as_array()
        .expect("a breakers list")
        .iter()
        .find(|b| b["key"] == key)
        .unwrap_or_else(|| panic!("no `{key}` in {breakers}"))["state"]
        .as_str()
        .expect("a state")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_trip_one_circuit_and_reject_without_calling_the_backend() {
    let redis = RedisServer::start();
    let demo = start(&redis);
    let http = reqwest::Client::new();
    assert_eq!(demo.replicas.len(), 2, "two replicas announced");

    // Five counted failures, alternating between the replicas, all reach the backend.
    let mut seen = Vec::new();
    for call in 1..=5 {
        let answer = order(&http, &demo, "always_fail").await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_GATEWAY,
            "call {call}: {}",
            answer.body
        );
        assert_eq!(answer.body["error"], "backend_error");
        seen.push(answer.replica);
    }
    assert_eq!(seen, ["A", "B", "A", "B", "A"], "the front alternates");
    assert_eq!(pay_hits(&http, &demo).await, 5);

    // The sixth is rejected by the other replica, which never saw five failures itself.
    let sixth = order(&http, &demo, "always_fail").await;
    assert_eq!(
        sixth.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        sixth.body
    );
    assert_eq!(sixth.replica, "B");
    assert_eq!(sixth.body["error"], "circuit_open");
    assert_eq!(sixth.body["key"], "checkout");
    let wait: u64 = sixth.retry_after.expect("`Retry-After`").parse().unwrap();
    assert!((1..=60).contains(&wait), "Retry-After {wait}");
    assert_eq!(
        pay_hits(&http, &demo).await,
        5,
        "the rejected call reached the backend"
    );

    // Every later call, on either replica and in any mode, is rejected without reaching it.
    let mut rejected_by = Vec::new();
    for mode in ["always_fail", "ok", "always_fail", "ok"] {
        let answer = order(&http, &demo, mode).await;
        assert_eq!(
            answer.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{mode}: {}",
            answer.body
        );
        rejected_by.push(answer.replica);
    }
    assert_eq!(rejected_by, ["A", "B", "A", "B"]);
    assert_eq!(pay_hits(&http, &demo).await, 5);

    // Each replica's own dashboard JSON shows `checkout` open and `shipping` closed, the key
    // shared, and its own calls on it: three failures went through A, two through B...
    for (id, url) in &demo.replicas {
        let breakers = get(&http, format!("{url}/breakers")).await;
        assert_eq!(state_of(&breakers, "checkout"), "open", "replica {id}");
        assert_eq!(state_of(&breakers, "shipping"), "closed", "replica {id}");
        let card = breakers["breakers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["key"] == "checkout")
            .unwrap();
        let own = if id == "A" { 3 } else { 2 };
        assert_eq!(card["sharing"], "shared", "replica {id}: {card}");
        assert_eq!(
            (&card["replica_calls"], &card["replica_failures"]),
            (&own.into(), &own.into()),
            "replica {id}: {card}"
        );
        assert_eq!(
            card["shared"]["calls"], 0,
            "the open circuit's shared window starts empty: {card}"
        );
    }
    // ...and so does the front's, which gathers both.
    let all = get(&http, format!("{}/breakers", demo.front)).await;
    let replicas = all["replicas"].as_array().expect("a replicas list");
    let ids: Vec<&str> = replicas
        .iter()
        .map(|r| r["replica"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["A", "B"]);
    for r in replicas {
        assert_eq!(state_of(r, "checkout"), "open", "{r}");
    }
    assert_eq!(all["backend_hits"]["pay"], 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_controls_reach_every_replica() {
    let redis = RedisServer::start();
    let demo = start(&redis);
    let http = reqwest::Client::new();
    let control = |action: &str| {
        http.post(format!("{}/breakers/checkout/{action}", demo.front))
            .header(fusebox_admin::CSRF_HEADER, "1")
            .send()
    };

    // Forced open through the front: both replicas reject, the backend is never called.
    let forced = control("force_open").await.expect("an answer");
    assert_eq!(forced.status(), StatusCode::OK);
    let forced: Value = forced.json().await.unwrap();
    let states: Vec<&str> = forced["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["card"]["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["forced_open", "forced_open"]);
    let mut rejected_by = Vec::new();
    for _ in 0..2 {
        let answer = order(&http, &demo, "ok").await;
        assert_eq!(
            answer.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{}",
            answer.body
        );
        assert_eq!(answer.body["reason"], "forced_open");
        rejected_by.push(answer.replica);
    }
    rejected_by.sort();
    assert_eq!(rejected_by, ["A", "B"]);
    assert_eq!(pay_hits(&http, &demo).await, 0);

    // Reset through the front: both replicas serve again.
    assert_eq!(control("reset").await.unwrap().status(), StatusCode::OK);
    for _ in 0..2 {
        let answer = order(&http, &demo, "ok").await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    }
    assert_eq!(pay_hits(&http, &demo).await, 2);
    for (id, url) in &demo.replicas {
        let breakers = get(&http, format!("{url}/breakers")).await;
        assert_eq!(state_of(&breakers, "checkout"), "closed", "replica {id}");
    }

    // Tripped by failures, then reset through the front: the shared circuit closes too.
    for _ in 0..5 {
        assert_eq!(
            order(&http, &demo, "always_fail").await.status,
            StatusCode::BAD_GATEWAY
        );
    }
    let rejected = order(&http, &demo, "ok").await;
    assert_eq!(rejected.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(control("reset").await.unwrap().status(), StatusCode::OK);
    for _ in 0..2 {
        let answer = order(&http, &demo, "ok").await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    }
    assert_eq!(pay_hits(&http, &demo).await, 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_sent_to_one_replica_moves_the_shared_circuit() {
    let redis = RedisServer::start();
    let demo = start(&redis);
    let http = reqwest::Client::new();
    // One call first, so Redis holds the key (a missing key would take a replica's local state).
    assert_eq!(order(&http, &demo, "ok").await.status, StatusCode::OK);
    let (first, url) = &demo.replicas[0];
    assert_eq!(first, "A");
    let forced = http
        .post(format!("{url}/breakers/checkout/force_open"))
        .header(fusebox_admin::CSRF_HEADER, "1")
        .send()
        .await
        .expect("an answer");
    assert_eq!(forced.status(), StatusCode::OK);
    // Replica B was not told; it rejects because Redis holds the circuit forced open.
    let mut rejected_by = Vec::new();
    for _ in 0..2 {
        let answer = order(&http, &demo, "ok").await;
        assert_eq!(
            answer.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{}",
            answer.body
        );
        assert_eq!(answer.body["reason"], "forced_open");
        rejected_by.push(answer.replica);
    }
    assert_eq!(rejected_by, ["B", "A"]);
    assert_eq!(pay_hits(&http, &demo).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_stream_of_the_front_carries_both_replicas() {
    let redis = RedisServer::start();
    let demo = start(&redis);
    let http = reqwest::Client::new();
    let mut events = http
        .get(format!("{}/events", demo.front))
        .send()
        .await
        .expect("the event stream");
    let mut text = String::new();
    // Each replica sends its board on connect; read until both have arrived.
    while !(text.contains("\"instance\":\"A\"") && text.contains("\"instance\":\"B\"")) {
        let chunk = events
            .chunk()
            .await
            .expect("the stream")
            .expect("more events");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(text.starts_with("event: board\n"), "{text}");
    assert!(
        text.contains("\"backend_hits\":{\"pay\":0,\"ship\":0}"),
        "{text}"
    );
}
