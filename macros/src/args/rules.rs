//! Checks between arguments, run once every argument is read: `min_calls` within the window,
//! `slow_rate` needs `slow`, `open_max` at least `open_for`, `backoff` and `deadline` need
//! `retry`, `hedge` excludes `retry`, `hedge_max` needs `hedge`. What they let through is then judged by the runtime's own `Policy::validate`
//! (`validate.rs`).

use std::collections::HashMap;

use proc_macro2::Span;

use super::bounds::{DEFAULT_OPEN_FOR_NANOS, DEFAULT_OPEN_MAX_NANOS, DEFAULT_WINDOW};
use super::{AttemptArgs, OpenForArg, PolicyArgs, RecoveryArg, WindowArg};
use crate::duration;
use crate::errors::Errors;

/// The rules between arguments.
pub(super) fn check_all(
    errors: &mut Errors,
    policy: &PolicyArgs,
    attempts: &AttemptArgs,
    seen: &HashMap<String, Span>,
) {
    check_policy(errors, policy, seen);
    check_attempts(errors, attempts, seen);
}

/// `min_calls` is at most a count window (a time window has no upper bound).
pub(super) fn check_min_calls(errors: &mut Errors, policy: &PolicyArgs) {
    let Some(min_calls) = policy.min_calls else {
        return;
    };
    let (window, which) = match (policy.window, &policy.base) {
        (Some(WindowArg::Count(window)), _) => (Some(u64::from(window.value)), ""),
        (Some(WindowArg::Time(_)), _) => (None, ""),
        (None, None) => (Some(DEFAULT_WINDOW), ", the default"),
        // The window of a `policy = CONST` is only known when the program runs.
        (None, Some(_)) => (None, ""),
    };
    if let Some(window) = window.filter(|&window| u64::from(min_calls.value) > window) {
        errors.push(syn::Error::new(
            min_calls.span,
            format!(
                "`min_calls` ({}) is greater than `window` ({window}{which}); \
                 lower `min_calls` or raise `window`",
                min_calls.value
            ),
        ));
    }
}

/// Checks between policy arguments. With `policy = CONST` the base's fields are only known when
/// the program runs, so a check that needs one of them is left to the runtime's validation.
fn check_policy(errors: &mut Errors, policy: &PolicyArgs, seen: &HashMap<String, Span>) {
    let based = policy.base.is_some();
    if let (Some(&span), false, false) = (seen.get("slow_rate"), seen.contains_key("slow"), based) {
        errors.push(syn::Error::new(
            span,
            "`slow_rate` has no effect without `slow`; add `slow = \"2s\"` to say which calls \
             are slow, or remove `slow_rate`",
        ));
    }
    // The wait the circuit starts with: written, the default, or unknown (the base's).
    if let (Some(OpenForArg::Function(function)), Some(backoff)) =
        (&policy.open_for, policy.open_backoff)
    {
        let function = quote::ToTokens::to_token_stream(function)
            .to_string()
            .replace(' ', "");
        errors.push(syn::Error::new(
            backoff.span,
            format!(
                "`open_backoff` has no effect with `open_for = {function}`: the function is given \
                 the failed recoveries and grows the wait itself; remove `open_backoff`"
            ),
        ));
    }
    // (An open-wait function is capped by `open_max` alone: nothing to compare.)
    let open_for = match (&policy.open_for, based) {
        (Some(OpenForArg::Wait(open_for)), _) => Some((open_for.value, "")),
        (Some(OpenForArg::Function(_)), _) => None,
        (None, false) => Some((DEFAULT_OPEN_FOR_NANOS, ", the default")),
        (None, true) => None,
    };
    if let (Some(open_max), Some((open_for, which))) = (policy.open_max, open_for)
        && open_max.value < open_for
    {
        errors.push(syn::Error::new(
            open_max.span,
            format!(
                "`open_max` ({}) is shorter than `open_for` ({}{which}); `open_max` caps the \
                 wait that `open_backoff` grows from `open_for`: raise `open_max` or lower \
                 `open_for`",
                duration::show(open_max.value),
                duration::show(open_for),
            ),
        ));
    }
    if let (Some(backoff), None, Some((open_for, _))) =
        (policy.open_backoff, policy.open_max, open_for)
        && open_for > DEFAULT_OPEN_MAX_NANOS
    {
        errors.push(syn::Error::new(
            backoff.span,
            format!(
                "`open_backoff` grows the wait up to `open_max` (\"5m\", the default), which is \
                 shorter than `open_for` ({}); add `open_max` of at least `open_for`",
                duration::show(open_for),
            ),
        ));
    }
    if let (Some(&span), Some(RecoveryArg::Probes), true) =
        (seen.get("recovery"), policy.recovery, based)
    {
        errors.push(syn::Error::new(
            span,
            "`recovery = probes` cannot override the recovery of `policy = …`; build the \
             `const` policy without `.progressive(…)` instead",
        ));
    }
}

/// `hedge` and `retry` both send more attempts; `hedge_max` needs `hedge`.
fn check_hedge(errors: &mut Errors, seen: &HashMap<String, Span>) {
    if let (Some(&span), true) = (seen.get("hedge"), seen.contains_key("retry")) {
        errors.push(syn::Error::new(
            span,
            "`hedge` and `retry` cannot be combined: both send more attempts. `retry = 3` tries \
             again after a failure, `hedge = \"p95\"` sends a second attempt beside a slow \
             one; keep one of them",
        ));
    }
    if let (Some(&span), false) = (seen.get("hedge_max"), seen.contains_key("hedge")) {
        errors.push(syn::Error::new(
            span,
            "`hedge_max` has no effect without `hedge`: it bounds a hedged call's attempts in \
             flight; add `hedge = \"p95\"` (or a delay like `hedge = \"50ms\"`), or remove \
             `hedge_max`",
        ));
    }
}

/// `backoff` and `deadline` only act between attempts, so they need `retry` above 1.
fn check_attempts(errors: &mut Errors, attempts: &AttemptArgs, seen: &HashMap<String, Span>) {
    check_hedge(errors, seen);
    let retried = match attempts.retry {
        Some(retry) => retry.value > 1,
        // `retry` was written but refused: already reported.
        None => seen.contains_key("retry"),
    };
    if retried {
        return;
    }
    let without = match attempts.retry {
        Some(_) => "with `retry = 1`",
        None => "without `retry`",
    };
    if let Some(&span) = seen.get("backoff") {
        errors.push(syn::Error::new(
            span,
            format!(
                "`backoff` has no effect {without}: it is the wait between attempts; add \
                 `retry = 3` (attempts in total) or remove `backoff`"
            ),
        ));
    }
    if let Some(&span) = seen.get("deadline") {
        errors.push(syn::Error::new(
            span,
            format!(
                "`deadline` has no effect {without}: it is the budget checked before each \
                 retry; add `retry = 3` (attempts in total), or bound the single attempt with \
                 `timeout` instead"
            ),
        ));
    }
}
