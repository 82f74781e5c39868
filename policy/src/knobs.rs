//! The knob table: one row per policy knob, from which every list of knobs is generated.
//!
//! [`with_knobs!`](crate::with_knobs) hands the rows to a generator macro (`with_knobs!(gen)`
//! expands to `gen! { rows }`). This crate generates from them the fields of `Policy`, its
//! setters, its `PolicySettings`, `PolicyPatch` and `KNOBS` (`lib.rs`, `patch.rs`); `fusebox-macros`
//! the attribute's arguments; `fusebox` the fields of its configuration files. A row reads:
//!
//! ```text
//! /// what the setting is (the doc of its `PolicySettings` field)
//! name {
//!     fields { field: Type = default, … }      // the private fields of `Policy`
//!     setting { Type = |p| expression }        // its `PolicySettings` field, from `p: &Policy`
//!     setters { /// doc
//!               fn setter(arg: Type, …) { field: value, … } … }
//!     patch { fn setter(…) { field: value } }  // optional: `PolicyPatch`-only setters
//!     attr(Type = reader(arguments) => setter, …)  // optional: the attribute argument
//!     config { field_name: reader, … }         // the configuration file's field(s), if any
//! }
//! ```
//!
//! A setter stores its values into the named fields and marks the knob as set explicitly; the
//! same setter on `PolicyPatch` records the values, and `PolicyPatch::apply` stores them the
//! same way. `attr` is the row of the attribute's argument table (`fusebox-macros`' `args.rs`:
//! the checked value's type, the reader of `args/values.rs` with its arguments, the setter(s)
//! the value is passed to); a knob without one is set in code or configuration only.
//! `config` names the configuration field(s) and the reader (in `fusebox`'s `config.rs`) that
//! turns a value into a `PolicyPatch` (none for `open_for_fn`: configuration cannot name a
//! function, and says so). The names in `attr` and `config` are resolved where
//! those crates expand the table.

