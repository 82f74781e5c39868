//! The Lua script `breaker.lua` from the Rust side: its arguments' encodings, one bounded call
//! (`EVALSHA`, reloaded on `NOSCRIPT` by the `redis` crate), its answers read into [`Answer`]s
//! (with the events of a store that stops or starts answering), and an answer applied to the
//! local breaker, which sync calls and degraded calls run on (`learn`, `apply`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::link::{Client, SharedKey};
use fusebox::State;
use fusebox::Trigger;
use fusebox::store::{CircuitRef, Counts, SharedTransition, Site};

/// Marks a time window in the script's window argument (plus the slice in milliseconds), and
/// progressive recovery in its probes argument (plus `phases << 20` and `min_passes`).
pub(super) const TIME_WINDOW: u64 = 1 << 40;

/// The slice of a time window (a tenth of its span) in whole milliseconds; 0 when it is not a
/// whole number of milliseconds (such a window stays local).
pub(super) fn time_slice_ms(span: Duration) -> u64 {
    let slice = span.as_nanos() / u128::from(fusebox::limits::TIME_BUCKETS);
    if slice.is_multiple_of(1_000_000) {
        u64::try_from(slice / 1_000_000).unwrap_or(0)
    } else {
        0
    }
}

pub(super) use super::link::Answer;
use super::link::Last;
use super::view::view_generation;

/// The fields of a breaker's hash, in the order of `FIELDS` in `breaker.lua` (its field codes
/// are their positions, from 1).
const FIELDS: [&str; 18] = [
    "v", "st", "g", "dl", "iss", "pas", "arm", "n", "f", "s", "cur", "run", "ro", "w", "ph", "sq",
    "pf", "inc",
];

/// The field the script found corrupt, by its code in the answer: a field of [`FIELDS`], `type`
/// (the key is not a hash), this replica's report sequence `q<replica>` (20), the probe tokens
/// `pt` (21), a time window's bucket `t0..t9` (100 + i) or a count window's slot `r0..`
/// (1000 + i).
fn corrupt_field(code: i64, replica: u64) -> String {
    let field = usize::try_from(code).ok();
    match field {
        Some(i @ 1..=18) => FIELDS[i - 1].to_owned(),
        Some(19) => "type".to_owned(),
        Some(20) => format!("q{replica}"),
        Some(21) => "pt".to_owned(),
        Some(i @ 100..=109) => format!("t{}", i - 100),
        Some(i @ 1000..) => format!("r{}", i - 1000),
        _ => format!("code {code}"),
    }
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
        11 => Trigger::Quorum,
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
    link: &SharedKey,
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
    let bound = client.timeout();
    let started = std::time::Instant::now();
    let result: Result<redis::RedisResult<Vec<i64>>, _> =
        tokio::time::timeout(bound, invocation.invoke_async(&mut conn)).await;
    let values = match result {
        Ok(Ok(values)) => {
            client.bound.observe(started.elapsed());
            values
        }
        Ok(Err(error)) => {
            degrade_event(client, link, &error.to_string());
            return Err(());
        }
        Err(_) => {
            client.bound.missed();
            degrade_event(client, link, &format!("no answer within {bound:?}"));
            return Err(());
        }
    };
    answer_of(client, link, values)
}

/// Reads one answer of the script (events for a recovery and for corrupt data the script reset).
pub(super) fn answer_of(client: &Client, link: &SharedKey, values: Vec<i64>) -> Result<Answer, ()> {
    if values.len() != 14 && values.len() != 23 {
        degrade_event(client, link, &format!("unexpected answer {values:?}"));
        return Err(());
    }
    if client.answered() {
        tracing::info!(
            target: "fusebox",
            key = link.hash.as_str(),
            "redis store answers again; shared breakers use it from this call on"
        );
    }
    if values[7] == 1 || values[7] == 2 {
        corrupt_event(link, values[7] == 1, values[11]);
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
        incarnation: values[10].max(0) as u64,
        window: (values[12] >= 0 && values[13] >= 0)
            .then(|| (count(values[12]), count(values[13]))),
        last: values
            .get(14..)
            .filter(|last| last.len() == 9 && last[0] >= 0)
            .map(|last| Last {
                from: last[0],
                to: last[1],
                rule: last[2],
                calls: last[3],
                failures: last[4],
                slow: last[5],
                age_ms: last[6].max(0) as u64,
                replica: last[7].max(0) as u64,
                generation: last[8].max(0) as u64,
            }),
    })
}

/// The ERROR event of data the script did not write under `link`'s key: the key was reset
/// (`whole`), or one field was cleared (a window slot, this replica's report sequence); `code`
/// names the field.
fn corrupt_event(link: &SharedKey, whole: bool, code: i64) {
    let field = corrupt_field(code, link.store.client.replica);
    let what = if field == "type" {
        "the key is not a hash".to_owned()
    } else {
        format!("field `{field}`")
    };
    let done = if whole {
        "the key was reset and its circuit starts closed"
    } else {
        "the field was cleared and counts as empty"
    };
    tracing::error!(
        target: "fusebox",
        key = link.hash.as_str(),
        field = field.as_str(),
        "redis key `{}` held data fusebox did not write ({what}); {done} (keep other data out of the `{}` prefix)",
        link.hash,
        link.store.prefix
    );
}

