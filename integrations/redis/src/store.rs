//! The store: [`RedisStoreBuilder`] (the settings and the connection), [`RedisStore`] (what a
//! registry shares its breakers through, and the operator calls `state` and `force`), and the
//! two sides of the store seam: `RedisStore` links a breaker's key, and the key's link is what
//! the breaker calls.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use super::admit::{admit, flush};
use super::cached::{cached_admit, subscribe, subscriber};
use super::conn::Conn;
use super::link::{Bound, Client, Rounds, SharedKey, SharedStore};
use super::report::{report, worker};
use super::script::{TIME_WINDOW, apply, call, counts_of, state_of, time_slice_ms};
use super::{
    DEFAULT_IDLE_TTL, DEFAULT_LOCAL_RECOVERY_AFTER, DEFAULT_TIMEOUT, DEFAULT_TIMEOUT_CEILING,
    Degrade, Mode, StoreError, StoreErrorKind,
};
use fusebox::State;
use fusebox::clock::Clock;
use fusebox::store::{
    Admission, BoxFuture, CircuitRef, Link, Outcome, SharedKey as Seam, Site, Ticket, WeakCircuit,
};
use fusebox::{Error, Reason};
use fusebox::{Policy, Recovery, Window};

/// Settings of a [`RedisStore`]; start with [`RedisStore::builder`].
pub struct RedisStoreBuilder {
    url: String,
    timeout: Duration,
    /// The adaptive bound's ceiling; equal to `timeout` for a fixed bound.
    timeout_ceiling: Duration,
    local_recovery_after: Duration,
    prefix: String,
    degrade: Degrade,
    idle_ttl: Duration,
    local: Vec<String>,
    time: Option<Arc<dyn Clock>>,
    mode: Mode,
    flush_interval: Duration,
}

impl fmt::Debug for RedisStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStoreBuilder")
            .field("url", &super::redact(&self.url))
            .field("timeout", &self.timeout)
            .field("prefix", &self.prefix)
            .field("degrade", &self.degrade)
            .field("mode", &self.mode)
            .finish()
    }
}

impl RedisStoreBuilder {
    /// How calls use Redis (default [`Mode::Strict`]).
    #[must_use]
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// How long a replica sums a closed circuit's outcomes before it sends them in one script
    /// call, in [`Mode::Aggregated`] (default [`DEFAULT_FLUSH_INTERVAL`](super::DEFAULT_FLUSH_INTERVAL), 20 ms; at least 1 ms).
    /// Longer: less work for Redis, and up to that much more of each replica's calls admitted
    /// after a threshold was crossed.
    #[must_use]
    pub fn flush_interval(mut self, interval: Duration) -> Self {
        self.flush_interval = interval.max(Duration::from_millis(1));
        self
    }

