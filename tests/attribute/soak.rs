//! Soak: random outcomes, panics in bodies, hooks, failure predicates and fallbacks, cancellations,
//! operator actions and reloads against one breaker, with the invariants checked after every step:
//! each permit released exactly once (`in_flight` equals the calls held in their bodies), the
//! bulkhead never exceeded, probes never above `half_open`, every transition continuous with the
//! previous one, and no abort.
//!
//! `soak_threads` runs the same mix (without reloads and held calls) from four threads at once and
//! checks the bulkhead from inside the body. Each test runs for 2 seconds (or `FUSEBOX_SOAK_SECS`), from a random seed (or
//! `FUSEBOX_SOAK_SEED`); a failure prints the seed and the step. `soak` runs without reloads;
//! `soak_with_reloads` adds them when [`RELOADS`] is on.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::common::ApiError;
use fusebox::{Cause, Policy, State, circuit_breaker};

/// Live reloads (`Registry::configure` with the same or a changed policy) in `soak_with_reloads`.
const RELOADS: bool = true;

const MAX_CONCURRENT: u32 = 3;
const HALF_OPEN: u32 = 2;
const POLICY: Policy = Policy::new()
    .window(4)
    .min_calls(2)
    .failure_rate(50)
    .open_for(Duration::from_secs(1))
    .half_open(HALF_OPEN)
    .max_concurrent(MAX_CONCURRENT);

fake_registry!(CLOCK, REGISTRY);

static HOOK_PANICS: AtomicBool = AtomicBool::new(false);
static PREDICATE_PANICS: AtomicBool = AtomicBool::new(false);
static EVENTS: Mutex<Vec<(String, State, State)>> = Mutex::new(Vec::new());

/// How a planned call ends.
#[derive(Debug, Clone, Copy)]
enum End {
    Ok,
    Timeout,
    Declined,
    Panic,
}

impl End {
    fn from_code(code: u8) -> Option<End> {
        [End::Ok, End::Timeout, End::Declined, End::Panic]
            .get(usize::from(code).checked_sub(1)?)
            .copied()
    }

    fn result(self) -> Result<u32, ApiError> {
        match self {
            End::Ok => Ok(1),
            End::Timeout => Err(ApiError::Timeout),
            End::Declined => Err(ApiError::Declined { code: 1 }),
            End::Panic => panic!("body panics"),
        }
    }
}

fn counts(e: &ApiError) -> bool {
    if PREDICATE_PANICS.load(Ordering::Relaxed) {
        panic!("failure predicate panics");
    }
    matches!(e, ApiError::Timeout)
}

fn fallback(
    _key: &str,
    _end: End,
    fallback_panics: bool,
    cause: Cause<ApiError>,
) -> Result<u32, ApiError> {
    if fallback_panics {
        panic!("fallback panics");
    }
    match cause {
        Cause::Failed(e) => Err(e),
        Cause::Rejected(e) => Err(ApiError::Rejected(e)),
        #[allow(unreachable_patterns)]
        _ => Err(ApiError::Timeout),
    }
}

#[circuit_breaker(key = key, registry = REGISTRY, policy = POLICY, failure = counts, fallback = fallback)]
fn call(key: &str, end: End, fallback_panics: bool) -> Result<u32, ApiError> {
    end.result()
}

/// A body that waits until its gate is set to an [`End`] code.
struct Gate(Arc<AtomicU8>);

impl Future for Gate {
    type Output = End;
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<End> {
        match End::from_code(self.0.load(Ordering::Relaxed)) {
            Some(end) => Poll::Ready(end),
            None => Poll::Pending,
        }
    }
}

#[circuit_breaker(key = key, registry = REGISTRY, policy = POLICY, failure = counts)]
async fn held(key: &'static str, gate: Arc<AtomicU8>) -> Result<u32, ApiError> {
    Gate(gate).await.result()
}

static IN_BODY: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
static MOST_IN_BODY: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

