//! The replay of a trace with many keys: one breaker per key in one registry on a fake clock,
//! the keys a candidate's group matches in the group, and every state change logged per key.

use std::collections::{BinaryHeap, VecDeque};
use std::sync::{Arc, Mutex};

use fusebox::clock::{Clock, FakeClock};
use fusebox::{Breaker, Registry};

use super::Outage;
use super::{Change, Pending, Replayer, Run, SLICES, Span, score, tripped};
use crate::policy::Candidate;
use crate::trace::{KeyedEvent, Outcome};

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
    let breakers = breakers_of(&registry, keys, candidate);
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
    feed(&mut replayer, events, keys.len(), &mut runs);
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

/// One breaker per key on `registry`, each running `candidate.policy`, in the candidate's group
/// when the group matches its key; the group's settings are set before any member is made.
fn breakers_of(registry: &Registry, keys: &[String], candidate: &Candidate) -> Vec<Breaker> {
    if let Some(group) = &candidate.group {
        registry
            .configure_group(group.name, group.policy)
            .expect("candidates are validated when they are read");
    }
    keys.iter()
        .map(|key| {
            let policy = match &candidate.group {
                Some(group) if group.keys.matches(key) => candidate.policy.group(group.name),
                _ => candidate.policy,
            };
            registry
                .breaker(key, policy)
                .expect("candidates are validated when they are read")
        })
        .collect()
}

/// Runs `events` through `replayer` in trace order, then the calls still in flight: a call the
/// recording rejected reports the last known outcome of its key (of `keys` keys).
fn feed(
    replayer: &mut Replayer<'_, '_>,
    events: impl IntoIterator<Item = KeyedEvent>,
    keys: usize,
    runs: &mut [Run],
) {
    let mut last_known = vec![Outcome::Success; keys];
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
        replayer.step(Some(e.at_ns()), runs);
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
    replayer.step(None, runs);
}
