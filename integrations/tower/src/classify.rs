//! Classifiers: which outcomes of a wrapped service count as failures against the circuit.
//!
//! A classifier sees the inner service's `Result` before the layer boxes its error. An `Ok` that
//! the classifier accepts as a failure (an HTTP 503, say) counts as one; an `Ok` it does not
//! accept is a success; an `Err` it does not accept is a business error and is not counted at all
//! (or counts as a success under [`Policy::others`](fusebox::Policy::others)`(Others::Success)`),
//! exactly like an error outside the attribute's `failure = […]`.

use std::time::{Duration, SystemTime};

/// Decides whether one outcome of a wrapped service counts as a failure.
///
/// Implemented by every `Fn(&Result<T, E>) -> bool` closure, by [`AnyError`] (the default),
/// [`HttpFailures`] and [`GrpcFailures`].
pub trait Classify<T, E> {
    /// True when `outcome` counts as a failure against the circuit.
    fn is_failure(&self, outcome: &Result<T, E>) -> bool;

    /// Pushback: the wait a failed `outcome` asked for (see [`RetryAfter`](fusebox::RetryAfter)),
    /// or `None`. `now` is the wall time of the breaker's clock
    /// ([`Clock::wall_time`](fusebox::clock::Clock::wall_time)), against which a date becomes a
    /// wait. Asked only of outcomes [`is_failure`](Classify::is_failure) counts. `None` unless
    /// implemented; [`HttpFailures`] and [`GrpcFailures`] read `Retry-After`
    /// ([`http_retry_after`]).
    #[inline]
    fn retry_after(&self, outcome: &Result<T, E>, now: SystemTime) -> Option<Duration> {
        let _ = (outcome, now);
        None
    }
}

impl<T, E, F> Classify<T, E> for F
where
    F: Fn(&Result<T, E>) -> bool,
{
    #[inline]
    fn is_failure(&self, outcome: &Result<T, E>) -> bool {
        self(outcome)
    }
}

/// The default classifier: every `Err` of the inner service counts, every `Ok` is a success
/// (like the attribute without `failure = […]`).
#[derive(Debug, Clone, Copy, Default)]
pub struct AnyError;

impl<T, E> Classify<T, E> for AnyError {
    #[inline]
    fn is_failure(&self, outcome: &Result<T, E>) -> bool {
        outcome.is_err()
    }
}

/// HTTP: a `5xx` or `429 Too Many Requests` response counts, any other status (`4xx` included)
/// does not, and a transport error (the inner service's `Err`) counts.
#[derive(Debug, Clone, Copy, Default)]
pub struct HttpFailures;

/// True for the statuses [`HttpFailures`] counts: `5xx` and `429 Too Many Requests`.
#[must_use]
pub fn http_status_counts(status: http::StatusCode) -> bool {
    status.is_server_error() || status == http::StatusCode::TOO_MANY_REQUESTS
}

impl<B, E> Classify<http::Response<B>, E> for HttpFailures {
    #[inline]
    fn is_failure(&self, outcome: &Result<http::Response<B>, E>) -> bool {
        match outcome {
            Ok(response) => http_status_counts(response.status()),
            Err(_) => true,
        }
    }

    /// `Retry-After` of a `429` or `503` response ([`http_retry_after`]).
    fn retry_after(
        &self,
        outcome: &Result<http::Response<B>, E>,
        now: SystemTime,
    ) -> Option<Duration> {
        let response = outcome.as_ref().ok()?;
        http_retry_after(response.status(), response.headers(), now)
    }
}

/// Pushback of an HTTP response: the wait its `Retry-After` header asks for, when the status is
/// `429 Too Many Requests` or `503 Service Unavailable` (RFC 9110 §10.2.3; the header means
/// something else on a redirect, and nothing on other statuses). The value is delta-seconds
/// (`Retry-After: 7`) or an HTTP-date (`Retry-After: Wed, 21 Oct 2015 07:28:07 GMT`), which
/// becomes the time from `now` to that date. `None` without the header, for a value that is
/// neither, and for a date not after `now`.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use fusebox_tower::http_retry_after;
///
/// let mut headers = http::HeaderMap::new();
/// headers.insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("7"));
/// let now = SystemTime::now();
/// assert_eq!(
///     http_retry_after(http::StatusCode::SERVICE_UNAVAILABLE, &headers, now),
///     Some(Duration::from_secs(7))
/// );
/// assert_eq!(http_retry_after(http::StatusCode::OK, &headers, now), None);
/// ```
#[must_use]
pub fn http_retry_after(
    status: http::StatusCode,
    headers: &http::HeaderMap,
    now: SystemTime,
) -> Option<Duration> {
    if status != http::StatusCode::TOO_MANY_REQUESTS
        && status != http::StatusCode::SERVICE_UNAVAILABLE
    {
        return None;
    }
    retry_after_value(headers.get(http::header::RETRY_AFTER)?, now)
}

