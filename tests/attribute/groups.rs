//! Groups of per-host keys (`group = "search"`): a degraded host is ejected relative to its
//! siblings, a broken client never opens more than the panic threshold allows, ejections back
//! off and reset, and many threads never exceed the cap. Time is the registries' fake clocks.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use crate::common::ApiError;
use crate::common::capture::{capture, named};
use fusebox::clock::FakeClock;
use fusebox::{GroupPolicy, Policy, Registry, State, Trigger, circuit_breaker};

const HOSTS: usize = 10;

fn host(i: usize) -> String {
    format!("search-{i}:9200")
}

// ------------------------------------------------- one degraded host among ten healthy ones

fake_registry!(ONE_CLOCK, ONE);

/// A search call to `host`; `fail` says whether the backend fails it. The absolute rule (90 %)
/// is far above what the degraded host does: only the group can eject it.
#[circuit_breaker(key = host, group = "search", registry = ONE, window = 100, min_calls = 20,
    failure_rate = 90, failure = [Connect])]
fn search_one(host: &str, fail: bool) -> Result<u32, ApiError> {
    if fail {
        Err(ApiError::Connect(503))
    } else {
        Ok(1)
    }
}

#[test]
fn a_host_at_50_percent_among_hosts_at_99_percent_is_the_only_one_ejected() {
    for round in 0..100 {
        for i in 0..HOSTS {
            // Host 3 fails every other call; the others one call in 100.
            let fail = if i == 3 { round % 2 == 0 } else { round == 50 };
            let _ = search_one(&host(i), fail);
        }
    }
    for i in 0..HOSTS {
        assert_eq!(
            ONE.get(&host(i)).unwrap().state(),
            State::Closed,
            "no pass before the interval"
        );
    }
    // The interval is over: the next counted failure of any member makes the pass.
    ONE_CLOCK.advance(Duration::from_secs(11));
    let _ = search_one(&host(0), true);

    let degraded = ONE.get(&host(3)).unwrap();
    assert_eq!(degraded.state(), State::Open);
    let last = degraded.snapshot().last_transition.unwrap();
    assert_eq!(last.trigger, Trigger::OutlierSuccessRate);
    assert_eq!(
        degraded.snapshot().retry_after,
        Some(Duration::from_secs(30)),
        "the base ejection"
    );
    for i in (0..HOSTS).filter(|&i| i != 3) {
        assert_eq!(
            ONE.get(&host(i)).unwrap().state(),
            State::Closed,
            "host {i} is healthy"
        );
    }
    let group = ONE.group("search").unwrap();
    let snapshot = group.snapshot();
    assert_eq!(snapshot.members, HOSTS);
    assert_eq!(snapshot.ejected, [host(3)]);
    assert_eq!((snapshot.open, snapshot.max_open), (1, 1));
    assert!(!snapshot.in_panic);
    assert_eq!(snapshot.ejections, 1);
    // The caller picks among the others.
    let candidates: Vec<String> = (0..HOSTS).map(host).collect();
    let healthy: Vec<String> = group.healthy(candidates).collect();
    assert_eq!(healthy.len(), HOSTS - 1);
    assert!(!healthy.contains(&host(3)));
    assert_eq!(ONE.groups(), [snapshot]);
}

// ---------------------------------------- a broken client: every host at 55 % success

// Time stands still in this scenario: the cap alone decides.
static BROKEN: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(FakeClock::new()));
static CONTROL: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(FakeClock::new()));

/// A fixed per-host rule: below 60 % success (above 40 % failures) the host is opened.
#[circuit_breaker(key = host, group = "search", registry = BROKEN, window = 100, min_calls = 20,
    failure_rate = 40, failure = [Connect])]
fn search_broken(host: &str, fail: bool) -> Result<u32, ApiError> {
    if fail {
        Err(ApiError::Connect(503))
    } else {
        Ok(1)
    }
}

