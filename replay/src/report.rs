//! The markdown report: one row per candidate, the outages found, and the replay's limits.

use std::fmt::Write;

use crate::keyed::{KeyedOutages, KeyedRun};
use crate::replay::{Outage, Run};

/// Nanoseconds as seconds with two decimals: `1.25s`.
#[must_use]
pub fn secs(ns: u64) -> String {
    format!("{:.2}s", ns as f64 / 1e9)
}

/// What every report says about what a replay cannot know.
pub const LIMITS: &str = "\
Counterfactual limits: a call a candidate rejects still reached the backend in the recording, so \
the backend's load and recovery are the recording's (shedding load may let it recover sooner than \
shown); a call the recording rejected has no known outcome, and a candidate that admits it is given \
the outcome of the last known call (counted in `assumed`); latencies are the recorded ones.";

/// The detection column: one entry per outage, `missed` when the circuit never opened; past four
/// outages, how many were found and the mean time to detect those, or `missed (all N)` when none was.
#[must_use]
pub fn detection_cell(run: &Run) -> String {
    if run.detection.is_empty() {
        return "no outage".into();
    }
    let cells: Vec<String> = run
        .detection
        .iter()
        .map(|d| d.map_or("missed".into(), secs))
        .collect();
    if cells.len() <= 4 {
        cells.join(" / ")
    } else {
        let found: Vec<u64> = run.detection.iter().flatten().copied().collect();
        if found.is_empty() {
            return format!("missed (all {})", run.detection.len());
        }
        let mean = found.iter().sum::<u64>() / found.len() as u64;
        format!(
            "{}/{} found, mean {}",
            found.len(),
            run.detection.len(),
            secs(mean)
        )
    }
}

/// The markdown table of `runs` on a trace of `calls` calls starting at `t0` with `outages`.
#[must_use]
pub fn table(runs: &[Run], outages: &[Outage], t0: u64, calls: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{calls} calls, {} outage(s) (times from the first call):",
        outages.len()
    );
    for o in outages {
        let _ = writeln!(
            out,
            "- {} to {} ({} failures)",
            secs(o.start_ns - t0),
            secs(o.end_ns - t0),
            o.failures
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "| policy | time to detect | wrongly rejected | failures let through | openings | flaps | false openings | time open | probes | rejected | assumed |"
    );
    let _ = writeln!(
        out,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in runs {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.name,
            detection_cell(r),
            r.wrongly_rejected,
            r.failures_let_through,
            r.openings,
            r.flaps,
            r.false_openings,
            secs(r.open_ns),
            r.probes,
            r.rejected,
            r.assumed
        );
    }
    retry_rows(&mut out, runs.iter().map(|r| (r.name.as_str(), r)));
    let _ = writeln!(out);
    let _ = writeln!(out, "{LIMITS}");
    out
}

/// The most keys a per-key table lists per candidate (those that rejected most first), and the
/// most outages listed above it.
pub const KEY_ROWS: usize = 50;

/// The report of `runs` on a trace with many keys (`keys`, their outages `outages`, starting at
/// `t0`): the outages (the first [`KEY_ROWS`] to start), the totals over every key, a row per key that opened or rejected
/// (at most [`KEY_ROWS`] per candidate, those that rejected most first), and a row per group.
#[must_use]
pub fn keyed_table(
    runs: &[KeyedRun],
    keys: &[String],
    outages: &KeyedOutages,
    t0: u64,
    calls: usize,
) -> String {
    let mut out = String::new();
    let mut listed: Vec<(&String, &Outage)> = keys
        .iter()
        .zip(&outages.per_key)
        .flat_map(|(key, list)| list.iter().map(move |o| (key, o)))
        .collect();
    listed.sort_by_key(|(key, o)| (o.start_ns, *key));
    let _ = writeln!(
        out,
        "{calls} calls of {} keys, each key on its own breaker; {} outage(s) (times from the first call):",
        keys.len(),
        listed.len()
    );
    for (key, o) in listed.iter().take(KEY_ROWS) {
        let _ = writeln!(
            out,
            "- `{key}`: {} to {} ({} failures)",
            secs(o.start_ns - t0),
            secs(o.end_ns - t0),
            o.failures
        );
    }
    if listed.len() > KEY_ROWS {
        let _ = writeln!(
            out,
            "- and {} more outage(s), not listed",
            listed.len() - KEY_ROWS
        );
    }
    let _ = writeln!(out, "\nTotals over every key:\n");
    let _ = writeln!(
        out,
        "| policy | time to detect | wrongly rejected | failures let through | openings | ejections | time ejected | rejected by ejection | flaps | false openings | time open | probes | rejected | assumed |"
    );
    let _ = writeln!(
        out,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in runs {
        let t = &r.total;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.name,
            detection_cell(t),
            t.wrongly_rejected,
            t.failures_let_through,
            t.openings,
            t.ejections,
            secs(t.ejected_ns),
            t.rejected_by_ejection,
            t.flaps,
            t.false_openings,
            secs(t.open_ns),
            t.probes,
            t.rejected,
            t.assumed
        );
    }
    per_key_rows(&mut out, runs, keys, outages);
    group_rows(&mut out, runs);
    retry_rows(&mut out, runs.iter().map(|r| (r.name.as_str(), &r.total)));
    let _ = writeln!(out, "\n{LIMITS}");
    out
}

