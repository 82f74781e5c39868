//! The operators' surface (feature `admin`): every breaker of a [`Registry`] as JSON, a live
//! dashboard, the operator controls behind an authorisation hook and a CSRF guard, and a health
//! summary for a readiness route, as one [`axum::Router`] you nest anywhere.
//!
//! # Adding it to a service
//!
//! ```toml
//! [dependencies]
//! fusebox = { version = "0.1", features = ["admin"] }
//! ```
//!
//! Three lines in an axum service: nest the router, and serve with the peers' addresses so that
//! [`AdminConfig::allow_loopback`] can see who asks.
//!
//! ```no_run
//! # #[tokio::main] async fn main() -> std::io::Result<()> {
//! # let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! # let app = axum::Router::new();
//! use fusebox::admin::{self, AdminConfig};
//! let app = app.nest("/fusebox", admin::router(fusebox::registry(), AdminConfig::new().allow_loopback()));
//! axum::serve(listener, app.into_make_service_with_connect_info::<std::net::SocketAddr>()).await
//! # }
//! ```
//!
//! `http://host:8080/fusebox` is then the dashboard. The routes, relative to where it is nested:
//!
//! | route | what |
//! |---|---|
//! | `GET /` | the dashboard: per key its state, failure-rate, slow-rate and call history (sparklines over the last minutes), the rule that opened it with the window that decided, the time to the next probe, the transitions and operator actions, and the controls; critical, grouped and shared keys are marked; above the cards, one panel per group of keys ([`Registry::groups`]): its members, how many are open of the most allowed, whether it is in panic, and a row per member on the board, marked when ejected; updated by `GET /events`, never by polling |
//! | `GET /breakers` | every breaker and every group of keys as JSON: `{"breakers": [card, …], "groups": [group, …], "instance": …}` |
//! | `GET /breakers/{key}` | one card; an unknown key is `404` with `{"error": "unknown_key", "message": …}` |
//! | `POST /breakers/{key}/{action}` | the controls `force_open`, `disable`, `metrics_only`, `reset` (see [Security](#security)); answers with the card |
//! | `GET /events` | server-sent events: one `board` event (the `/breakers` document plus the history) on connect and after each change |
//! | `GET /health` | [`health()`] with the keys [`AdminConfig::critical`] names: `200` when `UP`, `503` when `DOWN` |
//!
//! A card is the [`Snapshot`](crate::Snapshot) (`state`, `calls`, `failures`, `slow`,
//! `failure_rate`, `slow_rate`, `consecutive_failures`, `rejected`, `retry_after_ms`,
//! `probes_in_flight`, `phase`, `reopens`, `in_flight`, `concurrency_limit` (the bulkhead's
//! limit, fixed or adaptive; `null` without one), `metrics_only`, `last_transition`, and for a
//! shared key `sharing`, `shared`, `replica_calls`, `replica_failures`, `degraded`), the marks
//! `critical` and `group`, `opened` (why it last opened since the router was built, `null`
//! before: the `rule` that tripped, the window that decided it, in `calls`, `failures`, `failure_rate` and `slow_rate`, and a sentence, `text`),
//! `transitions` (the last ones, newest last, with `by` naming the operator of a manual one) and
//! `actions` (the operator actions), and for a member of a group of keys
//! ([`Policy::group`](crate::Policy::group)) `member_of` (the group's name; `null` for a key
//! without one) and `ejected` (opened by one of the group's relative rules and open within that
//! wait, as [`Group::is_ejected`](crate::Group::is_ejected) says; always `false` without a group). A
//! board's cards also carry `history`. (`group` is the dashboard's own grouping,
//! [`AdminConfig::group`], unrelated to a policy's group.)
//!
//! A group is the [`GroupSnapshot`](crate::GroupSnapshot) of one of [`Registry::groups`]:
//! `name`, `members` (how many), `ejected` (the keys of the members ejected now, as the cards' `ejected`), `open` (the
//! places taken under the cap) and `max_open` (the cap: the most members open at once),
//! `max_ejection` (the cap in percent of the members), `in_panic` (the cap kept a member closed
//! and no pass since found the group calm), `rejected` (trips the cap rejected) and `ejections`
//! (ejections by the relative rules), both since the group was created; and `keys`, a row
//! `{"key", "state", "ejected"}` for each of its members among the keys the document shows (a
//! board's first [`AdminConfig::max_keys`] keys; every key in `GET /breakers`), by key.
//!
//! **Reading a card right after it opened.** An open circuit starts an empty window, so its
//! `calls` and `failure_rate` say 0 while `opened` says what tripped it: the dashboard shows the
//! deciding window next to the rule and labels the live window as the one since it opened.
//!
//! # Security
//!
//! The read-only routes show keys, states and counts; mount them where your other operational
//! routes are. The controls change what your service does, so each `POST` must pass two checks:
//!
//! - **Authorisation.** [`AdminConfig::authorize`] decides from the request (its headers, its
//!   peer address, the extensions your authentication middleware set) and names who asked. There
//!   is no default that allows: without a hook every control is refused with `403`.
//!   [`AdminConfig::allow_loopback`] allows requests from the loopback interface, which needs
//!   the server to record peer addresses (`into_make_service_with_connect_info::<SocketAddr>()`)
//!   and is right only when no proxy on the same host forwards outside requests to it.
//! - **CSRF.** A control needs the header [`CSRF_HEADER`] (any value), which a page of another
//!   origin cannot send without the browser asking first (and being told no); a request whose
//!   `Origin` differs from its `Host`, or that the browser marks `Sec-Fetch-Site: cross-site`, is
//!   refused too. The dashboard sends the header, and an `Authorization: Bearer` token typed in
//!   its token field.
//!
//! Each control runs as a `tracing` WARN event, target `fusebox`, `operator_action`, with the
//! fields `key`, `action` and `operator` (what the hook returned), and is kept in the card's
//! `actions`; a refused one is an `operator_refused` WARN naming the key, the action and why.
//!
//! # Cost
//!
//! Nothing per call: the router reads [`Registry::snapshot`] and records transitions through
//! one [`Registry::on_transition`] hook. Each router runs one task (not one per breaker) that
//! samples every key's window into a small fixed ring ([`AdminConfig::history`]: by default 60
//! samples, one every 5 s, so five minutes) and, while someone watches `GET /events`, computes
//! the board: after each transition or control, and at most every
//! [`AdminConfig::refresh`] otherwise (live counts change with every call, which sends no
//! notice), never more often than [`AdminConfig::min_interval`]. One board is computed per change
//! for all connections; a slow connection skips to the latest board. Connections beyond
//! [`AdminConfig::max_connections`] are refused with `503`. The board holds at most
//! [`AdminConfig::max_keys`] cards (the first keys in order; `omitted` counts the rest), and
//! history is kept for those keys only. The call-rate sparkline is the window's calls per
//! second for a time window; a count window keeps no call total, so it shows the calls in the
//! window and the rejected calls per second.
//!
//! # Several instances
//!
//! [`AdminConfig::instance`] names this process in every board (`instance`); the dashboard page
//! ([`dashboard_html`]) shows one column per instance when a front merges several instances'
//! `GET /events` streams into one. With the feature `redis`, [`AdminConfig::store`] makes
//! `force_open`, `disable` and `reset` move the shared circuit in the store too.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::request::Parts;
use axum::http::{Extensions, HeaderMap};

