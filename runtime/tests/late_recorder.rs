//! A `metrics` recorder installed after breakers registered their metrics: one WARN naming the
//! keys, once per process. (Its own test binary: it installs the process's global recorder.)
#![cfg(feature = "metrics")]

use fusebox::{Policy, Registry};

#[test]
fn a_recorder_installed_after_the_first_call_is_named_once_with_the_keys_it_misses() {
    let path = std::env::temp_dir().join(format!("fusebox-late-{}.log", std::process::id()));
    let file = std::fs::File::create(&path).unwrap();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(std::sync::Mutex::new(file))
        .with_ansi(false)
        .finish();
    let text = || std::fs::read_to_string(&path).unwrap();
    tracing::subscriber::with_default(subscriber, || {
        let registry = Registry::new();
        let payment = registry.breaker("payment", Policy::new()).unwrap();
        let search = registry.breaker("search", Policy::new()).unwrap();
        payment.try_acquire().unwrap().success();
        assert!(
            !text().contains("late_recorder"),
            "no recorder yet: nothing to say"
        );

        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().unwrap();
        payment.try_acquire().unwrap().success();
        search.try_acquire().unwrap().failure();
        let late = registry.breaker("late", Policy::new()).unwrap();
        late.try_acquire().unwrap().success();

        let text = text();
        assert_eq!(text.matches("late_recorder").count(), 1, "once: {text}");
        assert!(
            text.contains(
                "a `metrics` recorder was installed after these keys registered their metrics: \
                 `payment`, `search` (2 in all); their metrics go to no recorder; install the \
                 recorder before the first call"
            ),
            "{text}"
        );
        // The key made after the recorder reports to it; the two made before do not.
        let keys: Vec<String> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .flat_map(|(k, ..)| {
                k.key()
                    .labels()
                    .map(|l| l.value().to_owned())
                    .collect::<Vec<_>>()
            })
            .collect();
        assert!(keys.iter().any(|k| k == "late"), "{keys:?}");
        assert!(!keys.iter().any(|k| k == "payment"), "{keys:?}");
    });
    std::fs::remove_file(&path).unwrap();
}
