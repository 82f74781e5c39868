//! Prints the size of the future an `async fn` returns, bare and under `#[circuit_breaker]` with
//! each kind of argument, and the size of `fusebox::Error`: the table of BENCHMARKS.md.
//!
//! Run: `cargo run --release -p fusebox-bench --example future_sizes` (sizes depend on the
//! optimisation level: the suite's `tests/attribute/sizes.rs` asserts bounds that hold in both).

#[path = "../../tests/common/sizes.rs"]
mod subjects;

use subjects::{
    ApiError, annotated, bare, bare_dynamic, dynamic, with_all, with_fallback, with_retry,
    with_timeout,
};

fn main() {
    let bare = size_of_val(&bare(1));
    let row = |name: &str, size: usize| println!("| {name} | {size} B | +{} B |", size - bare);
    println!("| function | future size | over bare |");
    println!("|---|---:|---:|");
    println!("| bare `async fn` | {bare} B | |");
    row("annotated", size_of_val(&annotated(1)));
    let bare_dynamic = size_of_val(&bare_dynamic("a", 1));
    let dynamic = size_of_val(&dynamic("a", 1));
    println!("| bare `async fn` with a `host: &str` parameter | {bare_dynamic} B | |");
    println!(
        "| dynamic key (`key = host`) | {dynamic} B | +{} B over its bare twin |",
        dynamic - bare_dynamic
    );
    row("with `fallback`", size_of_val(&with_fallback(1)));
    row("with `timeout`", size_of_val(&with_timeout(1)));
    row("with `retry`", size_of_val(&with_retry(1)));
    row(
        "with `timeout`, `retry` and `fallback`",
        size_of_val(&with_all(1)),
    );
    println!(
        "\n`tokio::time::Sleep`: {} B; `fusebox::Error`: {} B; `Result<u64, ApiError>`: {} B",
        size_of::<tokio::time::Sleep>(),
        size_of::<fusebox::Error>(),
        size_of::<Result<u64, ApiError>>()
    );
}
