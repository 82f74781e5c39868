//! What a hedged call asks of its breaker ([`HedgeGate`]): the key's hedging state (latency,
//! budget, counts), whether the circuit is closed, and the breaker clock's time.

use super::*;
use crate::load::hedge::Hedging;

impl Circuit {
    /// The key's hedging state, made by its first hedged call.
    pub(crate) fn hedging(&self) -> &Hedging {
        self.hedging.get_or_init(|| {
            let budget = self.policy.settings().hedge_budget;
            Box::new(Hedging::new(self.key.as_str(), budget))
        })
    }

    /// The gate of a hedged call on this breaker.
    pub(crate) fn hedge_gate(&self) -> HedgeGate<'_> {
        HedgeGate {
            core: self,
            hedging: self.hedging(),
        }
    }
}

impl Breaker {
    /// The key's hedging, for an adapter that hedges its calls as the attribute's `hedge` does
    /// (run them with [`hedged`](crate::hedged)): the key's learned latency, its hedge budget
    /// and its counts, made for the key by its first hedged call.
    ///
    /// ```
    /// use fusebox::{HedgeDelay, Policy, Registry};
    ///
    /// let registry = Registry::new();
    /// let breaker = registry.breaker("search", Policy::new()).unwrap();
    /// let gate = breaker.hedging();
    /// assert_eq!(gate.start(HedgeDelay::Percentile(95)), None, "nothing learned yet");
    /// assert!(breaker.snapshot().hedges.is_some());
    /// ```
    #[must_use]
    pub fn hedging(&self) -> HedgeGate<'_> {
        self.core.current().hedge_gate()
    }
}

/// The hedging of one key, for one hedged call ([`Breaker::hedging`], [`hedged`](crate::hedged)).
#[derive(Clone, Copy)]
pub struct HedgeGate<'a> {
    core: &'a Circuit,
    hedging: &'a Hedging,
}

impl std::fmt::Debug for HedgeGate<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HedgeGate")
            .field("key", &self.core.key.as_str())
            .finish_non_exhaustive()
    }
}

impl HedgeGate<'_> {
    /// A hedged call starts: counts it in the key's hedge budget and gives the delay after
    /// which to send a hedge (`None`: a learned percentile with too few calls yet).
    #[must_use = "the delay says when to send a hedge"]
    pub fn start(&self, delay: crate::load::hedge::HedgeDelay) -> Option<Duration> {
        let now = self.core.now();
        self.hedging.call(now);
        match delay {
            crate::load::hedge::HedgeDelay::Fixed(delay) => Some(delay),
            crate::load::hedge::HedgeDelay::Percentile(p) => self.hedging.learned(now, p),
        }
    }

    /// True when a hedge may be sent now: the circuit is closed and the budget has room.
    #[must_use]
    pub fn may_send(&self) -> bool {
        self.core.load().state() == State::Closed && self.hedging.has_room(self.core.now())
    }

    /// Takes a hedge from the budget: true when it allows one (counted as sent).
    #[must_use = "a hedge the budget refuses must not be sent"]
    pub fn send(&self) -> bool {
        self.hedging.send(self.core.now())
    }

    /// Runs `admit`, the admission of one attempt of a hedged call (the first or a hedge): on a
    /// key that tracks stacking (the guide's "Stacking on one key"), the attempts of a hedged
    /// call are calls of their own, made side by side in one task, not calls inside each other,
    /// so the one that answers is recorded. [`hedged`](crate::hedged) admits the hedges through
    /// it; admit the first attempt through it too.
    pub fn attempt<T>(&self, admit: impl FnOnce() -> T) -> T {
        super::stack::alone(admit)
    }

    /// The hedged call ended after `latency`; `by_hedge`: a hedge answered first.
    pub fn ended(&self, latency: Duration, by_hedge: bool) {
        self.hedging.ended(self.core.now(), latency, by_hedge);
    }
}
