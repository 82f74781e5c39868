//! fusebox: circuit breakers applied with one attribute and checked at compile time.
//!
//! ```
//! #[derive(Debug)]
//! enum PaymentError {
//!     Timeout,
//!     Declined,
//!     Refused(fusebox::Error),
//! }
//!
//! impl From<fusebox::Error> for PaymentError {
//!     fn from(e: fusebox::Error) -> Self {
//!         PaymentError::Refused(e)
//!     }
//! }
//!
//! #[fusebox::circuit_breaker(key = "doc-payment", failure = [Timeout])]
//! fn authorize(amount: u64) -> Result<u64, PaymentError> {
//!     if amount > 100 { Err(PaymentError::Declined) } else { Ok(amount) }
//! }
//!
//! assert_eq!(authorize(5).unwrap(), 5);
//! assert!(matches!(authorize(500), Err(PaymentError::Declined))); // a business error: not counted
//! # let _ = (PaymentError::Timeout, );
//! ```
//!
//! The attribute routes every call through the breaker registered under `key` in a [`Registry`]:
//! admission, the call, classification of the outcome, reporting and the fallback. See the README
//! for the attribute reference and the semantics.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "admin")]
pub mod admin;
mod attempts;
mod breaker;
pub mod clock;
#[cfg(feature = "config")]
pub mod config;
mod declared;
mod error;
mod key;
#[cfg(feature = "metrics")]
pub mod metrics;
mod nested;
mod observe;
mod policy;
mod record;
#[cfg(feature = "redis")]
pub mod redis;
mod registry;
mod site;
mod state;
mod sync;
#[cfg(feature = "tower")]
pub mod tower;
mod window;

/// The items the `#[circuit_breaker]` expansion names. Its name carries the version of
/// `fusebox-macros` this runtime is built for (the dependency is pinned with `=`), so an
/// expansion by another version fails with "could not find `__private_…` in `fusebox`".
#[doc(hidden)]
#[path = "__private.rs"]
pub mod __private_0_1_0;

pub use breaker::{Breaker, LastTransition, OwnedPermit, Permit, SharedWindow, Sharing, Snapshot};
pub use error::{Cause, Error, Key, Reason};
pub use observe::{Transition, Trigger};
pub use policy::{Others, Policy, PolicyError, PolicyPatch, Recovery, Window};
pub use record::{OUTCOME_TARGET, SPAN_TARGET};
pub use registry::{Registry, SWEEP_STEP, registry};
pub use state::State;

/// The bounds fusebox checks: the policy limits [`Policy::validate`] enforces, the key and
/// registry limits, and the longest retry delay.
pub mod limits {
    pub use crate::attempts::MAX_BACKOFF;
    pub use crate::registry::{DEFAULT_MAX_KEYS, MAX_KEY_LEN};
    pub use fusebox_policy::limits::*;
}

