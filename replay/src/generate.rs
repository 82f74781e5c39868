//! Synthetic traces with known answers, so the tool runs out of the box and tests can check it.
//!
//! Every [`Scenario`] calls key `backend`; outside its incident about 1 % of calls fail (noise)
//! and 2 % end in an ignored business error. A [`HostScenario`] calls ten hosts of one service
//! ([`generate_hosts`]), for replaying groups. The same seed gives the same trace.

use std::time::Duration;

use crate::trace::{Call, Outcome};

/// The synthetic scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// 10 calls/s for 2 min; from 60 s to 90 s every call fails at once (connection refused).
    HardOutage,
    /// 10 calls/s for 3 min; from 60 s to 120 s 40 % of calls time out and the rest slow down.
    Brownout,
    /// 10 calls/s for 2 min; from 50 s to 80 s latency climbs to 0.7–1.3 s and calls over 1 s time out.
    LatencySpike,
    /// 10 calls/s for 3 min; from 40 s to 140 s the backend is down 10 s, up 10 s, and so on.
    Flapping,
    /// One call every 2 s for 30 min; from 10 min to 15 min every call fails.
    LowTraffic,
}

impl Scenario {
    /// All scenarios with their command-line names.
    pub const ALL: [(&'static str, Scenario); 5] = [
        ("hard-outage", Scenario::HardOutage),
        ("brownout", Scenario::Brownout),
        ("latency-spike", Scenario::LatencySpike),
        ("flapping", Scenario::Flapping),
        ("low-traffic", Scenario::LowTraffic),
    ];

    /// The scenario called `name`.
    #[must_use]
    pub fn parse(name: &str) -> Option<Scenario> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
    }

    /// The incidents as (start, end) of the admission times of the calls they affect.
    #[must_use]
    pub fn incidents(self) -> Vec<(Duration, Duration)> {
        let s = Duration::from_secs;
        match self {
            Scenario::HardOutage => vec![(s(60), s(90))],
            Scenario::Brownout => vec![(s(60), s(120))],
            Scenario::LatencySpike => vec![(s(50), s(80))],
            Scenario::Flapping => (0..5).map(|k| (s(40 + 20 * k), s(50 + 20 * k))).collect(),
            Scenario::LowTraffic => vec![(s(600), s(900))],
        }
    }
}

/// The key of every generated call.
pub const KEY: &str = "backend";

/// Generates `scenario`'s trace with `seed`.
#[must_use]
pub fn generate(scenario: Scenario, seed: u64) -> Vec<Call> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let ms = |n: u64| n * 1_000_000;
    let (spacing, length) = match scenario {
        Scenario::HardOutage | Scenario::LatencySpike => (ms(100), ms(120_000)),
        Scenario::Brownout | Scenario::Flapping => (ms(100), ms(180_000)),
        Scenario::LowTraffic => (ms(2_000), ms(1_800_000)),
    };
    let incidents: Vec<(u64, u64)> = scenario
        .incidents()
        .iter()
        .map(|(a, b)| (saturating_nanos(*a), saturating_nanos(*b)))
        .collect();
    let mut calls = Vec::new();
    let mut admitted = spacing;
    while admitted < length {
        let during = incidents.iter().any(|&(a, b)| (a..b).contains(&admitted));
        let healthy_latency = ms(20 + rng.u64(0..40));
        let (outcome, latency) = if !during {
            let roll = rng.u32(0..100);
            match roll {
                0 => (Outcome::Failure, ms(1_000)),
                1..=2 => (Outcome::Ignored, healthy_latency),
                _ => (Outcome::Success, healthy_latency),
            }
        } else {
            match scenario {
                Scenario::HardOutage | Scenario::Flapping | Scenario::LowTraffic => {
                    (Outcome::Failure, ms(1))
                }
                Scenario::Brownout => {
                    if rng.u32(0..100) < 40 {
                        (Outcome::Failure, ms(1_000))
                    } else {
                        (Outcome::Success, ms(200 + rng.u64(0..200)))
                    }
                }
                Scenario::LatencySpike => {
                    let latency = ms(700 + rng.u64(0..600));
                    if latency >= ms(1_000) {
                        (Outcome::Failure, ms(1_000))
                    } else {
                        (Outcome::Success, latency)
                    }
                }
            }
        };
        calls.push(Call::new(admitted + latency, KEY, outcome).with_latency(latency));
        admitted += spacing;
    }
    // A trace lists calls in the order they were reported.
    calls.sort_by_key(|c| c.at_ns);
    calls
}

