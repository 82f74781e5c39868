//! What an [`OwnedPermit`] does (the type is in `permit.rs`, beside [`Permit`]): a permit that
//! holds its breaker, for futures that outlive the [`Breaker`] handle; and the [`Recording`] of its
//! outcome in a shared store.

use super::permit::*;
use super::*;

impl OwnedPermit {
    /// Asks the circuit `core` holds for admission on behalf of `site` (a rejected call gets an
    /// inert permit, as the attribute's admission does).
    #[inline(always)]
    pub(super) fn enter(core: Holder, site: FnName) -> Self {
        let admission = core.admission_for::<false>(site);
        OwnedPermit {
            core,
            admission,
            site,
        }
    }

    /// The call succeeded.
    #[inline]
    pub fn success(mut self) {
        self.settle(Verdict::Success);
    }

    /// The call failed in a way that counts against the circuit.
    #[inline]
    pub fn failure(mut self) {
        self.settle(Verdict::Failure);
    }

    /// The call failed in a way that counts, and the server asked to be left alone for `wait`
    /// (see [`Permit::failure_after`]).
    #[inline]
    pub fn failure_after(mut self, wait: Duration) {
        self.push_back(wait);
        self.settle(Verdict::Failure);
    }

    /// Pushback before a failure is [settled](OwnedPermit::settle): the server asked to be left
    /// alone for `wait` (a circuit this failure opens stays open at least that long, capped by
    /// `open_max`). Nothing on a rejected or settled permit.
    #[inline]
    pub fn push_back(&self, wait: Duration) {
        if !self.admission.inert() {
            self.core.push_back(wait);
        }
    }

    /// The wall time of the breaker's clock ([`Clock::wall_time`](crate::clock::Clock::wall_time)),
    /// against which an HTTP-date `Retry-After` becomes a wait.
    #[inline]
    #[must_use]
    pub fn wall_time(&self) -> std::time::SystemTime {
        self.core.clock.wall_time()
    }

    /// The call ended with an error that does not count as a failure (a business error): it
    /// does not affect the circuit, or counts as a success when the policy says
    /// [`Others::Success`](crate::Others::Success) ([`Policy::others`](crate::Policy::others)).
    #[inline]
    pub fn ignore(mut self) {
        let verdict = self.core.uncounted();
        self.settle(verdict);
    }

    /// What [`ignore`](OwnedPermit::ignore) reports: [`Verdict::Ignored`], or
    /// [`Verdict::Success`] under [`Others::Success`](crate::Others::Success).
    #[inline]
    #[must_use]
    pub fn uncounted(&self) -> Verdict {
        self.core.uncounted()
    }

    /// True when this call is a half-open probe.
    #[must_use]
    pub fn is_probe(&self) -> bool {
        self.admission.state() == State::HalfOpen && !self.admission.inert()
    }

    /// True when the breaker rejected the call (see [`Breaker::admit`]): the call must not be
    /// made, and reporting on the permit does nothing.
    #[inline]
    #[must_use]
    pub fn is_rejected(&self) -> bool {
        self.admission.rejection() != 0
    }

    /// Why the call was rejected, when it was (see [`Breaker::admit`]).
    #[inline]
    #[must_use]
    pub fn rejection(&self) -> Option<Error> {
        match self.admission.rejection() {
            0 => None,
            code => Some(error_for_rejection(&self.core.key, code, self.admission)),
        }
    }

    /// The wait for the recording of this permit's outcome in a shared store, to be taken before
    /// the permit [settles](OwnedPermit::settle) and awaited after, before the call's result is
    /// returned: `Some` only for a permit a breaker shared in strict mode admitted (feature
    /// `redis`), so that a caller sees its outcome in the shared window; `None` otherwise.
    #[inline(always)]
    #[must_use]
    pub fn recording(&self) -> Option<Recording> {
        #[cfg(feature = "store")]
        return self.store_recording().map(Recording);
        #[cfg(not(feature = "store"))]
        None
    }

    /// Gives the permit up unreported, in place: a failure when the thread is panicking (a panic
    /// guard's drop), else a cancellation, which counts nothing and frees a probe's slot.
    #[inline]
    pub fn abandon(&mut self) {
        self.settle(abandoned());
    }

    /// Reports `outcome` in place, for an adapter that holds the permit in a pinned future;
    /// reporting twice is harmless (the second does nothing). [`success`](OwnedPermit::success),
    /// [`failure`](OwnedPermit::failure) and [`ignore`](OwnedPermit::ignore) are the same by
    /// value.
    #[inline]
    pub fn settle(&mut self, outcome: Verdict) {
        if !self.admission.inert() {
            let ticket = Ticket {
                admission: self.admission,
                site: self.site,
            };
            // Settled before the report runs, so nothing unwinding out of it releases twice.
            self.admission = Word::SETTLED;
            self.core.finish(ticket, outcome);
        }
    }
}

impl Drop for OwnedPermit {
    #[inline]
    fn drop(&mut self) {
        if !self.admission.inert() {
            self.abandon();
        }
    }
}

impl fmt::Debug for OwnedPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit")
            .field("key", &self.core.key)
            .field("probe", &self.is_probe())
            .finish()
    }
}

/// The recording of a permit's outcome in a shared store ([`OwnedPermit::recording`]): a future
/// that completes when the store recorded it, or when the store's timeout gave up.
#[must_use = "a recording does nothing unless awaited"]
pub struct Recording(std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'static>>);

impl std::future::Future for Recording {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording").finish_non_exhaustive()
    }
}
