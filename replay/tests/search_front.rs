//! The search's front holds exactly the policies no other policy dominates.

use fusebox_replay::generate::{Scenario, generate};
use fusebox_replay::policy::parse_policy_arg;
use fusebox_replay::replay::{OutageRule, find_outages};
use fusebox_replay::search::{grid, pareto, search};

#[test]
fn the_front_contains_the_dominating_policies_of_the_hard_outage() {
    let calls = generate(Scenario::HardOutage, 1);
    let refs = fusebox_replay::trace::events(&calls);
    let outages = find_outages(&refs, OutageRule::default());
    let candidates: Vec<_> = [
        "quick: consecutive=5,open_for=5s",
        // Same detection, waits longer before probing: rejects more calls after the outage.
        "slow_probe: consecutive=5,open_for=60s",
        // Never opens: rejects nothing, detects nothing.
        "numb: window=1s,min_calls=50",
        // Slower to detect than `quick` and rejects more.
        "lagging: window=100,failure_rate=50,open_for=30s",
    ]
    .iter()
    .map(|s| parse_policy_arg(s, "x").unwrap())
    .collect();
    let (runs, front) = search(&refs, &candidates, &outages);
    let names: Vec<&str> = front.iter().map(|&i| candidates[i].name.as_str()).collect();
    assert_eq!(names, ["quick", "numb"], "{runs:#?}");
}

#[test]
fn on_the_grid_the_front_is_exactly_the_undominated_runs() {
    let calls = generate(Scenario::Flapping, 2);
    let refs = fusebox_replay::trace::events(&calls);
    let outages = find_outages(&refs, OutageRule::default());
    let candidates = grid();
    assert_eq!(candidates.len(), 438, "replay/README.md counts them");
    let (runs, front) = search(&refs, &candidates, &outages);
    assert_eq!(front, pareto(&runs, &outages));
    let score = |i: usize| (runs[i].detection_cost(&outages), runs[i].wrongly_rejected);
    let dominated = |i: usize| {
        (0..runs.len()).any(|j| {
            let ((dj, wj), (d, w)) = (score(j), score(i));
            dj <= d && wj <= w && (dj, wj) != (d, w)
        })
    };
    let mut undominated_scores: Vec<_> = (0..runs.len())
        .filter(|&i| !dominated(i))
        .map(score)
        .collect();
    undominated_scores.sort();
    undominated_scores.dedup();
    let front_scores: Vec<_> = front.iter().map(|&i| score(i)).collect();
    assert_eq!(front_scores, undominated_scores);
    assert!(front.len() >= 2, "a trade-off, not a single winner");
}
