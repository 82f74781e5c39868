//! Unit tests of `error.rs`.

#[test]
fn reason_codes_round_trip_and_zero_is_no_reason() {
    let all = [
        Reason::Open,
        Reason::HalfOpenFull,
        Reason::Recovering,
        Reason::ForcedOpen,
        Reason::BulkheadFull,
        Reason::TimedOut,
        Reason::Throttled,
    ];
    for (i, reason) in all.into_iter().enumerate() {
        assert_eq!(reason.bits(), i as u64 + 1, "{reason:?}");
        assert_eq!(Reason::from_bits(reason.bits()), Some(reason));
    }
    assert_eq!(Reason::from_bits(0), None);
    assert_eq!(Reason::from_bits(8), None);
}

use super::*;

/// The codes are stable: this list only grows.
#[test]
fn every_reason_has_its_stable_code() {
    let codes = [
        (Reason::Open, "open"),
        (Reason::HalfOpenFull, "half_open_full"),
        (Reason::Recovering, "recovering"),
        (Reason::ForcedOpen, "forced_open"),
        (Reason::BulkheadFull, "bulkhead_full"),
        (Reason::TimedOut, "timed_out"),
        (Reason::Throttled, "throttled"),
    ];
    for (reason, code) in codes {
        assert_eq!(reason.code(), code, "{reason:?}");
    }
}

#[test]
fn an_error_is_three_words_and_keeps_what_it_was_made_of() {
    assert_eq!(size_of::<Error>(), 3 * size_of::<usize>());
    assert_eq!(size_of::<Key>(), 2 * size_of::<usize>());
    let waits = [
        None,
        Some(Duration::ZERO),
        Some(Duration::from_nanos(1)),
        Some(Duration::new(3, 999_999_999)),
        Some(Duration::from_secs(60 * 60 * 24 * 365 * 70)),
    ];
    for reason in [
        Reason::Open,
        Reason::HalfOpenFull,
        Reason::Recovering,
        Reason::ForcedOpen,
        Reason::BulkheadFull,
        Reason::TimedOut,
        Reason::Throttled,
    ] {
        for wait in waits {
            for key in [
                Key::from_static("payment"),
                Key::from(String::from("host-1")),
            ] {
                let e = Error::new(key.clone(), reason, wait);
                assert_eq!(
                    (e.key(), e.reason(), e.retry_after()),
                    (key.as_str(), reason, wait)
                );
            }
        }
    }
    // A wait beyond what the packed word holds (over 73 years) is clamped, never `None`.
    let e = Error::new(Key::from_static("k"), Reason::Open, Some(Duration::MAX));
    assert!(e.retry_after().unwrap() > Duration::from_secs(60 * 60 * 24 * 365 * 73));
    assert_eq!(e.reason(), Reason::Open);
}

#[test]
fn display_is_lowercase_and_names_the_key() {
    let e = Error::new(
        Key::from_static("payment"),
        Reason::Open,
        Some(Duration::from_secs(3)),
    );
    assert_eq!(e.to_string(), "circuit `payment` is open; next probe in 3s");
    let e = Error::new(Key::from("search"), Reason::HalfOpenFull, None);
    assert_eq!(
        e.to_string(),
        "circuit `search` is half-open and every probe slot is taken"
    );
    assert!(e.is_circuit_open());
    let e = Error::new(Key::from("search"), Reason::TimedOut, None);
    assert_eq!(e.to_string(), "call through circuit `search` timed out");
    assert!(!e.is_circuit_open());
    let e = Error::new(Key::from("search"), Reason::Throttled, None);
    assert_eq!(
        e.to_string(),
        "circuit `search` is throttling calls while recent ones fail"
    );
    assert!(e.is_rejected() && !e.is_circuit_open() && e.retry_after().is_none());
}

#[test]
fn keys_compare_and_hash_as_strings() {
    use std::hash::BuildHasher;
    let hasher = std::collections::hash_map::RandomState::new();
    let (a, b) = (Key::from_static("payment"), Key::from("payment"));
    assert_eq!(a, b);
    assert_eq!(hasher.hash_one(&a), hasher.hash_one("payment"));
    assert_eq!(hasher.hash_one(&b), hasher.hash_one("payment"));
}

#[test]
fn cause_accessors() {
    let c: Cause<u8> = Cause::Failed(3);
    assert_eq!(c.failed(), Some(&3));
    assert!(c.rejected().is_none() && c.timed_out().is_none() && c.went_out());
    assert_eq!(c.to_string(), "call failed: 3");
}

