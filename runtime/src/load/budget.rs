//! Retry budgets: per key, the attempts and retries of the last 10 s, in one-second buckets kept
//! on the request path (no timer).
//!
//! A key with a [`RetryBudget`] counts every attempt that goes out (a deposit) and every retry it
//! allows (a withdrawal). Its first attempts are the attempts less the retries. A retry is allowed
//! while the retries of the last [`RETRY_BUDGET_SPAN`] stay within `percent` % of its first
//! attempts plus `floor` × the span in seconds (Finagle's `RetryBudget`: a ratio, and a reserve
//! that always allows `floor` retries per second on average).
//!
//! Each bucket is one atomic word: the second it counts (24 bits: a bucket whose second is more
//! than a span old, or about 194 days old, counts nothing), its attempts (20 bits) and its
//! retries (20 bits), saturating at 1,048,575 per second. A bucket of an older second is reset by
//! the first count of its new second, with one compare-and-swap. A decision sums the ten buckets;
//! two retries decided at once may both pass on the last allowance, so the budget can be exceeded
//! by the retries in flight at the instant it runs out, never more.

use crate::policy::RetryBudget;
use crate::sync::{AtomicU64, Ordering};
use fusebox_policy::limits::RETRY_BUDGET_SPAN;

/// Buckets of a budget: one per second of [`RETRY_BUDGET_SPAN`].
const SLOTS: u64 = RETRY_BUDGET_SPAN.as_secs();
/// Bits of a bucket's attempt and retry counts.
const COUNT_BITS: u32 = 20;
/// The largest count a bucket keeps.
const COUNT_MAX: u64 = (1 << COUNT_BITS) - 1;
/// Where a bucket's second starts.
const STAMP_SHIFT: u32 = 2 * COUNT_BITS;
/// The second field's mask (24 bits); stamps are `1..=STAMP_MASK` (0: an unused bucket).
const STAMP_MASK: u64 = (1 << (64 - STAMP_SHIFT)) - 1;
const NANOS_PER_SEC: u64 = 1_000_000_000;

/// The retry budget of one key (see the module).
pub(crate) struct Budget {
    buckets: [AtomicU64; SLOTS as usize],
    /// Retries allowed per 100 first attempts.
    percent: u64,
    /// Retries always allowed over the span, in hundredths: `floor` × span seconds × 100.
    reserve: u64,
    #[cfg(feature = "metrics")]
    rejected: metrics::Counter,
}

/// The attempts and retries a budget counted over the span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) attempts: u64,
    pub(crate) retries: u64,
}

impl Budget {
    pub(crate) fn new(budget: RetryBudget, _key: &str) -> Self {
        Budget {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            percent: u64::from(budget.percent),
            reserve: u64::from(budget.floor) * SLOTS * 100,
            #[cfg(feature = "metrics")]
            rejected: metrics::counter!(crate::observe::metrics::RETRIES_REJECTED_TOTAL, "key" => _key.to_owned()),
        }
    }

    /// The bucket of the second of `now` (nanoseconds), and that second's stamp (never 0, which
    /// an unused bucket holds).
    #[inline]
    fn bucket(&self, now: u64) -> (&AtomicU64, u64) {
        let second = now / NANOS_PER_SEC;
        let stamp = second % STAMP_MASK + 1;
        (&self.buckets[(second % SLOTS) as usize], stamp)
    }

    /// Adds `attempts` and `retries` to the bucket of `now`, resetting it when it counted an
    /// older second.
    #[inline]
    fn add(&self, now: u64, attempts: u64, retries: u64) {
        let (bucket, stamp) = self.bucket(now);
        let mut word = bucket.load(Ordering::Relaxed);
        loop {
            let (a, r) = if word >> STAMP_SHIFT == stamp {
                (
                    (word >> COUNT_BITS & COUNT_MAX) + attempts,
                    (word & COUNT_MAX) + retries,
                )
            } else {
                (attempts, retries)
            };
            let next = stamp << STAMP_SHIFT | a.min(COUNT_MAX) << COUNT_BITS | r.min(COUNT_MAX);
            match bucket.compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return,
                Err(seen) => word = seen,
            }
        }
    }

    /// An attempt went out at `now`.
    #[inline]
    pub(crate) fn deposit(&self, now: u64) {
        self.add(now, 1, 0);
    }

    /// The attempts and retries of the span ending at `now`.
    pub(crate) fn totals(&self, now: u64) -> Totals {
        let (_, stamp) = self.bucket(now);
        let mut totals = Totals {
            attempts: 0,
            retries: 0,
        };
        for bucket in &self.buckets {
            let word = bucket.load(Ordering::Acquire);
            let at = word >> STAMP_SHIFT;
            // The bucket's age in seconds, modulo the stamps' range (`1..=STAMP_MASK`).
            let age = (stamp + STAMP_MASK - at) % STAMP_MASK;
            if at != 0 && age < SLOTS {
                totals.attempts += word >> COUNT_BITS & COUNT_MAX;
                totals.retries += word & COUNT_MAX;
            }
        }
        totals
    }

    /// The retries the budget allows at `now` before it rejects one.
    pub(crate) fn balance(&self, now: u64) -> u64 {
        let Totals { attempts, retries } = self.totals(now);
        let first = attempts.saturating_sub(retries);
        ((self.reserve + self.percent * first) / 100).saturating_sub(retries)
    }

    /// Takes one retry at `now`: true when the budget allows it (it is then counted), false when
    /// it rejects it.
    pub(crate) fn withdraw(&self, now: u64) -> bool {
        let Totals { attempts, retries } = self.totals(now);
        let first = attempts.saturating_sub(retries);
        if (retries + 1) * 100 > self.reserve + self.percent * first {
            #[cfg(feature = "metrics")]
            self.rejected.increment(1);
            return false;
        }
        self.add(now, 0, 1);
        true
    }

    /// Continues `other`'s counts (a reconfigured breaker keeps its budget's span).
    pub(crate) fn copy_from(&self, other: &Budget) {
        for (mine, theirs) in self.buckets.iter().zip(&other.buckets) {
            mine.store(theirs.load(Ordering::Acquire), Ordering::Release);
        }
    }
}

