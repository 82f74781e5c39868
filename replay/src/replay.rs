//! Replaying a trace through real `fusebox` breakers on a fake clock, and scoring the result.
//!
//! Each call of the trace is admitted at `at_ns - latency_ns` and reported at `at_ns`, in time
//! order, through `fusebox::Breaker`'s manual API on a `Registry::with_clock(FakeClock)`: the same
//! code that decides in production decides here. What a replay cannot know (its counterfactual
//! limits, also printed under every table):
//!
//! - A call the candidate rejects never reaches the backend in the replay, but it did in the
//!   recording: the backend's load, and so its recovery, is the recording's, not what the
//!   candidate would have caused. A breaker that sheds load may let a backend recover sooner.
//! - A call the recording rejected has no known outcome. If the candidate admits it, the replay
//!   assumes the outcome of the last call of that key whose outcome is known (counted in
//!   `assumed`); record with `metrics_only` to have none.
//! - Latencies are the recorded ones, also for calls the candidate would have timed out.

use std::collections::{BinaryHeap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fusebox::clock::{Clock, FakeClock};
use fusebox::{Breaker, Registry, State, Trigger};

use crate::policy::Candidate;
use crate::trace::{Event, KeyedEvent, Outcome};

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
    let n = bucket(last) + 1;
    let mut totals = vec![(0u64, 0u64); n];
    for c in pass().filter(Event::is_known) {
        let b = &mut totals[bucket(c.at_ns())];
        b.0 += 1;
        b.1 += u64::from(c.outcome() == Outcome::Failure);
    }
    let bad = |b: usize| {
        let (calls, failures) = totals[b];
        calls > 0 && failures * 100 >= u64::from(rule.failure_rate) * calls
    };
    // Runs of bad buckets; empty buckets between two bad ones do not break a run.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for b in (0..n).filter(|&b| bad(b)) {
        match runs.last_mut() {
            Some(run) if (run.1 + 1..b).all(|k| totals[k].0 == 0) => run.1 = b,
            _ => runs.push((b, b)),
        }
    }
    drop(totals);
    // Each run's period: from the start of the streak of failures (consecutive among successes
    // and failures) holding its first failure, to the end of the streak holding its last. A point
    // is (report time, failures counted up to and including it).
    type Point = (u64, u64);
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
    for e in pass().filter(Event::is_known) {
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
    // Merge periods that touch or lie within `merge_gap` of each other, then keep the outages
    // with enough failures.
    let gap = rule.merge_gap.as_nanos() as u64;
    let mut merged: Vec<(Point, Point)> = Vec::new();
    for (start, end) in starts.into_iter().zip(ends).filter_map(|(s, e)| s.zip(e)) {
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

/// One state change of a replayed breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// When, on the trace's clock.
    pub at_ns: u64,
    /// The state it left.
    pub from: State,
    /// The state it entered.
    pub to: State,
    /// What caused it.
    pub trigger: Trigger,
}

impl Change {
    /// True for an ejection: a closed member opened by a relative rule of its group.
    #[must_use]
    pub fn is_ejection(&self) -> bool {
        self.from == State::Closed
            && self.to == State::Open
            && matches!(
                self.trigger,
                Trigger::OutlierSuccessRate | Trigger::OutlierFailurePercentage
            )
    }
}

/// What one candidate did on one trace.
#[derive(Debug, Clone)]
pub struct Run {
    /// The candidate's name.
    pub name: String,
    /// Its state changes, in order.
    pub changes: Vec<Change>,
    /// Per outage: time from its start until the circuit was open (zero when it already was),
    /// `None` when it never opened during the outage.
    pub detection: Vec<Option<u64>>,
    /// Calls rejected whose recorded outcome was a success.
    pub wrongly_rejected: u64,
    /// [`Run::wrongly_rejected`] per slice of the trace: [`SLICES`] equal slices from its first call
    /// to its last (for the chart); empty for the keys of a replay of many keys
    /// ([`crate::keyed`]), which draws no chart.
    pub wrong_by_slice: Vec<u64>,
    /// Calls rejected in all.
    pub rejected: u64,
    /// Calls admitted during an outage whose recorded outcome was a failure.
    pub failures_let_through: u64,
    /// Closed → open transitions.
    pub openings: u64,
    /// Openings within [`FLAP_WINDOW`] of the circuit's previous closing.
    pub flaps: u64,
    /// Openings outside every outage.
    pub false_openings: u64,
    /// Time spent open or half-open, up to the trace's last call.
    pub open_ns: u64,
    /// Half-open probes admitted.
    pub probes: u64,
    /// Admitted calls that the recording had rejected: their outcome was assumed.
    pub assumed: u64,
    /// Retries made (with the candidate's `retry`): each a call to the backend the recording
    /// did not make, assumed to fail as the call it retries did.
    pub retries: u64,
    /// Retries the candidate's `retry_budget` rejected.
    pub retries_rejected: u64,
    /// Ejections: openings by a relative rule of the key's group (a key in a group only).
    pub ejections: u64,
    /// Time from each ejection until the key next closed, up to its last call.
    pub ejected_ns: u64,
    /// Calls rejected while the key was ejected (from an ejection until it next closed).
    pub rejected_by_ejection: u64,
}

impl Run {
    /// A run of `name` with nothing counted yet.
    #[must_use]
    pub fn empty(name: &str) -> Run {
        Run::with_slices(name, SLICES)
    }

    /// A run of `name` with nothing counted yet and `slices` slices of wrongly rejected calls
    /// (none for a key of a many-key replay, which draws no chart).
    fn with_slices(name: &str, slices: usize) -> Run {
        Run {
            name: name.to_owned(),
            changes: Vec::new(),
            detection: Vec::new(),
            wrongly_rejected: 0,
            wrong_by_slice: vec![0; slices],
            rejected: 0,
            failures_let_through: 0,
            openings: 0,
            flaps: 0,
            false_openings: 0,
            open_ns: 0,
            probes: 0,
            assumed: 0,
            retries: 0,
            retries_rejected: 0,
            ejections: 0,
            ejected_ns: 0,
            rejected_by_ejection: 0,
        }
    }
}

/// An opening this soon after the previous closing counts as a flap.
pub const FLAP_WINDOW: Duration = Duration::from_secs(60);

/// The number of equal slices of the trace's span in which [`Run::wrong_by_slice`] counts the
/// calls wrongly rejected (the chart's resolution).
pub const SLICES: usize = 300;

/// An admission waiting in [`Replayer`]'s queue: (time, call number).
type Admission = std::cmp::Reverse<(u64, u64)>;

/// A call read and not yet reported, in [`Replayer`]'s queue of reports.
struct Pending<'a> {
    /// The index of its key (0 for a one-key replay).
    key: u32,
    at_ns: u64,
    recorded: Outcome,
    /// What it reports: its recorded outcome, or for a call the recording rejected, the last known one.
    reports: Outcome,
    permit: Option<fusebox::Permit<'a>>,
}