#[test]
fn a_cause_is_an_error_whose_source_is_what_it_carries() {
    use std::error::Error as _;
    let io = || std::io::Error::other("connection reset");
    let failed: Cause<std::io::Error> = Cause::Failed(io());
    let source = failed.source().expect("a failure's source");
    assert_eq!(source.to_string(), "connection reset");
    assert!(source.downcast_ref::<std::io::Error>().is_some());
    let open = Error::new(Key::from_static("payment"), Reason::Open, None);
    let rejected: Cause<std::io::Error> = Cause::from_error(open.clone());
    let boxed: Box<dyn std::error::Error> = Box::new(rejected);
    assert_eq!(
        boxed.source().and_then(|s| s.downcast_ref::<Error>()),
        Some(&open)
    );
}

#[test]
fn a_timeout_is_a_cause_of_its_own() {
    let timed_out = Error::new(Key::from_static("payment"), Reason::TimedOut, None);
    assert!(!timed_out.is_rejected());
    let c: Cause<String> = Cause::from_error(timed_out.clone());
    assert_eq!(c, Cause::TimedOut(timed_out.clone()));
    assert_eq!(c.timed_out(), Some(&timed_out));
    assert!(c.rejected().is_none() && c.failed().is_none() && c.went_out());
    assert_eq!(c.to_string(), "call through circuit `payment` timed out");
    /// A user's error enum with its own timeout variant.
    #[derive(Debug, PartialEq)]
    enum Mine {
        Timeout,
        Unavailable,
    }
    impl From<Error> for Mine {
        fn from(e: Error) -> Self {
            if e.reason() == Reason::TimedOut {
                Mine::Timeout
            } else {
                Mine::Unavailable
            }
        }
    }
    assert_eq!(
        Cause::<Mine>::from_error(timed_out.clone()).into_error(),
        Mine::Timeout
    );
    let open = Error::new(Key::from_static("payment"), Reason::Open, None);
    assert_eq!(
        Cause::<Mine>::from_error(open).into_error(),
        Mine::Unavailable
    );

    for reason in [
        Reason::Open,
        Reason::HalfOpenFull,
        Reason::Recovering,
        Reason::ForcedOpen,
        Reason::BulkheadFull,
    ] {
        let rejected = Error::new(Key::from_static("payment"), reason, None);
        assert!(rejected.is_rejected(), "{reason:?}");
        let c: Cause<String> = Cause::from_error(rejected.clone());
        assert_eq!(c.rejected(), Some(&rejected));
        assert!(c.timed_out().is_none() && !c.went_out());
    }
}

#[test]
fn retry_after_rounds_up_past_the_slack_and_is_at_least_one_second() {
    use super::whole_seconds;
    use std::time::Duration;
    assert_eq!(whole_seconds(Duration::ZERO), 1);
    assert_eq!(whole_seconds(Duration::from_millis(1)), 1);
    assert_eq!(whole_seconds(Duration::from_millis(1_500)), 2);
    assert_eq!(whole_seconds(Duration::from_micros(2_000_500)), 2);
    assert_eq!(whole_seconds(Duration::from_millis(2_010)), 2);
    assert_eq!(whole_seconds(Duration::from_millis(2_011)), 3);
    assert_eq!(whole_seconds(Duration::from_millis(29_001)), 29);
    assert_eq!(whole_seconds(Duration::from_millis(29_500)), 30);
    assert_eq!(whole_seconds(Duration::from_secs(30)), 30);
    assert_eq!(whole_seconds(Duration::MAX), u64::MAX);
}

#[test]
fn an_error_becomes_an_io_error_of_its_kind_carrying_it() {
    use std::io::ErrorKind;
    for (reason, kind) in [
        (Reason::TimedOut, ErrorKind::TimedOut),
        (Reason::Open, ErrorKind::Other),
        (Reason::HalfOpenFull, ErrorKind::Other),
        (Reason::Recovering, ErrorKind::Other),
        (Reason::ForcedOpen, ErrorKind::Other),
        (Reason::BulkheadFull, ErrorKind::Other),
        (Reason::Throttled, ErrorKind::Other),
    ] {
        let error = Error::new(Key::from_static("disk"), reason, None);
        let io = std::io::Error::from(error.clone());
        assert_eq!(io.kind(), kind, "{reason:?}");
        assert_eq!(io.to_string(), error.to_string());
        assert_eq!(io.downcast::<Error>().ok(), Some(error));
    }
}
