//! fusebox-replay: tune circuit-breaker policies on recorded traffic.
//!
//! - [`record`]: a `tracing-subscriber` layer that writes fusebox's per-call outcome events as a
//!   trace (JSON lines, [`trace`]) off the call path.
//! - [`replay`]: runs a trace through real `fusebox` breakers on a fake clock, once per candidate
//!   policy ([`policy`]), and scores each: time to detect each outage, calls wrongly rejected,
//!   failures let through, openings, flaps, time open, probes.
//! - [`keyed`]: a trace with many keys replayed on one breaker per key in one registry, with the
//!   groups a candidate puts keys in (the runtime's own group code), scored per key and per group.
//! - [`shadows`]: the shadow policies a trace recorded live, and their replay beside the policy
//!   in force.
//! - [`trace`]: the trace format, read as a stream into 16-byte [`trace::Event`]s.
//! - [`search`] (a grid and its Pareto front), [`lint`] (a policy on its own, or on a trace),
//!   [`generate`], [`report`] and (feature `cli`) [`chart`] (the replay chart and the search's
//!   scatter): the command line's parts.
//!
//! Using only the recording layer? Depend on it with `default-features = false`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "cli")]
pub mod chart;
pub mod generate;
pub mod keyed;
pub mod lint;
pub mod policy;
pub mod record;
pub mod replay;
pub mod report;
pub mod search;
pub mod shadows;
pub mod trace;
