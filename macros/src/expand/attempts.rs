//! The body of an `async fn` with `timeout`, `retry`, `backoff` or `deadline`: an attempt
//! closure run by the runtime's attempt driver.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned as _;

use super::admission::{Admit, Site, admission};
use super::chaos;
use super::classify::{classify, error_alias, pushback};
use super::names::Names;
use super::settle::{deferred_fallback, settle};
use super::values::attempts_value;
use crate::args::{Args, AttemptArgs, HedgeArg};
use crate::function::Params;
use crate::tokens::respan;

/// True when the only attempt argument is `timeout`: the body runs once, bounded in place by
/// the expansion of a plain call (no attempt driver, whose state the future would carry).
pub(super) fn timeout_only(attempts: &AttemptArgs) -> bool {
    attempts.timeout.is_some()
        && attempts.hedge.is_none()
        && attempts.retry.is_none()
        && attempts.backoff.is_none()
        && attempts.deadline.is_none()
}

/// What [`attempts_body`] needs from the expansion.
pub(super) struct Attempt<'a> {
    /// The call site.
    pub(super) site: &'a Site,
    /// The function's parameters, for the fallback.
    pub(super) params: &'a Params,
    /// The original body, braces included.
    pub(super) body: TokenStream,
}

/// The body of an `async fn` with `timeout`, `retry`, `backoff` or `deadline`:
///
/// ```text
/// static SITE: Site = Site::new(key, function, policy);      // or DynSite, and the breaker
/// let admit = move || SITE.acquire(registry, Name);           // or `move || SITE.acquire(breaker, Name)`
/// const ATTEMPTS: Attempts<T, D> = Attempts { timeout, retry, backoff, deadline };
/// let settled = run_attempts(admit, &ATTEMPTS, attempt, is_failure, is_failed_ok, retry_after).await;
/// match settled {
///     Settled::Done(result) => result,
///     Settled::Failed(error) => Err(error),
///     Settled::Rejected(refused) => Err(reject(refused)),
/// }
/// ```
///
/// With a fallback the match is in a block that returns `Done`'s result and otherwise ends with
/// the cause (`Cause::Failed(error)`, `Cause::from_error(refused)`), and the fallback is called
/// and awaited once, after it.
///
/// With `retry`, `attempt` is `|| async_body::<R, _>(async { body })`: the driver calls it once
/// per attempt, so it borrows the parameters (neither the closure nor the `async` block is
/// `move`). The body sees every parameter with its written type and may use it by reference or
/// copy it; a body that consumes one cannot be retried (rustc: "cannot move out of … a captured
/// variable in an `FnMut` closure", the closure located at `retry`: clone what it needs). The
/// arguments must be `Sync` for the future to be `Send`, and `&mut self`, `&mut T`, `self` by
/// value and `mut` bindings are refused with an error at the parameter. The parameters stay
/// owned outside the attempts, so a fallback still receives them by value.
///
/// Without `retry` the body runs once: its future is made before the driver runs (it runs
/// nothing until polled) and `attempt` hands it out once. It owns the parameters (`async move`,
/// like a function without these arguments), or borrows them when there is a fallback, which
/// receives them afterwards; either way they keep their types. The body keeps `return` and `?`:
/// it is an `async` block whose output is pinned to the function's return type.
///
/// A timed-out attempt arrives as `Settled::Rejected` with reason `TimedOut`, so it reaches the
/// caller through `From<fusebox::Error>` or, by `Cause::from_error`, as the fallback's
/// `Cause::TimedOut` (never `Cause::Rejected`, which means the backend was never called).
pub(super) fn attempts_body(args: &Args, names: &Names, attempt: Attempt<'_>) -> TokenStream {
    let Names {
        private,
        error,
        refused,
        result,
        ..
    } = names;
    let Attempt { site, params, body } = attempt;
    let local = |name: &str| Ident::new(name, Span::mixed_site());
    let admit = local("__fusebox_admit");
    let settled = local("__fusebox_settled");
    let attempts = Ident::new("__FUSEBOX_ATTEMPTS", Span::mixed_site());
    let admission = admission(args, names, site, Admit::Closure);
    let chaos_admit = chaos::wrap_admit(args, names, site.registry());
    let admission = quote!(#admission #chaos_admit);
    let (attempts_value, attempts_type) = attempts_value(&args.attempts, private);
    let attempt = attempt_closure(args, names, body);
    let (is_failure, is_failed_ok, retry_after) = judges(args, names);
    let (on_failed, on_refused) = settle(args, names, params, true, quote!(from_error(#refused)));
    let alias = error_alias(args, names);
    let run = match args.attempts.hedge {
        None => quote! {
            #private::run_attempts(
                #admit,
                &#attempts,
                #attempt,
                #is_failure,
                #is_failed_ok,
                #retry_after,
            )
            .await
        },
        Some(hedge) => {
            let hedge = hedge_value(hedge, args.attempts.hedge_max, private);
            quote! {
                #private::run_hedged(
                    #admit,
                    #hedge,
                    #attempts.timeout,
                    #attempt,
                    #is_failure,
                    #is_failed_ok,
                    #retry_after,
                )
                .await
            }
        }
    };
    match deferred_fallback(args, names, params, true) {
        // The attempts settle in a block that returns the function's own result and ends with
        // the fallback's cause: the driver's future and its outcome are dead when the
        // fallback's future is made.
        Some(call) => {
            let cause = &names.cause;
            quote! {
                #alias
                let #cause = {
                    #admission
                    const #attempts: #attempts_type = #attempts_value;
                    match #run {
                        #private::Settled::Done(#result) => return #result,
                        #private::Settled::Failed(#error) => #on_failed,
                        #private::Settled::Rejected(#refused) => #on_refused,
                    }
                };
                #call
            }
        }
        None => quote! {
            #alias
            #admission
            const #attempts: #attempts_type = #attempts_value;
            let #settled = {
                #run
            };
            match #settled {
                #private::Settled::Done(#result) => #result,
                #private::Settled::Failed(#error) => #on_failed,
                #private::Settled::Rejected(#refused) => #on_refused,
            }
        },
    }
}

