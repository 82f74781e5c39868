//! Finding the outages of a trace: the periods when the backend was failing, against which a
//! replay is scored.

use std::time::Duration;

use crate::trace::{Event, Outcome};

/// A period of the trace when the backend was failing (see [`find_outages`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outage {
    /// The first failure of the period.
    pub start_ns: u64,
    /// The last failure of the period.
    pub end_ns: u64,
    /// Counted failures in it.
    pub failures: u64,
}

impl Outage {
    /// True when `at_ns` falls in the outage.
    #[must_use]
    pub fn contains(&self, at_ns: u64) -> bool {
        (self.start_ns..=self.end_ns).contains(&at_ns)
    }
}

/// How outages are found in a trace.
#[derive(Debug, Clone, Copy)]
pub struct OutageRule {
    /// Width of the buckets the trace is cut into.
    pub bucket: Duration,
    /// A bucket is bad when at least this percentage of its successes and failures failed.
    pub failure_rate: u32,
    /// An outage has at least this many failures.
    pub min_failures: u64,
    /// Two bad periods this close together are one outage (a brownout's rate wobbles).
    pub merge_gap: Duration,
}

impl Default for OutageRule {
    /// 1-second buckets, 25 % failures, at least 3 failures, merged across gaps of up to 5 s.
    fn default() -> Self {
        OutageRule {
            bucket: Duration::from_secs(1),
            failure_rate: 25,
            min_failures: 3,
            merge_gap: Duration::from_secs(5),
        }
    }
}

/// The most buckets [`find_outages`] cuts a trace into (16 MB of counts; 11 days of 1-second
/// buckets): a rule whose bucket would cut the trace into more is widened by [`OutageRule::fit`].
pub const MAX_BUCKETS: u64 = 1_000_000;

impl OutageRule {
    /// This rule for a trace spanning `span_ns`: unchanged when its bucket cuts the span into at
    /// most [`MAX_BUCKETS`] buckets, otherwise with the narrowest whole-millisecond-free bucket
    /// that does, and a note saying so. A zero-width bucket is taken as 1 ns.
    #[must_use]
    pub fn fit(self, span_ns: u64) -> (OutageRule, Option<String>) {
        let width = (self.bucket.as_nanos().max(1)).min(u128::from(u64::MAX)) as u64;
        let buckets = span_ns / width + 1;
        if buckets <= MAX_BUCKETS {
            return (self, None);
        }
        let mut wider = span_ns / MAX_BUCKETS + 1;
        for unit in [1_000_000_000, 1_000_000, 1_000] {
            if wider >= unit {
                wider = wider.div_ceil(unit).saturating_mul(unit);
                break;
            }
        }
        let rule = OutageRule {
            bucket: Duration::from_nanos(wider),
            ..self
        };
        let note = format!(
            "`--bucket {}` would cut the trace's {} into {buckets} buckets; using {} buckets instead (at most {MAX_BUCKETS})",
            humantime::format_duration(self.bucket),
            humantime::format_duration(Duration::from_nanos(span_ns)),
            humantime::format_duration(rule.bucket),
        );
        (rule, Some(note))
    }
}

/// What one pass over a key's events tells: the bounds every other pass needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Span {
    /// Calls.
    pub calls: u64,
    /// The first call's report time.
    pub first_ns: u64,
    /// The last call's report time.
    pub last_ns: u64,
    /// The first and last report times of a success or failure, when there is one.
    pub known_ns: Option<(u64, u64)>,
    /// The longest latency.
    pub longest_ns: u64,
}

impl Span {
    /// Reads `events` (one key's calls, in trace order) once.
    #[must_use]
    pub fn of(events: impl IntoIterator<Item = Event>) -> Span {
        let mut span = Span::default();
        for e in events {
            span.push(e);
        }
        span
    }

    /// Counts `e`, the next event in trace order.
    pub fn push(&mut self, e: Event) {
        if self.calls == 0 {
            self.first_ns = e.at_ns();
        }
        self.calls += 1;
        self.last_ns = e.at_ns();
        self.longest_ns = self.longest_ns.max(e.latency_ns().unwrap_or(0));
        if e.is_known() {
            let first = self.known_ns.map_or(e.at_ns(), |k| k.0);
            self.known_ns = Some((first, e.at_ns()));
        }
    }
}

/// The outages of `events` (one key's calls, in trace order): maximal runs of bad buckets (empty
/// buckets in between do not break a run), stretched to the run of failures around them, merged
/// across gaps of up to `merge_gap`, with at least `min_failures` failures. An outage starts at its
/// first failure and ends at its last. A bucket that would cut the trace into more than
/// [`MAX_BUCKETS`] buckets is widened first ([`OutageRule::fit`]).
#[must_use]
pub fn find_outages(events: &[Event], rule: OutageRule) -> Vec<Outage> {
    let span = Span::of(events.iter().copied());
    find_outages_in(|| events.iter().copied(), &span, rule)
}

