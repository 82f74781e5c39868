//! The JSON of a card (one breaker), of a group, of `GET /breakers` and of a board (the cards
//! with their history, and the groups), built from snapshots and the router's history.

use serde_json::{Value, json};

use crate::config::AdminConfig;
use crate::history::{Entry, History, KeyHistory, opened_text, rule};
use fusebox::GroupSnapshot;
use fusebox::{Registry, State};
use fusebox::{Sharing, Snapshot};

fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Why the circuit last opened, as the router's hook recorded it, or, on a shared key another
/// replica opened, as the snapshot's last transition names it (`null` before either).
fn opened(s: &Snapshot, history: Option<&KeyHistory>) -> Value {
    let last = s.last_transition.as_ref();
    let told = last
        .filter(|t| t.replica.is_some() && matches!(t.to, State::Open | State::ForcedOpen))
        .map(Entry::of_snapshot);
    let Some(entry) = history.and_then(|h| h.opened.as_ref()).or(told.as_ref()) else {
        return Value::Null;
    };
    // The snapshot's last transition carries the deciding window's failures (and the replica
    // that committed it, on a shared key) when it is this one.
    let last =
        last.filter(|t| t.to == entry.to && t.trigger == entry.trigger && t.calls == entry.calls);
    let failures = last.map(|t| t.failures);
    json!({
        "rule": rule(entry.trigger),
        "trigger": entry.trigger.as_str(),
        "text": opened_text(entry, failures, &s.policy),
        "calls": entry.calls,
        "failures": failures,
        "failure_rate": entry.failure_rate,
        "slow_rate": entry.slow_rate,
        "function": entry.function,
        "at_ms": entry.at_ms,
        "by": entry.by,
        "replica": last.and_then(|t| t.replica.as_deref()),
    })
}

/// True when `s` is a group's member that is ejected now: opened by one of the group's relative
/// rules and open within that wait (what [`Group::is_ejected`](fusebox::Group::is_ejected) and the
/// group's `ejected` say).
fn ejected(s: &Snapshot) -> bool {
    s.policy.settings().group.is_some()
        && s.state == State::Open
        && s.retry_after.is_some_and(|wait| !wait.is_zero())
        && s.last_transition.as_ref().is_some_and(|t| {
            t.to == State::Open
                && matches!(
                    t.trigger,
                    fusebox::Trigger::OutlierSuccessRate
                        | fusebox::Trigger::OutlierFailurePercentage
                )
        })
}

/// A group of the registry: its counts from `g`, and a row for each of its members among the
/// board's keys `shown` (by key), marked when ejected.
pub(super) fn group(g: &GroupSnapshot, shown: &[&Snapshot]) -> Value {
    let mut rows: Vec<&Snapshot> = shown
        .iter()
        .copied()
        .filter(|s| s.policy.settings().group == Some(g.name))
        .collect();
    rows.sort_by(|a, b| a.key.as_str().cmp(b.key.as_str()));
    let rows: Vec<Value> = rows
        .into_iter()
        .map(|s| {
            json!({
                "key": s.key.as_str(),
                "state": s.state.as_str(),
                "ejected": ejected(s),
            })
        })
        .collect();
    json!({
        "name": g.name,
        "members": g.members,
        "ejected": g.ejected,
        "open": g.open,
        "max_open": g.max_open,
        "max_ejection": g.policy.settings().max_ejection,
        "in_panic": g.in_panic,
        "rejected": g.rejected,
        "ejections": g.ejections,
        "keys": rows,
    })
}

/// The fault injected into `key` (feature `chaos`): its kind and what it does to which calls
/// (`failures on 10 % of calls`), or `null`.
fn injection(registry: &Registry, key: &str) -> Value {
    #[cfg(feature = "chaos")]
    if let Some(fault) = registry.chaos().fault(key) {
        return json!({"fault": fault.kind().as_str(), "text": fault.to_string()});
    }
    let _ = (registry, key);
    Value::Null
}

