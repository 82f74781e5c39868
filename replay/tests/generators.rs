//! Generated traces have known answers; lint warns on a policy that cannot trip or trips on noise.

use std::time::Duration;

use fusebox::State;
use fusebox_replay::generate::{Scenario, generate};
use fusebox_replay::lint::lint;
use fusebox_replay::policy::parse_policy_arg;
use fusebox_replay::replay::{OutageRule, find_outages, replay};
use fusebox_replay::trace::Outcome;

const MS: u64 = 1_000_000;

#[test]
fn the_hard_outage_starts_at_60s_and_consecutive_5_detects_it_at_the_5th_failure() {
    let calls = generate(Scenario::HardOutage, 1);
    let refs = fusebox_replay::trace::events(&calls);
    let outages = find_outages(&refs, OutageRule::default());
    assert_eq!(outages.len(), 1, "{outages:?}");
    // Calls admitted from 60 s fail after 1 ms; the first of them is the outage's start.
    let first = calls
        .iter()
        .find(|c| c.admitted_ns() >= 60_000 * MS)
        .unwrap();
    assert_eq!(first.outcome, Outcome::Failure);
    assert_eq!(outages[0].start_ns, 60_000 * MS + MS);
    assert_eq!(outages[0].start_ns, first.at_ns);
    assert_eq!(outages[0].failures, 300);

    let candidate = parse_policy_arg("consecutive=5,open_for=10s", "c5").unwrap();
    let run = replay(&refs, &candidate, &outages);
    let fifth = calls
        .iter()
        .filter(|c| c.at_ns >= outages[0].start_ns && c.outcome == Outcome::Failure)
        .nth(4)
        .unwrap();
    let opened = run
        .changes
        .iter()
        .find(|c| c.to == State::Open)
        .expect("it opens");
    assert_eq!(opened.at_ns, fifth.at_ns, "opens on the 5th failure");
    assert_eq!(run.detection, vec![Some(400 * MS)]);
    assert_eq!(run.false_openings, 0);
}

#[test]
fn every_scenario_has_its_incidents_as_outages() {
    for (name, scenario) in Scenario::ALL {
        let calls = generate(scenario, 3);
        let refs = fusebox_replay::trace::events(&calls);
        let outages = find_outages(&refs, OutageRule::default());
        let incidents = scenario.incidents();
        assert_eq!(outages.len(), incidents.len(), "{name}: {outages:?}");
        for (o, (a, b)) in outages.iter().zip(incidents) {
            let (a, b) = (a.as_nanos() as u64, b.as_nanos() as u64 + 1_000 * MS);
            assert!(
                o.start_ns >= a && o.start_ns < a + 5_000 * MS && o.end_ns <= b,
                "{name}: outage {o:?} is not the incident {a}..{b}"
            );
        }
        assert_eq!(
            generate(scenario, 3),
            calls,
            "{name}: a seed gives one trace"
        );
    }
}

#[test]
fn lint_warns_on_a_policy_that_cannot_trip_on_low_traffic() {
    let calls = generate(Scenario::LowTraffic, 1);
    let refs = fusebox_replay::trace::events(&calls);
    let outages = find_outages(&refs, OutageRule::default());
    let candidate = parse_policy_arg("window=1s,min_calls=10", "second").unwrap();
    let run = replay(&refs, &candidate, &outages);
    assert_eq!(run.detection, vec![None]);
    let warnings = lint(&refs, &candidate, &run, &outages);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("`second` cannot trip on a rate")
            && warnings[0].contains("busiest 1s of the trace has 1 calls")
            && warnings[0].contains("`min_calls` = 10"),
        "{}",
        warnings[0]
    );
    let fits = parse_policy_arg("window=5m,min_calls=10", "fits").unwrap();
    let fits_run = replay(&refs, &fits, &outages);
    assert!(lint(&refs, &fits, &fits_run, &outages).is_empty());
    assert!(fits_run.detection[0].is_some());
}

#[test]
fn lint_warns_on_a_policy_that_trips_on_noise() {
    let calls = generate(Scenario::Brownout, 1);
    let refs = fusebox_replay::trace::events(&calls);
    let outages = find_outages(&refs, OutageRule::default());
    let jumpy =
        parse_policy_arg("window=5,min_calls=1,failure_rate=20,open_for=1s", "jumpy").unwrap();
    let run = replay(&refs, &jumpy, &outages);
    assert!(run.false_openings > 0);
    let warnings = lint(&refs, &jumpy, &run, &outages);
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("`jumpy` trips on noise")),
        "{warnings:?}"
    );
    let calm = parse_policy_arg(
        "window=100,failure_rate=25,min_calls=20,open_for=30s",
        "calm",
    )
    .unwrap();
    let calm_run = replay(&refs, &calm, &outages);
    assert_eq!(calm_run.false_openings, 0);
    assert!(lint(&refs, &calm, &calm_run, &outages).is_empty());
    let _ = Duration::ZERO;
}
