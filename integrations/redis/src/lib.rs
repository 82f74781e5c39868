//! One circuit across replicas: fusebox's breakers sharing their state through Redis, a store
//! behind fusebox's store seam ([`fusebox::store`]). The [`replicas`] chapter says when to share
//! and what each mode costs; this page is the reference.
//!
//! ```toml
//! [dependencies]
//! fusebox = "0.1"
//! fusebox-redis = "0.1"   # features = ["cluster"] for `redis+cluster://` URLs
//! ```
//!
//! ```no_run
//! # async fn run() -> Result<(), fusebox_redis::StoreError> {
//! let store = fusebox_redis::RedisStore::connect("redis://127.0.0.1:6379/").await?;
//! fusebox::registry().share(store); // every breaker of the registry is now one circuit across replicas
//! # Ok(()) }
//! ```
//!
//! **How.** Each breaker key is one Redis hash, `{prefix:key}` (hash-tagged, so it works on Redis
//! Cluster), expiring after an idle TTL. One Lua script, loaded once and run with `EVALSHA`
//! (reloaded when Redis answers `NOSCRIPT`), does admission and outcome recording atomically on
//! it, with time from Redis `TIME`. Every transition bumps a generation; a result admitted under an
//! older generation changes nothing (but for the outcome of a call a replica admitted while it
//! could reach neither Redis nor a view of the key: it counts if the circuit is closed when it
//! arrives, see [`Degrade::Local`]). The script's answer names the rule that committed a
//! transition, so the replica that committed it announces it with the `trigger` an in-memory
//! breaker gives (`consecutive`, `slow_rate`, `open_wait_over`, …). Half-open probe permits are
//! taken inside the script, so the number of probes is exact across replicas, and a probe lease
//! re-arms the probes of a replica that died. A probe the script grants to an admission whose
//! answer never reached its replica (the call timed out while Redis was busy, failed, or its
//! caller dropped it) is given back by a `cancel` sent after it on the same connection, so it is
//! not held until the lease. Every script call is O(1) in the window size (the
//! count window is a ring of slots in the hash, with running totals); a report carries the
//! outcomes its replica settled during one round trip (at most 1,024) and costs one step each.
//!
//! **Which calls go to Redis ([`Mode::Strict`], the default).** Every call shape. An annotated
//! `async fn` (with or without `timeout`) awaits admission from the script before its body runs,
//! and awaits its outcome's recording before it returns: in this mode no call is admitted after a
//! replica committed OPEN. The attempt driver (`retry`, `backoff`, `deadline`) does the same for
//! every attempt. Callers that cannot await (sync functions, [`Breaker::try_acquire`](fusebox::Breaker::try_acquire)
//! and the calls built on it, the tower layer's `call`) ask the script on their own thread,
//! bounded by the store's timeout, through the store's reporting task (so their admission comes
//! after this replica's earlier reports); their outcomes go to the script off the call path (the
//! tower layer's response future awaits the recording). On a current-thread tokio runtime, which
//! cannot wait for its own store task, such a call is decided from the replica's view of the key
//! (the state the script last answered) or, while that is unknown, as while the store does not
//! answer, and a background read fetches the view for the next call.
//!
//! **Cached mode** ([`RedisStoreBuilder::mode`] with [`Mode::Cached`]). Each replica keeps a
//! view of every shared key (state and generation), learnt from the script's answers and from
//! a pub/sub subscription on a dedicated connection, on which the script announces every new
//! generation (channel [`TRANSITIONS`]). While the view says closed (or disabled), a call is
//! admitted without a round trip and its outcome is sent to the script off the call path, under
//! the view's generation; while it says open and the wait is not over, or forced open, the call
//! is rejected locally. Otherwise (the open wait over, half-open, a key not seen yet) the call
//! asks the script as in strict mode, so half-open probes stay exact across replicas. Callers
//! that cannot await use the view as in strict mode. What cached
//! mode gives up: between the moment a replica's report commits OPEN and the moment another
//! replica receives the push, that replica still admits calls (and the replica that committed
//! it admits until the script's answer to its report comes back); those calls' outcomes were
//! admitted under the older generation and change nothing. When the subscription drops (or Redis
//! stops answering), the store is strict until it has subscribed again; it then forgets every
//! view, so each key's next call asks the script and resynchronises it
//! ([`RedisStore::is_cached`] says which).
//!
//! **Aggregated mode** ([`Mode::Aggregated`]). As cached mode, and a closed view's outcomes are
//! summed on the replica instead of sent one by one: calls, failures, slow calls, slow
//! failures, the failures before the first success and after the last, and the longest run of
//! failures. One `fold` script call per key per [flush
//! interval](RedisStoreBuilder::flush_interval) (20 ms by default), sent within one interval of
//! the first outcome it sums (its timer is set one tick early, 1 ms or a quarter of the
//! interval when that is less, as tokio's timer fires on the tick after its deadline), carries the sum; the script adds it to the time window's current
//! bucket, or writes it into the count window (at most the window's length of it, the failures
//! and slow calls spread evenly, the counts scaled when the sum is longer than the window), and
//! judges every rule once on the whole sum (`consecutive`
//! on the runs, the one before the sum included). Probes, degraded calls and calls of an older
//! generation are reported as in cached mode. The store's work per key is then bounded by the
//! replicas and the flush interval, whatever the call rate; what it gives up: up to one flush
//! interval of each replica's calls is admitted after a threshold was crossed (on top of cached
//! mode's push), and a rule is judged on whole sums (a sum that crosses `consecutive` in its
//! middle opens when it arrives). [`RedisStore::flush`] sends what is summed now (a graceful
//! shutdown calls it; what was summed and never sent is lost with the process).
//!
//! **Redis Cluster** (feature `cluster`). A `redis+cluster://host:port,host:port/` URL
//! connects to a cluster: every breaker's key is hash-tagged (`{prefix:key}`), so its script call
//! goes to the master of its slot; redis-rs's cluster connection follows `MOVED` and `ASK` and
//! refreshes its slot map after a failover; the reporting task sends one pipeline per key; the
//! subscription (cached and aggregated modes) is made to one node and moves to the next when it
//! drops (a message published on any node reaches every node's subscribers). While a master
//! fails over, its keys' calls degrade as while a single Redis restarts (see below).
//!
//! **Connecting.** [`RedisStore::connect`] hands out a store only once Redis has answered `PING`
//! (so the password in the URL, if Redis wants one, was accepted) and loaded the script; each
//! failure is a [`StoreError`] whose [`StoreErrorKind`] says which (`InvalidUrl`, `Unreachable`,
//! `Authentication`, `NotRedis`, `ScriptRefused`), never a later `TimedOut` on every call. A URL
//! in an error or an event shows no password (`redis://:***@host:6379/0`).
//!
//! **Operators.** [`RedisStore::force`] moves a shared key for every replica and
//! [`RedisStore::state`] reads it; [`Breaker::force_open`](fusebox::Breaker::force_open) and the
//! other manual states of a handle act on the local breaker only (sync calls, degraded calls).
//! A shared breaker's [`Breaker::state`](fusebox::Breaker::state) and snapshot show its local
//! breaker, which mirrors Redis's open, closed, forced-open and disabled states (not half-open).
//! A forced state is announced once (`trigger = "operator"`), by the replica whose
//! [`RedisStore::force`] committed it, and its local breaker follows at once; the other replicas
//! follow silently on the script's next answer to one of their calls (strict mode) or on the
//! subscription's message (cached mode). A replica that makes no call on the key follows too: a
//! snapshot whose last answer from the script is older than
//! [`REFRESH_AFTER`](fusebox::store::REFRESH_AFTER) (1 s) reads the key off the call path, so
//! the next snapshot (and the dashboard and health built on snapshots) shows the shared state:
//! a snapshot is at most 1 s plus one round trip older than the one before it.
//!
//! What each replica shows of a shared key is the shared window and its own calls:
//! - its [`Snapshot`](fusebox::Snapshot) says [`Sharing::Shared`](fusebox::Sharing) (or
//!   [`Sharing::Unshareable`](fusebox::Sharing) for a key whose window the script does not support,
//!   which stays local), carries the shared window, every replica's outcomes, as the script's last
//!   answer to this replica gave it ([`Snapshot::shared_window`](fusebox::Snapshot::shared_window),
//!   with its age), this replica's calls the store admitted
//!   ([`Snapshot::replica_calls`](fusebox::Snapshot::replica_calls)), and whether the store is not
//!   answering ([`Snapshot::degraded`](fusebox::Snapshot::degraded)); its `calls` and `failures`
//!   are the local breaker's (outcomes recorded on it while the store did not answer);
//! - with feature `metrics`, `fusebox_calls_total` counts every call of the replica, the ones the
//!   store admitted included (counted once, where the permit settles), and `fusebox_state`
//!   follows the state the local breaker mirrors, a state committed by another replica included.
//!
//! **Events' counts.** A transition's `calls` and `failures` are the window (or the probes) that
//! decided it, as the script saw them. An `open_wait_over` or `lease_expired` transition carries
//! the window of the state it leaves, as in memory: a shared key opening starts an empty window
//! and nothing is counted while it is open or half-open, so these are 0.
//!
//! **Supported by the script:** count windows and time windows (ten slices, as in memory, when a
//! tenth of the span is a whole number of milliseconds) with `failure_rate`, `slow_rate` and
//! `min_calls`, `consecutive`, `failure_count` (the window's failures, counted in the script),
//! `open_for`, `open_backoff`/`open_max`, `half_open` (N probes) with `half_open_lease`,
//! progressive recovery (phase k of n admits k calls in every n, decided in the script), and the
//! forced states through [`RedisStore::force`]. `open_jitter` applies per replica: a replica
//! that learns the shared circuit open holds its calls until its own spread of the shared wait
//! (never shorter), rejecting locally until then in strict mode too, and then asks the script. An
//! `open_for` function cannot run in the script: such a key is shared with the wait `open_for`,
//! and a WARN event naming the key says so. **Not supported:** a time window whose tenth is
//! not a whole number of milliseconds: such a key stays local (with an error event naming the
//! key), as do keys named by [`RedisStoreBuilder::local_key`] and keys whose policy says
//! [`Policy::shared`](fusebox::Policy::shared)`(false)` (`shared = false` on the attribute or in a
//! key's config table).
//!
//! **Pushback** ([`RetryAfter`](fusebox::RetryAfter), `Retry-After`) is not sent to the script: a
//! shared circuit opens for the policy's wait, so one replica's answer from the server does not
//! hold the whole fleet off. The attempt driver still waits for it on the replica that got it, and
//! the local breaker honours it when it decides alone (the store not answering).
//!
//! **Redis slow or down.** Every store call is bounded by a timeout that adapts to the round
//! trips observed ([`RedisStoreBuilder::adaptive_timeout`]; default between [`DEFAULT_TIMEOUT`]
//! and [`DEFAULT_TIMEOUT_CEILING`]), or a fixed one ([`RedisStoreBuilder::timeout`]). When a call
//! times out it degrades per [`Degrade`], with a WARN event on degrading and an INFO event on
//! recovery. [`Degrade::Local`] (the default) never splits the circuit: a circuit last known
//! closed admits under that view and its outcome is recorded on the local breaker and sent to the
//! store again until it answers (each report recorded at most once, by a per-replica sequence
//! number the script checks; in cached and aggregated modes a key's successes wait summed, as one
//! `count`, so they cost memory by key, not by call; what is given up is counted by
//! [`RedisStore::dropped_reports`] and per key by `fusebox_store_dropped_total{key}`, with a WARN
//! event naming the key once per outage; see [`replicas`]); an
//! open circuit stays open past its wait, since the store grants probes, until the store has been
//! unreachable for [`RedisStoreBuilder::local_recovery_after`]; only then does the local breaker
//! run a half-open of its own. A transition is announced with `shared = true` when committed in
//! the store, `shared = false` when the local breaker decided it alone. While the store does not
//! answer, one `async` call at a time asks it and the others are decided locally without waiting.
//! Every admission sends the local state along; the script uses it only when the key does not
//! exist, so after a Redis restart that lost the state (or when a breaker already in use is first
//! shared) an open, forced-open or disabled circuit is pushed back with its remaining wait.
//!
//! **Corrupt data.** The script checks every field it reads (a decimal integer within its bounds,
//! a state in 0..=4, counts within the window): a key holding anything else (another type, a
//! field deleted, `nan`, `-1`, `1e300`, …) is reset, and a window slot holding anything else is
//! cleared, each with an ERROR event naming the key and the field; [`RedisStore::force`] rewrites
//! the key whatever it holds. Each key carries an incarnation, written when it is created, so a
//! replica's view accepts the lower generations of a key deleted and created again; a message on
//! [`TRANSITIONS`] is taken only as the next generation of the incarnation the view knows (and is
//! confirmed by the script before a call is admitted or rejected from it), anything else only makes
//! the view unknown, so a forged message never decides a call while the store answers.
//!
//! **Tests and time.** [`RedisStoreBuilder::time_from`] makes the script take time from a
//! [`Clock`](fusebox::clock::Clock) instead of Redis `TIME`; it exists for tests that drive time
//! with a [`FakeClock`](fusebox::clock::FakeClock), and production code never needs it.
//!
//! **Files**, each using only those listed before it: `op.rs`: the jobs sent to the script and
//! their wire encoding (the one place an outcome becomes a digit of `breaker.lua`'s arguments).
//! `conn.rs`: the connection (one server or a cluster). `view.rs`: a replica's view of a key, and
//! what news it takes. `link.rs`: the types the others share (a
//! key's `SharedKey`, the client, a queued report). `script.rs`: calling `breaker.lua`, reading its
//! answers and applying them to the local breaker (through fusebox's `CircuitRef`). `report.rs`:
//! outcomes queued (or summed) off the call path. `task.rs`: the reporting task, which batches and
//! sends them. `admit.rs`: the admission a caller awaits, and the wait for an outcome's recording.
//! `cached.rs`: cached mode (admission from the replica's view, the pub/sub subscription).
//! `store.rs`: `RedisStore`, and the two sides of fusebox's store seam (`RedisStore` links a key;
//! the key's link is what the breaker calls). `builder.rs`: `RedisStoreBuilder` and the
//! connection. This file: the public settings.

