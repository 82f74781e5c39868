//! The adaptive bulkhead (`max_concurrent = "adaptive(floor..ceiling)"`): against a simulated
//! backend whose latency grows with concurrency past a knee, on a fake clock, the limit settles
//! near the knee and follows it when it moves; a fixed limit stays what it was.

use std::collections::BTreeMap;
use std::future::Future;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::common::ApiError;
use fusebox::clock::FakeClock;
use fusebox::{Breaker, Concurrency, OwnedPermit, Policy, Reason, Registry, circuit_breaker};

/// A backend that serves `knee` calls at once in `base` each; past the knee the calls queue,
/// so a call admitted while `n` are in flight takes `base × n / knee`.
struct Backend {
    base: Duration,
    knee: u32,
}

impl Backend {
    fn latency(&self, in_flight: u32) -> Duration {
        if in_flight <= self.knee {
            self.base
        } else {
            self.base * in_flight / self.knee
        }
    }
}

/// Callers that always want more calls than the bulkhead admits, driven one completion at a
/// time: admit until the bulkhead rejects (each call's latency from the calls in flight then),
/// advance the fake clock to the earliest completion and report it.
struct Simulation {
    clock: FakeClock,
    breaker: Breaker,
    /// Calls in flight by completion time (nanoseconds since the start) and admission order.
    in_flight: BTreeMap<(u64, u64), OwnedPermit>,
    now: u64,
    admitted: u64,
}

impl Simulation {
    fn new(policy: Policy) -> Self {
        let clock = FakeClock::new();
        let registry = Registry::with_clock(clock.clone());
        let breaker = registry.breaker("adaptive-sim", policy).unwrap();
        Simulation {
            clock,
            breaker,
            in_flight: BTreeMap::new(),
            now: 0,
            admitted: 0,
        }
    }

    fn limit(&self) -> u32 {
        self.breaker.snapshot().concurrency_limit.unwrap()
    }

    /// Runs `completions` calls to their end against `backend`; the limits seen after each.
    fn run(&mut self, backend: &Backend, completions: usize) -> Vec<u32> {
        let mut limits = Vec::with_capacity(completions);
        for _ in 0..completions {
            loop {
                match self.breaker.try_acquire_owned() {
                    Ok(permit) => {
                        let n = self.in_flight.len() as u32 + 1;
                        let done = self.now + backend.latency(n).as_nanos() as u64;
                        self.in_flight.insert((done, self.admitted), permit);
                        self.admitted += 1;
                    }
                    Err(rejected) => {
                        assert_eq!(rejected.reason(), Reason::BulkheadFull);
                        break;
                    }
                }
            }
            assert_eq!(
                self.in_flight.len() as u32,
                self.breaker.snapshot().in_flight
            );
            let ((done, _), permit) = self.in_flight.pop_first().expect("a call in flight");
            self.clock.advance(Duration::from_nanos(done - self.now));
            self.now = done;
            permit.success();
            limits.push(self.limit());
        }
        limits
    }
}

/// The lowest and highest of `limits`.
fn span(limits: &[u32]) -> (u32, u32) {
    let low = limits.iter().copied().min().unwrap();
    let high = limits.iter().copied().max().unwrap();
    (low, high)
}

/// Asserts every limit of the settled run is within 20% of `knee`.
fn settled_near(limits: &[u32], knee: u32) {
    let (low, high) = span(limits);
    eprintln!("knee {knee}: the limit moved within {low}..={high}");
    assert!(
        f64::from(low) >= 0.8 * f64::from(knee) && f64::from(high) <= 1.2 * f64::from(knee),
        "the limit moved within {low}..={high}, not within 20% of the knee {knee}"
    );
}

#[test]
fn the_adaptive_limit_settles_near_the_knee_and_follows_it_when_it_moves() {
    let mut sim = Simulation::new(Policy::new().adaptive_concurrency(2, 500));
    assert_eq!(sim.limit(), 20, "starts at 20");
    let ms = Duration::from_millis(10);

    // Below the knee the latency holds: the limit grows to it, and settles there.
    let backend = Backend { base: ms, knee: 50 };
    let warmup = sim.run(&backend, 10_000);
    assert!(
        warmup.windows(2).take(200).all(|w| w[1] >= w[0]),
        "grows first"
    );
    settled_near(&sim.run(&backend, 10_000), 50);

    // More capacity: the limit finds the new knee.
    let backend = Backend {
        base: ms,
        knee: 100,
    };
    sim.run(&backend, 20_000);
    settled_near(&sim.run(&backend, 10_000), 100);

    // Less capacity: the limit comes down to it.
    let backend = Backend { base: ms, knee: 25 };
    sim.run(&backend, 10_000);
    settled_near(&sim.run(&backend, 10_000), 25);
}

