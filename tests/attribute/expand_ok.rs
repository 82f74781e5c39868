//! Every function shape `#[circuit_breaker]` supports, compiled under `deny(warnings, clippy::all)`
//! and run: the expansion must be warning-free, keep the original behaviour, classify errors as
//! written in the attribute, and call fallbacks with the function's own arguments.
#![deny(warnings, clippy::all)]

use std::sync::LazyLock;
use std::time::Duration;

use fusebox::clock::FakeClock;
use fusebox::{Cause, Policy, Reason, Registry, Snapshot, State, circuit_breaker};

static CLOCK: LazyLock<FakeClock> = LazyLock::new(FakeClock::new);
static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(CLOCK.clone()));
static PLAIN: Registry = Registry::new();

/// An error with unit, tuple and struct variants, infrastructure and business ones.
#[derive(Debug, Clone, PartialEq)]
enum ApiError {
    Timeout,
    Connect(u16),
    Unavailable { retry_in: u32 },
    Declined,
    Rejected(fusebox::Error),
}

impl From<fusebox::Error> for ApiError {
    fn from(error: fusebox::Error) -> Self {
        ApiError::Rejected(error)
    }
}

/// The error type written through an alias, as many crates do.
type ApiResult<T> = Result<T, ApiError>;

/// What a call should do.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Ok,
    Timeout,
    Connect,
    Unavailable,
    Declined,
}

fn respond(kind: Kind) -> ApiResult<u32> {
    match kind {
        Kind::Ok => Ok(1),
        Kind::Timeout => Err(ApiError::Timeout),
        Kind::Connect => Err(ApiError::Connect(503)),
        Kind::Unavailable => Err(ApiError::Unavailable { retry_in: 5 }),
        Kind::Declined => Err(ApiError::Declined),
    }
}

fn is_rejected(result: &ApiResult<u32>) -> bool {
    matches!(result, Err(ApiError::Rejected(e)) if e.reason() == Reason::Open)
}

/// The breaker of `key` in `registry` (found through `snapshot`, which lists every breaker).
fn snapshot(registry: &Registry, key: &str) -> Snapshot {
    registry
        .snapshot()
        .into_iter()
        .find(|snapshot| snapshot.key.as_str() == key)
        .expect("registered on first call")
}

fn state(key: &str) -> State {
    snapshot(&REGISTRY, key).state
}

// ---------------------------------------------------------------- sync free fn, bare variants

/// Bare names of unit, tuple and struct variants, resolved through the `ApiResult` alias.
#[circuit_breaker(
    key = "sync-bare",
    registry = REGISTRY,
    window = 4,
    failure = [Timeout, Connect, Unavailable]
)]
#[inline]
fn sync_bare(kind: Kind) -> ApiResult<u32> {
    let value = respond(kind)?;
    if value > 10 {
        return Ok(0);
    }
    Ok(value)
}

#[test]
fn bare_variants_count_and_business_errors_do_not() {
    for _ in 0..10 {
        assert_eq!(sync_bare(Kind::Declined), Err(ApiError::Declined));
    }
    assert_eq!(state("sync-bare"), State::Closed);
    // `window = 4` alone lowers `min_calls` to 4.
    let policy = snapshot(&REGISTRY, "sync-bare").policy;
    assert_eq!(policy.settings().window, fusebox::Window::Count(4));
    assert_eq!(policy.settings().min_calls, 4);
    assert_eq!(sync_bare(Kind::Ok), Ok(1));
    assert_eq!(sync_bare(Kind::Timeout), Err(ApiError::Timeout));
    assert_eq!(sync_bare(Kind::Connect), Err(ApiError::Connect(503)));
    assert_eq!(state("sync-bare"), State::Closed); // 3 calls < min_calls
    assert_eq!(
        sync_bare(Kind::Unavailable),
        Err(ApiError::Unavailable { retry_in: 5 })
    );
    assert_eq!(state("sync-bare"), State::Open);
    assert!(is_rejected(&sync_bare(Kind::Ok)));
}

// ---------------------------------------------------------------- async free fn, full paths

/// Full paths, `open_for` and `half_open`.
#[circuit_breaker(
    key = "async-paths",
    registry = REGISTRY,
    window = 2,
    failure_rate = 50,
    open_for = "250ms",
    half_open = 1,
    failure = [ApiError::Timeout, ApiError::Connect]
)]
async fn async_paths(kind: Kind) -> Result<u32, ApiError> {
    tokio::task::yield_now().await;
    respond(kind)
}

