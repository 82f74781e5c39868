//! Behaviour of annotated functions, driven by a fake clock: trips, eviction, classification,
//! rejection, half-open probing, cancellation, panics, key sharing and fallbacks.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, LazyLock};
use std::task::{Context, Waker};
use std::time::Duration;

use crate::common::ApiError;
use fusebox::{Cause, Reason, State, circuit_breaker};

// ---------------------------------------------------------------- window eviction

fake_registry!(EVICT_CLOCK, EVICT);

#[circuit_breaker(key = "evict", registry = EVICT, window = 10, failure_rate = 50, failure = [Timeout])]
fn evict_call(fail: bool) -> Result<(), ApiError> {
    if fail { Err(ApiError::Timeout) } else { Ok(()) }
}

#[test]
fn window_of_ten_at_half_opens_after_exactly_five_failures_despite_earlier_successes() {
    for _ in 0..1000 {
        evict_call(false).unwrap();
    }
    let breaker = EVICT.get("evict").expect("registered on first call");
    for n in 1..=4 {
        assert_eq!(evict_call(true), Err(ApiError::Timeout));
        assert_eq!(breaker.state(), State::Closed, "closed after {n} failures");
    }
    assert_eq!(evict_call(true), Err(ApiError::Timeout));
    assert_eq!(
        breaker.state(),
        State::Open,
        "the fifth failure in the last ten calls trips it"
    );
}

// ---------------------------------------------------------------- business errors

fake_registry!(BUSINESS_CLOCK, BUSINESS);
static BUSINESS_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "business", registry = BUSINESS, window = 10, min_calls = 2, failure = [Timeout, Connect])]
fn charge(code: u32) -> Result<u32, ApiError> {
    BUSINESS_CALLS.fetch_add(1, Ordering::Relaxed);
    Err(ApiError::Declined { code })
}

#[test]
fn business_errors_never_open_the_circuit() {
    for i in 0..10_000 {
        assert_eq!(charge(i), Err(ApiError::Declined { code: i }));
    }
    let breaker = BUSINESS.get("business").unwrap();
    assert_eq!(breaker.state(), State::Closed);
    let snap = breaker.snapshot();
    assert_eq!((snap.calls, snap.failures, snap.rejected), (0, 0, 0));
    assert_eq!(BUSINESS_CALLS.load(Ordering::Relaxed), 10_000);
}

// ---------------------------------------------------------------- open rejects

fake_registry!(OPEN_CLOCK, OPEN);
static OPEN_BACKEND: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = "payment", registry = OPEN, window = 4, min_calls = 4, open_for = "30s", failure = [Timeout, Connect])]
async fn pay() -> Result<(), ApiError> {
    OPEN_BACKEND.fetch_add(1, Ordering::Relaxed);
    Err(ApiError::Connect(503))
}

#[tokio::test]
async fn open_circuit_rejects_with_key_and_retry_after_without_calling_the_backend() {
    for _ in 0..4 {
        assert_eq!(pay().await, Err(ApiError::Connect(503)));
    }
    assert_eq!(OPEN_BACKEND.load(Ordering::Relaxed), 4);
    OPEN_CLOCK.advance(Duration::from_secs(10));
    let err = pay().await.unwrap_err();
    let rejection = err.rejection().expect("a rejection, not a backend error");
    assert_eq!(rejection.key(), "payment");
    assert_eq!(rejection.reason(), Reason::Open);
    assert_eq!(rejection.retry_after(), Some(Duration::from_secs(20)));
    assert_eq!(
        rejection.to_string(),
        "circuit `payment` is open; next probe in 20s"
    );
    assert_eq!(
        OPEN_BACKEND.load(Ordering::Relaxed),
        4,
        "backend not called while open"
    );
    assert_eq!(OPEN.get("payment").unwrap().snapshot().rejected, 1);
}

// ---------------------------------------------------------------- exactly N probes

