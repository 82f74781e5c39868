//! The checkout demo: a real HTTP service whose payment and shipping calls go through fusebox
//! breakers, with a live dashboard.
//!
//! ```sh
//! cargo run -p fusebox-checkout   # http://127.0.0.1:8081/
//! curl -i -X POST localhost:8081/orders/demo -H 'X-Demo-Backend-Mode: always_fail'
//! cargo run -p fusebox-checkout --features redis -- --replicas 2   # two replicas, one circuit
//! ```
//!
//! Environment: `PORT` (default 8081), `BACKEND_PORT` (default 8082), `CHECKOUT_OPEN_FOR` (how long
//! an opened circuit rejects calls, default `10s`; also `500ms`, `2m`), `CHECKOUT_ADMIN_TOKEN`
//! (when set, the operator controls need `Authorization: Bearer <token>`, which the dashboard's
//! token field sends; otherwise they are allowed from loopback only), `REDIS_URL` (with
//! `--replicas N`: the Redis to share circuits through; without it the demo starts its own
//! `redis-server`).

mod app;
#[cfg(feature = "redis")]
mod replicas;

use std::net::SocketAddr;
use std::process::ExitCode;

fn env_port(name: &str, default: u16) -> Result<u16, String> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(text) => text.trim().parse().map_err(|_| {
            format!("invalid `{name}` = `{text}`; use a port number such as {default}")
        }),
    }
}

fn config() -> Result<app::Config, String> {
    let defaults = app::Config::default();
    let open_for = match std::env::var("CHECKOUT_OPEN_FOR") {
        Err(_) => defaults.open_for,
        Ok(text) => app::parse_duration(&text).ok_or_else(|| {
            format!(
                "invalid `CHECKOUT_OPEN_FOR` = `{text}`; use a duration such as `10s` or `500ms`"
            )
        })?,
    };
    Ok(app::Config {
        addr: SocketAddr::from(([127, 0, 0, 1], env_port("PORT", 8081)?)),
        backend_addr: SocketAddr::from(([127, 0, 0, 1], env_port("BACKEND_PORT", 8082)?)),
        open_for,
        admin_token: std::env::var("CHECKOUT_ADMIN_TOKEN")
            .ok()
            .filter(|t| !t.is_empty()),
        ..defaults
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "fusebox=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let (replicas, config) =
        match app::replicas(std::env::args().skip(1)).and_then(|n| Ok((n, config()?))) {
            Ok(c) => c,
            Err(message) => {
                eprintln!("error: {message}");
                return ExitCode::from(2);
            }
        };
    #[cfg(feature = "redis")]
    {
        let outcome = if let Ok(id) = std::env::var(replicas::REPLICA_ENV) {
            Some(replicas::replica(id, config.clone()).await)
        } else if replicas > 1 {
            Some(replicas::run(replicas, config.clone()).await)
        } else {
            None
        };
        if let Some(outcome) = outcome {
            return match outcome {
                Ok(()) => ExitCode::SUCCESS,
                Err(message) => {
                    eprintln!("error: {message}");
                    ExitCode::FAILURE
                }
            };
        }
    }
    #[cfg(not(feature = "redis"))]
    if replicas > 1 {
        eprintln!("error: {}", app::replicas_unavailable(replicas));
        return ExitCode::from(2);
    }
    let open_for = config.open_for;
    let running = match app::start(config).await {
        Ok(r) => r,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::FAILURE;
        }
    };
    let at = running.addr;
    println!("checkout on http://{at}/  (dashboard; open_for = {open_for:?})");
    println!("backend  on {}/hits", running.backend_url);
    println!();
    println!("curl -i -X POST {at}/orders/demo -H 'X-Demo-Backend-Mode: ok'");
    println!("curl -i -X POST {at}/orders/demo -H 'X-Demo-Backend-Mode: always_fail'");
    println!("curl -s {at}/breakers");
    println!("curl -s {at}/health");
    println!("curl -X POST {at}/breakers/checkout/reset -H 'X-Fusebox-Csrf: 1'");
    std::future::pending::<()>().await;
    ExitCode::SUCCESS
}
