//! The attribute's policy knobs as `Policy` setter calls: the one list both the expansion (which
//! emits them, `Policy::DEFAULT.window(20).open_for(…)`) and the compile-time validation (which
//! makes them on a real `fusebox_policy::Policy` and runs `Policy::validate`) read, so the
//! attribute checks exactly the policy its expansion builds.
//!
//! Adding a knob to the attribute: its field in `PolicyArgs`, its line in `args::NAMES` and in
//! the reading of `args.rs`, and its setter here.

use std::time::Duration;

use fusebox_policy::Policy;
use proc_macro2::{Literal, Span, TokenStream};
use quote::quote;

use crate::args::{PolicyArgs, RecoveryArg, Spanned, WindowArg};

/// One `Policy` setter call, with its checked value and the span of the token it was written as.
#[derive(Clone, Copy)]
pub(crate) enum Setter {
    /// `.window(calls)`.
    Window(Spanned<u32>),
    /// `.time_window(span)`, in nanoseconds.
    TimeWindow(Spanned<u64>),
    /// `.min_calls(calls)`.
    MinCalls(Spanned<u32>),
    /// `.failure_rate(percent)`.
    FailureRate(Spanned<u8>),
    /// `.consecutive(failures)`.
    Consecutive(Spanned<u32>),
    /// `.failure_count(failures)`.
    FailureCount(Spanned<u32>),
    /// `.slow(threshold)`, in nanoseconds.
    Slow(Spanned<u64>),
    /// `.slow_rate(percent)`.
    SlowRate(Spanned<u8>),
    /// `.open_for(wait)`, in nanoseconds.
    OpenFor(Spanned<u64>),
    /// `.open_backoff(factor)`.
    OpenBackoff(Spanned<f64>),
    /// `.open_max(wait)`, in nanoseconds.
    OpenMax(Spanned<u64>),
    /// `.half_open(probes)`.
    HalfOpen(Spanned<u32>),
    /// `.half_open_lease(lease)`, in nanoseconds.
    HalfOpenLease(Spanned<u64>),
    /// `.progressive(phases, min_passes)`.
    Progressive(Spanned<u32>, Spanned<u32>),
    /// `.max_concurrent(calls)`.
    MaxConcurrent(Spanned<u32>),
    /// `.shared(shared)`.
    Shared(Spanned<bool>),
}

/// The setter calls of the written knobs, in the order the expansion makes them. `recovery =
/// probes` is the default and makes no call (with a base it is refused while checking).
pub(crate) fn setters(args: &PolicyArgs) -> Vec<Setter> {
    let window = args.window.map(|window| match window {
        WindowArg::Count(calls) => Setter::Window(calls),
        WindowArg::Time(span) => Setter::TimeWindow(span),
    });
    let recovery = match args.recovery {
        Some(RecoveryArg::Progressive { phases, min_passes }) => {
            Some(Setter::Progressive(phases, min_passes))
        }
        Some(RecoveryArg::Probes) | None => None,
    };
    [
        window,
        args.min_calls.map(Setter::MinCalls),
        args.failure_rate.map(Setter::FailureRate),
        args.consecutive.map(Setter::Consecutive),
        args.failure_count.map(Setter::FailureCount),
        args.slow.map(Setter::Slow),
        args.slow_rate.map(Setter::SlowRate),
        args.open_for.map(Setter::OpenFor),
        args.open_backoff.map(Setter::OpenBackoff),
        args.open_max.map(Setter::OpenMax),
        args.half_open.map(Setter::HalfOpen),
        args.half_open_lease.map(Setter::HalfOpenLease),
        recovery,
        args.max_concurrent.map(Setter::MaxConcurrent),
        args.shared.map(Setter::Shared),
    ]
    .into_iter()
    .flatten()
    .collect()
}

