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
        let card = super::board::card(&breaker.snapshot(), None, &config);
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
    let document =
        super::board::breakers(&all, &registry.groups(), &History::new(10, 10, 10), &config);
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
    registry.configure_group(
        "fp",
        fusebox::GroupPolicy::new()
            .success_rate(0.0)
            .max_ejection(50),
    );
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
            let json = boards.borrow_and_update().json.clone();
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
