//! A `tracing` layer that keeps every event of the thread it runs on, with its level, target and
//! fields as strings, for tests that assert on what fusebox reports.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};

/// One captured event.
#[derive(Debug, Clone)]
pub(crate) struct Captured {
    pub level: tracing::Level,
    pub target: String,
    /// Every field by name, `message` included, formatted with `Debug` (strings as written).
    pub fields: BTreeMap<String, String>,
}

impl Captured {
    /// The event's message (empty when it has none).
    pub(crate) fn message(&self) -> &str {
        self.fields.get("message").map_or("", String::as_str)
    }
}

/// The capturing layer; clones share the captured events.
#[derive(Clone, Default)]
pub(crate) struct Capture(pub Arc<Mutex<Vec<Captured>>>);

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
            target: event.metadata().target().to_string(),
            fields,
        });
    }
}

/// Runs `f` with a capturing subscriber on this thread; returns the captured events.
pub(crate) fn capture(f: impl FnOnce()) -> Vec<Captured> {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    tracing::subscriber::with_default(subscriber, f);
    capture.0.lock().unwrap().clone()
}

/// The events whose message is `name`.
pub(crate) fn named<'a>(events: &'a [Captured], name: &str) -> Vec<&'a Captured> {
    events.iter().filter(|e| e.message() == name).collect()
}
