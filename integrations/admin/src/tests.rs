//! Unit tests of the admin surface's pieces: the history ring, the opening sentence, health.

use std::collections::BTreeSet;
use std::sync::LazyLock;
use std::time::Duration;

use super::history::{Entry, History, opened_text};
use super::*;
use fusebox::Policy;
use fusebox::State;
use fusebox::Trigger;
use fusebox::clock::FakeClock;

static CLOCK: LazyLock<FakeClock> = LazyLock::new(FakeClock::new);
static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(CLOCK.clone()));

fn entry(trigger: Trigger, calls: u32, failure_rate: f64) -> Entry {
    Entry {
        at_ms: 0,
        from: State::Closed,
        to: State::Open,
        trigger,
        failure_rate,
        slow_rate: 0.0,
        calls,
        function: "app::charge".to_owned(),
        by: None,
    }
}

#[test]
fn the_opening_sentence_names_the_rule_and_the_window_that_decided() {
    let policy = Policy::new().consecutive(5);
    let text = opened_text(&entry(Trigger::Consecutive, 6, 83.3), Some(5), &policy);
    assert_eq!(
        text,
        "5 counted failures in a row (`consecutive` = 5); the window held 6 calls, 5 failed (83%)"
    );
    let policy = Policy::new().failure_rate(50).min_calls(10);
    let text = opened_text(&entry(Trigger::FailureRate, 10, 50.0), None, &policy);
    assert_eq!(
        text,
        "50% of 10 calls failed (`failure_rate` = 50%, `min_calls` = 10)"
    );
    let mut forced = entry(Trigger::Operator, 0, 0.0);
    forced.by = Some("loopback 127.0.0.1:5".to_owned());
    assert_eq!(
        opened_text(&forced, None, &policy),
        "forced open by loopback 127.0.0.1:5"
    );
}

#[test]
fn the_history_ring_is_bounded_in_samples_keys_and_entries() {
    let a = REGISTRY.breaker("ring-a", Policy::new()).unwrap();
    let b = REGISTRY.breaker("ring-b", Policy::new()).unwrap();
    let mut history = History::new(1, 3, 2);
    let snapshots = [a.snapshot(), b.snapshot()];
    let shown: Vec<&fusebox::Snapshot> = snapshots.iter().collect();
    for at in 0..5 {
        history.sample(&shown, at * 1000);
    }
    assert_eq!(history.keys.len(), 1, "one key tracked at most");
    let ring = &history.keys["ring-a"];
    let times: Vec<u64> = ring.samples.iter().map(|s| s.at_ms).collect();
    assert_eq!(times, [2000, 3000, 4000]);
    for _ in 0..5 {
        history.transition("ring-a", entry(Trigger::Consecutive, 5, 100.0));
    }
    history.transition("ring-b", entry(Trigger::Consecutive, 5, 100.0));
    assert_eq!(history.keys["ring-a"].transitions.len(), 2);
    // A trip adds the deciding window as a sample, the last before the circuit opened.
    let last = history.keys["ring-a"].samples.back().copied().unwrap();
    assert_eq!((last.state, last.failure_rate), (State::Closed, 100.0));
    assert_eq!(history.keys["ring-a"].samples.len(), 3);
    assert!(history.keys["ring-a"].opened.is_some());
    assert!(!history.keys.contains_key("ring-b"));
}

#[test]
fn rejected_calls_per_second_come_from_the_difference_of_two_samples() {
    // Open for an hour: another test advances the shared clock by 10 s meanwhile.
    let policy = Policy::new()
        .window(1)
        .min_calls(1)
        .open_for(Duration::from_secs(3600));
    let breaker = REGISTRY.breaker("ring-rejected", policy).unwrap();
    let mut history = History::new(10, 10, 10);
    history.sample(&[&breaker.snapshot()], 1_000);
    breaker.try_acquire().unwrap().failure();
    for _ in 0..4 {
        assert!(breaker.try_acquire().is_err());
    }
    history.sample(&[&breaker.snapshot()], 3_000);
    let samples = &history.keys["ring-rejected"].samples;
    assert_eq!(samples[1].rejected_per_s, 2.0);
    assert_eq!(samples[1].state, State::Open);
    assert_eq!(
        samples[1].failure_rate, 0.0,
        "an open circuit's window is empty"
    );
}