mod admit;
mod builder;
mod cached;
mod conn;
mod link;
mod op;
mod report;
mod script;
mod store;
mod task;
mod view;

use std::fmt;
use std::time::Duration;

pub use builder::RedisStoreBuilder;
pub use store::{RedisStore, SharedState};

#[doc = include_str!("../replicas.md")]
pub mod replicas {}

use fusebox::State;
use fusebox::store::{CircuitRef, Ticket};

/// What a report carries for a call admitted without a known generation (a ticket's
/// [`Ticket::unknown`]): the script records its outcome if the circuit is closed (or disabled)
/// when it arrives, and drops it otherwise.
const ANY_GENERATION: u64 = Ticket::GENERATIONS;

/// The generation a report carries for `ticket` ([`ANY_GENERATION`] when none is known).
fn generation_of(ticket: Ticket) -> u64 {
    ticket.admitted_under().unwrap_or(ANY_GENERATION)
}

/// The local state as the script's seed: (state code, open remaining in ms).
fn seed(core: CircuitRef<'_>) -> (u64, u64) {
    match core.state() {
        State::Open => {
            let remaining = u64::try_from(core.open_remaining().as_nanos()).unwrap_or(u64::MAX);
            (1, remaining.div_ceil(1_000_000))
        }
        State::ForcedOpen => (3, 0),
        State::Disabled => (4, 0),
        _ => (0, 0),
    }
}

