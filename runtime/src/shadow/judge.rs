//! One shadow's state machine: the breaker's own window ([`Outcomes`]) and state word ([`Word`],
//! with the pure decisions of `state.rs`), driven by the outcomes the breaker in force reports,
//! never by callers: it decides what it would have done with each call when the call settles.

use crate::observe::Trigger;
use crate::policy::{OpenContext, Policy, jittered_nanos, lease_nanos, open_wait_nanos};
use crate::state::{self, Admission, State, Step, TimeStamp, Verdict, Word};
use crate::window::{Counts, Outcomes, Sample};

/// A transition a shadow would have made, for its event and metrics.
#[derive(Debug, Clone, Copy)]
pub(super) struct Moved {
    pub(super) from: State,
    pub(super) to: State,
    pub(super) trigger: Trigger,
    pub(super) counts: Counts,
    /// Closing: how long the episode that ends lasted (nanoseconds), and the calls it would have
    /// rejected.
    pub(super) episode: Option<(u64, u64)>,
}

/// What one settled call did to a shadow: whether it would have been admitted, and at most two
/// transitions (open → half-open on the call's admission, then its report's).
#[derive(Debug, Default)]
pub(super) struct Settled {
    pub(super) admitted: bool,
    pub(super) moves: Vec<Moved>,
}

/// A shadow's state, behind its lock.
pub(super) struct Judge {
    window: Outcomes,
    word: Word,
    time: TimeStamp,
    /// Counted failures in a row (with `consecutive`).
    run: u32,
    /// Failed recoveries in a row (the exponent of `open_backoff`).
    reopens: u32,
    /// The open episode: when it opened from closed, and the calls rejected since.
    episode: Option<(u64, u64)>,
    pub(super) totals: Totals,
}

/// What a shadow reports since it started.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Totals {
    /// Times it would have opened from closed.
    pub(super) opened: u64,
    /// Nanoseconds of its finished open episodes (from opening to closing).
    pub(super) open_nanos: u64,
    /// Calls it would have rejected.
    pub(super) rejected: u64,
    /// Calls it would have let through.
    pub(super) admitted: u64,
}

/// A point-in-time reading of a judge (see [`Judge::view`]).
pub(super) struct View {
    pub(super) state: State,
    pub(super) counts: Counts,
    pub(super) retry_after_nanos: Option<u64>,
    pub(super) open_nanos: u64,
    pub(super) totals: Totals,
}

impl Judge {
    pub(super) fn new(policy: &Policy) -> Judge {
        Judge {
            window: Outcomes::new(policy),
            word: Word::INITIAL,
            time: TimeStamp::new(),
            run: 0,
            reopens: 0,
            episode: None,
            totals: Totals::default(),
        }
    }

    fn time_of(&self, word: Word, now: u64) -> Option<u64> {
        self.time.time_of(word, now, || self.word)
    }

    fn install(&mut self, next: Word, now: u64) {
        if !next.same_epoch(self.word) {
            self.time.set(next, now);
        }
        self.word = next;
    }

    /// Judges one call that settled at `now` with `verdict` (`slow`: it was slower than the
    /// shadow's `slow`): would the shadow have admitted it, and what would its outcome have done.
    pub(super) fn settle(
        &mut self,
        policy: &Policy,
        now: u64,
        verdict: Verdict,
        slow: bool,
    ) -> Settled {
        let mut settled = Settled::default();
        let settings = policy.settings();
        let step = state::admission(
            self.word,
            settings.recovery,
            settings.half_open,
            lease_nanos(policy),
            |w| (now, self.time_of(w, now)),
        );
        match step {
            Step::Keep(Admission::Reject(..)) => {
                self.totals.rejected += 1;
                if let Some((_, rejected)) = &mut self.episode {
                    *rejected += 1;
                }
                return settled;
            }
            Step::Keep(_) => {}
            // A probe slot taken, or the wait over and the call the first probe: admitted.
            Step::Replace(next) => {
                let from = self.word;
                self.install(next, now);
                if from.state() != next.state() {
                    settled
                        .moves
                        .push(self.moved(from, Trigger::OpenWaitOver, now));
                }
            }
        }
        settled.admitted = true;
        self.totals.admitted += 1;
        let issued = self.word;
        let moved = match issued.state() {
            State::HalfOpen => self.probe(policy, issued, verdict, now),
            _ => self.closed(policy, verdict, slow, now),
        };
        settled.moves.extend(moved);
        settled
    }