#[circuit_breaker(key = "soak-threads", registry = REGISTRY, policy = POLICY, failure = counts)]
fn concurrent(end: End) -> Result<u32, ApiError> {
    let now = IN_BODY.fetch_add(1, Ordering::SeqCst) + 1;
    MOST_IN_BODY.fetch_max(now, Ordering::SeqCst);
    std::thread::yield_now();
    IN_BODY.fetch_sub(1, Ordering::SeqCst);
    end.result()
}

type Held = (
    Pin<Box<dyn Future<Output = Result<u32, ApiError>>>>,
    Arc<AtomicU8>,
);

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

fn poll_once(
    future: &mut Pin<Box<dyn Future<Output = Result<u32, ApiError>>>>,
) -> Poll<Result<u32, ApiError>> {
    future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
}

static SETUP: std::sync::Once = std::sync::Once::new();

fn setup() {
    SETUP.call_once(|| {
        // Planned panics are part of the run: keep them off the test output, report any other.
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let planned = [
                "body panics",
                "failure predicate panics",
                "fallback panics",
                "hook panics",
            ];
            if !planned
                .iter()
                .any(|p| info.payload().downcast_ref::<&str>() == Some(p))
            {
                report(info);
            }
        }));
        REGISTRY.on_transition(|t| {
            EVENTS
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((t.key.to_owned(), t.from, t.to));
            if HOOK_PANICS.load(Ordering::Relaxed) {
                panic!("hook panics");
            }
        });
    });
}

#[test]
fn soak() {
    run("soak", false);
}

#[test]
fn soak_with_reloads() {
    run("soak-reloads", RELOADS);
}

