//! The `metrics` feature: per-key call counters, the state gauge and transition counters.
#![cfg(feature = "metrics")]

use fusebox::{Policy, Registry};
use metrics_util::CompositeKey;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

fn value(
    snapshot: &[(
        CompositeKey,
        Option<metrics::Unit>,
        Option<metrics::SharedString>,
        DebugValue,
    )],
    name: &str,
    labels: &[(&str, &str)],
) -> Option<String> {
    snapshot.iter().find_map(|(key, _, _, value)| {
        let k = key.key();
        let matches = k.name() == name
            && labels.iter().all(|(l, v)| {
                k.labels()
                    .any(|label| label.key() == *l && label.value() == *v)
            });
        matches.then(|| format!("{value:?}"))
    })
}

#[test]
fn calls_state_and_transitions_are_exported_per_key() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let registry = Registry::new();
        let b = registry
            .breaker("metered", Policy::new().window(3).min_calls(3))
            .unwrap();
        b.try_acquire().unwrap().success();
        b.try_acquire().unwrap().ignore();
        b.try_acquire().unwrap().failure();
        b.try_acquire().unwrap().failure();
        assert!(b.try_acquire().is_err());
    });
    let snap = snapshotter.snapshot().into_vec();
    let calls = |outcome| {
        value(
            &snap,
            "fusebox_calls_total",
            &[("key", "metered"), ("outcome", outcome)],
        )
    };
    assert_eq!(calls("success"), Some("Counter(1)".to_string()));
    assert_eq!(calls("ignored"), Some("Counter(1)".to_string()));
    assert_eq!(calls("failure"), Some("Counter(2)".to_string()));
    assert_eq!(calls("rejected"), Some("Counter(1)".to_string()));
    assert_eq!(
        value(
            &snap,
            "fusebox_transitions_total",
            &[("key", "metered"), ("from", "closed"), ("to", "open")]
        ),
        Some("Counter(1)".to_string())
    );
    assert_eq!(
        value(&snap, "fusebox_state", &[("key", "metered")]),
        Some(format!("{:?}", DebugValue::Gauge(1.0.into())))
    );
}

/// The sum of `fusebox_calls_total{key}` over its outcomes, and each outcome's count.
fn outcomes(
    snapshot: &[(
        CompositeKey,
        Option<metrics::Unit>,
        Option<metrics::SharedString>,
        DebugValue,
    )],
    key: &str,
) -> Vec<(String, u64)> {
    let mut found: Vec<(String, u64)> = snapshot
        .iter()
        .filter_map(|(k, _, _, value)| {
            let k = k.key();
            let label = |name: &str| {
                k.labels()
                    .find(|l| l.key() == name)
                    .map(|l| l.value().to_owned())
            };
            match value {
                DebugValue::Counter(n)
                    if k.name() == fusebox::metrics::CALLS_TOTAL
                        && label("key").as_deref() == Some(key) =>
                {
                    Some((label("outcome").unwrap(), *n))
                }
                _ => None,
            }
        })
        .collect();
    found.sort();
    found
}

#[test]
fn metrics_only_counts_each_call_under_one_outcome_and_a_would_be_rejection_apart() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    const CALLS: u64 = 10;
    metrics::with_local_recorder(&recorder, || {
        let registry = Registry::new();
        let b = registry
            .breaker("shadowed", Policy::new().window(3).min_calls(3))
            .unwrap();
        b.metrics_only();
        b.try_acquire().unwrap().success();
        b.try_acquire().unwrap().success();
        for _ in 2..CALLS {
            // Every call runs: metrics-only mode never rejects.
            b.try_acquire().expect("metrics-only admits").failure();
        }
        // Calls 1–4 were judged (s, s, f, f: the last three are 2/3 failures), the circuit
        // opened, and the other 6 ran although it would have rejected them.
        assert_eq!(b.snapshot().rejected, 6);
    });
    let snap = snapshotter.snapshot().into_vec();
    let outcomes = outcomes(&snap, "shadowed");
    assert_eq!(
        outcomes.iter().map(|(_, n)| n).sum::<u64>(),
        CALLS,
        "one outcome per call: {outcomes:?}"
    );
    assert_eq!(
        outcomes,
        [
            ("failure".to_owned(), 8),
            ("ignored".to_owned(), 0),
            ("rejected".to_owned(), 0),
            ("success".to_owned(), 2)
        ]
    );
    assert_eq!(
        value(
            &snap,
            fusebox::metrics::SHADOW_REJECTED_TOTAL,
            &[("key", "shadowed")]
        ),
        Some("Counter(6)".to_string())
    );
}