/// The `Hedge` of `hedge` and `hedge_max` (2 attempts in flight unless written).
fn hedge_value(
    hedge: crate::args::Spanned<HedgeArg>,
    max: Option<crate::args::Spanned<u32>>,
    private: &TokenStream,
) -> TokenStream {
    let delay = match hedge.value {
        HedgeArg::Fixed(nanos) => {
            quote!(#private::HedgeDelay::Fixed(::core::time::Duration::from_nanos(#nanos)))
        }
        HedgeArg::Percentile(percentile) => quote!(#private::HedgeDelay::Percentile(#percentile)),
    };
    let max = max.map_or(2, |max| max.value);
    quote!(#private::Hedge::new(#delay).max(#max))
}

/// The three judgements the attempt driver asks of an outcome, as closures: does the error count
/// as a failure, does the `Ok` value count as one (`failure_if`), and how long does a counted
/// error ask the next attempt to wait.
fn judges(args: &Args, names: &Names) -> (TokenStream, TokenStream, TokenStream) {
    let Names {
        private,
        output_span,
        error,
        ..
    } = names;
    let error_type = respan(names.error_type.clone(), *output_span);
    let is_failure = match classify(args.failure.as_ref(), names, false) {
        Some(counts) => quote!(|#error: &#error_type| -> bool { #counts }),
        // Every error counts, but one converted from an inner breaker's refusal.
        None => quote!(|_: &#error_type| -> bool { !#private::rejected_inside::<true>() }),
    };
    // `failure_if`: the `Ok` values that count, retried like counted errors; located at the
    // predicate, so a wrong signature is reported there.
    let is_failed_ok = match &args.failure_if {
        Some(predicate) => {
            let span = predicate.span();
            let value = Ident::new("__fusebox_value", Span::mixed_site().located_at(span));
            quote_spanned!(span=> |#value: &_| -> bool { #predicate(#value) })
        }
        None => quote!(|_: &_| -> bool { false }),
    };
    // The wait a counted error asked for (`RetryAfter`): the next attempt waits for it.
    let wait = pushback(names, true);
    let retry_after =
        quote!(|#error: &#error_type| -> ::core::option::Option<::core::time::Duration> { #wait });
    (is_failure, is_failed_ok, retry_after)
}

/// The attempt closure the driver calls: once per attempt with `retry`, once otherwise.
fn attempt_closure(args: &Args, names: &Names, body: TokenStream) -> TokenStream {
    let Names {
        output,
        output_span,
        ..
    } = names;
    let private_at_output = names.private_at(*output_span);
    let wrap = quote_spanned!(*output_span=> #private_at_output::async_body::<#output, _>);
    // The attempt's `async` block is located at the body, so an error about it is reported
    // there rather than at the attribute.
    let body_span = body
        .clone()
        .into_iter()
        .next()
        .map_or_else(Span::call_site, |token| token.span());
    // A hedged call runs the body once per attempt too, several at once.
    let retry_span = (args.attempts.retry)
        .map(|retry| retry.span)
        .or(args.attempts.hedge.map(|hedge| hedge.span));
    // Without `retry` the body runs once: its future owns the parameters (like the body of a
    // function without these arguments), so they keep their types and the body may consume
    // them. With a fallback it borrows them instead, to hand them over afterwards.
    let once = Ident::new("__fusebox_once", Span::mixed_site());
    match retry_span {
        // With `retry` the body runs once per attempt: the attempt closure borrows the
        // parameters (it is not `move`, nor is the body's `async` block), so the body sees them
        // with their own types and can use them by reference or copy them, and a body that
        // consumes one is rustc's "cannot move out of a captured variable in an `FnMut`
        // closure", the closure located at `retry`.
        Some(span) => {
            let closure = quote_spanned!(span=> ||);
            let async_block = quote_spanned!(body_span=> async);
            let attempt = chaos::around_async(args, names, quote!(#wrap(#async_block #body)), true);
            quote!(#closure #attempt)
        }
        None => {
            let async_block = match args.fallback {
                Some(_) => quote_spanned!(body_span=> async),
                None => quote_spanned!(body_span=> async move),
            };
            // The body's future is made here (it runs nothing until polled) and handed out once.
            let attempt = chaos::around_async(args, names, quote!(#wrap(#async_block #body)), true);
            quote!({
                let mut #once = ::core::option::Option::Some(#attempt);
                move || match #once.take() {
                    ::core::option::Option::Some(#once) => #once,
                    ::core::option::Option::None => ::core::unreachable!(
                        "an attempt without `retry` runs once"
                    ),
                }
            })
        }
    }
}
