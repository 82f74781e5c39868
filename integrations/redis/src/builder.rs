//! [`RedisStoreBuilder`]: a store's settings, and the connection that makes a [`RedisStore`] of
//! them (a `PING` answered and the script loaded before the store is handed out).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use super::cached::{subscribe, subscriber};
use super::conn::Conn;
use super::link::{Bound, Client, Rounds, SharedStore};
use super::store::RedisStore;
use super::task::worker;
use super::{
    DEFAULT_IDLE_TTL, DEFAULT_LOCAL_RECOVERY_AFTER, DEFAULT_TIMEOUT, DEFAULT_TIMEOUT_CEILING,
    Degrade, Mode, StoreError, StoreErrorKind,
};
use fusebox::clock::Clock;

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
}

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
    /// call, in [`Mode::Aggregated`] (default [`DEFAULT_FLUSH_INTERVAL`](super::DEFAULT_FLUSH_INTERVAL),
    /// 20 ms; 1 ms to [`MAX_FLUSH_INTERVAL`](super::MAX_FLUSH_INTERVAL), checked by `connect`).
    /// Longer: less work for Redis, and up to that much more of each replica's calls admitted
    /// after a threshold was crossed.
    #[must_use]
    pub fn flush_interval(mut self, interval: Duration) -> Self {
        self.flush_interval = interval;
        self
    }

    /// A fixed bound on every store call, instead of the default adaptive one (see
    /// [`adaptive_timeout`](RedisStoreBuilder::adaptive_timeout)): 1 ms to
    /// [`MAX_TIMEOUT`](super::MAX_TIMEOUT), checked by `connect`.
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
    /// `ceiling`. Both 1 ms to [`MAX_TIMEOUT`](super::MAX_TIMEOUT), checked by `connect`.
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

    /// Idle time after which Redis forgets a breaker's key (default [`DEFAULT_IDLE_TTL`]; 1 ms to
    /// [`MAX_IDLE_TTL`](super::MAX_IDLE_TTL), checked by `connect`).
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
        self.validate()?;
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
            // Below 2^53: the script returns it as a number, exact as a double.
            replica: fastrand::u64(1..1 << 53),
            sequence: AtomicU64::new(0),
            admissions: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            outages: AtomicU64::new(0),
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
                ttl_ms: u64::try_from(self.idle_ttl.as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1),
                local: self.local,
                reports: tx,
            }),
        })
    }
}

impl RedisStoreBuilder {
    /// Refuses a setting out of its range, naming it, before anything is connected.
    fn validate(&self) -> Result<(), StoreError> {
        let min = Duration::from_millis(1);
        for (setting, value, max, example) in [
            (
                "timeout",
                self.timeout,
                super::MAX_TIMEOUT,
                "Duration::from_secs(1)",
            ),
            (
                "adaptive_timeout` ceiling",
                self.timeout_ceiling,
                super::MAX_TIMEOUT,
                "Duration::from_secs(1)",
            ),
            (
                "idle_ttl",
                self.idle_ttl,
                super::MAX_IDLE_TTL,
                "Duration::from_secs(24 * 60 * 60)",
            ),
            (
                "flush_interval",
                self.flush_interval,
                super::MAX_FLUSH_INTERVAL,
                "Duration::from_millis(20)",
            ),
        ] {
            if value < min || value > max {
                return Err(StoreError::new(
                    StoreErrorKind::InvalidSetting,
                    format!(
                        "redis store setting `{setting}` is {value:?}; it must be between {min:?} and {max:?} (for instance `{example}`)"
                    ),
                    None,
                ));
            }
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::super::{RedisStore, StoreErrorKind};
    use std::time::Duration;

    /// Refused before any connection: no server listens at this URL, so a setting that got past
    /// the check would fail as `Unreachable` instead.
    const NOWHERE: &str = "redis://127.0.0.1:1/";

    async fn refused(builder: super::RedisStoreBuilder, setting: &str) {
        let error = builder
            .connect()
            .await
            .expect_err("an absurd setting is refused");
        assert_eq!(error.kind(), StoreErrorKind::InvalidSetting, "{error}");
        let text = error.to_string();
        assert!(
            text.contains(&format!("`{setting}")),
            "names the setting: {text}"
        );
        assert!(text.starts_with(char::is_lowercase), "lowercase: {text}");
    }

    #[tokio::test]
    async fn absurd_durations_are_refused_at_connect_naming_the_setting() {
        let store = || RedisStore::builder(NOWHERE);
        refused(store().timeout(Duration::MAX), "timeout").await;
        refused(store().timeout(Duration::ZERO), "timeout").await;
        refused(
            store().adaptive_timeout(Duration::from_millis(5), Duration::from_secs(3_600)),
            "adaptive_timeout",
        )
        .await;
        refused(store().idle_ttl(Duration::from_secs(1 << 62)), "idle_ttl").await;
        refused(store().flush_interval(Duration::ZERO), "flush_interval").await;
        // In range: refused only for the unreachable address.
        let error = store()
            .timeout(super::super::MAX_TIMEOUT)
            .idle_ttl(super::super::MAX_IDLE_TTL)
            .connect()
            .await
            .expect_err("nothing listens there");
        assert_eq!(error.kind(), StoreErrorKind::Unreachable, "{error}");
    }
}