fake_registry!(PROBE_CLOCK, PROBE);
static PROBES_ADMITTED: AtomicU32 = AtomicU32::new(0);
static RELEASE: LazyLock<tokio::sync::Semaphore> = LazyLock::new(|| tokio::sync::Semaphore::new(0));

#[circuit_breaker(key = "probe-one", registry = PROBE, window = 2, min_calls = 1, open_for = "5s", failure = [Timeout])]
async fn probe_one(fail: bool) -> Result<(), ApiError> {
    if fail {
        return Err(ApiError::Timeout);
    }
    PROBES_ADMITTED.fetch_add(1, Ordering::SeqCst);
    let _ = RELEASE.acquire().await.expect("open semaphore");
    Ok(())
}

static PROBES3_ADMITTED: AtomicU32 = AtomicU32::new(0);
static RELEASE3: LazyLock<tokio::sync::Semaphore> =
    LazyLock::new(|| tokio::sync::Semaphore::new(0));

#[circuit_breaker(key = "probe-three", registry = PROBE, window = 2, min_calls = 1, open_for = "5s", half_open = 3, failure = [Timeout])]
async fn probe_three(fail: bool) -> Result<(), ApiError> {
    if fail {
        return Err(ApiError::Timeout);
    }
    PROBES3_ADMITTED.fetch_add(1, Ordering::SeqCst);
    let _ = RELEASE3.acquire().await.expect("open semaphore");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_open_for_exactly_the_permitted_probes_get_through_among_64_callers() {
    // One probe.
    assert_eq!(probe_one(true).await, Err(ApiError::Timeout));
    assert_eq!(PROBE.get("probe-one").unwrap().state(), State::Open);
    PROBE_CLOCK.advance(Duration::from_secs(5));
    let handles: Vec<_> = spawn_64(|| probe_one(false));
    wait_until(|| PROBES_ADMITTED.load(Ordering::SeqCst) >= 1 && finished(&handles) >= 63).await;
    assert_eq!(PROBES_ADMITTED.load(Ordering::SeqCst), 1);
    RELEASE.add_permits(64);
    let results = join(handles).await;
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
    assert!(
        results
            .iter()
            .filter_map(|r| r.as_ref().err())
            .all(|e| e.rejection().map(fusebox::Error::reason) == Some(Reason::HalfOpenFull))
    );
    assert_eq!(PROBE.get("probe-one").unwrap().state(), State::Closed);

    // Three probes.
    assert_eq!(probe_three(true).await, Err(ApiError::Timeout));
    PROBE_CLOCK.advance(Duration::from_secs(5));
    let handles: Vec<_> = spawn_64(|| probe_three(false));
    wait_until(|| PROBES3_ADMITTED.load(Ordering::SeqCst) >= 3 && finished(&handles) >= 61).await;
    assert_eq!(PROBES3_ADMITTED.load(Ordering::SeqCst), 3);
    RELEASE3.add_permits(64);
    let results = join(handles).await;
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 3);
    assert_eq!(PROBE.get("probe-three").unwrap().state(), State::Closed);
}

fn spawn_64<F, Fut>(call: F) -> Vec<tokio::task::JoinHandle<Result<(), ApiError>>>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(), ApiError>> + Send + 'static,
{
    let start = Arc::new(tokio::sync::Barrier::new(64));
    (0..64)
        .map(|_| {
            let fut = call();
            let start = start.clone();
            tokio::spawn(async move {
                start.wait().await;
                fut.await
            })
        })
        .collect()
}

fn finished(handles: &[tokio::task::JoinHandle<Result<(), ApiError>>]) -> usize {
    handles.iter().filter(|h| h.is_finished()).count()
}

async fn wait_until(cond: impl Fn() -> bool) {
    // Yields to the scheduler until the condition holds; bounded so a bug fails instead of hanging.
    for _ in 0..5_000_000 {
        if cond() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("condition not reached");
}

async fn join(
    handles: Vec<tokio::task::JoinHandle<Result<(), ApiError>>>,
) -> Vec<Result<(), ApiError>> {
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("task did not panic"));
    }
    out
}