#[tokio::test]
async fn full_paths_open_and_recover_after_open_for() {
    assert_eq!(async_paths(Kind::Declined).await, Err(ApiError::Declined));
    assert_eq!(
        async_paths(Kind::Unavailable).await,
        Err(ApiError::Unavailable { retry_in: 5 })
    );
    assert_eq!(state("async-paths"), State::Closed);
    assert_eq!(async_paths(Kind::Ok).await, Ok(1));
    assert_eq!(
        async_paths(Kind::Connect).await,
        Err(ApiError::Connect(503))
    );
    assert_eq!(state("async-paths"), State::Open);
    assert!(is_rejected(&async_paths(Kind::Ok).await));
    let policy = snapshot(&REGISTRY, "async-paths").policy;
    assert_eq!(policy.settings().open_for, Duration::from_millis(250));
    CLOCK.advance(Duration::from_millis(250));
    assert_eq!(async_paths(Kind::Ok).await, Ok(1)); // the probe
    assert_eq!(state("async-paths"), State::Closed);
}

// ---------------------------------------------------------------- predicate

fn is_transient(error: &ApiError) -> bool {
    matches!(error, ApiError::Timeout | ApiError::Connect(_))
}

#[circuit_breaker(key = "predicate", registry = REGISTRY, window = 2, failure = is_transient)]
fn with_predicate(kind: Kind) -> ApiResult<u32> {
    respond(kind)
}

#[test]
fn predicate_classifies() {
    for _ in 0..4 {
        assert_eq!(with_predicate(Kind::Declined), Err(ApiError::Declined));
    }
    assert_eq!(state("predicate"), State::Closed);
    assert_eq!(with_predicate(Kind::Ok), Ok(1));
    assert_eq!(with_predicate(Kind::Timeout), Err(ApiError::Timeout));
    assert_eq!(state("predicate"), State::Open);
}

// ---------------------------------------------------------------- every error counts

#[circuit_breaker(key = "every-error", registry = REGISTRY, window = 1, failure_rate = 100)]
fn every_error_counts(kind: Kind) -> ApiResult<u32> {
    respond(kind)
}

#[test]
fn without_failure_every_error_counts() {
    assert_eq!(every_error_counts(Kind::Ok), Ok(1));
    assert_eq!(every_error_counts(Kind::Declined), Err(ApiError::Declined));
    assert_eq!(state("every-error"), State::Open);
}

// ---------------------------------------------------------------- methods

struct Client {
    calls: u32,
    name: String,
}

impl Client {
    #[circuit_breaker(key = "method-ref", registry = REGISTRY, failure = [Timeout])]
    fn name(&self) -> Result<&str, ApiError> {
        Ok(&self.name)
    }

    #[circuit_breaker(key = "method-mut", registry = REGISTRY, failure = [Timeout])]
    fn bump(&mut self, by: u32) -> ApiResult<u32> {
        self.calls += by;
        Ok(self.calls)
    }

    #[circuit_breaker(key = "method-async-mut", registry = REGISTRY, failure = [Timeout])]
    async fn bump_async(&mut self, by: u32) -> ApiResult<u32> {
        tokio::task::yield_now().await;
        self.calls += by;
        Ok(self.calls)
    }

    #[circuit_breaker(key = "method-value", registry = REGISTRY)]
    fn into_calls(self) -> ApiResult<u32> {
        Ok(self.calls)
    }

    /// A method with a fallback: `fallback = cached` calls `Self::cached(self, id, cause)`.
    #[circuit_breaker(
        key = "method-fallback",
        registry = REGISTRY,
        window = 1,
        failure = [Timeout],
        fallback = cached
    )]
    async fn fetch(&self, id: u32, kind: Kind) -> ApiResult<u32> {
        tokio::task::yield_now().await;
        respond(kind).map(|v| v + id)
    }

    async fn cached(&self, id: u32, _kind: Kind, cause: Cause<ApiError>) -> ApiResult<u32> {
        match cause {
            Cause::Failed(ApiError::Timeout) => Ok(1000 + id + self.calls),
            Cause::Failed(other) => Err(other),
            Cause::Rejected(_) => Ok(2000 + id + self.calls),
            Cause::TimedOut(error) => Err(error.into()),
        }
    }

    /// A sync method whose fallback is a full path and whose parameter is `mut`.
    #[circuit_breaker(key = "method-sync-fallback", registry = REGISTRY, fallback = Client::sync_cached)]
    fn sync_fetch(&mut self, mut id: u32) -> ApiResult<u32> {
        id += 1;
        self.calls += 1;
        Err(ApiError::Connect(id as u16))
    }

    fn sync_cached(&mut self, id: u32, cause: Cause<ApiError>) -> ApiResult<u32> {
        assert_eq!(cause.failed(), Some(&ApiError::Connect(id as u16)));
        Ok(id + self.calls)
    }
}

