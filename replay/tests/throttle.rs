//! `throttle` replays: during a brownout that never opens the circuit, adaptive throttling sheds
//! a share of the calls (fewer failures reach the backend), outside it nothing, and the replay of
//! a throttling policy is the same every time.

use fusebox_replay::generate::{Scenario, generate};
use fusebox_replay::policy::parse_policy_arg;
use fusebox_replay::replay::{OutageRule, find_outages, replay};

#[test]
fn throttling_sheds_calls_during_a_brownout_the_rules_do_not_open_for() {
    // 60 s to 120 s: 40 % of the calls time out, under the 75 % failure rate.
    let calls = generate(Scenario::Brownout, 3);
    let refs = fusebox_replay::trace::events(&calls);
    let outages = find_outages(&refs, OutageRule::default());
    let base = parse_policy_arg("window=50,failure_rate=75", "base").unwrap();
    let throttled = parse_policy_arg("window=50,failure_rate=75,throttle=1.2", "k").unwrap();
    assert_eq!(
        throttled.attribute_args(),
        "window = 50, failure_rate = 75, throttle = 1.2"
    );
    assert_eq!(
        throttled.policy_arg(),
        "window=50,failure_rate=75,throttle=1.2"
    );

    let plain = replay(&refs, &base, &outages);
    assert_eq!(plain.openings, 0, "40 % never reaches 75 %");
    assert_eq!(plain.rejected, 0);

    let run = replay(&refs, &throttled, &outages);
    assert_eq!(run.openings, 0, "throttling opens nothing");
    // About 1 − 1.2 × 0.6 = 28 % of the brownout's 600 calls are shed.
    assert!(
        (100..=250).contains(&run.rejected),
        "{} calls shed: {run:#?}",
        run.rejected
    );
    assert!(run.failures_let_through < plain.failures_let_through);
    // Outside the brownout (1 % noise), nothing is shed: of the trace's 300 slices (0.6 s each),
    // only those of 60 s to 120 s (100 to 200, and the window's tail after it) have calls that
    // succeeded in the recording and were shed.
    let (first, last) = (
        run.wrong_by_slice.iter().position(|&n| n > 0).unwrap(),
        run.wrong_by_slice.iter().rposition(|&n| n > 0).unwrap(),
    );
    assert!(
        first >= 100 && last <= 210,
        "shed from slice {first} to {last}"
    );
    assert!(run.wrongly_rejected > 0 && run.wrongly_rejected < run.rejected);

    let again = replay(&refs, &throttled, &outages);
    assert_eq!(
        (again.rejected, again.wrongly_rejected),
        (run.rejected, run.wrongly_rejected),
        "seeded: the same every time"
    );
}

#[test]
fn a_throttle_below_one_is_refused_with_the_field() {
    let error = parse_policy_arg("window=50,throttle=0.5", "k").unwrap_err();
    assert_eq!(error.field.as_deref(), Some("throttle"));
    assert!(error.message.contains("1..=100"), "{error}");
}
