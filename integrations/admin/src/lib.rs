//! fusebox-admin: the operators' surface of fusebox. Every breaker of a [`Registry`] as JSON, a live
//! dashboard, the operator controls behind an authorisation hook and a CSRF guard, and a health
//! summary for a readiness route, as one [`axum::Router`] you nest anywhere.
//!
//! # Adding it to a service
//!
//! ```toml
//! [dependencies]
//! fusebox = "0.1"
//! fusebox-admin = "0.1"
//! ```
//!
//! Three lines in an axum service: the controls for whoever holds the token (safe behind any
//! proxy, a Kubernetes sidecar or ingress included), the reads for operators on this host
//! (`kubectl port-forward` is one), and the router nested as a service, so that `/fusebox` and
//! `/fusebox/` both serve the page. Serve with the peers' addresses, which the read hook reads.
//!
//! ```no_run
//! # #[tokio::main] async fn main() -> std::io::Result<()> {
//! # let listener = tokio::net::TcpListener::bind("0.0.0.0:8080").await?;
//! # let app = axum::Router::new();
//! use fusebox_admin::{self as admin, AdminConfig};
//! let config = AdminConfig::new()
//!     .allow_bearer(std::env::var("FUSEBOX_ADMIN_TOKEN").unwrap_or_default())
//!     .authorize_read(|request| request.is_local());
//! let app = app.nest_service("/fusebox", admin::router(fusebox::registry(), config));
//! axum::serve(listener, app.into_make_service_with_connect_info::<std::net::SocketAddr>()).await
//! # }
//! ```
//!
//! `http://host:8080/fusebox` is then the dashboard (axum's `Router::nest` serves `/fusebox`
//! only; `nest_service` serves `/fusebox/` too). The guide's
//! [operators chapter](https://docs.rs/fusebox/latest/fusebox/guide/operators/index.html) says
//! how to mount it behind a proxy. The routes, relative to where it is nested:
//!
//! | route | what |
//! |---|---|
//! | `GET /` | the dashboard: per key its state, failure-rate, slow-rate and call history (sparklines over the last minutes), the rule that opened it with the window that decided, the time to the next probe, the transitions and operator actions, and the controls; critical, grouped and shared keys are marked; above the cards, one panel per group of keys ([`Registry::groups`]): its members, how many are open of the most allowed, whether it is in panic, and a row per member on the board, marked when ejected; updated by `GET /events`, never by polling |
//! | `GET /breakers` | every breaker and every group of keys as JSON: `{"breakers": [card, …], "groups": [group, …], "instance": …}` |
//! | `GET /breakers/{key}` | one card; an unknown key is `404` with `{"error": "unknown_key", "message": …}` |
//! | `POST /breakers/{key}/{action}` | the controls `force_open`, `disable`, `metrics_only`, `reset` (see [Security](#security)); answers with the card |
//! | `POST /chaos/{key}/{fault}` | feature `chaos`, for staging: injects `rejection` or `latency?ms=N` (each with `rate=0.0..1.0` and `seed=N` if wanted) into the calls of `key`'s functions that have `chaos = true`, or `clear`s its fault ([`fusebox::chaos`]); behind the controls' guards, as [`Action::Chaos`]; each switch is a WARN event `chaos_switched` naming the key and the fault |
//! | `POST /faults/{name}/{on,off}` | feature `chaos`: switches a fault the service registered in code by name ([`Injections::register`](fusebox::chaos::Injections::register): a failure or `Retry-After` answer with its typed error) |
//! | `GET /events` | server-sent events: one `board` event (the `/breakers` document plus the history) on connect and after each change |
//! | `GET /health` | [`health()`] with the keys [`AdminConfig::critical`] names: `200` when `UP`, `503` when `DOWN` |
//!
//! A card is the [`Snapshot`](fusebox::Snapshot) (`state`, `calls`, `failures`, `slow`,
//! `failure_rate`, `slow_rate`, `consecutive_failures`, `rejected`, `retry_after_ms`,
//! `probes_in_flight`, `phase`, `reopens`, `in_flight`, `concurrency_limit` (the bulkhead's
//! limit, fixed or adaptive; `null` without one), `metrics_only`, `last_transition`, and for a
//! shared key `sharing`, `shared`, `replica_calls`, `replica_failures`, `degraded`), the marks
//! `critical` and `group`, `opened` (why it last opened since the router was built, or on a
//! shared key, why another replica opened it, `null` before: the `rule` that tripped, the window
//! that decided it, in `calls`, `failures`, `failure_rate` and `slow_rate`, a sentence, `text`,
//! and on a shared key the `replica` that committed it, as `last_transition.replica` names it),
//! `transitions` (the last ones, newest last, with `by` naming the operator of a manual one) and
//! `actions` (the operator actions), and for a member of a group of keys
//! ([`Policy::group`](fusebox::Policy::group)) `member_of` (the group's name; `null` for a key
//! without one) and `ejected` (opened by one of the group's relative rules and open within that
//! wait, as [`Group::is_ejected`](fusebox::Group::is_ejected) says; always `false` without a group),
//! and `chaos`: the fault injected into the key (feature `chaos`; `null` without one or without
//! the feature), its `fault` kind and a `text` the page shows on the card as "fault injection:
//! failures on 10 % of calls". A board's cards also carry `history`. (`group` is the dashboard's own grouping,
//! [`AdminConfig::group`], unrelated to a policy's group.)
//!
//! A group is the [`GroupSnapshot`](fusebox::GroupSnapshot) of one of [`Registry::groups`]:
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
//! The read-only routes show keys, states and counts. They answer everyone who reaches them
//! unless [`AdminConfig::authorize_read`] guards them (`GET /health` stays open for load
//! balancers' probes). The controls change what your service does, so each `POST` must pass two
//! checks:
//!
//! - **Authorisation.** A hook decides from the request and names who asked. There is no
//!   default that allows: without a hook every control is refused with `403`.
//!   [`AdminConfig::allow_bearer`] allows `Authorization: Bearer <token>`, safe behind any proxy;
//!   [`AdminConfig::authorize`] takes your own (headers, peer address, the extensions your
//!   authentication middleware set). [`AdminConfig::allow_loopback`] allows local operators: a
//!   loopback peer (the server must record peer addresses,
//!   `into_make_service_with_connect_info::<SocketAddr>()`) and none of the headers a proxy adds
//!   ([`PROXY_HEADERS`]); it is right only when every proxy on the same host adds one of them.
//!   Each refusal says which check failed and the fix.
//! - **CSRF.** A control needs the header [`CSRF_HEADER`] (any value), which a page of another
//!   origin cannot send without the browser asking first (and being told no); a request whose
//!   `Origin` differs from its `Host` (or, without `Host`, from its URI's authority, as HTTP/2
//!   sends it), whose `Origin` is `null` (a sandboxed page, a file, a redirect), or that the
//!   browser marks `Sec-Fetch-Site: cross-site` is refused too. The dashboard sends the header,
//!   and an `Authorization: Bearer` token typed in its token field.
//!
//! The page builds every name it shows (keys, the instance, groups) as text, never as markup,
//! and carries a Content-Security-Policy (its own script and style only, by hash; requests to
//! its own origin only; no framing).
//!
//! Each control runs as a `tracing` WARN event, target `fusebox`, `operator_action`, with the
//! fields `key`, `action` and `operator` (what the hook returned), and is kept in the card's
//! `actions`; a refused one is an `operator_refused` WARN with the fields `key`, `action`,
//! `reason` and `why`. What a request carries is in fields, escaped by the subscriber, never in
//! a message, so a key with a line break cannot forge a log line.
//!
//! # Cost
//!
//! Nothing per call: the router reads [`Registry::snapshot`] and records transitions through
//! one [`Registry::on_transition`] hook. Each router runs one task (not one per breaker) that
//! samples every key's window into a small fixed ring ([`AdminConfig::history`]: by default 60
//! samples, one every 5 s, so five minutes) and, while someone watches `GET /events`, computes
//! the board: after each transition or control, and at most every
//! [`AdminConfig::refresh`] otherwise (live counts change with every call, which sends no
//! notice), never more often than [`AdminConfig::min_interval`] (each duration setting is
//! bounded to 10 ms ..= 1 h). The task runs under a supervisor: a panic in it is an ERROR event,
//! `admin_task_panicked`, and the task starts again a second later. One board is computed per
//! change for all connections and sent to each without a copy; a connection takes the next board
//! only once the server wrote the previous one out, so a slow or stuck reader holds at most one
//! board and skips to the latest. Connections beyond
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

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

use axum::Router;

use fusebox::Registry;

mod history;

mod board;
#[cfg(feature = "chaos")]
mod chaos;
mod config;
mod guard;
mod health;
mod hub;
mod request;
mod routes;
mod stream;
#[cfg(test)]
mod tests;

pub use config::{Action, AdminConfig, CSRF_HEADER, ControlRequest, DEFAULT_MAX_CONNECTIONS};
pub use health::{Health, HealthReport, Status, health};
pub use request::{PROXY_HEADERS, ReadRequest};
pub use routes::dashboard_html;

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
