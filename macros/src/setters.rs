//! The attribute's policy knobs as `Policy` setter calls: the one list both the expansion (which
//! emits them, `Policy::DEFAULT.window(20).open_for(…)`) and the compile-time validation (which
//! makes them on a real `fusebox_policy::Policy` and runs `Policy::validate`) read, so the
//! attribute checks exactly the policy its expansion builds.
//!
//! [`Setter`] is made from the knob table (`fusebox_policy::with_knobs!`, one row per knob); what
//! a value of each [`Kind`] does (its call on a policy, its tokens, its span) is written once here, per kind.

use std::time::Duration;

use fusebox_policy::{OpenContext, Others, Policy, RetryBudget};
use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned as _;

use crate::args::{
    ConcurrencyArg, OpenForArg, PolicyArgs, QuorumArg, RecoveryArg, Spanned, WindowArg,
};
use crate::tokens::respan;

/// The type of a knob's checked value: how it becomes its setter call.
pub(crate) trait Kind: Clone {
    /// The `Policy` setter(s) the value is passed to.
    type Setters;
    /// False when the value makes no call (`recovery = probes`, the default).
    fn calls(&self) -> bool {
        true
    }
    /// The call made on `policy` (what the expansion's call does when the program runs).
    fn apply(self, policy: Policy, set: Self::Setters) -> Policy;
    /// The call as tokens, `.window(20)`, given the setters' names, each value located where it
    /// was written; `private` is the runtime's private module (for values that name a type).
    fn tokens(self, names: &[&str], private: &TokenStream) -> TokenStream;
    /// The span of the token that set `field` (as `PolicyError::field` names it), for the knob
    /// called `knob`.
    fn span_of(self, knob: &str, field: &str) -> Option<Span>;
}

/// A value passed to its setter as written: a count, a percentage, a factor or a flag.
pub(crate) trait Plain: Copy {
    /// The value as a token located at `span`.
    fn token(self, span: Span) -> TokenStream;
}

impl Plain for u32 {
    fn token(self, span: Span) -> TokenStream {
        literal(Spanned { value: self, span }, Literal::u32_unsuffixed).into_token_stream()
    }
}

impl Plain for u8 {
    fn token(self, span: Span) -> TokenStream {
        literal(Spanned { value: self, span }, Literal::u8_unsuffixed).into_token_stream()
    }
}

impl Plain for f64 {
    fn token(self, span: Span) -> TokenStream {
        literal(Spanned { value: self, span }, Literal::f64_unsuffixed).into_token_stream()
    }
}

impl Plain for bool {
    fn token(self, span: Span) -> TokenStream {
        syn::LitBool::new(self, span).into_token_stream()
    }
}

/// The name of a setter as a method-call token.
fn method(name: &str) -> Ident {
    Ident::new(name, Span::call_site())
}

