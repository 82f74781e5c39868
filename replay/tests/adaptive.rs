//! `max_concurrent = adaptive(…)` replays: the trace's calls are admitted at their report time
//! minus their latency, so a latency spike fills the bulkhead and the adaptive limit rejects.

use fusebox_replay::policy::{Setting, parse_policy_arg};
use fusebox_replay::replay::replay;
use fusebox_replay::trace::{Event, Outcome};

const MS: u64 = 1_000_000;

/// A call every millisecond for 30 s, taking 10 ms, except those admitted from 10 s to 20 s,
/// which take 200 ms (a latency spike: 200 calls in flight instead of 10); all succeed.
fn spike() -> Vec<Event> {
    let mut calls: Vec<(u64, u64)> = (0..30_000u64)
        .map(|i| {
            let admitted = i * MS;
            let latency = if (10_000..20_000).contains(&i) {
                200 * MS
            } else {
                10 * MS
            };
            (admitted + latency, latency)
        })
        .collect();
    calls.sort_unstable();
    calls
        .into_iter()
        .map(|(at, latency)| Event::new(at, Outcome::Success, Some(latency)))
        .collect()
}

#[test]
fn an_adaptive_bulkhead_rejects_during_a_latency_spike_and_a_fixed_one_does_not() {
    let events = spike();
    let rejected = |policy: &str| {
        let candidate = parse_policy_arg(policy, "c").unwrap();
        replay(&events, &candidate, &[]).rejected
    };
    assert_eq!(rejected("window=100"), 0, "no bulkhead");
    assert_eq!(
        rejected("window=100,max_concurrent=300"),
        0,
        "a fixed limit above the spike"
    );
    assert!(
        rejected("window=100,max_concurrent=50") > 1_000,
        "a fixed limit below it"
    );
    let adaptive = rejected("window=100,max_concurrent=adaptive(5..300)");
    assert!(
        adaptive > 1_000 && adaptive < 10_000,
        "the adaptive limit sheds part of the spike: {adaptive} rejected"
    );
    // Outside the spike nothing is rejected: 10 calls in flight are well under the limit.
    let quiet: Vec<Event> = events.iter().copied().take(9_000).collect();
    let candidate = parse_policy_arg("max_concurrent=adaptive(5..300)", "c").unwrap();
    assert_eq!(replay(&quiet, &candidate, &[]).rejected, 0);
}

#[test]
fn the_adaptive_spelling_is_read_and_written_back() {
    let candidate = parse_policy_arg("max_concurrent=adaptive(2..200)", "c").unwrap();
    assert_eq!(
        candidate.settings,
        vec![("max_concurrent", Setting::Adaptive(2, 200))]
    );
    assert_eq!(candidate.policy_arg(), "max_concurrent=adaptive(2..200)");
    assert_eq!(
        candidate.attribute_args(),
        "max_concurrent = \"adaptive(2..200)\""
    );
    let plain = parse_policy_arg("max_concurrent=adaptive", "c").unwrap();
    assert_eq!(
        plain.settings,
        vec![("max_concurrent", Setting::Adaptive(1, 1000))]
    );
    let error = parse_policy_arg("max_concurrent=adaptive(9..2)", "c").unwrap_err();
    assert_eq!(error.field.as_deref(), Some("max_concurrent"), "{error}");
    let error = parse_policy_arg("max_concurrent=adaptve", "c").unwrap_err();
    assert!(
        error.to_string().contains("adaptive(floor..ceiling)"),
        "{error}"
    );
}
