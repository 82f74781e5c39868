//! Admission: the bulkhead, then the circuit. A closed plain circuit admits with one atomic load;
//! every other state goes through [`Circuit::admit_general`], which decides with the pure functions of
//! `state` and publishes the decision with one compare-and-swap.

use super::*;
use crate::state::{self, Admission};

/// The bits of a permit's admission none of which is set when the closed fast path admitted it:
/// the mode bits that are zero when closed or disabled (`Word::admits`), and the general path's.
pub(super) const FAST_PATH_MASK: u64 = 0b011 | permit::GENERAL_BIT;

impl Circuit {
    /// No slow-call timing, consecutive rule, bulkhead, throttling or stacking to track: the closed
    /// fast path admits. `general` is 0 then, and set to 1 for good when the circuit starts
    /// tracking stacking (`stack.rs`). Read at admission only: a report knows from its permit
    /// which path admitted it.
    #[inline(always)]
    pub(super) fn plain(&self) -> bool {
        self.general.load(Ordering::Relaxed) == 0
    }

    /// Counts a rejection.
    #[cold]
    pub(super) fn count_rejection(&self, reason: Reason, retry_after: u64) -> Rejection {
        self.counters.rejected.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.meters.rejected();
        Rejection {
            reason,
            retry_after,
        }
    }

