//! Fault injection's rejection (`fusebox::chaos`, feature `chaos`): an admitted permit turned
//! into a rejection as if the circuit were open. Reached only by functions whose attribute has
//! `chaos = true`, after their admission: the admission itself is unchanged.

use super::permit::{self, RawPermit};
use super::{Named, NamedPermit, Verdict};
use crate::error::{Error, Reason};
use crate::state::NO_WAIT;
use crate::sync::Ordering;

impl RawPermit<'_> {
    /// Turns this admitted permit into a rejection with reason [`Reason::Open`], counted as a
    /// rejected call (snapshot, metrics, the outcome event) after its admission is given back
    /// uncounted (its bulkhead slot or probe released, the window untouched). A permit already
    /// rejected or settled is left as it is.
    #[cold]
    #[inline(never)]
    pub(crate) fn reject_injected(&mut self, site: super::FnName) {
        if self.admission.inert() {
            return;
        }
        self.settle(Verdict::Ignored, site);
        let core = self.core;
        core.counters.rejected.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        core.meters.rejected();
        core.record_rejection(Reason::Open, site);
        self.admission = permit::rejected(Reason::Open.bits(), NO_WAIT);
    }
}

/// [`RawPermit::reject_injected`] for the attempt driver's admission: an admitted permit becomes
/// its rejection's error.
pub(crate) fn reject_injected<'a, N: Named>(
    mut permit: NamedPermit<'a, N>,
) -> Result<NamedPermit<'a, N>, Error> {
    // A permit that still waits for a shared key's store is left to it.
    if permit.raw.is_rejected() || permit.raw.admission.inert() {
        return Ok(permit);
    }
    let site = permit.site.name();
    permit.raw.reject_injected(site);
    Err(permit.raw.rejection_or_open())
}

impl super::OwnedPermit {
    /// [`RawPermit::reject_injected`] for an adapter's permit (the tower layer's, the reqwest
    /// middleware's): the admitted permit becomes a rejection with reason [`Reason::Open`].
    #[cold]
    #[inline(never)]
    pub(crate) fn reject_injected(&mut self) {
        if self.admission.inert() {
            return;
        }
        self.settle(Verdict::Ignored);
        let core = &*self.core;
        core.counters.rejected.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        core.meters.rejected();
        core.record_rejection(Reason::Open, self.site);
        self.admission = permit::rejected(Reason::Open.bits(), NO_WAIT);
    }

    /// The key of the permit's circuit.
    pub(crate) fn key_name(&self) -> &str {
        self.core.key.as_str()
    }
}
