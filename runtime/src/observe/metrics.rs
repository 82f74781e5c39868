//! The metrics fusebox exports through the [`metrics`](https://docs.rs/metrics) crate (feature
//! `metrics`): what each one counts and its labels.
//!
//! fusebox registers its instruments with whatever recorder is installed when a breaker is created
//! (`metrics::set_global_recorder`, or an exporter's `install`), so install the recorder before the
//! first call. A breaker created before any recorder keeps reporting to none: when a recorder
//! shows up afterwards, the first call of such a key logs one `tracing` WARN (`late_recorder`)
//! naming the keys (up to 16, with their number), once per process. The names and labels below
//! are stable.
//!
//! | metric | kind | labels | what |
//! |---|---|---|---|
//! | `fusebox_calls_total` | counter | `key`, `outcome` | one increment per call (per attempt, with `retry`), with exactly one `outcome` |
//! | `fusebox_shadow_rejected_total` | counter | `key` | calls that metrics-only mode admitted although the breaker would have rejected them |
//! | `fusebox_throttled_total` | counter | `key` | calls adaptive throttling (`throttle`) rejected, reason `throttled`: a part of `outcome="rejected"` |
//! | `fusebox_state` | gauge | `key` | the breaker's state as a number (table below) |
//! | `fusebox_transitions_total` | counter | `key`, `from`, `to` | state changes, by the states left and entered |
//! | `fusebox_concurrency_limit` | gauge | `key` | the bulkhead's limit on calls in flight (`max_concurrent`): fixed, or an adaptive one's current value, set whenever it changes; absent without a bulkhead |
//! | `fusebox_retries_rejected_total` | counter | `key` | retries the key's retry budget rejected ([`Policy::retry_budget`](crate::Policy::retry_budget); registered for keys with a budget only) |
//! | `fusebox_hedges_sent_total` | counter | `key` | hedges sent: attempts a hedged call (`hedge = …`) started because the earlier ones had not answered in time (registered for keys with hedged calls only) |
//! | `fusebox_hedges_won_total` | counter | `key` | hedged calls a hedge answered first |
//! | `fusebox_shadow_policy_rejected_total` | counter | `key`, `shadow` | calls the shadow policy `shadow` would have rejected ([`Policy::shadow`](crate::Policy::shadow); registered for keys with shadows only) |
//! | `fusebox_shadow_policy_admitted_total` | counter | `key`, `shadow` | calls it would have let through |
//! | `fusebox_shadow_policy_state` | gauge | `key`, `shadow` | the state it would be in, numbered as `fusebox_state` |
//! | `fusebox_shadow_policy_transitions_total` | counter | `key`, `shadow`, `from`, `to` | the state changes it would have made |
//! | `fusebox_shadow_policy_open_milliseconds_total` | counter | `key`, `shadow` | how long it would have been open, added when each episode closes |
//! | `fusebox_store_dropped_total` | counter | `key` | outcomes of a shared key (`Registry::share`) its store gave up recording: past the store's resend bound or queue while it did not answer (they count on the replica's local breaker only, per the store's degrade setting); registered when the first is given up |
//!
//! `key` is the breaker's key; `shadow` a shadow policy's name. A shadow policy is not
//! metrics-only mode: `fusebox_shadow_rejected_total` counts the calls a breaker in metrics-only
//! mode ran instead of rejecting, `fusebox_shadow_policy_*` what a candidate judging beside the
//! policy in force would have done (see [`guide::shadows`](crate::guide::shadows)). `outcome` of [`CALLS_TOTAL`]:
//!
//! | `outcome` | the call |
//! |---|---|
//! | `success` | ran and succeeded |
//! | `failure` | ran and failed with a counted failure (a panic and a timed-out attempt included) |
//! | `ignored` | ran and ended with an error that does not count, or was cancelled (its future dropped) |
//! | `rejected` | never ran: the breaker rejected it ([`Reason`](crate::Reason) says why) |
//!
//! So over any interval the four outcomes of a key add up to the calls made. In metrics-only mode
//! ([`Breaker::metrics_only`](crate::Breaker::metrics_only)) a call the breaker would reject runs
//! instead: its outcome is what it did (`success`, `failure` or `ignored`), never `rejected`, and
//! [`SHADOW_REJECTED_TOTAL`] counts it once more, on its own, so the two counters never count one
//! call twice under one name. (The snapshot's [`rejected`](crate::Snapshot::rejected) counts both.)
//!
//! [`STATE`], by [`State`]:
//!
//! | value | state |
//! |---|---|
//! | `0` | closed |
//! | `1` | open |
//! | `2` | half-open |
//! | `3` | forced open |
//! | `4` | disabled |
//!
//! `from` and `to` of [`TRANSITIONS_TOTAL`] are [`State::as_str`](crate::State::as_str): `closed`,
//! `open`, `half_open`, `forced_open`, `disabled`.
//!
//! On a key shared across replicas (`Registry::share`), each replica counts its own calls and
//! transitions, and its `fusebox_state` follows the shared state.
//!
//! Exporting them to Prometheus with `metrics-exporter-prometheus`: install its recorder at
//! startup and serve its text on your metrics route.
//!
//! ```toml
//! [dependencies]
//! fusebox = { version = "0.1", features = ["metrics"] }
//! metrics-exporter-prometheus = { version = "0.17", default-features = false }
//! ```
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let prometheus = metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?;
//! let breaker = fusebox::registry().breaker("payment", fusebox::Policy::new())?;
//! breaker.try_acquire()?.success();
//! let text: String = prometheus.render(); // the body of your `GET /metrics`
//! assert!(text.contains(r#"fusebox_calls_total{key="payment",outcome="success"} 1"#));
//! # Ok(())
//! # }
//! ```

