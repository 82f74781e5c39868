//! Sliding windows: the last N outcomes (count) or the outcomes of the last span of time (time).
//!
//! A breaker holds one [`Outcomes`], a count or a time window behind one interface: record a
//! success that was not slow (the fast path, which returns counts only when they must be judged),
//! record any other sample and get the counts right after it, read the counts, reset, and copy
//! the outcomes into the window of a reconfigured breaker of the same shape. [`Counts`] and their
//! rate rules are shared by both shapes.
//!
//! Each file imports from its siblings only those listed before it:
//! - `stripes.rs`: per-thread success counters, allocated when a window meets contention; both
//!   window shapes defer their unjudged successes there.
//! - `count.rs`: the count window (bit rings, the pending count of a full window, folds).
//! - `time.rs`: the time window (buckets stamped with their slice, lazy rotation, the other
//!   slices' cached totals, deferred successes).
//! - `tests.rs`: unit tests of both shapes.
//!
//! Every decision reads a window with its deferred successes folded in first, and every reading
//! counts each failure's call: no reader sees a failure without its call.

mod stripes;

mod count;
mod time;

#[cfg(test)]
mod tests;

use crate::sync::{AtomicU32, AtomicU64, Ordering};

use crate::clock::ClockSource;
use crate::policy::{Policy, Window as WindowKind};
use count::CountWindow;
use time::TimeWindow;

/// What a window holds at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Counts {
    /// Outcomes in the window.
    pub(crate) calls: u32,
    /// Failures among them.
    pub(crate) failures: u32,
    /// Slow calls among them (successes or failures).
    pub(crate) slow: u32,
}

impl Counts {
    /// Failure rate in percent (0 when empty).
    pub(crate) fn failure_rate(self) -> f64 {
        percent(self.failures, self.calls)
    }

    /// Slow-call rate in percent (0 when empty).
    pub(crate) fn slow_rate(self) -> f64 {
        percent(self.slow, self.calls)
    }

    /// True when the policy's rate rules say the circuit must open.
    #[inline]
    pub(crate) fn trips(self, policy: &Policy) -> bool {
        let reaches = |part: u32, rate: u8| {
            rate != 0 && u64::from(part) * 100 >= u64::from(rate) * u64::from(self.calls)
        };
        let settings = policy.settings();
        self.calls >= settings.min_calls
            && (reaches(self.failures, settings.failure_rate.unwrap_or(0))
                || (settings.slow.is_some() && reaches(self.slow, settings.slow_rate)))
    }
}

impl Counts {
    /// Adaptive throttling's rejection probability for factor `k` (Google SRE's client-side
    /// throttling): `max(0, (requests − k × accepts) / (requests + 1))`, where `requests` is the
    /// window's calls and `accepts` its successes (calls that did not fail; a slow success is
    /// accepted). 0 below `min_calls` recorded calls, like the rate rules.
    pub(crate) fn throttle_probability(self, k: f64, min_calls: u32) -> f64 {
        if self.calls == 0 || self.calls < min_calls {
            return 0.0;
        }
        let requests = f64::from(self.calls);
        let accepts = f64::from(self.calls - self.failures.min(self.calls));
        ((requests - k * accepts) / (requests + 1.0)).max(0.0)
    }
}

fn percent(part: u32, all: u32) -> f64 {
    if all == 0 {
        0.0
    } else {
        f64::from(part) * 100.0 / f64::from(all)
    }
}

/// The time of a record, for the windows that need it: a clock to read (only by a time window,
/// inlined into its caller: no closure or call between the window and the clock) or a time read
/// already.
#[derive(Clone, Copy)]
pub(crate) enum Now<'a> {
    /// Read this clock.
    Read(&'a ClockSource),
    /// This time.
    At(u64),
}

impl Now<'_> {
    #[inline(always)]
    fn read(self) -> u64 {
        match self {
            Now::Read(clock) => clock.now_nanos(),
            Now::At(now) => now,
        }
    }
}

/// A recorded outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sample {
    pub(crate) failure: bool,
    pub(crate) slow: bool,
}

/// The window of one breaker.
///
/// `#[repr(u8)]`: a tag byte, then either shape's fields from the next 8-byte boundary, in their
/// declared order: each shape's fast-path fields first, so they stay on the breaker's hot line
/// (see `Circuit`).
#[repr(u8)]
pub(crate) enum Outcomes {
    Count(CountWindow),
    Time(TimeWindow),
}

