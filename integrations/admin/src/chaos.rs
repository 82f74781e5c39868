//! Fault injection switched by operators (feature `chaos`, for staging): `POST /chaos/{key}/{fault}`
//! injects a rejection or latency into a key's calls, or clears its fault; `POST
//! /faults/{name}/{on|off}` switches a fault the service registered in code by name
//! ([`fusebox::chaos::Injections::register`]: the way to a fault that needs a typed error). Both
//! behind the controls' CSRF guard and authorisation hook ([`Action::Chaos`]); each switch is a
//! WARN event `chaos_switched` naming the key and the fault.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State as Shared};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use fusebox::chaos::Fault;
use serde_json::json;

use crate::config::Action;
use crate::guard::authorized;
use crate::guard::error;
use crate::hub::Hub;

/// The longest latency an operator may inject: a minute.
const MAX_LATENCY_MS: u64 = 60_000;

/// `POST /chaos/{key}/{fault}`: `rejection`, `latency?ms=N` (either with `rate=0.0..1.0` and
/// `seed=N`), or `clear`.
pub(crate) async fn inject(
    Shared(hub): Shared<Arc<Hub>>,
    Path((key, fault)): Path<(String, String)>,
    parts: Parts,
) -> Response {
    let operator = match authorized(&hub, &parts, &key, &fault, Action::Chaos) {
        Ok(operator) => operator,
        Err(refused) => return *refused,
    };
    let chaos = hub.registry.chaos();
    if fault == "clear" {
        let cleared = chaos.switch_off(&key);
        hub.act(&key, "chaos_clear", &operator, || {});
        return Json(json!({"key": key, "fault": null, "cleared": cleared})).into_response();
    }
    let query = Query(parts.uri.query().unwrap_or(""));
    let made = match fault.as_str() {
        "rejection" => Ok(Fault::rejection()),
        "latency" => match query.get("ms").map(str::parse::<u64>) {
            Some(Ok(ms)) if ms <= MAX_LATENCY_MS => Ok(Fault::latency(Duration::from_millis(ms))),
            _ => Err(format!(
                "`latency` takes the delay in milliseconds, at most {MAX_LATENCY_MS}: \
                 `POST chaos/{{key}}/latency?ms=300`"
            )),
        },
        _ => {
            return error(
                StatusCode::NOT_FOUND,
                "unknown_fault",
                format!(
                    "unknown fault `{fault}`; use `rejection`, `latency?ms=N` or `clear`, or \
                     switch a fault registered in code with `POST faults/{{name}}/on`"
                ),
            );
        }
    };
    let fault = match made.and_then(|fault| query.rated(fault)) {
        Ok(fault) => fault,
        Err(message) => return error(StatusCode::BAD_REQUEST, "bad_fault", message),
    };
    let kind = fault.kind();
    hub.act(&key, action_name(kind), &operator, || {
        chaos.switch_on(&key, fault)
    });
    Json(json!({"key": key, "fault": kind.as_str()})).into_response()
}

/// `POST /faults/{name}/{on|off}`: switches the fault registered as `name`.
pub(crate) async fn switch(
    Shared(hub): Shared<Arc<Hub>>,
    Path((name, switch)): Path<(String, String)>,
    parts: Parts,
) -> Response {
    let chaos = hub.registry.chaos();
    let Some((_, key, kind)) = chaos.registered().into_iter().find(|(n, ..)| *n == name) else {
        return error(
            StatusCode::NOT_FOUND,
            "unknown_fault",
            format!("no fault is registered as `{name}`; the service registers them in code"),
        );
    };
    let operator = match authorized(&hub, &parts, &key, &switch, Action::Chaos) {
        Ok(operator) => operator,
        Err(refused) => return *refused,
    };
    let on = match switch.as_str() {
        "on" => true,
        "off" => false,
        _ => {
            return error(
                StatusCode::NOT_FOUND,
                "unknown_switch",
                format!("unknown switch `{switch}`; use `on` or `off`"),
            );
        }
    };
    let action = if on { action_name(kind) } else { "chaos_clear" };
    let mut switched = Ok(());
    hub.act(&key, action, &operator, || {
        switched = chaos.switch(&name, on)
    });
    match switched {
        Ok(()) => Json(json!({"key": key, "name": name, "fault": kind.as_str(), "on": on}))
            .into_response(),
        Err(unknown) => error(StatusCode::NOT_FOUND, "unknown_fault", unknown.to_string()),
    }
}

/// The action a card's history shows for a switched-on fault.
fn action_name(kind: fusebox::chaos::FaultKind) -> &'static str {
    use fusebox::chaos::FaultKind;
    match kind {
        FaultKind::Rejection => "chaos_rejection",
        FaultKind::Latency => "chaos_latency",
        FaultKind::Failure => "chaos_failure",
        FaultKind::RetryAfter => "chaos_retry_after",
        _ => "chaos",
    }
}

/// A request's query string, read by name.
struct Query<'a>(&'a str);

impl Query<'_> {
    /// The value of `name`, if present.
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find_map(|(n, value)| (n == name).then_some(value))
    }

    /// `fault` at the query's `rate` and `seed`, when given.
    fn rated(&self, mut fault: Fault) -> Result<Fault, String> {
        if let Some(rate) = self.get("rate") {
            match rate.parse::<f64>() {
                Ok(rate) if (0.0..=1.0).contains(&rate) => fault = fault.rate(rate),
                _ => {
                    return Err(format!(
                        "`rate` is a share from 0 to 1, like `rate=0.25`, not `{rate}`"
                    ));
                }
            }
        }
        if let Some(seed) = self.get("seed") {
            match seed.parse::<u64>() {
                Ok(seed) => fault = fault.seed(seed),
                Err(_) => {
                    return Err(format!(
                        "`seed` is a whole number, like `seed=7`, not `{seed}`"
                    ));
                }
            }
        }
        Ok(fault)
    }
}
