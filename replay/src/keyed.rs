//! Replaying a trace with many keys: one breaker per key in one registry, as the registry makes
//! one per dynamic key (`key = host`), and the groups a candidate puts keys in.
//!
//! Every call is admitted and reported on its own key's breaker, all of them in one
//! `Registry::with_clock(FakeClock)`, in time order across keys. A candidate with a group
//! ([`crate::policy::GroupSpec`]) has its settings set with `Registry::configure_group`, and the
//! keys it matches run the candidate's policy with `Policy::group`: the ejections, the cap on
//! open members (the panic threshold) and the ejection backoff are the runtime's own code, on
//! the trace's clock. Each key is scored against its own outages (found in its own calls), and
//! the report gives each key's row, the totals, and per group its ejections, the trips its cap
//! kept closed and its panic episodes (the runtime's `group_panic` and `group_panic_over`
//! events, captured while the candidate replays).

use std::sync::{Arc, Mutex};

use fusebox::clock::{Clock, FakeClock};
use tracing_subscriber::layer::SubscriberExt as _;

use crate::policy::Candidate;
use crate::replay::{Outage, OutageRule, Run, Span, find_outages_in, replay_keys_in, tripped};
use crate::trace::{Event, KeyedTrace};

/// What one candidate did to one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRun {
    /// The group's name.
    pub name: &'static str,
    /// Its members: the keys of the trace that joined it.
    pub members: usize,
    /// Ejections by its relative rules.
    pub ejections: u64,
    /// Trips of members that the cap (`max_ejection`) kept closed.
    pub kept_closed: u64,
    /// Panic episodes: `group_panic` events (one per episode).
    pub panics: u64,
    /// Time in panic: from each `group_panic` to its `group_panic_over` (or the trace's end).
    pub panic_ns: u64,
    /// The most members open (or half-open) at once.
    pub most_open: u64,
}

/// What one candidate did on a trace with many keys.
#[derive(Debug, Clone)]
pub struct KeyedRun {
    /// The candidate's name.
    pub name: String,
    /// One run per key, in the order of [`KeyedTrace::keys`], each named by its key.
    pub keys: Vec<Run>,
    /// The sums of the keys' runs, named by the candidate: its `detection` lists every key's
    /// outages, key after key (as [`KeyedOutages::all`] does).
    pub total: Run,
    /// The candidate's group, when it has one.
    pub group: Option<GroupRun>,
}

/// The outages of each key of a trace, found in each key's own calls.
#[derive(Debug, Clone)]
pub struct KeyedOutages {
    /// Per key, in the order of [`KeyedTrace::keys`].
    pub per_key: Vec<Vec<Outage>>,
    /// Per key, its [`Span`].
    pub spans: Vec<Span>,
}

impl KeyedOutages {
    /// Every key's outages, key after key.
    #[must_use]
    pub fn all(&self) -> Vec<Outage> {
        self.per_key.iter().flatten().copied().collect()
    }
}

/// Finds each key's outages with `rule`, in its own calls (sorted by key for the time it takes:
/// a copy of the calls, 16 bytes each, while it runs).
#[must_use]
pub fn find_keyed_outages(trace: &KeyedTrace, rule: OutageRule) -> KeyedOutages {
    let mut spans = vec![Span::default(); trace.keys.len()];
    let mut by_key: Vec<Vec<Event>> = vec![Vec::new(); trace.keys.len()];
    for c in &trace.calls {
        spans[c.key as usize].push(c.event);
        by_key[c.key as usize].push(c.event);
    }
    let per_key = by_key
        .iter()
        .zip(&spans)
        .map(|(events, span)| find_outages_in(|| events.iter().copied(), span, rule))
        .collect();
    KeyedOutages { per_key, spans }
}

/// The `group_panic` episodes of a replay: (group, start, end) of each.
type Episodes = Arc<Mutex<Vec<(String, u64, Option<u64>)>>>;

/// A `tracing` layer that keeps the runtime's group events (target `fusebox`, `INFO` and
/// above: `group_panic`, `group_panic_over`), timed on the replay's clock.
struct GroupEvents {
    clock: FakeClock,
    episodes: Episodes,
}

/// The `event` and `group` fields of an event.
#[derive(Default)]
struct GroupFields {
    event: Option<String>,
    group: Option<String>,
}

impl tracing::field::Visit for GroupFields {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        match field.name() {
            "event" => self.event = Some(value.to_owned()),
            "group" => self.group = Some(value.to_owned()),
            _ => {}
        }
    }

    fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
}