/// Hands the knob table to the generator `$generate` (see the module `knobs.rs`): the one list
/// of the policy knobs. Not a public API.
///
/// `with_knobs!(generate)` hands it every row as written; `with_knobs!(@arguments generate)`
/// only the attribute's arguments, `name(type = reader(arguments) => setter, …);` per row that
/// has an `attr` column; `with_knobs!(@config generate)` only the configuration fields,
/// `field: reader,` each.
#[doc(hidden)]
#[macro_export]
macro_rules! with_knobs {
    ($($generate:tt)+) => {
        $crate::__knob_view! { [$($generate)+]
            /// The window the rates are computed over: a count or a time window.
            window {
                fields { window: Window = Window::Count(100) }
                setting { Window = |p| p.window }
                setters {
                    /// A count window: the last `calls` recorded outcomes (older ones are
                    /// evicted).
                    ///
                    /// A `min_calls` above `calls` is lowered to it (see the rules in the type's
                    /// documentation).
                    fn window(calls: u32) { window: Window::Count(calls) }
                    /// A time window: the outcomes recorded during the last `span`.
                    fn time_window(span: Duration) { window: Window::Time(span) }
                }
                attr(WindowArg = window_arg() => window, time_window)
                config { window: |f| f.window() }
            }
            /// The number of recorded calls below which the rates are not evaluated.
            min_calls {
                fields { min_calls: u32 = DEFAULT_MIN_CALLS }
                setting { u32 = |p| p.min_calls }
                setters {
                    /// The number of recorded calls below which the circuit never opens on a
                    /// rate (at most a count window; without this setter it is 10, or the count
                    /// window when smaller).
                    fn min_calls(calls: u32) { min_calls: calls }
                }
                attr(Spanned<u32> = count_arg("10", MAX_CALLS, "calls, at most `window`") => min_calls)
                config { min_calls: |f| Ok(P.min_calls(f.int(COUNT)?)) }
            }
            /// The failure rate in percent that opens the circuit, or `None` when the rule is off.
            failure_rate {
                fields { failure_rate: u8 = DEFAULT_FAILURE_RATE }
                setting { Option<u8> = |p| if p.failure_rate == 0 { None } else { Some(p.failure_rate) } }
                setters {
                    /// The failure rate, in percent of the window, at which the circuit opens
                    /// (1..=100). Set explicitly, it stays on next to
                    /// [`consecutive`](Policy::consecutive).
                    fn failure_rate(percent: u8) { failure_rate: percent }
                    /// Turns the failure-rate rule off (for a policy that trips on `consecutive`
                    /// or `slow` only).
                    fn rate_off() { failure_rate: 0 }
                }
                attr(Spanned<u8> = percent_arg("50") => failure_rate)
                config { failure_rate: |f| Ok(P.failure_rate(f.int(PERCENT)?)) }
            }
            /// The counted failures in a row that open the circuit, or `None` when the rule is off.
            consecutive {
                fields { consecutive: u32 = 0 }
                setting { Option<u32> = |p| unless_zero(p.consecutive) }
                setters {
                    /// Opens after `failures` counted failures in a row (any success resets the
                    /// run). Unless [`failure_rate`](Policy::failure_rate) or
                    /// [`rate_off`](Policy::rate_off) was called, this turns the rate rule off
                    /// (`consecutive(0)` turns it back on).
                    fn consecutive(failures: u32) { consecutive: failures }
                }
                attr(Spanned<u32> = count_arg("5", MAX_WINDOW, "counted failures in a row") => consecutive)
                config { consecutive: |f| Ok(P.consecutive(f.int(COUNT)?)) }
            }
            /// The counted failures within the window that open the circuit, or `None` when the
            /// rule is off.
            failure_count {
                fields { failure_count: u32 = 0 }
                setting { Option<u32> = |p| unless_zero(p.failure_count) }
                setters {
                    /// Opens after `failures` counted failures within the window, whatever their
                    /// rate (Sentinel's exception count: 50 failures a minute matter at a 0.5 %
                    /// rate). The count is the window's: the last N calls of a count window, the
                    /// last span of a time window. It is not gated by
                    /// [`min_calls`](Policy::min_calls) (the count is its own minimum), and at
                    /// most a count window. Unless [`failure_rate`](Policy::failure_rate) or
                    /// [`rate_off`](Policy::rate_off) was called, this turns the rate rule off
                    /// (`failure_count(0)` turns the count rule off and, with no `consecutive`,
                    /// the rate rule back on).
                    ///
                    /// ```
                    /// # use fusebox_policy as fusebox;
                    /// use std::time::Duration;
                    /// use fusebox::Policy;
                    ///
                    /// // 50 failures within a minute open the circuit, and so does a 50 % rate.
                    /// const SEARCH: Policy = Policy::new()
                    ///     .time_window(Duration::from_secs(60))
                    ///     .failure_count(50)
                    ///     .failure_rate(50);
                    /// assert_eq!(SEARCH.settings().failure_count, Some(50));
                    /// assert_eq!(SEARCH.settings().failure_rate, Some(50));
                    /// // Alone, it replaces the rate rule.
                    /// assert_eq!(Policy::new().failure_count(5).settings().failure_rate, None);
                    /// ```
                    fn failure_count(failures: u32) { failure_count: failures }
                }
                attr(Spanned<u32> = count_arg("50", MAX_WINDOW, "counted failures in the window") => failure_count)
                config { failure_count: |f| Ok(P.failure_count(f.int(COUNT)?)) }
            }
            /// The K of adaptive throttling (accepts are multiplied by it in the rejection
            /// probability), or `None` when closed calls are not throttled.
            throttle {
                fields { throttle_milli: u32 = 0 }
                setting { Option<f64> = |p| if p.throttle_milli == 0 { None } else { Some(p.throttle_milli as f64 / 1000.0) } }
                setters {
                    /// Adaptive throttling (Google SRE's client-side throttling, a soft opening):
                    /// while the circuit is closed, each call is rejected with probability
                    /// `max(0, (requests − k × accepts) / (requests + 1))`, where `requests` is the
                    /// window's recorded calls and `accepts` its successes, so load is shed in
                    /// proportion to the failures before a rule opens the circuit. `k` is at
                    /// least 1 (at most 100); lower sheds more: with `k = 2`, nothing is shed
                    /// while at least half the calls succeed. Like the rate rules, it waits for
                    /// [`min_calls`](Policy::min_calls). A call it rejects carries the reason
                    /// `throttled` and is not recorded in the window. `throttle(0.0)` turns it
                    /// off (the default).
                    ///
                    /// ```
                    /// # use fusebox_policy as fusebox;
                    /// use fusebox::Policy;
                    ///
                    /// const SEARCH: Policy = Policy::new().throttle(2.0).failure_rate(90);
                    /// assert_eq!(SEARCH.settings().throttle, Some(2.0));
                    /// assert_eq!(Policy::new().settings().throttle, None);
                    /// assert!(Policy::new().throttle(0.5).validate().is_err());
                    /// ```
                    fn throttle(k: f64) { throttle_milli: throttle_to_milli(k) }
                }
                attr(Spanned<f64> = throttle_arg() => throttle)
                config { throttle: |f| Ok(P.throttle(f.float()?)) }
            }
            /// The slow-call threshold, or `None` when slow calls are not tracked.
            slow {
                fields { slow_nanos: u64 = 0 }
                setting { Option<Duration> = |p| if p.slow_nanos == 0 { None } else { Some(Duration::from_nanos(p.slow_nanos)) } }
                setters {
                    /// A recorded call slower than `threshold` counts as slow (a slow success is
                    /// slow, not failed). Strictly slower: a call that takes exactly `threshold`
                    /// is not slow, one that takes a nanosecond more is.
                    fn slow(threshold: Duration) { slow_nanos: duration_to_nanos(threshold) }
                }
                attr(Spanned<u64> = duration_arg("2s", MS_TO_DAY) => slow)
                config { slow: |f| Ok(P.slow(f.duration()?)) }
            }
            /// The slow-call rate threshold in percent (it applies with `slow` only).
            slow_rate {
                fields { slow_rate: u8 = 100 }
                setting { u8 = |p| p.slow_rate }
                setters {
                    /// The slow-call rate, in percent of the window, at which the circuit opens
                    /// (1..=100; default 100).
                    fn slow_rate(percent: u8) { slow_rate: percent }
                }
                attr(Spanned<u8> = percent_arg("80") => slow_rate)
                config { slow_rate: |f| Ok(P.slow_rate(f.int(PERCENT)?)) }
            }
            /// The open wait (before any backoff).
            open_for {
                fields { open_for_nanos: u64 = 10_000_000_000 }
                setting { Duration = |p| Duration::from_nanos(p.open_for_nanos) }
                setters {
                    /// How long the circuit stays open before it admits probes. It replaces an
                    /// open-wait function set before (see [`open_for_fn`](Policy::open_for_fn)).
                    fn open_for(wait: Duration) { open_for_nanos: duration_to_nanos(wait), open_fn: None }
                }
                attr(OpenForArg = open_for_arg("10s", MS_TO_DAY) => open_for, open_for_fn)
                config { open_for: |f| f.open_for() }
            }
            /// The multiplier of the wait per failed recovery (1: no backoff).
            open_backoff {
                fields { open_backoff_milli: u32 = 1000 }
                setting { f64 = |p| p.open_backoff_milli as f64 / 1000.0 }
                setters {
                    /// Each consecutive re-open (a failed recovery) multiplies the wait by
                    /// `factor` (≥ 1), up to [`open_max`](Policy::open_max). A successful close
                    /// resets it.
                    fn open_backoff(factor: f64) { open_backoff_milli: factor_to_milli(factor) }
                }
                attr(Spanned<f64> = factor_arg() => open_backoff)
                config { open_backoff: |f| Ok(P.open_backoff(f.float()?)) }
            }
            /// The longest wait `open_backoff` grows to.
            open_max {
                fields { open_max_nanos: u64 = DEFAULT_OPEN_MAX_NANOS }
                setting { Duration = |p| Duration::from_nanos(p.open_max_nanos) }
                setters {
                    /// The longest wait `open_backoff` can grow to, and the cap of an
                    /// [`open_for_fn`](Policy::open_for_fn) function's wait (default 5 minutes,
                    /// never below `open_for`).
                    fn open_max(wait: Duration) { open_max_nanos: duration_to_nanos(wait) }
                }
                attr(Spanned<u64> = duration_arg("5m", MS_TO_DAY) => open_max)
                config { open_max: |f| Ok(P.open_max(f.duration()?)) }
            }
            /// The open-wait function, or `None` when the wait is `open_for` grown by
            /// `open_backoff`.
            open_for_fn {
                fields { open_fn: Option<OpenForFn> = None }
                setting { Option<OpenForFn> = |p| p.open_fn }
                setters {
                    /// The open wait is what `function` returns, given the failed recoveries so
                    /// far and the window that opened the circuit ([`OpenContext`]); it replaces
                    /// `open_for` × `open_backoff` (a policy with a function takes no
                    /// `open_backoff`: the function grows the wait itself). The wait is floored at
                    /// 1 ms and capped at [`open_max`](Policy::open_max) (or `open_for`, when
                    /// larger), then spread by [`open_jitter`](Policy::open_jitter). `open_for`
                    /// stays the default half-open lease, and a later
                    /// [`open_for`](Policy::open_for) replaces the function. The attribute writes
                    /// it `open_for = path::to::function`; configuration cannot name a function
                    /// (it sets `open_for`, which replaces it).
                    ///
                    /// ```
                    /// # use fusebox_policy as fusebox;
                    /// use std::time::Duration;
                    /// use fusebox::{OpenContext, Policy};
                    ///
                    /// fn wait(open: &OpenContext) -> Duration {
                    ///     Duration::from_secs(5) * (open.failed_recoveries() + 1)
                    /// }
                    ///
                    /// const PAYMENT: Policy = Policy::new().open_for_fn(wait).open_max(Duration::from_secs(60));
                    /// assert!(PAYMENT.validate().is_ok());
                    /// assert!(PAYMENT.settings().open_for_fn.is_some());
                    /// ```
                    fn open_for_fn(function: fn(&OpenContext) -> Duration) {
                        open_fn: Some(OpenForFn::new(function))
                    }
                }
                config {}
            }
            /// The spread of the open wait, in percent of it (0: none).
            open_jitter {
                fields { open_jitter: u8 = 0 }
                setting { u8 = |p| p.open_jitter }
                setters {
                    /// Spreads each open wait by up to `percent` (0..=100; 0, the default, is
                    /// off): a wait `w` becomes `w` plus a random part of `w × percent / 100`,
                    /// drawn per opening, so keys and replicas that opened at the same instant
                    /// probe at different instants. Never shorter than the computed wait (fixed,
                    /// backoff or function, with its cap): the longest is `open_max` plus its
                    /// spread.
                    fn open_jitter(percent: u8) { open_jitter: percent }
                }
                attr(Spanned<u8> = percent_arg("20") => open_jitter)
                config { open_jitter: |f| Ok(P.open_jitter(f.int(PERCENT)?)) }
            }
            /// The number of half-open probes.
            half_open {
                fields { half_open: u32 = 1 }
                setting { u32 = |p| p.half_open }
                setters {
                    /// How many probes a half-open circuit admits; all must succeed to close it.
                    fn half_open(probes: u32) { half_open: probes }
                }
                attr(Spanned<u32> = count_arg("1", MAX_HALF_OPEN, "probes") => half_open)
                config { half_open: |f| Ok(P.half_open(f.int(COUNT)?)) }
            }
            /// How long a probe may stay unreported (`open_for` unless set).
            half_open_lease {
                fields { half_open_lease_nanos: u64 = 0 }
                setting { Duration = |p| Duration::from_nanos(p.lease_nanos()) }
                setters {
                    /// How long half-open probes may stay unreported before their slots are
                    /// re-armed (default: `open_for`).
                    fn half_open_lease(lease: Duration) { half_open_lease_nanos: duration_to_nanos(lease) }
                }
                attr(Spanned<u64> = duration_arg("30s", MS_TO_DAY) => half_open_lease)
                config { half_open_lease: |f| Ok(P.half_open_lease(f.duration()?)) }
            }
            /// Probes or progressive recovery.
            recovery {
                fields { recovery: Recovery = Recovery::Probes }
                setting { Recovery = |p| p.recovery }
                setters {
                    /// Probe recovery (the default) or progressive recovery; see [`Recovery`].
                    fn recovery(recovery: Recovery) { recovery: recovery }
                    /// Progressive recovery: see [`Recovery::Progressive`].
                    fn progressive(phases: u32, min_passes: u32) {
                        recovery: Recovery::Progressive { phases, min_passes }
                    }
                }
                attr(RecoveryArg = recovery_arg() => progressive)
                config { recovery: |f| Ok(P.recovery(f.recovery()?)) }
            }
            /// The bulkhead: a fixed limit or an adaptive one on the calls in flight, or `None`
            /// when calls in flight are unlimited.
            max_concurrent {
                fields { max_concurrent: u32 = 0, concurrency_floor: u32 = 0 }
                setting { Option<Concurrency> = |p| Concurrency::of(p.max_concurrent, p.concurrency_floor) }
                setters {
                    /// At most `calls` calls in flight for this key; the next one is rejected at
                    /// once (reason `BulkheadFull`) and not counted as a failure.
                    fn max_concurrent(calls: u32) { max_concurrent: calls, concurrency_floor: 0 }
                    /// A bulkhead whose limit adapts to latency, between `floor` and `ceiling`
                    /// calls in flight (`max_concurrent = "adaptive(floor..ceiling)"` in the
                    /// attribute and in configuration): it grows by one per round of calls whose
                    /// latency holds, and shrinks by a tenth when latency rises or calls fail.
                    /// See [`Concurrency::Adaptive`].
                    ///
                    /// ```
                    /// # use fusebox_policy as fusebox;
                    /// use fusebox::{Concurrency, Policy};
                    ///
                    /// const SEARCH: Policy = Policy::new().adaptive_concurrency(2, 200);
                    /// assert_eq!(
                    ///     SEARCH.settings().max_concurrent,
                    ///     Some(Concurrency::Adaptive { floor: 2, ceiling: 200 })
                    /// );
                    /// ```
                    fn adaptive_concurrency(floor: u32, ceiling: u32) {
                        max_concurrent: ceiling,
                        concurrency_floor: floor.saturating_add(1)
                    }
                }
                attr(ConcurrencyArg = concurrency_arg() => max_concurrent, adaptive_concurrency)
                config { max_concurrent: |f| f.concurrency() }
            }
            /// When an open circuit counts as stuck: failed recoveries in a row (0: off) and the
            /// open span (zero: off).
            stuck_open {
                fields { stuck_reopens: u32 = 3, stuck_open_nanos: u64 = 5 * 60 * 1_000_000_000 }
                setting { (u32, Duration) = |p| (p.stuck_reopens, Duration::from_nanos(p.stuck_open_nanos)) }
                setters {
                    /// When an open circuit counts as stuck: after `failed_recoveries` failed
                    /// recoveries in a row, or once it has been open for `open_longer_than` since
                    /// it opened from closed, whichever comes first. A stuck circuit emits one
                    /// `circuit_stuck_open` WARN event per open episode (an episode ends when the
                    /// circuit closes or an operator changes its state). The time rule is checked
                    /// on recovery attempts (the first call after each open wait), since breakers
                    /// run no timers. `0` (or a zero duration) turns that rule off. Default: 3
                    /// failed recoveries or 5 min. The attribute does not take it: set it on a
                    /// `const` policy named with `policy = …`, or in configuration.
                    fn stuck_open(failed_recoveries: u32, open_longer_than: Duration) {
                        stuck_reopens: failed_recoveries,
                        stuck_open_nanos: duration_to_nanos(open_longer_than)
                    }
                }
                patch {
                    /// The count rule of [`Policy::stuck_open`] alone: failed recoveries in a
                    /// row (0: off).
                    fn stuck_after_recoveries(failed_recoveries: u32) { stuck_reopens: failed_recoveries }
                    /// The time rule of [`Policy::stuck_open`] alone: the open span (zero: off).
                    fn stuck_after(open_longer_than: Duration) {
                        stuck_open_nanos: duration_to_nanos(open_longer_than)
                    }
                }
                config {
                    stuck_after_recoveries: |f| Ok(P.stuck_after_recoveries(f.int(COUNT)?)),
                    stuck_after: |f| Ok(P.stuck_after(f.duration()?))
                }
            }
            /// False when [`Policy::shared`] keeps the key local.
            shared {
                fields { shared: bool = true }
                setting { bool = |p| p.shared }
                setters {
                    /// On a registry shared across replicas (`Registry::share`):
                    /// `false` keeps this key's breaker local to the replica (per-host dynamic
                    /// keys, for instance). Default `true`; on a registry that is not shared it
                    /// changes nothing.
                    fn shared(shared: bool) { shared: shared }
                }
                attr(Spanned<bool> = flag_arg("false") => shared)
                config { shared: |f| Ok(P.shared(f.boolean()?)) }
            }
            /// The replicas whose failures a shared circuit needs before it opens for every
            /// replica (see [`Quorum`]), or `None`: any replica's outcomes can open it.
            quorum {
                fields { quorum: u16 = 0 }
                setting { Option<Quorum> = |p| Quorum::decode(p.quorum) }
                setters {
                    /// On a shared key (`Registry::share`): the circuit opens for every replica
                    /// only when the failures in its window come from at least `replicas`
                    /// replicas (2..=1000). Until then a replica whose own outcomes reach the
                    /// rules opens its own view alone ("open here only", trigger `here_only`)
                    /// and the others keep calling. See [`Quorum`] and the guide's chapter
                    /// `fusebox::guide::sharing`. A key that is not shared ignores it.
                    ///
                    /// ```
                    /// # use fusebox_policy as fusebox;
                    /// use fusebox::{Policy, Quorum};
                    ///
                    /// const PAYMENT: Policy = Policy::new().quorum(2);
                    /// assert_eq!(PAYMENT.settings().quorum, Some(Quorum::Replicas(2)));
                    /// assert_eq!(Policy::new().settings().quorum, None);
                    /// assert!(Policy::new().quorum(1).validate().is_err());
                    /// ```
                    fn quorum(replicas: u32) { quorum: Quorum::encode_replicas(replicas) }
                    /// [`Policy::quorum`] as a share, in percent (1..=100), of the replicas that
                    /// recorded an outcome in the window, rounded up (`quorum = "50%"`).
                    fn quorum_share(percent: u8) { quorum: Quorum::encode_share(percent) }
                    /// No quorum (the default): the shared window's rules open the circuit,
                    /// whichever replicas failed.
                    fn no_quorum() { quorum: 0 }
                }
                attr(QuorumArg = quorum_arg() => quorum, quorum_share)
                config { quorum: |f| f.quorum() }
            }
            /// What an error the classification does not count does (see [`Others`]).
            others {
                fields { others: Others = Others::Ignore }
                setting { Others = |p| p.others }
                setters {
                    /// What an error that the classification does not count as a failure does:
                    /// nothing ([`Others::Ignore`], the default) or a success in the window
                    /// ([`Others::Success`], as Resilience4j, Polly and Sentinel count it). See
                    /// [`Others`].
                    fn others(others: Others) { others: others }
                }
                attr(Spanned<Others> = others_arg() => others)
                config { others: |f| Ok(P.others(f.others()?)) }
            }
            /// The retry budget of the key, or `None` when retries are limited only by `retry`.
            retry_budget {
                fields { retry_budget: Option<RetryBudget> = None }
                setting { Option<RetryBudget> = |p| p.retry_budget }
                setters {
                    /// Limits the key's retries: over the last 10 s
                    /// ([`RETRY_BUDGET_SPAN`](crate::limits::RETRY_BUDGET_SPAN)), retries may be
                    /// `percent` % of the first attempts (0..=1000), plus `floor` retries per
                    /// second whatever the ratio (0..=100000; Finagle's defaults are 20 % and
                    /// 10/s). A retry the budget rejects ends the call with the last attempt's
                    /// outcome. Kept per key and per replica, on the request path (no timer).
                    /// Off by default. See [`RetryBudget`].
                    ///
                    /// ```
                    /// # use fusebox_policy as fusebox;
                    /// use fusebox::{Policy, RetryBudget};
                    ///
                    /// const PAYMENT: Policy = Policy::new().retry_budget(20, 10);
                    /// assert_eq!(PAYMENT.settings().retry_budget, Some(RetryBudget { percent: 20, floor: 10 }));
                    /// assert_eq!(Policy::new().settings().retry_budget, None);
                    /// ```
                    fn retry_budget(percent: u16, floor: u32) {
                        retry_budget: Some(RetryBudget { percent, floor })
                    }
                    /// No retry budget (the default): retries are limited only by `retry`.
                    fn no_retry_budget() { retry_budget: None }
                }
                attr(Spanned<RetryBudget> = retry_budget_arg() => retry_budget)
                config { retry_budget: |f| f.retry_budget() }
            }
            /// The hedges a key's hedged calls may add, in percent of its calls.
            hedge_budget {
                fields { hedge_budget: u8 = $crate::limits::DEFAULT_HEDGE_BUDGET }
                setting { u8 = |p| p.hedge_budget }
                setters {
                    /// Limits the hedges of the key's hedged calls (the attribute's `hedge`, the
                    /// reqwest middleware's): over the last 10 s, at most `percent` (1..=100) more
                    /// calls than the key's hedged calls, with no floor. The default, 10 %, is
                    /// Finagle's budget for backup requests in spirit: a hedge is for the tail,
                    /// never a second copy of the load. Keys without hedged calls keep none.
                    ///
                    /// ```
                    /// # use fusebox_policy as fusebox;
                    /// use fusebox::Policy;
                    ///
                    /// const SEARCH: Policy = Policy::new().hedge_budget(5);
                    /// assert_eq!(SEARCH.settings().hedge_budget, 5);
                    /// assert_eq!(Policy::new().settings().hedge_budget, 10);
                    /// assert!(Policy::new().hedge_budget(101).validate().is_err());
                    /// ```
                    fn hedge_budget(percent: u8) { hedge_budget: percent }
                }
                attr(Spanned<u8> = percent_arg("10") => hedge_budget)
                config { hedge_budget: |f| Ok(P.hedge_budget(f.int(PERCENT)?)) }
            }
            /// The group the key is a member of, or `None` when it is judged alone.
            group {
                fields { group: Option<&'static str> = None }
                setting { Option<&'static str> = |p| p.group }
                setters {
                    /// Makes the key a member of the group `name` (per-host dynamic keys of one
                    /// cluster, say): each member is still its own breaker with its own rules,
                    /// and the group adds outlier ejection relative to the members (success rate
                    /// below the group's mean, failure percentage) and a cap on how many members
                    /// may be open at once (the panic threshold). See the guide's chapter
                    /// `fusebox::guide::groups`. A name is 1 to 64 bytes of ASCII letters,
                    /// digits, `-`, `_`, `.` or `:`.
                    ///
                    /// ```
                    /// # use fusebox_policy as fusebox;
                    /// use fusebox::Policy;
                    ///
                    /// const SEARCH_HOST: Policy = Policy::new().group("search");
                    /// assert_eq!(SEARCH_HOST.settings().group, Some("search"));
                    /// assert_eq!(Policy::new().settings().group, None);
                    /// ```
                    fn group(name: &'static str) { group: Some(name) }
                    /// No group (the default): the key is judged alone.
                    fn no_group() { group: None }
                }
                attr(Spanned<&'static str> = group_arg() => group)
                config { group: |f| f.group() }
            }
            /// The shadow policies judging the key's outcomes beside its own (their text), or
            /// `None`.
            shadow {
                fields { shadow: Option<&'static str> = None }
                setting { Option<&'static str> = |p| p.shadow }
                setters {
                    /// Candidate policies that judge the same live outcomes as this one without
                    /// acting: each keeps its own window and state machine and reports when it
                    /// would have opened, for how long, and the calls it would have rejected or
                    /// let through (see the guide's chapter `fusebox::guide::shadows`). `spec` is
                    /// one policy text (`"window = 50, failure_rate = 30"`, named `shadow`) or
                    /// several, named: `"tight: window = 20; loose: window = 200"`; validation
                    /// reads it (`text::shadows_of_text`).
                    ///
                    /// ```
                    /// # use fusebox_policy as fusebox;
                    /// use fusebox::Policy;
                    ///
                    /// const PAYMENT: Policy = Policy::new().shadow("tight: window = 20, failure_rate = 30");
                    /// assert!(PAYMENT.validate().is_ok());
                    /// assert!(Policy::new().shadow("window = 0").validate().is_err());
                    /// ```
                    fn shadow(spec: &'static str) { shadow: Some(spec) }
                    /// No shadow policy (the default).
                    fn no_shadow() { shadow: None }
                }
                attr(Spanned<&'static str> = shadow_arg() => shadow)
                config { shadow: |f| f.shadow() }
            }
        }
    };
}

/// The views of the knob table that [`with_knobs!`](crate::with_knobs) hands out. Not a public
/// API.
#[doc(hidden)]
#[macro_export]
macro_rules! __knob_view {
    ([@arguments $generate:ident] $(
        $(#[$doc:meta])*
        $name:ident {
            fields $fields:tt
            setting $setting:tt
            setters $setters:tt
            $(patch $patch:tt)?
            $(attr $attr:tt)?
            config $config:tt
        }
    )*) => {
        $generate! { $($($name $attr;)?)* }
    };
    ([@config $generate:ident] $(
        $(#[$doc:meta])*
        $name:ident {
            fields $fields:tt
            setting $setting:tt
            setters $setters:tt
            $(patch $patch:tt)?
            $(attr $attr:tt)?
            config { $($field:ident: $read:expr),* }
        }
    )*) => {
        $generate! { $($($field: $read,)*)* }
    };
    ([$generate:ident] $($rows:tt)*) => {
        $generate! { $($rows)* }
    };
}
