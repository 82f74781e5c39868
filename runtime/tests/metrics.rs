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
