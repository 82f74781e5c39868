//! What an adapter (the tower layer, the reqwest middleware) admits through: a permit that may be
//! rejected ([`Breaker::admit`]), and a breaker kept for the life of the process
//! ([`KeptBreaker`]).

use super::{Breaker, Circuit, OwnedPermit, permit};

impl Breaker {
    /// Asks for admission on behalf of `site`, for an adapter that holds the permit in its own
    /// future (the tower layer, the reqwest middleware): a rejected call gets an inert permit
    /// whose [`OwnedPermit::rejection`] says why, so the admitted path moves no `Result`.
    /// `site` is what events and the per-call record name as the calling function (a reference
    /// to a static string, so the permit holds one word for it). [`try_acquire_owned`](Breaker::try_acquire_owned)
    /// is the same admission as a `Result`.
    ///
    /// ```
    /// static SITE: &str = "my_adapter::call";
    /// let breaker = fusebox::Registry::new().breaker("doc-admit", fusebox::Policy::new()).unwrap();
    /// let permit = breaker.admit(&SITE);
    /// assert!(!permit.is_rejected());
    /// permit.success();
    /// ```
    #[inline(always)]
    pub fn admit(&self, site: &'static &'static str) -> OwnedPermit {
        OwnedPermit::enter(permit::Holder::Counted(self.core.current().clone()), site)
    }

    /// This key's circuit, kept for the life of the process: a [`KeptBreaker`] admits calls
    /// whose permits hold it by a plain reference (no reference count taken or given back per
    /// call). For an adapter with a fixed key built once, as the fixed-key tower layer is; each
    /// kept circuit costs one breaker that is never freed.
    #[must_use]
    pub fn keep(&self) -> KeptBreaker {
        KeptBreaker(self.core.kept())
    }
}

/// A breaker kept for the life of the process ([`Breaker::keep`]): `Copy`, and its permits hold
/// the circuit by a plain reference. Follows the key's reconfigurations as a [`Breaker`] does.
#[derive(Clone, Copy)]
pub struct KeptBreaker(&'static Circuit);

impl KeptBreaker {
    /// Asks for admission on behalf of `site`, as [`Breaker::admit`] does.
    #[inline(always)]
    pub fn admit(self, site: &'static &'static str) -> OwnedPermit {
        self.0.enter_kept(site)
    }

    /// The key.
    #[must_use]
    pub fn key(self) -> &'static str {
        self.0.newest().key().as_str()
    }
}

impl std::fmt::Debug for KeptBreaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("KeptBreaker").field(&self.key()).finish()
    }
}
