//! Fault injection's rejection (`fusebox::chaos`, feature `chaos`): an admitted permit turned
//! into a rejection as if the circuit were open. Reached only by functions whose attribute has
//! `chaos = true`, after their admission: the admission itself is unchanged.

use super::permit::RawPermit;
use super::{Circuit, Named, NamedPermit, Verdict};
use crate::error::{Error, Reason};
use crate::state::{NO_WAIT, Word};

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
        self.admission = self.core.injected_rejection(site);
    }
}

impl Circuit {
    /// The admission word of an injected rejection of a call of `site`: counted as a rejected
    /// call (snapshot, metrics), its outcome event emitted, with reason [`Reason::Open`] and no
    /// wait.
    fn injected_rejection(&self, site: super::FnName) -> Word {
        let rejection = self.count_rejection(Reason::Open, NO_WAIT);
        self.rejected_word(rejection, site)
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
        self.admission = self.core.injected_rejection(self.site);
    }

    /// The key of the permit's circuit.
    pub(crate) fn key_name(&self) -> &str {
        self.core.key.as_str()
    }
}
