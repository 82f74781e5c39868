//! The checkout example (`examples/checkout`) and `fusebox::admin`: the demo over HTTP, its
//! dashboard in a real browser, `--replicas 2` over a real `redis-server` (feature `redis`), and
//! the admin router on its own. One test binary; `cargo test -p fusebox-suite --all-features
//! --test checkout -- browser` runs one module.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../../examples/checkout/app.rs"]
mod app;
#[cfg(feature = "redis")]
#[path = "../redis/harness.rs"]
mod redis_harness;
#[cfg(feature = "redis")]
mod support;

mod admin;
mod browser;
mod over_http;
#[cfg(feature = "redis")]
mod replicas;

/// [`app`]'s breakers, their clock and its metrics recorder are process-wide statics: the tests
/// that start the service in this process take this first, one at a time.
static APP: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