#[test]
fn the_state_gauge_values_are_the_documented_ones() {
    use fusebox::State;
    let documented = [
        (State::Closed, 0.0),
        (State::Open, 1.0),
        (State::HalfOpen, 2.0),
        (State::ForcedOpen, 3.0),
        (State::Disabled, 4.0),
    ];
    for (state, value) in documented {
        assert_eq!(fusebox::metrics::state_value(state), value, "{state:?}");
    }
}

#[test]
fn throttled_calls_are_rejected_calls_counted_apart_too() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    const CALLS: u64 = 200;
    let shed = metrics::with_local_recorder(&recorder, || {
        let registry = Registry::new();
        let policy = Policy::new()
            .window(10)
            .min_calls(10)
            .failure_rate(100)
            .throttle(1.0);
        let b = registry.breaker("throttled", policy).unwrap();
        b.try_acquire().unwrap().success();
        for _ in 0..9 {
            b.try_acquire().unwrap().failure();
        }
        // p = (10 - 1) / 11; the admitted calls change nothing the formula reads.
        for _ in 10..CALLS {
            if let Ok(permit) = b.try_acquire() {
                permit.ignore();
            }
        }
        let snapshot = b.snapshot();
        assert_eq!(snapshot.rejected, snapshot.throttled);
        snapshot.throttled
    });
    assert!(shed > 100, "{shed} shed");
    let snap = snapshotter.snapshot().into_vec();
    let outcomes = outcomes(&snap, "throttled");
    assert_eq!(
        outcomes.iter().map(|(_, n)| n).sum::<u64>(),
        CALLS,
        "one outcome per call: {outcomes:?}"
    );
    assert!(
        outcomes.contains(&("rejected".to_owned(), shed)),
        "{outcomes:?}"
    );
    assert_eq!(
        value(
            &snap,
            fusebox::metrics::THROTTLED_TOTAL,
            &[("key", "throttled")]
        ),
        Some(format!("Counter({shed})"))
    );
}

#[test]
fn the_concurrency_limit_gauge_follows_the_bulkhead() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = fusebox::clock::FakeClock::new();
    metrics::with_local_recorder(&recorder, || {
        let registry = Registry::with_clock(clock.clone());
        registry
            .breaker("fixed-bulkhead", Policy::new().max_concurrent(8))
            .unwrap();
        let adaptive = registry
            .breaker(
                "adaptive-bulkhead",
                Policy::new().adaptive_concurrency(2, 200),
            )
            .unwrap();
        // One round of 20 calls whose latency holds, with the limit in use: 21.
        let calls: Vec<_> = (0..20)
            .map(|_| adaptive.try_acquire_owned().unwrap())
            .collect();
        clock.advance(std::time::Duration::from_millis(5));
        calls.into_iter().for_each(|call| call.success());
        assert_eq!(adaptive.snapshot().concurrency_limit, Some(21));
        registry.breaker("no-bulkhead", Policy::new()).unwrap();
    });
    let snap = snapshotter.snapshot().into_vec();
    let limit = |key| value(&snap, "fusebox_concurrency_limit", &[("key", key)]);
    let gauge = |n: f64| Some(format!("{:?}", DebugValue::Gauge(n.into())));
    assert_eq!(limit("fixed-bulkhead"), gauge(8.0));
    assert_eq!(limit("adaptive-bulkhead"), gauge(21.0));
    assert_eq!(limit("no-bulkhead"), None);
}