/// Routes every call of the annotated function through a circuit breaker.
///
/// Goes on `async fn` and `fn`: free functions, inherent methods (`&self`, `&mut self`),
/// trait-impl methods and generic functions. The function must return `Result<T, E>` (directly
/// or through an alias such as `io::Result<T>`; `T` may hold an `impl Trait`). On the methods of
/// an `#[async_trait]` impl it works as on any `async fn` (put `#[async_trait]` on the impl). Every value is checked at compile time, with the
/// validation [`Policy::validate`] runs; misuse is a compile error at the offending token. The
/// crate README has the semantics and the list of compile errors.
///
/// # Arguments
///
/// | argument | default | meaning |
/// |---|---|---|
/// | `key = "payment"` | required | String literal: one breaker per key, shared by every function with that key, cached in a per-call-site `static` (after the first call admission does no hashing and takes no lock). |
/// | `key = host` | | Any expression yielding `&str` or `String`: one breaker per value (per downstream host, say), looked up per call in a lock-free map. Bounded: see Dynamic keys (README). |
/// | `failure = [Timeout, Connect]` | every `Err` (but an inner breaker's refusal) | Variants of `E` that count as failures: unit, tuple or struct variants, by name or by full path (`PaymentError::Timeout`). A name the error type lacks is a compile error at that name. Omitted, every error counts except one converted from the refusal of an inner breaker (see Nested breakers in the README's Semantics). |
/// | `failure = path::to::pred` | | A `fn(&E) -> bool` deciding which errors count. |
/// | `failure_if = path::to::pred` | none | A `fn(&T) -> bool` on the `Ok` value: `Ok` values it accepts count as failures (an HTTP response with status 503, say). The call still returns the `Ok` value unchanged, with or without a fallback: the fallback runs for refusals and counted errors only. With `retry`, a counted `Ok` value is retried like a counted error, and when no attempt is left the last one is returned. |
/// | `others = "success"` | `"ignore"` | What an error the classification does not count (not in `failure = [...]`, or rejected by its predicate) does: `"ignore"` passes it through and leaves the circuit as it was; `"success"` counts it as a success in the window, as Resilience4j, Polly and Sentinel do, so business errors dilute the failure rate (and a half-open probe that ends in one passes). Either way the error is returned untouched, not retried, and never reaches the fallback. Also `Policy::others(Others::Success)` and a config field (`others = "success"`). |
/// | `fallback = name` | none | Called when the call is refused or fails with a counted failure. Free function: `name(args…, cause)`. On a method a bare name means `Self::name(self, args…, cause)`; a path is used as written. It takes the function's parameters plus a last `cause: fusebox::Cause<E>` and returns the function's return type; it is `async` when the function is. A parameter under `#[cfg(...)]` is passed only when it is compiled in: the fallback declares it under the same attributes. |
/// | `window = 100` | `100` | Count window: the last N recorded calls (1 ..= 1,000,000). Older outcomes are evicted. |
/// | `window = "30s"` | | Time window: the calls of the last span ("10ms" ..= "2h"), kept in 10 buckets rotated lazily on the request path. |
/// | `min_calls = 10` | `10` (or `window` if smaller) | No rate decision before this many calls are in the window. Never above a count window: `window = 5` alone decides after 5 calls, and `window` lowers a larger `min_calls` of a `policy = …` base to fit. The same rule holds for `Policy::new().window(5)` and a configured `window = 5`. |
/// | `failure_rate = 50` | `50` | Percent of failures in the window that opens the circuit (1 ..= 100). |
/// | `slow = "2s"` | off | A call slower than this counts as slow (strictly: a call of exactly `slow` is not slow; a slow success is slow, not failed). |
/// | `slow_rate = 80` | `100` | Percent of slow calls that opens the circuit; needs `slow`. Either rate may trip. |
/// | `consecutive = 5` | off | Opens after N counted failures in a row; any success resets the run. Without an explicit `failure_rate` (here, in a `policy = …` base, or in configuration) it replaces the rate rule; with one both apply. The same rule holds for `Policy::new().consecutive(5)` and a configured `consecutive = 5`. |
/// | `failure_count = 50` | off | Opens after N counted failures within the window (the last `window` calls, or the last span of a time window), whatever the rate (1 ..= 1,000,000, at most a count window). `min_calls` does not gate it. Like `consecutive`, without an explicit `failure_rate` it replaces the rate rule; with one both apply. |
/// | `open_for = "10s"` | `"10s"` | How long the circuit stays open before it admits probes ("1ms" ..= "24h"). Units `ns`, `us`, `ms`, `s`, `m`, `h`. |
/// | `open_backoff = 2` | `1` (none) | Each failed recovery in a row multiplies the wait (1 ..= 100); a successful close resets it. |
/// | `open_max = "5m"` | `"5m"` | The cap of `open_backoff` (at least `open_for`). |
/// | `half_open = 1` | `1` | Probes admitted when the wait is over (1 ..= 127). All must succeed to close; any failure reopens. |
/// | `half_open_lease = "10s"` | `open_for` | Probes that never report within this lease are re-armed, so a lost probe cannot wedge the circuit. |
/// | `recovery = progressive(phases = 3, min_passes = 5)` | probes | Progressive recovery: admit 1/3 of the traffic, then 2/3, then all; each phase needs `min_passes` calls under the failure rate to advance, otherwise the circuit reopens. |
/// | `max_concurrent = 10` | unlimited | Per-key bulkhead: at most N calls in flight; the next is refused at once (`Reason::BulkheadFull`), not counted as a failure. |
/// | `shared = false` | `true` | On a registry shared across replicas (Several replicas, README), keeps this key's breaker local to the replica; also a config field (`shared = false` in `[breakers.<key>]`) and `Policy::shared(false)`. |
/// | `timeout = "800ms"` | none | `async fn` only. Bounds each attempt; an elapsed attempt is a counted failure and arrives as `fusebox::Error` with `Reason::TimedOut`, or as `Cause::TimedOut` in a fallback (see Timeouts and the fallback (README)). |
/// | `retry = 3` | `1` | `async fn` only. Total attempts for counted failures; see Retries done right (README). |
/// | `backoff = "100ms"` | none | Base of the exponential backoff between attempts, with full jitter, each delay capped at 30 s. |
/// | `deadline = "2s"` | none | A budget shared by all attempts, checked before each retry. |
/// | `policy = PAYMENT` | `Policy::DEFAULT` | A `const fusebox::Policy` shared by many functions; the arguments above override single fields. |
/// | `registry = REGISTRY` | `fusebox::registry()` | A `static` `fusebox::Registry` (or `LazyLock<Registry>`) instead of the global one: how tests get a `FakeClock`. |
/// | `crate = path` | `::fusebox` | Where the runtime crate is, for crates that re-export fusebox. |
///
/// # Expands to
///
/// The body becomes admission through a per-function `static` call site, the original body
/// wrapped in a closure (or an `async` block, so `return` and `?` stay inside it; an `async` body
/// with no `return`, `?` or macro call runs in place, as a plain block), classification of the
/// outcome, the report on the permit, and the fallback (for an `async fn`, called and awaited
/// once the call has settled). This is the expansion of
/// `#[circuit_breaker(key = "payment", failure = [Timeout], window = 20, open_for = "30s")]`
/// on `fn authorize(amount: u64) -> Result<u64, PaymentError>`, as the snapshot tests of
/// `fusebox-macros` record it (`__private_…` items are not a public API):
///
/// ```rust,ignore
#[doc = include_str!("../doc/expands_to.rs")]
/// ```
pub use fusebox_macros::circuit_breaker;