#[tokio::test]
async fn methods() {
    let mut client = Client {
        calls: 0,
        name: "c".to_owned(),
    };
    assert_eq!(client.name(), Ok("c"));
    assert_eq!(client.bump(2), Ok(2));
    assert_eq!(client.bump_async(3).await, Ok(5));
    // the fallback sees the argument after the body changed it
    assert_eq!(client.sync_fetch(7), Ok(8 + 6));
    assert_eq!(client.fetch(1, Kind::Ok).await, Ok(2));
    assert_eq!(
        client.fetch(1, Kind::Declined).await,
        Err(ApiError::Declined)
    );
    assert_eq!(client.fetch(1, Kind::Timeout).await, Ok(1007)); // counted, then the fallback
    assert_eq!(state("method-fallback"), State::Open);
    assert_eq!(client.fetch(2, Kind::Ok).await, Ok(2008)); // rejected: the fallback
    assert_eq!(client.into_calls(), Ok(6));
}

// ---------------------------------------------------------------- trait impls

trait Backend {
    fn get(&self, id: u32) -> Result<u32, ApiError>;
    fn get_async(&self, id: u32) -> impl Future<Output = Result<u32, ApiError>> + Send;
}

struct Service;

impl Backend for Service {
    #[circuit_breaker(key = "trait-sync", registry = REGISTRY, failure = [Timeout])]
    fn get(&self, id: u32) -> Result<u32, ApiError> {
        Ok(id)
    }

    #[circuit_breaker(key = "trait-async", registry = REGISTRY, failure = [Timeout])]
    async fn get_async(&self, id: u32) -> Result<u32, ApiError> {
        tokio::task::yield_now().await;
        Ok(id * 2)
    }
}

#[tokio::test]
async fn trait_impl_methods() {
    assert_eq!(Service.get(4), Ok(4));
    assert_eq!(Service.get_async(4).await, Ok(8));
}

// ---------------------------------------------------------------- generics

#[circuit_breaker(key = "generic", registry = REGISTRY, failure = [Timeout])]
fn generic<T: Into<u32> + Copy>(value: T, extra: impl Into<u32>) -> Result<u32, ApiError> {
    Ok(value.into() + extra.into())
}

/// Generic over the error too: the bare variant resolves through the return type.
#[derive(Debug, PartialEq)]
enum Wrapped<E> {
    Inner(E),
    Timeout,
    Rejected,
}

impl<E> From<fusebox::Error> for Wrapped<E> {
    fn from(_: fusebox::Error) -> Self {
        Wrapped::Rejected
    }
}

#[circuit_breaker(key = "generic-error", registry = REGISTRY, failure = [Timeout])]
async fn generic_error<E: Send>(error: Option<E>) -> Result<u8, Wrapped<E>> {
    match error {
        Some(error) => Err(Wrapped::Inner(error)),
        None => Err(Wrapped::Timeout),
    }
}

#[tokio::test]
async fn generic_functions() {
    assert_eq!(generic(2u8, 3u16), Ok(5));
    assert_eq!(
        generic_error(Some("business")).await,
        Err(Wrapped::Inner("business"))
    );
    assert_eq!(generic_error::<()>(None).await, Err(Wrapped::Timeout));
    let counts = snapshot(&REGISTRY, "generic-error");
    assert_eq!((counts.calls, counts.failures), (1, 1));
    let _ = Wrapped::<()>::Rejected;
}

// ---------------------------------------------------------------- free fn fallback

#[circuit_breaker(key = "free-fallback", registry = REGISTRY, window = 1, failure = [Timeout, Connect], fallback = degrade)]
async fn free_with_fallback(label: String, kind: Kind) -> ApiResult<String> {
    tokio::task::yield_now().await;
    respond(kind).map(|_| label.clone())
}

async fn degrade(label: String, kind: Kind, cause: Cause<ApiError>) -> ApiResult<String> {
    match cause {
        Cause::Failed(error) => Ok(format!("{label}: failed {error:?} on {kind:?}")),
        Cause::Rejected(error) => Ok(format!("{label}: rejected by {}", error.key())),
        Cause::TimedOut(error) => Ok(format!("{label}: timed out in {}", error.key())),
    }
}