/// The wait a `Retry-After` value asks for, measured from `now` when it is a date (see
/// [`http_retry_after`]); `None` for a malformed value or a date not after `now`.
#[must_use]
pub fn retry_after_value(value: &http::HeaderValue, now: SystemTime) -> Option<Duration> {
    let text = value.to_str().ok()?.trim();
    let wait = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        // delta-seconds: a value too large for a `u64` waits as long as one can say.
        Duration::from_secs(text.parse().unwrap_or(u64::MAX))
    } else {
        httpdate::parse_http_date(text)
            .ok()?
            .duration_since(now)
            .ok()?
    };
    (!wait.is_zero()).then_some(wait)
}

/// gRPC status `DEADLINE_EXCEEDED`.
pub const GRPC_DEADLINE_EXCEEDED: i32 = 4;
/// gRPC status `RESOURCE_EXHAUSTED`.
pub const GRPC_RESOURCE_EXHAUSTED: i32 = 8;
/// gRPC status `UNAVAILABLE`.
pub const GRPC_UNAVAILABLE: i32 = 14;

/// True for the gRPC status codes [`GrpcFailures`] counts: `UNAVAILABLE` (14),
/// `DEADLINE_EXCEEDED` (4) and `RESOURCE_EXHAUSTED` (8). Every other code (`OK`, `NOT_FOUND`,
/// `INVALID_ARGUMENT`, …) is the service answering and does not count.
///
/// Takes the numeric code, so it works with any gRPC stack; with tonic:
/// `grpc_code_counts(status.code() as i32)`.
#[must_use]
pub fn grpc_code_counts(code: i32) -> bool {
    matches!(
        code,
        GRPC_UNAVAILABLE | GRPC_DEADLINE_EXCEEDED | GRPC_RESOURCE_EXHAUSTED
    )
}