/// The replay of one candidate in progress: the calls read and not yet settled.
struct Replayer<'a, 'o> {
    /// The breaker of each key, by index.
    breakers: &'a [Breaker],
    /// Per key: ejected now (from an ejection until the key next closes), kept by the
    /// transition hook.
    log: &'a Mutex<Log>,
    /// Attempts per call (the candidate's `retry`).
    retry: u32,
    clock: FakeClock,
    now: u64,
    /// The trace's longest latency: no call is admitted earlier than the last report read minus it.
    longest: u64,
    /// Each key's outages, by index.
    outages: &'o [Vec<Outage>],
    t0: u64,
    span: u64,
    admissions: BinaryHeap<Admission>,
    /// In trace order, so in report-time order; `reports[0]` is call number `first_pending`.
    reports: VecDeque<Pending<'a>>,
    first_pending: u64,
}

impl<'a> Replayer<'a, '_> {
    fn slice_of(&self, at: u64) -> usize {
        let i = u128::from(at.saturating_sub(self.t0)) * SLICES as u128 / u128::from(self.span);
        (i as usize).min(SLICES - 1)
    }

    /// Takes the steps (admissions and reports) that no call read after one reported at `until`
    /// can precede; all of them when `until` is `None`.
    fn step(&mut self, until: Option<u64>, runs: &mut [Run]) {
        loop {
            // The earliest admission or report (reports are queued in time order); at equal
            // times in call order, an admission before a report.
            let admit = self.admissions.peek().map(|a| (a.0.0, a.0.1, 0u8));
            let report = self
                .reports
                .front()
                .map(|r| (r.at_ns, self.first_pending, 1u8));
            let next = match (admit, report) {
                (Some(a), Some(r)) => a.min(r),
                (Some(a), None) => a,
                (None, Some(r)) => r,
                (None, None) => return,
            };
            if until.is_some_and(|u| next.0.saturating_add(self.longest) > u) {
                return;
            }
            let (at, i, kind) = next;
            if at > self.now {
                self.clock.advance(Duration::from_nanos(at - self.now));
                self.now = at;
            }
            if kind == 0 {
                self.admissions.pop();
                let slot = (i - self.first_pending) as usize;
                let (key, at_ns, recorded) = {
                    let r = &self.reports[slot];
                    (r.key as usize, r.at_ns, r.recorded)
                };
                let (breaker, run) = (&self.breakers[key], &mut runs[key]);
                match breaker.try_acquire() {
                    Ok(permit) => {
                        breaker.count_attempt();
                        run.probes += u64::from(permit.is_probe());
                        run.assumed += u64::from(recorded == Outcome::Rejected);
                        if recorded == Outcome::Failure && in_outages(&self.outages[key], at_ns) {
                            run.failures_let_through += 1;
                        }
                        self.reports[slot].permit = Some(permit);
                    }
                    Err(_) => {
                        run.rejected += 1;
                        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
                        if log.ejected.get(key).copied().unwrap_or(false) {
                            run.rejected_by_ejection += 1;
                        }
                        drop(log);
                        if recorded == Outcome::Success {
                            run.wrongly_rejected += 1;
                            let slice = self.slice_of(at_ns);
                            if let Some(n) = run.wrong_by_slice.get_mut(slice) {
                                *n += 1;
                            }
                        }
                    }
                }
            } else {
                let call = self.reports.pop_front().expect("a report is queued");
                self.first_pending += 1;
                if let Some(permit) = call.permit {
                    match call.reports {
                        Outcome::Success => permit.success(),
                        Outcome::Failure => {
                            permit.failure();
                            let key = call.key as usize;
                            self.retry_failed(&self.breakers[key], &mut runs[key]);
                        }
                        _ => permit.ignore(),
                    }
                }
            }
        }
    }
}

