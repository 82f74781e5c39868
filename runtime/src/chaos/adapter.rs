//! The injection point of the adapters that admit with an [`OwnedPermit`] (fusebox-tower's
//! layer, fusebox-reqwest's middleware): [`Injections::hit`] says what the key's fault does to
//! one admitted call, in values the adapter turns into its own answer.

use std::sync::Arc;
use std::time::Duration;

use super::fault::{Action, Built};
use super::{Injection, Injections};
use crate::breaker::OwnedPermit;

/// What a fault does to one call of an adapter ([`Injections::hit`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum Injected {
    /// The permit was turned into a rejection as if the circuit were open
    /// ([`OwnedPermit::rejection`] says so): the call must not be made.
    Rejected,
    /// The call starts this late.
    Latency(Duration),
    /// The call is not made: the adapter answers with the value the fault built.
    Failure(FaultValue),
    /// The call is not made: the adapter answers with the value the fault built from the wait,
    /// which carries that wait.
    RetryAfter(FaultValue, Duration),
}

/// The value a [`Fault::failure`](super::Fault::failure) or
/// [`Fault::retry_after`](super::Fault::retry_after) built, of the type the user gave it, for
/// the adapter to take as one of the types it can answer with.
pub struct FaultValue {
    value: Built,
    type_name: &'static str,
    injection: Arc<Injection>,
}

impl FaultValue {
    /// The value, when it is a `T`; itself otherwise, to try another type.
    ///
    /// # Errors
    /// The value itself when it is not a `T`.
    pub fn take<T: 'static>(self) -> Result<T, Self> {
        match self.value.downcast::<T>() {
            Ok(value) => Ok(*value),
            Err(value) => Err(FaultValue { value, ..self }),
        }
    }

    /// The name of the value's type.
    #[must_use]
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// Gives the value up: it is none of the types the adapter answers with (`expected`). A
    /// WARN event `chaos_type_mismatch` names the key, the fault and both types, and the call
    /// runs as written, as an annotated function's does.
    pub fn mismatch(self, expected: &str) {
        self.injection.mismatch(self.type_name, expected);
    }
}

impl Injection {
    /// Gives up a value this injection's fault built of type `injected`, which is not the
    /// `expected` one: a WARN event `chaos_type_mismatch` names the key, the fault and both
    /// types (the adapters' injection point and the attribute's alike).
    pub(crate) fn mismatch(&self, injected: &str, expected: &str) {
        tracing::warn!(
            target: "fusebox",
            event = "chaos_type_mismatch",
            key = self.key.as_str(),
            fault = self.fault.kind().as_str(),
            injected,
            expected,
            "chaos_type_mismatch"
        );
    }
}

impl std::fmt::Debug for FaultValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultValue")
            .field("type_name", &self.type_name)
            .finish_non_exhaustive()
    }
}

impl Injections {
    /// The injection point of an adapter, after `permit`'s admission: what the fault of the
    /// permit's key does to this call, if it hits it (`None`: the call runs as written). A
    /// permit the circuit rejected is left to its rejection; a rejection fault that hits turns
    /// the admitted permit into one (counted as a rejected call, its admission given back
    /// uncounted), as the attribute's injection point does.
    pub fn hit(&self, permit: &mut OwnedPermit) -> Option<Injected> {
        if permit.is_rejected() {
            return None;
        }
        let injection = self.find(permit.key_name())?;
        if !injection.hits() {
            return None;
        }
        Some(match &injection.fault.action {
            Action::Rejection => {
                permit.reject_injected();
                Injected::Rejected
            }
            Action::Latency(delay) => Injected::Latency(*delay),
            action @ (Action::Failure(..) | Action::RetryAfter(..)) => {
                let (value, type_name, wait) = action.build()?;
                let value = FaultValue {
                    value,
                    type_name,
                    injection: Arc::clone(&injection),
                };
                match wait {
                    Some(wait) => Injected::RetryAfter(value, wait),
                    None => Injected::Failure(value),
                }
            }
        })
    }

    /// The fault injected into `key`, if any.
    #[must_use]
    pub fn fault(&self, key: &str) -> Option<super::Fault> {
        self.find(key).map(|injection| injection.fault.clone())
    }
}
