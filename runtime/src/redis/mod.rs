//! One circuit across replicas: breakers that share their state through Redis (feature `redis`).
//!
//! ```no_run
//! # async fn run() -> Result<(), fusebox::redis::StoreError> {
//! let store = fusebox::redis::RedisStore::connect("redis://127.0.0.1:6379/").await?;
//! fusebox::registry().share(store); // every breaker of the registry is now one circuit across replicas
//! # Ok(()) }
//! ```
//!
//! **How.** Each breaker key is one Redis hash, `{prefix:key}` (hash-tagged, so it works on Redis
//! Cluster), expiring after an idle TTL. One Lua script, loaded once and run with `EVALSHA`
//! (reloaded when Redis answers `NOSCRIPT`), does admission and outcome recording atomically on
//! it, with time from Redis `TIME`. Every transition bumps a generation; a result admitted under an
//! older generation changes nothing. Half-open probe permits are taken inside the script, so the
//! number of probes is exact across replicas, and a probe lease re-arms the probes of a replica
//! that died. Every script call is O(1) in the window size (the count window is a ring of slots in
//! the hash, with running totals).
//!
//! **Which calls go to Redis ([`Mode::Strict`], the default).** An annotated `async fn` (without `timeout`,
//! `retry`, `backoff` or `deadline`) awaits admission from the script before its body runs, and
//! awaits its outcome's recording before it returns: in this mode no call is admitted after a
//! replica committed OPEN. Sync functions, the attempt driver (`timeout`/`retry`/…) and
//! [`Breaker::try_acquire`](crate::Breaker::try_acquire) cannot await: on a shared key they run on
//! the local breaker, which each answer of the store seeds with the shared state (open with the
//! same remaining wait, or closed), and their outcomes are not sent to Redis.
//!
//! **Cached mode** ([`RedisStoreBuilder::mode`] with [`Mode::Cached`]). Each replica keeps a
//! view of every shared key (state and generation), learnt from the script's answers and from
//! a pub/sub subscription on a dedicated connection, on which the script announces every new
//! generation (channel [`TRANSITIONS`]). While the view says closed (or disabled), a call is
//! admitted without a round trip and its outcome is sent to the script off the call path, under
//! the view's generation; while it says open and the wait is not over, or forced open, the call
//! is refused locally. Otherwise (the open wait over, half-open, a key not seen yet) the call
//! asks the script as in strict mode, so half-open probes stay exact across replicas. Sync
//! functions and [`Breaker::try_acquire`](crate::Breaker::try_acquire) use the view too; while
//! it is unknown (or half-open) they run on the local breaker as in strict mode, and the first
//! such call starts a background read of the shared state. What cached
//! mode gives up: between the moment a replica's report commits OPEN and the moment another
//! replica receives the push, that replica still admits calls (and the replica that committed
//! it admits until the script's answer to its report comes back); those calls' outcomes were
//! admitted under the older generation and change nothing. When the subscription drops (or Redis
//! stops answering), the store is strict until it has subscribed again; it then forgets every
//! view, so each key's next call asks the script and resynchronises it
//! ([`RedisStore::is_cached`] says which).
//!
//! **Operators.** [`RedisStore::force`] moves a shared key for every replica and
//! [`RedisStore::state`] reads it; [`Breaker::force_open`](crate::Breaker::force_open) and the
//! other manual states of a handle act on the local breaker only (sync calls, degraded calls).
//! A shared breaker's [`Breaker::state`](crate::Breaker::state) and snapshot show its local
//! breaker, which mirrors Redis's open and closed states (not half-open).
//!
//! **Supported by the script:** count windows and time windows (ten slices, as in memory, when a
//! tenth of the span is a whole number of milliseconds) with `failure_rate`, `slow_rate` and
//! `min_calls`, `consecutive`, `open_for`, `open_backoff`/`open_max`, `half_open` (N probes) with
//! `half_open_lease`, progressive recovery (phase k of n admits k calls in every n, decided in
//! the script), and the forced states through [`RedisStore::force`]. **Not supported:** a time
//! window whose tenth is not a whole number of milliseconds, and `failure_count`: such a key stays local (with an
//! error event naming the key), as do keys named by [`RedisStoreBuilder::local_key`] and keys
//! whose policy says [`Policy::shared`]`(false)` (`shared = false` on the attribute or in a
//! key's config table).
//!
//! **Redis slow or down.** Every store call is bounded by [`RedisStoreBuilder::timeout`]
//! (default 50 ms). When it fails, the call degrades per [`Degrade`] (default
//! [`Degrade::Local`]: the local breaker, seeded with the last state Redis reported, so an open
//! circuit stays open), with a WARN event on degrading and an INFO event on recovery. Every
//! admission sends the local state along; the script uses it only when the key does not exist, so
//! after a Redis restart that lost the state (or when a breaker already in use is first shared)
//! an open, forced-open or disabled circuit is pushed back with its remaining wait. Data under a
//! breaker's key that the script did not write is reset by the script, with an ERROR event.
//!
//! **Tests and time.** [`RedisStoreBuilder::time_from`] makes the script take time from a
//! [`Clock`](crate::clock::Clock) instead of Redis `TIME`; it exists for tests that drive time
//! with a [`FakeClock`](crate::clock::FakeClock), and production code never needs it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::ConnectionManager;