    /// A call admitted while closed reports.
    fn closed(&mut self, policy: &Policy, verdict: Verdict, slow: bool, now: u64) -> Option<Moved> {
        if verdict == Verdict::Ignored {
            return None;
        }
        let failure = verdict == Verdict::Failure;
        let counts = self.window.record(now, Sample { failure, slow });
        self.run = if failure { self.run + 1 } else { 0 };
        let trigger = Trigger::tripped(policy, counts, failure, self.run)?;
        let from = self.word;
        let next = from.to_open(now, self.open_wait(policy, counts, now));
        self.install(next, now);
        // As the breaker's: the window restarts empty when it opens.
        self.window.reset();
        self.run = 0;
        self.episode = Some((now, 0));
        self.totals.opened += 1;
        let mut moved = self.moved(from, trigger, now);
        moved.counts = counts;
        Some(moved)
    }

    /// A probe admitted while half-open reports.
    fn probe(
        &mut self,
        policy: &Policy,
        issued: Word,
        verdict: Verdict,
        now: u64,
    ) -> Option<Moved> {
        let half_open = policy.settings().half_open;
        let probes = Counts {
            calls: issued.passed() + 1,
            failures: u32::from(verdict == Verdict::Failure),
            slow: 0,
        };
        let reopened = |w: Word| w.to_open(now, self.open_wait_after(policy, probes, now));
        let Step::Replace(next) =
            state::after_probe(self.word, issued, verdict, half_open, reopened)
        else {
            return None;
        };
        let from = self.word;
        self.install(next, now);
        match next.state() {
            State::Closed => {
                self.window.reset();
                self.run = 0;
                self.reopens = 0;
                let mut moved = self.moved(from, Trigger::ProbesPassed, now);
                if let Some((since, rejected)) = self.episode.take() {
                    let lasted = now.saturating_sub(since);
                    self.totals.open_nanos += lasted;
                    moved.episode = Some((lasted, rejected));
                }
                Some(moved)
            }
            State::Open => {
                self.reopens = self.reopens.saturating_add(1);
                Some(self.moved(from, Trigger::ProbeFailed, now))
            }
            _ => None,
        }
    }

    /// The wait of an opening from closed.
    fn open_wait(&self, policy: &Policy, counts: Counts, _now: u64) -> u64 {
        let open = OpenContext::new(0, counts.calls, counts.failures, counts.slow);
        jittered_nanos(policy, open_wait_nanos(policy, &open))
    }

    /// The wait of a reopening after a failed probe (one more failed recovery).
    fn open_wait_after(&self, policy: &Policy, probes: Counts, _now: u64) -> u64 {
        let reopens = self.reopens.saturating_add(1);
        let open = OpenContext::new(reopens, probes.calls, probes.failures, probes.slow);
        jittered_nanos(policy, open_wait_nanos(policy, &open))
    }

    fn moved(&self, from: Word, trigger: Trigger, now: u64) -> Moved {
        Moved {
            from: from.state(),
            to: self.word.state(),
            trigger,
            counts: self.window.counts(now),
            episode: None,
        }
    }

    /// The shadow's state now: as the breaker's `state()`, an open shadow whose wait is over stays
    /// open until a call settles.
    pub(super) fn view(&self, now: u64) -> View {
        let state = self.word.state();
        let ongoing = self
            .episode
            .map_or(0, |(since, _)| now.saturating_sub(since));
        View {
            state,
            counts: self.window.counts(now),
            retry_after_nanos: (state == State::Open).then(|| {
                self.word
                    .open_remaining_nanos(now, self.time_of(self.word, now))
            }),
            open_nanos: self.totals.open_nanos + ongoing,
            totals: self.totals,
        }
    }
}
