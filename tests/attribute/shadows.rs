//! `shadow`: the attribute's candidate policies judge the annotated function's calls without
//! acting. A failure burst the policy in force tolerates opens the shadow, whose snapshot says so
//! while every call runs; a configuration's `[breakers.<key>.shadow.<name>]` replaces it.

use std::time::Duration;

use crate::common::ApiError;
use fusebox::State;

fake_registry!(CLOCK, REGISTRY);

#[fusebox::circuit_breaker(key = "shadowed", registry = REGISTRY, failure = [Timeout],
                           window = 100, failure_rate = 50,
                           shadow = "tight: window = 10, failure_rate = 30, open_for = 5s")]
fn charge(fail: bool) -> Result<u32, ApiError> {
    if fail { Err(ApiError::Timeout) } else { Ok(1) }
}

#[test]
fn the_attribute_s_shadow_would_have_opened_while_every_call_runs() {
    for call in 0..10 {
        CLOCK.advance(Duration::from_millis(10));
        assert!(!matches!(charge(call < 4), Err(ApiError::Rejected(_))));
    }
    for _ in 0..5 {
        assert_eq!(charge(false).unwrap(), 1, "the policy in force admits it");
    }
    let breaker = REGISTRY.get("shadowed").unwrap();
    let snapshot = breaker.snapshot();
    assert_eq!(snapshot.state, State::Closed);
    let tight = &snapshot.shadows[0];
    assert_eq!((tight.name, tight.state), ("tight", State::Open));
    assert_eq!((tight.opened, tight.admitted, tight.rejected), (1, 10, 5));
    CLOCK.advance(Duration::from_secs(5));
    charge(false).unwrap();
    let tight = breaker.snapshot().shadows[0].clone();
    assert_eq!(
        (tight.state, tight.open_for),
        (State::Closed, Duration::from_secs(5))
    );
}
