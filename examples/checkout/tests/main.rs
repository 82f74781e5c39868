//! The checkout demo (`src/`) and `fusebox-admin`: the demo over HTTP, its dashboard in a real
//! browser, `checkout --replicas 2` over a real `redis-server` (feature `redis`), and the admin
//! router on its own. One test binary; `cargo test -p fusebox-checkout --all-features -- browser`
//! runs one module.

#[allow(dead_code)]
#[path = "../src/app.rs"]
mod app;
/// The `redis-server` harness of fusebox's own Redis tests.
#[cfg(feature = "redis")]
#[path = "../../../tests/redis/harness.rs"]
mod redis_harness;
#[cfg(feature = "redis")]
mod support;

mod admin;
mod admin_guards;
mod admin_page;
#[cfg(feature = "redis")]
mod admin_store;
mod admin_stream;
mod browser;
mod browser_chaos;
mod over_http;
#[cfg(feature = "redis")]
mod replicas;

use std::net::SocketAddr;

use tokio::sync::{Mutex, MutexGuard};

/// [`app`]'s breakers, their clock and its metrics recorder are process-wide statics: the tests
/// that start the service in this process hold this, one at a time ([`start_app`]).
static APP: Mutex<()> = Mutex::const_new(());

/// Starts [`app`] on free loopback ports (`config`'s `addr` and `backend_addr` are replaced),
/// every breaker closed with an empty window and its declared policy; the guard keeps the other
/// tests of [`app`] waiting until it drops.
async fn start_app(config: app::Config) -> (MutexGuard<'static, ()>, app::Running) {
    let guard = APP.lock().await;
    // Before the service starts, so its history begins with the scenario.
    app::reset_all();
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let running = app::start(app::Config {
        addr: loopback,
        backend_addr: loopback,
        ..config
    })
    .await
    .expect("the service starts");
    (guard, running)
}