/// True when this replica spreads the shared open wait (`open_jitter`): in strict mode too, it
/// then rejects locally until its own deadline before asking the store.
fn jitters(core: CircuitRef<'_>) -> bool {
    core.policy().settings().open_jitter != 0
}

/// The longest bound on a store call [`RedisStoreBuilder::timeout`] and
/// [`RedisStoreBuilder::adaptive_timeout`] accept (the shortest is 1 ms).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest [`RedisStoreBuilder::idle_ttl`] accepted (the shortest is 1 ms).
pub const MAX_IDLE_TTL: Duration = Duration::from_secs(365 * 24 * 60 * 60);
/// The longest [`RedisStoreBuilder::flush_interval`] accepted (the shortest is 1 ms).
pub const MAX_FLUSH_INTERVAL: Duration = Duration::from_secs(60);

/// The floor of the default bound on each store call (see
/// [`RedisStoreBuilder::adaptive_timeout`]).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(600);
/// The ceiling of the default bound on each store call.
pub const DEFAULT_TIMEOUT_CEILING: Duration = Duration::from_secs(1);
/// How long, by default, a shared key's local breaker keeps an open circuit open while the store
/// does not answer ([`RedisStoreBuilder::local_recovery_after`]).
pub const DEFAULT_LOCAL_RECOVERY_AFTER: Duration = Duration::from_secs(10);
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
    /// As [`Mode::Cached`], and a closed circuit's outcomes are summed on the replica: one
    /// script call per key per [flush interval](RedisStoreBuilder::flush_interval) carries
    /// them all (calls, failures, slow calls and the runs of failures), so the store's work per
    /// key follows the replicas, not the calls. The rules are judged on whole sums: after the
    /// threshold was crossed, a replica admits up to one flush interval of its calls, and then
    /// what it admits until the trip reaches it (a round trip on a quiet host; longer on a host
    /// whose cores are all busy).
    Aggregated,
}

