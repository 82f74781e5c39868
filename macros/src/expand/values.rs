//! The values the expansion builds from the arguments: the `Policy` expression, the `Attempts`
//! value, the link-time declaration of a literal-key site, and literals located where they were
//! written.

use proc_macro2::{Literal, Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned as _;

use crate::args::{AttemptArgs, PolicyArgs, Spanned};
use crate::setters::{duration, literal, setters};
use crate::tokens::respan;

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
    for setter in setters(policy) {
        let call = setter.tokens(private);
        expr = quote!(#expr #call);
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

/// The `Attempts` value of `timeout`, `retry`, `backoff` and `deadline`, and its type: an
/// absent timeout or deadline is a type of its own (`Unbounded`, `NoDeadline`), so the attempt
/// driver's future holds no timer around an attempt and no start time it does not use.
pub(super) fn attempts_value(
    attempts: &AttemptArgs,
    private: &TokenStream,
) -> (TokenStream, TokenStream) {
    let duration_type = quote!(::core::time::Duration);
    let optional = |value: Option<Spanned<u64>>, none: TokenStream| match value {
        Some(nanos) => (duration(nanos), duration_type.clone()),
        None => (quote!(#private::#none), quote!(#private::#none)),
    };
    let (timeout, timeout_type) = optional(attempts.timeout, quote!(Unbounded));
    let (deadline, deadline_type) = optional(attempts.deadline, quote!(NoDeadline));
    let retry = match attempts.retry {
        Some(retry) => literal(retry, Literal::u32_unsuffixed),
        None => Literal::u32_unsuffixed(1),
    };
    let backoff = match attempts.backoff {
        Some(nanos) => duration(nanos),
        None => quote!(::core::time::Duration::ZERO),
    };
    let value = quote! {
        #private::Attempts {
            timeout: #timeout,
            retry: #retry,
            backoff: #backoff,
            deadline: #deadline,
        }
    };
    (
        value,
        quote!(#private::Attempts<#timeout_type, #deadline_type>),
    )
}