#[tokio::test]
async fn free_fallback() {
    assert_eq!(
        free_with_fallback("a".into(), Kind::Ok).await,
        Ok("a".into())
    );
    assert_eq!(
        free_with_fallback("a".into(), Kind::Declined).await,
        Err(ApiError::Declined)
    );
    assert_eq!(
        free_with_fallback("b".into(), Kind::Timeout).await,
        Ok("b: failed Timeout on Timeout".into())
    );
    assert_eq!(
        free_with_fallback("c".into(), Kind::Ok).await,
        Ok("c: rejected by free-fallback".into())
    );
}

// ---------------------------------------------------------------- crate, registry, policy

const STRICT: Policy = Policy::new()
    .window(50)
    .min_calls(20)
    .failure_rate(90)
    .open_for(Duration::from_secs(60));

/// `policy = CONST` with overrides: `window = 2` also lowers the constant's `min_calls` to 2.
#[circuit_breaker(
    key = "policy-const",
    crate = ::fusebox,
    registry = PLAIN,
    policy = STRICT,
    window = 2,
    failure_rate = 50
)]
fn with_policy(kind: Kind) -> ApiResult<u32> {
    respond(kind)
}

#[circuit_breaker(key = "policy-only", registry = PLAIN, policy = STRICT)]
fn with_policy_only() -> ApiResult<u32> {
    Ok(3)
}

#[test]
fn crate_registry_and_policy() {
    assert_eq!(with_policy(Kind::Ok), Ok(1));
    let policy = snapshot(&PLAIN, "policy-const").policy;
    assert_eq!(policy.settings().window, fusebox::Window::Count(2));
    assert_eq!(policy.settings().min_calls, 2);
    assert_eq!(policy.settings().failure_rate, Some(50));
    assert_eq!(policy.settings().open_for, Duration::from_secs(60));
    assert_eq!(with_policy(Kind::Timeout), Err(ApiError::Timeout));
    assert_eq!(snapshot(&PLAIN, "policy-const").state, State::Open);
    assert_eq!(with_policy_only(), Ok(3));
    assert_eq!(snapshot(&PLAIN, "policy-only").policy, STRICT);
}

#[circuit_breaker(key = "global")]
fn on_the_global_registry() -> Result<(), ApiError> {
    Ok(())
}

#[test]
fn default_registry_is_global() {
    assert_eq!(on_the_global_registry(), Ok(()));
    assert_eq!(snapshot(fusebox::registry(), "global").state, State::Closed);
}

// ---------------------------------------------------------------- dynamic keys

/// One breaker per host: the key is evaluated on every call, before the body runs.
#[circuit_breaker(key = host, registry = REGISTRY, window = 1, failure = [Timeout])]
async fn per_host(host: String, kind: Kind) -> ApiResult<String> {
    tokio::task::yield_now().await;
    respond(kind).map(|_| host) // the body may still consume the key's source
}

#[circuit_breaker(key = format!("{prefix}-sync"), registry = REGISTRY, window = 1, fallback = per_host_fallback)]
fn per_host_sync(prefix: &str, kind: Kind) -> ApiResult<u32> {
    respond(kind)
}

fn per_host_fallback(prefix: &str, _kind: Kind, cause: Cause<ApiError>) -> ApiResult<u32> {
    match cause {
        Cause::Rejected(rejected) => {
            assert_eq!(rejected.key(), format!("{prefix}-sync"));
            Ok(0)
        }
        Cause::TimedOut(error) => Err(error.into()),
        Cause::Failed(error) => Err(error),
    }
}

#[tokio::test]
async fn dynamic_keys() {
    assert_eq!(
        per_host("a.example".into(), Kind::Timeout).await,
        Err(ApiError::Timeout)
    );
    assert_eq!(state("a.example"), State::Open);
    assert!(matches!(
        per_host("a.example".into(), Kind::Ok).await,
        Err(ApiError::Rejected(_))
    ));
    assert_eq!(
        per_host("b.example".into(), Kind::Ok).await,
        Ok("b.example".into())
    );
    assert_eq!(per_host_sync("c", Kind::Declined), Err(ApiError::Declined));
    assert_eq!(state("c-sync"), State::Open);
    assert_eq!(per_host_sync("c", Kind::Ok), Ok(0));
    assert_eq!(per_host_sync("d", Kind::Ok), Ok(1));
}