// ---------------------------------------------------------------- cancelled probe

fake_registry!(CANCEL_CLOCK, CANCEL);

#[circuit_breaker(key = "cancel", registry = CANCEL, window = 2, min_calls = 1, open_for = "1s", failure = [Timeout])]
async fn slow_backend(fail: bool) -> Result<(), ApiError> {
    if fail {
        return Err(ApiError::Timeout);
    }
    std::future::pending::<()>().await;
    Ok(())
}

#[circuit_breaker(key = "cancel", registry = CANCEL, failure = [Timeout])]
async fn fast_backend() -> Result<(), ApiError> {
    Ok(())
}

#[tokio::test]
async fn a_cancelled_probe_gives_its_slot_back() {
    assert_eq!(slow_backend(true).await, Err(ApiError::Timeout));
    CANCEL_CLOCK.advance(Duration::from_secs(1));
    let breaker = CANCEL.get("cancel").unwrap();
    // The probe starts, then its caller gives up (a timeout around it, a dropped request...).
    let mut probe = Box::pin(slow_backend(false));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(probe.as_mut().poll(&mut cx).is_pending());
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(breaker.snapshot().probes_in_flight, 1);
    assert_eq!(
        fast_backend()
            .await
            .unwrap_err()
            .rejection()
            .unwrap()
            .reason(),
        Reason::HalfOpenFull
    );
    drop(probe);
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(
        breaker.snapshot().probes_in_flight,
        0,
        "the cancelled probe released its slot"
    );
    // The very next call is admitted as the probe, and closes the circuit.
    assert_eq!(fast_backend().await, Ok(()));
    assert_eq!(breaker.state(), State::Closed);
}

// ---------------------------------------------------------------- async fallbacks: after the call settles

fake_registry!(SETTLED_CLOCK, SETTLED);

/// Stalls when `mode` is 1: a fallback still running.
async fn slow_fallback(mode: u8, cause: Cause<ApiError>) -> Result<u32, ApiError> {
    if mode == 1 {
        std::future::pending::<()>().await;
    }
    match cause {
        Cause::Failed(_) => Ok(1),
        Cause::Rejected(_) | Cause::TimedOut(_) => Ok(2),
    }
}

/// Mode 2 stalls (a call in flight), 3 succeeds, any other fails with a counted failure.
#[circuit_breaker(key = "settled", registry = SETTLED, max_concurrent = 1, window = 2, min_calls = 1, open_for = "1s", failure = [Timeout], fallback = slow_fallback)]
async fn settled_call(mode: u8) -> Result<u32, ApiError> {
    match mode {
        2 => {
            std::future::pending::<()>().await;
            Err(ApiError::Timeout)
        }
        3 => Ok(0),
        _ => Err(ApiError::Timeout),
    }
}

#[tokio::test]
async fn an_async_fallback_runs_after_its_call_settled_and_a_cancelled_probe_gives_its_slot_back() {
    let mut cx = Context::from_waker(Waker::noop());
    // A failure whose fallback stalls: the call was reported (the circuit opened) and its
    // bulkhead slot given back before the fallback runs.
    let mut failing = Box::pin(settled_call(1));
    assert!(failing.as_mut().poll(&mut cx).is_pending());
    let breaker = SETTLED.get("settled").unwrap();
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.snapshot().in_flight, 0);
    // Rejected while open: the fallback gets `Rejected`.
    assert_eq!(settled_call(3).await, Ok(2));
    drop(failing);
    assert_eq!(settled_call(0).await, Ok(2));
    // The probe starts, then is cancelled: it gives its slots back and reaches no fallback.
    SETTLED_CLOCK.advance(Duration::from_secs(1));
    let mut probe = Box::pin(settled_call(2));
    assert!(probe.as_mut().poll(&mut cx).is_pending());
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(breaker.snapshot().probes_in_flight, 1);
    assert_eq!(breaker.snapshot().in_flight, 1);
    drop(probe);
    assert_eq!(breaker.snapshot().probes_in_flight, 0);
    assert_eq!(breaker.snapshot().in_flight, 0);
    assert_eq!(settled_call(3).await, Ok(0), "the next call is the probe");
    assert_eq!(breaker.state(), State::Closed);
}

