//! Shared test fixtures: an error type with infrastructure and business variants, a helper that
//! declares a registry driven by its own fake clock, and an event capture layer ([`capture`]).
#![allow(dead_code)]

pub(crate) mod capture;

/// An error type shaped like a real client's: infrastructure failures and business errors.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ApiError {
    Timeout,
    Connect(u16),
    Unavailable { retry_in: u32 },
    Declined { code: u32 },
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for ApiError {
    fn from(e: fusebox::Error) -> Self {
        ApiError::Rejected(e)
    }
}

impl ApiError {
    pub(crate) fn rejection(&self) -> Option<&fusebox::Error> {
        match self {
            ApiError::Rejected(e) => Some(e),
            _ => None,
        }
    }
}

/// Declares `static $clock: LazyLock<FakeClock>` and `static $registry: LazyLock<Registry>` on it.
#[macro_export]
macro_rules! fake_registry {
    ($clock:ident, $registry:ident) => {
        static $clock: ::std::sync::LazyLock<::fusebox::clock::FakeClock> =
            ::std::sync::LazyLock::new(::fusebox::clock::FakeClock::new);
        static $registry: ::std::sync::LazyLock<::fusebox::Registry> =
            ::std::sync::LazyLock::new(|| ::fusebox::Registry::with_clock($clock.clone()));
    };
}
