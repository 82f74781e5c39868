//! Unit tests of `site.rs`.

use std::sync::LazyLock;

use super::{DynSite, LocalBreaker, SiteBreaker, method_path};
use crate::breaker::Breaker;
use crate::policy::Policy;
use crate::registry::Registry;

/// What [`DynSite::breaker`] finds for `key`, and whether it came from the site's cache (the
/// call then holds nothing).
struct Found {
    breaker: Breaker,
    cached: bool,
}

impl DynSite {
    fn find(&'static self, registry: &'static Registry, key: &str) -> Found {
        let mut held = SiteBreaker::new();
        let breaker = self.breaker(registry, key, &mut held).clone();
        Found {
            breaker,
            cached: held.0.is_none(),
        }
    }
}

fn cached(found: &Found) -> bool {
    found.cached
}

fn same(a: &Found, registry: &Registry, key: &str) -> bool {
    let registered = registry.get(key).expect("registered");
    std::sync::Arc::ptr_eq(&a.breaker.core, &registered.core)
}

#[test]
fn a_repeated_key_is_served_from_the_site_cache() {
    static SITE: DynSite = DynSite::new("t::f", Policy::DEFAULT);
    static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::new);
    let first = SITE.find(&REGISTRY, "a");
    let second = SITE.find(&REGISTRY, "a");
    let third = SITE.find(&REGISTRY, "a");
    assert!(!cached(&first) && !cached(&second) && cached(&third));
    assert!(same(&third, &REGISTRY, "a"));
    // Another key goes to the map and takes the cache; back to `a`, two lookups in a row
    // point the cache at its slot again.
    assert!(!cached(&SITE.find(&REGISTRY, "b")));
    assert!(same(&SITE.find(&REGISTRY, "b"), &REGISTRY, "b"));
    assert!(cached(&SITE.find(&REGISTRY, "b")));
    assert!(!cached(&SITE.find(&REGISTRY, "a")));
    assert!(!cached(&SITE.find(&REGISTRY, "a")));
    let back = SITE.find(&REGISTRY, "a");
    assert!(cached(&back) && same(&back, &REGISTRY, "a"));
}

#[test]
fn a_cached_key_of_another_registry_is_not_served() {
    static SITE: DynSite = DynSite::new("t::f", Policy::DEFAULT);
    static ONE: LazyLock<Registry> = LazyLock::new(Registry::new);
    static TWO: LazyLock<Registry> = LazyLock::new(Registry::new);
    for _ in 0..3 {
        SITE.find(&ONE, "a");
    }
    let other = SITE.find(&TWO, "a");
    assert!(!cached(&other));
    assert!(same(&other, &TWO, "a"));
}

#[test]
fn an_evicted_cached_breaker_is_not_served() {
    static SITE: DynSite = DynSite::new("t::f", Policy::DEFAULT);
    static OTHER: DynSite = DynSite::new("t::g", Policy::DEFAULT);
    static REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
        let registry = Registry::new();
        registry.set_max_keys(1);
        registry
    });
    for _ in 0..3 {
        SITE.find(&REGISTRY, "a");
    }
    let evicted = std::sync::Arc::clone(&SITE.find(&REGISTRY, "a").breaker.core);
    // Full: the first new key gives `a` its second chance, the next one evicts it.
    OTHER.find(&REGISTRY, "b");
    OTHER.find(&REGISTRY, "c");
    assert!(
        !REGISTRY
            .get("a")
            .is_some_and(|b| std::sync::Arc::ptr_eq(&b.core, &evicted)),
        "`a` was evicted"
    );
    let again = SITE.find(&REGISTRY, "a");
    assert!(!cached(&again));
    assert!(!std::sync::Arc::ptr_eq(&again.breaker.core, &evicted));
}

#[test]
fn threads_calling_one_site_with_different_keys_each_get_their_own_breaker() {
    static SITE: DynSite = DynSite::new("t::f", Policy::DEFAULT);
    static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::new);
    std::thread::scope(|scope| {
        for key in ["a", "b", "c"] {
            scope.spawn(move || {
                for round in 0..2_000 {
                    // Runs of one key (cached) alternate with a second key (map lookups).
                    let key = if round % 7 == 0 { "shared" } else { key };
                    let breaker = SITE.find(&REGISTRY, key);
                    assert!(same(&breaker, &REGISTRY, key), "{key}");
                }
            });
        }
    });
}

#[test]
fn a_site_fills_at_most_its_slots() {
    static SITE: DynSite = DynSite::new("t::f", Policy::DEFAULT);
    static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::new);
    let keys = ["k0", "k1", "k2", "k3", "k4"];
    for key in keys {
        for _ in 0..3 {
            SITE.find(&REGISTRY, key);
        }
    }
    // The fifth key found no free slot; the first four are still served.
    assert!(!cached(&SITE.find(&REGISTRY, "k4")));
    for key in &keys[..4] {
        SITE.find(&REGISTRY, key);
        SITE.find(&REGISTRY, key);
        let served = SITE.find(&REGISTRY, key);
        assert!(cached(&served), "{key}");
        assert!(same(&served, &REGISTRY, key));
    }
}

