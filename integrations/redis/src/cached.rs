//! Admission from the replica's view of a shared key (cached mode, and callers that cannot await
//! in either mode) when the view is closed, disabled, forced open or open within its wait, and
//! the pub/sub subscription that keeps every view current in cached mode (or, while it is down,
//! makes the store strict).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::TRANSITIONS;
use super::admit::{degraded, permit_of};
use super::link::{Client, SharedKey};
use super::report::{learn_later, send_admit};
use super::script::follow;
use super::view::{CONFIRMED, view_generation, view_state};
use super::{jitters, seed};
use fusebox::Reason;
use fusebox::store::{Admission, CircuitRef, Site, Ticket};

/// Admission from the replica's view of the shared state, when the caller may not ask the
/// script itself; `None` sends the call to the script (the caller awaits it).
///
/// - In cached mode with its subscription up, the view decides: a closed or disabled view
///   admits, an open one whose wait is not over rejects, a forced-open one rejects; half-open, an
///   open wait that is over and an unknown view ask the script, so half-open probes stay exact
///   across replicas.
/// - Otherwise (strict mode, or the subscription down) every admission asks the script, except,
///   with `open_jitter`, while this replica's spread of a shared open wait it learnt lasts. An
///   `async` caller (`asks`) awaits it; a caller that cannot await (a sync function,
///   `try_acquire`, the tower layer's `call`) asks it on its own thread ([`ask_blocking`]),
///   bounded by the store's timeout, and so does a cached caller the view cannot decide.
/// - While the store does not answer, both go to [`degraded`].
pub(crate) fn cached_admit(
    core: CircuitRef<'_>,
    link: &Arc<SharedKey>,
    site: Site,
    asks: bool,
) -> Option<Admission> {
    let client = &link.store.client;
    if !client.healthy.load(Ordering::Acquire) {
        // One `async` caller at a time asks the script, to learn when it answers again; the
        // others are decided locally without waiting.
        if asks && !client.probing.swap(true, Ordering::AcqRel) {
            return None;
        }
        if !asks {
            learn_later(link, site);
        }
        return Some(degraded(core, link));
    }
    if link.caches()
        && let Some(permit) = from_view(core, link)
    {
        return Some(permit);
    }
    // `open_jitter` in strict mode: this replica waits out its own spread of the shared wait
    // (see `Circuit::mirror`) before it asks the script for a probe.
    if !link.caches()
        && jitters(core)
        && let (1, remaining) = seed(core)
        && remaining > 0
    {
        return Some(Admission::rejected(
            Reason::Open,
            Some(Duration::from_millis(remaining)),
        ));
    }
    if asks {
        return None;
    }
    Some(ask_blocking(core, link, site))
}

/// The admission the view decides alone: closed or disabled admits under the view's
/// generation, forced open rejects, open within its wait rejects; `None` otherwise.
fn from_view(core: CircuitRef<'_>, link: &SharedKey) -> Option<Admission> {
    let view = link.view.load(Ordering::Acquire);
    if view & CONFIRMED == 0 {
        // Unknown, or only announced by a message: the script confirms it first.
        return None;
    }
    match view_state(view) {
        // Too many of this replica's failures unanswered: the script admits.
        0 | 4 if link.gated() => None,
        0 | 4 => Some(Admission::Admitted(Ticket::generation(view_generation(
            view,
        )))),
        3 => Some(Admission::rejected(Reason::ForcedOpen, None)),
        1 => match seed(core) {
            (1, remaining) if remaining > 0 => Some(Admission::rejected(
                Reason::Open,
                Some(Duration::from_millis(remaining)),
            )),
            _ => None,
        },
        _ => None,
    }
}

/// Asks the script for the admission of a caller that cannot await: the store's reporting task
/// runs the `admit`, and this thread waits for its answer, bounded by the store's timeout. A
/// thread of a multi-threaded tokio runtime waits inside `block_in_place`; a thread of a
/// current-thread runtime cannot wait for a task of its own runtime, so there the call is
/// decided as while the store does not answer ([`degraded`]), and a background read updates the
/// view for the next call.
fn ask_blocking(core: CircuitRef<'_>, link: &Arc<SharedKey>, site: Site) -> Admission {
    use tokio::runtime::{Handle, RuntimeFlavor};
    let can_wait = match Handle::try_current() {
        Err(_) => Some(false),
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => Some(true),
        Ok(_) => None,
    };
    let Some(in_runtime) = can_wait else {
        learn_later(link, site);
        return degraded(core, link);
    };
    let (seed, remaining) = seed(core);
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    send_admit(link, seed, remaining, site, tx);
    let bound = link.store.client.timeout().saturating_mul(2);
    let answer = if in_runtime {
        tokio::task::block_in_place(|| rx.recv_timeout(bound))
    } else {
        rx.recv_timeout(bound)
    };
    match answer {
        Ok(Ok(answer)) => permit_of(&answer),
        _ => degraded(core, link),
    }
}

/// The subscription is up: every view is forgotten (each key's next call resynchronises it from
/// the script), and the store admits from its views again.
fn subscribed(client: &Client, dropped: bool) {
    for link in client
        .links
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .flatten()
        .filter_map(std::sync::Weak::upgrade)
    {
        link.forget();
    }
    client.subscribed.store(true, Ordering::Release);
    if dropped {
        tracing::info!(
            target: "fusebox",
            "redis store subscription is back; cached breakers admit locally again after their next call resynchronises"
        );
    }
}

