//! Property test: a breaker must take the same decisions as a simple sequential model of its
//! documented semantics, for every policy family, under random calls, outcomes, call durations,
//! clock advances, late (stale) reports and operator actions.
//!
//! The model below is written from the documentation (plain structs, a `VecDeque` window, no
//! atomics). After every step the breaker and the model must agree on the admission decision (and
//! the rejection's reason and `retry_after`), on `state()` and on the snapshot counters.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use fusebox::clock::FakeClock;
use fusebox::{Breaker, Permit, Policy, Reason, Registry, State};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, RngSeed};

const MS: u64 = 1_000_000;

// ---------------------------------------------------------------------------------------------
// Policy parameters, kept as plain numbers so the model never reads the runtime's `Policy`.

/// A policy, as plain numbers (milliseconds for durations).
#[derive(Clone, Copy, PartialEq)]
struct Params {
    /// `Some(n)`: count window of n calls. `None`: time window of `span_ms`.
    window: Option<u32>,
    span_ms: u64,
    min_calls: u32,
    /// Percent; `None`: the rate rule is off.
    rate: Option<u8>,
    slow_ms: Option<u64>,
    slow_rate: u8,
    consecutive: Option<u32>,
    /// `failure_count`: counted failures within the window that open the circuit.
    failure_count: Option<u32>,
    open_for_ms: u64,
    /// Backoff factor as a fraction `num / den` (1/1: none).
    backoff: (u64, u64),
    open_max_ms: u64,
    half_open: u32,
    lease_ms: Option<u64>,
    /// `Some((phases, min_passes))`: progressive recovery.
    progressive: Option<(u32, u32)>,
}

impl Params {
    const BASE: Params = Params {
        window: Some(4),
        span_ms: 100,
        min_calls: 1,
        rate: Some(50),
        slow_ms: None,
        slow_rate: 100,
        consecutive: None,
        failure_count: None,
        open_for_ms: 10,
        backoff: (1, 1),
        open_max_ms: 10,
        half_open: 1,
        lease_ms: None,
        progressive: None,
    };

    fn policy(&self) -> Policy {
        let ms = Duration::from_millis;
        let mut p = match self.window {
            Some(n) => Policy::new().window(n),
            None => Policy::new().time_window(ms(self.span_ms)),
        };
        p = p.min_calls(self.min_calls);
        p = match self.rate {
            Some(r) => p.failure_rate(r),
            None => p.rate_off(),
        };
        if let Some(slow) = self.slow_ms {
            p = p.slow(ms(slow)).slow_rate(self.slow_rate);
        }
        if let Some(c) = self.consecutive {
            p = p.consecutive(c);
        }
        if let Some(n) = self.failure_count {
            p = p.failure_count(n);
        }
        p = p.open_for(ms(self.open_for_ms));
        if self.backoff.0 != self.backoff.1 {
            p = p
                .open_backoff(self.backoff.0 as f64 / self.backoff.1 as f64)
                .open_max(ms(self.open_max_ms));
        }
        p = p.half_open(self.half_open);
        if let Some(lease) = self.lease_ms {
            p = p.half_open_lease(ms(lease));
        }
        if let Some((phases, min_passes)) = self.progressive {
            p = p.progressive(phases, min_passes);
        }
        p
    }
}

