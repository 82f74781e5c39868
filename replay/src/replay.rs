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
use std::sync::Mutex;
use std::time::Duration;

use fusebox::clock::FakeClock;
use fusebox::{Breaker, State, Trigger};

use crate::policy::Candidate;
use crate::trace::{Event, KeyedEvent, Outcome};

mod keys;
mod outage;

use keys::Log;
pub(crate) use keys::replay_keys_in;
pub use outage::{MAX_BUCKETS, Outage, OutageRule, Span, find_outages, find_outages_in};

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