// ---------------------------------------------------------------- every policy knob

/// Every policy argument at once: the generated `const` policy must build and validate.
#[circuit_breaker(
    key = "every-knob",
    registry = REGISTRY,
    window = "30s",
    min_calls = 5,
    failure_rate = 40,
    consecutive = 3,
    slow = "2s",
    slow_rate = 80,
    open_for = "10s",
    open_backoff = 2.5,
    open_max = "5m",
    half_open = 2,
    half_open_lease = "30s",
    recovery = progressive(phases = 3, min_passes = 5),
    max_concurrent = 10,
    failure = [Timeout]
)]
fn every_knob(kind: Kind) -> ApiResult<u32> {
    respond(kind)
}

#[circuit_breaker(key = "consecutive-alone", registry = REGISTRY, consecutive = 5, recovery = probes)]
fn consecutive_alone(kind: Kind) -> ApiResult<u32> {
    respond(kind)
}

#[test]
fn every_knob_reaches_the_policy() {
    assert_eq!(every_knob(Kind::Ok), Ok(1));
    let policy = snapshot(&REGISTRY, "every-knob").policy;
    assert!(policy.validate().is_ok(), "{policy:?}");
    let expected = Policy::new()
        .time_window(Duration::from_secs(30))
        .min_calls(5)
        .failure_rate(40)
        .consecutive(3)
        .slow(Duration::from_secs(2))
        .slow_rate(80)
        .open_for(Duration::from_secs(10))
        .open_backoff(2.5)
        .open_max(Duration::from_secs(300))
        .half_open(2)
        .half_open_lease(Duration::from_secs(30))
        .progressive(3, 5)
        .max_concurrent(10);
    assert_eq!(policy, expected);
    assert_eq!(consecutive_alone(Kind::Ok), Ok(1));
    let policy = snapshot(&REGISTRY, "consecutive-alone").policy;
    assert_eq!(policy, Policy::new().consecutive(5).rate_off());
}

// ---------------------------------------------------------------- attempts

/// With `retry`, each attempt borrows the parameters, which keep their types (`label` is a
/// `String` used by reference); `?` and `return` still leave the attempt with the function's own
/// error type.
#[circuit_breaker(key = "attempts-free", registry = REGISTRY, window = 100, retry = 3, timeout = "5s", failure = [Timeout, Connect])]
async fn attempts_free(label: String, kinds: &[Kind], _: u8) -> ApiResult<String> {
    tokio::task::yield_now().await;
    let attempt = ATTEMPT.fetch_add(1, std::sync::atomic::Ordering::SeqCst) as usize;
    let kind = kinds[attempt.min(kinds.len() - 1)];
    if kind == Kind::Declined {
        return Err(ApiError::Declined);
    }
    respond(kind)?;
    Ok(format!("{label} after {}", attempt + 1))
}

static ATTEMPT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn is_connect(error: &ApiError) -> bool {
    matches!(error, ApiError::Connect(_))
}

impl Client {
    /// A `&self` method with attempts and a fallback that receives the parameters by value.
    #[circuit_breaker(
        key = "attempts-method",
        registry = REGISTRY,
        window = 100,
        retry = 2,
        backoff = "1ms",
        deadline = "10s",
        failure = is_connect,
        fallback = attempts_fallback
    )]
    async fn attempts_method(&self, id: u32, kind: Kind) -> ApiResult<String> {
        tokio::task::yield_now().await;
        respond(kind).map(|v| format!("{}:{}", self.name, v + id))
    }

    async fn attempts_fallback(
        &self,
        id: u32,
        kind: Kind,
        cause: Cause<ApiError>,
    ) -> ApiResult<String> {
        Ok(format!("{}:{id}:{kind:?}:{:?}", self.name, cause.failed()))
    }
}

/// `timeout` alone runs the body once: the parameters keep their types and the body may consume
/// them (`label` is moved into the result, `amount` is a `u64`).
#[circuit_breaker(key = "timeout-alone", registry = REGISTRY, timeout = "5s", failure = [Timeout])]
async fn timeout_alone(label: String, amount: u64) -> ApiResult<(String, u64)> {
    tokio::task::yield_now().await;
    let doubled: u64 = amount * 2;
    Ok((label, doubled))
}

