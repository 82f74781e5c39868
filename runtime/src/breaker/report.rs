//! Reporting: an outcome goes into the window (closed), the probe count (half-open) or the phase
//! count (progressive recovery), and may trip, reopen or close the circuit.

use super::*;
use crate::policy::{
    OpenContext, jittered_nanos, nanos, open_cap_nanos, open_wait_nanos, slow_nanos,
};
use crate::state;
use crate::window::Now;

/// An open wait in nanoseconds, with the pushback it read ([`Circuit::open_wait`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct OpenWait {
    /// The wait.
    pub(super) nanos: u64,
    /// The pushback's deadline it read (0: none).
    until: u64,
    /// True when pushback made the wait longer than the policy's.
    lengthened: bool,
}

impl Circuit {
    /// Emits the outcome event and span of a reported call admitted at [`Ticket::admitted_at`] (see [`Circuit::enter_raw`]).
    #[cold]
    pub(super) fn record_outcome(&self, permit: Ticket, outcome: Verdict) {
        let now = self.now();
        let latency = permit.latency(now);
        let outcome = match outcome {
            Verdict::Success => crate::observe::record::CallOutcome::Success,
            Verdict::Failure => crate::observe::record::CallOutcome::Failure,
            Verdict::Ignored => crate::observe::record::CallOutcome::Ignored,
        };
        let state = permit.admission.state();
        crate::observe::record::emit(
            self.key.as_str(),
            state,
            now,
            Some(latency),
            outcome,
            permit.site,
        );
    }

    /// Starts a new half-open phase's admission sequence. (Its counts need no reset: they are
    /// tagged with the phase's generation, see [`Circuit::count_in_phase`].)
    pub(super) fn enter_phase(&self) {
        self.phase_seq.store(0, Ordering::Release);
    }

