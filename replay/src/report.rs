//! The markdown report: one row per candidate, the outages found, and the replay's limits.

use std::fmt::Write;

use crate::replay::{Outage, Run};

/// Nanoseconds as seconds with two decimals: `1.25s`.
#[must_use]
pub fn secs(ns: u64) -> String {
    format!("{:.2}s", ns as f64 / 1e9)
}

/// What every report says about what a replay cannot know.
pub const LIMITS: &str = "\
Counterfactual limits: a call a candidate refuses still reached the backend in the recording, so \
the backend's load and recovery are the recording's (shedding load may let it recover sooner than \
shown); a call the recording refused has no known outcome, and a candidate that admits it is given \
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
        "| policy | time to detect | wrongly refused | failures let through | openings | flaps | false openings | time open | probes | refused | assumed |"
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
            r.wrongly_refused,
            r.failures_let_through,
            r.openings,
            r.flaps,
            r.false_openings,
            secs(r.open_ns),
            r.probes,
            r.refused,
            r.assumed
        );
    }
    if runs.iter().any(|r| r.retries + r.retries_refused > 0) {
        let _ = writeln!(out);
        let _ = writeln!(out, "{RETRIES}");
        let _ = writeln!(out);
        let _ = writeln!(out, "| policy | retries | refused by the retry budget |");
        let _ = writeln!(out, "|---|---:|---:|");
        for r in runs {
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                r.name, r.retries, r.retries_refused
            );
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "{LIMITS}");
    out
}

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
            name: "p".into(),
            changes: Vec::new(),
            detection,
            wrongly_refused: 0,
            wrong_by_slice: Vec::new(),
            refused: 0,
            failures_let_through: 0,
            openings: 0,
            flaps: 0,
            false_openings: 0,
            open_ns: 0,
            probes: 0,
            assumed: 0,
            retries: 0,
            retries_refused: 0,
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