/// Names the host and the cause it was called with.
async fn host_fallback(host: &str, cause: Cause<ApiError>) -> Result<String, ApiError> {
    let why = match cause {
        Cause::Failed(_) => "failed",
        Cause::Rejected(_) | Cause::TimedOut(_) => "rejected",
    };
    Ok(format!("{host}:{why}"))
}

#[circuit_breaker(key = host, registry = SETTLED, window = 1, min_calls = 1, open_for = "1s", failure = [Timeout], fallback = host_fallback)]
async fn per_host(host: &str) -> Result<String, ApiError> {
    if host.starts_with("down") {
        Err(ApiError::Timeout)
    } else {
        Ok(host.to_owned())
    }
}

#[tokio::test]
async fn a_dynamic_key_hands_its_parameters_to_a_deferred_fallback() {
    assert_eq!(per_host("up").await.unwrap(), "up");
    assert_eq!(per_host("down-1").await.unwrap(), "down-1:failed");
    assert_eq!(per_host("down-1").await.unwrap(), "down-1:rejected");
    assert_eq!(per_host("up").await.unwrap(), "up");
}

// ---------------------------------------------------------------- panics

fake_registry!(PANIC_CLOCK, PANIC);

#[circuit_breaker(key = "panic", registry = PANIC, window = 2, min_calls = 2)]
fn explode(really: bool) -> Result<u8, ApiError> {
    if really {
        panic!("backend client bug");
    }
    Ok(1)
}

#[circuit_breaker(key = "panic-async", registry = PANIC, window = 1, min_calls = 1)]
async fn explode_async() -> Result<u8, ApiError> {
    panic!("async backend client bug");
}

/// Panics inside the awaited call: the annotated body below has no macro call, `return` or `?`,
/// so it runs in place, as part of the function's own future.
async fn client_bug(after_a_yield: bool) -> Result<u8, ApiError> {
    if after_a_yield {
        tokio::task::yield_now().await;
    }
    let empty: [u8; 0] = [];
    Ok(empty[usize::from(after_a_yield)])
}

#[circuit_breaker(key = "panic-in-place", registry = PANIC, window = 2, min_calls = 2)]
async fn explode_in_place(after_a_yield: bool) -> Result<u8, ApiError> {
    client_bug(after_a_yield).await
}

#[tokio::test]
async fn a_panic_in_a_body_run_in_place_counts_as_a_failure() {
    let joined = tokio::spawn(explode_in_place(false)).await;
    assert!(joined.unwrap_err().is_panic());
    let breaker = PANIC.get("panic-in-place").unwrap();
    assert_eq!(
        (breaker.snapshot().calls, breaker.snapshot().failures),
        (1, 1)
    );
    // Panicking after the body's first `.await`: the second failure trips the circuit.
    let joined = tokio::spawn(explode_in_place(true)).await;
    assert!(joined.unwrap_err().is_panic());
    assert_eq!(breaker.state(), State::Open);
}

#[test]
fn a_panicking_call_counts_as_a_failure_and_the_panic_propagates() {
    let caught = std::panic::catch_unwind(|| explode(true));
    let message = caught.expect_err("the panic propagates");
    assert_eq!(message.downcast_ref::<&str>(), Some(&"backend client bug"));
    let breaker = PANIC.get("panic").unwrap();
    assert_eq!(
        (breaker.snapshot().calls, breaker.snapshot().failures),
        (1, 1)
    );
    assert_eq!(explode(false), Ok(1));
    let _ = std::panic::catch_unwind(|| explode(true));
    assert_eq!(
        breaker.state(),
        State::Open,
        "two panics in a window of two at 50%"
    );
}

