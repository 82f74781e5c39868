//! Warnings about a candidate on a trace: a policy that cannot trip on the trace's traffic, and
//! one that trips on noise (opens where the trace has no outage).

use fusebox::Window;

use crate::policy::{Candidate, Setting};
use crate::replay::{Outage, Run};
use crate::report::secs;
use crate::trace::{Call, Outcome};

/// The most recorded calls (successes and failures) reported within any `span` nanoseconds whose
/// start lies in `range`.
fn busiest(calls: &[&Call], span: u64, range: (u64, u64)) -> usize {
    let times: Vec<u64> = calls
        .iter()
        .filter(|c| matches!(c.outcome, Outcome::Success | Outcome::Failure))
        .map(|c| c.at_ns)
        .filter(|t| (range.0..=range.1).contains(t))
        .collect();
    let mut best = 0;
    let mut lo = 0;
    for hi in 0..times.len() {
        while times[hi] - times[lo] >= span {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best
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
pub fn lint(calls: &[&Call], candidate: &Candidate, run: &Run, outages: &[Outage]) -> Vec<String> {
    let policy = &candidate.policy;
    let name = &candidate.name;
    let mut warnings = Vec::new();
    let rate = policy.get_failure_rate().is_some() || policy.get_slow().is_some();
    let run_rule = consecutive(candidate);
    if !rate && run_rule == 0 {
        warnings.push(format!(
            "`{name}` can never open: `failure_rate` is off and neither `consecutive` nor `slow` is set"
        ));
        return warnings;
    }
    let min_calls = policy.get_min_calls() as usize;
    let end = calls.last().map_or(0, |c| c.at_ns);
    let (limit, what) = match policy.get_window() {
        Window::Time(span) => {
            let span_ns = span.as_nanos() as u64;
            let whole = busiest(calls, span_ns, (0, end));
            let during = outages
                .iter()
                .map(|o| busiest(calls, span_ns, (o.start_ns, o.end_ns)))
                .max();
            (
                Some((whole, during)),
                format!("busiest {} of", crate::policy::span_text(span)),
            )
        }
        Window::Count(_) => {
            let whole = busiest(calls, u64::MAX, (0, end));
            let during = outages
                .iter()
                .map(|o| busiest(calls, u64::MAX, (o.start_ns, o.end_ns)))
                .max();
            (Some((whole, during)), "whole".to_owned())
        }
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
                    && !outages.iter().any(|o| o.contains(c.at_ns))
            })
            .map_or(0, |c| c.at_ns);
        let t0 = calls.first().map_or(0, |c| c.at_ns);
        warnings.push(format!(
            "`{name}` trips on noise: it opened {} time(s) outside every outage (first at {}); raise `min_calls` or `failure_rate`, or widen `window`",
            run.false_openings,
            secs(first.saturating_sub(t0))
        ));
    }
    warnings
}
