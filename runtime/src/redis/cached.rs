//! Cached mode: admission answered from the replica's view of a shared key when the view is
//! closed, disabled, forced open or open within its wait, and the pub/sub subscription that
//! keeps every view current (or, while it is down, makes the store strict).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::TRANSITIONS;
use super::link::{CONFIRMED, Client, Link, view_generation, view_state};
use super::report::{LEARN, send};
use super::script::follow;
use crate::breaker::{Core, FnName, Permit, shared_word};
use crate::error::Reason;

/// Cached mode: answers admission from the replica's view of the shared state when it can (a
/// closed or disabled circuit admits, an open one whose wait is not over refuses, a forced-open
/// one refuses); `None` sends the call to the script (half-open probes, an unknown view, a view
/// only a message announced, the subscription down).
///
/// A caller that cannot await (`asks` false: a sync function, `try_acquire`) and finds the view
/// unknown or unconfirmed starts a background read of the shared state, so its later calls use
/// the view.
pub(crate) fn cached_admit<'c>(
    core: &'c Core,
    link: &Arc<Link>,
    site: FnName,
    asks: bool,
) -> Option<Permit<'c>> {
    if !link.caches() {
        return None;
    }
    let view = link.view.load(Ordering::Acquire);
    if view & CONFIRMED == 0 {
        if !asks && !link.learning.swap(true, Ordering::AcqRel) {
            send(link, 0, LEARN, 0, site);
        }
        return None;
    }
    match view_state(view) {
        0 | 4 => Some(core.store_permit(shared_word(view_generation(view), false), site)),
        3 => Some(core.store_refusal(Reason::ForcedOpen, None, site)),
        1 => match core.seed() {
            (1, remaining) if remaining > 0 => {
                Some(core.store_refusal(Reason::Open, Some(Duration::from_millis(remaining)), site))
            }
            _ => None,
        },
        _ => None,
    }
}

/// Subscribes to [`TRANSITIONS`] on a connection of its own, bounded by `timeout` (at least one
/// second).
pub(super) async fn subscribe(
    client: &redis::Client,
    timeout: Duration,
) -> Option<redis::aio::PubSub> {
    let attempt = async {
        let mut pubsub = client.get_async_pubsub().await.ok()?;
        pubsub.subscribe(TRANSITIONS).await.ok()?;
        Some(pubsub)
    };
    tokio::time::timeout(timeout.max(Duration::from_secs(1)), attempt)
        .await
        .ok()
        .flatten()
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
/// of its key (each view takes it only when it checks out, see `Link::hear`); when the
/// connection drops, the store's calls are strict until it is
/// back and every view has been reset (each breaker's next call then asks the script).
pub(super) async fn subscriber(
    client: std::sync::Weak<Client>,
    redis: redis::Client,
    mut pubsub: Option<redis::aio::PubSub>,
) {
    use futures_util::StreamExt;
    let mut dropped = false;
    loop {
        let Some(up) = pubsub.take() else {
            let Some(strong) = client.upgrade() else {
                return;
            };
            let timeout = strong.timeout;
            drop(strong);
            tokio::time::sleep(timeout.max(Duration::from_millis(100))).await;
            pubsub = subscribe(&redis, timeout).await;
            continue;
        };
        {
            let Some(strong) = client.upgrade() else {
                return;
            };
            for link in strong
                .links
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .values()
                .flatten()
                .filter_map(std::sync::Weak::upgrade)
            {
                link.forget();
            }
            strong.subscribed.store(true, Ordering::Release);
            if dropped {
                tracing::info!(
                    target: "fusebox",
                    "redis store subscription is back; cached breakers admit locally again after their next call resynchronises"
                );
            }
        }
        let mut messages = up.into_on_message();
        while let Some(message) = messages.next().await {
            let Some(strong) = client.upgrade() else {
                return;
            };
            let Ok(text) = message.get_payload::<String>() else {
                continue;
            };
            let Some(heard) = heard(&text) else {
                continue;
            };
            let links: Vec<Arc<Link>> = strong
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
                    && let Some(core) = link.core.upgrade()
                {
                    // No open wait longer than this replica's policy gives.
                    follow(&link, &core, state, remaining.min(link.args[8]));
                }
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
