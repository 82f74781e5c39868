//! The per-call outcome event that recording tools (such as `fusebox-replay`) capture.
//!
//! Every reported call and every rejected one emits one `tracing` event at `TRACE` level, target
//! [`OUTCOME_TARGET`], named `call_outcome`, with the fields `key`, `at_ns` (the registry clock's
//! time of the report, in nanoseconds), `latency_ns` (admission to report, when the call was timed),
//! `outcome` (`success`, `failure`, `ignored` or `rejected`, the words of the `fusebox_calls_total`
//! metric), `reason` (for a rejected call, [`Reason::code`]: `open`, `half_open_full`,
//! `recovering`, `forced_open`, `bulkhead_full`) and `function`.
//!
//! When no subscriber wants the event, the check costs one load of `tracing`'s global level filter
//! and a branch: the clock is not read and nothing is formatted.

use crate::error::Reason;

/// The `tracing` target of the per-call outcome event.
pub const OUTCOME_TARGET: &str = "fusebox::outcome";

/// True when a subscriber wants outcome events (a level check, then the callsite's interest).
#[inline(always)]
pub(crate) fn enabled() -> bool {
    tracing::enabled!(target: OUTCOME_TARGET, tracing::Level::TRACE)
}

/// How a call ended, as the per-call outcome event (`call_outcome`) names it.
#[derive(Clone, Copy)]
pub(crate) enum CallOutcome {
    Success,
    Failure,
    Ignored,
    Rejected(Reason),
}

/// Emits the outcome event (call only when [`enabled`]). A subscriber that panics is contained.
#[cold]
#[inline(never)]
pub(crate) fn emit(
    key: &str,
    at_ns: u64,
    latency_ns: Option<u64>,
    outcome: CallOutcome,
    function: &str,
) {
    let (outcome, reason) = match outcome {
        CallOutcome::Success => ("success", None),
        CallOutcome::Failure => ("failure", None),
        CallOutcome::Ignored => ("ignored", None),
        CallOutcome::Rejected(reason) => ("rejected", Some(reason.code())),
    };
    let _ = std::panic::catch_unwind(|| {
        tracing::trace!(
            target: OUTCOME_TARGET,
            key,
            at_ns,
            latency_ns,
            outcome,
            reason,
            function,
            "call_outcome"
        )
    });
}
