//! [`Named`]: where a permit finds the path of the function it was admitted for.

/// Where a permit finds the path of the function it was admitted for, which events carry: the
/// path itself (`&'static &'static str`, one word: what a single call's permit holds), or a
/// zero-sized type of the attribute's expansion that knows its call site's path (what the attempt
/// driver's permits hold, two words in each of its states). The expansion's single-call reports
/// pass the path themselves (see [`RawPermit`](super::RawPermit)), so there a permit asks it only
/// when dropped unreported. Not for use outside the expansion.
#[doc(hidden)]
pub trait Named: Send + Sync + 'static {
    /// The function's path.
    fn name(&self) -> &'static &'static str;
}

impl Named for &'static &'static str {
    #[inline(always)]
    fn name(&self) -> &'static &'static str {
        self
    }
}