impl Replayer<'_, '_> {
    /// The retries of a call that failed (with `retry`): at its report, each one asked of the
    /// retry budget, admitted by the breaker and assumed to fail as the call did (a trace holds
    /// calls, not attempts). A retry rejected by the budget or the breaker ends them.
    fn retry_failed(&self, breaker: &Breaker, run: &mut Run) {
        for _ in 1..self.retry {
            if !breaker.try_retry() {
                run.retries_rejected += 1;
                return;
            }
            let Ok(permit) = breaker.try_acquire() else {
                return;
            };
            breaker.count_attempt();
            run.retries += 1;
            permit.failure();
        }
    }
}

/// Replays `events` (one key's calls, in trace order) through a breaker running `candidate`,
/// scoring it against `outages`. With a group, the key is its only member (with the default
/// `min_members` of 5 the relative rules never apply); [`crate::keyed`] replays many keys.
///
/// Calls are admitted at [`Event::admitted_ns`] and reported at [`Event::at_ns`], in time order
/// (at equal times in trace order, admissions first). The trace is read once, in order: a call's
/// report waits in a queue until no later call can be admitted before it (no later call is
/// admitted earlier than its report time minus the trace's longest latency), so the replay's
/// memory is the calls within one longest latency of each other, not the trace.
///
/// # Panics
///
/// Only if `candidate.policy` is invalid: candidates are validated when parsed.
#[must_use]
pub fn replay(events: &[Event], candidate: &Candidate, outages: &[Outage]) -> Run {
    let span = Span::of(events.iter().copied());
    replay_in(events.iter().copied(), &span, candidate, outages)
}

/// [`replay`] of events read once from `events`, whose [`Span`] is `span`.
///
/// # Panics
///
/// Only if `candidate.policy` is invalid: candidates are validated when parsed.
#[must_use]
pub fn replay_in(
    events: impl IntoIterator<Item = Event>,
    span: &Span,
    candidate: &Candidate,
    outages: &[Outage],
) -> Run {
    let keys = ["replay".to_owned()];
    let events = events.into_iter().map(|event| KeyedEvent { key: 0, event });
    // The one key replayed is the only member of the candidate's group, whatever `group_keys`.
    let alone = candidate.group.as_ref().map(|group| {
        let mut alone = candidate.clone();
        alone.group = Some(crate::policy::GroupSpec {
            keys: crate::policy::KeySet::All,
            ..group.clone()
        });
        alone
    });
    let (mut runs, _) = replay_keys_in(
        events,
        &keys,
        std::slice::from_ref(span),
        alone.as_ref().unwrap_or(candidate),
        &[outages.to_vec()],
        FakeClock::new(),
    );
    let mut run = runs.pop().expect("one key");
    run.name.clone_from(&candidate.name);
    run
}