use crate::registry::Registry;

mod history;

mod board;
mod health;
mod hub;
mod routes;
#[cfg(test)]
mod tests;

pub use health::{Health, HealthReport, Status, health};

/// The header every operator control must carry (any non-empty value): a page of another origin
/// cannot send it without the browser's permission, so a forged form or link cannot act.
pub const CSRF_HEADER: &str = "x-fusebox-csrf";

/// The dashboard page that `GET /` serves. It reads `events` relative to its own address; a
/// front that merges several instances' event streams can serve it as it is (one column per
/// `instance`).
#[must_use]
pub fn dashboard_html() -> &'static str {
    include_str!("dashboard.html")
}

/// The operator surface of `registry` as a router to nest or merge into your own (see the
/// [module documentation](self) for the routes, the security defaults and the cost).
///
/// Each call builds one router with its own history, one `on_transition` hook and one task
/// (spawned on the current tokio runtime, or on the first request when there is none yet);
/// build it once per registry.
pub fn router<S>(registry: &'static Registry, config: AdminConfig) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    routes::router(hub::Hub::start(registry, config))
}

/// An operator control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Action {
    /// [`Breaker::force_open`](crate::Breaker::force_open).
    ForceOpen,
    /// [`Breaker::disable`](crate::Breaker::disable).
    Disable,
    /// [`Breaker::metrics_only`](crate::Breaker::metrics_only).
    MetricsOnly,
    /// [`Breaker::reset`](crate::Breaker::reset).
    Reset,
}