    /// A fixed bound on every store call, instead of the default adaptive one (see
    /// [`adaptive_timeout`](RedisStoreBuilder::adaptive_timeout)).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self.timeout_ceiling = timeout;
        self
    }

    /// A bound on every store call that adapts to the round trips observed: the smoothed round
    /// trip plus four times its mean deviation, doubled after a call that timed out, kept
    /// between `floor` and `ceiling` (the default: [`DEFAULT_TIMEOUT`] and
    /// [`DEFAULT_TIMEOUT_CEILING`]). A host whose round trips slow down under load keeps its
    /// store calls instead of degrading; a store that stops answering is noticed within
    /// `ceiling`.
    #[must_use]
    pub fn adaptive_timeout(mut self, floor: Duration, ceiling: Duration) -> Self {
        self.timeout = floor;
        self.timeout_ceiling = ceiling.max(floor);
        self
    }

    /// How long a shared key's local breaker, while the store does not answer, keeps an open
    /// circuit open past its wait instead of running a half-open of its own (default
    /// [`DEFAULT_LOCAL_RECOVERY_AFTER`]); the store grants the probes of a shared key, so within
    /// this bound no replica probes alone. Counted from the store's first unanswered call.
    #[must_use]
    pub fn local_recovery_after(mut self, after: Duration) -> Self {
        self.local_recovery_after = after;
        self
    }

    /// Prefix of the Redis key names, `{prefix:key}` (default `fusebox`).
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// What to do when Redis does not answer (default [`Degrade::Local`]).
    #[must_use]
    pub fn degrade(mut self, degrade: Degrade) -> Self {
        self.degrade = degrade;
        self
    }

    /// Idle time after which Redis forgets a breaker's key (default [`DEFAULT_IDLE_TTL`]).
    #[must_use]
    pub fn idle_ttl(mut self, ttl: Duration) -> Self {
        self.idle_ttl = ttl;
        self
    }

    /// Keeps `key` local: its breaker is not shared (per-host dynamic keys, for instance).
    #[must_use]
    pub fn local_key(mut self, key: impl Into<String>) -> Self {
        self.local.push(key.into());
        self
    }

    /// For tests: the script takes time from `clock` instead of Redis `TIME`.
    #[must_use]
    pub fn time_from(mut self, clock: impl Clock) -> Self {
        self.time = Some(Arc::new(clock));
        self
    }

    /// Connects, then checks what the store relies on before handing it out: Redis answers
    /// `PING` (so the password, if Redis wants one, was accepted), and it loads fusebox's Lua
    /// script. Each step is bounded by the timeout (at least one second).
    ///
    /// # Errors
    ///
    /// A [`StoreError`] whose [`kind`](StoreError::kind) says which step failed: the URL is
    /// invalid ([`StoreErrorKind::InvalidUrl`]), nothing answers at it
    /// ([`StoreErrorKind::Unreachable`]), Redis wants a password that is missing or wrong
    /// ([`StoreErrorKind::Authentication`]), what answers is not Redis
    /// ([`StoreErrorKind::NotRedis`]), or Redis refuses the script
    /// ([`StoreErrorKind::ScriptRefused`]). Its message shows the URL without its password.
    pub async fn connect(self) -> Result<RedisStore, StoreError> {
        let url = super::redact(&self.url);
        if let Some(nodes) = super::conn::cluster_nodes(&self.url) {
            return self.connect_cluster(nodes, url).await;
        }
        let client = redis::Client::open(self.url.as_str()).map_err(|e| {
            StoreError::new(
                StoreErrorKind::InvalidUrl,
                format!(
                    "invalid redis url `{url}` ({}); expected `redis://[user][:password@]host:port/[db]`",
                    first_line(&e)
                ),
                Some(e),
            )
        })?;
        let budget = self.timeout.max(Duration::from_secs(1));
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(budget))
            .set_response_timeout(Some(self.timeout_ceiling))
            .set_number_of_retries(1)
            .set_max_delay(self.timeout);
        let client_for_pubsub = client.clone();
        let conn = tokio::time::timeout(budget, client.get_connection_manager_with_config(config))
            .await
            .map_err(|_| silent(&url, "the connection", budget))?
            .map_err(|e| connect_error(&url, "while connecting", e))?;
        self.start(Conn::Single(conn), vec![client_for_pubsub], url)
            .await
    }

    /// As [`connect`](RedisStoreBuilder::connect), for a `redis+cluster://` URL: a cluster
    /// connection to `nodes`, subscribed (cached modes) to each node in turn.
    #[cfg(feature = "cluster")]
    async fn connect_cluster(
        self,
        nodes: Vec<String>,
        url: String,
    ) -> Result<RedisStore, StoreError> {
        let invalid = |e: redis::RedisError| {
            StoreError::new(
                StoreErrorKind::InvalidUrl,
                format!(
                    "invalid redis cluster url `{url}` ({}); expected `redis+cluster://[user][:password@]host:port[,host:port...]/`",
                    first_line(&e)
                ),
                Some(e),
            )
        };
        let mut subscribe_to = Vec::with_capacity(nodes.len());
        for node in &nodes {
            subscribe_to.push(redis::Client::open(node.as_str()).map_err(invalid)?);
        }
        let budget = self.timeout.max(Duration::from_secs(1));
        let client = redis::cluster::ClusterClientBuilder::new(nodes)
            .connection_timeout(budget)
            .response_timeout(self.timeout_ceiling)
            .retries(2)
            .build()
            .map_err(invalid)?;
        let conn = tokio::time::timeout(budget, client.get_async_connection())
            .await
            .map_err(|_| silent(&url, "the connection", budget))?
            .map_err(|e| connect_error(&url, "while connecting", e))?;
        self.start(Conn::Cluster(conn), subscribe_to, url).await
    }

    /// A cluster URL without the `cluster` feature: an error that says so.
    #[cfg(not(feature = "cluster"))]
    async fn connect_cluster(
        self,
        _nodes: Vec<String>,
        url: String,
    ) -> Result<RedisStore, StoreError> {
        Err(StoreError::new(
            StoreErrorKind::InvalidUrl,
            format!(
                "`{url}` is a redis cluster url; enable fusebox-redis's `cluster` feature to connect to a cluster (`fusebox-redis = {{ version = \"0.1\", features = [\"cluster\"] }}`)"
            ),
            None,
        ))
    }

    /// Checks `PING` and loads the script on `conn`, then starts the store: its reporting task
    /// and, in the cached modes, its subscription (to the first of `subscribe_to` that answers).
    async fn start(
        self,
        mut conn: Conn,
        subscribe_to: Vec<redis::Client>,
        url: String,
    ) -> Result<RedisStore, StoreError> {
        let budget = self.timeout.max(Duration::from_secs(1));
        let pong: String = tokio::time::timeout(budget, redis::cmd("PING").query_async(&mut conn))
            .await
            .map_err(|_| silent(&url, "`PING`", budget))?
            .map_err(|e| connect_error(&url, "to `PING`", e))?;
        if pong != "PONG" {
            return Err(StoreError::new(
                StoreErrorKind::NotRedis,
                format!(
                    "the server at `{url}` answered `PING` with `{}`, not `PONG`; point the url at a redis server",
                    pong.chars().take(40).collect::<String>()
                ),
                None,
            ));
        }
        let script = redis::Script::new(include_str!("breaker.lua"));
        tokio::time::timeout(budget, script.prepare_invoke().load_async(&mut conn))
            .await
            .map_err(|_| silent(&url, "`SCRIPT LOAD`", budget))?
            .map_err(|e| connect_error(&url, "to `SCRIPT LOAD`", e))?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let client = Arc::new(Client {
            conn,
            script,
            bound: Bound::adaptive(self.timeout, self.timeout_ceiling),
            degrade: self.degrade,
            healthy: AtomicBool::new(true),
            down_since: AtomicU64::new(0),
            local_recovery_after: self.local_recovery_after,
            probing: AtomicBool::new(false),
            replica: fastrand::u64(1..u64::MAX),
            sequence: AtomicU64::new(0),
            admissions: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            time: self.time,
            cached: self.mode != Mode::Strict,
            flush: (self.mode == Mode::Aggregated).then_some(self.flush_interval),
            subscribed: AtomicBool::new(false),
            links: std::sync::Mutex::new(std::collections::HashMap::new()),
            rounds: tokio::sync::Mutex::new(Rounds::new(rx)),
            work: tokio::sync::Notify::new(),
            closing: AtomicBool::new(false),
        });
        tokio::spawn(worker(client.clone()));
        if client.cached {
            // The first subscription is made before the store is handed out, so a reachable
            // Redis gives cached admission from the first call.
            let first = subscribe(&subscribe_to, 0, client.timeout()).await;
            client.subscribed.store(first.is_some(), Ordering::Release);
            tokio::spawn(subscriber(Arc::downgrade(&client), subscribe_to, first));
        }
        Ok(RedisStore {
            inner: Arc::new(SharedStore {
                client,
                prefix: self.prefix,
                ttl_ms: self.idle_ttl.as_millis().max(1) as u64,
                local: self.local,
                reports: tx,
            }),
        })
    }
}