/// What the transition hook keeps of a replay: every change with its key, and which keys are
/// ejected now.
#[derive(Default)]
pub(crate) struct Log {
    changes: Vec<(u32, Change)>,
    /// Per key: from an ejection until the key next closes.
    pub(crate) ejected: Vec<bool>,
}

/// Installs the transition hook of a replay of `keys` on `registry`: it logs every change with
/// its key and keeps which keys are ejected now.
fn log_transitions(registry: &Registry, clock: &FakeClock, keys: &[String]) -> Arc<Mutex<Log>> {
    let log = Arc::new(Mutex::new(Log {
        changes: Vec::new(),
        ejected: vec![false; keys.len()],
    }));
    {
        let log = log.clone();
        let clock = clock.clone();
        let index: std::collections::HashMap<String, u32> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.clone(), i as u32))
            .collect();
        registry.on_transition(move |t| {
            let Some(&key) = index.get(t.key) else {
                return;
            };
            let change = Change {
                at_ns: clock.now_nanos(),
                from: t.from,
                to: t.to,
                trigger: t.trigger,
            };
            let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
            if change.is_ejection() {
                log.ejected[key as usize] = true;
            } else if !tripped(change.to) {
                log.ejected[key as usize] = false;
            }
            log.changes.push((key, change));
        });
    }
    log
}

/// The replay of `events` (calls of `keys`, in trace order) through one registry on a fake clock,
/// one breaker per key, each scored against its own outages (`outages[key]`) and span
/// (`spans[key]`). Each key runs `candidate.policy`; the keys its group matches join the group
/// (`Policy::group`), whose settings are set with `Registry::configure_group` before any member
/// is made. The registry runs on `clock` (a new [`FakeClock`], at 0). Returns a [`Run`] per key
/// (named by its key) and the registry, for its groups.
///
/// # Panics
///
/// Only if `candidate.policy` is invalid: candidates are validated when parsed.
pub(crate) fn replay_keys_in(
    events: impl IntoIterator<Item = KeyedEvent>,
    keys: &[String],
    spans: &[Span],
    candidate: &Candidate,
    outages: &[Vec<Outage>],
    clock: FakeClock,
) -> (Vec<Run>, Registry) {
    // `open_jitter` draws from this thread's generator: seeded, so a replay is reproducible.
    fastrand::seed(0x0066_7573_6562_6f78);
    let registry = Registry::with_clock(clock.clone());
    let log = log_transitions(&registry, &clock, keys);
    if let Some(group) = &candidate.group {
        registry.configure_group(group.name, group.policy);
    }
    let breakers: Vec<Breaker> = keys
        .iter()
        .map(|key| {
            let policy = match &candidate.group {
                Some(group) if group.keys.matches(key) => candidate.policy.group(group.name),
                _ => candidate.policy,
            };
            registry
                .breaker(key, policy)
                .expect("candidates are validated when they are read")
        })
        .collect();
    // Adaptive throttling (`throttle`) draws from this thread's generator: seeded, a candidate
    // replays the same way every time, on whichever thread.
    fastrand::seed(0x5eed);

    // No chart for many keys: no slices per key (2.4 KB each).
    let slices = if keys.len() > 1 { 0 } else { SLICES };
    let mut runs: Vec<Run> = keys.iter().map(|k| Run::with_slices(k, slices)).collect();
    let t0 = spans.iter().map(|s| s.first_ns).min().unwrap_or(0);
    let end_ns = spans.iter().map(|s| s.last_ns).max().unwrap_or(0);
    let mut replayer = Replayer {
        breakers: &breakers,
        log: &log,
        retry: candidate.retry,
        clock,
        now: 0,
        longest: spans.iter().map(|s| s.longest_ns).max().unwrap_or(0),
        outages,
        t0,
        span: (end_ns - t0).max(1),
        admissions: BinaryHeap::new(),
        reports: VecDeque::new(),
        first_pending: 0,
    };
    let mut last_known = vec![Outcome::Success; keys.len()];
    for (i, KeyedEvent { key, event: e }) in events.into_iter().enumerate() {
        let recorded = e.outcome();
        let last = &mut last_known[key as usize];
        let reports = match recorded {
            Outcome::Rejected => *last,
            o => {
                if o != Outcome::Ignored {
                    *last = o;
                }
                o
            }
        };
        replayer.step(Some(e.at_ns()), &mut runs);
        replayer
            .admissions
            .push(std::cmp::Reverse((e.admitted_ns(), i as u64)));
        replayer.reports.push_back(Pending {
            key,
            at_ns: e.at_ns(),
            recorded,
            reports,
            permit: None,
        });
    }
    replayer.step(None, &mut runs);
    drop(replayer);
    drop(breakers);
    let changes = std::mem::take(&mut log.lock().unwrap_or_else(|p| p.into_inner()).changes);
    for (key, change) in changes {
        runs[key as usize].changes.push(change);
    }
    for ((run, outages), span) in runs.iter_mut().zip(outages).zip(spans) {
        score(run, outages, span.last_ns);
    }
    (runs, registry)
}

