//! Groups of keys: outlier ejection relative to the members, the cap on open members (the panic
//! threshold), ejection backoff, and the choice of healthy members.
//!
//! A key whose policy names a group ([`Policy::group`](crate::Policy::group), `group = "search"`
//! in the attribute or in configuration) is a member of it; the group is created in the registry
//! with its first member. Each member is still its own breaker, with its own rules. The group adds:
//!
//! - **Relative rules**, evaluated lazily on the request path, at most once per
//!   [`interval`](GroupPolicy::interval): by the first counted failure of any member after the
//!   interval is over (one caller wins a compare-and-swap on the interval's stamp and makes the
//!   pass, O(members); every other failure pays one load of the stamp). A pass looks at the closed
//!   members with at least their own `min_calls` in their window and, when at least
//!   [`min_members`](GroupPolicy::min_members) of them qualify, ejects (opens, with the trigger
//!   [`Trigger::OutlierSuccessRate`](crate::Trigger::OutlierSuccessRate) or
//!   [`Trigger::OutlierFailurePercentage`](crate::Trigger::OutlierFailurePercentage)) those whose
//!   success rate is below the mean of the qualifying members by more than
//!   [`success_rate`](GroupPolicy::success_rate) standard deviations, and those whose failure
//!   percentage is at or above [`failure_percentage`](GroupPolicy::failure_percentage).
//! - **The panic threshold**: at most [`max_ejection`](GroupPolicy::max_ejection) percent of the
//!   members (at least one) are open at once, whichever rule opened them, relative or the member's
//!   own. A member that would exceed it stays closed; the first rejection of an episode emits one
//!   `group_panic` WARN event (fields `group`, `key`, `members`, `open`, `max_ejection`), and [`GroupSnapshot::in_panic`] shows it until a pass finds no
//!   rejection since the previous one (`group_panic_over`, INFO).
//! - **Ejection backoff**: an ejected member stays open [`base`](GroupPolicy::ejection) × the times
//!   it was ejected, up to a maximum; after a [`healthy_span`](GroupPolicy::healthy_span) closed,
//!   the count starts again. The wait then goes through the member's own open-wait rules, as
//!   any opening of the key: capped by its `open_max` (never below its `open_for`), lengthened
//!   by pushback ([`RetryAfter`](crate::RetryAfter)), spread by its `open_jitter`. A failed
//!   probe reopens it for its own policy's wait.
//!
//! The success path of a member is the one of any key; a counted failure of a member reads the
//! clock and the group's stamp. Keys without a group never reach this module.
//!
//! On a shared registry (`Registry::share`), the group is this replica's: the relative rules see
//! this replica's windows and run on the failures this replica records itself (a member whose
//! outcomes go to the store, a shared key, does not start a pass: per-host keys are usually kept
//! local with `shared = false`), the cap counts the opens this replica's breakers made, and an
//! open the store committed (from another replica) is not counted against it.

mod evaluation;
mod settings;
mod snapshot;
pub(crate) mod validate;

pub(crate) use evaluation::{GroupCore, Hold, Member, MemberBreaker};
#[cfg(feature = "config")]
pub(crate) use settings::GroupPatch;
pub use settings::MAX_GROUP_NAMES;
#[cfg(all(test, feature = "config"))]
pub(crate) use settings::Names;
pub(crate) use settings::keep_name;
pub use settings::{GroupPolicy, GroupSettings};
#[cfg(feature = "config")]
pub(crate) use settings::{intern, names};
pub use snapshot::{Group, GroupSnapshot};
pub use validate::GroupPolicyError;

#[cfg(all(test, not(fusebox_loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_a_share_of_the_members_and_at_least_one() {
        assert_eq!(GroupCore::cap(10, 10), 1);
        assert_eq!(GroupCore::cap(3, 10), 1);
        assert_eq!(GroupCore::cap(100, 10), 10);
        assert_eq!(GroupCore::cap(10, 100), 10);
        assert_eq!(GroupCore::cap(0, 10), 1);
    }

    #[test]
    fn ejection_waits_grow_with_the_times_ejected_up_to_the_max() {
        let policy = GroupPolicy::new();
        let s = 1_000_000_000;
        assert_eq!(policy.wait_nanos(1), 30 * s);
        assert_eq!(policy.wait_nanos(2), 60 * s);
        assert_eq!(policy.wait_nanos(10), 300 * s);
        assert_eq!(policy.wait_nanos(11), 300 * s);
    }

    #[test]
    fn interned_names_are_kept_once() {
        let a = keep_name("search").unwrap();
        let b = keep_name(&String::from("search")).unwrap();
        assert!(std::ptr::eq(a, b));
    }
}