#[tokio::test]
async fn a_panicking_async_call_counts_as_a_failure() {
    let joined = tokio::spawn(explode_async()).await;
    assert!(joined.unwrap_err().is_panic());
    assert_eq!(PANIC.get("panic-async").unwrap().state(), State::Open);
}

// ---------------------------------------------------------------- keys

fake_registry!(KEYS_CLOCK, KEYS);

#[circuit_breaker(key = "shipping", registry = KEYS, window = 2, min_calls = 2)]
fn ship_quote() -> Result<(), ApiError> {
    Err(ApiError::Timeout)
}

#[circuit_breaker(key = "shipping", registry = KEYS)]
fn ship_label() -> Result<&'static str, ApiError> {
    Ok("label")
}

#[circuit_breaker(key = "search", registry = KEYS, window = 2, min_calls = 2)]
fn search() -> Result<&'static str, ApiError> {
    Ok("hits")
}

#[test]
fn keys_are_independent_and_one_key_is_one_breaker() {
    assert_eq!(ship_quote(), Err(ApiError::Timeout));
    assert_eq!(ship_quote(), Err(ApiError::Timeout));
    // `ship_label` never failed, but it shares the `shipping` breaker that `ship_quote` opened.
    let rejected = ship_label().unwrap_err();
    assert_eq!(rejected.rejection().unwrap().key(), "shipping");
    // `search` is another circuit.
    assert_eq!(search(), Ok("hits"));
    assert_eq!(KEYS.get("search").unwrap().state(), State::Closed);
    assert_eq!(KEYS.len(), 2);
    // The first registration fixed the policy of `shipping`.
    assert_eq!(
        KEYS.get("shipping").unwrap().policy().settings().window,
        fusebox::Window::Count(2)
    );
}

// ---------------------------------------------------------------- fallbacks

fake_registry!(FALLBACK_CLOCK, FALLBACK);
static FALLBACK_CAUSES: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

async fn queue_payment(
    order: &str,
    amount: u64,
    cause: Cause<ApiError>,
) -> Result<String, ApiError> {
    let why = match &cause {
        Cause::Rejected(e) => format!("rejected:{}:{:?}", e.key(), e.reason()),
        Cause::TimedOut(e) => format!("timed out:{}", e.key()),
        Cause::Failed(e) => format!("failed:{e:?}"),
    };
    FALLBACK_CAUSES.lock().unwrap().push(why);
    Ok(format!("queued {order} for {amount}"))
}

#[circuit_breaker(key = "charge", registry = FALLBACK, window = 2, min_calls = 2, failure_rate = 100, failure = [Timeout], fallback = queue_payment)]
async fn charge_card(order: &str, amount: u64) -> Result<String, ApiError> {
    match amount {
        0 => Err(ApiError::Declined { code: 51 }),
        1..=99 => Ok(format!("charged {order}")),
        _ => Err(ApiError::Timeout),
    }
}

#[tokio::test]
async fn fallback_gets_the_right_cause_and_never_sees_business_errors() {
    assert_eq!(charge_card("a", 5).await, Ok("charged a".to_string()));
    assert_eq!(
        charge_card("b", 0).await,
        Err(ApiError::Declined { code: 51 })
    );
    assert!(
        FALLBACK_CAUSES.lock().unwrap().is_empty(),
        "business error passes through"
    );
    assert_eq!(
        charge_card("c", 500).await,
        Ok("queued c for 500".to_string())
    );
    assert_eq!(
        charge_card("d", 500).await,
        Ok("queued d for 500".to_string())
    );
    assert_eq!(FALLBACK.get("charge").unwrap().state(), State::Open);
    assert_eq!(charge_card("e", 5).await, Ok("queued e for 5".to_string()));
    assert_eq!(
        *FALLBACK_CAUSES.lock().unwrap(),
        ["failed:Timeout", "failed:Timeout", "rejected:charge:Open"]
    );
}

