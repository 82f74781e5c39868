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
///     Rejected(fusebox::Error),
/// }
///
/// impl From<fusebox::Error> for ApiError {
///     fn from(rejected: fusebox::Error) -> Self {
///         ApiError::Rejected(rejected)
///     }
/// }
///
/// impl fusebox::RetryAfter for ApiError {
///     fn retry_after(&self) -> Option<Duration> {
///         match self {
///             ApiError::Busy { retry_after } => *retry_after,
///             ApiError::Rejected(_) => None,
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
/// let Err(ApiError::Rejected(rejected)) = call() else { panic!("open") };
/// assert!(rejected.retry_after().unwrap() > Duration::from_secs(6));
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
/// [`RetryAfter`] without requiring it: `PushbackOf(&error).pushback()` is the inherent method of
/// an error type that implements [`RetryAfter`], and otherwise (that method's bound unmet) the
/// method of [`NoPushback`], reached by deref, which carries no wait. Method calls on concrete
/// types, so the expansion needs no trait in scope. Not for use outside the expansion.
#[doc(hidden)]
#[derive(Debug)]
pub struct PushbackOf<'a, E: ?Sized>(pub &'a E);

impl<E: RetryAfter + ?Sized> PushbackOf<'_, E> {
    /// The error's wait.
    #[inline]
    #[must_use]
    pub fn pushback(&self) -> Option<Duration> {
        self.0.retry_after()
    }
}

impl<E: ?Sized> std::ops::Deref for PushbackOf<'_, E> {
    type Target = NoPushback;

    #[inline(always)]
    fn deref(&self) -> &NoPushback {
        &NoPushback
    }
}

/// What [`PushbackOf`] derefs to: the `pushback` of an error type that does not implement
/// [`RetryAfter`]. Not for use outside the expansion.
#[doc(hidden)]
#[derive(Debug)]
pub struct NoPushback;

impl NoPushback {
    /// No wait.
    #[inline(always)]
    #[must_use]
    pub fn pushback(&self) -> Option<Duration> {
        None
    }
}

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
    fn the_wait_is_read_only_from_types_that_carry_one() {
        assert_eq!(PushbackOf(&Busy).pushback(), Some(Duration::from_secs(7)));
        assert_eq!(PushbackOf(&Plain).pushback(), None);
        assert_eq!(
            PushbackOf(&Box::new(Busy)).pushback(),
            Some(Duration::from_secs(7))
        );
        let boxed: Box<dyn std::error::Error> = "not a RetryAfter".into();
        assert_eq!(PushbackOf(&boxed).pushback(), None);
    }

    fn generic<E>(error: &E) -> Option<Duration> {
        PushbackOf(error).pushback()
    }

    fn bounded<E: RetryAfter>(error: &E) -> Option<Duration> {
        PushbackOf(error).pushback()
    }

    #[test]
    fn a_bounded_type_parameter_carries_its_wait() {
        assert_eq!(bounded(&Busy), Some(Duration::from_secs(7)));
    }

    #[test]
    fn an_unbounded_type_parameter_carries_no_wait() {
        assert_eq!(generic(&Busy), None);
    }
}
