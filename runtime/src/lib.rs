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

mod breaker;
pub mod clock;
#[cfg(feature = "config")]
pub mod config;
mod declared;
mod error;
mod observe;
mod policy;
mod record;
mod registry;
mod retry;
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
pub(crate) use __private_0_1_0 as __private;

pub use breaker::{Breaker, LastTransition, OwnedPermit, Permit, Snapshot};
pub use error::{Cause, Error, Key, Reason};
pub use observe::{Transition, Trigger};
pub use policy::{Policy, PolicyError, PolicyPatch, Recovery, Window};
pub use record::OUTCOME_TARGET;
pub use registry::{Registry, SWEEP_STEP, registry};
pub use state::State;

/// The bounds fusebox checks: the policy limits [`Policy::validate`] enforces, the key and
/// registry limits, and the longest retry delay.
pub mod limits {
    pub use crate::registry::{DEFAULT_MAX_KEYS, MAX_KEY_LEN};
    pub use crate::retry::MAX_BACKOFF;
    pub use fusebox_policy::limits::*;
}

/// Routes every call of the annotated function through a circuit breaker.
///
/// See the crate README for the arguments; misuse is a compile error at the offending token.
pub use fusebox_macros::circuit_breaker;

#[cfg(test)]
mod tests {
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
