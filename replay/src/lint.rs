//! Checks of candidate policies.
//!
//! - [`check`], behind `fusebox-replay lint "window=10,failure_rate=50"`: a policy on its own, no
//!   trace needed. A policy that does not parse or that `fusebox` refuses is an error (the command
//!   exits with 1); a policy that one failure can open, that opens only when every call fails, or
//!   that probes a down backend more than once a second is a warning.
//! - [`lint`], under every replay's table: a candidate on a trace; a policy that cannot trip on the
//!   trace's traffic, and one that trips on noise (opens where the trace has no outage).

use std::fmt;
use std::time::Duration;

use fusebox::Window;

use crate::policy::{Candidate, Setting, span_text};
use crate::replay::{Outage, Run};
use crate::report::secs;
use crate::trace::Event;

/// How bad a [`Finding`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The policy cannot be used as written.
    Error,
    /// The policy works, probably not as meant.
    Warning,
}

/// One problem [`check`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// How bad it is.
    pub severity: Severity,
    /// What is wrong and what to change, naming the candidate.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{level}: {}", self.message)
    }
}

/// The warnings about `candidate` on its own (a candidate that parsed is valid: what does not
/// parse is the error [`crate::policy::parse_policy_arg`] returns).
#[must_use]
pub fn check(candidate: &Candidate) -> Vec<Finding> {
    let policy = &candidate.policy;
    let name = &candidate.name;
    let mut out = Vec::new();
    let mut warn = |message: String| {
        out.push(Finding {
            severity: Severity::Warning,
            message,
        });
    };
    if let Some(rate) = policy.settings().failure_rate {
        let min_calls = policy.settings().min_calls;
        if 100 >= u32::from(rate) * min_calls {
            warn(format!(
                "`{name}`: one failure can open it: it is {}% of `min_calls` = {min_calls} calls, at or above `failure_rate` = {rate}; raise `min_calls` (10 or more is usual)",
                100 / min_calls.max(1)
            ));
        }
        if rate == 100 {
            warn(format!(
                "`{name}`: `failure_rate` = 100 opens only when every call in the window fails, so a backend failing 99% of calls keeps it closed; lower `failure_rate` (50 is usual)"
            ));
        }
    }
    if policy.settings().consecutive == Some(1) {
        warn(format!(
            "`{name}`: `consecutive` = 1 opens on any single failure; raise `consecutive` (5 is usual)"
        ));
    }
    if let Window::Time(span) = policy.settings().window
        && span < Duration::from_secs(1)
        && (policy.settings().failure_rate.is_some() || policy.settings().slow.is_some())
    {
        warn(format!(
            "`{name}`: a `window` of {} judges a rate on less than a second of traffic, which few services fill with `min_calls` calls; widen `window` (`10s` or more is usual)",
            span_text(span)
        ));
    }
    let open_for = policy.settings().open_for;
    if open_for < Duration::from_secs(1) {
        warn(format!(
            "`{name}`: `open_for` = {} sends a down backend a probe more than once a second; raise `open_for` (`5s` or more is usual)",
            span_text(open_for)
        ));
    }
    out
}

/// The most calls reported within `span` nanoseconds of one another, counted as they come.
struct Busiest {
    span: u64,
    /// The report times within `span` of the last (none kept for a count window's `u64::MAX`).
    times: std::collections::VecDeque<u64>,
    count: usize,
    best: usize,
}

impl Busiest {
    fn new(span: u64) -> Self {
        Busiest {
            span,
            times: std::collections::VecDeque::new(),
            count: 0,
            best: 0,
        }
    }

    fn push(&mut self, at: u64) {
        if self.span == u64::MAX {
            self.count += 1;
        } else {
            self.times.push_back(at);
            while self.times.front().is_some_and(|&t| at - t >= self.span) {
                self.times.pop_front();
            }
            self.count = self.times.len();
        }
        self.best = self.best.max(self.count);
    }
}

