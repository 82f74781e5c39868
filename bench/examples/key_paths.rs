//! Runs one dynamic-key path a fixed number of times, for instruction and cache-miss counts under
//! valgrind (which, unlike wall time, do not depend on machine load): the annotated `async fn`
//! with `key = host`, the same as a plain `fn`, or a bare `papaya` lookup of the same `&str`s in
//! the same order.
//!
//! Run: `cargo build --release -p fusebox-bench --example key_paths` then
//! `valgrind --tool=callgrind --cache-sim=yes --LL=8388608,16,64 --collect-atstart=no
//! --toggle-collect='key_paths::*_calls' target/release/examples/key_paths <path> <keys> 200000`
//! with `<path>` `fusebox`, `fusebox-sync`, `papaya` or `papaya-count` (the lookup and one relaxed
//! increment of the value found) and `<keys>` 1, 1000 or 100000, and divide the collected
//! counts by the call count: only the counted calls are collected (the set-up, which creates the
//! keys and fills the visited keys' windows, is simulated but not counted).

use std::hint::black_box;
use std::sync::LazyLock;

/// The registry of the dynamic-key path, with room for every key.
static HOSTS: LazyLock<fusebox::Registry> = LazyLock::new(|| {
    let registry = fusebox::Registry::new();
    registry.set_max_keys(200_000);
    registry
});

/// What the annotated function fails with.
#[derive(Debug)]
enum KeyError {
    /// The circuit rejected the call.
    Rejected,
}

impl From<fusebox::Error> for KeyError {
    fn from(_: fusebox::Error) -> Self {
        KeyError::Rejected
    }
}

/// One breaker per host, looked up per call (as in `benches/compare.rs`).
#[fusebox::circuit_breaker(key = host, registry = HOSTS, window = 100, failure_rate = 50, open_for = "1h")]
async fn per_host(host: &str, n: u64) -> Result<u64, KeyError> {
    Ok(black_box(n))
}

/// The same breaker per host from a plain `fn`.
#[fusebox::circuit_breaker(key = host, registry = HOSTS, window = 100, failure_rate = 50, open_for = "1h")]
fn per_host_sync(host: &str, n: u64) -> Result<u64, KeyError> {
    Ok(black_box(n))
}

use fusebox_bench::poll_once;

/// The counted calls of the `fusebox` and `fusebox-sync` paths (valgrind counts inside this
/// function only): `call` for each key of `order` in turn.
#[inline(never)]
fn fusebox_calls(order: &[&str], calls: usize, call: impl Fn(&str) -> u64) -> u64 {
    let mut sum = 0;
    for i in 0..calls {
        sum += call(black_box(order[i & 4095]));
    }
    sum
}

/// Creates every key's breaker through `call`, then fills the visited keys' windows (100 calls
/// each), as a long benchmark run does: the counted calls then take the full window's path.
fn fill(hosts: &[String], order: &[&str], call: impl Fn(&str) -> u64) -> u64 {
    let mut sum = 0;
    for host in hosts {
        sum += call(host);
    }
    for _ in 0..100 {
        for host in order {
            sum += call(host);
        }
    }
    sum
}

/// A bare `papaya` map of the hosts to `V`, the bare paths' map.
type Bare<V> = papaya::HashMap<String, std::sync::Arc<V>, foldhash::fast::RandomState>;

/// The counted calls of the `papaya` and `papaya-count` paths (valgrind counts inside this
/// function only): the bare lookup, then `read` of the value found.
#[inline(never)]
fn papaya_calls<V>(bare: &Bare<V>, order: &[&str], calls: usize, read: impl Fn(&V) -> u64) -> u64 {
    let mut sum = 0;
    for i in 0..calls {
        let host = black_box(order[i & 4095]);
        sum += black_box(bare.pin().get(host).map_or(0, |v| read(v)));
    }
    sum
}

/// The bare map of `hosts`, each to `V::default()`.
fn bare_map<V: Default>(hosts: &[String]) -> Bare<V> {
    let bare = Bare::with_hasher(foldhash::fast::RandomState::default());
    for host in hosts {
        bare.pin().insert(host.clone(), std::sync::Arc::default());
    }
    bare
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "fusebox".to_owned());
    let keys: usize = args.next().map_or(1, |n| n.parse().expect("a key count"));
    let calls: usize = args
        .next()
        .map_or(1_000_000, |n| n.parse().expect("a call count"));
    let hosts: Vec<String> = (0..keys.max(1))
        .map(|i| format!("host-{i}.internal:443"))
        .collect();
    // A scattered order over the keys, as traffic to many hosts would visit them.
    let order: Vec<&str> = (0..4096)
        .map(|i| hosts[(i * 7919) % hosts.len()].as_str())
        .collect();
    let mut sum = 0u64;
    match path.as_str() {
        "fusebox" => {
            let call = |host: &str| poll_once(per_host(host, 1)).unwrap_or(0);
            sum += fill(&hosts, &order, call);
            sum += fusebox_calls(&order, calls, call);
        }
        "fusebox-sync" => {
            let call = |host: &str| per_host_sync(host, 1).unwrap_or(0);
            sum += fill(&hosts, &order, call);
            sum += fusebox_calls(&order, calls, call);
        }
        "papaya" => {
            let bare = bare_map::<u64>(&hosts);
            sum += papaya_calls(&bare, &order, calls, |v| *v);
        }
        // The bare lookup and one relaxed increment of the value found (what any per-key counter
        // of outcomes writes).
        "papaya-count" => {
            let bare = bare_map::<std::sync::atomic::AtomicU64>(&hosts);
            sum += papaya_calls(&bare, &order, calls, |v| {
                v.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            });
        }
        other => panic!(
            "unknown path `{other}`; expected `fusebox`, `fusebox-sync`, `papaya` or `papaya-count`"
        ),
    }
    println!("{sum}");
}