use crate::breaker::{Core, FnName, Permit};
use crate::clock::Clock;
use crate::error::{Error, Reason};
use crate::policy::{Policy, Recovery, Window};
use crate::state::{State, Word};

/// The refusal code of a permit that asks the store (beyond every [`Reason`]'s code).
pub(crate) const ASK_STORE: u64 = 15;

/// Mode bits of a permit admitted by the store: bit 3 marks a probe, bits 4.. hold the generation.
const SHARED_MODE: u64 = 5;

/// True for the word of a permit admitted by the store.
#[inline]
pub(crate) fn is_shared(word: Word) -> bool {
    word.0 & 0b111 == SHARED_MODE
}

fn shared_word(generation: u64, probe: bool) -> Word {
    Word(SHARED_MODE | u64::from(probe) << 3 | generation << 4)
}

/// The default bound on each store call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);
/// The default idle time after which Redis forgets a breaker's key.
pub const DEFAULT_IDLE_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// How a shared breaker's calls use Redis ([`RedisStoreBuilder::mode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Mode {
    /// Every admission and every outcome of an annotated `async fn` goes through the script, and
    /// the call awaits both: no call is admitted after a replica committed OPEN.
    #[default]
    Strict,
    /// A closed circuit admits locally and outcomes are sent off the call path; transitions
    /// reach every replica by pub/sub; half-open probes are still decided in Redis. While the
    /// subscription is down a replica behaves as [`Mode::Strict`] until it has resynchronised.
    Cached,
}

/// The pub/sub channel on which the script announces every new generation of a breaker.
pub const TRANSITIONS: &str = "fusebox:transitions";

/// What a shared breaker does when Redis does not answer within the timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Degrade {
    /// Continue on the local breaker, seeded with the last state Redis reported.
    #[default]
    Local,
    /// Admit every call (outcomes are not recorded anywhere).
    FailOpen,
    /// Refuse every call (reason [`Reason::Open`], no `retry_after`).
    FailClosed,
}

/// The store could not be set up.
#[derive(Debug)]
pub struct StoreError {
    message: String,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StoreError {}

/// Settings of a [`RedisStore`]; start with [`RedisStore::builder`].
pub struct RedisStoreBuilder {
    url: String,
    timeout: Duration,
    prefix: String,
    degrade: Degrade,
    idle_ttl: Duration,
    local: Vec<String>,
    time: Option<Arc<dyn Clock>>,
    mode: Mode,
}

impl fmt::Debug for RedisStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStoreBuilder")
            .field("timeout", &self.timeout)
            .field("prefix", &self.prefix)
            .field("degrade", &self.degrade)
            .field("mode", &self.mode)
            .finish()
    }
}

impl RedisStoreBuilder {
    /// How calls use Redis (default [`Mode::Strict`]).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Bound on every store call (default [`DEFAULT_TIMEOUT`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Prefix of the Redis key names, `{prefix:key}` (default `fusebox`).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// What to do when Redis does not answer (default [`Degrade::Local`]).
    pub fn degrade(mut self, degrade: Degrade) -> Self {
        self.degrade = degrade;
        self
    }

    /// Idle time after which Redis forgets a breaker's key (default [`DEFAULT_IDLE_TTL`]).
    pub fn idle_ttl(mut self, ttl: Duration) -> Self {
        self.idle_ttl = ttl;
        self
    }

