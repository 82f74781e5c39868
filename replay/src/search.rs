//! `--search`: replays a grid of the main knobs and keeps the Pareto front of time to detect
//! outages against calls wrongly rejected. On a trace with many keys, the grid is a group's
//! `success_rate` × `max_ejection` ([`group_grid`]), scored on the totals over every key.

use std::fmt::Write;

use crate::keyed::{KeyedOutages, KeyedRun, replay_keys};
use crate::policy::{Candidate, parse_policy_arg};
use crate::replay::{Outage, Run, replay};
use crate::report::secs;
use crate::trace::Event;
use crate::trace::KeyedTrace;

/// The grid: `consecutive` alone × `open_for` (without and with `open_jitter = 20`), then `window` × `failure_rate` × `min_calls` ×
/// `open_for` × `consecutive`, skipping the combinations `fusebox` rejects (a `min_calls` above a
/// count window), then adaptive throttling: `window` × `throttle` (1.5, 2, 3) under a 75 %
/// failure rate.
#[must_use]
pub fn grid() -> Vec<Candidate> {
    let windows = ["20", "50", "100", "10s", "60s"];
    let rates = ["25", "50", "75"];
    let min_calls = ["5", "10", "20"];
    let open_for = ["5s", "30s", "60s"];
    let consecutive = ["0", "5", "10"];
    let mut out = Vec::new();
    let add = |line: String, out: &mut Vec<Candidate>| {
        let name = format!("g{}", out.len() + 1);
        if let Ok(candidate) = parse_policy_arg(&line, &name) {
            out.push(candidate);
        }
    };
    // `consecutive` alone (the failure-rate rule off), without and with `open_jitter`.
    for jitter in ["", ",open_jitter=20"] {
        for c in ["3", "5", "10"] {
            for o in open_for {
                add(format!("consecutive={c},open_for={o}{jitter}"), &mut out);
            }
        }
    }
    for w in windows {
        for r in rates {
            for m in min_calls {
                for o in open_for {
                    for c in consecutive {
                        let mut line =
                            format!("window={w},failure_rate={r},min_calls={m},open_for={o}");
                        if c != "0" {
                            line.push_str(&format!(",consecutive={c}"));
                        }
                        add(line, &mut out);
                    }
                }
            }
        }
    }
    // Adaptive throttling sheds calls below the rate at which the circuit opens.
    for w in windows {
        for k in ["1.5", "2", "3"] {
            add(
                format!("window={w},failure_rate=75,min_calls=10,open_for=30s,throttle={k}"),
                &mut out,
            );
        }
    }
    out
}

/// The indices of the runs on the Pareto front of (detection cost, wrongly rejected calls): no
/// other run is at least as good on both and better on one. Of runs equal on both, the first is
/// kept. Sorted by detection cost.
#[must_use]
pub fn pareto(runs: &[Run], outages: &[Outage]) -> Vec<usize> {
    let score = scores(runs, outages);
    let mut front: Vec<usize> = (0..runs.len())
        .filter(|&i| {
            let (d, w) = score[i];
            !score.iter().enumerate().any(|(j, &(dj, wj))| {
                let dominates = dj <= d && wj <= w && (dj < d || wj < w);
                let earlier_twin = j < i && dj == d && wj == w;
                dominates || earlier_twin
            })
        })
        .collect();
    front.sort_by_key(|&i| score[i]);
    front
}

/// A run's place in the search: (detection cost in nanoseconds, calls wrongly rejected).
pub type Score = (u64, u64);

/// Each run's [`Score`], in order.
#[must_use]
pub fn scores(runs: &[Run], outages: &[Outage]) -> Vec<Score> {
    runs.iter()
        .map(|r| (r.detection_cost(outages), r.wrongly_rejected))
        .collect()
}

/// Replays every candidate of `candidates` and returns the runs with the front's indices.
#[must_use]
pub fn search(
    events: &[Event],
    candidates: &[Candidate],
    outages: &[Outage],
) -> (Vec<Run>, Vec<usize>) {
    search_with(events, candidates, outages, || {})
}

/// [`search`], calling `done` after each candidate's replay (for a progress bar).
///
/// Every candidate replays the same in-memory events (16 bytes a call, read once): the trace is
/// neither read nor parsed again per candidate. The candidates are shared among as many threads
/// as the machine has cores.
#[must_use]
pub fn search_with(
    events: &[Event],
    candidates: &[Candidate],
    outages: &[Outage],
    done: impl Fn() + Sync,
) -> (Vec<Run>, Vec<usize>) {
    let runs = on_every_core(candidates, |c| replay(events, c, outages), done);
    let front = pareto(&runs, outages);
    (runs, front)
}