impl Action {
    /// Every action, in the dashboard's order.
    pub const ALL: [Action; 4] = [
        Action::ForceOpen,
        Action::Disable,
        Action::MetricsOnly,
        Action::Reset,
    ];

    /// The name in the route (`force_open`, `disable`, `metrics_only`, `reset`).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Action::ForceOpen => "force_open",
            Action::Disable => "disable",
            Action::MetricsOnly => "metrics_only",
            Action::Reset => "reset",
        }
    }

    /// The action named `name`, if any.
    #[must_use]
    pub fn parse(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == name)
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A control request, as the authorisation hook sees it.
#[derive(Debug)]
pub struct ControlRequest<'a> {
    parts: &'a Parts,
    key: &'a str,
    action: Action,
}

impl ControlRequest<'_> {
    /// The key the control targets.
    #[must_use]
    pub fn key(&self) -> &str {
        self.key
    }

    /// The control.
    #[must_use]
    pub fn action(&self) -> Action {
        self.action
    }

    /// The request's headers (an `Authorization` header, say).
    #[must_use]
    pub fn headers(&self) -> &HeaderMap {
        &self.parts.headers
    }

    /// The request's extensions: what your authentication middleware put there.
    #[must_use]
    pub fn extensions(&self) -> &Extensions {
        &self.parts.extensions
    }

    /// The peer's address, when the server records it
    /// (`into_make_service_with_connect_info::<SocketAddr>()`).
    #[must_use]
    pub fn peer(&self) -> Option<SocketAddr> {
        self.parts
            .extensions
            .get::<axum::extract::ConnectInfo<SocketAddr>>()
            .map(|info| info.0)
    }
}