/// The same rule without a group: the control.
#[circuit_breaker(key = host, registry = CONTROL, window = 100, min_calls = 20, failure_rate = 40,
    failure = [Connect])]
fn search_control(host: &str, fail: bool) -> Result<u32, ApiError> {
    if fail {
        Err(ApiError::Connect(503))
    } else {
        Ok(1)
    }
}

fn open_hosts(registry: &Registry) -> usize {
    (0..HOSTS)
        .filter(|&i| registry.get(&host(i)).unwrap().state() != State::Closed)
        .count()
}

#[test]
fn a_broken_client_opens_at_most_a_tenth_of_the_group_while_a_fixed_rule_opens_every_host() {
    let events = capture(|| {
        for round in 0..100 {
            for i in 0..HOSTS {
                // 45 % failures on every host, evenly spread.
                let fail = (round * 9 + i) % 20 < 9;
                let _ = search_broken(&host(i), fail);
                let _ = search_control(&host(i), fail);
            }
        }
    });
    let panics = named(&events, "group_panic");
    assert_eq!(panics.len(), 1, "one event per episode");
    assert_eq!(panics[0].level, tracing::Level::WARN);
    assert_eq!(panics[0].fields["group"], "search");
    assert_eq!(panics[0].fields["members"], "10");
    assert_eq!(
        open_hosts(&CONTROL),
        HOSTS,
        "the fixed rule alone opens every host"
    );
    let open = open_hosts(&BROKEN);
    assert_eq!(
        open, 1,
        "at most 10 % open: at least 90 % of the hosts stay closed"
    );
    let snapshot = BROKEN.group("search").unwrap().snapshot();
    assert!(snapshot.in_panic, "the group says it is in panic");
    assert!(snapshot.rejected > 0);
    assert_eq!(snapshot.open, 1);
}

// ------------------------------------------------------- ejection backoff and its reset

/// Fills member `key`'s window: 100 calls, failing one in `every`.
fn fill(registry: &Registry, key: &str, every: u32) {
    let breaker = registry.get(key).unwrap();
    for n in 0..100u32 {
        let fail = every != 0 && n % every == 0;
        let _ = breaker.call(|| if fail { Err(()) } else { Ok(()) }, |_| true);
    }
}

#[test]
fn a_flapping_member_is_ejected_for_one_two_three_times_the_base_then_reset_after_a_healthy_span() {
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    let policy = Policy::new()
        .group("flap")
        .window(100)
        .min_calls(20)
        .failure_rate(90);
    let keys: Vec<String> = (0..6).map(|i| format!("flap-{i}")).collect();
    for key in &keys {
        registry.breaker(key, policy).unwrap();
    }
    for key in &keys[1..] {
        fill(&registry, key, 0);
    }
    let flapping = registry.get(&keys[0]).unwrap();
    let base = Duration::from_secs(30);
    let mut waits = Vec::new();
    for round in 0..4 {
        if round == 3 {
            // A healthy span (300 s by default) closed: the count starts again.
            clock.advance(Duration::from_secs(301));
        }
        fill(&registry, &keys[0], 2);
        clock.advance(Duration::from_secs(10));
        let _ = flapping.call(|| Err::<(), ()>(()), |_| true);
        assert_eq!(flapping.state(), State::Open, "round {round}: ejected");
        let snapshot = flapping.snapshot();
        assert_eq!(
            snapshot.last_transition.unwrap().trigger,
            Trigger::OutlierSuccessRate
        );
        let wait = snapshot.retry_after.unwrap();
        waits.push(wait);
        // The wait over, a passing probe closes it.
        clock.advance(wait);
        let _ = flapping.call(|| Ok::<(), ()>(()), |_| true);
        assert_eq!(
            flapping.state(),
            State::Closed,
            "round {round}: the probe closed it"
        );
    }
    assert_eq!(waits, [base, base * 2, base * 3, base]);
}

