//! Transition events: names, levels and fields, as a log pipeline would see them.

use std::time::Duration;

use crate::common::ApiError;
use crate::common::capture::{Captured, capture, named};
use fusebox::circuit_breaker;

fake_registry!(CLOCK, REGISTRY);

#[circuit_breaker(key = "events", registry = REGISTRY, window = 4, min_calls = 4, open_for = "2s", failure = [Timeout])]
fn backend(fail: bool) -> Result<(), ApiError> {
    if fail { Err(ApiError::Timeout) } else { Ok(()) }
}

#[test]
fn every_transition_emits_an_event_with_key_states_rate_calls_and_function() {
    let all = capture(|| {
        backend(false).unwrap();
        for _ in 0..3 {
            let _ = backend(true);
        }
        CLOCK.advance(Duration::from_secs(2));
        backend(false).unwrap();
    });
    // Per-call outcome events (target `fusebox::outcome`) are covered below.
    let events: Vec<Captured> = all.into_iter().filter(|e| e.target == "fusebox").collect();
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
    assert_eq!(opened.fields["function"], "attribute::events::backend");
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

#[test]
fn a_snapshot_right_after_opening_says_why_it_opened() {
    use fusebox::{Policy, Registry, State, Trigger, clock::FakeClock};
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    let b = registry
        .breaker(
            "why",
            Policy::new()
                .window(4)
                .min_calls(4)
                .open_for(Duration::from_secs(2)),
        )
        .unwrap();
    assert_eq!(b.snapshot().last_transition, None);
    let events = capture(|| {
        b.try_acquire().unwrap().success();
        for _ in 0..3 {
            b.try_acquire().unwrap().failure();
        }
    });
    clock.advance(Duration::from_millis(1500));
    let snap = b.snapshot();
    assert_eq!(
        (snap.state, snap.calls, snap.failure_rate),
        (State::Open, 0, 0.0)
    );
    let last = snap.last_transition.expect("the opening is kept");
    assert_eq!(
        (last.from, last.to, last.trigger),
        (State::Closed, State::Open, Trigger::FailureRate)
    );
    assert_eq!((last.calls, last.failures, last.failure_rate), (4, 3, 75.0));
    assert_eq!(last.elapsed, Duration::from_millis(1500));
    assert_eq!(
        named(&events, "circuit_opened")[0].fields["trigger"],
        "failure_rate"
    );

    // A failed probe, then an operator.
    clock.advance(Duration::from_millis(500));
    b.try_acquire().unwrap().failure();
    let last = b.snapshot().last_transition.unwrap();
    assert_eq!(
        (last.from, last.to, last.trigger),
        (State::HalfOpen, State::Open, Trigger::ProbeFailed)
    );
    b.force_open();
    let last = b.snapshot().last_transition.unwrap();
    assert_eq!(
        (last.to, last.trigger, last.function),
        (State::ForcedOpen, Trigger::Operator, "operator")
    );

    // The consecutive rule names itself.
    let run = registry
        .breaker("run", Policy::new().rate_off().consecutive(2))
        .unwrap();
    run.try_acquire().unwrap().failure();
    run.try_acquire().unwrap().failure();
    let last = run.snapshot().last_transition.unwrap();
    assert_eq!(
        (last.to, last.trigger, last.calls),
        (State::Open, Trigger::Consecutive, 2)
    );
}

#[test]
fn a_circuit_stuck_open_is_reported_once_per_episode() {
    use fusebox::{Policy, Registry, State, clock::FakeClock};
    const S: Duration = Duration::from_secs(1);
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    let b = registry
        .breaker(
            "stuck",
            Policy::new()
                .window(1)
                .min_calls(1)
                .open_for(S)
                .stuck_open(3, Duration::from_secs(3600)),
        )
        .unwrap();
    let failed_recoveries = |n: usize| {
        for _ in 0..n {
            clock.advance(S);
            b.try_acquire().expect("probe").failure();
        }
    };
    let events = capture(|| {
        b.try_acquire().unwrap().failure();
        failed_recoveries(2);
    });
    assert!(
        named(&events, "circuit_stuck_open").is_empty(),
        "2 of 3 is not stuck"
    );
    let events = capture(|| failed_recoveries(3));
    let stuck = named(&events, "circuit_stuck_open");
    assert_eq!(stuck.len(), 1, "once per episode");
    assert_eq!(stuck[0].level, tracing::Level::WARN);
    assert_eq!(stuck[0].fields["key"], "stuck");
    assert_eq!(stuck[0].fields["failed_recoveries"], "3");
    assert_eq!(stuck[0].fields["open_secs"], "3.0");
    // Recovery ends the episode; the next one is reported again.
    clock.advance(S);
    b.try_acquire().unwrap().success();
    assert_eq!(b.state(), State::Closed);
    let events = capture(|| {
        b.try_acquire().unwrap().failure();
        failed_recoveries(3);
    });
    assert_eq!(named(&events, "circuit_stuck_open").len(), 1);

    // The time rule: open for 10 s with no failed recovery counted yet (a long open wait).
    let slow = registry
        .breaker(
            "stuck-long",
            Policy::new()
                .window(1)
                .min_calls(1)
                .open_for(Duration::from_secs(10))
                .stuck_open(0, Duration::from_secs(10)),
        )
        .unwrap();
    let events = capture(|| {
        slow.try_acquire().unwrap().failure();
        clock.advance(Duration::from_secs(9));
        assert!(slow.try_acquire().is_err());
    });
    assert!(named(&events, "circuit_stuck_open").is_empty());
    let events = capture(|| {
        clock.advance(Duration::from_secs(1));
        // The recovery attempt after 10 s open reports it (and the probe then fails).
        slow.try_acquire().unwrap().failure();
        clock.advance(Duration::from_secs(10));
        slow.try_acquire().unwrap().failure();
    });
    let stuck = named(&events, "circuit_stuck_open");
    assert_eq!(stuck.len(), 1);
    assert_eq!(stuck[0].fields["open_secs"], "10.0");
    // An operator's reset ends the episode without an event.
    slow.reset();
    assert_eq!(slow.state(), State::Closed);
}

#[test]
fn a_panicking_hook_is_reported_as_an_error_naming_key_and_transition() {
    use fusebox::{Policy, Registry, State};
    let registry = Registry::new();
    registry.on_transition(|t| {
        if t.to == State::ForcedOpen {
            panic!("pager is down");
        }
    });
    let b = registry.breaker("hooked", Policy::new()).unwrap();
    let events = capture(|| b.force_open());
    assert_eq!(b.state(), State::ForcedOpen, "the transition stands");
    let reported: Vec<_> = events
        .iter()
        .filter(|e| e.fields.get("event").map(String::as_str) == Some("hook_panicked"))
        .collect();
    assert_eq!(reported.len(), 1);
    let error = reported[0];
    assert_eq!(error.level, tracing::Level::ERROR);
    assert_eq!(error.fields["key"], "hooked");
    assert_eq!(
        (error.fields["from"].as_str(), error.fields["to"].as_str()),
        ("closed", "forced_open")
    );
    assert_eq!(error.fields["panic"], "pager is down");
    assert!(error.fields["message"].contains("`on_transition` hook panicked"));
    assert!(
        !error.fields["message"].contains("hooked"),
        "keys are fields, never the message"
    );
}

/// The `function` field of every event emitted while `run` runs.
fn functions_of(run: impl FnOnce()) -> Vec<String> {
    capture(run)
        .iter()
        .filter(|event| event.target == "fusebox")
        .map(|event| event.fields["function"].clone())
        .collect()
}

mod clients {
    use super::{ApiError, REGISTRY, circuit_breaker};

    pub(crate) struct HostClient<T>(pub T);

    impl<T> HostClient<T> {
        #[circuit_breaker(key = "events-inherent", registry = REGISTRY, consecutive = 1, failure = [Timeout])]
        pub(crate) fn authorize(&self, fail: bool) -> Result<(), ApiError> {
            if fail { Err(ApiError::Timeout) } else { Ok(()) }
        }

        #[circuit_breaker(key = "events-timeout", registry = REGISTRY, consecutive = 1, timeout = "5s", failure = [Timeout])]
        pub(crate) async fn capture(&self, fail: bool) -> Result<(), ApiError> {
            if fail { Err(ApiError::Timeout) } else { Ok(()) }
        }
    }

    pub(crate) trait Backend {
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
    assert_eq!(
        inherent,
        ["attribute::events::clients::HostClient::authorize"]
    );
    let trait_impl = functions_of(|| {
        let _ = client.call("events-trait", true);
    });
    assert_eq!(trait_impl, ["attribute::events::clients::HostClient::call"]);
    let attempts = functions_of(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let _ = runtime.block_on(client.capture(true));
    });
    assert_eq!(
        attempts,
        ["attribute::events::clients::HostClient::capture"]
    );
}

#[test]
fn every_call_emits_a_trace_outcome_event_with_key_time_latency_and_outcome() {
    use fusebox::{Policy, Registry, clock::FakeClock};
    let ms = Duration::from_millis;
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    let b = registry
        .breaker(
            "rec",
            Policy::new().window(4).min_calls(3).open_for(ms(1_000)),
        )
        .unwrap();
    let events = capture(|| {
        clock.advance(ms(5));
        let p = b.try_acquire().unwrap();
        clock.advance(ms(7));
        p.success();
        b.try_acquire().unwrap().ignore();
        b.try_acquire().unwrap().failure();
        b.try_acquire().unwrap().failure(); // opens
        let _ = b.try_acquire(); // rejected
    });
    let outcomes: Vec<&Captured> = events
        .iter()
        .filter(|e| e.target == fusebox::OUTCOME_TARGET)
        .collect();
    let field = |i: usize, name: &str| outcomes[i].fields.get(name).map(String::as_str);
    let kinds: Vec<_> = (0..outcomes.len()).map(|i| field(i, "outcome")).collect();
    assert_eq!(
        kinds,
        ["success", "ignored", "failure", "failure", "rejected"].map(Some)
    );
    for (i, e) in outcomes.iter().enumerate() {
        assert_eq!(e.level, tracing::Level::TRACE);
        assert_eq!(field(i, "message"), Some("call_outcome"));
        assert_eq!(field(i, "key"), Some("rec"));
        assert_eq!(
            field(i, "at_ns"),
            Some("12000000"),
            "the registry clock's time"
        );
    }
    assert_eq!(field(0, "latency_ns"), Some("7000000"));
    assert_eq!(field(1, "latency_ns"), Some("0"));
    assert_eq!(
        (field(4, "latency_ns"), field(4, "reason")),
        (None, Some("open"))
    );
    // The outcome that trips the circuit is emitted before the transition it causes.
    let order: Vec<_> = events
        .iter()
        .map(|e| e.fields.get("message").map(String::as_str).unwrap_or(""))
        .collect();
    let opened = order.iter().position(|m| *m == "circuit_opened").unwrap();
    assert_eq!(opened, 4, "{order:?}");
}

/// A span as captured: its name and every field given at creation or recorded later (strings as
/// written), with `#id` and `#parent`.
type SeenSpan = (String, std::collections::BTreeMap<String, String>);

/// The spans a subscriber saw.
#[derive(Clone, Default)]
struct Spans(std::sync::Arc<std::sync::Mutex<Vec<SeenSpan>>>);

struct SpanFields<'a>(&'a mut std::collections::BTreeMap<String, String>);