#[allow(clippy::too_many_lines)] // one soak scenario, phase after phase; a test, not a call path
fn run(key: &'static str, reloads: bool) {
    setup();
    let secs = std::env::var("FUSEBOX_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let seed = std::env::var("FUSEBOX_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    let started = Instant::now();
    let mut rng = Rng(seed);
    let mut holding: Vec<Held> = Vec::new();
    let mut seen_events = 0;
    let mut transitions = 0u64;
    let mut last_to = State::Closed;
    let mut step = 0u64;
    let mut tally = [0u64; 8];
    while started.elapsed() < Duration::from_secs_f64(secs) {
        step += 1;
        let at = |what: &str| format!("seed {seed}, step {step}: {what}");
        HOOK_PANICS.store(rng.below(8) == 0, Ordering::Relaxed);
        let action = rng.below(100);
        match action {
            // A call that runs to the end: any outcome, any panic.
            0..=44 => {
                tally[0] += 1;
                let end = [
                    End::Ok,
                    End::Ok,
                    End::Timeout,
                    End::Timeout,
                    End::Declined,
                    End::Panic,
                ][rng.below(6) as usize];
                PREDICATE_PANICS.store(rng.below(10) == 0, Ordering::Relaxed);
                let fallback_panics = rng.below(10) == 0;
                let _ = catch_unwind(move || call(key, end, fallback_panics));
                PREDICATE_PANICS.store(false, Ordering::Relaxed);
            }
            // A call that stays in its body.
            45..=59 => {
                tally[1] += 1;
                let gate = Arc::new(AtomicU8::new(0));
                let mut future: Pin<Box<dyn Future<Output = _>>> =
                    Box::pin(held(key, gate.clone()));
                if poll_once(&mut future).is_pending() {
                    holding.push((future, gate));
                }
            }
            // A held call finishes (possibly panicking), or is cancelled.
            60..=79 if !holding.is_empty() => {
                tally[2] += 1;
                let (mut future, gate) =
                    holding.swap_remove(rng.below(holding.len() as u64) as usize);
                if rng.below(3) == 0 {
                    drop(future); // cancelled
                } else {
                    gate.store(1 + rng.below(4) as u8, Ordering::Relaxed);
                    PREDICATE_PANICS.store(rng.below(10) == 0, Ordering::Relaxed);
                    let ready = catch_unwind(AssertUnwindSafe(|| poll_once(&mut future)));
                    PREDICATE_PANICS.store(false, Ordering::Relaxed);
                    assert!(
                        !matches!(ready, Ok(Poll::Pending)),
                        "{}",
                        at("a released gate finishes")
                    );
                }
            }
            60..=84 => {
                tally[3] += 1;
                CLOCK.advance(Duration::from_millis(
                    [10, 250, 1000, 1500][rng.below(4) as usize],
                ));
            }
            85..=92 => {
                tally[4] += 1;
                if let Some(b) = REGISTRY.get(key) {
                    match rng.below(4) {
                        0 => b.force_open(),
                        1 => b.disable(),
                        _ => b.reset(),
                    }
                }
            }
            _ if reloads => {
                tally[5] += 1;
                let policy = match rng.below(3) {
                    0 => POLICY.open_for(Duration::from_millis(500)),
                    _ => POLICY,
                };
                REGISTRY.configure(key, policy).unwrap();
            }
            _ => {}
        }
        HOOK_PANICS.store(false, Ordering::Relaxed);

        let Some(b) = REGISTRY.get(key) else { continue };
        let snap = b.snapshot();
        let in_bodies = holding.len() as u32;
        assert!(
            in_bodies <= MAX_CONCURRENT,
            "{}",
            at(&format!(
                "{in_bodies} calls in their bodies, over max_concurrent"
            ))
        );
        assert_eq!(
            snap.in_flight,
            in_bodies,
            "{}",
            at("in_flight counts each held permit once")
        );
        assert!(
            snap.probes_in_flight <= HALF_OPEN,
            "{}",
            at("probes over half_open")
        );
        let events = EVENTS.lock().unwrap_or_else(|p| p.into_inner());
        for (_, from, to) in events[seen_events..].iter().filter(|e| e.0 == key) {
            let (from, to) = (*from, *to);
            transitions += 1;
            assert_eq!(
                from,
                last_to,
                "{}",
                at(&format!("event {from} -> {to} after one into {last_to}"))
            );
            last_to = to;
        }
        seen_events = events.len();
        assert_eq!(
            snap.state,
            last_to,
            "{}",
            at("the last event names the current state")
        );
    }
    // Everything still held is cancelled: nothing remains in flight.
    holding.clear();
    let snap = REGISTRY.get(key).unwrap().snapshot();
    assert_eq!(snap.in_flight, 0, "seed {seed}: all released");
    eprintln!("{key}: seed {seed}, {step} steps, {transitions} transitions, actions {tally:?}");
    assert!(transitions > 0 && step > 100);
}

#[test]
fn soak_threads() {
    setup();
    let secs: f64 = std::env::var("FUSEBOX_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..4u64 {
            scope.spawn(move || {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (t + 1));
                while started.elapsed() < Duration::from_secs_f64(secs) {
                    match rng.below(100) {
                        0..=89 => {
                            let end = [End::Ok, End::Ok, End::Timeout, End::Declined, End::Panic]
                                [rng.below(5) as usize];
                            let _ = catch_unwind(move || concurrent(end));
                        }
                        90..=94 => CLOCK.advance(Duration::from_millis(300)),
                        _ => {
                            if let Some(b) = REGISTRY.get("soak-threads") {
                                match rng.below(3) {
                                    0 => b.force_open(),
                                    1 => b.disable(),
                                    _ => b.reset(),
                                }
                            }
                        }
                    }
                    let snap = REGISTRY.get("soak-threads").map(|b| b.snapshot());
                    if let Some(snap) = snap {
                        assert!(
                            snap.in_flight <= MAX_CONCURRENT,
                            "in_flight {}",
                            snap.in_flight
                        );
                        assert!(snap.probes_in_flight <= HALF_OPEN);
                    }
                }
            });
        }
    });
    assert!(MOST_IN_BODY.load(Ordering::SeqCst) <= MAX_CONCURRENT);
    let snap = REGISTRY.get("soak-threads").unwrap().snapshot();
    assert_eq!(snap.in_flight, 0, "every permit released exactly once");
}
