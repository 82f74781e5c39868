//! The Lua script `breaker.lua` from the Rust side: its arguments' encodings, one bounded call
//! (`EVALSHA`, reloaded on `NOSCRIPT` by the `redis` crate), its answers read into [`Answer`]s
//! (with the events of a store that stops or starts answering), and an answer applied to the
//! local breaker, which sync calls and degraded calls run on (`learn`, `apply`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::link::{Client, Link};
use crate::breaker::{Core, FnName};
use crate::observe::Trigger;
use crate::state::State;
use crate::window::Counts;

/// Marks a time window in the script's window argument (plus the slice in milliseconds), and
/// progressive recovery in its probes argument (plus `phases << 20` and `min_passes`).
pub(super) const TIME_WINDOW: u64 = 1 << 40;

/// The slice of a time window (a tenth of its span) in whole milliseconds; 0 when it is not a
/// whole number of milliseconds (such a window stays local).
pub(super) fn time_slice_ms(span: Duration) -> u64 {
    let slice = span.as_nanos() / u128::from(crate::policy::TIME_BUCKETS);
    if slice.is_multiple_of(1_000_000) {
        u64::try_from(slice / 1_000_000).unwrap_or(0)
    } else {
        0
    }
}

/// One answer of the script.
#[derive(Debug, Clone, Copy)]
pub(super) struct Answer {
    pub(super) code: i64,
    pub(super) state: i64,
    pub(super) generation: u64,
    pub(super) remaining_ms: u64,
    pub(super) committed_from: i64,
    pub(super) calls: i64,
    pub(super) failures: i64,
    /// The script's code of the rule that committed the transition (0: no transition).
    pub(super) rule: i64,
    /// Slow calls in the window that decided the transition.
    pub(super) slow: i64,
    /// The current window after this call, (calls, failures), when the script read it.
    pub(super) window: Option<(u32, u32)>,
}

/// The trigger of the script's rule code (`rule` in `breaker.lua`'s answer); `None` for a code
/// the script does not send with a transition.
pub(super) fn trigger_of(rule: i64) -> Option<Trigger> {
    Some(match rule {
        1 => Trigger::FailureRate,
        2 => Trigger::SlowRate,
        3 => Trigger::Consecutive,
        4 => Trigger::FailureCount,
        5 => Trigger::OpenWaitOver,
        6 => Trigger::LeaseExpired,
        7 => Trigger::ProbeFailed,
        8 => Trigger::ProbesPassed,
        9 => Trigger::PhasePassed,
        10 => Trigger::Operator,
        _ => return None,
    })
}

pub(super) fn state_of(code: i64) -> State {
    match code {
        1 => State::Open,
        2 => State::HalfOpen,
        3 => State::ForcedOpen,
        4 => State::Disabled,
        _ => State::Closed,
    }
}

/// Runs the script for `link`, bounded by the store's timeout.
pub(super) async fn call(
    client: &Client,
    link: &Link,
    op: &str,
    extra: &[u64],
) -> Result<Answer, ()> {
    let mut invocation = client.script.key(&link.hash);
    invocation.arg(op);
    match &client.time {
        Some(clock) => invocation.arg(clock.now_nanos() / 1_000_000),
        None => invocation.arg(""),
    };
    for value in link.args.iter().chain(extra) {
        invocation.arg(*value);
    }
    let mut conn = client.conn.clone();
    let result: Result<redis::RedisResult<Vec<i64>>, _> =
        tokio::time::timeout(client.timeout, invocation.invoke_async(&mut conn)).await;
    let values = match result {
        Ok(Ok(values)) => values,
        Ok(Err(error)) => {
            degrade_event(client, link, &error.to_string());
            return Err(());
        }
        Err(_) => {
            degrade_event(
                client,
                link,
                &format!("no answer within {:?}", client.timeout),
            );
            return Err(());
        }
    };
    answer_of(client, link, values)
}

/// Reads one answer of the script (events for a recovery and for a reset key).
pub(super) fn answer_of(client: &Client, link: &Link, values: Vec<i64>) -> Result<Answer, ()> {
    if values.len() != 12 {
        degrade_event(client, link, &format!("unexpected answer {values:?}"));
        return Err(());
    }
    if !client.healthy.swap(true, Ordering::AcqRel) {
        tracing::info!(
            target: "fusebox",
            key = link.hash.as_str(),
            "redis store answers again; shared breakers use it from this call on"
        );
    }
    if values[7] == 1 {
        tracing::error!(
            target: "fusebox",
            key = link.hash.as_str(),
            "redis key `{}` held data fusebox did not write; the key was reset (keep other data out of the `{}` prefix)",
            link.hash,
            link.store.prefix
        );
    }
    Ok(Answer {
        code: values[0],
        state: values[1],
        generation: values[2].max(0) as u64,
        remaining_ms: values[3].max(0) as u64,
        committed_from: values[4],
        calls: values[5],
        failures: values[6],
        rule: values[8],
        slow: values[9],
        window: (values[10] >= 0 && values[11] >= 0)
            .then(|| (count(values[10]), count(values[11]))),
    })
}

pub(super) fn degrade_event(client: &Client, link: &Link, why: &str) {
    if client.healthy.swap(false, Ordering::AcqRel) {
        tracing::warn!(
            target: "fusebox",
            key = link.hash.as_str(),
            degrade = ?client.degrade,
            "redis store unavailable ({why}); shared breakers degrade to {:?} until it answers",
            client.degrade
        );
    }
}

/// Seeds the local breaker with the shared state, unless a newer generation is known already.
///
/// A forced-open or disabled state in Redis forces the local breaker too; the next closed or open
/// state learnt from Redis replaces it (a local breaker forced through its handle alone, while
/// Redis was closed, stays forced until Redis opens).
pub(super) fn learn(link: &Link, core: &Core, state: i64, generation: u64, remaining_ms: u64) {
    if !link.observe(state, generation) {
        return;
    }
    match state_of(state) {
        State::Open => {
            link.forced.store(false, Ordering::Release);
            core.mirror(State::Open, Duration::from_millis(remaining_ms), true);
        }
        State::Closed => {
            let release = link.forced.swap(false, Ordering::AcqRel);
            core.mirror(State::Closed, Duration::ZERO, release);
        }
        forced @ (State::ForcedOpen | State::Disabled) => {
            link.forced.store(true, Ordering::Release);
            core.mirror(forced, Duration::ZERO, true);
        }
        _ => {}
    }
}

/// Applies an answer: seeds the local breaker, keeps the shared window for snapshots, and
/// announces a transition this replica committed, with the rule the script says committed it.
pub(super) fn apply(link: &Link, core: &Core, answer: &Answer, site: FnName) {
    let state = state_of(answer.state);
    if let Some((calls, failures)) = answer.window {
        core.observe_shared_window(calls, failures);
    }
    learn(
        link,
        core,
        answer.state,
        answer.generation,
        answer.remaining_ms,
    );
    if answer.committed_from >= 0 {
        core.emit_committed(
            state_of(answer.committed_from),
            state,
            counts_of(answer),
            site,
            trigger_of(answer.rule),
        );
    }
}

/// The counts an answer reports with its transition (the window or the probes that decided it).
pub(super) fn counts_of(answer: &Answer) -> Counts {
    Counts {
        calls: count(answer.calls),
        failures: count(answer.failures),
        slow: count(answer.slow),
    }
}

/// A count of the script's answer (never negative; saturated at `u32::MAX`).
fn count(value: i64) -> u32 {
    u32::try_from(value.max(0)).unwrap_or(u32::MAX)
}