impl fmt::Debug for Params {
    /// Only the fields that differ from the defaults the families start from.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.window {
            Some(n) => write!(f, "window({n})")?,
            None => write!(f, "time_window({}ms)", self.span_ms)?,
        }
        write!(f, ".min_calls({})", self.min_calls)?;
        match self.rate {
            Some(r) => write!(f, ".failure_rate({r})")?,
            None => write!(f, ".rate_off()")?,
        }
        if let Some(s) = self.slow_ms {
            write!(f, ".slow({s}ms).slow_rate({})", self.slow_rate)?;
        }
        if let Some(c) = self.consecutive {
            write!(f, ".consecutive({c})")?;
        }
        if let Some(n) = self.failure_count {
            write!(f, ".failure_count({n})")?;
        }
        write!(f, ".open_for({}ms)", self.open_for_ms)?;
        if self.backoff.0 != self.backoff.1 {
            write!(
                f,
                ".open_backoff({}/{}).open_max({}ms)",
                self.backoff.0, self.backoff.1, self.open_max_ms
            )?;
        }
        write!(f, ".half_open({})", self.half_open)?;
        if let Some(l) = self.lease_ms {
            write!(f, ".half_open_lease({l}ms)")?;
        }
        if let Some((phases, min_passes)) = self.progressive {
            write!(f, ".progressive({phases}, {min_passes})")?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Operations.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Report {
    Success,
    Failure,
    Ignore,
    Cancel,
}

#[derive(Clone)]
enum Op {
    /// Acquire; if admitted, let `took` pass, then report.
    Call(Report, Duration),
    /// Move the clock forward.
    Advance(Duration),
    /// Acquire and keep the permit (if admitted) for a later `Late`.
    Hold,
    /// Report a held permit (the `n`-th, modulo how many are held), possibly after transitions.
    Late(usize, Report),
    Reset,
    ForceOpen,
    Disable,
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Call(r, took) => write!(f, "call({r:?}, took {took:?})"),
            Op::Advance(d) => write!(f, "advance({d:?})"),
            Op::Hold => write!(f, "hold"),
            Op::Late(n, r) => write!(f, "late(#{n}, {r:?})"),
            Op::Reset => write!(f, "reset"),
            Op::ForceOpen => write!(f, "force_open"),
            Op::Disable => write!(f, "disable"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The model.

#[derive(Clone, Copy, Debug)]
struct Rec {
    at: u64,
    failure: bool,
    slow: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Closed,
    /// Rejects until `until` (nanoseconds).
    Open {
        until: u64,
    },
    /// Half-open with probes: `out` admitted and unreported, `passed` succeeded.
    Probing {
        armed: u64,
        out: u32,
        passed: u32,
    },
    /// Progressive recovery, phase `phase` (1-based).
    Phase {
        phase: u32,
        seq: u64,
        calls: u32,
        failures: u32,
    },
    ForcedOpen,
    Disabled,
}

#[derive(Clone, Copy, Debug)]
struct Ticket {
    /// The model's transition count when the permit was issued.
    epoch: u64,
    start: u64,
}

struct Model {
    p: Params,
    now: u64,
    mode: Mode,
    /// Bumped by every transition; permits from an older epoch are stale.
    epoch: u64,
    window: VecDeque<Rec>,
    run: u32,
    reopens: u32,
    rejected: u64,
}

type Rejection = (Reason, Option<Duration>);

impl Model {
    fn new(p: Params) -> Self {
        Model {
            p,
            now: 0,
            mode: Mode::Closed,
            epoch: 0,
            window: VecDeque::new(),
            run: 0,
            reopens: 0,
            rejected: 0,
        }
    }

    /// Time-window slice of an instant: the window covers the current slice and the 9 before it.
    fn slice(&self, at: u64) -> u64 {
        at / (self.p.span_ms * MS / 10)
    }

    fn in_window(&self) -> impl Iterator<Item = &Rec> {
        let now_slice = self.slice(self.now);
        self.window.iter().filter(move |r| match self.p.window {
            Some(_) => true,
            None => now_slice - self.slice(r.at) < 10,
        })
    }

    /// (calls, failures, slow) in the window now.
    fn counts(&self) -> (u32, u32, u32) {
        self.in_window().fold((0, 0, 0), |(c, f, s), r| {
            (c + 1, f + u32::from(r.failure), s + u32::from(r.slow))
        })
    }

    /// The open wait after `reopens` failed recoveries: open_for × backoff^reopens, capped.
    fn wait_nanos(&self) -> u64 {
        let open_for = self.p.open_for_ms * MS;
        let (num, den) = self.p.backoff;
        if num == den {
            return open_for;
        }
        let cap = (self.p.open_max_ms * MS).max(open_for);
        let (mut n, mut d) = (u128::from(open_for), 1u128);
        for _ in 0..self.reopens {
            n *= u128::from(num);
            d *= u128::from(den);
            if n / d >= u128::from(cap) {
                return cap;
            }
        }
        (n / d) as u64
    }

    fn transition(&mut self, mode: Mode) {
        self.epoch += 1;
        self.mode = mode;
        if matches!(mode, Mode::Open { .. } | Mode::Closed) {
            self.window.clear();
            self.run = 0;
        }
    }

    fn open(&mut self) {
        // Millisecond resolution, rounded up.
        let until = (self.now + self.wait_nanos()).div_ceil(MS) * MS;
        self.transition(Mode::Open { until });
    }

    fn reject(
        &mut self,
        reason: Reason,
        retry_after: Option<Duration>,
    ) -> Result<Ticket, Rejection> {
        self.rejected += 1;
        Err((reason, retry_after))
    }

    fn acquire(&mut self) -> Result<Ticket, Rejection> {
        let now = self.now;
        match self.mode {
            Mode::Closed | Mode::Disabled => {}
            Mode::ForcedOpen => return self.reject(Reason::ForcedOpen, None),
            Mode::Open { until } if now < until => {
                return self.reject(Reason::Open, Some(Duration::from_nanos(until - now)));
            }
            Mode::Open { .. } => match self.p.progressive {
                None => self.transition(Mode::Probing {
                    armed: now,
                    out: 1,
                    passed: 0,
                }),
                Some(_) => self.transition(Mode::Phase {
                    phase: 1,
                    seq: 0,
                    calls: 0,
                    failures: 0,
                }),
            },
            Mode::Probing { armed, out, passed } => {
                let lease = self.p.lease_ms.unwrap_or(self.p.open_for_ms);
                if out + passed < self.p.half_open {
                    self.mode = Mode::Probing {
                        armed,
                        out: out + 1,
                        passed,
                    };
                } else if now / MS - armed / MS >= lease {
                    // Unreported probes: re-armed after the lease (whole milliseconds).
                    self.transition(Mode::Probing {
                        armed: now,
                        out: 1,
                        passed: 0,
                    });
                } else {
                    return self.reject(Reason::HalfOpenFull, None);
                }
            }
            Mode::Phase {
                phase,
                seq,
                calls,
                failures,
            } => {
                let (phases, _) = self.p.progressive.unwrap();
                self.mode = Mode::Phase {
                    phase,
                    seq: seq + 1,
                    calls,
                    failures,
                };
                // Phase k of n admits k of every n calls.
                if seq % u64::from(phases) >= u64::from(phase) {
                    return self.reject(Reason::Recovering, None);
                }
            }
        }
        Ok(Ticket {
            epoch: self.epoch,
            start: now,
        })
    }

    fn report(&mut self, t: Ticket, r: Report) {
        if t.epoch != self.epoch {
            return; // stale: issued before a transition
        }
        match self.mode {
            Mode::Closed | Mode::Disabled => {
                if matches!(r, Report::Ignore | Report::Cancel) {
                    return;
                }
                let failure = r == Report::Failure;
                let slow = self.p.slow_ms.is_some_and(|s| self.now - t.start > s * MS);
                if let Some(n) = self.p.window {
                    if self.window.len() == n as usize {
                        self.window.pop_front();
                    }
                } else {
                    let now_slice = self.slice(self.now);
                    while let Some(old) = self.window.front() {
                        if now_slice - self.slice(old.at) < 10 {
                            break;
                        }
                        self.window.pop_front();
                    }
                }
                self.window.push_back(Rec {
                    at: self.now,
                    failure,
                    slow,
                });
                if self.p.consecutive.is_some() {
                    self.run = if failure { self.run + 1 } else { 0 };
                }
                if self.mode == Mode::Closed && (self.trips() || failure && self.count_trips()) {
                    self.open();
                }
            }
            Mode::Probing { armed, out, passed } => match r {
                Report::Success if passed + 1 >= self.p.half_open => self.close(),
                Report::Success => {
                    self.mode = Mode::Probing {
                        armed,
                        out: out - 1,
                        passed: passed + 1,
                    }
                }
                Report::Failure => self.reopen(),
                Report::Ignore | Report::Cancel => {
                    self.mode = Mode::Probing {
                        armed,
                        out: out - 1,
                        passed,
                    }
                }
            },
            Mode::Phase {
                phase,
                seq,
                calls,
                failures,
            } => {
                if matches!(r, Report::Ignore | Report::Cancel) {
                    return;
                }
                let (phases, min_passes) = self.p.progressive.unwrap();
                let calls = calls + 1;
                let failures = failures + u32::from(r == Report::Failure);
                self.mode = Mode::Phase {
                    phase,
                    seq,
                    calls,
                    failures,
                };
                if calls < min_passes {
                    return;
                }
                let threshold = u64::from(self.p.rate.unwrap_or(50));
                if u64::from(failures) * 100 >= threshold * u64::from(calls) {
                    self.reopen();
                } else if phase >= phases {
                    self.close();
                } else {
                    self.transition(Mode::Phase {
                        phase: phase + 1,
                        seq: 0,
                        calls: 0,
                        failures: 0,
                    });
                }
            }
            Mode::Open { .. } | Mode::ForcedOpen => {}
        }
    }

    fn trips(&self) -> bool {
        if self.p.consecutive.is_some_and(|c| self.run >= c) {
            return true;
        }
        let (calls, failures, slow) = self.counts();
        let reaches =
            |part: u32, rate: u8| u64::from(part) * 100 >= u64::from(rate) * u64::from(calls);
        calls >= self.p.min_calls
            && (self.p.rate.is_some_and(|r| reaches(failures, r))
                || (self.p.slow_ms.is_some() && reaches(slow, self.p.slow_rate)))
    }

    /// `failure_count`: the window holds that many counted failures, whatever the rate and
    /// `min_calls` (judged when a failure is recorded).
    fn count_trips(&self) -> bool {
        let (_, failures, _) = self.counts();
        self.p.failure_count.is_some_and(|n| failures >= n)
    }

    fn close(&mut self) {
        self.reopens = 0;
        self.transition(Mode::Closed);
    }

    fn reopen(&mut self) {
        self.reopens += 1;
        self.open();
    }

    fn force(&mut self, mode: Mode) {
        self.reopens = 0;
        self.transition(mode);
        self.window.clear();
        self.run = 0;
    }

    fn state(&self) -> State {
        match self.mode {
            Mode::Closed => State::Closed,
            Mode::Open { .. } => State::Open,
            Mode::Probing { .. } | Mode::Phase { .. } => State::HalfOpen,
            Mode::ForcedOpen => State::ForcedOpen,
            Mode::Disabled => State::Disabled,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Driving both.

/// What the test compares after each step.
#[derive(Debug, PartialEq)]
struct Seen {
    state: State,
    calls: u32,
    failures: u32,
    slow: u32,
    consecutive_failures: u32,
    rejected: u64,
    retry_after: Option<Duration>,
    probes_in_flight: u32,
    phase: Option<u32>,
    reopens: u32,
}

fn seen_breaker(b: &Breaker) -> Seen {
    let s = b.snapshot();
    Seen {
        state: b.state(),
        calls: s.calls,
        failures: s.failures,
        slow: s.slow,
        consecutive_failures: s.consecutive_failures,
        rejected: s.rejected,
        retry_after: s.retry_after,
        probes_in_flight: s.probes_in_flight,
        phase: s.phase,
        reopens: s.reopens,
    }
}

fn seen_model(m: &Model) -> Seen {
    let (calls, failures, slow) = m.counts();
    Seen {
        state: m.state(),
        calls,
        failures,
        slow,
        consecutive_failures: m.run,
        rejected: m.rejected,
        retry_after: match m.mode {
            Mode::Open { until } => Some(Duration::from_nanos(until.saturating_sub(m.now))),
            _ => None,
        },
        probes_in_flight: match m.mode {
            Mode::Probing { out, .. } => out,
            _ => 0,
        },
        phase: match m.mode {
            Mode::Phase { phase, .. } => Some(phase),
            _ => None,
        },
        reopens: m.reopens,
    }
}

fn settle(permit: Permit<'_>, r: Report) {
    match r {
        Report::Success => permit.success(),
        Report::Failure => permit.failure(),
        Report::Ignore => permit.ignore(),
        Report::Cancel => drop(permit),
    }
}

fn admission<T>(r: &Result<T, fusebox::Error>) -> Result<(), Rejection> {
    match r {
        Ok(_) => Ok(()),
        Err(e) => Err((e.reason(), e.retry_after())),
    }
}

fn run(p: Params, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let clock = FakeClock::new();
    let registry = Registry::with_clock(clock.clone());
    let breaker = registry
        .breaker("model", p.policy())
        .map_err(|e| TestCaseError::fail(format!("invalid generated policy {p:?}: {e}")))?;
    let mut model = Model::new(p);
    let mut held: Vec<(Permit<'_>, Ticket)> = Vec::new();
    let advance = |model: &mut Model, d: Duration| {
        clock.advance(d);
        model.now += d.as_nanos() as u64;
    };
    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::Call(r, took) => {
                let real = breaker.try_acquire();
                let expected = model.acquire();
                prop_assert_eq!(
                    admission(&real),
                    expected.map(|_| ()),
                    "admission at step {} ({:?})",
                    step,
                    op
                );
                if let (Ok(permit), Ok(ticket)) = (real, expected) {
                    advance(&mut model, took);
                    settle(permit, r);
                    model.report(ticket, r);
                }
            }
            Op::Advance(d) => advance(&mut model, d),
            Op::Hold => {
                let real = breaker.try_acquire();
                let expected = model.acquire();
                prop_assert_eq!(
                    admission(&real),
                    expected.map(|_| ()),
                    "admission at step {} ({:?})",
                    step,
                    op
                );
                if let (Ok(permit), Ok(ticket)) = (real, expected) {
                    held.push((permit, ticket));
                }
            }
            Op::Late(n, r) => {
                if !held.is_empty() {
                    let (permit, ticket) = held.remove(n % held.len());
                    settle(permit, r);
                    model.report(ticket, r);
                }
            }
            Op::Reset => {
                breaker.reset();
                model.force(Mode::Closed);
            }
            Op::ForceOpen => {
                breaker.force_open();
                model.force(Mode::ForcedOpen);
            }
            Op::Disable => {
                breaker.disable();
                model.force(Mode::Disabled);
            }
        }
        prop_assert_eq!(
            seen_breaker(&breaker),
            seen_model(&model),
            "after step {} ({:?})",
            step,
            op
        );
    }
    // Permits still held at the end are cancelled; the breaker must stay consistent.
    for (permit, ticket) in held.drain(..) {
        drop(permit);
        model.report(ticket, Report::Cancel);
    }
    prop_assert_eq!(seen_breaker(&breaker), seen_model(&model), "after the end");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Strategies.

fn report() -> impl Strategy<Value = Report> {
    prop_oneof![
        4 => Just(Report::Success),
        4 => Just(Report::Failure),
        1 => Just(Report::Ignore),
        1 => Just(Report::Cancel),
    ]
}

/// Mostly whole milliseconds (to land on thresholds exactly), sometimes a fraction of one.
fn duration(max_ms: u64) -> impl Strategy<Value = Duration> {
    prop_oneof![
        3 => (0..=max_ms).prop_map(Duration::from_millis),
        1 => (0..=max_ms * 1_000).prop_map(Duration::from_micros),
    ]
}

/// Operations; `manual` adds the operator controls.
fn ops(max_ms: u64, manual: bool) -> impl Strategy<Value = Vec<Op>> {
    let manual_weight = if manual { 1 } else { 0 };
    let op = prop_oneof![
        30 => (report(), duration(max_ms / 4)).prop_map(|(r, d)| Op::Call(r, d)),
        3 => (report(), duration(max_ms)).prop_map(|(r, d)| Op::Call(r, d)),
        8 => duration(max_ms).prop_map(Op::Advance),
        3 => Just(Op::Hold),
        3 => (0..4usize, report()).prop_map(|(n, r)| Op::Late(n, r)),
        manual_weight => Just(Op::Reset),
        manual_weight => Just(Op::ForceOpen),
        manual_weight => Just(Op::Disable),
    ];
    proptest::collection::vec(op, 1..80)
}

fn rate() -> impl Strategy<Value = u8> {
    prop_oneof![Just(50u8), Just(100u8), 1..=100u8]
}

fn count_window() -> impl Strategy<Value = Params> {
    (1..=8u32, 0..=8u32, rate(), 1..=20u64).prop_map(|(n, min, rate, open)| Params {
        window: Some(n),
        min_calls: min.clamp(1, n),
        rate: Some(rate),
        open_for_ms: open,
        ..Params::BASE
    })
}

fn time_window() -> impl Strategy<Value = Params> {
    (1..=20u64, 1..=8u32, rate(), 1..=20u64).prop_map(|(span, min, rate, open)| Params {
        window: None,
        span_ms: span * 10,
        min_calls: min,
        rate: Some(rate),
        open_for_ms: open,
        ..Params::BASE
    })
}

fn slow_calls() -> impl Strategy<Value = Params> {
    (
        prop::option::of(1..=8u32),
        1..=8u32,
        prop::option::of(rate()),
        1..=10u64,
        rate(),
        1..=20u64,
    )
        .prop_map(|(n, min, rate, slow, slow_rate, open)| Params {
            window: n,
            span_ms: 100,
            min_calls: n.map_or(min, |n| min.clamp(1, n)),
            rate,
            slow_ms: Some(slow),
            slow_rate,
            open_for_ms: open,
            ..Params::BASE
        })
}

fn consecutive() -> impl Strategy<Value = Params> {
    (1..=5u32, prop::option::of(rate()), 1..=8u32, 1..=20u64).prop_map(|(c, rate, n, open)| {
        Params {
            window: Some(n),
            min_calls: n,
            rate,
            consecutive: Some(c),
            open_for_ms: open,
            ..Params::BASE
        }
    })
}

/// `failure_count` alone or with the rate rule, over a count or a time window, with any
/// `min_calls` (which does not gate it).
fn failure_count() -> impl Strategy<Value = Params> {
    (
        prop::option::of(1..=8u32),
        1..=20u64,
        1..=8u32,
        1..=8u32,
        prop::option::of(rate()),
        1..=20u64,
    )
        .prop_map(|(n, span, count, min, rate, open)| Params {
            window: n,
            span_ms: span * 10,
            min_calls: n.map_or(min, |n| min.clamp(1, n)),
            rate,
            failure_count: Some(n.map_or(count, |n| count.clamp(1, n))),
            open_for_ms: open,
            ..Params::BASE
        })
}

fn backoff() -> impl Strategy<Value = Params> {
    (
        prop_oneof![Just((3u64, 2u64)), Just((2, 1)), Just((3, 1)), Just((5, 4))],
        1..=10u64,
        0..=60u64,
        1..=3u32,
    )
        .prop_map(|(backoff, open, extra, half_open)| Params {
            window: Some(2),
            min_calls: 1,
            open_for_ms: open,
            backoff,
            open_max_ms: open + extra,
            half_open,
            ..Params::BASE
        })
}

fn half_open() -> impl Strategy<Value = Params> {
    (1..=5u32, prop::option::of(1..=30u64), 1..=20u64, 1..=4u32).prop_map(
        |(half_open, lease, open, n)| Params {
            window: Some(n),
            min_calls: 1,
            open_for_ms: open,
            half_open,
            lease_ms: lease,
            ..Params::BASE
        },
    )
}

fn progressive() -> impl Strategy<Value = Params> {
    (
        1..=4u32,
        1..=4u32,
        prop::option::of(rate()),
        1..=3u32,
        1..=20u64,
    )
        .prop_map(|(phases, min_passes, rate, c, open)| Params {
            window: Some(2),
            min_calls: 1,
            // With the rate off, `consecutive` trips the circuit and phases are judged at 50 %.
            rate,
            consecutive: rate.is_none().then_some(c),
            open_for_ms: open,
            progressive: Some((phases, min_passes)),
            ..Params::BASE
        })
}

/// 300 cases per family from a fixed seed (deterministic); `PROPTEST_CASES` and
/// `PROPTEST_RNG_SEED` override them for a longer or different search.
fn config() -> ProptestConfig {
    fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
        std::env::var(name).ok()?.parse().ok()
    }
    ProptestConfig {
        cases: env("PROPTEST_CASES").unwrap_or(300),
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(env("PROPTEST_RNG_SEED").unwrap_or(0x00f5_eb0c)),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn count_window_matches_the_model(p in count_window(), ops in ops(40, false)) {
        run(p, ops)?;
    }

    #[test]
    fn time_window_matches_the_model(p in time_window(), ops in ops(120, false)) {
        run(p, ops)?;
    }

    #[test]
    fn slow_calls_match_the_model(p in slow_calls(), ops in ops(40, false)) {
        run(p, ops)?;
    }

    #[test]
    fn consecutive_failures_match_the_model(p in consecutive(), ops in ops(40, false)) {
        run(p, ops)?;
    }

    #[test]
    fn failure_count_matches_the_model(p in failure_count(), ops in ops(80, false)) {
        run(p, ops)?;
    }

    #[test]
    fn open_backoff_matches_the_model(p in backoff(), ops in ops(80, false)) {
        run(p, ops)?;
    }

    #[test]
    fn half_open_probes_match_the_model(p in half_open(), ops in ops(40, false)) {
        run(p, ops)?;
    }

    #[test]
    fn progressive_recovery_matches_the_model(p in progressive(), ops in ops(40, false)) {
        run(p, ops)?;
    }

    #[test]
    fn operator_controls_match_the_model(
        p in prop_oneof![count_window(), half_open(), progressive(), slow_calls(), failure_count()],
        ops in ops(40, true),
    ) {
        run(p, ops)?;
    }
}

/// The smallest sequence the model found for the rate rule: a success that brings the window to
/// `min_calls` must trigger the evaluation like any other recorded outcome. Failure, success
/// makes a window of 2 at 50 %: the circuit must open (otherwise the next success evicts the
/// failure and a window that reached the threshold never trips).
#[test]
fn a_success_that_completes_min_calls_trips_a_window_at_the_threshold() {
    let registry = Registry::with_clock(FakeClock::new());
    let policy = Policy::new().window(2).min_calls(2).failure_rate(50);
    let breaker = registry.breaker("min-calls", policy).unwrap();
    breaker.try_acquire().unwrap().failure();
    assert_eq!(breaker.state(), State::Closed, "1 call is below min_calls");
    breaker.try_acquire().unwrap().success();
    assert_eq!(
        breaker.state(),
        State::Open,
        "1 failure in 2 calls reaches 50 %"
    );
}