impl Outcomes {
    pub(crate) fn new(policy: &Policy) -> Self {
        let settings = policy.settings();
        let timed = settings.slow.is_some();
        match settings.window {
            WindowKind::Time(span) => Outcomes::Time(TimeWindow::new(
                crate::clock::duration_to_nanos(span),
                timed,
            )),
            WindowKind::Count(n) => Outcomes::Count(CountWindow::new(n, timed)),
            // The enum is non-exhaustive; a later kind is added here.
            _ => Outcomes::Count(CountWindow::new(100, timed)),
        }
    }

    /// Where the fields a fast-path success reads end, in bytes from the window's address: a
    /// full count window's `pending`, `full`, `untimed`, `stripes` and failure count; a time
    /// window's quiet slice, slice length, buckets and stripes.
    #[cfg(test)]
    pub(crate) fn fast_fields_end(&self) -> usize {
        fn end<T>(field: &T, base: usize) -> usize {
            std::ptr::from_ref(field).addr() + std::mem::size_of::<T>() - base
        }
        let base = std::ptr::from_ref(self).addr();
        match self {
            Outcomes::Count(w) => [
                end(&w.pending, base),
                end(&w.full, base),
                end(&w.untimed, base),
                end(&w.stripes, base),
                end(&w.failures.set, base),
            ]
            .into_iter()
            .max(),
            Outcomes::Time(w) => [
                end(&w.quiet, base),
                end(&w.slice_nanos, base),
                end(&w.buckets, base),
                end(&w.stripes, base),
            ]
            .into_iter()
            .max(),
        }
        .unwrap_or(0)
    }

    #[inline]
    pub(crate) fn needs_time(&self) -> bool {
        matches!(self, Outcomes::Time(_))
    }

    /// Records a success that was not slow (only time windows read `now`). Returns the
    /// counts when they must be judged: a success cannot raise a rate, but it can bring the
    /// window to `min_calls`, the moment the rules start to apply, and a time window's rate can
    /// rise when its oldest slice expires. Count windows judge when a success brings them to
    /// `min_calls`; time windows also judge the first record of each slice.
    #[inline(always)]
    pub(crate) fn record_fast_success(&self, now: Now<'_>, min_calls: u32) -> Option<Counts> {
        match self {
            Outcomes::Count(w) => w.record_fast_success(min_calls),
            Outcomes::Time(w) => w.record_fast_success(now.read(), min_calls),
        }
    }

    /// Records a sample; returns the counts right after it.
    #[inline]
    pub(crate) fn record(&self, now: u64, sample: Sample) -> Counts {
        match self {
            Outcomes::Count(w) => w.record(sample),
            Outcomes::Time(w) => w.record(now, sample),
        }
    }

    /// The current counts (`now` is only read by time windows).
    pub(crate) fn counts(&self, now: u64) -> Counts {
        match self {
            Outcomes::Count(w) => w.counts(),
            Outcomes::Time(w) => w.counts(now),
        }
    }

    /// Empties the window.
    pub(crate) fn reset(&self) {
        match self {
            Outcomes::Count(w) => w.reset(),
            Outcomes::Time(w) => w.reset(),
        }
    }

    /// Heap bytes owned by the window.
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Outcomes::Count(w) => w.heap_bytes(),
            Outcomes::Time(w) => w.heap_bytes(),
        }
    }

    /// Copies the outcomes of `from`, a window of the same kind and size, into this new window
    /// (a reconfigured breaker keeps its window). Windows of another shape are left alone.
    pub(crate) fn copy_from(&self, from: &Outcomes) {
        match (self, from) {
            (Outcomes::Count(to), Outcomes::Count(from)) => to.copy_from(from),
            (Outcomes::Time(to), Outcomes::Time(from)) => to.copy_from(from),
            _ => {}
        }
    }
}

/// Copies one counter of a window into its copy.
fn copy32(to: &AtomicU32, from: &AtomicU32) {
    to.store(from.load(Ordering::Acquire), Ordering::Release);
}

/// Copies one counter of a window into its copy.
fn copy64(to: &AtomicU64, from: &AtomicU64) {
    to.store(from.load(Ordering::Acquire), Ordering::Release);
}
