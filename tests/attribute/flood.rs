//! Attacker-controlled dynamic keys: a flood of once-tripped keys does not switch protection off,
//! keys claimed by `Registry::breaker` leave the dynamic-key cap, and long keys stay bounded.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::common::ApiError;
use fusebox::limits::MAX_KEY_LEN;
use fusebox::{Policy, Reason, State, circuit_breaker};

const CAP: usize = 100;

fake_registry!(CLOCK, HOSTS);
static BODIES: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(key = host, registry = HOSTS, window = 2, min_calls = 1, failure_rate = 100, open_for = "10ms", failure = [Connect])]
fn fetch(host: &str, down: bool) -> Result<u32, ApiError> {
    BODIES.fetch_add(1, Ordering::SeqCst);
    if down {
        Err(ApiError::Connect(503))
    } else {
        Ok(7)
    }
}

#[test]
fn a_flood_of_tripped_keys_does_not_switch_protection_off() {
    HOSTS.set_max_keys(CAP);
    // An attacker trips 10x the cap of junk hosts once each, and leaves.
    for i in 0..10 * CAP {
        let _ = fetch(&format!("junk-{i}.example"), true);
    }
    assert_eq!(HOSTS.len(), CAP, "memory stays within the cap");
    // Within their open wait the tripped breakers stay: a flood cannot reset a tripped circuit.
    assert_eq!(HOSTS.get("junk-0.example").unwrap().state(), State::Open);
    let overflowed = HOSTS.overflow_count();
    assert_eq!(fetch("fresh-during-wait.example", false).unwrap(), 7);
    assert_eq!(
        HOSTS.overflow_count(),
        overflowed + 1,
        "no room while they wait"
    );
    assert_eq!(HOSTS.get("junk-0.example").unwrap().state(), State::Open);

    // Their wait is over: they carry nothing a probe would not recover, and make room.
    CLOCK.advance(Duration::from_millis(10));
    let before = BODIES.load(Ordering::SeqCst);
    let mut rejected = 0;
    for _ in 0..100 {
        match fetch("failing-new.example", true) {
            Err(ApiError::Rejected(e)) => {
                assert_eq!(e.reason(), Reason::Open);
                rejected += 1;
            }
            other => assert_eq!(other, Err(ApiError::Connect(503))),
        }
    }
    assert_eq!(
        BODIES.load(Ordering::SeqCst) - before,
        1,
        "a failing new host trips at once"
    );
    assert_eq!(rejected, 99);
    // New hosts are protected: each gets its own registered breaker.
    let overflowed = HOSTS.overflow_count();
    for i in 0..2 * CAP {
        assert_eq!(fetch(&format!("new-{i}.example"), false).unwrap(), 7);
        assert!(
            HOSTS.get(&format!("new-{i}.example")).is_some(),
            "new-{i} is registered"
        );
    }
    assert_eq!(
        HOSTS.overflow_count(),
        overflowed,
        "no new host ran unprotected"
    );
    assert!(HOSTS.len() <= CAP);
}

fake_registry!(CLAIM_CLOCK, CLAIMED);

#[circuit_breaker(key = host, registry = CLAIMED, failure = [Connect])]
fn claimed(host: &str) -> Result<u32, ApiError> {
    let _ = host;
    Ok(1)
}

#[test]
fn dynamic_keys_claimed_by_registry_breaker_leave_the_cap() {
    CLAIMED.set_max_keys(10);
    for i in 0..10 {
        claimed(&format!("k{i}")).unwrap();
        CLAIMED.breaker(&format!("k{i}"), Policy::new()).unwrap();
    }
    // The ten claimed keys are never evicted and no longer count: 10 new dynamic keys fit.
    for i in 0..10 {
        claimed(&format!("n{i}")).unwrap();
        claimed(&format!("n{i}")).unwrap(); // in use: not idle at the next sweep
        assert!(
            CLAIMED.get(&format!("n{i}")).is_some(),
            "n{i} is registered"
        );
    }
    assert_eq!(CLAIMED.overflow_count(), 0);
    assert_eq!(CLAIMED.len(), 20);
    // Claiming twice counts once: the cap is full again (ten dynamic keys, all in use).
    CLAIMED.breaker("k0", Policy::new()).unwrap();
    claimed("one-more").unwrap();
    assert!(CLAIMED.get("one-more").is_none());
    assert_eq!(CLAIMED.overflow_count(), 1);
    let _ = &CLAIM_CLOCK;
}

fake_registry!(LONG_CLOCK, LONG);

#[circuit_breaker(key = host, registry = LONG, window = 2, min_calls = 2, failure = [Connect])]
fn long_key(host: &str, down: bool) -> Result<u32, ApiError> {
    let _ = host;
    if down {
        Err(ApiError::Connect(1))
    } else {
        Ok(1)
    }
}

#[test]
fn long_dynamic_keys_are_bounded_and_still_protected() {
    let huge = "h".repeat(1 << 20);
    let other = format!("{}x", "h".repeat((1 << 20) - 1));
    for _ in 0..2 {
        let _ = long_key(&huge, true);
    }
    let breaker = LONG.get(&huge).expect("found by its full key");
    assert_eq!(breaker.state(), State::Open);
    assert!(breaker.key().len() <= MAX_KEY_LEN, "stored key is bounded");
    assert!(breaker.key().starts_with("hhhh"), "keeps a readable prefix");
    assert!(breaker.footprint() < 64 * 1024);
    match long_key(&huge, false) {
        Err(ApiError::Rejected(e)) => assert_eq!(e.key(), breaker.key()),
        other => panic!("expected a rejection, got {other:?}"),
    }
    // Another long key with the same prefix is another breaker.
    assert_eq!(long_key(&other, false), Ok(1));
    assert_eq!(LONG.get(&other).unwrap().state(), State::Closed);
    assert_eq!(LONG.len(), 2);
    // Keys at the bound are kept as they are.
    let edge = "e".repeat(MAX_KEY_LEN);
    long_key(&edge, false).unwrap();
    assert_eq!(LONG.get(&edge).unwrap().key(), edge);
    let _ = &LONG_CLOCK;
}