impl<T: Plain> Kind for Spanned<T> {
    type Setters = fn(Policy, T) -> Policy;
    fn apply(self, policy: Policy, set: Self::Setters) -> Policy {
        set(policy, self.value)
    }
    fn tokens(self, names: &[&str], _private: &TokenStream) -> TokenStream {
        let (name, value) = (method(names[0]), self.value.token(self.span));
        quote!(.#name(#value))
    }
    fn span_of(self, knob: &str, field: &str) -> Option<Span> {
        (field == knob).then_some(self.span)
    }
}

/// A duration, in nanoseconds.
impl Kind for Spanned<u64> {
    type Setters = fn(Policy, Duration) -> Policy;
    fn apply(self, policy: Policy, set: Self::Setters) -> Policy {
        set(policy, Duration::from_nanos(self.value))
    }
    fn tokens(self, names: &[&str], _private: &TokenStream) -> TokenStream {
        let (name, value) = (method(names[0]), duration(self));
        quote!(.#name(#value))
    }
    fn span_of(self, knob: &str, field: &str) -> Option<Span> {
        (field == knob).then_some(self.span)
    }
}

/// What an error the classification does not count does, named through the runtime's private
/// module (`__private::Others::Success`).
impl Kind for Spanned<Others> {
    type Setters = fn(Policy, Others) -> Policy;
    fn apply(self, policy: Policy, set: Self::Setters) -> Policy {
        set(policy, self.value)
    }
    fn tokens(self, names: &[&str], private: &TokenStream) -> TokenStream {
        let name = method(names[0]);
        let variant = match self.value {
            Others::Success => Ident::new("Success", self.span),
            _ => Ident::new("Ignore", self.span),
        };
        quote!(.#name(#private::Others::#variant))
    }
    fn span_of(self, knob: &str, field: &str) -> Option<Span> {
        (field == knob).then_some(self.span)
    }
}

/// A group's name, passed to the setter as a string literal.
impl Kind for Spanned<&'static str> {
    type Setters = fn(Policy, &'static str) -> Policy;
    fn apply(self, policy: Policy, set: Self::Setters) -> Policy {
        set(policy, self.value)
    }
    fn tokens(self, names: &[&str], _private: &TokenStream) -> TokenStream {
        let name = method(names[0]);
        let mut text = Literal::string(self.value);
        text.set_span(self.span);
        quote!(.#name(#text))
    }
    fn span_of(self, knob: &str, field: &str) -> Option<Span> {
        (field == knob).then_some(self.span)
    }
}

/// A retry budget: its ratio and floor, passed to the setter as two literals.
impl Kind for Spanned<RetryBudget> {
    type Setters = fn(Policy, u16, u32) -> Policy;
    fn apply(self, policy: Policy, set: Self::Setters) -> Policy {
        set(policy, self.value.percent, self.value.floor)
    }
    fn tokens(self, names: &[&str], _private: &TokenStream) -> TokenStream {
        let name = method(names[0]);
        let at = |value| Spanned {
            value,
            span: self.span,
        };
        let percent = literal(at(u32::from(self.value.percent)), Literal::u32_unsuffixed);
        let floor = literal(at(self.value.floor), Literal::u32_unsuffixed);
        quote!(.#name(#percent, #floor))
    }
    fn span_of(self, knob: &str, field: &str) -> Option<Span> {
        (field == knob).then_some(self.span)
    }
}

/// A count window (the first setter) or a time window (the second).
impl Kind for WindowArg {
    type Setters = (fn(Policy, u32) -> Policy, fn(Policy, Duration) -> Policy);
    fn apply(self, policy: Policy, (count, time): Self::Setters) -> Policy {
        match self {
            WindowArg::Count(calls) => calls.apply(policy, count),
            WindowArg::Time(span) => span.apply(policy, time),
        }
    }
    fn tokens(self, names: &[&str], private: &TokenStream) -> TokenStream {
        match self {
            WindowArg::Count(calls) => calls.tokens(&names[..1], private),
            WindowArg::Time(span) => span.tokens(&names[1..], private),
        }
    }
    fn span_of(self, knob: &str, field: &str) -> Option<Span> {
        match self {
            WindowArg::Count(calls) => calls.span_of(knob, field),
            WindowArg::Time(span) => span.span_of(knob, field),
        }
    }
}

/// A fixed wait (the first setter) or an open-wait function (the second). The function's call
/// is located at its path, bound to a `fn(&OpenContext) -> Duration` first, so a function of
/// another signature is a type mismatch reported there. The attribute's own validation cannot
/// call the function: it validates the policy with a stand-in.
impl Kind for OpenForArg {
    type Setters = (
        fn(Policy, Duration) -> Policy,
        fn(Policy, fn(&OpenContext) -> Duration) -> Policy,
    );
    fn apply(self, policy: Policy, (wait, function): Self::Setters) -> Policy {
        match self {
            OpenForArg::Wait(nanos) => nanos.apply(policy, wait),
            OpenForArg::Function(_) => function(policy, |_| Duration::ZERO),
        }
    }
    fn tokens(self, names: &[&str], private: &TokenStream) -> TokenStream {
        match self {
            OpenForArg::Wait(nanos) => nanos.tokens(&names[..1], private),
            OpenForArg::Function(path) => {
                let name = method(names[1]);
                let span = path.span();
                let local = Ident::new("__fusebox_open_for", Span::mixed_site());
                let ty = respan(
                    quote!(fn(&#private::OpenContext) -> ::core::time::Duration),
                    span,
                );
                quote_spanned!(span=> .#name({
                    let #local: #ty = #path;
                    #local
                }))
            }
        }
    }
    fn span_of(self, knob: &str, field: &str) -> Option<Span> {
        match self {
            OpenForArg::Wait(nanos) => nanos.span_of(knob, field),
            OpenForArg::Function(path) => (field == knob).then(|| path.span()),
        }
    }
}

/// A fixed bulkhead (the first setter) or an adaptive one, with its floor and ceiling (the
/// second).
impl Kind for ConcurrencyArg {
    type Setters = (fn(Policy, u32) -> Policy, fn(Policy, u32, u32) -> Policy);
    fn apply(self, policy: Policy, (fixed, adaptive): Self::Setters) -> Policy {
        match self {
            ConcurrencyArg::Fixed(calls) => calls.apply(policy, fixed),
            ConcurrencyArg::Adaptive(range) => adaptive(policy, range.value.0, range.value.1),
        }
    }
    fn tokens(self, names: &[&str], private: &TokenStream) -> TokenStream {
        match self {
            ConcurrencyArg::Fixed(calls) => calls.tokens(&names[..1], private),
            ConcurrencyArg::Adaptive(range) => {
                let name = method(names[1]);
                let floor = range.value.0.token(range.span);
                let ceiling = range.value.1.token(range.span);
                quote!(.#name(#floor, #ceiling))
            }
        }
    }
    fn span_of(self, knob: &str, field: &str) -> Option<Span> {
        match self {
            ConcurrencyArg::Fixed(calls) => calls.span_of(knob, field),
            ConcurrencyArg::Adaptive(range) => (field == knob).then_some(range.span),
        }
    }
}

/// A number of replicas (the first setter) or a share of them (the second).
impl Kind for QuorumArg {
    type Setters = (fn(Policy, u32) -> Policy, fn(Policy, u8) -> Policy);
    fn apply(self, policy: Policy, (replicas, share): Self::Setters) -> Policy {
        match self {
            QuorumArg::Replicas(n) => n.apply(policy, replicas),
            QuorumArg::Share(percent) => percent.apply(policy, share),
        }
    }
    fn tokens(self, names: &[&str], private: &TokenStream) -> TokenStream {
        match self {
            QuorumArg::Replicas(n) => n.tokens(&names[..1], private),
            QuorumArg::Share(percent) => percent.tokens(&names[1..], private),
        }
    }
    fn span_of(self, knob: &str, field: &str) -> Option<Span> {
        match self {
            QuorumArg::Replicas(n) => n.span_of(knob, field),
            QuorumArg::Share(percent) => percent.span_of(knob, field),
        }
    }
}

/// Progressive recovery, whose two settings are refused by their own names; `probes` (the
/// default) makes no call.
impl Kind for RecoveryArg {
    type Setters = fn(Policy, u32, u32) -> Policy;
    fn calls(&self) -> bool {
        matches!(self, RecoveryArg::Progressive { .. })
    }
    fn apply(self, policy: Policy, set: Self::Setters) -> Policy {
        match self {
            RecoveryArg::Progressive { phases, min_passes } => {
                set(policy, phases.value, min_passes.value)
            }
            RecoveryArg::Probes => policy,
        }
    }
    fn tokens(self, names: &[&str], _private: &TokenStream) -> TokenStream {
        match self {
            RecoveryArg::Progressive { phases, min_passes } => {
                let name = method(names[0]);
                let phases = phases.value.token(phases.span);
                let min_passes = min_passes.value.token(min_passes.span);
                quote!(.#name(#phases, #min_passes))
            }
            RecoveryArg::Probes => TokenStream::new(),
        }
    }
    fn span_of(self, _knob: &str, field: &str) -> Option<Span> {
        match (self, field) {
            (RecoveryArg::Progressive { phases, .. }, "phases") => Some(phases.span),
            (RecoveryArg::Progressive { min_passes, .. }, "min_passes") => Some(min_passes.span),
            _ => None,
        }
    }
}

/// Makes [`Setter`] and [`setters`] from the attribute's arguments of the knob table
/// (`fusebox_policy::with_knobs!(@arguments …)`; see `policy_args!` in `args.rs`).
macro_rules! setter {
    ($($name:ident($ty:ty = $read:ident($($arg:expr),*) => $($set:ident),+);)*) => {
        /// One `Policy` setter call: the knob written, with its checked value and the span of
        /// the token it was written as.
        // One variant per row of the knob table, named as the knob is written.
        #[allow(non_camel_case_types)]
        #[derive(Clone)]
        pub(crate) enum Setter {
            $(
                #[doc = concat!("`", stringify!($name), " = …`.")]
                $name($ty),
            )*
        }

        /// The setter calls of the written knobs, in the order the expansion makes them.
        /// `recovery = probes` is the default and makes no call (with a base it is refused while
        /// checking).
        pub(crate) fn setters(args: &PolicyArgs) -> Vec<Setter> {
            [$(args.$name.clone().filter(<$ty as Kind>::calls).map(Setter::$name),)*]
                .into_iter()
                .flatten()
                .collect()
        }

        impl Setter {
            /// This call made on `policy` (what the expansion's call does when the program runs).
            pub(crate) fn apply(self, policy: Policy) -> Policy {
                match self {
                    $(Setter::$name(value) => <$ty as Kind>::apply(value, policy, ($(Policy::$set),+)),)*
                }
            }

            /// The call as tokens, `.window(20)`, each value located where it was written;
            /// `private` is the runtime's private module.
            pub(crate) fn tokens(self, private: &TokenStream) -> TokenStream {
                match self {
                    $(Setter::$name(value) => <$ty as Kind>::tokens(value, &[$(stringify!($set)),+], private),)*
                }
            }

            /// The span of the token that set `field`, as `PolicyError::field` names it.
            pub(crate) fn span_of(&self, field: &str) -> Option<Span> {
                match self {
                    $(Setter::$name(value) => <$ty as Kind>::span_of(value.clone(), stringify!($name), field),)*
                }
            }
        }
    };
}
fusebox_policy::with_knobs!(@arguments setter);

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
    use crate::args::PolicyArgs;
    use crate::validate::policy_of;

    /// The setter calls the attribute's `policy` arguments become, as text.
    fn setter_calls(policy: &PolicyArgs) -> Vec<String> {
        setters(policy)
            .into_iter()
            .map(|setter| setter.tokens(&quote!(P)).to_string())
            .collect()
    }

    /// Every knob of the knob table, written once.
    fn every_knob() -> PolicyArgs {
        let args = crate::args::parse(quote!(
            key = "k",
            window = 20,
            min_calls = 5,
            failure_rate = 40,
            consecutive = 3,
            failure_count = 4,
            throttle = 1.5,
            slow = "2s",
            slow_rate = 80,
            open_for = "30s",
            open_backoff = 2,
            open_max = "5m",
            open_jitter = 20,
            half_open = 2,
            half_open_lease = "10s",
            recovery = progressive(phases = 3, min_passes = 5),
            max_concurrent = 8,
            shared = false,
            quorum = "50%",
            others = "success",
            retry_budget = "25%, 3/s",
            hedge_budget = 5,
            group = "search",
            shadow = "window = 50"
        ))
        .args
        .unwrap();
        args.policy
    }

    /// Every knob written becomes its setter call.
    #[test]
    fn every_knob_becomes_its_setter_call() {
        let calls = setter_calls(&every_knob());
        assert_eq!(
            calls,
            [
                ". window (20)",
                ". min_calls (5)",
                ". failure_rate (40)",
                ". consecutive (3)",
                ". failure_count (4)",
                ". throttle (1.5)",
                ". slow (:: core :: time :: Duration :: from_nanos (2000000000))",
                ". slow_rate (80)",
                ". open_for (:: core :: time :: Duration :: from_nanos (30000000000))",
                ". open_backoff (2.0)",
                ". open_max (:: core :: time :: Duration :: from_nanos (300000000000))",
                ". open_jitter (20)",
                ". half_open (2)",
                ". half_open_lease (:: core :: time :: Duration :: from_nanos (10000000000))",
                ". progressive (3 , 5)",
                ". max_concurrent (8)",
                ". shared (false)",
                ". quorum_share (50)",
                ". others (P :: Others :: Success)",
                ". retry_budget (25 , 3)",
                ". hedge_budget (5)",
                ". group (\"search\")",
                ". shadow (\"window = 50\")",
            ]
        );
        // One call per row of the knob table: a new row needs its line above.
        assert_eq!(calls.len(), crate::args::KNOB_NAMES.len());
    }

    /// Every knob written sets its field on the policy the attribute validates.
    #[test]
    fn every_knob_sets_its_field_on_the_validated_policy() {
        let p = policy_of(&every_knob()).unwrap();
        assert_eq!(p.settings().window, Window::Count(20));
        assert_eq!(p.settings().min_calls, 5);
        assert_eq!(p.settings().failure_rate, Some(40));
        assert_eq!(p.settings().consecutive, Some(3));
        assert_eq!(p.settings().failure_count, Some(4));
        assert_eq!(p.settings().throttle, Some(1.5));
        assert_eq!(p.settings().slow, Some(Duration::from_secs(2)));
        assert_eq!(p.settings().slow_rate, 80);
        assert_eq!(p.settings().open_for, Duration::from_secs(30));
        assert!((p.settings().open_backoff - 2.0).abs() < f64::EPSILON);
        assert_eq!(p.settings().open_max, Duration::from_secs(300));
        assert_eq!(p.settings().open_jitter, 20);
        assert_eq!(p.settings().half_open, 2);
        assert_eq!(p.settings().half_open_lease, Duration::from_secs(10));
        assert_eq!(p.settings().group, Some("search"));
        assert_eq!(
            p.settings().recovery,
            Recovery::Progressive {
                phases: 3,
                min_passes: 5
            }
        );
        assert_eq!(
            p.settings().max_concurrent,
            Some(fusebox_policy::Concurrency::Fixed(8))
        );
        assert!(!p.settings().shared);
        assert_eq!(p.settings().quorum, Some(fusebox_policy::Quorum::Share(50)));
        assert_eq!(p.settings().others, fusebox_policy::Others::Success);
        assert_eq!(
            p.settings().retry_budget,
            Some(fusebox_policy::RetryBudget {
                percent: 25,
                floor: 3
            })
        );
        assert!(p.validate().is_ok());
    }

    /// `open_for = path` calls `open_for_fn` with the path bound to the function type, and the
    /// attribute validates the policy with a function set.
    #[test]
    fn open_for_takes_a_function_path() {
        let args = crate::args::parse(quote!(key = "k", open_for = waits::by_failures))
            .args
            .unwrap();
        let calls = setter_calls(&args.policy);
        assert_eq!(
            calls,
            [
                ". open_for_fn ({ let __fusebox_open_for : fn (& P :: OpenContext) -> :: core :: time :: Duration = waits :: by_failures ; __fusebox_open_for })"
            ]
        );
        let p = policy_of(&args.policy).unwrap();
        assert!(p.settings().open_for_fn.is_some());
        assert!(p.validate().is_ok());
        // A function grows the wait itself: `open_backoff` beside it is refused at its token.
        let error = crate::args::parse(quote!(key = "k", open_for = wait, open_backoff = 2))
            .args
            .err()
            .expect("refused");
        assert!(
            error.to_string().starts_with(
                "`open_backoff` has no effect with `open_for = wait`: the function is given the \
                 failed recoveries"
            ),
            "{error}"
        );
        // The runtime's validation refuses the same policy built in code.
        let error = fusebox_policy::Policy::new()
            .open_for_fn(|_| Duration::ZERO)
            .open_backoff(2.0)
            .validate()
            .unwrap_err();
        assert!(
            error.to_string().contains("with an `open_for` function"),
            "{error}"
        );
    }

    /// `max_concurrent = "adaptive(2..200)"` becomes `adaptive_concurrency(2, 200)`.
    #[test]
    fn an_adaptive_bulkhead_becomes_its_setter_call() {
        let args = crate::args::parse(quote!(key = "k", max_concurrent = "adaptive(2..200)"))
            .args
            .unwrap();
        let calls = setter_calls(&args.policy);
        assert_eq!(calls, [". adaptive_concurrency (2 , 200)"]);
        let p = policy_of(&args.policy).unwrap();
        assert_eq!(
            p.settings().max_concurrent,
            Some(fusebox_policy::Concurrency::Adaptive {
                floor: 2,
                ceiling: 200
            })
        );
    }
}
