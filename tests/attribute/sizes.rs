//! What an annotated call carries: the size of the future an annotated `async fn` returns, against
//! the same function without the attribute, and the size of `fusebox::Error`. The bounds hold in
//! debug and release builds (`cargo run --release -p fusebox-bench --example future_sizes` prints
//! the release figures of BENCHMARKS.md).

#[path = "../common/sizes.rs"]
mod subjects;

use subjects::{annotated, bare, bare_dynamic, dynamic, with_fallback, with_retry, with_timeout};

#[test]
fn an_error_is_three_words() {
    assert_eq!(size_of::<fusebox::Error>(), 3 * size_of::<usize>());
}

/// Measured at 56 B bare, 72 B annotated, 80 B with a fallback, 200 B with `timeout` (the
/// annotated future, the timer and the body's `async` block) and 176 B with `retry` (release). With
/// the `store` feature an `async fn` may await a shared registry's store: 88 B annotated, 96 B with
/// a fallback, 216 B with `timeout`, and 208 B with `retry` (every attempt's admission and
/// recording may await the store).
#[test]
fn annotated_futures_stay_within_their_bounds() {
    let bare = size_of_val(&bare(1));
    let annotated = size_of_val(&annotated(1));
    let timer = size_of::<tokio::time::Sleep>();
    // The permit (two words: the call site's link to the breaker, which holds the function's
    // name, and the admission) beside the body's future: a body with no
    // `return`, `?` or macro call runs in place, with no `async` block (and no moved copy of the
    // parameters) around it. With `store`, the admission and the report that may await the
    // store add their own states.
    let over_annotated = if cfg!(feature = "store") { 32 } else { 16 };
    assert!(
        annotated <= bare + over_annotated,
        "annotated: {annotated} B, bare: {bare} B"
    );
    // The fallback is awaited after the call settled: its future and the body's never live in
    // the function's future at once.
    let with_fallback = size_of_val(&with_fallback(1));
    assert!(
        with_fallback <= bare + over_annotated + 8,
        "with a fallback: {with_fallback} B, bare: {bare} B"
    );
    // `timeout` without `retry` adds the timer, and the body's `async` block (its state and the
    // moved copy of the parameters, 16 B here): a body bounded by a timer is a future of its own.
    let with_timeout = size_of_val(&with_timeout(1));
    assert!(
        with_timeout <= annotated + timer + 16,
        "with `timeout`: {with_timeout} B, annotated: {annotated} B, timer: {timer} B"
    );
    // `retry` without `timeout` or `deadline`: the attempt driver holds no timer around the
    // attempt and no start time, so it costs no more than a timer would. With `store`, the
    // attempt's admission and its recording may each await the store: their states hold the
    // attempt's outcome or its admission (32 B) where a local key's driver holds nothing.
    let with_retry = size_of_val(&with_retry(1));
    let over_retry = if cfg!(feature = "store") { 32 } else { 0 };
    assert!(
        with_retry <= annotated + timer + over_retry,
        "with `retry`: {with_retry} B, annotated: {annotated} B, timer: {timer} B"
    );
}

/// Measured at 72 B bare (with the `host: &str` parameter) and 120 B under `key = host` (rustc
/// 1.95, release; the debug build gives the same).
#[test]
fn a_dynamic_keys_future_stays_within_its_bound() {
    let bare = size_of_val(&bare_dynamic("a", 1));
    let dynamic = size_of_val(&dynamic("a", 1));
    // The permit (three words: the breaker, the admission and the function's name, as for a
    // literal key), and the one word that keeps the key's breaker alive while the call
    // owns it (empty when the site's cache lends it). The key expression borrows `host`, and a
    // borrowed local stays in the future across the body's await: its two words. With `redis`,
    // the admission and the report that may await the store add their own states.
    let over = 24 + 24 + if cfg!(feature = "store") { 8 } else { 0 };
    assert!(
        dynamic <= bare + over,
        "dynamic key: {dynamic} B, bare with the same parameters: {bare} B"
    );
}