    /// Keeps `key` local: its breaker is not shared (per-host dynamic keys, for instance).
    pub fn local_key(mut self, key: impl Into<String>) -> Self {
        self.local.push(key.into());
        self
    }

    /// For tests: the script takes time from `clock` instead of Redis `TIME`.
    pub fn time_from(mut self, clock: impl Clock) -> Self {
        self.time = Some(Arc::new(clock));
        self
    }

    /// Connects (bounded by the timeout, at least one second) and checks that Redis answers.
    ///
    /// # Errors
    ///
    /// A [`StoreError`] when the URL is invalid, or Redis does not answer in time or refuses the
    /// script.
    pub async fn connect(self) -> Result<RedisStore, StoreError> {
        let client = redis::Client::open(self.url.as_str()).map_err(|e| StoreError {
            message: format!(
                "invalid redis url `{}`: {e}; expected `redis://host:port/`",
                self.url
            ),
        })?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout.max(Duration::from_secs(1))))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(1)
            .set_max_delay(self.timeout);
        let unreachable = |e: &dyn fmt::Display| StoreError {
            message: format!(
                "cannot reach redis at `{}`: {e}; start it or fix the url",
                self.url
            ),
        };
        let client_for_pubsub = client.clone();
        let conn = tokio::time::timeout(
            self.timeout.max(Duration::from_secs(1)),
            client.get_connection_manager_with_config(config),
        )
        .await
        .map_err(|e| unreachable(&e))?
        .map_err(|e| unreachable(&e))?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let client = Arc::new(Client {
            conn,
            script: redis::Script::new(include_str!("breaker.lua")),
            timeout: self.timeout,
            degrade: self.degrade,
            healthy: AtomicBool::new(true),
            time: self.time,
            cached: self.mode == Mode::Cached,
            subscribed: AtomicBool::new(false),
            links: std::sync::Mutex::new(std::collections::HashMap::new()),
        });
        tokio::spawn(worker(client.clone(), rx));
        if client.cached {
            // The first subscription is made before the store is handed out, so a reachable
            // Redis gives cached admission from the first call.
            let first = subscribe(&client_for_pubsub, client.timeout).await;
            client.subscribed.store(first.is_some(), Ordering::Release);
            tokio::spawn(subscriber(
                Arc::downgrade(&client),
                client_for_pubsub,
                first,
            ));
        }
        Ok(RedisStore {
            inner: Arc::new(Inner {
                client,
                prefix: self.prefix,
                ttl_ms: self.idle_ttl.as_millis().max(1) as u64,
                local: self.local,
                reports: tx,
            }),
        })
    }
}

/// The connection and the script, shared by the store and its reporting task.
struct Client {
    conn: ConnectionManager,
    script: redis::Script,
    timeout: Duration,
    degrade: Degrade,
    healthy: AtomicBool,
    time: Option<Arc<dyn Clock>>,
    /// [`Mode::Cached`].
    cached: bool,
    /// The pub/sub subscription is up and every link's view was reset when it came up.
    subscribed: AtomicBool,
    /// Every shared breaker by Redis key, for the subscription to update.
    links: std::sync::Mutex<std::collections::HashMap<String, Vec<std::sync::Weak<Link>>>>,
}

struct Inner {
    client: Arc<Client>,
    prefix: String,
    ttl_ms: u64,
    local: Vec<String>,
    reports: tokio::sync::mpsc::UnboundedSender<Report>,
}

/// A Redis store shared by the replicas of a service; hand it to [`Registry::share`](crate::Registry::share).
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.inner.prefix)
            .field("timeout", &self.inner.client.timeout)
            .finish()
    }
}

impl RedisStore {
    /// Connects to the Redis at `url` (`redis://host:port/`) with the default settings.
    ///
    /// # Errors
    ///
    /// As [`RedisStoreBuilder::connect`].
    pub async fn connect(url: &str) -> Result<RedisStore, StoreError> {
        Self::builder(url).connect().await
    }

    /// Settings for a store at `url`.
    pub fn builder(url: &str) -> RedisStoreBuilder {
        RedisStoreBuilder {
            url: url.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            prefix: "fusebox".to_owned(),
            degrade: Degrade::Local,
            idle_ttl: DEFAULT_IDLE_TTL,
            local: Vec::new(),
            time: None,
            mode: Mode::Strict,
        }
    }