/// The card of one breaker of `registry`.
pub(super) fn card(
    s: &Snapshot,
    history: Option<&KeyHistory>,
    config: &AdminConfig,
    registry: &Registry,
) -> Value {
    let key = s.key.as_str();
    let transitions: Vec<Value> = history.map_or(Vec::new(), |h| {
        h.transitions
            .iter()
            .map(|t| {
                json!({
                    "at_ms": t.at_ms,
                    "from": t.from.as_str(),
                    "to": t.to.as_str(),
                    "trigger": t.trigger.as_str(),
                    "failure_rate": t.failure_rate,
                    "slow_rate": t.slow_rate,
                    "calls": t.calls,
                    "function": t.function,
                    "by": t.by,
                })
            })
            .collect()
    });
    let actions: Vec<Value> = history.map_or(Vec::new(), |h| {
        h.actions
            .iter()
            .map(|a| json!({"at_ms": a.at_ms, "action": a.action, "by": a.by}))
            .collect()
    });
    json!({
        "key": key,
        "state": s.state.as_str(),
        "critical": config.critical.contains(key),
        "group": config.groups.get(key),
        "member_of": s.policy.settings().group,
        "ejected": ejected(s),
        "metrics_only": s.metrics_only,
        "calls": s.calls,
        "failures": s.failures,
        "slow": s.slow,
        "failure_rate": s.failure_rate,
        "slow_rate": s.slow_rate,
        "consecutive_failures": s.consecutive_failures,
        "rejected": s.rejected,
        "retry_after_ms": s.retry_after.map(ms),
        "probes_in_flight": s.probes_in_flight,
        "phase": s.phase,
        "reopens": s.reopens,
        "in_flight": s.in_flight,
        "concurrency_limit": s.concurrency_limit,
        "open_for_ms": ms(s.policy.settings().open_for),
        "sharing": match s.sharing() {
            Sharing::Shared => "shared",
            Sharing::Unshareable => "unshareable",
            _ => "local",
        },
        "shared": s.shared_window().map(|w| json!({
            "calls": w.calls(),
            "failures": w.failures(),
            "failure_rate": w.failure_rate(),
            "age_ms": ms(w.age()),
        })),
        "replica_calls": s.replica_calls(),
        "replica_failures": s.replica_failures(),
        "degraded": s.degraded(),
        "here_only": s.open_here_only(),
        "last_transition": s.last_transition.as_ref().map(|t| json!({
            "from": t.from.as_str(),
            "to": t.to.as_str(),
            "trigger": t.trigger.as_str(),
            "elapsed_ms": ms(t.elapsed),
            "failure_rate": t.failure_rate,
            "slow_rate": t.slow_rate,
            "calls": t.calls,
            "failures": t.failures,
            "slow": t.slow,
            "function": t.function,
            "replica": t.replica,
        })),
        "opened": opened(s, history),
        "chaos": injection(registry, key),
        "shadows": s.shadows.iter().map(|w| json!({
            "name": w.name,
            "state": w.state.as_str(),
            "calls": w.calls,
            "failure_rate": w.failure_rate,
            "opened": w.opened,
            "open_for_ms": ms(w.open_for),
            "retry_after_ms": w.retry_after.map(ms),
            "rejected": w.rejected,
            "admitted": w.admitted,
        })).collect::<Vec<Value>>(),
        "transitions": transitions,
        "actions": actions,
    })
}

/// The history of a card on a board: one array per series, oldest first.
fn series(h: Option<&KeyHistory>) -> Value {
    let Some(h) = h else {
        return json!({"at_ms": [], "state": [], "failure_rate": [], "slow_rate": [], "calls": [], "rejected_per_s": []});
    };
    let round = |v: f64| (v * 10.0).round() / 10.0;
    let column = |f: &dyn Fn(&crate::history::Sample) -> Value| -> Value {
        Value::Array(h.samples.iter().map(f).collect())
    };
    json!({
        "at_ms": column(&|s| json!(s.at_ms)),
        "state": column(&|s| json!(s.state.as_str())),
        "failure_rate": column(&|s| json!(round(s.failure_rate))),
        "slow_rate": column(&|s| json!(round(s.slow_rate))),
        "calls": column(&|s| json!(round(s.calls))),
        "rejected_per_s": column(&|s| json!(round(s.rejected_per_s))),
    })
}

/// `GET /breakers`: every card, and every group of the registry.
pub(super) fn breakers(
    snapshots: &[Snapshot],
    groups: &[GroupSnapshot],
    history: &History,
    config: &AdminConfig,
    registry: &Registry,
) -> Value {
    let cards: Vec<Value> = snapshots
        .iter()
        .map(|s| card(s, history.keys.get(s.key.as_str()), config, registry))
        .collect();
    let all: Vec<&Snapshot> = snapshots.iter().collect();
    let groups: Vec<Value> = groups.iter().map(|g| group(g, &all)).collect();
    json!({"breakers": cards, "groups": groups, "instance": config.instance})
}

/// The keys a board shows, in its order: critical keys first, then by group, then by key (a
/// stable sort of the registry's order), the first `max_keys` of them.
pub(super) fn shown<'s>(snapshots: &'s [Snapshot], config: &AdminConfig) -> Vec<&'s Snapshot> {
    let mut order: Vec<&Snapshot> = snapshots.iter().collect();
    order.sort_by_key(|s| {
        let key = s.key.as_str();
        (!config.critical.contains(key), config.groups.get(key))
    });
    order.truncate(config.max_keys);
    order
}

/// A board: the cards of the `shown` keys with their history, and the registry's `groups` (each
/// with rows for its members among the `shown` keys); `all`: the registry's key count.
pub(super) fn board(
    shown: &[&Snapshot],
    all: usize,
    groups: &[GroupSnapshot],
    history: &History,
    config: &AdminConfig,
    registry: &Registry,
) -> String {
    let cards: Vec<Value> = shown
        .iter()
        .map(|s| {
            let h = history.keys.get(s.key.as_str());
            let mut card = card(s, h, config, registry);
            card["history"] = series(h);
            card
        })
        .collect();
    let groups: Vec<Value> = groups.iter().map(|g| group(g, shown)).collect();
    json!({
        "breakers": cards,
        "groups": groups,
        "omitted": all.saturating_sub(shown.len()),
        "instance": config.instance,
        "sample_every_ms": ms(config.sample_every),
    })
    .to_string()
}
