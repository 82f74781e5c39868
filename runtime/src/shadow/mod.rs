//! Shadow policies: candidates that judge a key's live outcomes beside the policy in force,
//! without acting (see [`guide::shadows`](crate::guide::shadows)).
//!
//! A key's policy names them ([`Policy::shadow`](crate::Policy::shadow), the attribute's
//! `shadow`, the configuration's `shadow`); its breaker holds one [`Shadows`] (only then: a key
//! without shadows carries nothing of this module and its calls take the fast paths). Each
//! settled call is judged by every shadow in `judge.rs`: would it have been admitted, and what
//! would its outcome have done. Transitions become `shadow_*` events and `fusebox_shadow_policy_*`
//! metrics here; [`ShadowSnapshot`] is what a breaker's snapshot shows of each.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::observe::record::CallOutcome;
use crate::policy::{Policy, slow_nanos};
use crate::state::{State, Verdict};

mod judge;
#[cfg(test)]
mod tests;

use judge::{Judge, Moved};

/// What a shadow policy would have done so far: an entry of
/// [`Snapshot::shadows`](crate::Snapshot::shadows).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ShadowSnapshot {
    /// The shadow's name (`shadow` when the text names none).
    pub name: &'static str,
    /// Its policy.
    pub policy: Policy,
    /// The state it would be in. As with a breaker's state, an open shadow whose wait is over
    /// stays open until the next call settles.
    pub state: State,
    /// Outcomes in its window.
    pub calls: u32,
    /// Failures among them.
    pub failures: u32,
    /// `failures / calls` in percent (0 when empty).
    pub failure_rate: f64,
    /// Times it would have opened (from closed).
    pub opened: u64,
    /// How long it would have been open in all: from each opening to the closing that ended it,
    /// the ongoing episode up to now included.
    pub open_for: Duration,
    /// When open: time until it would admit its next probe.
    pub retry_after: Option<Duration>,
    /// Calls it would have rejected.
    pub rejected: u64,
    /// Calls it would have let through.
    pub admitted: u64,
}

/// One shadow: its name, its policy and its judge.
struct Shadow {
    name: &'static str,
    policy: Policy,
    judge: Mutex<Judge>,
    #[cfg(feature = "metrics")]
    meters: meters::ShadowMeters,
}

impl Shadow {
    fn judge(&self) -> MutexGuard<'_, Judge> {
        self.judge.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A key's shadows, shared by the breakers that replace one another on reconfiguration while the
/// shadow text stays the same.
pub(crate) struct Shadows {
    /// The text they were read from (the policy's `shadow`).
    text: &'static str,
    list: Box<[Shadow]>,
}

impl Shadows {
    /// The shadows `policy` names for `key`, or `None` without any (or with a text validation
    /// would refuse: a policy the registry runs was validated).
    pub(crate) fn of(key: &str, policy: &Policy) -> Option<Shadows> {
        let text = policy.settings().shadow?;
        let read = fusebox_policy::text::shadows_of_text(text).ok()?;
        let list = read
            .into_iter()
            .map(|(name, policy)| Shadow {
                name,
                policy,
                judge: Mutex::new(Judge::new(&policy)),
                #[cfg(feature = "metrics")]
                meters: meters::ShadowMeters::new(key, name),
            })
            .collect();
        #[cfg(not(feature = "metrics"))]
        let _ = key;
        Some(Shadows { text, list })
    }

    /// True when these shadows were read from `policy`'s text (a successor keeps them).
    pub(crate) fn same_text(&self, policy: &Policy) -> bool {
        policy.settings().shadow == Some(self.text)
    }

    /// Judges one call of `key` that settled at `now` with `verdict`; `took` is how long it ran,
    /// when the breaker knows (a timed policy, or outcome events wanted).
    #[cold]
    pub(crate) fn settle(&self, key: &str, now: u64, verdict: Verdict, took: Option<u64>) {
        for shadow in &*self.list {
            let slow = match (shadow.policy.settings().slow, took) {
                (Some(_), Some(took)) => took > slow_nanos(&shadow.policy),
                _ => false,
            };
            let settled = shadow.judge().settle(&shadow.policy, now, verdict, slow);
            if crate::observe::record::enabled() {
                let outcome = match (settled.admitted, verdict) {
                    (false, _) => CallOutcome::Rejected(crate::error::Reason::Open),
                    (true, Verdict::Success) => CallOutcome::Success,
                    (true, Verdict::Failure) => CallOutcome::Failure,
                    (true, Verdict::Ignored) => CallOutcome::Ignored,
                };
                crate::observe::record::emit_shadow(key, shadow.name, now, outcome);
            }
            #[cfg(feature = "metrics")]
            shadow.meters.settled(settled.admitted);
            for moved in settled.moves {
                announce(key, shadow, &moved);
            }
        }
    }

