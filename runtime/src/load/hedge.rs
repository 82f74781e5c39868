//! How a call is hedged ([`Hedge`], [`HedgeDelay`]), and hedged calls' per-key state: the latency the key's calls took (a bounded histogram of the last
//! one or two [`LATENCY_PERIOD`]s, rotated on the request path), the hedge budget, and the hedges
//! sent and won. Made for a key the first time a hedged call goes through it; a key whose calls
//! are never hedged has none of it.

use std::sync::Mutex;
use std::time::Duration;

use crate::load::budget::Budget;
use crate::policy::RetryBudget;
use crate::sync::{AtomicU64, Ordering};
use fusebox_policy::limits::MAX_HEDGE;

/// How long the latency histogram collects before it rotates: a learned percentile reads the
/// calls of the current period and the one before it (between one and two periods of calls).
pub const LATENCY_PERIOD: Duration = Duration::from_secs(10);

/// The calls a learned percentile needs before it hedges: until the histogram holds this many
/// (over its one or two periods), a call with `hedge = "p95"` is not hedged.
pub const MIN_LATENCY_CALLS: u64 = 100;

/// When a hedged call sends its next attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HedgeDelay {
    /// After this long without an answer (`hedge = "50ms"`).
    Fixed(Duration),
    /// After the latency this percentile (1–99) of the key's recent calls stayed under
    /// (`hedge = "p95"`).
    Percentile(u8),
}

/// How a call is hedged: the attribute's `hedge` and `hedge_max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Hedge {
    /// When the next attempt starts.
    pub delay: HedgeDelay,
    /// Attempts in flight at most, the first one included (2 ..= [`MAX_HEDGE`]).
    pub max: u32,
}

impl Hedge {
    /// Hedging after `delay`, with at most 2 attempts in flight.
    #[must_use]
    pub const fn new(delay: HedgeDelay) -> Self {
        Hedge { delay, max: 2 }
    }

    /// At most `max` attempts in flight, the first one included, kept within 2 ..=
    /// [`MAX_HEDGE`].
    #[must_use]
    pub const fn max(mut self, max: u32) -> Self {
        self.max = if max < 2 {
            2
        } else if max > MAX_HEDGE {
            MAX_HEDGE
        } else {
            max
        };
        self
    }
}

/// Latencies below this many microseconds have a bucket each.
const LINEAR: u64 = 16;
/// Buckets per power of two above [`LINEAR`]: each spans at most a quarter of its lower bound.
const SUB_BITS: u32 = 2;
/// Buckets of the histogram: up to 2^40 µs (about 12.7 days), where the last bucket saturates.
const BUCKETS: usize = LINEAR as usize + (40 - 4) * (1 << SUB_BITS);

/// The bucket of a latency of `micros` microseconds.
fn bucket(micros: u64) -> usize {
    if micros < LINEAR {
        return usize::try_from(micros).unwrap_or(0);
    }
    let octave = 63 - micros.leading_zeros();
    let sub = (micros >> (octave - SUB_BITS)) & ((1 << SUB_BITS) - 1);
    let index = LINEAR + u64::from(octave - 4) * (1 << SUB_BITS) + sub;
    usize::try_from(index).map_or(BUCKETS - 1, |index| index.min(BUCKETS - 1))
}

/// The upper bound, in microseconds, of the latencies of bucket `index` (exclusive).
fn upper_bound(index: usize) -> u64 {
    let index = index as u64;
    if index < LINEAR {
        return index + 1;
    }
    let octave = (index - LINEAR) / (1 << SUB_BITS) + 4;
    let sub = (index - LINEAR) % (1 << SUB_BITS);
    (1 << octave) + (sub + 1) * (1 << (octave - u64::from(SUB_BITS)))
}

/// Counts of one period.
struct Half {
    /// The period these counts belong to (`now / LATENCY_PERIOD`).
    period: u64,
    counts: [u32; BUCKETS],
    total: u64,
}

