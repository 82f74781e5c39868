//! What an `async fn`'s expansion adds with the `store` feature (set by the runtime's `store`
//! feature, so it is on exactly when the runtime can share a key through a store): a shared key's
//! permit is admitted by the store before the refusal check (a cold branch: only a permit that
//! asks the store takes it), and the call's outcome is recorded there before the function returns
//! when the store wants its callers to wait (strict mode). The outcome arms end as `Ok` (the
//! function's own result) and `Err` (a deferred fallback's cause) for that wait.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::Ident;

use super::names::Names;

/// The refusal check and the call of an `async fn` (`defers`: its fallback is deferred), with
/// the store's admission before the check and the wait for the recording after the call.
pub(super) fn shared(
    defers: bool,
    names: &Names,
    on_refused: TokenStream,
    matched: TokenStream,
) -> TokenStream {
    if defers {
        shared_settled(names, on_refused, matched)
    } else {
        shared_returned(names, on_refused, matched)
    }
}

/// [`shared`] for an `async fn` whose fallback is deferred: the outcome arms end with the
/// function's own result (`Ok`) or the fallback's cause (`Err`), recorded in the store first.
fn shared_settled(names: &Names, on_refused: TokenStream, matched: TokenStream) -> TokenStream {
    let Names {
        private,
        refused,
        output,
        value,
        cause,
        error_type,
        ..
    } = names;
    let raw = names.raw();
    let raw_and_name = names.raw_and_name();
    let out = Ident::new("__fusebox_out", Span::mixed_site());
    let ok = quote!(::core::result::Result::Ok);
    let err = quote!(::core::result::Result::Err);
    quote! {
        if #private::asks_store(#raw) {
            #private::admit_shared(#raw_and_name).await;
        }
        if let ::core::option::Option::Some(#refused) = #private::permit_rejection(#raw) {
            #on_refused
        }
        // The function's own result (`Ok`) or the fallback's cause (`Err`), recorded in the
        // store before either goes on.
        let #out: ::core::result::Result<
            #output,
            #private::Cause<#error_type>,
        > = #matched;
        let #out = if #private::reports_to_store(#raw) {
            #private::flush_then(#raw, #out).await
        } else {
            #out
        };
        match #out {
            #ok(#value) => return #value,
            #err(#cause) => #cause,
        }
    }
}

/// [`shared`] for an `async fn` without a deferred fallback: the outcome arms end with the
/// function's output, recorded in the store before it is returned.
fn shared_returned(names: &Names, on_refused: TokenStream, matched: TokenStream) -> TokenStream {
    let Names {
        private,
        refused,
        output,
        ..
    } = names;
    let raw = names.raw();
    let raw_and_name = names.raw_and_name();
    let out = Ident::new("__fusebox_out", Span::mixed_site());
    quote! {
        // The store's admission replaces the permit; then one refusal check (so the fallback
        // call is written once), whose refusal lives only in this statement.
        if #private::asks_store(#raw) {
            #private::admit_shared(#raw_and_name).await;
        }
        if let ::core::option::Option::Some(#refused) = #private::permit_rejection(#raw) {
            #on_refused
        }
        // Typed as the function's output, so a wrong fallback is one mismatch, not two.
        let #out: #output = #matched;
        if #private::reports_to_store(#raw) {
            // The result moves into the (boxed) wait, so the function's own future holds
            // nothing of it across this await.
            return #private::flush_then(#raw, #out).await;
        }
        #out
    }
}