/// The authorisation hook: `Some(operator)` allows the control and names who asked (it goes into
/// the `operator_action` event and the card's `actions`); `None` refuses it.
type Authorize = Arc<dyn Fn(&ControlRequest<'_>) -> Option<String> + Send + Sync>;

/// How [`router`] behaves: who may use the controls, which keys are critical or grouped, and the
/// bounds of its history and event stream. `AdminConfig::new()` refuses every control.
#[derive(Clone)]
#[must_use]
pub struct AdminConfig {
    authorize: Option<Authorize>,
    critical: BTreeSet<String>,
    groups: BTreeMap<String, String>,
    instance: Option<String>,
    max_connections: usize,
    max_keys: usize,
    min_interval: Duration,
    refresh: Duration,
    sample_every: Duration,
    samples: usize,
    transitions: usize,
    #[cfg(feature = "redis")]
    store: Option<crate::redis::RedisStore>,
}

/// The most event-stream connections one router serves by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

impl AdminConfig {
    /// Controls refused, no critical keys, 1,024 connections, 200 cards, boards at most 4 times
    /// a second (every second while only counts change), 60 samples one every 5 s, 20
    /// transitions per key.
    pub fn new() -> Self {
        AdminConfig {
            authorize: None,
            critical: BTreeSet::new(),
            groups: BTreeMap::new(),
            instance: None,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_keys: 200,
            min_interval: Duration::from_millis(250),
            refresh: Duration::from_secs(1),
            sample_every: Duration::from_secs(5),
            samples: 60,
            transitions: 20,
            #[cfg(feature = "redis")]
            store: None,
        }
    }

    /// Decides who may use the controls: `hook` returns the operator's name to allow a control,
    /// `None` to refuse it (`403`). Replaces any earlier hook.
    ///
    /// ```
    /// use fusebox::admin::AdminConfig;
    /// let token = std::env::var("FUSEBOX_ADMIN_TOKEN").unwrap_or_default();
    /// let config = AdminConfig::new().authorize(move |request| {
    ///     let sent = request.headers().get("authorization")?.to_str().ok()?;
    ///     (!token.is_empty() && sent == format!("Bearer {token}")).then(|| "token holder".to_owned())
    /// });
    /// # let _ = config;
    /// ```
    pub fn authorize(
        mut self,
        hook: impl Fn(&ControlRequest<'_>) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.authorize = Some(Arc::new(hook));
        self
    }

    /// Allows the controls to requests from a loopback address (`127.0.0.0/8`, `::1`), named
    /// `loopback <address>`; refuses the others and any request whose peer is unknown (serve with
    /// `into_make_service_with_connect_info::<SocketAddr>()`). Not for a service behind a proxy
    /// on the same host, whose requests all come from loopback.
    pub fn allow_loopback(self) -> Self {
        self.authorize(|request| {
            let peer = request.peer()?;
            peer.ip().is_loopback().then(|| format!("loopback {peer}"))
        })
    }

    /// Marks `keys` critical: [`health()`] (and `GET /health`) says `DOWN` while one of them is
    /// open within its wait, and the dashboard marks them.
    pub fn critical<K: Into<String>>(mut self, keys: impl IntoIterator<Item = K>) -> Self {
        self.critical.extend(keys.into_iter().map(Into::into));
        self
    }

    /// Puts `keys` in the group `name`: the dashboard marks them and shows them together.
    pub fn group<K: Into<String>>(
        mut self,
        name: impl Into<String>,
        keys: impl IntoIterator<Item = K>,
    ) -> Self {
        let name = name.into();
        for key in keys {
            self.groups.insert(key.into(), name.clone());
        }
        self
    }

    /// Names this process in every board (`instance`), for a front that merges instances.
    pub fn instance(mut self, name: impl Into<String>) -> Self {
        self.instance = Some(name.into());
        self
    }

    /// The most `GET /events` connections served at once (at least 1); more are refused with
    /// `503`.
    pub fn max_connections(mut self, max: usize) -> Self {
        self.max_connections = at_least("max_connections", max, 1);
        self
    }

    /// The most cards a board holds (at least 1); history is kept for those keys only.
    pub fn max_keys(mut self, max: usize) -> Self {
        self.max_keys = at_least("max_keys", max, 1);
        self
    }

    /// The shortest time between two boards (at least 10 ms): changes within it are merged.
    pub fn min_interval(mut self, every: Duration) -> Self {
        self.min_interval = every.max(bounded("min_interval", every, Duration::from_millis(10)));
        self
    }

    /// How often a board is computed while someone watches and no transition happens (at least
    /// `min_interval`): the counts of the windows change with calls, which send no notice.
    pub fn refresh(mut self, every: Duration) -> Self {
        self.refresh = every.max(bounded("refresh", every, Duration::from_millis(10)));
        self
    }

    /// The history ring: `samples` samples (1 ..= 1,000) of every key's window, one every
    /// `every` (at least 10 ms), plus one after each transition.
    pub fn history(mut self, every: Duration, samples: usize) -> Self {
        self.sample_every = every.max(bounded("history", every, Duration::from_millis(10)));
        self.samples = at_least("history", samples, 1).min(1_000);
        self
    }

    /// The transitions and actions kept per key (1 ..= 1,000; default 20).
    pub fn transitions(mut self, kept: usize) -> Self {
        self.transitions = at_least("transitions", kept, 1).min(1_000);
        self
    }

    /// Moves the shared circuit in `store` as well as this process's breaker on `force_open`,
    /// `disable` and `reset` (`metrics_only` has no shared form and stays local).
    #[cfg(feature = "redis")]
    pub fn store(mut self, store: crate::redis::RedisStore) -> Self {
        self.store = Some(store);
        self
    }
}

/// `value`, or `min` with a `tracing` warning naming the setting when it is below.
fn at_least(field: &'static str, value: usize, min: usize) -> usize {
    if value < min {
        tracing::warn!(target: "fusebox", field, value, "`AdminConfig::{field}` = {value} is below {min}; {min} is used");
    }
    value.max(min)
}

/// `min`, with a `tracing` warning naming the setting when `value` is below it.
fn bounded(field: &'static str, value: Duration, min: Duration) -> Duration {
    if value < min {
        tracing::warn!(target: "fusebox", field, "`AdminConfig::{field}` = {value:?} is below {min:?}; {min:?} is used");
    }
    min
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for AdminConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminConfig")
            .field("authorize", &self.authorize.is_some())
            .field("critical", &self.critical)
            .field("groups", &self.groups)
            .field("instance", &self.instance)
            .field("max_connections", &self.max_connections)
            .field("max_keys", &self.max_keys)
            .field("min_interval", &self.min_interval)
            .field("refresh", &self.refresh)
            .field("sample_every", &self.sample_every)
            .field("samples", &self.samples)
            .field("transitions", &self.transitions)
            .finish()
    }
}