/// The gRPC code carried by a `grpc-status` header value, if it is a valid one.
#[must_use]
pub fn grpc_status_code(value: &http::HeaderValue) -> Option<i32> {
    let text = value.to_str().ok()?;
    if text.is_empty() || text.len() > 2 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// gRPC over HTTP (a tonic `Channel` or any `Service<http::Request<_>>` speaking gRPC): counts a
/// response whose `grpc-status` header is `UNAVAILABLE`, `DEADLINE_EXCEEDED` or
/// `RESOURCE_EXHAUSTED` (see [`grpc_code_counts`]), a `5xx` or `429` HTTP status, and a
/// transport error.
///
/// It reads the response *headers*: servers send an error status there when the call fails before
/// any message ("trailers-only" responses, which is how tonic and grpc-go report a handler's
/// error). A status sent in the trailers after streamed messages arrives after the response and
/// is not seen; classify it in your own code with [`grpc_code_counts`].
#[derive(Debug, Clone, Copy, Default)]
pub struct GrpcFailures;

impl<B, E> Classify<http::Response<B>, E> for GrpcFailures {
    /// `Retry-After` of a `429` or `503` response ([`http_retry_after`]).
    fn retry_after(
        &self,
        outcome: &Result<http::Response<B>, E>,
        now: SystemTime,
    ) -> Option<Duration> {
        let response = outcome.as_ref().ok()?;
        http_retry_after(response.status(), response.headers(), now)
    }

    fn is_failure(&self, outcome: &Result<http::Response<B>, E>) -> bool {
        match outcome {
            Ok(response) => {
                http_status_counts(response.status())
                    || response
                        .headers()
                        .get("grpc-status")
                        .and_then(grpc_status_code)
                        .is_some_and(grpc_code_counts)
            }
            Err(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grpc(status: &str) -> Result<http::Response<()>, ()> {
        Ok(http::Response::builder()
            .header("grpc-status", status)
            .body(())
            .unwrap())
    }

    fn http(status: u16) -> Result<http::Response<()>, ()> {
        Ok(http::Response::builder().status(status).body(()).unwrap())
    }

    #[test]
    fn grpc_unavailable_deadline_and_exhausted_count() {
        for code in ["14", "4", "8"] {
            assert!(GrpcFailures.is_failure(&grpc(code)), "grpc-status {code}");
        }
    }

    #[test]
    fn grpc_answers_of_the_service_do_not_count() {
        // OK, CANCELLED, UNKNOWN, INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED,
        // FAILED_PRECONDITION, ABORTED, OUT_OF_RANGE, UNIMPLEMENTED, INTERNAL, DATA_LOSS,
        // UNAUTHENTICATED
        for code in [0, 1, 2, 3, 5, 6, 7, 9, 10, 11, 12, 13, 15, 16] {
            assert!(!grpc_code_counts(code), "code {code}");
            assert!(
                !GrpcFailures.is_failure(&grpc(&code.to_string())),
                "grpc-status {code}"
            );
        }
    }

    #[test]
    fn grpc_status_header_garbage_does_not_count_and_does_not_panic() {
        for bad in ["", "x", "+14", "014", "99999999999999999999", "-1", " 14"] {
            assert!(!GrpcFailures.is_failure(&grpc(bad)), "{bad:?}");
        }
        let no_header = Ok::<_, ()>(http::Response::new(()));
        assert!(!GrpcFailures.is_failure(&no_header));
    }

    #[test]
    fn grpc_transport_errors_and_http_5xx_count() {
        assert!(GrpcFailures.is_failure(&Err::<http::Response<()>, _>(())));
        assert!(GrpcFailures.is_failure(&http(503)));
    }

    #[test]
    fn http_5xx_and_429_count_and_4xx_do_not() {
        for status in [500, 502, 503, 504, 599, 429] {
            assert!(HttpFailures.is_failure(&http(status)), "{status}");
        }
        for status in [200, 204, 301, 400, 401, 403, 404, 409, 422, 428, 431] {
            assert!(!HttpFailures.is_failure(&http(status)), "{status}");
        }
        assert!(HttpFailures.is_failure(&Err::<http::Response<()>, _>(())));
    }

    fn with_retry_after(status: u16, value: &str) -> Result<http::Response<()>, ()> {
        Ok(http::Response::builder()
            .status(status)
            .header("retry-after", value)
            .body(())
            .unwrap())
    }

    #[test]
    fn retry_after_reads_seconds_and_dates_of_429_and_503() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let date = httpdate::fmt_http_date(now + Duration::from_secs(7));
        for status in [429, 503] {
            for value in ["7", " 7 ", date.as_str()] {
                assert_eq!(
                    HttpFailures.retry_after(&with_retry_after(status, value), now),
                    Some(Duration::from_secs(7)),
                    "{status} {value:?}"
                );
            }
            assert_eq!(
                GrpcFailures.retry_after(&with_retry_after(status, "7"), now),
                Some(Duration::from_secs(7))
            );
        }
    }

    #[test]
    fn retry_after_ignores_other_statuses_past_dates_and_garbage() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let past = httpdate::fmt_http_date(now - Duration::from_secs(7));
        for status in [500, 502, 504, 301, 200] {
            assert_eq!(
                HttpFailures.retry_after(&with_retry_after(status, "7"), now),
                None
            );
        }
        for value in ["", "0", "-7", "7s", "1.5", "soon", past.as_str()] {
            assert_eq!(
                HttpFailures.retry_after(&with_retry_after(503, value), now),
                None,
                "{value:?}"
            );
        }
        assert_eq!(HttpFailures.retry_after(&http(503), now), None);
        assert_eq!(
            HttpFailures.retry_after(&with_retry_after(503, "99999999999999999999"), now),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(AnyError.retry_after(&Err::<(), _>(()), now), None);
    }

    #[test]
    fn any_error_counts_errors_only() {
        assert!(AnyError.is_failure(&Err::<(), _>(())));
        assert!(!AnyError.is_failure(&Ok::<_, ()>(())));
    }
}
