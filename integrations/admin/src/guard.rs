//! The router's guards: the CSRF and origin check of the controls, their authorisation, the
//! read-side hook, and the words of each refusal (the JSON error every route answers with).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Request, State as Shared};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::config::{Action, AdminConfig, CSRF_HEADER, ControlRequest, Hook};
use crate::hub::Hub;
use crate::request::ReadRequest;

/// The JSON error of a refused or failed request: `{"error": code, "message": message}`.
pub(crate) fn error(status: StatusCode, code: &str, message: String) -> Response {
    (status, Json(json!({"error": code, "message": message}))).into_response()
}

/// The middleware of the read routes: refuses with `403` what the read hook does not allow.
pub(crate) async fn reads(Shared(hub): Shared<Arc<Hub>>, request: Request, next: Next) -> Response {
    let Some(hook) = hub.config.authorize_read.as_ref() else {
        return next.run(request).await;
    };
    let (parts, body) = request.into_parts();
    let read = ReadRequest::of(&parts);
    // The hook is user code: a panic refuses the read instead of unwinding here.
    let allowed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&read)));
    if allowed.unwrap_or(false) {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let path = parts.uri.path();
    tracing::warn!(target: "fusebox", event = "read_refused", path = ?path, peer = ?read.peer(), "an operator read was refused");
    error(
        StatusCode::FORBIDDEN,
        "unauthorized",
        "`AdminConfig::authorize_read` refused this read; ask the service's owner for access"
            .to_owned(),
    )
}

/// The authority (`host[:port]`) the request was sent to: its `Host` header, else its URI's
/// (HTTP/2's `:authority`, an absolute-form HTTP/1.1 target).
fn authority(parts: &Parts) -> Option<&str> {
    match parts.headers.get(header::HOST) {
        Some(host) => host.to_str().ok(),
        None => parts.uri.authority().map(|a| a.as_str()),
    }
}

/// Why a control request fails the CSRF guard, if it does.
pub(crate) fn forged(parts: &Parts) -> Option<String> {
    let headers = &parts.headers;
    let sent = headers
        .get(CSRF_HEADER)
        .is_some_and(|v| !v.as_bytes().is_empty());
    if !sent {
        return Some(format!(
            "operator controls need the header `{CSRF_HEADER}` (any value), which a page of another \
             site cannot send; add it to the request (the dashboard sends it)"
        ));
    }
    if headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes() == b"cross-site")
    {
        return Some("a cross-site request cannot use operator controls".to_owned());
    }
    // No `Origin`: not a browser's cross-origin request (the CSRF header covers forms).
    let origin = headers.get(header::ORIGIN)?;
    let Ok(origin) = origin.to_str() else {
        return Some("the request's `Origin` is not readable; operator controls accept requests from their own origin only".to_owned());
    };
    if origin == "null" {
        return Some(
            "the request comes from an opaque origin (`Origin: null`: a sandboxed page, a file, a \
             redirect); operator controls accept requests from their own origin only"
                .to_owned(),
        );
    }
    let Some(authority) = authority(parts) else {
        return Some(format!(
            "the request comes from `{origin}` and names no `Host`, so its origin cannot be \
             checked; send the `Host` header"
        ));
    };
    let origin_host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
    if !origin_host.eq_ignore_ascii_case(authority) {
        return Some(format!(
            "the request comes from `{origin}`, another origin than `{authority}`; operator \
             controls accept requests from their own origin only"
        ));
    }
    None
}

/// Why a control that no hook allowed is refused: the action, the key, the peer, and for
/// [`AdminConfig::allow_loopback`] what it could not see.
pub(crate) fn unauthorized(config: &AdminConfig, request: &ControlRequest<'_>) -> String {
    let (action, key) = (request.action(), request.key());
    let refused = |by: &str| format!("`AdminConfig::{by}` refused `{action}` on `{key}`");
    match config.hook() {
        None => {
            "operator controls are refused: no `AdminConfig::authorize` hook allows them".to_owned()
        }
        Some(Hook::Loopback) => match (request.forwarded(), request.peer()) {
            (Some(header), _) => format!(
                "{}: the request carries `{header}`, so a proxy forwarded it and its sender is not \
                 a local operator; behind a proxy, allow the controls with a token \
                 (`AdminConfig::allow_bearer` or `AdminConfig::authorize`)",
                refused("allow_loopback")
            ),
            (None, None) => format!(
                "{}: the peer is unknown (the server does not record peer addresses); serve the \
                 app with `into_make_service_with_connect_info::<std::net::SocketAddr>()`",
                refused("allow_loopback")
            ),
            (None, Some(peer)) => format!(
                "{} from {peer}, which is not a loopback address",
                refused("allow_loopback")
            ),
        },
        Some(Hook::Bearer) => format!(
            "{}: send `Authorization: Bearer <token>` with the service's token (the dashboard has \
             a field for it)",
            refused("allow_bearer")
        ),
        Some(Hook::Custom) => match request.peer() {
            Some(peer) => format!("{} from {peer}", refused("authorize")),
            None => refused("authorize"),
        },
    }
}

/// A refused control: a WARN event `operator_refused` (the key and the action come from the
/// request: fields, escaped, never the message) and the JSON error.
pub(crate) fn refused(
    key: &str,
    action: &str,
    status: StatusCode,
    code: &str,
    message: String,
) -> Response {
    tracing::warn!(target: "fusebox", event = "operator_refused", key = ?key, action = ?action, reason = code, why = ?message, "an operator control was refused");
    error(status, code, message)
}

/// The operator the authorisation hook names for the control `act` (written `action`) on `key`,
/// after the CSRF guard; the refusal to answer otherwise (boxed: a `Response` is large).
pub(crate) fn authorized(
    hub: &Hub,
    parts: &Parts,
    key: &str,
    action: &str,
    act: Action,
) -> Result<String, Box<Response>> {
    if let Some(message) = forged(parts) {
        return Err(Box::new(refused(
            key,
            action,
            StatusCode::FORBIDDEN,
            "csrf",
            message,
        )));
    }
    let request = ControlRequest {
        request: crate::request::ReadRequest::of(parts),
        key,
        action: act,
    };
    let operator = hub.config.authorize.as_ref().and_then(|(hook, _)| {
        // The hook is user code: a panic refuses the control instead of unwinding here.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&request)))
            .ok()
            .flatten()
    });
    operator.ok_or_else(|| {
        let why = unauthorized(&hub.config, &request);
        Box::new(refused(
            key,
            action,
            StatusCode::FORBIDDEN,
            "unauthorized",
            why,
        ))
    })
}