/// A message on [`TRANSITIONS`]: the views of its key take the news (a message they cannot
/// take makes them unknown), and their local breakers follow what they took.
fn take_message(client: &Client, text: &str) {
    let Some(heard) = heard(text) else {
        return;
    };
    let links: Vec<Arc<SharedKey>> = client
        .links
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(heard.hash)
        .map(|links| links.iter().filter_map(std::sync::Weak::upgrade).collect())
        .unwrap_or_default();
    for link in links {
        let Some((state, generation, remaining, incarnation)) = heard.news else {
            link.forget();
            continue;
        };
        if link.hear(state, generation, incarnation)
            && let Some(core) = link.circuit()
        {
            // No open wait longer than this replica's policy gives.
            follow(&link, core.get(), state, remaining.min(link.args[8]));
            // The message does not say why it moved: a read of the key tells the breaker.
            learn_later(&link, Site::new(&"snapshot"));
        }
    }
}

/// Subscribes to [`TRANSITIONS`] on a connection of its own to one of `nodes` (one server, or
/// each node of a cluster, where a message published on any node reaches every node's
/// subscribers), trying them in turn from `first`, each bounded by `timeout` (at least one
/// second).
pub(super) async fn subscribe(
    nodes: &[redis::Client],
    first: usize,
    timeout: Duration,
) -> Option<redis::aio::PubSub> {
    for i in 0..nodes.len() {
        let node = &nodes[(first + i) % nodes.len()];
        let attempt = async {
            let mut pubsub = node.get_async_pubsub().await.ok()?;
            pubsub.subscribe(TRANSITIONS).await.ok()?;
            Some(pubsub)
        };
        if let Ok(Some(pubsub)) =
            tokio::time::timeout(timeout.max(Duration::from_secs(1)), attempt).await
        {
            return Some(pubsub);
        }
    }
    None
}

/// One message on [`TRANSITIONS`], as the script writes it: `state generation remaining-ms
/// incarnation key`. `news` is `None` when only the key could be read (a message in another
/// format, or with fields that do not parse): the views of that key are then forgotten.
struct Heard<'m> {
    hash: &'m str,
    news: Option<(i64, u64, u64, u64)>,
}

/// Reads a message on [`TRANSITIONS`]; `None` when it names no key.
fn heard(text: &str) -> Option<Heard<'_>> {
    let mut parts = text.splitn(5, ' ');
    let (state, generation, remaining) = (parts.next()?, parts.next()?, parts.next()?);
    let (Some(incarnation), Some(hash)) = (parts.next(), parts.next()) else {
        // Three fields and the key: the format before incarnations.
        return Some(Heard {
            hash: text.splitn(4, ' ').nth(3)?,
            news: None,
        });
    };
    let news = match (
        state.parse::<i64>(),
        generation.parse::<u64>(),
        remaining.parse::<u64>(),
        incarnation.parse::<u64>(),
    ) {
        (Ok(state), Ok(generation), Ok(remaining), Ok(incarnation)) => {
            Some((state, generation, remaining, incarnation))
        }
        _ => None,
    };
    Some(Heard { hash, news })
}

/// Keeps the subscription of a cached store: hands every announced generation to the breakers
/// of its key (each view takes it only when it checks out, see `SharedKey::hear`); when the
/// connection drops, the store's calls are strict until it is
/// back and every view has been reset (each breaker's next call then asks the script).
pub(super) async fn subscriber(
    client: std::sync::Weak<Client>,
    nodes: Vec<redis::Client>,
    mut pubsub: Option<redis::aio::PubSub>,
) {
    use futures_util::StreamExt;
    let mut dropped = false;
    // The node to try first when the subscription drops: the next one (a cluster's node that
    // failed may not come back).
    let mut next = 1;
    loop {
        let Some(up) = pubsub.take() else {
            let Some(strong) = client.upgrade() else {
                return;
            };
            let timeout = strong.timeout();
            drop(strong);
            tokio::time::sleep(timeout.max(Duration::from_millis(100))).await;
            pubsub = subscribe(&nodes, next, timeout).await;
            next += 1;
            continue;
        };
        {
            let Some(strong) = client.upgrade() else {
                return;
            };
            subscribed(&strong, dropped);
        }
        let mut messages = up.into_on_message();
        while let Some(message) = messages.next().await {
            let Some(strong) = client.upgrade() else {
                return;
            };
            if let Ok(text) = message.get_payload::<String>() {
                take_message(&strong, &text);
            }
        }
        let Some(strong) = client.upgrade() else {
            return;
        };
        strong.subscribed.store(false, Ordering::Release);
        dropped = true;
        tracing::warn!(
            target: "fusebox",
            "redis store subscription dropped; cached breakers are strict until it is back"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::heard;

    #[test]
    fn a_message_is_read_with_its_incarnation_and_a_key_that_may_hold_spaces() {
        let message = heard("1 42 5000 1796154889971954 {fusebox:a b}").unwrap();
        assert_eq!(message.hash, "{fusebox:a b}");
        assert_eq!(message.news, Some((1, 42, 5000, 1_796_154_889_971_954)));
    }

    #[test]
    fn a_message_that_does_not_parse_names_its_key_without_news() {
        // The format before incarnations: the key's views are forgotten.
        let old = heard("3 999999999999 0 {fusebox:forged}").unwrap();
        assert_eq!((old.hash, old.news), ("{fusebox:forged}", None));
        let garbage = heard("3 nan 0 7 {fusebox:forged}").unwrap();
        assert_eq!((garbage.hash, garbage.news), ("{fusebox:forged}", None));
        assert!(heard("3 1 0").is_none(), "no key");
        assert!(heard("").is_none());
    }
}