impl Setter {
    /// This call made on `policy` (what the expansion's call does when the program runs).
    pub(crate) fn apply(self, policy: Policy) -> Policy {
        let nanos = |value: Spanned<u64>| Duration::from_nanos(value.value);
        match self {
            Setter::Window(calls) => policy.window(calls.value),
            Setter::TimeWindow(span) => policy.time_window(nanos(span)),
            Setter::MinCalls(calls) => policy.min_calls(calls.value),
            Setter::FailureRate(percent) => policy.failure_rate(percent.value),
            Setter::Consecutive(failures) => policy.consecutive(failures.value),
            Setter::FailureCount(failures) => policy.failure_count(failures.value),
            Setter::Slow(threshold) => policy.slow(nanos(threshold)),
            Setter::SlowRate(percent) => policy.slow_rate(percent.value),
            Setter::OpenFor(wait) => policy.open_for(nanos(wait)),
            Setter::OpenBackoff(factor) => policy.open_backoff(factor.value),
            Setter::OpenMax(wait) => policy.open_max(nanos(wait)),
            Setter::HalfOpen(probes) => policy.half_open(probes.value),
            Setter::HalfOpenLease(lease) => policy.half_open_lease(nanos(lease)),
            Setter::Progressive(phases, min_passes) => {
                policy.progressive(phases.value, min_passes.value)
            }
            Setter::MaxConcurrent(calls) => policy.max_concurrent(calls.value),
            Setter::Shared(shared) => policy.shared(shared.value),
        }
    }

