//! How the router behaves ([`AdminConfig`]), the operator controls ([`Action`]) and what the
//! authorisation hook sees of a control ([`ControlRequest`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crate::request::{AuthorizeRead, ReadRequest};

/// The header every operator control must carry (any non-empty value): a page of another origin
/// cannot send it without the browser's permission, so a forged form or link cannot act.
pub const CSRF_HEADER: &str = "x-fusebox-csrf";

/// An operator control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Action {
    /// [`Breaker::force_open`](fusebox::Breaker::force_open).
    ForceOpen,
    /// [`Breaker::disable`](fusebox::Breaker::disable).
    Disable,
    /// [`Breaker::metrics_only`](fusebox::Breaker::metrics_only).
    MetricsOnly,
    /// [`Breaker::reset`](fusebox::Breaker::reset).
    Reset,
    /// A fault injection switch (feature `chaos`): `POST /chaos/{key}/{fault}` or
    /// `POST /faults/{name}/{on|off}`, whose [`ControlRequest::key`] is the fault's key. Not one
    /// of [`Action::ALL`], the dashboard's buttons.
    #[cfg(feature = "chaos")]
    Chaos,
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
            #[cfg(feature = "chaos")]
            Action::Chaos => "chaos",
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

/// A control request, as the authorisation hook sees it: the key and the action, and, through
/// [`ReadRequest`] (which it dereferences to), the request's headers, extensions, peer and
/// whether it is local.
#[derive(Debug)]
pub struct ControlRequest<'a> {
    pub(crate) request: ReadRequest<'a>,
    pub(crate) key: &'a str,
    pub(crate) action: Action,
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
}

impl<'a> std::ops::Deref for ControlRequest<'a> {
    type Target = ReadRequest<'a>;

    fn deref(&self) -> &ReadRequest<'a> {
        &self.request
    }
}

/// The authorisation hook: `Some(operator)` allows the control and names who asked (it goes into
/// the `operator_action` event and the card's `actions`); `None` refuses it.
type Authorize = Arc<dyn Fn(&ControlRequest<'_>) -> Option<String> + Send + Sync>;

/// Which hook decides the controls: the refusals say what each one needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hook {
    Custom,
    Loopback,
    Bearer,
}