/// A plain `fn`'s call whose breaker the registry evicts while it runs: the call borrows the
/// breaker under the map's guard, so its report lands on the evicted breaker (still alive),
/// and the key's next call gets a fresh one.
#[test]
fn a_borrowed_breaker_evicted_during_the_call_takes_its_report() {
    static SITE: DynSite = DynSite::new("t::f", Policy::DEFAULT);
    static OTHER: DynSite = DynSite::new("t::g", Policy::DEFAULT);
    static REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
        let registry = Registry::new();
        registry.set_max_keys(1);
        registry
    });
    let name: crate::breaker::FnName = &"t::f";
    let mut held = LocalBreaker::new();
    // Made by a first call: found in the map from then on.
    SITE.enter_local(&REGISTRY, "a", &mut LocalBreaker::new(), name)
        .named(name)
        .ignore();
    let permit = SITE
        .enter_local(&REGISTRY, "a", &mut held, name)
        .named(name);
    // Full: the first new key gives `a` its second chance, the next one evicts it.
    let mut other = SiteBreaker::new();
    OTHER.breaker(&REGISTRY, "b", &mut other);
    let mut other = SiteBreaker::new();
    OTHER.breaker(&REGISTRY, "c", &mut other);
    assert!(
        REGISTRY.get("a").is_none(),
        "`a` was evicted during the call"
    );
    permit.failure();
    assert!(
        held_nothing_owned(&held),
        "found in the map: borrowed, not owned"
    );
    drop(held);
    let fresh = REGISTRY.breaker("a", Policy::DEFAULT).unwrap();
    assert_eq!(
        fresh.snapshot().calls,
        0,
        "the report went to the evicted breaker"
    );
}

/// A plain `fn` calling another (or itself) with a dynamic key: the inner call pins the map
/// again on the same thread and both borrow the same breaker.
#[test]
fn nested_calls_pin_the_map_again() {
    static OUTER: DynSite = DynSite::new("t::outer", Policy::DEFAULT);
    static INNER: DynSite = DynSite::new("t::inner", Policy::DEFAULT);
    static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::new);
    let name: crate::breaker::FnName = &"t::f";
    for round in 0..3 {
        let mut outer = LocalBreaker::new();
        let permit = OUTER
            .enter_local(&REGISTRY, "a", &mut outer, name)
            .named(name);
        let mut inner = LocalBreaker::new();
        let nested = INNER
            .enter_local(&REGISTRY, "a", &mut inner, name)
            .named(name);
        nested.success();
        drop(inner);
        permit.success();
        drop(outer);
        assert_eq!(REGISTRY.get("a").unwrap().snapshot().calls, 2 * (round + 1));
    }
}

fn held_nothing_owned(held: &LocalBreaker) -> bool {
    held.0.as_ref().is_some_and(|pinned| pinned.owned.is_none())
}

/// Threads calling a plain `fn` over more keys than the cap: every call is admitted on its
/// key's breaker and reports to it, borrowed under the map's guard while the sweep evicts
/// idle keys around it.
#[test]
fn borrowed_breakers_survive_eviction_under_concurrent_calls() {
    static SITE: DynSite = DynSite::new("t::f", Policy::DEFAULT);
    static REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
        let registry = Registry::new();
        registry.set_max_keys(8);
        registry
    });
    let keys: Vec<String> = (0..40).map(|i| format!("host-{i}")).collect();
    std::thread::scope(|scope| {
        for t in 0..4 {
            let keys = &keys;
            scope.spawn(move || {
                let name: crate::breaker::FnName = &"t::f";
                for round in 0..3_000 {
                    let key = &keys[(round * 7 + t * 13) % keys.len()];
                    let mut held = LocalBreaker::new();
                    let permit = SITE
                        .enter_local(&REGISTRY, key, &mut held, name)
                        .named(name);
                    assert!(permit.rejection().is_none(), "{key}: closed, admitted");
                    assert_eq!(permit.key().as_str(), key.as_str());
                    permit.success();
                }
            });
        }
    });
    assert!(REGISTRY.len() <= 8, "within the cap: {}", REGISTRY.len());
    for breaker in REGISTRY.snapshot() {
        assert_eq!(breaker.failures, 0, "{}", breaker.key);
    }
}

#[test]
fn method_paths_leave_generic_arguments_out() {
    assert_eq!(method_path("app::Client", "get"), "app::Client::get");
    assert_eq!(
        method_path("app::Client<app::Json, u8>", "get"),
        "app::Client::get"
    );
    assert_eq!(method_path("&app::Client", "get"), "&app::Client::get");
    assert_eq!(method_path("<weird>", "get"), "<weird>::get");
}

/// The linked permit of `breaker/linked.rs`, tested here: its test needs a registry, which is
/// built on the breaker.
mod linked {

    use std::sync::LazyLock;

    use crate::breaker::Permitted as _;
    use crate::call::site::Site;
    use crate::policy::Policy;
    use crate::registry::Registry;

    /// A call admitted before `Registry::configure` replaced its circuit reports to that circuit;
    /// the calls after it admit through a link of their own to the successor, made once.
    #[test]
    fn a_site_permit_reports_to_the_circuit_that_admitted_it() {
        static SITE: Site = Site::new("linked", "t::f", Policy::DEFAULT);
        static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::new);
        let name = &SITE.function;
        let mut before = SITE.enter_linked(&REGISTRY, name);
        let first: *const crate::breaker::Circuit = before.link().core();
        REGISTRY
            .configure("linked", Policy::new().failure_rate(60))
            .unwrap();
        let newest: *const crate::breaker::Circuit =
            &**REGISTRY.get("linked").unwrap().core.current();
        assert_ne!(first, newest, "configure replaced the circuit");
        let mut after = SITE.enter_linked(&REGISTRY, name);
        assert!(std::ptr::eq(after.link().core(), newest));
        assert!(std::ptr::eq(after.link().name(), name));
        let again = SITE.enter_linked(&REGISTRY, name);
        assert!(
            std::ptr::eq(again.link(), after.link()),
            "one link per circuit"
        );
        drop(again);
        assert!(std::ptr::eq(before.take_raw().core(), first));
        assert!(before.admission().inert() && std::ptr::eq(after.raw().core(), newest));
        after.take_raw().failed(name);
        assert_eq!(REGISTRY.get("linked").unwrap().snapshot().failures, 1);
    }
}
