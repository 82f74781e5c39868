//! Traces with many keys replay each key on its own breaker, and a candidate's group is the
//! runtime's own: a degraded host among healthy ones is the only one ejected, a broken client
//! (every host failing alike) is held by the panic threshold, and the group's settings change
//! the outcome.

use fusebox_replay::generate::{HostScenario, generate_hosts, host_key};
use fusebox_replay::keyed::{KeyedRun, find_keyed_outages, replay_keys};
use fusebox_replay::policy::{parse_policy_arg, parse_policy_file};
use fusebox_replay::replay::{OutageRule, Run};
use fusebox_replay::trace::{KeyedTrace, read_keys};

fn trace_of(scenario: HostScenario) -> KeyedTrace {
    let calls = generate_hosts(&scenario.hosts(), 7);
    let text: String = calls.iter().map(|c| c.to_line() + "\n").collect();
    read_keys(text.as_bytes()).unwrap()
}

/// The run of host number `i`.
fn host<'a>(trace: &KeyedTrace, run: &'a KeyedRun, i: usize) -> &'a Run {
    &run.keys[trace.index_of(&host_key(i)).unwrap() as usize]
}

fn replay(trace: &KeyedTrace, policy: &str) -> KeyedRun {
    let candidate = parse_policy_arg(policy, "p").unwrap();
    let outages = find_keyed_outages(trace, OutageRule::default());
    replay_keys(trace, &candidate, &outages)
}

/// The keys that opened at least once.
fn opened(trace: &KeyedTrace, run: &KeyedRun) -> Vec<String> {
    (0..trace.keys.len())
        .filter(|&k| run.keys[k].openings > 0)
        .map(|k| trace.keys[k].clone())
        .collect()
}

/// Each host on its own breaker, with an absolute rule (90 % failures) that a host at 50 %
/// never reaches: only the group can eject it.
const HOST: &str = "window=100,min_calls=20,failure_rate=90";

#[test]
fn a_trace_of_ten_hosts_replays_each_key_on_its_own_breaker() {
    let trace = trace_of(HostScenario::DegradedHost);
    assert_eq!(trace.keys.len(), 10);
    let run = replay(&trace, "window=20,failure_rate=40");
    // Only the degraded host fails 40 % of 20 calls.
    assert_eq!(run.keys.len(), 10);
    assert_eq!(opened(&trace, &run), [host_key(3)]);
    assert!(host(&trace, &run, 3).rejected > 0);
    let calls: u64 = run.keys.iter().map(|r| r.rejected).sum();
    assert_eq!(run.total.rejected, calls, "the totals are the keys' sums");
    assert!(run.group.is_none());
}

#[test]
fn a_host_at_50_percent_among_hosts_at_99_percent_is_the_only_one_ejected() {
    let trace = trace_of(HostScenario::DegradedHost);
    let alone = replay(&trace, HOST);
    assert_eq!(
        opened(&trace, &alone),
        Vec::<String>::new(),
        "no host trips alone"
    );

    let grouped = replay(&trace, &format!("{HOST},group=search"));
    assert_eq!(opened(&trace, &grouped), [host_key(3)]);
    let degraded = host(&trace, &grouped, 3);
    assert!(degraded.ejections >= 1, "{degraded:?}");
    assert!(degraded.rejected_by_ejection > 0);
    assert!(
        degraded.ejected_ns >= 30_000_000_000,
        "at least the base ejection"
    );
    let group = grouped.group.as_ref().unwrap();
    assert_eq!((group.members, group.most_open), (10, 1));
    assert_eq!(group.ejections, grouped.total.ejections);
    assert_eq!(group.panics, 0);
}

#[test]
fn a_broken_client_keeps_at_least_90_percent_of_the_hosts_closed() {
    let trace = trace_of(HostScenario::BrokenClient);
    // A fixed rule at 60 % success (40 % failures) opens nearly every host.
    let fixed = "window=100,min_calls=20,failure_rate=40";
    let alone = replay(&trace, fixed);
    assert!(
        opened(&trace, &alone).len() >= 8,
        "{:?}",
        opened(&trace, &alone)
    );

    let grouped = replay(&trace, &format!("{fixed},group=search"));
    let group = grouped.group.as_ref().unwrap();
    assert_eq!(group.most_open, 1, "at most 10 % of 10 hosts open at once");
    assert!(group.panics >= 1, "the group says it is in panic");
    assert!(group.kept_closed > 0);
    assert!(group.panic_ns > 0);
}