/// The [`StoreError`] of a connection step (`step`) that got no answer within `budget`.
fn silent(url: &str, step: &str, budget: Duration) -> StoreError {
    StoreError::new(
        StoreErrorKind::Unreachable,
        format!(
            "redis at `{url}` did not answer {step} within {budget:?}; start it, or fix the host and port in the url"
        ),
        None,
    )
}

/// The [`StoreError`] of a `redis` error met while connecting (`step`: what was being done:
/// connecting, `PING`, or `SCRIPT LOAD`, whose refusals are the script's), for the URL `url`
/// (already redacted).
fn connect_error(url: &str, step: &str, error: redis::RedisError) -> StoreError {
    use redis::ErrorKind;
    let script = step.ends_with("`SCRIPT LOAD`");
    let why = first_line(&error);
    let code = error.code();
    let auth = matches!(error.kind(), ErrorKind::AuthenticationFailed)
        || matches!(code, Some("NOAUTH" | "WRONGPASS"))
        || (!script && code == Some("NOPERM"))
        || (code == Some("ERR") && error.detail().is_some_and(|d| d.contains("AUTH")));
    let (kind, message) = if auth {
        let fix = if code == Some("NOAUTH") {
            "redis requires a password: put it in the url (`redis://:password@host:port/`, or `redis://user:password@host:port/` for an acl user)"
        } else {
            "fix the user and password in the url (`redis://:password@host:port/`, or `redis://user:password@host:port/` for an acl user)"
        };
        (
            StoreErrorKind::Authentication,
            format!("redis at `{url}` refused the authentication {step} ({why}); {fix}"),
        )
    } else if error.is_io_error() || error.is_timeout() || error.is_connection_refusal() {
        (
            StoreErrorKind::Unreachable,
            format!(
                "cannot reach redis at `{url}` ({why}, {step}); start it, or fix the host and port in the url"
            ),
        )
    } else if script && code.is_some() {
        (
            StoreErrorKind::ScriptRefused,
            format!(
                "redis at `{url}` refused to load fusebox's lua script ({why}); allow `SCRIPT LOAD` and `EVALSHA` for this user (acl `+@scripting`) and keep lua scripting enabled"
            ),
        )
    } else {
        (
            StoreErrorKind::NotRedis,
            format!(
                "the server at `{url}` does not speak the redis protocol ({why}, {step}); point the url at a redis server (redis listens on port 6379 by default)"
            ),
        )
    };
    StoreError::new(kind, message, Some(error))
}