/// The retries table (after [`RETRIES`]): each policy's retries and the retries its budget
/// rejected, when any policy retried.
fn retry_rows<'a>(out: &mut String, runs: impl Iterator<Item = (&'a str, &'a Run)> + Clone) {
    if !runs
        .clone()
        .any(|(_, r)| r.retries + r.retries_rejected > 0)
    {
        return;
    }
    let _ = writeln!(out, "\n{RETRIES}\n");
    let _ = writeln!(out, "| policy | retries | rejected by the retry budget |");
    let _ = writeln!(out, "|---|---:|---:|");
    for (name, r) in runs {
        let _ = writeln!(out, "| {name} | {} | {} |", r.retries, r.retries_rejected);
    }
}

/// The per-key table of [`keyed_table`].
fn per_key_rows(out: &mut String, runs: &[KeyedRun], keys: &[String], outages: &KeyedOutages) {
    let _ = writeln!(
        out,
        "\nPer key (keys that opened or rejected a call; those that rejected most first):\n"
    );
    let _ = writeln!(
        out,
        "| policy | key | calls | time to detect | openings | ejections | time ejected | rejected by ejection | rejected | wrongly rejected | failures let through | time open |"
    );
    let _ = writeln!(
        out,
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in runs {
        let mut active: Vec<usize> = (0..r.keys.len())
            .filter(|&k| r.keys[k].openings + r.keys[k].rejected > 0)
            .collect();
        active.sort_by_key(|&k| std::cmp::Reverse(r.keys[k].rejected));
        for &k in active.iter().take(KEY_ROWS) {
            let run = &r.keys[k];
            let _ = writeln!(
                out,
                "| {} | `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.name,
                keys[k],
                outages.spans[k].calls,
                detection_cell(run),
                run.openings,
                run.ejections,
                secs(run.ejected_ns),
                run.rejected_by_ejection,
                run.rejected,
                run.wrongly_rejected,
                run.failures_let_through,
                secs(run.open_ns)
            );
        }
        let quiet = r.keys.len() - active.len();
        let more = active.len().saturating_sub(KEY_ROWS);
        let mut rest = Vec::new();
        if more > 0 {
            rest.push(format!("{more} more keys opened or rejected (not listed)"));
        }
        if quiet > 0 {
            rest.push(format!("{quiet} key(s) never opened nor rejected"));
        }
        if !rest.is_empty() {
            let _ = writeln!(
                out,
                "| {} | {} | | | | | | | | | | |",
                r.name,
                rest.join("; ")
            );
        }
    }
}

/// The groups table of [`keyed_table`], when a candidate has a group.
fn group_rows(out: &mut String, runs: &[KeyedRun]) {
    if runs.iter().any(|r| r.group.is_some()) {
        let _ = writeln!(out, "\n{GROUPS}\n");
        let _ = writeln!(
            out,
            "| policy | group | members | ejections | trips kept closed by the cap | panic episodes | time in panic | most open at once |"
        );
        let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|");
        for r in runs {
            if let Some(g) = &r.group {
                let _ = writeln!(
                    out,
                    "| {} | `{}` | {} | {} | {} | {} | {} | {} |",
                    r.name,
                    g.name,
                    g.members,
                    g.ejections,
                    g.kept_closed,
                    g.panics,
                    secs(g.panic_ns),
                    g.most_open
                );
            }
        }
    }
}

/// What the groups table says of its columns.
pub const GROUPS: &str = "\
Groups (candidates with `group`): ejections by the group's relative rules (success rate, failure \
percentage), trips of members its cap (`max_ejection`) kept closed, panic episodes (one \
`group_panic` event each) and the time from each to its `group_panic_over` (which a pass of the \
relative rules announces, at the first counted failure after an interval with none kept closed), \
and the most members open at once. A key is ejected from an ejection until it next closes.";

/// What the retries table says of how a replay models them.
pub const RETRIES: &str = "\
Retries (candidates with `retry`): a trace holds calls, not attempts, so each call that failed is \
retried at its report, up to `retry - 1` times, each retry assumed to fail as the call did, asked \
of the candidate's `retry_budget` and admitted by its breaker; `retries` are backend calls the \
recording did not make.";

#[cfg(test)]
mod tests {
    use super::*;

    fn run(detection: Vec<Option<u64>>) -> Run {
        Run {
            detection,
            ..Run::empty("p")
        }
    }

    #[test]
    fn a_policy_that_finds_no_outage_reads_missed_not_a_mean_of_zero() {
        assert_eq!(detection_cell(&run(vec![None; 5])), "missed (all 5)");
        assert_eq!(
            detection_cell(&run(vec![Some(2_000_000_000), None, None, None, None])),
            "1/5 found, mean 2.00s"
        );
        assert_eq!(detection_cell(&run(vec![None, None])), "missed / missed");
    }
}
