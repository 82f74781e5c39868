//! Transition events: names, levels and fields, as a log pipeline would see them.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::ApiError;
use fusebox::circuit_breaker;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};

#[derive(Debug, Clone)]
struct Captured {
    level: tracing::Level,
    fields: BTreeMap<String, String>,
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Captured>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(Captured {
            level: *event.metadata().level(),
            fields,
        });
    }
}

fake_registry!(CLOCK, REGISTRY);

#[circuit_breaker(key = "events", registry = REGISTRY, window = 4, min_calls = 4, open_for = "2s", failure = [Timeout])]
fn backend(fail: bool) -> Result<(), ApiError> {
    if fail { Err(ApiError::Timeout) } else { Ok(()) }
}

#[test]
fn every_transition_emits_an_event_with_key_states_rate_calls_and_function() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    tracing::subscriber::with_default(subscriber, || {
        backend(false).unwrap();
        for _ in 0..3 {
            let _ = backend(true);
        }
        CLOCK.advance(Duration::from_secs(2));
        backend(false).unwrap();
    });
    let events = capture.0.lock().unwrap().clone();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e.fields["message"].as_str())
        .collect();
    assert_eq!(
        names,
        ["circuit_opened", "circuit_half_open", "circuit_closed"]
    );
    let opened = &events[0];
    assert_eq!(opened.level, tracing::Level::WARN);
    assert_eq!(opened.fields["key"], "events");
    assert_eq!(opened.fields["from"], "closed");
    assert_eq!(opened.fields["to"], "open");
    assert_eq!(opened.fields["failure_rate"], "75.0");
    assert_eq!(opened.fields["calls"], "4");
    assert_eq!(opened.fields["function"], "events::backend");
    assert_eq!(events[1].level, tracing::Level::INFO);
    assert_eq!(
        (
            events[1].fields["from"].as_str(),
            events[1].fields["to"].as_str()
        ),
        ("open", "half_open")
    );
    assert_eq!(events[2].level, tracing::Level::INFO);
    assert_eq!(
        (
            events[2].fields["from"].as_str(),
            events[2].fields["to"].as_str()
        ),
        ("half_open", "closed")
    );
}

/// The `function` field of every event emitted while `run` runs.
fn functions_of(run: impl FnOnce()) -> Vec<String> {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    tracing::subscriber::with_default(subscriber, run);
    let events = capture.0.lock().unwrap().clone();
    events
        .iter()
        .map(|event| event.fields["function"].clone())
        .collect()
}

mod clients {
    use super::{ApiError, REGISTRY, circuit_breaker};

    pub struct HostClient<T>(pub T);

    impl<T> HostClient<T> {
        #[circuit_breaker(key = "events-inherent", registry = REGISTRY, consecutive = 1, failure = [Timeout])]
        pub fn authorize(&self, fail: bool) -> Result<(), ApiError> {
            if fail { Err(ApiError::Timeout) } else { Ok(()) }
        }

        #[circuit_breaker(key = "events-timeout", registry = REGISTRY, consecutive = 1, timeout = "5s", failure = [Timeout])]
        pub async fn capture(&self, fail: bool) -> Result<(), ApiError> {
            if fail { Err(ApiError::Timeout) } else { Ok(()) }
        }
    }

    pub trait Backend {
        fn call(&self, host: &str, fail: bool) -> Result<(), ApiError>;
    }

    impl Backend for HostClient<u8> {
        #[circuit_breaker(key = host, registry = REGISTRY, consecutive = 1, failure = [Timeout])]
        fn call(&self, host: &str, fail: bool) -> Result<(), ApiError> {
            if fail { Err(ApiError::Timeout) } else { Ok(()) }
        }
    }
}

#[test]
fn a_method_s_events_name_its_type() {
    use clients::{Backend, HostClient};
    let client = HostClient(0_u8);
    let inherent = functions_of(|| {
        let _ = client.authorize(true);
    });
    assert_eq!(inherent, ["events::clients::HostClient::authorize"]);
    let trait_impl = functions_of(|| {
        let _ = client.call("events-trait", true);
    });
    assert_eq!(trait_impl, ["events::clients::HostClient::call"]);
    let attempts = functions_of(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let _ = runtime.block_on(client.capture(true));
    });
    assert_eq!(attempts, ["events::clients::HostClient::capture"]);
}
