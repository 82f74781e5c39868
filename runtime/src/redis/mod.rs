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
//! older generation changes nothing. The script's answer names the rule that committed a
//! transition, so the replica that committed it announces it with the `trigger` an in-memory
//! breaker gives (`consecutive`, `slow_rate`, `open_wait_over`, …). Half-open probe permits are
//! taken inside the script, so the number of probes is exact across replicas, and a probe lease
//! re-arms the probes of a replica that died. Every script call is O(1) in the window size (the
//! count window is a ring of slots in the hash, with running totals).
//!
//! **Which calls go to Redis ([`Mode::Strict`], the default).** Every call shape. An annotated
//! `async fn` (with or without `timeout`) awaits admission from the script before its body runs,
//! and awaits its outcome's recording before it returns: in this mode no call is admitted after a
//! replica committed OPEN. The attempt driver (`retry`, `backoff`, `deadline`) does the same for
//! every attempt. Callers that cannot await (sync functions, [`Breaker::try_acquire`](crate::Breaker::try_acquire)
//! and the calls built on it, the tower layer's `call`) admit from the replica's view of the key
//! (the state and generation the script last answered), and ask the script on their own thread,
//! bounded by the store's timeout, when the view is unknown, open past its wait or half-open (so
//! half-open probes stay exact); their outcomes go to the script off the call path (the tower
//! layer's response future awaits the recording in strict mode). A transition another replica
//! committed reaches such a caller with the answer to its next report. On a current-thread tokio
//! runtime, which cannot wait for its own store task, such a call is decided as while the store
//! does not answer, and a background read fetches the view for the next call.
//!
//! **Cached mode** ([`RedisStoreBuilder::mode`] with [`Mode::Cached`]). Each replica keeps a
//! view of every shared key (state and generation), learnt from the script's answers and from
//! a pub/sub subscription on a dedicated connection, on which the script announces every new
//! generation (channel [`TRANSITIONS`]). While the view says closed (or disabled), a call is
//! admitted without a round trip and its outcome is sent to the script off the call path, under
//! the view's generation; while it says open and the wait is not over, or forced open, the call
//! is refused locally. Otherwise (the open wait over, half-open, a key not seen yet) the call
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
//! **Operators.** [`RedisStore::force`] moves a shared key for every replica and
//! [`RedisStore::state`] reads it; [`Breaker::force_open`](crate::Breaker::force_open) and the
//! other manual states of a handle act on the local breaker only (sync calls, degraded calls).
//! A shared breaker's [`Breaker::state`](crate::Breaker::state) and snapshot show its local
//! breaker, which mirrors Redis's open, closed, forced-open and disabled states (not half-open).
//! A forced state is announced once (`trigger = "operator"`), by the replica whose
//! [`RedisStore::force`] committed it, and its local breaker follows at once; the other replicas
//! follow silently on the script's next answer to one of their calls (strict mode) or on the
//! subscription's message (cached mode).
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
//! forced states through [`RedisStore::force`]. **Not supported:** a time window whose tenth is
//! not a whole number of milliseconds: such a key stays local (with an error event naming the
//! key), as do keys named by [`RedisStoreBuilder::local_key`] and keys whose policy says
//! [`Policy::shared`](crate::Policy::shared)`(false)` (`shared = false` on the attribute or in a
//! key's config table).
//!
//! **Redis slow or down.** Every store call is bounded by a timeout that adapts to the round
//! trips observed ([`RedisStoreBuilder::adaptive_timeout`]; default between [`DEFAULT_TIMEOUT`]
//! and [`DEFAULT_TIMEOUT_CEILING`]), or a fixed one ([`RedisStoreBuilder::timeout`]). When a call
//! times out it degrades per [`Degrade`], with a WARN event on degrading and an INFO event on
//! recovery. [`Degrade::Local`] (the default) never splits the circuit: a circuit last known
//! closed admits under that view and its outcome is recorded on the local breaker and sent to the
//! store again until it answers (each report recorded at most once, by a per-replica sequence
//! number the script checks; what is given up is counted by [`RedisStore::dropped_reports`]); an
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
//! confirmed by the script before a call is admitted or refused from it), anything else only makes
//! the view unknown, so a forged message never decides a call.
//!
//! **Tests and time.** [`RedisStoreBuilder::time_from`] makes the script take time from a
//! [`Clock`](crate::clock::Clock) instead of Redis `TIME`; it exists for tests that drive time
//! with a [`FakeClock`](crate::clock::FakeClock), and production code never needs it.
//!
//! **Files**, each using only those listed before it: `link.rs`: the types the others share (a
//! breaker's `Link` to the store, the connection and script, a queued report). `script.rs`:
//! calling `breaker.lua`, reading its answers and applying them to the local breaker.
//! `report.rs`: outcomes sent to the script off the call path, batched. `admit.rs`: what the
//! expansion calls on a shared key (admission awaited from the script, the wait for an outcome's
//! recording). `cached.rs`: cached mode (admission from the replica's view, the pub/sub
//! subscription). `store.rs`: `RedisStoreBuilder`, `RedisStore`, and `attach`, which shares a
//! breaker (its link becomes the breaker's `Store`, the seam the breaker calls, so the breaker
//! names nothing of this module). This file: the public settings.

pub(crate) mod admit;
mod cached;
mod link;
mod report;
mod script;
mod store;

use std::fmt;
use std::time::Duration;

pub(crate) use store::attach;
pub use store::{RedisStore, RedisStoreBuilder, SharedState};

/// The floor of the default bound on each store call (see
/// [`RedisStoreBuilder::adaptive_timeout`]).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(100);
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
    /// Refuse every call (reason [`Reason::Open`](crate::Reason::Open), no `retry_after`).
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
