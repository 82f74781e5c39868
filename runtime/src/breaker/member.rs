//! What a group asks of its members' breakers: [`MemberBreaker`] for [`Circuit`].

use std::sync::Arc;

use super::Circuit;
use crate::groups::MemberBreaker;
use crate::observe::Trigger;
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