    /// Counts one outcome in the current progressive phase; returns the phase's (calls, failures),
    /// or `None` when the report is stale. Counts carry the phase's generation: the first report of
    /// a new phase replaces the old counts, and a late report from an older phase can never add to
    /// the new one (it re-checks the state after reading the counts, before writing them).
    pub(super) fn count_in_phase(&self, issued: Word, failed: bool) -> Option<(u32, u32)> {
        const FIELD: u64 = (1 << 24) - 1;
        let tag = issued.generation();
        let mut current = self.phase.load(Ordering::Acquire);
        loop {
            if !self.load().same_epoch(issued) {
                return None;
            }
            let (calls, failures) = if current & 0xffff == tag {
                (
                    (current >> 16 & FIELD) + 1,
                    (current >> 40 & FIELD) + u64::from(failed),
                )
            } else {
                (1, u64::from(failed))
            };
            let next = tag | calls.min(FIELD) << 16 | failures.min(FIELD) << 40;
            match self
                .phase
                .compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some((calls as u32, failures as u32)),
                Err(seen) => current = seen,
            }
        }
    }

    /// The verdict of an error the classification does not count: nothing, or a success under
    /// [`Others::Success`](crate::policy::Others::Success).
    #[inline]
    pub(super) fn uncounted(&self) -> Verdict {
        if self.policy.settings().others == crate::policy::Others::Success {
            Verdict::Success
        } else {
            Verdict::Ignored
        }
    }

    /// True when the call admitted under `permit` and reported at `now` was slow: it took
    /// strictly longer than `slow` (a call of exactly `slow` is not slow). Both the local
    /// window and a shared key's report (whose flag the store's script adds up) use it.
    #[inline]
    pub(super) fn is_slow(&self, permit: Ticket, now: u64) -> bool {
        self.timed() && permit.elapsed(now) > slow_nanos(&self.policy)
    }

    /// Applies the outcome of a call admitted under `permit`. `inline(always)` only without
    /// `debug_assertions` (ARCHITECTURE.md, "Inlining").
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(super) fn finish(&self, permit: Ticket, outcome: Verdict) {
        // The common case: a success on a closed circuit whose policy needs no timing, run or
        // bulkhead (a time window reads the clock here, a count window does not): a call the
        // closed fast path admitted, which its admission says (see `permit.rs`).
        if outcome == Verdict::Success && permit.admission.0 & super::admission::FAST_PATH_MASK == 0
        {
            debug_assert!(permit.admission.records());
            // A plain circuit times no call: an admission time says outcome events were wanted.
            if permit.stamped() {
                // Admitted while outcome events were wanted (see `Circuit::enter`).
                self.record_outcome(permit, outcome);
            }
            let word = self.load();
            if word.same_epoch(permit.admission) {
                #[cfg(feature = "metrics")]
                self.meters.call(true, false);
                let now = Now::Read(&self.clock);
                if let Some(counts) = self.window.record_fast_success(now, self.min_calls) {
                    self.judge(word, counts, permit.site);
                }
            }
            return;
        }
        self.finish_general(permit, outcome);
    }

    #[inline(never)]
    pub(super) fn finish_general(&self, permit: Ticket, outcome: Verdict) {
        if permit.admission.inert() {
            return;
        }
        let outcome = if self.stacking.tracks() {
            self.leave_level(outcome)
        } else {
            outcome
        };
        self.finish_admitted(permit, outcome);
    }

    /// [`finish_general`](Circuit::finish_general) of an admitted call, once its call chain's
    /// level is left.
    fn finish_admitted(&self, permit: Ticket, outcome: Verdict) {
        #[cfg(feature = "store")]
        if super::store::is_shared(permit.admission) {
            self.settle_shadows(permit, outcome);
            self.count_shared(outcome);
            if self.store.is_some() {
                // Untimed calls read no clock.
                let slow = self.timed() && self.is_slow(permit, self.now());
                self.report_shared(permit.admission, slow, permit.site, outcome);
                if let Some(here) = self.here() {
                    self.settle_here(here, outcome, slow, permit.site);
                }
            }
            return;
        }
        // Untimed calls carry an admission time only when outcome events were wanted then.
        // Timed calls, and the calls of an adaptive bulkhead, carry their admission time.
        let recorded = if self.timed() || (permit.holds_slot() && self.counters.limiter.is_some()) {
            crate::observe::record::wanted()
        } else {
            permit.stamped()
        };
        if recorded {
            self.record_outcome(permit, outcome);
        }
        if permit.holds_slot() {
            let in_flight = self.counters.in_flight.fetch_sub(1, Ordering::AcqRel);
            if let Some(limiter) = self.counters.limiter.as_deref()
                && outcome != Verdict::Ignored
            {
                let took = permit.elapsed(self.now());
                limiter.sample(took, outcome == Verdict::Failure, in_flight);
            }
        }
        if let Some(next) = self.successor.get() {
            // Reconfigured: the newest breaker decides. The bulkhead slot, shared with it, was
            // released above.
            let mut newest = next;
            while let Some(later) = newest.successor.get() {
                newest = later;
            }
            return newest.finish_admitted(permit.without_slot(), outcome);
        }
        #[cfg(feature = "metrics")]
        self.meters
            .call(outcome == Verdict::Success, outcome == Verdict::Failure);
        self.settle_shadows(permit, outcome);
        match permit.admission.state() {
            State::Closed | State::Disabled => self.report_closed(permit, outcome),
            State::HalfOpen => self.report_probe(permit, outcome),
            State::Open | State::ForcedOpen => {}
        }
    }

    /// Lets the key's shadow policies judge the outcome (a key without any: one load of a
    /// field of the cold part, on the general path only).
    #[inline]
    fn settle_shadows(&self, permit: Ticket, outcome: Verdict) {
        if let Some(shadows) = &self.shadows {
            let now = self.now();
            let took = permit.stamped().then(|| permit.elapsed(now));
            shadows.settle(self.key.as_str(), now, outcome, took);
        }
    }

    #[inline]
    pub(super) fn report_closed(&self, permit: Ticket, outcome: Verdict) {
        let word = self.load();
        if !word.same_epoch(permit.admission) || outcome == Verdict::Ignored {
            return; // the circuit moved on, or the outcome does not count
        }
        let now = if self.timed() || self.window.needs_time() {
            self.now()
        } else {
            0
        };
        let slow = self.is_slow(permit, now);
        let failure = outcome == Verdict::Failure;
        let consecutive = self.policy.settings().consecutive.unwrap_or(0);
        if !failure && !slow {
            if consecutive != 0 && self.run.load(Ordering::Relaxed) != 0 {
                self.run.store(0, Ordering::Relaxed);
            }
            if let Some(counts) = self
                .window
                .record_fast_success(Now::At(now), self.min_calls)
            {
                self.judge(word, counts, permit.site);
            }
            return;
        }
        let counts = self.window.record(now, Sample { failure, slow });
        // Failures in a row, kept only when `consecutive` is set.
        let run = if consecutive == 0 {
            0
        } else if failure {
            self.run.fetch_add(1, Ordering::AcqRel) + 1
        } else {
            self.run.store(0, Ordering::Relaxed);
            0
        };
        if word.state() == State::Closed
            && let Some(trigger) = Trigger::tripped(&self.policy, counts, failure, run)
        {
            self.trip(word, counts, permit.site, trigger);
        }
        if failure && let Some(member) = &self.member {
            member.group.tick(self.now());
        }
    }

    /// Trips the circuit when `counts` reach a rate rule (a closed, not retired breaker only).
    #[inline]
    pub(super) fn judge(&self, word: Word, counts: Counts, site: FnName) {
        if word.state() == State::Closed
            && self.successor.get().is_none()
            && counts.trips(&self.policy)
        {
            self.trip(word, counts, site, self.rate_rule(counts));
        }
    }

    /// Which rate rule `counts` reached: the failure rate when it did, else the slow-call rate.
    pub(super) fn rate_rule(&self, counts: Counts) -> Trigger {
        Trigger::rate_rule(&self.policy, counts)
    }

    #[cold]
    pub(super) fn trip(&self, word: Word, counts: Counts, site: FnName, trigger: Trigger) {
        let now = self.now();
        let wait = self.open_wait(0, counts, now);
        self.trip_for(word, counts, site, trigger, now, wait);
    }

    /// A group's relative rule ejects this member (closed, not retired): it opens for the
    /// ejection backoff's wait, capped by the member's `open_max` (never below its `open_for`),
    /// lengthened by pushback and spread by its `open_jitter` as any opening is, under the
    /// group's cap. True when it opened.
    #[cold]
    pub(crate) fn eject(&self, trigger: Trigger, now: u64) -> bool {
        let Some(member) = &self.member else {
            return false;
        };
        let word = self.load();
        if word.state() != State::Closed || self.successor.get().is_some() {
            return false;
        }
        let (backoff, times) = member.next_ejection(now);
        // The member's own cap and spread, as for any other opening of the key.
        let cap = open_cap_nanos(&self.policy);
        let wait = self.lengthened_and_spread(backoff.min(cap), now);
        let counts = self.window.counts(now);
        let opened = self.trip_for(word, counts, &"group", trigger, now, wait);
        if opened {
            member.ejected(times);
        }
        opened
    }

    /// Opens the circuit from `word` (closed) for `wait`; a group's member first takes a place
    /// under its group's cap, and stays closed when there is none. True when it opened.
    fn trip_for(
        &self,
        word: Word,
        counts: Counts,
        site: FnName,
        trigger: Trigger,
        now: u64,
        wait: OpenWait,
    ) -> bool {
        if let Some(member) = &self.member
            && let crate::groups::Hold::Rejected = member.hold(self.key.as_str())
        {
            return false;
        }
        let next = word.to_open(now, wait.nanos);
        let opened = self.cas(word, next).is_ok();
        if !opened && let Some(member) = &self.member {
            member.unhold();
        }
        if opened {
            self.window.reset();
            self.run.store(0, Ordering::Release);
            self.episode
                .since
                .store(now.saturating_add(1), Ordering::Release);
            self.episode.reported.store(false, Ordering::Release);
            let pushback = self.spend_pushback(wait);
            self.emit_pushed(
                State::Closed,
                State::Open,
                counts,
                site,
                trigger,
                false,
                pushback,
            );
        }
        opened
    }

    #[cold]
    pub(super) fn report_probe(&self, permit: Ticket, outcome: Verdict) {
        match self.policy.settings().recovery {
            Recovery::Progressive { phases, min_passes } => {
                self.report_phase(permit, outcome, phases, min_passes)
            }
            // `Recovery::Probes` (the enum is non-exhaustive; a later kind is added here).
            _ => self.report_single_probe(permit, outcome),
        }
    }

    /// A probe's report under probe recovery: the decision is [`state::after_probe`].
    pub(super) fn report_single_probe(&self, permit: Ticket, outcome: Verdict) {
        let half_open = self.policy.settings().half_open;
        let decided = self.update(self.load(), |word| {
            state::after_probe(word, permit.admission, outcome, half_open, |w| {
                // The probes that decided: those that passed, and this failed one.
                let probes = Counts {
                    calls: w.passed() + 1,
                    failures: 1,
                    slow: 0,
                };
                self.reopen(w, probes)
            })
        });
        let Ok((word, next)) = decided else { return };
        if !next.same_epoch(word) {
            let failures = u32::from(outcome == Verdict::Failure);
            let probes = Counts {
                calls: word.passed() + 1,
                failures,
                slow: 0,
            };
            let trigger = if next.state() == State::Open {
                Trigger::ProbeFailed
            } else {
                Trigger::ProbesPassed
            };
            self.left_half_open(next, probes, permit.site, trigger);
        }
    }

    pub(super) fn report_phase(
        &self,
        permit: Ticket,
        outcome: Verdict,
        phases: u32,
        min_passes: u32,
    ) {
        let word = self.load();
        if word.state() != State::HalfOpen
            || !word.same_epoch(permit.admission)
            || outcome == Verdict::Ignored
        {
            return;
        }
        let Some((calls, failures)) = self.count_in_phase(word, outcome == Verdict::Failure) else {
            return;
        };
        if calls < min_passes {
            return;
        }
        let threshold = u64::from(self.policy.settings().failure_rate.unwrap_or(50));
        let phase = word.passed();
        let next = if u64::from(failures) * 100 >= threshold * u64::from(calls) {
            let phase_counts = Counts {
                calls,
                failures,
                slow: 0,
            };
            self.reopen(word, phase_counts)
        } else if phase >= phases {
            word.to_closed()
        } else {
            word.to_phase(phase + 1, self.now())
        };
        if self.cas(word, next).is_ok() {
            self.enter_phase();
            let probes = Counts {
                calls,
                failures,
                slow: 0,
            };
            match next.state() {
                State::HalfOpen => self.emit(
                    State::HalfOpen,
                    State::HalfOpen,
                    probes,
                    permit.site,
                    Trigger::PhasePassed,
                ),
                State::Open => self.left_half_open(next, probes, permit.site, Trigger::ProbeFailed),
                _ => self.left_half_open(next, probes, permit.site, Trigger::ProbesPassed),
            }
        }
    }

    /// The word of a failed recovery decided by the recovery's calls `probes`: open again, for a
    /// wait grown by `open_backoff` (or its function's).
    pub(super) fn reopen(&self, word: Word, probes: Counts) -> Word {
        let reopens = self.reopens.load(Ordering::Acquire).saturating_add(1);
        let now = self.now();
        let wait = self.open_wait(reopens, probes, now);
        // For the event (`left_half_open`): the last wait computed is the one published.
        self.reopen_pushback.store(
            if wait.lengthened { wait.until } else { 0 },
            Ordering::Release,
        );
        word.to_open(now, wait.nanos)
    }

    /// Pushback: a counted failure asked to be left alone for `wait` (see [`crate::RetryAfter`]).
    /// Kept as the latest moment asked for, which the next open honours ([`Circuit::open_wait`]).
    /// Only failures that carry a wait call it: the paths without pushback never read the field.
    #[cold]
    pub(crate) fn push_back(&self, wait: Duration) {
        if wait.is_zero() {
            return;
        }
        // Reconfigured: the newest breaker decides (as the report does).
        let mut newest = self;
        while let Some(later) = newest.successor.get() {
            newest = later;
        }
        let until = newest.now().saturating_add(nanos(wait)).max(1);
        newest.pushback.fetch_max(until, Ordering::AcqRel);
    }

    /// The open wait after `reopens` failed recoveries in a row, for an opening at `now` decided
    /// by `counts` (the window that tripped, or the recovery's calls). Runs only when the circuit
    /// opens.
    #[cold]
    pub(super) fn open_wait(&self, reopens: u32, counts: Counts, now: u64) -> OpenWait {
        // 1. The policy's wait: `open_for` grown by `open_backoff`, or its function's, floored
        //    and capped by `open_max`.
        let open = OpenContext::new(reopens, counts.calls, counts.failures, counts.slow);
        let policy_wait = open_wait_nanos(&self.policy, &open);
        self.lengthened_and_spread(policy_wait, now)
    }

    /// Steps 2 and 3 of every open wait ([`Circuit::open_wait`], and a group's ejection, whose
    /// step 1 is the ejection backoff capped by `open_max`): `policy_wait` lengthened by
    /// pushback, then spread by `open_jitter`.
    #[cold]
    pub(super) fn lengthened_and_spread(&self, policy_wait: u64, now: u64) -> OpenWait {
        // 2. Pushback: lengthened to what is left of the latest wait a counted failure asked for
        //    ([`Circuit::push_back`]), capped by `open_max` (never below `open_for`); it never
        //    shortens the policy's wait.
        let until = self.pushback.load(Ordering::Acquire);
        let mut wait = OpenWait {
            nanos: policy_wait,
            until,
            lengthened: false,
        };
        if until > now {
            let asked = (until - now).min(open_cap_nanos(&self.policy));
            if asked > policy_wait {
                wait.nanos = asked;
                wait.lengthened = true;
            }
        }
        // 3. Spread by `open_jitter` (last: it spreads whatever wait the steps before it gave).
        wait.nanos = jittered_nanos(&self.policy, wait.nanos);
        wait
    }

    /// After the open `wait` was published: the pushback it honoured is spent (unless a later
    /// failure asked for more meanwhile); the wait, when pushback lengthened it (for the event).
    pub(super) fn spend_pushback(&self, wait: OpenWait) -> Option<Duration> {
        if wait.until != 0 {
            let _ =
                self.pushback
                    .compare_exchange(wait.until, 0, Ordering::AcqRel, Ordering::Acquire);
        }
        wait.lengthened.then(|| Duration::from_nanos(wait.nanos))
    }

    pub(super) fn left_half_open(
        &self,
        next: Word,
        probes: Counts,
        site: FnName,
        trigger: Trigger,
    ) {
        let reopened = next.state() == State::Open;
        let mut pushback = None;
        if reopened {
            self.reopens.fetch_add(1, Ordering::AcqRel);
            // The pushback `reopen` honoured, if any: spent, and named in the event.
            let until = self.reopen_pushback.swap(0, Ordering::AcqRel);
            if until != 0 {
                let now = self.now();
                pushback = self.spend_pushback(OpenWait {
                    nanos: until.saturating_sub(now).min(open_cap_nanos(&self.policy)),
                    until,
                    lengthened: true,
                });
            }
        } else {
            self.reopens.store(0, Ordering::Release);
            self.episode.since.store(0, Ordering::Release);
        }
        self.window.reset();
        self.run.store(0, Ordering::Release);
        self.emit_pushed(
            State::HalfOpen,
            next.state(),
            probes,
            site,
            trigger,
            false,
            pushback,
        );
        if reopened {
            self.check_stuck(self.now(), site);
        }
    }

    /// Emits `circuit_stuck_open` once per open episode, when recovery failed
    /// `stuck_open` times in a row or the circuit has been open longer than its span. Checked
    /// on recovery attempts (the first call after each wait) and failed recoveries: no timer.
    #[cold]
    pub(super) fn check_stuck(&self, now: u64, site: FnName) {
        let since = self.episode.since.load(Ordering::Acquire);
        if since == 0 || self.episode.reported.load(Ordering::Acquire) {
            return;
        }
        let open_nanos = now.saturating_sub(since - 1);
        let failed = self.reopens.load(Ordering::Acquire);
        let (max_failed, max_open) = self.policy.settings().stuck_open;
        let max_nanos = nanos(max_open);
        let stuck = (max_failed != 0 && failed >= max_failed)
            || (max_nanos != 0 && open_nanos >= max_nanos);
        if stuck && !self.episode.reported.swap(true, Ordering::AcqRel) {
            let function: &'static str = site;
            let open_secs = Duration::from_nanos(open_nanos).as_secs_f64();
            let key = self.key.as_str();
            let _ = std::panic::catch_unwind(|| {
                tracing::warn!(
                    target: "fusebox",
                    event = "circuit_stuck_open",
                    key,
                    failed_recoveries = failed,
                    open_secs,
                    function,
                    "circuit_stuck_open"
                )
            });
        }
    }
}
