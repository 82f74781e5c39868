//! The `#[circuit_breaker]` attribute of [fusebox](https://docs.rs/fusebox). Use it through the
//! `fusebox` crate (`#[fusebox::circuit_breaker(...)]`); this crate holds no runtime logic.
//!
//! The attribute is a pipeline (`attribute`): the arguments are parsed with their spans
//! (`args`), the annotated item is checked (`function`), the policy the arguments build is judged
//! by the runtime's own validation and the key checked against the parameters (`validate`), every
//! error of these steps is reported together, and only a fully valid attribute is expanded
//! (`expand`). On error the item is emitted unchanged next to the errors, so the rest of the crate
//! still type-checks against the original signature. The validation and the expansion read the
//! policy's setter calls from one list (`setters`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod args;
mod duration;
mod errors;
mod expand;
mod function;
mod setters;
#[cfg(test)]
mod snapshots;
mod tokens;
mod validate;

use proc_macro::TokenStream;

use errors::Errors;

/// Routes every call of the annotated function through the circuit breaker named by `key`.
///
/// ```ignore
/// #[fusebox::circuit_breaker(key = "payment", failure = [Timeout, Connect], fallback = enqueue)]
/// async fn authorize(client: &PaymentClient, order: &Order) -> Result<Receipt, PaymentError> {
///     client.authorize(order).await
/// }
/// ```
///
/// Arguments: `key` (required: a string literal, or an expression yielding `&str`/`String` for one
/// breaker per value), `failure` (variants of the error type, or a
/// predicate `fn(&E) -> bool`), `failure_if` (a predicate `fn(&T) -> bool` counting `Ok`
/// values as failures), `fallback`, `registry`, `crate`, `chaos` (`true`: the calls run behind
/// `fusebox::chaos`'s fault injection, with its feature); the policy knobs `policy`,
/// `window` (a count, or a duration for a time window), `min_calls`, `failure_rate`,
/// `consecutive`, `failure_count`, `throttle` (the factor of adaptive throttling), `slow`,
/// `slow_rate`, `open_for` (a duration, or a function of the failed recoveries and the window),
/// `open_backoff`, `open_max`, `open_jitter`, `half_open`,
/// `half_open_lease`, `recovery`, `max_concurrent`, `shared`, `quorum` (`2` or `"50%"`: the
/// replicas whose failures open a shared circuit for all), `others` (`"ignore"`, or
/// `"success"` to count errors `failure` does not count as successes) and `retry_budget`
/// (`"20%"` or `"20%, 10/s"`: retries as a share of first attempts, plus a floor),
/// `hedge_budget` (a percentage: the hedges of hedged calls as a share of calls), `group`
/// (`"search"`: the key is a member of a group of keys), `shadow` (`"window = 50,
/// failure_rate = 30"`: candidate policies judging the same outcomes without acting); and, on an
/// `async fn`, the attempt settings `timeout`, `retry`, `backoff` and `deadline`, and the hedging
/// settings `hedge` (`"50ms"` or `"p95"`) and `hedge_max`. The reference, each argument with an
/// example, is the rustdoc of `fusebox::circuit_breaker`.
#[proc_macro_attribute]
pub fn circuit_breaker(args: TokenStream, item: TokenStream) -> TokenStream {
    attribute(args.into(), item.into()).into()
}

/// The whole attribute: parse, check, then rewrite; on any error the item is returned unchanged
/// with every error appended.
fn attribute(
    args: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
) -> proc_macro2::TokenStream {
    let mut errors = Errors::default();
    let args::Parsed {
        attempt_names,
        args,
    } = args::parse(args);
    // What the argument checks let through is judged by the runtime's own validation.
    let args = errors.ok(args.and_then(|args| validate::check(&args.policy).map(|()| args)));
    let fallback = args.as_ref().is_some_and(|args| args.fallback.is_some());
    let function = errors.ok(function::parse(item.clone(), fallback, &attempt_names));
    let key_check = match (&args, &function) {
        (Some(args), Some(function)) => validate::check_key_name(&args.key, function),
        _ => Ok(()),
    };
    errors.ok(key_check);
    match (args, function, errors.finish()) {
        (Some(args), Some(function), Ok(())) => expand::expand(args, function),
        (_, _, result) => {
            let mut output = item;
            if let Err(error) = result {
                output.extend(error.to_compile_error());
            }
            output
        }
    }
}