/// How [`router`](crate::router) behaves: who may use the controls, which keys are critical or grouped, and the
/// bounds of its history and event stream. `AdminConfig::new()` refuses every control.
#[derive(Clone)]
#[must_use]
pub struct AdminConfig {
    pub(crate) authorize: Option<(Authorize, Hook)>,
    pub(crate) authorize_read: Option<AuthorizeRead>,
    pub(crate) critical: BTreeSet<String>,
    pub(crate) groups: BTreeMap<String, String>,
    pub(crate) instance: Option<String>,
    pub(crate) max_connections: usize,
    pub(crate) max_keys: usize,
    pub(crate) min_interval: Duration,
    pub(crate) refresh: Duration,
    pub(crate) sample_every: Duration,
    pub(crate) samples: usize,
    pub(crate) transitions: usize,
    #[cfg(feature = "redis")]
    pub(crate) store: Option<fusebox_redis::RedisStore>,
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
            authorize_read: None,
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
    /// use fusebox_admin::AdminConfig;
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
        self.authorize = Some((Arc::new(hook), Hook::Custom));
        self
    }

    /// The hook that decides the controls, and which kind it is.
    pub(crate) fn hook(&self) -> Option<Hook> {
        self.authorize.as_ref().map(|(_, kind)| *kind)
    }

    /// Allows the controls to local operators: requests from a loopback address (`127.0.0.0/8`,
    /// `::1`) that carry no proxy header (`Forwarded`, `X-Forwarded-For`, `X-Real-IP`), named
    /// `loopback <address>`. Refuses the others, a forwarded request (and says so), and any
    /// request whose peer is unknown (serve with
    /// `into_make_service_with_connect_info::<SocketAddr>()`). Behind a proxy on the same host
    /// (nginx, an Envoy sidecar) every peer is loopback: that proxy must add one of those
    /// headers, or use [`allow_bearer`](Self::allow_bearer) instead. Replaces any earlier hook.
    pub fn allow_loopback(self) -> Self {
        let mut config = self.authorize(|request| {
            let peer = request.peer()?;
            request.is_local().then(|| format!("loopback {peer}"))
        });
        config.authorize = config.authorize.map(|(hook, _)| (hook, Hook::Loopback));
        config
    }

    /// Allows the controls to requests carrying `Authorization: Bearer <token>` (compared in
    /// constant time), named `bearer token holder`; the dashboard sends the token typed in its
    /// token field. Safe behind any proxy. An empty token allows nothing (and a `tracing`
    /// warning says so). Replaces any earlier hook.
    ///
    /// ```
    /// use fusebox_admin::AdminConfig;
    /// let config = AdminConfig::new()
    ///     .allow_bearer(std::env::var("FUSEBOX_ADMIN_TOKEN").unwrap_or_default());
    /// # let _ = config;
    /// ```
    pub fn allow_bearer(self, token: impl Into<String>) -> Self {
        let token = token.into();
        if token.is_empty() {
            tracing::warn!(target: "fusebox", field = "allow_bearer", "`AdminConfig::allow_bearer` was given an empty token: every control is refused; set the token");
        }
        let mut config = self.authorize(move |request| {
            let sent = request.headers().get(axum::http::header::AUTHORIZATION)?;
            let sent = sent.as_bytes().strip_prefix(b"Bearer ")?;
            (!token.is_empty() && same(sent, token.as_bytes()))
                .then(|| "bearer token holder".to_owned())
        });
        config.authorize = config.authorize.map(|(hook, _)| (hook, Hook::Bearer));
        config
    }

    /// Guards the read routes (`GET /`, `/breakers`, `/breakers/{key}`, `/events`): `hook`
    /// returns `true` to let a request read, and a refused one gets `403`. Off by default: the
    /// read routes answer everyone who reaches them. `GET /health` stays open for load
    /// balancers' probes. Replaces any earlier read hook.
    ///
    /// ```
    /// use fusebox_admin::AdminConfig;
    /// // Reads for operators on this host only (`kubectl port-forward` is one).
    /// let config = AdminConfig::new().authorize_read(|request| request.is_local());
    /// # let _ = config;
    /// ```
    pub fn authorize_read(
        mut self,
        hook: impl Fn(&ReadRequest<'_>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.authorize_read = Some(Arc::new(hook));
        self
    }

    /// Marks `keys` critical: [`health()`](crate::health()) (and `GET /health`) says `DOWN` while one of them is
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

    /// The shortest time between two boards (10 ms ..= 1 h): changes within it are merged.
    pub fn min_interval(mut self, every: Duration) -> Self {
        self.min_interval = clamped("min_interval", every);
        self
    }

    /// How often a board is computed while someone watches and no transition happens (10 ms
    /// ..= 1 h, and at least `min_interval`): the counts of the windows change with calls,
    /// which send no notice.
    pub fn refresh(mut self, every: Duration) -> Self {
        self.refresh = clamped("refresh", every);
        self
    }

    /// The history ring: `samples` samples (1 ..= 1,000) of every key's window, one every
    /// `every` (10 ms ..= 1 h), plus one after each transition.
    pub fn history(mut self, every: Duration, samples: usize) -> Self {
        self.sample_every = clamped("history", every);
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
    pub fn store(mut self, store: fusebox_redis::RedisStore) -> Self {
        self.store = Some(store);
        self
    }
}

/// `a == b`, in a time that depends on their lengths only.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// `value`, or `min` with a `tracing` warning naming the setting when it is below.
fn at_least(field: &'static str, value: usize, min: usize) -> usize {
    if value < min {
        tracing::warn!(target: "fusebox", field, value, "`AdminConfig::{field}` = {value} is below {min}; {min} is used");
    }
    value.max(min)
}

/// The shortest duration a setting takes.
pub(crate) const MIN_DURATION: Duration = Duration::from_millis(10);
/// The longest duration a setting takes: the router's task adds them to instants, which a
/// larger value could overflow.
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(3600);

/// `value` within [`MIN_DURATION`] ..= [`MAX_DURATION`], with a `tracing` warning naming the
/// setting when it is outside.
fn clamped(field: &'static str, value: Duration) -> Duration {
    let used = value.clamp(MIN_DURATION, MAX_DURATION);
    if used != value {
        tracing::warn!(target: "fusebox", field, ?value, ?used, "an `AdminConfig` duration is out of its bounds (10 ms ..= 1 h); the nearest bound is used");
    }
    used
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for AdminConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminConfig")
            .field("authorize", &self.hook())
            .field("authorize_read", &self.authorize_read.is_some())
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
