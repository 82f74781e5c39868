//! Memory cost of fusebox breakers: creates 10,000 and then 100,000 breakers in a fresh
//! [`fusebox::Registry`], and prints the heap bytes per breaker (measured by a counting global
//! allocator), [`fusebox::Breaker::footprint`] as a cross-check, and the process's OS thread count
//! before and after. Exits with an error if the thread count grew.
//!
//! Run: `cargo run --release -p fusebox-bench --bin footprint`

use std::time::Duration;

use fusebox::{Policy, Registry};
use fusebox_bench::{CountingAlloc, live_bytes, os_threads};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// The policy of the comparison benchmarks: 50 % over 100 calls, open for an hour.
const POLICY: Policy = Policy::new()
    .window(100)
    .failure_rate(50)
    .open_for(Duration::from_secs(60 * 60));

fn main() {
    let threads_before = os_threads().expect("/proc/self/status is readable");
    println!("OS threads before: {threads_before}");
    println!(
        "{:>8} | {:>14} | {:>18} | {:>22} | {:>11}",
        "breakers", "heap bytes", "heap bytes/breaker", "footprint() bytes/each", "OS threads"
    );
    for n in [10_000usize, 100_000] {
        let registry = Registry::new();
        let before = live_bytes();
        let mut footprint = 0;
        for i in 0..n {
            let breaker = registry
                .breaker(&format!("k{i}"), POLICY)
                .expect("valid policy");
            footprint += breaker.footprint();
        }
        let heap = live_bytes() - before;
        assert_eq!(registry.len(), n);
        let threads = os_threads().expect("/proc/self/status is readable");
        println!(
            "{n:>8} | {heap:>14} | {:>18.1} | {:>22.1} | {threads:>11}",
            heap as f64 / n as f64,
            footprint as f64 / n as f64,
        );
        assert!(
            threads <= threads_before,
            "thread count grew from {threads_before} to {threads} with {n} breakers"
        );
    }
    let threads_after = os_threads().expect("/proc/self/status is readable");
    println!("OS threads after: {threads_after}");
    assert!(threads_after <= threads_before, "thread count grew");
}