#[cfg(all(test, not(fusebox_loom)))]
mod tests {
    use super::*;

    const SEC: u64 = NANOS_PER_SEC;

    fn budget(percent: u16, floor: u32) -> Budget {
        Budget::new(RetryBudget { percent, floor }, "k")
    }

    #[test]
    fn retries_are_a_share_of_first_attempts() {
        let b = budget(20, 0);
        let now = 100 * SEC;
        for _ in 0..100 {
            b.deposit(now);
        }
        let mut allowed = 0;
        while b.withdraw(now) {
            b.deposit(now); // the retry goes out
            allowed += 1;
        }
        assert_eq!(allowed, 20);
        assert_eq!(b.balance(now), 0);
        assert_eq!(
            b.totals(now),
            Totals {
                attempts: 120,
                retries: 20
            }
        );
    }

    #[test]
    fn the_floor_allows_retries_without_traffic() {
        let b = budget(0, 2);
        let now = 5 * SEC;
        let allowed = (0..100).filter(|_| b.withdraw(now)).count();
        assert_eq!(allowed, 20, "2/s over a 10 s span");
    }

    #[test]
    fn counts_leave_the_span_after_ten_seconds() {
        let b = budget(50, 0);
        let start = 1_000 * SEC;
        for _ in 0..10 {
            b.deposit(start);
        }
        assert_eq!(b.balance(start), 5);
        assert_eq!(
            b.balance(start + 9 * SEC + SEC / 2),
            5,
            "still inside the span"
        );
        assert_eq!(b.balance(start + 10 * SEC), 0, "the bucket is a span old");
        // A long idle: every bucket is stale, and reused by its new second.
        b.deposit(start + 3_600 * SEC);
        assert_eq!(
            b.totals(start + 3_600 * SEC),
            Totals {
                attempts: 1,
                retries: 0
            }
        );
    }

    #[test]
    fn counts_saturate_per_second_without_overflowing_into_the_stamp() {
        let b = budget(100, 0);
        let now = 7 * SEC;
        b.add(now, COUNT_MAX + 5, 0);
        b.add(now, 1, COUNT_MAX + 5);
        let totals = b.totals(now);
        assert_eq!((totals.attempts, totals.retries), (COUNT_MAX, COUNT_MAX));
        assert_eq!(
            b.totals(now + SEC).attempts,
            COUNT_MAX,
            "same span, stamp intact"
        );
    }

    #[test]
    fn second_zero_has_a_stamp_too() {
        let b = budget(100, 0);
        b.deposit(0);
        assert_eq!(b.totals(0).attempts, 1);
        assert_eq!(b.totals(SEC).attempts, 1);
    }

    #[cfg(feature = "metrics")]
    #[test]
    fn rejections_are_counted_in_the_key_s_metric() {
        use metrics_util::debugging::{DebugValue, DebuggingRecorder};
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let b = metrics::with_local_recorder(&recorder, || budget(0, 1));
        let rejected = (0..15).filter(|_| !b.withdraw(SEC)).count();
        assert_eq!(rejected, 5, "a floor of 1/s: 10 retries in the span");
        let counted: Vec<_> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(key, ..)| key.key().name() == crate::observe::metrics::RETRIES_REJECTED_TOTAL)
            .map(|(key, _, _, value)| {
                let labels: Vec<String> = key
                    .key()
                    .labels()
                    .map(|l| format!("{}={}", l.key(), l.value()))
                    .collect();
                (labels, value)
            })
            .collect();
        assert_eq!(
            counted,
            [(vec!["key=k".to_owned()], DebugValue::Counter(5))]
        );
    }
}