use crate::state::State;

/// `fusebox_calls_total{key, outcome}`: calls by outcome, one increment per call.
pub const CALLS_TOTAL: &str = "fusebox_calls_total";
/// `fusebox_shadow_rejected_total{key}`: calls metrics-only mode ran instead of rejecting.
pub const SHADOW_REJECTED_TOTAL: &str = "fusebox_shadow_rejected_total";
/// `fusebox_throttled_total{key}`: calls adaptive throttling rejected (each also counted once in
/// [`CALLS_TOTAL`] with `outcome="rejected"`).
pub const THROTTLED_TOTAL: &str = "fusebox_throttled_total";
/// `fusebox_retries_rejected_total{key}`: retries the key's retry budget rejected.
pub const RETRIES_REJECTED_TOTAL: &str = "fusebox_retries_rejected_total";
/// `fusebox_hedges_sent_total{key}`: hedges sent (each also counted in [`CALLS_TOTAL`], as an
/// attempt).
pub const HEDGES_SENT_TOTAL: &str = "fusebox_hedges_sent_total";
/// `fusebox_hedges_won_total{key}`: hedged calls a hedge answered first.
pub const HEDGES_WON_TOTAL: &str = "fusebox_hedges_won_total";
/// `fusebox_shadow_policy_rejected_total{key, shadow}`: calls a shadow policy would have rejected.
pub const SHADOW_POLICY_REJECTED_TOTAL: &str = "fusebox_shadow_policy_rejected_total";
/// `fusebox_shadow_policy_admitted_total{key, shadow}`: calls a shadow policy would have let
/// through.
pub const SHADOW_POLICY_ADMITTED_TOTAL: &str = "fusebox_shadow_policy_admitted_total";
/// `fusebox_shadow_policy_state{key, shadow}`: the state a shadow policy would be in (see
/// [`state_value`]).
pub const SHADOW_POLICY_STATE: &str = "fusebox_shadow_policy_state";
/// `fusebox_shadow_policy_transitions_total{key, shadow, from, to}`: the state changes a shadow
/// policy would have made.
pub const SHADOW_POLICY_TRANSITIONS_TOTAL: &str = "fusebox_shadow_policy_transitions_total";
/// `fusebox_shadow_policy_open_milliseconds_total{key, shadow}`: how long a shadow policy would
/// have been open, added when each of its open episodes closes.
pub const SHADOW_POLICY_OPEN_MS_TOTAL: &str = "fusebox_shadow_policy_open_milliseconds_total";
/// `fusebox_state{key}`: the state as a number (see [`state_value`]).
pub const STATE: &str = "fusebox_state";
/// `fusebox_transitions_total{key, from, to}`: state changes.
pub const TRANSITIONS_TOTAL: &str = "fusebox_transitions_total";
/// `fusebox_concurrency_limit{key}`: the bulkhead's limit on calls in flight (fixed, or an
/// adaptive one's current value).
pub const CONCURRENCY_LIMIT: &str = "fusebox_concurrency_limit";
/// `fusebox_store_dropped_total{key}`: outcomes of a shared key its store gave up recording.
pub const STORE_DROPPED_TOTAL: &str = "fusebox_store_dropped_total";