#[cfg(test)]
mod tests {
    /// The attribute reference on `circuit_breaker` names every knob the attribute takes.
    #[test]
    fn the_attribute_reference_lists_every_knob() {
        let source = include_str!("lib.rs");
        for knob in fusebox_policy::KNOBS {
            if !fusebox_policy::NOT_ARGUMENTS.contains(&knob) {
                assert!(
                    source.contains(&format!("/// | `{knob} = ")),
                    "the `circuit_breaker` rustdoc has no row for `{knob}`"
                );
            }
        }
    }

    /// The argument table of the `circuit_breaker` rustdoc and the README's attribute reference
    /// name the same arguments with the same defaults, in the same order.
    #[test]
    fn the_attribute_reference_matches_the_readme() {
        let heads = |text: &str, prefix: &str| -> Vec<String> {
            text.lines()
                .filter_map(|line| line.strip_prefix(prefix))
                .filter(|row| row.starts_with("| `"))
                .map(|row| {
                    let cells: Vec<&str> = row.split('|').skip(1).take(2).map(str::trim).collect();
                    cells.join(" | ")
                })
                .collect()
        };
        let rustdoc = heads(include_str!("lib.rs"), "/// ");
        let readme = heads(include_str!("../../README.md"), "");
        let reference: Vec<String> = readme
            .into_iter()
            .skip_while(|row| !row.starts_with("`key = \"payment\"`"))
            .take(rustdoc.len())
            .collect();
        assert!(!rustdoc.is_empty());
        assert_eq!(rustdoc, reference);
    }

    /// The private module is named after the version the macro is pinned to (the workspace's).
    #[test]
    fn the_private_module_carries_the_version() {
        let version: String = env!("CARGO_PKG_VERSION")
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let declared = format!("pub mod __private_{version};");
        assert!(
            include_str!("lib.rs").contains(&declared),
            "rename the private module of lib.rs to `__private_{version}`"
        );
    }
}
