//! What the store's pieces share: [`Link`], a shared breaker's tie to the store (its Redis key,
//! its script arguments, its cached view, its reports in flight), the connection and script
//! every link uses ([`Client`], [`Inner`]), and the [`Report`] a link queues. The types refer to
//! one another, so they live together; what is done with them is in the other files.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::ConnectionManager;

use super::Degrade;
use crate::breaker::{Core, FnName};
use crate::clock::Clock;

/// One breaker's connection to the store.
pub(crate) struct Link {
    pub(super) hash: String,
    pub(super) args: [u64; 12],
    pub(super) store: Arc<Inner>,
    /// Reports handed to the reporting task, and reports it has finished.
    pub(super) pending: AtomicU64,
    pub(super) applied: AtomicU64,
    pub(super) done: tokio::sync::Notify,
    /// The breaker, for the reporting task to seed and to announce transitions on.
    pub(super) core: std::sync::Weak<Core>,
    /// The newest shared state this replica knows (cached mode): `generation << 4 | state << 1 |
    /// 1`, or 0 when unknown (the next call asks the script).
    pub(super) view: AtomicU64,
    /// A read of the shared state is on its way (cached mode, for a caller that cannot await).
    pub(super) learning: AtomicBool,
    /// The local breaker is forced open or disabled because Redis was: the next closed or open
    /// state learnt from Redis replaces it (a state forced on the handle alone stays).
    pub(super) forced: AtomicBool,
}

impl Link {
    /// Records that Redis holds `state` (script code) under `generation`; false when the view
    /// already holds a newer generation (the news is stale).
    pub(super) fn observe(&self, state: i64, generation: u64) -> bool {
        let next = generation << 4 | (state.clamp(0, 7) as u64) << 1 | 1;
        self.view
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                (old == 0 || old >> 4 <= generation).then_some(next)
            })
            .is_ok()
    }

    /// True when this link's calls use the cached path now.
    pub(super) fn caches(&self) -> bool {
        let client = &self.store.client;
        client.cached
            && client.subscribed.load(Ordering::Acquire)
            && client.healthy.load(Ordering::Acquire)
    }
}

/// The connection and the script, shared by the store and its reporting task.
pub(super) struct Client {
    pub(super) conn: ConnectionManager,
    pub(super) script: redis::Script,
    pub(super) timeout: Duration,
    pub(super) degrade: Degrade,
    pub(super) healthy: AtomicBool,
    pub(super) time: Option<Arc<dyn Clock>>,
    /// [`Mode::Cached`](super::Mode::Cached).
    pub(super) cached: bool,
    /// The pub/sub subscription is up and every link's view was reset when it came up.
    pub(super) subscribed: AtomicBool,
    /// Every shared breaker by Redis key (both modes), for the subscription to update and for
    /// [`RedisStore::force`](super::RedisStore::force) to announce its transition on.
    pub(super) links:
        std::sync::Mutex<std::collections::HashMap<String, Vec<std::sync::Weak<Link>>>>,
}

pub(super) struct Inner {
    pub(super) client: Arc<Client>,
    pub(super) prefix: String,
    pub(super) ttl_ms: u64,
    pub(super) local: Vec<String>,
    pub(super) reports: tokio::sync::mpsc::UnboundedSender<Report>,
}

/// An outcome on its way to the store.
pub(super) struct Report {
    pub(super) link: Arc<Link>,
    pub(super) core: Arc<Core>,
    pub(super) generation: u64,
    pub(super) outcome: u64,
    pub(super) slow: u64,
    pub(super) site: FnName,
}
