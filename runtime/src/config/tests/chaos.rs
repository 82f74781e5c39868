//! Fault injection in configuration: a key's `chaos` table (or `FUSEBOX__<KEY>__CHAOS`) injects
//! a rejection, latency or a fault registered in code, only once the whole load is accepted; a
//! reload replaces what the previous load of its source injected; a mistake is an error naming
//! the key and the field; without the feature `chaos` the field is an error that says so.

use super::*;

#[cfg(feature = "chaos")]
mod on {
    use super::*;
    use crate::chaos::{Fault, FaultKind};

    /// The fault of `key` in `r`, as the dashboard says it.
    fn text(r: &Registry, key: &str) -> Option<String> {
        r.chaos().fault(key).map(|fault| fault.to_string())
    }

    #[test]
    fn a_key_s_table_injects_a_rejection_or_latency_at_a_rate() {
        let r = Registry::new();
        r.breaker("payment", Policy::new()).unwrap();
        r.breaker("search", Policy::new()).unwrap();
        r.load_toml(
            "[breakers.payment]\nchaos = { fault = \"rejection\", rate = 0.1, seed = 7 }\n\
             [breakers.search]\nchaos = { fault = \"latency\", delay = \"300ms\" }\n",
        )
        .unwrap();
        assert_eq!(
            text(&r, "payment").as_deref(),
            Some("rejections on 10 % of calls")
        );
        assert_eq!(
            text(&r, "search").as_deref(),
            Some("latency 300ms on every call")
        );
        r.load_vars([(
            "FUSEBOX__SHIPPING__CHAOS".to_owned(),
            "{ fault = \"rejection\", rate = 0.5 }".to_owned(),
        )])
        .unwrap();
        assert_eq!(
            text(&r, "shipping").as_deref(),
            Some("rejections on 50 % of calls")
        );
        assert_eq!(
            text(&r, "payment").as_deref(),
            Some("rejections on 10 % of calls"),
            "another source's stay"
        );
    }

    #[test]
    fn a_reload_clears_what_the_previous_load_injected_but_not_what_code_did() {
        let r = Registry::new();
        r.breaker("payment", Policy::new()).unwrap();
        r.breaker("search", Policy::new()).unwrap();
        r.load_toml(
            "[breakers.payment]\nchaos = { fault = \"rejection\" }\n\
             [breakers.search]\nchaos = { fault = \"rejection\" }\n",
        )
        .unwrap();
        r.chaos()
            .inject("search", Fault::latency(Duration::from_millis(5)));
        r.load_toml("[breakers.payment]\nfailure_rate = 30\n")
            .unwrap();
        assert_eq!(text(&r, "payment"), None, "the file no longer declares it");
        assert_eq!(
            r.chaos().injected(),
            vec![("search".to_owned(), FaultKind::Latency)],
            "code's injection since the load stays"
        );
    }

    #[test]
    fn a_registered_fault_is_named_and_takes_the_table_s_rate() {
        let r = Registry::new();
        r.breaker("payment", Policy::new()).unwrap();
        r.chaos()
            .register("payment-timeouts", "payment", Fault::failure(|| "timeout"));
        r.load_toml(
            "[breakers.payment]\nchaos = { registered = \"payment-timeouts\", rate = 0.25 }\n",
        )
        .unwrap();
        assert_eq!(
            text(&r, "payment").as_deref(),
            Some("failures on 25 % of calls")
        );
    }

    #[test]
    fn a_mistake_names_the_key_and_the_field_and_nothing_applies() {
        let r = Registry::new();
        let b = r.breaker("payment", Policy::new()).unwrap();
        let cases = [
            (
                "{ fault = \"rejection\", rte = 0.1 }",
                "unknown field `rte`",
            ),
            (
                "{ fault = \"rejection\", rate = 1.5 }",
                "`rate` = 1.5 is not a share from 0 to 1",
            ),
            (
                "{ fault = \"latency\" }",
                "`fault = \"latency\"` needs a `delay`",
            ),
            ("{ fault = \"failure\" }", "unknown fault `failure`"),
            (
                "{ registered = \"nobody\" }",
                "no fault is registered as `nobody`",
            ),
            ("\"rejection\"", "is not a table like"),
        ];
        for (chaos, expected) in cases {
            let text = format!("[breakers.payment]\nfailure_rate = 30\nchaos = {chaos}\n");
            let error = r.load_toml(&text).unwrap_err();
            let ConfigError::Field { key, message } = &error else {
                panic!("{chaos}: a field error, not {error:?}");
            };
            assert_eq!(key, "payment");
            assert!(
                message.contains("`chaos`") && message.contains(expected),
                "{chaos}: {message}"
            );
            assert_eq!(r.chaos().injected(), vec![], "{chaos}: nothing injected");
            assert_eq!(
                b.policy().settings().failure_rate,
                Policy::new().settings().failure_rate,
                "{chaos}"
            );
        }
    }
}

#[cfg(not(feature = "chaos"))]
#[test]
fn without_the_feature_a_declared_fault_is_an_error_that_says_so() {
    let r = Registry::new();
    r.breaker("payment", Policy::new()).unwrap();
    let error = r
        .load_toml("[breakers.payment]\nchaos = { fault = \"rejection\" }\n")
        .unwrap_err();
    let ConfigError::Field { key, message } = &error else {
        panic!("a field error, not {error:?}");
    };
    assert_eq!(key, "payment");
    assert!(
        message.contains("needs fusebox's feature `chaos`"),
        "{message}"
    );
}
