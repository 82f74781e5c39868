//! Pushback: a failure that carries the wait a server asked for ([`RetryAfter`]).
//!
//! A counted failure may say how long the backend asked its clients to stay away (an HTTP
//! `Retry-After`, a gRPC retry hint, a rate limiter's reset time). The breaker keeps the latest
//! moment such a failure asked to be left alone until (its clock's time plus the wait); when the
//! circuit trips, or a failed recovery reopens it, the open wait is at least what is left of it,
//! capped by `open_max` (never below `open_for`). The attempt driver (`retry`) never starts the
//! next attempt before the wait is over. See the guide, `fusebox::guide::load_control`.

use std::time::Duration;

/// An error that can say how long the server asked its clients to stay away.
///
/// Implement it on the error type of an annotated function: a counted failure whose
/// `retry_after` is `Some(wait)` opens the circuit for at least `wait` when it trips it (capped
/// by `open_max`), and a retry (`retry = n`) never starts before `wait` is over. Error types
/// that do not implement it are unaffected; the attribute reads it without requiring it.
///
/// ```
/// use std::time::Duration;
///
/// #[derive(Debug)]
/// enum ApiError {
///     Busy { retry_after: Option<Duration> },
///     Refused(fusebox::Error),
/// }
///
/// impl From<fusebox::Error> for ApiError {
///     fn from(refused: fusebox::Error) -> Self {
///         ApiError::Refused(refused)
///     }
/// }
///
/// impl fusebox::RetryAfter for ApiError {
///     fn retry_after(&self) -> Option<Duration> {
///         match self {
///             ApiError::Busy { retry_after } => *retry_after,
///             ApiError::Refused(_) => None,
///         }
///     }
/// }
///
/// #[fusebox::circuit_breaker(key = "pushback-doc", consecutive = 1, open_for = "1s")]
/// fn call() -> Result<(), ApiError> {
///     Err(ApiError::Busy { retry_after: Some(Duration::from_secs(7)) })
/// }
///
/// assert!(call().is_err());
/// // Open for the 7 seconds the server asked for, not the policy's 1 second.
/// let Err(ApiError::Refused(refused)) = call() else { panic!("open") };
/// assert!(refused.retry_after().unwrap() > Duration::from_secs(6));
/// ```
///
/// A generic function's error type parameter is read only when the function bounds it by
/// `RetryAfter` (`E: fusebox::RetryAfter`); otherwise its failures carry no wait.
pub trait RetryAfter {
    /// The wait the server asked for, or `None` when it asked for none.
    fn retry_after(&self) -> Option<Duration>;
}

impl<T: RetryAfter + ?Sized> RetryAfter for &T {
    #[inline]
    fn retry_after(&self) -> Option<Duration> {
        (**self).retry_after()
    }
}

impl<T: RetryAfter + ?Sized> RetryAfter for Box<T> {
    #[inline]
    fn retry_after(&self) -> Option<Duration> {
        (**self).retry_after()
    }
}

/// The error an annotated function failed with, wrapped so the expansion can read its
/// [`RetryAfter`] without requiring it: `(&PushbackOf(&error)).pushback()` finds
/// [`ReadsRetryAfter`] when the type implements [`RetryAfter`] and [`NoRetryAfter`] (by autoref)
/// otherwise. Not for use outside the expansion.
#[doc(hidden)]
#[derive(Debug)]
pub struct PushbackOf<'a, E: ?Sized>(pub &'a E);

/// The [`PushbackOf`] method of an error type that implements [`RetryAfter`].
#[doc(hidden)]
pub trait ReadsRetryAfter {
    /// The error's wait.
    fn pushback(&self) -> Option<Duration>;
}

impl<E: RetryAfter + ?Sized> ReadsRetryAfter for PushbackOf<'_, E> {
    #[inline]
    fn pushback(&self) -> Option<Duration> {
        self.0.retry_after()
    }
}

/// The [`PushbackOf`] method of any other error type: no wait.
#[doc(hidden)]
pub trait NoRetryAfter {
    /// No wait.
    #[inline(always)]
    fn pushback(&self) -> Option<Duration> {
        None
    }
}

impl<E: ?Sized> NoRetryAfter for &PushbackOf<'_, E> {}

#[cfg(test)]
mod tests {
    use super::*;

    struct Busy;

    impl RetryAfter for Busy {
        fn retry_after(&self) -> Option<Duration> {
            Some(Duration::from_secs(7))
        }
    }

    struct Plain;

    #[test]
    // The borrow picks the method: without it `Plain` would find no `pushback` at all.
    #[allow(clippy::needless_borrow)]
    fn the_wait_is_read_only_from_types_that_carry_one() {
        #[allow(unused_imports)]
        use super::{NoRetryAfter as _, ReadsRetryAfter as _};
        assert_eq!(
            (&PushbackOf(&Busy)).pushback(),
            Some(Duration::from_secs(7))
        );
        assert_eq!((&PushbackOf(&Plain)).pushback(), None);
        assert_eq!(
            (&PushbackOf(&Box::new(Busy))).pushback(),
            Some(Duration::from_secs(7))
        );
    }

    fn generic<E>(error: &E) -> Option<Duration> {
        #[allow(unused_imports)]
        use super::{NoRetryAfter as _, ReadsRetryAfter as _};
        (&PushbackOf(error)).pushback()
    }

    #[test]
    fn an_unbounded_type_parameter_carries_no_wait() {
        assert_eq!(generic(&Busy), None);
    }
}
