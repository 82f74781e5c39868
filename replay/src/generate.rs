//! Synthetic traces with known answers, so the tool runs out of the box and tests can check it.
//!
//! Every scenario calls key `backend`; outside its incident about 1 % of calls fail (noise) and
//! 2 % end in an ignored business error. The same seed gives the same trace.

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
        .map(|(a, b)| (a.as_nanos() as u64, b.as_nanos() as u64))
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