/// The first line of a `redis` error's text (a parse error quotes what it read on more lines).
fn first_line(error: &redis::RedisError) -> String {
    let text = error.to_string();
    text.lines()
        .next()
        .unwrap_or_default()
        .trim_end()
        .to_owned()
}

/// A Redis store shared by the replicas of a service; hand it to [`Registry::share`](fusebox::Registry::share).
#[derive(Clone)]
pub struct RedisStore {
    pub(super) inner: Arc<SharedStore>,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.inner.prefix)
            .field("timeout", &self.inner.client.timeout())
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
    #[must_use]
    pub fn builder(url: &str) -> RedisStoreBuilder {
        RedisStoreBuilder {
            url: url.to_owned(),
            timeout: DEFAULT_TIMEOUT,
            timeout_ceiling: DEFAULT_TIMEOUT_CEILING,
            local_recovery_after: DEFAULT_LOCAL_RECOVERY_AFTER,
            prefix: "fusebox".to_owned(),
            degrade: Degrade::Local,
            idle_ttl: DEFAULT_IDLE_TTL,
            local: Vec::new(),
            time: None,
            mode: Mode::Strict,
            flush_interval: super::DEFAULT_FLUSH_INTERVAL,
        }
    }

    /// True while this store admits from its cached view: [`Mode::Cached`], the pub/sub
    /// subscription up and Redis answering. False in [`Mode::Strict`], and in cached mode while
    /// the subscription is down (calls are then strict until it is back).
    #[must_use]
    pub fn is_cached(&self) -> bool {
        let client = &self.inner.client;
        client.cached
            && client.subscribed.load(Ordering::Acquire)
            && client.healthy.load(Ordering::Acquire)
    }

    /// Outcomes this replica gave up sending: the store did not record them after every resend,
    /// or they overflowed the resend queue. With [`Degrade::Local`] they counted on this
    /// replica's local breaker only; with the other [`Degrade`]s, nowhere.
    #[must_use]
    pub fn dropped_reports(&self) -> u64 {
        self.inner.client.dropped.load(Ordering::Acquire)
    }

    /// Sends now what this replica has not sent yet (in [`Mode::Aggregated`], the outcomes summed
    /// since the last flush interval; in every mode, the reports queued), and waits until the
    /// store has recorded them, bounded by twice the store's timeout per key. For a graceful
    /// shutdown: outcomes summed and never sent are lost with the process.
    pub async fn flush(&self) {
        let links: Vec<Arc<SharedKey>> = {
            let links = self
                .inner
                .client
                .links
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            links
                .values()
                .flatten()
                .filter_map(std::sync::Weak::upgrade)
                .collect()
        };
        let Some(first) = links.first() else {
            return;
        };
        super::report::send_flush_now(first);
        for link in &links {
            super::admit::flush(link).await;
        }
    }

    /// The bound on the next store call (see
    /// [`RedisStoreBuilder::adaptive_timeout`]).
    #[must_use]
    pub fn timeout(&self) -> Duration {
        self.inner.client.timeout()
    }

    /// The Redis key name of breaker `key`.
    #[must_use]
    pub fn redis_key(&self, key: &str) -> String {
        format!("{{{}:{}}}", self.inner.prefix, key)
    }

    /// The shared state of breaker `key` under `policy`, as Redis holds it. Reading never creates
    /// the key: a key Redis does not hold reads as closed, generation 0, no calls (a key holding
    /// data fusebox did not write is deleted, with an ERROR event, and reads the same).
    ///
    /// # Errors
    ///
    /// An [`Error`] with reason `TimedOut` when Redis does not answer within the store timeout.
    pub async fn state(&self, key: &str, policy: Policy) -> Result<SharedState, Error> {
        let link = self.key_link(key, policy);
        let answer = call(&self.inner.client, &link, "read", &[])
            .await
            .map_err(|_| Error::new(fusebox::Key::from(key), Reason::TimedOut, None))?;
        Ok(SharedState {
            state: state_of(answer.state),
            generation: answer.generation,
            calls: answer.calls as u32,
            failures: answer.failures as u32,
        })
    }

    /// Moves breaker `key` to `state` in Redis for every replica (operator action): `Closed`
    /// resets, `ForcedOpen` rejects every call, `Disabled` admits every call and never opens.
    ///
    /// The transition is announced once, by this replica: its breaker for `key` (one a registry
    /// sharing this store has created) emits it (`trigger = "operator"`, `function = "operator"`,
    /// the counts of the window it ended) to the `tracing` events and to its registry's
    /// `on_transition` hooks, and its local breaker follows the new state (`Breaker::state`
    /// shows it). Without such a breaker on this replica, only the `tracing` event is emitted.
    /// Moving a key to the state it is in starts a new window and announces nothing.
    ///
    /// Forcing repairs the key: whatever it holds (fields or window slots fusebox did not write,
    /// another type of key), the forced state is written anew under the next generation.
    ///
    /// Other replicas announce nothing: they learn the new state, and their local breakers
    /// follow it, from the next answer of the script to one of their calls on `key` (strict
    /// mode), or from the subscription's message (cached mode), before any later call of theirs
    /// is admitted from the view.
    ///
    /// # Errors
    ///
    /// An [`Error`] with reason `TimedOut` when Redis does not answer within the store timeout.
    pub async fn force(&self, key: &str, policy: Policy, state: State) -> Result<(), Error> {
        let target = match state {
            State::ForcedOpen => 3,
            State::Disabled => 4,
            _ => 0,
        };
        let link = self.key_link(key, policy);
        let answer = call(&self.inner.client, &link, "force", &[target])
            .await
            .map_err(|_| Error::new(fusebox::Key::from(key), Reason::TimedOut, None))?;
        let operator = Site::new(&"operator");
        let breakers: Vec<Arc<SharedKey>> = self
            .inner
            .client
            .links
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&link.hash)
            .map(|links| links.iter().filter_map(std::sync::Weak::upgrade).collect())
            .unwrap_or_default();
        let mut announced = false;
        for shared in breakers {
            if let Some(core) = shared.circuit() {
                apply(&shared, core.get(), &answer, operator);
                announced = true;
            }
        }
        if !announced && answer.committed_from >= 0 {
            fusebox::store::announce_unheld(
                key,
                state_of(answer.committed_from),
                state_of(answer.state),
                counts_of(&answer),
                operator,
            );
        }
        Ok(())
    }

    pub(super) fn key_link(&self, key: &str, policy: Policy) -> SharedKey {
        let settings = policy.settings();
        let open_for = nanos(settings.open_for);
        let open_max = nanos(settings.open_max).max(open_for);
        let ms = |nanos: u64| nanos.div_ceil(1_000_000).max(1);
        let args = [
            self.inner.ttl_ms,
            match settings.window {
                Window::Time(span) => TIME_WINDOW + time_slice_ms(span),
                Window::Count(n) => u64::from(n),
                // The enum is non-exhaustive; a later kind is added here.
                _ => 0,
            },
            u64::from(settings.min_calls),
            settings.failure_rate.map_or(0, u64::from),
            if settings.slow.is_some() {
                u64::from(settings.slow_rate)
            } else {
                0
            },
            settings.consecutive.map_or(0, u64::from),
            ms(open_for),
            // The factor in thousandths, as the policy holds it (the division is exact to undo).
            (settings.open_backoff * 1000.0).round() as u64,
            ms(open_max),
            match settings.recovery {
                Recovery::Progressive { phases, min_passes } => {
                    TIME_WINDOW + (u64::from(phases) << 20) + u64::from(min_passes)
                }
                // `Recovery::Probes` (the enum is non-exhaustive).
                _ => u64::from(settings.half_open),
            },
            ms(lease_nanos(&policy)),
            settings.failure_count.map_or(0, u64::from),
        ];
        SharedKey {
            hash: self.redis_key(key),
            args,
            unconfirmed: AtomicU64::new(0),
            // Aggregated mode's bound is its flush interval: gating its views would send every
            // call to the script while a backend fails often without tripping.
            gate: if self.inner.client.flush.is_some() {
                u64::MAX
            } else {
                fewest_failures_to_trip(&policy)
            },
            store: self.inner.clone(),
            pending: AtomicU64::new(0),
            applied: AtomicU64::new(0),
            done: tokio::sync::Notify::new(),
            core: None,
            view: AtomicU64::new(0),
            known: std::sync::Mutex::default(),
            learning: AtomicBool::new(false),
            forced: AtomicBool::new(false),
            delta: std::sync::Mutex::default(),
            successes: AtomicU64::new(0),
        }
    }
}