impl tracing::field::Visit for SpanFields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S> tracing_subscriber::Layer<S> for Spans
where
    S: tracing::Subscriber + for<'l> tracing_subscriber::registry::LookupSpan<'l>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut fields = std::collections::BTreeMap::new();
        attrs.record(&mut SpanFields(&mut fields));
        fields.insert("#id".to_owned(), id.into_u64().to_string());
        let parent = _ctx.current_span().id().map_or(0, |p| p.into_u64());
        fields.insert("#parent".to_owned(), parent.to_string());
        self.0
            .lock()
            .unwrap()
            .push((attrs.metadata().name().to_owned(), fields));
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut all = self.0.lock().unwrap();
        let id = id.into_u64().to_string();
        if let Some((_, fields)) = all.iter_mut().find(|(_, f)| f["#id"] == id) {
            values.record(&mut SpanFields(fields));
        }
    }
}

#[circuit_breaker(key = "traced", registry = REGISTRY, window = 2, min_calls = 2, open_for = "2s", failure = [Timeout])]
fn traced(fail: bool) -> Result<(), ApiError> {
    if fail { Err(ApiError::Timeout) } else { Ok(()) }
}

#[test]
fn each_call_records_key_state_outcome_and_reason_on_its_span() {
    use tracing_subscriber::layer::SubscriberExt;
    let spans = Spans::default();
    let subscriber = tracing_subscriber::registry().with(spans.clone());
    tracing::subscriber::with_default(subscriber, || {
        // The second call (one failure in a window of two) opens the circuit.
        for fail in [false, true, false] {
            // A request span declaring the fields: the call fills them in.
            let request = tracing::info_span!(
                "request",
                fusebox.key = tracing::field::Empty,
                fusebox.state = tracing::field::Empty,
                fusebox.outcome = tracing::field::Empty,
                fusebox.reason = tracing::field::Empty,
            );
            let _entered = request.enter();
            let _ = traced(fail);
        }
    });
    let all = spans.0.lock().unwrap().clone();
    let calls: Vec<String> = all
        .iter()
        .filter(|(name, _)| name == "fusebox.call")
        .map(|(_, f)| {
            format!(
                "{} {} {} {}",
                f["fusebox.key"],
                f["fusebox.state"],
                f["fusebox.outcome"],
                f.get("fusebox.reason").map_or("-", String::as_str)
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            "traced closed success -",
            "traced closed failure -",
            "traced open rejected open",
        ]
    );
    // Each `fusebox.call` span is a child of the request span it ran in, and names the function.
    let requests: Vec<&(String, _)> = all.iter().filter(|(n, _)| n == "request").collect();
    let call_spans: Vec<&(String, _)> = all.iter().filter(|(n, _)| n == "fusebox.call").collect();
    for (request, call) in requests.iter().zip(&call_spans) {
        assert_eq!(call.1["#parent"], request.1["#id"]);
        assert!(
            call.1["fusebox.function"].ends_with("::traced"),
            "{:?}",
            call.1
        );
    }
    // The request span's own fields.
    let last = &requests[2].1;
    assert_eq!(last["fusebox.key"], "traced");
    assert_eq!(last["fusebox.state"], "open");
    assert_eq!(last["fusebox.outcome"], "rejected");
    assert_eq!(last["fusebox.reason"], "open");
    assert_eq!(requests[0].1["fusebox.outcome"], "success");
}

#[test]
fn no_span_is_made_when_no_subscriber_wants_it() {
    use tracing_subscriber::layer::SubscriberExt;
    let spans = Spans::default();
    // A subscriber that turns the `fusebox::call` target off.
    let filter = tracing_subscriber::filter::Targets::new()
        .with_default(tracing::Level::TRACE)
        .with_target(
            fusebox::SPAN_TARGET,
            tracing_subscriber::filter::LevelFilter::OFF,
        );
    let subscriber = tracing_subscriber::registry().with(tracing_subscriber::Layer::with_filter(
        spans.clone(),
        filter,
    ));
    tracing::subscriber::with_default(subscriber, || {
        let _ = traced(false);
    });
    let all = spans.0.lock().unwrap();
    assert!(
        all.iter().all(|(name, _)| name != "fusebox.call"),
        "{:?}",
        *all
    );
}

#[test]
fn a_dynamic_key_goes_in_a_field_never_in_a_message() {
    use fusebox::{Policy, Registry};
    let registry: &'static Registry = Box::leak(Box::new(Registry::new()));
    registry.set_max_keys(1);
    let forged = "host\n2026-01-01T00:00:00Z  WARN fusebox: operator admin ran reset";
    let events = capture(|| {
        // `held` is found again, so it is in use: the registry is full and nothing is idle.
        registry.dynamic("held", Policy::new());
        registry.dynamic("held", Policy::new());
        let _ = registry.dynamic(forged, Policy::new());
    });
    let overflow: Vec<&Captured> = events
        .iter()
        .filter(|e| e.fields.get("key").map(String::as_str) == Some(forged))
        .collect();
    assert_eq!(overflow.len(), 1, "{events:?}");
    for event in &events {
        assert!(!event.message().contains('\n'), "{event:?}");
        assert!(!event.message().contains("operator admin"), "{event:?}");
    }
}