/// Synthetic traces of many keys (hosts of one service), for replaying groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostScenario {
    /// 10 hosts, 10 calls/s each for 2 min; from 30 s to 90 s `host-3` succeeds 50 % of its
    /// calls, the others 99 % all along.
    DegradedHost,
    /// 10 hosts, 10 calls/s each for 2 min; from 30 s to 90 s every host succeeds 55 % of its
    /// calls (the client is broken, not the hosts), 99 % otherwise.
    BrokenClient,
    /// [`HostScenario::DegradedHost`] with each call's outcome drawn at random: the healthy
    /// hosts' success rates spread around 99 %, as real traffic's do.
    NoisyHosts,
}

impl HostScenario {
    /// All host scenarios with their command-line names.
    pub const ALL: [(&'static str, HostScenario); 3] = [
        ("degraded-host", HostScenario::DegradedHost),
        ("broken-client", HostScenario::BrokenClient),
        ("noisy-hosts", HostScenario::NoisyHosts),
    ];

    /// The scenario called `name`.
    #[must_use]
    pub fn parse(name: &str) -> Option<HostScenario> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
    }

    /// The hosts: each one's success percentage during the incident (99 outside it).
    #[must_use]
    pub fn hosts(self) -> Hosts {
        let s = Duration::from_secs;
        let during = match self {
            HostScenario::DegradedHost | HostScenario::NoisyHosts => {
                (0..10).map(|i| if i == 3 { 50 } else { 99 }).collect()
            }
            HostScenario::BrokenClient => vec![55; 10],
        };
        Hosts {
            random: self == HostScenario::NoisyHosts,
            healthy: 99,
            during,
            incident: (s(30), s(90)),
            length: s(120),
            per_second: 10,
        }
    }
}

/// A synthetic trace of hosts `host-0`, `host-1`, …: each host's success percentage outside and
/// during one incident, at a steady rate per host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hosts {
    /// The success percentage of every host outside the incident.
    pub healthy: u32,
    /// Per host (its index is its number), its success percentage during the incident.
    pub during: Vec<u32>,
    /// The incident: (start, end) of the admission times of the calls it affects.
    pub incident: (Duration, Duration),
    /// The trace's length.
    pub length: Duration,
    /// Calls per second to each host.
    pub per_second: u32,
    /// Each call's outcome drawn at random with its host's success percentage; otherwise each
    /// host's failures are evenly spread (at 99 %, exactly one call in 100 fails, from a seeded
    /// offset), so every window of 100 calls has the host's exact rate.
    pub random: bool,
}

/// The key of host number `i` in a [`Hosts`] trace.
#[must_use]
pub fn host_key(i: usize) -> String {
    format!("host-{i}")
}

/// Generates a [`Hosts`] trace with `seed`: each call succeeds (20–60 ms) or fails (a 5 ms
/// refused connection) with its host's success percentage (evenly spread, or at random with
/// [`Hosts::random`]); the hosts' calls are interleaved, in report-time order. The same seed
/// gives the same trace.
#[must_use]
pub fn generate_hosts(hosts: &Hosts, seed: u64) -> Vec<Call> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let ms = |n: u64| n * 1_000_000;
    let nanos = saturating_nanos;
    let spacing = 1_000_000_000 / u64::from(hosts.per_second.max(1));
    let (start, end) = (nanos(hosts.incident.0), nanos(hosts.incident.1));
    let n = hosts.during.len() as u64;
    let mut calls = Vec::new();
    // Per host, the failures owed in hundredths of a call: a failure each time it reaches 100.
    let mut owed: Vec<u32> = hosts.during.iter().map(|_| rng.u32(0..100)).collect();
    let mut tick = spacing;
    while tick < nanos(hosts.length) {
        for (i, &during) in hosts.during.iter().enumerate() {
            // Each host's calls are spread over the tick, so hosts interleave.
            let admitted = tick + spacing * i as u64 / n.max(1);
            let success = if (start..end).contains(&admitted) {
                during
            } else {
                hosts.healthy
            };
            let fails = if hosts.random {
                rng.u32(0..100) >= success
            } else {
                owed[i] += 100 - success.min(100);
                let due = owed[i] >= 100;
                if due {
                    owed[i] -= 100;
                }
                due
            };
            let (outcome, latency) = if !fails {
                (Outcome::Success, ms(20 + rng.u64(0..40)))
            } else {
                (Outcome::Failure, ms(5))
            };
            calls.push(Call::new(admitted + latency, &host_key(i), outcome).with_latency(latency));
        }
        tick += spacing;
    }
    // A trace lists calls in the order they were reported.
    calls.sort_by_key(|c| c.at_ns);
    calls
}

/// `duration` in nanoseconds, saturating at `u64::MAX` (a wait of centuries stays the longest).
fn saturating_nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}
