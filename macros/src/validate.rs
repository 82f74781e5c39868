//! The attribute's policy arguments run through the runtime's own validation.
//!
//! [`policy_of`] translates the arguments into the `fusebox_policy::Policy` setter calls the
//! expansion makes, and [`check`] runs `Policy::validate`, the check the runtime runs when the
//! breaker is registered, reporting a refused field at the token of the argument that set it.
//! The argument checks in `args` report the common mistakes first with their own messages; this
//! one catches whatever they let through, so the attribute never accepts a policy the runtime
//! would refuse.

use std::time::Duration;

use fusebox_policy::Policy;
use proc_macro2::Span;

use crate::args::{PolicyArgs, RecoveryArg, WindowArg};

/// The policy the expansion builds from `args` (over the default; `None` with `policy = CONST`,
/// whose fields are only known when the program runs).
pub(crate) fn policy_of(args: &PolicyArgs) -> Option<Policy> {
    if args.base.is_some() {
        return None;
    }
    let mut p = Policy::new();
    match args.window {
        Some(WindowArg::Count(n)) => p = p.window(n.value),
        Some(WindowArg::Time(span)) => p = p.time_window(Duration::from_nanos(span.value)),
        None => {}
    }
    if let Some(v) = args.min_calls {
        p = p.min_calls(v.value);
    }
    if let Some(v) = args.failure_rate {
        p = p.failure_rate(v.value);
    }
    if let Some(v) = args.consecutive {
        p = p.consecutive(v.value);
    }
    if let Some(v) = args.slow {
        p = p.slow(Duration::from_nanos(v.value));
    }
    if let Some(v) = args.slow_rate {
        p = p.slow_rate(v.value);
    }
    if let Some(v) = args.open_for {
        p = p.open_for(Duration::from_nanos(v.value));
    }
    if let Some(v) = args.open_backoff {
        p = p.open_backoff(v.value);
    }
    if let Some(v) = args.open_max {
        p = p.open_max(Duration::from_nanos(v.value));
    }
    if let Some(v) = args.half_open {
        p = p.half_open(v.value);
    }
    if let Some(v) = args.half_open_lease {
        p = p.half_open_lease(Duration::from_nanos(v.value));
    }
    match args.recovery {
        Some(RecoveryArg::Progressive { phases, min_passes }) => {
            p = p.progressive(phases.value, min_passes.value);
        }
        Some(RecoveryArg::Probes) | None => {}
    }
    if let Some(v) = args.max_concurrent {
        p = p.max_concurrent(v.value);
    }
    Some(p)
}

/// The span of the argument that set `field` (as `PolicyError::field` names it).
fn span_of(args: &PolicyArgs, field: &str) -> Option<Span> {
    let span = |v: Option<Span>| v;
    match field {
        "window" => span(args.window.map(|w| match w {
            WindowArg::Count(n) => n.span,
            WindowArg::Time(t) => t.span,
        })),
        "min_calls" => span(args.min_calls.map(|v| v.span)),
        "failure_rate" => args
            .failure_rate
            .map(|v| v.span)
            .or(args.consecutive.map(|v| v.span)),
        "consecutive" => args.consecutive.map(|v| v.span),
        "slow" => args.slow.map(|v| v.span),
        "slow_rate" => args.slow_rate.map(|v| v.span),
        "open_for" => args.open_for.map(|v| v.span),
        "open_backoff" => args.open_backoff.map(|v| v.span),
        "open_max" => args
            .open_max
            .map(|v| v.span)
            .or(args.open_backoff.map(|v| v.span)),
        "half_open" => args.half_open.map(|v| v.span),
        "half_open_lease" => args.half_open_lease.map(|v| v.span),
        "phases" => match args.recovery {
            Some(RecoveryArg::Progressive { phases, .. }) => Some(phases.span),
            _ => None,
        },
        "min_passes" => match args.recovery {
            Some(RecoveryArg::Progressive { min_passes, .. }) => Some(min_passes.span),
            _ => None,
        },
        "max_concurrent" => args.max_concurrent.map(|v| v.span),
        _ => None,
    }
}

/// Runs `Policy::validate` on the policy of `args`; a refusal is reported at the token of the
/// argument that set the refused field (the attribute when no argument did).
pub(crate) fn check(args: &PolicyArgs) -> syn::Result<()> {
    let Some(policy) = policy_of(args) else {
        return Ok(());
    };
    policy.validate().map_err(|e| {
        let span = span_of(args, e.field()).unwrap_or_else(Span::call_site);
        syn::Error::new(span, e.to_string())
    })
}