// ---------------------------------------------------------------- shapes of functions

fake_registry!(SHAPES_CLOCK, SHAPES);

struct Client {
    base: String,
    sent: AtomicU32,
}

impl Client {
    #[circuit_breaker(key = "client", registry = SHAPES, window = 2, min_calls = 2, failure_rate = 100, failure = [Timeout, Connect])]
    async fn get(&self, path: &str) -> Result<String, ApiError> {
        self.sent.fetch_add(1, Ordering::Relaxed);
        if path.is_empty() {
            Err(ApiError::Connect(0))
        } else {
            Ok(format!("{}{path}", self.base))
        }
    }

    #[circuit_breaker(key = "client-mut", registry = SHAPES)]
    fn rebase(&mut self, base: &str) -> Result<usize, ApiError> {
        self.base = base.to_owned();
        Ok(self.base.len())
    }

    fn offline(&self, path: &str, cause: Cause<ApiError>) -> Result<String, ApiError> {
        let _ = cause;
        Ok(format!("cached:{}{path}", self.base))
    }

    #[circuit_breaker(key = "client-cached", registry = SHAPES, window = 1, min_calls = 1, fallback = offline)]
    fn get_cached(&self, path: &str) -> Result<String, ApiError> {
        let _ = path;
        Err(ApiError::Unavailable { retry_in: 1 })
    }
}

trait Inventory {
    fn stock(&self, sku: u32) -> Result<u32, ApiError>;
}

impl Inventory for Client {
    #[circuit_breaker(key = "inventory", registry = SHAPES, window = 1, min_calls = 1, failure = [Unavailable])]
    fn stock(&self, sku: u32) -> Result<u32, ApiError> {
        if sku == 0 {
            Err(ApiError::Unavailable { retry_in: 5 })
        } else {
            Ok(sku * 2)
        }
    }
}

#[circuit_breaker(key = "generic", registry = SHAPES, window = 1, min_calls = 1, failure = [Timeout])]
fn parse_all<T: std::str::FromStr>(items: &[&str]) -> Result<Vec<T>, ApiError> {
    items
        .iter()
        .map(|s| s.parse().map_err(|_| ApiError::Timeout))
        .collect()
}

#[tokio::test]
async fn methods_trait_methods_generic_and_sync_functions_all_go_through_their_breakers() {
    let mut client = Client {
        base: "http://a/".into(),
        sent: AtomicU32::new(0),
    };
    assert_eq!(client.get("x").await, Ok("http://a/x".into()));
    assert_eq!(client.rebase("http://b/"), Ok(9));
    assert_eq!(client.get("").await, Err(ApiError::Connect(0)));
    assert_eq!(client.get("").await, Err(ApiError::Connect(0)));
    assert!(client.get("y").await.unwrap_err().rejection().is_some());
    assert_eq!(client.sent.load(Ordering::Relaxed), 3);

    assert_eq!(client.get_cached("z"), Ok("cached:http://b/z".into()));
    assert_eq!(SHAPES.get("client-cached").unwrap().state(), State::Open);
    assert_eq!(client.get_cached("z"), Ok("cached:http://b/z".into()));

    assert_eq!(client.stock(4), Ok(8));
    assert_eq!(client.stock(0), Err(ApiError::Unavailable { retry_in: 5 }));
    assert_eq!(
        client.stock(4).unwrap_err().rejection().unwrap().key(),
        "inventory"
    );

    assert_eq!(parse_all::<u8>(&["1", "2"]), Ok(vec![1, 2]));
    assert_eq!(parse_all::<u8>(&["x"]), Err(ApiError::Timeout));
    assert!(
        parse_all::<u16>(&["3"]).unwrap_err().rejection().is_some(),
        "one breaker for all instantiations"
    );
}
