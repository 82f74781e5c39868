//! The Redis store against real `redis-server`s (each test starts its own, see [`harness`]): one
//! test binary, a module per area, built with the `redis` feature.
//! `cargo test -p fusebox-suite --features redis --test redis -- fleet` runs one module.
//!
//! `replicas` and `fleet` run this binary again as replica processes, each running only its
//! replica test (named with [`harness::this_test`]). `faults` installs the process's global
//! `tracing` subscriber and reads only the events of its own keys.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;
mod harness;

mod cached;
#[cfg(feature = "redis-cluster")]
mod cluster;
mod connect;
mod corruption;
mod dynamic;
mod fallback;
mod faults;
mod fleet;
mod idle;
mod jitter;
mod local;
mod model;
mod operators;
mod outage;
mod probes;
mod quorum;
mod replicas;
mod shapes;
mod summed;
mod sync;
mod throttle;
mod triggers;