    /// The call as tokens, `.window(20)`, each value located where it was written.
    pub(crate) fn tokens(self) -> TokenStream {
        let u32_ = |value: Spanned<u32>| literal(value, Literal::u32_unsuffixed);
        let u8_ = |value: Spanned<u8>| literal(value, Literal::u8_unsuffixed);
        match self {
            Setter::Window(calls) => {
                let calls = u32_(calls);
                quote!(.window(#calls))
            }
            Setter::TimeWindow(span) => {
                let span = duration(span);
                quote!(.time_window(#span))
            }
            Setter::MinCalls(calls) => {
                let calls = u32_(calls);
                quote!(.min_calls(#calls))
            }
            Setter::FailureRate(percent) => {
                let percent = u8_(percent);
                quote!(.failure_rate(#percent))
            }
            Setter::Consecutive(failures) => {
                let failures = u32_(failures);
                quote!(.consecutive(#failures))
            }
            Setter::FailureCount(failures) => {
                let failures = u32_(failures);
                quote!(.failure_count(#failures))
            }
            Setter::Slow(threshold) => {
                let threshold = duration(threshold);
                quote!(.slow(#threshold))
            }
            Setter::SlowRate(percent) => {
                let percent = u8_(percent);
                quote!(.slow_rate(#percent))
            }
            Setter::OpenFor(wait) => {
                let wait = duration(wait);
                quote!(.open_for(#wait))
            }
            Setter::OpenBackoff(factor) => {
                let factor = literal(factor, Literal::f64_unsuffixed);
                quote!(.open_backoff(#factor))
            }
            Setter::OpenMax(wait) => {
                let wait = duration(wait);
                quote!(.open_max(#wait))
            }
            Setter::HalfOpen(probes) => {
                let probes = u32_(probes);
                quote!(.half_open(#probes))
            }
            Setter::HalfOpenLease(lease) => {
                let lease = duration(lease);
                quote!(.half_open_lease(#lease))
            }
            Setter::Progressive(phases, min_passes) => {
                let phases = u32_(phases);
                let min_passes = u32_(min_passes);
                quote!(.progressive(#phases, #min_passes))
            }
            Setter::MaxConcurrent(calls) => {
                let calls = u32_(calls);
                quote!(.max_concurrent(#calls))
            }
            Setter::Shared(shared) => {
                let value = syn::LitBool::new(shared.value, shared.span);
                quote!(.shared(#value))
            }
        }
    }

    /// The span of the token that set `field`, as `PolicyError::field` names it.
    pub(crate) fn span_of(self, field: &str) -> Option<Span> {
        let span = match (self, field) {
            (Setter::Window(v), "window") | (Setter::MinCalls(v), "min_calls") => v.span,
            (Setter::TimeWindow(v), "window") => v.span,
            (Setter::FailureRate(v), "failure_rate") | (Setter::SlowRate(v), "slow_rate") => v.span,
            (Setter::Consecutive(v), "consecutive")
            | (Setter::FailureCount(v), "failure_count")
            | (Setter::HalfOpen(v), "half_open")
            | (Setter::MaxConcurrent(v), "max_concurrent")
            | (Setter::Progressive(v, _), "phases")
            | (Setter::Progressive(_, v), "min_passes") => v.span,
            (Setter::Slow(v), "slow")
            | (Setter::OpenFor(v), "open_for")
            | (Setter::OpenMax(v), "open_max")
            | (Setter::HalfOpenLease(v), "half_open_lease") => v.span,
            (Setter::OpenBackoff(v), "open_backoff") => v.span,
            (Setter::Shared(v), "shared") => v.span,
            _ => return None,
        };
        Some(span)
    }
}

/// A `Duration` of the given nanoseconds, located where it was written.
pub(crate) fn duration(nanos: Spanned<u64>) -> TokenStream {
    let nanos = literal(nanos, Literal::u64_unsuffixed);
    quote!(::core::time::Duration::from_nanos(#nanos))
}

/// An unsuffixed literal located where the value was written.
pub(crate) fn literal<T>(value: Spanned<T>, make: fn(T) -> Literal) -> Literal {
    let mut literal = make(value.value);
    literal.set_span(value.span);
    literal
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use fusebox_policy::{Recovery, Window};
    use quote::quote;

    use super::setters;
    use crate::validate::policy_of;

    /// Every knob written becomes its setter, both as tokens and on the policy the attribute
    /// validates.
    #[test]
    fn every_knob_becomes_its_setter_call() {
        let args = crate::args::parse(quote!(
            key = "k",
            window = 20,
            min_calls = 5,
            failure_rate = 40,
            consecutive = 3,
            failure_count = 4,
            slow = "2s",
            slow_rate = 80,
            open_for = "30s",
            open_backoff = 2,
            open_max = "5m",
            half_open = 2,
            half_open_lease = "10s",
            recovery = progressive(phases = 3, min_passes = 5),
            max_concurrent = 8
        ))
        .args
        .unwrap();
        let calls: Vec<String> = setters(&args.policy)
            .into_iter()
            .map(|setter| setter.tokens().to_string())
            .collect();
        assert_eq!(
            calls,
            [
                ". window (20)",
                ". min_calls (5)",
                ". failure_rate (40)",
                ". consecutive (3)",
                ". failure_count (4)",
                ". slow (:: core :: time :: Duration :: from_nanos (2000000000))",
                ". slow_rate (80)",
                ". open_for (:: core :: time :: Duration :: from_nanos (30000000000))",
                ". open_backoff (2.0)",
                ". open_max (:: core :: time :: Duration :: from_nanos (300000000000))",
                ". half_open (2)",
                ". half_open_lease (:: core :: time :: Duration :: from_nanos (10000000000))",
                ". progressive (3 , 5)",
                ". max_concurrent (8)",
            ]
        );
        let p = policy_of(&args.policy).unwrap();
        assert_eq!(p.get_window(), Window::Count(20));
        assert_eq!(p.get_min_calls(), 5);
        assert_eq!(p.get_failure_rate(), Some(40));
        assert_eq!(p.get_consecutive(), Some(3));
        assert_eq!(p.get_failure_count(), Some(4));
        assert_eq!(p.get_slow(), Some(Duration::from_secs(2)));
        assert_eq!(p.get_slow_rate(), 80);
        assert_eq!(p.get_open_for(), Duration::from_secs(30));
        assert!((p.get_open_backoff() - 2.0).abs() < f64::EPSILON);
        assert_eq!(p.get_open_max(), Duration::from_secs(300));
        assert_eq!(p.get_half_open(), 2);
        assert_eq!(p.get_half_open_lease(), Duration::from_secs(10));
        assert_eq!(
            p.get_recovery(),
            Recovery::Progressive {
                phases: 3,
                min_passes: 5
            }
        );
        assert_eq!(p.get_max_concurrent(), Some(8));
        assert!(p.validate().is_ok());
    }
}