#[test]
fn the_ejection_wait_is_capped_and_the_group_settings_apply() {
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    registry
        .configure_group(
            "capped",
            GroupPolicy::new().ejection(Duration::from_secs(10), Duration::from_secs(15)),
        )
        .unwrap();
    let policy = Policy::new()
        .group("capped")
        .window(100)
        .min_calls(20)
        .failure_rate(90);
    let keys: Vec<String> = (0..5).map(|i| format!("capped-{i}")).collect();
    for key in &keys {
        registry.breaker(key, policy).unwrap();
    }
    for key in &keys[1..] {
        fill(&registry, key, 0);
    }
    let flapping = registry.get(&keys[0]).unwrap();
    let mut waits = Vec::new();
    for _ in 0..2 {
        fill(&registry, &keys[0], 2);
        clock.advance(Duration::from_secs(10));
        let _ = flapping.call(|| Err::<(), ()>(()), |_| true);
        let wait = flapping.snapshot().retry_after.unwrap();
        waits.push(wait);
        clock.advance(wait);
        let _ = flapping.call(|| Ok::<(), ()>(()), |_| true);
    }
    assert_eq!(waits, [Duration::from_secs(10), Duration::from_secs(15)]);
}

#[test]
fn failure_percentage_ejects_a_member_above_85_percent_failures() {
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    // The success-rate rule off: only failure percentage can eject.
    registry
        .configure_group("fp", GroupPolicy::new().success_rate(0.0).max_ejection(50))
        .unwrap();
    let policy = Policy::new()
        .group("fp")
        .window(100)
        .min_calls(20)
        .rate_off()
        .failure_count(100);
    let keys: Vec<String> = (0..6).map(|i| format!("fp-{i}")).collect();
    for key in &keys {
        registry.breaker(key, policy).unwrap();
    }
    // fp-0: 90 % failures; fp-1: 80 %; the others healthy.
    for (i, key) in keys.iter().enumerate() {
        let breaker = registry.get(key).unwrap();
        let failures = [90, 80, 0, 0, 0, 0][i];
        for n in 0..100 {
            let _ = breaker.call(|| if n < failures { Err(()) } else { Ok(()) }, |_| true);
        }
    }
    clock.advance(Duration::from_secs(10));
    let _ = registry
        .get(&keys[2])
        .unwrap()
        .call(|| Err::<(), ()>(()), |_| true);
    let first = registry.get(&keys[0]).unwrap();
    assert_eq!(first.state(), State::Open);
    assert_eq!(
        first.snapshot().last_transition.unwrap().trigger,
        Trigger::OutlierFailurePercentage
    );
    assert_eq!(
        registry.get(&keys[1]).unwrap().state(),
        State::Closed,
        "80 % is not above 85 %"
    );
}

#[test]
fn fewer_than_five_qualifying_members_eject_nobody() {
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    let policy = Policy::new()
        .group("small")
        .window(100)
        .min_calls(20)
        .failure_rate(95);
    let keys: Vec<String> = (0..4).map(|i| format!("small-{i}")).collect();
    for key in &keys {
        registry.breaker(key, policy).unwrap();
    }
    for (i, key) in keys.iter().enumerate() {
        fill(&registry, key, if i == 0 { 2 } else { 0 });
    }
    clock.advance(Duration::from_secs(10));
    let _ = registry
        .get(&keys[0])
        .unwrap()
        .call(|| Err::<(), ()>(()), |_| true);
    assert_eq!(registry.get(&keys[0]).unwrap().state(), State::Closed);
}

// ------------------------------------------------------------ many threads, one group