impl Half {
    const EMPTY: Half = Half {
        period: u64::MAX,
        counts: [0; BUCKETS],
        total: 0,
    };
}

/// The latencies of the current and the previous period.
struct Histogram {
    halves: [Half; 2],
}

impl Histogram {
    /// The half of `period`, emptied when it held an older period.
    fn half(&mut self, period: u64) -> &mut Half {
        let half = &mut self.halves[usize::from(period % 2 == 1)];
        if half.period != period {
            *half = Half::EMPTY;
            half.period = period;
        }
        half
    }

    /// The latency below which `percentile` % of the calls of the current and the previous
    /// period finished (the upper bound of its bucket), or `None` while they are fewer than
    /// [`MIN_LATENCY_CALLS`].
    fn percentile(&self, period: u64, percentile: u8) -> Option<Duration> {
        let live = |half: &&Half| half.period == period || half.period.wrapping_add(1) == period;
        let total: u64 = self.halves.iter().filter(live).map(|half| half.total).sum();
        if total < MIN_LATENCY_CALLS {
            return None;
        }
        let rank = (total * u64::from(percentile)).div_ceil(100).max(1);
        let mut seen = 0;
        for index in 0..BUCKETS {
            seen += self
                .halves
                .iter()
                .filter(live)
                .map(|half| u64::from(half.counts[index]))
                .sum::<u64>();
            if seen >= rank {
                return Some(Duration::from_micros(upper_bound(index)));
            }
        }
        None
    }
}

/// The hedging state of one key.
pub(crate) struct Hedging {
    latency: Mutex<Histogram>,
    budget: Budget,
    sent: AtomicU64,
    won: AtomicU64,
    /// The percentile the key's hedged calls last learned their delay from (0: a fixed delay).
    percentile: AtomicU64,
    #[cfg(feature = "metrics")]
    meters: [metrics::Counter; 2],
}

/// What a snapshot shows of a key's hedged calls (see [`Snapshot::hedges`](crate::Snapshot::hedges)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Hedges {
    /// Hedges sent: attempts started because the earlier ones had not answered in time.
    pub sent: u64,
    /// Calls a hedge answered first.
    pub won: u64,
    /// The delay a learned percentile (`hedge = "p95"`) gives now, or `None` while the key's
    /// latencies are fewer than [`MIN_LATENCY_CALLS`] or the delay is fixed.
    pub learned_delay: Option<Duration>,
}

impl Hedging {
    /// The state of the key `_key`, whose hedges are at most `budget` % more calls.
    pub(crate) fn new(_key: &str, budget: u8) -> Self {
        Hedging {
            latency: Mutex::new(Histogram {
                halves: [Half::EMPTY, Half::EMPTY],
            }),
            budget: Budget::new(
                RetryBudget {
                    percent: u16::from(budget),
                    floor: 0,
                },
                _key,
            ),
            sent: AtomicU64::new(0),
            won: AtomicU64::new(0),
            percentile: AtomicU64::new(0),
            #[cfg(feature = "metrics")]
            meters: [
                metrics::counter!(crate::observe::metrics::HEDGES_SENT_TOTAL, "key" => _key.to_owned()),
                metrics::counter!(crate::observe::metrics::HEDGES_WON_TOTAL, "key" => _key.to_owned()),
            ],
        }
    }