impl Client {
    /// `timeout` alone on a `&mut self` method with a fallback: the body borrows the
    /// parameters (types unchanged) and the fallback receives them afterwards.
    #[circuit_breaker(key = "timeout-alone-mut", registry = REGISTRY, window = 1, timeout = "5s", failure = [Connect], fallback = timeout_alone_fallback)]
    async fn timeout_alone_mut(&mut self, kind: Kind, note: String) -> ApiResult<u32> {
        self.calls += 1;
        let owned: String = note.clone();
        respond(kind).map(|v| v + owned.len() as u32)
    }

    async fn timeout_alone_fallback(
        &mut self,
        kind: Kind,
        note: String,
        cause: Cause<ApiError>,
    ) -> ApiResult<u32> {
        let _ = (kind, cause);
        Ok(1000 + note.len() as u32 + self.calls)
    }
}

/// With `retry`, a `Copy` parameter is returned as is (it is a `u64` in the body, not a `&u64`).
#[circuit_breaker(key = "retry-copy", registry = REGISTRY, retry = 2, failure = [Timeout])]
async fn retry_copy(amount: u64, note: String) -> ApiResult<u64> {
    Ok(amount + note.len() as u64)
}

#[tokio::test]
async fn timeout_alone_keeps_parameter_types() {
    assert_eq!(
        timeout_alone("t".to_owned(), 21).await,
        Ok(("t".to_owned(), 42))
    );
    let mut client = Client {
        calls: 0,
        name: "c".to_owned(),
    };
    assert_eq!(
        client.timeout_alone_mut(Kind::Ok, "ab".to_owned()).await,
        Ok(3)
    );
    assert_eq!(
        client
            .timeout_alone_mut(Kind::Connect, "ab".to_owned())
            .await,
        Ok(1004)
    );
    assert_eq!(client.calls, 2);
    assert_eq!(retry_copy(40, "ab".to_owned()).await, Ok(42));
}

/// A dynamic key and a generic parameter with attempts; every error counts.
#[circuit_breaker(key = host, registry = REGISTRY, retry = 2, timeout = "5s")]
async fn attempts_generic<T: std::fmt::Display + Sync>(host: &str, value: T) -> ApiResult<String> {
    tokio::task::yield_now().await;
    Ok(format!("{host}={value}"))
}

#[tokio::test]
async fn attempts() {
    let kinds = [Kind::Timeout, Kind::Connect, Kind::Ok];
    assert_eq!(
        attempts_free("x".into(), &kinds, 0).await,
        Ok("x after 3".into())
    );
    let counts = snapshot(&REGISTRY, "attempts-free");
    assert_eq!((counts.calls, counts.failures), (3, 2));
    ATTEMPT.store(0, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        attempts_free("x".into(), &[Kind::Declined], 0).await,
        Err(ApiError::Declined)
    );
    assert_eq!(ATTEMPT.load(std::sync::atomic::Ordering::SeqCst), 1);

    let client = Client {
        calls: 0,
        name: "c".to_owned(),
    };
    assert_eq!(client.attempts_method(1, Kind::Ok).await, Ok("c:2".into()));
    assert_eq!(
        client.attempts_method(1, Kind::Connect).await,
        Ok("c:1:Connect:Some(Connect(503))".into())
    );
    // Not a counted failure for `is_connect`: returned as is, after one attempt.
    assert_eq!(
        client.attempts_method(1, Kind::Timeout).await,
        Err(ApiError::Timeout)
    );
    let counts = snapshot(&REGISTRY, "attempts-method");
    assert_eq!((counts.calls, counts.failures), (3, 2));

    assert_eq!(
        attempts_generic("attempts.example", 5u8).await,
        Ok("attempts.example=5".into())
    );
    assert_eq!(state("attempts.example"), State::Closed);
}

// ---------------------------------------------------------------- Send

fn assert_send<T: Send>(_: T) {}

#[test]
fn generated_futures_are_send() {
    assert_send(async_paths(Kind::Ok));
    assert_send(free_with_fallback(String::new(), Kind::Ok));
    assert_send(timeout_alone(String::new(), 1));
    assert_send(retry_copy(1, String::new()));
    let client = Client {
        calls: 0,
        name: String::new(),
    };
    assert_send(client.fetch(1, Kind::Ok));
    assert_send(generic_error::<u8>(None));
    assert_send(per_host(String::new(), Kind::Ok));
    assert_send(attempts_free(String::new(), &[], 0));
    assert_send(client.attempts_method(1, Kind::Ok));
    assert_send(attempts_generic("h", 1u8));
}

