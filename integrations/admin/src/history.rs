//! What a router remembers per key: a fixed ring of window samples, the last transitions and
//! operator actions, and the transition that last opened the circuit.

use std::collections::{HashMap, VecDeque};
use std::time::{SystemTime, UNIX_EPOCH};

use fusebox::Snapshot;
use fusebox::State;
use fusebox::{Policy, Window};
use fusebox::{Transition, Trigger};

/// Milliseconds since the Unix epoch (what the page shows as times of day).
pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One sample of a key's window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Sample {
    pub(super) at_ms: u64,
    pub(super) state: State,
    pub(super) failure_rate: f64,
    pub(super) slow_rate: f64,
    /// Calls per second for a time window; the window's calls for a count window.
    pub(super) calls: f64,
    pub(super) rejected_per_s: f64,
}

/// One transition as the hook saw it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Entry {
    pub(super) at_ms: u64,
    pub(super) from: State,
    pub(super) to: State,
    pub(super) trigger: Trigger,
    pub(super) failure_rate: f64,
    pub(super) slow_rate: f64,
    pub(super) calls: u32,
    pub(super) function: String,
    /// The operator of a manual transition.
    pub(super) by: Option<String>,
}

impl Entry {
    pub(super) fn of(t: &Transition<'_>, by: Option<String>) -> Entry {
        let window = (t.failure_rate, t.slow_rate, t.calls);
        Entry::at(now_ms(), (t.from, t.to, t.trigger), window, t.function, by)
    }

    /// A transition as a snapshot's last transition names it (one another replica committed on
    /// a shared key, which this router's hook never saw), dated `elapsed` ago.
    pub(super) fn of_snapshot(t: &fusebox::LastTransition) -> Entry {
        let elapsed = u64::try_from(t.elapsed.as_millis()).unwrap_or(u64::MAX);
        let window = (t.failure_rate, t.slow_rate, t.calls);
        let at_ms = now_ms().saturating_sub(elapsed);
        Entry::at(at_ms, (t.from, t.to, t.trigger), window, t.function, None)
    }

    /// A transition at `at_ms`: its states and trigger, and its window's failure rate, slow rate
    /// and calls.
    fn at(
        at_ms: u64,
        (from, to, trigger): (State, State, Trigger),
        (failure_rate, slow_rate, calls): (f64, f64, u32),
        function: &str,
        by: Option<String>,
    ) -> Entry {
        Entry {
            at_ms,
            from,
            to,
            trigger,
            failure_rate,
            slow_rate,
            calls,
            function: function.to_owned(),
            by,
        }
    }
}

/// One operator action.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Act {
    pub(super) at_ms: u64,
    pub(super) action: &'static str,
    pub(super) by: String,
}

/// A key's history.
#[derive(Debug, Default)]
pub(super) struct KeyHistory {
    pub(super) samples: VecDeque<Sample>,
    pub(super) transitions: VecDeque<Entry>,
    pub(super) actions: VecDeque<Act>,
    pub(super) opened: Option<Entry>,
    /// The rejected count and the registry-independent time (ms) of the last sample.
    last_rejected: Option<(u64, u64)>,
}

/// Every tracked key's history, bounded in keys and in entries per key.
#[derive(Debug)]
pub(super) struct History {
    pub(super) keys: HashMap<String, KeyHistory>,
    max_keys: usize,
    samples: usize,
    kept: usize,
}

fn push<T>(ring: &mut VecDeque<T>, item: T, len: usize) {
    if ring.len() == len {
        ring.pop_front();
    }
    ring.push_back(item);
}

impl History {
    pub(super) fn new(max_keys: usize, samples: usize, kept: usize) -> Self {
        History {
            keys: HashMap::new(),
            max_keys,
            samples,
            kept,
        }
    }

    /// The history of `key`, created while fewer than `max_keys` keys are tracked.
    fn entry(&mut self, key: &str) -> Option<&mut KeyHistory> {
        if !self.keys.contains_key(key) {
            if self.keys.len() >= self.max_keys {
                return None;
            }
            self.keys.insert(key.to_owned(), KeyHistory::default());
        }
        self.keys.get_mut(key)
    }

    /// Records a transition. A trip also adds a sample of the window that decided it, taken
    /// just before the circuit opened (an open circuit's window is empty: without it the rates'
    /// history would never show what tripped).
    pub(super) fn transition(&mut self, key: &str, entry: Entry) {
        let (kept, samples) = (self.kept, self.samples);
        if let Some(h) = self.entry(key) {
            if matches!(entry.to, State::Open | State::ForcedOpen) {
                h.opened = Some(entry.clone());
            }
            let tripped = matches!(
                entry.trigger,
                Trigger::FailureRate
                    | Trigger::SlowRate
                    | Trigger::Consecutive
                    | Trigger::FailureCount
                    | Trigger::OutlierSuccessRate
                    | Trigger::OutlierFailurePercentage
                    | Trigger::HereOnly
                    | Trigger::Quorum
            );
            if tripped {
                let before = Sample {
                    at_ms: entry.at_ms,
                    state: entry.from,
                    failure_rate: entry.failure_rate,
                    slow_rate: entry.slow_rate,
                    calls: h.samples.back().map_or(0.0, |s| s.calls),
                    rejected_per_s: h.samples.back().map_or(0.0, |s| s.rejected_per_s),
                };
                push(&mut h.samples, before, samples);
            }
            push(&mut h.transitions, entry, kept);
        }
    }

