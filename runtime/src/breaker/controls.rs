//! Operator controls: moving a breaker to a state by hand, whatever the state it is in.

use std::convert::Infallible;

use super::*;

impl Circuit {
    /// Moves to `target` by operator action, whatever the current state.
    pub(super) fn force(&self, target: fn(Word) -> Word) {
        self.metrics_only.store(false, Ordering::Release);
        let decided = self.update(self.load(), |word| {
            Step::<Infallible>::Replace(target(word))
        });
        let Ok((word, next)) = decided;
        let counts = self.window.counts(self.now());
        self.window.reset();
        self.run.store(0, Ordering::Release);
        self.reopens.store(0, Ordering::Release);
        self.pushback.store(0, Ordering::Release);
        self.episode.since.store(0, Ordering::Release);
        self.enter_phase();
        if word.state() != next.state() {
            self.emit(
                word.state(),
                next.state(),
                counts,
                &"operator",
                Trigger::Operator,
            );
        }
    }
}