/// [`find_outages`] on events read by `pass`, whose [`Span`] is `span`, twice over (the buckets,
/// the runs of failures), holding nothing per call.
#[must_use]
pub fn find_outages_in<I: Iterator<Item = Event>>(
    pass: impl Fn() -> I,
    span: &Span,
    rule: OutageRule,
) -> Vec<Outage> {
    let Some((t0, last)) = span.known_ns else {
        return Vec::new();
    };
    let (rule, _) = rule.fit(last - t0);
    let width = rule.bucket.as_nanos().max(1) as u64;
    let bucket = |at: u64| (at.saturating_sub(t0) / width) as usize;
    let runs = bad_runs(pass(), &bucket, bucket(last) + 1, &rule);
    let periods = run_periods(pass(), &bucket, &runs);
    merge_periods(periods, &rule)
}

/// A point of the trace: (report time, failures counted up to and including it).
type Point = (u64, u64);

/// The runs of bad buckets among the `n` buckets `bucket` cuts `events` into: first and last
/// bucket of each; empty buckets between two bad ones do not break a run.
fn bad_runs(
    events: impl Iterator<Item = Event>,
    bucket: &impl Fn(u64) -> usize,
    n: usize,
    rule: &OutageRule,
) -> Vec<(usize, usize)> {
    let mut totals = vec![(0u64, 0u64); n];
    for c in events.filter(Event::is_known) {
        let b = &mut totals[bucket(c.at_ns())];
        b.0 += 1;
        b.1 += u64::from(c.outcome() == Outcome::Failure);
    }
    let bad = |b: usize| {
        let (calls, failures) = totals[b];
        calls > 0 && failures * 100 >= u64::from(rule.failure_rate) * calls
    };
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for b in (0..n).filter(|&b| bad(b)) {
        match runs.last_mut() {
            Some(run) if (run.1 + 1..b).all(|k| totals[k].0 == 0) => run.1 = b,
            _ => runs.push((b, b)),
        }
    }
    runs
}

/// Each run's period: from the start of the streak of failures (consecutive among successes
/// and failures) holding its first failure, to the end of the streak holding its last.
fn run_periods(
    events: impl Iterator<Item = Event>,
    bucket: &impl Fn(u64) -> usize,
    runs: &[(usize, usize)],
) -> Vec<(Point, Point)> {
    let mut starts: Vec<Option<Point>> = vec![None; runs.len()];
    let mut ends: Vec<Option<Point>> = vec![None; runs.len()];
    let mut waiting: Vec<usize> = Vec::new(); // runs whose last failure is in the current streak
    let mut failures = 0u64;
    let mut streak: Option<(Point, Point)> = None; // (first failure, last failure)
    let mut r = 0;
    let end_streak = |streak: &mut Option<(Point, Point)>,
                      waiting: &mut Vec<usize>,
                      ends: &mut Vec<Option<Point>>| {
        if let Some((_, last)) = streak.take() {
            for w in waiting.drain(..) {
                ends[w] = Some(last);
            }
        }
    };
    for e in events.filter(Event::is_known) {
        if e.outcome() != Outcome::Failure {
            end_streak(&mut streak, &mut waiting, &mut ends);
            continue;
        }
        failures += 1;
        let here = (e.at_ns(), failures);
        let (first, _) = *streak.get_or_insert((here, here));
        streak = Some((first, here));
        let b = bucket(e.at_ns());
        while r < runs.len() && runs[r].1 < b {
            r += 1;
        }
        if r < runs.len() && runs[r].0 <= b {
            starts[r].get_or_insert(first);
            if waiting.last() != Some(&r) {
                waiting.push(r);
            }
        }
    }
    end_streak(&mut streak, &mut waiting, &mut ends);
    starts
        .into_iter()
        .zip(ends)
        .filter_map(|(s, e)| s.zip(e))
        .collect()
}

/// Merges periods that touch or lie within `merge_gap` of each other, then keeps the outages
/// with enough failures.
fn merge_periods(periods: Vec<(Point, Point)>, rule: &OutageRule) -> Vec<Outage> {
    let gap = u64::try_from(rule.merge_gap.as_nanos()).unwrap_or(u64::MAX);
    let mut merged: Vec<(Point, Point)> = Vec::new();
    for (start, end) in periods {
        match merged.last_mut() {
            Some(last) if last.1.0.saturating_add(gap) >= start.0 => {
                last.1 = last.1.max(end);
            }
            _ => merged.push((start, end)),
        }
    }
    merged
        .into_iter()
        .map(|(start, end)| Outage {
            start_ns: start.0,
            end_ns: end.0,
            failures: end.1 - start.1 + 1,
        })
        .filter(|o| o.failures >= rule.min_failures)
        .collect()
}
