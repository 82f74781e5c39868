//! The reqwest middleware's `hedge` against a real loopback server: a request stuck on the
//! server is answered by its hedge, and the stuck attempt is cancelled, not counted as a failure.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::support::serve;
use axum::Router;
use axum::routing::get;
use fusebox::{Hedge, HedgeDelay, Policy};
use fusebox_reqwest::CircuitBreakerMiddleware;
use reqwest_middleware::ClientBuilder;

fake_registry!(CLOCK, REGISTRY);

#[tokio::test]
async fn a_request_stuck_on_the_server_is_answered_by_its_hedge() {
    let hits = Arc::new(AtomicU32::new(0));
    let counter = hits.clone();
    // The eleventh request never answers; every other one answers with its number at once.
    let app = Router::new().route(
        "/",
        get(move || {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 10 {
                    std::future::pending::<()>().await;
                }
                n.to_string()
            }
        }),
    );
    let address = serve(app);
    let middleware = CircuitBreakerMiddleware::new("hedged-search")
        .registry(&REGISTRY)
        .policy(Policy::new().window(50))
        // Long enough that a loopback answer on a busy machine comes first.
        .hedge(Hedge::new(HedgeDelay::Fixed(Duration::from_millis(500))));
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(middleware)
        .build();
    let get = || async {
        let response = client.get(format!("http://{address}/")).send().await;
        response.expect("answered").text().await.expect("a body")
    };
    // Ten requests: the key's hedge budget now allows one hedge.
    for n in 0..10 {
        assert_eq!(get().await, n.to_string());
    }
    assert_eq!(
        get().await,
        "11",
        "the hedge (the twelfth request) answered"
    );
    let snapshot = REGISTRY.get("hedged-search").unwrap().snapshot();
    let hedges = snapshot.hedges.expect("hedged calls");
    assert_eq!((hedges.sent, hedges.won), (1, 1));
    assert_eq!(
        (snapshot.calls, snapshot.failures),
        (11, 0),
        "the stuck attempt was cancelled: neither a success nor a failure"
    );
}