    /// What each shadow would have done so far, in the order the text names them.
    pub(crate) fn snapshots(&self, now: u64) -> Vec<ShadowSnapshot> {
        self.list
            .iter()
            .map(|shadow| {
                let view = shadow.judge().view(now);
                ShadowSnapshot {
                    name: shadow.name,
                    policy: shadow.policy,
                    state: view.state,
                    calls: view.counts.calls,
                    failures: view.counts.failures,
                    failure_rate: view.counts.failure_rate(),
                    opened: view.totals.opened,
                    open_for: Duration::from_nanos(view.open_nanos),
                    retry_after: view.retry_after_nanos.map(Duration::from_nanos),
                    rejected: view.totals.rejected,
                    admitted: view.totals.admitted,
                }
            })
            .collect()
    }
}

/// The event and metrics of a transition a shadow would have made: `shadow_opened`,
/// `shadow_half_open`, `shadow_closed` (INFO: nothing happened to the calls), with the key, the
/// shadow's name, the states, the rule and the window; a closing also says how long the episode
/// lasted and how many calls it would have rejected.
#[cold]
fn announce(key: &str, shadow: &Shadow, moved: &Moved) {
    let (from, to) = (moved.from.as_str(), moved.to.as_str());
    let (trigger, calls) = (moved.trigger.as_str(), moved.counts.calls);
    let failure_rate = moved.counts.failure_rate();
    let name = shadow.name;
    let _ = std::panic::catch_unwind(|| match moved.to {
        State::Open => tracing::info!(
            target: "fusebox",
            event = "shadow_opened",
            key, shadow = name, from, to, trigger, failure_rate, calls,
            "shadow_opened: the shadow policy `{name}` of `{key}` would have opened the circuit"
        ),
        State::HalfOpen => tracing::info!(
            target: "fusebox",
            event = "shadow_half_open",
            key, shadow = name, from, to, trigger, failure_rate, calls,
            "shadow_half_open"
        ),
        _ => {
            let (lasted, rejected) = moved.episode.unwrap_or((0, 0));
            let open_secs = Duration::from_nanos(lasted).as_secs_f64();
            tracing::info!(
                target: "fusebox",
                event = "shadow_closed",
                key, shadow = name, from, to, trigger, failure_rate, calls, open_secs, rejected,
                "shadow_closed: the shadow policy `{name}` of `{key}` would have been open \
                 {open_secs} s and rejected {rejected} calls"
            )
        }
    });
    #[cfg(feature = "metrics")]
    shadow.meters.moved(moved);
}

/// A shadow text kept for the process's life: configuration reads texts at run time, and a
/// policy holds a `&'static str`. Each distinct text is kept once.
#[cfg(feature = "config")]
pub(crate) fn keep_text(text: &str) -> &'static str {
    static TEXTS: Mutex<std::collections::BTreeSet<&'static str>> =
        Mutex::new(std::collections::BTreeSet::new());
    let mut texts = TEXTS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(kept) = texts.get(text) {
        return kept;
    }
    let kept: &'static str = Box::leak(text.to_owned().into_boxed_str());
    texts.insert(kept);
    kept
}

#[cfg(feature = "metrics")]
mod meters {
    //! A shadow's instruments, registered when its breaker is created.

    use super::Moved;
    use crate::observe::metrics::{
        SHADOW_POLICY_ADMITTED_TOTAL, SHADOW_POLICY_OPEN_MS_TOTAL, SHADOW_POLICY_REJECTED_TOTAL,
        SHADOW_POLICY_STATE, state_value,
    };

    pub(super) struct ShadowMeters {
        key: String,
        name: &'static str,
        rejected: metrics::Counter,
        admitted: metrics::Counter,
        state: metrics::Gauge,
        open_ms: metrics::Counter,
    }

    impl ShadowMeters {
        pub(super) fn new(key: &str, name: &'static str) -> ShadowMeters {
            let labels = [("key", key.to_owned()), ("shadow", name.to_owned())];
            let state = metrics::gauge!(SHADOW_POLICY_STATE, &labels);
            state.set(0.0);
            ShadowMeters {
                key: key.to_owned(),
                name,
                rejected: metrics::counter!(SHADOW_POLICY_REJECTED_TOTAL, &labels),
                admitted: metrics::counter!(SHADOW_POLICY_ADMITTED_TOTAL, &labels),
                state,
                open_ms: metrics::counter!(SHADOW_POLICY_OPEN_MS_TOTAL, &labels),
            }
        }

        pub(super) fn settled(&self, admitted: bool) {
            match admitted {
                true => self.admitted.increment(1),
                false => self.rejected.increment(1),
            }
        }

        pub(super) fn moved(&self, moved: &Moved) {
            self.state.set(state_value(moved.to));
            metrics::counter!(
                crate::observe::metrics::SHADOW_POLICY_TRANSITIONS_TOTAL,
                "key" => self.key.clone(),
                "shadow" => self.name,
                "from" => moved.from.as_str(),
                "to" => moved.to.as_str(),
            )
            .increment(1);
            if let Some((lasted, _)) = moved.episode {
                self.open_ms.increment(lasted / 1_000_000);
            }
        }
    }
}
