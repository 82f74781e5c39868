//! What a failed or refused call returns, for both paths ([`settle`]): the error, or the
//! fallback's value with its `Cause`; and the fallback of an `async fn`, called after the call
//! settled ([`defers_fallback`], [`deferred_fallback`]).

use proc_macro2::TokenStream;
use quote::quote;

use super::classify::fallback_call;
use super::names::Names;
use crate::args::Args;
use crate::function::Params;
use crate::tokens::respan;

/// True when the fallback of an `async fn` is called after the call has settled: the settling
/// block returns the function's own result and ends with the fallback's `Cause`, then the
/// fallback is called and awaited once, outside it. The body's future and the fallback's never
/// live in the function's future at once, so its size is the larger of the two, not their sum.
pub(super) fn defers_fallback(args: &Args, is_async: bool) -> bool {
    is_async && args.fallback.is_some()
}

/// The call of a deferred fallback with the cause the settling block ended with (`None` when
/// the fallback is not deferred, see [`defers_fallback`]).
pub(super) fn deferred_fallback(
    args: &Args,
    names: &Names,
    params: &Params,
    is_async: bool,
) -> Option<TokenStream> {
    let fallback = args.fallback.as_ref()?;
    defers_fallback(args, is_async).then(|| {
        let cause = &names.cause;
        fallback_call(fallback, params, is_async, names, quote!(#cause))
    })
}

/// `Cause::<E>::#variant`, with `E` the function's error type.
fn cause(names: &Names, variant: &TokenStream) -> TokenStream {
    let Names {
        private,
        error_type,
        ..
    } = names;
    quote!(#private::Cause::<#error_type>::#variant)
}

/// What a failed call and a refused call return, for both paths: the error and
/// `Err(reject(refused))`, or the fallback's value with `Cause::Failed(error)` and `refused`
/// (`Cause::<refused_cause>`). When the fallback is deferred ([`defers_fallback`]), the two
/// causes themselves: the settling block ends with them.
pub(super) fn settle(
    args: &Args,
    names: &Names,
    params: &Params,
    is_async: bool,
    refused_cause: TokenStream,
) -> (TokenStream, TokenStream) {
    let Names {
        private,
        output_span,
        error,
        refused,
        ..
    } = names;
    let err = quote!(::core::result::Result::Err);
    match &args.fallback {
        None => (
            respan(quote!(#err(#error)), *output_span),
            respan(
                quote!(#err(#private::error_from_rejection(#refused))),
                *output_span,
            ),
        ),
        Some(_) if defers_fallback(args, is_async) => (
            cause(names, &quote!(Failed(#error))),
            cause(names, &refused_cause),
        ),
        Some(fallback) => (
            fallback_call(
                fallback,
                params,
                is_async,
                names,
                cause(names, &quote!(Failed(#error))),
            ),
            fallback_call(
                fallback,
                params,
                is_async,
                names,
                cause(names, &refused_cause),
            ),
        ),
    }
}
