//! A key's retry budget on the request path: the attempts the attempt driver, the tower policy
//! and the reqwest middleware count, the retries they ask for, and the rejection's event.

use super::*;

/// The retry budget of the breaker an attempt was admitted by, kept by the attempt driver until
/// it decides whether to retry (two words; only for a key with a budget).
#[derive(Clone, Copy)]
pub(crate) struct RetryGate<'a> {
    core: &'a Circuit,
    site: FnName,
}

impl RetryGate<'_> {
    /// Takes a retry from the budget: true when it allows one. A rejection is counted (metric,
    /// event) and marked for [`Cause::retry_rejected`](crate::Cause::retry_rejected).
    #[inline]
    pub(crate) fn allows_retry(self) -> bool {
        self.core.try_retry(self.site)
    }
}

impl<'a, N: Named> NamedPermit<'a, N> {
    /// For a key with a retry budget: counts this admitted attempt and hands back the budget for
    /// the retry decision. `None` (one load of a flag on the line admission read) without one.
    #[inline(always)]
    pub(crate) fn count_attempt(&self) -> Option<RetryGate<'a>> {
        let core = self.raw.core;
        if core.budgeted {
            core.deposit_attempt();
            Some(RetryGate {
                core,
                site: self.site.name(),
            })
        } else {
            None
        }
    }
}

impl Circuit {
    /// Counts an attempt in the retry budget (a key without one counts nothing). Out of line:
    /// the attempt driver's code stays as it is for keys without a budget.
    #[inline(never)]
    pub(crate) fn deposit_attempt(&self) {
        if let Some(budget) = &self.budget {
            budget.deposit(self.now());
        }
    }

    /// Takes a retry from the budget: true when it allows one or there is no budget. A rejection
    /// is counted in `fusebox_retries_rejected_total`, announced by a `retry_rejected` DEBUG event
    /// and marked on the thread and task for [`Cause::retry_rejected`](crate::Cause::retry_rejected).
    pub(crate) fn try_retry(&self, site: FnName) -> bool {
        let Some(budget) = &self.budget else {
            return true;
        };
        if budget.withdraw(self.now()) {
            return true;
        }
        crate::nested::mark_budget();
        self.counters
            .retries_rejected
            .fetch_add(1, Ordering::Relaxed);
        let (key, function): (&str, &'static str) = (self.key.as_str(), site);
        let _ = std::panic::catch_unwind(|| {
            tracing::debug!(
                target: "fusebox",
                event = "retry_rejected",
                key,
                function,
                "retry_rejected"
            )
        });
        false
    }

    /// The retries the budget allows now, when the policy has one.
    pub(crate) fn retry_balance(&self) -> Option<u64> {
        self.budget
            .as_ref()
            .map(|budget| budget.balance(self.now()))
    }
}

impl Breaker {
    /// Counts an attempt that goes out in this key's retry budget
    /// ([`Policy::retry_budget`]); nothing without one. Every attempt, the first and each retry:
    /// the budget takes the first attempts to be the attempts less the retries it allowed.
    ///
    /// The attribute's `retry`, `fusebox_tower::BudgetPolicy` and the reqwest
    /// middleware's retries count through this; call it from a retry loop of your own, with
    /// [`try_retry`](Breaker::try_retry) before each retry.
    ///
    /// ```
    /// use fusebox::{Policy, Registry};
    ///
    /// let registry = Registry::new();
    /// let breaker = registry.breaker("search", Policy::new().retry_budget(50, 0)).unwrap();
    /// for _ in 0..4 {
    ///     breaker.count_attempt(); // four first attempts
    /// }
    /// for _ in 0..2 {
    ///     assert!(breaker.try_retry(), "50 % of 4 first attempts");
    ///     breaker.count_attempt(); // the retry goes out
    /// }
    /// assert!(!breaker.try_retry(), "the third is rejected");
    /// assert_eq!(breaker.snapshot().retry_budget_balance, Some(0));
    /// assert_eq!(breaker.snapshot().retries_rejected, 1);
    /// ```
    pub fn count_attempt(&self) {
        self.core.current().deposit_attempt();
    }

    /// Takes one retry from this key's retry budget ([`Policy::retry_budget`]): true when the
    /// budget allows it (count the retry's attempt with [`count_attempt`](Breaker::count_attempt)
    /// when it goes out), false when it rejects it (counted in the snapshot's
    /// [`retries_rejected`](Snapshot::retries_rejected), the `fusebox_retries_rejected_total` metric
    /// and a `retry_rejected` DEBUG event). Always true for a key without a budget.
    #[must_use = "a rejected retry must not be made"]
    pub fn try_retry(&self) -> bool {
        static OPERATOR: &str = "retry";
        self.core.current().try_retry(&OPERATOR)
    }
}