/// True for the states in which a circuit rejects (some) calls.
pub(crate) fn tripped(state: State) -> bool {
    matches!(state, State::Open | State::HalfOpen | State::ForcedOpen)
}

/// The state of `changes` at `at_ns` (closed before the first change).
#[must_use]
pub fn state_at(changes: &[Change], at_ns: u64) -> State {
    let after = changes.partition_point(|c| c.at_ns <= at_ns);
    after
        .checked_sub(1)
        .map_or(State::Closed, |last| changes[last].to)
}

/// True when `at_ns` falls in one of `outages` (sorted and disjoint, as [`find_outages`] gives
/// them): a binary search.
#[must_use]
pub fn in_outages(outages: &[Outage], at_ns: u64) -> bool {
    let i = outages.partition_point(|o| o.end_ns < at_ns);
    outages.get(i).is_some_and(|o| o.contains(at_ns))
}

fn score(run: &mut Run, outages: &[Outage], end_ns: u64) {
    let mut last_close: Option<u64> = None;
    let mut open_since: Option<u64> = None;
    let mut ejected_since: Option<u64> = None;
    for c in &run.changes {
        if c.is_ejection() {
            run.ejections += 1;
            ejected_since.get_or_insert(c.at_ns);
        } else if !tripped(c.to)
            && let Some(since) = ejected_since.take()
        {
            run.ejected_ns += c.at_ns - since;
        }
        if c.from == State::Closed && c.to == State::Open {
            run.openings += 1;
            if last_close.is_some_and(|t| c.at_ns - t <= FLAP_WINDOW.as_nanos() as u64) {
                run.flaps += 1;
            }
            if !in_outages(outages, c.at_ns) {
                run.false_openings += 1;
            }
        }
        if c.to == State::Closed {
            last_close = Some(c.at_ns);
        }
        match (tripped(c.from), tripped(c.to)) {
            (false, true) => open_since = Some(c.at_ns),
            (true, false) => {
                if let Some(since) = open_since.take() {
                    run.open_ns += c.at_ns - since;
                }
            }
            _ => {}
        }
    }
    if let Some(since) = open_since {
        run.open_ns += end_ns.saturating_sub(since);
    }
    if let Some(since) = ejected_since {
        run.ejected_ns += end_ns.saturating_sub(since);
    }
    run.detection = outages
        .iter()
        .map(|o| {
            if tripped(state_at(&run.changes, o.start_ns)) {
                return Some(0);
            }
            let from = run.changes.partition_point(|c| c.at_ns < o.start_ns);
            run.changes[from..]
                .iter()
                .take_while(|c| c.at_ns <= o.end_ns)
                .find(|c| c.to == State::Open)
                .map(|c| c.at_ns - o.start_ns)
        })
        .collect();
}

impl Run {
    /// Total detection time, counting a missed outage as its whole length (the search's score).
    #[must_use]
    pub fn detection_cost(&self, outages: &[Outage]) -> u64 {
        self.detection
            .iter()
            .zip(outages)
            .map(|(d, o)| d.unwrap_or(o.end_ns - o.start_ns + 1))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_that_would_cut_too_many_is_widened_to_a_whole_unit() {
        let rule = OutageRule::default();
        assert!(
            rule.fit(3_600_000_000_000).1.is_none(),
            "an hour of 1 s buckets"
        );
        let (wide, note) = rule.fit(10_000_000_000_000_000_000);
        assert_eq!(wide.bucket, Duration::from_secs(10_001));
        assert!(note.unwrap().ends_with("(at most 1000000)"));
        let tiny = OutageRule {
            bucket: Duration::ZERO,
            ..rule
        };
        let (wide, _) = tiny.fit(120_000_000_000);
        assert_eq!(wide.bucket, Duration::from_micros(121));
        assert!(120_000_000_000 / (wide.bucket.as_nanos() as u64) < MAX_BUCKETS);
    }
}
