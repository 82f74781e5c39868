//! A replica's view of a shared key (cached mode): the word a view is kept in, and what a view
//! takes of news of the shared state (an answer of the script, or a message on the
//! subscription), so that a forged or stale message never decides a call.

/// Marks a view the script itself answered with (not only announced by a message): cached mode
/// admits or rejects from it without asking the script.
pub(super) const CONFIRMED: u64 = 1 << 4;

/// A known view: `generation << 5 | confirmed << 4 | state << 1 | 1` (`state`: the script's code,
/// 0..=4).
pub(super) fn view_word(state: i64, generation: u64, confirmed: bool) -> u64 {
    generation << 5 | if confirmed { CONFIRMED } else { 0 } | (state.clamp(0, 7) as u64) << 1 | 1
}

/// The state (script code) of a known view.
pub(super) fn view_state(view: u64) -> u64 {
    (view >> 1) & 0b111
}

/// The generation of a known view.
pub(super) fn view_generation(view: u64) -> u64 {
    view >> 5
}

/// What a link's view was learnt from ([`SharedKey::known`](super::link::SharedKey::known)).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Known {
    /// The incarnation of the key (0 while the view is unknown).
    incarnation: u64,
    /// The newest generation of that incarnation an answer of the script carried.
    confirmed: u64,
}

/// The largest generation a message may announce (the script keeps them below 10^13).
const MAX_GENERATION: u64 = 10_000_000_000_000;

/// What a view does with news of the shared state: `state` (script code) under `generation` of
/// the key's `incarnation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// The view becomes this word (with what it was learnt from); the local breaker follows.
    Take(u64, Known),
    /// Nothing changes (stale or repeated news).
    Keep,
    /// The view becomes unknown: the next call asks the script.
    Forget,
}

/// An answer of the script, against the view `view` learnt from `known`.
///
/// Taken when the view is unknown, when the key is another incarnation (it was deleted and
/// created again: its generations restart, so a lower one is not stale), or when its generation is
/// not older than the view's. An answer older than what the script already answered is stale. An
/// answer older than the view but newer than any answer (the view's generation came from a
/// message) contradicts the message: either the answer is late or the message was not the
/// script's, so the view is forgotten.
pub(super) fn on_answer(
    view: u64,
    known: Known,
    state: i64,
    generation: u64,
    incarnation: u64,
) -> Verdict {
    if view == 0 || known.incarnation != incarnation || generation >= view_generation(view) {
        let known = Known {
            incarnation,
            confirmed: generation,
        };
        return Verdict::Take(view_word(state, generation, true), known);
    }
    if generation >= known.confirmed {
        return Verdict::Forget;
    }
    Verdict::Keep
}

/// A message on the transitions channel, against the view `view` learnt from `known`.
///
/// Anyone who can publish on the channel can send one, so a message is taken only when it is the
/// very next generation of the incarnation the view knows, and even then the view is not
/// confirmed (no call is admitted or rejected from it before the script answers). A message that
/// repeats the view, or is older than an answer, changes nothing; any other (another
/// incarnation, a generation skipped or contradicted, a state out of range) makes the view
/// unknown. A view not known yet stays unknown: nothing to check the message against.
pub(super) fn on_message(
    view: u64,
    known: Known,
    state: i64,
    generation: u64,
    incarnation: u64,
) -> Verdict {
    if view == 0 {
        return Verdict::Keep;
    }
    let valid = (0..=4).contains(&state) && generation < MAX_GENERATION;
    if valid && incarnation == known.incarnation {
        if generation <= known.confirmed {
            return Verdict::Keep;
        }
        if generation == view_generation(view) && u64::try_from(state) == Ok(view_state(view)) {
            return Verdict::Keep;
        }
        if generation == view_generation(view) + 1 {
            return Verdict::Take(view_word(state, generation, false), known);
        }
    }
    Verdict::Forget
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A view the script answered: `state` under `generation` of incarnation 7.
    fn answered(state: i64, generation: u64) -> (u64, Known) {
        match on_answer(0, Known::default(), state, generation, 7) {
            Verdict::Take(view, known) => (view, known),
            other => panic!("an unknown view takes any answer, not {other:?}"),
        }
    }

    #[test]
    fn an_answer_is_taken_unless_older_than_the_view() {
        let (view, known) = answered(0, 100);
        assert_eq!(view, view_word(0, 100, true));
        assert_eq!(view_state(view), 0);
        assert_eq!(view_generation(view), 100);
        assert_ne!(view & CONFIRMED, 0);
        assert!(matches!(
            on_answer(view, known, 1, 101, 7),
            Verdict::Take(..)
        ));
        assert!(matches!(
            on_answer(view, known, 0, 100, 7),
            Verdict::Take(..)
        ));
        assert_eq!(on_answer(view, known, 1, 99, 7), Verdict::Keep, "stale");
    }

    #[test]
    fn an_answer_of_another_incarnation_is_taken_whatever_its_generation() {
        let (view, known) = answered(0, 5_000);
        let Verdict::Take(next, learnt) = on_answer(view, known, 0, 12, 8) else {
            panic!("a key created again restarts its generations");
        };
        assert_eq!(view_generation(next), 12);
        assert_eq!(
            learnt,
            Known {
                incarnation: 8,
                confirmed: 12
            }
        );
    }

    #[test]
    fn a_message_is_taken_only_as_the_next_generation_and_unconfirmed() {
        let (view, known) = answered(0, 100);
        let Verdict::Take(next, known) = on_message(view, known, 1, 101, 7) else {
            panic!("the next generation is taken");
        };
        assert_eq!(next & CONFIRMED, 0, "a message is not the script's answer");
        assert_eq!((view_state(next), view_generation(next)), (1, 101));
        assert!(
            matches!(on_message(next, known, 2, 102, 7), Verdict::Take(..)),
            "a chain"
        );
        assert_eq!(
            on_message(next, known, 1, 101, 7),
            Verdict::Keep,
            "a repeat"
        );
        assert_eq!(
            on_message(next, known, 0, 100, 7),
            Verdict::Keep,
            "older than an answer"
        );
        for (state, generation, incarnation) in [
            (3, 103, 7),             // a generation skipped
            (3, 999_999_999_999, 7), // a huge one
            (3, 102, 8),             // another incarnation
            (7, 102, 7),             // a state out of range
            (-1, 102, 7),
            (0, 101, 7), // the same generation in another state
            (3, MAX_GENERATION + 1, 7),
        ] {
            assert_eq!(
                on_message(next, known, state, generation, incarnation),
                Verdict::Forget,
                "{state} {generation} {incarnation}"
            );
        }
        assert_eq!(
            on_message(0, Known::default(), 0, 1, 7),
            Verdict::Keep,
            "an unknown view has nothing to check a message against"
        );
    }

    #[test]
    fn a_forged_chain_is_undone_by_the_next_real_generation() {
        let (mut view, mut known) = answered(0, 100);
        for generation in 101..=103 {
            let Verdict::Take(next, learnt) = on_message(view, known, 3, generation, 7) else {
                panic!("each looks like the next generation");
            };
            (view, known) = (next, learnt);
        }
        // The script's own next generation (an operator's `force`) contradicts the chain.
        assert_eq!(on_message(view, known, 0, 101, 7), Verdict::Forget);
        // So does an answer of the script: newer than any answer, older than the view.
        assert_eq!(on_answer(view, known, 0, 100, 7), Verdict::Forget);
        assert_eq!(on_answer(view, known, 0, 99, 7), Verdict::Keep);
    }
}