/// `duration` in nanoseconds, saturating at `u64::MAX`.
fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// The half-open lease of `policy` in nanoseconds.
fn lease_nanos(policy: &Policy) -> u64 {
    nanos(policy.settings().half_open_lease)
}

/// The fewest failures that can open `policy`'s circuit from an empty window (its `consecutive`,
/// its `failure_count`, or its rate's share of `min_calls`; `u64::MAX` when only the slow-call
/// rule trips it): a replica with this many failures the script has not answered admits no more
/// calls from its view ([`SharedKey::gate`]).
fn fewest_failures_to_trip(policy: &Policy) -> u64 {
    let settings = policy.settings();
    let min_calls = match settings.window {
        Window::Count(n) => settings.min_calls.min(n),
        _ => settings.min_calls,
    };
    [
        settings.consecutive.map(u64::from),
        settings.failure_count.map(u64::from),
        settings
            .failure_rate
            .map(|rate| (u64::from(min_calls) * u64::from(rate)).div_ceil(100)),
    ]
    .into_iter()
    .flatten()
    .map(|failures| failures.max(1))
    .min()
    .unwrap_or(u64::MAX)
}

/// A breaker's state as Redis holds it ([`RedisStore::state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedState {
    /// The shared state.
    pub state: State,
    /// The generation, bumped by every transition (0 when Redis holds no key).
    pub generation: u64,
    /// Outcomes in the current window.
    pub calls: u32,
    /// Failures among them.
    pub failures: u32,
}