/// The value of [`STATE`] for `state`: 0 closed, 1 open, 2 half-open, 3 forced open, 4 disabled.
#[must_use]
pub const fn state_value(state: State) -> f64 {
    match state {
        State::Closed => 0.0,
        State::Open => 1.0,
        State::HalfOpen => 2.0,
        State::ForcedOpen => 3.0,
        State::Disabled => 4.0,
    }
}

/// The keys whose instruments were registered while no recorder was installed, remembered until
/// a recorder shows up, to say so once.
pub(crate) mod late {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// The most keys the warning names.
    const NAMED: usize = 16;

    /// Some key registered its instruments with no recorder, and none has shown up since.
    static PENDING: AtomicBool = AtomicBool::new(false);
    /// The warning was given (once per process).
    static WARNED: AtomicBool = AtomicBool::new(false);
    /// The first [`NAMED`] of those keys.
    static KEYS: Mutex<Vec<String>> = Mutex::new(Vec::new());
    /// How many keys registered with no recorder.
    static COUNT: AtomicUsize = AtomicUsize::new(0);

    /// No recorder is installed (for this thread): the `metrics` crate's no-op one, which holds
    /// nothing, is in use. (A recorder that holds nothing at all counts as none.)
    fn none_installed() -> bool {
        metrics::with_recorder(|r| std::mem::size_of_val(r) == 0)
    }

    /// `key` registered its instruments now: remembered when no recorder got them.
    pub(crate) fn registered(key: &str) {
        if WARNED.load(Ordering::Relaxed) || !none_installed() {
            return;
        }
        let mut keys = KEYS.lock().unwrap_or_else(|p| p.into_inner());
        if keys.len() < NAMED {
            keys.push(key.chars().take(40).collect());
        }
        COUNT.fetch_add(1, Ordering::Relaxed);
        PENDING.store(true, Ordering::Release);
    }

    /// A call of a key with instruments: one load, unless some key registered with no recorder.
    #[inline]
    pub(crate) fn check() {
        if PENDING.load(Ordering::Relaxed) {
            check_now();
        }
    }

    /// Warns, once, when a recorder is now installed that the remembered keys did not get.
    #[cold]
    fn check_now() {
        if none_installed() || !PENDING.swap(false, Ordering::AcqRel) {
            return;
        }
        if WARNED.swap(true, Ordering::AcqRel) {
            return;
        }
        let keys = std::mem::take(&mut *KEYS.lock().unwrap_or_else(|p| p.into_inner()));
        let count = COUNT.load(Ordering::Relaxed);
        let named: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
        let more = if count > keys.len() { ", …" } else { "" };
        tracing::warn!(
            target: "fusebox",
            event = "late_recorder",
            keys = keys.join(", "),
            count,
            "a `metrics` recorder was installed after these keys registered their metrics: {}{more} \
             ({count} in all); their metrics go to no recorder; install the recorder before the \
             first call (before any breaker is created)",
            named.join(", "),
        );
    }
}
