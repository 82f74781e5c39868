//! Hedged calls (`hedge`, `hedge_max`) on tokio's paused clock: a second attempt starts beside a
//! slow one, the first to answer decides, the other is cancelled; hedges stay within the key's
//! budget and are only sent while the circuit is closed.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::common::ApiError;
use fusebox::{State, circuit_breaker};
use tokio::time::Instant;

const FAST: Duration = Duration::from_millis(1);
const SLOW: Duration = Duration::from_secs(1);

// ---------------------------------------------------------------- a long tail, p95

fake_registry!(TAIL_CLOCK, TAIL);
static TAIL_CALLS: AtomicU32 = AtomicU32::new(0);

/// One backend call in 20 (5 %) takes 1 s, the others 1 ms.
#[circuit_breaker(key = "tail", registry = TAIL, hedge = "p95", failure = [Timeout])]
async fn tail() -> Result<u32, ApiError> {
    let n = TAIL_CALLS.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(if n % 20 == 19 { SLOW } else { FAST }).await;
    Ok(n)
}

#[tokio::test(start_paused = true)]
async fn hedging_at_the_learned_p95_cuts_a_one_second_tail_to_milliseconds() {
    let calls = 2_000_usize;
    let mut latencies = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        tail().await.expect("every call succeeds");
        latencies.push(started.elapsed());
    }
    latencies.sort();
    let p99 = latencies[calls * 99 / 100];
    assert!(
        p99 < Duration::from_millis(20),
        "p99 {p99:?}: without hedging one call in 20 takes 1 s"
    );
    let snapshot = TAIL.get("tail").unwrap().snapshot();
    let hedges = snapshot.hedges.expect("the key's calls are hedged");
    let backend = u64::from(TAIL_CALLS.load(Ordering::SeqCst));
    assert_eq!(
        backend,
        calls as u64 + hedges.sent,
        "each hedge is one more call"
    );
    assert!(
        hedges.sent <= calls as u64 / 10,
        "{} hedges for {calls} calls: at most 10 % more",
        hedges.sent
    );
    assert!(
        hedges.won >= hedges.sent * 9 / 10,
        "{hedges:?}: hedges answer the slow calls"
    );
    let learned = hedges
        .learned_delay
        .expect("the histogram holds enough calls");
    assert!(
        learned >= FAST && learned < Duration::from_millis(5),
        "{learned:?}"
    );
    assert_eq!(
        (snapshot.state, snapshot.failures),
        (State::Closed, 0),
        "a cancelled attempt is not a failure"
    );
}

// ---------------------------------------------------------------- a fixed delay

fake_registry!(FIXED_CLOCK, FIXED);
static FIXED_CALLS: AtomicU32 = AtomicU32::new(0);

/// The eleventh backend call takes 1 s, every other one 1 ms.
#[circuit_breaker(key = "fixed", registry = FIXED, hedge = "50ms", window = 20)]
async fn fixed() -> Result<u32, ApiError> {
    let n = FIXED_CALLS.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(if n == 10 { SLOW } else { FAST }).await;
    Ok(n)
}

#[tokio::test(start_paused = true)]
async fn a_call_slower_than_the_fixed_delay_is_answered_by_its_hedge_and_the_slow_attempt_is_cancelled()
 {
    // Ten calls fill the budget: a hedge may add a tenth to them.
    for n in 0..10 {
        assert_eq!(fixed().await.unwrap(), n);
    }
    let started = Instant::now();
    assert_eq!(
        fixed().await.unwrap(),
        11,
        "the hedge (the twelfth call) answered"
    );
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(51),
        "50 ms, then the hedge's 1 ms"
    );
    let snapshot = FIXED.get("fixed").unwrap().snapshot();
    let hedges = snapshot.hedges.unwrap();
    assert_eq!((hedges.sent, hedges.won), (1, 1));
    assert_eq!(hedges.learned_delay, None, "a fixed delay learns nothing");
    assert_eq!(
        (snapshot.calls, snapshot.failures),
        (11, 0),
        "the cancelled attempt is recorded as neither a success nor a failure"
    );
}

// ---------------------------------------------------------------- the budget

fake_registry!(BUDGET_CLOCK, BUDGET);
static BUDGET_CALLS: AtomicU32 = AtomicU32::new(0);

/// Every backend call takes 1 s: every call would be hedged.
#[circuit_breaker(key = "all-slow", registry = BUDGET, hedge = "10ms", hedge_max = 3)]
async fn all_slow() -> Result<u32, ApiError> {
    BUDGET_CALLS.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(SLOW).await;
    Ok(1)
}

#[tokio::test(start_paused = true)]
async fn hedges_stay_within_a_tenth_more_calls_however_slow_the_backend() {
    for _ in 0..200 {
        all_slow().await.unwrap();
    }
    let hedges = BUDGET.get("all-slow").unwrap().snapshot().hedges.unwrap();
    assert!(
        (18..=20).contains(&hedges.sent),
        "{} hedges for 200 calls: the budget allows 10 % more",
        hedges.sent
    );
    assert_eq!(
        u64::from(BUDGET_CALLS.load(Ordering::SeqCst)),
        200 + hedges.sent
    );
}

// ---------------------------------------------------------------- not while recovering

