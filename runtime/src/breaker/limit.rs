//! The adaptive bulkhead: the limit `max_concurrent = "adaptive(floor..ceiling)"` finds from
//! the latency of the calls it admits, by additive increase and multiplicative decrease (AIMD).
//!
//! No timer: every report of a call that held a bulkhead slot adds its latency to the open
//! round with one `fetch_add` (plus one more when it failed or found the limit busy); the
//! report that fills the round takes it with one compare-and-swap and decides the next limit
//! ([`decide`], a pure function), so exactly one report decides each round, without a lock.
//! Admission reads the limit with one load. [`Concurrency::Adaptive`](crate::Concurrency)
//! documents the rule.

use crate::sync::{AtomicU32, AtomicU64, Ordering};
use fusebox_policy::limits::{
    ADAPTIVE_BACKOFF, ADAPTIVE_MAX_ROUND, ADAPTIVE_REBASE_ROUNDS, ADAPTIVE_ROUND, ADAPTIVE_START,
    ADAPTIVE_TOLERANCE,
};

/// Where the open round's call count starts in [`Limiter::round`] (below it: the sum of the
/// calls' latency in microseconds).
const COUNT_SHIFT: u32 = 48;
/// One call in [`Limiter::round`].
const ONE_CALL: u64 = 1 << COUNT_SHIFT;
/// The latency sum's field of [`Limiter::round`].
const SUM_MASK: u64 = ONE_CALL - 1;
/// The most one call adds to the sum, in microseconds (about 71 minutes): a round's sum never
/// overflows its 48 bits (a round closes at [`ADAPTIVE_MAX_ROUND`] calls).
const LONGEST_SAMPLE: u64 = (1 << 32) - 1;
/// A call that found the limit at least half used, in [`Limiter::marks`] (failures count
/// below it).
const BUSY: u64 = 1 << 32;

/// The state of one adaptive bulkhead (kept only with `max_concurrent = "adaptive…"`).
pub(crate) struct Limiter {
    /// The current limit: calls in flight beyond it are rejected (`BulkheadFull`).
    limit: AtomicU32,
    floor: u32,
    ceiling: u32,
    /// The open round: its calls (top 16 bits) and the sum of their latency in microseconds.
    round: AtomicU64,
    /// The open round's counted failures (low 32 bits) and busy calls (high 32 bits).
    marks: AtomicU64,
    /// The no-load latency, in microseconds (0: no round closed yet).
    baseline: AtomicU64,
    /// Slow rounds in a row at the floor (written by the report that closes a round).
    stuck: AtomicU32,
    /// `fusebox_concurrency_limit{key}`, set whenever the limit changes.
    #[cfg(feature = "metrics")]
    gauge: metrics::Gauge,
}

/// What a round of calls saw, as [`decide`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Round {
    /// Calls reported (successes and counted failures; ignored and cancelled calls are not).
    pub(crate) calls: u32,
    /// The sum of their latency, in microseconds.
    pub(crate) micros: u64,
    /// Counted failures among them.
    pub(crate) failures: u32,
    /// Calls that found at least half the limit in flight when they reported.
    pub(crate) busy: u32,
}

/// What a limiter has learnt: the limit, the no-load latency (microseconds; 0: unknown) and
/// the slow rounds in a row it spent at its floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Learnt {
    pub(crate) limit: u32,
    pub(crate) baseline: u64,
    pub(crate) stuck: u32,
}

/// What `learnt` becomes after `round`, between `floor` and `ceiling` (the rule of
/// [`Concurrency::Adaptive`](crate::Concurrency)).
pub(crate) fn decide(learnt: Learnt, floor: u32, ceiling: u32, round: Round) -> Learnt {
    let Learnt {
        limit,
        baseline,
        stuck,
    } = learnt;
    let mean = (round.micros / u64::from(round.calls.max(1))).max(1);
    let failing = round.failures != 0 && u64::from(round.failures) * 10 >= u64::from(round.calls);
    let slow = baseline != 0 && mean as f64 > baseline as f64 * ADAPTIVE_TOLERANCE;
    if failing || slow {
        let limit = ((f64::from(limit) * ADAPTIVE_BACKOFF) as u32).clamp(floor, ceiling);
        let stuck = if slow && !failing && learnt.limit <= floor {
            stuck + 1
        } else {
            0
        };
        if stuck >= ADAPTIVE_REBASE_ROUNDS {
            // At the floor and slow for that many rounds: the backend got slower for good, and
            // this latency is its new normal.
            return Learnt {
                limit,
                baseline: mean,
                stuck: 0,
            };
        }
        return Learnt {
            limit,
            baseline,
            stuck,
        };
    }
    let grown = if u64::from(round.busy) * 2 >= u64::from(round.calls) {
        limit.saturating_add(1)
    } else {
        limit
    };
    Learnt {
        limit: grown.clamp(floor, ceiling),
        baseline: if baseline == 0 {
            mean
        } else {
            baseline.min(mean)
        },
        stuck: 0,
    }
}