/// How long a replica sums a closed circuit's outcomes before it sends them ([`Mode::Aggregated`]).
pub const DEFAULT_FLUSH_INTERVAL: Duration = Duration::from_millis(20);

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
    /// Reject every call (reason [`Reason::Open`](fusebox::Reason::Open), no `retry_after`).
    FailClosed,
}

/// The store could not be set up ([`RedisStore::connect`]): its [`kind`](StoreError::kind)
/// says why, its message says what to fix, and [`source`](std::error::Error::source) is the
/// `redis` crate's error when there is one. A URL in the message has its password replaced by
/// `***` (`redis://:***@host:6379/0`).
///
/// ```no_run
/// # async fn run() {
/// use fusebox_redis::{RedisStore, StoreErrorKind};
///
/// match RedisStore::connect("redis://:wrong@127.0.0.1:6379/").await {
///     Ok(store) => { fusebox::registry().share(store); }
///     Err(e) if e.kind() == StoreErrorKind::Authentication => eprintln!("fix the password: {e}"),
///     Err(e) => eprintln!("{e}"),
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct StoreError {
    kind: StoreErrorKind,
    message: String,
    source: Option<redis::RedisError>,
}

/// Why a [`StoreError`] happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The URL is not a Redis URL the client understands.
    InvalidUrl,
    /// Nothing answered at the URL's host and port within the connect timeout (refused, reset,
    /// no route, or silence).
    Unreachable,
    /// Redis refused this client's credentials: none given where a password is required
    /// (`NOAUTH`), a wrong password or user (`WRONGPASS`).
    Authentication,
    /// Something answered, but not as Redis does (another protocol on that port, or a reply to
    /// `PING` that is not `PONG`).
    NotRedis,
    /// Redis answered `PING` but refused to load fusebox's Lua script (scripting disabled or
    /// denied to this user by an ACL).
    ScriptRefused,
    /// A setting of the [`RedisStoreBuilder`] is out of its range ([`MAX_TIMEOUT`],
    /// [`MAX_IDLE_TTL`], [`MAX_FLUSH_INTERVAL`]); the message names the setting. Nothing was
    /// connected.
    InvalidSetting,
}

