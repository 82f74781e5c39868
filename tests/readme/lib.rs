//! The README's Rust snippets, compiled and run as doctests of this (unpublished) library:
//! `cargo test -p fusebox-suite --all-features --doc`. Each snippet shows what a reader writes;
//! the types it assumes (an order, a payment client, an error enum) are in [`support`], which a
//! snippet brings in with one hidden line (`# use fusebox_suite::support::*;`).
// The support items stand in for a reader's own types; their variants and errors need no docs.
#![allow(missing_docs, unreachable_pub, clippy::missing_errors_doc)]

/// The README, whose every `rust` block is a doctest. Compiled with every feature (`tower`,
/// `axum`, `reqwest`, `redis`), as `cargo xtask test` and CI run the suite.
#[cfg(all(doctest, feature = "axum", feature = "reqwest", feature = "redis"))]
#[doc = include_str!("../../README.md")]
pub mod readme {}

/// The README of `fusebox-replay` (its crates.io page), whose every `rust` block is a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../replay/README.md")]
pub mod replay_readme {}

/// The README of `fusebox-redis` (its crates.io page), whose every `rust` block is a doctest.
#[cfg(all(doctest, feature = "redis"))]
#[doc = include_str!("../../integrations/redis/README.md")]
pub mod redis_readme {}

/// What the README's snippets assume exists in the reader's code.
pub mod support {
    use fusebox::Cause;

    /// An order to charge.
    #[derive(Debug)]
    pub struct Order;

    /// What charging an order returns.
    #[derive(Debug)]
    pub struct Receipt;

    impl Receipt {
        /// A receipt for a payment queued for later.
        #[must_use]
        pub fn pending() -> Self {
            Receipt
        }
    }

    /// The payment client's error.
    #[derive(Debug)]
    pub enum PaymentError {
        Timeout,
        Connect(std::io::Error),
        Declined { code: u32 },
        Unavailable(fusebox::Error),
    }

    impl From<fusebox::Error> for PaymentError {
        fn from(e: fusebox::Error) -> Self {
            PaymentError::Unavailable(e)
        }
    }

    /// A client of the payment service.
    #[derive(Debug)]
    pub struct PaymentClient;

    impl PaymentClient {
        pub async fn authorize(&self, _order: &Order) -> Result<Receipt, PaymentError> {
            Ok(Receipt)
        }
    }

    /// The headline's fallback: queue the payment for later.
    pub async fn enqueue(
        _client: &PaymentClient,
        _order: &Order,
        cause: Cause<PaymentError>,
    ) -> Result<Receipt, PaymentError> {
        match cause {
            Cause::Rejected(_) => Ok(Receipt::pending()),
            cause => Err(cause.into_error()),
        }
    }

    /// A queue of payments to retry later.
    #[derive(Debug)]
    pub struct Queue;

    impl Queue {
        pub async fn push(&self, _order: &Order) -> Result<(), PaymentError> {
            Ok(())
        }
    }

    /// The queue the fallback pushes to.
    #[allow(non_upper_case_globals)]
    pub static queue: Queue = Queue;

    /// A search client, its answer and its error.
    #[derive(Debug)]
    pub struct Client;

    #[derive(Debug)]
    pub struct Hits;

    #[derive(Debug)]
    pub struct Hit;

    #[derive(Debug)]
    pub enum SearchError {
        Timeout,
        Connect,
        Unavailable(fusebox::Error),
    }

    impl From<fusebox::Error> for SearchError {
        fn from(e: fusebox::Error) -> Self {
            SearchError::Unavailable(e)
        }
    }

    impl Client {
        pub async fn search(&self, _q: &str) -> Result<Hits, SearchError> {
            Ok(Hits)
        }
    }

    /// The retry example's backend and error.
    #[derive(Debug)]
    pub enum BackendError {
        Timeout,
        Rejected(fusebox::Error),
    }

    impl From<fusebox::Error> for BackendError {
        fn from(e: fusebox::Error) -> Self {
            BackendError::Rejected(e)
        }
    }

    pub async fn backend() -> Result<u32, BackendError> {
        Err(BackendError::Timeout)
    }

    /// The dynamic-key example's URL, body and error.
    #[derive(Debug)]
    pub struct Url(pub &'static str);

    impl Url {
        #[must_use]
        pub fn host_str(&self) -> Option<&str> {
            Some(self.0)
        }
    }

    pub type Bytes = Vec<u8>;

    #[derive(Debug)]
    pub enum FetchError {
        Connect,
        Timeout,
        Rejected(fusebox::Error),
    }

    impl From<fusebox::Error> for FetchError {
        fn from(e: fusebox::Error) -> Self {
            FetchError::Rejected(e)
        }
    }

    /// The breaker-without-the-attribute example's client and error.
    #[derive(Debug)]
    pub struct StockClient;

    impl StockClient {
        pub fn stock(&self, _sku: &str) -> Result<u32, StockError> {
            Ok(7)
        }
    }

    #[derive(Debug)]
    pub enum StockError {
        Timeout,
        Rejected(fusebox::Error),
        Policy(fusebox::PolicyError),
    }

    impl StockError {
        #[must_use]
        pub fn is_timeout(&self) -> bool {
            matches!(self, StockError::Timeout)
        }
    }

    impl From<fusebox::Error> for StockError {
        fn from(e: fusebox::Error) -> Self {
            StockError::Rejected(e)
        }
    }

    impl From<fusebox::PolicyError> for StockError {
        fn from(e: fusebox::PolicyError) -> Self {
            StockError::Policy(e)
        }
    }
}
