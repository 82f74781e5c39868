//! The values the expansion builds from the arguments: the `Policy` expression, the `Attempts`
//! value, the link-time declaration of a literal-key site, and literals located where they were
//! written.

use proc_macro2::{Literal, Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned as _;

use super::respan;
use crate::args::{AttemptArgs, PolicyArgs, RecoveryArg, Spanned, WindowArg};

/// The `Policy` expression: the base (`policy = CONST` or the default) with each written knob
/// applied on top through its `Policy` setter. The rules between fields (`min_calls` following a
/// small `window`, `consecutive` alone turning the rate rule off) are the setters' own.
pub(super) fn policy(policy: &PolicyArgs, private: &TokenStream) -> TokenStream {
    let mut expr = match &policy.base {
        Some(base) => {
            // Bound to a `Policy` first, so anything else is a type mismatch reported at the path.
            let span = base.span();
            let ty = respan(quote!(#private::Policy), span);
            let local = Ident::new("__fusebox_base", Span::mixed_site());
            quote_spanned!(span=> {
                let #local: #ty = #base;
                #local
            })
        }
        None => quote!(#private::Policy::DEFAULT),
    };
    match policy.window {
        Some(WindowArg::Count(window)) => {
            let calls = literal(window, Literal::u32_unsuffixed);
            expr = quote!(#expr.window(#calls));
        }
        Some(WindowArg::Time(span)) => {
            let span = duration(span);
            expr = quote!(#expr.time_window(#span));
        }
        None => {}
    }
    if let Some(min_calls) = policy.min_calls {
        let calls = literal(min_calls, Literal::u32_unsuffixed);
        expr = quote!(#expr.min_calls(#calls));
    }
    if let Some(rate) = policy.failure_rate {
        let percent = literal(rate, Literal::u8_unsuffixed);
        expr = quote!(#expr.failure_rate(#percent));
    }
    if let Some(consecutive) = policy.consecutive {
        let failures = literal(consecutive, Literal::u32_unsuffixed);
        expr = quote!(#expr.consecutive(#failures));
    }
    if let Some(slow) = policy.slow {
        let threshold = duration(slow);
        expr = quote!(#expr.slow(#threshold));
    }
    if let Some(rate) = policy.slow_rate {
        let percent = literal(rate, Literal::u8_unsuffixed);
        expr = quote!(#expr.slow_rate(#percent));
    }
    if let Some(open_for) = policy.open_for {
        let wait = duration(open_for);
        expr = quote!(#expr.open_for(#wait));
    }
    if let Some(factor) = policy.open_backoff {
        let factor = literal(factor, Literal::f64_unsuffixed);
        expr = quote!(#expr.open_backoff(#factor));
    }
    if let Some(open_max) = policy.open_max {
        let wait = duration(open_max);
        expr = quote!(#expr.open_max(#wait));
    }
    if let Some(probes) = policy.half_open {
        let probes = literal(probes, Literal::u32_unsuffixed);
        expr = quote!(#expr.half_open(#probes));
    }
    if let Some(lease) = policy.half_open_lease {
        let lease = duration(lease);
        expr = quote!(#expr.half_open_lease(#lease));
    }
    // `recovery = probes` is the default; with a base it was refused while checking.
    if let Some(RecoveryArg::Progressive { phases, min_passes }) = policy.recovery {
        let phases = literal(phases, Literal::u32_unsuffixed);
        let min_passes = literal(min_passes, Literal::u32_unsuffixed);
        expr = quote!(#expr.progressive(#phases, #min_passes));
    }
    if let Some(calls) = policy.max_concurrent {
        let calls = literal(calls, Literal::u32_unsuffixed);
        expr = quote!(#expr.max_concurrent(#calls));
    }
    expr
}

/// Registers a literal-key site at link time, with a test for the registry it uses, so the
/// registry knows the declared key and policy before the first call.
pub(super) fn declare(
    site: &Ident,
    registry: Option<&syn::Path>,
    private: &TokenStream,
) -> TokenStream {
    let r = Ident::new("__fusebox_registry", Span::mixed_site());
    let matcher = match registry {
        Some(path) => quote!(|#r| #private::in_registry(&#path, #r)),
        None => quote!(#private::in_global),
    };
    quote! {
        #private::inventory::submit! {
            #private::Declared::new(&#site, #matcher)
        }
    }
}

/// A `Duration` of the given nanoseconds, located where it was written.
pub(super) fn duration(nanos: Spanned<u64>) -> TokenStream {
    let nanos = literal(nanos, Literal::u64_unsuffixed);
    quote!(::core::time::Duration::from_nanos(#nanos))
}

/// The `Attempts` value of `timeout`, `retry`, `backoff` and `deadline`.
pub(super) fn attempts_value(attempts: &AttemptArgs, private: &TokenStream) -> TokenStream {
    let optional = |value: Option<Spanned<u64>>| match value {
        Some(nanos) => {
            let nanos = duration(nanos);
            quote!(::core::option::Option::Some(#nanos))
        }
        None => quote!(::core::option::Option::None),
    };
    let timeout = optional(attempts.timeout);
    let deadline = optional(attempts.deadline);
    let retry = match attempts.retry {
        Some(retry) => literal(retry, Literal::u32_unsuffixed),
        None => Literal::u32_unsuffixed(1),
    };
    let backoff = match attempts.backoff {
        Some(nanos) => duration(nanos),
        None => quote!(::core::time::Duration::ZERO),
    };
    quote! {
        #private::Attempts {
            timeout: #timeout,
            retry: #retry,
            backoff: #backoff,
            deadline: #deadline,
        }
    }
}

/// An unsuffixed literal located where the value was written.
pub(super) fn literal<T>(value: Spanned<T>, make: fn(T) -> Literal) -> Literal {
    let mut literal = make(value.value);
    literal.set_span(value.span);
    literal
}