    fn histogram(&self) -> std::sync::MutexGuard<'_, Histogram> {
        self.latency.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A hedged call started at `now` (nanoseconds of the breaker's clock): counted in the budget.
    pub(crate) fn call(&self, now: u64) {
        self.budget.deposit(now);
    }

    /// The delay of `percentile` learned from the key's latencies at `now`.
    pub(crate) fn learned(&self, now: u64, percentile: u8) -> Option<Duration> {
        self.percentile
            .store(u64::from(percentile), Ordering::Relaxed);
        self.histogram().percentile(period(now), percentile)
    }

    /// True when the budget has room for a hedge at `now` (nothing is taken).
    pub(crate) fn has_room(&self, now: u64) -> bool {
        self.budget.balance(now) > 0
    }

    /// Takes a hedge from the budget at `now`: true when it allows one (it is then counted as
    /// sent, and as a call that went out).
    pub(crate) fn send(&self, now: u64) -> bool {
        if !self.budget.withdraw(now) {
            return false;
        }
        self.budget.deposit(now);
        self.sent.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.meters[0].increment(1);
        true
    }

    /// A hedged call ended at `now` after `latency`; `by_hedge`: a hedge answered first.
    pub(crate) fn ended(&self, now: u64, latency: Duration, by_hedge: bool) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        {
            let mut histogram = self.histogram();
            let half = histogram.half(period(now));
            half.counts[bucket(micros)] = half.counts[bucket(micros)].saturating_add(1);
            half.total += 1;
        }
        if by_hedge {
            self.won.fetch_add(1, Ordering::Relaxed);
            #[cfg(feature = "metrics")]
            self.meters[1].increment(1);
        }
    }

    /// What a snapshot shows at `now`.
    pub(crate) fn counts(&self, now: u64) -> Hedges {
        let percentile = u8::try_from(self.percentile.load(Ordering::Relaxed)).unwrap_or(0);
        Hedges {
            sent: self.sent.load(Ordering::Relaxed),
            won: self.won.load(Ordering::Relaxed),
            learned_delay: (percentile > 0)
                .then(|| self.histogram().percentile(period(now), percentile))
                .flatten(),
        }
    }
}

/// The period of `now` (nanoseconds).
fn period(now: u64) -> u64 {
    now / u64::try_from(LATENCY_PERIOD.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_latency_falls_below_its_bucket_s_upper_bound_within_a_quarter() {
        let mut last = 0;
        for micros in (0..5_000).chain([1 << 20, (1 << 30) + 7, u64::MAX]) {
            let index = bucket(micros);
            assert!(
                index >= last || micros > 4_999,
                "buckets grow with the latency"
            );
            last = index;
            if micros < 1 << 39 {
                let upper = upper_bound(index);
                assert!(
                    micros < upper,
                    "{micros} µs in bucket {index} below {upper}"
                );
                assert!(
                    upper <= micros + micros / 4 + 1,
                    "{micros} µs: bound {upper}"
                );
            }
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn a_percentile_needs_enough_calls_and_reads_two_periods() {
        let hedging = Hedging::new("k", 10);
        let ms = Duration::from_millis(1);
        for _ in 0..(MIN_LATENCY_CALLS - 1) {
            hedging.ended(0, ms, false);
        }
        assert_eq!(hedging.learned(0, 95), None, "too few calls");
        hedging.ended(0, Duration::from_secs(1), false);
        let p95 = hedging.learned(0, 95).expect("enough calls");
        assert!(p95 >= ms && p95 <= ms + ms / 4, "{p95:?}");
        let p100 = hedging.learned(0, 100).expect("enough calls");
        assert!(p100 >= Duration::from_secs(1), "{p100:?}");
        let next = u64::try_from(LATENCY_PERIOD.as_nanos()).unwrap();
        assert!(
            hedging.learned(next, 95).is_some(),
            "the previous period still counts"
        );
        assert_eq!(
            hedging.learned(2 * next, 95),
            None,
            "two periods later it is gone"
        );
    }

    #[test]
    fn the_budget_allows_a_tenth_more_calls() {
        let hedging = Hedging::new("k", 10);
        for _ in 0..100 {
            hedging.call(1_000_000_000);
        }
        let sent = (0..50).filter(|_| hedging.send(1_000_000_000)).count();
        assert_eq!(sent, 10);
        assert_eq!(hedging.counts(1_000_000_000).sent, 10);
    }
}
