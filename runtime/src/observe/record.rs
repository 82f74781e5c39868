//! The per-call outcome event that recording tools (such as `fusebox-replay`) capture.
//!
//! Every reported call and every rejected one emits one `tracing` event at `TRACE` level, target
//! [`OUTCOME_TARGET`], named `call_outcome`, with the fields `key`, `at_ns` (the registry clock's
//! time of the report, in nanoseconds), `latency_ns` (admission to report, when the call was timed),
//! `outcome` (`success`, `failure`, `ignored` or `rejected`, the words of the `fusebox_calls_total`
//! metric), `reason` (for a rejected call, [`Reason::code`]: `open`, `half_open_full`,
//! `recovering`, `forced_open`, `bulkhead_full`, `throttled`) and `function`.
//!
//! Every such call also opens and closes one `INFO` span, target [`SPAN_TARGET`], named
//! `fusebox.call`, a child of the caller's current span, with the fields `fusebox.key`,
//! `fusebox.state` (the state the call was admitted in, or the state that rejected it),
//! `fusebox.outcome`, `fusebox.reason` (rejected calls only) and `fusebox.function`: with
//! `tracing-opentelemetry` each annotated call's breaker decision is an attribute-carrying span of
//! the request's trace, with no code of yours. The same values are recorded on the caller's
//! current span when it declares fields of those names (`#[instrument(fields(fusebox.outcome =
//! tracing::field::Empty))]`); `tracing` records only fields a span declares. The span is made
//! when the call settles, so it has no duration of its own. `RUST_LOG=fusebox::call=off` (or any
//! filter that leaves the target out) turns it off.
//!
//! A key with shadow policies ([`Policy::shadow`](crate::Policy::shadow)) adds, after each of
//! its calls' event, one `shadow_outcome` event per shadow on the same target with the same
//! `key` and `at_ns`, the field `shadow` (the shadow's name), and `outcome` the shadow's verdict:
//! the call's outcome when it would have let it through, `rejected` (`reason` `open`) when not.
//! A recorder that does not know the field `shadow` reads such an event as a call: filter them
//! out by it (`fusebox-replay` keeps them apart).
//!
//! When no subscriber wants the event or the span, the check costs one load of `tracing`'s global
//! level filter and a branch: the clock is not read, no span is made and nothing is formatted.

use crate::error::Reason;
use crate::state::State;

/// The `tracing` target of the per-call outcome event.
pub const OUTCOME_TARGET: &str = "fusebox::outcome";

/// The `tracing` target of the per-call `fusebox.call` span.
pub const SPAN_TARGET: &str = "fusebox::call";

/// True when a subscriber wants outcome events (a level check, then the callsite's interest).
#[inline(always)]
pub(crate) fn enabled() -> bool {
    tracing::enabled!(target: OUTCOME_TARGET, tracing::Level::TRACE)
}

/// True when a subscriber wants the `fusebox.call` span.
#[inline(always)]
fn span_enabled() -> bool {
    tracing::span_enabled!(target: SPAN_TARGET, tracing::Level::INFO)
}

/// True when a subscriber wants the outcome event or the call's span: one load of the global
/// level filter when neither is enabled (`INFO` is the less verbose of the two levels).
#[inline(always)]
pub(crate) fn wanted() -> bool {
    tracing::level_filters::STATIC_MAX_LEVEL >= tracing::Level::INFO
        && tracing::level_filters::LevelFilter::current() >= tracing::Level::INFO
        && (span_enabled() || enabled())
}

/// How a call ended, as the per-call outcome event (`call_outcome`) names it.
#[derive(Clone, Copy)]
pub(crate) enum CallOutcome {
    Success,
    Failure,
    Ignored,
    Rejected(Reason),
}

impl CallOutcome {
    /// The event's `outcome` and `reason`.
    fn names(self) -> (&'static str, Option<&'static str>) {
        match self {
            CallOutcome::Success => ("success", None),
            CallOutcome::Failure => ("failure", None),
            CallOutcome::Ignored => ("ignored", None),
            CallOutcome::Rejected(reason) => ("rejected", Some(reason.code())),
        }
    }
}

/// Emits the outcome event and the call's span, each when a subscriber wants it (call only when
/// [`wanted`]). `state`: the state the call was admitted in, or the one that rejected it. A
/// subscriber that panics is contained.
#[cold]
#[inline(never)]
pub(crate) fn emit(
    key: &str,
    state: State,
    at_ns: u64,
    latency_ns: Option<u64>,
    outcome: CallOutcome,
    function: &str,
) {
    let (outcome, reason) = outcome.names();
    let _ = std::panic::catch_unwind(|| {
        if enabled() {
            tracing::trace!(
                target: OUTCOME_TARGET,
                key,
                at_ns,
                latency_ns,
                outcome,
                reason,
                function,
                "call_outcome"
            );
        }
        if span_enabled() {
            let state = state.as_str();
            let current = tracing::Span::current();
            current.record("fusebox.key", key);
            current.record("fusebox.state", state);
            current.record("fusebox.outcome", outcome);
            if let Some(reason) = reason {
                current.record("fusebox.reason", reason);
            }
            let _call = tracing::info_span!(
                target: SPAN_TARGET,
                "fusebox.call",
                fusebox.key = key,
                fusebox.state = state,
                fusebox.outcome = outcome,
                fusebox.reason = reason,
                fusebox.function = function,
            );
        }
    });
}

/// Emits a shadow policy's verdict on a call of `key` settled at `at_ns` (see the module
/// docs), when a subscriber wants outcome events.
#[cold]
pub(crate) fn emit_shadow(key: &str, shadow: &str, at_ns: u64, outcome: CallOutcome) {
    let (outcome, reason) = outcome.names();
    let _ = std::panic::catch_unwind(|| {
        if enabled() {
            tracing::trace!(
                target: OUTCOME_TARGET,
                key,
                at_ns,
                outcome,
                reason,
                shadow,
                "shadow_outcome"
            );
        }
    });
}
