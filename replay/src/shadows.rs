//! Shadow policies tried live: what each one decided on the recorded calls, and its replay.
//!
//! A key with shadow policies (`fusebox::Policy::shadow`, the attribute's `shadow`) records, after
//! each call's line, one line per shadow with its name (`shadow`) and its verdict (`outcome`:
//! the call's own, or `rejected` when it would have rejected it). [`live_shadows`] tallies them;
//! a shadow's policy text is a `--policy` string as it is (`tight: window = 10, failure_rate =
//! 30`), so replaying it over the same trace's calls ([`crate::replay::replay`]) shows what it
//! would have done, beside the policy in force, and [`compare`] puts the live verdicts next to
//! the replayed runs. A replay sees the same calls the shadow judged, so with a policy in force
//! that rejected nothing, a shadow's live rejections and its replay's are the same.

use crate::replay::Run;
use crate::trace::{Call, Outcome, ReadError, Reader};

/// What one shadow policy of one key decided on the recorded calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveShadow {
    /// The key.
    pub key: String,
    /// The shadow's name.
    pub name: String,
    /// Calls it would have let through.
    pub admitted: u64,
    /// Calls it would have rejected.
    pub rejected: u64,
}

/// The shadow policies of `lines` (a trace read line by line, shadow lines included:
/// [`crate::trace::parse`] or [`crate::trace::Reader::next_line`]), in the order they first
/// appear.
#[must_use]
pub fn live_shadows<'a>(lines: impl IntoIterator<Item = &'a Call>) -> Vec<LiveShadow> {
    let mut out: Vec<LiveShadow> = Vec::new();
    for call in lines {
        tally(&mut out, call);
    }
    out
}

/// Counts `call`, when it is a shadow's line, into its shadow's tally.
fn tally(out: &mut Vec<LiveShadow>, call: &Call) {
    let Some(name) = &call.shadow else { return };
    let index = match out
        .iter()
        .position(|s| s.name == *name && s.key == call.key)
    {
        Some(index) => index,
        None => {
            out.push(LiveShadow {
                key: call.key.clone(),
                name: name.clone(),
                admitted: 0,
                rejected: 0,
            });
            out.len() - 1
        }
    };
    match call.outcome {
        Outcome::Rejected => out[index].rejected += 1,
        _ => out[index].admitted += 1,
    }
}

/// The shadow policies of `key` in the trace on `input`, read line by line (one line in memory).
///
/// # Errors
///
/// A [`ReadError`] for a line that does not parse or goes back in time, or a read error.
pub fn read_live(input: impl std::io::BufRead, key: &str) -> Result<Vec<LiveShadow>, ReadError> {
    let mut reader = Reader::new(input);
    let mut live = Vec::new();
    while let Some(line) = reader.next_line()? {
        if line.shadow.is_some() && line.key == key {
            tally(&mut live, &line);
        }
    }
    Ok(live)
}

/// A markdown table of each live shadow of `key` beside the replayed run of the same name (a
/// candidate named as the shadow), and the runs of the other candidates (the policy in force,
/// say): the calls each rejected or would have rejected, and its openings.
#[must_use]
pub fn compare(live: &[LiveShadow], key: &str, runs: &[Run]) -> String {
    let mut out = String::from(
        "| policy | live: would have rejected | live: let through | replayed: rejected | replayed: openings |\n|---|---|---|---|---|\n",
    );
    for run in runs {
        let shadow = live.iter().find(|s| s.key == key && s.name == run.name);
        let (rejected, admitted) = shadow.map_or(("–".into(), "–".into()), |s| {
            (s.rejected.to_string(), s.admitted.to_string())
        });
        out.push_str(&format!(
            "| {} | {rejected} | {admitted} | {} | {} |\n",
            run.name, run.rejected, run.openings
        ));
    }
    for shadow in live.iter().filter(|s| s.key == key) {
        if !runs.iter().any(|run| run.name == shadow.name) {
            out.push_str(&format!(
                "| {} (not replayed: give its policy with `--policy \"{}: …\"`) | {} | {} | – | – |\n",
                shadow.name, shadow.name, shadow.rejected, shadow.admitted
            ));
        }
    }
    out
}