    /// Asks for admission: bulkhead first, then the circuit. Reads the clock only when the circuit
    /// is not closed or calls are timed. Never fails: a rejected call gets an inert permit that says
    /// why ([`NamedPermit::rejection`]), so the admitted path moves no `Result` around.
    #[inline(always)]
    #[cfg(test)]
    pub(crate) fn enter<N: Named>(&self, site: N) -> NamedPermit<'_, N> {
        NamedPermit::new(self, self.admission_for::<false>(site.name()), site)
    }

    /// Admission for the function named `site`, the permit without its name (the expansion's,
    /// see [`RawPermit`]): not generic, so compiled once whatever the function.
    #[inline(always)]
    pub(crate) fn enter_raw<const ASK_STORE: bool>(&self, site: FnName) -> RawPermit<'_> {
        RawPermit::new(self, self.admission_for::<ASK_STORE>(site))
    }

    /// The admission of a call of the function named `site` (a rejection's when rejected).
    /// `inline(always)` only without `debug_assertions` (ARCHITECTURE.md, "Inlining").
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn admission_for<const ASK_STORE: bool>(&self, site: FnName) -> Word {
        self.enter_then::<ASK_STORE, FnName, _>(
            site,
            NamedPermit::into_admission,
            NamedPermit::into_admission,
        )
    }

    /// Admission, handing the permit to `admitted` (a permit of the general path may be rejected
    /// too) or, on the fast path of an open circuit, to `rejected`: a caller that turns a rejection
    /// into an [`Error`] builds it where the wait was computed.
    #[inline(always)]
    fn enter_then<'c, const ASK_STORE: bool, N: Named, R>(
        &'c self,
        site: N,
        admitted: impl FnOnce(NamedPermit<'c, N>) -> R,
        rejected: impl FnOnce(NamedPermit<'c, N>) -> R,
    ) -> R {
        let word = self.load();
        if word.admits() && self.plain() {
            // A closed or disabled word has nothing above its mode and generation.
            let start = if crate::observe::record::wanted() {
                permit::marked(self.now())
            } else {
                0
            };
            return admitted(NamedPermit::new(
                self,
                permit::admitted_closed(word, start),
                site,
            ));
        }
        // The other common case: an open circuit whose wait is not over rejects without leaving
        // this function (one clock read, one counter).
        if self.plain() && word.is_open() {
            let now = self.now();
            let remaining = word.open_remaining_nanos(now, self.time_of(word, now));
            if remaining != 0 && !self.metrics_only.load(Ordering::Relaxed) {
                self.counters.rejected.fetch_add(1, Ordering::Relaxed);
                #[cfg(feature = "metrics")]
                self.meters.rejected();
                self.record_rejection(Reason::Open, site.name());
                return rejected(NamedPermit::new(
                    self,
                    permit::rejected_for(Reason::Open.bits(), remaining),
                    site,
                ));
            }
        }
        admitted(self.enter_general::<ASK_STORE>(site.name()).named(site))
    }

    #[inline(never)]
    pub(crate) fn enter_general<const ASK_STORE: bool>(&self, site: FnName) -> NamedPermit<'_> {
        #[cfg(feature = "store")]
        if self.store.is_some() {
            // Adaptive throttling on a shared key draws from the shared window of the store's
            // last answer, before the store is asked.
            if let Some(k) = self.policy.settings().throttle
                && self.load().state() == State::Closed
                && self.sheds(self.shared_counts(), k)
                && let Err(rejection) = self.reject_throttled()
            {
                return NamedPermit::new(self, self.rejected_word(rejection, site), site);
            }
            // A key with a quorum open on this replica alone ("open here only") holds the call
            // before the store is asked.
            if let Some(wait) = self.here().and_then(|h| self.open_here(h)) {
                let rejection = self.count_rejection(Reason::Open, wait);
                return NamedPermit::new(self, self.rejected_word(rejection, site), site);
            }
            if let Some(permit) = self.admit_now(site, ASK_STORE) {
                return permit;
            }
        }
        #[cfg(feature = "store")]
        if ASK_STORE && self.store.is_some() {
            return NamedPermit::new(self, permit::rejected(store::ASK_STORE, NO_WAIT), site);
        }
        self.admit_local(site)
    }

    /// Admission by this breaker alone (a local key, or a shared key's local breaker: a call
    /// that cannot reach its store and may run locally).
    pub(crate) fn admit_local(&self, site: FnName) -> NamedPermit<'_> {
        match self.admit_general(site) {
            Ok(word) => NamedPermit::new(self, word, site),
            Err(rejection) => NamedPermit::new(self, self.rejected_word(rejection, site), site),
        }
    }

    /// The admission word of a call of `site` that `rejection` turned away, its outcome event
    /// emitted first (when a subscriber wants it).
    #[inline(always)]
    pub(super) fn rejected_word(&self, rejection: Rejection, site: FnName) -> Word {
        self.record_rejection(rejection.reason, site);
        permit::rejected(rejection.reason.bits(), rejection.retry_after)
    }

    /// Emits the outcome event of a rejected call, when a subscriber wants it.
    #[inline(always)]
    pub(super) fn record_rejection(&self, reason: Reason, site: FnName) {
        if crate::observe::record::wanted() {
            let outcome = crate::observe::record::CallOutcome::Rejected(reason);
            let state = self.load().state();
            crate::observe::record::emit(self.key.as_str(), state, self.now(), None, outcome, site);
        }
    }

    /// Asks for admission for a caller that awaits (each attempt of the attempt driver); a
    /// rejection is an [`Error`]. On a breaker shared through a store the permit may ask the store
    /// (`RawPermit::asks_store`), which the caller then awaits before running the attempt.
    #[inline]
    pub(crate) fn acquire_awaiting<N: Named>(&self, site: N) -> Result<NamedPermit<'_, N>, Error> {
        self.enter_then::<true, N, _>(
            site,
            |permit| match permit.rejection_code() {
                0 => Ok(permit),
                #[cfg(feature = "store")]
                store::ASK_STORE => Ok(permit),
                code => Err(permit.rejection_error(code)),
            },
            |permit| Err(permit.rejection_error(Reason::Open.bits())),
        )
    }

    /// Asks for admission; a rejection is an [`Error`].
    #[inline]
    pub(crate) fn acquire<N: Named>(&self, site: N) -> Result<NamedPermit<'_, N>, Error> {
        self.enter_then::<false, N, _>(
            site,
            |permit| match permit.rejection() {
                None => Ok(permit),
                Some(rejected) => Err(rejected),
            },
            |permit| Err(permit.rejection_error(Reason::Open.bits())),
        )
    }

    /// Admission through the bulkhead and the circuit: the permit's admission, or why not (on a
    /// circuit that tracks stacking, see `stack.rs`).
    pub(super) fn admit_general(&self, site: FnName) -> Result<Word, Rejection> {
        if self.stacking.tracks() {
            return self.admit_stacked(site);
        }
        self.admit_alone(site)
    }

    /// [`admit_general`](Circuit::admit_general) for a call that runs under no other admission.
    #[inline(always)]
    pub(super) fn admit_alone(&self, site: FnName) -> Result<Word, Rejection> {
        let max_concurrent = self.policy.settings().max_concurrent;
        let bulkhead = max_concurrent.is_some();
        // An adaptive limit learns from latency: its calls carry their admission time.
        let mut adaptive = false;
        if let Some(concurrency) = max_concurrent {
            let limit = match concurrency {
                Concurrency::Fixed(max) => max,
                _ => {
                    adaptive = true;
                    self.concurrency_limit(concurrency)
                }
            };
            if self.counters.in_flight.fetch_add(1, Ordering::AcqRel) >= limit {
                self.counters.in_flight.fetch_sub(1, Ordering::AcqRel);
                return Err(self.count_rejection(Reason::BulkheadFull, NO_WAIT));
            }
        }
        let word = self.load();
        let admitted = if word.admits() {
            // Adaptive throttling: a closed circuit sheds a share of its calls (never a
            // disabled one, which admits everything).
            match self.policy.settings().throttle {
                Some(k) if word.state() == State::Closed && self.sheds(self.local_counts(), k) => {
                    self.reject_throttled()
                }
                _ => Ok(word),
            }
        } else {
            self.acquire_slow(word, site)
        };
        match admitted {
            Ok(word) => {
                let start = if adaptive || self.timed() {
                    self.now()
                } else if crate::observe::record::wanted() {
                    permit::marked(self.now())
                } else {
                    0
                };
                Ok(permit::admitted(word, start, bulkhead))
            }
            Err(rejection) => {
                if bulkhead {
                    self.counters.in_flight.fetch_sub(1, Ordering::AcqRel);
                }
                Err(rejection)
            }
        }
    }

    /// The window's counts for adaptive throttling's draw (the clock is read by a time window only).
    fn local_counts(&self) -> Counts {
        let now = if self.window.needs_time() {
            self.now()
        } else {
            0
        };
        self.window.counts(now)
    }

    /// Adaptive throttling's draw (policy `throttle = k`, a closed circuit): true when this call
    /// falls in the share shed, with the probability [`Counts::throttle_probability`] gives
    /// `counts`.
    fn sheds(&self, counts: Counts, k: f64) -> bool {
        let p = counts.throttle_probability(k, self.min_calls);
        p > 0.0 && fastrand::f64() < p
    }

    /// The rejection of a call adaptive throttling shed ([`Reason::Throttled`], counted apart too),
    /// or in metrics-only mode an admission whose outcome is not recorded.
    #[cold]
    fn reject_throttled(&self) -> Result<Word, Rejection> {
        let rejected = self.reject_or_shadow(Reason::Throttled, NO_WAIT);
        if rejected.is_err() {
            self.counters.throttled.fetch_add(1, Ordering::Relaxed);
            #[cfg(feature = "metrics")]
            self.meters.throttled();
        }
        rejected
    }

    /// A rejection, or in metrics-only mode an admission whose outcome is not recorded.
    #[cold]
    pub(super) fn reject_or_shadow(
        &self,
        reason: Reason,
        retry_after: u64,
    ) -> Result<Word, Rejection> {
        if self.metrics_only.load(Ordering::Acquire) {
            // The call runs: its outcome is its one `fusebox_calls_total` label, and the rejection
            // it escaped is counted apart (in the snapshot's `rejected`, as documented there).
            self.counters.rejected.fetch_add(1, Ordering::Relaxed);
            #[cfg(feature = "metrics")]
            self.meters.shadow_rejected();
            Ok(Word::SHADOW)
        } else {
            Err(self.count_rejection(reason, retry_after))
        }
    }

    /// Admission in a state that does not simply admit: the decision is [`state::admission`],
    /// published with one compare-and-swap by [`Circuit::update`].
    #[cold]
    pub(super) fn acquire_slow(&self, word: Word, site: FnName) -> Result<Word, Rejection> {
        let settings = self.policy.settings();
        let lease = crate::policy::lease_nanos(&self.policy);
        let time = |word: Word| {
            let now = self.now();
            (now, self.time_of(word, now))
        };
        let decided = self.update(word, |word| {
            state::admission(word, settings.recovery, settings.half_open, lease, time)
        });
        match decided {
            Ok((word, next)) => {
                if !next.same_epoch(word) {
                    self.enter_phase();
                    let now = self.now();
                    let counts = self.window.counts(now);
                    let trigger = if word.state() == State::HalfOpen {
                        Trigger::LeaseExpired
                    } else {
                        Trigger::OpenWaitOver
                    };
                    self.emit(word.state(), State::HalfOpen, counts, site, trigger);
                    self.check_stuck(now, site);
                }
                Ok(next)
            }
            Err((word, Admission::Admit)) => Ok(word),
            Err((_, Admission::Reject(reason, wait))) => self.reject_or_shadow(reason, wait),
            Err((word, Admission::Share(phases))) => {
                let seq = self.phase_seq.fetch_add(1, Ordering::AcqRel);
                if word.in_share(seq, phases) {
                    Ok(word)
                } else {
                    self.reject_or_shadow(Reason::Recovering, NO_WAIT)
                }
            }
        }
    }
}
