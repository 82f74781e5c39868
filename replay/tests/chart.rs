//! What the charts show: half-open spans drawn on top, a gap in the latency line where no call
//! succeeded, detection delays and wrongly rejected calls marked, and the search's scatter.

use fusebox_replay::chart::{render, scatter};
use fusebox_replay::generate::{Scenario, generate};
use fusebox_replay::policy::parse_policy_arg;
use fusebox_replay::replay::{OutageRule, find_outages, replay};
use fusebox_replay::search::{grid, scores, search};
use fusebox_replay::trace::events;

const ORANGE: &str = "fill=\"#FB8C00\"";
const GREEN: &str = "fill=\"#C8E6C9\"";
const RED: &str = "fill=\"#E53935\"";

fn hard_outage_chart(policy: &str) -> String {
    let calls = events(&generate(Scenario::HardOutage, 1));
    let outages = find_outages(&calls, OutageRule::default());
    let run = replay(&calls, &parse_policy_arg(policy, "p").unwrap(), &outages);
    assert!(run.probes > 0, "the candidate goes half-open: {run:?}");
    render(&calls, &[run], &outages).unwrap()
}

#[test]
fn half_open_spans_are_drawn_over_the_others_so_they_show() {
    let svg = hard_outage_chart("quick: consecutive=5,open_for=5s");
    let last_other = svg.rfind(GREEN).max(svg.rfind(RED)).unwrap();
    let first_orange = svg.find(ORANGE).expect("half-open spans are drawn");
    assert!(
        first_orange > last_other,
        "an orange span drawn before a green or red one is hidden under it"
    );
}

#[test]
fn the_latency_line_has_a_gap_where_no_call_succeeded() {
    let svg = hard_outage_chart("quick: consecutive=5,open_for=5s");
    // One line before the outage (every call fails in it), one after: no drop to zero between.
    assert_eq!(svg.matches("stroke=\"#0000FF\"").count(), 2, "{svg}");
}

#[test]
fn detection_delays_and_wrongly_rejected_calls_are_marked() {
    let svg = hard_outage_chart("quick: consecutive=5,open_for=5s");
    assert!(
        svg.contains("\n0.40s\n"),
        "the delay is written at the outage"
    );
    assert!(
        svg.contains("stroke=\"#7B1FA2\""),
        "wrongly rejected calls are ticked"
    );
    let calls = events(&generate(Scenario::HardOutage, 1));
    let outages = find_outages(&calls, OutageRule::default());
    let numb = parse_policy_arg("numb: window=1s,min_calls=50", "p").unwrap();
    let run = replay(&calls, &numb, &outages);
    let svg = render(&calls, &[run], &outages).unwrap();
    assert!(svg.contains("\nmissed\n"), "a missed outage says so");
    assert!(!svg.contains("stroke=\"#7B1FA2\""), "it rejects nothing");
}

#[test]
fn the_search_scatter_has_every_candidate_and_the_front() {
    let calls = events(&generate(Scenario::HardOutage, 1));
    let outages = find_outages(&calls, OutageRule::default());
    let candidates = grid();
    let (runs, front) = search(&calls, &candidates, &outages);
    let svg = scatter(&scores(&runs, &outages), &front).unwrap();
    assert_eq!(
        svg.matches("<circle").count(),
        candidates.len() + front.len()
    );
    assert_eq!(
        svg.matches("fill=\"#FF0000\"").count(),
        front.len(),
        "the front is red"
    );
}