// ---------------------------------------------------------------- `impl Trait` in the `Ok` type

/// A sync function returning `Result<impl Display, E>`, with bare variants and a fallback whose
/// `Ok` type is the body's.
#[circuit_breaker(
    key = "impl-sync",
    registry = REGISTRY,
    failure = [Timeout],
    fallback = impl_sync_fallback,
    consecutive = 1
)]
fn impl_sync(kind: Kind) -> Result<impl std::fmt::Display, ApiError> {
    let value = respond(kind)?;
    Ok(format!("live {value}"))
}

fn impl_sync_fallback(_kind: Kind, cause: Cause<ApiError>) -> Result<String, ApiError> {
    match cause {
        Cause::Rejected(_) => Ok("rejected".to_owned()),
        _ => Ok("failed".to_owned()),
    }
}

/// An `async fn` returning an iterator that borrows its argument, through an alias of `Result`
/// (the error type named through the return type).
#[circuit_breaker(key = "impl-async", registry = REGISTRY, failure = [Connect], retry = 2)]
async fn impl_async<'a>(bytes: &'a [u8], kind: Kind) -> ApiResult<impl Iterator<Item = u8> + 'a> {
    tokio::task::yield_now().await;
    respond(kind)?;
    Ok(bytes.iter().copied())
}

/// Without `failure`, a timeout, or an alias: the plain `async fn` shape.
#[circuit_breaker(key = "impl-async-plain", registry = REGISTRY, timeout = "10s")]
async fn impl_async_plain(kind: Kind) -> Result<impl std::fmt::Debug + Send, ApiError> {
    respond(kind)
}

#[tokio::test]
async fn impl_trait_in_the_ok_type() {
    assert_eq!(impl_sync(Kind::Ok).unwrap().to_string(), "live 1");
    assert_eq!(impl_sync(Kind::Timeout).unwrap().to_string(), "failed");
    assert_eq!(impl_sync(Kind::Ok).unwrap().to_string(), "rejected");
    let bytes = [1, 2, 3];
    let collected: Vec<u8> = impl_async(&bytes, Kind::Ok).await.unwrap().collect();
    assert_eq!(collected, [1, 2, 3]);
    assert!(matches!(
        impl_async(&bytes, Kind::Connect).await,
        Err(ApiError::Connect(503))
    ));
    assert_eq!(
        snapshot(&REGISTRY, "impl-async").failures,
        2,
        "both attempts"
    );
    assert_eq!(
        format!("{:?}", impl_async_plain(Kind::Ok).await.unwrap()),
        "1"
    );
}

// ---------------------------------------------------------------- parameters under `#[cfg]`

/// A parameter compiled out (`not(test)`) and one compiled in (`test`): the fallback declares both
/// under the same attributes and gets those that exist.
#[circuit_breaker(key = "cfg-sync", registry = REGISTRY, fallback = cfg_sync_fallback, consecutive = 1)]
fn cfg_sync(#[cfg(not(test))] removed: u8, #[cfg(test)] kept: u32, kind: Kind) -> ApiResult<u32> {
    respond(kind).map(|value| value + kept)
}

fn cfg_sync_fallback(
    #[cfg(not(test))] removed: u8,
    #[cfg(test)] kept: u32,
    _kind: Kind,
    cause: Cause<ApiError>,
) -> ApiResult<u32> {
    match cause {
        Cause::Rejected(_) => Ok(kept + 100),
        _ => Ok(kept + 200),
    }
}

/// The same with `retry` on a method: a `mut` parameter compiled out is no error.
struct CfgClient;

impl CfgClient {
    #[circuit_breaker(key = "cfg-async", registry = REGISTRY, fallback = fallback, retry = 2, consecutive = 2)]
    async fn call(
        &self,
        #[cfg(not(test))] mut removed: u8,
        #[cfg(test)] kept: u32,
        kind: Kind,
    ) -> ApiResult<u32> {
        tokio::task::yield_now().await;
        respond(kind).map(|value| value + kept)
    }

    async fn fallback(
        &self,
        #[cfg(not(test))] removed: u8,
        #[cfg(test)] kept: u32,
        _kind: Kind,
        cause: Cause<ApiError>,
    ) -> ApiResult<u32> {
        match cause {
            Cause::Rejected(_) => Ok(kept + 100),
            _ => Ok(kept + 200),
        }
    }
}

