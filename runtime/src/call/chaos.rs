//! The injection points the expansion of a function with `chaos = true` calls: [`admit`] after a
//! single call's admission (or [`of_key`] and [`after_acquire`] around the attempt driver's), then
//! [`around_async`] or [`around_sync`] around the body.

use std::future::Future;
use std::sync::Arc;

use crate::breaker::{FnName, Named, NamedPermit, RawPermit};
use crate::chaos::Injection;
use crate::chaos::fault::Action;
use crate::error::Error;
use crate::registry::Registry;

/// The injection of one call's key, found once per call (`None`: the call runs as written).
#[derive(Clone, Default)]
pub struct Chaos(Option<Arc<Injection>>);

impl std::fmt::Debug for Chaos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = self.0.as_ref().map(|injection| injection.fault.kind());
        f.debug_tuple("Chaos").field(&kind).finish()
    }
}

/// The injection of `key` in `registry`.
#[must_use]
pub fn of_key(registry: &Registry, key: &str) -> Chaos {
    Chaos(registry.chaos().find(key))
}

/// After a single call's admission: the injection of the permit's key; a rejection fault that
/// hits turns the admitted permit into a rejection (the body never runs).
#[must_use]
pub fn admit(registry: &Registry, permit: &mut RawPermit<'_>, site: FnName) -> Chaos {
    let chaos = Chaos(registry.chaos().find(permit.core().key().as_str()));
    if let Some(injection) = &chaos.0
        && matches!(injection.fault.action, Action::Rejection)
        && !permit.is_rejected()
        && injection.hits()
    {
        permit.reject_injected(site);
    }
    chaos
}

/// After an attempt's admission by the attempt driver: a rejection fault that hits turns the
/// admitted permit into its rejection's error.
///
/// # Errors
/// The admission's own error, or the injected rejection's.
pub fn after_acquire<'a, N: Named>(
    chaos: &Chaos,
    admitted: Result<NamedPermit<'a, N>, Error>,
) -> Result<NamedPermit<'a, N>, Error> {
    match (&chaos.0, admitted) {
        (Some(injection), Ok(permit))
            if matches!(injection.fault.action, Action::Rejection) && injection.hits() =>
        {
            crate::breaker::reject_injected(permit)
        }
        (_, admitted) => admitted,
    }
}

/// What an injection does to the body about to run: delay it, replace it with an error, or
/// nothing.
enum Effect<E> {
    None,
    Delay(std::time::Duration),
    Fail(E),
}

impl Chaos {
    /// The effect on the next body of a function whose error type is `E`.
    fn effect<E: 'static>(&self) -> Effect<E> {
        let Some(injection) = &self.0 else {
            return Effect::None;
        };
        // A rejection fault acts at admission (`admit`, `after_acquire`), not here.
        if matches!(injection.fault.action, Action::Rejection) || !injection.hits() {
            return Effect::None;
        }
        if let Action::Latency(delay) = injection.fault.action {
            return Effect::Delay(delay);
        }
        let Some((built, type_name, _)) = injection.fault.action.build() else {
            return Effect::None;
        };
        match built.downcast::<E>() {
            Ok(error) => Effect::Fail(*error),
            Err(_) => {
                injection.mismatch(type_name, std::any::type_name::<E>());
                Effect::None
            }
        }
    }
}

/// The body of an `async fn` (an attempt's, with the attempt driver) behind its injection: a
/// latency fault sleeps on tokio's clock before it, a failure returns the injected error instead.
///
/// # Errors
/// The body's error, or the injected one.
pub async fn around_async<T, E: 'static, F: Future<Output = Result<T, E>>>(
    chaos: Chaos,
    body: F,
) -> Result<T, E> {
    match chaos.effect::<E>() {
        Effect::None => {}
        Effect::Delay(delay) => tokio::time::sleep(delay).await,
        Effect::Fail(error) => return Err(error),
    }
    body.await
}

/// The body of a plain `fn` behind its injection: a latency fault blocks the thread before it
/// (`std::thread::sleep`), a failure returns the injected error instead.
///
/// # Errors
/// The body's error, or the injected one.
pub fn around_sync<T, E: 'static>(
    chaos: &Chaos,
    body: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    match chaos.effect::<E>() {
        Effect::None => {}
        Effect::Delay(delay) => std::thread::sleep(delay),
        Effect::Fail(error) => return Err(error),
    }
    body()
}
