//! What the Redis store (`crate::redis`) needs of a breaker: permits carrying the store's answer,
//! the local state as the script's seed, and the local mirror of the shared state. Nothing here is
//! on a local key's path.

use std::time::Duration;

use super::{Core, FnName, Named, Permit, Ticket, permit};
use crate::error::Reason;
use crate::observe::Trigger;
use crate::state::{NO_WAIT, State, Verdict, Word};
use crate::sync::Ordering;
use crate::window::Counts;

impl Core {
    /// An admitted permit carrying the store's `word` (see `crate::redis`).
    pub(crate) fn store_permit(&self, word: Word, site: FnName) -> Permit<'_> {
        let start = if self.timed() { self.now() } else { 0 };
        Permit {
            core: self,
            word: permit::admitted(word, start, false),
            site,
        }
    }

    /// A refused permit with `reason` and the wait before the next probe.
    pub(crate) fn store_refusal(
        &self,
        reason: Reason,
        retry_after: Option<Duration>,
        site: FnName,
    ) -> Permit<'_> {
        let retry_after = retry_after.map_or(NO_WAIT, |d| {
            u64::try_from(d.as_nanos())
                .unwrap_or(u64::MAX - 1)
                .min(u64::MAX - 1)
        });
        let refusal = self.count_refusal(reason, retry_after);
        Permit {
            core: self,
            word: permit::refused(refusal.reason.code(), refusal.retry_after),
            site,
        }
    }

    /// The local state as the script's seed: (state code, open remaining in ms).
    pub(crate) fn seed(&self) -> (u64, u64) {
        let word = self.load();
        match word.state() {
            State::Open => {
                let now = self.now();
                let remaining = word.open_remaining_nanos(now, self.time_of(word, now));
                (1, remaining.div_ceil(1_000_000))
            }
            State::ForcedOpen => (3, 0),
            State::Disabled => (4, 0),
            _ => (0, 0),
        }
    }

    /// Seeds the local breaker with the state the store reported (no event: the transition was
    /// committed, and announced, by whichever replica made it).
    pub(crate) fn mirror(&self, state: State, open_remaining: Duration) {
        let mut word = self.load();
        loop {
            let next = match (state, word.state()) {
                (State::Open, State::Open) | (State::Closed, State::Closed) => return,
                (State::Open, _) => word.to_open(
                    self.now(),
                    u64::try_from(open_remaining.as_nanos()).unwrap_or(u64::MAX),
                ),
                (State::Closed, State::Open | State::HalfOpen) => word.to_closed(),
                _ => return,
            };
            match self.cas(word, next) {
                Ok(()) => {
                    self.window.reset();
                    self.run.store(0, Ordering::Release);
                    return;
                }
                Err(seen) => word = seen,
            }
        }
    }

    /// Announces a transition this replica committed in the store.
    pub(crate) fn emit_committed(
        &self,
        from: State,
        to: State,
        calls: u32,
        failures: u32,
        site: FnName,
    ) {
        let counts = Counts {
            calls,
            failures,
            slow: 0,
        };
        // The script reports the states, not the rule: the trigger is read off the states (a
        // closed circuit that opened is reported as tripped by its failure rate).
        let trigger = match (from, to) {
            (State::Closed, State::Open) => Trigger::FailureRate,
            (State::HalfOpen, State::Open) => Trigger::ProbeFailed,
            (State::Open, State::HalfOpen) => Trigger::OpenWaitOver,
            (State::HalfOpen, State::Closed) => Trigger::ProbesPassed,
            (State::HalfOpen, State::HalfOpen) => Trigger::PhasePassed,
            _ => Trigger::Operator,
        };
        self.emit(from, to, counts, site, trigger);
    }

    /// Applies an outcome to the local breaker (the store could not be reached): as a call admitted
    /// under the current local state.
    pub(crate) fn report_locally(&self, failure: Option<bool>, site: FnName) {
        let outcome = match failure {
            Some(true) => Verdict::Failure,
            Some(false) => Verdict::Success,
            None => return,
        };
        let word = self.load();
        if word.records() {
            self.report_closed(
                Ticket {
                    word: permit::admitted(word, self.now(), false),
                    site,
                },
                outcome,
            );
        }
    }
}

impl<'a, N: Named> Permit<'a, N> {
    /// The breaker, when this permit asks its store for admission.
    pub(crate) fn asks_store(&self) -> Option<&'a Core> {
        (self.word.refusal() == crate::redis::ASK_STORE).then_some(self.core)
    }

    /// The breaker that issued this permit.
    pub(crate) fn core(&self) -> &'a Core {
        self.core
    }

    /// The annotated function's path.
    pub(crate) fn site(&self) -> FnName {
        self.site.name()
    }

    /// Replaces a permit that asked the store with the store's answer.
    pub(crate) fn replace(&mut self, answer: Permit<'a>) {
        let mut answer = answer;
        self.word = answer.word;
        answer.word = Word::SETTLED;
    }
}
