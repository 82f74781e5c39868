//! The handlers of the router: the page, the JSON, the event stream, the controls and health.

use std::sync::{Arc, LazyLock};

use axum::extract::{Path, State as Shared};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::middleware;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::config::Action;
use crate::guard::{self, error};
use crate::hub::Hub;

/// The routes over `hub`.
pub(super) fn router<S>(hub: Arc<Hub>) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    let reads = Router::new()
        .route("/", get(page))
        .route("/breakers", get(breakers))
        .route("/breakers/{key}", get(breaker))
        .route("/events", get(events))
        .route_layer(middleware::from_fn_with_state(hub.clone(), guard::reads));
    let router = Router::new()
        .merge(reads)
        .route("/breakers/{key}/{action}", post(control))
        .route("/health", get(health));
    #[cfg(feature = "chaos")]
    let router = router
        .route("/chaos/{key}/{fault}", post(crate::chaos::inject))
        .route("/faults/{name}/{switch}", post(crate::chaos::switch));
    router.with_state(hub)
}

async fn page(Shared(hub): Shared<Arc<Hub>>) -> Response {
    hub.ensure_task();
    (
        [
            (header::CACHE_CONTROL, "no-store"),
            (header::CONTENT_SECURITY_POLICY, content_security_policy()),
        ],
        Html(dashboard_html()),
    )
        .into_response()
}

async fn breakers(Shared(hub): Shared<Arc<Hub>>) -> Response {
    hub.ensure_task();
    Json(hub.breakers()).into_response()
}

fn unknown_key(key: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "unknown_key",
        format!("no breaker `{key}` in this registry; `GET breakers` lists the keys"),
    )
}

async fn breaker(Shared(hub): Shared<Arc<Hub>>, Path(key): Path<String>) -> Response {
    hub.ensure_task();
    match hub.registry.get(&key) {
        None => unknown_key(&key),
        Some(b) => {
            let snapshot = b.snapshot();
            let history = hub.history();
            let card = crate::board::card(
                &snapshot,
                history.keys.get(key.as_str()),
                &hub.config,
                hub.registry,
            );
            Json(card).into_response()
        }
    }
}

async fn health(Shared(hub): Shared<Arc<Hub>>) -> Response {
    let report = crate::health::report(&hub.registry.snapshot(), &hub.config.critical);
    crate::health::respond(&report)
}

async fn events(Shared(hub): Shared<Arc<Hub>>) -> Response {
    hub.ensure_task();
    let Some(connection) = hub.connect() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_connections",
            format!(
                "{} event-stream connections are open, the most this router serves \
                 (`AdminConfig::max_connections`); close one or raise the cap",
                hub.connections()
            ),
        );
    };
    crate::stream::events(connection)
}

async fn control(
    Shared(hub): Shared<Arc<Hub>>,
    Path((key, action)): Path<(String, String)>,
    parts: Parts,
) -> Response {
    hub.ensure_task();
    let Some(act) = Action::parse(&action) else {
        if let Some(message) = guard::forged(&parts) {
            return guard::refused(&key, &action, StatusCode::FORBIDDEN, "csrf", message);
        }
        return guard::refused(
            &key,
            &action,
            StatusCode::NOT_FOUND,
            "unknown_action",
            format!(
                "unknown action `{action}`; use one of `force_open`, `disable`, `metrics_only`, `reset`"
            ),
        );
    };
    let operator = match guard::authorized(&hub, &parts, &key, &action, act) {
        Ok(operator) => operator,
        Err(refused) => return *refused,
    };
    let Some(breaker) = hub.registry.get(&key) else {
        return unknown_key(&key);
    };
    #[cfg(feature = "redis")]
    if let Some(unavailable) = move_in_store(&hub, &key, act, &breaker).await {
        return unavailable;
    }
    tracing::warn!(
        target: "fusebox",
        event = "operator_action",
        key = ?key,
        action = act.as_str(),
        operator = ?operator,
        "an operator ran a control"
    );
    hub.act(&key, act.as_str(), &operator, || match act {
        Action::ForceOpen => breaker.force_open(),
        Action::Disable => breaker.disable(),
        Action::MetricsOnly => breaker.metrics_only(),
        Action::Reset => breaker.reset(),
        #[cfg(feature = "chaos")]
        Action::Chaos => {}
    });
    let snapshot = breaker.snapshot();
    let history = hub.history();
    Json(crate::board::card(
        &snapshot,
        history.keys.get(key.as_str()),
        &hub.config,
        hub.registry,
    ))
    .into_response()
}

/// The state a control moves a key's shared circuit to: none for `metrics_only` (no shared
/// form) and none for a local key (`shared = false`), which never touches the store.
#[cfg(feature = "redis")]
pub(crate) fn shared_state(act: Action, policy: &fusebox::Policy) -> Option<fusebox::State> {
    use fusebox::State;
    if !policy.settings().shared {
        return None;
    }
    match act {
        Action::ForceOpen => Some(State::ForcedOpen),
        Action::Disable => Some(State::Disabled),
        Action::Reset => Some(State::Closed),
        Action::MetricsOnly => None,
        #[cfg(feature = "chaos")]
        Action::Chaos => None,
    }
}

/// Moves the shared circuit of `key` in the store for `act` (`force_open`, `disable`, `reset`;
/// not for a local key); the `503` to answer when the store cannot.
#[cfg(feature = "redis")]
async fn move_in_store(
    hub: &Hub,
    key: &str,
    act: Action,
    breaker: &fusebox::Breaker,
) -> Option<Response> {
    let store = hub.config.store.as_ref()?;
    let policy = breaker.policy();
    let state = shared_state(act, &policy)?;
    let e = store.force(key, policy, state).await.err()?;
    Some(error(
        StatusCode::SERVICE_UNAVAILABLE,
        "store_unavailable",
        format!("cannot move `{key}` in the store ({e}); try again"),
    ))
}

/// The page's Content-Security-Policy: its `<meta>`'s (no inline script or style but the page's
/// own, by hash; requests to its own origin only), plus `frame-ancestors 'none'`, which only a
/// header can say.
pub(crate) fn content_security_policy() -> &'static str {
    static POLICY: LazyLock<String> = LazyLock::new(|| {
        let page = dashboard_html();
        let start = page
            .find(META_CSP)
            .map_or(page.len(), |at| at + META_CSP.len());
        let policy = page[start..].split('"').next().unwrap_or_default();
        format!("{policy}; frame-ancestors 'none'")
    });
    &POLICY
}

/// What precedes the policy in the page's `<meta>`.
pub(crate) const META_CSP: &str = r#"<meta http-equiv="Content-Security-Policy" content=""#;

/// The dashboard page that `GET /` serves. It reads `events` relative to its own address; a
/// front that merges several instances' event streams can serve it as it is (one column per
/// `instance`). It carries its Content-Security-Policy in a `<meta>`: every server-given string
/// is shown as text, and no script but the page's own runs.
#[must_use]
pub fn dashboard_html() -> &'static str {
    include_str!("dashboard.html")
}