#[test]
fn max_ejection_changes_the_replay() {
    let trace = trace_of(HostScenario::BrokenClient);
    let fixed = "window=100,min_calls=20,failure_rate=40,group=search";
    let tight = replay(&trace, fixed);
    let loose = replay(&trace, &format!("{fixed},max_ejection=50"));
    let (tight_group, loose_group) = (tight.group.unwrap(), loose.group.unwrap());
    assert_eq!(tight_group.most_open, 1);
    assert_eq!(loose_group.most_open, 5, "half the hosts open at once");
    assert!(loose.total.rejected > tight.total.rejected);
    assert!(loose_group.kept_closed < tight_group.kept_closed);
}

#[test]
fn group_keys_chooses_the_members() {
    let trace = trace_of(HostScenario::DegradedHost);
    // Host 3 is not a member: nothing ejects it.
    let run = replay(
        &trace,
        &format!("{HOST},group=search,group_keys=host-0|host-1|host-2|host-4|host-5|host-6"),
    );
    assert_eq!(run.group.as_ref().unwrap().members, 6);
    assert_eq!(opened(&trace, &run), Vec::<String>::new());
    let run = replay(&trace, &format!("{HOST},group=search,group_keys=host-*"));
    assert_eq!(run.group.as_ref().unwrap().members, 10);
    assert_eq!(opened(&trace, &run), [host_key(3)]);
}

#[test]
fn on_noisy_hosts_the_success_rate_decides_which_hosts_are_ejected() {
    // Outcomes drawn at random: the healthy hosts' rates spread around 99 %, and 1.9 standard
    // deviations of a tight cluster is little.
    let trace = trace_of(HostScenario::NoisyHosts);
    let default = replay(&trace, &format!("{HOST},group=search"));
    let wider = replay(&trace, &format!("{HOST},group=search,success_rate=2.5"));
    assert!(
        opened(&trace, &default).len() > 1,
        "{:?}",
        opened(&trace, &default)
    );
    assert_eq!(opened(&trace, &wider), [host_key(3)]);
}

#[test]
fn search_explores_success_rate_and_max_ejection_on_the_totals() {
    let trace = trace_of(HostScenario::NoisyHosts);
    let base = parse_policy_arg(&format!("{HOST},group=search"), "p").unwrap();
    let grid = fusebox_replay::search::group_grid(std::slice::from_ref(&base));
    assert_eq!(grid.len(), 25, "5 stdev factors x 5 max ejections");
    let outages = find_keyed_outages(&trace, OutageRule::default());
    let (runs, front) = fusebox_replay::search::search_keys_with(&trace, &grid, &outages, || {});
    assert_eq!(runs.len(), 25);
    assert!(front.len() >= 2, "{front:?}");
    // Without the success-rate rule nothing is ejected (the failure percentage rule needs 85 %):
    // no call wrongly rejected, and the slowest detection of the front (sorted by detection).
    let off = grid
        .iter()
        .position(|c| c.policy_arg().ends_with("success_rate=0,max_ejection=10"))
        .unwrap();
    assert_eq!(runs[off].total.ejections, 0);
    assert_eq!(runs[*front.last().unwrap()].total.wrongly_rejected, 0);
    // The fastest detection ejects host-3.
    let fastest = &runs[front[0]];
    assert!(host(&trace, fastest, 3).ejections > 0);
    let table = fusebox_replay::search::keyed_front_table(&grid, &runs, &front, &outages);
    assert!(
        table.contains("configure_group(\"search\", GroupPolicy::new()"),
        "{table}"
    );
}

#[test]
fn the_groups_example_file_replays_and_its_cap_holds() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/groups.toml"))
            .unwrap();
    let candidates = parse_policy_file(&text, "groups.toml").unwrap();
    let names: Vec<&str> = candidates.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["alone", "search", "loose"]);
    let trace = trace_of(HostScenario::BrokenClient);
    let outages = find_keyed_outages(&trace, OutageRule::default());
    let most: Vec<u64> = candidates
        .iter()
        .map(|c| {
            let run = replay_keys(&trace, c, &outages);
            run.group
                .as_ref()
                .map_or(opened(&trace, &run).len() as u64, |g| g.most_open)
        })
        .collect();
    assert!(most[0] >= 8, "{most:?}");
    assert_eq!(most[1..], [1, 5]);
}