#[test]
fn the_adaptive_limit_stays_within_its_floor_and_ceiling() {
    let ms = Duration::from_millis(10);
    // A knee above the ceiling: the limit stops at the ceiling.
    let mut sim = Simulation::new(Policy::new().adaptive_concurrency(2, 30));
    let limits = sim.run(&Backend { base: ms, knee: 80 }, 5_000);
    assert_eq!(*limits.last().unwrap(), 30);
    assert!(limits.iter().all(|&l| l <= 30));
    // A knee below the floor: the limit stops at the floor.
    let mut sim = Simulation::new(Policy::new().adaptive_concurrency(10, 200));
    sim.run(&Backend { base: ms, knee: 40 }, 5_000);
    let limits = sim.run(&Backend { base: ms, knee: 2 }, 2_000);
    assert_eq!(span(&limits).0, 10, "down to the floor, never below");
    // Slow for good at the floor: that latency becomes the no-load one, and the limit stays
    // near the floor (it does not creep up as the latency grows with it).
    let limits = sim.run(&Backend { base: ms, knee: 2 }, 50_000);
    let (low, high) = span(&limits[10_000..]);
    assert!(low >= 10 && high <= 12, "{low}..={high}");
}

#[test]
fn a_fixed_limit_stays_fixed_whatever_the_latency() {
    let mut sim = Simulation::new(Policy::new().max_concurrent(8));
    let limits = sim.run(
        &Backend {
            base: Duration::from_millis(10),
            knee: 2,
        },
        2_000,
    );
    assert!(limits.iter().all(|&l| l == 8));
    assert_eq!(sim.in_flight.len(), 7, "8 in flight before each report");
    let unlimited = Registry::new().breaker("none", Policy::new()).unwrap();
    assert_eq!(unlimited.snapshot().concurrency_limit, None);
}

/// Failures shrink the limit too (a tenth or more of a round's calls failed).
#[test]
fn failing_calls_shrink_the_adaptive_limit() {
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    let policy = Policy::new()
        .adaptive_concurrency(4, 100)
        .rate_off()
        .consecutive(1_000);
    let breaker = registry.breaker("adaptive-failing", policy).unwrap();
    for _ in 0..30 {
        let permits: Vec<OwnedPermit> = (0..20)
            .map_while(|_| breaker.try_acquire_owned().ok())
            .collect();
        clock.advance(Duration::from_millis(5));
        for (i, permit) in permits.into_iter().enumerate() {
            if i % 4 == 0 {
                permit.failure()
            } else {
                permit.success()
            }
        }
    }
    assert_eq!(
        breaker.snapshot().concurrency_limit,
        Some(4),
        "down to the floor"
    );
}

crate::fake_registry!(ADAPTIVE_CLOCK, ADAPTIVE);

static GATE: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(0);

#[circuit_breaker(key = "adaptive-attr", registry = ADAPTIVE, max_concurrent = "adaptive(2..200)", failure = [Timeout])]
async fn gated() -> Result<u32, ApiError> {
    GATE.acquire().await.expect("open semaphore").forget();
    Ok(1)
}

fn poll_once<F: Future + Unpin>(future: &mut F) -> Option<F::Output> {
    match std::pin::Pin::new(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

#[test]
fn the_attribute_takes_an_adaptive_bulkhead() {
    let mut calls: Vec<_> = (0..20).map(|_| Box::pin(gated())).collect();
    for call in &mut calls {
        assert!(poll_once(call).is_none(), "admitted, waiting");
    }
    let breaker = ADAPTIVE.get("adaptive-attr").unwrap();
    assert_eq!(
        breaker.policy().settings().max_concurrent,
        Some(Concurrency::Adaptive {
            floor: 2,
            ceiling: 200
        })
    );
    let snapshot = breaker.snapshot();
    assert_eq!(
        (snapshot.in_flight, snapshot.concurrency_limit),
        (20, Some(20))
    );
    match poll_once(&mut Box::pin(gated())) {
        Some(Err(ApiError::Rejected(error))) => assert_eq!(error.reason(), Reason::BulkheadFull),
        other => panic!("expected a bulkhead rejection, got {other:?}"),
    }
    GATE.add_permits(20);
    for call in &mut calls {
        assert_eq!(poll_once(call), Some(Ok(1)));
    }
    assert_eq!(breaker.snapshot().in_flight, 0);
}