/// `replay` of every candidate, in order, the candidates shared among as many threads as the
/// machine has cores, calling `done` after each.
fn on_every_core<R: Send>(
    candidates: &[Candidate],
    replay: impl Fn(&Candidate) -> R + Sync,
    done: impl Fn() + Sync,
) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .clamp(1, candidates.len().max(1));
    let chunk = candidates.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = candidates
            .chunks(chunk)
            .map(|part| {
                let (done, replay) = (&done, &replay);
                scope.spawn(move || {
                    part.iter()
                        .map(|c| {
                            let run = replay(c);
                            done();
                            run
                        })
                        .collect::<Vec<R>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

/// The front as markdown, each row with the line to paste.
#[must_use]
pub fn front_table(
    candidates: &[Candidate],
    runs: &[Run],
    front: &[usize],
    outages: &[Outage],
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Pareto front of {} policies: time to detect (a missed outage counts as its whole length) against calls wrongly rejected.\n",
        candidates.len()
    );
    let _ = writeln!(
        out,
        "| time to detect (total) | missed | wrongly rejected | failures let through | openings | paste into the attribute |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---|");
    for &i in front {
        let r = &runs[i];
        let missed = r.detection.iter().filter(|d| d.is_none()).count();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | `{}` |",
            secs(r.detection_cost(outages)),
            missed,
            r.wrongly_rejected,
            r.failures_let_through,
            r.openings,
            candidates[i].attribute_args()
        );
    }
    let _ = writeln!(out, "\nAs `--policy` strings:\n");
    for &i in front {
        let _ = writeln!(out, "    --policy \"{}\"", candidates[i].policy_arg());
    }
    out
}

/// The `success_rate` values [`group_grid`] tries (0: the success-rate rule off).
pub const STDEV_FACTORS: [&str; 5] = ["1.5", "1.9", "2.5", "3", "0"];

/// The `max_ejection` values [`group_grid`] tries.
pub const MAX_EJECTIONS: [&str; 5] = ["10", "20", "30", "50", "100"];

/// The grid of a trace with many keys: each of `bases` (with its group; a candidate without one
/// gets `group=all`, every key a member; no candidate: `fusebox`'s default policy in `group=all`)
/// with each of [`STDEV_FACTORS`] × [`MAX_EJECTIONS`], the rest of its settings as written.
#[must_use]
pub fn group_grid(bases: &[Candidate]) -> Vec<Candidate> {
    let default = [String::new()];
    let lines: Vec<String> = if bases.is_empty() {
        default.to_vec()
    } else {
        bases.iter().map(Candidate::policy_arg).collect()
    };
    let mut out = Vec::new();
    for (base, line) in lines.iter().enumerate() {
        let grouped = bases.get(base).is_some_and(|c| c.group.is_some());
        let mut line = line.clone();
        if !grouped {
            if !line.is_empty() {
                line.push(',');
            }
            line.push_str("group=all");
        }
        for f in STDEV_FACTORS {
            for m in MAX_EJECTIONS {
                let name = format!("g{}", out.len() + 1);
                let full = format!("{line},success_rate={f},max_ejection={m}");
                if let Ok(candidate) = parse_policy_arg(&full, &name) {
                    out.push(candidate);
                }
            }
        }
    }
    out
}

/// Replays every candidate of `candidates` on every key of `trace` and returns the runs with the
/// front's indices (the Pareto front of the totals: detection cost over every key's outages
/// against calls wrongly rejected), calling `done` after each candidate's replay. The candidates
/// are shared among as many threads as the machine has cores.
#[must_use]
pub fn search_keys_with(
    trace: &KeyedTrace,
    candidates: &[Candidate],
    outages: &KeyedOutages,
    done: impl Fn() + Sync,
) -> (Vec<KeyedRun>, Vec<usize>) {
    let runs = on_every_core(candidates, |c| replay_keys(trace, c, outages), done);
    let totals: Vec<Run> = runs.iter().map(|r| r.total.clone()).collect();
    let front = pareto(&totals, &outages.all());
    (runs, front)
}

/// The front of a search of a trace with many keys as markdown: the totals, the group's
/// ejections and panics, and each policy as a `--policy` string and as code.
#[must_use]
pub fn keyed_front_table(
    candidates: &[Candidate],
    runs: &[KeyedRun],
    front: &[usize],
    outages: &KeyedOutages,
) -> String {
    let all = outages.all();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Pareto front of {} group settings (`success_rate` × `max_ejection`): time to detect every key's outages (a missed outage counts as its whole length) against calls wrongly rejected, over every key.\n",
        candidates.len()
    );
    let _ = writeln!(
        out,
        "| time to detect (total) | missed | wrongly rejected | failures let through | ejections | most open at once | panic episodes | `--policy` |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---|");
    for &i in front {
        let t = &runs[i].total;
        let missed = t.detection.iter().filter(|d| d.is_none()).count();
        let group = runs[i].group.as_ref();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | `{}` |",
            secs(t.detection_cost(&all)),
            missed,
            t.wrongly_rejected,
            t.failures_let_through,
            t.ejections,
            group.map_or(0, |g| g.most_open),
            group.map_or(0, |g| g.panics),
            candidates[i].policy_arg()
        );
    }
    let _ = writeln!(
        out,
        "\nAs code (the members' attribute, the group's settings):\n"
    );
    for &i in front {
        let _ = writeln!(
            out,
            "    #[circuit_breaker(key = host, {})]  {}",
            candidates[i].attribute_args(),
            candidates[i].group_code().unwrap_or_default()
        );
    }
    out
}