fake_registry!(PROBE_CLOCK, PROBE);
static PROBE_CALLS: AtomicU32 = AtomicU32::new(0);
static PROBE_FAILS: AtomicU32 = AtomicU32::new(0);

/// Fails while `PROBE_FAILS` is above zero (1 ms); otherwise every call from the nineteenth takes
/// 1 s.
#[circuit_breaker(key = "probe", registry = PROBE, hedge = "10ms", window = 4, min_calls = 4, failure_rate = 50, open_for = "5s", half_open = 2, failure = [Timeout])]
async fn probe() -> Result<u32, ApiError> {
    let n = PROBE_CALLS.fetch_add(1, Ordering::SeqCst);
    if PROBE_FAILS
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
            left.checked_sub(1)
        })
        .is_ok()
    {
        tokio::time::sleep(FAST).await;
        return Err(ApiError::Timeout);
    }
    tokio::time::sleep(if n >= 18 { SLOW } else { FAST }).await;
    Ok(n)
}

#[tokio::test(start_paused = true)]
async fn no_hedge_is_sent_while_the_circuit_is_not_closed() {
    for _ in 0..16 {
        probe().await.unwrap();
    }
    PROBE_FAILS.store(2, Ordering::SeqCst);
    for _ in 0..2 {
        assert!(matches!(probe().await, Err(ApiError::Timeout)));
    }
    let breaker = PROBE.get("probe").unwrap();
    assert_eq!(breaker.state(), State::Open);
    PROBE_CLOCK.advance(Duration::from_secs(5));
    // Two probe slots: a hedge would be admitted, but none is sent while half-open.
    for probes in 1..=2 {
        let before = PROBE_CALLS.load(Ordering::SeqCst);
        let started = Instant::now();
        probe().await.expect("the probe succeeds, slowly");
        assert_eq!(started.elapsed(), SLOW, "probe {probes} was not hedged");
        assert_eq!(PROBE_CALLS.load(Ordering::SeqCst), before + 1);
    }
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.snapshot().hedges.unwrap().sent, 0);
    // Closed again, the same slow call is hedged.
    probe().await.unwrap();
    assert_eq!(breaker.snapshot().hedges.unwrap().sent, 1, "closed: hedged");
}

// ---------------------------------------------------------------- a smaller budget

fake_registry!(HALF_CLOCK, HALF);
static HALF_CALLS: AtomicU32 = AtomicU32::new(0);

/// As `all_slow`, with a budget of 5 %.
#[circuit_breaker(key = "all-slow-5", registry = HALF, hedge = "10ms", hedge_budget = 5)]
async fn all_slow_five() -> Result<u32, ApiError> {
    HALF_CALLS.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(SLOW).await;
    Ok(1)
}

#[tokio::test(start_paused = true)]
async fn hedge_budget_sets_the_share_of_more_calls() {
    for _ in 0..200 {
        all_slow_five().await.unwrap();
    }
    let hedges = HALF.get("all-slow-5").unwrap().snapshot().hedges.unwrap();
    assert!(
        (9..=10).contains(&hedges.sent),
        "{} hedges for 200 calls: `hedge_budget = 5` allows 5 % more",
        hedges.sent
    );
    assert_eq!(
        HALF.get("all-slow-5")
            .unwrap()
            .policy()
            .settings()
            .hedge_budget,
        5
    );
}

// ---------------------------------------------------------------- a key two sites name

fake_registry!(SHARED_SITE_CLOCK, SHARED_SITE);
static SHARED_SITE_CALLS: AtomicU32 = AtomicU32::new(0);

/// Call 20 takes 1 s (its hedge answers); call 22 takes 60 ms and its hedge, call 23, 1 s (the
/// first attempt answers).
#[circuit_breaker(key = "two-sites", registry = SHARED_SITE, hedge = "50ms", window = 50)]
async fn hedged_site() -> Result<u32, ApiError> {
    let n = SHARED_SITE_CALLS.fetch_add(1, Ordering::SeqCst);
    let took = match n {
        20 | 23 => SLOW,
        22 => Duration::from_millis(60),
        _ => FAST,
    };
    tokio::time::sleep(took).await;
    Ok(n)
}

/// Another site of the same key: with it, the key tracks stacking.
#[circuit_breaker(key = "two-sites", registry = SHARED_SITE, window = 50)]
async fn other_site() -> Result<u32, ApiError> {
    Ok(0)
}

#[tokio::test(start_paused = true)]
async fn a_hedge_is_a_call_of_its_own_on_a_key_that_tracks_stacking() {
    other_site().await.unwrap();
    for n in 0..20 {
        assert_eq!(hedged_site().await.unwrap(), n);
    }
    let breaker = SHARED_SITE.get("two-sites").unwrap();
    let before = breaker.snapshot().calls;
    assert_eq!(hedged_site().await.unwrap(), 21, "the hedge answered");
    assert_eq!(
        breaker.snapshot().calls - before,
        1,
        "the hedge's answer is recorded"
    );
    assert_eq!(
        hedged_site().await.unwrap(),
        22,
        "the first attempt answered"
    );
    let snapshot = breaker.snapshot();
    assert_eq!(snapshot.hedges.unwrap().sent, 2);
    assert_eq!(
        (snapshot.calls - before, snapshot.failures),
        (2, 0),
        "each hedged call recorded once, by the attempt that answered; the cancelled ones not at all"
    );
}
