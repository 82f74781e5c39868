//! What a hedged call asks of its breaker: the key's hedging state (latency, budget, counts),
//! whether the circuit is closed, and the breaker clock's time.

use super::*;

impl Circuit {
    /// The key's hedging state, made by its first hedged call.
    pub(crate) fn hedging(&self) -> &crate::load::hedge::Hedging {
        self.hedging
            .get_or_init(|| Box::new(crate::load::hedge::Hedging::new(self.key.as_str())))
    }

    /// True when the circuit is closed (a hedge is only sent then).
    pub(crate) fn is_closed(&self) -> bool {
        self.load().state() == State::Closed
    }

    /// The breaker clock's time, in nanoseconds.
    pub(crate) fn clock_now(&self) -> u64 {
        self.now()
    }
}
