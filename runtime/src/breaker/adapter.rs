//! What an adapter (the tower layer, the reqwest middleware) admits through: a permit that may be
//! rejected ([`Breaker::admit`]), a breaker kept for the life of the process ([`KeptBreaker`]),
//! and the adapter's identity as an admitting site ([`SiteId`]).

use std::sync::atomic::{AtomicUsize, Ordering};

use super::{Breaker, Circuit, OwnedPermit, permit};

/// An adapter's identity as a site that admits calls on a key (one per layer or middleware
/// built): [`Breaker::claim`] names a circuit from it. A circuit two sites name (two adapters, or
/// an adapter and an annotated function) counts a call made inside an admission of the same
/// circuit once, at the innermost admission (see the guide's "Stacking on one key").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SiteId(usize);

impl SiteId {
    /// A new identity, distinct from every other one of this process.
    #[must_use]
    pub fn new() -> SiteId {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        // Odd numbers from 3: never an annotated call site's address (aligned), never the
        // circuit's "no site" (0) or "several sites" (2).
        SiteId(NEXT.fetch_add(1, Ordering::Relaxed) * 2 + 3)
    }
}

impl Default for SiteId {
    fn default() -> Self {
        SiteId::new()
    }
}

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

    /// Names this key's circuit from the adapter `site`, before its first admission (when the
    /// adapter is built, or before each admission when its key comes from the request; a
    /// second claim from the same site costs one atomic load). A circuit two sites name counts
    /// a call made inside an admission of the same circuit once (see the guide's "Stacking on
    /// one key"), and leaves the closed fast path for it.
    ///
    /// ```
    /// let breaker = fusebox::Registry::new().breaker("doc-claim", fusebox::Policy::new()).unwrap();
    /// breaker.claim(fusebox::SiteId::new());
    /// ```
    #[inline]
    pub fn claim(&self, site: SiteId) {
        self.core.current().claim_site(site.0);
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

    /// Names this circuit from the adapter `site`, as [`Breaker::claim`] does.
    #[inline]
    pub fn claim(self, site: SiteId) {
        self.0.newest().claim_site(site.0);
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
