//! A candidate's `retry` and `retry_budget` replay: each call that failed is retried, each
//! retry asked of the budget, so the budget changes the retries a replay counts.

use fusebox_replay::generate::{Scenario, generate};
use fusebox_replay::policy::{parse_policy_arg, parse_policy_file};
use fusebox_replay::replay::{OutageRule, find_outages, replay};
use fusebox_replay::report::table;

#[test]
fn a_retry_budget_limits_the_retries_of_an_outage() {
    let calls = generate(Scenario::HardOutage, 1);
    let refs = fusebox_replay::trace::events(&calls);
    let outages = find_outages(&refs, OutageRule::default());
    // `window=1s,min_calls=50` never opens at 10 calls a second: only the budget limits retries.
    let unlimited = parse_policy_arg("unlimited: window=1s,min_calls=50,retry=3", "x").unwrap();
    let budget = parse_policy_arg(
        "budget: window=1s,min_calls=50,retry=3,retry_budget=20%, 0/s",
        "x",
    )
    .unwrap();
    assert_eq!(budget.retry, 3);
    assert_eq!(
        budget.policy.settings().retry_budget,
        Some(fusebox::RetryBudget {
            percent: 20,
            floor: 0
        })
    );
    assert_eq!(
        budget.policy_arg(),
        "window=1s,min_calls=50,retry=3,retry_budget=20%, 0/s"
    );
    let failures = refs
        .iter()
        .filter(|e| e.outcome() == fusebox_replay::trace::Outcome::Failure)
        .count() as u64;
    assert!(failures >= 250, "the outage fails {failures} calls");

    let free = replay(&refs, &unlimited, &outages);
    assert_eq!(free.openings, 0);
    assert_eq!(
        free.retries,
        2 * failures,
        "every failed call retried twice"
    );
    assert_eq!(free.retries_rejected, 0);

    let limited = replay(&refs, &budget, &outages);
    assert_eq!(limited.openings, 0);
    // 20 % of the first attempts of the last 10 s: about 2 retries a second into the outage.
    assert!(
        limited.retries <= failures / 5 + 40,
        "{} retries for {failures} failed calls",
        limited.retries
    );
    assert!(limited.retries >= failures / 10, "{}", limited.retries);
    assert!(limited.retries_rejected >= failures / 2);

    let report = table(&[free, limited], &outages, refs[0].at_ns(), refs.len());
    assert!(
        report.contains("| policy | retries | rejected by the retry budget |"),
        "{report}"
    );
    assert!(
        report.contains(&format!("| unlimited | {} | 0 |", 2 * failures)),
        "{report}"
    );
}

#[test]
fn retry_and_retry_budget_are_fields_of_policy_files_and_checked() {
    let candidates = parse_policy_file(
        "[policies.guarded]\nconsecutive = 5\nretry = 3\nretry_budget = \"10%, 5/s\"\n",
        "policies.toml",
    )
    .unwrap();
    assert_eq!(candidates[0].retry, 3);
    assert_eq!(
        candidates[0].policy.settings().retry_budget,
        Some(fusebox::RetryBudget {
            percent: 10,
            floor: 5
        })
    );
    assert_eq!(
        candidates[0].attribute_args(),
        "consecutive = 5, retry = 3, retry_budget = \"10%, 5/s\""
    );
    let err = parse_policy_arg("retry_budget=20", "x").unwrap_err();
    assert_eq!(err.field.as_deref(), Some("retry_budget"));
    assert!(err.message.contains("`20%` or `20%, 10/s`"), "{err}");
    let err = parse_policy_arg("retry_budget=0%, 0/s", "x").unwrap_err();
    assert!(err.to_string().contains("rejects every retry"), "{err}");
    let err = parse_policy_arg("retry=0", "x").unwrap_err();
    assert_eq!(err.field.as_deref(), Some("retry"));
}
