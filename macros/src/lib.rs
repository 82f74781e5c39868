//! The `#[circuit_breaker]` attribute of [fusebox](https://docs.rs/fusebox). Use it through the
//! `fusebox` crate (`#[fusebox::circuit_breaker(...)]`); this crate holds no runtime logic.
//!
//! The attribute is a pipeline: the arguments are parsed with their spans (`args`), the annotated
//! item is checked (`function`), every error of both steps is reported together, and only a fully
//! valid attribute is expanded (`expand`). On error the item is emitted unchanged next to the
//! errors, so the rest of the crate still type-checks against the original signature.
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
mod validate;

use proc_macro::TokenStream;

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
/// values as failures), `fallback`, `registry`, `crate`; the policy knobs `policy`,
/// `window` (a count, or a duration for a time window), `min_calls`, `failure_rate`,
/// `consecutive`, `failure_count`, `throttle` (the factor of adaptive throttling), `slow`,
/// `slow_rate`, `open_for` (a duration, or a function of the failed recoveries and the window),
/// `open_backoff`, `open_max`, `open_jitter`, `half_open`,
/// `half_open_lease`, `recovery`, `max_concurrent`, `shared`, `others` (`"ignore"`, or
/// `"success"` to count errors `failure` does not count as successes) and `retry_budget`
/// (`"20%"` or `"20%, 10/s"`: retries as a share of first attempts, plus a floor), `group`
/// (`"search"`: the key is a member of a group of keys); and, on an `async fn`, the attempt
/// settings `timeout`, `retry`, `backoff` and `deadline`. The reference, each argument with an
/// example, is the rustdoc of `fusebox::circuit_breaker`.
#[proc_macro_attribute]
pub fn circuit_breaker(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::circuit_breaker(args.into(), item.into()).into()
}