impl Limiter {
    /// A limiter between `floor` and `ceiling`, starting at `start` (clamped to them) with the
    /// no-load latency `baseline` (microseconds, 0: unknown).
    pub(crate) fn new(key: &str, floor: u32, ceiling: u32, start: u32, baseline: u64) -> Self {
        let limit = start.clamp(floor, ceiling);
        #[cfg(feature = "metrics")]
        let gauge =
            metrics::gauge!(crate::observe::metrics::CONCURRENCY_LIMIT, "key" => key.to_owned());
        #[cfg(feature = "metrics")]
        gauge.set(f64::from(limit));
        #[cfg(not(feature = "metrics"))]
        let _ = key;
        Limiter {
            limit: AtomicU32::new(limit),
            floor,
            ceiling,
            round: AtomicU64::new(0),
            marks: AtomicU64::new(0),
            baseline: AtomicU64::new(baseline),
            stuck: AtomicU32::new(0),
            #[cfg(feature = "metrics")]
            gauge,
        }
    }

    /// A fresh limiter between `floor` and `ceiling`, starting at
    /// [`ADAPTIVE_START`].
    pub(crate) fn starting(key: &str, floor: u32, ceiling: u32) -> Self {
        Limiter::new(key, floor, ceiling, ADAPTIVE_START, 0)
    }

    /// A limiter between `floor` and `ceiling` that continues this one (its limit, clamped,
    /// and its no-load latency): a reconfigured breaker's.
    pub(crate) fn continued(&self, key: &str, floor: u32, ceiling: u32) -> Self {
        Limiter::new(
            key,
            floor,
            ceiling,
            self.limit(),
            self.baseline.load(Ordering::Acquire),
        )
    }

    /// The current limit.
    #[inline]
    pub(crate) fn limit(&self) -> u32 {
        self.limit.load(Ordering::Relaxed)
    }

    /// The no-load latency learnt so far, in microseconds (0: none yet).
    #[cfg(test)]
    pub(crate) fn baseline(&self) -> u64 {
        self.baseline.load(Ordering::Acquire)
    }

    /// Adds a reported call to the open round: it took `nanos`, failed when `failed`, and
    /// `in_flight` calls (itself included) held slots when it reported. The report that fills
    /// the round decides the next limit.
    pub(crate) fn sample(&self, nanos: u64, failed: bool, in_flight: u32) {
        let limit = self.limit();
        let busy = u64::from(in_flight) * 2 >= u64::from(limit);
        if failed || busy {
            let marks = u64::from(failed) | if busy { BUSY } else { 0 };
            self.marks.fetch_add(marks, Ordering::AcqRel);
        }
        let add = ONE_CALL | (nanos / 1000).min(LONGEST_SAMPLE);
        let seen = self
            .round
            .fetch_add(add, Ordering::AcqRel)
            .wrapping_add(add);
        let size = u64::from(limit.clamp(ADAPTIVE_ROUND, ADAPTIVE_MAX_ROUND));
        // The report whose compare-and-swap empties a full round decides it; a report that
        // loses to a later one leaves the round to that one.
        if seen >> COUNT_SHIFT >= size
            && self
                .round
                .compare_exchange(seen, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            self.close(seen);
        }
    }

