//! Health: one status for a readiness route, `DOWN` only while a critical key is open within its
//! wait.

use std::collections::BTreeSet;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};
use serde_json::{Value, json};

use fusebox::Registry;
use fusebox::Snapshot;
use fusebox::State;

/// The health of a registry's breakers for a readiness route: `health(registry).critical([…])`.
///
/// The status is [`Status::Up`] unless a key marked critical is forced open, or open with its
/// wait not over. An open circuit means a dependency fails and the breaker already answers for
/// it (fast rejections, fallbacks): taking the instance out of its load balancer for that would
/// turn one failing dependency into a whole service down, so other keys never change the status,
/// only the summary. Mark critical only the keys without which the instance can serve nothing.
/// A critical key whose wait is over counts as up: breakers recover on the request path, so an
/// instance that stayed out of rotation would never send the probe that closes the circuit.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let health = fusebox_admin::health(fusebox::registry()).critical(["payment"]);
/// assert_eq!(health.check().status(), fusebox_admin::Status::Up);
/// let app: axum::Router = axum::Router::new().route("/ready", health.into_route());
/// # let _ = app;
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct Health {
    registry: &'static Registry,
    critical: BTreeSet<String>,
}

/// A registry's health, for `registry` (see [`Health`]).
pub fn health(registry: &'static Registry) -> Health {
    Health {
        registry,
        critical: BTreeSet::new(),
    }
}

/// `UP` or `DOWN`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// Serving: no critical key is open within its wait.
    Up,
    /// A critical key is open within its wait, or forced open.
    Down,
}

impl Status {
    /// `"UP"` or `"DOWN"`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Status::Up => "UP",
            Status::Down => "DOWN",
        }
    }
}

/// The result of [`Health::check`].
#[derive(Debug, Clone, PartialEq)]
pub struct HealthReport {
    status: Status,
    down: Vec<String>,
    json: Value,
}

impl HealthReport {
    /// The status.
    #[must_use]
    pub fn status(&self) -> Status {
        self.status
    }

    /// The critical keys that make it `DOWN`.
    #[must_use]
    pub fn down(&self) -> &[String] {
        &self.down
    }

    /// The summary: `{"status": "UP", "down": [...], "open": [...], "breakers": {key: {"state":
    /// …, "critical": …, "retry_after_ms": …}}}` (`open`: every key open, critical or not).
    #[must_use]
    pub fn json(&self) -> &Value {
        &self.json
    }
}

/// True when `s` holds its critical dependency unavailable: forced open, or open within its wait.
fn blocks(s: &Snapshot) -> bool {
    match s.state {
        State::ForcedOpen => true,
        State::Open => s.retry_after.is_some_and(|wait| !wait.is_zero()),
        _ => false,
    }
}

impl Health {
    /// Marks `keys` critical. A key no breaker of the registry has (declared or made) is named in
    /// a `tracing` warning and counts as closed until its breaker exists.
    pub fn critical<K: Into<String>>(mut self, keys: impl IntoIterator<Item = K>) -> Self {
        for key in keys {
            let key = key.into();
            if self.registry.get(&key).is_none() {
                tracing::warn!(
                    target: "fusebox",
                    key = key.as_str(),
                    field = "critical",
                    "health: a critical key (the `key` field) names no breaker declared in this registry; it counts as closed until one exists (check its spelling)"
                );
            }
            self.critical.insert(key);
        }
        self
    }

    /// The status and summary now.
    #[must_use]
    pub fn check(&self) -> HealthReport {
        report(&self.registry.snapshot(), &self.critical)
    }

    /// A `GET` route answering the summary with `200` when up and `503` when down.
    pub fn into_route<S>(self) -> MethodRouter<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        get(move || {
            let report = self.check();
            std::future::ready(respond(&report))
        })
    }
}

/// The report of `snapshots` with `critical` keys.
pub(super) fn report(snapshots: &[Snapshot], critical: &BTreeSet<String>) -> HealthReport {
    let mut down = Vec::new();
    let mut open = Vec::new();
    let mut breakers = serde_json::Map::new();
    for s in snapshots {
        let key = s.key.as_str();
        let is_critical = critical.contains(key);
        if matches!(s.state, State::Open | State::ForcedOpen) {
            open.push(key.to_owned());
        }
        if is_critical && blocks(s) {
            down.push(key.to_owned());
        }
        breakers.insert(
            key.to_owned(),
            json!({
                "state": s.state.as_str(),
                "critical": is_critical,
                "retry_after_ms": s.retry_after.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            }),
        );
    }
    let status = if down.is_empty() {
        Status::Up
    } else {
        Status::Down
    };
    let json = json!({
        "status": status.as_str(),
        "down": down,
        "open": open,
        "breakers": breakers,
    });
    HealthReport { status, down, json }
}

/// The HTTP answer of a report.
pub(super) fn respond(report: &HealthReport) -> Response {
    let code = match report.status {
        Status::Up => StatusCode::OK,
        Status::Down => StatusCode::SERVICE_UNAVAILABLE,
    };
    (code, Json(report.json.clone())).into_response()
}