impl StoreError {
    /// Why the store could not be set up.
    #[must_use]
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }

    pub(crate) fn new(
        kind: StoreErrorKind,
        message: String,
        source: Option<redis::RedisError>,
    ) -> Self {
        StoreError {
            kind,
            message,
            source,
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// `url` with its password replaced by `***`, for messages and events: the password of the
/// user part (`redis://:***@host:port/db`, `redis://user:***@host:port/db`) and the value of a
/// `password` or `pass` query parameter (`redis+unix:///run/redis.sock?pass=***`).
pub(crate) fn redact(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(at) => url.split_at(at + 3),
        None => ("", url),
    };
    let (main, query) = match rest.find(['?', '#']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let mut out = String::with_capacity(url.len());
    out.push_str(scheme);
    // The user part ends at the last `@` before the query (a password may hold `@` or `/`).
    match main.rfind('@') {
        Some(at) => {
            let (user, host) = main.split_at(at);
            match user.find(':') {
                Some(colon) => {
                    out.push_str(&user[..colon]);
                    out.push_str(":***");
                }
                None => out.push_str(user),
            }
            out.push_str(host);
        }
        None => out.push_str(main),
    }
    let mut first = true;
    for (i, part) in query.split(['?', '&']).enumerate() {
        if i == 0 {
            // Text before the query's first `?` (empty), or a fragment.
            out.push_str(part);
            continue;
        }
        out.push(if first { '?' } else { '&' });
        first = false;
        match part.split_once('=') {
            Some((name, _))
                if name.eq_ignore_ascii_case("pass") || name.eq_ignore_ascii_case("password") =>
            {
                out.push_str(name);
                out.push_str("=***");
            }
            _ => out.push_str(part),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn a_url_is_redacted_wherever_it_holds_a_password() {
        for (url, shown) in [
            ("redis://127.0.0.1:6379/", "redis://127.0.0.1:6379/"),
            (
                "redis://:hunter2@127.0.0.1:6379/0",
                "redis://:***@127.0.0.1:6379/0",
            ),
            ("redis://app:hunter2@db:6379/1", "redis://app:***@db:6379/1"),
            ("rediss://app:p@ss/w:rd@db:6380", "rediss://app:***@db:6380"),
            ("redis://app@db:6379", "redis://app@db:6379"),
            (
                "redis+unix:///run/redis.sock?db=2&pass=hunter2",
                "redis+unix:///run/redis.sock?db=2&pass=***",
            ),
            (
                "unix:///s.sock?password=hunter2",
                "unix:///s.sock?password=***",
            ),
            ("not a url :hunter2@x", "not a url :***@x"),
        ] {
            assert_eq!(redact(url), shown, "{url}");
            assert!(!redact(url).contains("hunter2"), "{url}");
        }
    }
}