    /// True while this store admits from its cached view: [`Mode::Cached`], the pub/sub
    /// subscription up and Redis answering. False in [`Mode::Strict`], and in cached mode while
    /// the subscription is down (calls are then strict until it is back).
    pub fn is_cached(&self) -> bool {
        let client = &self.inner.client;
        client.cached
            && client.subscribed.load(Ordering::Acquire)
            && client.healthy.load(Ordering::Acquire)
    }

    /// The Redis key name of breaker `key`.
    pub fn redis_key(&self, key: &str) -> String {
        format!("{{{}:{}}}", self.inner.prefix, key)
    }

    /// The shared state of breaker `key` under `policy`, as Redis holds it.
    ///
    /// # Errors
    ///
    /// An [`Error`] with reason `TimedOut` when Redis does not answer within the store timeout.
    pub async fn state(&self, key: &str, policy: Policy) -> Result<SharedState, Error> {
        let link = self.link(key, policy);
        let answer = call(&self.inner.client, &link, "state", &[])
            .await
            .map_err(|_| Error::new(crate::error::Key::from(key), Reason::TimedOut, None))?;
        Ok(SharedState {
            state: state_of(answer.state),
            generation: answer.generation,
            calls: answer.calls as u32,
            failures: answer.failures as u32,
        })
    }

    /// Moves breaker `key` to `state` in Redis for every replica (operator action): `Closed`
    /// resets, `ForcedOpen` refuses every call, `Disabled` admits every call and never opens.
    ///
    /// # Errors
    ///
    /// An [`Error`] with reason `TimedOut` when Redis does not answer within the store timeout.
    pub async fn force(&self, key: &str, policy: Policy, state: State) -> Result<(), Error> {
        let target = match state {
            State::Closed => 0,
            State::ForcedOpen => 3,
            State::Disabled => 4,
            _ => 0,
        };
        let link = self.link(key, policy);
        call(&self.inner.client, &link, "force", &[target])
            .await
            .map(|_| ())
            .map_err(|_| Error::new(crate::error::Key::from(key), Reason::TimedOut, None))
    }

    fn link(&self, key: &str, policy: Policy) -> Link {
        let open_max = policy.open_max_nanos.max(policy.open_for_nanos);
        let ms = |nanos: u64| nanos.div_ceil(1_000_000).max(1);
        let args = [
            self.inner.ttl_ms,
            match policy.get_window() {
                Window::Count(n) => u64::from(n),
                Window::Time(span) => TIME_WINDOW + time_slice_ms(span),
            },
            u64::from(policy.min_calls),
            u64::from(policy.failure_rate),
            if policy.slow_nanos != 0 {
                u64::from(policy.slow_rate)
            } else {
                0
            },
            u64::from(policy.consecutive),
            ms(policy.open_for_nanos),
            u64::from(policy.open_backoff_milli),
            ms(open_max),
            match policy.recovery {
                Recovery::Probes => u64::from(policy.half_open),
                Recovery::Progressive { phases, min_passes } => {
                    TIME_WINDOW + (u64::from(phases) << 20) + u64::from(min_passes)
                }
            },
            ms(policy.lease_nanos()),
        ];
        Link {
            hash: self.redis_key(key),
            args,
            store: self.inner.clone(),
            pending: AtomicU64::new(0),
            applied: AtomicU64::new(0),
            done: tokio::sync::Notify::new(),
            core: std::sync::Weak::new(),
            view: AtomicU64::new(0),
            learning: AtomicBool::new(false),
        }
    }
}

/// A breaker's state as Redis holds it ([`RedisStore::state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedState {
    /// The shared state.
    pub state: State,
    /// The generation, bumped by every transition.
    pub generation: u64,
    /// Outcomes in the current window.
    pub calls: u32,
    /// Failures among them.
    pub failures: u32,
}

/// Marks a time window in the script's window argument (plus the slice in milliseconds), and
/// progressive recovery in its probes argument (plus `phases << 20` and `min_passes`).
const TIME_WINDOW: u64 = 1 << 40;