/// The most recorded calls (successes and failures) reported within any `span` nanoseconds of the
/// whole trace, and (when there are outages) of any one outage. One pass; memory is the calls of
/// one `span`, none for a count window (`span` = `u64::MAX`).
fn busiest(
    events: impl IntoIterator<Item = Event>,
    span: u64,
    outages: &[Outage],
) -> (usize, Option<usize>) {
    let mut whole = Busiest::new(span);
    let mut during: Option<(usize, Busiest)> = None;
    let mut best_during = (!outages.is_empty()).then_some(0);
    for e in events.into_iter().filter(Event::is_known) {
        let at = e.at_ns();
        whole.push(at);
        let i = outages.partition_point(|o| o.end_ns < at);
        if outages.get(i).is_some_and(|o| o.contains(at)) {
            if during.as_ref().is_none_or(|d| d.0 != i) {
                during = Some((i, Busiest::new(span)));
            }
            if let Some((_, d)) = &mut during {
                d.push(at);
                best_during = best_during.map(|b| b.max(d.best));
            }
        }
    }
    (whole.best, best_during)
}

fn consecutive(candidate: &Candidate) -> u32 {
    candidate
        .settings
        .iter()
        .find_map(|(f, s)| match (f, s) {
            (&"consecutive", Setting::Int(n)) => Some(*n),
            _ => None,
        })
        .unwrap_or(0)
}

/// Warnings for `candidate` on `calls` (one key's calls), given its `run` and the trace's `outages`.
#[must_use]
pub fn lint(calls: &[Event], candidate: &Candidate, run: &Run, outages: &[Outage]) -> Vec<String> {
    let t0 = calls.first().map_or(0, Event::at_ns);
    lint_in(calls.iter().copied(), t0, candidate, run, outages)
}

/// [`lint`] on events read once from `calls`, the first reported at `t0`.
#[must_use]
pub fn lint_in(
    calls: impl IntoIterator<Item = Event>,
    t0: u64,
    candidate: &Candidate,
    run: &Run,
    outages: &[Outage],
) -> Vec<String> {
    let policy = &candidate.policy;
    let name = &candidate.name;
    let mut warnings = Vec::new();
    let rate = policy.settings().failure_rate.is_some() || policy.settings().slow.is_some();
    let run_rule = consecutive(candidate);
    if !rate && run_rule == 0 {
        warnings.push(format!(
            "`{name}` can never open: `failure_rate` is off and neither `consecutive` nor `slow` is set"
        ));
        return warnings;
    }
    let min_calls = policy.settings().min_calls as usize;
    let (limit, what) = match policy.settings().window {
        Window::Time(span) => (
            Some(busiest(
                calls,
                u64::try_from(span.as_nanos()).unwrap_or(u64::MAX),
                outages,
            )),
            format!("busiest {} of", span_text(span)),
        ),
        // A count window (the enum is non-exhaustive; a later kind is added here).
        _ => (Some(busiest(calls, u64::MAX, outages)), "whole".to_owned()),
    };
    let other = if run_rule != 0 {
        format!(" (only `consecutive = {run_rule}` can open it)")
    } else {
        String::new()
    };
    if let (true, Some((whole, during))) = (rate, limit) {
        if whole < min_calls {
            warnings.push(format!(
                "`{name}` cannot trip on a rate with this traffic{other}: the {what} the trace has {whole} calls, fewer than `min_calls` = {min_calls}; lower `min_calls` or widen `window`"
            ));
        } else if let Some(during) = during.filter(|d| *d < min_calls) {
            warnings.push(format!(
                "`{name}` cannot trip on a rate during the trace's outages{other}: the {what} an outage has at most {during} calls, fewer than `min_calls` = {min_calls}; lower `min_calls` or widen `window`"
            ));
        }
    }
    if run.false_openings > 0 {
        let first = run
            .changes
            .iter()
            .find(|c| {
                c.from == fusebox::State::Closed
                    && c.to == fusebox::State::Open
                    && !crate::replay::in_outages(outages, c.at_ns)
            })
            .map_or(0, |c| c.at_ns);
        warnings.push(format!(
            "`{name}` trips on noise: it opened {} time(s) outside every outage (first at {}); raise `min_calls` or `failure_rate`, or widen `window`",
            run.false_openings,
            secs(first.saturating_sub(t0))
        ));
    }
    warnings
}
