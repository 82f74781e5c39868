//! fusebox: circuit breakers applied with one attribute and checked at compile time.
//!
//! ```
//! #[derive(Debug)]
//! enum PaymentError {
//!     Timeout,
//!     Declined,
//!     Rejected(fusebox::Error),
//! }
//!
//! impl From<fusebox::Error> for PaymentError {
//!     fn from(e: fusebox::Error) -> Self {
//!         PaymentError::Rejected(e)
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
//! admission, the call, classification of the outcome, reporting and the fallback. Its arguments
//! are documented on [`circuit_breaker`]; the [`guide`] has the semantics, retries, dynamic keys,
//! the operator's controls, observability, the tower integration, testing with
//! [`FakeClock`](clock::FakeClock) and sharing circuits across replicas.
//!
//! # Features
//!
//! None is on by default: without features, fusebox builds the attribute, the registry and the
//! coarse monotonic clock, and brings no TLS, HTTP client or server, or TOML parser.
//!
//! | feature | what it adds |
//! |---|---|
//! | `chaos` | fault injection for tests and staging ([`fusebox::chaos`](crate::chaos)): failures, `Retry-After` answers, latency and rejections injected into the calls of functions with `chaos = true` |
//! | `config` | per-key overrides from TOML and environment variables (`fusebox::config`, `Registry::load_toml`, `load_env`) |
//! | `metrics` | counters and a gauge per key through the `metrics` crate (`fusebox::metrics`) |
//! | `store` | the store seam ([`fusebox::store`](crate::store)): one circuit across replicas through a store (`fusebox-redis`), or in one process for tests ([`MemoryStore`](crate::store::MemoryStore)) |
//! | `tsc` | [`PreciseClock`](clock::PreciseClock) reads the CPU's time-stamp counter (`quanta`) instead of `std::time::Instant` |
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod breaker;
mod call;
#[cfg(feature = "chaos")]
#[cfg_attr(docsrs, doc(cfg(feature = "chaos")))]
pub mod chaos;
pub mod clock;
#[cfg(feature = "config")]
#[cfg_attr(docsrs, doc(cfg(feature = "config")))]
pub mod config;
mod declared;
mod error;
mod groups;
pub mod guide;
mod key;
mod load;
mod nested;
mod observe;
mod policy;
mod registry;
mod shadow;
mod state;
#[cfg(feature = "store")]
#[cfg_attr(docsrs, doc(cfg(feature = "store")))]
pub mod store;
mod sync;
mod window;

/// The items the `#[circuit_breaker]` expansion names. Its name carries the version of
/// `fusebox-macros` this runtime is built for (the dependency is pinned with `=`), so an
/// expansion by another version fails with "could not find `__private_…` in `fusebox`".
#[doc(hidden)]
#[path = "__private.rs"]
pub mod __private_0_1_0;

pub use breaker::HedgeGate;
pub use breaker::{
    Breaker, KeptBreaker, LastTransition, OwnedPermit, Permit, Recording, SharedWindow, Sharing,
    SiteId, Snapshot,
};
pub use call::attempts::backoff;
pub use call::hedge::hedged;
pub use error::{Cause, Error, Key, Reason};
pub use groups::{Group, GroupPolicy, GroupPolicyError, GroupSettings, GroupSnapshot};
pub use load::hedge::Hedges;
pub use load::hedge::{Hedge, HedgeDelay};
pub use load::pushback::RetryAfter;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub use observe::metrics;
pub use observe::record::{OUTCOME_TARGET, SPAN_TARGET};
pub use observe::{Transition, Trigger};
pub use policy::{
    Concurrency, DURATION_UNITS, DurationError, OpenContext, OpenForFn, Others, Policy,
    PolicyError, PolicyPatch, PolicySettings, Quorum, Recovery, RetryBudget, Window,
    parse_duration,
};
pub use registry::{Registry, UnknownKey, registry, usable_policy};
pub use shadow::ShadowSnapshot;
pub use state::{State, Verdict};

/// The bounds fusebox checks: the policy limits [`Policy::validate`] enforces, the key and
/// registry limits (with the eviction sweep's step), the longest retry delay, and the figures of
/// hedged calls.
pub mod limits {
    pub use crate::call::attempts::MAX_BACKOFF;
    pub use crate::groups::MAX_GROUP_NAMES;
    pub use crate::load::hedge::{LATENCY_PERIOD, MIN_LATENCY_CALLS};
    pub use crate::registry::{DEFAULT_MAX_KEYS, MAX_KEY_LEN, SWEEP_STEP};
    pub use fusebox_policy::limits::*;
}

#[doc = include_str!("../doc/circuit_breaker.md")]
///
/// ```rust,ignore
#[doc = include_str!("../doc/expands_to.rs")]
/// ```
pub use fusebox_macros::circuit_breaker;

#[cfg(test)]
mod tests {
    /// The knobs of the knob table that have an attribute argument (an `attr` column), with
    /// that column.
    macro_rules! arguments {
        ($($name:ident $attr:tt;)*) => {
            [$((stringify!($name), stringify! $attr)),*]
        };
    }

    /// The attribute reference on `circuit_breaker` (`doc/circuit_breaker.md`) has a row and an
    /// example for every knob the attribute takes.
    #[test]
    fn the_attribute_reference_lists_every_knob() {
        let reference = include_str!("../doc/circuit_breaker.md");
        let mut in_code = false;
        let code: Vec<&str> = reference
            .lines()
            .filter(|line| {
                if line.starts_with("```") {
                    in_code = !in_code;
                    return false;
                }
                // a line starting with `# ` is hidden set-up, not the example
                in_code && !line.starts_with("# ")
            })
            .collect();
        let arguments = fusebox_policy::with_knobs!(@arguments arguments);
        assert!(
            arguments.len() < fusebox_policy::KNOBS.len(),
            "`stuck_open` is none"
        );
        for (knob, _) in arguments {
            assert!(
                reference.contains(&format!("| `{knob} = ")),
                "the `circuit_breaker` rustdoc has no row for `{knob}`"
            );
            assert!(
                code.iter().any(|line| line.contains(&format!("{knob} = "))),
                "no example of the `circuit_breaker` rustdoc uses `{knob}`"
            );
        }
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