#[test]
fn many_threads_never_open_more_members_than_the_cap() {
    let clock = FakeClock::new();
    let registry = Arc::new(Registry::with_clock(clock.clone()));
    // 50 members, 10 %: at most 5 open. Each counted failure trips its member.
    let policy = Policy::new().group("many").consecutive(1);
    let keys: Arc<Vec<String>> = Arc::new((0..50).map(|i| format!("many-{i}")).collect());
    for key in keys.iter() {
        registry.breaker(key, policy).unwrap();
    }
    let group = registry.group("many").unwrap();
    for phase in 0..3 {
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let (registry, keys) = (registry.clone(), keys.clone());
                std::thread::spawn(move || {
                    for n in 0..2_000usize {
                        let key = &keys[(n * 7 + t * 13) % keys.len()];
                        let breaker = registry.get(key).unwrap();
                        let fail = (n + t) % 3 == 0;
                        let _ = breaker.call(|| if fail { Err(()) } else { Ok(()) }, |_| true);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        // Time stands still while the threads run: nothing closes, so every open is counted.
        let open = keys
            .iter()
            .filter(|key| registry.get(key).unwrap().state() != State::Closed)
            .count();
        let snapshot = group.snapshot();
        assert_eq!(snapshot.max_open, 5);
        assert!(
            open <= 5,
            "phase {phase}: {open} members open, the cap is 5"
        );
        assert_eq!(
            open as u32, snapshot.open,
            "phase {phase}: the count matches the states"
        );
        assert!(snapshot.in_panic);
        // The waits over, the next phase's calls probe, close and trip again.
        clock.advance(Duration::from_secs(11));
    }
}

#[test]
fn a_group_of_ten_thousand_members_makes_one_pass_per_interval() {
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    let policy = Policy::new()
        .group("large")
        .window(10)
        .min_calls(5)
        .failure_rate(100);
    let members: Vec<_> = (0..10_000)
        .map(|i| registry.breaker(&format!("large-{i}"), policy).unwrap())
        .collect();
    // Every member has its calls; member 0 fails 4 of 5 (below its own 100 % rule), the
    // others none.
    for (i, member) in members.iter().enumerate() {
        for n in 0..5 {
            let fail = i == 0 && n < 4;
            let _ = member.call(|| if fail { Err(()) } else { Ok(()) }, |_| true);
        }
    }
    let group = registry.group("large").unwrap();
    assert_eq!(
        (group.snapshot().members, group.snapshot().max_open),
        (10_000, 1_000)
    );
    assert_eq!(group.snapshot().ejections, 0, "no pass before the interval");
    clock.advance(Duration::from_secs(10));
    assert_eq!(
        members[0].state(),
        State::Closed,
        "its own rule did not open it"
    );
    let _ = members[0].call(|| Err::<(), ()>(()), |_| true);
    assert_eq!(
        members[0].state(),
        State::Open,
        "the one outlier among 10,000"
    );
    assert_eq!(
        members[0].snapshot().last_transition.unwrap().trigger,
        Trigger::OutlierSuccessRate
    );
    assert_eq!(group.snapshot().ejections, 1);
    assert_eq!(group.snapshot().ejected, ["large-0"]);
    // The next pass waits for the next interval, whatever the failures meanwhile.
    for member in &members[2..100] {
        let _ = member.call(|| Err::<(), ()>(()), |_| true);
    }
    assert_eq!(group.snapshot().ejections, 1);
}

// ------------------------------------------- ejection waits through the member's open rules

/// A registry with the members `{group}-0` to `{group}-4` of `group` on `policy`, every one but
/// the first with a healthy window.
fn flapping_group(group: &'static str, policy: Policy) -> (FakeClock, Registry, Vec<String>) {
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    let policy = policy
        .group(group)
        .window(100)
        .min_calls(20)
        .failure_rate(90);
    let keys: Vec<String> = (0..5).map(|i| format!("{group}-{i}")).collect();
    for key in &keys {
        registry.breaker(key, policy).unwrap();
    }
    for key in &keys[1..] {
        fill(&registry, key, 0);
    }
    (clock, registry, keys)
}

/// Ejects `key` (half its calls failing among healthy siblings, then the interval's pass) and
/// returns its wait.
fn eject(clock: &FakeClock, registry: &Registry, key: &str) -> Duration {
    fill(registry, key, 2);
    clock.advance(Duration::from_secs(10));
    let member = registry.get(key).unwrap();
    let _ = member.call(|| Err::<(), ()>(()), |_| true);
    let snapshot = member.snapshot();
    assert_eq!(snapshot.state, State::Open);
    assert_eq!(
        snapshot.last_transition.unwrap().trigger,
        Trigger::OutlierSuccessRate
    );
    snapshot.retry_after.unwrap()
}

#[test]
fn an_ejection_is_spread_by_the_members_open_jitter_and_probes_within_its_spread() {
    let (clock, registry, keys) = flapping_group("jitter", Policy::new().open_jitter(50));
    let member = registry.get(&keys[0]).unwrap();
    let base = Duration::from_secs(30);
    let mut waits = Vec::new();
    for _ in 0..4 {
        let wait = eject(&clock, &registry, &keys[0]);
        assert!(
            wait >= base && wait <= base * 3 / 2,
            "{wait:?} is within [30 s, 30 s × 1.5]"
        );
        waits.push(wait);
        // No probe before the spread wait is over; the first call after it probes.
        clock.advance(wait - Duration::from_millis(1));
        assert!(member.try_acquire().is_err(), "still ejected");
        clock.advance(Duration::from_millis(1));
        member.try_acquire().expect("the probe").success();
        assert_eq!(member.state(), State::Closed);
        // A healthy span closed: the next ejection is a first one again (30 s before the spread).
        clock.advance(Duration::from_secs(301));
    }
    assert!(
        waits.iter().any(|w| *w > base),
        "the jitter lengthened some of {waits:?}"
    );
}

#[test]
fn the_members_open_max_caps_its_ejection_backoff() {
    let (clock, registry, keys) =
        flapping_group("openmax", Policy::new().open_max(Duration::from_secs(45)));
    let member = registry.get(&keys[0]).unwrap();
    let mut waits = Vec::new();
    for _ in 0..3 {
        let wait = eject(&clock, &registry, &keys[0]);
        waits.push(wait);
        clock.advance(wait);
        let _ = member.call(|| Ok::<(), ()>(()), |_| true);
        assert_eq!(member.state(), State::Closed);
    }
    // 30 s, then 60 s and 90 s capped at `open_max`.
    assert_eq!(
        waits,
        [
            Duration::from_secs(30),
            Duration::from_secs(45),
            Duration::from_secs(45)
        ]
    );
}

// ----------------------------------------------------- group settings from configuration

#[test]
fn a_groups_table_in_toml_sets_the_ejection_backoff_of_the_members() {
    let (clock, registry, keys) = flapping_group("configured", Policy::new());
    registry
        .load_toml("[groups.configured]\nejection = { base = \"5s\", max = \"12s\" }\n")
        .unwrap();
    let member = registry.get(&keys[0]).unwrap();
    let mut waits = Vec::new();
    for _ in 0..3 {
        let wait = eject(&clock, &registry, &keys[0]);
        waits.push(wait);
        clock.advance(wait);
        let _ = member.call(|| Ok::<(), ()>(()), |_| true);
    }
    assert_eq!(
        waits,
        [
            Duration::from_secs(5),
            Duration::from_secs(10),
            Duration::from_secs(12)
        ]
    );
    // The environment's settings layer over the file's.
    registry
        .load_vars([(
            "FUSEBOX_GROUPS__CONFIGURED__MAX_EJECTION".to_owned(),
            "40".to_owned(),
        )])
        .unwrap();
    let settings = registry.group("configured").unwrap().policy().settings();
    assert_eq!(settings.max_ejection, 40);
    assert_eq!(settings.ejection_base, Duration::from_secs(5));
}