pub(super) fn degrade_event(client: &Client, link: &SharedKey, why: &str) {
    if client.failed() {
        tracing::warn!(
            target: "fusebox",
            key = link.hash.as_str(),
            degrade = ?client.degrade,
            "redis store unavailable ({why}); shared breakers degrade to {:?} until it answers",
            client.degrade
        );
    }
}

/// Seeds the local breaker with the shared state an answer of the script reported, unless the
/// view holds a newer generation of the same incarnation (see [`SharedKey::observe`]).
/// True when the view took a new generation another replica committed (or, while the view was
/// unknown, a circuit that is not closed) from an answer that does not carry the key's last
/// transition (an admission, a report), or when the answer made the view unknown: the caller
/// reads the key again off the call path (`learn_later`), so the local breaker is told why it
/// moved, or follows the key again.
#[must_use]
pub(super) fn learn(link: &SharedKey, core: CircuitRef<'_>, answer: &Answer) -> bool {
    let view = link.view.load(Ordering::Acquire);
    if link.observe(answer.state, answer.generation, answer.incarnation) {
        follow(link, core, answer.state, answer.remaining_ms);
        let moved = if view == 0 {
            answer.state != 0
        } else {
            view_generation(view) != answer.generation
        };
        return moved && answer.committed_from < 0 && answer.last.is_none();
    }
    // An answer older than a view a message gave (a read sent before that transition was
    // committed, or a forged message) forgets the view: a read of the key makes it known again,
    // so the local breaker follows the key without waiting for its next call.
    view != 0 && link.view.load(Ordering::Acquire) == 0
}

/// Tells the local breaker the key's last transition when another replica committed it and the
/// breaker was not told yet (the replica that committed it announced it, and recorded it).
fn tell(link: &SharedKey, core: CircuitRef<'_>, last: &Last) {
    if last.replica == link.store.client.replica
        || link.told.swap(last.generation + 1, Ordering::AcqRel) == last.generation + 1
    {
        return;
    }
    core.follow_transition(SharedTransition::new(
        state_of(last.from),
        state_of(last.to),
        trigger_of(last.rule).unwrap_or(Trigger::Operator),
        Counts::new(count(last.calls), count(last.failures), count(last.slow)),
        Duration::from_millis(last.age_ms),
        last.replica.to_string(),
    ));
}

/// Seeds the local breaker with the shared `state` (script code).
///
/// A forced-open or disabled state in Redis forces the local breaker too; the next closed or open
/// state learnt from Redis replaces it (a local breaker forced through its handle alone, while
/// Redis was closed, stays forced until Redis opens).
pub(super) fn follow(link: &SharedKey, core: CircuitRef<'_>, state: i64, remaining_ms: u64) {
    match state_of(state) {
        State::Open => {
            link.forced.store(false, Ordering::Release);
            core.follow(State::Open, Duration::from_millis(remaining_ms), true);
        }
        State::Closed => {
            let release = link.forced.swap(false, Ordering::AcqRel);
            core.follow(State::Closed, Duration::ZERO, release);
        }
        forced @ (State::ForcedOpen | State::Disabled) => {
            link.forced.store(true, Ordering::Release);
            core.follow(forced, Duration::ZERO, true);
        }
        _ => {}
    }
}

/// Applies an answer: seeds the local breaker, keeps the shared window for snapshots, and
/// announces a transition this replica committed, with the rule the script says committed it.
///
/// True when the key should be read again, for why it moved ([`learn`]).
#[must_use]
pub(super) fn apply(link: &SharedKey, core: CircuitRef<'_>, answer: &Answer, site: Site) -> bool {
    let state = state_of(answer.state);
    if let Some((calls, failures)) = answer.window {
        core.observe_window(calls, failures);
    }
    let unexplained = learn(link, core, answer);
    if let Some(last) = &answer.last {
        tell(link, core, last);
    }
    if answer.committed_from >= 0 {
        core.announce(
            state_of(answer.committed_from),
            state,
            counts_of(answer),
            site,
            trigger_of(answer.rule),
        );
    }
    unexplained
}

/// The counts an answer reports with its transition (the window or the probes that decided it).
pub(super) fn counts_of(answer: &Answer) -> Counts {
    Counts::new(
        count(answer.calls),
        count(answer.failures),
        count(answer.slow),
    )
}

/// A count of the script's answer (never negative; saturated at `u32::MAX`).
fn count(value: i64) -> u32 {
    u32::try_from(value.max(0)).unwrap_or(u32::MAX)
}
