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

mod attempts;
mod breaker;
pub mod clock;
#[cfg(feature = "config")]
pub mod config;
mod declared;
mod error;
mod key;
mod observe;
mod policy;
mod record;
mod registry;
mod site;
mod state;
mod sync;
#[cfg(feature = "tower")]
pub mod tower;
mod window;

#[doc(hidden)]
pub mod __private;

pub use attempts::MAX_BACKOFF;
pub use breaker::{Breaker, LastTransition, OwnedPermit, Permit, Snapshot};
pub use error::{Cause, Error, Key, Reason};
pub use observe::{Transition, Trigger};
pub use policy::{
    MAX_HALF_OPEN, MAX_OPEN_BACKOFF, MAX_OPEN_FOR, MAX_PHASES, MAX_TIME_WINDOW, MAX_WINDOW,
    MIN_OPEN_FOR, MIN_TIME_WINDOW, Policy, PolicyError, PolicyPatch, Recovery, TIME_BUCKETS,
    Window,
};
pub use record::OUTCOME_TARGET;
pub use registry::{DEFAULT_MAX_KEYS, MAX_KEY_LEN, Registry, SWEEP_STEP, registry};
pub use state::State;

/// Routes every call of the annotated function through a circuit breaker.
///
/// See the crate README for the arguments; misuse is a compile error at the offending token.
pub use fusebox_macros::circuit_breaker;
