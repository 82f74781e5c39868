//! The body of a function without attempt arguments (or of an `async fn` with `timeout` alone):
//! the original body run once, in a closure, an `async` block or in place ([`awaits_in_place`]),
//! behind the refusal check, and the outcome arms that report the call and return its value or
//! hand it to the fallback.

use proc_macro2::{TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned as _;

use super::admission::{Admit, Site, admission};
use super::chaos;
use super::classify::{classify, error_alias, pushback};
use super::names::Names;
use super::settle::{deferred_fallback, defers_fallback, settle};
use crate::args::{Args, Spanned};
use crate::function::Params;
use crate::setters::duration;
use crate::tokens::respan;

/// The body of a call run once: the admission, the call and its outcome; with a deferred
/// fallback ([`defers_fallback`]), these settle in a block of their own, and the fallback is
/// called after it.
///
/// With the `store` feature (set by the runtime's), an `async fn`'s expansion also asks a shared
/// key's store: its admission before the refusal check, the wait for its outcome's recording
/// after the call (`store.rs`); without it, it has neither.
pub(super) fn once_body(
    args: &Args,
    names: &Names,
    site: &Site,
    params: &Params,
    body: &TokenStream,
    is_async: bool,
) -> TokenStream {
    let timeout = args.attempts.timeout.filter(|_| is_async);
    // With `timeout`, the body's future is awaited inside the timer's.
    let run = match timeout {
        None if is_async && !chaos::enabled(args) && awaits_in_place(body) => in_place(names, body),
        Some(_) => run_once(args, names, is_async, body),
        None if is_async => {
            let run = run_once(args, names, is_async, body);
            quote!(#run.await)
        }
        None => run_once(args, names, is_async, body),
    };
    let admit = if is_async && !crate::expand::with_store() && !chaos::enabled(args) {
        Admit::LinkedPermit
    } else if is_async {
        Admit::SharedPermit
    } else {
        Admit::LocalPermit
    };
    let admission = admission(args, names, site, admit);
    let chaos_admit = chaos::admit(args, names, site.registry());
    let admission = quote!(#admission #chaos_admit);
    let outcome = outcome(args, names, params, is_async, &run, timeout);
    let alias = error_alias(args, names);
    match deferred_fallback(args, names, params, is_async) {
        // The call settles in a block of its own that ends with the cause, so the permit,
        // the body's future and its result are all dead when the fallback's future is made.
        Some(call) => {
            let Names { cause, settled, .. } = names;
            quote! {
                #alias
                let #cause = #settled: {
                    #admission
                    #outcome
                };
                #call
            }
        }
        None => quote! {
            #alias
            #admission
            #outcome
        },
    }
}

/// The original body, wrapped in a closure (called here) or an `async` block (not yet awaited)
/// whose output is pinned to the return type. Without a fallback it is moved into the wrapper, so the future captures exactly
/// what the original function captured. With one it only borrows the parameters, which are then
/// handed to the fallback. With `chaos = true` it runs behind the injection point (`chaos.rs`).
fn run_once(args: &Args, names: &Names, is_async: bool, body: &TokenStream) -> TokenStream {
    let Names {
        output,
        output_span,
        ..
    } = names;
    let capture = if args.fallback.is_some() {
        TokenStream::new()
    } else {
        quote!(move)
    };
    let private_at_output = names.private_at(*output_span);
    if is_async {
        let wrap = quote_spanned!(*output_span=> #private_at_output::async_body::<#output, _>);
        chaos::around_async(args, names, quote!(#wrap(async #capture #body)), false)
    } else {
        let wrap = quote_spanned!(*output_span=> #private_at_output::sync_body::<#output, _>);
        let body = chaos::around_sync(args, names, quote!(#capture || #body), &capture);
        quote!(#wrap(#body))
    }
}

/// True when the body of an `async fn` can run in place, as a plain block of the function's
/// own body, with no `async` block around it (whose state and moved copy of the parameters the
/// function's future would carry): it has no `return` and no `?`, which would leave the function
/// rather than the body and skip the report, and calls no macro, whose expansion might. The test
/// is on tokens and errs on the safe side (a `return` in a nested closure, `!(…)` or `?Sized`
/// also keep the `async` block).
pub(super) fn awaits_in_place(body: &TokenStream) -> bool {
    fn plain(tokens: TokenStream) -> bool {
        let mut after_bang = false;
        for token in tokens {
            let ok = match &token {
                TokenTree::Ident(ident) => ident != "return",
                TokenTree::Punct(punct) => punct.as_char() != '?',
                TokenTree::Group(group) => !after_bang && plain(group.stream()),
                TokenTree::Literal(_) => true,
            };
            if !ok {
                return false;
            }
            after_bang = matches!(&token, TokenTree::Punct(punct) if punct.as_char() == '!');
        }
        true
    }
    plain(body.clone())
}

/// The body of an `async fn` run in place (see [`awaits_in_place`]): the block itself, its
/// value pinned to the return type (located there, like [`run_once`]'s).
fn in_place(names: &Names, body: &TokenStream) -> TokenStream {
    let Names {
        output,
        output_span,
        ..
    } = names;
    let private_at_output = names.private_at(*output_span);
    let wrap = quote_spanned!(*output_span=> #private_at_output::in_place_body::<#output>);
    quote!(#wrap(#body))
}

/// How the outcome arms of a call run once leave: as the function's value, or, with a deferred
/// fallback ([`defers_fallback`]), the function's own result by `return` and a cause as the
/// settling block's value; with a store (an `async fn` and the `store` feature), as `Ok` and
/// `Err` for the store's wait (see `store.rs`).
struct Exits {
    defers: bool,
    /// The exits of an `async fn` with the `store` feature.
    stored: bool,
}

impl Exits {
    fn new(args: &Args, is_async: bool) -> Self {
        Exits {
            defers: defers_fallback(args, is_async),
            stored: is_async && crate::expand::with_store(),
        }
    }

    /// The function's own result `tokens`, leaving.
    fn done(&self, tokens: TokenStream) -> TokenStream {
        match (self.defers, self.stored) {
            (true, false) => quote!(return #tokens),
            (true, true) => quote!(::core::result::Result::Ok(#tokens)),
            (false, _) => tokens,
        }
    }

    /// What a call handed to the fallback evaluates to (`tokens`: the fallback's value, or the
    /// cause when it is deferred).
    fn to_fallback(&self, tokens: TokenStream) -> TokenStream {
        match (self.defers, self.stored) {
            (true, true) => quote!(::core::result::Result::Err(#tokens)),
            _ => tokens,
        }
    }
}

/// The refusal check and the outcome arms of a call run once: the success is reported and
/// returned; an error is classified, reported, and returned or handed to the fallback.
fn outcome(
    args: &Args,
    names: &Names,
    params: &Params,
    is_async: bool,
    run: &TokenStream,
    timeout: Option<Spanned<u64>>,
) -> TokenStream {
    let Names {
        output_span,
        error,
        value,
        refused,
        result,
        ..
    } = names;
    // Patterns and values of the function's own `Result` are located at the return type: when the
    // function does not return a `Result`, every resulting mismatch is reported there.
    let at_output = |tokens: TokenStream| respan(tokens, *output_span);
    let ok_value = at_output(quote!(::core::result::Result::Ok(#value)));
    let err_error = at_output(quote!(::core::result::Result::Err(#error)));
    let (on_failed, on_refused) = settle(args, names, params, is_async, quote!(Rejected(#refused)));
    let exits = Exits::new(args, is_async);
    let on_failed = exits.to_fallback(on_failed);
    let ok_done = exits.done(ok_value.clone());
    let err_done = exits.done(err_error.clone());
    // The result is taken apart and rebuilt rather than inspected and returned: on the success
    // path only the `Ok` value moves, never the whole `Result` (whose error type may be large),
    // which keeps the hot path free of memory-to-memory copies.
    let report_error = report_error(args, names, is_async, &err_error, &on_failed, &err_done);
    let report_ok = report_ok(args, names);
    let scrutinee = match timeout {
        Some(_) => result.to_token_stream(),
        None => run.clone(),
    };
    let mut matched = quote! {
        match #scrutinee {
            #ok_value => {
                #report_ok
                #ok_done
            }
            #report_error
        }
    };
    if let Some(limit) = timeout {
        let (_, on_timeout) = settle(args, names, params, is_async, quote!(TimedOut(#refused)));
        let on_timeout = exits.to_fallback(on_timeout);
        matched = timed(names, limit, run, matched, on_timeout);
    }
    let defers = exits.defers;
    let on_refused = if defers {
        let settled = &names.settled;
        quote!(break #settled #on_refused;)
    } else {
        quote!(return #on_refused;)
    };
    shared_store(
        is_async,
        defers,
        args.fallback.is_none(),
        names,
        on_refused,
        matched,
    )
}

/// The arm of an `Err` (the pattern `err_error`): classified, reported, and handed to the
/// fallback (`on_failed`) or returned (`err_done`).
///
/// An error converted from an inner breaker's refusal (a stacked attribute, an annotated
/// function calling another) is not counted by the default classification, and never as a
/// success (`rejected_inside`, `permit_ignored`).
fn report_error(
    args: &Args,
    names: &Names,
    is_async: bool,
    err_error: &TokenStream,
    on_failed: &TokenStream,
    err_done: &TokenStream,
) -> TokenStream {
    let private = &names.private;
    let raw_and_name = names.report_args();
    // A counted error reports the wait it asked for, when its type implements `RetryAfter`.
    let wait = pushback(names, false);
    match (classify(args.failure.as_ref(), names, true), &args.fallback) {
        (Some(counts), None) => quote! {
            #err_error => {
                if #counts { #private::permit_failed_after(#raw_and_name, #wait) } else { #private::permit_ignored::<#is_async>(#raw_and_name) }
                #on_failed
            }
        },
        (Some(counts), Some(_)) => quote! {
            #err_error if #counts => {
                #private::permit_failed_after(#raw_and_name, #wait);
                #on_failed
            }
            #err_error => {
                #private::permit_ignored::<#is_async>(#raw_and_name);
                #err_done
            }
        },
        (None, _) => quote! {
            #err_error if !#private::rejected_inside::<#is_async>() => {
                #private::permit_failed_after(#raw_and_name, #wait);
                #on_failed
            }
            #err_error => {
                #private::permit_ignored_outright(#raw_and_name);
                #err_done
            }
        },
    }
}

/// `matched` behind the timer of `timeout` without `retry`: the body's future and the timer are
/// awaited in place, so the function's future holds the timer and nothing more than without
/// `timeout`. A timed-out call is a counted failure and reaches the caller as
/// `Reason::TimedOut` (the fallback's `Cause::TimedOut`, `on_timeout`).
fn timed(
    names: &Names,
    limit: Spanned<u64>,
    run: &TokenStream,
    matched: TokenStream,
    on_timeout: TokenStream,
) -> TokenStream {
    let Names {
        private,
        refused,
        result,
        ..
    } = names;
    let raw_and_name = names.report_args();
    let limit = duration(limit);
    let ok = quote!(::core::result::Result::Ok);
    let err = quote!(::core::result::Result::Err);
    quote! {
        match #private::timeout_body(#limit, #run).await {
            #ok(#result) => #matched,
            #err(_) => {
                let #refused = #private::permit_timed_out(#raw_and_name);
                #on_timeout
            }
        }
    }
}

/// The report of a call that returned `Ok`: a success, or, with `failure_if`, what the predicate
/// says of the value (located at the predicate, so a wrong signature is reported there); the
/// value is returned as is.
fn report_ok(args: &Args, names: &Names) -> TokenStream {
    let Names { private, value, .. } = names;
    let raw_and_name = names.report_args();
    match &args.failure_if {
        None => quote!(#private::permit_succeeded(#raw_and_name);),
        Some(predicate) => {
            let span = predicate.span();
            let value = Ident::new(&value.to_string(), value.span().located_at(span));
            quote_spanned! {span=>
                if #predicate(&#value) {
                    #private::permit_failed(#raw_and_name)
                } else {
                    #private::permit_succeeded(#raw_and_name)
                }
            }
        }
    }
}

/// The refusal check and the call. An `async fn` with the `store` feature awaits a shared key's
/// admission by the store in the (cold) refusal branch and the recording of its outcome after
/// the call (`store.rs`); without it, or for a sync function, it has neither.
fn shared_store(
    is_async: bool,
    defers: bool,
    no_fallback: bool,
    names: &Names,
    on_refused: TokenStream,
    matched: TokenStream,
) -> TokenStream {
    #[cfg(feature = "store")]
    if is_async && crate::expand::with_store() {
        return super::store::shared(defers, names, on_refused, matched);
    }
    let _ = (is_async, defers);
    local_store(no_fallback, names, on_refused, matched)
}

/// [`shared_store`] without a store: the refusal check, then the call.
fn local_store(
    no_fallback: bool,
    names: &Names,
    on_refused: TokenStream,
    matched: TokenStream,
) -> TokenStream {
    if no_fallback {
        // Without a fallback a refusal returns the function's own error at once: one call, whose
        // `Option` ends with this statement, so an admitted call's future holds nothing of it
        // across the body's `.await`. Located at the return type, where a missing
        // `From<fusebox::Error>` is reported.
        let Names {
            private, refused, ..
        } = names;
        let raw = names.checked();
        let rejection = respan(quote!(#private::rejection(#raw)), names.output_span);
        let err = respan(quote!(::core::result::Result::Err), names.output_span);
        quote! {
            if let ::core::option::Option::Some(#refused) = #rejection {
                return #err(#refused);
            }
            #matched
        }
    } else {
        let Names {
            private, refused, ..
        } = names;
        let raw = names.checked();
        quote! {
            // A refusal returns at once; its temporaries end here, so an admitted call's future
            // holds nothing of it across the body's `.await`. A flag, then the error: an `if let`
            // on an `Option<Error>` would keep the option borrowed, and so in the future, across
            // the fallback's `.await`.
            if #private::permit_rejected(#raw) {
                let #refused = #private::rejection_error(#raw);
                #on_refused
            }
            #matched
        }
    }
}