#[test]
fn health_follows_critical_keys_only() {
    let critical = REGISTRY
        .breaker("health-critical", Policy::new().window(1).min_calls(1))
        .unwrap();
    let other = REGISTRY
        .breaker("health-other", Policy::new().window(1).min_calls(1))
        .unwrap();
    let keys: BTreeSet<String> = ["health-critical".to_owned()].into();
    let check = || health::report(&REGISTRY.snapshot(), &keys);
    assert_eq!(check().status(), Status::Up);

    other.try_acquire().unwrap().failure();
    assert_eq!(other.state(), State::Open);
    let report = check();
    assert_eq!(report.status(), Status::Up, "{:?}", report.json());
    assert!(
        report.json()["open"]
            .as_array()
            .unwrap()
            .contains(&"health-other".into())
    );

    critical.try_acquire().unwrap().failure();
    let report = check();
    assert_eq!(report.status(), Status::Down);
    assert_eq!(report.down(), ["health-critical"]);
    assert_eq!(report.json()["status"], "DOWN");

    // The wait is over: up again, so traffic returns and a call can probe.
    CLOCK.advance(Duration::from_secs(10));
    assert_eq!(check().status(), Status::Up);
    critical.force_open();
    assert_eq!(check().status(), Status::Down);
    critical.reset();
    other.reset();
    assert_eq!(check().status(), Status::Up);
}

#[test]
fn actions_parse_from_their_route_names_only() {
    for action in Action::ALL {
        assert_eq!(Action::parse(action.as_str()), Some(action));
    }
    assert_eq!(Action::parse("explode"), None);
    assert_eq!(Action::parse("FORCE_OPEN"), None);
}

#[test]
fn settings_below_their_bounds_are_raised() {
    let config = AdminConfig::new()
        .max_connections(0)
        .history(Duration::ZERO, 0)
        .transitions(5_000);
    assert_eq!(config.max_connections, 1);
    assert_eq!(config.sample_every, Duration::from_millis(10));
    assert_eq!(config.samples, 1);
    assert_eq!(config.transitions, 1_000);
}

#[test]
fn a_card_shows_the_bulkhead_limit_fixed_or_adaptive() {
    let config = AdminConfig::default();
    let limit = |policy: Policy, key: &str| {
        let breaker = REGISTRY.breaker(key, policy).unwrap();
        let card = super::board::card(&breaker.snapshot(), None, &config, &REGISTRY);
        (card["in_flight"].clone(), card["concurrency_limit"].clone())
    };
    let adaptive = Policy::new().adaptive_concurrency(2, 200);
    assert_eq!(limit(adaptive, "card-adaptive"), (0.into(), 20.into()));
    assert_eq!(
        limit(Policy::new().max_concurrent(8), "card-fixed"),
        (0.into(), 8.into())
    );
    let unlimited = limit(Policy::new(), "card-unlimited");
    assert_eq!(unlimited.1, serde_json::Value::Null);
}

