//! What the per-call outcome event costs when nothing records it: calls an annotated function and
//! a manual permit on a closed circuit N times (N from the first argument) on a `FakeClock`
//! registry, for counting instructions with callgrind:
//!
//! ```sh
//! cargo build --release -p fusebox-replay --example outcome_cost
//! valgrind --tool=callgrind target/release/examples/outcome_cost 100000
//! valgrind --tool=callgrind target/release/examples/outcome_cost 200000
//! ```
//!
//! The difference between the two totals, divided by 100,000, is the cost of one iteration.

use std::hint::black_box;
use std::sync::LazyLock;

use fusebox::{Registry, clock::FakeClock};

static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry::with_clock(FakeClock::new()));

#[derive(Debug)]
struct Failed;

impl From<fusebox::Error> for Failed {
    fn from(_: fusebox::Error) -> Self {
        Failed
    }
}

#[fusebox::circuit_breaker(key = "cost", registry = REGISTRY)]
#[inline(never)]
fn annotated(x: u64) -> Result<u64, Failed> {
    Ok(black_box(x) + 1)
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let manual = REGISTRY.breaker("manual", fusebox::Policy::new()).unwrap();
    let mut sum = 0u64;
    for i in 0..n {
        sum = sum.wrapping_add(annotated(i).unwrap_or(0));
        let permit = manual.try_acquire().unwrap();
        permit.success();
    }
    println!("{sum}");
}
