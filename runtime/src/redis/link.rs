//! A shared breaker's link to the store: [`attach`] decides whether a breaker is shared and
//! links it, and every answer of the script seeds the local breaker (`learn`, `apply`), which
//! sync calls and degraded calls run on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use super::RedisStore;
use super::script::{Answer, state_of, time_slice_ms};
use super::store::Inner;
use crate::breaker::{Core, FnName};
use crate::policy::Window;
use crate::state::State;

/// One breaker's connection to the store.
pub(crate) struct Link {
    pub(super) hash: String,
    pub(super) args: [u64; 11],
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

/// Shares `core` through `store` when there is one and the key and policy allow it.
pub(crate) fn attach(store: Option<&RedisStore>, core: Core) -> Arc<Core> {
    let Some(store) = store else {
        return Arc::new(core);
    };
    let key = core.key().as_str();
    if !core.policy().shared || store.inner.local.iter().any(|k| k == key) {
        return Arc::new(core);
    }
    let policy = *core.policy();
    let unsupported = if matches!(policy.window, Window::Time(span) if time_slice_ms(span) == 0) {
        Some((
            "window",
            "a time window whose tenth is a whole number of milliseconds (`window = \"1s\"`)",
        ))
    } else if policy.failure_count != 0 {
        Some((
            "failure_count",
            "the failure rate or `consecutive`: the script does not count `failure_count`",
        ))
    } else {
        None
    };
    if let Some((field, instead)) = unsupported {
        tracing::error!(
            target: "fusebox",
            key,
            field,
            "breaker `{key}` uses a `{field}` the redis store does not share; it stays local (use {instead} to share it)"
        );
        return Arc::new(core);
    }
    let mut link = store.link(key, policy);
    let hash = link.hash.clone();
    let shared = Arc::new_cyclic(|me| {
        link.core = me.clone();
        core.with_store(Arc::new(link))
    });
    if let Some(link) = shared.store.as_ref()
        && store.inner.client.cached
    {
        let mut links = store
            .inner
            .client
            .links
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Breakers dropped (evicted dynamic keys, reconfigured ones) leave dead entries: swept
        // whenever the map doubles, so it stays proportional to the live breakers.
        if links.len().is_power_of_two() {
            links.retain(|_, entry| {
                entry.retain(|l| l.strong_count() > 0);
                !entry.is_empty()
            });
        }
        let entry = links.entry(hash).or_default();
        entry.retain(|l| l.strong_count() > 0);
        entry.push(Arc::downgrade(link));
    }
    shared
}

/// Seeds the local breaker with the shared state, unless a newer generation is known already.
pub(super) fn learn(core: &Core, state: i64, generation: u64, remaining_ms: u64) {
    if let Some(link) = core.store.as_ref()
        && !link.observe(state, generation)
    {
        return;
    }
    match state_of(state) {
        State::Open => core.mirror(State::Open, Duration::from_millis(remaining_ms)),
        State::Closed => core.mirror(State::Closed, Duration::ZERO),
        _ => {}
    }
}

/// Applies an answer: seeds the local breaker and announces a transition this replica committed.
pub(super) fn apply(core: &Core, answer: &Answer, site: FnName) {
    let state = state_of(answer.state);
    learn(core, answer.state, answer.generation, answer.remaining_ms);
    if answer.committed_from >= 0 {
        core.emit_committed(
            state_of(answer.committed_from),
            state,
            answer.calls as u32,
            answer.failures as u32,
            site,
        );
    }
}