    /// Decides the round `taken` (the value of [`Limiter::round`] it was taken at).
    #[cold]
    fn close(&self, taken: u64) {
        let marks = self.marks.swap(0, Ordering::AcqRel);
        let round = Round {
            calls: (taken >> COUNT_SHIFT) as u32,
            micros: taken & SUM_MASK,
            failures: (marks & (BUSY - 1)) as u32,
            busy: (marks >> 32) as u32,
        };
        let learnt = Learnt {
            limit: self.limit(),
            baseline: self.baseline.load(Ordering::Acquire),
            stuck: self.stuck.load(Ordering::Acquire),
        };
        let next = decide(learnt, self.floor, self.ceiling, round);
        self.baseline.store(next.baseline, Ordering::Release);
        self.stuck.store(next.stuck, Ordering::Release);
        if next.limit != learnt.limit {
            self.limit.store(next.limit, Ordering::Relaxed);
            #[cfg(feature = "metrics")]
            self.gauge.set(f64::from(next.limit));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ADAPTIVE_REBASE_ROUNDS, Learnt, Limiter, Round, decide};

    fn round(calls: u32, mean_micros: u64, failures: u32, busy: u32) -> Round {
        Round {
            calls,
            micros: mean_micros * u64::from(calls),
            failures,
            busy,
        }
    }

    /// `decide` from (limit, baseline) with no slow rounds at the floor, to (limit, baseline).
    fn step(limit: u32, floor: u32, baseline: u64, round: Round) -> (u32, u64) {
        let next = decide(
            Learnt {
                limit,
                baseline,
                stuck: 0,
            },
            floor,
            100,
            round,
        );
        (next.limit, next.baseline)
    }

    #[test]
    fn a_busy_round_whose_latency_holds_grows_the_limit_by_one() {
        assert_eq!(step(20, 1, 1000, round(20, 1050, 0, 20)), (21, 1000));
        assert_eq!(step(100, 1, 1000, round(100, 1000, 0, 100)), (100, 1000));
        // Not busy: the limit was not what held the calls back.
        assert_eq!(step(20, 1, 1000, round(20, 1000, 0, 9)), (20, 1000));
        // The first round sets the no-load latency, a faster one lowers it.
        assert_eq!(step(20, 1, 0, round(20, 700, 0, 20)), (21, 700));
        assert_eq!(step(20, 1, 1000, round(20, 600, 0, 20)), (21, 600));
    }

    #[test]
    fn a_slow_or_failing_round_shrinks_the_limit_by_a_tenth() {
        assert_eq!(step(50, 1, 1000, round(50, 1101, 0, 50)), (45, 1000));
        assert_eq!(step(50, 1, 1000, round(50, 1000, 5, 50)), (45, 1000));
        // Under a tenth failed: not a drop.
        assert_eq!(step(50, 1, 1000, round(50, 1000, 4, 50)), (51, 1000));
        // Never below the floor; small limits still shrink by one.
        assert_eq!(step(5, 1, 1000, round(8, 5000, 0, 8)), (4, 1000));
        assert_eq!(step(3, 3, 1000, round(8, 2000, 8, 8)), (3, 1000));
    }

    #[test]
    fn at_the_floor_a_lasting_slowdown_becomes_the_new_normal() {
        let mut learnt = Learnt {
            limit: 2,
            baseline: 1000,
            stuck: 0,
        };
        for round_number in 1..=ADAPTIVE_REBASE_ROUNDS {
            learnt = decide(learnt, 2, 100, round(8, 3000, 0, 8));
            let expected = if round_number < ADAPTIVE_REBASE_ROUNDS {
                (1000, round_number)
            } else {
                (3000, 0)
            };
            assert_eq!(
                (learnt.limit, learnt.baseline, learnt.stuck),
                (2, expected.0, expected.1)
            );
        }
        learnt = decide(learnt, 2, 100, round(8, 3000, 0, 8));
        assert_eq!(learnt.limit, 3, "grows again once 3 ms is normal");
        // A round that is not slow, or a limit above the floor, starts the count again.
        let above = Learnt {
            limit: 5,
            baseline: 1000,
            stuck: 7,
        };
        assert_eq!(decide(above, 2, 100, round(8, 3000, 0, 8)).stuck, 0);
    }

    #[test]
    fn the_report_that_fills_a_round_decides_it() {
        let limiter = Limiter::starting("k", 1, 100);
        assert_eq!(limiter.limit(), 20);
        for _ in 0..19 {
            limiter.sample(1_000_000, false, 20);
        }
        assert_eq!(limiter.limit(), 20, "the round is not full yet");
        limiter.sample(1_000_000, false, 20);
        assert_eq!((limiter.limit(), limiter.baseline()), (21, 1000));
        for _ in 0..21 {
            limiter.sample(2_000_000, false, 21);
        }
        assert_eq!(limiter.limit(), 18, "twice the no-load latency");
        let next = limiter.continued("k", 1, 10);
        assert_eq!((next.limit(), next.baseline()), (10, 1000));
    }
}