#[test]
fn a_board_shows_each_group_with_its_cap_its_panic_and_its_open_members() {
    let registry = Registry::with_clock(FakeClock::new());
    let member = Policy::new().group("board").consecutive(1);
    let keys = ["board-a", "board-b", "board-c"];
    for key in keys {
        registry.breaker(key, member).unwrap();
    }
    registry.breaker("loner", Policy::new()).unwrap();
    // Three members: the cap is one open member. `board-a` takes it; `board-b`'s trip is
    // rejected, which puts the group in panic.
    let a = registry.get("board-a").unwrap();
    a.try_acquire().unwrap().failure();
    assert_eq!(a.state(), State::Open);
    let b = registry.get("board-b").unwrap();
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), State::Closed, "kept closed by the cap");

    let config = AdminConfig::new();
    let all = registry.snapshot();
    let shown = super::board::shown(&all, &config);
    let board = super::board::board(
        &shown,
        all.len(),
        &registry.groups(),
        &History::new(10, 10, 10),
        &config,
        &registry,
    );
    let board: serde_json::Value = serde_json::from_str(&board).unwrap();
    let groups = board["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{board}");
    let group = &groups[0];
    assert_eq!(group["name"], "board");
    assert_eq!(group["members"], 3);
    // `board-a` was opened by its own rule (`consecutive`), not by the group's: open, not ejected.
    assert_eq!(group["ejected"], serde_json::json!([]));
    assert_eq!(
        (group["open"].clone(), group["max_open"].clone()),
        (1.into(), 1.into())
    );
    assert_eq!(group["max_ejection"], 10);
    assert_eq!(group["in_panic"], true);
    assert_eq!(group["rejected"], 1);
    assert_eq!(
        group["keys"],
        serde_json::json!([
            {"key": "board-a", "state": "open", "ejected": false},
            {"key": "board-b", "state": "closed", "ejected": false},
            {"key": "board-c", "state": "closed", "ejected": false},
        ])
    );
    let card = |key: &str| card_of(&board, key);
    assert_eq!(card("board-a")["member_of"], "board");
    assert_eq!(card("board-a")["ejected"], false);
    assert_eq!(card("board-b")["ejected"], false);
    assert_eq!(card("loner")["member_of"], serde_json::Value::Null);
    assert_eq!(card("loner")["ejected"], false);

    // `GET /breakers` carries the same group, its rows over every key.
    let document = super::board::breakers(
        &all,
        &registry.groups(),
        &History::new(10, 10, 10),
        &config,
        &registry,
    );
    assert_eq!(document["groups"][0]["keys"], group["keys"]);
    // A member forced open is not ejected either: an operator opened it.
    registry.get("board-c").unwrap().force_open();
    let all = registry.snapshot();
    let shown: Vec<&fusebox::Snapshot> = all.iter().collect();
    let group = super::board::group(&registry.group("board").unwrap().snapshot(), &shown);
    assert_eq!(group["keys"][2]["ejected"], false);
    assert_eq!(group["ejected"], serde_json::json!([]));
}

#[test]
fn ejected_means_opened_by_the_group_s_rules_in_the_group_s_list_its_rows_and_the_cards() {
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    registry
        .configure_group(
            "fp",
            fusebox::GroupPolicy::new()
                .success_rate(0.0)
                .max_ejection(50),
        )
        .unwrap();
    let member = Policy::new()
        .group("fp")
        .window(100)
        .min_calls(20)
        .rate_off()
        .failure_count(100);
    for i in 0..6 {
        let breaker = registry.breaker(&format!("fp-{i}"), member).unwrap();
        let failures = if i == 0 { 90 } else { 0 };
        for n in 0..100 {
            let _ = breaker.call(|| if n < failures { Err(()) } else { Ok(()) }, |_| true);
        }
    }
    // A member its own rule opens (before the interval is over: no pass yet).
    let own_policy = Policy::new()
        .group("fp")
        .consecutive(1)
        .open_for(Duration::from_secs(60));
    let own = registry.breaker("own", own_policy).unwrap();
    let _ = own.call(|| Err::<(), ()>(()), |_| true);
    clock.advance(Duration::from_secs(10));
    // A failure after the interval runs the pass: `fp-0`, at 90 % failures, is ejected.
    let _ = registry
        .get("fp-2")
        .unwrap()
        .call(|| Err::<(), ()>(()), |_| true);
    assert_eq!(registry.get("fp-0").unwrap().state(), State::Open);
    assert_eq!(own.state(), State::Open);
    assert!(own.snapshot().retry_after.is_some_and(|w| !w.is_zero()));

    let all = registry.snapshot();
    let document = super::board::breakers(
        &all,
        &registry.groups(),
        &History::new(10, 10, 10),
        &AdminConfig::new(),
        &registry,
    );
    let group = &document["groups"][0];
    // The list the page counts ("1 ejected"), the group's count of ejections and the rows agree.
    assert_eq!(group["ejected"], serde_json::json!(["fp-0"]), "{group}");
    assert_eq!(group["ejections"], 1);
    let marked: Vec<&str> = group["keys"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["ejected"] == true)
        .map(|row| row["key"].as_str().unwrap())
        .collect();
    assert_eq!(marked, ["fp-0"]);
    let card = |key: &str| card_of(&document, key);
    assert_eq!(
        (
            card("fp-0")["ejected"].clone(),
            card("own")["ejected"].clone()
        ),
        (true.into(), false.into())
    );
    let fp = registry.group("fp").unwrap();
    assert!(fp.is_ejected("fp-0") && !fp.is_ejected("own"));
    // A load balancer still skips both: neither lets a call through.
    let healthy: Vec<&str> = fp.healthy(["fp-0", "own", "fp-1"]).collect();
    assert_eq!(healthy, ["fp-1"]);
}

