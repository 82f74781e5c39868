//! The headline example, run on tokio's paused clock so its timings are exact.

#[allow(dead_code)]
#[path = "../examples/retry_vs_breaker.rs"]
mod example;

use example::{ATTEMPTS, REQUESTS, Report, TIMEOUT};

#[tokio::test(start_paused = true)]
async fn breaker_cuts_backend_calls_from_60_to_5_and_finishes_sooner() {
    let retry = example::run(false).await;
    assert_eq!(
        retry,
        Report {
            backend_calls: REQUESTS * ATTEMPTS,
            successes: 0,
            fast_errors: 0,
            timeouts: REQUESTS,
            elapsed: TIMEOUT * 60,
        }
    );
    let breaker = example::run(true).await;
    assert_eq!(breaker.backend_calls, 5);
    assert_eq!(breaker.successes, 0);
    // Request 1 times out three times; request 2 twice, then the circuit is open: its third attempt
    // and every later request are refused at once.
    assert_eq!(breaker.timeouts, 1);
    assert_eq!(breaker.fast_errors, REQUESTS - 1);
    assert_eq!(breaker.elapsed, TIMEOUT * 5);
    assert!(breaker.elapsed < retry.elapsed);
    let table = example::table(&retry, &breaker);
    assert!(
        table.contains("| retry alone           |            60 |"),
        "{table}"
    );
    assert!(
        table.contains("| retry through breaker |             5 |"),
        "{table}"
    );
    let snapshot = fusebox::registry().get("backend").unwrap().snapshot();
    assert_eq!(snapshot.state, fusebox::State::Open);
    assert_eq!(snapshot.rejected, u64::from(REQUESTS - 1));
}