/// The store shares every key of a registry but those [`RedisStoreBuilder::local_key`] names and
/// those whose window the script does not support.
impl fusebox::store::Store for RedisStore {
    fn link(&self, circuit: WeakCircuit) -> Link {
        let key = circuit.key();
        if self.inner.local.iter().any(|k| k == key) {
            return Link::Local;
        }
        let policy = *circuit.policy();
        if matches!(policy.settings().window, Window::Time(span) if time_slice_ms(span) == 0) {
            tracing::error!(
                target: "fusebox",
                key,
                field = "window",
                "breaker `{key}` uses a `window` the redis store does not share; it stays local (use a time window whose tenth is a whole number of milliseconds (`window = \"1s\"`) to share it)"
            );
            return Link::Unshareable;
        }
        if policy.settings().open_for_fn.is_some() {
            tracing::warn!(
                target: "fusebox",
                key,
                field = "open_for",
                "breaker `{key}` computes its open wait with a function, which the redis store cannot run: on this shared key every opening waits `open_for` (then this replica's `open_jitter`); keep the key local (`shared = false`) to use the function"
            );
        }
        let mut link = self.key_link(key, policy);
        let hash = link.hash.clone();
        link.core = Some(circuit);
        let link = Arc::new(link);
        let mut links = self
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
        entry.push(Arc::downgrade(&link));
        Link::Shared(Box::new(KeyLink(link)))
    }
}

