//! The permit of an annotated function with a literal key ([`SitePermit`]): two words, its call
//! site's link to the circuit that admitted it (`SiteLink`) and the admission. The link holds
//! the circuit and the function's name, so the permit an `async fn` keeps across its body's
//! `.await` carries neither (a [`NamedPermit`] is three words), and no type of the expansion's
//! own is compiled for it.
//!
//! A call site keeps one link per circuit it admitted through, in a chain that follows the
//! circuit's successors (`Registry::configure` replaces a circuit): a permit reports to the
//! circuit that admitted it, as any permit does, whatever replaced that circuit since.

use std::sync::OnceLock;

use super::permit::{Ticket, abandon};
use super::{Circuit, FnName, NamedPermit, RawPermit};
use crate::state::Word;

/// One call site's link to one circuit: the circuit, the function's name, and the link to the
/// circuit's successor once the site admitted through it. Lives in the site's `static` (or in a
/// link before it), so it is never freed. Not for use outside the expansion.
pub(crate) struct SiteLink {
    core: &'static Circuit,
    name: FnName,
    next: OnceLock<Box<SiteLink>>,
}

impl std::fmt::Debug for SiteLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SiteLink")
            .field("key", &self.core.key)
            .field("name", self.name)
            .finish()
    }
}

impl SiteLink {
    /// The link of the function named `name` to `core`.
    pub(crate) fn new(core: &'static Circuit, name: FnName) -> Self {
        SiteLink {
            core,
            name,
            next: OnceLock::new(),
        }
    }

    /// The link to the newest circuit of this link's chain (itself unless its circuit was
    /// replaced): what a call admits through.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn newest(&'static self) -> &'static SiteLink {
        let mut link = self;
        while let Some(next) = link.core.next() {
            link = link.next_to(next);
        }
        link
    }

    /// The link to `next`, this link's circuit's successor (made on the site's first call after
    /// the replacement).
    #[cold]
    fn next_to(&'static self, next: &'static Circuit) -> &'static SiteLink {
        self.next
            .get_or_init(|| Box::new(SiteLink::new(next, self.name)))
    }

    /// The circuit this link admits through.
    #[inline(always)]
    pub(crate) fn core(&self) -> &'static Circuit {
        self.core
    }

    /// The function's path this link carries (for tests above the breaker).
    #[cfg(test)]
    pub(crate) fn name(&self) -> FnName {
        self.name
    }
}

#[cfg(test)]
impl SitePermit {
    /// The link this permit admitted through (for tests above the breaker).
    pub(crate) fn link(&self) -> &'static SiteLink {
        self.link
    }

    /// The admission it holds.
    pub(crate) fn admission(&self) -> Word {
        self.admission
    }
}

/// The permit of a call of an annotated function with a literal key (see the module docs). Its
/// reports go through [`Permitted`], as a [`NamedPermit`]'s do; dropped unreported, it reports
/// as any permit does (a failure when panicking, otherwise a cancellation). Not for use outside
/// the expansion.
#[must_use = "report the outcome through the expansion's functions"]
pub struct SitePermit {
    admission: Word,
    link: &'static SiteLink,
}

impl SitePermit {
    /// The permit `link`'s circuit gave with `admission`.
    #[inline(always)]
    pub(crate) fn new(link: &'static SiteLink, admission: Word) -> Self {
        SitePermit { link, admission }
    }
}

impl Drop for SitePermit {
    #[inline(always)]
    fn drop(&mut self) {
        if !self.admission.inert() {
            let ticket = Ticket {
                admission: self.admission,
                site: self.link.name,
            };
            self.admission = Word::SETTLED;
            abandon(self.link.core, ticket);
        }
    }
}

impl std::fmt::Debug for SitePermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&RawPermit::new(self.link.core, self.admission), f)
    }
}

/// A permit the expansion reports through: a [`SitePermit`] or a [`NamedPermit`] named by a
/// path. The reports are generic over it (two instances per crate, whatever the number of
/// annotated functions). Not for use outside the expansion.
pub trait Permitted {
    /// The permit's breaker and admission, to report on; the permit itself is settled (a report
    /// that unwinds is not reported again by its drop).
    fn take_raw(&mut self) -> RawPermit<'_>;

    /// The permit's breaker and admission, for the checks of its admission.
    fn raw(&self) -> RawPermit<'_>;
}

impl Permitted for SitePermit {
    #[inline(always)]
    fn take_raw(&mut self) -> RawPermit<'_> {
        let admission = std::mem::replace(&mut self.admission, Word::SETTLED);
        RawPermit::new(self.link.core, admission)
    }

    #[inline(always)]
    fn raw(&self) -> RawPermit<'_> {
        RawPermit::new(self.link.core, self.admission)
    }
}

impl Permitted for NamedPermit<'_> {
    #[inline(always)]
    fn take_raw(&mut self) -> RawPermit<'_> {
        let admission = std::mem::replace(&mut self.raw.admission, Word::SETTLED);
        RawPermit::new(self.raw.core, admission)
    }

    #[inline(always)]
    fn raw(&self) -> RawPermit<'_> {
        RawPermit::new(self.raw.core, self.raw.admission)
    }
}
