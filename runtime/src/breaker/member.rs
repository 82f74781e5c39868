//! What a group asks of its members' breakers: [`MemberBreaker`] for [`Circuit`], and the
//! membership, counts and availability the group's passes read.

use std::sync::Arc;

use super::Circuit;
use crate::groups::MemberBreaker;
use crate::observe::Trigger;
use crate::state::State;
use crate::window::Counts;

impl MemberBreaker for Circuit {
    fn newest(self: Arc<Self>) -> Arc<dyn MemberBreaker> {
        self.current().clone()
    }

    fn key_str(&self) -> &str {
        Circuit::key(self).as_str()
    }

    fn closed_counts(&self, now: u64) -> Option<Counts> {
        Circuit::closed_counts(self, now)
    }

    fn min_calls_of(&self) -> u32 {
        Circuit::min_calls_of(self)
    }

    fn eject(&self, trigger: Trigger, now: u64) -> bool {
        Circuit::eject(self, trigger, now)
    }

    fn ejected_now(&self) -> bool {
        Circuit::ejected_now(self)
    }

    fn unavailable_now(&self) -> bool {
        Circuit::unavailable_now(self)
    }
}

impl Circuit {
    /// The key's membership of a group, if its policy names one.
    pub(crate) fn member(&self) -> Option<&Arc<crate::groups::Member>> {
        self.member.as_ref()
    }

    /// The window's counts, when the circuit is closed and not retired (a group's pass).
    pub(crate) fn closed_counts(&self, now: u64) -> Option<Counts> {
        (self.load().state() == State::Closed && self.successor.get().is_none())
            .then(|| self.window.counts(now))
    }

    /// The policy's `min_calls`.
    pub(crate) fn min_calls_of(&self) -> u32 {
        self.min_calls
    }

    /// True when a group's relative rule opened the circuit and it is open within that wait
    /// (a group's ejected member).
    pub(crate) fn ejected_now(&self) -> bool {
        self.load().state() == State::Open
            && self.unavailable_now()
            && self.last_transition_record().is_some_and(|r| {
                r.to == State::Open
                    && matches!(
                        r.trigger,
                        Trigger::OutlierSuccessRate | Trigger::OutlierFailurePercentage
                    )
            })
    }

    /// True when the circuit is open within its wait, or forced open: ejected by its group,
    /// tripped by its own rules or forced open by an operator.
    pub(crate) fn unavailable_now(&self) -> bool {
        let word = self.load();
        match word.state() {
            State::ForcedOpen => true,
            State::Open => {
                let now = self.now();
                word.open_remaining_nanos(now, self.time_of(word, now)) > 0
            }
            _ => false,
        }
    }
}
