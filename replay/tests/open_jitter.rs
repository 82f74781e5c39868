//! `open_jitter` replays: it moves when an open circuit probes (so it changes the replay's
//! outcome), the replay stays reproducible, and an open-wait function cannot be named.

use fusebox_replay::generate::{Scenario, generate};
use fusebox_replay::policy::parse_policy_arg;
use fusebox_replay::replay::{OutageRule, find_outages, replay};

#[test]
fn jitter_moves_the_probes_and_replays_the_same_twice() {
    let calls = generate(Scenario::Flapping, 3);
    let refs = fusebox_replay::trace::events(&calls);
    let outages = find_outages(&refs, OutageRule::default());
    let plain = parse_policy_arg("consecutive=5,open_for=5s", "plain").unwrap();
    let jittered =
        parse_policy_arg("consecutive=5,open_for=5s,open_jitter=100", "jittered").unwrap();
    assert_eq!(jittered.policy.settings().open_jitter, 100);
    assert_eq!(
        jittered.policy_arg(),
        "consecutive=5,open_for=5s,open_jitter=100"
    );
    let (a, b) = (
        replay(&refs, &plain, &outages),
        replay(&refs, &jittered, &outages),
    );
    assert!(a.openings > 0, "the scenario opens the circuit");
    // Each wait is 5 s to 10 s instead of 5 s: the circuit stays open longer in all.
    assert!(
        b.open_ns > a.open_ns,
        "{} ns open against {} ns",
        b.open_ns,
        a.open_ns
    );
    let again = replay(&refs, &jittered, &outages);
    let instants =
        |run: &fusebox_replay::replay::Run| run.changes.iter().map(|c| c.at_ns).collect::<Vec<_>>();
    assert_eq!(
        instants(&again),
        instants(&b),
        "a seeded draw: reproducible"
    );
    assert_eq!(again.open_ns, b.open_ns);
}

#[test]
fn an_open_wait_function_and_a_jitter_over_100_are_rejected() {
    let error = parse_policy_arg("open_for=waits::by_failures", "f").unwrap_err();
    assert_eq!(error.field.as_deref(), Some("open_for"));
    assert!(error.message.contains("names a function"), "{error}");
    let error = parse_policy_arg("open_jitter=120", "j").unwrap_err();
    assert_eq!(error.field.as_deref(), Some("open_jitter"));
}