/// A shared breaker's link, as the breaker holds it: its key's side of the store.
struct KeyLink(Arc<SharedKey>);

/// A shared breaker's link is its key's side of the store.
impl Seam for KeyLink {
    fn admit_now(&self, core: CircuitRef<'_>, site: Site, can_wait: bool) -> Option<Admission> {
        cached_admit(core, &self.0, site, can_wait)
    }

    fn admit<'a>(&'a self, core: CircuitRef<'a>, site: Site) -> BoxFuture<'a, Admission> {
        admit(&self.0, core, site)
    }

    fn report(&self, ticket: Ticket, site: Site, outcome: Outcome) {
        report(&self.0, ticket, site, outcome);
    }

    fn awaits_recording(&self) -> bool {
        // While the store does not answer, a call does not wait for a recording that cannot
        // come (its outcome is resent by the reporting task). A cached call awaits it while the
        // view is gated (too many of this replica's failures unanswered).
        let link = &self.0;
        (!link.caches() || link.gated()) && link.store.client.healthy.load(Ordering::Acquire)
    }

    fn flush(&self) -> BoxFuture<'_, ()> {
        flush(&self.0)
    }

    fn degraded(&self) -> bool {
        !self.0.store.client.healthy.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::fewest_failures_to_trip;
    use fusebox::Policy;
    use std::time::Duration;

    #[test]
    fn the_gate_is_the_fewest_failures_any_rule_trips_on() {
        // The default: half of 10 calls.
        assert_eq!(fewest_failures_to_trip(&Policy::new()), 5);
        assert_eq!(fewest_failures_to_trip(&Policy::new().consecutive(3)), 3);
        assert_eq!(
            fewest_failures_to_trip(&Policy::new().failure_count(50).failure_rate(10)),
            1
        );
        // `min_calls` above a count window is the window.
        assert_eq!(
            fewest_failures_to_trip(&Policy::new().window(4).min_calls(10).failure_rate(50)),
            2
        );
        assert_eq!(
            fewest_failures_to_trip(
                &Policy::new()
                    .time_window(Duration::from_secs(10))
                    .min_calls(20)
                    .failure_rate(100)
            ),
            20
        );
        // Only the slow-call rule trips: no gate.
        assert_eq!(
            fewest_failures_to_trip(&Policy::new().rate_off().slow(Duration::from_secs(1))),
            u64::MAX
        );
    }
}
