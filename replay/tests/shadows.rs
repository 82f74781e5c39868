//! A shadow policy tried live and recorded: the trace keeps its verdicts apart from the calls,
//! and replaying its policy text over the same calls rejects exactly what it would have rejected
//! live, beside the policy in force.

use std::time::Duration;

use fusebox::clock::FakeClock;
use fusebox::{Policy, Registry, State};
use fusebox_replay::policy::parse_policy_arg;
use fusebox_replay::record::{RecordLayer, outcomes};
use fusebox_replay::replay::{OutageRule, find_outages, replay};
use fusebox_replay::shadows::{compare, live_shadows};
use fusebox_replay::trace::{self, Outcome};
use tracing_subscriber::prelude::*;

use crate::support::memory::Memory;

const IN_FORCE: &str = "window=100,min_calls=20,failure_rate=60,open_for=10s";
const TIGHT: &str = "tight: window=10,min_calls=5,failure_rate=30,open_for=2s";

/// A recorded run of `payment` with the shadow `tight`: the trace's text and what the snapshot
/// says `tight` did.
fn recorded_run() -> (String, fusebox::ShadowSnapshot) {
    let memory = Memory::default();
    let (layer, recorder) = RecordLayer::new(memory.clone(), 100_000);
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::registry().with(layer.with_filter(outcomes())),
    );
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    let in_force = parse_policy_arg(IN_FORCE, "in force").unwrap().policy;
    let tight = TIGHT.split_once(": ").unwrap().1.replace(',', ", ");
    let shadow_text: &'static str = Box::leak(format!("tight: {tight}").into_boxed_str());
    let breaker = registry
        .breaker("payment", in_force.shadow(shadow_text))
        .unwrap();
    // Bursts of failures the policy in force tolerates (at most 40 % of 100) and `tight` does not.
    let mut rng = fastrand::Rng::with_seed(11);
    for step in 0..600u64 {
        clock.advance(Duration::from_millis(rng.u64(20..80)));
        let permit = breaker
            .try_acquire()
            .expect("the policy in force never opens");
        let burst = (100..130).contains(&step) || (400..420).contains(&step);
        if burst && rng.u32(0..100) < 60 || rng.u32(0..100) < 2 {
            permit.failure();
        } else {
            permit.success();
        }
    }
    recorder.flush().unwrap();
    let snapshot = breaker.snapshot();
    assert_eq!(snapshot.state, State::Closed);
    let live_tight = snapshot.shadows[0].clone();
    assert!(live_tight.opened >= 2, "{live_tight:?}");
    let text = String::from_utf8(memory.0.lock().unwrap().clone()).unwrap();
    (text, live_tight)
}

#[test]
fn a_shadow_tried_live_replays_to_the_same_rejections() {
    let (text, live_tight) = recorded_run();
    let lines = trace::parse(&text).expect("a trace with shadow lines parses");
    assert_eq!(
        lines.len(),
        1200,
        "a line per call and one per shadow verdict"
    );
    let live = live_shadows(&lines);
    assert_eq!(live.len(), 1);
    assert_eq!(
        (live[0].key.as_str(), live[0].name.as_str()),
        ("payment", "tight")
    );
    assert_eq!(
        (live[0].rejected, live[0].admitted),
        (live_tight.rejected, live_tight.admitted),
        "the trace says what the snapshot says"
    );

    let events = trace::events(&lines);
    assert_eq!(
        events.len(),
        600,
        "the replay reads the calls, not the shadow lines"
    );
    assert!(
        lines
            .iter()
            .filter(|c| c.shadow.is_none())
            .all(|c| c.outcome != Outcome::Rejected)
    );
    let outages = find_outages(&events, OutageRule::default());
    let runs = [
        replay(
            &events,
            &parse_policy_arg(IN_FORCE, "in force").unwrap(),
            &outages,
        ),
        replay(&events, &parse_policy_arg(TIGHT, "p").unwrap(), &outages),
    ];
    assert_eq!(
        runs[0].rejected, 0,
        "the policy in force rejected nothing, live or replayed"
    );
    assert_eq!(runs[1].name, "tight");
    assert_eq!(
        runs[1].rejected, live_tight.rejected,
        "the replay rejects what the shadow would have"
    );
    assert_eq!(runs[1].openings, live_tight.opened);
    let table = compare(&live, "payment", &runs);
    let expected = format!(
        "| tight | {} | {} | {} | {} |",
        live_tight.rejected, live_tight.admitted, runs[1].rejected, runs[1].openings
    );
    assert!(table.contains(&expected), "{table}");
    assert!(table.contains("| in force | – | – | 0 | 0 |"), "{table}");
}

/// The command line prints the same comparison for a trace file.
#[test]
fn the_command_line_prints_the_live_shadows_beside_their_replay() {
    let (text, live_tight) = recorded_run();
    let path = std::env::temp_dir().join(format!("fusebox-shadows-{}.jsonl", std::process::id()));
    std::fs::write(&path, &text).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fusebox-replay"))
        .arg(&path)
        .args([
            "--policy",
            "in force: window=100,min_calls=20,failure_rate=60,open_for=10s",
        ])
        .args(["--policy", TIGHT, "--no-chart"])
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Shadow policies tried live:"), "{stdout}");
    // The replay of `tight` rejects what it rejected live, and opens as often.
    let (rejected, admitted, opened) =
        (live_tight.rejected, live_tight.admitted, live_tight.opened);
    let expected = format!("| tight | {rejected} | {admitted} | {rejected} | {opened} |");
    assert!(stdout.contains(&expected), "{stdout}");
    assert!(stdout.contains("| in force | – | – | 0 | 0 |"), "{stdout}");
}

/// A trace written before shadows, or by a key without any, reads as before; a shadow line's
/// field is checked like any other.
#[test]
fn shadow_lines_are_kept_apart_from_calls() {
    let text = "{\"at_ns\":1,\"key\":\"k\",\"outcome\":\"failure\"}\n\
                {\"at_ns\":1,\"key\":\"k\",\"outcome\":\"rejected\",\"reason\":\"open\",\"shadow\":\"tight\"}\n\
                {\"at_ns\":2,\"key\":\"k\",\"outcome\":\"success\"}\n";
    let read = trace::read(std::io::Cursor::new(text), None).unwrap();
    assert_eq!(read.events.len(), 2);
    let lines = trace::parse(text).unwrap();
    assert_eq!(
        lines[1].to_line(),
        "{\"at_ns\":1,\"key\":\"k\",\"outcome\":\"rejected\",\"reason\":\"open\",\"shadow\":\"tight\"}"
    );
    let error = trace::parse("{\"at_ns\":1,\"key\":\"k\",\"outcome\":\"success\",\"shadow\":3}")
        .unwrap_err();
    assert_eq!(error.field, Some("shadow"));
    let policy = Policy::new().shadow("tight: window = 10");
    assert!(policy.validate().is_ok());
}