/// The slice of a time window (a tenth of its span) in whole milliseconds; 0 when it is not a
/// whole number of milliseconds (such a window stays local).
fn time_slice_ms(span: Duration) -> u64 {
    let slice = span.as_nanos() / u128::from(crate::policy::TIME_BUCKETS);
    if slice.is_multiple_of(1_000_000) {
        u64::try_from(slice / 1_000_000).unwrap_or(0)
    } else {
        0
    }
}

/// One breaker's connection to the store.
pub(crate) struct Link {
    hash: String,
    args: [u64; 11],
    store: Arc<Inner>,
    /// Reports handed to the reporting task, and reports it has finished.
    pending: AtomicU64,
    applied: AtomicU64,
    done: tokio::sync::Notify,
    /// The breaker, for the reporting task to seed and to announce transitions on.
    core: std::sync::Weak<Core>,
    /// The newest shared state this replica knows (cached mode): `generation << 4 | state << 1 |
    /// 1`, or 0 when unknown (the next call asks the script).
    view: AtomicU64,
    /// A read of the shared state is on its way (cached mode, for a caller that cannot await).
    learning: AtomicBool,
}

impl Link {
    /// Records that Redis holds `state` (script code) under `generation`; false when the view
    /// already holds a newer generation (the news is stale).
    fn observe(&self, state: i64, generation: u64) -> bool {
        let next = generation << 4 | (state.clamp(0, 7) as u64) << 1 | 1;
        self.view
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                (old == 0 || old >> 4 <= generation).then_some(next)
            })
            .is_ok()
    }

    /// True when this link's calls use the cached path now.
    fn caches(&self) -> bool {
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

/// One answer of the script.
#[derive(Debug, Clone, Copy)]
struct Answer {
    code: i64,
    state: i64,
    generation: u64,
    remaining_ms: u64,
    committed_from: i64,
    calls: i64,
    failures: i64,
}

fn state_of(code: i64) -> State {
    match code {
        1 => State::Open,
        2 => State::HalfOpen,
        3 => State::ForcedOpen,
        4 => State::Disabled,
        _ => State::Closed,
    }
}

/// Runs the script for `link`, bounded by the store's timeout.
async fn call(client: &Client, link: &Link, op: &str, extra: &[u64]) -> Result<Answer, ()> {
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
fn answer_of(client: &Client, link: &Link, values: Vec<i64>) -> Result<Answer, ()> {
    if values.len() != 8 {
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
    })
}

fn degrade_event(client: &Client, link: &Link, why: &str) {
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
fn learn(core: &Core, state: i64, generation: u64, remaining_ms: u64) {
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
fn apply(core: &Core, answer: &Answer, site: FnName) {
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

/// True when `permit` (refused) asks the store for admission: its breaker is shared.
#[inline(always)]
pub fn asks_store(permit: &Permit<'_>) -> bool {
    permit.asks_store().is_some()
}

/// True when `permit`'s breaker is shared in strict mode (or cached mode without its
/// subscription): the call awaits the recording of its outcome.
#[inline(always)]
pub fn reports_to_store(permit: &Permit<'_>) -> bool {
    permit
        .core()
        .store
        .as_ref()
        .is_some_and(|link| !link.caches())
}

/// Cached mode: answers admission from the replica's view of the shared state when it can (a
/// closed or disabled circuit admits, an open one whose wait is not over refuses, a forced-open
/// one refuses); `None` sends the call to the script (half-open probes, an unknown view, the
/// subscription down).
///
/// A caller that cannot await (`asks` false: a sync function, `try_acquire`) and finds the view
/// unknown starts a background read of the shared state, so its later calls use the view.
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
    if view == 0 {
        if !asks && !link.learning.swap(true, Ordering::AcqRel) {
            send(link, 0, LEARN, 0, site);
        }
        return None;
    }
    match (view >> 1) & 0b111 {
        0 | 4 => Some(core.store_permit(shared_word(view >> 4, false), site)),
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
async fn subscribe(client: &redis::Client, timeout: Duration) -> Option<redis::aio::PubSub> {
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

/// Keeps the subscription of a cached store: applies every announced generation to the
/// breakers of its key; when the connection drops, the store's calls are strict until it is
/// back and every view has been reset (each breaker's next call then asks the script).
async fn subscriber(
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
                link.view.store(0, Ordering::Release);
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
            let mut parts = text.splitn(4, ' ');
            let (Some(state), Some(generation), Some(remaining), Some(hash)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let (Ok(state), Ok(generation), Ok(remaining)) = (
                state.parse::<i64>(),
                generation.parse::<u64>(),
                remaining.parse::<u64>(),
            ) else {
                continue;
            };
            let links: Vec<Arc<Link>> = strong
                .links
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(hash)
                .map(|links| links.iter().filter_map(std::sync::Weak::upgrade).collect())
                .unwrap_or_default();
            for link in links {
                if let Some(core) = link.core.upgrade() {
                    learn(&core, state, generation, remaining);
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

/// A boxed future: keeps the annotated function's own future small on a local key's path.
type Boxed<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Completes the admission of an `async fn` call on a shared registry: awaits the script's answer
/// and turns `permit` into it. Returns the refusal, if any.
pub fn admit_shared<'p, 'a>(permit: &'p mut Permit<'a>) -> Boxed<'p, Option<Error>> {
    Box::pin(async move {
        let core = permit.asks_store()?;
        let link = core.store.as_ref()?;
        let site = permit.site();
        let client = &link.store.client;
        let (seed, remaining) = core.seed();
        let answer = match call(client, link, "admit", &[seed, remaining]).await {
            Ok(answer) => answer,
            Err(()) => {
                let local = match client.degrade {
                    Degrade::Local => core.enter_general::<false>(site),
                    Degrade::FailOpen => core.store_permit(Word::SETTLED, site),
                    Degrade::FailClosed => core.store_refusal(Reason::Open, None, site),
                };
                permit.replace(local);
                return permit.refusal();
            }
        };
        apply(core, &answer, site);
        let answered = match answer.code {
            1 | 2 => core.store_permit(shared_word(answer.generation, answer.code == 2), site),
            3 => core.store_refusal(Reason::HalfOpenFull, None, site),
            4 => core.store_refusal(Reason::ForcedOpen, None, site),
            5 => core.store_refusal(Reason::Recovering, None, site),
            _ => core.store_refusal(
                Reason::Open,
                Some(Duration::from_millis(answer.remaining_ms)),
                site,
            ),
        };
        permit.replace(answered);
        permit.refusal()
    })
}

/// [`flush_shared`], then gives back `out` (the call's result, moved into this boxed future so
/// the caller's own future holds nothing of it across the await).
pub fn flush_then<'p, T: 'p>(
    permit: &'p Permit<'_>,
    out: T,
) -> std::pin::Pin<Box<impl std::future::Future<Output = T> + 'p>> {
    let flush = flush_shared(permit);
    Box::pin(async move {
        flush.await;
        out
    })
}

/// Waits until the outcome reported on `permit` is recorded in the store (strict mode), bounded
/// by the store's timeout.
pub fn flush_shared<'p>(permit: &'p Permit<'_>) -> Boxed<'p, ()> {
    let core = permit.core();
    Box::pin(async move {
        let Some(link) = core.store.as_ref() else {
            return;
        };
        let target = link.pending.load(Ordering::Acquire);
        let wait = async {
            loop {
                let notified = link.done.notified();
                if link.applied.load(Ordering::Acquire) >= target {
                    return;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(link.store.client.timeout * 2, wait).await;
    })
}

/// An outcome on its way to the store.
struct Report {
    link: Arc<Link>,
    core: Arc<Core>,
    generation: u64,
    outcome: u64,
    slow: u64,
    site: FnName,
}

/// Sends the outcome of a call the store admitted (called when its permit settles).
pub(crate) fn report(core: &Core, word: Word, start: u64, site: FnName, failure: Option<bool>) {
    let Some(link) = core.store.as_ref() else {
        return;
    };
    let outcome = match failure {
        None => 0,
        Some(false) => 1,
        Some(true) => 2,
    };
    let slow = u64::from(failure.is_some() && core.slow_since(start));
    send(link, word.0 >> 4, outcome, slow, site);
}

/// The `outcome` of a job that reads the shared state instead of reporting.
const LEARN: u64 = 3;

/// Hands a job to the reporting task (or, when it is gone, applies it locally).
fn send(link: &Arc<Link>, generation: u64, outcome: u64, slow: u64, site: FnName) {
    let failure = match outcome {
        1 => Some(false),
        2 => Some(true),
        _ => None,
    };
    link.pending.fetch_add(1, Ordering::AcqRel);
    let Some(owner) = link.core.upgrade() else {
        link.applied.fetch_add(1, Ordering::AcqRel);
        return;
    };
    let job = Report {
        link: link.clone(),
        core: owner,
        generation,
        outcome,
        slow,
        site,
    };
    if let Err(failed) = link.store.reports.send(job) {
        let job = failed.0;
        job.core.report_locally(failure, site);
        job.link.applied.fetch_add(1, Ordering::AcqRel);
        job.link.done.notify_waiters();
    }
}

/// The most reports sent in one round trip.
const BATCH: usize = 256;

/// Sends reports in order: one script call each, and the reports queued meanwhile (up to
/// [`BATCH`]) pipelined in one round trip.
async fn worker(client: Arc<Client>, mut rx: tokio::sync::mpsc::UnboundedReceiver<Report>) {
    let mut batch = Vec::with_capacity(BATCH);
    while let Some(job) = rx.recv().await {
        batch.push(job);
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let answers = if batch.len() == 1 {
            let job = &batch[0];
            if job.outcome == LEARN {
                vec![call(&client, &job.link, "state", &[]).await]
            } else {
                let extra = [job.generation, job.outcome, job.slow];
                vec![call(&client, &job.link, "report", &extra).await]
            }
        } else {
            pipelined(&client, &batch).await
        };
        for (job, answer) in batch.drain(..).zip(answers) {
            match answer {
                Ok(answer) => apply(&job.core, &answer, job.site),
                Err(()) => {
                    if client.degrade == Degrade::Local {
                        let failure = match job.outcome {
                            1 => Some(false),
                            2 => Some(true),
                            _ => None,
                        };
                        job.core.report_locally(failure, job.site);
                    }
                }
            }
            if job.outcome == LEARN {
                job.link.learning.store(false, Ordering::Release);
            }
            job.link.applied.fetch_add(1, Ordering::AcqRel);
            job.link.done.notify_waiters();
        }
    }
}

/// The script's `report` for `job`, as an `EVALSHA` command.
fn report_command(client: &Client, job: &Report) -> redis::Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(client.script.get_hash())
        .arg(1)
        .arg(&job.link.hash)
        .arg(if job.outcome == LEARN {
            "state"
        } else {
            "report"
        });
    match &client.time {
        Some(clock) => cmd.arg(clock.now_nanos() / 1_000_000),
        None => cmd.arg(""),
    };
    for value in job.link.args.iter() {
        cmd.arg(*value);
    }
    if job.outcome != LEARN {
        cmd.arg(job.generation).arg(job.outcome).arg(job.slow);
    }
    cmd
}

/// Sends `batch` in one pipeline (loading the script once when Redis answers `NOSCRIPT`), bounded
/// by the store's timeout; one answer per report, in order.
async fn pipelined(client: &Client, batch: &[Report]) -> Vec<Result<Answer, ()>> {
    let mut pipe = redis::pipe();
    for job in batch {
        pipe.add_command(report_command(client, job));
    }
    let mut conn = client.conn.clone();
    let mut result =
        tokio::time::timeout(client.timeout, pipe.query_async::<Vec<Vec<i64>>>(&mut conn)).await;
    if let Ok(Err(error)) = &result
        && error.code() == Some("NOSCRIPT")
    {
        let reload = async {
            client
                .script
                .prepare_invoke()
                .load_async(&mut conn)
                .await
                .ok()?;
            Some(pipe.query_async::<Vec<Vec<i64>>>(&mut conn).await)
        };
        if let Ok(Some(again)) = tokio::time::timeout(client.timeout, reload).await {
            result = Ok(again);
        }
    }
    let first = &batch[0].link;
    match result {
        Ok(Ok(answers)) if answers.len() == batch.len() => batch
            .iter()
            .zip(answers)
            .map(|(job, values)| answer_of(client, &job.link, values))
            .collect(),
        Ok(Ok(answers)) => {
            degrade_event(client, first, &format!("{} answers", answers.len()));
            batch.iter().map(|_| Err(())).collect()
        }
        Ok(Err(error)) => {
            degrade_event(client, first, &error.to_string());
            batch.iter().map(|_| Err(())).collect()
        }
        Err(_) => {
            degrade_event(
                client,
                first,
                &format!("no answer within {:?}", client.timeout),
            );
            batch.iter().map(|_| Err(())).collect()
        }
    }
}
