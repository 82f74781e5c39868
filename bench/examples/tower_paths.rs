//! Runs one path of `benches/tower.rs` a fixed number of times, for instruction counts under
//! `valgrind --tool=callgrind` (which, unlike wall time, does not depend on machine load).
//!
//! Run: `cargo build --release -p fusebox-bench --example tower_paths` then
//! `valgrind --tool=callgrind target/release/examples/tower_paths <path> 100000` with `<path>`
//! one of `bare-service`, `layer`, `layer-key-fn`, `tower-resilience`, `bare-async-fn`,
//! `attribute`; divide the total instructions by the call count, after subtracting a run with
//! 0 calls (the set-up).

use std::hint::black_box;

#[path = "../common/tower.rs"]
mod subjects;

use subjects::{
    attribute, bare_async_fn, fusebox_layer, fusebox_layer_key_fn, inner, poll_once, request,
    tower_resilience,
};

/// Runs `f` `calls` times.
fn run<T>(calls: u64, mut f: impl FnMut(u64) -> T) {
    for i in 0..calls {
        black_box(f(black_box(i)));
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("a path name");
    let calls: u64 = args
        .next()
        .map_or(100_000, |n| n.parse().expect("a call count"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    let _context = runtime.enter();
    match path.as_str() {
        "bare-service" => {
            let mut svc = inner();
            run(calls, |x| request(&mut svc, x))
        }
        "layer" => {
            let mut svc = fusebox_layer();
            run(calls, |x| request(&mut svc, x))
        }
        "layer-key-fn" => {
            let mut svc = fusebox_layer_key_fn();
            run(calls, |x| request(&mut svc, x))
        }
        "tower-resilience" => {
            let mut svc = tower_resilience();
            run(calls, |x| request(&mut svc, x))
        }
        "bare-async-fn" => run(calls, |x| poll_once(bare_async_fn(x))),
        "attribute" => run(calls, |x| poll_once(attribute(x))),
        other => panic!("unknown path `{other}`"),
    }
}