/// The events [`GroupEvents`] reads: the runtime's, at `INFO` and above.
fn wanted(metadata: &tracing::Metadata<'_>) -> bool {
    metadata.is_event()
        && metadata.target() == "fusebox"
        && *metadata.level() <= tracing::Level::INFO
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for GroupEvents {
    fn register_callsite(
        &self,
        metadata: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        if wanted(metadata) {
            tracing::subscriber::Interest::always()
        } else {
            tracing::subscriber::Interest::never()
        }
    }

    fn enabled(
        &self,
        metadata: &tracing::Metadata<'_>,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        wanted(metadata)
    }

    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let mut fields = GroupFields::default();
        event.record(&mut fields);
        let (Some(name), Some(group)) = (fields.event, fields.group) else {
            return;
        };
        let now = self.clock.now_nanos();
        let mut episodes = self.episodes.lock().unwrap_or_else(|p| p.into_inner());
        match name.as_str() {
            "group_panic" => episodes.push((group, now, None)),
            "group_panic_over" => {
                if let Some(open) = episodes
                    .iter_mut()
                    .rev()
                    .find(|(g, _, end)| *g == group && end.is_none())
                {
                    open.2 = Some(now);
                }
            }
            _ => {}
        }
    }
}

/// Replays `trace` (every key) through `candidate`, each key scored against its own outages.
///
/// For a candidate with a group, the runtime's group events are captured by a `tracing`
/// subscriber set on this thread for the replay, so replays on other threads are not mixed in.
///
/// # Panics
///
/// Only if `candidate.policy` is invalid: candidates are validated when parsed.
#[must_use]
pub fn replay_keys(trace: &KeyedTrace, candidate: &Candidate, outages: &KeyedOutages) -> KeyedRun {
    let clock = FakeClock::new();
    let episodes = Episodes::default();
    let replay = || {
        replay_keys_in(
            trace.calls.iter().copied(),
            &trace.keys,
            &outages.spans,
            candidate,
            &outages.per_key,
            clock.clone(),
        )
    };
    let (runs, registry) = if candidate.group.is_some() {
        let layer = GroupEvents {
            clock: clock.clone(),
            episodes: episodes.clone(),
        };
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), replay)
    } else {
        replay()
    };
    let end_ns = outages.spans.iter().map(|s| s.last_ns).max().unwrap_or(0);
    let group = candidate.group.as_ref().map(|spec| {
        let snapshot = registry.group(spec.name).map(|g| g.snapshot());
        let episodes = episodes.lock().unwrap_or_else(|p| p.into_inner());
        let episodes: Vec<_> = episodes.iter().filter(|(g, _, _)| g == spec.name).collect();
        let members: Vec<usize> = (0..trace.keys.len())
            .filter(|&k| spec.keys.matches(&trace.keys[k]))
            .collect();
        GroupRun {
            name: spec.name,
            members: members.len(),
            ejections: snapshot.as_ref().map_or(0, |s| s.ejections),
            kept_closed: snapshot.as_ref().map_or(0, |s| s.rejected),
            panics: episodes.len() as u64,
            panic_ns: episodes
                .iter()
                .map(|(_, start, end)| end.unwrap_or(end_ns).saturating_sub(*start))
                .sum(),
            most_open: most_open(members.iter().map(|&k| &runs[k])),
        }
    });
    let total = totals(&candidate.name, &runs);
    KeyedRun {
        name: candidate.name.clone(),
        keys: runs,
        total,
        group,
    }
}

/// The most of `runs`' keys open (or half-open) at once, from their changes.
fn most_open<'a>(runs: impl Iterator<Item = &'a Run>) -> u64 {
    let mut steps: Vec<(u64, i64)> = Vec::new();
    for run in runs {
        let mut was = false;
        for c in &run.changes {
            let is = tripped(c.to);
            if is != was {
                steps.push((c.at_ns, if is { 1 } else { -1 }));
                was = is;
            }
        }
    }
    // At equal times, closings first: a member closing as another opens is not two open.
    steps.sort_unstable();
    let (mut open, mut most) = (0i64, 0i64);
    for (_, step) in steps {
        open += step;
        most = most.max(open);
    }
    most as u64
}

/// The sums of `runs`, named `name`; its detection is every key's, key after key.
fn totals(name: &str, runs: &[Run]) -> Run {
    let mut total = Run::empty(name);
    for r in runs {
        total.detection.extend(&r.detection);
        total.wrongly_rejected += r.wrongly_rejected;
        for (t, w) in total.wrong_by_slice.iter_mut().zip(&r.wrong_by_slice) {
            *t += w;
        }
        total.rejected += r.rejected;
        total.failures_let_through += r.failures_let_through;
        total.openings += r.openings;
        total.flaps += r.flaps;
        total.false_openings += r.false_openings;
        total.open_ns += r.open_ns;
        total.probes += r.probes;
        total.assumed += r.assumed;
        total.retries += r.retries;
        total.retries_rejected += r.retries_rejected;
        total.ejections += r.ejections;
        total.ejected_ns += r.ejected_ns;
        total.rejected_by_ejection += r.rejected_by_ejection;
    }
    total
}