#[tokio::test]
async fn parameters_under_cfg_are_passed_when_compiled_in() {
    assert_eq!(cfg_sync(10, Kind::Ok), Ok(11));
    assert_eq!(cfg_sync(10, Kind::Timeout), Ok(210));
    assert_eq!(cfg_sync(10, Kind::Ok), Ok(110));
    let client = CfgClient;
    assert_eq!(client.call(10, Kind::Ok).await, Ok(11));
    assert_eq!(client.call(10, Kind::Timeout).await, Ok(210));
    assert_eq!(
        snapshot(&REGISTRY, "cfg-async").failures,
        0,
        "2 in a row opened it"
    );
    assert_eq!(client.call(10, Kind::Ok).await, Ok(110));
}

// ---------------------------------------------------------------- `#[async_trait]`

/// A trait whose `async fn`s `#[async_trait]` boxes.
#[async_trait::async_trait]
trait BoxedBackend {
    async fn fetch(&self, label: String, kind: Kind) -> ApiResult<String>;
    async fn fetch_retried(&self, kind: Kind) -> Result<u32, ApiError>;
}

struct TraitClient;

/// `#[async_trait]` on the impl runs first; the attribute on each method sees the boxed shape.
#[async_trait::async_trait]
impl BoxedBackend for TraitClient {
    #[circuit_breaker(
        key = "async-trait",
        registry = REGISTRY,
        failure = [Timeout, Connect],
        fallback = fetch_fallback,
        consecutive = 2
    )]
    async fn fetch(&self, label: String, kind: Kind) -> ApiResult<String> {
        tokio::task::yield_now().await;
        let value = respond(kind)?;
        Ok(format!("{label} {value}"))
    }

    #[circuit_breaker(key = "async-trait-retry", registry = REGISTRY, failure = [Connect], retry = 3)]
    async fn fetch_retried(&self, kind: Kind) -> Result<u32, ApiError> {
        tokio::task::yield_now().await;
        respond(kind)
    }
}

impl TraitClient {
    async fn fetch_fallback(
        &self,
        label: String,
        _kind: Kind,
        cause: Cause<ApiError>,
    ) -> ApiResult<String> {
        match cause {
            Cause::Rejected(_) => Ok(format!("{label} rejected")),
            _ => Ok(format!("{label} failed")),
        }
    }
}

#[tokio::test]
async fn methods_of_an_async_trait_impl() {
    let client = TraitClient;
    let backend: &(dyn BoxedBackend + Sync) = &client;
    assert_eq!(
        backend.fetch("a".into(), Kind::Ok).await,
        Ok("a 1".to_owned())
    );
    assert_eq!(
        backend.fetch("b".into(), Kind::Declined).await,
        Err(ApiError::Declined),
        "a business error passes through"
    );
    assert_eq!(
        backend.fetch("c".into(), Kind::Timeout).await,
        Ok("c failed".to_owned())
    );
    assert_eq!(
        backend.fetch("d".into(), Kind::Connect).await,
        Ok("d failed".to_owned())
    );
    assert_eq!(state("async-trait"), State::Open);
    assert_eq!(
        backend.fetch("e".into(), Kind::Ok).await,
        Ok("e rejected".to_owned())
    );
    assert_eq!(
        backend.fetch_retried(Kind::Connect).await,
        Err(ApiError::Connect(503))
    );
    assert_eq!(
        snapshot(&REGISTRY, "async-trait-retry").failures,
        3,
        "3 attempts"
    );
    assert_send(backend.fetch_retried(Kind::Ok));
}

// ---------------------------------------------------------------- a free fallback of a method

impl TraitClient {
    /// A free function as a method's fallback, named by its path (a bare name is `Self::…`).
    #[circuit_breaker(key = "method-free-fallback", registry = REGISTRY, fallback = self::free_method_fallback, consecutive = 1)]
    fn by_path(&self, kind: Kind) -> ApiResult<u32> {
        respond(kind)
    }
}

fn free_method_fallback(
    _client: &TraitClient,
    _kind: Kind,
    cause: Cause<ApiError>,
) -> ApiResult<u32> {
    match cause {
        Cause::Rejected(_) => Ok(100),
        _ => Ok(200),
    }
}

#[test]
fn a_method_names_a_free_method_fallback_by_its_path() {
    let client = TraitClient;
    assert_eq!(client.by_path(Kind::Ok), Ok(1));
    assert_eq!(client.by_path(Kind::Timeout), Ok(200));
    assert_eq!(client.by_path(Kind::Ok), Ok(100));
}