/// The card of `key` in a board or `GET /breakers` document.
fn card_of(document: &serde_json::Value, key: &str) -> serde_json::Value {
    document["breakers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == key)
        .cloned()
        .unwrap()
}

/// The state of `key` on the first board a connection receives within `within` (paused time)
/// where it is `state`, if any.
async fn board_saying(
    boards: &mut tokio::sync::watch::Receiver<super::hub::Board>,
    key: &str,
    state: &str,
    within: Duration,
) -> bool {
    let found = async {
        loop {
            boards.changed().await.unwrap();
            let json = boards.borrow_and_update().json().to_owned();
            let board: serde_json::Value = serde_json::from_str(&json).unwrap();
            if card_of(&board, key)["state"] == state {
                return;
            }
        }
    };
    tokio::time::timeout(within, found).await.is_ok()
}

#[tokio::test(start_paused = true)]
async fn the_longest_durations_are_bounded_and_the_task_keeps_publishing() {
    static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(FakeClock::new()));
    let breaker = REGISTRY.breaker("longest", Policy::new()).unwrap();
    let config = AdminConfig::new()
        .refresh(Duration::MAX)
        .min_interval(Duration::MAX)
        .history(Duration::MAX, 5);
    assert_eq!(
        (config.refresh, config.min_interval, config.sample_every),
        (
            Duration::from_secs(3600),
            Duration::from_secs(3600),
            Duration::from_secs(3600)
        )
    );
    let hub = super::hub::Hub::start(&REGISTRY, config);
    let connection = hub.connect().unwrap();
    let mut boards = connection.boards();
    boards.borrow_and_update();
    tokio::time::sleep(Duration::from_secs(1)).await;
    breaker.force_open();
    // One `min_interval` (an hour) later the board says so.
    assert!(
        board_saying(
            &mut boards,
            "longest",
            "forced_open",
            Duration::from_secs(3700)
        )
        .await,
        "a board after the transition: the task is alive"
    );
}

#[tokio::test(start_paused = true)]
async fn a_panic_in_the_task_is_logged_and_the_task_starts_again() {
    static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(FakeClock::new()));
    let breaker = REGISTRY.breaker("restarted", Policy::new()).unwrap();
    let hub = super::hub::Hub::start(&REGISTRY, AdminConfig::new());
    let connection = hub.connect().unwrap();
    let mut boards = connection.boards();
    boards.borrow_and_update();
    hub.panic_next
        .store(true, std::sync::atomic::Ordering::Release);
    breaker.force_open();
    // The task panics at its next turn and starts again a second later.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(hub.restarts(), 1, "the supervisor saw the panic");
    let within = Duration::from_secs(5);
    assert!(
        board_saying(&mut boards, "restarted", "forced_open", within).await,
        "a board from the restarted task"
    );
    breaker.reset();
    assert!(board_saying(&mut boards, "restarted", "closed", within).await);
}