    pub(super) fn action(&mut self, key: &str, act: Act) {
        let kept = self.kept;
        if let Some(h) = self.entry(key) {
            push(&mut h.actions, act, kept);
        }
    }

    /// Adds a sample of each snapshot taken at `at_ms`.
    pub(super) fn sample(&mut self, snapshots: &[&Snapshot], at_ms: u64) {
        let len = self.samples;
        for s in snapshots {
            let Some(h) = self.entry(s.key.as_str()) else {
                continue;
            };
            let rejected_per_s = match h.last_rejected {
                Some((before, then)) if at_ms > then => {
                    s.rejected.saturating_sub(before) as f64 * 1000.0 / (at_ms - then) as f64
                }
                _ => 0.0,
            };
            h.last_rejected = Some((s.rejected, at_ms));
            let calls = match s.policy.settings().window {
                Window::Time(span) if !span.is_zero() => f64::from(s.calls) / span.as_secs_f64(),
                _ => f64::from(s.calls),
            };
            let sample = Sample {
                at_ms,
                state: s.state,
                failure_rate: s.failure_rate,
                slow_rate: s.slow_rate,
                calls,
                rejected_per_s,
            };
            push(&mut h.samples, sample, len);
        }
    }
}

/// The rule an opening transition names (`consecutive`, `failure_rate`, …), as the policy field
/// that decided.
pub(super) fn rule(trigger: Trigger) -> &'static str {
    match trigger {
        Trigger::ProbeFailed => "half_open",
        Trigger::Operator => "operator",
        other => other.as_str(),
    }
}

/// Why a circuit opened, in one sentence naming the rule, its threshold and the window that
/// decided (`failures`: the deciding window's failures, when known).
pub(super) fn opened_text(entry: &Entry, failures: Option<u32>, policy: &Policy) -> String {
    let window = match failures {
        Some(f) => format!(
            "the window held {} calls, {f} failed ({:.0}%)",
            entry.calls, entry.failure_rate
        ),
        None => format!(
            "the window held {} calls, {:.0}% failed",
            entry.calls, entry.failure_rate
        ),
    };
    let quorum = || {
        policy
            .settings()
            .quorum
            .map_or_else(String::new, |q| q.to_string())
    };
    match entry.trigger {
        Trigger::Consecutive => format!(
            "{} counted failures in a row (`consecutive` = {0}); {window}",
            policy.settings().consecutive.unwrap_or(0)
        ),
        Trigger::FailureRate => format!(
            "{:.0}% of {} calls failed (`failure_rate` = {}%, `min_calls` = {})",
            entry.failure_rate,
            entry.calls,
            policy.settings().failure_rate.unwrap_or(0),
            policy.settings().min_calls
        ),
        Trigger::SlowRate => format!(
            "{:.0}% of {} calls were slow (`slow_rate` = {}%); {window}",
            entry.slow_rate,
            entry.calls,
            policy.settings().slow_rate
        ),
        Trigger::FailureCount => format!(
            "{} counted failures in the window (`failure_count` = {0}); {window}",
            policy.settings().failure_count.unwrap_or(0)
        ),
        Trigger::OutlierSuccessRate => format!(
            "ejected from its group `{}`: its success rate was below the group's mean by more \
             than the group's standard deviations; {window}",
            policy.settings().group.unwrap_or("")
        ),
        Trigger::OutlierFailurePercentage => format!(
            "ejected from its group `{}`: its failures were above the group's \
             `failure_percentage`; {window}",
            policy.settings().group.unwrap_or("")
        ),
        Trigger::ProbeFailed => "a recovery probe failed; the wait starts again".to_owned(),
        Trigger::Operator => match &entry.by {
            Some(by) => format!("forced open by {by}"),
            None => "forced open by an operator".to_owned(),
        },
        Trigger::HereOnly => format!(
            "open here only: this replica's own calls reached the rules while fewer replicas than \
             `quorum` = {} failed, so the others keep calling; {window}",
            quorum()
        ),
        Trigger::Quorum => format!(
            "`quorum` = {} replicas opened alone: the shared circuit opened for every replica",
            quorum()
        ),
        other => format!("`{other}`; {window}"),
    }
}
