//! What a hook and the guards know of a request: [`ReadRequest`] (its path, headers, extensions
//! and peer), the proxy headers that make it not a local operator's, and the read hook's type.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::request::Parts;
use axum::http::{Extensions, HeaderMap};

/// The headers a proxy adds to a request it forwards: a request carrying one is not a local
/// operator's, whatever its peer address.
pub const PROXY_HEADERS: [&str; 3] = ["forwarded", "x-forwarded-for", "x-real-ip"];

/// The first of [`PROXY_HEADERS`] that `headers` carries.
pub(crate) fn forwarded(headers: &HeaderMap) -> Option<&'static str> {
    PROXY_HEADERS
        .into_iter()
        .find(|name| headers.contains_key(*name))
}

/// The peer address the server recorded (`into_make_service_with_connect_info`).
pub(crate) fn peer(extensions: &Extensions) -> Option<SocketAddr> {
    extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
        .map(|info| info.0)
}

/// A loopback peer (IPv4-mapped addresses included) and no proxy header.
pub(crate) fn is_local(parts: &Parts) -> bool {
    forwarded(&parts.headers).is_none()
        && peer(&parts.extensions).is_some_and(|p| p.ip().to_canonical().is_loopback())
}

/// A request as a hook sees it: a read (`GET /`, `/breakers`, `/breakers/{key}`, `/events`) for
/// the read hook ([`AdminConfig::authorize_read`](crate::AdminConfig::authorize_read)), and what a [`ControlRequest`](crate::ControlRequest) dereferences to.
#[derive(Debug)]
pub struct ReadRequest<'a> {
    parts: &'a Parts,
}

impl<'a> ReadRequest<'a> {
    pub(crate) fn of(parts: &'a Parts) -> Self {
        ReadRequest { parts }
    }

    /// The path, relative to where the router is nested (`/breakers`, `/events`, …).
    #[must_use]
    pub fn path(&self) -> &str {
        self.parts.uri.path()
    }

    /// The request's headers (an `Authorization` header, a session cookie, say).
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
        peer(&self.parts.extensions)
    }

    /// The first proxy header the request carries (`forwarded`, `x-forwarded-for`,
    /// `x-real-ip`): a proxy forwarded it.
    #[must_use]
    pub fn forwarded(&self) -> Option<&'static str> {
        forwarded(&self.parts.headers)
    }

    /// True when the peer is a loopback address and the request carries no proxy header: an
    /// operator on this host, as [`AdminConfig::allow_loopback`](crate::AdminConfig::allow_loopback) decides.
    #[must_use]
    pub fn is_local(&self) -> bool {
        is_local(self.parts)
    }
}

/// The read hook: `true` lets the request read.
pub(crate) type AuthorizeRead = Arc<dyn Fn(&ReadRequest<'_>) -> bool + Send + Sync>;