/// SHA-256 of `data` (FIPS 180-4), for the page's script and style hashes.
fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut message = data.to_vec();
    message.push(0x80);
    while message.len() % 64 != 56 {
        message.push(0);
    }
    message.extend_from_slice(&(data.len() as u64 * 8).to_be_bytes());
    for block in message.chunks(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks(4).enumerate() {
            w[i] = u32::from_be_bytes(word.try_into().unwrap());
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7]
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]];
            v.rotate_right(1);
            v[0] = t1.wrapping_add(t2);
            v[4] = v[4].wrapping_add(t1);
        }
        for (a, b) in h.iter_mut().zip(v) {
            *a = a.wrapping_add(b);
        }
    }
    let mut out = [0u8; 32];
    for (chunk, word) in out.chunks_mut(4).zip(h) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn the_page_s_policy_allows_its_own_script_and_style_by_hash_and_nothing_inline() {
    assert_eq!(
        base64(&sha256(b"abc")),
        "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="
    );
    let page = dashboard_html();
    let hash = |tag: &str| {
        let open = format!("<{tag}>");
        let start = page.find(&open).unwrap() + open.len();
        let end = page.find(&format!("</{tag}>")).unwrap();
        format!("'sha256-{}'", base64(&sha256(&page.as_bytes()[start..end])))
    };
    let policy = super::routes::content_security_policy();
    let (script, style) = (hash("script"), hash("style"));
    assert!(
        policy.contains(&format!("script-src {script};")),
        "the page's script changed: put {script} in its `<meta>` policy's `script-src`"
    );
    assert!(
        policy.contains(&format!("style-src {style};")),
        "the page's style changed: put {style} in its `<meta>` policy's `style-src`"
    );
    assert!(policy.starts_with("default-src 'none'; "), "{policy}");
    assert!(policy.ends_with("; frame-ancestors 'none'"), "{policy}");
    assert!(!policy.contains("unsafe"), "{policy}");
    assert!(page.contains(super::routes::META_CSP));
    assert_eq!(page.matches("<script").count(), 1, "one script");
    assert!(!page.contains("innerHTML") && !page.contains(" style="));
}

#[cfg(feature = "redis")]
#[test]
fn a_control_moves_a_shared_key_in_the_store_and_never_a_local_one() {
    use super::routes::shared_state;
    let shared = Policy::new();
    let local = Policy::new().shared(false);
    assert_eq!(shared_state(Action::Reset, &shared), Some(State::Closed));
    assert_eq!(
        shared_state(Action::ForceOpen, &shared),
        Some(State::ForcedOpen)
    );
    assert_eq!(shared_state(Action::MetricsOnly, &shared), None);
    for action in Action::ALL {
        assert_eq!(shared_state(action, &local), None, "{action}");
    }
}

/// On a shared key another replica opened, the card says why and names that replica, in
/// `opened` and in `last_transition`, though this router's hook saw no transition.
#[cfg(feature = "redis")]
#[test]
fn a_shared_key_s_card_names_the_replica_that_opened_it() {
    let clock = FakeClock::new();
    let store = fusebox::store::MemoryStore::with_clock(clock.clone());
    let (a, b) = (
        Registry::with_clock(clock.clone()),
        Registry::with_clock(clock.clone()),
    );
    let (for_a, for_b) = (store.clone(), store.clone());
    let tripped_by = for_a.replica().to_owned();
    assert!(a.share(for_a) && b.share(for_b));
    let policy = Policy::new().consecutive(2);
    let on_a = a.breaker("told", policy).unwrap();
    let on_b = b.breaker("told", policy).unwrap();
    on_a.try_acquire().unwrap().failure();
    on_a.try_acquire().unwrap().failure();
    clock.advance(fusebox::store::REFRESH_AFTER);
    let card = super::board::card(&on_b.snapshot(), None, &AdminConfig::new(), &b);
    assert_eq!(card["opened"]["rule"], "consecutive", "{card}");
    assert_eq!(card["opened"]["replica"], tripped_by.as_str(), "{card}");
    assert_eq!(card["last_transition"]["replica"], tripped_by.as_str());
    assert_eq!(card["last_transition"]["failures"], 2);
}
